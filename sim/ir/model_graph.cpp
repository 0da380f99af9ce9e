#include "sim/ir/model_graph.h"

#include <algorithm>
#include <string>

#include "sim/base/diagnostic.h"

namespace ts::ir {
namespace {

// Activations are bf16 whatever the GEMM precision (FP8 recipes keep activations in bf16 between
// GEMMs, Micikevicius et al. 2022).
constexpr std::int64_t kActBytes = 2;

Op gemm(const char* name, std::int64_t m, std::int64_t n, std::int64_t k, Dtype dtype) {
  Op op;
  op.name = name;
  op.kind = OpKind::kGemm;
  op.dtype = dtype;
  op.gemm = {m, n, k, 1};
  op.flops = Flops(2.0 * static_cast<double>(m) * static_cast<double>(n) * static_cast<double>(k));
  return op;
}

// A streaming op that moves `moved` bytes (reads plus writes).
Op streaming(const char* name, Bytes moved) {
  Op op;
  op.name = name;
  op.kind = OpKind::kMemoryBound;
  op.moved = moved;
  return op;
}

// A streaming op that reads `read_elems` and writes `write_elems` bf16 elements.
Op memory(const char* name, std::int64_t read_elems, std::int64_t write_elems) {
  return streaming(name, Bytes((read_elems + write_elems) * kActBytes));
}

Op attention(const ModelSpec& model, const LayerShape& s) {
  Op op;
  op.name = "attention";
  op.kind = OpKind::kAttention;
  op.dtype = s.fp8_attention ? Dtype::kFp8 : Dtype::kBf16;
  op.attn.batch = s.micro_batch;
  const std::int64_t split = s.tp * s.attention_heads_divisor;
  op.attn.heads = model.num_heads / split;
  // KV heads are replicated when the split exceeds their number.
  op.attn.kv_heads = std::max<std::int64_t>(1, model.num_kv_heads / split);
  op.attn.seq_q = s.attention_q > 0 ? s.attention_q : s.seq;
  op.attn.seq_kv = s.attention_kv > 0 ? s.attention_kv : s.full_seq;
  op.attn.head_dim = model.head_dim();
  op.attn.causal = true;
  op.core = true;
  // FlashAttention convention (Dao 2023): 4·sq·skv·d per head, halved under a causal mask.
  op.flops = Flops(2.0 * static_cast<double>(s.micro_batch * op.attn.heads * op.attn.head_dim) *
                   static_cast<double>(op.attn.seq_q) * static_cast<double>(op.attn.seq_kv));
  if (s.attention_window > 0 && !model.mla) {
    // A sliding window: each query meets at most `window` keys (4·d FLOPs per query-key pair).
    op.attn.window = s.attention_window;
    op.flops = Flops(4.0 * static_cast<double>(s.micro_batch * op.attn.heads * op.attn.head_dim) *
                     banded_pairs(op.attn.seq_q, op.attn.seq_kv, op.attn.window));
  }
  if (model.mla) {
    // Latent attention: queries and keys carry head_dim + rope_head_dim channels, values
    // head_dim; QKᵀ and PV count their own widths, and the kernel is priced so
    // (compute::AttentionShape::head_dim_v).
    const std::int64_t dqk = model.head_dim() + model.mla->rope_head_dim;
    op.attn.head_dim = dqk;
    op.attn.head_dim_v = model.head_dim();
    op.flops = Flops(static_cast<double>(s.micro_batch * op.attn.heads * (dqk + model.head_dim())) *
                     static_cast<double>(op.attn.seq_q) * static_cast<double>(op.attn.seq_kv));
  }
  return op;
}

// A linear layer: its GEMM, preceded under FP8 by the cast of its input and weight. Transformer
// Engine's FP8 recipe (Micikevicius et al. 2022, "FP8 Formats for Deep Learning"; TE
// cast_transpose) reads each bf16 operand and writes it in FP8 twice, as is and transposed for
// the backward GEMMs: 4 bytes moved per element; the backward casts the output gradient alike.
// MXFP8 and NVFP4 quantize likewise, into two block-scaled copies (their scaling blocks run
// along the GEMM's K, so the backward GEMMs need the other direction quantized from bf16, not
// transposed): 2 + 2 x (bytes per element with scales) per element. The weight's cast counts
// with the shape's share of it (cached across micro-batches).
void linear(std::vector<Op>& ops, const char* name, std::int64_t m, std::int64_t n, std::int64_t k,
            const LayerShape& s) {
  if (s.gemm_dtype == Dtype::kFp8) {
    const auto weight = static_cast<std::int64_t>(static_cast<double>(k * n) * s.fp8_weight_cast_share);
    const std::int64_t elems = m * k + weight;  // input and weight
    ops.push_back(memory("fp8_cast", elems, elems));
  } else if (quantized_gemm(s.gemm_dtype)) {
    const auto weight =
        static_cast<std::int64_t>(static_cast<double>(k * n) * s.fp8_weight_cast_share);
    const double elems = static_cast<double>(m * k + weight);
    const double per_element = 2.0 + 2.0 * bytes_per_element(s.gemm_dtype);
    ops.push_back(streaming(s.gemm_dtype == Dtype::kMxfp8 ? "mxfp8_quantize" : "nvfp4_quantize",
                            Bytes::from_real(elems * per_element)));
  }
  ops.push_back(gemm(name, m, n, k, s.gemm_dtype));
}

// The attention core without FlashAttention, as Megatron-LM's CoreAttention runs it: a batched
// QKᵀ GEMM over all heads of the micro-batch, the fused scale-mask-softmax (reads and writes the
// a·sq·skv scores), dropout on the probabilities for GPT-style models (writes a 1-byte mask
// too), and a batched GEMM with the values. Every score is computed: no causal halving. The
// batched GEMMs run in bf16 even in FP8 recipes (Transformer Engine casts only linear layers).
void append_unfused_attention(std::vector<Op>& ops, const ModelSpec& model, const LayerShape& s) {
  const std::int64_t heads = model.num_heads / (s.tp * s.attention_heads_divisor);
  const std::int64_t sq = s.attention_q > 0 ? s.attention_q : s.seq;
  const std::int64_t skv = s.attention_kv > 0 ? s.attention_kv : s.full_seq;
  const std::int64_t d = model.head_dim();
  const std::int64_t batch = s.micro_batch * heads;
  const auto batched = [&](const char* name, std::int64_t m, std::int64_t n, std::int64_t k) {
    Op op = gemm(name, m, n, k, Dtype::kBf16);
    op.gemm.batch = batch;
    op.flops = op.flops * static_cast<double>(batch);
    return op;
  };
  const std::size_t first = ops.size();
  const std::int64_t scores = batch * sq * skv;
  ops.push_back(batched("attn_scores", sq, skv, d));
  ops.push_back(memory("scale_mask_softmax", scores, scores));
  if (model.activation == Activation::kGelu) {  // GPT-style dropout (0.1 in Megatron's GPT)
    ops.push_back(memory("attention_dropout", scores, scores + scores / 2));
  }
  ops.push_back(batched("attn_values", sq, d, skv));
  for (std::size_t i = first; i < ops.size(); ++i) ops[i].core = true;
}

// Bytes per element (reads plus writes) that PyTorch's eager composition of an op moves, kernel
// by kernel (parallel::Elementwise::kEager), against the fused kernel's one read and one write.
// RMSNorm (torchtitan models/norms.py; HuggingFace LlamaRMSNorm), per bf16 element:
//   x.float() 2+4, pow(2) 4+4, mean 4+0, x·rsqrt 4+4, .type_as(x) 4+2, ·weight 2+2 = 36.
constexpr std::int64_t kEagerRmsNormBytes = 36;
// Rotary embedding per element of q and k: torchtitan's apply_rotary_emb (.float() 2+4, complex
// product 4+4, .type_as 4+2) and HuggingFace's rotate_half form (q·cos 2+2, negated half 1+1,
// cat 2+2, ·sin 2+2, sum 4+2) both move 20.
constexpr std::int64_t kEagerRotaryBytes = 20;
// SwiGLU per output element: silu(w1·x) 2+2, then the product with w3·x 4+2 = 10.
constexpr std::int64_t kEagerSwigluBytes = 10;

Op norm(const ModelSpec& model, const LayerShape& s, const char* rms, const char* layer, std::int64_t elems) {
  if (model.norm != Norm::kRmsNorm) {
    // One kernel either way: PyTorch's native LayerNorm in eager code, else a fused one.
    Op op = memory(layer, elems, elems);
    op.norm = s.eager_elementwise ? NormKernel::kNative : NormKernel::kFused;
    return op;
  }
  if (s.eager_elementwise) return streaming(rms, Bytes(elems * kEagerRmsNormBytes));
  Op op = memory(rms, elems, elems);
  op.norm = NormKernel::kFused;
  return op;
}

// Multi-head latent attention's projections (DeepSeek-AI 2024, arXiv 2405.04434 Sec. 2.1;
// Megatron-Core MLASelfAttention): queries through a rank-q_lora down projection, its norm and an
// up projection to heads·(head_dim + rope_head_dim); keys and values through one down projection
// to kv_lora_rank + rope_head_dim (the rotary key part shared by the heads), its norm and an up
// projection to heads·2·head_dim. The down projections are replicated over TP, the up projections
// split by heads; the rotary embedding covers the query's and the shared key's rotary channels.
void append_mla_projections(std::vector<Op>& ops, const ModelSpec& model, const LayerShape& s) {
  const MlaSpec& a = *model.mla;
  const std::int64_t tokens = s.micro_batch * s.seq;
  const std::int64_t heads = model.num_heads / s.tp;
  const std::int64_t dqk = model.head_dim() + a.rope_head_dim;
  if (a.q_lora_rank > 0) {
    linear(ops, "q_down", tokens, a.q_lora_rank, model.hidden, s);
    ops.push_back(memory("q_norm", tokens * a.q_lora_rank, tokens * a.q_lora_rank));
    linear(ops, "q_up", tokens, heads * dqk, a.q_lora_rank, s);
  } else {
    linear(ops, "q_proj", tokens, heads * dqk, model.hidden, s);
  }
  linear(ops, "kv_down", tokens, a.kv_lora_rank + a.rope_head_dim, model.hidden, s);
  ops.push_back(memory("kv_norm", tokens * a.kv_lora_rank, tokens * a.kv_lora_rank));
  linear(ops, "kv_up", tokens, heads * 2 * model.head_dim(), a.kv_lora_rank, s);
  const std::int64_t rot = tokens * (heads + 1) * a.rope_head_dim;
  ops.push_back(memory("rotary", rot, rot));
}

// A linear layer run as one grouped GEMM over `groups` experts of `m` rows each (Megatron-Core
// GroupedMLP, TE GroupedLinear): the GEMM and its casts scaled by the groups.
void grouped_linear(std::vector<Op>& ops, const char* name, std::int64_t groups, std::int64_t m,
                    std::int64_t n, std::int64_t k, const LayerShape& s) {
  const std::size_t first = ops.size();
  linear(ops, name, m, n, k, s);
  for (std::size_t i = first; i < ops.size(); ++i) {
    Op& op = ops[i];
    if (op.kind == OpKind::kGemm) {
      op.gemm.batch = groups;
      op.grouped = true;
      op.flops = op.flops * static_cast<double>(groups);
    } else {
      op.moved = Bytes(op.moved.count() * groups);
    }
  }
}

}  // namespace

MoeOps build_moe(const ModelSpec& model, const LayerShape& s, const MoeShape& e) {
  SIM_ASSERT(model.moe.has_value(), "an MoE block of a dense model");
  const MoeSpec& moe = *model.moe;
  SIM_ASSERT(e.ep > 0 && moe.num_experts % e.ep == 0 && e.etp > 0, "EP must divide the experts");
  const std::int64_t h = model.hidden;
  // Tokens this rank routes: under sequence parallelism each TP rank holds 1/tp of them.
  const std::int64_t tokens = s.micro_batch * s.seq / (s.sequence_parallel ? s.tp : 1);
  const std::int64_t routed = tokens * moe.top_k;  // token copies sent to experts
  const std::int64_t local = moe.num_experts / e.ep;
  // Rows the local experts receive: balanced, as many copies as the rank sent (every rank routes
  // alike); the most loaded rank `load` times that; with expert tensor parallelism each rank of
  // the ETP group runs the group's tokens on its slice of every local expert.
  const auto received = static_cast<std::int64_t>(static_cast<double>(routed * e.etp) * e.load + 0.5);
  const std::int64_t rows = (received + local - 1) / local;
  const std::int64_t eff = moe.expert_ffn_hidden / e.etp;

  MoeOps out;
  auto& r = out.router.forward;
  r.push_back(norm(model, s, "rmsnorm", "layernorm", tokens * h));
  // The router's scores in fp32 (Megatron-Core --moe-router-dtype fp32): a small GEMM, then
  // the score function and top-k over tokens × experts (4-byte reads and writes).
  Op router = gemm("router", tokens, moe.num_experts, h, Dtype::kBf16);
  r.push_back(router);
  // Eager PyTorch (--elementwise eager; Megatron-Core without moe_permute_fusion) runs the
  // score function, top-k, permutation and unpermutation as separate ATen kernels that reach far
  // below the streaming rate; they are priced at their measured rates over the byte counts of
  // those measurements (tools/calibrate/bench_moe.py: router 3 passes of fp32 scores, combine 5
  // passes of the copies). Fused (Transformer Engine's moe_permute and the fused router, which
  // the Megatron-Bridge recipes enable) they stream.
  const bool eager = s.eager_elementwise;
  Op topk = eager ? streaming("router_topk", Bytes(12 * tokens * moe.num_experts))
                  : memory("router_topk", 2 * tokens * moe.num_experts, 2 * tokens * moe.top_k);
  if (eager) topk.eager_moe = EagerMoeKernel::kRouterTopk;
  r.push_back(topk);
  // Permutation: gathers each token's copies into expert order. The all-to-all dispatcher
  // permutes before it sends, DeepEP after it receives (get_permuted_hidden_states_by_experts,
  // each received token into its local copies): a pass of the same size either way. HybridEP
  // permutes inside its dispatch and combine kernels ("permute tokens for communication, perform
  // all-to-all communication, and permute tokens for experts in single step"; its
  // get_permuted_hidden_states_by_experts and get_restored_hidden_states_by_experts return
  // their input, Megatron-Core _HybridEPManager): no pass of its own.
  if (e.permutes) {
    Op permute = memory("permute", tokens * h, routed * h);
    if (eager) permute.eager_moe = EagerMoeKernel::kGather;
    r.push_back(permute);
  }
  if (moe.shared_experts > 0) {
    auto& sh = out.shared.forward;
    const std::int64_t f = moe.shared_experts * moe.shared_ffn_hidden;
    linear(sh, "shared_gate_up", tokens, 2 * f, h, s);
    sh.push_back(memory("shared_swiglu", 2 * tokens * f, tokens * f));
    linear(sh, "shared_down", tokens, h, f, s);
  }
  auto& x = out.experts.forward;
  // The all-to-all dispatcher receives the copies grouped by source rank and, where a rank holds
  // several experts, sorts them into local-expert order before the grouped GEMMs and back after
  // them: Megatron-Core's MoEAlltoAllTokenDispatcher, "Permutation 2: Sort tokens by local
  // expert" (dispatch_postprocess) and "Unpermutation 2" (combine_preprocess), sort_chunks_by_idxs
  // when num_local_experts > 1: Transformer Engine's fused sort kernel under moe_permute_fusion,
  // split and cat otherwise, a copy of every received row either way. DeepEP receives each
  // token once and permutes it into its local copies in expert order in one pass (the
  // permutation above); HybridEP's dispatch kernel delivers them in that order.
  const std::int64_t received_elems = local * rows * h;
  if (e.sorts_by_expert) x.push_back(memory("sort_by_expert", received_elems, received_elems));
  switch (model.activation) {
    case Activation::kGelu:
      grouped_linear(x, "expert_up", local, rows, eff, h, s);
      x.push_back(memory("expert_gelu", local * rows * eff, local * rows * eff));
      break;
    case Activation::kSwiglu:
      grouped_linear(x, "expert_gate_up", local, rows, 2 * eff, h, s);
      x.push_back(memory("expert_swiglu", 2 * local * rows * eff, local * rows * eff));
      break;
  }
  grouped_linear(x, "expert_down", local, rows, h, eff, s);
  if (e.sorts_by_expert) x.push_back(memory("unsort_by_expert", received_elems, received_elems));
  auto& u = out.unpermute.forward;
  // Unpermutation with the routing weights: reads every copy, writes each token once (HybridEP:
  // in its combine kernel); then the residual add.
  if (e.permutes) {
    Op unpermute = eager ? streaming("unpermute", Bytes(5 * routed * h * kActBytes))
                         : memory("unpermute", routed * h, tokens * h);
    if (eager) unpermute.eager_moe = EagerMoeKernel::kScatterAdd;
    u.push_back(unpermute);
  }
  u.push_back(memory("residual", 2 * tokens * h, tokens * h));
  for (Block* b : {&out.router, &out.shared, &out.experts, &out.unpermute}) b->backward = backward_of(b->forward);
  // Autograd's backward of a gather is a scatter-add and the other way round (index_select's
  // backward is index_add_; the weighted index_add_'s is a gather of the output gradient rows).
  for (Block* b : {&out.router, &out.unpermute}) {
    for (Op& op : b->backward) {
      if (op.eager_moe == EagerMoeKernel::kGather) {
        op.eager_moe = EagerMoeKernel::kScatterAdd;
      } else if (op.eager_moe == EagerMoeKernel::kScatterAdd) {
        op.eager_moe = EagerMoeKernel::kGather;
      }
    }
  }
  return out;
}

LayerOps build_layer(const ModelSpec& model, const LayerShape& s) {
  SIM_ASSERT(s.tp > 0 && model.num_heads % s.tp == 0, "TP must divide the heads");
  const std::int64_t tokens = s.micro_batch * s.seq;              // rows of every GEMM
  const std::int64_t h = model.hidden;
  const std::int64_t hidden_elems = tokens * h;                   // one activation tensor
  // With sequence parallelism, norms, dropout and residual adds run on 1/tp of the tokens.
  const std::int64_t sp_elems = s.sequence_parallel ? hidden_elems / s.tp : hidden_elems;
  const std::int64_t q_hidden = model.q_hidden();
  const std::int64_t qkv_out = (q_hidden + 2 * model.kv_hidden()) / s.tp;

  LayerOps layer;
  auto& att = layer.attention.forward;
  att.push_back(norm(model, s, "rmsnorm", "layernorm", sp_elems));
  if (model.mla) {
    append_mla_projections(att, model, s);
  } else {
    linear(att, "qkv", tokens, qkv_out, h, s);
    if (model.position == Position::kRope) {
      const std::int64_t qk = tokens * (q_hidden + model.kv_hidden()) / s.tp;
      att.push_back(s.eager_elementwise ? streaming("rotary", Bytes(qk * kEagerRotaryBytes))
                                        : memory("rotary", qk, qk));
    }
  }
  if (s.flash_attention) {
    att.push_back(attention(model, s));
  } else {
    append_unfused_attention(att, model, s);
  }
  linear(att, "attn_out", tokens, h, q_hidden / s.tp, s);
  // Residual add (reads branch and residual, writes the sum); GPT adds dropout on the branch.
  att.push_back(memory(model.activation == Activation::kGelu ? "dropout_residual" : "residual",
                       2 * sp_elems, sp_elems));

  auto& mlp = layer.mlp.forward;
  const std::int64_t ffn = model.ffn_hidden / s.tp;
  mlp.push_back(norm(model, s, "rmsnorm", "layernorm", sp_elems));
  switch (model.activation) {
    case Activation::kGelu:
      linear(mlp, "mlp_up", tokens, ffn, h, s);
      mlp.push_back(memory("gelu", tokens * ffn, tokens * ffn));
      break;
    case Activation::kSwiglu:
      // Gate and up projections as one GEMM; SwiGLU reads both halves, writes their product.
      linear(mlp, "mlp_gate_up", tokens, 2 * ffn, h, s);
      mlp.push_back(s.eager_elementwise ? streaming("swiglu", Bytes(tokens * ffn * kEagerSwigluBytes))
                                        : memory("swiglu", 2 * tokens * ffn, tokens * ffn));
      break;
  }
  linear(mlp, "mlp_down", tokens, h, ffn, s);
  mlp.push_back(memory(model.activation == Activation::kGelu ? "dropout_residual" : "residual",
                       2 * sp_elems, sp_elems));

  layer.attention.backward = backward_of(att);
  layer.mlp.backward = backward_of(mlp);
  return layer;
}

Block build_embedding(const ModelSpec& model, const LayerShape& s) {
  const std::int64_t elems = s.micro_batch * s.seq * model.hidden;
  Block b;
  // Gather rows of the (vocab-parallel) table; learned positions add a second table and an add.
  b.forward.push_back(memory("embedding", elems, elems));
  if (model.position == Position::kLearned) b.forward.push_back(memory("position_add", 2 * elems, elems));
  b.backward = backward_of(b.forward);
  return b;
}

Block build_lm_head(const ModelSpec& model, const LayerShape& s) {
  const std::int64_t tokens = s.micro_batch * s.seq;
  const std::int64_t elems = tokens * model.hidden;
  const std::int64_t sp_elems = s.sequence_parallel ? elems / s.tp : elems;
  const std::int64_t vocab = (model.vocab + s.tp - 1) / s.tp;  // vocab-parallel, padded
  Block b;
  b.forward.push_back(norm(model, s, "final_rmsnorm", "final_layernorm", sp_elems));
  // The output layer stays in bf16 under FP8 and FP4 recipes: Megatron-Core builds it as its own
  // tensor_parallel.ColumnParallelLinear (megatron/core/models/gpt/gpt_model.py), outside the
  // Transformer Engine modules that fp8_autocast quantizes, and torchtitan's Llama 3 training
  // configs exclude it from float8 (`[float8] filter_fqns = ["output"]`,
  // torchtitan/models/llama3/train_configs/llama3_70b.toml).
  LayerShape head = s;
  head.gemm_dtype = Dtype::kBf16;
  linear(b.forward, "lm_head", tokens, vocab, model.hidden, head);
  // Vocab-parallel cross-entropy (Megatron): max, exp-sum and loss over the logits in fp32,
  // read about three times and written once.
  Op ce = memory("cross_entropy", 2 * 3 * tokens * vocab, 2 * tokens * vocab);
  b.forward.push_back(ce);
  b.backward = backward_of(b.forward);
  return b;
}

Block build_mtp_projection(const ModelSpec& model, const LayerShape& s) {
  const std::int64_t tokens = s.micro_batch * s.seq;
  const std::int64_t elems = tokens * model.hidden;
  const std::int64_t sp_elems = s.sequence_parallel ? elems / s.tp : elems;
  Block b;
  b.forward.push_back(memory("mtp_embedding", elems, elems));
  b.forward.push_back(norm(model, s, "mtp_enorm", "mtp_enorm", sp_elems));
  b.forward.push_back(norm(model, s, "mtp_hnorm", "mtp_hnorm", sp_elems));
  b.forward.push_back(memory("mtp_concat", 2 * sp_elems, 2 * sp_elems));
  linear(b.forward, "mtp_eh_proj", tokens, (model.hidden + s.tp - 1) / s.tp, 2 * model.hidden, s);
  b.backward = backward_of(b.forward);
  return b;
}

SplitAttention split_attention(const Block& attention) {
  SplitAttention out;
  Block* part = &out.pre;
  for (const auto& op : attention.forward) {
    if (op.core) {
      out.core.forward.push_back(op);
      part = &out.post;
    } else {
      part->forward.push_back(op);
    }
  }
  for (Block* b : {&out.pre, &out.core, &out.post}) b->backward = backward_of(b->forward);
  return out;
}

OpPolicyRecompute op_policy_recompute(const ModelSpec& model, const LayerOps& layer) {
  const bool llama = model.activation == Activation::kSwiglu;
  OpPolicyRecompute out;
  std::int64_t calls = 0;  // matmul calls of the layer so far
  const auto walk = [&](const std::vector<Op>& forward, std::vector<Op>& rerun) {
    for (const Op& op : forward) {
      if (op.kind == OpKind::kAttention) continue;  // saved
      if (op.kind != OpKind::kGemm || op.gemm.batch > 1) {
        rerun.push_back(op);  // not in the save list (batched matmuls of an unfused core too)
        continue;
      }
      // The projection's matmul calls: fused QKV and gate/up GEMMs are separate calls in a
      // Llama layer, split by output features.
      std::vector<std::int64_t> parts{op.gemm.n};
      const std::string name = op.name;
      if (llama && name == "qkv") {
        // n = (h + 2·kv)/tp, of which Q has the share h/(h + 2·kv).
        const std::int64_t q = op.gemm.n * model.hidden / (model.hidden + 2 * model.kv_hidden());
        const std::int64_t kv = (op.gemm.n - q) / 2;
        parts = {q, kv, op.gemm.n - q - kv};
      } else if (llama && name == "mlp_gate_up") {
        parts = {op.gemm.n / 2, op.gemm.n - op.gemm.n / 2};
      }
      for (const std::int64_t n : parts) {
        if (++calls % 2 == 1) {
          out.saved_matmul_features += n;
          continue;
        }
        rerun.push_back(gemm(op.name, op.gemm.m, n, op.gemm.k, op.dtype));
      }
    }
  };
  walk(layer.attention.forward, out.attention);
  walk(layer.mlp.forward, out.mlp);
  return out;
}

OpPolicyRecompute op_policy_per_token(const ModelSpec& model, std::int64_t tp, bool flash_attention) {
  LayerShape one;
  one.micro_batch = 1;
  one.seq = 1;
  one.full_seq = 1;
  one.tp = tp;
  one.flash_attention = flash_attention;
  return op_policy_recompute(model, build_layer(model, one));
}

std::vector<Op> backward_of(const std::vector<Op>& forward) {
  std::vector<Op> out;
  out.reserve(forward.size() * 2);
  for (auto it = forward.rbegin(); it != forward.rend(); ++it) {
    Op op = *it;
    op.backward = true;
    switch (op.kind) {
      case OpKind::kGemm: {
        // dX[m,k] = dY[m,n] · Wᵀ and dW[k,n] = Xᵀ · dY[m,n]: two GEMMs of the forward's FLOPs.
        const GemmDims f = it->gemm;
        op.gemm = {f.m, f.k, f.n, f.batch};
        out.push_back(op);
        op.gemm = {f.k, f.n, f.m, f.batch};
        op.weight_grad = true;
        out.push_back(op);
        break;
      }
      case OpKind::kAttention:
        // FlashAttention backward: 2.5× the forward FLOPs (recomputes the scores; Dao 2023).
        op.flops = it->flops * 2.5;
        out.push_back(op);
        break;
      case OpKind::kMemoryBound:
        // Reads the output gradient and the saved input, writes the input gradient.
        op.moved = it->moved + it->moved / 2;
        out.push_back(op);
        break;
    }
  }
  return out;
}

Flops total_flops(const std::vector<Op>& ops) {
  Flops f;
  for (const auto& op : ops) f += op.flops;
  return f;
}

std::int64_t attention_parameter_count(const ModelSpec& m) {
  const std::int64_t h = m.hidden;
  const std::int64_t norms = (m.norm == Norm::kLayerNorm ? 2 : 1) * h * 2;  // two norms per layer
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    const std::int64_t dqk = m.head_dim() + a.rope_head_dim;
    std::int64_t q = h * m.num_heads * dqk;
    if (a.q_lora_rank > 0) q = h * a.q_lora_rank + a.q_lora_rank + a.q_lora_rank * m.num_heads * dqk;
    const std::int64_t kv = h * (a.kv_lora_rank + a.rope_head_dim) + a.kv_lora_rank +
                            a.kv_lora_rank * m.num_heads * 2 * m.head_dim();
    return q + kv + m.q_hidden() * h + norms;
  }
  std::int64_t attn = h * (m.q_hidden() + 2 * m.kv_hidden()) + m.q_hidden() * h;
  if (m.linear_bias) attn += (m.q_hidden() + 2 * m.kv_hidden()) + h;
  return attn + norms;
}

namespace {

// One MLP (dense or expert) of intermediate size `ffn`.
std::int64_t mlp_parameters(const ModelSpec& m, std::int64_t ffn) {
  const bool swiglu = m.activation == Activation::kSwiglu;
  std::int64_t n = (swiglu ? 3 : 2) * m.hidden * ffn;
  if (m.linear_bias) n += ffn * (swiglu ? 2 : 1) + m.hidden;
  return n;
}

}  // namespace

std::int64_t dense_mlp_parameter_count(const ModelSpec& m, std::int64_t layer) {
  if (!m.is_moe_layer(layer)) return mlp_parameters(m, m.ffn_hidden);
  const MoeSpec& e = *m.moe;
  std::int64_t n = m.hidden * e.num_experts;  // router
  if (m.linear_bias) n += e.num_experts;
  if (e.shared_experts > 0) n += mlp_parameters(m, e.shared_experts * e.shared_ffn_hidden);
  return n;
}

std::int64_t expert_parameter_count(const ModelSpec& m, std::int64_t layer) {
  if (!m.is_moe_layer(layer)) return 0;
  return m.moe->num_experts * mlp_parameters(m, m.moe->expert_ffn_hidden);
}

std::int64_t layer_parameter_count(const ModelSpec& m, std::int64_t layer) {
  return attention_parameter_count(m) + dense_mlp_parameter_count(m, layer) + expert_parameter_count(m, layer);
}

std::int64_t layer_parameter_count(const ModelSpec& m) { return layer_parameter_count(m, 0); }

std::int64_t mtp_parameter_count(const ModelSpec& m) {
  // Each module: two norms of its inputs, the 2h → h projection and one layer like the last
  // (DeepSeek-V3 Sec. 2.2; its embedding and LM head are the main model's).
  const std::int64_t h = m.hidden;
  return m.mtp_layers * (2 * h + 2 * h * h + layer_parameter_count(m, m.num_layers - 1));
}

std::int64_t parameter_count(const ModelSpec& m) {
  const std::int64_t h = m.hidden;
  std::int64_t n = 0;
  if (m.moe) {
    for (std::int64_t l = 0; l < m.num_layers; ++l) n += layer_parameter_count(m, l);
  } else {
    n = m.num_layers * layer_parameter_count(m);
  }
  n += m.vocab * h;                               // input embedding
  if (!m.tied_embeddings) n += m.vocab * h;       // separate LM head
  if (m.position == Position::kLearned) n += m.max_seq_len * h;
  n += (m.norm == Norm::kLayerNorm ? 2 : 1) * h;  // final norm
  return n + mtp_parameter_count(m);
}

std::int64_t active_parameter_count(const ModelSpec& m) {
  std::int64_t n = parameter_count(m) - mtp_parameter_count(m);
  for (std::int64_t l = 0; l < m.num_layers; ++l) {
    if (!m.is_moe_layer(l)) continue;
    n -= (m.moe->num_experts - m.moe->top_k) * mlp_parameters(m, m.moe->expert_ffn_hidden);
  }
  return n;
}

namespace {

// GEMM weights a token meets in layer `layer` (routed experts: only its top-k), and the
// attention core's FLOPs per token per key attended, summed over forward and backward: 6 ×
// heads × (query/key width + value width) / 2 under the causal mask.
double layer_gemm_weights(const ModelSpec& m, std::int64_t layer) {
  const double h = static_cast<double>(m.hidden);
  double attn = 0;
  if (m.mla) {
    const MlaSpec& a = *m.mla;
    const double heads = static_cast<double>(m.num_heads);
    const double dqk = static_cast<double>(m.head_dim() + a.rope_head_dim);
    const double q = a.q_lora_rank > 0 ? static_cast<double>(a.q_lora_rank) * (h + heads * dqk) : h * heads * dqk;
    attn = q + static_cast<double>(a.kv_lora_rank) * (h + heads * 2.0 * static_cast<double>(m.head_dim())) +
           h * static_cast<double>(a.rope_head_dim) + static_cast<double>(m.q_hidden()) * h;
  } else {
    attn = h * (static_cast<double>(m.q_hidden()) + 2.0 * static_cast<double>(m.kv_hidden())) +
           static_cast<double>(m.q_hidden()) * h;
  }
  const double gated = m.activation == Activation::kSwiglu ? 3.0 : 2.0;
  if (!m.is_moe_layer(layer)) return attn + gated * h * static_cast<double>(m.ffn_hidden);
  const MoeSpec& e = *m.moe;
  const double ffn = static_cast<double>(e.top_k * e.expert_ffn_hidden + e.shared_experts * e.shared_ffn_hidden);
  return attn + gated * h * ffn;
}

double attention_width(const ModelSpec& m) {
  if (!m.mla) return static_cast<double>(m.q_hidden());
  return static_cast<double>(m.num_heads * (2 * m.head_dim() + m.mla->rope_head_dim)) / 2.0;
}

}  // namespace

Flops model_flops(const ModelSpec& m, std::int64_t seq_len, double tokens) {
  const double h = static_cast<double>(m.hidden);
  if (m.moe || m.mla || m.mtp_layers > 0 || m.q_hidden() != m.hidden) {
    // Megatron-Core's model FLOPs (megatron/training/training.py num_floating_point_operations,
    // which Megatron-Bridge's TFLOP/s tables use): 6 per GEMM weight a token meets (routed
    // experts: its top-k; the router is not counted), the causal attention core, the LM head,
    // and per multi-token-prediction module one more layer like the last, its 2h → h projection,
    // its norms (3h) and another LM head.
    double weights = 0;
    for (std::int64_t l = 0; l < m.num_layers; ++l) weights += layer_gemm_weights(m, l);
    const double mtp = static_cast<double>(m.mtp_layers);
    weights += mtp * (layer_gemm_weights(m, m.num_layers - 1) + 3.0 * h + 2.0 * h * h);
    weights += static_cast<double>(m.vocab) * h * (1.0 + mtp);
    const double layers = static_cast<double>(m.num_layers) + mtp;
    const double attention = 6.0 * layers * attention_width(m) * static_cast<double>(seq_len);
    return Flops((6.0 * weights + attention) * tokens);
  }
  const double gemm_weights =
      static_cast<double>(m.num_layers) *
          (h * (h + 2.0 * static_cast<double>(m.kv_hidden())) + h * h +
           (m.activation == Activation::kSwiglu ? 3.0 : 2.0) * h * static_cast<double>(m.ffn_hidden)) +
      static_cast<double>(m.vocab) * h;
  const double attention = 6.0 * static_cast<double>(m.num_layers) * h * static_cast<double>(seq_len);
  return Flops((6.0 * gemm_weights + attention) * tokens);
}

}  // namespace ts::ir
