#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "sim/ir/model_graph.h"

using namespace ts;
using namespace ts::ir;

namespace {

ModelSpec llama3_8b() {
  ModelSpec m;
  m.name = "llama3-8b";
  m.num_layers = 32;
  m.hidden = 4096;
  m.num_heads = 32;
  m.num_kv_heads = 8;
  m.ffn_hidden = 14336;
  m.vocab = 128256;
  m.norm = Norm::kRmsNorm;
  m.activation = Activation::kSwiglu;
  m.position = Position::kRope;
  m.linear_bias = false;
  return m;
}

ModelSpec gpt(std::int64_t layers, std::int64_t hidden, std::int64_t heads) {
  ModelSpec m;
  m.name = "gpt";
  m.num_layers = layers;
  m.hidden = hidden;
  m.num_heads = heads;
  m.num_kv_heads = heads;
  m.ffn_hidden = 4 * hidden;
  m.vocab = 51200;
  m.max_seq_len = 2048;
  return m;
}

double gemm_flops(const std::vector<Op>& ops) {
  double f = 0;
  for (const auto& op : ops) {
    if (op.kind == OpKind::kGemm) f += 2.0 * static_cast<double>(op.gemm.m * op.gemm.n * op.gemm.k);
  }
  return f;
}

}  // namespace

TEST_CASE("Llama-3 8B parameters per layer and in total") {
  // Per layer: q,k,v,o = h(h + 2·kv) + h² ; SwiGLU 3·h·ffn ; two RMSNorm weights 2h.
  CHECK(layer_parameter_count(llama3_8b()) == 218'112'000);
  // Published total 8.03e9 (Meta, Llama 3 model card): 32 layers + 2 × 128256 × 4096 + final norm.
  CHECK(parameter_count(llama3_8b()) == Approx(8.03e9).epsilon(0.001));
}

TEST_CASE("GEMM FLOPs of a layer are 2 · tokens · weights, split by TP") {
  const ModelSpec m = llama3_8b();
  for (std::int64_t tp : {1, 2, 4, 8}) {
    LayerShape s;
    s.micro_batch = 2;
    s.seq = 4096;
    s.full_seq = 4096;
    s.tp = tp;
    const LayerOps layer = build_layer(m, s);
    const double fwd = gemm_flops(layer.attention.forward) + gemm_flops(layer.mlp.forward);
    const double weights = static_cast<double>(layer_parameter_count(m) - 2 * m.hidden);  // no norms
    CHECK(fwd == Approx(2.0 * 2 * 4096 * weights / static_cast<double>(tp)));
    // Backward: a data-gradient and a weight-gradient GEMM per forward GEMM.
    const double bwd = gemm_flops(layer.attention.backward) + gemm_flops(layer.mlp.backward);
    CHECK(bwd == Approx(2.0 * fwd));
  }
}

TEST_CASE("model FLOPs match Megatron's formula with causal attention halved") {
  // Korthikanti et al. 2022: 72·B·L·s·h²·(1 + s/6h + V/12hL) model FLOPs per iteration for GPT
  // (ffn = 4h), whose attention term 12·L·s·h per token counts the full s×s score matrix; the
  // causal count is half of it.
  const ModelSpec m = gpt(96, 12288, 96);
  const double B = 1536, s = 2048, L = 96, h = 12288, V = 51200;
  const double megatron = 72 * B * L * s * h * h * (1 + s / (6 * h) + V / (12 * h * L));
  const double causal = megatron - 6 * L * h * s * B * s;
  CHECK(model_flops(m, 2048, B * s).value() == Approx(causal).epsilon(1e-9));
}

TEST_CASE("attention FLOPs follow the FlashAttention convention, causal halved") {
  const ModelSpec m = llama3_8b();
  LayerShape s;
  s.micro_batch = 1;
  s.seq = 8192;
  s.full_seq = 8192;
  const LayerOps layer = build_layer(m, s);
  double fwd = 0, bwd = 0;
  for (const auto& op : layer.attention.forward) {
    if (op.kind == OpKind::kAttention) fwd += op.flops.value();
  }
  for (const auto& op : layer.attention.backward) {
    if (op.kind == OpKind::kAttention) bwd += op.flops.value();
  }
  CHECK(fwd == Approx(4.0 * 8192 * 8192 * 128 * 32 / 2));
  CHECK(bwd == Approx(2.5 * fwd));
}

TEST_CASE("backward lists run in reverse order of the forward") {
  const ModelSpec m = gpt(2, 1024, 16);
  LayerShape s;
  s.seq = 1024;
  s.full_seq = 1024;
  const LayerOps layer = build_layer(m, s);
  REQUIRE(layer.mlp.forward.front().kind == OpKind::kMemoryBound);  // layernorm first
  CHECK(std::string(layer.mlp.backward.back().name) == layer.mlp.forward.front().name);
  CHECK(std::string(layer.mlp.backward.front().name) == layer.mlp.forward.back().name);
  for (const auto& op : layer.mlp.backward) CHECK(op.backward);
}

TEST_CASE("unfused attention: batched QKᵀ and ·V GEMMs over every score, softmax and dropout") {
  // Megatron-LM's attention core without FlashAttention: per head, QKᵀ is s×d by d×s and the
  // probabilities times V are s×s by s×d, 2·s²·d FLOPs each, with no causal saving; the
  // softmax reads and writes the b·a/t·s² scores, GPT's dropout writes them and a 1-byte mask.
  const ModelSpec m = gpt(2, 1024, 16);
  LayerShape s;
  s.micro_batch = 4;
  s.seq = 1024;
  s.full_seq = 1024;
  s.tp = 2;
  s.flash_attention = false;
  const LayerOps layer = build_layer(m, s);
  const double batch = 4.0 * 16 / 2, sq = 1024, d = 64;
  double core_flops = 0;
  std::int64_t softmax_bytes = -1, dropout_bytes = -1;
  int core_ops = 0;
  for (const auto& op : layer.attention.forward) {
    CHECK(op.kind != OpKind::kAttention);
    if (!op.core) continue;
    ++core_ops;
    if (op.kind == OpKind::kGemm) {
      CHECK(op.gemm.batch == 32);
      CHECK(op.dtype == Dtype::kBf16);
      core_flops += op.flops.value();
    }
    if (std::string(op.name) == "scale_mask_softmax") softmax_bytes = op.moved.count();
    if (std::string(op.name) == "attention_dropout") dropout_bytes = op.moved.count();
  }
  CHECK(core_ops == 4);
  CHECK(core_flops == Approx(2 * 2.0 * batch * sq * sq * d));
  const std::int64_t scores = 32LL * 1024 * 1024;
  CHECK(softmax_bytes == 2 * 2 * scores);
  CHECK(dropout_bytes == 2 * (2 * scores + scores / 2));
  // Twice the FLOPs of the causal flash kernel, which skips the upper triangle.
  s.flash_attention = true;
  double flash = 0;
  for (const auto& op : build_layer(m, s).attention.forward) {
    if (op.kind == OpKind::kAttention) flash += op.flops.value();
  }
  CHECK(core_flops == Approx(2 * flash));
  // Context-parallel splitting keeps all four kernels in the core.
  s.flash_attention = false;
  const SplitAttention split = split_attention(build_layer(m, s).attention);
  CHECK(split.core.forward.size() == 4);
  CHECK(std::string(split.pre.forward.back().name) == "qkv");
  CHECK(std::string(split.post.forward.front().name) == "attn_out");
}

TEST_CASE("FP8 linear layers cast input and weight first: 4 bytes moved per element") {
  // Transformer Engine's cast_transpose reads a bf16 operand (2 bytes) and writes it in FP8 as is
  // and transposed (1 + 1 bytes); bf16 runs have no casts.
  const ModelSpec m = llama3_8b();
  LayerShape s;
  s.micro_batch = 1;
  s.seq = 4096;
  s.full_seq = 4096;
  s.tp = 2;
  s.gemm_dtype = Dtype::kFp8;
  const LayerOps layer = build_layer(m, s);
  const auto& mlp = layer.mlp.forward;
  int casts = 0;
  for (std::size_t i = 0; i < mlp.size(); ++i) {
    if (mlp[i].kind != OpKind::kGemm) continue;
    REQUIRE(i > 0);
    const Op& cast = mlp[i - 1];
    CHECK(std::string(cast.name) == "fp8_cast");
    CHECK(cast.moved.count() == 4 * (mlp[i].gemm.m * mlp[i].gemm.k + mlp[i].gemm.k * mlp[i].gemm.n));
    ++casts;
  }
  CHECK(casts == 2);  // gate/up and down projections
  // Weights cast once per step of 4 micro-batches: each micro-batch carries a quarter of the
  // weight's cast, all of its input's.
  s.fp8_weight_cast_share = 0.25;
  const auto cached = build_layer(m, s).mlp.forward;
  REQUIRE(cached.size() == mlp.size());
  for (std::size_t i = 0; i < cached.size(); ++i) {
    if (cached[i].kind != OpKind::kGemm) continue;
    CHECK(cached[i - 1].moved.count() == 4 * (cached[i].gemm.m * cached[i].gemm.k + cached[i].gemm.k * cached[i].gemm.n / 4));
  }
  s.gemm_dtype = Dtype::kBf16;
  for (const auto& op : build_layer(m, s).mlp.forward) CHECK(std::string(op.name) != "fp8_cast");
}

TEST_CASE("the LM head GEMM stays bf16 under FP8 and FP4 recipes") {
  // Megatron-Core's output layer is not a Transformer Engine module; the layers' GEMMs are.
  const ModelSpec m = llama3_8b();
  LayerShape s;
  s.seq = 4096;
  s.full_seq = 4096;
  for (const Dtype d : {Dtype::kFp8, Dtype::kMxfp8, Dtype::kNvfp4}) {
    s.gemm_dtype = d;
    int head_gemms = 0, layer_gemms = 0;
    for (const auto& op : build_lm_head(m, s).forward) {
      CHECK(std::string(op.name).find("quantize") == std::string::npos);
      CHECK(std::string(op.name) != "fp8_cast");
      if (op.kind != OpKind::kGemm) continue;
      CHECK(op.dtype == Dtype::kBf16);
      ++head_gemms;
    }
    for (const auto& op : build_layer(m, s).mlp.forward) {
      if (op.kind != OpKind::kGemm) continue;
      CHECK(op.dtype == d);
      ++layer_gemms;
    }
    CHECK(head_gemms == 1);
    CHECK(layer_gemms == 2);
  }
}

TEST_CASE("torchtitan's op policy reruns every second matmul call and every non-matmul op") {
  LayerShape s;
  s.micro_batch = 1;
  s.seq = 1024;
  s.full_seq = 1024;
  const auto names = [](const std::vector<Op>& ops) {
    std::vector<std::string> out;
    for (const Op& op : ops) out.push_back(op.kind == OpKind::kGemm ? std::string(op.name) + ":" + std::to_string(op.gemm.n) : op.name);
    return out;
  };
  SECTION("Llama: Q, K, V, output, gate, up, down are seven calls; K, output and up rerun") {
    const ModelSpec m = llama3_8b();  // kv 1024, ffn 14336
    const LayerOps layer = build_layer(m, s);
    const OpPolicyRecompute p = op_policy_recompute(m, layer);
    CHECK(names(p.attention) == std::vector<std::string>{"rmsnorm", "qkv:1024", "rotary", "attn_out:4096", "residual"});
    CHECK(names(p.mlp) == std::vector<std::string>{"rmsnorm", "mlp_gate_up:14336", "swiglu", "residual"});
    // Saved: Q 4096, V 1024, gate 14336, down 4096 output features per token.
    CHECK(p.saved_matmul_features == 4096 + 1024 + 14336 + 4096);
    // The rerun matmuls carry their own FLOPs: 2·tokens·n·k.
    CHECK(p.attention[1].flops.value() == Approx(2.0 * 1024 * 1024 * 4096));
    // Split by TP: the column-parallel calls keep 1/tp of their features, the row-parallel down
    // projection its whole (partial-sum) output.
    s.tp = 4;
    CHECK(op_policy_recompute(m, build_layer(m, s)).saved_matmul_features == (4096 + 1024 + 14336) / 4 + 4096);
  }
  SECTION("GPT: one fused QKV call and one up projection; output and down projections rerun") {
    const ModelSpec m = gpt(24, 2048, 16);
    const OpPolicyRecompute p = op_policy_recompute(m, build_layer(m, s));
    std::size_t rerun_gemms = 0;
    for (const auto* ops : {&p.attention, &p.mlp}) {
      for (const Op& op : *ops) {
        if (op.kind == OpKind::kGemm) {
          ++rerun_gemms;
          CHECK((std::string(op.name) == "attn_out" || std::string(op.name) == "mlp_down"));
        }
        CHECK(op.kind != OpKind::kAttention);  // the attention kernel's output is saved
      }
    }
    CHECK(rerun_gemms == 2);
    CHECK(p.saved_matmul_features == 3 * 2048 + 4 * 2048);
  }
}

TEST_CASE("eager elementwise ops: RMSNorm, rotary and SwiGLU move what PyTorch's kernels move") {
  const ModelSpec m = llama3_8b();
  LayerShape s;
  s.micro_batch = 2;
  s.seq = 1024;
  s.full_seq = 1024;
  const std::int64_t tokens = 2 * 1024;
  const auto moved = [](const std::vector<Op>& ops, const std::string& name) {
    std::int64_t bytes = 0;
    for (const auto& op : ops) {
      if (name == op.name) bytes += op.moved.count();
    }
    return bytes;
  };
  const LayerOps fused = build_layer(m, s);
  s.eager_elementwise = true;
  const LayerOps eager = build_layer(m, s);
  // Fused: one bf16 read and one bf16 write per element.
  CHECK(moved(fused.attention.forward, "rmsnorm") == 4 * tokens * m.hidden);
  // Eager RMSNorm: x.float(), pow, mean, x·rsqrt, .type_as, ·weight = 20 + 16 bytes.
  CHECK(moved(eager.attention.forward, "rmsnorm") == 36 * tokens * m.hidden);
  CHECK(moved(eager.mlp.forward, "rmsnorm") == 36 * tokens * m.hidden);
  // Rotary on q and k: 20 bytes per element against 4.
  const std::int64_t qk = tokens * (m.hidden + m.kv_hidden());
  CHECK(moved(fused.attention.forward, "rotary") == 4 * qk);
  CHECK(moved(eager.attention.forward, "rotary") == 20 * qk);
  // SwiGLU per output element: 10 bytes (silu, then the product) against 6.
  CHECK(moved(fused.mlp.forward, "swiglu") == 6 * tokens * m.ffn_hidden);
  CHECK(moved(eager.mlp.forward, "swiglu") == 10 * tokens * m.ffn_hidden);
  // The backward of each moves half as much again, and the GEMMs are untouched.
  CHECK(moved(eager.mlp.backward, "rmsnorm") == 54 * tokens * m.hidden);
  CHECK(gemm_flops(eager.mlp.forward) == gemm_flops(fused.mlp.forward));
  CHECK(eager.attention.forward.size() == fused.attention.forward.size());
  // The final norm before the LM head too.
  CHECK(moved(build_lm_head(m, s).forward, "final_rmsnorm") == 36 * tokens * m.hidden);

  // LayerNorm and GELU are single kernels in eager PyTorch: a GPT layer moves the same bytes, but
  // its LayerNorms (and only they) are PyTorch's native kernel, forward and backward.
  const ModelSpec g = gpt(24, 2048, 16);
  LayerShape gs = s;
  gs.eager_elementwise = false;
  const LayerOps gpt_fused = build_layer(g, gs);
  gs.eager_elementwise = true;
  const LayerOps gpt_eager = build_layer(g, gs);
  for (const auto* pair : {&gpt_fused.mlp, &gpt_fused.attention}) {
    for (const auto& op : pair->forward) CHECK(op.norm != NormKernel::kNative);
  }
  std::int64_t native = 0;
  for (const auto* ops : {&gpt_eager.mlp.forward, &gpt_eager.mlp.backward,
                          &gpt_eager.attention.forward, &gpt_eager.attention.backward}) {
    for (const auto& op : *ops) {
      CHECK((op.norm == NormKernel::kNative) == (std::string(op.name) == "layernorm"));
      native += op.norm == NormKernel::kNative ? 1 : 0;
    }
  }
  CHECK(native == 4);
  CHECK(build_lm_head(g, gs).forward.front().norm == NormKernel::kNative);
  REQUIRE(gpt_eager.mlp.forward.size() == gpt_fused.mlp.forward.size());
  for (std::size_t i = 0; i < gpt_eager.mlp.forward.size(); ++i) {
    CHECK(gpt_eager.mlp.forward[i].moved.count() == gpt_fused.mlp.forward[i].moved.count());
  }
  // A Llama layer's eager RMSNorm is the op-by-op composition above, streaming.
  for (const auto& op : eager.attention.forward) CHECK(op.norm == NormKernel::kNone);
  // Fused (non-eager) norms, RMSNorm and LayerNorm alike, run the fused norm kernel both ways.
  std::int64_t n_fused = 0;
  for (const auto* ops : {&gpt_fused.attention.forward, &gpt_fused.attention.backward,
                          &fused.attention.forward, &fused.attention.backward}) {
    for (const auto& op : *ops) {
      const std::string name = op.name;
      CHECK((op.norm == NormKernel::kFused) == (name == "layernorm" || name == "rmsnorm"));
      n_fused += op.norm == NormKernel::kFused ? 1 : 0;
    }
  }
  CHECK(n_fused == 4);
}

namespace {

// Qwen3-30B-A3B's MoE block (HF config.json: hidden 2048, 128 experts of 768, top-8).
ModelSpec qwen3_moe() {
  ModelSpec m = llama3_8b();
  m.name = "qwen3-30b-a3b";
  m.hidden = 2048;
  m.num_heads = 32;
  m.num_kv_heads = 4;
  m.moe = MoeSpec{128, 8, 768, 0, 0, 0, RouterScore::kSoftmax, 0, 0};
  return m;
}

}  // namespace

TEST_CASE("MoE expert GEMMs are grouped in forward, dgrad and wgrad, nothing else is") {
  LayerShape s;
  s.micro_batch = 1;
  s.seq = 4096;
  s.full_seq = 4096;
  const MoeOps ops = build_moe(qwen3_moe(), s, MoeShape{8, 1, 1.0});
  int grouped = 0;
  for (const auto& op : ops.experts.forward) grouped += op.grouped ? 1 : 0;
  for (const auto& op : ops.experts.backward) grouped += op.grouped ? 1 : 0;
  CHECK(grouped == 6);  // gate_up and down: forward, dgrad, wgrad each
  for (const Block* b : {&ops.router, &ops.shared, &ops.unpermute}) {
    for (const auto& op : b->forward) CHECK_FALSE(op.grouped);
  }
  // 4096 tokens · top-8 over 16 local experts: 2048 rows each; the wgrad contracts over them.
  for (const auto& op : ops.experts.backward) {
    if (op.kind == OpKind::kGemm && op.weight_grad) CHECK(op.gemm.k == 2048);
  }
}

TEST_CASE("eager MoE permutation: measured kernels with bench_moe.py's byte counts") {
  LayerShape s;
  s.micro_batch = 1;
  s.seq = 4096;
  s.full_seq = 4096;
  const auto find = [](const std::vector<Op>& ops, const std::string& name) {
    for (const auto& op : ops) {
      if (name == op.name) return op;
    }
    FAIL("no op " << name);
    return Op{};
  };
  const MoeOps fused = build_moe(qwen3_moe(), s, MoeShape{8, 1, 1.0});
  CHECK(find(fused.router.forward, "permute").eager_moe == EagerMoeKernel::kNone);
  CHECK(find(fused.unpermute.forward, "unpermute").eager_moe == EagerMoeKernel::kNone);
  s.eager_elementwise = true;
  const MoeOps eager = build_moe(qwen3_moe(), s, MoeShape{8, 1, 1.0});
  const std::int64_t t = 4096, h = 2048, k = 8, e = 128;
  const Op topk = find(eager.router.forward, "router_topk");
  CHECK(topk.eager_moe == EagerMoeKernel::kRouterTopk);
  CHECK(topk.moved.count() == 3 * t * e * 4);  // fp32 scores: read, softmax write, top-k read
  const Op permute = find(eager.router.forward, "permute");
  CHECK(permute.eager_moe == EagerMoeKernel::kGather);
  CHECK(permute.moved.count() == (t + t * k) * h * 2);  // each token read once, copies written
  const Op unpermute = find(eager.unpermute.forward, "unpermute");
  CHECK(unpermute.eager_moe == EagerMoeKernel::kScatterAdd);
  CHECK(unpermute.moved.count() == 5 * t * k * h * 2);
  // The backward of the gather scatters, and the other way round.
  CHECK(find(eager.router.backward, "permute").eager_moe == EagerMoeKernel::kScatterAdd);
  CHECK(find(eager.unpermute.backward, "unpermute").eager_moe == EagerMoeKernel::kGather);
}

TEST_CASE("dispatchers: separate sort and permutation kernels or none") {
  LayerShape s;
  s.micro_batch = 1;
  s.seq = 4096;
  s.full_seq = 4096;
  const auto count = [](const std::vector<Op>& ops, const std::string& name) {
    std::int64_t bytes = -1;
    for (const auto& op : ops) {
      if (name == op.name) bytes = op.moved.count();
    }
    return bytes;
  };
  // 4096 tokens · top-8 copies, all received by the rank's 16 experts: each copy read and written
  // once before the grouped GEMMs and once after them.
  const std::int64_t copies_bytes = 4096 * 8 * 2048 * 2;
  const MoeOps sorted = build_moe(qwen3_moe(), s, MoeShape{8, 1, 1.0, true});
  CHECK(count(sorted.experts.forward, "sort_by_expert") == 2 * copies_bytes);
  CHECK(count(sorted.experts.forward, "unsort_by_expert") == 2 * copies_bytes);
  CHECK(sorted.experts.forward.front().name == std::string("sort_by_expert"));
  CHECK(sorted.experts.forward.back().name == std::string("unsort_by_expert"));
  CHECK(count(sorted.experts.backward, "sort_by_expert") > 0);
  // Without the sort (the flex dispatcher, or one expert per rank) the block is the GEMMs alone.
  const MoeOps flex = build_moe(qwen3_moe(), s, MoeShape{8, 1, 1.0, false});
  CHECK(count(flex.experts.forward, "sort_by_expert") == -1);
  CHECK(flex.experts.forward.size() + 2 == sorted.experts.forward.size());
  // The permutation into copies and its reverse run on their own but under HybridEP, whose
  // dispatch and combine kernels do them.
  CHECK(count(flex.router.forward, "permute") == (4096 + 4096 * 8) * 2048 * 2);
  CHECK(count(flex.unpermute.forward, "unpermute") == (4096 * 8 + 4096) * 2048 * 2);
  const MoeOps hybrid = build_moe(qwen3_moe(), s, MoeShape{8, 1, 1.0, false, false});
  CHECK(count(hybrid.router.forward, "permute") == -1);
  CHECK(count(hybrid.router.backward, "permute") == -1);
  CHECK(count(hybrid.unpermute.forward, "unpermute") == -1);
  CHECK(count(hybrid.unpermute.forward, "residual") > 0);
}
