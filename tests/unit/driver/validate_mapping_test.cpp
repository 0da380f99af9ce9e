// Published-runs CSV reading and the mapping of a row to model, cluster and plan (sim/driver/validate.h).
#include <catch2/catch.hpp>

#include <cstdint>
#include <map>
#include <string>

#include "sim/base/diagnostic.h"
#include "sim/config/names.h"
#include "sim/driver/csv.h"
#include "sim/driver/validate.h"
#include "tests/unit/driver/published_rows.h"

using namespace ts;
using driver::PublishedRun;
using test::runs_csv;

namespace {

std::map<std::string, std::string> gpt_row() {
  return {{"run_id", "7"},       {"source", "Test et al. (arXiv 0000.0000)"},
          {"model", "GPT 1.7B"}, {"n_layers", "24"},
          {"hidden", "2304"},    {"n_heads", "24"},
          {"vocab", "51200"},    {"seq_len", "2048"},
          {"global_batch", "512"}, {"micro_batch", "16"},
          {"tp", "1"},           {"pp", "1"},
          {"n_gpus", "32"},      {"gpu", "A100-SXM4-80GB"},
          {"recompute", "full"}, {"tflops_per_gpu", "137"},
          {"tflops_kind", "hardware"}, {"framework", "Megatron-LM"}};
}

PublishedRun one(const test::Row& row) { return test::parse_row(row); }

std::vector<Diagnostic> errors_of(const std::string& text) {
  try {
    driver::parse_published_runs(text, "bad.csv");
  } catch (const InputError& e) {
    return e.diagnostics();
  }
  FAIL("no InputError");
  return {};
}

}  // namespace

TEST_CASE("published runs: every column is read, extra columns ignored, numbers with suffixes") {
  auto row = gpt_row();
  row["max_seq_len"] = "60k";
  row["mfu_pct"] = "44%";
  row["tokens_per_s"] = "1.31M";
  row["notes"] = "quoted, with \"quotes\"";
  row["extra_column"] = "ignored";
  const auto r = one(row);
  CHECK(r.run_id == "7");
  CHECK(r.line == 2);
  CHECK(r.n_layers == 24);
  CHECK(r.hidden == 2304);
  CHECK_FALSE(r.n_kv_heads.has_value());
  CHECK(r.max_seq_len == 60000);
  CHECK(r.mfu_pct == Approx(44));
  CHECK(r.tokens_per_s == Approx(1.31e6));
  CHECK(r.notes == "quoted, with \"quotes\"");
}

TEST_CASE("published runs: a missing column or a bad value is an error naming it, the row and line") {
  // Missing column.
  auto errs = errors_of(runs_csv({gpt_row()}, "hfu_pct"));
  REQUIRE_FALSE(errs.empty());
  CHECK(errs[0].field == "hfu_pct");
  CHECK_THAT(errs[0].message, Catch::Contains("missing"));

  // Not a number, not an integer: both reported, each with its row.
  auto row = gpt_row();
  row["tp"] = "eight";
  auto row2 = gpt_row();
  row2["run_id"] = "8";
  row2["n_layers"] = "24.5";
  errs = errors_of(runs_csv({row, row2}));
  REQUIRE(errs.size() == 2);
  CHECK(errs[0].field == "tp");
  CHECK(errs[0].line == 2);
  CHECK_THAT(errs[0].message, Catch::Contains("run_id 7") && Catch::Contains("'eight'"));
  CHECK(errs[1].field == "n_layers");
  CHECK(errs[1].line == 3);
  CHECK_THAT(errs[1].message, Catch::Contains("run_id 8") && Catch::Contains("integer"));

  // Wrong number of fields.
  std::string text = runs_csv({gpt_row()});
  text += "9,only,three\n";
  errs = errors_of(text);
  REQUIRE(errs.size() == 1);
  CHECK(errs[0].line == 3);
  CHECK_THAT(errs[0].message, Catch::Contains("fields"));
}

TEST_CASE("mapping: a Megatron GPT row becomes a GPT model on DGX A100 with dp derived") {
  const auto m = driver::map_run(one(gpt_row()));
  REQUIRE(m.scenario.has_value());
  const auto& sc = *m.scenario;
  CHECK(sc.model.activation == ir::Activation::kGelu);
  CHECK(sc.model.position == ir::Position::kLearned);
  CHECK(sc.model.max_seq_len == 2048);
  CHECK(sc.model.ffn_hidden == 4 * 2304);  // empty: 4h
  CHECK(sc.model.num_kv_heads == 24);      // empty: MHA
  CHECK(sc.cluster.cluster.name == "dgx-a100");
  CHECK(sc.num_gpus == 32);
  CHECK(sc.plan.dp == 32);
  CHECK(sc.plan.recompute == parallel::Recompute::kFull);
  CHECK(sc.plan.micro_batch == 16);
  CHECK(m.micro_batch_given);
  CHECK(m.recompute_given);
}

TEST_CASE("mapping: Llama-style layers from the name, GQA or a narrow MLP, family defaults") {
  auto row = gpt_row();
  row["model"] = "Llama 3 8B";
  row["n_layers"] = "32";
  row["hidden"] = "4096";
  row["n_heads"] = "32";
  row["n_kv_heads"] = "8";
  row["vocab"] = "";
  row["ffn_hidden"] = "";
  auto m = driver::map_run(one(row));
  REQUIRE(m.scenario.has_value());
  CHECK(m.scenario->model.activation == ir::Activation::kSwiglu);
  CHECK(m.scenario->model.norm == ir::Norm::kRmsNorm);
  CHECK(m.scenario->model.position == ir::Position::kRope);
  CHECK_FALSE(m.scenario->model.tied_embeddings);
  CHECK(m.scenario->model.vocab == 128256);
  // Meta's released width for Llama 3 8B (1.3 · 8h/3 rounded up to 1024), not the 8h/3 rule.
  CHECK(m.scenario->model.ffn_hidden == 14336);
  // Released widths by release and hidden size; the 8h/3 rule (rounded up to 256) for Llama 2
  // 7B and for Llama 1, whose sizes are not releases ("LLaMA 30B").
  struct Released {
    const char* model;
    const char* hidden;
    std::int64_t ffn_hidden;
    std::int64_t vocab;
  };
  for (const auto& k : {Released{"Llama-3.1-405B", "16384", 53248, 128256}, Released{"LLAMA2-70B", "8192", 28672, 32000},
                        Released{"Llama 2 7B", "4096", 11008, 32000}, Released{"LLaMA 30B", "6656", 17920, 32000}}) {
    row["model"] = k.model;
    row["hidden"] = k.hidden;
    const auto released = driver::map_run(one(row));
    INFO(k.model);
    REQUIRE(released.scenario.has_value());
    CHECK(released.scenario->model.ffn_hidden == k.ffn_hidden);
    CHECK(released.scenario->model.vocab == k.vocab);
  }
  row["hidden"] = "4096";

  row["model"] = "custom-7b";
  row["n_kv_heads"] = "";
  row["ffn_hidden"] = "11008";  // 2.69h: SwiGLU-sized
  m = driver::map_run(one(row));
  REQUIRE(m.scenario.has_value());
  CHECK(m.scenario->model.activation == ir::Activation::kSwiglu);
  CHECK(m.scenario->model.vocab == 32000);

  row["model"] = "GPT3-2.7B";
  row["hidden"] = "2560";
  row["n_heads"] = "";  // head dim 128
  row["ffn_hidden"] = "10240";
  m = driver::map_run(one(row));
  REQUIRE(m.scenario.has_value());
  CHECK(m.scenario->model.activation == ir::Activation::kGelu);
  CHECK(m.scenario->model.num_heads == 20);
  CHECK(m.scenario->model.vocab == 50257);

  // GQA in a model of no known family makes the layers Llama-style, but the printed size
  // decides the MLP: Nemotron-4 340B (96 layers, h 18432, 96 heads, 8 KV heads, ffn 73728,
  // vocab 256000) has two MLP matrices (squared ReLU), 341 B parameters; gated it would be 462 B.
  row["model"] = "Nemotron-340B";
  row["n_layers"] = "96";
  row["hidden"] = "18432";
  row["n_heads"] = "96";
  row["n_kv_heads"] = "8";
  row["ffn_hidden"] = "73728";
  row["vocab"] = "256000";
  row["n_params_b"] = "340";
  m = driver::map_run(one(row));
  REQUIRE(m.scenario.has_value());
  CHECK(m.scenario->model.activation == ir::Activation::kGelu);
  CHECK(m.scenario->model.position == ir::Position::kRope);  // the rest stays Llama-style
  row["n_params_b"] = "462";
  CHECK(driver::map_run(one(row)).scenario->model.activation == ir::Activation::kSwiglu);
  row["n_params_b"] = "400";  // matches neither: the shape's reading stands
  CHECK(driver::map_run(one(row)).scenario->model.activation == ir::Activation::kSwiglu);
}

TEST_CASE("mapping: the cluster follows the gpu and interconnect columns") {
  auto row = gpt_row();
  const auto cluster_of = [&](const std::string& gpu, const std::string& ic) {
    row["gpu"] = gpu;
    row["interconnect"] = ic;
    const auto m = driver::map_run(one(row));
    REQUIRE(m.scenario.has_value());
    return m.scenario->cluster;
  };
  // A wattage is not a memory size.
  CHECK(cluster_of("A100-SXM4-80GB (400W)", "").gpu.name == "A100-SXM4-80GB");
  CHECK(cluster_of("A100-40GB", "").gpu.name == "A100-SXM4-40GB");
  CHECK(cluster_of("H200", "").gpu.name == "H200-SXM-141GB");
  // The 94 GB H100: the HBM2e part (H100 compute, 2.41 TB/s) with 94 GiB.
  auto h94 = cluster_of("H100 SXM5 94GB HBM2e", "");
  CHECK(h94.gpu.name == "H100-SXM5-96GB");
  CHECK(h94.gpu.memory_bandwidth.gbytes_per_s() == Approx(2410));
  CHECK(h94.gpu.memory_capacity == Bytes::gib(94));
  // Empty interconnect: the DGX-class node.
  auto dgx = cluster_of("H100-80GB", "");
  CHECK(dgx.cluster.name == "dgx-h100");
  CHECK(dgx.cluster.host.nics_per_host == 8);
  CHECK(dgx.cluster.host.nic_bandwidth.bytes_per_s() == Approx(400e9 / 8));
  // Count × rate, per-node aggregate, IB generation names, GPUs per node.
  auto a = cluster_of("A100-80GB", "8x200Gb/s HDR InfiniBand HCAs per node");
  CHECK(a.cluster.name == "dgx-a100");  // what dgx-a100 already is
  auto roce = cluster_of("A100-80GB", "1600 Gbps RoCE per node (node-node)");
  CHECK(roce.cluster.host.nic_bandwidth.bytes_per_s() == Approx(200e9 / 8));
  // InfiniBand routes adaptively (the zoo default); RoCE by static ECMP hashing.
  CHECK(a.cluster.fabric.adaptive_routing);
  CHECK_FALSE(roce.cluster.fabric.adaptive_routing);
  CHECK(roce.cluster.name != a.cluster.name);
  auto t4 = cluster_of("H100 SXM5 94GB", "4 GPUs per node, 4x NDR200 InfiniBand");
  CHECK(t4.cluster.host.gpus_per_host == 4);
  CHECK(t4.cluster.host.nics_per_host == 4);
  CHECK(t4.cluster.host.nic_bandwidth.bytes_per_s() == Approx(200e9 / 8));
  CHECK(t4.cluster.name != "dgx-h100");  // a variant has its own name (network model cache key)
  auto gcp = cluster_of("H100-80GB", "4x200 Gbps per node");
  CHECK(gcp.cluster.host.nics_per_host == 4);
  CHECK(gcp.cluster.host.nic_bandwidth.bytes_per_s() == Approx(200e9 / 8));

  // Blackwell: NVL72 racks (their "NVL" is the 72-GPU NVLink domain, not a PCIe card) and
  // 8-GPU nodes; a server's GPU count changes the host of a rack, never its domain.
  auto gb200 = cluster_of("GB200", "GB200 NVL72, 4 x 400 Gb/s InfiniBand per compute tray");
  CHECK(gb200.gpu.name == "GB200-NVL-186GB");
  CHECK(gb200.cluster.scale_up.gpus_per_domain == 72);
  CHECK(gb200.cluster.host.gpus_per_host == 4);
  CHECK(gb200.cluster.host.nics_per_host == 4);
  CHECK(cluster_of("GB300 NVL72", "").gpu.name == "GB300-NVL-279GB");
  CHECK(cluster_of("B200", "").cluster.name == "dgx-b200");
  CHECK(cluster_of("NVIDIA B300", "").cluster.name == "dgx-b300");
  auto gb8 = cluster_of("GB200", "8 GPUs per node");
  CHECK(gb8.cluster.scale_up.gpus_per_domain == 72);
  CHECK(gb8.cluster.host.gpus_per_host == 8);

  row["gpu"] = "MI300X";
  const auto m = driver::map_run(one(row));
  CHECK_FALSE(m.scenario.has_value());
  CHECK_THAT(m.skip_reason, Catch::Contains("no cluster model for GPU 'MI300X'"));
}

TEST_CASE("mapping: jobs on NVL72 racks are placed in Slurm segments") {
  auto row = gpt_row();
  row["gpu"] = "GB200";
  row["interconnect"] = "GB200 NVL72, 4 x 400 Gb/s InfiniBand per compute tray";
  const auto placed = [&](const std::string& gpus) {
    row["n_gpus"] = gpus;
    const auto m = driver::map_run(one(row));
    REQUIRE(m.scenario.has_value());
    return m.scenario->cluster.cluster.scale_up.placed_per_domain();
  };
  CHECK(placed("64") == 72);    // one rack: the rack
  CHECK(placed("256") == 64);   // 64 trays: 16 per rack
  CHECK(placed("144") == 72);   // 36 trays: 18 per rack
  CHECK(placed("80") == 40);    // 20 trays: 10 per rack
  row["gpu"] = "H100";          // 8-GPU servers: each its own domain, nothing to place
  row["interconnect"] = "";
  CHECK(placed("256") == 8);
}

TEST_CASE("mapping: NVIDIA MLPerf rows by their round's implementation") {
  auto row = gpt_row();
  row["framework"] = "NeMo / Megatron-Core (NVIDIA MLPerf submission)";
  row["pp"] = "2";
  const auto plan_of = [&](const std::string& source) {
    row["source"] = source;
    const auto m = driver::map_run(one(row));
    REQUIRE(m.scenario.has_value());
    return m.scenario->plan;
  };
  const auto v51 = plan_of("MLPerf Training v5.1 result logs (mlcommons/training_results_v5.1)");
  CHECK(config::format_order(v51.order) == "tp,cp,pp,dp");
  CHECK(v51.grad_reduce == parallel::GradReduce::kBf16);
  const auto v50 = plan_of("MLPerf Training v5.0 result logs (mlcommons/training_results_v5.0)");
  CHECK(config::format_order(v50.order) == "tp,cp,dp,pp");
  CHECK(v50.grad_reduce == parallel::GradReduce::kBf16);
  row["framework"] = "NeMo / Megatron-Core";  // not the MLPerf implementation
  CHECK(plan_of("MLPerf Training v5.1 result logs").grad_reduce == parallel::GradReduce::kFp32);
  // Megatron-Bridge's performance recipes reduce in bf16 unless a recipe sets fp32 back.
  row["framework"] = "Megatron-Bridge / Megatron-Core";
  const std::string bridge = "Megatron-Bridge performance summary (docs/performance-summary.md)";
  CHECK(plan_of(bridge).grad_reduce == parallel::GradReduce::kBf16);
  row["notes"] = "Recipe KIMI_K2: grad_reduce_in_fp32 True";
  CHECK(plan_of(bridge).grad_reduce == parallel::GradReduce::kFp32);
}

TEST_CASE("mapping: sharding, sequence parallelism, precision and missing batch fields") {
  auto row = gpt_row();
  const auto plan_of = [&] {
    const auto m = driver::map_run(one(row));
    REQUIRE(m.scenario.has_value());
    return m;
  };
  row["zero_fsdp"] = "FSDP FULL_SHARD (ZeRO-3-like)";
  CHECK(plan_of().scenario->plan.zero_stage == 3);
  row["zero_fsdp"] = "FSDP SHARD_GRAD_OP (ZeRO-2-like)";
  CHECK(plan_of().scenario->plan.zero_stage == 2);
  row["zero_fsdp"] = "distributed optimizer (implied by --overlap-param-gather)";
  CHECK(plan_of().scenario->plan.zero_stage == 1);
  row["zero_fsdp"] = "none (DDP)";
  CHECK(plan_of().scenario->plan.zero_stage == 0);
  row["zero_fsdp"] = "";
  row["framework"] = "Composer + PyTorch FSDP";
  CHECK(plan_of().scenario->plan.zero_stage == 3);

  // Sequence parallelism: stated, or on for Megatron-Core with TP > 1; never with TP = 1.
  row["tp"] = "8";
  row["framework"] = "Megatron-Core r0.8.0";
  CHECK(plan_of().scenario->plan.sequence_parallel);
  row["framework"] = "Megatron-LM";
  CHECK_FALSE(plan_of().scenario->plan.sequence_parallel);
  row["sequence_parallel"] = "yes";
  CHECK(plan_of().scenario->plan.sequence_parallel);
  row["tp"] = "1";
  CHECK_FALSE(plan_of().scenario->plan.sequence_parallel);

  row["precision"] = "fp8 (amp_fp8, TransformerEngine)";
  CHECK(plan_of().scenario->plan.dtype == ir::Dtype::kFp8);
  // FP8 weights: cast once per step where Megatron drives Transformer Engine, at every
  // micro-batch elsewhere.
  CHECK(plan_of().scenario->plan.fp8_weight_cache);  // Megatron-LM
  row["framework"] = "NeMo 24.05";
  CHECK(plan_of().scenario->plan.fp8_weight_cache);
  row["framework"] = "Composer + PyTorch FSDP";
  CHECK_FALSE(plan_of().scenario->plan.fp8_weight_cache);
  row["framework"] = "Megatron-LM";
  row["precision"] = "16-bit mixed (fp16/bf16 not stated)";
  CHECK(plan_of().scenario->plan.dtype == ir::Dtype::kBf16);

  // Gradients reduced in bf16 by Composer's PURE mode and fms-fsdp; in fp32 otherwise.
  CHECK(plan_of().scenario->plan.grad_reduce == parallel::GradReduce::kFp32);
  row["framework"] = "Composer + PyTorch FSDP";
  row["precision"] = "bf16 (torch autocast AMP)";
  CHECK(plan_of().scenario->plan.grad_reduce == parallel::GradReduce::kFp32);
  row["precision"] = "bf16 (Composer 'PURE' mixed-precision mode)";
  CHECK(plan_of().scenario->plan.grad_reduce == parallel::GradReduce::kBf16);
  row["framework"] = "PyTorch FSDP (IBM fms-fsdp / Foundation Model Stack)";
  row["precision"] = "mixed precision bf16";
  CHECK(plan_of().scenario->plan.grad_reduce == parallel::GradReduce::kBf16);
  // DeepSpeed's ZeRO optimizers communicate in the training precision; Megatron-DeepSpeed keeps
  // fp32 gradients.
  row["framework"] = "DeepSpeed 0.11 (ZeRO-DP)";
  row["zero_fsdp"] = "ZeRO stage 1";
  CHECK(plan_of().scenario->plan.grad_reduce == parallel::GradReduce::kBf16);
  row["framework"] = "Megatron-DeepSpeed";
  CHECK(plan_of().scenario->plan.grad_reduce == parallel::GradReduce::kFp32);
  // A fork's profile over its base's (builds_on): GPT-NeoX names DeepSpeed too.
  row["framework"] = "GPT-NeoX (Megatron + DeepSpeed)";
  CHECK(plan_of().scenario->plan.grad_reduce == parallel::GradReduce::kFp32);
  // DeepSpeed without ZeRO reduces fp32 gradients (grad_reduce_from_zero_stage 1).
  row["framework"] = "DeepSpeed 0.11";
  row["zero_fsdp"] = "none";
  CHECK(plan_of().scenario->plan.grad_reduce == parallel::GradReduce::kFp32);
  row["zero_fsdp"] = "";
  row["framework"] = "Megatron-LM";

  // Micro-batch from grad_accum; else left to the search.
  row["micro_batch"] = "";
  row["grad_accum"] = "2";
  auto m = plan_of();
  CHECK(m.micro_batch_given);
  CHECK(m.scenario->plan.micro_batch == 512 / (32 * 2));
  row["grad_accum"] = "";
  m = plan_of();
  CHECK_FALSE(m.micro_batch_given);
  row["recompute"] = "";
  CHECK_FALSE(plan_of().recompute_given);

  // No global batch: GPT-3's batch for the size (1M tokens for 1-5B parameters), per replica a
  // power of two: 1M / 2048 / 32 = 15.3 -> 16 sequences per replica.
  row["global_batch"] = "";
  m = plan_of();
  CHECK(m.scenario->plan.global_batch == 16 * 32);

  // n_gpus not a multiple of tp·pp·cp.
  row["tp"] = "3";
  const auto bad = driver::map_run(one(row));
  CHECK_FALSE(bad.scenario.has_value());
  CHECK_THAT(bad.skip_reason, Catch::Contains("not a multiple of tp·pp·cp"));
}

TEST_CASE("short_source and parallelism_kind group rows for the summary") {
  CHECK(driver::short_source("Narayanan et al. SC'21 (arXiv 2104.04473) 'Efficient'") == "Narayanan et al. SC'21");
  CHECK(driver::short_source("Dao-AILab/flash-attention training/README.md") ==
        "Dao-AILab/flash-attention training/README.md");
  parallel::ParallelPlan p;
  CHECK(driver::parallelism_kind(p) == "dp-only");
  p.zero_stage = 3;
  CHECK(driver::parallelism_kind(p) == "fsdp-only");
  p.pp = 2;
  CHECK(driver::parallelism_kind(p) == "tp+pp");
  p.cp = 2;
  CHECK(driver::parallelism_kind(p) == "with-cp");
}
