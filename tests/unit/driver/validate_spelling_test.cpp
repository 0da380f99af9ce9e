// The spellings other sources use for the columns of a published-runs CSV (GPU, interconnect,
// framework, ZeRO/FSDP, precision, recompute, numbers) map to the same scenario fields
// (sim/driver/validate.cpp, docs/validation-rules.md), and tests/validation/heldout-style.csv, rows from
// sources outside the public set, is compared or listed row by row.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/diagnostic.h"
#include "sim/config/names.h"
#include "sim/driver/csv.h"
#include "sim/driver/validate.h"
#include "sim/driver/validate_rules.h"
#include "sim/driver/validate_text.h"
#include "tests/unit/config/config_test_util.h"
#include "tests/unit/driver/published_rows.h"

using namespace ts;
using driver::PublishedRun;

namespace {

using config::test::source_dir;

PublishedRun parse_one(const test::Row& row) { return test::parse_row(row); }

// A GPT row that maps on its own: 24 layers, hidden 2048, TP 1, 64 GPUs of an A100 node.
std::map<std::string, std::string> base_row() {
  return {{"run_id", "s1"},         {"model", "GPT 1.3B"},     {"n_layers", "24"},
          {"hidden", "2048"},       {"n_heads", "16"},         {"vocab", "50257"},
          {"seq_len", "2048"},      {"global_batch", "512"},   {"micro_batch", "4"},
          {"tp", "1"},              {"pp", "1"},               {"n_gpus", "64"},
          {"gpu", "A100-SXM4-80GB"}, {"recompute", "none"},    {"framework", "PyTorch"},
          {"tokens_per_s", "1000000"}};
}

driver::RowMapping map_row(const std::map<std::string, std::string>& row) {
  const auto m = driver::map_run(parse_one(row));
  INFO("skip reason: " << m.skip_reason);
  REQUIRE(m.scenario.has_value());
  return m;
}

config::Scenario scenario_of(const std::map<std::string, std::string>& row) { return *map_row(row).scenario; }

}  // namespace

TEST_CASE("spelling: numbers with thousands separators, qualifiers, remarks, units and binary K lengths") {
  auto row = base_row();
  row["tokens_per_s_per_gpu"] = "12,036";
  row["tflops_per_gpu"] = "up to 147";
  row["mfu_pct"] = "\u2248 43%";
  row["hfu_pct"] = "about 57.8";
  row["n_params_b"] = "175B";
  row["peak_mem"] = "82.4 GiB";
  row["seq_len"] = "128K";
  row["max_seq_len"] = "60k";
  row["global_batch"] = "512 (derived)";
  row["vpp"] = "\u2014";
  row["cp"] = "n/a";
  row["grad_accum"] = "-";
  auto r = parse_one(row);
  CHECK(r.global_batch == 512);
  CHECK_FALSE(r.vpp.has_value());
  CHECK_FALSE(r.cp.has_value());
  CHECK_FALSE(r.grad_accum.has_value());
  CHECK(r.tokens_per_s_per_gpu == Approx(12036));
  CHECK(r.tflops_per_gpu == Approx(147));
  CHECK(r.mfu_pct == Approx(43));
  CHECK(r.hfu_pct == Approx(57.8));
  CHECK(r.n_params_b == Approx(175));
  CHECK(r.peak_mem == Approx(82.4));
  CHECK(r.peak_mem_unit == "GiB");
  // A context length in K is binary (128K = 131072 tokens); other columns keep k = 1000.
  CHECK(r.seq_len == 131072);
  CHECK(r.max_seq_len == 60000);
  row["seq_len"] = "8k";
  row["peak_mem"] = "67";
  row["peak_mem_unit"] = "GB";
  r = parse_one(row);
  CHECK(r.seq_len == 8192);
  CHECK(r.peak_mem_unit == "GB");

  // Still an error: words, a comma that is not a thousands separator.
  row["tp"] = "eight";
  row["dp"] = "1,5";
  try {
    driver::parse_published_runs(test::runs_csv({row}), "bad.csv");
    FAIL("no InputError");
  } catch (const InputError& e) {
    REQUIRE(e.diagnostics().size() == 2);
    CHECK(e.diagnostics()[0].field == "tp");
    CHECK(e.diagnostics()[1].field == "dp");
  }
}

TEST_CASE("spelling: GPU names map to the cluster of that silicon") {
  auto row = base_row();
  const auto gpu = [&](const std::string& name) {
    row["gpu"] = name;
    return scenario_of(row).cluster;
  };
  CHECK(gpu("NVIDIA A100-SXM4-80GB").gpu.name == "A100-SXM4-80GB");
  CHECK(gpu("A100 80GB").gpu.name == "A100-SXM4-80GB");
  CHECK(gpu("80GB A100").gpu.name == "A100-SXM4-80GB");
  CHECK(gpu("NVIDIA A100 40GB").gpu.name == "A100-SXM4-40GB");
  CHECK(gpu("A100 40GiB").gpu.name == "A100-SXM4-40GB");
  CHECK(gpu("A100-SXM4-40G").gpu.name == "A100-SXM4-40GB");
  CHECK(gpu("DGX-H100").gpu.name == "H100-SXM5-80GB");
  const auto hbm3 = gpu("H100 80GB HBM3 (700W TDP)");
  CHECK(hbm3.gpu.name == "H100-SXM5-80GB");
  CHECK(hbm3.cluster.name == "dgx-h100");
  const auto h96 = gpu("H100 96GB HBM2e (500W power limit)");
  CHECK(h96.gpu.name == "H100-SXM5-96GB");
  CHECK(h96.cluster.name == "dgx-h100-96gb");
  CHECK(h96.gpu.memory_capacity == Bytes::gib(96));
  CHECK(h96.gpu.memory_bandwidth.bytes_per_s() < hbm3.gpu.memory_bandwidth.bytes_per_s());

  // A800/H800: A100/H100 compute with NVLink at 400 GB/s (200 GB/s per direction).
  const auto h100 = gpu("H100 SXM");
  const auto h800 = gpu("NVIDIA H800 SXM5 80GB");
  CHECK(h800.gpu.name == "H100-SXM5-80GB");
  CHECK(h800.cluster.scale_up.nvlink_bandwidth.bytes_per_s() == Approx(200e9));
  CHECK(h800.cluster.scale_up.nvlink_bandwidth.bytes_per_s() <
        h100.cluster.scale_up.nvlink_bandwidth.bytes_per_s());
  CHECK_THAT(h800.cluster.name, Catch::Contains("NVLink 400GB/s"));
  const auto a800 = gpu("A800-SXM4-80GB");
  CHECK(a800.gpu.name == "A100-SXM4-80GB");
  CHECK(a800.cluster.scale_up.nvlink_bandwidth.bytes_per_s() == Approx(200e9));

  // A column naming only the architecture: its SXM training part.
  CHECK(gpu("NVIDIA Ampere GPUs").gpu.name == "A100-SXM4-80GB");
  CHECK(gpu("Hopper GPUs").gpu.name == "H100-SXM5-80GB");
  CHECK(gpu("NVIDIA Blackwell GPUs").gpu.name == "B200-SXM-180GB");
  CHECK(gpu("Blackwell Ultra").gpu.name == "B300-SXM-288GB");
  CHECK(gpu("Blackwell GB200 NVL72").gpu.name == "GB200-NVL-186GB");  // a named part wins

  // PCIe and NVL cards (H100 NVL, H200 NVL) and other accelerators have no cluster model.
  for (const char* other : {"H100 NVL", "H200 NVL", "A100 PCIe 40GB", "TPU v4", "V100-SXM3-32GB", "MI250X"}) {
    row["gpu"] = other;
    const auto m = driver::map_run(parse_one(row));
    INFO(other);
    CHECK_FALSE(m.scenario.has_value());
    CHECK_THAT(m.skip_reason, Catch::Contains("no cluster model for GPU"));
  }
}

TEST_CASE("spelling: interconnect texts give NICs per node, their rate and GPUs per node") {
  auto row = base_row();
  const auto node_of = [&](const std::string& gpu, const std::string& ic) {
    row["gpu"] = gpu;
    row["interconnect"] = ic;
    return scenario_of(row).cluster;
  };
  const auto gbits = [](const config::Cluster& c) {
    return c.cluster.host.nic_bandwidth.bytes_per_s() * 8e-9;
  };

  // GPU cell, interconnect cell, then what the node gets: GPUs per node, NICs per node and their
  // line rate (Gb/s), 0 where the row's default node is expected; whether routing is adaptive.
  struct Case {
    const char* why;
    const char* gpu;
    const char* interconnect;
    std::int32_t gpus_per_node;
    std::int32_t nics;
    double gbits;
    bool adaptive;
  };
  const Case cases[] = {
      {"the public set's spelling", "A100-80GB", "8x200Gb/s HDR InfiniBand HCAs per node", 8, 8, 200, true},
      {"the digit ending ConnectX-6 is not a count; the HCAs are", "A100-SXM4-40GB",
       "4x Mellanox ConnectX-6 HDR 200Gb/s HCAs per node, GPUDirect RDMA", 8, 4, 200, true},
      {"links counted, rate each", "A100 80GB", "Omni-Path (OPA), 4 links per node, 100 Gbps each", 8, 4, 100, true},
      {"HCAs counted, rate in brackets", "A100 80GB", "HDR InfiniBand, 8 HCAs per node (200 Gb/s each)", 8, 8, 200,
       true},
      {"InfiniBand generation with its rate in the name", "H100 80GB", "8x NDR400 InfiniBand", 8, 8, 400, true},
      {"HDR100", "A100 80GB", "InfiniBand HDR100", 8, 0, 100, true},
      {"AWS EFA is quoted per instance (p4d: 400 Gbps over 8 GPUs)", "NVIDIA A100 40GB",
       "AWS p4d.24xlarge, Amazon EFA 400 Gbps", 8, 8, 50, true},
      {"AWS EFA per instance (p5: 3,200 Gbps)", "H100 80GB", "EFAv2, 3,200 Gbps", 8, 0, 400, true},
      {"a per-node aggregate in Tb/s", "H100 80GB", "3.2 Tbps per node", 8, 0, 400, true},
      {"a rate no single port reaches is per node; RoCE routes statically", "H100 80GB", "RoCE 3200 Gb/s", 8, 0,
       400, false},
      {"a per-GPU rate stays per NIC", "H100 80GB HBM3", "RoCE (Arista 7800 / Minipack2), 400 Gbps per GPU", 8, 8,
       400, false},
      {"GPUs per node: the 100 of H100 is not a count", "H100 80GB", "4 H100 GPUs per node, Slingshot 4x200Gbps", 4,
       4, 200, true},
      {"GPUs per server", "A100 40GB", "4 GPUs per server", 4, 0, 0, true},
      {"NVLink's own links are not NICs", "H100 80GB", "NVLink4 with 18 links per GPU; 4 ConnectX-7 NICs at 400 Gb/s",
       8, 4, 400, true},
      {"an inter-node interconnect is the node's", "A100 80GB", "400Gbps inter-node interconnect, GPU direct RDMA", 8,
       8, 50, true},
      {"unless said to be per GPU", "H100 80GB", "400 Gbps per GPU inter-node", 8, 8, 400, true},
      {"NVLink's rate is not the network's; a rate is not a NIC count", "H100 80GB SXM5",
       "NVLink/NVSwitch in node (900 GB/s); 8x NVIDIA Mellanox 400 Gbps HDR InfiniBand HCAs per node", 8, 8, 400,
       true},
      {"NVLink's rate first, the NICs' after", "A100 80GB", "NVLink 600 GB/s; 4 HDR HCAs per node at 200 Gb/s", 8, 4,
       200, true},
      {"count, words, rate", "NVIDIA Ampere GPUs", "8x 200G NICs per server, multi-rail to 8 ToR switches", 8, 8, 200,
       true},
      {"a count of GPUs before a rate is not a NIC count", "A100 80GB", "4x A100 with 100 Gb/s InfiniBand", 8, 8, 100,
       true},
  };
  for (const auto& k : cases) {
    INFO(k.why << ": '" << k.gpu << "', '" << k.interconnect << "'");
    const auto c = node_of(k.gpu, k.interconnect);
    CHECK(c.cluster.host.gpus_per_host == k.gpus_per_node);
    if (k.nics > 0) CHECK(c.cluster.host.nics_per_host == k.nics);
    if (k.gbits > 0) CHECK(gbits(c) == Approx(k.gbits));
    CHECK(c.cluster.fabric.adaptive_routing == k.adaptive);
  }
}

TEST_CASE("spelling: ZeRO and FSDP sharding modes") {
  auto row = base_row();
  const auto stage = [&](const std::string& zero, const std::string& framework = "PyTorch") {
    row["zero_fsdp"] = zero;
    row["framework"] = framework;
    return scenario_of(row).plan.zero_stage;
  };
  CHECK(stage("FSDP FULL_SHARD (ZeRO-3-like)") == 3);
  CHECK(stage("Gemini (ColossalAI gemini plugin)", "Colossal-AI") == 3);
  // FSDP's SHARD_GRAD_OP reduce-scatters each wrapped block: one bucket per layer.
  CHECK(stage("FSDP SHARD_GRAD_OP", "Composer") == 2);
  CHECK(scenario_of(row).plan.grad_bucket_params == 1);
  CHECK(stage("ZeRO-2", "DeepSpeed") == 2);
  CHECK(scenario_of(row).plan.grad_bucket_params == parallel::ParallelPlan{}.grad_bucket_params);
  CHECK(stage("full_shard") == 3);
  CHECK(stage("full shard") == 3);
  CHECK(stage("FSDP") == 3);
  CHECK(stage("FSDP2 (fully_shard)") == 3);
  CHECK(stage("Fully Sharded Data Parallel") == 3);
  CHECK(stage("HSDP") == 3);
  CHECK(stage("HYBRID_SHARD") == 3);
  CHECK(stage("hybrid shard (8-GPU groups)") == 3);
  CHECK(stage("ZeRO stage 3 (SageMaker SMP sharded data parallelism)") == 3);
  CHECK(stage("zero3") == 3);
  CHECK(stage("ZeRO++") == 3);
  CHECK(stage("FSDP SHARD_GRAD_OP (ZeRO-2-like)") == 2);
  CHECK(stage("shard grad op") == 2);
  CHECK(stage("_HYBRID_SHARD_ZERO2") == 2);
  CHECK(stage("zero-2") == 2);
  CHECK(stage("ZeRO stage-2") == 2);
  CHECK(stage("FSDP (no reshard after forward)") == 2);
  CHECK(stage("fully_shard(reshard_after_forward=False)") == 2);
  CHECK(stage("ZeRO-1") == 1);
  CHECK(stage("zero stage 1") == 1);
  CHECK(stage("distributed optimizer") == 1);
  CHECK(stage("--use-distributed-optimizer") == 1);
  CHECK(stage("distributed_fused_adam") == 1);
  CHECK(stage("none") == 0);
  CHECK(stage("1") == 1);  // the column holds a ZeRO stage: a bare number is one
  CHECK(stage("2") == 2);
  CHECK(stage("3") == 3);
  CHECK(stage("none (no FSDP)") == 0);
  CHECK(stage("False") == 0);
  CHECK(stage("DDP") == 0);

  // Empty or not stated: what the framework column names, else its documented default.
  CHECK(stage("", "PyTorch FSDP") == 3);
  CHECK(stage("", "DeepSpeed ZeRO-3 (no model parallelism)") == 3);
  CHECK(stage("", "DeepSpeed ZeRO-2") == 2);
  CHECK(stage("", "torchtitan") == 3);
  CHECK(stage("not stated", "torchtitan (eager)") == 3);
  CHECK(stage("", "NeMo 24.07") == 1);
  CHECK(stage("", "NVIDIA NeMo Framework") == 1);
  CHECK(stage("", "Megatron-LM") == 0);
  CHECK(stage("", "HuggingFace transformers") == 0);
}

TEST_CASE("spelling: a shard degree stated as a number gives hybrid sharding groups") {
  auto row = base_row();  // 64 data-parallel ranks
  const auto group = [&](const std::string& zero) {
    row["zero_fsdp"] = zero;
    return scenario_of(row).plan.zero_shard_group;
  };
  CHECK(group("FSDP=16 x DP=4") == 16);
  CHECK(group("HSDP, shard degree 8") == 8);
  CHECK(group("FSDP2, data_parallel_shard_degree=32") == 32);
  CHECK(group("HYBRID_SHARD, shard group of 8 GPUs") == 8);
  // No number, the whole group, a number that does not divide it, or a stage number: full sharding.
  CHECK(group("HYBRID_SHARD") == 0);
  CHECK(group("FSDP=64") == 0);
  CHECK(group("FSDP=48") == 0);
  CHECK(group("FSDP2 (fully_shard)") == 0);
  CHECK(group("ZeRO-3") == 0);
  CHECK(group("FSDP=99999999999999999999") == 0);  // not a shard degree: no number read, no overflow
  row["zero_fsdp"] = "FSDP=16 x DP=4";
  CHECK(scenario_of(row).plan.zero_stage == 3);
}

TEST_CASE("spelling: precision, recompute and sequence-parallel cells") {
  auto row = base_row();
  row["gpu"] = "H100 80GB";
  const auto dtype = [&](const std::string& precision) {
    row["precision"] = precision;
    return scenario_of(row).plan.dtype;
  };
  CHECK(dtype("fp8 (Transformer Engine)") == ir::Dtype::kFp8);
  CHECK(dtype("FP8 delayed scaling") == ir::Dtype::kFp8);
  CHECK(dtype("Float8 (torchao, tensorwise dynamic scaling)") == ir::Dtype::kFp8);
  CHECK(dtype("E4M3/E5M2 hybrid") == ir::Dtype::kFp8);
  CHECK(dtype("BF16 mixed") == ir::Dtype::kBf16);
  CHECK(dtype("bfloat16") == ir::Dtype::kBf16);
  CHECK(dtype("mixed precision") == ir::Dtype::kBf16);
  CHECK(dtype("FP16 weights, FP32 Adam state, dynamic loss scaling") == ir::Dtype::kFp16);
  CHECK(dtype("float16 (loss scaling)") == ir::Dtype::kFp16);
  CHECK(dtype("16-bit mixed (fp16/bf16 not stated)") == ir::Dtype::kBf16);
  // Block-scaled formats on a GPU that has them: MXFP8 also as Megatron-Bridge's "fp8_mx".
  row["gpu"] = "B200";
  CHECK(dtype("MXFP8") == ir::Dtype::kMxfp8);
  CHECK(dtype("fp8_mx") == ir::Dtype::kMxfp8);
  CHECK(dtype("NVFP4 (FP4 config)") == ir::Dtype::kNvfp4);
  CHECK(dtype("FP8-CS") == ir::Dtype::kFp8);
  row["gpu"] = "H100 80GB";

  const auto recompute = [&](const std::string& text) {
    row["recompute"] = text;
    return map_row(row);
  };
  // "selective" is Megatron's selective recompute, unless the op policy is named or the row is
  // torchtitan's (whose Llama configurations select by op).
  CHECK(recompute("selective").scenario->plan.recompute == parallel::Recompute::kSelective);
  CHECK(recompute("selective (op)").scenario->plan.recompute == parallel::Recompute::kSelectiveOp);
  CHECK(recompute("selective op").scenario->plan.recompute == parallel::Recompute::kSelectiveOp);
  CHECK(recompute("selective (operator-level)").scenario->plan.recompute == parallel::Recompute::kSelectiveOp);
  CHECK(recompute("selective (optimized)").scenario->plan.recompute == parallel::Recompute::kSelective);
  row["framework"] = "torchtitan";
  CHECK(recompute("selective").scenario->plan.recompute == parallel::Recompute::kSelectiveOp);
  // torchtitan's layer policy checkpoints every n-th layer whole: full recompute of 12 of 24.
  const auto every_2nd = recompute("selective (layer, every 2nd)").scenario->plan;
  CHECK(every_2nd.recompute == parallel::Recompute::kFull);
  CHECK(every_2nd.recompute_layers == 12);
  row["framework"] = "PyTorch";
  CHECK(recompute("full").scenario->plan.recompute == parallel::Recompute::kFull);
  CHECK(recompute("Full AC").scenario->plan.recompute == parallel::Recompute::kFull);
  CHECK(recompute("True").scenario->plan.recompute == parallel::Recompute::kFull);
  CHECK(recompute("True (--checkpoint-activations)").scenario->plan.recompute == parallel::Recompute::kFull);
  CHECK(recompute("checkpoint-activations: true").scenario->plan.recompute == parallel::Recompute::kFull);
  CHECK(recompute("activation checkpointing").scenario->plan.recompute == parallel::Recompute::kFull);
  CHECK(recompute("block").scenario->plan.recompute == parallel::Recompute::kFull);
  CHECK(recompute("False").scenario->plan.recompute == parallel::Recompute::kNone);
  CHECK(recompute("none").scenario->plan.recompute == parallel::Recompute::kNone);
  CHECK(recompute("no activation checkpointing").scenario->plan.recompute == parallel::Recompute::kNone);
  // Full recompute of some layers: a count per model chunk, or a share of its layers.
  const auto layers = [&](const std::string& text) {
    const auto p = recompute(text).scenario->plan;
    CHECK(p.recompute == parallel::Recompute::kFull);
    return p.recompute_layers;
  };
  CHECK(layers("full, 4 layers per stage") == 4);
  CHECK(layers("block (recompute_num_layers 2)") == 2);
  CHECK(layers("full (uniform, num_layers=1)") == 1);
  CHECK(layers("every other layer") == 12);
  CHECK(layers("checkpointing every 3rd block") == 8);
  CHECK(layers("selective_checkpointing 50%") == 12);
  CHECK(layers("activation checkpointing, ratio 0.25") == 6);
  CHECK(layers("full, 24 layers") == 0);  // every layer
  CHECK(layers("full") == 0);
  // A "selective" row of a framework without Megatron's selective recompute, with HFU and MFU:
  // full recompute of the share f of the layers that HFU/MFU = 1 + f/3 implies.
  row["hfu_pct"] = "0.59";
  row["mfu_pct"] = "0.51";
  CHECK(layers("Selective") == 11);  // f = 3·(0.59/0.51 − 1) = 0.47 of 24
  row["framework"] = "Megatron-LM";
  CHECK(recompute("Selective").scenario->plan.recompute == parallel::Recompute::kSelective);
  row["framework"] = "PyTorch";
  row["hfu_pct"] = "0.52";  // f = 0.06: the attention core of Megatron's selective, not layers
  CHECK(recompute("Selective").scenario->plan.recompute == parallel::Recompute::kSelective);
  row.erase("hfu_pct");
  row.erase("mfu_pct");
  const auto unknown = recompute("not stated");
  CHECK_FALSE(unknown.recompute_given);  // left to the search, as an empty cell

  row["recompute"] = "full";
  row["tp"] = "8";
  row["n_gpus"] = "64";
  const auto sp = [&](const std::string& text, const std::string& framework) {
    row["sequence_parallel"] = text;
    row["framework"] = framework;
    return scenario_of(row).plan.sequence_parallel;
  };
  CHECK(sp("True (TP with sequence parallel)", "torchtitan"));
  CHECK(sp("enabled", "PyTorch"));
  CHECK(sp("yes", "Megatron-LM"));
  CHECK_FALSE(sp("False", "NeMo"));
  CHECK_FALSE(sp("no", "NeMo"));
  // Not stated: on with TP > 1 (Megatron-Core, NeMo, torchtitan, Llama 3's 4D parallelism), not
  // for Megatron-LM, the DeepSpeed-based forks or metaseq, whose runs predate it.
  CHECK(sp("", "NeMo"));
  CHECK(sp("not stated", "MCore r0.9"));
  CHECK(sp("", "torchtitan"));
  CHECK(sp("", "Meta internal 4D parallelism (PyTorch)"));
  CHECK_FALSE(sp("", "Megatron LM"));
  CHECK_FALSE(sp("", "Megatron-DeepSpeed (bigscience fork)"));
  CHECK_FALSE(sp("", "GPT-NeoX (Megatron + DeepSpeed)"));
  CHECK_FALSE(sp("", "metaseq (FSDP + Megatron-LM tensor parallelism)"));
}

TEST_CASE("spelling: frameworks decide the attention core") {
  auto row = base_row();
  const auto plan_of = [&](const std::string& framework) {
    row["framework"] = framework;
    return scenario_of(row).plan;
  };
  // Unfused attention cores: Megatron-LM (any spelling), Megatron-DeepSpeed, DeepSpeed, GPT-NeoX, metaseq.
  for (const char* f : {"Megatron-LM", "Megatron LM", "MegatronLM", "Megatron DeepSpeed", "DeepSpeed",
                        "GPT-NeoX", "metaseq (FSDP + Megatron-LM tensor parallelism)", "fairseq"}) {
    INFO(f);
    CHECK_FALSE(plan_of(f).flash_attention);
  }
  // Fused attention: named FlashAttention, Megatron-Core/NeMo (Transformer Engine), torchtitan, HF.
  for (const char* f : {"Megatron-LM + FlashAttention-2", "MCore", "megatron_core", "NeMo", "torchtitan",
                        "HuggingFace transformers", "Colossal-AI"}) {
    INFO(f);
    CHECK(plan_of(f).flash_attention);
  }
  CHECK(plan_of("MCore").attention_kernel.empty());  // the GPU's default fused kernel
  // PyTorch frameworks run SDPA's or flash-attn's FlashAttention-2 unless a row names another kernel.
  row["source"] = "a benchmark page of 2024-02";  // Composer after FlashAttention-2 (its era)
  for (const char* f : {"torchtitan", "HuggingFace transformers", "PyTorch FSDP (fms-fsdp)", "nanotron",
                        "Composer"}) {
    INFO(f);
    CHECK(plan_of(f).attention_kernel == "FlashAttention-2");
  }
  row.erase("source");
  row["gpu"] = "H100-SXM5-80GB";  // FlashAttention-3 is calibrated on Hopper only
  CHECK(plan_of("torchtitan").attention_kernel == "FlashAttention-2");
  CHECK(plan_of("torchtitan with FlashAttention-3").attention_kernel == "FlashAttention-3");
  CHECK(plan_of("NeMo").attention_kernel.empty());
  CHECK(plan_of("MaxText (JAX)").attention_kernel.empty());
  row["gpu"] = "A100-SXM4-80GB";
  // XTuner loads its models with flash_attention_2 even when it trains them under DeepSpeed.
  CHECK(plan_of("XTuner (DeepSpeed ZeRO-3, sequence parallel)").flash_attention);
  CHECK(plan_of("XTuner (DeepSpeed ZeRO-3, sequence parallel)").attention_kernel == "FlashAttention-2");
  // The flash-attention repository's training code published its speeds with FlashAttention-1.
  const std::string fa_training = "flash-attention training code";
  CHECK(plan_of(fa_training + " (FlashAttention)").attention_kernel == "FlashAttention-1");
  CHECK(plan_of(fa_training + " (GPT, FlashAttention-2)").attention_kernel == "FlashAttention-2");
  // MPT under llm-foundry runs its flash_attn_triton.py, FlashAttention-1's Triton port, unless a
  // version is named; Triton's own fused attention only when Triton is named as the attention.
  row["model"] = "MPT-7b";
  const std::string composer = "Composer + PyTorch FSDP, FlashAttention (MPT)";
  CHECK(plan_of(composer).attention_kernel == "FlashAttention-1");
  CHECK(plan_of("llm-foundry, attn_impl: triton").attention_kernel == "FlashAttention-1");
  CHECK(plan_of("llm-foundry, FlashAttention-2").attention_kernel == "FlashAttention-2");
  row["model"] = "GPT 1.3B";
  CHECK(plan_of("PyTorch FSDP, Triton FlashAttention").attention_kernel == "FlashAttention-Triton");
  CHECK(plan_of("PyTorch FSDP, triton attention").attention_kernel == "FlashAttention-Triton");
  CHECK(plan_of("PyTorch FSDP, flash_attn_triton").attention_kernel == "FlashAttention-1");
  CHECK(plan_of("lit-gpt; torch.compile (Inductor); pytorch-triton 2.1.0").attention_kernel ==
        "FlashAttention-2");
  CHECK(plan_of("HF + Liger (Triton kernels) with FlashAttention-2").attention_kernel == "FlashAttention-2");
}

TEST_CASE("spelling: a row's date picks its frameworks' era") {
  using config::YearMonth;
  CHECK(driver::reading::stated_date("Korthikanti et al. 2022 (arXiv 2205.05198)") ==
        YearMonth{2022, 1});
  CHECK(driver::reading::stated_date("Narayanan et al. SC'21 (arXiv 2104.04473)") ==
        YearMonth{2021, 1});
  CHECK(driver::reading::stated_date(
            "README (last edited 2024-04-22; tables added 2023-06..2024-01)") ==
        YearMonth{2023, 6});
  CHECK_FALSE(driver::reading::stated_date("InternLM/xtuner (GitHub), commit 1cc5ef98cd7f05205"));

  auto row = base_row();
  row["tp"] = "8";
  row["recompute"] = "full";
  const auto plan_of = [&](const std::string& framework, const std::string& source) {
    row["framework"] = framework;
    row["source"] = source;
    return scenario_of(row).plan;
  };
  // Megatron-LM's legacy models (no sequence parallelism, the core unfused) until mid-2024, and
  // for a row without a date; a row naming Megatron-Core ran the new ones whatever its date.
  for (const char* src : {"Shoeybi et al. 2019", "Jiang et al. 2024", ""}) {
    INFO(src);
    CHECK_FALSE(plan_of("Megatron-LM", src).sequence_parallel);
    CHECK_FALSE(plan_of("Megatron-LM", src).flash_attention);
  }
  CHECK(plan_of("Megatron-LM", "NVIDIA blog, 2025-03").sequence_parallel);
  CHECK(plan_of("Megatron-LM", "NVIDIA blog, 2025-03").flash_attention);
  CHECK(plan_of("Megatron-Core", "2023-09").sequence_parallel);
  // Composer's FlashAttention-1 before FlashAttention-2's release, -2 after.
  CHECK(plan_of("Composer", "llm-foundry README 2023-05").attention_kernel == "FlashAttention-1");
  CHECK(plan_of("Composer", "llm-foundry README 2023-08").attention_kernel == "FlashAttention-2");
  // DeepSpeed's model code ran the core unfused before FlashAttention-2; a run naming XTuner is
  // no older than XTuner's first release (2023-08), so its FlashAttention-2 holds.
  CHECK_FALSE(plan_of("DeepSpeed ZeRO-2", "2022").flash_attention);
  CHECK_FALSE(plan_of("DeepSpeed ZeRO-2", "").flash_attention);
  CHECK(plan_of("DeepSpeed ZeRO-2", "2024-03").flash_attention);
  CHECK(plan_of("XTuner (DeepSpeed)", "").attention_kernel == "FlashAttention-2");
  row["recompute"] = "";
  CHECK(plan_of("XTuner (DeepSpeed)", "").recompute == parallel::Recompute::kFull);
}

TEST_CASE("spelling: pure bf16 parameters keep bf16 optimizer states and plain SGD none") {
  auto row = base_row();
  row["precision"] = "bf16-true (Lightning Fabric)";
  row["notes"] = "optimizer torch.optim.SGD(lr=6e-4, weight_decay=1e-1) (no momentum)";
  CHECK(scenario_of(row).plan.optimizer_states == parallel::OptimizerStates::kNone);
  row["notes"] = "optimizer torch.optim.SGD(lr=6e-4, momentum=0)";
  CHECK(scenario_of(row).plan.optimizer_states == parallel::OptimizerStates::kNone);
  // Momentum is a state: bf16 states (Adam's two moments, an upper bound for SGD's one).
  row["notes"] = "optimizer torch.optim.SGD(lr=6e-4, momentum=0.9)";
  CHECK(scenario_of(row).plan.optimizer_states == parallel::OptimizerStates::kBf16);
  // Mixed precision keeps an fp32 master copy: mixed-precision Adam, the default.
  row["notes"] = "optimizer torch.optim.SGD(lr=6e-4)";
  row["precision"] = "bf16-mixed";
  CHECK(scenario_of(row).plan.optimizer_states == parallel::OptimizerStates::kFp32);
  // Adam on pure bf16 parameters keeps bf16 moments and no fp32 master copy.
  row["precision"] = "bf16-true";
  row["notes"] = "optimizer AdamW";
  CHECK(scenario_of(row).plan.optimizer_states == parallel::OptimizerStates::kBf16);
  row["precision"] = "torch.bfloat16";
  CHECK(scenario_of(row).plan.optimizer_states == parallel::OptimizerStates::kBf16);
  row["precision"] = "bf16";
  CHECK(scenario_of(row).plan.optimizer_states == parallel::OptimizerStates::kFp32);
}

TEST_CASE("spelling: XTuner rows silent on recompute get its default activation checkpointing") {
  auto row = base_row();
  row["framework"] = "XTuner (DeepSpeed)";
  row["recompute"] = "";
  const auto m = map_row(row);
  CHECK(m.recompute_given);
  CHECK(m.scenario->plan.recompute == parallel::Recompute::kFull);
  row["recompute"] = "none";
  CHECK(scenario_of(row).plan.recompute == parallel::Recompute::kNone);
  row["framework"] = "DeepSpeed";
  row["recompute"] = "";
  CHECK_FALSE(map_row(row).recompute_given);  // other frameworks: the search decides
}

TEST_CASE("spelling: frameworks decide eager elementwise ops and the loss on fp32 logits") {
  auto row = base_row();
  const auto plan_of = [&](const std::string& framework, const std::string& precision) {
    row["framework"] = framework;
    row["precision"] = precision;
    return scenario_of(row).plan;
  };
  // torchtitan runs eager unless compiled (`compile = false` in its train_configs); HuggingFace
  // models compose RMSNorm, rotary and SwiGLU from eager ops; Composer's llm-foundry runs MPT's
  // LayerNorm as PyTorch's native kernel.
  for (const char* f : {"torchtitan", "torchtitan (eager)", "HuggingFace transformers",
                        "Hugging Face Trainer", "Composer + PyTorch FSDP", "llm-foundry"}) {
    INFO(f);
    CHECK(plan_of(f, "bf16").elementwise == parallel::Elementwise::kEager);
  }
  for (const auto& [f, prec] : std::vector<std::pair<std::string, std::string>>{
           {"torchtitan + torch.compile", "bf16"},
           {"torchtitan", "Float8 (torch.compile)"},
           {"HuggingFace transformers + Liger kernels", "bf16"},
           {"Megatron-Core", "bf16"},
           {"Composer + torch.compile", "bf16"},
           {"Megatron-LM", "bf16"}}) {
    INFO(f << " / " << prec);
    CHECK(plan_of(f, prec).elementwise == parallel::Elementwise::kFused);
  }
  // Both torchtitan and HuggingFace take the loss of logits.float() with F.cross_entropy, compiled
  // or not; Megatron-Core keeps its fused upcast.
  CHECK(plan_of("torchtitan + torch.compile", "bf16").cross_entropy == parallel::CrossEntropy::kFp32Unfused);
  CHECK(plan_of("HuggingFace transformers", "bf16").cross_entropy == parallel::CrossEntropy::kFp32Unfused);
  CHECK(plan_of("Megatron-Core", "bf16").cross_entropy == parallel::CrossEntropy::kFp32);
}

TEST_CASE("spelling: family defaults and uneven pipeline splits") {
  auto row = base_row();
  row["model"] = "LLAMA2-70B";
  row["n_layers"] = "80";
  row["hidden"] = "8192";
  row["n_heads"] = "64";
  row["n_kv_heads"] = "8";
  row["vocab"] = "";
  row["tp"] = "8";
  row["pp"] = "4";
  row["n_gpus"] = "64";
  auto sc = scenario_of(row);
  CHECK(sc.model.ffn_hidden == 28672);  // Llama 2 70B's released config, not 8h/3
  CHECK(sc.model.vocab == 32000);
  CHECK(sc.plan.pp_layers.empty());  // 80 layers on 4 stages: even

  // Llama 3 405B: 126 layers on 16 stages run 7, 8 x 14, 7 (Dubey et al. 2024, Sec. 3.3.2).
  row["model"] = "Llama 3.1 405B";
  row["n_layers"] = "126";
  row["hidden"] = "16384";
  row["n_heads"] = "128";
  row["ffn_hidden"] = "53248";
  row["pp"] = "16";
  row["n_gpus"] = "1024";
  row["global_batch"] = "512";
  row["micro_batch"] = "1";
  sc = scenario_of(row);
  std::vector<std::int64_t> expect(16, 8);
  expect.front() = 7;
  expect.back() = 7;
  CHECK(sc.plan.pp_layers == expect);

  // BLOOM: 70 layers on 12 stages run 5, 6 x 10, 5; with the interleaved schedule the split is
  // over pp·vpp virtual stages.
  row["model"] = "BLOOM-176B";
  row["n_layers"] = "70";
  row["hidden"] = "14336";
  row["n_heads"] = "112";
  row["n_kv_heads"] = "";
  row["ffn_hidden"] = "";
  row["tp"] = "4";
  row["pp"] = "12";
  row["n_gpus"] = "384";
  sc = scenario_of(row);
  expect.assign(12, 6);
  expect.front() = 5;
  expect.back() = 5;
  CHECK(sc.plan.pp_layers == expect);
  row["pp"] = "4";
  row["vpp"] = "3";
  row["n_gpus"] = "128";
  sc = scenario_of(row);
  REQUIRE(sc.plan.pp_layers.size() == 12);
  std::int64_t total = 0;
  for (auto n : sc.plan.pp_layers) total += n;
  CHECK(total == 70);
}

TEST_CASE("spelling: numbers read by the vocabulary's patterns") {
  const auto vocab = config::load_reading_vocabulary();
  using driver::reading::number_in;
  using driver::reading::parse_partial_recompute;
  CHECK(parse_partial_recompute("full, 4 layers per stage", vocab)->layers == 4);
  CHECK(parse_partial_recompute("recompute_num_layers=2", vocab)->layers == 2);
  CHECK(parse_partial_recompute("every other block", vocab)->share == 0.5);
  CHECK(parse_partial_recompute("every 3rd layer", vocab)->share == 1.0 / 3.0);
  CHECK(parse_partial_recompute("Every fourth layer", vocab)->share == 0.25);
  CHECK(parse_partial_recompute("50%", vocab)->share == 0.5);
  CHECK(parse_partial_recompute("ratio 0.25", vocab)->share == 0.25);
  CHECK(parse_partial_recompute("half of the blocks", vocab)->share == 0.5);
  CHECK_FALSE(parse_partial_recompute("full", vocab));
  CHECK(number_in(vocab, config::Numbers::kShardGroup, "FSDP=128 x DP=16") == 128);
  CHECK(number_in(vocab, config::Numbers::kShardGroup, "HSDP, shard group of 8") == 8);
  CHECK_FALSE(number_in(vocab, config::Numbers::kShardGroup, "HSDP"));
  CHECK(number_in(vocab, config::Numbers::kGpuMemoryGb, "H100 SXM 94GB 700W") == 94);
  CHECK(number_in(vocab, config::Numbers::kGpusPerNode, "4 H100 GPUs per node, 4x 200 Gb/s") == 4);
  CHECK_FALSE(number_in(vocab, config::Numbers::kGpusPerNode, "ConnectX-6 per node"));
}

TEST_CASE("spelling: FLOP conventions named as 6ND or 6 x parameters") {
  PublishedRun r;
  const auto vocab = config::load_reading_vocabulary();
  r.tflops_kind = "model (6ND)";
  CHECK(driver::flop_convention(r, vocab).family == driver::FlopFamily::kSixN);
  r.tflops_kind = "model: 6 × parameters + attention";
  CHECK(driver::flop_convention(r, vocab).family == driver::FlopFamily::kSixN);
  r.tflops_kind = "model (6N + 12*L*H*Q*T per token)";
  CHECK(driver::flop_convention(r, vocab).family == driver::FlopFamily::kSixN);
  r.tflops_kind = "model (6 nodes)";
  CHECK(driver::flop_convention(r, vocab).family == driver::FlopFamily::kMegatron);
}

TEST_CASE("held-out-style runs: every row is compared or listed with its reason") {
  // Not GPU runs this simulator models: PaLM on TPU v4, Megatron-LM 2019 on V100.
  const auto [file, expect_skipped] = GENERATE(
      std::make_pair(std::string("heldout-style.csv"), std::set<std::string>{"H23", "H24"}),
      std::make_pair(std::string("heldout-style-2.csv"), std::set<std::string>{}),
      std::make_pair(std::string("heldout-style-3.csv"), std::set<std::string>{}),
      // Alibaba's Megatron-LLaMA README prints no sequence length.
      std::make_pair(std::string("heldout-style-4.csv"), std::set<std::string>{"L39", "L40"}),
      // Llama 3.1 8B fully fine-tuned on one H100 (M33), read as pure bf16 (a torch.bfloat16
      // model), is compared though its predicted peak exceeds the GPU.
      std::make_pair(std::string("heldout-style-5.csv"), std::set<std::string>{}),
      // No sequence length printed (N4, N5, N14, N16); a global batch of 576 on 384 GPUs with no
      // parallelism stated (N18); whole-run GPU-hours without a GPU count (N20-N25).
      std::make_pair(std::string("heldout-style-6.csv"),
                     std::set<std::string>{"N4", "N5", "N14", "N16", "N18", "N20", "N21", "N22", "N23",
                                           "N24", "N25"}));
  INFO(file);
  const auto runs = driver::read_published_runs(source_dir() / "tests/validation" / file);
  REQUIRE(runs.size() >= 15);
  driver::ValidateOptions options;
  options.threads = 2;
  const auto report = driver::validate(runs, options);
  REQUIRE(report.rows.size() == runs.size());
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = report.rows[i];
    INFO("run " << runs[i].run_id << " (" << runs[i].model << "): " << r.reason);
    CHECK(r.run_id == runs[i].run_id);
    if (r.skipped) {
      CHECK_FALSE(r.reason.empty());
    } else {
      CHECK(r.throughput.has_value());
      if (r.throughput) CHECK(std::isfinite(r.throughput->error));
    }
    CHECK(r.skipped == (expect_skipped.count(runs[i].run_id) > 0));
  }
  CHECK(report.summary.skipped == static_cast<std::int64_t>(expect_skipped.size()));
}

TEST_CASE("search: a row silent on recompute and micro-batch gets the fastest combination that fits") {
  // A sharded (ZeRO-3) GPT 20B on 256 A100-40GB: without recompute only small micro-batches fit,
  // each gathering every layer's weights again over 256 ranks, so the least recompute is not the
  // fastest plan.
  auto row = base_row();
  row["model"] = "GPT 20B";
  row["n_layers"] = "44";
  row["hidden"] = "6144";
  row["n_heads"] = "48";
  row["n_gpus"] = "256";
  row["gpu"] = "A100-SXM4-40GB";
  row["zero_fsdp"] = "ZeRO-3";
  row["global_batch"] = "2048";
  row["micro_batch"] = "";
  row["recompute"] = "";
  driver::ValidateOptions options;
  options.threads = 2;
  const auto open = driver::validate({parse_one(row)}, options);
  REQUIRE(open.rows.size() == 1);
  REQUIRE(open.rows[0].result.has_value());
  REQUIRE(open.rows[0].result->status == driver::Status::kOk);
  const double chosen = open.rows[0].result->iteration_time_s;
  CHECK(open.rows[0].scenario->plan.recompute == parallel::Recompute::kFull);

  // Every combination stated explicitly: none that fits is faster than the one chosen.
  std::vector<PublishedRun> stated;
  for (const char* rc : {"none", "full"}) {
    for (const char* mb : {"1", "2", "4", "8"}) {  // 8 sequences per replica
      row["recompute"] = rc;
      row["micro_batch"] = mb;
      stated.push_back(parse_one(row));
    }
  }
  const auto each = driver::validate(stated, options);
  int fitting = 0;
  int fitting_without_recompute = 0;
  for (const auto& r : each.rows) {
    REQUIRE(r.result.has_value());
    if (r.result->status != driver::Status::kOk) continue;
    ++fitting;
    if (r.scenario->plan.recompute == parallel::Recompute::kNone) ++fitting_without_recompute;
    INFO("micro-batch " << r.scenario->plan.micro_batch << ", recompute " << config::name(r.scenario->plan.recompute));
    CHECK(chosen <= r.result->iteration_time_s * (1 + 1e-12));
  }
  CHECK(fitting >= 2);
  CHECK(fitting_without_recompute >= 1);  // the least recompute that fits would have been none
}

TEST_CASE("validate: a row that states no sharding but cannot fit without it gets the fastest ZeRO stage that fits") {
  auto row = base_row();
  row["model"] = "Llama-2-70B";
  row["n_layers"] = "80";
  row["hidden"] = "8192";
  row["n_heads"] = "64";
  row["n_kv_heads"] = "8";
  row["vocab"] = "32000";
  row["seq_len"] = "4096";
  row["n_gpus"] = "32";
  row["global_batch"] = "32";
  row["micro_batch"] = "1";
  row["recompute"] = "full";
  row["framework"] = "PyTorch";
  const auto runs = std::vector<PublishedRun>{parse_one(row)};
  const auto report = driver::validate(runs, driver::ValidateOptions{});
  REQUIRE(report.rows.size() == 1);
  const auto& r = report.rows[0];
  INFO(r.reason);
  REQUIRE_FALSE(r.skipped);
  REQUIRE(r.scenario.has_value());
  CHECK(r.scenario->plan.zero_stage > 0);  // 70 B parameters at 18 bytes do not fit 32 x 80 GB unsharded
  const bool noted = std::any_of(r.assumptions.begin(), r.assumptions.end(), [](const std::string& a) {
    return a.find("no sharding stated") != std::string::npos;
  });
  CHECK(noted);
  CHECK(r.scenario->plan.grad_reduce == parallel::GradReduce::kFp32);
  // The chosen stage brings the framework's rules for it: DeepSpeed's ZeRO reduces in 16 bits.
  row["framework"] = "DeepSpeed";
  const auto ds = driver::validate(std::vector<PublishedRun>{parse_one(row)}, driver::ValidateOptions{});
  REQUIRE(ds.rows[0].scenario.has_value());
  CHECK(ds.rows[0].scenario->plan.zero_stage > 0);
  CHECK(ds.rows[0].scenario->plan.grad_reduce == parallel::GradReduce::kBf16);
  row["framework"] = "PyTorch";
  // Stated as none, it stays unsharded and is listed as out of memory.
  row["zero_fsdp"] = "none";
  const auto none = driver::validate(std::vector<PublishedRun>{parse_one(row)}, driver::ValidateOptions{});
  CHECK(none.rows[0].skipped);
}

TEST_CASE("spelling: a squared-ReLU MLP is non-gated and 4h wide") {
  auto row = base_row();
  row["model"] = "Nemotron-4 15B";
  row["n_heads"] = "48";
  row["hidden"] = "6144";
  row["n_kv_heads"] = "8";
  row["notes"] = "Squared-ReLU MLP, RoPE, untied embeddings";
  const auto m = scenario_of(row).model;
  CHECK(m.activation == ir::Activation::kGelu);  // two matrices, one elementwise op
  CHECK(m.ffn_hidden == 4 * 6144);
  row["notes"] = "";
  CHECK(scenario_of(row).model.activation == ir::Activation::kSwiglu);  // GQA alone reads as Llama
}

TEST_CASE("spelling: the context-parallel algorithm a row names") {
  auto row = base_row();
  row["cp"] = "4";
  row["seq_len"] = "32768";
  row["global_batch"] = "16";
  row["micro_batch"] = "1";
  CHECK(scenario_of(row).plan.cp_algo == parallel::CpAlgo::kRing);
  row["framework"] = "DeepSpeed-Ulysses (all-to-all sequence parallelism)";
  CHECK(scenario_of(row).plan.cp_algo == parallel::CpAlgo::kUlysses);
  row["framework"] = "PyTorch";
  row["notes"] = "context parallelism with all-gather KV, as in Llama 3";
  CHECK(scenario_of(row).plan.cp_algo == parallel::CpAlgo::kAllGather);
}

TEST_CASE("spelling: released widths, GPU parts and IB rates come from the vocabulary") {
  auto row = base_row();
  row["model"] = "Llama 3 8B";
  row["n_layers"] = "32";
  row["hidden"] = "4096";
  row["n_heads"] = "32";
  row["n_kv_heads"] = "8";
  row["vocab"] = "";
  row["gpu"] = "H100 80GB";
  row["interconnect"] = "8x NDR";
  const PublishedRun run = parse_one(row);
  config::ComputeModelCache calibrations;
  const auto frameworks = config::load_all_frameworks();
  const auto shipped = config::load_reading_vocabulary();
  const auto with = driver::map_run(run, calibrations, frameworks, shipped);
  REQUIRE(with.scenario);
  CHECK(with.scenario->model.ffn_hidden == 14336);  // Meta's released config.json
  CHECK(with.scenario->model.vocab == 128256);
  CHECK(with.scenario->cluster.cluster.host.nic_bandwidth.bytes_per_s() * 8e-9 == Approx(400));

  // Without the released widths the 8h/3 rule applies; without the H100 parts the row has no
  // cluster; an NDR port of another rate changes the NICs' rate.
  auto other = shipped;
  other.released_widths.clear();
  for (auto& g : other.link_generations) {
    if (g.word == "ndr") g.gbits = 200;
  }
  const auto changed = driver::map_run(run, calibrations, frameworks, other);
  REQUIRE(changed.scenario);
  CHECK(changed.scenario->model.ffn_hidden == 11008);
  CHECK(changed.scenario->cluster.cluster.host.nic_bandwidth.bytes_per_s() * 8e-9 == Approx(200));
  other.gpu_parts.erase(std::remove_if(other.gpu_parts.begin(), other.gpu_parts.end(),
                                       [](const auto& g) { return g.cluster.rfind("dgx-h100", 0) == 0; }),
                        other.gpu_parts.end());
  const auto none = driver::map_run(run, calibrations, frameworks, other);
  CHECK_FALSE(none.scenario);
  CHECK_THAT(none.skip_reason, Catch::Contains("no cluster model for GPU 'H100 80GB'"));
}

TEST_CASE("spelling: the rules' word lists come from the vocabulary") {
  auto row = base_row();
  row["zero_fsdp"] = "ZeRO-Infinity";
  row["precision"] = "bf16";
  const PublishedRun run = parse_one(row);
  config::ComputeModelCache calibrations;
  const auto frameworks = config::load_all_frameworks();
  const auto shipped = config::load_reading_vocabulary();
  const auto as_shipped = driver::map_run(run, calibrations, frameworks, shipped);
  REQUIRE(as_shipped.scenario);
  CHECK(as_shipped.scenario->plan.zero_stage == 0);  // no list names ZeRO-Infinity
  CHECK(as_shipped.scenario->plan.dtype == ir::Dtype::kBf16);
  // A spelling added to a list is read as its stage; a precision word moved to another list.
  auto other = shipped;
  other.words[static_cast<std::size_t>(config::Words::kZero3)].spelled.push_back(" zero infinity ");
  other.words[static_cast<std::size_t>(config::Words::kPrecisionFp8)].spelled.push_back("bf16");
  const auto changed = driver::map_run(run, calibrations, frameworks, other);
  REQUIRE(changed.scenario);
  CHECK(changed.scenario->plan.zero_stage == 3);
  CHECK(changed.scenario->plan.dtype == ir::Dtype::kFp8);
  // Framework spellings: "MCore" as a whole word is Megatron-Core, not inside another word.
  CHECK(driver::reading::framework_column(shipped, "NeMo (MCore 0.8)") == "nemo (megatron-core 0.8)");
  CHECK(driver::reading::framework_column(shipped, "Megatron_LM, TransformerEngine") ==
        "megatron-lm, transformer engine");
  CHECK(driver::reading::framework_column(shipped, "xmcore") == "xmcore");
}
