// ComputeModel: kernel durations for GEMMs, attention and memory-bound ops on one GPU kind.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>

#include "sim/base/units.h"
#include "sim/compute/gpu_spec.h"
#include "sim/ir/dtype.h"
#include "sim/ir/model_graph.h"

namespace ts::compute {

// C[m,n] = A[m,k] · B[k,n], `batch` independent products (batched GEMM).
struct GemmShape {
  std::int64_t m = 0, n = 0, k = 0;
  std::int64_t batch = 1;
  ir::Dtype dtype = ir::Dtype::kBf16;
  // A grouped GEMM of `batch` equal groups (MoE expert GEMMs), priced by the grouped kernel's
  // fit where the GPU has one, else as a batched GEMM.
  bool grouped = false;

  Flops flops() const {
    return Flops(2.0 * static_cast<double>(m) * static_cast<double>(n) *
                 static_cast<double>(k) * static_cast<double>(batch));
  }
};

enum class Direction { kForward, kBackward };

// Fused (flash) attention over `batch` sequences of `seq_q` queries against `seq_kv` keys.
struct AttentionShape {
  std::int64_t batch = 1;
  std::int64_t heads = 1;     // query heads on this device
  std::int64_t kv_heads = 1;  // key/value heads on this device (GQA/MQA: fewer than heads)
  std::int64_t seq_q = 0;
  std::int64_t seq_kv = 0;
  std::int64_t head_dim = 0;    // query/key head dimension
  std::int64_t head_dim_v = 0;  // value/output head dimension; 0: head_dim (MLA: 128 against 192)
  // Causal sliding window: each query attends to the `window` keys up to itself (GPT-OSS's
  // banded layers: 128); 0: the full causal or non-causal extent.
  std::int64_t window = 0;
  bool causal = true;
  Direction direction = Direction::kForward;
  ir::Dtype dtype = ir::Dtype::kBf16;

  std::int64_t value_dim() const { return head_dim_v > 0 ? head_dim_v : head_dim; }
  // FLOPs per unit of the symmetric count (1 when head_dim_v == head_dim): QKᵀ runs at the
  // query/key width and PV at the value width, forward (d_qk + d_v) / 2d_qk; the backward's five
  // products are three at d_qk (S, dQ, dK) and two at d_v (dP, dV), (3 d_qk + 2 d_v) / 5 d_qk
  // (cuDNN's SDPA benchmark counts them so).
  double value_ratio(bool backward) const {
    const auto dqk = static_cast<double>(head_dim), dv = static_cast<double>(value_dim());
    return backward ? (3.0 * dqk + 2.0 * dv) / (5.0 * dqk) : (dqk + dv) / (2.0 * dqk);
  }

  // FlashAttention paper convention: forward 4·sq·skv·d·heads per sequence, halved when causal
  // (for square blocks); backward 2.5× forward (Dao 2023, FA2 benchmark script); with unequal
  // value width scaled by value_ratio. A sliding window counts its query-key pairs
  // (ir::banded_pairs, not halved; the kernel skips the blocks outside the band).
  Flops flops() const {
    const bool bwd = direction == Direction::kBackward;
    const double pairs = window > 0 ? ir::banded_pairs(seq_q, seq_kv, window)
                                    : static_cast<double>(seq_q) * static_cast<double>(seq_kv);
    double f = 4.0 * static_cast<double>(batch * heads * head_dim) * pairs;
    if (causal && window == 0) f *= 0.5;
    if (bwd) f *= 2.5;
    if (value_dim() != head_dim) f *= value_ratio(bwd);
    return Flops(f);
  }
};

// The kernel behind a memory-bound op. Streaming kernels (elementwise ops, and normalizations
// written to stream: Transformer Engine's, Apex's, Triton or compiled ones) move their bytes at
// the GPU's streaming rate, or where the GPU has them at the measured rates of a fused norm kernel
// (cuDNN's RMSNorm/LayerNorm, which Transformer Engine runs; calibration patterns
// fused_norm_forward and fused_norm_backward). PyTorch's native LayerNorm (ATen, what eager PyTorch
// code runs) reaches a lower rate, measured forward and forward+backward (calibration patterns
// norm_forward and norm_forward_backward).
// Eager PyTorch's MoE token permutation (Megatron-Core moe_utils permute/unpermute without
// moe_permute_fusion; bench_moe.py): the gather of token copies into expert order (index_select),
// the weighted scatter-add back (index_add_), and the router's softmax and top-k; measured far
// below the streaming rate (calibration patterns moe_gather, moe_combine, moe_router).
enum class MemoryKernel {
  kStreaming,
  kFusedNormForward,
  kFusedNormBackward,
  kNativeNormForward,
  kNativeNormBackward,
  kMoeGather,
  kMoeCombine,
  kMoeRouter
};

class ComputeModel {
 public:
  virtual ~ComputeModel() = default;
  virtual Duration gemm(const GemmShape& shape) const = 0;
  virtual Duration attention(const AttentionShape& shape) const = 0;
  // A memory-bound kernel that reads and writes `moved` bytes of HBM in total.
  virtual Duration memory_bound(Bytes moved, MemoryKernel kernel) const = 0;
  virtual const GpuSpec& gpu() const = 0;
};

// Peak × one efficiency per kernel family, plus a launch overhead per kernel.
std::unique_ptr<ComputeModel> make_roofline_model(const GpuSpec& gpu);

}  // namespace ts::compute
