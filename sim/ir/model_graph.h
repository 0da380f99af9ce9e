// The model graph: the ops of a transformer layer, embedding and LM head, with shapes and FLOPs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <vector>

#include "sim/base/units.h"
#include "sim/ir/dtype.h"
#include "sim/ir/model_spec.h"

namespace ts::ir {

enum class OpKind { kGemm, kAttention, kMemoryBound };

// Eager MoE permutation kernels: the gather of token copies (index_select), the weighted
// scatter-add (index_add_), the router's softmax and top-k.
enum class EagerMoeKernel : std::uint8_t { kNone, kGather, kScatterAdd, kRouterTopk };

// The kernel behind a normalization op: none (not a norm, or eager RMSNorm composed of streaming
// ATen ops), a fused norm kernel (Transformer Engine / cuDNN, Apex, Triton, compiled) or PyTorch's
// native LayerNorm (ATen layer_norm, what eager code runs). Each is priced at its own measured
// rate where the GPU's calibration has one (compute::MemoryKernel).
enum class NormKernel : std::uint8_t { kNone, kFused, kNative };

// Y[m,n] = X[m,k] · W[k,n], `batch` independent products.
struct GemmDims {
  std::int64_t m = 0, n = 0, k = 0, batch = 1;
};

struct AttentionDims {
  std::int64_t batch = 0, heads = 0, kv_heads = 0, seq_q = 0, seq_kv = 0, head_dim = 0;
  std::int64_t head_dim_v = 0;  // value head dimension; 0: head_dim (MLA: narrower values)
  std::int64_t window = 0;      // causal sliding window (keys per query); 0: full attention
  bool causal = true;
};

// Query-key pairs a causal sliding window of `window` keys computes when the `seq_q` queries are
// the last of `seq_kv` positions (bottom-right aligned): Σ over queries of min(window, keys
// before and at it). window >= seq_kv gives the causal triangle.
inline double banded_pairs(std::int64_t seq_q, std::int64_t seq_kv, std::int64_t window) {
  const double a = static_cast<double>(std::max<std::int64_t>(0, seq_kv - seq_q) + 1);
  const double b = a + static_cast<double>(seq_q) - 1;  // keys seen by the first and last query
  const double w = static_cast<double>(window);
  if (seq_q <= 0) return 0;
  if (b <= w) return (a + b) * (b - a + 1) / 2;
  if (a > w) return w * (b - a + 1);
  return (a + w) * (w - a + 1) / 2 + w * (b - w);
}

struct Op {
  const char* name = "";  // static string, e.g. "qkv", "attention", "mlp_down"
  OpKind kind = OpKind::kMemoryBound;
  bool backward = false;
  Dtype dtype = Dtype::kBf16;
  GemmDims gemm;       // kGemm
  AttentionDims attn;  // kAttention
  Bytes moved;         // kMemoryBound: bytes read plus written
  // Part of the attention core (scores, softmax, values: what selective recompute reruns and
  // what context parallelism exchanges keys and values around).
  bool core = false;
  // kMemoryBound: a normalization and its kernel (fused, or PyTorch's native LayerNorm in eager
  // code), priced at that kernel's measured rate (compute::MemoryKernel).
  NormKernel norm = NormKernel::kNone;
  // kMemoryBound: one of eager PyTorch's MoE token permutation kernels (Megatron-Core's
  // permute/unpermute without moe_permute_fusion), priced at its measured rate
  // (compute::MemoryKernel); kNone: a streaming kernel.
  EagerMoeKernel eager_moe = EagerMoeKernel::kNone;
  // A backward GEMM that computes a weight gradient (dW = Xᵀ·dY), not an input gradient: the
  // work zero-bubble schedules run apart from the rest of the backward.
  bool weight_grad = false;
  // kGemm: a grouped GEMM of gemm.batch equal groups (MoE expert GEMMs: Megatron-Core
  // GroupedMLP, TE GroupedLinear), priced by the grouped kernel's calibration.
  bool grouped = false;
  // A forward op rerun in its block's backward list (selective recompute, the op policy,
  // Mini-Sequence's chunk recompute): the time breakdown counts it as recompute.
  bool rerun = false;
  Flops flops;         // arithmetic of this op (GEMM and attention; 0 for memory-bound ops)
};

// How one transformer layer is cut for one device: micro-batch, the device's share of the
// sequence (after context parallelism), tensor-parallel degree and options.
struct LayerShape {
  std::int64_t micro_batch = 1;
  std::int64_t seq = 0;      // tokens of each sequence held by this device (seq_len / cp)
  std::int64_t full_seq = 0; // keys each query may attend to (seq_len)
  std::int64_t tp = 1;
  bool sequence_parallel = false;
  Dtype gemm_dtype = Dtype::kBf16;  // fp8 runs GEMMs in FP8, everything else in bf16
  // FP8: the share of its weight casts a micro-batch does (1/micro-batches per step when the
  // casts are cached across them, ParallelPlan::fp8_weight_cache; else 1).
  double fp8_weight_cast_share = 1.0;
  bool flash_attention = true;      // off: the attention core as separate kernels
  bool fp8_attention = false;       // the fused attention kernel on FP8 operands
  // RMSNorm, the rotary embedding and SwiGLU as PyTorch's eager ops, LayerNorm as its native
  // kernel (parallel::Elementwise).
  bool eager_elementwise = false;
  // Context parallelism: the attention core covers `attention_q` queries against `attention_kv`
  // keys per call, with `attention_heads_divisor` splitting the heads (Ulysses). Zero = defaults
  // (seq queries against full_seq keys, no head split).
  std::int64_t attention_q = 0;
  std::int64_t attention_kv = 0;
  std::int64_t attention_heads_divisor = 1;
  // Sliding-window layers: keys each query attends to (ModelSpec::attention_window); 0: full.
  std::int64_t attention_window = 0;
};

// The ops of one block on one device, in execution order. Backward lists are in the order the
// backward pass runs them (reverse of forward, each GEMM as data-gradient then weight-gradient).
struct Block {
  std::vector<Op> forward;
  std::vector<Op> backward;
};

// A transformer layer as Megatron splits it: attention block and MLP block, each followed by a
// tensor-parallel reduction of its output (b·s·h activations).
struct LayerOps {
  Block attention;
  Block mlp;
};

// The attention block cut around its attention core, for context parallelism that exchanges
// keys and values between the pre-attention ops (norm, QKV, rotary) and the post-attention ops
// (output projection, residual).
struct SplitAttention {
  Block pre;
  Block core;
  Block post;
};
SplitAttention split_attention(const Block& attention);

LayerOps build_layer(const ModelSpec& model, const LayerShape& shape);
// Token embedding lookup (first pipeline stage).
Block build_embedding(const ModelSpec& model, const LayerShape& shape);
// Final norm, LM-head GEMM (vocabulary split over TP) and cross-entropy loss (last stage).
Block build_lm_head(const ModelSpec& model, const LayerShape& shape);
// The input side of one multi-token-prediction module (DeepSeek-V3, arXiv 2412.19437 Sec. 2.2;
// Megatron-Core MultiTokenPredictionLayer): the shifted tokens' embedding lookup, the norms of
// that embedding and of the previous depth's hidden states, their concatenation and the 2h → h
// projection (eh_proj, split over TP). Its transformer layer and its LM head and loss are the
// model's own blocks.
Block build_mtp_projection(const ModelSpec& model, const LayerShape& shape);

// PyTorch selective activation checkpointing with torchtitan's op policy (torchtitan
// `activation_checkpoint.selective_ac_option = "op"`, models/llama3/parallelize: `_op_sac_save_list`
// and `_custom_policy`): in each transformer layer the outputs of the attention kernel and of the
// matrix multiplications are saved, except every second matmul of the layer (the 2nd, 4th, … call
// in forward order); everything else (norms, rotary, activation, residual adds, and those matmuls)
// is recomputed before the layer's backward. Llama-style layers (SwiGLU) call their projections
// separately, as torchtitan's model does: Q, K, V, output, then gate (w1), up (w3), down (w2);
// other layers call one fused QKV projection and one up projection. The ops of one layer that the
// policy reruns, from the layer's forward lists (attention block, then MLP block) …
struct OpPolicyRecompute {
  std::vector<Op> attention;  // reruns before the attention block's backward
  std::vector<Op> mlp;        // before the MLP block's
  std::int64_t saved_matmul_features = 0;  // … and the output features per token the saved matmuls keep
};
OpPolicyRecompute op_policy_recompute(const ModelSpec& model, const LayerOps& layer);
// The same for a layer of one token on a rank of `tp`: matmul FLOPs and saved features per token.
OpPolicyRecompute op_policy_per_token(const ModelSpec& model, std::int64_t tp, bool flash_attention);

// How one MoE block runs on one device: expert parallelism, expert tensor parallelism, the
// load of the most loaded rank over the mean (1: balanced routing), and the dispatcher's
// permutations that run as kernels of their own (see build_moe): the permutation of the tokens
// into expert copies and its reverse (all but HybridEP, whose dispatch and combine kernels do
// them), and the sort of the received copies into local-expert order and back (the all-to-all
// dispatcher on a rank of several experts).
struct MoeShape {
  std::int64_t ep = 1;
  std::int64_t etp = 1;
  double load = 1.0;
  bool sorts_by_expert = false;
  bool permutes = true;
};

// The MLP block of an MoE layer as Megatron-Core's MoELayer runs it, in pieces the lowering puts
// around the token dispatch and combine: the router (norm, router GEMM, score function and
// top-k, permutation of the token copies into expert order), the shared experts (beside the
// dispatch), the local experts' grouped GEMMs, and the unpermutation with the residual add.
struct MoeOps {
  Block router;
  Block shared;
  Block experts;
  Block unpermute;
};
MoeOps build_moe(const ModelSpec& model, const LayerShape& shape, const MoeShape& moe);

// Backward counterpart of a forward op list, in backward execution order.
std::vector<Op> backward_of(const std::vector<Op>& forward);

Flops total_flops(const std::vector<Op>& ops);

// Parameters of one layer: attention with its norms; the dense part of the MLP (a dense MLP, or
// an MoE layer's router and shared experts); the routed experts (0 in a dense layer).
std::int64_t attention_parameter_count(const ModelSpec& model);
std::int64_t dense_mlp_parameter_count(const ModelSpec& model, std::int64_t layer);
std::int64_t expert_parameter_count(const ModelSpec& model, std::int64_t layer);
std::int64_t layer_parameter_count(const ModelSpec& model, std::int64_t layer);
// The first layer's (every layer's in a dense model).
std::int64_t layer_parameter_count(const ModelSpec& model);
// Parameters of the whole model, multi-token prediction modules included; of those modules; and
// those a token uses (without the unchosen routed experts and the MTP modules, embedding
// included: the convention of the DeepSeek-V3, Qwen3 and Mixtral model cards).
std::int64_t parameter_count(const ModelSpec& model);
std::int64_t mtp_parameter_count(const ModelSpec& model);
std::int64_t active_parameter_count(const ModelSpec& model);

// Model FLOPs of training on `tokens` tokens of sequences of `seq_len` (forward + backward, no
// recompute): 6 FLOPs per GEMM weight per token (Kaplan et al. 2020) including the LM head, plus
// attention scores and values, 12·L·h·s per token for full attention, halved for causal masks
// (only the lower triangle is computed by flash attention).
// Mixture-of-experts, latent-attention and MTP models follow Megatron-Core's count (routed
// experts at top-k, no router, MTP modules included), as Megatron-Bridge's tables report.
Flops model_flops(const ModelSpec& model, std::int64_t seq_len, double tokens);

}  // namespace ts::ir
