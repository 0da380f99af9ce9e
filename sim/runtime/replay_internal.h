// Internal to the replays (executor.cpp, block_replay.cpp): task durations with the network
// costs they reuse, and the gapless schedules of coarse graphs' chains.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <type_traits>
#include <unordered_map>
#include <vector>

#include "sim/base/diagnostic.h"
#include "sim/base/hash.h"
#include "sim/compute/compute_model.h"
#include "sim/network/network_model.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/task_graph.h"
#include "sim/runtime/breakdown.h"
#include "sim/runtime/executor.h"

namespace ts::runtime::internal {

using parallel::CommOp;
using parallel::Task;
using parallel::TaskGraph;
using parallel::TaskKind;

inline network::CollectiveOp to_network(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce: return network::CollectiveOp::kAllReduce;
    case CommOp::kAllGather: return network::CollectiveOp::kAllGather;
    case CommOp::kReduceScatter: return network::CollectiveOp::kReduceScatter;
    case CommOp::kAllToAll: return network::CollectiveOp::kAllToAll;
    // As a collective: every member sends to the next one of the group (a ring shift).
    case CommOp::kSendRecv: return network::CollectiveOp::kSendRecv;
  }
  throw InternalError("unknown communication op");
}

// Costs of collectives and transfers kept from one replay to the next (ReplayBuffers): the plans
// of a sweep share most of their communicators' costs, and costing a collective builds all its
// concurrent groups. A collective is named by its ranks, the axes it spans and what of the layout
// fixes its concurrent groups, a transfer by its ranks. A collective over order axes only (TP,
// CP, DP, PP) has the groups Layout::all_groups gives: every rank's coordinate along axis a is
// (rank / stride_a) mod size_a, the groups come in the order of their first rank and each lists
// its ranks by the masked axes' strides, so the groups depend on the rank count and on the size
// and stride of the masked axes alone. Its key keeps those (the other axes zero): a TP
// collective of one size then costs once for every pipeline, context and data-parallel degree
// with the same TP group (the request, hence its cost, is the same). Nor does its cost depend on
// which group of that set is its own: the network model routes every group of a request that
// spans several scale-up domains (the slowest sets the time), and within one domain costs the
// first group alone, on its GPUs' own NVLink links, which are alike in every domain. So the key
// leaves out its ranks, and one cost serves every group of the set (the TP groups of every
// pipeline stage, say). Other collectives (expert axes, shard groups) keep the whole layout and
// their ranks.
class CostCache {
 public:
  struct Key {
    const network::NetworkModel* network = nullptr;
    std::array<std::int64_t, 4> sizes{}, strides{};  // the layout (collectives)
    std::int64_t num_ranks = 0;                       // of the layout (collectives)
    unsigned axes = 0;                                // collectives
    parallel::Communicator::Dispatch dispatch;        // collectives of a hierarchical dispatcher
    std::vector<std::int32_t> ranks;
    CommOp op = CommOp::kAllReduce;
    bool transfer = false;
    std::int64_t bytes = 0;
    bool operator==(const Key&) const = default;
  };

  const network::CollectiveCost* find(const Key& k) const {
    auto it = map_.find(k);
    return it == map_.end() ? nullptr : &it->second;
  }
  void add(Key k, const network::CollectiveCost& cost) { map_.emplace(std::move(k), cost); }

 private:
  struct Hash {
    std::size_t operator()(const Key& k) const {
      std::uint64_t h = kFnvOffset;
      auto mix = [&h](std::uint64_t v) { h = fnv_mix(h, v); };
      mix(reinterpret_cast<std::uintptr_t>(k.network));
      for (std::size_t i = 0; i < 4; ++i) {
        mix(static_cast<std::uint64_t>(k.sizes[i]));
        mix(static_cast<std::uint64_t>(k.strides[i]));
      }
      mix(static_cast<std::uint64_t>(k.num_ranks));
      mix(k.axes);
      for (std::int32_t r : k.ranks) mix(static_cast<std::uint32_t>(r));
      mix(static_cast<std::uint64_t>(k.op) << 1 | (k.transfer ? 1u : 0u));
      mix(static_cast<std::uint64_t>(k.bytes));
      return static_cast<std::size_t>(h);
    }
  };
  std::unordered_map<Key, network::CollectiveCost, Hash> map_;
};

// Durations of tasks, cached per op list and per (communicator, op, size), and who takes part in
// each communicator: what both replays need.
class Costs {
 public:
  Costs(const TaskGraph& g, const parallel::Layout& layout, const compute::ComputeModel& compute,
        const network::NetworkModel& network, CostCache* cache = nullptr)
      : g_(g), layout_(layout), compute_(compute), network_(network), cache_(cache) {
    for (std::size_t a = 0; a < 4; ++a) {
      const auto axis = static_cast<parallel::Axis>(a);
      sizes_[a] = layout.size(axis);
      parallel::Coord unit;
      unit[axis] = 1;
      strides_[a] = sizes_[a] > 1 ? layout.rank(unit) : 0;
    }
    // Which simulated devices take part in each communicator.
    std::vector<std::int32_t> device_of_rank;
    for (std::size_t d = 0; d < g.devices.size(); ++d) {
      const std::int32_t r = g.devices[d].rank;
      if (r < 0) continue;
      if (static_cast<std::size_t>(r) >= device_of_rank.size()) device_of_rank.resize(static_cast<std::size_t>(r) + 1, -1);
      device_of_rank[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(d);
    }
    members_.resize(g.communicators.size(), 0);
    for (std::size_t c = 0; c < g.communicators.size(); ++c) {
      for (std::int32_t r : g.communicators[c].ranks) {
        if (r >= 0 && static_cast<std::size_t>(r) < device_of_rank.size() && device_of_rank[static_cast<std::size_t>(r)] >= 0) {
          ++members_[c];
        }
      }
    }
    comm_cost_ids_.resize(g.communicators.size());
    op_time_.assign(g.op_lists.size(), Duration::max());
  }

  // Simulated devices among the communicator's ranks: the calls that make up one collective.
  std::int32_t members(std::int32_t communicator) const { return members_[static_cast<std::size_t>(communicator)]; }

  Duration compute_time(const Task& task) {
    if (task.ops < 0) return task.duration;
    return list_time(task.ops);
  }

  // Time of op list `list` under the compute model (cached).
  Duration list_time(std::int32_t list) {
    auto& cached = op_time_[static_cast<std::size_t>(list)];
    if (cached == Duration::max()) cached = op_list_time(compute_, g_.op_lists[static_cast<std::size_t>(list)]);
    return cached;
  }

  // Per op list, the time of the forward ops it reruns (ir::Op::rerun).
  std::vector<Duration> rerun_times() const {
    std::vector<Duration> out(g_.op_lists.size());
    std::vector<ir::Op> rerun;
    for (std::size_t i = 0; i < g_.op_lists.size(); ++i) {
      rerun.clear();
      for (const ir::Op& op : g_.op_lists[i]) {
        if (op.rerun) rerun.push_back(op);
      }
      if (!rerun.empty()) out[i] = op_list_time(compute_, rerun);
    }
    return out;
  }

  // Duration of a collective or transfer (as exposed, for one overlapped with GEMMs).
  Duration comm_time(const Task& task, const network::CollectiveCost& cost) {
    return task.hidden_by >= 0 ? exposed_time(task, cost.time) : cost.time;
  }

  // Costs cached per communicator: a communicator sees few distinct (op, size) pairs (one size
  // per TP op, the gradient buckets on DP), so a short list searched in order beats a map. The
  // id names the (communicator, op, size) for cost().
  std::uint32_t comm_cost_id(const Task& task) {
    auto& ids = comm_cost_ids_[static_cast<std::size_t>(task.communicator)];
    for (std::uint32_t id : ids) {
      if (costs_[id].op == task.comm && costs_[id].bytes == task.bytes.count()) return id;
    }
    const auto& comm = g_.communicators[static_cast<std::size_t>(task.communicator)];
    CostCache::Key key;
    const bool keyed = cache_ != nullptr && (task.kind == TaskKind::kP2p || comm.axes != 0);
    if (keyed) {
      key.network = &network_;
      key.op = task.comm;
      key.bytes = task.bytes.count();
      if (task.kind == TaskKind::kP2p) {
        key.transfer = true;
        key.ranks = comm.ranks;
      } else {
        constexpr unsigned kOrderAxes = (1u << parallel::kNumOrderAxes) - 1;
        if ((comm.axes & ~kOrderAxes) == 0) {
          // The masked axes' sizes and strides and the rank count fix the concurrent groups.
          for (std::size_t a = 0; a < 4; ++a) {
            if ((comm.axes & (1u << a)) == 0) continue;
            key.sizes[a] = sizes_[a];
            key.strides[a] = strides_[a];
          }
        } else {
          key.sizes = sizes_;
          key.strides = strides_;
          key.ranks = comm.ranks;
        }
        key.num_ranks = layout_.num_ranks();
        key.axes = comm.axes;
        key.dispatch = comm.dispatch;
      }
      if (const network::CollectiveCost* known = cache_->find(key)) return add_cost(task, ids, *known);
    }
    network::CollectiveCost cost;
    if (task.kind == TaskKind::kP2p) {
      cost.time = network_.send_recv(comm.ranks[0], comm.ranks[1], task.bytes);
      cost.algorithm = network::Algorithm::kDirect;
    } else {
      network::CollectiveRequest r;
      r.op = to_network(task.comm);
      r.bytes = task.bytes;
      r.routing = {comm.dispatch.experts, comm.dispatch.top_k, comm.dispatch.expert_groups, comm.dispatch.group_limit};
      // The request lists this communicator first, then every other group of the same kind
      // (a communicator without parallel axes, e.g. from an imported trace, runs alone).
      std::vector<std::vector<std::int32_t>>* groups = nullptr;
      std::ptrdiff_t at = -1;  // the communicator's place among `groups`
      if (comm.axes != 0) {
        auto it = concurrent_groups_.find(comm.axes);
        if (it == concurrent_groups_.end()) {
          it = concurrent_groups_.emplace(comm.axes, layout_.all_groups(comm.axes)).first;
        }
        groups = &it->second;
        const auto found = std::find(groups->begin(), groups->end(), comm.ranks);
        if (found != groups->end()) at = found - groups->begin();
      }
      if (at >= 0) {
        // The groups lent to the request without copying them, the communicator's moved to the
        // front (the others keep their order), and given back in their order.
        const auto first = groups->begin();
        std::rotate(first, first + at, first + at + 1);
        r.groups = std::move(*groups);
        try {
          cost = network_.collective(r);
        } catch (...) {
          *groups = std::move(r.groups);
          std::rotate(groups->begin(), groups->begin() + 1, groups->begin() + at + 1);
          throw;
        }
        *groups = std::move(r.groups);
        std::rotate(groups->begin(), groups->begin() + 1, groups->begin() + at + 1);
      } else {
        r.groups.push_back(comm.ranks);
        if (groups != nullptr) {
          for (const auto& other : *groups) r.groups.push_back(other);
        }
        cost = network_.collective(r);
      }
    }
    if (keyed) cache_->add(std::move(key), cost);
    return add_cost(task, ids, cost);
  }
  const network::CollectiveCost& cost(std::uint32_t id) const { return costs_[id].cost; }

 private:
  std::uint32_t add_cost(const Task& task, std::vector<std::uint32_t>& ids, const network::CollectiveCost& cost) {
    costs_.push_back({task.comm, task.bytes.count(), cost});
    ids.push_back(static_cast<std::uint32_t>(costs_.size() - 1));
    return ids.back();
  }

 public:
  const network::CollectiveCost& comm_cost(const Task& task) { return cost(comm_cost_id(task)); }

  // The NICs task's collective or transfer crosses and its share of them (NetworkModel::nic_load),
  // once per cost id; the request is the one costed (the communicator and every other group of
  // its kind; a transfer alone). Only the replay with NIC sharing asks for it.
  const network::NicLoad& nic_load(const Task& task) {
    const std::uint32_t id = comm_cost_id(task);
    if (nic_loads_.size() <= id) nic_loads_.resize(costs_.size());
    std::optional<network::NicLoad>& slot = nic_loads_[id];
    if (!slot) {
      const auto& comm = g_.communicators[static_cast<std::size_t>(task.communicator)];
      network::CollectiveRequest r;
      r.bytes = task.bytes;
      if (task.kind == TaskKind::kP2p) {
        r.op = network::CollectiveOp::kSendRecv;
        r.groups = {{comm.ranks[0], comm.ranks[1]}};
      } else {
        r.op = to_network(task.comm);
        r.routing = {comm.dispatch.experts, comm.dispatch.top_k, comm.dispatch.expert_groups,
                     comm.dispatch.group_limit};
        r.groups.push_back(comm.ranks);
        if (comm.axes != 0) {
          for (const auto& other : layout_.all_groups(comm.axes)) {
            if (other != comm.ranks) r.groups.push_back(other);
          }
        }
      }
      slot = network_.nic_load(r, cost(id));
    }
    return *slot;
  }

 private:

  // A collective pipelined with GEMMs in as many chunks as its group has ranks (Transformer
  // Engine's ring-exchange overlap): every chunk but one hides behind the GEMMs' time, so the
  // exposed part is the larger of one chunk and what the GEMMs leave uncovered.
  Duration exposed_time(const Task& task, Duration comm) {
    const auto n = static_cast<std::int64_t>(g_.communicators[static_cast<std::size_t>(task.communicator)].ranks.size());
    const Duration one_chunk = Duration::from_ps(comm.ps() / std::max<std::int64_t>(1, n));
    const Duration uncovered = comm - std::min(comm, list_time(task.hidden_by));
    return std::max(one_chunk, uncovered);
  }

  std::vector<std::optional<network::NicLoad>> nic_loads_;  // by cost id

  struct CachedCost {
    CommOp op;
    std::int64_t bytes;
    network::CollectiveCost cost;
  };

  const TaskGraph& g_;
  const parallel::Layout& layout_;
  const compute::ComputeModel& compute_;
  const network::NetworkModel& network_;
  CostCache* cache_;
  std::array<std::int64_t, 4> sizes_{}, strides_{};  // of the layout
  std::vector<std::int32_t> members_;
  std::vector<Duration> op_time_;
  std::vector<CachedCost> costs_;                       // by id
  std::vector<std::vector<std::uint32_t>> comm_cost_ids_;  // per communicator
  std::map<unsigned, std::vector<std::vector<std::int32_t>>> concurrent_groups_;
};

// The network costs a ReplayBuffers keeps from one replay to the next.
CostCache& cost_cache(ReplayBuffers& buffers);

// What block replays keep from one plan to the next (block_replay.cpp), in a ReplayBuffers.
struct BlockStorage;
std::shared_ptr<BlockStorage>& block_storage_slot(ReplayBuffers& buffers);
BlockStorage& block_storage(ReplayBuffers& buffers);

// Chains (by index into TaskGraph::chains) as they run when no step waits for its stream: step
// i then starts `offset` after the chain and all follow one another without a gap.
struct ChainSchedules {
  struct Step {
    Duration duration;
    Duration offset;  // from the chain's start
    std::uint8_t stream = 0;
    TimeCategory category = TimeCategory::kIdle;
    std::int32_t split = -1;  // a compute step's: list_split of its op list
  };
  struct Plan {
    Duration length;                 // first step's start to last step's end
    std::uint8_t stream = 0;         // of the first step
    std::int32_t other = -1;         // the second stream, if any
    Duration other_start;            // first step on `other`: its offset
    Duration stream_end, other_end;  // last steps on `stream` and `other`: their ends' offsets
    // The first and last compute steps (step indices in the chain; first > last: none) and
    // their span's time by category (compute by pass, tensor-parallel steps in between).
    std::uint32_t first_compute = 1, last_compute = 0;
  };
  std::vector<Step> steps;            // by index into TaskGraph::chain_steps
  std::vector<Plan> plans;            // by index into TaskGraph::chains
  // By index into TaskGraph::chains: of its span; then the splits of list_split.
  std::vector<TimeBreakdown> splits;
  // By op list: for a backward list that reruns forward ops (ir::Op::rerun), the index into
  // `splits` of its time as recompute (the reruns) and backward (the rest); else -1. A compute
  // task of such a list names it in its interval (StreamInterval::split).
  std::vector<std::int32_t> list_split;
  // By op list: the time of the forward ops it reruns (Costs::rerun_times).
  std::vector<Duration> rerun;

  // The split of a compute task's interval (list_split of its op list), or -1.
  std::int32_t split_of(const Task& task) const {
    return task.kind == TaskKind::kCompute && task.ops >= 0 && task_category(task) == TimeCategory::kBackward
               ? list_split[static_cast<std::size_t>(task.ops)]
               : -1;
  }

  // Durations and gapless schedules of the graph's chains, once per graph (chains share steps).
  // `sources`, by chain: an earlier chain whose steps it copies but for their communicators
  // (block programs' copied templates), or -1; a copy takes its source's steps and, where its
  // collectives cost the same, its schedule.
  void plan(const TaskGraph& g, Costs& costs, const std::vector<std::int32_t>* sources = nullptr);

  // Runs chain `c` of `g`, its dependencies done at `ready`: each step starts when the one before
  // ends and its stream is free (as separate tasks each waiting for the one before would), and
  // the chain ends with its last step, returned. `free(stream)` is the device's stream's free
  // time (updated); `interval(stream, start, end, category, split)` records what each stream
  // ran (nullptr: nothing is recorded). Usually no step waits for its stream (the first step on
  // each stream finds it free): then the chain runs as planned and the span of its compute steps
  // is one interval, whose categories are split number `c` (see device_breakdown).
  template <class Free, class Interval>
  SimTime run(const TaskGraph& g, std::uint32_t c, SimTime ready, Free&& free, Interval&& interval) const {
    constexpr bool kRecord = !std::is_null_pointer_v<std::decay_t<Interval>>;
    const parallel::Chain& chain = g.chains[c];
    const Plan& plan = plans[c];
    SimTime& first = free(plan.stream);
    const SimTime start = std::max(ready, first);
    if (plan.other < 0 || free(static_cast<std::uint8_t>(plan.other)) <= start + plan.other_start) {
      for (std::uint32_t k = 0; kRecord && k < chain.step_count; ++k) {
        const Step& step = steps[chain.step_begin + k];
        if (k == plan.first_compute && plan.first_compute <= plan.last_compute) {
          const Step& last = steps[chain.step_begin + plan.last_compute];
          if constexpr (kRecord) {
            interval(step.stream, start + step.offset, start + last.offset + last.duration, step.category,
                     static_cast<std::int32_t>(c));
          }
          k = plan.last_compute;
          continue;
        }
        if constexpr (kRecord) {
          interval(step.stream, start + step.offset, start + step.offset + step.duration, step.category, step.split);
        }
      }
      first = start + plan.stream_end;
      if (plan.other >= 0) free(static_cast<std::uint8_t>(plan.other)) = start + plan.other_end;
      return start + plan.length;
    }
    SimTime end = ready;
    for (std::uint32_t k = 0; k < chain.step_count; ++k) {
      const Step& step = steps[chain.step_begin + k];
      SimTime& stream_free = free(step.stream);
      const SimTime step_start = std::max(end, stream_free);
      end = step_start + step.duration;
      stream_free = end;
      if constexpr (kRecord) interval(step.stream, step_start, end, step.category, step.split);
    }
    return end;
  }
};

}  // namespace ts::runtime::internal
