#include "sim/parallel/lowering.h"

#include <algorithm>
#include <array>
#include <map>
#include <tuple>
#include <unordered_map>
#include <utility>

#include "sim/base/diagnostic.h"

namespace ts::parallel {

const char* stream_name(Stream s) {
  switch (s) {
    case Stream::kCompute: return "compute";
    case Stream::kTpComm: return "tp comm";
    case Stream::kCpComm: return "cp comm";
    case Stream::kDpComm: return "dp comm";
    case Stream::kPpRecvPrev: return "pp recv prev";
    case Stream::kPpSendNext: return "pp send next";
    case Stream::kPpRecvNext: return "pp recv next";
    case Stream::kPpSendPrev: return "pp send prev";
    case Stream::kDpReplica: return "dp replica comm";
  }
  return "?";
}

const char* comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce: return "all_reduce";
    case CommOp::kAllGather: return "all_gather";
    case CommOp::kReduceScatter: return "reduce_scatter";
    case CommOp::kAllToAll: return "all_to_all";
    case CommOp::kSendRecv: return "send_recv";
  }
  return "?";
}

const char* pass_name(Pass p) {
  switch (p) {
    case Pass::kForward: return "fwd";
    case Pass::kBackward: return "bwd";
    case Pass::kRecompute: return "recompute";
    case Pass::kOptimizer: return "optimizer";
  }
  return "?";
}

const char* part_name(Part p) {
  switch (p) {
    case Part::kEmbedding: return "embedding";
    case Part::kAttention: return "attention";
    case Part::kMlp: return "mlp";
    case Part::kLmHead: return "lm_head";
    case Part::kGradients: return "gradients";
    case Part::kOptimizer: return "optimizer";
    case Part::kActivations: return "activations";
  }
  return "?";
}

std::string task_label(const TaskGraph& g, const Task& t) {
  std::string name;
  if (t.layer >= 0) name += "L" + std::to_string(t.layer) + " ";
  switch (t.kind) {
    case TaskKind::kCompute:
      name += part_name(t.part);
      break;
    case TaskKind::kCollective:
      name += std::string(part_name(t.part)) + " " + comm_op_name(t.comm);
      break;
    case TaskKind::kP2p: {
      const auto& c = g.communicators[static_cast<std::size_t>(t.communicator)];
      name += t.pass == Pass::kForward ? "activations " : "gradients ";
      name += "rank " + std::to_string(c.ranks[0]) + "→" + std::to_string(c.ranks[1]);
      break;
    }
  }
  name += " ";
  name += pass_name(t.pass);
  if (t.micro_batch >= 0) name += " mb" + std::to_string(t.micro_batch);
  return name;
}

std::string step_label(const TaskGraph& g, const Task& task, std::int32_t step) {
  Task t = g.chain_steps[static_cast<std::size_t>(step)];
  t.device = task.device;
  t.micro_batch = task.micro_batch;
  return task_label(g, t);
}

std::vector<std::int64_t> virtual_stage_layers(const ParallelPlan& plan, const ir::ModelSpec& model) {
  if (!plan.pp_layers.empty()) return plan.pp_layers;
  const std::int64_t stages = plan.pp * plan.model_chunks();
  return std::vector<std::int64_t>(static_cast<std::size_t>(stages), model.num_layers / stages);
}

std::vector<std::int64_t> stage_layers(const ParallelPlan& plan, const ir::ModelSpec& model) {
  const auto virt = virtual_stage_layers(plan, model);
  std::vector<std::int64_t> out(static_cast<std::size_t>(plan.pp), 0);
  for (std::size_t v = 0; v < virt.size(); ++v) out[v % out.size()] += virt[v];
  return out;
}

namespace {

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

}  // namespace

std::int64_t stage_parameters(const ir::ModelSpec& model, const ParallelPlan& plan, std::int64_t stage) {
  const auto layers = stage_layers(plan, model);
  std::int64_t n = layers[static_cast<std::size_t>(stage)] * ir::layer_parameter_count(model) / plan.tp;
  if (stage == 0) n += embedding_parameters(model, plan);
  if (stage == plan.pp - 1) n += head_parameters(model, plan, stage == 0);
  return n;
}

namespace {

// Pass-through for optional dependencies: negative task ids are ignored by emit().
constexpr std::int32_t kNone = -1;
constexpr std::int32_t kTagActivations = 0;
constexpr std::int32_t kTagGradients = 1;

// The op lists of one layer as the plan cuts it, interned in the graph.
struct LayerLists {
  // Without context parallelism the attention block is one task; with it, the block is cut
  // around the attention core (pre → core → post) for the KV exchange.
  std::int32_t attn_fwd = kNone, attn_bwd = kNone;
  std::int32_t pre_fwd = kNone, pre_bwd = kNone, core_fwd = kNone, core_bwd = kNone;
  std::int32_t post_fwd = kNone, post_bwd = kNone;
  std::int32_t mlp_fwd = kNone, mlp_bwd = kNone;
  // TP communication overlap: the GEMMs that hide the collective before / after each block,
  // indexed [part: 0 attention, 1 MLP][backward][after].
  std::int32_t tp_hide[2][2][2] = {{{kNone, kNone}, {kNone, kNone}}, {{kNone, kNone}, {kNone, kNone}}};
};

// The first (or last) `count` GEMMs of an op list, in order.
std::vector<ir::Op> edge_gemms(const std::vector<ir::Op>& ops, bool last, std::size_t count) {
  std::vector<ir::Op> out;
  for (std::size_t i = 0; i < ops.size() && out.size() < count; ++i) {
    const ir::Op& op = ops[last ? ops.size() - 1 - i : i];
    if (op.kind == ir::OpKind::kGemm) out.push_back(op);
  }
  if (last) std::reverse(out.begin(), out.end());
  return out;
}

// Builds the tasks of every simulated device, one device at a time, in program order.
class Lowerer {
 public:
  // With `program`, the blocks of each device are lowered once per template into it (see
  // lower_blocks), their tasks into the graph.
  Lowerer(const ir::ModelSpec& model, const ParallelPlan& plan, const LoweringOptions& options,
          TaskGraph storage, BlockProgram* program = nullptr)
      : model_(model),
        plan_(plan),
        options_(options),
        layout_(plan),
        vlayers_(virtual_stage_layers(plan, model)),
        chunks_(plan.model_chunks()),
        g_(std::move(storage)),
        program_(program) {
    // Only the storage is kept (see lower()).
    g_.devices.clear();
    g_.tasks.clear();
    g_.deps.clear();
    g_.op_lists.clear();
    g_.communicators.clear();
    g_.chains.clear();
    g_.chain_steps.clear();
    vfirst_.assign(vlayers_.size(), 0);
    for (std::size_t v = 1; v < vlayers_.size(); ++v) vfirst_[v] = vfirst_[v - 1] + vlayers_[v - 1];
    build_op_lists();
  }

  TaskGraph run() {
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
      program_->registers = kFirstParamRegister + static_cast<std::int32_t>(model_.num_layers);
    }
    for (std::size_t d = 0; d < g_.devices.size(); ++d) lower_device(static_cast<std::int32_t>(d));
    return std::move(g_);
  }

 private:
  ir::LayerShape base_shape() const {
    ir::LayerShape shape;
    shape.micro_batch = plan_.micro_batch;
    shape.seq = plan_.seq_len / plan_.cp;
    shape.full_seq = plan_.seq_len;
    shape.tp = plan_.tp;
    shape.sequence_parallel = plan_.sequence_parallel;
    shape.gemm_dtype = plan_.dtype;
    // Every micro-batch of a step uses each layer's weights once; the first casts them (FP8,
    // MXFP8 and NVFP4 alike).
    if (plan_.fp8_weight_cache) {
      shape.fp8_weight_cast_share = 1.0 / static_cast<double>(std::max<std::int64_t>(1, plan_.num_micro_batches()));
    }
    shape.flash_attention = plan_.flash_attention;
    shape.eager_elementwise = plan_.elementwise == Elementwise::kEager;
    return shape;
  }

  void build_op_lists() {
    ir::LayerShape shape = base_shape();
    if (plan_.cp > 1) {
      switch (plan_.cp_algo) {
        case CpAlgo::kAllGather: break;  // local queries against all gathered keys
        case CpAlgo::kRing:
          // One block of local queries against one block of keys per ring step; with the
          // load-balanced (zig-zag) split every step does the same, causal-halved, work.
          shape.attention_q = shape.seq;
          shape.attention_kv = shape.seq;
          break;
        case CpAlgo::kUlysses:
          // All-to-all turns the sequence split into a head split: full sequence, heads / cp.
          shape.attention_q = plan_.seq_len;
          shape.attention_kv = plan_.seq_len;
          shape.attention_heads_divisor = plan_.cp;
          break;
      }
    }
    const ir::LayerOps layer = ir::build_layer(model_, shape);
    auto with_selective = [&](std::vector<ir::Op> bwd, const std::vector<ir::Op>& fwd) {
      // Selective recompute (Korthikanti et al. 2022) reruns the attention core before its
      // backward; with flash attention this is the forward kernel.
      if (plan_.recompute == Recompute::kSelective) {
        std::vector<ir::Op> core;
        for (const auto& op : fwd) {
          if (op.core) core.push_back(op);
        }
        bwd.insert(bwd.begin(), core.begin(), core.end());
      }
      return bwd;
    };
    // The op policy reruns part of each block before the block's backward.
    const ir::OpPolicyRecompute op_policy = ir::op_policy_recompute(model_, layer);
    auto with_op_policy = [&](std::vector<ir::Op> bwd, const std::vector<ir::Op>& rerun) {
      if (plan_.recompute == Recompute::kSelectiveOp) bwd.insert(bwd.begin(), rerun.begin(), rerun.end());
      return bwd;
    };
    if (plan_.cp == 1) {
      lists_.attn_fwd = add_ops(layer.attention.forward);
      lists_.attn_bwd = add_ops(with_op_policy(with_selective(layer.attention.backward, layer.attention.forward),
                                               op_policy.attention));
    } else {
      const ir::SplitAttention split = ir::split_attention(layer.attention);
      lists_.pre_fwd = add_ops(split.pre.forward);
      lists_.pre_bwd = add_ops(split.pre.backward);
      lists_.core_fwd = add_ops(split.core.forward);
      lists_.core_bwd = add_ops(with_selective(split.core.backward, split.core.forward));
      lists_.post_fwd = add_ops(split.post.forward);
      // The block's backward starts with the part after the core: the rerun goes first.
      lists_.post_bwd = add_ops(with_op_policy(split.post.backward, op_policy.attention));
    }
    if (plan_.mst_chunks > 1) {
      // Mini-Sequence Transformer (Luo et al. 2024): the MLP runs on K mini-sequences one after
      // another, and its backward recomputes each chunk's intermediate before using it (its own
      // recompute of the MLP, in place of the op policy's).
      ir::LayerShape mini = shape;
      mini.seq = shape.seq / plan_.mst_chunks;
      const ir::LayerOps chunk = ir::build_layer(model_, mini);
      std::vector<ir::Op> fwd, bwd;
      for (std::int64_t k = 0; k < plan_.mst_chunks; ++k) {
        fwd.insert(fwd.end(), chunk.mlp.forward.begin(), chunk.mlp.forward.end());
        for (const auto& op : chunk.mlp.forward) {
          if (op.kind == ir::OpKind::kGemm) break;  // recompute up to the intermediate
          bwd.push_back(op);
        }
        bool seen_gemm = false;
        for (const auto& op : chunk.mlp.forward) {
          if (seen_gemm && op.kind == ir::OpKind::kGemm) break;
          if (op.kind == ir::OpKind::kGemm) seen_gemm = true;
          if (seen_gemm) bwd.push_back(op);
        }
        bwd.insert(bwd.end(), chunk.mlp.backward.begin(), chunk.mlp.backward.end());
      }
      lists_.mlp_fwd = add_ops(fwd);
      lists_.mlp_bwd = add_ops(bwd);
    } else {
      lists_.mlp_fwd = add_ops(layer.mlp.forward);
      lists_.mlp_bwd = add_ops(with_op_policy(layer.mlp.backward, op_policy.mlp));
    }
    if (plan_.tp_comm_overlap && plan_.sequence_parallel && plan_.tp > 1) {
      // Transformer Engine overlaps the all-gather before a block with its first GEMM and the
      // reduce-scatter after it with its last GEMM; in the backward, with the data- and
      // weight-gradient GEMMs at the same ends.
      const ir::Block* blocks[2] = {&layer.attention, &layer.mlp};
      for (int part = 0; part < 2; ++part) {
        for (int bwd = 0; bwd < 2; ++bwd) {
          const auto& ops = bwd ? blocks[part]->backward : blocks[part]->forward;
          const std::size_t n = bwd ? 2 : 1;
          lists_.tp_hide[part][bwd][0] = add_ops(edge_gemms(ops, false, n));
          lists_.tp_hide[part][bwd][1] = add_ops(edge_gemms(ops, true, n));
        }
      }
    }
    const ir::LayerShape plain = base_shape();
    const ir::Block embedding = ir::build_embedding(model_, plain);
    emb_fwd_ = add_ops(embedding.forward);
    emb_bwd_ = add_ops(embedding.backward);
    if (plan_.mst_chunks > 1) {
      // The LM head and loss also run per mini-sequence (logits of one chunk at a time).
      ir::LayerShape mini = plain;
      mini.seq = plain.seq / plan_.mst_chunks;
      const ir::Block head = ir::build_lm_head(model_, mini);
      std::vector<ir::Op> fwd, bwd;
      for (std::int64_t k = 0; k < plan_.mst_chunks; ++k) {
        fwd.insert(fwd.end(), head.forward.begin(), head.forward.end());
        bwd.insert(bwd.end(), head.forward.begin(), head.forward.end());  // logits recomputed
        bwd.insert(bwd.end(), head.backward.begin(), head.backward.end());
      }
      head_fwd_ = add_ops(fwd);
      head_bwd_ = add_ops(bwd);
    } else {
      const ir::Block head = ir::build_lm_head(model_, plain);
      head_fwd_ = add_ops(head.forward);
      head_bwd_ = add_ops(head.backward);
    }
    // One bf16 activation tensor of the micro-batch: what TP collectives and pipeline sends move.
    act_bytes_ = Bytes(plan_.micro_batch * shape.seq * model_.hidden * 2);
    const std::int64_t kv_heads = std::max<std::int64_t>(1, model_.num_kv_heads / plan_.tp);
    kv_bytes_ = Bytes(plan_.micro_batch * shape.seq * 2 * kv_heads * model_.head_dim() * 2);
    layer_params_ = ir::layer_parameter_count(model_) / plan_.tp;
  }

  std::int32_t add_ops(std::vector<ir::Op> ops) {
    g_.op_lists.push_back(std::move(ops));
    return static_cast<std::int32_t>(g_.op_lists.size() - 1);
  }

  void add_device(std::int64_t rank, std::int64_t represents) {
    SimDevice d;
    d.rank = static_cast<std::int32_t>(rank);
    d.coord = layout_.coord(rank);
    d.stage = d.coord[Axis::kPp];
    d.represents = represents;
    g_.devices.push_back(d);
  }

  std::int32_t communicator(std::vector<std::int32_t> ranks, unsigned axes, std::int32_t tag) {
    auto key = std::make_tuple(axes, tag, ranks);
    auto it = comm_index_.find(key);
    if (it != comm_index_.end()) return it->second;
    const auto id = static_cast<std::int32_t>(g_.communicators.size());
    g_.communicators.push_back({axes, std::move(ranks), tag});
    comm_index_.emplace(std::move(key), id);
    return id;
  }

  // Appends a task depending on `deps` (task indices; negative entries are ignored). In coarse
  // mode compute tasks and tensor-parallel collectives become steps of chains (see Chain).
  std::int32_t emit(Task t, std::initializer_list<std::int32_t> deps) {
    t.device = device_;
    if (options_.coarse && !options_.full &&
        (t.kind == TaskKind::kCompute || (t.kind == TaskKind::kCollective && t.stream == Stream::kTpComm))) {
      return add_step(t, deps);
    }
    return add_task(t, resolved(deps));
  }

  // Dependencies as task ids: step handles are resolved (closing chains where needed) before the
  // task's entries are appended, since closing a chain appends its own.
  struct Deps {
    std::array<std::int32_t, 4> id{};
    std::size_t count = 0;
  };
  Deps resolved(std::initializer_list<std::int32_t> deps) {
    Deps out;
    for (std::int32_t d : deps) {
      if (d < 0) continue;
      SIM_ASSERT(out.count < out.id.size(), "too many dependencies");
      out.id[out.count++] = resolve(d);
    }
    return out;
  }

  std::int32_t add_task(Task t, const Deps& deps) {
    t.dep_begin = static_cast<std::uint32_t>(g_.deps.size());
    for (std::size_t i = 0; i < deps.count; ++i) g_.deps.push_back(static_cast<std::uint32_t>(deps.id[i]));
    t.dep_count = static_cast<std::uint32_t>(deps.count);
    g_.tasks.push_back(t);
    SIM_ASSERT(g_.tasks.size() < static_cast<std::size_t>(kStepHandle), "too many tasks");
    return static_cast<std::int32_t>(g_.tasks.size() - 1);
  }

  // Coarse lowering. Steps gather in the open chain and are named by handles (kStepHandle + n for
  // the n-th step) until the chain closes into one task. A step extends the open chain when it
  // waits for exactly the chain's last step, else it opens a new chain. Only a chain's last step
  // may have dependents: a handle used as a dependency closes the chain after its step (the
  // steps after it open the next chain), and a handle held for later must be resolved when held
  // (held()); resolving an inner step of a closed chain is an internal error, never a silent
  // merge.
  static constexpr std::int32_t kStepHandle = std::int32_t{1} << 30;

  std::int32_t add_step(Task t, std::initializer_list<std::int32_t> deps) {
    std::int32_t only = kNone;
    std::size_t count = 0;
    for (std::int32_t d : deps) {
      if (d < 0) continue;
      only = d;
      ++count;
    }
    const bool extends = !open_.empty() && count == 1 && only == kStepHandle + open_first_ +
                         static_cast<std::int32_t>(open_.size()) - 1 &&
                         t.micro_batch == open_.front().micro_batch;
    if (!extends) {
      const Deps d = resolved(deps);
      close_chain(open_.size());
      open_deps_ = d;
      open_first_ = static_cast<std::int32_t>(closed_.size());
    }
    open_.push_back(t);
    closed_.push_back(kNone);
    return kStepHandle + static_cast<std::int32_t>(closed_.size()) - 1;
  }

  std::int32_t resolve(std::int32_t id) {
    if (id < kStepHandle) return id;
    const std::int32_t n = id - kStepHandle;
    if (!open_.empty() && n >= open_first_) close_chain(static_cast<std::size_t>(n - open_first_) + 1);
    SIM_ASSERT(closed_[static_cast<std::size_t>(n)] >= 0, "a chain step is used after its chain closed");
    return closed_[static_cast<std::size_t>(n)];
  }
  // A task id held for later use (in coarse mode a step handle must be resolved now).
  std::int32_t held(std::int32_t id) { return resolve(id); }

  // The task or open step that `id` names, to amend it right after it was added.
  Task& task_ref(std::int32_t id) {
    if (id < kStepHandle) return g_.tasks[static_cast<std::size_t>(id)];
    const std::int32_t n = id - kStepHandle;
    SIM_ASSERT(!open_.empty() && n >= open_first_, "a closed chain step is amended");
    return open_[static_cast<std::size_t>(n - open_first_)];
  }

  // Closes the first `count` steps of the open chain into a task (a lone step is an ordinary task);
  // the rest stay open and wait for it.
  void close_chain(std::size_t count) {
    if (count == 0) return;
    std::int32_t id;
    if (count == 1) {
      id = add_task(open_.front(), open_deps_);
    } else {
      Task c = open_.front();
      c.kind = TaskKind::kCompute;
      c.ops = -1;
      c.comm = CommOp::kAllReduce;
      c.bytes = Bytes();
      c.communicator = -1;
      c.hidden_by = -1;
      c.alloc_at_start = Bytes();
      c.free_at_end = Bytes();
      c.chain = intern_chain(count);
      id = add_task(c, open_deps_);
    }
    closed_[static_cast<std::size_t>(open_first_) + count - 1] = id;
    open_.erase(open_.begin(), open_.begin() + static_cast<std::ptrdiff_t>(count));
    open_first_ += static_cast<std::int32_t>(count);
    open_deps_ = Deps{};
    open_deps_.id[0] = id;
    open_deps_.count = 1;
  }

  // The chain of the first `count` open steps, shared with an earlier chain of the same steps
  // (the same block of layers recurs for every micro-batch). A block program stores each
  // recurring block once already, as a template: its chains are not looked up.
  std::int32_t intern_chain(std::size_t count) {
    std::vector<std::int32_t>* candidates = program_ == nullptr ? &chain_candidates(count) : nullptr;
    if (candidates != nullptr) {
      auto same = [](const Task& a, const Task& b) {
        return a.kind == b.kind && a.stream == b.stream && a.pass == b.pass && a.part == b.part &&
               a.layer == b.layer && a.ops == b.ops && a.duration == b.duration && a.comm == b.comm &&
               a.bytes == b.bytes && a.communicator == b.communicator && a.hidden_by == b.hidden_by &&
               a.alloc_at_start == b.alloc_at_start && a.free_at_end == b.free_at_end;
      };
      for (std::int32_t c : *candidates) {
        const Chain& chain = g_.chains[static_cast<std::size_t>(c)];
        if (chain.step_count != count) continue;
        bool equal = true;
        for (std::size_t i = 0; i < count && equal; ++i) equal = same(g_.chain_steps[chain.step_begin + i], open_[i]);
        if (equal) return c;
      }
    }
    Chain chain;
    chain.step_begin = static_cast<std::uint32_t>(g_.chain_steps.size());
    chain.step_count = static_cast<std::uint32_t>(count);
    for (std::size_t i = 0; i < count; ++i) {
      Task step = open_[i];
      step.micro_batch = -1;  // the chain task's
      step.dep_begin = 0;
      step.dep_count = 0;
      g_.chain_steps.push_back(step);
    }
    g_.chains.push_back(chain);
    const auto id = static_cast<std::int32_t>(g_.chains.size() - 1);
    if (candidates != nullptr) candidates->push_back(id);
    return id;
  }

  // The chains that may equal the first `count` open steps (by a hash of the steps).
  std::vector<std::int32_t>& chain_candidates(std::size_t count) {
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 1099511628211ull; };
    for (std::size_t i = 0; i < count; ++i) {
      const Task& t = open_[i];
      mix(static_cast<std::uint64_t>(t.kind) | static_cast<std::uint64_t>(t.stream) << 8 |
          static_cast<std::uint64_t>(t.pass) << 16 | static_cast<std::uint64_t>(t.part) << 24 |
          static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.layer)) << 32);
      mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.ops)) |
          static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.communicator)) << 32);
      mix(static_cast<std::uint64_t>(t.bytes.count()) ^ static_cast<std::uint64_t>(t.alloc_at_start.count()) << 1 ^
          static_cast<std::uint64_t>(t.free_at_end.count()) << 2 ^ static_cast<std::uint64_t>(t.duration.ps()) << 3);
      mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.hidden_by)) | static_cast<std::uint64_t>(t.comm) << 32);
    }
    return chain_index_[h ^ count];
  }

  struct Label {
    Pass pass;
    Part part;
    std::int32_t layer;
    std::int32_t mb;
  };

  std::int32_t compute(std::int32_t ops, const Label& l, std::initializer_list<std::int32_t> deps,
                       Bytes alloc = Bytes(), Bytes release = Bytes()) {
    Task t;
    t.kind = TaskKind::kCompute;
    t.stream = Stream::kCompute;
    t.pass = l.pass;
    t.part = l.part;
    t.layer = l.layer;
    t.micro_batch = l.mb;
    t.ops = ops;
    t.alloc_at_start = alloc;
    t.free_at_end = release;
    return emit(t, deps);
  }

  std::int32_t collective(Stream stream, unsigned axes, CommOp op, Bytes bytes, const Label& l,
                          std::initializer_list<std::int32_t> deps) {
    Task t;
    t.kind = TaskKind::kCollective;
    t.stream = stream;
    t.pass = l.pass;
    t.part = l.part;
    t.layer = l.layer;
    t.micro_batch = l.mb;
    t.comm = op;
    t.bytes = bytes;
    // The group of this rank along `axes` is the same for every collective of the device:
    // look it up once (building and comparing groups of hundreds of ranks dominated lowering).
    // A device uses a handful of masks (TP, CP, DP × CP, hybrid sharding's two cuts).
    const auto cached = std::find_if(group_comm_.begin(), group_comm_.end(),
                                     [axes](const auto& entry) { return entry.first == axes; });
    if (cached != group_comm_.end()) {
      t.communicator = cached->second;
    } else {
      t.communicator = communicator(layout_.group(rank_, axes), axes, 0);
      group_comm_.emplace_back(axes, t.communicator);
    }
    return emit(t, deps);
  }

  // One point-to-point transfer of a pipeline pair, on the stream of its direction and peer.
  std::int32_t p2p(Stream stream, std::int64_t src_stage, std::int64_t dst_stage, std::int32_t tag,
                   const Label& l, std::int32_t dep) {
    // A device sends and receives on each stream with one peer: look the pair's communicator up
    // once per stream (building the key and searching the map dominated lowering).
    P2pComm& cached = p2p_comm_[static_cast<std::size_t>(stream)];
    if (cached.comm < 0 || cached.src_stage != src_stage || cached.dst_stage != dst_stage || cached.tag != tag) {
      Coord src = layout_.coord(rank_);
      Coord dst = src;
      src[Axis::kPp] = src_stage;
      dst[Axis::kPp] = dst_stage;
      cached = {src_stage, dst_stage, tag,
                communicator({static_cast<std::int32_t>(layout_.rank(src)), static_cast<std::int32_t>(layout_.rank(dst))},
                             axis_bit(Axis::kPp), tag)};
    }
    Task t;
    t.kind = TaskKind::kP2p;
    t.stream = stream;
    t.pass = l.pass;
    t.part = Part::kActivations;
    t.micro_batch = l.mb;
    t.comm = CommOp::kSendRecv;
    t.bytes = act_bytes_;
    t.communicator = cached.comm;
    return emit(t, {dep});
  }

  // Tensor-parallel traffic around a block: an all-reduce of its output, or with sequence
  // parallelism an all-gather before and a reduce-scatter after (Korthikanti et al. 2022,
  // Sec. 4.2.2; in backward the two swap); none when TP = 1.
  std::int32_t tp_before(const Label& l, std::int32_t dep) {
    if (plan_.tp == 1 || !plan_.sequence_parallel) return dep;
    const CommOp op = l.pass == Pass::kBackward ? CommOp::kReduceScatter : CommOp::kAllGather;
    return hidden(collective(Stream::kTpComm, axis_bit(Axis::kTp), op, act_bytes_, l, {dep}), l, false);
  }
  std::int32_t tp_after(const Label& l, std::int32_t dep) {
    if (plan_.tp == 1) return dep;
    CommOp op = CommOp::kAllReduce;
    if (plan_.sequence_parallel) op = l.pass == Pass::kBackward ? CommOp::kAllGather : CommOp::kReduceScatter;
    return hidden(collective(Stream::kTpComm, axis_bit(Axis::kTp), op, act_bytes_, l, {dep}), l, true);
  }
  // Marks a TP collective as overlapped with the GEMMs at that end of its block.
  std::int32_t hidden(std::int32_t task, const Label& l, bool after) {
    const int part = l.part == Part::kMlp ? 1 : 0;
    const int bwd = l.pass == Pass::kBackward ? 1 : 0;
    task_ref(task).hidden_by = lists_.tp_hide[part][bwd][after ? 1 : 0];
    return task;
  }

  std::int32_t cp_collective(CommOp op, Bytes bytes, const Label& l, std::int32_t dep) {
    return collective(Stream::kCpComm, axis_bit(Axis::kCp), op, bytes, l, {dep});
  }

  // The attention core under context parallelism (forward, recompute or backward).
  std::int32_t attention_core(const Label& l, std::int32_t dep) {
    const bool bwd = l.pass == Pass::kBackward;
    const std::int32_t core = bwd ? lists_.core_bwd : lists_.core_fwd;
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

  // The attention block forward (or recompute); returns its last task.
  std::int32_t attention_forward(const Label& l, std::int32_t dep, Bytes alloc, std::int32_t extra_dep) {
    dep = tp_before(l, dep);
    if (plan_.cp == 1) return tp_after(l, compute(lists_.attn_fwd, l, {dep, extra_dep}, alloc));
    dep = compute(lists_.pre_fwd, l, {dep, extra_dep}, alloc);
    dep = attention_core(l, dep);
    return tp_after(l, compute(lists_.post_fwd, l, {dep}));
  }

  // A block's backward holds the gradients of the activations it consumes while it runs (about
  // as large as those activations) on top of what it releases at its end.
  std::int32_t attention_backward(const Label& l, std::int32_t dep, Bytes release, Bytes grads) {
    dep = tp_before(l, dep);
    if (plan_.cp == 1) return tp_after(l, compute(lists_.attn_bwd, l, {dep}, grads, release + grads));
    dep = compute(lists_.post_bwd, l, {dep}, grads);
    dep = attention_core(l, dep);
    return tp_after(l, compute(lists_.pre_bwd, l, {dep}, Bytes(), release + grads));
  }

  // ZeRO-3 / FSDP: parameters are gathered before each layer's forward and backward (at most one
  // layer ahead of the compute) and gradients reduce-scattered after its backward.
  bool zero3() const { return plan_.zero_stage >= 3 && replicas() > 1; }
  std::int64_t replicas() const { return plan_.dp * plan_.cp; }
  unsigned dp_axes() const { return axis_bit(Axis::kDp) | axis_bit(Axis::kCp); }

  // ZeRO-3's groups: all data-parallel ranks, or with hybrid sharding (zero_shard_group) the
  // rank's shard group, whose gradient shards are then all-reduced across the replica group.
  unsigned shard_axes() const {
    return plan_.zero_shard_group > 0 ? shard_groups(dp_axes(), plan_.zero_shard_group) : dp_axes();
  }
  std::int64_t shard_replicas() const { return replicas() / plan_.zero_shards(); }

  std::int32_t gather_layer(const Label& l) {
    if (!zero3()) return kNone;
    const std::int32_t g = collective(Stream::kDpComm, shard_axes(), CommOp::kAllGather,
                                      Bytes(layer_params_ * 2), l, {read(kGateRegister)});
    return g;
  }

  // One transformer layer forward (also used for full recompute); returns the last task.
  std::int32_t layer_forward(const Label& l, std::int32_t dep, Bytes attn_alloc, Bytes mlp_alloc) {
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
    dep = tp_before({l.pass, Part::kMlp, l.layer, l.mb}, dep);
    dep = compute(lists_.mlp_fwd, {l.pass, Part::kMlp, l.layer, l.mb}, {dep}, mlp_alloc);
    return tp_after({l.pass, Part::kMlp, l.layer, l.mb}, dep);
  }

  struct BackwardMemory {
    Bytes mlp_release, attn_release;  // activations freed at the end of each block's backward
    Bytes mlp_grads, attn_grads;      // activation gradients live during each block's backward
    Bytes remat_attn, remat_mlp;      // what full recompute's forward allocates in each block
  };

  // What a layer's forward keeps: under full recompute (`full`) its input, else all the plan's
  // recompute mode leaves (with recompute of only some layers, everything).
  Bytes layer_kept(bool full) const {
    if (full || plan_.recompute != Recompute::kFull) return options_.layer_kept;
    return options_.layer_kept_whole;
  }

  // Backward releases what the forward kept; full recompute (`full`) first rebuilds the
  // activations (half per block), which the backward then releases with the kept input.
  BackwardMemory backward_memory(bool full) const {
    const Bytes kept = layer_kept(full);
    const Bytes remat = full ? options_.layer_rematerialized : Bytes();
    BackwardMemory mem;
    mem.remat_attn = Bytes(remat.count() / 2);
    mem.remat_mlp = remat - mem.remat_attn;
    mem.mlp_release = full ? mem.remat_mlp : kept - Bytes(kept.count() / 2);
    mem.attn_release = full ? mem.remat_attn + kept : Bytes(kept.count() / 2);
    // Gradients mirror the activations each block works on (with Mini-Sequence chunking, those
    // of one MLP chunk at a time); under the op policy, what the layer kept and what it reran.
    const Bytes worked = full ? remat
                              : plan_.recompute == Recompute::kSelectiveOp ? kept + options_.layer_rematerialized
                                                                           : kept;
    mem.attn_grads = Bytes(worked.count() / 2);
    mem.mlp_grads = (worked - mem.attn_grads) / plan_.mst_chunks;
    return mem;
  }

  std::int32_t layer_backward(const Label& l, std::int32_t dep, const BackwardMemory& mem) {
    const std::int32_t gathered = gather_layer(l);
    dep = tp_before({Pass::kBackward, Part::kMlp, l.layer, l.mb}, dep);
    dep = compute(lists_.mlp_bwd, {Pass::kBackward, Part::kMlp, l.layer, l.mb}, {dep, gathered},
                  mem.mlp_grads, mem.mlp_release + mem.mlp_grads);
    if (zero3()) prefetch_gate_ = held(dep);
    dep = tp_after({Pass::kBackward, Part::kMlp, l.layer, l.mb}, dep);
    dep = attention_backward({Pass::kBackward, Part::kAttention, l.layer, l.mb}, dep, mem.attn_release,
                             mem.attn_grads);
    if (zero3()) {
      const Label grads{Pass::kBackward, Part::kGradients, l.layer, l.mb};
      std::int32_t reduced = collective(Stream::kDpComm, shard_axes(), CommOp::kReduceScatter,
                                        Bytes(layer_params_ * plan_.grad_reduce_bytes()), grads, {dep});
      if (shard_replicas() > 1) {
        const std::int64_t shard = (layer_params_ + plan_.zero_shards() - 1) / plan_.zero_shards();
        reduced = collective(Stream::kDpReplica, replica_groups(dp_axes(), plan_.zero_shards()), CommOp::kAllReduce,
                             Bytes(shard * plan_.grad_reduce_bytes()), grads, {reduced});
      }
      // The step waits for the last layer's gradients (each stream runs its collectives in
      // order, and every replica all-reduce follows its reduce-scatter).
      last_grad_reduce_ = held(reduced);
    }
    return dep;
  }

  // Gradients of `params` parameters became ready at task `ready` (last micro-batch only): they
  // join the current bucket, which is reduced once full (Megatron-Core DDP, PyTorch DDP).
  void gradients_ready(std::int64_t params, std::int32_t ready, bool last_of_iteration) {
    if (zero3() || replicas() == 1) return;
    bucket_params_ += params;
    bucket_ready_ = held(ready);
    const bool full = plan_.overlap_grad_reduce && bucket_params_ >= plan_.grad_bucket_params;
    if (full || last_of_iteration) flush_bucket();
  }
  void flush_bucket() {
    if (bucket_params_ == 0) return;
    const CommOp op = plan_.zero_stage == 0 ? CommOp::kAllReduce : CommOp::kReduceScatter;
    last_grad_reduce_ = collective(Stream::kDpComm, dp_axes(), op,
                                   Bytes(bucket_params_ * plan_.grad_reduce_bytes()),
                                   {Pass::kOptimizer, Part::kGradients, -1, -1}, {read(kBucketRegister)});
    bucket_params_ = 0;
  }

  std::int64_t vstage(std::int64_t chunk) const { return chunk * plan_.pp + stage_; }
  std::int64_t last_vstage() const { return plan_.pp * chunks_ - 1; }
  std::int64_t prev_stage() const { return (stage_ + plan_.pp - 1) % plan_.pp; }
  std::int64_t next_stage() const { return (stage_ + 1) % plan_.pp; }

  void forward(std::int32_t mb, std::int64_t chunk) {
    const std::int64_t vs = vstage(chunk);
    const Label l{Pass::kForward, Part::kActivations, -1, mb};
    std::int32_t dep = kNone;
    if (vs > 0) dep = p2p(Stream::kPpRecvPrev, prev_stage(), stage_, kTagActivations, l, kNone);
    if (vs == 0) dep = compute(emb_fwd_, {Pass::kForward, Part::kEmbedding, -1, mb}, {dep});
    // The attention and MLP blocks each allocate half of what the layer keeps; under full
    // recompute the layer keeps only its input, allocated with the attention block.
    const std::int64_t first = vfirst_[static_cast<std::size_t>(vs)];
    const std::int64_t layers = vlayers_[static_cast<std::size_t>(vs)];
    const std::int64_t recomputed = plan_.recomputed_layers(layers);
    for (std::int64_t i = 0; i < layers; ++i) {
      const bool full = i < recomputed;
      const Bytes kept = layer_kept(full);
      const Bytes attn_alloc = full ? kept : Bytes(kept.count() / 2);
      const Label ll{Pass::kForward, Part::kAttention, static_cast<std::int32_t>(first + i), mb};
      dep = layer_forward(ll, dep, attn_alloc, kept - attn_alloc);
    }
    if (vs == last_vstage()) {
      compute(head_fwd_, {Pass::kForward, Part::kLmHead, -1, mb}, {dep}, options_.head_transient);
    } else {
      p2p(Stream::kPpSendNext, stage_, next_stage(), kTagActivations, l, dep);
    }
  }

  void backward(std::int32_t mb, std::int64_t chunk, bool last_micro_batch) {
    const std::int64_t vs = vstage(chunk);
    const Label l{Pass::kBackward, Part::kActivations, -1, mb};
    std::int32_t dep = kNone;
    if (vs == last_vstage()) {
      // head_transient is the loss's peak with the logits' gradient included (memory::
      // bytes_per_logit): the forward allocated it, the backward frees it.
      dep = compute(head_bwd_, {Pass::kBackward, Part::kLmHead, -1, mb}, {}, Bytes(), options_.head_transient);
      if (last_micro_batch) gradients_ready(head_parameters(model_, plan_, plan_.pp == 1), dep, false);
    } else {
      dep = p2p(Stream::kPpRecvNext, next_stage(), stage_, kTagGradients, l, kNone);
    }
    const std::int64_t first = vfirst_[static_cast<std::size_t>(vs)];
    const std::int64_t layers = vlayers_[static_cast<std::size_t>(vs)];
    const std::int64_t recomputed = plan_.recomputed_layers(layers);
    for (std::int64_t i = layers - 1; i >= 0; --i) {
      const bool full = i < recomputed;
      const BackwardMemory mem = backward_memory(full);
      const Label ll{Pass::kBackward, Part::kAttention, static_cast<std::int32_t>(first + i), mb};
      if (full) {
        dep = layer_forward({Pass::kRecompute, Part::kAttention, ll.layer, mb}, dep, mem.remat_attn, mem.remat_mlp);
      }
      dep = layer_backward(ll, dep, mem);
      if (last_micro_batch) gradients_ready(layer_params_, dep, false);
    }
    if (vs == 0) {
      dep = compute(emb_bwd_, {Pass::kBackward, Part::kEmbedding, -1, mb}, {dep});
      if (last_micro_batch) gradients_ready(embedding_parameters(model_, plan_), dep, false);
    } else {
      p2p(Stream::kPpSendPrev, stage_, prev_stage(), kTagGradients, l, dep);
    }
    last_backward_ = held(dep);
  }

  // Remaining gradient reduction and the optimizer step; without overlap, the updated
  // parameters' all-gather (ZeRO ≥ 1) follows the step.
  void optimizer() {
    const std::int64_t params = stage_parameters(model_, plan_, stage_);
    if (!zero3()) gradients_ready(0, read(kLastBackwardRegister), true);
    std::int64_t updated = params;
    if (replicas() > 1 && plan_.zero_stage > 0) updated = (params + plan_.zero_shards() - 1) / plan_.zero_shards();
    ir::Op step;
    step.name = "adam_step";
    step.kind = ir::OpKind::kMemoryBound;
    step.moved = options_.optimizer_bytes_per_param * updated;
    const std::int32_t dep = compute(add_ops({step}), {Pass::kOptimizer, Part::kOptimizer, -1, -1},
                                     {read(kLastBackwardRegister), read(kLastReduceRegister)});
    if (replicas() > 1 && plan_.zero_stage > 0 && !zero3() && !plan_.overlap_param_gather) {
      collective(Stream::kDpComm, dp_axes(), CommOp::kAllGather, Bytes(params * 2),
                 {Pass::kOptimizer, Part::kOptimizer, -1, -1}, {dep});
    }
  }

  // With ZeRO 1/2 and overlapped parameter gathering, the previous step's all-gather runs in
  // buckets at the start of the iteration and each layer's first forward waits for its bucket.
  void param_gathers() {
    param_ready_.assign(static_cast<std::size_t>(model_.num_layers), kNone);
    first_forward_of_layer_.assign(static_cast<std::size_t>(model_.num_layers), true);
    if (!(replicas() > 1 && plan_.zero_stage > 0 && !zero3() && plan_.overlap_param_gather)) return;
    std::int64_t bucket = 0;
    std::vector<std::int64_t> waiting;
    auto flush = [&] {
      if (bucket == 0) return;
      const std::int32_t t = collective(Stream::kDpComm, dp_axes(), CommOp::kAllGather, Bytes(bucket * 2),
                                        {Pass::kForward, Part::kOptimizer, -1, -1}, {});
      for (auto layer : waiting) param_ready_[static_cast<std::size_t>(layer)] = t;
      waiting.clear();
      bucket = 0;
    };
    for (std::int64_t chunk = 0; chunk < chunks_; ++chunk) {
      const std::int64_t vs = vstage(chunk);
      if (vs == 0) bucket += embedding_parameters(model_, plan_);
      for (std::int64_t i = 0; i < vlayers_[static_cast<std::size_t>(vs)]; ++i) {
        bucket += layer_params_;
        waiting.push_back(vfirst_[static_cast<std::size_t>(vs)] + i);
        if (bucket >= plan_.grad_bucket_params) flush();
      }
      if (vs == last_vstage()) bucket += head_parameters(model_, plan_, plan_.pp == 1);
    }
    flush();
  }

  // The lowering state that blocks read besides the registers (see BlockProgram).
  enum class BlockKind : std::uint8_t { kParamGathers, kForward, kBackward, kOptimizer };
  static constexpr std::size_t kBlockKinds = 4;
  struct BlockKey {
    BlockKind kind;
    std::int64_t chunk;
    bool last;
    bool forwarded;       // the chunk ran a forward before
    std::int64_t bucket;  // parameters in the open gradient bucket
    bool operator==(const BlockKey&) const = default;
  };
  // A template, and what a block must agree on to be its instance besides the key: whether the
  // registers that the template's lowering read held a task (the lowering depends on the
  // registers through those reads alone, and so does which it reads next).
  struct KnownBlock {
    BlockKey key;
    std::uint32_t templ;
    std::uint32_t read;     // registers it read (masks of register_bit())
    std::uint32_t holding;  // which held a task before it
    // What lowering the block leaves in the state: the bucket's fill, and which registers hold
    // a task (all that matters of them until the next template's lowering).
    std::int64_t bucket_after;
    std::uint32_t written;        // the registers it changed, below kFirstParamRegister
    std::uint32_t holding_after;  // of those, which hold a task after it
    bool writes_params;           // it changes the parameter gathers' registers
  };
  static constexpr std::int32_t kGateRegister = 0;  // prefetch_gate_
  static constexpr std::int32_t kBucketRegister = 1;  // bucket_ready_
  static constexpr std::int32_t kLastBackwardRegister = 2;  // last_backward_
  static constexpr std::int32_t kLastReduceRegister = 3;  // last_grad_reduce_
  static constexpr std::int32_t kFirstParamRegister = 4;  // param_ready_[layer]: + layer

  std::int32_t& reg(std::int32_t r) {
    switch (r) {
      case kGateRegister: return prefetch_gate_;
      case kBucketRegister: return bucket_ready_;
      case kLastBackwardRegister: return last_backward_;
      case kLastReduceRegister: return last_grad_reduce_;
      default: return param_ready_[static_cast<std::size_t>(r - kFirstParamRegister)];
    }
  }
  // A register mask: one bit per register below kFirstParamRegister, one for the parameter
  // gathers' (all held or none: the gathers' block sets them all).
  static std::uint32_t register_bit(std::int32_t r) { return 1u << std::min(r, kFirstParamRegister); }
  // Which registers hold a task; the parameter gathers' bit only `with_params` (it takes a scan
  // of the layers, and only a chunk's first forward reads those registers).
  std::uint32_t holding(bool with_params) const {
    const bool params = with_params && std::any_of(param_ready_.begin(), param_ready_.end(),
                                                   [](std::int32_t t) { return t != kNone; });
    return (prefetch_gate_ != kNone ? register_bit(kGateRegister) : 0u) |
           (bucket_ready_ != kNone ? register_bit(kBucketRegister) : 0u) |
           (last_backward_ != kNone ? register_bit(kLastBackwardRegister) : 0u) |
           (last_grad_reduce_ != kNone ? register_bit(kLastReduceRegister) : 0u) |
           (params ? register_bit(kFirstParamRegister) : 0u);
  }
  // A register as the block being lowered reads it (recorded for its template's KnownBlock).
  std::int32_t read(std::int32_t r) {
    read_ |= register_bit(r);
    return reg(r);
  }

  void run_block(BlockKind kind, std::int32_t mb, std::int64_t chunk, bool last) {
    switch (kind) {
      case BlockKind::kParamGathers: param_gathers(); break;
      case BlockKind::kForward: forward(mb, chunk); break;
      case BlockKind::kBackward: backward(mb, chunk, last); break;
      case BlockKind::kOptimizer: optimizer(); break;
    }
  }

  // Lowers one block of the device's program: into the graph, or with a program, as an instance
  // of the template of the blocks that lower alike (lowered now if this is the first).
  void block(BlockKind kind, std::int32_t mb, std::int64_t chunk, bool last) {
    if (program_ == nullptr) return run_block(kind, mb, chunk, last);
    const bool forwarded = forwarded_[static_cast<std::size_t>(chunk)] != 0;
    const BlockKey key{kind, chunk, last, forwarded, bucket_params_};
    const std::uint32_t holds = holding(false);
    if (kind == BlockKind::kForward) forwarded_[static_cast<std::size_t>(chunk)] = 1;
    auto& blocks = program_->blocks[static_cast<std::size_t>(device_)];
    // The device's templates by kind and chunk: a handful each.
    auto& known_here = known_[static_cast<std::size_t>(kind) * static_cast<std::size_t>(chunks_) +
                              static_cast<std::size_t>(chunk)];
    for (const KnownBlock& known : known_here) {
      if (!(known.key == key)) continue;
      const bool params = (known.read & register_bit(kFirstParamRegister)) != 0;
      if (((params ? holding(true) : holds) ^ known.holding) & known.read) continue;
      bucket_params_ = known.bucket_after;
      for (std::int32_t r = 0; r < kFirstParamRegister; ++r) {
        if ((known.written & register_bit(r)) == 0) continue;
        reg(r) = (known.holding_after & register_bit(r)) != 0 ? BlockProgram::kRegisterBase + r : kNone;
      }
      if (known.writes_params) {
        for (const BlockProgram::Template::Write& w : program_->templates[known.templ].writes) {
          reg(w.reg) = w.task >= 0 || w.from_register >= 0 ? BlockProgram::kRegisterBase + w.reg : kNone;
        }
      }
      blocks.push_back({known.templ, mb});
      return;
    }
    // The registers the block may read or write: the parameter gathers' only where it waits for
    // them or makes them.
    const bool params = kind == BlockKind::kParamGathers || (kind == BlockKind::kForward && !forwarded);
    const std::int32_t registers = params ? program_->registers : kFirstParamRegister;
    held_before_.resize(static_cast<std::size_t>(registers));
    for (std::int32_t r = 0; r < registers; ++r) {
      held_before_[static_cast<std::size_t>(r)] = reg(r) != kNone;
      if (reg(r) != kNone) reg(r) = BlockProgram::kRegisterBase + r;
    }
    SIM_ASSERT(open_.empty(), "a chain spans blocks");
    read_ = 0;
    const std::uint32_t held = holding(true);
    BlockProgram::Template templ;
    templ.device = device_;
    templ.task_begin = static_cast<std::uint32_t>(g_.tasks.size());
    run_block(kind, mb, chunk, last);
    close_chain(open_.size());
    templ.task_count = static_cast<std::uint32_t>(g_.tasks.size()) - templ.task_begin;
    SIM_ASSERT(g_.tasks.size() < static_cast<std::size_t>(BlockProgram::kRegisterBase), "too many tasks");
    for (std::int32_t r = 0; r < registers; ++r) {
      const std::int32_t v = reg(r);
      if (v == BlockProgram::kRegisterBase + r || (v == kNone && !held_before_[static_cast<std::size_t>(r)])) continue;
      BlockProgram::Template::Write w;
      w.reg = r;
      if (v >= BlockProgram::kRegisterBase) {
        w.from_register = v - BlockProgram::kRegisterBase;
      } else if (v != kNone) {
        SIM_ASSERT(v >= static_cast<std::int32_t>(templ.task_begin), "a register holds a task of another block");
        w.task = v - static_cast<std::int32_t>(templ.task_begin);
      }
      templ.writes.push_back(w);
    }
    KnownBlock known{key, static_cast<std::uint32_t>(program_->templates.size()), read_, held, bucket_params_, 0, 0, false};
    for (const BlockProgram::Template::Write& w : templ.writes) {
      if (w.reg >= kFirstParamRegister) {
        known.writes_params = true;
      } else {
        known.written |= register_bit(w.reg);
      }
    }
    known.holding_after = holding(false) & known.written;
    program_->templates.push_back(std::move(templ));
    known_here.push_back(known);
    blocks.push_back({known.templ, mb});
  }

  void lower_device(std::int32_t d) {
    device_ = d;
    const SimDevice& dev = g_.devices[static_cast<std::size_t>(d)];
    rank_ = dev.rank;
    group_comm_.clear();
    p2p_comm_.fill(P2pComm{});
    stage_ = dev.stage;
    last_backward_ = kNone;
    last_grad_reduce_ = kNone;
    prefetch_gate_ = kNone;
    bucket_params_ = 0;
    // Every register empty before the first block (block programs look at which hold a task).
    bucket_ready_ = kNone;
    param_ready_.assign(static_cast<std::size_t>(model_.num_layers), kNone);
    open_.clear();
    for (auto& k : known_) k.clear();
    known_.resize(kBlockKinds * static_cast<std::size_t>(chunks_));
    forwarded_.assign(static_cast<std::size_t>(chunks_), 0);
    block(BlockKind::kParamGathers, -1, 0, false);
    const auto m = static_cast<std::int32_t>(plan_.num_micro_batches());
    const std::int64_t p = plan_.pp;
    switch (plan_.schedule) {
      case Schedule::kGpipe:
        for (std::int32_t i = 0; i < m; ++i) block(BlockKind::kForward, i, 0, false);
        for (std::int32_t i = 0; i < m; ++i) block(BlockKind::kBackward, i, 0, i == m - 1);
        break;
      case Schedule::k1F1B:
      case Schedule::kInterleaved: {
        if (chunks_ == 1) {
          // Megatron's non-interleaved 1F1B: p − s − 1 warm-up forwards, then one forward and one
          // backward alternately, then the remaining backwards (Narayanan et al. 2021, Fig. 4).
          const auto warmup = static_cast<std::int32_t>(std::min<std::int64_t>(p - stage_ - 1, m));
          std::int32_t f = 0, b = 0;
          for (; f < warmup; ++f) block(BlockKind::kForward, f, 0, false);
          for (; f < m; ++f, ++b) {
            block(BlockKind::kForward, f, 0, false);
            block(BlockKind::kBackward, b, 0, b == m - 1);
          }
          for (; b < m; ++b) block(BlockKind::kBackward, b, 0, b == m - 1);
          break;
        }
        // Interleaved 1F1B (Megatron-LM schedules.py, forward_backward_pipelining_with_
        // interleaving): virtual micro-step k runs micro-batch (k / (p·v))·p + k mod p of model
        // chunk (k / p) mod v forward, and of chunk v − 1 − (k / p) mod v backward; rank s warms
        // up with 2(p − s − 1) + (v − 1)·p forward steps.
        const std::int64_t v = chunks_;
        const std::int64_t total = m * v;
        auto mb_of = [&](std::int64_t k) { return static_cast<std::int32_t>((k / (p * v)) * p + k % p); };
        auto chunk_of = [&](std::int64_t k, bool fwd) {
          const std::int64_t c = (k / p) % v;
          return fwd ? c : v - 1 - c;
        };
        const std::int64_t warmup = std::min(total, 2 * (p - stage_ - 1) + (v - 1) * p);
        std::int64_t f = 0, b = 0;
        auto run_backward = [&](std::int64_t k) {
          const std::int32_t mb = mb_of(k);
          block(BlockKind::kBackward, mb, chunk_of(k, false), mb == m - 1);
        };
        for (; f < warmup; ++f) block(BlockKind::kForward, mb_of(f), chunk_of(f, true), false);
        for (; f < total; ++f, ++b) {
          block(BlockKind::kForward, mb_of(f), chunk_of(f, true), false);
          run_backward(b);
        }
        for (; b < total; ++b) run_backward(b);
        break;
      }
    }
    block(BlockKind::kOptimizer, -1, 0, false);
    close_chain(open_.size());
  }

  const ir::ModelSpec& model_;
  const ParallelPlan& plan_;
  const LoweringOptions& options_;
  Layout layout_;
  std::vector<std::int64_t> vlayers_;  // layers per virtual stage
  std::vector<std::int64_t> vfirst_;   // first layer of each virtual stage
  std::int64_t chunks_;
  TaskGraph g_;
  std::map<std::tuple<unsigned, std::int32_t, std::vector<std::int32_t>>, std::int32_t> comm_index_;
  LayerLists lists_;
  std::int32_t emb_fwd_ = kNone, emb_bwd_ = kNone, head_fwd_ = kNone, head_bwd_ = kNone;
  Bytes act_bytes_;
  Bytes kv_bytes_;
  std::int64_t layer_params_ = 0;
  // Per-device lowering state.
  std::int32_t device_ = 0;
  std::int64_t rank_ = 0;
  std::vector<std::pair<unsigned, std::int32_t>> group_comm_;  // communicator of rank_'s group by axes mask
  struct P2pComm {
    std::int64_t src_stage = -1, dst_stage = -1;
    std::int32_t tag = 0;
    std::int32_t comm = -1;  // -1: not yet
  };
  std::array<P2pComm, kNumStreams> p2p_comm_{};  // rank_'s last point-to-point pair per stream
  // Coarse lowering: the open chain's steps, its first step's dependencies and handle number,
  // and by handle number the task a closed chain ends with (kNone for inner steps).
  std::vector<Task> open_;
  Deps open_deps_;
  std::int32_t open_first_ = 0;
  std::vector<std::int32_t> closed_;
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> chain_index_;  // by hash of steps
  std::int64_t stage_ = 0;
  std::int32_t last_backward_ = kNone;
  std::int32_t last_grad_reduce_ = kNone;
  std::int32_t prefetch_gate_ = kNone;
  std::int64_t bucket_params_ = 0;
  std::int32_t bucket_ready_ = kNone;
  std::vector<std::int32_t> param_ready_;
  std::vector<bool> first_forward_of_layer_;
  // Block programs (lower_blocks): the program, and per device the templates found so far and
  // which model chunks ran a forward.
  BlockProgram* program_ = nullptr;
  std::vector<std::vector<KnownBlock>> known_;  // by kind · chunks_ + chunk
  std::vector<bool> held_before_;  // while lowering a template: which registers held a task
  std::uint32_t read_ = 0;         // while lowering a template: the registers it read
  std::vector<char> forwarded_;
};

}  // namespace

TaskGraph lower(const ir::ModelSpec& model, const ParallelPlan& plan, const LoweringOptions& options,
                TaskGraph storage) {
  SIM_ASSERT(plan.num_micro_batches() > 0, "no micro-batches");
  return Lowerer(model, plan, options, std::move(storage)).run();
}

BlockProgram lower_blocks(const ir::ModelSpec& model, const ParallelPlan& plan, const LoweringOptions& options,
                          BlockProgram storage) {
  SIM_ASSERT(plan.num_micro_batches() > 0, "no micro-batches");
  TaskGraph graph = std::move(storage.graph);
  storage.graph = Lowerer(model, plan, options, std::move(graph), &storage).run();
  return storage;
}

}  // namespace ts::parallel
