// Lower bound on a plan's iteration time: the compute of its layers at calibrated speed (with
// the tensor-parallel collectives that compute waits for) and the pipeline's fill and drain.
//
// Why it is a lower bound. simulate() reports the end of the replay plus the compute the last
// device loses to communication (≥ 0). In the replay, each simulated device runs its compute
// tasks one at a time on its compute stream, each for op_list_time() of its ops under the plan's
// compute model, and a task starts only after the tasks it depends on end. Let v = 0 … V − 1 be
// the virtual pipeline stages (V = pp · model chunks) and m the micro-batches. A micro-batch's
// forward through stage v is a chain of dependent compute tasks (embedding, layers in order, LM
// head) taking at least F_v = L_v·f (+ the embedding's forward on v = 0, + the head's on
// v = V − 1), f the least forward compute of one layer and micro-batch; its backward at least
// B_v (everything of the backward: backward pass, recompute, weight gradients), of which C_v is
// the backward pass proper, the chain that the gradient sent to stage v − 1 waits for. For the
// device d holding stages S_d (its lowest is d, chunk 0: ParallelPlan::virtual_stage):
//   - start: every compute task of d belongs to a micro-batch k at a stage v ≥ d and waits for
//     k's forward through stages 0 … d − 1, so none starts before Σ_{v<d} F_v;
//   - work: d then runs W_d = m · Σ_{v∈S_d} (F_v + B_v) of compute, one task at a time;
//   - drain (schedules without a split backward): a forward of (k, v) is followed on d by its
//     recompute and backward, so the last compute task of d to end is the backward of some
//     (k, v ≥ d); k's gradient then goes through the backward passes of stages v − 1 … 0, each
//     waiting for the one before: at least Σ_{v'<d} C_{v'} more. With a split backward (ZB-H1,
//     DualPipeV, ZB-V) the last task may be a weight gradient that nothing waits for: no drain.
// Tensor- and context-parallel collectives count as well, except under DualPipeV and the MoE
// all-to-all overlap (which overlap one micro-batch's communication with another's compute): one
// that waits for the compute task before it on its device and that the compute task after it
// waits for keeps the compute stream idle while it runs (serial_time below: TP's gathers and
// reductions, CP's all-gather, reduce-scatter and all-to-all), so it lengthens F_v, B_v and C_v
// like compute; so do ring attention's KV shifts where they outlast the blocks they run beside
// (the compute stream runs in program order, so a block waiting for its shift leaves it idle).
// Each is costed for its group alone, which concurrent groups sharing links can only slow (the
// sample's group: the first ranks, as the real plan's groups are with the tensor axis innermost;
// with another rank order the real groups are spread wider, not narrower).
// So the iteration lasts at least max_d (Σ_{v<d} F_v + W_d + drain_d).
// ZeRO-3 (zero3_stream): the first rank's data-parallel stream runs its collectives one at a
// time in program order, and for each micro-batch and each layer of the rank it runs at least
// the layer's parameter all-gathers before its forward and its backward and the reduce-scatter
// of its gradients (parallel::layer_shared_parameters; lowering.cpp layer_attention,
// layer_backward, weight_gradients; a recompute gathers once more). Each is costed for the
// rank's group alone, as above. The iteration lasts at least their sum as well.
// Dropped, each only lengthening the real iteration: the other communication (pipeline and data
// parallel, tensor- and context-parallel collectives not between two dependent compute tasks,
// the contention of concurrent groups), the compute of the optimizer step and of anything outside the
// layers, embedding and head, the slowdown of compute under communication, idle time of d
// beyond the fill and drain, and the difference between a layer's or micro-batch's compute and
// the least one (f, b and c are minima over the layers and micro-batches of a lowered sample).
// The sample: the plan with pp = 1 and dp = 1 (ZeRO off; with experts, the fewest data-parallel
// ranks that hold ep·etp) over 3 micro-batches (the first and last may differ: FP8 weight casts,
// gradient hooks) and a model cut to 2 layers (or one more than the recomputed layers of a
// chunk, so that a layer without recompute is among them; one more again, an MoE one, for a
// mixture of experts whose first layers are dense: sample_model): neither the pipeline nor data
// parallelism changes a layer's kernels, which depend on the micro-batch shape alone (tp, cp,
// ep, etp, sequence parallelism, recompute, micro-batch, sequence, precision, kernels).
// tests/unit/driver/sweep_prune_test.cpp checks the bound against the replay of every plan of
// several sweeps.
#include "sim/driver/plan_bound.h"

#include <algorithm>
#include <array>
#include <limits>
#include <numeric>
#include <optional>

#include "sim/base/hash.h"
#include "sim/driver/simulate.h"
#include "sim/memory/transients.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/lowering.h"
#include "sim/parallel/schedule.h"
#include "sim/runtime/executor.h"

namespace ts::driver {
namespace {

constexpr std::int64_t kSampleMicroBatches = 3;

// Schedules that run a forward beside another micro-batch's backward (DualPipeV's F&B, the MoE
// all-to-all overlap): communication may hide behind the other's compute, and the backward may
// free activations while the forward allocates.
bool overlaps_pairs(const parallel::ParallelPlan& plan) {
  return plan.schedule == parallel::Schedule::kDualPipeV || plan.moe_a2a_overlap;
}

// The plan whose lowering samples the compute of `plan`'s micro-batches (see above).
parallel::ParallelPlan sample_plan(const parallel::ParallelPlan& plan) {
  parallel::ParallelPlan s = plan;
  s.pp = 1;
  s.vpp = 1;
  s.pp_layers.clear();
  s.pp_layout.clear();
  s.schedule = parallel::Schedule::k1F1B;
  // The fewest data-parallel ranks that hold the expert grid (ep·etp must divide tp·cp·dp): 1
  // for a dense model; data parallelism changes no layer's kernels, only gradient reductions.
  s.dp = plan.ep * plan.etp / std::gcd(plan.tp * plan.cp, plan.ep * plan.etp);
  s.zero_stage = 0;
  s.zero_shard_group = 0;
  // The all-to-all overlap reorders a plan's tasks, not their kernels.
  s.moe_a2a_overlap = false;
  s.global_batch = kSampleMicroBatches * s.micro_batch * s.dp;
  return s;
}

// The model cut to the layers the sample lowers: 2 (or one more than the recomputed layers of a
// chunk, so that a layer without recompute is among them). A mixture of experts whose first
// layers keep a dense MLP (DeepSeek-V3, Kimi-K2) keeps one layer more, a dense one and an MoE
// one past the recomputed layers: the least layer is then no more than the least of either kind
// (recompute only adds work), whichever kinds a stage of the real plan holds.
ir::ModelSpec sample_model(const ir::ModelSpec& full, const parallel::ParallelPlan& plan) {
  ir::ModelSpec model = full;
  // Multi-token-prediction modules only lengthen the last virtual stage: a lower bound leaves
  // them out.
  model.mtp_layers = 0;
  const std::int64_t keep = plan.recompute_layers > 0 ? plan.recompute_layers + 1 : 2;
  const bool mixed =
      model.moe && model.moe->dense_layers > 0 && model.moe->dense_layers < model.num_layers;
  if (mixed && model.num_layers > keep) {
    // Layers 0 … keep − 1 dense (keep − 1 without recompute), layer keep a mixture of experts.
    model.num_layers = keep + 1;
    model.moe->dense_layers = keep;
  } else {
    model.num_layers = std::min(model.num_layers, keep);
  }
  return model;
}

std::uint64_t hash_plan(const parallel::ParallelPlan& p) {
  std::uint64_t h = kFnvOffset;
  for (std::int64_t v :
       {p.tp, p.cp, p.micro_batch, p.mst_chunks, p.seq_len, p.recompute_layers,
        static_cast<std::int64_t>(p.recompute), static_cast<std::int64_t>(p.cp_algo),
        static_cast<std::int64_t>(p.sequence_parallel), static_cast<std::int64_t>(p.dtype),
        static_cast<std::int64_t>(p.tp_comm_overlap)}) {
    h = fnv_mix(h, static_cast<std::uint64_t>(v));
  }
  return h;
}

network::CollectiveOp network_op(parallel::CommOp op) {
  switch (op) {
    case parallel::CommOp::kAllReduce:
      return network::CollectiveOp::kAllReduce;
    case parallel::CommOp::kAllGather:
      return network::CollectiveOp::kAllGather;
    case parallel::CommOp::kReduceScatter:
      return network::CollectiveOp::kReduceScatter;
    case parallel::CommOp::kAllToAll:
      return network::CollectiveOp::kAllToAll;
    case parallel::CommOp::kSendRecv:
      return network::CollectiveOp::kSendRecv;
  }
  return network::CollectiveOp::kAllReduce;
}

Duration min_of(const std::vector<Duration>& v) {
  Duration m = v.empty() ? Duration() : v.front();
  for (const Duration d : v) m = std::min(m, d);
  return m;
}

}  // namespace

PlanBounder::PlanBounder(ir::ModelSpec model, config::Cluster cluster, std::int64_t num_gpus,
                         std::shared_ptr<config::ComputeModelCache> cache)
    : resources_(std::move(cache)) {
  scenario_.model = std::move(model);
  scenario_.cluster = std::move(cluster);
  scenario_.num_gpus = static_cast<std::int32_t>(num_gpus);
}

const PlanCompute& PlanBounder::compute(const parallel::ParallelPlan& plan) {
  const parallel::ParallelPlan sample = sample_plan(plan);
  // DualPipeV and the MoE all-to-all overlap run one micro-batch's communication beside another's
  // compute: compute only.
  const std::size_t variant = overlaps_pairs(plan) ? 0 : 1;
  auto& bucket = memo_[hash_plan(sample)];
  for (const auto& [p, c] : bucket) {
    if (p == sample) return c[variant];
  }
  const ir::ModelSpec model = sample_model(scenario_.model, plan);
  parallel::LoweringOptions lo;  // memory sizes do not change the kernels
  const parallel::TaskGraph g = parallel::lower(model, sample, lo);
  const compute::ComputeModel& cm = resources_.compute(scenario_.cluster.gpu, sample);
  const network::NetworkModel& net = resources_.network(scenario_.cluster, scenario_.num_gpus);
  const auto layers = static_cast<std::size_t>(model.num_layers);
  const auto mbs = static_cast<std::size_t>(kSampleMicroBatches);
  const auto op_time = [&](std::int32_t list) {
    return runtime::op_list_time(cm, g.op_lists[static_cast<std::size_t>(list)]);
  };
  const auto depends = [&](const parallel::Task& t, std::size_t on) {
    for (std::uint32_t k = 0; k < t.dep_count; ++k) {
      if (g.deps[t.dep_begin + k] == on) return true;
    }
    return false;
  };
  // The next compute task of task i's device after it (program order), or g.tasks.size().
  const auto next_compute = [&](std::size_t i) {
    std::size_t next = i + 1;
    while (next < g.tasks.size() && !(g.tasks[next].kind == parallel::TaskKind::kCompute &&
                                      g.tasks[next].device == g.tasks[i].device))
      ++next;
    return next;
  };
  // A tensor- or context-parallel collective of its axis alone (TP on its stream; CP's
  // all-gather, reduce-scatter and all-to-all, and ring attention's KV shifts on the CP stream)
  // that the next compute task of the device waits for, costed for its group alone on the
  // cluster (the replay costs it beside every other group running the same collective, which can
  // only slow it).
  const auto waited_for = [&](std::size_t i) -> std::optional<Duration> {
    const parallel::Task& t = g.tasks[i];
    if (t.kind != parallel::TaskKind::kCollective || t.communicator < 0) return std::nullopt;
    const parallel::Communicator& comm = g.communicators[static_cast<std::size_t>(t.communicator)];
    const bool tp = t.stream == parallel::Stream::kTpComm && comm.axes == parallel::axis_bit(parallel::Axis::kTp);
    const bool cp = t.stream == parallel::Stream::kCpComm && comm.axes == parallel::axis_bit(parallel::Axis::kCp);
    if ((!tp && !cp) || comm.ranks.size() < 2) return std::nullopt;
    const std::size_t next = next_compute(i);
    if (next >= g.tasks.size() || !depends(g.tasks[next], i)) return std::nullopt;
    network::CollectiveRequest r;
    r.op = network_op(t.comm);
    r.bytes = t.bytes;
    r.groups.push_back(comm.ranks);
    return net.collective(r).time;
  };
  // One that also waits for the compute task before it: the compute stream idles through it,
  // exposed as the replay exposes a collective overlapped with GEMMs (the larger of one chunk and
  // what the GEMMs leave uncovered).
  const auto serial_time = [&](std::size_t i, std::size_t prev_compute) -> std::optional<Duration> {
    if (prev_compute >= g.tasks.size() || !depends(g.tasks[i], prev_compute)) return std::nullopt;
    const std::optional<Duration> full = waited_for(i);
    const parallel::Task& t = g.tasks[i];
    if (!full || t.hidden_by < 0) return full;
    const auto n = static_cast<std::int64_t>(g.communicators[static_cast<std::size_t>(t.communicator)].ranks.size());
    const Duration one_chunk = Duration::from_ps(full->ps() / n);
    return std::max(one_chunk, *full - std::min(*full, op_time(t.hidden_by)));
  };
  // Per block kind (layer l, embedding, head) and micro-batch: forward, backward, chain; with
  // (1) and without (0) the serial collectives.
  const std::size_t kinds = layers + 2;
  std::array<std::vector<Duration>, 2> fwd, bwd, chain;
  for (std::size_t v = 0; v < 2; ++v) {
    fwd[v].assign(kinds * mbs, Duration());
    bwd[v].assign(kinds * mbs, Duration());
    chain[v].assign(kinds * mbs, Duration());
  }
  // Ring attention (lowering.cpp attention_core): block i + 1 of an attention core waits for
  // block i and for KV shift i + 1, which waits for shift i only; the shifts start with block 0.
  // So block cp − 1 starts at least (cp − 1)·c after block 0 (c: one shift) as well as Σ_{i<cp−1}
  // b_i (the blocks before it): the core lasts at least max(0, Σ_i (c − b_i)) longer than its
  // compute (each shift is emitted after the block it runs beside). Per core (block kind,
  // micro-batch, pass): that sum.
  std::array<std::vector<std::int64_t>, 3> ring;  // picoseconds, by pass: forward, backward, recompute
  for (auto& r : ring) r.assign(kinds * mbs, 0);
  std::size_t prev_compute = g.tasks.size();
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    const parallel::Task& t = g.tasks[i];
    if (t.device != 0) continue;
    const bool is_compute = t.kind == parallel::TaskKind::kCompute;
    const std::optional<Duration> serial = is_compute ? std::nullopt : serial_time(i, prev_compute);
    const bool shift = !is_compute && !serial && t.stream == parallel::Stream::kCpComm &&
                       t.comm == parallel::CommOp::kSendRecv && prev_compute < g.tasks.size();
    const std::optional<Duration> shift_time = shift ? waited_for(i) : std::nullopt;
    const std::size_t block = prev_compute;
    if (is_compute) prev_compute = i;
    if ((!is_compute && !serial && !shift_time) || t.micro_batch < 0) continue;
    std::size_t kind = 0;
    switch (t.part) {
      case parallel::Part::kAttention:
      case parallel::Part::kMlp:
        if (t.layer < 0) continue;
        kind = static_cast<std::size_t>(t.layer);
        break;
      case parallel::Part::kEmbedding:
        kind = layers;
        break;
      case parallel::Part::kLmHead:
        kind = layers + 1;
        break;
      case parallel::Part::kGradients:
      case parallel::Part::kOptimizer:
      case parallel::Part::kActivations:
        continue;
    }
    const std::size_t at = kind * mbs + static_cast<std::size_t>(t.micro_batch) % mbs;
    if (shift_time) {
      const parallel::Task& b = g.tasks[block];
      const Duration b_time = b.ops >= 0 ? op_time(b.ops) : b.duration;
      const std::size_t pass = t.pass == parallel::Pass::kForward ? 0 : t.pass == parallel::Pass::kBackward ? 1 : 2;
      ring[pass][at] += shift_time->ps() - b_time.ps();
      continue;
    }
    const Duration d = !is_compute ? *serial : t.ops >= 0 ? op_time(t.ops) : t.duration;
    for (std::size_t v = is_compute ? 0 : 1; v < 2; ++v) {
      switch (t.pass) {
        case parallel::Pass::kForward:
          fwd[v][at] += d;
          break;
        case parallel::Pass::kBackward:
          bwd[v][at] += d;
          chain[v][at] += d;
          break;
        case parallel::Pass::kRecompute:
        case parallel::Pass::kWeightGrad:
          bwd[v][at] += d;
          break;
        case parallel::Pass::kOptimizer:
          break;
      }
    }
  }
  // The ring's waits, where the shifts outlast the blocks.
  for (std::size_t at = 0; at < kinds * mbs; ++at) {
    const auto wait = [&](std::size_t pass) { return Duration::from_ps(std::max<std::int64_t>(0, ring[pass][at])); };
    fwd[1][at] += wait(0);
    bwd[1][at] += wait(1) + wait(2);
    chain[1][at] += wait(1);
  }
  std::array<PlanCompute, 2> c;
  for (std::size_t v = 0; v < 2; ++v) {
    // The least over the layers (first = 0) or of the embedding or head, and the micro-batches.
    const auto block = [&](std::size_t first) {
      const std::size_t end = first == 0 ? layers : first + 1;
      const auto least = [&](const std::vector<Duration>& x) {
        return min_of(std::vector<Duration>(x.begin() + static_cast<std::ptrdiff_t>(first * mbs),
                                            x.begin() + static_cast<std::ptrdiff_t>(end * mbs)));
      };
      return BlockCompute{least(fwd[v]), least(bwd[v]), least(chain[v])};
    };
    c[v] = PlanCompute{block(0), block(layers), block(layers + 1)};
  }
  ++shapes_;
  bucket.emplace_back(sample, c);
  return bucket.back().second[variant];
}

Duration PlanBounder::zero3_stream(const parallel::ParallelPlan& plan) {
  if (plan.zero_stage_in_effect() < 3 || plan.dp * plan.cp == 1) return Duration();
  const network::NetworkModel& net = resources_.network(scenario_.cluster, scenario_.num_gpus);
  network::CollectiveRequest r;
  r.groups.push_back(parallel::Layout(plan).group(0, parallel::zero3_shard_axes(plan)));
  std::map<std::pair<network::CollectiveOp, std::int64_t>, Duration> cost;  // per op and bytes
  const auto time = [&](network::CollectiveOp op, std::int64_t bytes) {
    auto [it, added] = cost.try_emplace({op, bytes});
    if (added) {
      r.op = op;
      r.bytes = Bytes(bytes);
      it->second = net.collective(r).time;
    }
    return it->second;
  };
  Duration per_micro_batch;
  for (const std::int64_t l : parallel::stage_layer_indices(plan, scenario_.model, 0)) {
    const std::int64_t params = parallel::layer_shared_parameters(scenario_.model, plan, l);
    per_micro_batch += time(network::CollectiveOp::kAllGather, params * 2) * 2 +
                       time(network::CollectiveOp::kReduceScatter, params * plan.grad_reduce_bytes());
  }
  return per_micro_batch * plan.num_micro_batches();
}

const std::vector<std::int64_t>& PlanBounder::in_flight(const parallel::ParallelPlan& plan) {
  const InFlightKey key{plan.schedule, plan.pp, plan.model_chunks(), plan.num_micro_batches()};
  auto it = in_flight_.find(key);
  if (it != in_flight_.end()) return it->second;
  std::vector<std::int64_t> per_rank;
  for (std::int64_t d = 0; d < plan.pp; ++d)
    per_rank.push_back(parallel::max_in_flight(parallel::pipeline_blocks(plan, d)));
  return in_flight_.emplace(key, std::move(per_rank)).first->second;
}

PlanBound PlanBounder::bound(const parallel::ParallelPlan& plan) {
  PlanBound b;
  scenario_.plan = plan;
  const Bytes capacity = scenario_.cluster.gpu.memory_capacity;
  const std::vector<MemoryBreakdown> statics = static_stage_memory(scenario_, resources_);
  for (const MemoryBreakdown& m : statics) b.static_oom = b.static_oom || m.total() > capacity;
  if (b.static_oom) return b;
  const auto vl = parallel::virtual_stage_layers(plan, scenario_.model);
  // Activations: when the forward that brings a rank to its most micro-batches in flight ends
  // (parallel::max_in_flight over its program; compute runs in program order), each of them
  // holds what its forward kept in every layer of its chunk, none of it freed, as its recompute
  // and backward come later in the program. Each layer keeps at least layer_kept (whole layers
  // without recompute keep more). DualPipeV overlaps a forward with a backward, which may free
  // some of its micro-batch meanwhile: no activation bound there.
  if (!overlaps_pairs(plan)) {
    const Bytes kept = kept_layer_activations(scenario_);
    const double fragmentation =
        resources_.memory_overheads(scenario_.cluster.gpu).allocator_fragmentation;
    const auto& flight = in_flight(plan);
    for (std::int64_t d = 0; d < plan.pp; ++d) {
      std::int64_t fewest = std::numeric_limits<std::int64_t>::max();
      for (std::int64_t c = 0; c < plan.model_chunks(); ++c) {
        fewest = std::min(fewest, vl[static_cast<std::size_t>(plan.virtual_stage(d, c))]);
      }
      const Bytes held = kept * (flight[static_cast<std::size_t>(d)] * fewest);
      const Bytes peak = statics[static_cast<std::size_t>(d)].total() + held +
                         memory::fragmentation_reserve(held, fragmentation);
      b.activation_oom = b.activation_oom || peak > capacity;
    }
    if (b.activation_oom) return b;
  }
  const PlanCompute& c = compute(plan);
  const std::size_t stages = vl.size();
  // Forward, whole backward and backward pass of one micro-batch through virtual stage v.
  const auto stage = [&](std::size_t v) {
    BlockCompute s{c.layer.forward * vl[v], c.layer.backward * vl[v],
                   c.layer.backward_chain * vl[v]};
    for (const BlockCompute* e :
         {v == 0 ? &c.embedding : nullptr, v + 1 == stages ? &c.head : nullptr}) {
      if (e == nullptr) continue;
      s.forward += e->forward;
      s.backward += e->backward;
      s.backward_chain += e->backward_chain;
    }
    return s;
  };
  std::vector<Duration> work(static_cast<std::size_t>(plan.pp));
  for (std::size_t v = 0; v < stages; ++v) {
    const BlockCompute s = stage(v);
    work[static_cast<std::size_t>(plan.stage_of(static_cast<std::int64_t>(v)))] +=
        (s.forward + s.backward) * plan.num_micro_batches();
  }
  // Device d waits for the forwards of stages 0 … d − 1 and drains through their backward passes.
  Duration fill, drain, longest;
  for (std::size_t d = 0; d < work.size(); ++d) {
    longest = std::max(longest, fill + work[d] + (plan.splits_backward() ? Duration() : drain));
    const BlockCompute s = stage(d);
    fill += s.forward;
    drain += s.backward_chain;
  }
  b.time = std::max(longest, zero3_stream(plan));
  const double tokens = static_cast<double>(plan.global_batch * plan.seq_len);
  const double seconds = (SimTime() + b.time).seconds();
  b.tokens_per_s = seconds > 0 ? tokens / seconds : std::numeric_limits<double>::infinity();
  return b;
}

}  // namespace ts::driver
