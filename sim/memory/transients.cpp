#include "sim/memory/transients.h"

#include <algorithm>

#include "sim/base/diagnostic.h"

namespace ts::memory {

namespace {
std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }
double chunks(const parallel::ParallelPlan& plan) {
  SIM_ASSERT(plan.mst_chunks >= 1, "mst_chunks must be at least 1");
  return static_cast<double>(plan.mst_chunks);
}
double local_tokens(const parallel::ParallelPlan& plan) {
  return static_cast<double>(plan.micro_batch) * static_cast<double>(plan.seq_len) / static_cast<double>(plan.cp);
}
}  // namespace

std::int64_t bytes_per_logit(parallel::CrossEntropy loss) {
  switch (loss) {
    case parallel::CrossEntropy::kFp32: return 2 + 4;
    case parallel::CrossEntropy::kBf16: return 2 + 2;
    case parallel::CrossEntropy::kBf16InPlace: return 2;
    case parallel::CrossEntropy::kFp32Unfused: return 4 + 4 + 4;
  }
  return 2 + 4;
}

Bytes lm_head_logits_bytes(const ir::ModelSpec& m, const parallel::ParallelPlan& plan) {
  const double logits = local_tokens(plan) * static_cast<double>(ceil_div(m.vocab, plan.tp));
  return Bytes::from_real(logits * static_cast<double>(bytes_per_logit(plan.cross_entropy)) / chunks(plan));
}

Bytes mlp_intermediate_bytes(const ir::ModelSpec& m, const parallel::ParallelPlan& plan) {
  const double f_per_rank = static_cast<double>(m.ffn_hidden) / static_cast<double>(plan.tp);
  const double tensors = m.activation == ir::Activation::kSwiglu ? 3.0 : 2.0;  // fc2-input grad + fc1-output grads
  return Bytes::from_real(tensors * 2.0 * local_tokens(plan) * f_per_rank / chunks(plan));
}

StageMemory stage_memory(const ir::ModelSpec& m, const parallel::ParallelPlan& plan, std::int64_t stage,
                         std::int64_t stage_layers, const ActivationOptions& ao) {
  StageMemory r;
  r.static_memory = static_footprint(m, plan, stage, stage_layers);
  r.activations = stage_activation_bytes(m, plan, stage, stage_layers, ao);
  Bytes layer_backward;
  if (stage_layers > 0) layer_backward = layer_activations(m, plan, ao).rematerialized + mlp_intermediate_bytes(m, plan);
  const Bytes logits = stage == plan.head_stage() ? lm_head_logits_bytes(m, plan) : Bytes();
  r.transient = std::max(layer_backward, logits);
  return r;
}

std::int64_t nccl_communicators(const parallel::ParallelPlan& plan) {
  return (plan.tp > 1 ? 1 : 0) + (plan.cp > 1 ? 1 : 0) + (plan.dp * plan.cp > 1 ? 1 : 0) + (plan.pp > 1 ? 1 : 0);
}

Bytes fragmentation_reserve(Bytes dynamic_peak, double fragmentation) {
  SIM_ASSERT(fragmentation >= 0 && fragmentation < 1, "fragmentation must be in [0, 1)");
  return Bytes::from_real(dynamic_peak.real() * fragmentation / (1.0 - fragmentation));
}

}  // namespace ts::memory
