// Pipeline blocks of the Lowerer: forwards, backwards (whole or input gradients), weight gradients
// and DualPipeV's overlapped pairs, with their transfers between the ranks.
#include "sim/parallel/lowerer.h"

namespace ts::parallel::detail {

Lowerer::Run Lowerer::forward_begin(std::int32_t mb, std::int64_t chunk) {
  Run r = start_run(mb, chunk);
  const Label l{Pass::kForward, Part::kActivations, -1, mb};
  // At the turn of a V the previous virtual stage is on this rank: the compute stream's
  // program order hands the activations over.
  if (r.vs > 0 && stage_before(r.vs) != stage_) {
    r.dep = p2p(upward(chunk) ? Stream::kPpVRecvNext : Stream::kPpRecvPrev, stage_before(r.vs), stage_,
                kTagActivations, l, kNone);
  }
  if (r.vs == 0) r.dep = compute(lists_.emb_fwd, {Pass::kForward, Part::kEmbedding, -1, mb}, {r.dep});
  return r;
}

void Lowerer::forward_layer(Run& r, std::int64_t i) {
  const bool full = i < r.recomputed;
  const Label ll{Pass::kForward, Part::kAttention, static_cast<std::int32_t>(r.first + i), r.mb};
  const Bytes kept = layer_kept(ll.layer, full);
  const Bytes attn_alloc = full ? kept : Bytes(kept.count() / 2);
  mtp_input_forward(r, ll.layer);
  r.dep = layer_forward(ll, r.dep, attn_alloc, kept - attn_alloc);
  mtp_head_forward(r, ll.layer);
}

void Lowerer::mtp_input_forward(Run& r, std::int32_t layer) {
  if (!mtp_layer(layer)) return;
  // Over TP (Megatron-Core MultiTokenPredictionLayer._concat_embeddings): with sequence
  // parallelism the column-parallel eh_proj all-gathers its 2h-wide input; its h/tp-wide output
  // is all-gathered (gather_from_tensor_model_parallel_region), then split over the sequence
  // again without communication.
  const Label l{Pass::kForward, Part::kLmHead, layer, r.mb};
  if (tp_sequence_parallel()) r.dep = tp_collective(CommOp::kAllGather, act_bytes_ * 2, l, r.dep);
  r.dep = compute(lists_.mtp_fwd, l, {r.dep}, mtp_kept_);
  if (plan_.tp > 1) r.dep = tp_collective(CommOp::kAllGather, act_bytes_, l, r.dep);
}

void Lowerer::mtp_head_forward(Run& r, std::int32_t layer) {
  if (!mtp_layer(layer)) return;
  // (The compute stream runs in program order: what follows waits for the head, as it would.)
  r.dep = compute(lists_.head_fwd, {Pass::kForward, Part::kLmHead, layer, r.mb}, {r.dep},
                  options_.head_transient);
}

void Lowerer::mtp_head_backward(Run& r, std::int32_t layer) {
  if (!mtp_layer(layer)) return;
  r.dep = compute(lists_.head_bwd, {Pass::kBackward, Part::kLmHead, layer, r.mb}, {r.dep}, Bytes(),
                  options_.head_transient);
}

void Lowerer::mtp_input_backward(Run& r, std::int32_t layer) {
  if (!mtp_layer(layer)) return;
  // The backward of the forward's collectives: the sequence split's all-gather, and eh_proj's
  // input gradient reduce-scattered (sequence parallel) or all-reduced over TP.
  const Label l{Pass::kBackward, Part::kLmHead, layer, r.mb};
  if (tp_sequence_parallel()) r.dep = tp_collective(CommOp::kAllGather, act_bytes_, l, r.dep);
  // Its weight gradient stays in this block (as the LM head's does).
  r.dep = compute(lists_.mtp_bwd, l, {r.dep}, Bytes(), mtp_kept_);
  if (plan_.tp > 1) {
    const CommOp op = plan_.sequence_parallel ? CommOp::kReduceScatter : CommOp::kAllReduce;
    r.dep = tp_collective(op, act_bytes_ * 2, l, r.dep);
  }
  if (r.last_micro_batch) gradients_ready(mtp_projection_parameters(model_, plan_), r.dep, false);
}

void Lowerer::forward_end(Run& r) {
  if (r.vs == last_vstage()) {
    compute(lists_.head_fwd, {Pass::kForward, Part::kLmHead, -1, r.mb}, {r.dep}, options_.head_transient);
  } else if (stage_after(r.vs) != stage_) {
    p2p(upward(r.chunk) ? Stream::kPpVSendPrev : Stream::kPpSendNext, stage_, stage_after(r.vs), kTagActivations,
        {Pass::kForward, Part::kActivations, -1, r.mb}, r.dep);
  }
}

void Lowerer::forward(std::int32_t mb, std::int64_t chunk) {
  Run r = forward_begin(mb, chunk);
  for (std::int64_t i = 0; i < r.layers; ++i) forward_layer(r, i);
  forward_end(r);
}

Lowerer::Run Lowerer::backward_begin(std::int32_t mb, std::int64_t chunk, bool last_micro_batch, bool split) {
  Run r = start_run(mb, chunk);
  r.last_micro_batch = last_micro_batch;
  r.split = split;
  if (r.vs == last_vstage()) {
    // head_transient is the loss's peak with the logits' gradient included (memory::
    // bytes_per_logit): the forward allocated it, the backward frees it. The LM head's
    // backward stays whole (its weight gradient needs the logits' gradient, the largest
    // buffer of the step), and so do its gradients' readiness.
    r.dep = compute(lists_.head_bwd, {Pass::kBackward, Part::kLmHead, -1, mb}, {}, Bytes(), options_.head_transient);
    if (last_micro_batch) gradients_ready(head_parameters(model_, plan_, plan_.head_stage() == 0), r.dep, false);
  } else if (stage_after(r.vs) != stage_) {
    r.dep = p2p(upward(chunk) ? Stream::kPpVRecvPrev : Stream::kPpRecvNext, stage_after(r.vs), stage_,
                kTagGradients, {Pass::kBackward, Part::kActivations, -1, mb}, kNone);
  }
  return r;
}

void Lowerer::backward_layer(Run& r, std::int64_t piece) {
  const std::int64_t i = r.layers - 1 - piece;
  const bool full = i < r.recomputed;
  const Label ll{Pass::kBackward, Part::kAttention, static_cast<std::int32_t>(r.first + i), r.mb};
  const BackwardMemory mem = backward_memory(ll.layer, full);
  mtp_head_backward(r, ll.layer);
  if (full) {
    r.dep = layer_forward({Pass::kRecompute, Part::kAttention, ll.layer, r.mb}, r.dep, mem.remat_attn, mem.remat_mlp);
  }
  r.dep = layer_backward(ll, r.dep, mem, r.split);
  if (r.last_micro_batch && !r.split) layer_gradients_ready(ll.layer, r.dep);
  mtp_input_backward(r, ll.layer);
}

void Lowerer::backward_end(Run& r) {
  if (r.vs == 0) {
    // The embedding's backward is its weight gradient alone; it stays in the B block.
    r.dep = compute(lists_.emb_bwd, {Pass::kBackward, Part::kEmbedding, -1, r.mb}, {r.dep});
    if (r.last_micro_batch) gradients_ready(embedding_parameters(model_, plan_), r.dep, false);
  } else if (stage_before(r.vs) != stage_) {
    p2p(upward(r.chunk) ? Stream::kPpVSendNext : Stream::kPpSendPrev, stage_, stage_before(r.vs), kTagGradients,
        {Pass::kBackward, Part::kActivations, -1, r.mb}, r.dep);
  }
  last_backward_ = held(r.dep);
}

void Lowerer::backward(std::int32_t mb, std::int64_t chunk, bool last_micro_batch, bool split) {
  Run r = backward_begin(mb, chunk, last_micro_batch, split);
  for (std::int64_t i = 0; i < r.layers; ++i) backward_layer(r, i);
  backward_end(r);
}

void Lowerer::weight_gradients(std::int32_t mb, std::int64_t chunk, bool last_micro_batch) {
  const Run r = start_run(mb, chunk);
  std::int32_t dep = kNone;
  for (std::int64_t i = r.layers - 1; i >= 0; --i) {
    const auto layer = static_cast<std::int32_t>(r.first + i);
    const Label mlp{Pass::kWeightGrad, Part::kMlp, layer, mb};
    const Label attn{Pass::kWeightGrad, Part::kAttention, layer, mb};
    const BackwardMemory mem = backward_memory(layer, i < r.recomputed);
    dep = compute(mlp_weight_list(layer), mlp, {dep}, Bytes(), std::min(mem.mlp_release, mlp_weight_held(layer)));
    const LayerLists& al = attn_lists(layer);
    dep = compute(al.attn_w, attn, {dep}, Bytes(), std::min(mem.attn_release, al.w_held_attn));
    if (zero3()) reduce_layer_gradients({Pass::kBackward, Part::kGradients, layer, mb}, dep);
    if (last_micro_batch) layer_gradients_ready(layer, dep);
  }
  last_backward_ = held(dep);
}

}  // namespace ts::parallel::detail
