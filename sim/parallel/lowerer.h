// The lowering of one plan into per-device tasks (internal to sim/parallel): the Lowerer, defined
// in lowering.cpp (tasks, tensor and context parallelism, layers), lower_pipeline.cpp (pipeline
// blocks), lower_data_parallel.cpp (ZeRO, gradient buckets, optimizer) and lower_blocks.cpp
// (block templates and each device's program) and lower_experts.cpp (the MLP block: dense, or
// the mixture of experts with expert parallelism).
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "sim/base/diagnostic.h"
#include "sim/parallel/chains.h"
#include "sim/parallel/layer_lists.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/lowering.h"
#include "sim/parallel/schedule.h"

namespace ts::parallel::detail {

// Pass-through for optional dependencies: negative task ids are ignored by emit().
inline constexpr std::int32_t kNone = -1;
inline constexpr std::int32_t kTagActivations = 0;
inline constexpr std::int32_t kTagGradients = 1;

// Parameters of the input embedding and of the LM head (with the final norm) on one TP rank.
std::int64_t embedding_parameters(const ir::ModelSpec& model, const ParallelPlan& plan);
std::int64_t head_parameters(const ir::ModelSpec& model, const ParallelPlan& plan, bool shares_embedding);

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
        chains_(g_, program == nullptr),
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
    classify_virtual_stages();
    build_op_lists();
  }

  TaskGraph run();

 private:
  void build_op_lists() {
    lists_ = build_layer_lists(model_, plan_, g_.op_lists);
    // Sliding-window layers get their own attention lists (the same block with a banded core).
    if (model_.sliding_window > 0) {
      windowed_lists_ = build_layer_lists(model_, plan_, g_.op_lists, model_.sliding_window);
    }
    // One bf16 activation tensor of the micro-batch: what TP collectives and pipeline sends move.
    const std::int64_t seq = plan_.seq_len / plan_.cp;
    act_bytes_ = Bytes(plan_.micro_batch * seq * model_.hidden * 2);
    const std::int64_t kv_heads = std::max<std::int64_t>(1, model_.num_kv_heads / plan_.tp);
    kv_bytes_ = Bytes(plan_.micro_batch * seq * 2 * kv_heads * model_.head_dim() * 2);
    // What a multi-token-prediction module's input side keeps for its backward: the inputs of
    // its two norms (h each) and of its projection (2h), bf16, split over TP with sequence
    // parallelism.
    mtp_kept_ = act_bytes_ * 4 / (plan_.sequence_parallel ? plan_.tp : 1);
  }

  // Parameters of layer `layer` on this rank that the data-parallel ranks share (the routed
  // experts' are expert_params()).
  std::int64_t layer_params(std::int64_t layer) const { return layer_shared_parameters(model_, plan_, layer); }
  std::int64_t expert_params(std::int64_t layer) const {
    return ir::expert_parameter_count(model_, layer) / (plan_.ep * plan_.etp);
  }

  std::int32_t add_ops(std::vector<ir::Op> ops) {
    g_.op_lists.push_back(std::move(ops));
    return static_cast<std::int32_t>(g_.op_lists.size() - 1);
  }

  void add_device(std::int64_t rank, std::int64_t represents);

  std::int32_t communicator(std::vector<std::int32_t> ranks, unsigned axes, std::int32_t tag);

  // Appends a task depending on `deps` (task indices; negative entries are ignored). In coarse
  // mode compute tasks and tensor-parallel collectives become steps of chains (see Chain).
  std::int32_t emit(Task t, std::initializer_list<std::int32_t> deps);
  // A task id held for later use (in coarse mode a step handle must be resolved now).
  std::int32_t held(std::int32_t id) { return chains_.resolve(id); }
  Task& task_ref(std::int32_t id) { return chains_.task_ref(id); }
  void close_chain() { chains_.close(); }

  struct Label {
    Pass pass;
    Part part;
    std::int32_t layer;
    std::int32_t mb;
  };

  // A task of `kind` on `stream`, named by its label.
  static Task labelled(TaskKind kind, Stream stream, const Label& l) {
    Task t;
    t.kind = kind;
    t.stream = stream;
    t.pass = l.pass;
    t.part = l.part;
    t.layer = l.layer;
    t.micro_batch = l.mb;
    return t;
  }

  std::int32_t compute(std::int32_t ops, const Label& l, std::initializer_list<std::int32_t> deps,
                       Bytes alloc = Bytes(), Bytes release = Bytes()) {
    Task t = labelled(TaskKind::kCompute, Stream::kCompute, l);
    t.ops = ops;
    t.alloc_at_start = alloc;
    t.free_at_end = release;
    return emit(t, deps);
  }

  std::int32_t collective(Stream stream, unsigned axes, CommOp op, Bytes bytes, const Label& l,
                          std::initializer_list<std::int32_t> deps) {
    Task t = labelled(TaskKind::kCollective, stream, l);
    t.comm = op;
    t.bytes = bytes;
    t.communicator = group_communicator(axes);
    return emit(t, deps);
  }

  // The communicator of this rank's group along `axes`. The group is the same for every
  // collective of the device: look it up once (building and comparing groups of hundreds of
  // ranks dominated lowering). A device uses a handful of masks (TP, CP, DP × CP, hybrid
  // sharding's two cuts).
  std::int32_t group_communicator(unsigned axes) {
    const auto cached = std::find_if(group_comm_.begin(), group_comm_.end(),
                                     [axes](const auto& entry) { return entry.first == axes; });
    std::int32_t id;
    if (cached != group_comm_.end()) {
      id = cached->second;
    } else {
      id = communicator(layout_.group(rank_, axes), axes, 0);
      group_comm_.emplace_back(axes, id);
    }
    if (recording_) note_lookup({id, axes, false, Stream::kCompute, 0, 0, 0});
    return id;
  }

  // The communicator of the pair of stages that sends on `stream`. A device sends and receives
  // on each stream with one peer: look the pair's communicator up once per stream (building the
  // key and searching the map dominated lowering).
  std::int32_t pair_communicator(Stream stream, std::int64_t src_stage, std::int64_t dst_stage, std::int32_t tag) {
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
    if (recording_) note_lookup({cached.comm, axis_bit(Axis::kPp), true, stream, src_stage - stage_, dst_stage - stage_, tag});
    return cached.comm;
  }

  // One point-to-point transfer of a pipeline pair, on the stream of its direction and peer.
  std::int32_t p2p(Stream stream, std::int64_t src_stage, std::int64_t dst_stage, std::int32_t tag,
                   const Label& l, std::int32_t dep) {
    Task t;
    t.kind = TaskKind::kP2p;
    t.stream = stream;
    t.pass = l.pass;
    t.part = Part::kActivations;
    t.micro_batch = l.mb;
    t.comm = CommOp::kSendRecv;
    t.bytes = act_bytes_;
    t.communicator = pair_communicator(stream, src_stage, dst_stage, tag);
    return emit(t, {dep});
  }

  // Tensor-parallel traffic around a block: an all-reduce of its output, or with sequence
  // parallelism an all-gather before and a reduce-scatter after (Korthikanti et al. 2022,
  // Sec. 4.2.2; in backward the two swap); none when TP = 1.
  std::int32_t tp_before(const Label& l, std::int32_t dep);
  std::int32_t tp_after(const Label& l, std::int32_t dep);
  bool tp_sequence_parallel() const { return plan_.tp > 1 && plan_.sequence_parallel; }
  // A collective of `bytes` over the TP group on its stream, after `dep`, hidden by no GEMM.
  std::int32_t tp_collective(CommOp op, Bytes bytes, const Label& l, std::int32_t dep) {
    return collective(Stream::kTpComm, axis_bit(Axis::kTp), op, bytes, l, {dep});
  }
  // Marks a TP collective as overlapped with the GEMMs at that end of its block.
  std::int32_t hidden(std::int32_t task, const Label& l, bool after);

  std::int32_t cp_collective(CommOp op, Bytes bytes, const Label& l, std::int32_t dep) {
    return collective(Stream::kCpComm, axis_bit(Axis::kCp), op, bytes, l, {dep});
  }

  // The attention core under context parallelism (forward, recompute or backward).
  std::int32_t attention_core(const Label& l, std::int32_t dep);

  // The attention block forward (or recompute); returns its last task.
  std::int32_t attention_forward(const Label& l, std::int32_t dep, Bytes alloc, std::int32_t extra_dep);

  // A block's backward holds the gradients of the activations it consumes while it runs (about
  // as large as those activations) on top of what it releases at its end.
  std::int32_t attention_backward(const Label& l, std::int32_t dep, Bytes release, Bytes grads, bool split);

  // ZeRO-3 / FSDP: parameters are gathered before each layer's forward and backward (at most one
  // layer ahead of the compute) and gradients reduce-scattered after its backward.
  bool zero3() const { return plan_.zero_stage_in_effect() >= 3 && replicas() > 1; }
  std::int64_t replicas() const { return plan_.dp * plan_.cp; }
  unsigned dp_axes() const { return axis_bit(Axis::kDp) | axis_bit(Axis::kCp); }

  // ZeRO-3's groups: all data-parallel ranks, or with hybrid sharding (zero_shard_group) the
  // rank's shard group, whose gradient shards are then all-reduced across the replica group.
  unsigned shard_axes() const { return zero3_shard_axes(plan_); }
  // ZeRO-1/2: the updated shards are all-gathered after the step (or before the next forward with
  // overlap_param_gather), the shared parameters over DP × CP, the routed experts over expert-DP.
  bool gathers_shared_shards() const { return replicas() > 1 && plan_.zero_stage_in_effect() > 0 && !zero3(); }
  bool gathers_expert_shards() const {
    return plan_.expert_dp() > 1 && plan_.zero_stage_in_effect() > 0 && !zero3();
  }
  std::int64_t shard_replicas() const { return replicas() / plan_.zero_shards(); }

  // ZeRO-3: gathers layer l's shared parameters (returned) and then, on the same stream, its
  // routed experts (experts_gather_, for the experts' forward GEMMs; kNone without). A backward
  // needs both first (its MLP runs the shared and routed experts before the attention):
  // gather_whole_layer returns the later.
  std::int32_t gather_layer(const Label& l);
  std::int32_t gather_whole_layer(const Label& l) {
    const std::int32_t shared = gather_layer(l);
    return std::max(shared, experts_gather_);
  }

  // The MLP block of a layer, forward (or recompute) and backward: a dense MLP between its TP
  // collectives, or in an MoE layer the experts' strategy (lower_experts.cpp). `grads` and
  // `release`: what the backward allocates at its start and frees at its end.
  std::int32_t mlp_forward(const Label& l, std::int32_t dep, Bytes alloc);
  std::int32_t mlp_backward(const Label& l, std::int32_t dep, std::int32_t gathered, Bytes grads, Bytes release,
                            bool split);
  std::int32_t experts_forward(const Label& l, std::int32_t dep, Bytes alloc);
  std::int32_t experts_backward(const Label& l, std::int32_t dep, std::int32_t gathered, Bytes grads, Bytes release,
                                bool split);
  // An MoE block in the three pieces between its all-to-alls, so that the all-to-all overlap
  // can put another micro-batch's compute between them (experts_forward and experts_backward
  // run them in a row). Forward: the router and the dispatch; the shared and routed experts and
  // the combine; the unpermutation. Backward: the unpermutation's backward and the combine's;
  // the experts' backward and the dispatch's; the router's backward, which frees the block.
  struct ExpertsStep {
    std::int32_t side = kNone;  // the router's (forward) or unpermutation's (backward) output,
                                // then the shared experts'
    std::int32_t tokens = kNone;  // after the piece's all-to-all
  };
  ExpertsStep experts_dispatch(const Label& l, std::int32_t dep, Bytes alloc);
  ExpertsStep experts_compute(const Label& l, const ExpertsStep& s);
  std::int32_t experts_unpermute(const Label& l, const ExpertsStep& s);
  ExpertsStep experts_unpermute_backward(const Label& l, std::int32_t dep, std::int32_t gathered, Bytes grads);
  ExpertsStep experts_compute_backward(const Label& l, const ExpertsStep& s, bool split);
  std::int32_t experts_router_backward(const Label& l, const ExpertsStep& s, Bytes release, bool split);
  // A token all-to-all over the EP group (dispatch or combine, or their backward), and the ETP
  // group's gather or scatter of the dispatched tokens; `dep` when the group has one rank.
  std::int32_t ep_all_to_all(const Label& l, std::int32_t dep);
  std::int32_t etp_collective(CommOp op, const Label& l, std::int32_t dep);
  // The op lists of the attention block of `layer`: banded where the layer has a window.
  const LayerLists& attn_lists(std::int64_t layer) const {
    return model_.attention_window(layer) > 0 ? windowed_lists_ : lists_;
  }
  // A split backward's weight gradients of the MLP block of `layer`, and what they keep.
  std::int32_t mlp_weight_list(std::int64_t layer) const {
    return model_.is_moe_layer(layer) ? lists_.moe.w : lists_.mlp_w;
  }
  Bytes mlp_weight_held(std::int64_t layer) const {
    return model_.is_moe_layer(layer) ? lists_.moe.w_held : lists_.w_held_mlp;
  }
  // The gradients of layer `layer` became ready (last micro-batch): its data-parallel share
  // joins the buckets, and its routed experts' gradients are reduced over the expert-DP ranks.
  void layer_gradients_ready(std::int64_t layer, std::int32_t ready);
  void reduce_expert_gradients(const Label& grads, std::int32_t dep);

  // One transformer layer forward (also used for full recompute); returns the last task.
  std::int32_t layer_forward(const Label& l, std::int32_t dep, Bytes attn_alloc, Bytes mlp_alloc);
  // Its attention block, with the parameters it waits for.
  std::int32_t layer_attention(const Label& l, std::int32_t dep, Bytes attn_alloc);

  struct BackwardMemory {
    Bytes mlp_release, attn_release;  // activations freed at the end of each block's backward
    Bytes mlp_grads, attn_grads;      // activation gradients live during each block's backward
    Bytes remat_attn, remat_mlp;      // what full recompute's forward allocates in each block
  };

  // Whether layer `layer` is one of a mixture of experts' dense layers (its memory is
  // LoweringOptions' dense_layer_*).
  bool dense_in_moe(std::int64_t layer) const { return model_.moe && !model_.is_moe_layer(layer); }
  // What layer `layer`'s forward keeps: under full recompute (`full`) its input, else all the
  // plan's recompute mode leaves (with recompute of only some layers, everything).
  Bytes layer_kept(std::int64_t layer, bool full) const {
    const bool dense = dense_in_moe(layer);
    if (full || plan_.recompute != Recompute::kFull) return dense ? options_.dense_layer_kept : options_.layer_kept;
    return dense ? options_.dense_layer_kept_whole : options_.layer_kept_whole;
  }

  // Backward releases what the forward kept; full recompute (`full`) first rebuilds the
  // activations (half per block), which the backward then releases with the kept input.
  BackwardMemory backward_memory(std::int64_t layer, bool full) const;

  // A layer's backward; with `split`, its input gradients only (weight_gradients() runs the
  // rest), which leave the weight gradients' inputs to their block.
  std::int32_t layer_backward(const Label& l, std::int32_t dep, const BackwardMemory& mem, bool split);

  // Gradients of `params` parameters reduced by `op` over the shard group after `dep` (an
  // all-reduce over every data-parallel rank without ZeRO); with hybrid shard groups, the shards
  // then all-reduced across the groups on the replicas' stream. Returns the last collective.
  std::int32_t reduce_gradients(std::int64_t params, CommOp op, const Label& grads, std::int32_t dep);
  // ZeRO-3: the layer's gradients reduce-scattered (and with hybrid sharding all-reduced across
  // the replicas) once computed.
  void reduce_layer_gradients(const Label& grads, std::int32_t dep);

  // Gradients of `params` parameters became ready at task `ready` (last micro-batch only): they
  // join the current bucket, which is reduced once full (Megatron-Core DDP, PyTorch DDP).
  void gradients_ready(std::int64_t params, std::int32_t ready, bool last_of_iteration);
  void flush_bucket();

  std::int64_t vstage(std::int64_t chunk) const { return plan_.virtual_stage(stage_, chunk); }
  std::int64_t last_vstage() const { return plan_.pp * chunks_ - 1; }
  // Pipeline neighbours of virtual stage `vs`: the ranks that hold vs − 1 and vs + 1.
  std::int64_t stage_before(std::int64_t vs) const { return plan_.stage_of(vs - 1); }
  std::int64_t stage_after(std::int64_t vs) const { return plan_.stage_of(vs + 1); }
  // The second leg of a V runs back up the ranks, on streams of its own (see Stream).
  bool upward(std::int64_t chunk) const { return plan_.v_shape() && chunk == 1; }

  // A forward or backward of one micro-batch on one model chunk, lowered a piece at a time (its
  // start, its layers, its end) so that two of them can interleave (overlapped()).
  struct Run {
    std::int32_t mb;
    std::int64_t chunk, vs, first, layers, recomputed;
    bool last_micro_batch = false;
    bool split = false;  // backward: input gradients only (the W block follows separately)
    std::int32_t dep = kNone;
  };
  // Layers of virtual stage `vs` as its runs lower them: its transformer layers, and on the last
  // one the multi-token-prediction modules' layers after them (stage_layer_indices).
  std::int64_t chunk_layers(std::int64_t vs) const {
    return vlayers_[static_cast<std::size_t>(vs)] + (vs == last_vstage() ? model_.mtp_layers : 0);
  }
  std::int64_t all_layers() const { return model_.num_layers + model_.mtp_layers; }
  // Whether layer `layer` is a multi-token-prediction module's.
  bool mtp_layer(std::int64_t layer) const { return layer >= model_.num_layers; }
  Run start_run(std::int32_t mb, std::int64_t chunk) const {
    const std::int64_t vs = vstage(chunk);
    const std::int64_t layers = chunk_layers(vs);
    return {mb, chunk, vs, vfirst_[static_cast<std::size_t>(vs)], layers, plan_.recomputed_layers(layers)};
  }

  Run forward_begin(std::int32_t mb, std::int64_t chunk);
  // The attention and MLP blocks each allocate half of what the layer keeps; under full
  // recompute the layer keeps only its input, allocated with the attention block.
  void forward_layer(Run& r, std::int64_t i);
  void forward_end(Run& r);
  void forward(std::int32_t mb, std::int64_t chunk);
  // A multi-token-prediction module's pieces around its layer (nothing for the model's own
  // layers): forward, its input side before the layer and its own LM head and loss on the
  // model's head weights after it (Megatron-Core MultiTokenPredictionLayer; the logits stay for
  // the backward, as the main head's do); backward, the head's before the layer's and the input
  // side's after it.
  void mtp_input_forward(Run& r, std::int32_t layer);
  void mtp_head_forward(Run& r, std::int32_t layer);
  void mtp_head_backward(Run& r, std::int32_t layer);
  void mtp_input_backward(Run& r, std::int32_t layer);

  Run backward_begin(std::int32_t mb, std::int64_t chunk, bool last_micro_batch, bool split);
  // Layers run in reverse: piece i is layer layers − 1 − i.
  void backward_layer(Run& r, std::int64_t piece);
  void backward_end(Run& r);
  void backward(std::int32_t mb, std::int64_t chunk, bool last_micro_batch, bool split);

  // Whether an overlapped pair's backward piece `piece` and forward layer `i` interleave at
  // their all-to-alls: under --moe-a2a-overlap, both MoE layers (an MTP module's too), neither
  // recomputed in full.
  bool a2a_overlapped(const Run& b, std::int64_t piece, const Run& f, std::int64_t i) const {
    if (!plan_.moe_a2a_overlap || piece >= b.layers || i >= f.layers) return false;
    const std::int64_t bi = b.layers - 1 - piece;
    return bi >= b.recomputed && i >= f.recomputed && model_.is_moe_layer(b.first + bi) &&
           model_.is_moe_layer(f.first + i);
  }
  // The two layers so interleaved (Megatron-Core TransformerLayerSchedulePlan.run,
  // megatron/core/models/common/model_chunk_schedule_plan.py; DeepSeek-V3's overlapped chunk
  // pairs, arXiv 2412.19437 sec. 3.2.1), in program order on each stream:
  //   EP stream:      B combine-bwd | F dispatch, B dispatch-bwd         | F combine
  //   compute stream: F attention   | B experts-bwd, F experts           | B attention-bwd
  // (the unpermutation's backward before, its forward after, the router with the attention),
  // each all-to-all beside the other micro-batch's compute.
  void a2a_overlapped_layers(Run& b, std::int64_t piece, Run& f, std::int64_t i);

  // The weight gradients of one micro-batch on one model chunk (after its input-gradient block,
  // which ran the rest of the backward): each layer's, in backward order, each releasing what
  // the input-gradient block left for it. The layers' gradients become ready for the
  // data-parallel reduction here.
  void weight_gradients(std::int32_t mb, std::int64_t chunk, bool last_micro_batch);

  // DualPipeV's overlapped forward and backward of two micro-batches (deepseek-ai/DualPipe
  // dualpipev.py, _forward_backward_chunk): the pair starts once both inputs are there (its
  // first task waits for both receives, as dualpipev.py waits for all its receives), then their
  // layers alternate on the compute stream, the backward's first, so that each one's
  // tensor-parallel and pipeline traffic runs beside the other's compute.
  void overlapped(std::int32_t f_mb, std::int64_t f_chunk, std::int32_t b_mb, std::int64_t b_chunk,
                  bool last_micro_batch, bool split) {
    Run f = start_run(f_mb, f_chunk);
    if (f.vs > 0 && stage_before(f.vs) != stage_) {
      // The forward's input, received first: the backward's first task waits for it too.
      f.dep = p2p(upward(f_chunk) ? Stream::kPpVRecvNext : Stream::kPpRecvPrev, stage_before(f.vs), stage_,
                  kTagActivations, {Pass::kForward, Part::kActivations, -1, f_mb}, kNone);
      join_ = f.dep;
    }
    Run b = backward_begin(b_mb, b_chunk, last_micro_batch, split);
    if (f.vs == 0) f.dep = compute(lists_.emb_fwd, {Pass::kForward, Part::kEmbedding, -1, f_mb}, {f.dep});
    for (std::int64_t i = 0; i < std::max(f.layers, b.layers); ++i) {
      if (a2a_overlapped(b, i, f, i)) {
        a2a_overlapped_layers(b, i, f, i);
        continue;
      }
      if (i < b.layers) backward_layer(b, i);
      if (i < f.layers) forward_layer(f, i);
    }
    SIM_ASSERT(join_ == kNone, "an overlapped block's inputs joined no task");
    backward_end(b);
    forward_end(f);
  }

  // Remaining gradient reduction and the optimizer step; without overlap, the updated
  // parameters' all-gather (ZeRO ≥ 1) follows the step.
  void optimizer();

  // With ZeRO 1/2 and overlapped parameter gathering, the previous step's all-gather runs in
  // buckets at the start of the iteration and each layer's first forward waits for its bucket.
  void param_gathers();

  // The lowering state that blocks read besides the registers (see BlockProgram).
  // kOverlapped: DualPipeV's forward and backward of two micro-batches as one block (its
  // chunk: forward chunk · chunks_ + backward chunk).
  enum class BlockKind : std::uint8_t {
    kParamGathers,
    kForward,
    kBackward,
    kInputGrad,
    kWeightGrad,
    kOverlapped,
    kOverlappedSplit,
    kOptimizer
  };
  static constexpr std::size_t kBlockKinds = 8;
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
  // Templates shared across devices (LoweringOptions::share_templates). All that lowering a
  // pipeline block reads of its device, besides the lowering state that KnownBlock covers, is
  // its model chunks' virtual stages: where they sit (holding the embedding or the LM head, the
  // stages of their neighbours) and their layers (how many, and per layer: MoE or dense MLP,
  // banded attention or not, parameters shared by the data-parallel ranks and routed experts'
  // parameters; see classify_virtual_stages). Two devices whose chunks agree in these relative
  // to each device lower the block alike up to the layers' indices, the communicators and the
  // micro-batches: the later copies the earlier's template (copy_template).
  static constexpr std::int64_t kNoPeer = std::numeric_limits<std::int64_t>::min();
  struct ChunkView {
    std::int32_t layers_class = 0;  // vs_class_ of its virtual stage
    bool embedding = false;         // virtual stage 0
    bool head = false;              // the last virtual stage
    // The stages of the virtual stages before and after it, less the device's stage; kNoPeer
    // at either end.
    std::int64_t before = kNoPeer, after = kNoPeer;
    bool operator==(const ChunkView&) const = default;
  };
  // A communicator a template's lowering looked up, as the device's role: its group along
  // `axes`, or (`pair`) the pair of stages src and dst (less the device's stage) on `stream`.
  struct CommLookup {
    std::int32_t comm;
    unsigned axes;
    bool pair;
    Stream stream;
    std::int64_t src, dst;
    std::int32_t tag;
  };
  // A template lowered on one device that others may copy: its KnownBlock, the views of the
  // forward and backward model chunks it lowered (one chunk twice unless overlapped), their
  // first layers and layer counts, its first block's micro-batches, and the communicators it looked up
  // (lookups_[lookup_begin, lookup_begin + lookup_count), in the order of their first lookup).
  struct SharedBlock {
    KnownBlock known;
    std::array<ChunkView, 2> views;
    std::array<std::int64_t, 2> first_layer;
    std::array<std::int64_t, 2> layers;
    std::int32_t mb, mb2;
    std::uint32_t lookup_begin, lookup_count;
  };
  // Whether a block of `key`, with the registers `holds` holds a task in (holding(false)), is
  // an instance of `known`: the same key, and the registers its lowering read held alike.
  bool instance_of(const KnownBlock& known, const BlockKey& key, std::uint32_t holds) const;
  void classify_virtual_stages();
  // The forward and backward model chunks of a block (the same chunk unless overlapped).
  std::array<std::int64_t, 2> block_chunks(BlockKind kind, std::int64_t chunk) const;
  void note_lookup(const CommLookup& lookup);
  // The shared template this device's block (its key and chunks) may copy, or null.
  const SharedBlock* find_shared(const BlockKey& key, std::uint32_t holds, const std::array<std::int64_t, 2>& chunks,
                                 bool one_micro_batch);
  // Appends the copy of `s`'s template for this device, leaving the lowering's state as lowering
  // the block would have (registers, bucket, first forwards, communicators).
  void copy_template(const SharedBlock& s, const std::array<std::int64_t, 2>& chunks, std::int32_t mb,
                     std::int32_t mb2);

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
  // Calls f(r, register r) for the registers below `registers`, in order.
  template <class F>
  void each_register(std::int32_t registers, F f) {
    for (std::int32_t r = 0; r < std::min(registers, kFirstParamRegister); ++r) f(r, reg(r));
    for (std::int32_t r = kFirstParamRegister; r < registers; ++r) {
      f(r, param_ready_[static_cast<std::size_t>(r - kFirstParamRegister)]);
    }
  }
  // A register mask: one bit per register below kFirstParamRegister, one for the parameter
  // gathers' (all held or none: the gathers' block sets them all).
  static std::uint32_t register_bit(std::int32_t r) { return 1u << std::min(r, kFirstParamRegister); }
  // Which registers hold a task; the parameter gathers' bit only `with_params` (it takes a scan
  // of the layers, and only a chunk's first forward reads those registers).
  std::uint32_t holding(bool with_params) const;
  // A register as the block being lowered reads it (recorded for its template's KnownBlock).
  std::int32_t read(std::int32_t r) {
    read_ |= register_bit(r);
    return reg(r);
  }

  // `mb2`: the backward's micro-batch of an overlapped block.
  void run_block(BlockKind kind, std::int32_t mb, std::int64_t chunk, bool last, std::int32_t mb2);

  // Lowers one block of the device's program: into the graph, or with a program, as an instance
  // of the template of the blocks that lower alike (lowered now if this is the first).
  void block(BlockKind kind, std::int32_t mb, std::int64_t chunk, bool last, std::int32_t mb2 = -1);

  void lower_device(std::int32_t d);

  // One block of the device's program as block() takes it.
  struct BlockCall {
    BlockKind kind;
    std::int32_t mb;
    std::int64_t chunk;
    bool last;
    std::int32_t mb2;
    // Lowers alike from the same state (the micro-batches aside).
    bool same_step(const BlockCall& o) const { return kind == o.kind && chunk == o.chunk && last == o.last; }
  };
  // What an instance of a known template reads and writes of the lowering's state (see block()).
  struct KnownState {
    std::int64_t bucket;
    std::array<std::int32_t, kFirstParamRegister> registers;
    std::vector<std::int32_t> params;
    std::vector<char> forwarded;
  };
  std::array<std::int32_t, kFirstParamRegister> block_registers() const;
  void save_known_state(KnownState& out) const;
  bool in_known_state(const KnownState& s) const;
  // A stretch of calls_ in which each call lowers alike the one `period` before it (from
  // begin + period on).
  struct CallRun {
    std::size_t begin = 0, period = 0, end = 0;
  };
  // Appends to call_runs_ the runs of calls_[lo, hi), in order: the run through the middle
  // (that of the shortest period covering half the stretch, else the longest found), then
  // those before and after it.
  void find_call_runs(std::size_t lo, std::size_t hi);
  // Lowers calls_ in order: with a program, in each run (find_call_runs) one period after
  // another until one finds known templates only and leaves the state as it found it; the
  // run's next periods then repeat its templates without being lowered.
  void lower_calls();

  const ir::ModelSpec& model_;
  const ParallelPlan& plan_;
  const LoweringOptions& options_;
  Layout layout_;
  std::vector<std::int64_t> vlayers_;  // layers per virtual stage
  std::vector<std::int64_t> vfirst_;   // first layer of each virtual stage
  std::int64_t chunks_;
  TaskGraph g_;
  ChainBuilder chains_;  // appends to g_
  std::map<std::tuple<unsigned, std::int32_t, std::vector<std::int32_t>>, std::int32_t> comm_index_;
  LayerLists lists_;
  LayerLists windowed_lists_;  // sliding-window layers' attention (ModelSpec::attention_window)
  Bytes act_bytes_;
  Bytes kv_bytes_;
  Bytes mtp_kept_;
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
  std::int64_t stage_ = 0;
  std::int32_t last_backward_ = kNone;
  std::int32_t last_grad_reduce_ = kNone;
  std::int32_t prefetch_gate_ = kNone;
  std::int32_t experts_gather_ = kNone;  // the last gather_layer's experts gather
  std::int64_t bucket_params_ = 0;
  std::int32_t bucket_ready_ = kNone;
  std::vector<std::int32_t> param_ready_;
  std::vector<bool> first_forward_of_layer_;
  std::vector<std::int64_t> last_gradient_block_;  // by chunk: index into the device's pipeline blocks
  std::int32_t join_ = kNone;  // an overlapped block's forward input, for the block's first task
  // Block programs (lower_blocks): the program, and per device the templates found so far and
  // which model chunks ran a forward.
  BlockProgram* program_ = nullptr;
  std::vector<std::vector<KnownBlock>> known_;  // by kind · chunks_ + chunk
  std::vector<char> held_before_;  // while lowering a template: which registers held a task
  std::uint32_t read_ = 0;         // while lowering a template: the registers it read
  std::vector<char> forwarded_;
  std::vector<PipelineBlock> pipeline_;  // the device's pipeline schedule (lower_device)
  std::vector<BlockCall> calls_;         // its blocks as block() takes them
  std::vector<CallRun> call_runs_;
  KnownState period_start_;       // lower_calls: the state a period started from
  // Shared templates (share_templates): the virtual stages' classes, the device's chunks as
  // seen from it, by kind · chunks_ + chunk the templates others may copy, the communicators
  // they looked up, and while lowering one, whether its lookups are recorded.
  std::vector<std::int32_t> vs_class_;
  std::vector<ChunkView> views_;
  std::vector<std::vector<SharedBlock>> shared_;
  std::vector<CommLookup> lookups_;
  std::uint32_t lookup_begin_ = 0;
  bool recording_ = false;
  std::vector<std::int32_t> comm_map_;  // copy_template: by the source's communicator, its own (-1: none)
};

}  // namespace ts::parallel::detail
