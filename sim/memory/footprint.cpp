#include "sim/memory/footprint.h"

#include <algorithm>

#include "sim/base/diagnostic.h"
#include "sim/ir/model_graph.h"
#include "sim/parallel/lowering.h"
#include "sim/parallel/schedule.h"

namespace ts::memory {

namespace {

std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

std::int64_t norm_parameters(const ir::ModelSpec& m) {
  return (m.norm == ir::Norm::kLayerNorm ? 2 : 1) * m.hidden;  // LayerNorm: scale and shift
}

// K and V heads one TP rank holds: Megatron splits the KV heads (query groups) over TP; when
// there are fewer KV heads than ranks each rank keeps one (replicated) head.
std::int64_t kv_heads_per_rank(const ir::ModelSpec& m, std::int64_t tp) {
  return std::max<std::int64_t>(1, ceil_div(m.num_kv_heads, tp));
}

// Model chunks per pipeline rank: v virtual stages in the interleaved schedule, two in a V.
std::int64_t chunks_per_stage(const parallel::ParallelPlan& plan) { return plan.model_chunks(); }

}  // namespace

// ---------------------------------------------------------------------------------------------
// Parameters

LayerParameters layer_parameters(const ir::ModelSpec& m) {
  const std::int64_t h = m.hidden;
  const std::int64_t kv = m.kv_hidden();
  const std::int64_t fc1_out = (m.activation == ir::Activation::kSwiglu ? 2 : 1) * m.ffn_hidden;
  LayerParameters p;
  p.qkv_weight = h * (h + 2 * kv);
  p.proj_weight = h * h;
  p.fc1_weight = h * fc1_out;
  p.fc2_weight = m.ffn_hidden * h;
  if (m.linear_bias) {
    p.qkv_bias = h + 2 * kv;
    p.proj_bias = h;
    p.fc1_bias = fc1_out;
    p.fc2_bias = h;
  }
  p.norms = 2 * norm_parameters(m);
  return p;
}

std::int64_t LayerParameters::total() const {
  return qkv_weight + qkv_bias + proj_weight + proj_bias + fc1_weight + fc1_bias + fc2_weight + fc2_bias +
         norms;
}

std::int64_t LayerParameters::per_tp_rank(const ir::ModelSpec& m, std::int64_t tp) const {
  if (tp == 1) return total();
  const std::int64_t h = m.hidden;
  const std::int64_t qkv_cols = ceil_div(h, tp) + 2 * kv_heads_per_rank(m, tp) * m.head_dim();
  const std::int64_t qkv = h * qkv_cols + (qkv_bias > 0 ? qkv_cols : 0);
  return qkv + ceil_div(proj_weight, tp) + proj_bias + ceil_div(fc1_weight, tp) + ceil_div(fc1_bias, tp) +
         ceil_div(fc2_weight, tp) + fc2_bias + norms;
}

std::int64_t LayerParameters::largest_per_tp_rank(const ir::ModelSpec& m, std::int64_t tp) const {
  const std::int64_t qkv_cols = ceil_div(m.hidden, tp) + 2 * kv_heads_per_rank(m, tp) * m.head_dim();
  return std::max({m.hidden * qkv_cols, ceil_div(proj_weight, tp), ceil_div(fc1_weight, tp),
                   ceil_div(fc2_weight, tp)});
}

std::int64_t parameter_count(const ir::ModelSpec& m) {
  const std::int64_t h = m.hidden;
  std::int64_t n = m.num_layers * layer_parameters(m).total();
  n += m.vocab * h;                                         // input embedding
  if (!m.tied_embeddings) n += m.vocab * h;                 // LM head
  if (m.position == ir::Position::kLearned) n += m.max_seq_len * h;
  n += norm_parameters(m);                                  // final norm
  return n;
}

namespace {

// Rows of the vocab-parallel embedding (or LM head) one TP rank holds (Megatron
// VocabParallelEmbedding / ColumnParallelLinear output layer).
std::int64_t vocab_shard(const ir::ModelSpec& m, std::int64_t tp) { return ceil_div(m.vocab, tp) * m.hidden; }

bool holds_lm_head(const ir::ModelSpec& m, const parallel::ParallelPlan& plan, std::int64_t stage) {
  // On the embedding's rank (one stage, or the first rank of a V) a tied head is the embedding.
  return stage == plan.head_stage() && !(m.tied_embeddings && plan.head_stage() == 0);
}

}  // namespace

std::int64_t stage_parameters(const ir::ModelSpec& m, const parallel::ParallelPlan& plan, std::int64_t stage,
                              std::int64_t stage_layers) {
  SIM_ASSERT(stage >= 0 && stage < plan.pp, "pipeline stage out of range");
  // A mixture of experts: layer by layer (dense first layers; routed experts split over EP × ETP,
  // the rest over TP), as the lowering counts them.
  if (m.moe) return parallel::stage_parameters(m, plan, stage);
  std::int64_t n = stage_layers * layer_parameters(m).per_tp_rank(m, plan.tp);
  if (stage == 0) {
    n += vocab_shard(m, plan.tp);
    // Learned position embeddings are not split over TP (Megatron LanguageModelEmbedding).
    if (m.position == ir::Position::kLearned) n += m.max_seq_len * m.hidden;
  }
  if (stage == plan.head_stage()) {
    n += norm_parameters(m) + m.mtp_layers * (layer_parameters(m).per_tp_rank(m, plan.tp) +
                                              parallel::mtp_projection_parameters(m, plan));
  }
  if (holds_lm_head(m, plan, stage)) n += vocab_shard(m, plan.tp);
  return n;
}

// ---------------------------------------------------------------------------------------------
// Static footprint

BytesPerParameter bytes_per_parameter(const parallel::ParallelPlan& plan) {
  BytesPerParameter b;
  switch (plan.optimizer_states) {
    case parallel::OptimizerStates::kFp32:
      b.weights = 2;           // bf16
      // fp32 main_grad accumulation buffer, or the reduction's bf16 under ZeRO 0–1 (footprint.h)
      b.gradients = plan.zero_stage_in_effect() <= 1 ? plan.grad_reduce_bytes() : 4;
      b.optimizer_states = 8;  // fp32 m and v
      b.master_weights = 4;    // fp32 master copy
      break;
    case parallel::OptimizerStates::kFp32Bf16Moments:
      // As kFp32 with m and v in bf16 (Megatron-Core's precision-aware optimizer with
      // exp_avg_dtype and exp_avg_sq_dtype bf16): 2 + 2 bytes of states in place of 4 + 4.
      b.weights = 2;
      b.gradients = plan.zero_stage_in_effect() <= 1 ? plan.grad_reduce_bytes() : 4;
      b.optimizer_states = 4;
      b.master_weights = 4;
      break;
    case parallel::OptimizerStates::kBf16:
    case parallel::OptimizerStates::kNone:
      // Pure bf16: the bf16 weights are the master copy and the gradient buffer is bf16.
      b.weights = 2;
      b.gradients = 2;
      // bf16 m and v; SGD without momentum keeps nothing.
      b.optimizer_states = plan.optimizer_states == parallel::OptimizerStates::kBf16 ? 4 : 0;
      b.master_weights = 0;
      break;
  }
  return b;
}

Bytes optimizer_step_bytes_per_parameter(const parallel::ParallelPlan& plan) {
  switch (plan.optimizer_states) {
    case parallel::OptimizerStates::kFp32:
      // Reads the fp32 gradient, master weight, m and v (16 B); writes master, m, v (12 B) and
      // the bf16 weight (2 B).
      return Bytes(30);
    case parallel::OptimizerStates::kFp32Bf16Moments:
      // Reads the fp32 gradient and master weight and the bf16 m and v (12 B); writes the
      // master (4 B), m and v (4 B) and the bf16 weight (2 B).
      return Bytes(22);
    case parallel::OptimizerStates::kBf16:
      // Reads the bf16 gradient, weight, m and v (8 B); writes weight, m and v (6 B).
      return Bytes(14);
    case parallel::OptimizerStates::kNone:
      // torch.optim.SGD with weight decay: d = grad + wd·w (reads 4 B, writes 2 B), then
      // w -= lr·d (reads 4 B, writes 2 B).
      return Bytes(12);
  }
  return Bytes(30);
}

StaticFootprint static_footprint(const ir::ModelSpec& m, const parallel::ParallelPlan& plan, std::int64_t stage,
                                 std::int64_t stage_layers) {
  // Routed experts' states are sharded over the ranks that hold the same experts (expert data
  // parallelism, Megatron-Core's expert distributed optimizer), the rest over DP × CP.
  const std::int64_t experts = parallel::stage_expert_parameters(m, plan, stage);
  const std::int64_t params = stage_parameters(m, plan, stage, stage_layers) - experts;
  const BytesPerParameter bpp = bytes_per_parameter(plan);
  const std::int64_t shards = plan.zero_shards();
  // Parameters of this rank whose state ZeRO stage `needed` (or higher) shards.
  auto sharded = [&](int needed) {
    if (plan.zero_stage_in_effect() < needed) return params + experts;
    return ceil_div(params, shards) + ceil_div(experts, plan.expert_dp());
  };

  StaticFootprint f;
  f.weights = Bytes(sharded(3) * bpp.weights);
  if (plan.optimizer_in_backward) {
    std::int64_t largest = stage_layers > 0 ? layer_parameters(m).largest_per_tp_rank(m, plan.tp) : 0;
    if (stage == 0) {
      largest = std::max(largest, vocab_shard(m, plan.tp));
      if (m.position == ir::Position::kLearned) largest = std::max(largest, m.max_seq_len * m.hidden);
    }
    if (holds_lm_head(m, plan, stage)) largest = std::max(largest, vocab_shard(m, plan.tp));
    f.gradients = Bytes(largest * bpp.gradients);
  } else {
    f.gradients = Bytes(sharded(2) * bpp.gradients);
  }
  f.optimizer_states = Bytes(sharded(1) * bpp.optimizer_states);
  f.master_weights = Bytes(sharded(1) * bpp.master_weights);
  return f;
}

// ---------------------------------------------------------------------------------------------
// Activations

ActivationOptions default_activation_options(const ir::ModelSpec& m) {
  ActivationOptions o;
  o.flash_attention = true;
  o.dropout = m.dropout.value_or(m.norm == ir::Norm::kLayerNorm && m.activation == ir::Activation::kGelu);
  return o;
}

// Derivation, per layer and micro-batch, in bytes (bf16 tensors: 2 bytes per element; dropout
// masks: 1 byte). Notation: s tokens of each sequence on this device (seq_len / cp), S = seq_len
// keys each query attends to, b micro-batch, h hidden, kv = kv_hidden (h without GQA), f = ffn,
// a heads, t = tp; u = 1/t with sequence parallelism, else 1 (tensors outside the TP regions
// are then split over the sequence: Korthikanti et al. 2022 Sec. 4.2.2 keep only the sharded
// input of each all-gather and gather it again in the backward pass).
//
// Attention block (Korthikanti Sec. 4.1, "11sbh + 5as²b" for GPT):
//   norm input                         2sbh·u
//   QKV GEMM input (norm output)       2sbh·u
//   Q, K, V (RoPE applied; its backward needs no saved input)
//                                      2sb·h/t + 2·2sb·kv/t
//   without flash attention: softmax output 2·a·b·s·S/t, and with dropout its mask a·b·s·S/t
//     and output 2·a·b·s·S/t (GPT: 5as²b/t);
//   with flash attention: the log-sum-exp, fp32 per query and head, 4·a·b·s/t (the softmax is
//     recomputed blockwise in the backward pass, Dao et al. 2022 Sec. 3.1)
//   projection input (the attention output, also what flash attention saves)
//                                      2sb·h/t
//   dropout mask after the projection  sbh·u
// MLP block ("19sbh" for GPT with f = 4h):
//   norm input                         2sbh·u
//   fc1 input (norm output)            2sbh·u
//   GELU: fc1 output (GELU input) and GELU output (fc2 input): 2·2sb·f/t
//   SwiGLU: gate output, up output and their product silu(gate)·up (fc2 input); Megatron's
//     fused swiglu recomputes silu in its backward from the saved gate: 3·2sb·f/t
//   dropout mask after fc2             sbh·u
// GPT (kv = h, f = 4h, dropout, no flash attention) sums to sbh(10u + 24/t) + 5as²b/t, which is
// Korthikanti's Table 2 for every row; Llama (RMSNorm, GQA, SwiGLU, flash attention, no dropout)
// to 8sbh·u + (4sbh + 4sb·kv + 6sbf + 4abs)/t. Per-token norm statistics (fp32 mean and rstd,
// 4–8 bytes per token) are left out, as in Korthikanti's accounting.
//
// FP8. A linear layer running in FP8 keeps the FP8 cast of its input for the weight-gradient
// GEMM, one byte per element instead of two (Transformer Engine's Linear and LayerNormLinear save
// the cast input when FP8 is on; torchao's float8 linear alike): the QKV and fc1 inputs (the norm
// outputs), the output projection's input (the attention output) and fc2's input (the GELU
// output or the SwiGLU product) are halved.
//
// Recompute. Selective (Korthikanti Sec. 5) recomputes the core attention: its internal tensors
// (the s² terms, or the log-sum-exp) are dropped and rebuilt in the backward pass; Q, K, V and
// the output are the checkpoint's inputs and output and stay. Full recompute keeps only each
// layer's input, 2sbh·u, and rebuilds the rest of the layer during its backward pass.
LayerActivations layer_activations(const ir::ModelSpec& m, const parallel::ParallelPlan& plan,
                                   const ActivationOptions& o) {
  SIM_ASSERT(plan.cp >= 1 && plan.tp >= 1 && plan.micro_batch >= 1, "invalid parallel plan");
  const double s = static_cast<double>(plan.seq_len) / static_cast<double>(plan.cp);
  const double full_s = static_cast<double>(plan.seq_len);
  const double b = static_cast<double>(plan.micro_batch);
  const double h = static_cast<double>(m.hidden);
  const double t = static_cast<double>(plan.tp);
  const double a = static_cast<double>(m.num_heads);
  const double kv = static_cast<double>(kv_heads_per_rank(m, plan.tp) * m.head_dim()) * t;  // per rank × t
  const double f = static_cast<double>(m.ffn_hidden);
  const double u = plan.sequence_parallel ? 1.0 / t : 1.0;
  const double sbh = s * b * h;
  const double drop = o.dropout ? 1.0 : 0.0;

  // Bytes per element of a linear layer's saved input: its quantized copy (FP8 1, MXFP8 1 + 1/32,
  // NVFP4 1/2 + 1/16 with the block scales), else 2.
  const double in = ir::quantized_gemm(plan.dtype) ? ir::bytes_per_element(plan.dtype) : 2.0;
  // Outside the TP regions: two norm inputs, two GEMM inputs, two dropout masks.
  const double unsplit = sbh * (2 + 2 + in + in + 2 * drop) * u;
  // Inside: Q, K, V, attention output (a GEMM input), MLP intermediates (the last a GEMM input).
  const double mlp_parts = m.activation == ir::Activation::kSwiglu ? 3.0 : 2.0;
  double moe_mlp = 0;
  double moe_act = 0;  // the routed experts' activation outputs (fc2 inputs): what moe_act drops
  if (m.moe) {
    // A mixture of experts (every layer counted as an MoE layer) keeps, per token it routes
    // (its sequence-parallel share): the router's fp32 probabilities over the experts and the
    // shared experts' intermediates; per token copy its experts receive (top-k copies, ETP
    // gathered, at the routing load): the permuted input (the grouped fc1's input), the
    // expert's intermediates and its output (the unpermutation's input). Dropless routing at
    // an imbalance keeps the worst rank's copies.
    const ir::MoeSpec& e = *m.moe;
    const double tokens = s * b * u;
    const double rows = tokens * static_cast<double>(e.top_k * plan.etp) * plan.expert_load();
    const double eff = static_cast<double>(e.expert_ffn_hidden / plan.etp);
    const double shared = static_cast<double>(e.shared_experts * e.shared_ffn_hidden);
    const double per_width = (mlp_parts - 1) * 2 + in;
    moe_mlp = rows * (in * h + per_width * eff + 2 * h) +
          tokens * (4 * static_cast<double>(e.num_experts) + per_width * shared);
    moe_act = rows * in * eff;
  }
  const double split =
      m.moe ? (2 * s * b * h + 4 * s * b * kv + in * s * b * h) / t + moe_mlp
            : (2 * s * b * h + 4 * s * b * kv + in * s * b * h + ((mlp_parts - 1) * 2 + in) * s * b * f) / t;
  // Core-attention internals: what selective recompute drops.
  const double core = o.flash_attention ? 4 * a * b * s / t : (2 + 3 * drop) * a * b * s * full_s / t;
  // Eager elementwise ops (parallel::Elementwise::kEager) keep more for their backward. An eager
  // RMSNorm keeps the fp32 copy of its input (pow and the product with rsqrt save it) and its bf16
  // output before the weight (the weight's product saves it), 4 + 2 bytes per element where the
  // fused kernel keeps its 2-byte input: 4 more per norm. An eager SwiGLU keeps silu's output
  // beside the gate and up halves (the product saves both factors): 2 more per MLP element. The
  // rotary products save only cos/sin or freqs_cis, which need no gradient.
  const bool eager = plan.elementwise == parallel::Elementwise::kEager;
  const double eager_norms = eager && m.norm == ir::Norm::kRmsNorm ? 2 * 4 * sbh * u : 0.0;
  const double eager_mlp = eager && m.activation == ir::Activation::kSwiglu ? 2 * s * b * f / t : 0.0;

  const double all = unsplit + split + core + eager_norms + eager_mlp;
  LayerActivations r;
  r.input = Bytes::from_real(2 * sbh * u);
  switch (plan.recompute) {
    case parallel::Recompute::kNone:
      r.kept = Bytes::from_real(all);
      r.rematerialized = Bytes();
      break;
    case parallel::Recompute::kSelective: {
      // The modules' outputs are dropped after use and rebuilt before the backward needs them
      // (Megatron-Core's selective recompute; output-discarding checkpoints for layernorm,
      // moe_act and mla_up_proj). Each drops what the derivation above counts for it:
      //   core_attn    the core's internals (above)
      //   layernorm    both norms' outputs, the QKV and fc1 (router) GEMM inputs: 2·in·sbh·u
      //   moe_act      the routed experts' activation outputs, fc2's inputs: rows·in·f_e
      //   mla_up_proj  the up-projected queries, keys and values: (2sbh + 4sb·kv)/t
      //   mlp          a dense MLP's tensors after its input: in·sbh·u, the intermediates and
      //                the dropout mask (every layer of an MoE model counts as an MoE layer
      //                here, so none of its layers)
      using parallel::RecomputeModule;
      double dropped = 0;
      if (plan.recomputes(RecomputeModule::kCoreAttn)) dropped += core;
      if (plan.recomputes(RecomputeModule::kLayernorm)) dropped += 2 * in * sbh * u;
      if (plan.recomputes(RecomputeModule::kMoeAct)) dropped += moe_act;
      if (plan.recomputes(RecomputeModule::kMlaUpProj)) dropped += (2 * s * b * h + 4 * s * b * kv) / t;
      if (plan.recomputes(RecomputeModule::kMlp) && !m.moe) {
        dropped += (in + drop) * sbh * u + ((mlp_parts - 1) * 2 + in) * s * b * f / t + eager_mlp;
        // layernorm already dropped fc1's input
        if (plan.recomputes(RecomputeModule::kLayernorm)) dropped -= in * sbh * u;
      }
      r.kept = Bytes::from_real(all - dropped);
      r.rematerialized = Bytes::from_real(dropped);
      break;
    }
    case parallel::Recompute::kSelectiveOp: {
      // The layer's input, the matmul outputs the op policy saves (bf16, per token: the output
      // features of this rank's saved calls) and the flash attention kernel's output and
      // log-sum-exp; the rest is rebuilt before the layer's backward.
      const auto policy = ir::op_policy_per_token(m, plan.tp, o.flash_attention);
      const double saved_matmuls = 2 * s * b * static_cast<double>(policy.saved_matmul_features);
      const double attention = o.flash_attention ? 2 * sbh / t + 4 * a * b * s / t : 0.0;
      r.kept = Bytes::from_real(2 * sbh * u + saved_matmuls + attention);
      r.rematerialized = Bytes::from_real(std::max(0.0, all - r.kept.real()));
      break;
    }
    case parallel::Recompute::kFull:
      r.kept = r.input;
      r.rematerialized = Bytes::from_real(all) - r.input;
      break;
  }
  return r;
}

Bytes layer_activation_bytes(const ir::ModelSpec& m, const parallel::ParallelPlan& plan,
                             const ActivationOptions& options) {
  return layer_activations(m, plan, options).kept;
}

Bytes layer_activation_bytes(const ir::ModelSpec& m, const parallel::ParallelPlan& plan) {
  return layer_activation_bytes(m, plan, default_activation_options(m));
}

// ---------------------------------------------------------------------------------------------
// Pipeline

std::int64_t in_flight_micro_batches(const parallel::ParallelPlan& plan, std::int64_t stage) {
  SIM_ASSERT(stage >= 0 && stage < plan.pp, "pipeline stage out of range");
  SIM_ASSERT(plan.num_micro_batches() >= 1, "no micro-batch in the iteration");
  // The schedule the replay runs decides it (one source of truth, parallel::pipeline_blocks).
  return parallel::max_in_flight(parallel::pipeline_blocks(plan, stage));
}

Bytes whole_layer_activation_bytes(const ir::ModelSpec& m, const parallel::ParallelPlan& plan,
                                   const ActivationOptions& options) {
  parallel::ParallelPlan none = plan;
  none.recompute = parallel::Recompute::kNone;
  none.recompute_layers = 0;
  return layer_activations(m, none, options).kept;
}

Bytes chunk_activation_bytes(const ir::ModelSpec& m, const parallel::ParallelPlan& plan, double chunk_layers,
                             const ActivationOptions& options) {
  const double per_layer = layer_activations(m, plan, options).kept.real();
  if (plan.recompute != parallel::Recompute::kFull || plan.recompute_layers == 0) {
    return Bytes::from_real(per_layer * chunk_layers);
  }
  const double recomputed = std::min(static_cast<double>(plan.recompute_layers), chunk_layers);
  const double whole = whole_layer_activation_bytes(m, plan, options).real();
  return Bytes::from_real(per_layer * recomputed + whole * (chunk_layers - recomputed));
}

Bytes stage_activation_bytes(const ir::ModelSpec& m, const parallel::ParallelPlan& plan, std::int64_t stage,
                             std::int64_t stage_layers, const ActivationOptions& options) {
  const double chunk_layers = static_cast<double>(stage_layers) / static_cast<double>(chunks_per_stage(plan));
  return chunk_activation_bytes(m, plan, chunk_layers, options) * in_flight_micro_batches(plan, stage);
}

}  // namespace ts::memory
