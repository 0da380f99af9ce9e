// Calibrated compute model: GEMM, attention and memory-bound kernel times fitted to measurements.
//
// GEMM (wave and tile quantization; NVIDIA "Matrix Multiplication Background User's Guide"):
// the library splits C into CTA tiles of Tm×Tn (the tile list is calibration data); the tiles
// run in waves of one tile per SM, so a GEMM takes
//   t = max( a_dtype · W · 2·Tm·Tn·K / (P/S)  +  b · W · (Tm+Tn)/256  +  c ,  bytes / B_hbm )
// with W = ceil(batch·ceil(M/Tm)·ceil(N/Tn) / S) waves on S SMs, P the datasheet peak of the
// dtype, a_dtype the inverse efficiency of the tensor pipe inside a tile (1/a = the fraction of
// peak a full wave reaches), b the fixed cost of a wave of 128×128 tiles (the pipeline fill:
// before its first MMA a tile loads operand panels of Tm + Tn rows; this is why small K falls
// off), c the fixed cost of a kernel, and B_hbm the achievable HBM bandwidth of streaming
// kernels. Padding of partial tiles (tile quantization) and of partial waves (wave
// quantization) is paid at full price; the tile is the one with the shortest predicted time, as
// the library's heuristics pick it. a, b and c are fitted by non-negative least squares on the
// relative error of the measured points (fit.cpp); bf16 and fp16 share one `a`.
//
// Attention (FlashAttention-2/3; Dao 2023, Shah et al. 2024): a CTA owns a block of B query
// rows (forward) or key rows (backward) and walks the blocks of the other side; with a causal
// mask it skips the blocks above the diagonal. Per direction
//   t = max( a · F_blocks/P  +  e · N_scores/P  +  b · W  +  c ,  bytes / B_hbm )
// with F_blocks the tensor FLOPs of the computed B×B blocks (4·B²·d per block forward, 2.5×
// that backward: five products instead of two), N_scores the score elements computed (the
// softmax exponentials run on the much slower special-function units, which is why small
// head_dim reaches a lower fraction of peak; FlashAttention-3 paper §3), W the waves of CTAs and
// c the fixed cost. GQA/MQA lowers the K/V bytes, not the score FLOPs. Forward+backward points
// constrain the sum of both directions.
//
// Memory-bound kernels: bytes / B_hbm + launch overhead, with B_hbm the mean of the measured
// load+store streaming kernels, and the launch overhead measured or, without a measurement,
// the fixed cost of the smallest GEMM of the fit (one wave of 128×128 tiles: b + c), an upper
// bound for a streaming kernel's fixed cost.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/base/units.h"
#include "sim/compute/calibration.h"
#include "sim/compute/compute_model.h"
#include "sim/compute/gpu_spec.h"

namespace ts::compute {

// The tensor path of a GEMM dtype: bf16 and fp16 share one rate.
enum class GemmClass { k16Bit, kFp8, kFp32 };
inline constexpr std::size_t kNumGemmClasses = 3;
GemmClass gemm_class(ir::Dtype d);
const char* gemm_class_name(GemmClass c);  // "bf16/fp16", "fp8", "fp32"

struct GemmParams {
  // a per class; a class without points takes the 16-bit value (fitted[c] == false).
  std::array<double, kNumGemmClasses> inv_efficiency{};
  std::array<bool, kNumGemmClasses> fitted{};
  double fill_s = 0;   // b: per wave of 128×128 tiles, scaled by (Tm+Tn)/256
  double fixed_s = 0;  // c
  std::size_t num_points = 0;
};

struct AttentionDirParams {
  double inv_efficiency = 0;  // a
  double score_cost = 0;      // e: FLOP-equivalents of non-tensor work per score element
  double causal_extra = 0;    // a_c: added to a under a causal mask (imbalance, masked blocks)
  double per_wave_s = 0;      // b
  double fixed_s = 0;         // c
};

struct AttentionParams {
  std::string kernel;
  ir::Dtype dtype = ir::Dtype::kBf16;  // kFp8: the kernel's FP8 attention, fitted apart
  std::int64_t window = 0;             // > 0: the kernel's sliding-window attention, fitted apart
  // > 0: the kernel's attention with values of this width narrower than queries and keys (MLA:
  // 128 against 192), fitted apart; shapes of that value width are priced by it with PV at the
  // value width. A kernel without such a fit prices them as if values were as wide as queries
  // (as before MLA was measured; on GB200 the measured MLA backward is that slow, its forward
  // about 5 % faster).
  std::int64_t head_dim_v = 0;
  std::int64_t block = 0;
  // The GPU the parameters were fitted for (the features depend on it).
  std::int32_t num_sms = 0;
  double peak_flops = 0;  // tensor peak of `dtype`, FLOP/s
  double memory_bps = 0;  // achievable HBM bandwidth, for the bytes floor
  // Split mode: fitted on forward+backward sums with one parameter set (`total`) over the
  // summed features; the forward share of a shape comes from `reference`.
  bool split = false;
  AttentionDirParams fwd, bwd, total;
  std::shared_ptr<const AttentionParams> reference;
  std::size_t num_points = 0;
};

struct MemoryParams {
  double achievable_bps = 0;
  double launch_s = 0;
  bool launch_measured = false;
  std::size_t num_points = 0;
  // PyTorch's native LayerNorm, forward and backward (bytes/s of the op's streaming traffic);
  // without norm points (native_norm_points 0) the streaming rate.
  double native_norm_fwd_bps = 0;
  double native_norm_bwd_bps = 0;
  std::size_t native_norm_points = 0;
  // A fused norm kernel (cuDNN's), forward and backward: the mean of each direction's points;
  // without points (fused_norm_points 0) the streaming rate.
  double fused_norm_fwd_bps = 0;
  double fused_norm_bwd_bps = 0;
  std::size_t fused_norm_points = 0;
  // Eager MoE permutation and router kernels (bytes/s over bench_moe.py's byte counts): the
  // mean of their points; without points (moe_points 0) the streaming rate.
  double moe_gather_bps = 0;
  double moe_combine_bps = 0;
  double moe_router_bps = 0;
  std::size_t moe_points = 0;

  // The rate a kernel of `pattern` is modeled to reach (load_store, load and store: streaming).
  double predicted_bps(MemoryPattern pattern) const;
  double bps(MemoryKernel kernel) const;
};

// The grouped GEMM kernel (GemmKernel::kGrouped): the GEMM model's form with its own a, b, c and
// its own HBM floor. A grouped GEMM of few rows per group is weight-streaming: every group
// reads its expert's full weight matrix for a thin slab of tokens, in one or a few tiles per
// SM, and the measured kernels reach well below the streaming kernels' bandwidth there
// (torch._grouped_mm on the H100: 1.7 TB/s at 128 rows per group against 3.0 TB/s streaming).
// `memory_bps` is fitted with the rest: the share of the streaming rate with the smallest
// squared relative error, on a grid of 1 % steps.
struct GroupedGemmParams {
  GemmParams gemm;
  double memory_bps = 0;
  bool fitted = false;  // false: the GPU has no grouped points; grouped GEMMs use the dense fit
};

struct FittedModel {
  GemmParams gemm;
  GroupedGemmParams grouped;
  std::vector<AttentionParams> attention;  // one per kernel and dtype with fit points
  MemoryParams memory;
  const AttentionParams* find_attention(const std::string& kernel, ir::Dtype dtype = ir::Dtype::kBf16,
                                        std::int64_t window = 0, std::int64_t head_dim_v = 0) const;
};

struct FitOptions {
  // 0: fit every fit-role point. k > 0: leave out every k-th fit point of each family (GEMM;
  // attention per kernel; memory), counted in file order from 1, for held-out evaluation.
  int holdout_every = 0;
};

// Fits the model to the calibration's fit-role points. Throws InputError (naming the file) when
// a family's points cannot determine its parameters.
FittedModel fit(const Calibration& cal, const FitOptions& options = {});

// Whether point `index` (0-based, within its family) is held out under `holdout_every`.
constexpr bool is_held_out(std::size_t index, int holdout_every) {
  return holdout_every > 0 &&
         index % static_cast<std::size_t>(holdout_every) == static_cast<std::size_t>(holdout_every - 1);
}

// Model times from fitted parameters, in seconds (used by the model and the fit report).
struct GemmPrediction {
  double seconds = 0;
  GemmTile tile;
  std::int64_t waves = 0;
  bool memory_bound = false;
};
// `efficiency_ratio` multiplies the class's efficiency (divides its `a`): a block-scaled format's
// efficiency over the fp8 fit's (Calibration::block_scaled_gemm), 1 otherwise.
GemmPrediction predict_gemm(const GemmParams& p, const GpuSpec& gpu,
                            const std::vector<GemmTile>& tiles, double memory_bps,
                            const GemmShape& shape, double efficiency_ratio = 1.0);
// A GEMM priced by the fitted model: a grouped shape by the grouped kernel's fit where there is
// one, every other shape (and a grouped one without it) by the dense fit; mxfp8/nvfp4 at the
// calibration's block-scaled ratio.
GemmPrediction predict_gemm(const FittedModel& f, const Calibration& cal, const GemmShape& shape);
double predict_attention(const AttentionParams& p, const AttentionShape& shape);
// Forward+backward of one shape (shape.direction is ignored).
double predict_attention_fwd_bwd(const AttentionParams& p, const AttentionShape& shape);

// HBM bytes the model charges: a GEMM reads A and B and writes C once (an FP8 GEMM writes a
// 16-bit C); attention reads Q, K, V and writes O forward, and reads Q, K, V, O, dO and writes
// dQ, dK, dV backward, with K and V over kv_heads (GQA/MQA).
double gemm_bytes(const GemmShape& shape);
double attention_bytes(const AttentionShape& shape);

class CalibratedModel final : public ComputeModel {
 public:
  // `gpu` is the spec the simulator reports (the cluster's); the fit uses the calibration's
  // datasheet. `attention_kernel` names the fitted attention kernel that attention(shape) uses;
  // empty = the calibration's attention_model.kernel (InputError on --attention-kernel with
  // the known kernels when the calibration has no points of it).
  CalibratedModel(std::shared_ptr<const Calibration> calibration, FittedModel fitted, GpuSpec gpu,
                  const std::string& attention_kernel = "");
  CalibratedModel(const CalibratedModel&) = delete;  // holds a pointer into fitted_
  CalibratedModel& operator=(const CalibratedModel&) = delete;

  Duration gemm(const GemmShape& shape) const override;
  Duration attention(const AttentionShape& shape) const override;
  Duration memory_bound(Bytes moved, MemoryKernel kernel) const override;
  const GpuSpec& gpu() const override { return gpu_; }

  GemmPrediction gemm_detail(const GemmShape& shape) const;
  // Attention with a named kernel of the calibration (InputError on flag --kernel if unknown).
  Duration attention(const AttentionShape& shape, const std::string& kernel) const;
  std::vector<std::string> attention_kernels() const;
  const std::string& default_attention_kernel() const { return calibration_->attention_kernel; }
  // The kernel attention(shape) uses.
  const std::string& attention_kernel() const;
  // Whether that kernel has an FP8 fit: an fp8 AttentionShape is timed by it; without one, an
  // fp8 shape takes the bf16 time (an upper bound).
  bool fp8_attention_calibrated() const;

  const FittedModel& fitted() const { return fitted_; }
  const Calibration& calibration() const { return *calibration_; }

 private:
  Duration attention_with(const AttentionParams& p, const AttentionShape& shape) const;
  std::shared_ptr<const Calibration> calibration_;
  FittedModel fitted_;
  GpuSpec gpu_;
  const AttentionParams* default_attention_ = nullptr;
};

// Fits `calibration` and returns the model; `gpu` (the cluster's spec) defaults to the
// calibration's datasheet with the efficiencies of the fit filled in.
std::unique_ptr<CalibratedModel> make_calibrated_model(std::shared_ptr<const Calibration> calibration);
std::unique_ptr<CalibratedModel> make_calibrated_model(std::shared_ptr<const Calibration> calibration,
                                                       const GpuSpec& gpu,
                                                       const std::string& attention_kernel = "");

// The calibration's datasheet with the roofline stand-ins set from a fit: matmul efficiency
// 1/a of bf16, memory efficiency B_hbm / datasheet bandwidth, launch overhead.
GpuSpec fitted_gpu_spec(const Calibration& calibration, const FittedModel& fitted);

}  // namespace ts::compute
