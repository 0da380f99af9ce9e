#include "sim/parallel/lowering.h"

#include <utility>

#include "sim/base/diagnostic.h"
#include "sim/parallel/lowerer.h"
#include "sim/parallel/pp_layout.h"

namespace ts::parallel {

std::vector<std::int64_t> virtual_stage_layers(const ParallelPlan& plan, const ir::ModelSpec& model) {
  if (!plan.pp_layers.empty()) return plan.pp_layers;
  if (!plan.pp_layout.empty()) return layout_stage_layers(parse_pp_layout(plan.pp_layout).stages);
  const std::int64_t stages = plan.pp * plan.model_chunks();
  return std::vector<std::int64_t>(static_cast<std::size_t>(stages), model.num_layers / stages);
}

std::vector<std::int64_t> stage_layers(const ParallelPlan& plan, const ir::ModelSpec& model) {
  const auto virt = virtual_stage_layers(plan, model);
  std::vector<std::int64_t> out(static_cast<std::size_t>(plan.pp), 0);
  for (std::size_t v = 0; v < virt.size(); ++v) {
    out[static_cast<std::size_t>(plan.stage_of(static_cast<std::int64_t>(v)))] += virt[v];
  }
  return out;
}

namespace detail {

// Parameters of the input embedding and of the LM head (with the final norm) on one TP rank.
std::int64_t embedding_parameters(const ir::ModelSpec& model, const ParallelPlan& plan) {
  std::int64_t n = (model.vocab + plan.tp - 1) / plan.tp * model.hidden;
  if (model.position == ir::Position::kLearned) n += model.max_seq_len * model.hidden;
  return n;
}
std::int64_t head_parameters(const ir::ModelSpec& model, const ParallelPlan& plan, bool shares_embedding) {
  std::int64_t n = (model.norm == ir::Norm::kLayerNorm ? 2 : 1) * model.hidden;
  // A tied LM head on the embedding's stage is the same matrix; on another stage (PP > 1)
  // Megatron keeps a copy and all-reduces their gradients.
  if (!model.tied_embeddings || !shares_embedding) n += (model.vocab + plan.tp - 1) / plan.tp * model.hidden;
  return n;
}

TaskGraph Lowerer::run() {
  if (options_.full) {
    for (std::int64_t r = 0; r < layout_.num_ranks(); ++r) add_device(r, 1);
  } else {
    const std::int64_t per_stage = layout_.num_ranks() / plan_.pp;
    for (std::int64_t s = 0; s < plan_.pp; ++s) {
      Coord c;
      c[Axis::kPp] = s;
      add_device(layout_.rank(c), per_stage);
    }
  }
  if (program_ != nullptr) {
    SIM_ASSERT(options_.coarse && !options_.full, "block programs are coarse and symmetric");
    program_->templates.clear();
    program_->blocks.resize(g_.devices.size());
    for (auto& b : program_->blocks) b.clear();
    program_->registers = kFirstParamRegister + static_cast<std::int32_t>(all_layers());
  }
  for (std::size_t d = 0; d < g_.devices.size(); ++d) lower_device(static_cast<std::int32_t>(d));
  return std::move(g_);
}

void Lowerer::add_device(std::int64_t rank, std::int64_t represents) {
  SimDevice d;
  d.rank = static_cast<std::int32_t>(rank);
  d.coord = layout_.coord(rank);
  d.stage = d.coord[Axis::kPp];
  d.represents = represents;
  g_.devices.push_back(d);
}

std::int32_t Lowerer::communicator(std::vector<std::int32_t> ranks, unsigned axes, std::int32_t tag) {
  auto key = std::make_tuple(axes, tag, ranks);
  auto it = comm_index_.find(key);
  if (it != comm_index_.end()) return it->second;
  const auto id = static_cast<std::int32_t>(g_.communicators.size());
  g_.communicators.push_back({axes, std::move(ranks), tag, {}});
  if (axes == axis_bit(Axis::kEp) && model_.moe && plan_.moe_dispatcher != MoeDispatcher::kAllToAll) {
    const ir::MoeSpec& m = *model_.moe;
    g_.communicators.back().dispatch = {m.num_experts, m.top_k, m.expert_groups, m.group_limit};
  }
  comm_index_.emplace(std::move(key), id);
  return id;
}

std::int32_t Lowerer::emit(Task t, std::initializer_list<std::int32_t> deps) {
  if (join_ != kNone && t.kind != TaskKind::kP2p) {
    // The first task after an overlapped pair's receives also waits for the other one's.
    std::array<std::int32_t, 4> all{kNone, kNone, kNone, join_};
    SIM_ASSERT(deps.size() < all.size(), "too many dependencies");
    std::copy(deps.begin(), deps.end(), all.begin());
    join_ = kNone;
    return emit(t, {all[0], all[1], all[2], all[3]});
  }
  t.device = device_;
  const bool chainable = options_.coarse && !options_.full &&
                         (t.kind == TaskKind::kCompute ||
                          (t.kind == TaskKind::kCollective && t.stream == Stream::kTpComm));
  return chains_.add(t, deps, chainable);
}

std::int32_t Lowerer::tp_before(const Label& l, std::int32_t dep) {
  if (plan_.tp == 1 || !plan_.sequence_parallel) return dep;
  const CommOp op = l.pass == Pass::kBackward ? CommOp::kReduceScatter : CommOp::kAllGather;
  return hidden(collective(Stream::kTpComm, axis_bit(Axis::kTp), op, act_bytes_, l, {dep}), l, false);
}

std::int32_t Lowerer::tp_after(const Label& l, std::int32_t dep) {
  if (plan_.tp == 1) return dep;
  CommOp op = CommOp::kAllReduce;
  if (plan_.sequence_parallel) op = l.pass == Pass::kBackward ? CommOp::kAllGather : CommOp::kReduceScatter;
  return hidden(collective(Stream::kTpComm, axis_bit(Axis::kTp), op, act_bytes_, l, {dep}), l, true);
}

std::int32_t Lowerer::hidden(std::int32_t task, const Label& l, bool after) {
  const int part = l.part == Part::kMlp ? 1 : 0;
  const int bwd = l.pass == Pass::kBackward ? 1 : 0;
  const LayerLists& lists = part == 0 && l.layer >= 0 ? attn_lists(l.layer) : lists_;
  task_ref(task).hidden_by = lists.tp_hide[part][bwd][after ? 1 : 0];
  return task;
}

std::int32_t Lowerer::attention_core(const Label& l, std::int32_t dep) {
  const bool bwd = l.pass == Pass::kBackward;
  const std::int32_t core = bwd ? attn_lists(l.layer).core_bwd : attn_lists(l.layer).core_fwd;
  const std::int64_t cp = plan_.cp;
  switch (plan_.cp_algo) {
    case CpAlgo::kAllGather: {
      // Llama 3 (Dubey et al. 2024, Sec. 3.3.2): all-gather K and V, attend locally; the
      // backward reduce-scatters their gradients.
      if (!bwd) dep = cp_collective(CommOp::kAllGather, kv_bytes_ * cp, l, dep);
      dep = compute(core, l, {dep});
      if (bwd) dep = cp_collective(CommOp::kReduceScatter, kv_bytes_ * cp, l, dep);
      return dep;
    }
    case CpAlgo::kRing: {
      // Ring attention (Liu et al. 2023): cp steps, each attending to the KV block at hand
      // while the next one moves one hop around the ring; backward also passes dK, dV.
      const Bytes step_bytes = bwd ? kv_bytes_ * 2 : kv_bytes_;
      std::int32_t shift = dep;
      std::int32_t last = dep;
      for (std::int64_t i = 0; i < cp; ++i) {
        const std::int32_t block = compute(core, l, {shift, last});
        if (i + 1 < cp) shift = cp_collective(CommOp::kSendRecv, step_bytes, l, shift);
        last = block;
      }
      return last;
    }
    case CpAlgo::kUlysses: {
      // DeepSpeed-Ulysses (Jacobs et al. 2023): all-to-all Q, K, V from a sequence split to a
      // head split, attend over the full sequence, all-to-all the output back.
      const std::int64_t kv_h = std::max<std::int64_t>(1, model_.num_kv_heads / plan_.tp);
      const std::int64_t q_h = model_.num_heads / plan_.tp;
      const Bytes qkv(plan_.micro_batch * (plan_.seq_len / cp) * (q_h + 2 * kv_h) * model_.head_dim() * 2);
      const Bytes out(plan_.micro_batch * (plan_.seq_len / cp) * q_h * model_.head_dim() * 2);
      dep = cp_collective(CommOp::kAllToAll, bwd ? out : qkv, l, dep);
      dep = compute(core, l, {dep});
      return cp_collective(CommOp::kAllToAll, bwd ? qkv : out, l, dep);
    }
  }
  return dep;
}

std::int32_t Lowerer::attention_forward(const Label& l, std::int32_t dep, Bytes alloc, std::int32_t extra_dep) {
  const LayerLists& al = attn_lists(l.layer);
  dep = tp_before(l, dep);
  if (plan_.cp == 1) return tp_after(l, compute(al.attn_fwd, l, {dep, extra_dep}, alloc));
  dep = compute(al.pre_fwd, l, {dep, extra_dep}, alloc);
  dep = attention_core(l, dep);
  return tp_after(l, compute(al.post_fwd, l, {dep}));
}

std::int32_t Lowerer::attention_backward(const Label& l, std::int32_t dep, Bytes release, Bytes grads, bool split) {
  const LayerLists& al = attn_lists(l.layer);
  dep = tp_before(l, dep);
  if (plan_.cp == 1) {
    return tp_after(l, compute(split ? al.attn_bwd_in : al.attn_bwd, l, {dep}, grads,
                               release + grads));
  }
  dep = compute(split ? al.post_bwd_in : al.post_bwd, l, {dep}, grads);
  dep = attention_core(l, dep);
  return tp_after(l,
                  compute(split ? al.pre_bwd_in : al.pre_bwd, l, {dep}, Bytes(), release + grads));
}

std::int32_t Lowerer::layer_forward(const Label& l, std::int32_t dep, Bytes attn_alloc, Bytes mlp_alloc) {
  dep = layer_attention(l, dep, attn_alloc);
  return mlp_forward({l.pass, Part::kMlp, l.layer, l.mb}, dep, mlp_alloc);
}

std::int32_t Lowerer::layer_attention(const Label& l, std::int32_t dep, Bytes attn_alloc) {
  const std::int32_t gathered = gather_layer(l);
  // ZeRO-3 gathers per layer, ZeRO-1/2 with overlapped gathering once per iteration (bucket
  // gathers); at most one of the two applies, so one dependency slot serves both.
  std::int32_t param_dep = gathered;
  if (l.pass == Pass::kForward && first_forward_of_layer_[static_cast<std::size_t>(l.layer)]) {
    param_dep = std::max(param_dep, read(kFirstParamRegister + l.layer));
    first_forward_of_layer_[static_cast<std::size_t>(l.layer)] = false;
  }
  dep = attention_forward({l.pass, Part::kAttention, l.layer, l.mb}, dep, attn_alloc, param_dep);
  // The next layer's gather may start once this layer computes (ZeRO-3 only).
  if (zero3()) prefetch_gate_ = held(dep);
  return dep;
}

Lowerer::BackwardMemory Lowerer::backward_memory(std::int64_t layer, bool full) const {
  const Bytes kept = layer_kept(layer, full);
  const Bytes rematerialized =
      dense_in_moe(layer) ? options_.dense_layer_rematerialized : options_.layer_rematerialized;
  const Bytes remat = full ? rematerialized : Bytes();
  BackwardMemory mem;
  mem.remat_attn = Bytes(remat.count() / 2);
  mem.remat_mlp = remat - mem.remat_attn;
  mem.mlp_release = full ? mem.remat_mlp : kept - Bytes(kept.count() / 2);
  mem.attn_release = full ? mem.remat_attn + kept : Bytes(kept.count() / 2);
  // Gradients mirror the activations each block works on (with Mini-Sequence chunking, those
  // of one MLP chunk at a time); under the op policy, what the layer kept and what it reran.
  const Bytes worked = full ? remat
                            : plan_.recompute == Recompute::kSelectiveOp ? kept + rematerialized
                                                                         : kept;
  mem.attn_grads = Bytes(worked.count() / 2);
  mem.mlp_grads = (worked - mem.attn_grads) / plan_.mst_chunks;
  return mem;
}

std::int32_t Lowerer::layer_backward(const Label& l, std::int32_t dep, const BackwardMemory& mem, bool split) {
  const std::int32_t gathered = gather_whole_layer(l);
  const Bytes mlp_left = split ? std::min(mem.mlp_release, mlp_weight_held(l.layer)) : Bytes();
  const Bytes attn_left =
      split ? std::min(mem.attn_release, attn_lists(l.layer).w_held_attn) : Bytes();
  dep = mlp_backward({Pass::kBackward, Part::kMlp, l.layer, l.mb}, dep, gathered, mem.mlp_grads,
                     mem.mlp_release - mlp_left + mem.mlp_grads, split);
  dep = attention_backward({Pass::kBackward, Part::kAttention, l.layer, l.mb}, dep, mem.attn_release - attn_left,
                           mem.attn_grads, split);
  if (zero3() && !split) reduce_layer_gradients({Pass::kBackward, Part::kGradients, l.layer, l.mb}, dep);
  return dep;
}

}  // namespace detail

std::vector<std::int64_t> stage_layer_indices(const ParallelPlan& plan, const ir::ModelSpec& model,
                                              std::int64_t stage) {
  const auto virt = virtual_stage_layers(plan, model);
  std::vector<std::int64_t> out;
  std::int64_t first = 0;
  for (std::size_t v = 0; v < virt.size(); ++v) {
    if (plan.stage_of(static_cast<std::int64_t>(v)) == stage) {
      for (std::int64_t i = 0; i < virt[v]; ++i) out.push_back(first + i);
    }
    first += virt[v];
  }
  if (stage == plan.head_stage()) {
    for (std::int64_t k = 0; k < model.mtp_layers; ++k) out.push_back(model.num_layers + k);
  }
  return out;
}

std::int64_t mtp_projection_parameters(const ir::ModelSpec& model, const ParallelPlan& plan) {
  return 2 * model.hidden + (model.hidden + plan.tp - 1) / plan.tp * 2 * model.hidden;
}

std::int64_t stage_expert_parameters(const ir::ModelSpec& model, const ParallelPlan& plan, std::int64_t stage) {
  if (!model.moe) return 0;
  std::int64_t n = 0;
  for (const std::int64_t l : stage_layer_indices(plan, model, stage)) {
    n += ir::expert_parameter_count(model, l) / (plan.ep * plan.etp);
  }
  return n;
}

std::int64_t layer_shared_parameters(const ir::ModelSpec& model, const ParallelPlan& plan, std::int64_t layer) {
  return (ir::attention_parameter_count(model) + ir::dense_mlp_parameter_count(model, layer)) / plan.tp;
}

unsigned zero3_shard_axes(const ParallelPlan& plan) {
  const unsigned dp_axes = axis_bit(Axis::kDp) | axis_bit(Axis::kCp);
  return plan.zero_shard_group > 0 ? shard_groups(dp_axes, plan.zero_shard_group) : dp_axes;
}

std::int64_t stage_parameters(const ir::ModelSpec& model, const ParallelPlan& plan, std::int64_t stage) {
  const auto layers = stage_layer_indices(plan, model, stage);
  std::int64_t n = static_cast<std::int64_t>(layers.size()) * ir::layer_parameter_count(model) / plan.tp;
  if (model.moe) {
    n = stage_expert_parameters(model, plan, stage);
    for (const std::int64_t l : layers) n += layer_shared_parameters(model, plan, l);
  }
  if (stage == 0) n += detail::embedding_parameters(model, plan);
  if (stage == plan.head_stage()) {
    n += detail::head_parameters(model, plan, stage == 0) +
         model.mtp_layers * mtp_projection_parameters(model, plan);
  }
  return n;
}


TaskGraph lower(const ir::ModelSpec& model, const ParallelPlan& plan, const LoweringOptions& options,
                TaskGraph storage) {
  SIM_ASSERT(plan.num_micro_batches() > 0, "no micro-batches");
  return detail::Lowerer(model, plan, options, std::move(storage)).run();
}

BlockProgram lower_blocks(const ir::ModelSpec& model, const ParallelPlan& plan, const LoweringOptions& options,
                          BlockProgram storage) {
  SIM_ASSERT(plan.num_micro_batches() > 0, "no micro-batches");
  TaskGraph graph = std::move(storage.graph);
  storage.graph = detail::Lowerer(model, plan, options, std::move(graph), &storage).run();
  return storage;
}

}  // namespace ts::parallel
