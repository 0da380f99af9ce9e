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
  return experts_unpermute(l, experts_compute(l, experts_dispatch(l, dep, alloc)));
}

Lowerer::ExpertsStep Lowerer::experts_dispatch(const Label& l, std::int32_t dep, Bytes alloc) {
  const std::int32_t routed = compute(lists_.moe.router_fwd, l, {dep}, alloc);
  const std::int32_t tokens = ep_all_to_all(l, routed);
  return {routed, etp_collective(CommOp::kAllGather, l, tokens)};
}

Lowerer::ExpertsStep Lowerer::experts_compute(const Label& l, const ExpertsStep& s) {
  const MoeLists& m = lists_.moe;
  const std::int32_t shared = m.shared_fwd >= 0 ? compute(m.shared_fwd, l, {s.side}) : s.side;
  // Under ZeRO-3 the local experts' GEMMs also wait for their own gather (the layer's attention
  // waited only for the shared parameters').
  std::int32_t out = compute(m.experts_fwd, l, {s.tokens, shared, experts_gather_});
  out = etp_collective(CommOp::kReduceScatter, l, out);
  return {shared, ep_all_to_all(l, out)};
}

std::int32_t Lowerer::experts_unpermute(const Label& l, const ExpertsStep& s) {
  return compute(lists_.moe.unpermute_fwd, l, {s.tokens, s.side});
}

// Backward, in reverse: the unpermutation's backward, the combine's backward (an all-to-all of
// the output gradients to the experts) beside the shared experts' backward, the experts'
// backward, the dispatch's backward, and the router's, which frees the block's activations.
std::int32_t Lowerer::experts_backward(const Label& l, std::int32_t dep, std::int32_t gathered, Bytes grads,
                                       Bytes release, bool split) {
  const ExpertsStep s = experts_unpermute_backward(l, dep, gathered, grads);
  return experts_router_backward(l, experts_compute_backward(l, s, split), release, split);
}

Lowerer::ExpertsStep Lowerer::experts_unpermute_backward(const Label& l, std::int32_t dep, std::int32_t gathered,
                                                         Bytes grads) {
  const std::int32_t grad = compute(lists_.moe.unpermute_bwd, l, {dep, gathered}, grads);
  const std::int32_t tokens = ep_all_to_all(l, grad);
  return {grad, etp_collective(CommOp::kAllGather, l, tokens)};
}

Lowerer::ExpertsStep Lowerer::experts_compute_backward(const Label& l, const ExpertsStep& s, bool split) {
  const MoeLists& m = lists_.moe;
  const std::int32_t shared_list = split ? m.shared_bwd_in : m.shared_bwd;
  const std::int32_t shared = shared_list >= 0 ? compute(shared_list, l, {s.side}) : s.side;
  std::int32_t back = compute(split ? m.experts_bwd_in : m.experts_bwd, l, {s.tokens, shared});
  back = etp_collective(CommOp::kReduceScatter, l, back);
  return {shared, ep_all_to_all(l, back)};
}

std::int32_t Lowerer::experts_router_backward(const Label& l, const ExpertsStep& s, Bytes release, bool split) {
  const MoeLists& m = lists_.moe;
  const std::int32_t back =
      compute(split ? m.router_bwd_in : m.router_bwd, l, {s.tokens, s.side}, Bytes(), release);
  if (zero3()) prefetch_gate_ = held(back);
  return back;
}

void Lowerer::a2a_overlapped_layers(Run& b, std::int64_t piece, Run& f, std::int64_t i) {
  // The backward's layer, as backward_layer() and layer_backward() lower it (no full recompute).
  const auto b_layer = static_cast<std::int32_t>(b.first + b.layers - 1 - piece);
  const BackwardMemory mem = backward_memory(b_layer, false);
  const Label b_attn{Pass::kBackward, Part::kAttention, b_layer, b.mb};
  const Label b_mlp{Pass::kBackward, Part::kMlp, b_layer, b.mb};
  const std::int32_t gathered = gather_whole_layer(b_attn);
  const Bytes mlp_left = b.split ? std::min(mem.mlp_release, mlp_weight_held(b_layer)) : Bytes();
  const Bytes attn_left =
      b.split ? std::min(mem.attn_release, attn_lists(b_layer).w_held_attn) : Bytes();
  // The forward's layer, as forward_layer() lowers it.
  const auto f_layer = static_cast<std::int32_t>(f.first + i);
  const Bytes kept = layer_kept(f_layer, false);
  const Bytes attn_alloc(kept.count() / 2);
  const Label f_attn{Pass::kForward, Part::kAttention, f_layer, f.mb};
  const Label f_mlp{Pass::kForward, Part::kMlp, f_layer, f.mb};

  // An MTP module's head backward comes before the combine's backward, its input side's
  // forward with the attention, its head's forward after the combine, its input side's
  // backward after the attention's (Megatron-Core's schedule plan of an MTP layer,
  // megatron/core/models/common/model_chunk_schedule_plan.py: mtp_post_process).
  mtp_head_backward(b, b_layer);
  // B combine-backward all-to-all beside F attention and router.
  ExpertsStep bs = experts_unpermute_backward(b_mlp, b.dep, gathered, mem.mlp_grads);
  mtp_input_forward(f, f_layer);
  ExpertsStep fs = experts_dispatch(f_mlp, layer_attention(f_attn, f.dep, attn_alloc), kept - attn_alloc);
  // F dispatch beside B experts-backward; B dispatch-backward beside F experts.
  bs = experts_compute_backward(b_mlp, bs, b.split);
  fs = experts_compute(f_mlp, fs);
  // F combine beside B router and attention backward.
  b.dep = experts_router_backward(b_mlp, bs, mem.mlp_release - mlp_left + mem.mlp_grads, b.split);
  b.dep = attention_backward(b_attn, b.dep, mem.attn_release - attn_left, mem.attn_grads, b.split);
  if (zero3() && !b.split) reduce_layer_gradients({Pass::kBackward, Part::kGradients, b_layer, b.mb}, b.dep);
  if (b.last_micro_batch && !b.split) layer_gradients_ready(b_layer, b.dep);
  mtp_input_backward(b, b_layer);
  f.dep = experts_unpermute(f_mlp, fs);
  mtp_head_forward(f, f_layer);
}

}  // namespace ts::parallel::detail
