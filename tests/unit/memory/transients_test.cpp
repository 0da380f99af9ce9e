// Tests of the transient buffers (logits and loss, MLP intermediates, Mini-Sequence Transformer
// chunking), the analytic stage peak and the device overheads.
#include <catch2/catch.hpp>

#include <cstdint>

#include "sim/memory/transients.h"

using ts::Bytes;
using ts::ir::ModelSpec;
using ts::memory::ActivationOptions;
using ts::parallel::CrossEntropy;
using ts::parallel::ParallelPlan;

namespace {

// Llama-3 8B (Meta config.json): vocabulary 128256, ffn 14336.
ModelSpec llama3_8b() {
  ModelSpec m;
  m.name = "llama3-8b";
  m.num_layers = 32;
  m.hidden = 4096;
  m.num_heads = 32;
  m.num_kv_heads = 8;
  m.ffn_hidden = 14336;
  m.vocab = 128256;
  m.norm = ts::ir::Norm::kRmsNorm;
  m.activation = ts::ir::Activation::kSwiglu;
  m.position = ts::ir::Position::kRope;
  m.linear_bias = false;
  return m;
}

ModelSpec gpt_1_3b() {
  ModelSpec m;
  m.name = "gpt";
  m.num_layers = 24;
  m.hidden = 2048;
  m.num_heads = 16;
  m.num_kv_heads = 16;
  m.ffn_hidden = 8192;
  m.vocab = 50257;
  m.max_seq_len = 2048;
  return m;
}

ParallelPlan plan(std::int64_t tp, std::int64_t cp, std::int64_t seq, std::int64_t b) {
  ParallelPlan p;
  p.tp = tp;
  p.cp = cp;
  p.seq_len = seq;
  p.micro_batch = b;
  return p;
}

}  // namespace

TEST_CASE("bytes per logit at the loss peak", "[memory][transients]") {
  // Megatron: bf16 logits + their fp32 upcast (turned into softmax and gradient in place).
  CHECK(ts::memory::bytes_per_logit(CrossEntropy::kFp32) == 6);
  // bf16 loss: logits and gradient in bf16.
  CHECK(ts::memory::bytes_per_logit(CrossEntropy::kBf16) == 4);
  // Fused loss writing the gradient into the logits.
  CHECK(ts::memory::bytes_per_logit(CrossEntropy::kBf16InPlace) == 2);
  // PyTorch cross_entropy on fp32 logits: log-softmax output, its gradient and the input gradient.
  CHECK(ts::memory::bytes_per_logit(CrossEntropy::kFp32Unfused) == 12);
}

TEST_CASE("LM-head logits: b · s/cp · V/t · bytes per logit, divided by the MST chunks", "[memory][transients]") {
  const ModelSpec m = llama3_8b();
  // One sequence of 8192 tokens, no parallelism: 8192 · 128256 · 6 bytes = 5.87 GiB.
  ParallelPlan p = plan(1, 1, 8192, 1);
  CHECK(ts::memory::lm_head_logits_bytes(m, p).count() == 8192LL * 128256 * 6);
  // TP splits the vocabulary, CP the sequence, micro-batch multiplies.
  p = plan(8, 2, 8192, 2);
  CHECK(ts::memory::lm_head_logits_bytes(m, p).count() == 2LL * 4096 * (128256 / 8) * 6);
  // Mini-Sequence Transformer with K = 4 chunks: a quarter.
  p.mst_chunks = 4;
  CHECK(ts::memory::lm_head_logits_bytes(m, p).count() == 2LL * 4096 * (128256 / 8) * 6 / 4);
  // bf16 loss.
  p.mst_chunks = 1;
  p.cross_entropy = CrossEntropy::kBf16;
  CHECK(ts::memory::lm_head_logits_bytes(m, p).count() ==
        2LL * 4096 * (128256 / 8) * 4);
  // A vocabulary not divisible by TP rounds up per rank: ceil(50257 / 8) = 6283 rows.
  const ModelSpec g = gpt_1_3b();
  CHECK(ts::memory::lm_head_logits_bytes(g, plan(8, 1, 2048, 1)).count() == 2048LL * 6283 * 6);
}

TEST_CASE("MLP intermediate: 6sbf/t for SwiGLU, 4sbf/t for GELU, divided by the MST chunks", "[memory][transients]") {
  const ModelSpec m = llama3_8b();
  ParallelPlan p = plan(4, 2, 8192, 1);
  const std::int64_t sbf_t = 4096LL * 1 * 14336 / 4;  // s/cp · b · f/t
  CHECK(ts::memory::mlp_intermediate_bytes(m, p).count() == 6 * sbf_t);
  p.mst_chunks = 8;
  CHECK(ts::memory::mlp_intermediate_bytes(m, p).count() == 6 * sbf_t / 8);
  const ModelSpec g = gpt_1_3b();
  CHECK(ts::memory::mlp_intermediate_bytes(g, plan(2, 1, 2048, 4)).count() == 4LL * 2048 * 4 * 8192 / 2);
}

TEST_CASE("stage memory: static + in-flight activations + largest transient", "[memory][transients]") {
  const ModelSpec m = llama3_8b();
  ParallelPlan p = plan(1, 1, 8192, 1);
  p.pp = 2;
  p.global_batch = 8;
  const ActivationOptions ao{true, false};
  const auto first = ts::memory::stage_memory(m, p, 0, 16, ao);
  CHECK(first.static_memory.total() == ts::memory::static_footprint(m, p, 0, 16).total());
  CHECK(first.activations == ts::memory::stage_activation_bytes(m, p, 0, 16, ao));
  CHECK(first.transient == ts::memory::mlp_intermediate_bytes(m, p));  // no recompute, no LM head
  CHECK(first.allocated() == first.static_memory.total() + first.activations + first.transient);
  // The last stage: the logits (8192 · 128256 · 6 = 6.3 GB) outweigh the MLP intermediates.
  const auto last = ts::memory::stage_memory(m, p, 1, 16, ao);
  CHECK(last.transient == ts::memory::lm_head_logits_bytes(m, p));
  // With 16 MST chunks the logits (still the larger transient) are 16 times smaller.
  p.mst_chunks = 16;
  const auto chunked = ts::memory::stage_memory(m, p, 1, 16, ao);
  CHECK(chunked.transient.count() == last.transient.count() / 16);
  CHECK(chunked.allocated() < last.allocated());
  // Full recompute: the layer's rebuilt activations join the backward working set.
  p.mst_chunks = 1;
  p.recompute = ts::parallel::Recompute::kFull;
  const auto full = ts::memory::stage_memory(m, p, 0, 16, ao);
  CHECK(full.transient ==
        ts::memory::layer_activations(m, p, ao).rematerialized + ts::memory::mlp_intermediate_bytes(m, p));
  CHECK(full.activations < first.activations);
}

TEST_CASE("runtime overheads: NCCL communicators and the allocator's fragmentation reserve",
          "[memory][transients]") {
  ts::parallel::ParallelPlan p;
  CHECK(ts::memory::nccl_communicators(p) == 0);  // one GPU: no communicator
  p.tp = 8;
  p.pp = 4;
  CHECK(ts::memory::nccl_communicators(p) == 2);  // TP and PP groups, no data parallelism
  p.cp = 2;
  CHECK(ts::memory::nccl_communicators(p) == 4);  // + CP, and DP·CP = 2 reduces gradients
  p.cp = 1;
  p.dp = 16;
  CHECK(ts::memory::nccl_communicators(p) == 3);
  // 15 % of the reserved memory lost: 85 GiB allocated need 100 GiB reserved.
  CHECK(ts::memory::fragmentation_reserve(Bytes::gib(85), 0.15) == Bytes::gib(15));
  CHECK(ts::memory::fragmentation_reserve(Bytes::gib(85), 0.0) == Bytes());
}
