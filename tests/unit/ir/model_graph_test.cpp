#include <catch2/catch.hpp>

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
