// Transient buffers of one device (LM-head logits and loss, MLP intermediates, Mini-Sequence
// Transformer chunking), the analytic per-stage peak, and device overheads set by calibration.
#pragma once

#include <cstdint>

#include "sim/base/units.h"
#include "sim/ir/model_spec.h"
#include "sim/memory/footprint.h"
#include "sim/parallel/plan.h"

namespace ts::memory {

// Bytes per logit element at the LM-head peak under `loss` (see parallel::CrossEntropy).
std::int64_t bytes_per_logit(parallel::CrossEntropy loss);

// Logits and loss buffers of one micro-batch on the last stage at their peak:
// b · (seq_len / cp) · ceil(V / t) logits (the LM head is vocab-parallel over TP; with sequence
// parallelism its input is gathered first, so each TP rank holds all local tokens) ×
// bytes_per_logit(plan.cross_entropy), divided by K = plan.mst_chunks: the Mini-Sequence Transformer (Luo et al.
// 2024, arXiv 2407.15892, Sec. 3) runs the LM head and loss on K mini-sequences one after the
// other, so only one chunk's logits are alive.
Bytes lm_head_logits_bytes(const ir::ModelSpec& model, const parallel::ParallelPlan& plan);

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
                         std::int64_t stage_layers, const ActivationOptions& activation_options);

// NCCL communicators one rank of `plan` communicates over, each holding its own buffers: the
// TP group (tp > 1), the CP group (cp > 1), the data-parallel group with CP (dp·cp > 1, ZeRO and
// gradient reduction run over it) and the pipeline group (pp > 1, sends and receives).
std::int64_t nccl_communicators(const parallel::ParallelPlan& plan);

// What the caching allocator reserves beyond `dynamic_peak` (activations and transients) when a
// share `fragmentation` of its reserved dynamic memory is unusable:
// dynamic_peak / (1 - fragmentation) - dynamic_peak.
Bytes fragmentation_reserve(Bytes dynamic_peak, double fragmentation);

}  // namespace ts::memory
