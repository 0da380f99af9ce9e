#include "sim/parallel/lowering.h"

#include <algorithm>
#include <map>
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

std::vector<std::int64_t> stage_layers(const ParallelPlan& plan, const ir::ModelSpec& model) {
  if (!plan.pp_layers.empty()) return plan.pp_layers;
  return std::vector<std::int64_t>(static_cast<std::size_t>(plan.pp), model.num_layers / plan.pp);
}

std::int64_t stage_parameters(const ir::ModelSpec& model, const ParallelPlan& plan, std::int64_t stage) {
  const auto layers = stage_layers(plan, model);
  const std::int64_t h = model.hidden;
  std::int64_t n = layers[static_cast<std::size_t>(stage)] * ir::layer_parameter_count(model) / plan.tp;
  const std::int64_t vocab_shard = (model.vocab + plan.tp - 1) / plan.tp * h;
  const bool first = stage == 0;
  const bool last = stage == plan.pp - 1;
  if (first) {
    n += vocab_shard;
    if (model.position == ir::Position::kLearned) n += model.max_seq_len * h;
  }
  if (last) {
    n += (model.norm == ir::Norm::kLayerNorm ? 2 : 1) * h;
    // A tied LM head is a second copy of the embedding on the last stage when PP > 1 (Megatron
    // keeps both and all-reduces their gradients); untied heads are always separate.
    if (!model.tied_embeddings || !first) n += vocab_shard;
  }
  return n;
}

namespace {

// Builds the tasks of every simulated device, one device at a time, in program order.
class Lowerer {
 public:
  Lowerer(const ir::ModelSpec& model, const ParallelPlan& plan, const LoweringOptions& options)
      : model_(model), plan_(plan), options_(options), layout_(plan), layers_(stage_layers(plan, model)) {
    ir::LayerShape shape;
    shape.micro_batch = plan.micro_batch;
    shape.seq = plan.seq_len / plan.cp;
    shape.full_seq = plan.seq_len;
    shape.tp = plan.tp;
    shape.sequence_parallel = plan.sequence_parallel;
    shape.gemm_dtype = plan.dtype;
    const ir::LayerOps layer = ir::build_layer(model, shape);
    const ir::Block embedding = ir::build_embedding(model, shape);
    const ir::Block head = ir::build_lm_head(model, shape);
    attn_fwd_ = add_ops(layer.attention.forward);
    mlp_fwd_ = add_ops(layer.mlp.forward);
    mlp_bwd_ = add_ops(layer.mlp.backward);
    auto attn_bwd = layer.attention.backward;
    if (plan.recompute == Recompute::kSelective) {
      // Selective recompute (Korthikanti et al. 2022) reruns the attention core before its
      // backward; with flash attention this is the forward kernel.
      for (const auto& op : layer.attention.forward) {
        if (op.kind == ir::OpKind::kAttention) attn_bwd.insert(attn_bwd.begin(), op);
      }
    }
    attn_bwd_ = add_ops(attn_bwd);
    emb_fwd_ = add_ops(embedding.forward);
    emb_bwd_ = add_ops(embedding.backward);
    head_fwd_ = add_ops(head.forward);
    head_bwd_ = add_ops(head.backward);
    // One bf16 activation tensor of the micro-batch: what TP collectives and pipeline sends move.
    act_bytes_ = Bytes(plan.micro_batch * shape.seq * model.hidden * 2);
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
    for (std::size_t d = 0; d < g_.devices.size(); ++d) lower_device(static_cast<std::int32_t>(d));
    return std::move(g_);
  }

 private:
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

  std::int32_t communicator(std::vector<std::int32_t> ranks, unsigned axes) {
    auto key = std::make_pair(axes, ranks);
    auto it = comm_index_.find(key);
    if (it != comm_index_.end()) return it->second;
    const auto id = static_cast<std::int32_t>(g_.communicators.size());
    g_.communicators.push_back({axes, std::move(ranks)});
    comm_index_.emplace(std::move(key), id);
    return id;
  }

  // Appends a task depending on `deps` (task indices; negative entries are ignored).
  std::int32_t emit(Task t, std::initializer_list<std::int32_t> deps) {
    t.device = device_;
    t.dep_begin = static_cast<std::uint32_t>(g_.deps.size());
    for (std::int32_t d : deps) {
      if (d >= 0) g_.deps.push_back(static_cast<std::uint32_t>(d));
    }
    t.dep_count = static_cast<std::uint32_t>(g_.deps.size()) - t.dep_begin;
    g_.tasks.push_back(t);
    return static_cast<std::int32_t>(g_.tasks.size() - 1);
  }

  std::int32_t compute(std::int32_t ops, Pass pass, Part part, std::int32_t layer, std::int32_t mb,
                       std::int32_t dep, Bytes alloc = Bytes(), Bytes release = Bytes()) {
    Task t;
    t.kind = TaskKind::kCompute;
    t.stream = Stream::kCompute;
    t.pass = pass;
    t.part = part;
    t.layer = layer;
    t.micro_batch = mb;
    t.ops = ops;
    t.alloc_at_start = alloc;
    t.free_at_end = release;
    return emit(t, {dep});
  }

  std::int32_t collective(Stream stream, unsigned axes, CommOp op, Bytes bytes, Pass pass, Part part,
                          std::int32_t layer, std::int32_t mb, std::int32_t dep) {
    Task t;
    t.kind = TaskKind::kCollective;
    t.stream = stream;
    t.pass = pass;
    t.part = part;
    t.layer = layer;
    t.micro_batch = mb;
    t.comm = op;
    t.bytes = bytes;
    t.communicator = communicator(layout_.group(rank_, axes), axes);
    return emit(t, {dep});
  }

  std::int32_t p2p(Stream stream, std::int64_t src_stage, std::int64_t dst_stage, Pass pass,
                   std::int32_t mb, std::int32_t dep) {
    Coord src = layout_.coord(rank_);
    Coord dst = src;
    src[Axis::kPp] = src_stage;
    dst[Axis::kPp] = dst_stage;
    Task t;
    t.kind = TaskKind::kP2p;
    t.stream = stream;
    t.pass = pass;
    t.part = Part::kActivations;
    t.micro_batch = mb;
    t.comm = CommOp::kSendRecv;
    t.bytes = act_bytes_;
    t.communicator = communicator({static_cast<std::int32_t>(layout_.rank(src)),
                                   static_cast<std::int32_t>(layout_.rank(dst))},
                                  axis_bit(Axis::kPp));
    return emit(t, {dep});
  }

  // Tensor-parallel traffic after a block (forward) or its backward: one all-reduce of the block
  // output, or with sequence parallelism an all-gather before and a reduce-scatter after
  // (Korthikanti et al. 2022, Sec. 4.2.2); none when TP = 1.
  std::int32_t tp_before(Pass pass, Part part, std::int32_t layer, std::int32_t mb, std::int32_t dep) {
    if (plan_.tp == 1 || !plan_.sequence_parallel) return dep;
    const CommOp op = pass == Pass::kBackward ? CommOp::kReduceScatter : CommOp::kAllGather;
    return collective(Stream::kTpComm, axis_bit(Axis::kTp), op, act_bytes_, pass, part, layer, mb, dep);
  }
  std::int32_t tp_after(Pass pass, Part part, std::int32_t layer, std::int32_t mb, std::int32_t dep) {
    if (plan_.tp == 1) return dep;
    CommOp op = CommOp::kAllReduce;
    if (plan_.sequence_parallel) op = pass == Pass::kBackward ? CommOp::kAllGather : CommOp::kReduceScatter;
    return collective(Stream::kTpComm, axis_bit(Axis::kTp), op, act_bytes_, pass, part, layer, mb, dep);
  }

  // Context parallelism: keys and values of the whole sequence are gathered before attention and
  // their gradients reduce-scattered after its backward (all-gather CP, as in Llama 3).
  std::int32_t cp_kv(Pass pass, std::int32_t layer, std::int32_t mb, std::int32_t dep) {
    if (plan_.cp == 1) return dep;
    const std::int64_t kv_heads = std::max<std::int64_t>(1, model_.num_kv_heads / plan_.tp);
    const Bytes kv(plan_.micro_batch * plan_.seq_len * 2 * kv_heads * model_.head_dim() * 2);
    const CommOp op = pass == Pass::kBackward ? CommOp::kReduceScatter : CommOp::kAllGather;
    return collective(Stream::kCpComm, axis_bit(Axis::kCp), op, kv, pass, Part::kAttention, layer, mb, dep);
  }

  // One transformer layer forward (also used for full recompute); returns the last task.
  std::int32_t layer_forward(Pass pass, std::int32_t layer, std::int32_t mb, std::int32_t dep,
                             Bytes attn_alloc, Bytes mlp_alloc) {
    dep = tp_before(pass, Part::kAttention, layer, mb, dep);
    dep = cp_kv(pass, layer, mb, dep);
    dep = compute(attn_fwd_, pass, Part::kAttention, layer, mb, dep, attn_alloc);
    dep = tp_after(pass, Part::kAttention, layer, mb, dep);
    dep = tp_before(pass, Part::kMlp, layer, mb, dep);
    dep = compute(mlp_fwd_, pass, Part::kMlp, layer, mb, dep, mlp_alloc);
    return tp_after(pass, Part::kMlp, layer, mb, dep);
  }

  void forward(std::int32_t mb) {
    const std::int64_t s = stage_;
    std::int32_t dep = -1;
    if (s > 0) dep = p2p(Stream::kPpRecvPrev, s - 1, s, Pass::kForward, mb, -1);
    if (s == 0) dep = compute(emb_fwd_, Pass::kForward, Part::kEmbedding, -1, mb, dep);
    const bool full = plan_.recompute == Recompute::kFull;
    const Bytes half = Bytes(options_.layer_activation.count() / 2);
    for (std::int64_t l = first_layer_; l < first_layer_ + layers_[static_cast<std::size_t>(s)]; ++l) {
      const auto layer = static_cast<std::int32_t>(l);
      if (full) {
        dep = layer_forward(Pass::kForward, layer, mb, dep, options_.layer_input, Bytes());
      } else {
        dep = layer_forward(Pass::kForward, layer, mb, dep, half, options_.layer_activation - half);
      }
    }
    if (s == plan_.pp - 1) {
      compute(head_fwd_, Pass::kForward, Part::kLmHead, -1, mb, dep);
    } else {
      p2p(Stream::kPpSendNext, s, s + 1, Pass::kForward, mb, dep);
    }
  }

  void backward(std::int32_t mb) {
    const std::int64_t s = stage_;
    std::int32_t dep = -1;
    if (s == plan_.pp - 1) {
      dep = compute(head_bwd_, Pass::kBackward, Part::kLmHead, -1, mb, -1);
    } else {
      dep = p2p(Stream::kPpRecvNext, s + 1, s, Pass::kBackward, mb, -1);
    }
    const bool full = plan_.recompute == Recompute::kFull;
    const Bytes half = Bytes(options_.layer_activation.count() / 2);
    const Bytes other = options_.layer_activation - half;
    for (std::int64_t l = first_layer_ + layers_[static_cast<std::size_t>(s)] - 1; l >= first_layer_; --l) {
      const auto layer = static_cast<std::int32_t>(l);
      if (full) dep = layer_forward(Pass::kRecompute, layer, mb, dep, half, other);
      dep = tp_before(Pass::kBackward, Part::kMlp, layer, mb, dep);
      dep = compute(mlp_bwd_, Pass::kBackward, Part::kMlp, layer, mb, dep, Bytes(), other);
      dep = tp_after(Pass::kBackward, Part::kMlp, layer, mb, dep);
      dep = tp_before(Pass::kBackward, Part::kAttention, layer, mb, dep);
      const Bytes release = full ? half + options_.layer_input : half;
      dep = compute(attn_bwd_, Pass::kBackward, Part::kAttention, layer, mb, dep, Bytes(), release);
      dep = cp_kv(Pass::kBackward, layer, mb, dep);
      dep = tp_after(Pass::kBackward, Part::kAttention, layer, mb, dep);
    }
    if (s == 0) {
      dep = compute(emb_bwd_, Pass::kBackward, Part::kEmbedding, -1, mb, dep);
    } else {
      p2p(Stream::kPpSendPrev, s, s - 1, Pass::kBackward, mb, dep);
    }
    last_backward_ = dep;
  }

  // Gradient reduction over DP (× CP, whose ranks hold the same weights) and the optimizer step.
  void optimizer() {
    const std::int64_t params = stage_parameters(model_, plan_, stage_);
    const unsigned axes = axis_bit(Axis::kDp) | axis_bit(Axis::kCp);
    const std::int64_t replicas = plan_.dp * plan_.cp;
    const Bytes grads(params * options_.grad_reduce_bytes_per_param);
    std::int32_t dep = last_backward_;
    std::int64_t updated = params;
    if (replicas > 1) {
      if (plan_.zero_stage == 0) {
        dep = collective(Stream::kDpComm, axes, CommOp::kAllReduce, grads, Pass::kOptimizer,
                         Part::kGradients, -1, -1, dep);
      } else {
        // Distributed optimizer / ZeRO: reduce-scatter gradients, update the local shard, then
        // all-gather the updated bf16 parameters (Rajbhandari et al. 2020).
        dep = collective(Stream::kDpComm, axes, CommOp::kReduceScatter, grads, Pass::kOptimizer,
                         Part::kGradients, -1, -1, dep);
        updated = (params + replicas - 1) / replicas;
      }
    }
    ir::Op step;
    step.name = "adam_step";
    step.kind = ir::OpKind::kMemoryBound;
    step.moved = options_.optimizer_bytes_per_param * updated;
    dep = compute(add_ops({step}), Pass::kOptimizer, Part::kOptimizer, -1, -1, dep);
    if (replicas > 1 && plan_.zero_stage > 0) {
      collective(Stream::kDpComm, axes, CommOp::kAllGather, Bytes(params * 2), Pass::kOptimizer,
                 Part::kOptimizer, -1, -1, dep);
    }
  }

  void lower_device(std::int32_t d) {
    device_ = d;
    const SimDevice& dev = g_.devices[static_cast<std::size_t>(d)];
    rank_ = dev.rank;
    stage_ = dev.stage;
    first_layer_ = 0;
    for (std::int64_t s = 0; s < stage_; ++s) first_layer_ += layers_[static_cast<std::size_t>(s)];
    const auto m = static_cast<std::int32_t>(plan_.num_micro_batches());
    switch (plan_.schedule) {
      case Schedule::kGpipe:
        for (std::int32_t i = 0; i < m; ++i) forward(i);
        for (std::int32_t i = 0; i < m; ++i) backward(i);
        break;
      case Schedule::k1F1B:
      case Schedule::kInterleaved: {
        // Megatron's non-interleaved 1F1B: p − s − 1 warm-up forwards, then one forward and one
        // backward alternately, then the remaining backwards (Narayanan et al. 2021, Fig. 4).
        const auto warmup = static_cast<std::int32_t>(std::min<std::int64_t>(plan_.pp - stage_ - 1, m));
        std::int32_t f = 0, b = 0;
        for (; f < warmup; ++f) forward(f);
        for (; f < m; ++f, ++b) {
          forward(f);
          backward(b);
        }
        for (; b < m; ++b) backward(b);
        break;
      }
    }
    optimizer();
  }

  const ir::ModelSpec& model_;
  const ParallelPlan& plan_;
  const LoweringOptions& options_;
  Layout layout_;
  std::vector<std::int64_t> layers_;
  TaskGraph g_;
  std::map<std::pair<unsigned, std::vector<std::int32_t>>, std::int32_t> comm_index_;
  std::int32_t attn_fwd_ = -1, mlp_fwd_ = -1, attn_bwd_ = -1, mlp_bwd_ = -1;
  std::int32_t emb_fwd_ = -1, emb_bwd_ = -1, head_fwd_ = -1, head_bwd_ = -1;
  Bytes act_bytes_;
  std::int32_t device_ = 0;
  std::int64_t rank_ = 0;
  std::int64_t stage_ = 0;
  std::int64_t first_layer_ = 0;
  std::int32_t last_backward_ = -1;
};

}  // namespace

TaskGraph lower(const ir::ModelSpec& model, const ParallelPlan& plan, const LoweringOptions& options) {
  SIM_ASSERT(plan.num_micro_batches() > 0, "no micro-batches");
  return Lowerer(model, plan, options).run();
}

}  // namespace ts::parallel
