// Internal to compute: the regressors of the GEMM and attention time models (calibrated_model.h).
#pragma once

#include <algorithm>
#include <cstdint>

#include "sim/compute/calibration.h"
#include "sim/compute/compute_model.h"
#include "sim/compute/gpu_spec.h"

namespace ts::compute::detail {

constexpr std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// GEMM regressors for one tile choice: t = a·mma_s + b·fill + c.
struct GemmFeatures {
  double mma_s = 0;  // W · 2·Tm·Tn·K / (P/S): tensor time of the padded waves at peak
  double fill = 0;   // W · (Tm+Tn)/256: pipeline fills, in units of a 128×128 tile's
  double waves = 0;  // W
};

// The operand panels a tile loads before its first MMA (the software pipeline's prologue)
// grow with Tm + Tn; 256 makes a 128×128 tile one unit.
inline constexpr double kFillUnit = 256.0;

inline GemmFeatures gemm_features(const GemmShape& s, const GemmTile& tile, std::int32_t num_sms,
                                  double peak_flops) {
  const std::int64_t tiles = s.batch * ceil_div(s.m, tile.m) * ceil_div(s.n, tile.n);
  const std::int64_t waves = ceil_div(tiles, num_sms);
  const double per_sm = peak_flops / num_sms;
  GemmFeatures f;
  f.waves = static_cast<double>(waves);
  f.fill = f.waves * static_cast<double>(tile.m + tile.n) / kFillUnit;
  f.mma_s = f.waves * 2.0 * static_cast<double>(tile.m) * static_cast<double>(tile.n) *
            static_cast<double>(s.k) / per_sm;
  return f;
}

// HBM bytes of a GEMM: A and B read once, C written once. FP8, MXFP8 and NVFP4 GEMMs write a
// 16-bit C (as Transformer Engine's quantized GEMMs output bf16).
inline double gemm_bytes(const GemmShape& s) {
  const double e = ir::bytes_per_element(s.dtype);
  const double ec = ir::quantized_gemm(s.dtype) ? 2.0 : e;
  const double m = static_cast<double>(s.m), n = static_cast<double>(s.n), k = static_cast<double>(s.k);
  return static_cast<double>(s.batch) * ((m * k + k * n) * e + m * n * ec);
}

// Computed B×B blocks per (sequence, head). A causal mask keeps, for query block i, the key
// blocks up to the diagonal; queries are the last seq_q of the seq_kv positions (bottom-right
// aligned, as FlashAttention >= 2.1 does), so block i sees min(nkv, i + 1 + ceil(offset/B)).
// A causal sliding window of w keys leaves each query block at most ceil((w-1)/B) + 1 key
// blocks (the diagonal block and those reaching w - 1 keys back): FlashAttention's and cuDNN's
// banded masks skip the blocks outside the band.
inline double attention_blocks(const AttentionShape& s, std::int64_t block) {
  const std::int64_t nq = ceil_div(s.seq_q, block);
  std::int64_t nkv = ceil_div(s.seq_kv, block);
  if (s.causal && s.window > 0) nkv = std::min(nkv, ceil_div(s.window - 1, block) + 1);
  if (!s.causal) return static_cast<double>(nq) * static_cast<double>(nkv);
  const std::int64_t offset = s.seq_kv > s.seq_q ? s.seq_kv - s.seq_q : 0;
  const std::int64_t q0 = ceil_div(offset, block);
  // Σ_{j=q0+1}^{q0+nq} min(nkv, j)
  const std::int64_t below = nkv > q0 ? std::min(nq, nkv - q0) : 0;  // terms with j <= nkv
  const double first = static_cast<double>(q0 + 1), last = static_cast<double>(q0 + below);
  const double sum_below = below > 0 ? static_cast<double>(below) * (first + last) / 2.0 : 0.0;
  return sum_below + static_cast<double>(nq - below) * static_cast<double>(nkv);
}

// Attention regressors of one direction: t = a·mma_s + a_c·causal_mma_s + e·scores_s + b·waves + c.
struct AttentionFeatures {
  double mma_s = 0;     // tensor FLOPs of the computed blocks / P
  double causal_mma_s = 0;  // mma_s again for a causal shape (its own extra cost), else 0
  double scores_s = 0;  // score elements computed / P
  double waves = 0;     // waves of CTAs
  double bytes = 0;     // HBM bytes (floor)
};

inline AttentionFeatures attention_features(const AttentionShape& s, bool backward,
                                            std::int64_t block, std::int32_t num_sms,
                                            double peak_flops) {
  const double bh = static_cast<double>(s.batch * s.heads);
  const double b2 = static_cast<double>(block) * static_cast<double>(block);
  const double blocks = attention_blocks(s, block) * bh;
  AttentionFeatures f;
  // Forward: S = QKᵀ and O = PV, 2·B²·d FLOPs each per block. Backward: recomputed S, dV, dP,
  // dQ, dK: five products, 2.5× the forward (FlashAttention-2 paper §3.2).
  f.mma_s = (backward ? 2.5 : 1.0) * 4.0 * b2 * static_cast<double>(s.head_dim) * blocks / peak_flops;
  // Latent attention's narrower values (QKᵀ at d_qk, PV at d_v): AttentionShape::value_ratio.
  if (s.value_dim() != s.head_dim) f.mma_s *= s.value_ratio(backward);
  f.scores_s = b2 * blocks / peak_flops;
  f.causal_mma_s = s.causal ? f.mma_s : 0.0;
  // Forward CTAs own query blocks, backward CTAs own key blocks (FlashAttention-2 §3.2).
  const std::int64_t rows = backward ? s.seq_kv : s.seq_q;
  const std::int64_t ctas = s.batch * s.heads * ceil_div(rows, block);
  f.waves = static_cast<double>(ceil_div(ctas, num_sms));
  const double e = 2.0;  // 16-bit activations
  const double q = static_cast<double>(s.batch * s.heads * s.seq_q * s.head_dim) * e;
  const double kv = static_cast<double>(s.batch * s.kv_heads * s.seq_kv * s.head_dim) * e;
  // Forward reads Q, K, V and writes O; backward reads Q, K, V, O, dO and writes dQ, dK, dV.
  f.bytes = backward ? 4.0 * q + 4.0 * kv : 2.0 * q + 2.0 * kv;
  if (s.value_dim() != s.head_dim) {
    // V, O (and dV, dO) at the value width: Q, K and half the traffic at d_qk, half at d_v.
    const double r = (static_cast<double>(s.head_dim) + static_cast<double>(s.value_dim())) /
                     (2.0 * static_cast<double>(s.head_dim));
    f.bytes *= r;
  }
  return f;
}

inline AttentionShape attention_point_shape(const AttentionPoint& p, bool backward) {
  AttentionShape s;
  s.batch = p.batch;
  s.heads = p.heads;
  s.kv_heads = p.kv_heads > 0 ? p.kv_heads : p.heads;
  s.seq_q = p.seq;
  s.seq_kv = p.seq;
  s.head_dim = p.head_dim;
  s.head_dim_v = p.head_dim_v;
  s.window = p.window;
  s.causal = p.causal;
  s.direction = backward ? Direction::kBackward : Direction::kForward;
  return s;
}

// FLOPs of an attention point as its TFLOP/s were computed: AttentionShape::flops (the
// FlashAttention convention; forward+backward is the sum of the two directions, 3.5× forward).
inline double attention_point_flops(const AttentionPoint& p) {
  const auto dir = [&](bool backward) { return attention_point_shape(p, backward).flops().value(); };
  switch (p.pass) {
    case AttentionPass::kForward: return dir(false);
    case AttentionPass::kBackward: return dir(true);
    case AttentionPass::kForwardBackward: return dir(false) + dir(true);
  }
  return dir(false);
}

}  // namespace ts::compute::detail
