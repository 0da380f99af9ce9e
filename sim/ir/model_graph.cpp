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
    op.native_norm = s.eager_elementwise;
    return op;
  }
  if (s.eager_elementwise) return streaming(rms, Bytes(elems * kEagerRmsNormBytes));
  return memory(rms, elems, elems);
}

}  // namespace

LayerOps build_layer(const ModelSpec& model, const LayerShape& s) {
  SIM_ASSERT(s.tp > 0 && model.num_heads % s.tp == 0, "TP must divide the heads");
  const std::int64_t tokens = s.micro_batch * s.seq;              // rows of every GEMM
  const std::int64_t h = model.hidden;
  const std::int64_t hidden_elems = tokens * h;                   // one activation tensor
  // With sequence parallelism, norms, dropout and residual adds run on 1/tp of the tokens.
  const std::int64_t sp_elems = s.sequence_parallel ? hidden_elems / s.tp : hidden_elems;
  const std::int64_t qkv_out = (h + 2 * model.kv_hidden()) / s.tp;

  LayerOps layer;
  auto& att = layer.attention.forward;
  att.push_back(norm(model, s, "rmsnorm", "layernorm", sp_elems));
  linear(att, "qkv", tokens, qkv_out, h, s);
  if (model.position == Position::kRope) {
    const std::int64_t qk = tokens * (h + model.kv_hidden()) / s.tp;
    att.push_back(s.eager_elementwise ? streaming("rotary", Bytes(qk * kEagerRotaryBytes))
                                      : memory("rotary", qk, qk));
  }
  if (s.flash_attention) {
    att.push_back(attention(model, s));
  } else {
    append_unfused_attention(att, model, s);
  }
  linear(att, "attn_out", tokens, h, h / s.tp, s);
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
  linear(b.forward, "lm_head", tokens, vocab, model.hidden, s);
  // Vocab-parallel cross-entropy (Megatron): max, exp-sum and loss over the logits in fp32,
  // read about three times and written once.
  Op ce = memory("cross_entropy", 2 * 3 * tokens * vocab, 2 * tokens * vocab);
  b.forward.push_back(ce);
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

std::int64_t layer_parameter_count(const ModelSpec& m) {
  const std::int64_t h = m.hidden;
  const std::int64_t norms = (m.norm == Norm::kLayerNorm ? 2 : 1) * h * 2;  // two norms per layer
  std::int64_t attn = h * (h + 2 * m.kv_hidden()) + h * h;
  std::int64_t mlp = (m.activation == Activation::kSwiglu ? 3 : 2) * h * m.ffn_hidden;
  if (m.linear_bias) {
    attn += (h + 2 * m.kv_hidden()) + h;
    mlp += m.ffn_hidden * (m.activation == Activation::kSwiglu ? 2 : 1) + h;
  }
  return attn + mlp + norms;
}

std::int64_t parameter_count(const ModelSpec& m) {
  const std::int64_t h = m.hidden;
  std::int64_t n = m.num_layers * layer_parameter_count(m);
  n += m.vocab * h;                               // input embedding
  if (!m.tied_embeddings) n += m.vocab * h;       // separate LM head
  if (m.position == Position::kLearned) n += m.max_seq_len * h;
  n += (m.norm == Norm::kLayerNorm ? 2 : 1) * h;  // final norm
  return n;
}

Flops model_flops(const ModelSpec& m, std::int64_t seq_len, double tokens) {
  const double h = static_cast<double>(m.hidden);
  const double gemm_weights =
      static_cast<double>(m.num_layers) *
          (h * (h + 2.0 * static_cast<double>(m.kv_hidden())) + h * h +
           (m.activation == Activation::kSwiglu ? 3.0 : 2.0) * h * static_cast<double>(m.ffn_hidden)) +
      static_cast<double>(m.vocab) * h;
  const double attention = 6.0 * static_cast<double>(m.num_layers) * h * static_cast<double>(seq_len);
  return Flops((6.0 * gemm_weights + attention) * tokens);
}

}  // namespace ts::ir
