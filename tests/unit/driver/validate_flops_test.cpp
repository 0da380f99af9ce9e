// FLOP conventions of the published sources (sim/driver/validate.h): each formula reproduces the
// numbers its source printed from that source's own measured time or throughput.
#include <catch2/catch.hpp>

#include <cmath>

#include "sim/driver/validate.h"

using namespace ts;

namespace {

// A Megatron GPT model: MHA, 4h GELU MLP.
ir::ModelSpec gpt(std::int64_t layers, std::int64_t hidden, std::int64_t heads, std::int64_t vocab) {
  ir::ModelSpec m;
  m.name = "gpt";
  m.num_layers = layers;
  m.hidden = hidden;
  m.num_heads = heads;
  m.num_kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.vocab = vocab;
  m.max_seq_len = 2048;
  return m;
}

}  // namespace

TEST_CASE("Megatron model FLOPs: 72·B·s·L·h²·(1 + s/6h + V/12hL) for GPT (Korthikanti et al. 2022)") {
  const auto m = gpt(96, 12288, 96, 51200);
  const double B = 64, s = 2048, L = 96, h = 12288, V = 51200;
  const double expected = 72 * B * s * L * h * h * (1 + s / (6 * h) + V / (12 * h * L));
  CHECK(driver::megatron_model_flops(m, 2048, 64) == Approx(expected).epsilon(1e-12));
}

TEST_CASE("Korthikanti et al. 2022: the model FLOPs over the printed iteration time give the printed MFU") {
  // MFU = F / (N · 312 TF · t) with N GPUs (= global batch, DP = 1). Table 5 and Sec. 6.3 of the
  // paper; each pair (time, MFU %) is a row of the public validation set.
  struct Row {
    std::int64_t layers, hidden, heads, batch, gpus;
    double time_s, mfu_pct;
  };
  const Row rows[] = {
      {48, 6144, 64, 4, 8, 1.10, 41.5},         // 22B, selective recompute + SP
      {96, 12288, 96, 64, 64, 13.75, 51.4},     // 175B
      {105, 20480, 128, 280, 280, 37.83, 56.0}, // 530B
      {128, 25600, 160, 512, 512, 71.49, 56.3}, // 1T
      {105, 20480, 128, 2240, 2240, 39.15, 54.2},  // 530B, DP = 8
  };
  for (const auto& r : rows) {
    const auto m = gpt(r.layers, r.hidden, r.heads, 51200);
    const double f = driver::megatron_model_flops(m, 2048, static_cast<double>(r.batch));
    const double mfu = f / (static_cast<double>(r.gpus) * 312e12 * r.time_s) * 100;
    INFO("hidden " << r.hidden);
    CHECK(mfu == Approx(r.mfu_pct).margin(0.2));  // the paper prints one decimal
  }
}

TEST_CASE("Korthikanti et al. 2022: selective-recompute HFU adds 12·B·s²·h·L to the model FLOPs") {
  // Printed (MFU, HFU) pairs of Table 5's present-work column: HFU/MFU = hardware/model FLOPs.
  struct Row {
    std::int64_t layers, hidden, heads;
    double mfu, hfu;
  };
  const Row rows[] = {{48, 6144, 64, 41.5, 43.7}, {96, 12288, 96, 51.4, 52.8},
                      {105, 20480, 128, 56.0, 57.0}, {128, 25600, 160, 56.3, 57.0}};
  for (const auto& r : rows) {
    const auto m = gpt(r.layers, r.hidden, r.heads, 51200);
    const double ratio = driver::megatron_hardware_flops(m, 2048, 1, parallel::Recompute::kSelective) /
                         driver::megatron_model_flops(m, 2048, 1);
    INFO("hidden " << r.hidden);
    // One printed decimal on each percentage: the ratio is known to about ±0.2 %.
    CHECK(ratio == Approx(r.hfu / r.mfu).epsilon(0.003));
  }
}

TEST_CASE("Megatron hardware FLOPs with full recompute: 96·B·s·L·h²·(1 + s/6h + V/16hL) (SC'21 §5.1)") {
  const auto m = gpt(24, 2304, 24, 51200);
  const double B = 512, s = 2048, L = 24, h = 2304, V = 51200;
  const double expected = 96 * B * s * L * h * h * (1 + s / (6 * h) + V / (16 * L * h));
  CHECK(driver::megatron_hardware_flops(m, 2048, 512, parallel::Recompute::kFull) ==
        Approx(expected).epsilon(1e-12));
  CHECK(driver::megatron_hardware_flops(m, 2048, 512, parallel::Recompute::kNone) ==
        Approx(driver::megatron_model_flops(m, 2048, 512)).epsilon(1e-15));
}

TEST_CASE("Megatron FLOPs with GQA and SwiGLU follow Megatron-Core's num_floating_point_operations") {
  // 12·B·s·L·h²·((1 + kv/a + s/h) + (ffn/h)·3/2 + V/2Lh): per token and layer this is
  // 6·(2h² + 2h·kv_hidden) for the projections, 12·s·h for the scores, 18·h·ffn for the MLP.
  ir::ModelSpec m = gpt(32, 4096, 32, 128256);
  m.num_kv_heads = 8;
  m.ffn_hidden = 14336;
  m.activation = ir::Activation::kSwiglu;
  const double h = 4096, s = 8192, ffn = 14336, kvh = 1024, L = 32, V = 128256;
  const double per_token = L * (6 * (2 * h * h + 2 * h * kvh) + 12 * s * h + 18 * h * ffn) + 6 * V * h;
  CHECK(driver::megatron_model_flops(m, 8192, 1) == Approx(per_token * s).epsilon(1e-12));
}

TEST_CASE("6N convention: MosaicML's MFU = (6N + 12·L·d·s)·tokens/s / (GPUs · peak)") {
  // llm-foundry benchmarking README, MPT-70B on 256 H100 at seq 2048: 265,149 tokens/s,
  // NumParams 64,862,437,376, MFU 42.42 % of 989 TF (public validation set row 74).
  auto m = gpt(80, 8192, 64, 50368);
  const double per_s = driver::six_n_flops(64862437376.0, m, 2048, 265149, false, 0.0);
  CHECK(per_s / (256 * 989e12) * 100 == Approx(42.42).margin(0.05));
  // HFU with activation checkpointing: 8N + 16·L·d·s, i.e. 4/3 of the MFU FLOPs (printed 56.56).
  const double hw = driver::six_n_flops(64862437376.0, m, 2048, 265149, false, 1.0);
  CHECK(hw / (256 * 989e12) * 100 == Approx(56.56).margin(0.05));
  // Halving the attention term for causal masks leaves 6·L·d·s.
  const double halved = driver::six_n_flops(1e9, m, 2048, 1, true, 0.0);
  CHECK(halved == Approx(6e9 + 6.0 * 80 * 8192 * 2048).epsilon(1e-12));
}

TEST_CASE("flop_convention reads the family, hardware and causal halving from tflops_kind and notes") {
  driver::PublishedRun r;
  const auto vocab = config::load_reading_vocabulary();
  r.tflops_kind = "hardware (Megatron formula 96*B*s*l*h^2*(1+s/6h+V/16lh) counts the recompute forward pass)";
  auto c = driver::flop_convention(r, vocab);
  CHECK(c.family == driver::FlopFamily::kMegatron);
  CHECK(c.hardware);

  r.tflops_kind = "model (6*seqlen*params + 12*L*h*seqlen^2, attention not halved for causal)";
  c = driver::flop_convention(r, vocab);
  CHECK(c.family == driver::FlopFamily::kSixN);
  CHECK_FALSE(c.hardware);
  CHECK_FALSE(c.causal_halved);

  r.tflops_kind = "model";
  r.notes = "MFU = (6N + 12*L*d*s)*tokens/s / (GPUs*peak), attention term not halved for causal";
  c = driver::flop_convention(r, vocab);
  CHECK(c.family == driver::FlopFamily::kSixN);
  CHECK_FALSE(c.causal_halved);

  r.notes = "model FLOPs 6·N per token plus attention, causal-halved";
  c = driver::flop_convention(r, vocab);
  CHECK(c.family == driver::FlopFamily::kSixN);
  CHECK(c.causal_halved);

  // "96*B" or "16 nodes" are not 6N.
  r.tflops_kind = "model";
  r.notes = "aggregate over 16 nodes, 96*B*s formula";
  c = driver::flop_convention(r, vocab);
  CHECK(c.family == driver::FlopFamily::kMegatron);
}

TEST_CASE("hardware FLOPs under the op policy add the matmuls it reruns") {
  // GPT layer: fused QKV (1st call, saved), output (2nd, rerun), up (3rd, saved), down (4th,
  // rerun): 2·(h² + 4h·h) FLOPs per token and layer again.
  const auto m = gpt(24, 2048, 16, 51200);
  const double s = 2048, B = 4, L = 24, h = 2048;
  const double extra = driver::megatron_hardware_flops(m, 2048, B, parallel::Recompute::kSelectiveOp) -
                       driver::megatron_model_flops(m, 2048, B);
  CHECK(extra == Approx(2 * B * s * L * (h * h + 4 * h * h)));
}
