// Tests of the memory formulas: parameter counts, static footprint by ZeRO stage, activations per
// layer (Korthikanti et al. 2022, Table 2, reproduced exactly), micro-batches in flight.
#include <catch2/catch.hpp>

#include <cstdint>

#include "sim/base/diagnostic.h"
#include "sim/ir/model_graph.h"
#include "sim/memory/footprint.h"
#include "sim/parallel/lowering.h"

using ts::Bytes;
using ts::ir::ModelSpec;
using ts::memory::ActivationOptions;
using ts::parallel::ParallelPlan;
using ts::parallel::Recompute;
using ts::parallel::Schedule;

namespace {

ModelSpec llama(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t kv_heads,
                std::int64_t ffn, std::int64_t vocab) {
  ModelSpec m;
  m.name = "llama";
  m.num_layers = layers;
  m.hidden = hidden;
  m.num_heads = heads;
  m.num_kv_heads = kv_heads;
  m.ffn_hidden = ffn;
  m.vocab = vocab;
  m.max_seq_len = 0;
  m.norm = ts::ir::Norm::kRmsNorm;
  m.activation = ts::ir::Activation::kSwiglu;
  m.position = ts::ir::Position::kRope;
  m.tied_embeddings = false;
  m.linear_bias = false;
  return m;
}

// Touvron et al. 2023 (Llama 2) Table 1 / config.json; Meta Llama 3 model card / config.json.
ModelSpec llama2_7b() { return llama(32, 4096, 32, 32, 11008, 32000); }
ModelSpec llama3_8b() { return llama(32, 4096, 32, 8, 14336, 128256); }
ModelSpec llama3_70b() { return llama(80, 8192, 64, 8, 28672, 128256); }

ModelSpec gpt(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t vocab) {
  ModelSpec m;
  m.name = "gpt";
  m.num_layers = layers;
  m.hidden = hidden;
  m.num_heads = heads;
  m.num_kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.vocab = vocab;
  m.max_seq_len = 2048;
  m.norm = ts::ir::Norm::kLayerNorm;
  m.activation = ts::ir::Activation::kGelu;
  m.position = ts::ir::Position::kLearned;
  m.tied_embeddings = true;
  m.linear_bias = true;
  return m;
}

// Brown et al. 2020 Table 2.1: 96 layers, d_model 12288, 96 heads, GPT-2 vocabulary.
ModelSpec gpt3_175b() { return gpt(96, 12288, 96, 50257); }

ParallelPlan plan_with(std::int64_t tp, std::int64_t pp, std::int64_t dp, std::int64_t cp) {
  ParallelPlan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.cp = cp;
  return p;
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parameters

TEST_CASE("parameter counts match the published model sizes", "[memory][parameters]") {
  // Per layer: attention h(h + 2kv) + h² (+ biases), MLP 2hf (GELU) or 3hf (SwiGLU) (+ biases),
  // norms; plus V·h embedding, V·h LM head unless tied, learned positions, final norm.
  struct Case {
    const char* name;
    ModelSpec model;
    double published;
    std::int64_t exact;
  };
  const Case cases[] = {
      // 32·(4h² + 3·h·11008 + 2h) + 2·32000·h + h
      {"Llama-2 7B", llama2_7b(), 6.74e9, 6'738'415'616},
      // 32·(h(h + 2·1024) + h² + 3·h·14336 + 2h) + 2·128256·h + h
      {"Llama-3 8B", llama3_8b(), 8.03e9, 8'030'261'248},
      {"Llama-3 70B", llama3_70b(), 70.6e9, 70'553'706'496},
      // 96·(12h² + 13h) + 50257·h (tied) + 2048·h + 2h; 174.6B in Narayanan et al. SC'21 Table 1
      {"GPT-3 175B", gpt3_175b(), 174.6e9, 174'604'259'328},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    const std::int64_t n = ts::memory::parameter_count(c.model);
    CHECK(n == c.exact);
    CHECK(static_cast<double>(n) == Approx(c.published).epsilon(0.005));
    // The memory model and the IR count parameters the same way.
    CHECK(n == ts::ir::parameter_count(c.model));
  }
  // Megatron pads the GPT-2 vocabulary to 51200 (the zoo's value): still 174.6B within 0.5%.
  ModelSpec padded = gpt3_175b();
  padded.vocab = 51200;
  CHECK(static_cast<double>(ts::memory::parameter_count(padded)) == Approx(174.6e9).epsilon(0.005));
}

TEST_CASE("layer parameters by tensor", "[memory][parameters]") {
  const ModelSpec m = llama3_8b();  // h 4096, kv_hidden 1024, ffn 14336
  const auto p = ts::memory::layer_parameters(m);
  CHECK(p.qkv_weight == 4096 * (4096 + 2 * 1024));
  CHECK(p.proj_weight == 4096 * 4096);
  CHECK(p.fc1_weight == 4096 * 2 * 14336);  // fused gate and up
  CHECK(p.fc2_weight == 14336 * 4096);
  CHECK(p.norms == 2 * 4096);  // two RMSNorm scales
  CHECK(p.qkv_bias + p.proj_bias + p.fc1_bias + p.fc2_bias == 0);

  const ModelSpec g = gpt3_175b();
  const auto q = ts::memory::layer_parameters(g);
  const std::int64_t h = 12288;
  CHECK(q.total() == 12 * h * h + 13 * h);  // Narayanan et al. SC'21 Sec. 5.1: 12h² + 13h per layer
  CHECK(q.norms == 4 * h);                  // two LayerNorms, scale and shift
}

TEST_CASE("tensor parallelism splits weights but replicates norms and row-parallel biases", "[memory][parameters]") {
  const ModelSpec g = gpt3_175b();
  const auto p = ts::memory::layer_parameters(g);
  for (const std::int64_t t : {2, 4, 8}) {
    INFO("tp " << t);
    const std::int64_t replicated = p.norms + p.proj_bias + p.fc2_bias;
    // t ranks hold everything once, plus t - 1 extra copies of the replicated tensors.
    CHECK(p.per_tp_rank(g, t) * t == p.total() + (t - 1) * replicated);
  }
  CHECK(p.per_tp_rank(g, 1) == p.total());

  // GQA with more TP ranks than KV heads: Llama-3 70B has 8 KV heads; at tp 16 each rank keeps
  // one KV head (128 wide) for K and for V.
  const ModelSpec l = llama3_70b();
  const auto lp = ts::memory::layer_parameters(l);
  const std::int64_t h = 8192;
  const std::int64_t expected = h * (h / 16 + 2 * 128) + h * h / 16 + h * 2 * 28672 / 16 + 28672 * h / 16 + 2 * h;
  CHECK(lp.per_tp_rank(l, 16) == expected);
  CHECK(lp.largest_per_tp_rank(l, 8) == h * 2 * 28672 / 8);  // fused gate+up
}

TEST_CASE("stage parameters: embedding on the first stage, head and final norm on the last", "[memory][parameters]") {
  const ModelSpec m = llama2_7b();
  const auto layer = ts::memory::layer_parameters(m).total();
  const std::int64_t vh = 32000 * 4096;
  SECTION("one stage holds everything") {
    CHECK(ts::memory::stage_parameters(m, plan_with(1, 1, 1, 1), 0, 32) == ts::memory::parameter_count(m));
  }
  SECTION("four stages") {
    const ParallelPlan plan = plan_with(1, 4, 1, 1);
    CHECK(ts::memory::stage_parameters(m, plan, 0, 8) == 8 * layer + vh);
    CHECK(ts::memory::stage_parameters(m, plan, 1, 8) == 8 * layer);
    CHECK(ts::memory::stage_parameters(m, plan, 3, 8) == 8 * layer + vh + 4096);
    std::int64_t sum = 0;
    for (std::int64_t s = 0; s < 4; ++s) sum += ts::memory::stage_parameters(m, plan, s, 8);
    CHECK(sum == ts::memory::parameter_count(m));
  }
  SECTION("vocab-parallel embedding and head") {
    const ParallelPlan plan = plan_with(8, 2, 1, 1);
    CHECK(ts::memory::stage_parameters(m, plan, 0, 0) == vh / 8);
    CHECK(ts::memory::stage_parameters(m, plan, 1, 0) == vh / 8 + 4096);  // the final norm is replicated
  }
  SECTION("tied embeddings: one matrix with one stage, a copy on the last stage with several") {
    const ModelSpec g = gpt3_175b();
    const std::int64_t gvh = 50257 * 12288;
    const std::int64_t pos = 2048 * 12288;
    const std::int64_t final_norm = 2 * 12288;
    CHECK(ts::memory::stage_parameters(g, plan_with(1, 1, 1, 1), 0, 0) == gvh + pos + final_norm);
    const ParallelPlan two = plan_with(1, 2, 1, 1);
    CHECK(ts::memory::stage_parameters(g, two, 0, 0) == gvh + pos);
    CHECK(ts::memory::stage_parameters(g, two, 1, 0) == gvh + final_norm);
  }
}

// ---------------------------------------------------------------------------------------------
// Static footprint

TEST_CASE("static footprint: mixed-precision Adam, 18 bytes per parameter without ZeRO", "[memory][static]") {
  const ModelSpec m = llama2_7b();
  const std::int64_t p = ts::memory::parameter_count(m);
  ParallelPlan plan = plan_with(1, 1, 8, 1);
  const auto f = ts::memory::static_footprint(m, plan, 0, 32);
  CHECK(f.weights.count() == 2 * p);           // bf16
  CHECK(f.gradients.count() == 4 * p);         // fp32 main_grad
  CHECK(f.optimizer_states.count() == 8 * p);  // fp32 m and v
  CHECK(f.master_weights.count() == 4 * p);    // fp32 master
  CHECK(f.total().count() == 18 * p);
  const auto bpp = ts::memory::bytes_per_parameter(plan);
  CHECK(bpp.weights + bpp.gradients + bpp.optimizer_states + bpp.master_weights == 18);
}

TEST_CASE("static footprint: ZeRO stages shard over DP x CP", "[memory][static]") {
  const ModelSpec m = llama3_8b();
  const std::int64_t p = ts::memory::parameter_count(m);
  auto ceil_div = [](std::int64_t a, std::int64_t b) { return (a + b - 1) / b; };
  for (const auto& [dp, cp] : {std::pair<std::int64_t, std::int64_t>{8, 1}, {2, 4}, {16, 2}}) {
    const std::int64_t n = dp * cp;
    const std::int64_t shard = ceil_div(p, n);
    INFO("dp " << dp << " cp " << cp);
    ParallelPlan plan = plan_with(1, 1, dp, cp);
    plan.zero_stage = 1;  // optimizer states: m, v and master weights
    auto f = ts::memory::static_footprint(m, plan, 0, 32);
    CHECK(f.weights.count() == 2 * p);
    CHECK(f.gradients.count() == 4 * p);
    CHECK(f.optimizer_states.count() == 8 * shard);
    CHECK(f.master_weights.count() == 4 * shard);
    plan.zero_stage = 2;  // + gradients
    f = ts::memory::static_footprint(m, plan, 0, 32);
    CHECK(f.weights.count() == 2 * p);
    CHECK(f.gradients.count() == 4 * shard);
    CHECK(f.optimizer_states.count() == 8 * shard);
    plan.zero_stage = 3;  // + weights
    f = ts::memory::static_footprint(m, plan, 0, 32);
    CHECK(f.weights.count() == 2 * shard);
    CHECK(f.total().count() == 18 * shard);
  }
  // Context parallelism alone does not shard without ZeRO: every CP rank holds the whole stage.
  const auto f0 = ts::memory::static_footprint(m, plan_with(1, 1, 1, 8), 0, 32);
  CHECK(f0.total().count() == 18 * p);
}

TEST_CASE("static footprint: ZeRO-3 in a pipeline holds what ZeRO-1 holds", "[memory][static]") {
  // FSDP as PyTorch's pipelining runs it keeps each stage's parameters and accumulated gradients
  // whole through the step (ParallelPlan::fsdp_in_pipeline); only the optimizer states stay sharded.
  const ModelSpec m = llama3_8b();
  ParallelPlan plan = plan_with(1, 2, 8, 1);
  plan.zero_stage = 3;
  const auto fsdp = ts::memory::static_footprint(m, plan, 0, 16);
  plan.zero_stage = 1;
  const auto zero1 = ts::memory::static_footprint(m, plan, 0, 16);
  CHECK(fsdp.weights == zero1.weights);
  CHECK(fsdp.gradients == zero1.gradients);
  CHECK(fsdp.optimizer_states == zero1.optimizer_states);
  CHECK(fsdp.master_weights == zero1.master_weights);
  // With shard groups of 4 the weights and gradients stay whole, the states are sharded 4 ways.
  plan.zero_stage = 3;
  plan.zero_shard_group = 4;
  const auto hybrid = ts::memory::static_footprint(m, plan, 0, 16);
  CHECK(hybrid.weights == zero1.weights);
  CHECK(hybrid.gradients == zero1.gradients);
  CHECK(hybrid.optimizer_states.count() >= 2 * zero1.optimizer_states.count() - 16);
  CHECK(hybrid.optimizer_states.count() <= 2 * zero1.optimizer_states.count());
}

TEST_CASE("static footprint: a bf16 gradient reduction halves the unsharded gradient buffer only", "[memory][static]") {
  const ModelSpec m = llama3_8b();
  const std::int64_t p = ts::memory::parameter_count(m);
  const std::int64_t shard = (p + 7) / 8;
  ParallelPlan plan = plan_with(1, 1, 8, 1);
  plan.grad_reduce = ts::parallel::GradReduce::kBf16;
  for (const int zero : {0, 1}) {
    plan.zero_stage = zero;
    CHECK(ts::memory::static_footprint(m, plan, 0, 32).gradients.count() == 2 * p);  // bf16 main_grad
  }
  // ZeRO 2-3 keep their gradient shard in fp32 for the optimizer.
  plan.zero_stage = 2;
  CHECK(ts::memory::static_footprint(m, plan, 0, 32).gradients.count() == 4 * shard);
  plan.zero_stage = 3;
  CHECK(ts::memory::static_footprint(m, plan, 0, 32).total().count() == 18 * shard);
}

TEST_CASE("static footprint: bf16 optimizer states keep no fp32 master", "[memory][static]") {
  const ModelSpec m = llama2_7b();
  const std::int64_t p = ts::memory::parameter_count(m);
  ParallelPlan plan = plan_with(1, 1, 1, 1);
  plan.optimizer_states = ts::parallel::OptimizerStates::kBf16;
  const auto f = ts::memory::static_footprint(m, plan, 0, 32);
  CHECK(f.weights.count() == 2 * p);
  CHECK(f.gradients.count() == 2 * p);
  CHECK(f.optimizer_states.count() == 4 * p);  // bf16 m and v
  CHECK(f.master_weights.count() == 0);
  CHECK(f.total().count() == 8 * p);
}

TEST_CASE("static footprint: a stateless optimizer keeps bf16 weights and gradients", "[memory][static]") {
  const ModelSpec m = llama2_7b();
  const std::int64_t p = ts::memory::parameter_count(m);
  ParallelPlan plan = plan_with(1, 1, 1, 1);
  plan.optimizer_states = ts::parallel::OptimizerStates::kNone;
  const auto f = ts::memory::static_footprint(m, plan, 0, 32);
  CHECK(f.optimizer_states.count() == 0);
  CHECK(f.master_weights.count() == 0);
  CHECK(f.total().count() == 4 * p);
  // The optimizer step's traffic follows the state it reads and writes.
  CHECK(ts::memory::optimizer_step_bytes_per_parameter(plan).count() == 12);
  plan.optimizer_states = ts::parallel::OptimizerStates::kBf16;
  CHECK(ts::memory::optimizer_step_bytes_per_parameter(plan).count() == 14);
  plan.optimizer_states = ts::parallel::OptimizerStates::kFp32;
  CHECK(ts::memory::optimizer_step_bytes_per_parameter(plan).count() == 30);
}

TEST_CASE("static footprint: optimizer in backward keeps only the largest gradient", "[memory][static]") {
  const ModelSpec m = llama3_8b();
  ParallelPlan plan = plan_with(1, 4, 1, 1);
  plan.optimizer_in_backward = true;
  // Stage 0: the embedding (128256 × 4096) is the largest tensor.
  CHECK(ts::memory::static_footprint(m, plan, 0, 8).gradients.count() == 4 * 128256 * 4096);
  // A middle stage: the fused gate+up weight, 4096 × 2·14336.
  CHECK(ts::memory::static_footprint(m, plan, 1, 8).gradients.count() == 4 * 4096 * 2 * 14336);
  // With TP 8 the shards are 8 times smaller.
  plan.tp = 8;
  CHECK(ts::memory::static_footprint(m, plan, 1, 8).gradients.count() == 4 * 4096 * 2 * 14336 / 8);
  // Weights and optimizer states are unchanged by the option.
  plan.optimizer_in_backward = false;
  const auto without = ts::memory::static_footprint(m, plan, 1, 8);
  plan.optimizer_in_backward = true;
  const auto with = ts::memory::static_footprint(m, plan, 1, 8);
  CHECK(with.weights == without.weights);
  CHECK(with.optimizer_states == without.optimizer_states);
  CHECK(with.gradients < without.gradients);
}

// ---------------------------------------------------------------------------------------------
// Activations: Korthikanti et al. 2022 Table 2, exactly

namespace {

// A GPT layer as Korthikanti et al. evaluate it: no flash attention, dropout.
constexpr ActivationOptions kKorthikanti{false, true};

struct Dims {
  std::int64_t s, b, h, a, t;
};

ParallelPlan activation_plan(const Dims& d, bool sp, Recompute r) {
  ParallelPlan p = plan_with(d.t, 1, 1, 1);
  p.seq_len = d.s;
  p.micro_batch = d.b;
  p.sequence_parallel = sp;
  p.recompute = r;
  return p;
}

}  // namespace

TEST_CASE("GPT activations per layer reproduce Korthikanti et al. 2022 Table 2", "[memory][activations]") {
  // Dimensions chosen so that every term of the table is an integer number of bytes.
  const Dims dims[] = {{2048, 1, 12288, 96, 8}, {2048, 4, 4096, 32, 8}, {1024, 2, 2048, 16, 4}, {4096, 1, 8192, 64, 2}};
  for (const Dims& d : dims) {
    const ModelSpec m = gpt(24, d.h, d.a, 51200);
    const std::int64_t sbh = d.s * d.b * d.h;
    const std::int64_t as2b = d.a * d.s * d.s * d.b;  // 5as²b = sbh·5as/h
    INFO("s " << d.s << " b " << d.b << " h " << d.h << " a " << d.a << " t " << d.t);
    auto bytes = [&](std::int64_t t, bool sp, Recompute r) {
      return ts::memory::layer_activation_bytes(m, activation_plan({d.s, d.b, d.h, d.a, t}, sp, r), kKorthikanti)
          .count();
    };
    // No parallelism: sbh(34 + 5as/h).
    CHECK(bytes(1, false, Recompute::kNone) == 34 * sbh + 5 * as2b);
    // Tensor parallel: sbh(10 + 24/t + 5as/(ht)).
    CHECK(bytes(d.t, false, Recompute::kNone) == 10 * sbh + 24 * sbh / d.t + 5 * as2b / d.t);
    // Tensor + sequence parallel: sbh(34/t + 5as/(ht)).
    CHECK(bytes(d.t, true, Recompute::kNone) == 34 * sbh / d.t + 5 * as2b / d.t);
    // Tensor parallel + selective recompute: sbh(10 + 24/t).
    CHECK(bytes(d.t, false, Recompute::kSelective) == 10 * sbh + 24 * sbh / d.t);
    // Tensor + sequence parallel + selective recompute: sbh·34/t.
    CHECK(bytes(d.t, true, Recompute::kSelective) == 34 * sbh / d.t);
    // Full recompute: the layer input 2sbh, split by sequence parallelism.
    CHECK(bytes(d.t, false, Recompute::kFull) == 2 * sbh);
    CHECK(bytes(d.t, true, Recompute::kFull) == 2 * sbh / d.t);
    CHECK(bytes(1, false, Recompute::kFull) == 2 * sbh);
  }
}

TEST_CASE("GPT-3 175B per-layer activations, Korthikanti et al. Sec. 4.1 numbers", "[memory][activations]") {
  // s 2048, b 1, h 12288, a 96, t 8 (their Table 3 setup): with TP+SP 34sbh/t + 5as²b/t
  // = 106.9 MB + 251.7 MB; selective recompute removes the second term.
  const ModelSpec m = gpt3_175b();
  const ParallelPlan sp = activation_plan({2048, 1, 12288, 96, 8}, true, Recompute::kNone);
  CHECK(ts::memory::layer_activation_bytes(m, sp, kKorthikanti).count() == 106'954'752 + 251'658'240);
  const ParallelPlan sel = activation_plan({2048, 1, 12288, 96, 8}, true, Recompute::kSelective);
  CHECK(ts::memory::layer_activation_bytes(m, sel, kKorthikanti).count() == 106'954'752);
}

TEST_CASE("flash attention replaces the s² terms by the fp32 log-sum-exp", "[memory][activations]") {
  const ModelSpec m = gpt(24, 4096, 32, 51200);
  const std::int64_t s = 2048, b = 2, h = 4096, a = 32, t = 4;
  const std::int64_t sbh = s * b * h;
  const ActivationOptions fa{true, true};
  // No parallelism: 34sbh + 4abs.
  CHECK(ts::memory::layer_activation_bytes(m, activation_plan({s, b, h, a, 1}, false, Recompute::kNone), fa).count() ==
        34 * sbh + 4 * a * b * s);
  // TP + SP: (34sbh + 4abs)/t; selective recompute drops the log-sum-exp.
  CHECK(ts::memory::layer_activation_bytes(m, activation_plan({s, b, h, a, t}, true, Recompute::kNone), fa).count() ==
        (34 * sbh + 4 * a * b * s) / t);
  CHECK(ts::memory::layer_activation_bytes(m, activation_plan({s, b, h, a, t}, true, Recompute::kSelective), fa)
            .count() == 34 * sbh / t);
  // Without dropout the two masks (sbh each) go: 32sbh.
  CHECK(ts::memory::layer_activation_bytes(m, activation_plan({s, b, h, a, 1}, false, Recompute::kNone),
                                           ActivationOptions{true, false})
            .count() == 32 * sbh + 4 * a * b * s);
  // Without flash attention and without dropout only the softmax output remains: 2as²b.
  CHECK(ts::memory::layer_activation_bytes(m, activation_plan({s, b, h, a, 1}, false, Recompute::kNone),
                                           ActivationOptions{false, false})
            .count() == 32 * sbh + 2 * a * s * s * b);
}

TEST_CASE("Llama activations: RMSNorm, GQA, SwiGLU, flash attention, no dropout", "[memory][activations]") {
  // Per layer (footprint.cpp): norms 2·2sbh, GEMM inputs 2·2sbh, Q 2sbh, K and V 2·2sb·kv,
  // attention output 2sbh, SwiGLU gate, up and product 3·2sbf, log-sum-exp 4abs:
  // 12sbh + 4sb·kv + 6sbf + 4abs; TP splits all but the 8sbh of norm and GEMM inputs, which
  // sequence parallelism splits too.
  const ActivationOptions llama_options{true, false};
  const std::int64_t s = 4096, b = 1;
  SECTION("Llama-3 8B (kv_hidden 1024, ffn 14336)") {
    const ModelSpec m = llama3_8b();
    const std::int64_t h = 4096, kv = 1024, f = 14336, a = 32;
    const std::int64_t all = 12 * s * b * h + 4 * s * b * kv + 6 * s * b * f + 4 * a * b * s;
    CHECK(ts::memory::layer_activation_bytes(m, activation_plan({s, b, h, a, 1}, false, Recompute::kNone),
                                             llama_options)
              .count() == all);
    const std::int64_t t = 8;
    CHECK(ts::memory::layer_activation_bytes(m, activation_plan({s, b, h, a, t}, false, Recompute::kNone),
                                             llama_options)
              .count() == 8 * s * b * h + (all - 8 * s * b * h) / t);
    CHECK(ts::memory::layer_activation_bytes(m, activation_plan({s, b, h, a, t}, true, Recompute::kNone),
                                             llama_options)
              .count() == all / t);
    CHECK(ts::memory::layer_activation_bytes(m, activation_plan({s, b, h, a, t}, true, Recompute::kSelective),
                                             llama_options)
              .count() == (all - 4 * a * b * s) / t);
    // torchtitan's op policy keeps the input 2sbh, the saved matmul calls' outputs (Q, V, gate,
    // down: 2sb·(h + kv + f + h)), the attention output 2sbh and the log-sum-exp 4abs.
    CHECK(ts::memory::layer_activation_bytes(m, activation_plan({s, b, h, a, 1}, false, Recompute::kSelectiveOp),
                                             llama_options)
              .count() == 2 * s * b * h + 2 * s * b * (h + kv + f + h) + 2 * s * b * h + 4 * a * b * s);
    // FP8 linear layers keep their FP8 input (1 byte): the QKV and fc1 inputs, the attention
    // output and the SwiGLU product lose half, 2sbh + sbh + sbf in all.
    ParallelPlan fp8 = activation_plan({s, b, h, a, 1}, false, Recompute::kNone);
    fp8.dtype = ts::ir::Dtype::kFp8;
    CHECK(ts::memory::layer_activation_bytes(m, fp8, llama_options).count() ==
          all - (2 * s * b * h + s * b * h + s * b * f));
    // The model's defaults are these options (RMSNorm + SwiGLU: no dropout; flash attention).
    CHECK(ts::memory::layer_activation_bytes(m, activation_plan({s, b, h, a, t}, true, Recompute::kNone)).count() ==
          all / t);
  }
  SECTION("Llama-2 7B (no GQA): 32.125·sbh + 4abs") {
    const ModelSpec m = llama2_7b();
    const std::int64_t h = 4096, a = 32;
    // 12 + 4 + 6·11008/4096 = 32.125
    CHECK(ts::memory::layer_activation_bytes(m, activation_plan({s, b, h, a, 1}, false, Recompute::kNone),
                                             llama_options)
              .count() == 32 * s * b * h + s * b * h / 8 + 4 * a * b * s);
  }
}

TEST_CASE("eager RMSNorm and SwiGLU keep an fp32 norm input and silu's output", "[memory][activations]") {
  // Per norm 4 more bytes per element (fp32 input copy and bf16 output, 6, against the fused
  // kernel's 2-byte input); SwiGLU 2 more per MLP element (silu's output). LayerNorm/GELU models
  // are unchanged.
  const ActivationOptions o{true, false};
  const std::int64_t s = 4096, b = 1, h = 4096, f = 14336, a = 32, t = 8;
  const ModelSpec m = llama3_8b();
  ParallelPlan plan = activation_plan({s, b, h, a, t}, true, Recompute::kNone);
  const auto fused = ts::memory::layer_activations(m, plan, o);
  plan.elementwise = ts::parallel::Elementwise::kEager;
  const auto eager = ts::memory::layer_activations(m, plan, o);
  CHECK(eager.kept.count() - fused.kept.count() == (2 * 4 * s * b * h + 2 * s * b * f) / t);
  CHECK(eager.input == fused.input);
  // Selective recompute drops only the attention core: the extra stays kept. Full recompute
  // rebuilds it with the rest of the layer.
  plan.recompute = Recompute::kSelective;
  CHECK(ts::memory::layer_activations(m, plan, o).kept + fused.rematerialized ==
        eager.kept - Bytes(4 * a * b * s / t));
  plan.recompute = Recompute::kFull;
  const auto full = ts::memory::layer_activations(m, plan, o);
  CHECK(full.kept == fused.input);
  CHECK(full.kept + full.rematerialized == eager.kept);
  const ModelSpec g = gpt(24, 4096, 32, 51200);
  ParallelPlan gp = activation_plan({s, b, h, a, 1}, false, Recompute::kNone);
  const Bytes gpt_fused = ts::memory::layer_activation_bytes(g, gp, kKorthikanti);
  gp.elementwise = ts::parallel::Elementwise::kEager;
  CHECK(ts::memory::layer_activation_bytes(g, gp, kKorthikanti) == gpt_fused);
}

TEST_CASE("context parallelism splits activations by the sequence", "[memory][activations]") {
  const ModelSpec m = llama3_70b();
  ParallelPlan plan = activation_plan({8192, 1, 8192, 64, 8}, true, Recompute::kNone);
  const ActivationOptions o{true, false};
  const Bytes one = ts::memory::layer_activation_bytes(m, plan, o);
  plan.cp = 4;
  CHECK(ts::memory::layer_activation_bytes(m, plan, o).count() * 4 == one.count());
  // Without flash attention the s² term becomes (s/cp)·s: local queries against all keys.
  const ModelSpec g = gpt(24, 4096, 32, 51200);
  ParallelPlan gp = activation_plan({4096, 1, 4096, 32, 1}, false, Recompute::kNone);
  gp.cp = 2;
  const std::int64_t s = 2048, full = 4096, h = 4096, a = 32;
  CHECK(ts::memory::layer_activation_bytes(g, gp, kKorthikanti).count() == 34 * s * h + 5 * a * s * full);
}

TEST_CASE("recompute: kept, rematerialized and input add up", "[memory][activations]") {
  const ModelSpec m = llama3_8b();
  const ActivationOptions o{true, false};
  ParallelPlan plan = activation_plan({8192, 2, 4096, 32, 4}, true, Recompute::kNone);
  const auto none = ts::memory::layer_activations(m, plan, o);
  CHECK(none.rematerialized.count() == 0);
  CHECK(none.input.count() == 2 * 8192 * 2 * 4096 / 4);
  plan.recompute = Recompute::kSelective;
  const auto sel = ts::memory::layer_activations(m, plan, o);
  CHECK(sel.kept + sel.rematerialized == none.kept);
  CHECK(sel.rematerialized.count() == 4 * 32 * 2 * 8192 / 4);  // the log-sum-exp
  plan.recompute = Recompute::kFull;
  const auto full = ts::memory::layer_activations(m, plan, o);
  CHECK(full.kept == none.input);
  CHECK(full.kept + full.rematerialized == none.kept);
}

// ---------------------------------------------------------------------------------------------
// Micro-batches in flight

namespace {
ParallelPlan pipeline(std::int64_t p, std::int64_t m, Schedule schedule, std::int64_t v = 1) {
  ParallelPlan plan = plan_with(1, p, 1, 1);
  plan.micro_batch = 1;
  plan.global_batch = m;  // dp 1, micro-batch 1: m micro-batches
  plan.schedule = schedule;
  plan.vpp = v;
  return plan;
}
}  // namespace

TEST_CASE("in-flight micro-batches: GPipe holds all m", "[memory][pipeline]") {
  const ParallelPlan plan = pipeline(4, 16, Schedule::kGpipe);
  REQUIRE(plan.num_micro_batches() == 16);
  for (std::int64_t s = 0; s < 4; ++s) CHECK(ts::memory::in_flight_micro_batches(plan, s) == 16);
}

TEST_CASE("in-flight micro-batches: 1F1B holds min(p - stage, m)", "[memory][pipeline]") {
  const ParallelPlan plan = pipeline(4, 16, Schedule::k1F1B);
  CHECK(ts::memory::in_flight_micro_batches(plan, 0) == 4);
  CHECK(ts::memory::in_flight_micro_batches(plan, 1) == 3);
  CHECK(ts::memory::in_flight_micro_batches(plan, 2) == 2);
  CHECK(ts::memory::in_flight_micro_batches(plan, 3) == 1);
  const ParallelPlan few = pipeline(8, 3, Schedule::k1F1B);
  CHECK(ts::memory::in_flight_micro_batches(few, 0) == 3);
  CHECK(ts::memory::in_flight_micro_batches(few, 5) == 3);
  CHECK(ts::memory::in_flight_micro_batches(few, 6) == 2);
  CHECK(ts::memory::in_flight_micro_batches(few, 7) == 1);
  CHECK_THROWS_AS(ts::memory::in_flight_micro_batches(few, 8), ts::InternalError);
}

TEST_CASE("in-flight micro-batches: interleaved 1F1B as Megatron schedules it", "[memory][pipeline]") {
  // p 4, v 2, m 8: rank i warms up with W = 2(p - i - 1) + (v - 1)p chunk forwards, then peaks at
  // W + 1 chunk activation sets.
  const ParallelPlan plan = pipeline(4, 8, Schedule::kInterleaved, 2);
  CHECK(ts::memory::in_flight_micro_batches(plan, 0) == 11);
  CHECK(ts::memory::in_flight_micro_batches(plan, 1) == 9);
  CHECK(ts::memory::in_flight_micro_batches(plan, 2) == 7);
  CHECK(ts::memory::in_flight_micro_batches(plan, 3) == 5);
  // m = p: the replay's schedule caps the warm-up at the m·v chunk forwards, min(W, m·v) + 1
  // capped at m·v (Megatron-LM runs every forward as warm-up when m = p, all m·v on every
  // rank; the replay has not, and the count follows the replay).
  const ParallelPlan equal = pipeline(4, 4, Schedule::kInterleaved, 2);
  CHECK(ts::memory::in_flight_micro_batches(equal, 0) == 8);
  CHECK(ts::memory::in_flight_micro_batches(equal, 1) == 8);
  CHECK(ts::memory::in_flight_micro_batches(equal, 2) == 7);
  CHECK(ts::memory::in_flight_micro_batches(equal, 3) == 5);
  // v = 1 is plain 1F1B.
  const ParallelPlan v1 = pipeline(4, 8, Schedule::kInterleaved, 1);
  CHECK(ts::memory::in_flight_micro_batches(v1, 0) == 4);
  // Stage 0 holds p·(1 + (p - 1)/(p·v)) stages' worth (Korthikanti et al. 2022 Sec. 4.2.3):
  // (W + 1)/v = p + (p - 1)/v, i.e. W + 1 = p·v + p - 1 chunk sets.
  for (std::int64_t p = 2; p <= 8; ++p) {
    for (std::int64_t v = 2; v <= 4; ++v) {
      INFO("p " << p << " v " << v);
      const ParallelPlan pl = pipeline(p, 4 * p, Schedule::kInterleaved, v);
      CHECK(ts::memory::in_flight_micro_batches(pl, 0) == p * v + p - 1);
    }
  }
}

TEST_CASE("in-flight micro-batches: zero-bubble H1 as 1F1B, DualPipeV PP + 1 chunk sets", "[memory][pipeline]") {
  // deepseek-ai/DualPipe README: activations per device PP (1F1B, ZB1P) and PP + 1 (DualPipeV,
  // in chunks of its PP = 2p stages) on the first rank.
  for (std::int64_t s = 0; s < 4; ++s) {
    CHECK(ts::memory::in_flight_micro_batches(pipeline(4, 16, Schedule::kZbH1), s) == 4 - s);
  }
  CHECK(ts::memory::in_flight_micro_batches(pipeline(4, 16, Schedule::kDualPipeV), 0) == 9);
}

TEST_CASE("stage activations: per layer × layers per chunk × sets in flight", "[memory][pipeline]") {
  const ModelSpec m = llama3_8b();
  const ActivationOptions o{true, false};
  ParallelPlan plan = pipeline(4, 16, Schedule::k1F1B);
  plan.seq_len = 4096;
  const Bytes layer = ts::memory::layer_activation_bytes(m, plan, o);
  CHECK(ts::memory::stage_activation_bytes(m, plan, 0, 8, o) == layer * 8 * 4);
  CHECK(ts::memory::stage_activation_bytes(m, plan, 3, 8, o) == layer * 8 * 1);
  plan.schedule = Schedule::kInterleaved;
  plan.vpp = 2;
  // 11 sets of 4 layers = 5.5 stages' worth on stage 0.
  CHECK(ts::memory::stage_activation_bytes(m, plan, 0, 8, o) == layer * 4 * 11);
}

TEST_CASE("MoE states: routed experts split over EP and sharded over expert-DP, the rest over DP") {
  // A 2-layer model with 8 experts of width 64 (SwiGLU: 3·h·f each) beside attention.
  ts::ir::ModelSpec m;
  m.name = "tiny-moe";
  m.num_layers = 2;
  m.hidden = 128;
  m.num_heads = 4;
  m.num_kv_heads = 4;
  m.ffn_hidden = 256;
  m.vocab = 1000;
  m.norm = ts::ir::Norm::kRmsNorm;
  m.activation = ts::ir::Activation::kSwiglu;
  m.position = ts::ir::Position::kRope;
  m.linear_bias = false;
  m.moe = ts::ir::MoeSpec{8, 2, 64, 0, 0, 0, ts::ir::RouterScore::kSoftmax};
  ts::parallel::ParallelPlan p;
  p.dp = 8;
  p.ep = 4;
  p.zero_stage = 1;
  const std::int64_t experts = 2 * 8 * 3 * 128 * 64 / 4;  // two layers, 2 of 8 experts per rank
  CHECK(ts::parallel::stage_expert_parameters(m, p, 0) == experts);
  const std::int64_t all = ts::parallel::stage_parameters(m, p, 0);
  const auto f = ts::memory::static_footprint(m, p, 0, 2);
  // ZeRO-1: bf16 weights whole; fp32 m, v (8 B) of the experts over expert-DP 2, the rest over 8.
  CHECK(f.weights.count() == 2 * all);
  const std::int64_t dense = all - experts;
  CHECK(f.optimizer_states.count() == 8 * ((dense + 7) / 8 + experts / 2));
  // Dropless routing at an imbalance keeps more dispatched tokens than balanced routing.
  p.seq_len = 1024;
  const auto balanced = ts::memory::layer_activation_bytes(m, p);
  p.routing = ts::parallel::Routing::kDropless;
  p.moe_imbalance = 2.0;
  CHECK(ts::memory::layer_activation_bytes(m, p) > balanced);
}
