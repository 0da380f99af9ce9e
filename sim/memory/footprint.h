// Memory formulas of one device: parameters, static footprint by ZeRO stage, activations per
// layer, and the micro-batches a pipeline stage holds in flight.
#pragma once

#include <cstdint>

#include "sim/base/units.h"
#include "sim/ir/model_spec.h"
#include "sim/parallel/plan.h"

namespace ts::memory {

// ---------------------------------------------------------------------------------------------
// Parameters

// Parameters of one transformer layer, tensor by tensor, as Megatron-LM lays them out: one fused
// QKV weight, one fused gate+up weight (fc1) for SwiGLU. GQA makes K and V kv_hidden wide.
struct LayerParameters {
  std::int64_t qkv_weight = 0;   // h × (h + 2·kv_hidden), column-parallel
  std::int64_t qkv_bias = 0;     // h + 2·kv_hidden, column-parallel (GPT biases only)
  std::int64_t proj_weight = 0;  // h × h, row-parallel
  std::int64_t proj_bias = 0;    // h, replicated over TP
  std::int64_t fc1_weight = 0;   // h × ffn (GELU) or h × 2·ffn (SwiGLU gate and up), column-parallel
  std::int64_t fc1_bias = 0;     // ffn or 2·ffn, column-parallel
  std::int64_t fc2_weight = 0;   // ffn × h, row-parallel
  std::int64_t fc2_bias = 0;     // h, replicated over TP
  std::int64_t norms = 0;        // two norms: LayerNorm 2·h each (scale, shift), RMSNorm h each

  std::int64_t total() const;
  // Parameters one of `tp` tensor-parallel ranks holds (Shoeybi et al. 2019, Megatron-LM
  // Sec. 3): column-parallel weights and biases and row-parallel weights are split; row-parallel
  // biases and norms are replicated. K and V keep at least one head per rank (heads are
  // replicated when tp exceeds the number of KV heads).
  std::int64_t per_tp_rank(const ir::ModelSpec& model, std::int64_t tp) const;
  // Elements of the largest single tensor one TP rank holds (for optimizer-in-backward).
  std::int64_t largest_per_tp_rank(const ir::ModelSpec& model, std::int64_t tp) const;
};

LayerParameters layer_parameters(const ir::ModelSpec& model);

// Parameters of the whole model, tied embeddings counted once: L·layer + V·h (embedding)
// + V·h (LM head, unless tied) + max_seq_len·h (learned positions) + final norm.
// Equals ir::parameter_count (tests/unit/memory checks both against published counts).
std::int64_t parameter_count(const ir::ModelSpec& model);

// Parameters one rank of pipeline stage `stage` (0-based) holds, after TP and before ZeRO:
// `stage_layers` layers; the vocab-parallel embedding (V/t rows) and learned positions on stage
// 0; the final norm and the vocab-parallel LM head on the last stage. With tied embeddings and
// pp > 1 the last stage still holds its own copy of the embedding as LM head, kept equal by an
// all-reduce of its gradient (Megatron-LM LanguageModule.setup_embeddings_and_output_layer,
// "word embeddings for head"); with pp = 1 the one matrix serves both.
std::int64_t stage_parameters(const ir::ModelSpec& model, const parallel::ParallelPlan& plan,
                              std::int64_t stage, std::int64_t stage_layers);

// ---------------------------------------------------------------------------------------------
// Static footprint

// Weights, gradients and optimizer states of one device; everything that lives across the
// iteration, independent of the micro-batch.
struct StaticFootprint {
  Bytes weights;           // bf16 parameters (2 B each)
  Bytes gradients;         // gradient buffer (see static_footprint)
  Bytes optimizer_states;  // Adam first and second moments m and v
  Bytes master_weights;    // fp32 copy of the parameters (mixed precision); 0 with bf16 states
  Bytes total() const { return weights + gradients + optimizer_states + master_weights; }
};

// Bytes per parameter before sharding, as mixed-precision Adam keeps them (Micikevicius et al.
// 2018; Rajbhandari et al. 2020 "ZeRO", Sec. 3.1: 2 + 2 + 12 = 16 bytes with fp16 gradients).
// Megatron-LM accumulates and reduces bf16 gradients in an fp32 buffer (main_grad;
// accumulate_allreduce_grads_in_fp32 is forced on for bf16 in megatron/training/arguments.py),
// so the gradient is 4 bytes: 2 + 4 + 12 = 18 bytes per parameter. A bf16 reduction
// (plan.grad_reduce, Megatron-Core --grad-reduce-in-bf16) keeps that buffer in bf16 under ZeRO
// 0–1, whose buffer is the unsharded reduction buffer; ZeRO 2–3 keep their gradient shard in the
// optimizer's fp32 (DeepSpeed's fp32 gradient partition; FSDP casts the reduce-scattered shard
// to the fp32 parameter's dtype). With bf16 optimizer states (plan.optimizer_states = kBf16) the
// bf16 weights are the master copy, m and v are bf16 and the gradient buffer is bf16:
// 2 + 2 + 4 = 8 bytes; with a stateless optimizer (kNone) 2 + 2 = 4 bytes.
struct BytesPerParameter {
  std::int64_t weights = 0;
  std::int64_t gradients = 0;
  std::int64_t optimizer_states = 0;  // m + v
  std::int64_t master_weights = 0;
};
BytesPerParameter bytes_per_parameter(const parallel::ParallelPlan& plan);

// HBM traffic of the optimizer step per parameter it updates (read plus written), by the state
// the plan's optimizer keeps: 30 bytes for mixed-precision Adam, 14 for pure bf16 Adam, 12 for
// SGD without momentum (with weight decay).
Bytes optimizer_step_bytes_per_parameter(const parallel::ParallelPlan& plan);

// Static memory of one rank of pipeline stage `stage`, which holds `stage_layers` layers.
// ZeRO (Rajbhandari et al. 2020) stage 1 shards the optimizer states (m, v, fp32 master), stage 2
// also the gradients, stage 3 also the weights, each over the DP × CP ranks: context-parallel
// ranks hold the same weights and Megatron-LM's distributed optimizer and gradient buffers use
// the data-parallel group with context parallelism folded in
// (get_data_parallel_group(with_context_parallel=True) in megatron/core/optimizer and
// megatron/core/distributed). Shards round up (Megatron pads the buffers to a multiple of DP).
// With plan.optimizer_in_backward each gradient is consumed by the optimizer as soon as it is
// produced, so no whole-model gradient buffer exists: only the largest single parameter's
// gradient (on this rank, unsharded) is live at a time.
StaticFootprint static_footprint(const ir::ModelSpec& model, const parallel::ParallelPlan& plan,
                                 std::int64_t stage, std::int64_t stage_layers);

// ---------------------------------------------------------------------------------------------
// Activations

// What the activation formulas assume about the implementation. Chosen by the caller (the
// scenario), not inferred from the model family: Megatron-LM's GPT runs of 2021 (Narayanan et
// al. SC'21) used neither flash attention nor a dropout-free model; Llama recipes use flash
// attention and no dropout.
struct ActivationOptions {
  // Flash attention (Dao et al. 2022) keeps only its output and the softmax log-sum-exp (fp32,
  // one per query and head) instead of the a·s² scores, softmax and dropout tensors.
  bool flash_attention = true;
  // Dropout after the attention and MLP blocks (and on the attention probabilities without flash
  // attention), each keeping a 1-byte mask per element (Korthikanti et al. 2022, Sec. 4.1).
  bool dropout = false;
};

// The defaults the two-argument layer_activation_bytes uses: flash attention; the model's
// dropout, which unless its file says otherwise is on for GPT-style models (LayerNorm and GELU,
// as Megatron's GPT configurations with dropout 0.1) and off for Llama-style models.
ActivationOptions default_activation_options(const ir::ModelSpec& model);

// Activations of one transformer layer for one micro-batch on one device.
struct LayerActivations {
  Bytes kept;            // kept from the layer's forward to its backward, under plan.recompute
  Bytes rematerialized;  // rebuilt by recompute during the layer's backward (0 without recompute)
  Bytes input;           // the layer input, 2·s·b·h (split by TP with sequence parallelism)
};

// Activations one transformer layer keeps for its backward pass, for one micro-batch on one
// device, in bytes, following Korthikanti et al. 2022 ("Reducing Activation Recomputation in
// Large Transformer Models", arXiv 2205.05198), with s = seq_len / cp (context parallelism
// splits the sequence), b = micro-batch, h = hidden, a = heads, t = tp. For a GPT layer without
// flash attention and with dropout (their Table 2):
//   no parallelism                  sbh(34 + 5as/h)
//   tensor parallel                 sbh(10 + 24/t + 5as/(ht))
//   tensor + sequence parallel      sbh(34/t + 5as/(ht))
//   TP + SP + selective recompute   sbh·34/t
//   full recompute                  2sbh (the layer input; /t with sequence parallelism)
// The derivation op by op, and its adaptation to Llama, is in footprint.cpp.
LayerActivations layer_activations(const ir::ModelSpec& model, const parallel::ParallelPlan& plan,
                                   const ActivationOptions& options);
// layer_activations(...).kept.
Bytes layer_activation_bytes(const ir::ModelSpec& model, const parallel::ParallelPlan& plan,
                             const ActivationOptions& options);
// With default_activation_options(model).
Bytes layer_activation_bytes(const ir::ModelSpec& model, const parallel::ParallelPlan& plan);

// ---------------------------------------------------------------------------------------------
// Pipeline: activations in flight

// The most activation sets that pipeline stage `stage` (0-based, of p = plan.pp) holds at once
// under plan.schedule, with m = plan.num_micro_batches(): counted over the blocks the replay
// runs (parallel::pipeline_blocks, parallel::max_in_flight), from a chunk's forward to its input
// gradient. One set is the activations of one model chunk for one micro-batch; a chunk is the
// whole stage (stage_layers layers) except in the interleaved schedule (v = plan.vpp chunks of
// stage_layers / v layers) and the V-shaped ones (two chunks).
//   GPipe (Huang et al. 2019): all m forwards run before the first backward: m.
//   1F1B and zero-bubble H1 (Narayanan et al. 2021 Sec. 2.2.1; Qi et al. 2024): stage i runs
//     p − i − 1 warm-up forwards, then alternates one forward and one backward: min(p − i, m).
//   Interleaved 1F1B (Narayanan et al. 2021 Sec. 2.2.2), as Megatron-LM schedules it
//     (megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_
//     interleaving): of the m·v chunk forwards, rank i runs W = min(2(p − i − 1) + (v − 1)·p,
//     m·v) in warm-up, then alternates; the peak is min(W + 1, m·v). For stage 0 this is
//     v·p + p − 1 sets of L/(p·v) layers, i.e. p·(1 + (p − 1)/(p·v)) stages' worth, as
//     Korthikanti et al. 2022 Sec. 4.2.3 state.
//   DualPipeV (deepseek-ai/DualPipe): 2p + 1 chunk sets on the first rank ("PP + 1" of the
//     README's table, with PP = 2p stages).
std::int64_t in_flight_micro_batches(const parallel::ParallelPlan& plan, std::int64_t stage);

// What one layer keeps without recompute (the layers that ParallelPlan::recompute_layers leaves
// out of full recompute).
Bytes whole_layer_activation_bytes(const ir::ModelSpec& model, const parallel::ParallelPlan& plan,
                                   const ActivationOptions& options);

// What one micro-batch keeps on a model chunk of `chunk_layers` layers: layer_activations(...).kept
// per layer, or with full recompute of only plan.recompute_layers of them, those layers' inputs
// and everything of the others.
Bytes chunk_activation_bytes(const ir::ModelSpec& model, const parallel::ParallelPlan& plan, double chunk_layers,
                             const ActivationOptions& options);

// The kept activations of stage `stage` at its peak: chunk_activation_bytes(..., stage_layers / v)
// × in_flight_micro_batches(plan, stage). Layers of the embedding and LM head are not included
// (see transients.h for the logits).
Bytes stage_activation_bytes(const ir::ModelSpec& model, const parallel::ParallelPlan& plan,
                             std::int64_t stage, std::int64_t stage_layers,
                             const ActivationOptions& options);

}  // namespace ts::memory
