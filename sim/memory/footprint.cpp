#include "sim/memory/footprint.h"

#include <algorithm>

#include "sim/ir/model_graph.h"

namespace ts::memory {

StaticFootprint static_footprint(const ir::ModelSpec& model, const parallel::ParallelPlan& plan,
                                 std::int64_t stage, std::int64_t stage_layers) {
  const std::int64_t h = model.hidden;
  const std::int64_t vocab_shard = (model.vocab + plan.tp - 1) / plan.tp * h;
  std::int64_t params = stage_layers * ir::layer_parameter_count(model) / plan.tp;
  if (stage == 0) {
    params += vocab_shard;
    if (model.position == ir::Position::kLearned) params += model.max_seq_len * h;
  }
  if (stage == plan.pp - 1) {
    params += (model.norm == ir::Norm::kLayerNorm ? 2 : 1) * h;
    if (!model.tied_embeddings || stage != 0) params += vocab_shard;
  }
  // Mixed-precision Adam (Rajbhandari et al. 2020, Sec. 3.1): 2 bytes of bf16 weights, gradients
  // accumulated in fp32 (4 bytes, Megatron's main_grad), and 12 bytes of optimizer state (fp32
  // master weights, momentum, variance). ZeRO stage k shards the first k of (optimizer states,
  // gradients, weights) over the data-parallel ranks; CP ranks hold the same weights and join
  // the sharding group (Megatron's distributed optimizer shards over DP × CP).
  const std::int64_t shards = plan.dp * plan.cp;
  auto shard = [&](std::int64_t bytes, int stage_needed) {
    return Bytes(plan.zero_stage >= stage_needed ? (bytes + shards - 1) / shards : bytes);
  };
  const bool bf16_states = plan.optimizer_states == parallel::OptimizerStates::kBf16;
  StaticFootprint f;
  f.weights = shard(params * 2, 3);
  f.gradients = shard(params * (bf16_states ? 2 : 4), 2);
  f.optimizer_states = shard(params * (bf16_states ? 4 : 8), 1);
  f.master_weights = shard(bf16_states ? 0 : params * 4, 1);
  return f;
}

Bytes layer_activation_bytes(const ir::ModelSpec& model, const parallel::ParallelPlan& plan) {
  // Korthikanti et al. 2022, Sec. 4.1, in bytes for a GPT layer with s tokens, micro-batch b,
  // hidden h, a heads: attention block 11sbh + 5as²b, MLP block 19sbh, two layer norms 4sbh:
  // 34sbh + 5as²b. With flash attention the s² terms (scores, softmax, dropout mask) are not
  // stored. TP splits everything but the norm and dropout inputs (10sbh); sequence parallelism
  // splits those too.
  const double s = static_cast<double>(plan.seq_len / plan.cp);
  const double b = static_cast<double>(plan.micro_batch);
  const double h = static_cast<double>(model.hidden);
  const double t = static_cast<double>(plan.tp);
  if (plan.recompute == parallel::Recompute::kFull) return Bytes();  // only the layer input, kept separately
  const double unsplit = plan.sequence_parallel ? 10.0 / t : 10.0;
  double per_sbh = unsplit + 24.0 / t;
  const double ffn_ratio = static_cast<double>(model.ffn_hidden) / (4.0 * h);
  // The MLP holds its input (2sbh), the up-projection output (8sbh ⇒ 2·ffn bytes per token) and
  // activation output (8sbh), and a dropout mask (sbh): scale the ffn-sized parts by ffn/4h, and
  // SwiGLU keeps gate and up outputs (2·ffn) besides their product (ffn).
  const double mlp_ffn_parts = model.activation == ir::Activation::kSwiglu ? 3.0 * 4.0 : 2.0 * 4.0;
  per_sbh += (mlp_ffn_parts * ffn_ratio - 16.0) / t;
  return Bytes::from_real(s * b * h * per_sbh);
}

}  // namespace ts::memory
