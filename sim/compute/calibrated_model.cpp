// Calibrated compute model: kernel times from the fitted parameters (calibrated_model.h).
#include "sim/compute/calibrated_model.h"

#include <algorithm>
#include <limits>

#include "sim/base/diagnostic.h"
#include "sim/compute/kernel_features.h"

namespace ts::compute {

const char* attention_pass_name(AttentionPass p) {
  switch (p) {
    case AttentionPass::kForward: return "fwd";
    case AttentionPass::kBackward: return "bwd";
    case AttentionPass::kForwardBackward: return "fwd+bwd";
  }
  return "?";
}

const char* memory_pattern_name(MemoryPattern p) {
  switch (p) {
    case MemoryPattern::kLoadStore: return "load_store";
    case MemoryPattern::kLoad: return "load";
    case MemoryPattern::kStore: return "store";
    case MemoryPattern::kNormForward:
      return "norm_forward";
    case MemoryPattern::kNormForwardBackward:
      return "norm_forward_backward";
    case MemoryPattern::kFusedNormForward: return "fused_norm_forward";
    case MemoryPattern::kFusedNormBackward: return "fused_norm_backward";
    case MemoryPattern::kMoeGather: return "moe_gather";
    case MemoryPattern::kMoeCombine: return "moe_combine";
    case MemoryPattern::kMoeRouter: return "moe_router";
  }
  return "?";
}

bool is_moe_pattern(MemoryPattern p) {
  return p == MemoryPattern::kMoeGather || p == MemoryPattern::kMoeCombine || p == MemoryPattern::kMoeRouter;
}

std::size_t moe_kernel(MemoryPattern p) {
  return p == MemoryPattern::kMoeGather ? 0 : p == MemoryPattern::kMoeCombine ? 1 : 2;
}

bool is_norm_pattern(MemoryPattern p) {
  return p == MemoryPattern::kNormForward || p == MemoryPattern::kNormForwardBackward;
}

bool is_fused_norm_pattern(MemoryPattern p) {
  return p == MemoryPattern::kFusedNormForward || p == MemoryPattern::kFusedNormBackward;
}

double MemoryParams::bps(MemoryKernel kernel) const {
  switch (kernel) {
    case MemoryKernel::kStreaming:
      return achievable_bps;
    case MemoryKernel::kFusedNormForward: return fused_norm_fwd_bps;
    case MemoryKernel::kFusedNormBackward: return fused_norm_bwd_bps;
    case MemoryKernel::kNativeNormForward: return native_norm_fwd_bps;
    case MemoryKernel::kNativeNormBackward: return native_norm_bwd_bps;
    case MemoryKernel::kMoeGather: return moe_gather_bps;
    case MemoryKernel::kMoeCombine: return moe_combine_bps;
    case MemoryKernel::kMoeRouter: return moe_router_bps;
  }
  return achievable_bps;
}

double MemoryParams::predicted_bps(MemoryPattern pattern) const {
  switch (pattern) {
    case MemoryPattern::kNormForward:
      return bps(MemoryKernel::kNativeNormForward);
    case MemoryPattern::kNormForwardBackward:
      // 5 passes in the time of the forward's 2 and the backward's 3.
      return 5.0 / (2.0 / bps(MemoryKernel::kNativeNormForward) +
                    3.0 / bps(MemoryKernel::kNativeNormBackward));
    case MemoryPattern::kFusedNormForward: return bps(MemoryKernel::kFusedNormForward);
    case MemoryPattern::kFusedNormBackward: return bps(MemoryKernel::kFusedNormBackward);
    case MemoryPattern::kMoeGather: return bps(MemoryKernel::kMoeGather);
    case MemoryPattern::kMoeCombine: return bps(MemoryKernel::kMoeCombine);
    case MemoryPattern::kMoeRouter: return bps(MemoryKernel::kMoeRouter);
    case MemoryPattern::kLoadStore:
    case MemoryPattern::kLoad:
    case MemoryPattern::kStore:
      return achievable_bps;
  }
  return achievable_bps;
}

GemmClass gemm_class(ir::Dtype d) {
  switch (d) {
    case ir::Dtype::kBf16: return GemmClass::k16Bit;
    case ir::Dtype::kFp16: return GemmClass::k16Bit;
    case ir::Dtype::kFp8: return GemmClass::kFp8;
    case ir::Dtype::kFp32: return GemmClass::kFp32;
    // No MXFP8 or NVFP4 GEMM table is in the sources: they take the FP8 fit's efficiency at
    // their own peak (the same tensor-core pipeline), times the calibration's block-scaled
    // ratio where one harness measured the format beside FP8 (Calibration::block_scaled_gemm).
    case ir::Dtype::kMxfp8:
      return GemmClass::kFp8;
    case ir::Dtype::kNvfp4:
      return GemmClass::kFp8;
  }
  return GemmClass::k16Bit;
}

const char* gemm_class_name(GemmClass c) {
  switch (c) {
    case GemmClass::k16Bit: return "bf16/fp16";
    case GemmClass::kFp8: return "fp8";
    case GemmClass::kFp32: return "fp32";
  }
  return "?";
}

const char* gemm_kernel_name(GemmKernel k) {
  switch (k) {
    case GemmKernel::kDense: return "dense";
    case GemmKernel::kGrouped: return "grouped";
  }
  return "?";
}

double gemm_bytes(const GemmShape& shape) { return detail::gemm_bytes(shape); }

double attention_bytes(const AttentionShape& shape) {
  // The block size and GPU do not change the bytes.
  return detail::attention_features(shape, shape.direction == Direction::kBackward, 128, 1, 1.0).bytes;
}

const AttentionParams* FittedModel::find_attention(const std::string& kernel, ir::Dtype dtype,
                                                   std::int64_t window, std::int64_t head_dim_v) const {
  for (const auto& a : attention) {
    if (a.kernel == kernel && a.dtype == dtype && a.window == window && a.head_dim_v == head_dim_v) return &a;
  }
  return nullptr;
}

GemmPrediction predict_gemm(const GemmParams& p, const GpuSpec& gpu, const std::vector<GemmTile>& tiles,
                            double memory_bps, const GemmShape& shape, double efficiency_ratio) {
  SIM_ASSERT(shape.m >= 0 && shape.n >= 0 && shape.k >= 0 && shape.batch >= 0, "negative GEMM dimension");
  GemmPrediction out;
  if (shape.m == 0 || shape.n == 0 || shape.k == 0 || shape.batch == 0) return out;
  const double peak = gpu.peak(shape.dtype).per_s();
  SIM_ASSERT(peak > 0, gpu.name + " has no " + ir::dtype_name(shape.dtype) + " peak");
  SIM_ASSERT(efficiency_ratio > 0, "non-positive GEMM efficiency ratio");
  const double a = p.inv_efficiency[static_cast<std::size_t>(gemm_class(shape.dtype))] / efficiency_ratio;
  out.seconds = std::numeric_limits<double>::infinity();
  for (const auto& tile : tiles) {
    const auto f = detail::gemm_features(shape, tile, gpu.num_sms, peak);
    const double t = a * f.mma_s + p.fill_s * f.fill + p.fixed_s;
    if (t < out.seconds) {
      out.seconds = t;
      out.tile = tile;
      out.waves = static_cast<std::int64_t>(f.waves);
    }
  }
  const double t_mem = detail::gemm_bytes(shape) / memory_bps;
  if (t_mem > out.seconds) {
    out.seconds = t_mem;
    out.memory_bound = true;
  }
  return out;
}

GemmPrediction predict_gemm(const FittedModel& f, const Calibration& cal, const GemmShape& shape) {
  const auto bs = cal.block_scaled_gemm.find(shape.dtype);
  const double ratio = bs == cal.block_scaled_gemm.end() ? 1.0 : bs->second.ratio;
  if (shape.grouped && f.grouped.fitted) {
    return predict_gemm(f.grouped.gemm, cal.gpu, cal.gemm_tiles, f.grouped.memory_bps, shape, ratio);
  }
  return predict_gemm(f.gemm, cal.gpu, cal.gemm_tiles, f.memory.achievable_bps, shape, ratio);
}

namespace {

double direction_time(const AttentionDirParams& d, const detail::AttentionFeatures& f) {
  return d.inv_efficiency * f.mma_s + d.causal_extra * f.causal_mma_s + d.score_cost * f.scores_s +
         d.per_wave_s * f.waves + d.fixed_s;
}

struct DirTimes {
  double fwd = 0, bwd = 0;  // compute terms, before the bytes floor
  double fwd_bytes = 0, bwd_bytes = 0;
};

DirTimes attention_terms(const AttentionParams& p, AttentionShape s) {
  s.direction = Direction::kForward;
  const auto ff = detail::attention_features(s, false, p.block, p.num_sms, p.peak_flops);
  s.direction = Direction::kBackward;
  const auto fb = detail::attention_features(s, true, p.block, p.num_sms, p.peak_flops);
  DirTimes t;
  t.fwd_bytes = ff.bytes;
  t.bwd_bytes = fb.bytes;
  if (!p.split) {
    t.fwd = direction_time(p.fwd, ff);
    t.bwd = direction_time(p.bwd, fb);
    return t;
  }
  detail::AttentionFeatures sum;
  sum.mma_s = ff.mma_s + fb.mma_s;
  sum.scores_s = ff.scores_s + fb.scores_s;
  sum.causal_mma_s = ff.causal_mma_s + fb.causal_mma_s;
  sum.waves = ff.waves + fb.waves;
  const double total = direction_time(p.total, sum) + p.total.fixed_s;  // two kernels: 2c
  const DirTimes ref = attention_terms(*p.reference, s);
  const double share = ref.fwd / (ref.fwd + ref.bwd);
  t.fwd = share * total;
  t.bwd = total - t.fwd;
  return t;
}

bool empty_attention(const AttentionShape& s) {
  SIM_ASSERT(s.batch >= 0 && s.heads >= 0 && s.seq_q >= 0 && s.seq_kv >= 0 && s.head_dim >= 0,
             "negative attention dimension");
  return s.batch == 0 || s.heads == 0 || s.seq_q == 0 || s.seq_kv == 0 || s.head_dim == 0;
}

}  // namespace

double predict_attention(const AttentionParams& p, const AttentionShape& shape) {
  if (empty_attention(shape)) return 0;
  const DirTimes t = attention_terms(p, shape);
  const bool bwd = shape.direction == Direction::kBackward;
  return std::max(bwd ? t.bwd : t.fwd, (bwd ? t.bwd_bytes : t.fwd_bytes) / p.memory_bps);
}

double predict_attention_fwd_bwd(const AttentionParams& p, const AttentionShape& shape) {
  if (empty_attention(shape)) return 0;
  const DirTimes t = attention_terms(p, shape);
  return std::max(t.fwd, t.fwd_bytes / p.memory_bps) + std::max(t.bwd, t.bwd_bytes / p.memory_bps);
}

CalibratedModel::CalibratedModel(std::shared_ptr<const Calibration> calibration, FittedModel fitted,
                                 GpuSpec gpu, const std::string& attention_kernel)
    : calibration_(std::move(calibration)), fitted_(std::move(fitted)), gpu_(std::move(gpu)) {
  SIM_ASSERT(calibration_ != nullptr, "null calibration");
  if (!attention_kernel.empty()) {
    default_attention_ = fitted_.find_attention(attention_kernel);
    if (default_attention_ == nullptr) {
      std::string known;
      for (const auto& k : attention_kernels()) known += (known.empty() ? "" : ", ") + k;
      throw InputError(Diagnostic{"", 0, "--attention-kernel",
                                  "no attention kernel '" + attention_kernel + "' is calibrated for " +
                                      calibration_->gpu.name + " (known: " + known + ")"});
    }
  } else {
    default_attention_ = fitted_.find_attention(calibration_->attention_kernel);
    if (default_attention_ == nullptr && !fitted_.attention.empty()) {
      throw InputError(Diagnostic{calibration_->file, 0, "attention_model.kernel",
                                  "no attention points for kernel '" + calibration_->attention_kernel + "'"});
    }
  }
}

bool CalibratedModel::fp8_attention_calibrated() const {
  return default_attention_ != nullptr &&
         fitted_.find_attention(default_attention_->kernel, ir::Dtype::kFp8) != nullptr;
}

GemmPrediction CalibratedModel::gemm_detail(const GemmShape& shape) const {
  const auto& cal = *calibration_;
  if (cal.gpu.peak(shape.dtype).per_s() <= 0) {
    throw InputError(Diagnostic{"", 0, "dtype",
                                cal.gpu.name + " has no " + ir::dtype_name(shape.dtype) +
                                    " tensor cores (its datasheet peak is 0)"});
  }
  return predict_gemm(fitted_, cal, shape);
}

Duration CalibratedModel::gemm(const GemmShape& shape) const {
  return Duration::from_seconds(gemm_detail(shape).seconds);
}

Duration CalibratedModel::attention_with(const AttentionParams& bf16, const AttentionShape& shape) const {
  // FP8 attention by the kernel's FP8 fit where the calibration has one; narrower values (MLA) by
  // the kernel's fit of that value width in that precision where measured; a sliding window by
  // the kernel's fit of that window where measured (bf16); else the full fit (over the window's
  // blocks, with values as wide as the queries).
  const AttentionParams* fp8 =
      shape.dtype == ir::Dtype::kFp8 ? fitted_.find_attention(bf16.kernel, ir::Dtype::kFp8) : nullptr;
  const ir::Dtype dt = fp8 != nullptr ? ir::Dtype::kFp8 : ir::Dtype::kBf16;
  const std::int64_t narrow = shape.value_dim() != shape.head_dim ? shape.value_dim() : 0;
  const AttentionParams* p = narrow > 0 ? fitted_.find_attention(bf16.kernel, dt, 0, narrow) : nullptr;
  if (p == nullptr && shape.window > 0 && fp8 == nullptr) {
    p = fitted_.find_attention(bf16.kernel, ir::Dtype::kBf16, shape.window);
  }
  if (p == nullptr) p = fp8 != nullptr ? fp8 : &bf16;
  AttentionShape s = shape;
  if (p->head_dim_v == 0) s.head_dim_v = 0;
  double t = predict_attention(*p, s);
  switch (shape.dtype) {
    case ir::Dtype::kBf16:
    case ir::Dtype::kFp16:
    // Without an FP8 fit, FP8 attention takes the bf16 time (an upper bound); block-scaled
    // attention formats are not modeled (Transformer Engine runs attention in bf16 or FP8).
    case ir::Dtype::kFp8:
    case ir::Dtype::kMxfp8:
    case ir::Dtype::kNvfp4:
      break;
    case ir::Dtype::kFp32:
      // No fp32 flash kernel exists; the bf16 fit scaled to the fp32 (SIMT) peak.
      t *= calibration_->gpu.peak_bf16.per_s() / calibration_->gpu.peak_fp32.per_s();
      break;
  }
  return Duration::from_seconds(t);
}

Duration CalibratedModel::attention(const AttentionShape& shape) const {
  SIM_ASSERT(default_attention_ != nullptr, calibration_->gpu.name + " has no attention calibration");
  return attention_with(*default_attention_, shape);
}

Duration CalibratedModel::attention(const AttentionShape& shape, const std::string& kernel) const {
  const AttentionParams* p = fitted_.find_attention(kernel);
  if (p == nullptr) {
    std::string known;
    for (const auto& k : attention_kernels()) known += (known.empty() ? "" : ", ") + k;
    throw InputError(Diagnostic{"", 0, "--kernel",
                                "unknown attention kernel '" + kernel + "' for " + calibration_->gpu.name +
                                    " (known: " + known + ")"});
  }
  return attention_with(*p, shape);
}

const std::string& CalibratedModel::attention_kernel() const {
  return default_attention_ != nullptr ? default_attention_->kernel : calibration_->attention_kernel;
}

std::vector<std::string> CalibratedModel::attention_kernels() const {
  std::vector<std::string> out;
  for (const auto& a : fitted_.attention) {
    if (a.dtype == ir::Dtype::kBf16 && a.window == 0 && a.head_dim_v == 0) out.push_back(a.kernel);
  }
  return out;
}

Duration CalibratedModel::memory_bound(Bytes moved, MemoryKernel kernel) const {
  return Duration::from_seconds(moved.real() / fitted_.memory.bps(kernel) +
                                fitted_.memory.launch_s);
}

GpuSpec fitted_gpu_spec(const Calibration& calibration, const FittedModel& fitted) {
  GpuSpec g = calibration.gpu;
  g.matmul_efficiency = 1.0 / fitted.gemm.inv_efficiency[static_cast<std::size_t>(GemmClass::k16Bit)];
  g.memory_efficiency = fitted.memory.achievable_bps / calibration.gpu.memory_bandwidth.bytes_per_s();
  g.kernel_launch_overhead = Duration::from_seconds(fitted.memory.launch_s);
  return g;
}

std::unique_ptr<CalibratedModel> make_calibrated_model(std::shared_ptr<const Calibration> calibration) {
  SIM_ASSERT(calibration != nullptr, "null calibration");
  FittedModel f = fit(*calibration);
  GpuSpec g = fitted_gpu_spec(*calibration, f);
  return std::make_unique<CalibratedModel>(std::move(calibration), std::move(f), std::move(g));
}

std::unique_ptr<CalibratedModel> make_calibrated_model(std::shared_ptr<const Calibration> calibration,
                                                       const GpuSpec& gpu,
                                                       const std::string& attention_kernel) {
  SIM_ASSERT(calibration != nullptr, "null calibration");
  FittedModel f = fit(*calibration);
  return std::make_unique<CalibratedModel>(std::move(calibration), std::move(f), gpu, attention_kernel);
}

}  // namespace ts::compute
