// The calibrated compute model against the published measurements it was fitted to, and held out.
//
// Each GPU's model is fitted on all of its fit points, and again without every 3rd point of each
// family (GEMM; attention per kernel; memory) counted in file order; the left-out points are
// then predicted by the second fit. Error = predicted time / measured time − 1.
// `test_config "[.report]"` prints the per-point table behind these numbers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "sim/compute/calibrated_model.h"
#include "sim/compute/fit_report.h"
#include "sim/config/calibration_loader.h"

namespace {

using namespace ts;
using namespace ts::compute;

constexpr int kHoldoutEvery = 3;
const char* const kGpus[] = {"A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"};

bool starts_with(const std::string& s, const char* p) { return s.rfind(p, 0) == 0; }

struct Errors {
  std::vector<double> fit, held;
};

// |errors| of the fit points of the families starting with `prefix`.
Errors errors(const FitReport& r, const char* prefix) {
  Errors e;
  for (const auto& p : r.points) {
    if (p.check || !starts_with(p.family, prefix)) continue;
    e.fit.push_back(std::fabs(p.fitted_error));
    if (p.held_out) e.held.push_back(std::fabs(p.held_out_error));
  }
  return e;
}

const PointError* find_point(const FitReport& r, const std::string& family, const std::string& label,
                             double measured) {
  for (const auto& p : r.points) {
    if (p.family == family && p.label == label && std::fabs(p.measured - measured) < 0.05) return &p;
  }
  return nullptr;
}

}  // namespace

TEST_CASE("GEMM model: median error <= 10% on fitted and on held-out published points, per GPU") {
  for (const char* gpu : kGpus) {
    INFO(gpu);
    const auto cal = config::load_calibration(gpu);
    const auto r = evaluate_fit(*cal, kHoldoutEvery);
    const Errors all = errors(r, "gemm ");
    REQUIRE(all.fit.size() >= 10);
    REQUIRE(all.held.size() >= 3);
    CHECK(median(all.fit) <= 0.10);
    CHECK(median(all.held) <= 0.10);
    // Tensor-core dtypes separately (the ones training uses).
    const Errors b16 = errors(r, "gemm bf16/fp16");
    CHECK(median(b16.fit) <= 0.10);
    if (cal->gpu.supports(ir::Dtype::kFp8)) {
      const Errors f8 = errors(r, "gemm fp8");
      CHECK(median(f8.fit) <= 0.10);
      CHECK(median(f8.held) <= 0.10);
    }
    // FP32 (SIMT) rests on three points of one unlocked-clock run whose 2048³ SGEMM reaches a
    // third of peak, which no tile or wave count explains: a looser bound.
    CHECK(median(errors(r, "gemm fp32").fit) <= 0.20);
  }
}

TEST_CASE("GEMM model reproduces named published and measured points, and stays under the best-shape ceilings") {
  struct Case {
    const char* gpu;
    const char* family;
    const char* label;
    double tflops;
    // The best of a brute-force shape scan (not fitted, role "check"): the model may be up to 20%
    // slower. The H100 best shape, 2048x2048x13312, has 128 output tiles, under one wave on 132
    // SMs, where cuBLAS splits K; the wave model has no split-K and is slowest there.
    bool ceiling;
    // Bound on |error| of a fitted point. The Hopper fit is mostly the tables measured with
    // tools/calibrate, whose sweeps run for minutes: on one H100 the same 4096^3 bf16 GEMM took
    // 769.5 TFLOP/s at the start of the square sweep and 669.1 in the zoo sweep that followed
    // (13 % apart), so a short published sweep is held to 12 %, the rest to 10 %.
    double bound = 0.10;
  };
  const Case cases[] = {
      // Azure cuBLASLt, A100-SXM4-80GB fp16
      {"A100-SXM4-80GB", "gemm bf16/fp16", "8192x8192x8192 fp16", 253.7, false},
      {"A100-SXM4-80GB", "gemm bf16/fp16", "1024x1024x1024 fp16", 119.4, false},
      // waynehacking8 cuBLAS, H100 SXM fp16 (a short sweep)
      {"H100-SXM5-80GB", "gemm bf16/fp16", "4096x4096x4096 fp16", 726.4, false, 0.12},
      // triton#2339: 2023 cuBLAS, H100 fp16
      {"H100-SXM5-80GB", "gemm bf16/fp16", "2048x8192x8192 fp16", 721.6, false},
      // ml-engineering MAMF (best shape), A100 and H100 bf16
      {"A100-SXM4-80GB", "gemm bf16/fp16", "1024x10240x5120 bf16", 271.2, true},
      {"H100-SXM5-80GB", "gemm bf16/fp16", "2048x2048x13312 bf16", 794.5, true},
      // Azure cuBLASLt fp8
      {"H100-SXM5-80GB", "gemm fp8", "8192x8192x8192 fp8", 1290.1, false},
      {"H200-SXM-141GB", "gemm fp8", "16384x16384x16384 fp8", 1366.3, false},
      // Measured with tools/calibrate (sustained sweeps), H100 and H200 bf16 layer shapes
      {"H100-SXM5-80GB", "gemm bf16/fp16", "4096x4096x4096 bf16", 669.1, false},
      {"H200-SXM-141GB", "gemm bf16/fp16", "8192x8192x8192 bf16", 679.3, false},
  };
  for (const auto& c : cases) {
    INFO(c.gpu << " " << c.label);
    const auto r = evaluate_fit(*config::load_calibration(c.gpu), kHoldoutEvery);
    const PointError* p = find_point(r, c.family, c.label, c.tflops);
    REQUIRE(p != nullptr);
    if (c.ceiling) {
      // fitted_error is the time error: >= 0 means the model is no faster than the ceiling.
      CHECK(p->fitted_error >= 0);
      CHECK(p->fitted_error <= 0.20);
    } else {
      CHECK(std::fabs(p->fitted_error) <= c.bound);
    }
    if (p->held_out) CHECK(std::fabs(p->held_out_error) <= c.bound);
  }
}

TEST_CASE("GEMM model against DeepGEMM's batched (grouped) FP8 GEMMs on H800, not fitted: within 15%") {
  const auto r = evaluate_fit(*config::load_calibration("H100-SXM5-80GB"), kHoldoutEvery);
  int n = 0;
  for (const auto& p : r.points) {
    if (!p.check || p.table.find("DeepGEMM") == std::string::npos) continue;
    if (p.label.find(" batch ") == std::string::npos) continue;
    INFO(p.label);
    CHECK(std::fabs(p.fitted_error) <= 0.15);
    ++n;
  }
  CHECK(n == 4);
}

// Grouped expert GEMMs measured with tools/calibrate/bench_moe.py (torch._grouped_mm bf16,
// torch._scaled_grouped_mm fp8) on the H100 and the H200. Priced by the dense fit, groups of at
// least 2,048 rows (every dimension >= 2048) run as it predicts, smaller groups (128-1,536
// tokens per expert) slower than it predicts (memory-bound tiles that cannot pull the
// streaming bandwidth). The grouped kernel's own fit (its a, b, c and HBM floor) follows both.
TEST_CASE("grouped expert GEMMs: the dense fit is fast on small groups, the grouped fit is not") {
  for (const char* gpu : {"H100-SXM5-80GB", "H200-SXM-141GB"}) {
    INFO(gpu);
    const auto cal = config::load_calibration(gpu);
    const auto r = evaluate_fit(*cal, kHoldoutEvery);
    REQUIRE(r.fitted.grouped.fitted);
    // The grouped floor sits below the streaming rate (the mechanism), not at an extreme.
    CHECK(r.fitted.grouped.memory_bps < 0.9 * r.fitted.memory.achievable_bps);
    CHECK(r.fitted.grouped.memory_bps > 0.3 * r.fitted.memory.achievable_bps);
    std::vector<double> dense_small, dense_large, grouped_small, grouped_large, held;
    std::vector<double> grouped_small_signed;
    for (const auto& t : cal->gemm) {
      if (t.kernel != GemmKernel::kGrouped || t.derived) continue;
      for (const auto& pt : t.points) {
        GemmShape s{pt.m, pt.n, pt.k, pt.batch, pt.dtype};
        const double measured_s = s.flops().value() / (pt.tflops * 1e12);
        const double dense = predict_gemm(r.fitted.gemm, cal->gpu, cal->gemm_tiles,
                                          r.fitted.memory.achievable_bps, s).seconds / measured_s - 1.0;
        s.grouped = true;
        const double grouped = predict_gemm(r.fitted, *cal, s).seconds / measured_s - 1.0;
        const bool large = std::min({pt.m, pt.n, pt.k}) >= 2048;
        (large ? dense_large : dense_small).push_back(dense);
        (large ? grouped_large : grouped_small).push_back(std::fabs(grouped));
        if (!large) grouped_small_signed.push_back(grouped);
      }
    }
    for (const auto& p : r.points) {
      if (p.family.rfind("gemm grouped", 0) == 0 && p.held_out) held.push_back(std::fabs(p.held_out_error));
    }
    REQUIRE(dense_large.size() >= 50);
    REQUIRE(dense_small.size() >= 50);
    std::vector<double> abs_large;
    for (double e : dense_large) abs_large.push_back(std::fabs(e));
    CHECK(median(abs_large) <= 0.10);
    CHECK(median(dense_small) < -0.10);  // the dense fit's time is shorter than measured
    // Unbiased on small groups (the dense fit: -13 % to -44 % by size and dtype), with a spread
    // of about 10 % per point.
    CHECK(std::fabs(median(grouped_small_signed)) <= 0.05);
    CHECK(median(grouped_small) <= 0.12);
    CHECK(median(grouped_large) <= 0.10);
    REQUIRE(held.size() >= 30);
    CHECK(median(held) <= 0.12);
  }
}

// A GPU without grouped measurements prices grouped GEMMs by the dense fit (A100); Blackwell
// takes the H100's grouped points as derived (its imports move every GEMM table).
TEST_CASE("grouped GEMMs without grouped points use the dense fit, Blackwell derives them") {
  const auto a100 = config::load_calibration("A100-SXM4-80GB");
  const FittedModel fa = fit(*a100);
  CHECK_FALSE(fa.grouped.fitted);
  GemmShape s{256, 1536, 4096, 16, ir::Dtype::kBf16};
  const double dense = predict_gemm(fa, *a100, s).seconds;
  s.grouped = true;
  CHECK(predict_gemm(fa, *a100, s).seconds == dense);
  const auto b200 = config::load_calibration("B200-SXM-180GB");
  const FittedModel fb = fit(*b200);
  CHECK(fb.grouped.fitted);
  bool derived = false;
  for (const auto& t : b200->gemm) derived = derived || (t.kernel == GemmKernel::kGrouped && t.derived);
  CHECK(derived);
}

// Eager MoE permutation kernels (bench_moe.py; index_select, index_add_, softmax + top-k) run far
// below the streaming rate; their fitted rates are the means of their points.
TEST_CASE("eager MoE permutation and router rates sit below the streaming rate") {
  for (const char* gpu : {"H100-SXM5-80GB", "H200-SXM-141GB"}) {
    INFO(gpu);
    const auto r = evaluate_fit(*config::load_calibration(gpu), kHoldoutEvery);
    const auto& m = r.fitted.memory;
    CHECK(m.moe_points >= 24);
    CHECK(m.moe_gather_bps < m.achievable_bps);
    CHECK(m.moe_combine_bps < 0.5 * m.achievable_bps);
    CHECK(m.moe_router_bps < 0.15 * m.achievable_bps);
    for (const auto& p : r.points) {
      if (p.family.rfind("memory moe_", 0) == 0) {
        INFO(p.label);
        CHECK_FALSE(p.check);
        CHECK(std::fabs(p.fitted_error) <= 0.20);
      }
    }
  }
}

TEST_CASE("attention model: median error <= 10% per kernel and direction, fitted and held out") {
  for (const char* gpu : kGpus) {
    INFO(gpu);
    const auto r = evaluate_fit(*config::load_calibration(gpu), kHoldoutEvery);
    int families = 0;
    for (const auto& s : r.summary()) {
      if (!starts_with(s.family, "attention ")) continue;
      INFO(s.family);
      ++families;
      // FlashAttention-1 and the Triton FlashAttention are published only as forward+backward
      // sums and take the forward share of a shape from FlashAttention-2 (the direction split),
      // whose balance of forward and backward is not theirs: they are held to 15%.
      const bool older = s.family.find("FlashAttention-1") != std::string::npos ||
                         s.family.find("FlashAttention-Triton") != std::string::npos;
      const double bound = older ? 0.15 : 0.10;
      if (s.fit_points > 0) {
        CHECK(s.median_fit <= bound);
        CHECK(s.max_fit <= 0.30);
      }
      if (s.held_out_points > 0) CHECK(s.median_held_out <= bound);
      if (s.check_points > 0) CHECK(s.median_check <= 0.10);  // tritonbench FA3 re-run
    }
    CHECK(families >= 1);
  }
}

TEST_CASE("attention model reproduces named FlashAttention points within 10%") {
  struct Case {
    const char* gpu;
    const char* family;
    const char* label;
    double tflops;
  };
  const Case cases[] = {
      {"A100-SXM4-80GB", "attention FlashAttention-2 fwd+bwd", "non-causal d=128 seq=16384 batch=1 heads=16", 203},
      {"A100-SXM4-80GB", "attention FlashAttention-2 fwd+bwd", "causal d=128 seq=2048 batch=8 heads=16", 155},
      {"H100-SXM5-80GB", "attention FlashAttention-3 fwd", "causal d=128 seq=16384 batch=1 heads=16", 616},
      {"H100-SXM5-80GB", "attention FlashAttention-3 bwd", "non-causal d=128 seq=8192 batch=2 heads=16", 559},
      {"H100-SXM5-80GB", "attention FlashAttention-2 fwd+bwd", "causal d=128 seq=4096 batch=4 heads=16", 294},
  };
  for (const auto& c : cases) {
    INFO(c.gpu << " " << c.family << " " << c.label);
    const auto r = evaluate_fit(*config::load_calibration(c.gpu), kHoldoutEvery);
    const PointError* p = find_point(r, c.family, c.label, c.tflops);
    REQUIRE(p != nullptr);
    CHECK(std::fabs(p->fitted_error) <= 0.10);
  }
}

TEST_CASE("causal forward+backward on H100 (not in any single-direction table) is predicted by fwd + bwd") {
  // FA2 on H100: forward and backward tables hold no causal backward point, yet the causal
  // forward+backward points are reproduced by the sum of the two direction models.
  const auto r = evaluate_fit(*config::load_calibration("H100-SXM5-80GB"), kHoldoutEvery);
  std::vector<double> e;
  for (const auto& p : r.points) {
    if (p.family == "attention FlashAttention-2 fwd+bwd" && starts_with(p.label, "causal")) {
      e.push_back(std::fabs(p.fitted_error));
    }
  }
  REQUIRE(e.size() == 12);
  CHECK(median(e) <= 0.10);
}

TEST_CASE("memory-bound model: every load+store streaming measurement within 10% of B_hbm") {
  for (const char* gpu : kGpus) {
    INFO(gpu);
    const auto cal = config::load_calibration(gpu);
    const auto r = evaluate_fit(*cal, kHoldoutEvery);
    const Errors e = errors(r, "memory load_store");
    REQUIRE(!e.fit.empty());
    for (double x : e.fit) CHECK(x <= 0.10);
    // Achievable bandwidth is 75-95% of the datasheet (BabelStream-class kernels).
    const double frac = r.fitted.memory.achievable_bps / cal->gpu.memory_bandwidth.bytes_per_s();
    CHECK(frac > 0.75);
    CHECK(frac < 0.95);
  }
}

// PyTorch's native LayerNorm (Liger-Kernel's torch.nn.LayerNorm timings on the A100-SXM4-80GB,
// imported by the other GPUs at the same share of the spec bandwidth): the forward reaches about
// 60 % of the streaming rate and the backward (3 passes in the time forward+backward adds) about
// 40 %; the H100 NVL measurement, scaled, checks the Hopper transfer.
TEST_CASE(
    "native LayerNorm: measured rates below streaming, backward below forward, on every GPU") {
  for (const char* gpu : kGpus) {
    INFO(gpu);
    const auto cal = config::load_calibration(gpu);
    const auto r = evaluate_fit(*cal, kHoldoutEvery);
    const auto& m = r.fitted.memory;
    // Three hidden sizes from Liger-Kernel (A100, imported by the H100s), two measured on H200.
    REQUIRE(m.native_norm_points >= 4);
    const double fwd = m.native_norm_fwd_bps / m.achievable_bps;
    const double bwd = m.native_norm_bwd_bps / m.achievable_bps;
    CHECK(fwd > 0.5);
    CHECK(fwd < 0.75);
    CHECK(bwd > 0.35);
    CHECK(bwd < fwd);
    // Forward and forward+backward points are reproduced within 10 % (checks within 15 %).
    for (const std::string family : {"memory norm_forward", "memory norm_forward_backward"}) {
      std::size_t fitted = 0;
      for (const auto& p : r.points) {
        if (p.family != family) continue;
        CHECK(std::fabs(p.fitted_error) <= (p.check ? 0.15 : 0.10));
        if (!p.check) ++fitted;
      }
      CHECK(fitted == m.native_norm_points / 2);
    }
    const auto model = make_calibrated_model(cal);
    const Bytes moved = Bytes::gb(1);
    CHECK(model->memory_bound(moved, MemoryKernel::kNativeNormForward).seconds() ==
          Approx(moved.real() / m.native_norm_fwd_bps + m.launch_s));
    CHECK(model->memory_bound(moved, MemoryKernel::kNativeNormBackward) >
          model->memory_bound(moved, MemoryKernel::kNativeNormForward));
  }
}

namespace {

// Forward GEMMs of one transformer layer (Megatron split over `tp`), as (M, N, K): QKV, attention
// output, MLP up (gate+up for SwiGLU) and down. Tokens M = micro-batch × sequence.
struct LayerGemm {
  std::int64_t m, n, k;
};
std::vector<LayerGemm> layer_gemms(std::int64_t tokens, std::int64_t hidden, std::int64_t heads,
                                   std::int64_t kv_heads, std::int64_t ffn, bool swiglu, std::int64_t tp) {
  const std::int64_t d = hidden / heads;
  return {{tokens, (hidden + 2 * kv_heads * d) / tp, hidden},
          {tokens, hidden, hidden / tp},
          {tokens, (swiglu ? 2 : 1) * ffn / tp, hidden},
          {tokens, hidden, ffn / tp}};
}

double layer_efficiency(const CalibratedModel& m, const std::vector<LayerGemm>& gemms, ir::Dtype dtype) {
  double flops = 0, seconds = 0;
  for (const auto& g : gemms) {
    const GemmShape s{g.m, g.n, g.k, 1, dtype};
    flops += s.flops().value();
    seconds += m.gemm(s).seconds();
  }
  return flops / seconds / m.calibration().gpu.peak(dtype).per_s();
}

}  // namespace

TEST_CASE("zoo-scale layers get realistic GEMM efficiency: a 7B layer on 1 GPU and a 405B layer at TP 8") {
  // Published training MFU of such runs is 35-55% including attention, communication and
  // bubbles; the GEMMs alone run at 60-88% of the bf16 peak (MAMF: A100 87%, H100 80%).
  for (const char* gpu : {"A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"}) {
    INFO(gpu);
    const auto model = make_calibrated_model(config::load_calibration(gpu));
    // llama2-7b, seq 4096, micro-batch 1, TP 1.
    const double e7 = layer_efficiency(*model, layer_gemms(4096, 4096, 32, 32, 11008, true, 1), ir::Dtype::kBf16);
    // llama3-405b, seq 8192, micro-batch 1, TP 8.
    const double e405 =
        layer_efficiency(*model, layer_gemms(8192, 16384, 128, 8, 53248, true, 8), ir::Dtype::kBf16);
    CHECK(e7 > 0.60);
    CHECK(e7 < 0.88);
    CHECK(e405 > 0.60);
    CHECK(e405 < 0.88);
  }
  // FP8 on Hopper: faster than bf16, and below the FP8 MAMF (71% of the fp8 peak) plus margin.
  const auto h100 = make_calibrated_model(config::load_calibration("H100-SXM5-80GB"));
  const auto gemms = layer_gemms(8192, 16384, 128, 8, 53248, true, 8);
  const double e8 = layer_efficiency(*h100, gemms, ir::Dtype::kFp8);
  const double eb = layer_efficiency(*h100, gemms, ir::Dtype::kBf16);
  CHECK(e8 * 1979 > 1.3 * eb * 989);
  CHECK(e8 < 0.80);
}

TEST_CASE("H200 runs compute as an H100 and memory-bound kernels faster") {
  const auto h100 = make_calibrated_model(config::load_calibration("H100-SXM5-80GB"));
  const auto h200 = make_calibrated_model(config::load_calibration("H200-SXM-141GB"));
  // Same GH100 die and clocks: the H200's own GEMM measurements (tools/calibrate, 679 TFLOP/s at
  // 8192^3 under sustained load) and the H100's published sweeps (713-762) agree within 10 %.
  const GemmShape big{8192, 8192, 8192, 1, ir::Dtype::kBf16};
  CHECK(h200->gemm(big).seconds() == Approx(h100->gemm(big).seconds()).epsilon(0.10));
  const Bytes moved = Bytes::gb(1);
  // 4.8 vs 3.35 TB/s datasheet; BabelStream 4.08 vs 2.94 TB/s.
  const auto stream = [&](const CalibratedModel& m) {
    return m.memory_bound(moved, MemoryKernel::kStreaming).seconds();
  };
  CHECK(stream(*h100) / stream(*h200) > 1.3);
}

TEST_CASE("FP8 attention takes its own fit where measured, else bf16") {
  // cudnn-frontend's SDPA benchmark on GB200 (calibration/sources/attention.csv): Llama 3.1
  // shape, causal, 8k tokens; bf16 1574 / 1332 and fp8 2047 / 1454 TFLOP/s forward / backward.
  const auto gb200 = make_calibrated_model(config::load_calibration("GB200-NVL-186GB"));
  REQUIRE(gb200->fp8_attention_calibrated());
  AttentionShape s;
  s.batch = 2;
  s.heads = 64;
  s.kv_heads = 8;
  s.seq_q = s.seq_kv = 8192;
  s.head_dim = 128;
  s.causal = true;
  for (const auto& [dir, measured_fp8] : {std::pair{Direction::kForward, 2047.0},
                                          std::pair{Direction::kBackward, 1454.0}}) {
    s.direction = dir;
    s.dtype = ir::Dtype::kBf16;
    const double bf16 = gb200->attention(s).seconds();
    s.dtype = ir::Dtype::kFp8;
    const double fp8 = gb200->attention(s).seconds();
    CHECK(fp8 < bf16);
    CHECK(s.flops().value() / fp8 * 1e-12 == Approx(measured_fp8).epsilon(0.12));
  }
  // No FP8 attention is measured on the H100: an fp8 shape takes the bf16 time.
  const auto h100 = make_calibrated_model(config::load_calibration("H100-SXM5-80GB"));
  CHECK_FALSE(h100->fp8_attention_calibrated());
  s.dtype = ir::Dtype::kFp8;
  const double fp8 = h100->attention(s).seconds();
  s.dtype = ir::Dtype::kBf16;
  CHECK(fp8 == h100->attention(s).seconds());
}

TEST_CASE("MLA and sliding-window attention are priced from their own measurements") {
  // cudnn-frontend's SDPA benchmark on GB200 (calibration/sources/attention.csv).
  const auto cal = config::load_calibration("GB200-NVL-186GB");
  const auto gb200 = make_calibrated_model(cal);
  // DeepSeek-V3 shape, causal, 8k tokens: 1585 / 1193 TFLOP/s forward / backward (cuDNN's
  // count, QKᵀ at 192 and PV at 128), priced by the kernel's fit of MLA shapes.
  AttentionShape m;
  m.batch = 2;
  m.heads = m.kv_heads = 128;
  m.seq_q = m.seq_kv = 8192;
  m.head_dim = 192;
  m.head_dim_v = 128;
  m.causal = true;
  for (const auto& [dir, measured] : {std::pair{Direction::kForward, 1585.0},
                                      std::pair{Direction::kBackward, 1193.0}}) {
    m.direction = dir;
    CHECK(m.flops().value() / gb200->attention(m).seconds() * 1e-12 == Approx(measured).epsilon(0.12));
  }
  REQUIRE(gb200->fitted().find_attention("cuDNN SDPA", ir::Dtype::kBf16, 0, 128) != nullptr);
  REQUIRE(gb200->fitted().find_attention("cuDNN SDPA", ir::Dtype::kFp8, 0, 128) != nullptr);
  // A kernel without such points prices values as wide as the queries (the former pricing).
  const auto h100_mla = make_calibrated_model(config::load_calibration("H100-SXM5-80GB"));
  const double narrow = h100_mla->attention(m).seconds();
  AttentionShape wide = m;
  wide.head_dim_v = 0;
  CHECK(narrow == h100_mla->attention(wide).seconds());
  // GPT-OSS's banded layers: window 128, head dim 64, 16k tokens, 167 / 188 TFLOP/s, a tenth of
  // the full kernel's rate; the windowed fit prices them. The full fit over the blocks the
  // window reaches (two per query block) comes within 25 %: the block count, not a lower
  // efficiency, explains most of the low rate.
  AttentionShape w;
  w.batch = 2;
  w.heads = w.kv_heads = 128;
  w.seq_q = w.seq_kv = 16384;
  w.head_dim = 64;
  w.causal = true;
  w.window = 128;
  const AttentionParams* windowed = gb200->fitted().find_attention("cuDNN SDPA", ir::Dtype::kBf16, 128);
  REQUIRE(windowed != nullptr);
  const AttentionParams* full = gb200->fitted().find_attention("cuDNN SDPA");
  REQUIRE(full != nullptr);
  for (const auto& [dir, measured] : {std::pair{Direction::kForward, 167.0},
                                      std::pair{Direction::kBackward, 188.0}}) {
    w.direction = dir;
    const double t = gb200->attention(w).seconds();
    CHECK(w.flops().value() / t * 1e-12 == Approx(measured).epsilon(0.12));
    CHECK(predict_attention(*full, w) == Approx(t).epsilon(0.25));
  }
  // A window the calibration has not measured takes the full fit over its blocks.
  w.window = 256;
  CHECK(gb200->attention(w).seconds() == Approx(predict_attention(*full, w)).epsilon(1e-6));
  // The H100 has no windowed table: the full fit over the window's blocks.
  const auto h100 = make_calibrated_model(config::load_calibration("H100-SXM5-80GB"));
  w.window = 128;
  CHECK(h100->fitted().find_attention(h100->attention_kernel(), ir::Dtype::kBf16, 128) == nullptr);
  w.window = 0;
  const double h100_full = h100->attention(w).seconds();
  w.window = 128;
  CHECK(h100->attention(w).seconds() < 0.1 * h100_full);
}

TEST_CASE("fused norms take cuDNN's measured rates where published, else stream") {
  // cudnn-frontend's norm benchmark (calibration/sources/memory_kernels.csv): RMSNorm forward
  // 5840-6420 GB/s on GB200, backward 4180-6190 GB/s; on H200 3310-3850 and 3090-3800.
  for (const char* gpu : {"GB200-NVL-186GB", "GB300-NVL-279GB", "H200-SXM-141GB", "B200-SXM-180GB"}) {
    INFO(gpu);
    const auto cal = config::load_calibration(gpu);
    const auto m = make_calibrated_model(cal);
    const auto& mem = m->fitted().memory;
    CHECK(mem.fused_norm_points >= 16);
    CHECK(mem.fused_norm_fwd_bps < mem.achievable_bps);
    CHECK(mem.fused_norm_bwd_bps < mem.fused_norm_fwd_bps);
    const double spec = cal->gpu.memory_bandwidth.bytes_per_s();
    CHECK(mem.fused_norm_fwd_bps / spec > 0.6);
    CHECK(mem.fused_norm_fwd_bps / spec < 0.85);
    const Bytes moved(1LL << 30);
    CHECK(m->memory_bound(moved, MemoryKernel::kFusedNormBackward) >
          m->memory_bound(moved, MemoryKernel::kStreaming));
  }
  const auto h100 = make_calibrated_model(config::load_calibration("H100-SXM5-80GB"));
  const Bytes moved(1LL << 30);
  CHECK(h100->fitted().memory.fused_norm_points == 0);
  CHECK(h100->memory_bound(moved, MemoryKernel::kFusedNormForward) ==
        h100->memory_bound(moved, MemoryKernel::kStreaming));
}
