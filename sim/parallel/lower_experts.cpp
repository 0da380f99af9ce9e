// The MLP block in the Lowerer: a dense MLP between its tensor-parallel collectives, or a mixture
// of experts under expert parallelism (Megatron-Core MoELayer with the all-to-all token
// dispatcher; parallel folding of EP × ETP over the stage's ranks).
#include "sim/parallel/lowerer.h"

namespace ts::parallel::detail {

std::int32_t Lowerer::mlp_forward(const Label& l, std::int32_t dep, Bytes alloc) {
  if (model_.is_moe_layer(l.layer)) return experts_forward(l, dep, alloc);
  dep = tp_before(l, dep);
  dep = compute(lists_.mlp_fwd, l, {dep}, alloc);
  return tp_after(l, dep);
}

std::int32_t Lowerer::mlp_backward(const Label& l, std::int32_t dep, std::int32_t gathered, Bytes grads,
                                   Bytes release, bool split) {
  if (model_.is_moe_layer(l.layer)) return experts_backward(l, dep, gathered, grads, release, split);
  dep = tp_before(l, dep);
  dep = compute(split ? lists_.mlp_bwd_in : lists_.mlp_bwd, l, {dep, gathered}, grads, release);
  if (zero3()) prefetch_gate_ = held(dep);
  return tp_after(l, dep);
}

std::int32_t Lowerer::ep_all_to_all(const Label& l, std::int32_t dep) {
  if (plan_.ep == 1) return dep;
  return collective(Stream::kEpComm, axis_bit(Axis::kEp), CommOp::kAllToAll, lists_.moe.dispatch_bytes, l, {dep});
}

std::int32_t Lowerer::etp_collective(CommOp op, const Label& l, std::int32_t dep) {
  if (plan_.etp == 1) return dep;
  return collective(Stream::kEpComm, axis_bit(Axis::kEtp), op, lists_.moe.etp_bytes, l, {dep});
}

// Forward: the router scores and permutes this rank's tokens; the dispatch all-to-all sends the
// copies to the ranks of their experts while the shared experts run on the compute stream (the
// overlap Megatron-Core's shared-expert overlap and DeepSeek-V3's schedule rely on); the local
// experts' grouped GEMMs wait for the tokens (with ETP, gathered over the ETP group first); the
// combine all-to-all returns the outputs, which the unpermutation sums into the residual.
std::int32_t Lowerer::experts_forward(const Label& l, std::int32_t dep, Bytes alloc) {
  const MoeLists& m = lists_.moe;
  const std::int32_t routed = compute(m.router_fwd, l, {dep}, alloc);
  std::int32_t tokens = ep_all_to_all(l, routed);
  tokens = etp_collective(CommOp::kAllGather, l, tokens);
  const std::int32_t shared = m.shared_fwd >= 0 ? compute(m.shared_fwd, l, {routed}) : routed;
  std::int32_t out = compute(m.experts_fwd, l, {tokens, shared});
  out = etp_collective(CommOp::kReduceScatter, l, out);
  out = ep_all_to_all(l, out);
  return compute(m.unpermute_fwd, l, {out, shared});
}

// Backward, in reverse: the unpermutation's backward, the combine's backward (an all-to-all of
// the output gradients to the experts) beside the shared experts' backward, the experts'
// backward, the dispatch's backward, and the router's, which frees the block's activations.
std::int32_t Lowerer::experts_backward(const Label& l, std::int32_t dep, std::int32_t gathered, Bytes grads,
                                       Bytes release, bool split) {
  const MoeLists& m = lists_.moe;
  const std::int32_t grad = compute(m.unpermute_bwd, l, {dep, gathered}, grads);
  std::int32_t tokens = ep_all_to_all(l, grad);
  tokens = etp_collective(CommOp::kAllGather, l, tokens);
  const std::int32_t shared_list = split ? m.shared_bwd_in : m.shared_bwd;
  const std::int32_t shared = shared_list >= 0 ? compute(shared_list, l, {grad}) : grad;
  std::int32_t back = compute(split ? m.experts_bwd_in : m.experts_bwd, l, {tokens, shared});
  back = etp_collective(CommOp::kReduceScatter, l, back);
  back = ep_all_to_all(l, back);
  back = compute(split ? m.router_bwd_in : m.router_bwd, l, {back, shared}, Bytes(), release);
  if (zero3()) prefetch_gate_ = held(back);
  return back;
}

}  // namespace ts::parallel::detail
