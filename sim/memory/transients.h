// Transient buffers of one device (LM-head logits and loss, MLP intermediates, Mini-Sequence
// Transformer chunking), the analytic per-stage peak, and device overheads set by calibration.
#pragma once

#include <cstdint>

#include "sim/base/units.h"
#include "sim/ir/model_spec.h"
#include "sim/memory/footprint.h"
#include "sim/parallel/plan.h"

namespace ts::memory {

// Precision of the cross-entropy loss over the logits.
enum class LossPrecision {
  // Megatron-LM's default: the bf16 logits are upcast (vocab_parallel_cross_entropy(
  // output.float(), labels) in the GPT model; fp16_lm_cross_entropy off) and the fp32 copy is
  // turned into the softmax and then the gradient in place (megatron/core/tensor_parallel/
  // cross_entropy.py). At the peak the bf16 logits (or their bf16 gradient) and the fp32 buffer
  // coexist: 2 + 4 = 6 bytes per logit.
  kFp32,
  // Loss on the bf16 logits (--fp16-lm-cross-entropy, or a fused bf16 cross-entropy): logits and
  // their gradient, 2 + 2 = 4 bytes per logit.
  kBf16,
};

struct TransientOptions {
  LossPrecision loss = LossPrecision::kFp32;
};

// Bytes per logit element at the LM-head peak under `loss` (see LossPrecision).
std::int64_t bytes_per_logit(LossPrecision loss);

// Logits and loss buffers of one micro-batch on the last stage at their peak:
// b · (seq_len / cp) · ceil(V / t) logits (the LM head is vocab-parallel over TP; with sequence
// parallelism its input is gathered first, so each TP rank holds all local tokens) ×
// bytes_per_logit, divided by K = plan.mst_chunks: the Mini-Sequence Transformer (Luo et al.
// 2024, arXiv 2407.15892, Sec. 3) runs the LM head and loss on K mini-sequences one after the
// other, so only one chunk's logits are alive.
Bytes lm_head_logits_bytes(const ir::ModelSpec& model, const parallel::ParallelPlan& plan,
                           const TransientOptions& options);

// MLP-sized tensors alive beyond the kept activations, at their peak in the MLP's backward pass:
// the gradient of the fc2 input (2·s·b·f/t bytes) and, while it is consumed, the gradients of
// fc1's outputs (GELU: one, 2·s·b·f/t; SwiGLU: gate and up, 4·s·b·f/t), so 4·s·b·f/t (GELU) or
// 6·s·b·f/t (SwiGLU), with s = seq_len / cp (sequence parallelism gathers the MLP input first).
// Divided by K = plan.mst_chunks: MST runs the MLP on K mini-sequences (Luo et al. 2024 Sec. 3).
Bytes mlp_intermediate_bytes(const ir::ModelSpec& model, const parallel::ParallelPlan& plan);

// The analytic memory of one rank of stage `stage` at its peak, without a replay: static
// footprint, kept activations of the in-flight micro-batches, and the largest transient. The
// transient is the larger of the LM-head logits (last stage) and one layer's backward working
// set (its rematerialized activations under recompute plus the MLP intermediates). The replay's
// per-device ledger refines this with the actual order of allocations.
struct StageMemory {
  StaticFootprint static_memory;
  Bytes activations;
  Bytes transient;
  Bytes allocated() const { return static_memory.total() + activations + transient; }
};
StageMemory stage_memory(const ir::ModelSpec& model, const parallel::ParallelPlan& plan, std::int64_t stage,
                         std::int64_t stage_layers, const ActivationOptions& activation_options,
                         const TransientOptions& transient_options);

// What a device uses beyond the bytes the framework allocates. Measured per GPU, driver and
// framework; the caller fills it from calibration data (calibration/), never from constants here.
struct MemoryOverheads {
  Bytes cuda_context;          // CUDA context, kernels and libraries (cuBLAS workspace, ...)
  double fragmentation = 0.0;  // caching-allocator reserve beyond the allocated peak, as a fraction of it
  Bytes nccl_buffers;          // NCCL communicator buffers
};

// Device memory for an allocated peak: allocated × (1 + fragmentation) + context + NCCL buffers.
Bytes device_bytes(Bytes allocated_peak, const MemoryOverheads& overheads);

}  // namespace ts::memory
