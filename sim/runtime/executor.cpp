#include "sim/runtime/executor.h"

#include <map>
#include <string>
#include <tuple>

#include "sim/base/diagnostic.h"
#include "sim/engine/simulator.h"

namespace ts::runtime {

using parallel::CommOp;
using parallel::Task;
using parallel::TaskGraph;
using parallel::TaskKind;

Duration op_list_time(const compute::ComputeModel& model, const std::vector<ir::Op>& ops) {
  Duration total;
  for (const auto& op : ops) {
    switch (op.kind) {
      case ir::OpKind::kGemm:
        total += model.gemm({op.gemm.m, op.gemm.n, op.gemm.k, op.gemm.batch, op.dtype});
        break;
      case ir::OpKind::kAttention: {
        compute::AttentionShape a;
        a.batch = op.attn.batch;
        a.heads = op.attn.heads;
        a.kv_heads = op.attn.kv_heads;
        a.seq_q = op.attn.seq_q;
        a.seq_kv = op.attn.seq_kv;
        a.head_dim = op.attn.head_dim;
        a.causal = op.attn.causal;
        a.direction = op.backward ? compute::Direction::kBackward : compute::Direction::kForward;
        // Attention runs in bf16 even in FP8 recipes (Transformer Engine keeps DPA in bf16).
        a.dtype = op.dtype == ir::Dtype::kFp8 ? ir::Dtype::kBf16 : op.dtype;
        total += model.attention(a);
        break;
      }
      case ir::OpKind::kMemoryBound:
        total += model.memory_bound(op.moved);
        break;
    }
  }
  return total;
}

namespace {

network::CollectiveOp to_network(CommOp op) {
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

// Event phases: completions before starts at the same instant, so a freed stream is seen.
constexpr engine::Phase kPhaseEnd = 0;

class Replay {
 public:
  Replay(const TaskGraph& g, const parallel::Layout& layout, const compute::ComputeModel& compute,
         const network::NetworkModel& network, const ExecuteOptions& options)
      : g_(g), layout_(layout), compute_(compute), network_(network), options_(options) {
    const std::size_t n = g.tasks.size();
    remaining_deps_.resize(n);
    dependents_begin_.assign(n + 1, 0);
    for (std::size_t t = 0; t < n; ++t) {
      const Task& task = g.tasks[t];
      remaining_deps_[t] = task.dep_count;
      for (std::uint32_t i = 0; i < task.dep_count; ++i) ++dependents_begin_[g.deps[task.dep_begin + i] + 1];
    }
    for (std::size_t t = 0; t < n; ++t) dependents_begin_[t + 1] += dependents_begin_[t];
    dependents_.resize(g.deps.size());
    std::vector<std::uint32_t> fill(dependents_begin_.begin(), dependents_begin_.end() - 1);
    for (std::size_t t = 0; t < n; ++t) {
      const Task& task = g.tasks[t];
      for (std::uint32_t i = 0; i < task.dep_count; ++i) {
        dependents_[fill[g.deps[task.dep_begin + i]]++] = static_cast<std::uint32_t>(t);
      }
    }
    // Stream queues in program order.
    queues_.resize(g.devices.size() * parallel::kNumStreams);
    for (std::size_t t = 0; t < n; ++t) queues_[queue_of(g.tasks[t])].tasks.push_back(static_cast<std::uint32_t>(t));
    // Which simulated devices take part in each communicator.
    device_of_rank_.clear();
    for (std::size_t d = 0; d < g.devices.size(); ++d) device_of_rank_[g.devices[d].rank] = static_cast<std::int32_t>(d);
    comm_members_.resize(g.communicators.size(), 0);
    for (std::size_t c = 0; c < g.communicators.size(); ++c) {
      for (std::int32_t r : g.communicators[c].ranks) {
        if (device_of_rank_.count(r)) ++comm_members_[c];
      }
    }
    comm_pending_.resize(g.communicators.size());
    op_time_.assign(g.op_lists.size(), Duration::max());
    exec_.timings.resize(n);
    exec_.comm.resize(n);
    exec_.memory.resize(g.devices.size());
    current_.assign(g.devices.size(), Bytes());
  }

  Execution run() {
    for (std::size_t q = 0; q < queues_.size(); ++q) try_issue(q);
    sim_.run();
    for (std::size_t q = 0; q < queues_.size(); ++q) {
      SIM_ASSERT(queues_[q].head == queues_[q].tasks.size(),
                 "replay deadlocked: a stream has tasks that never became ready");
    }
    exec_.events = sim_.events_processed();
    return std::move(exec_);
  }

 private:
  struct Queue {
    std::vector<std::uint32_t> tasks;
    std::size_t head = 0;
    bool busy = false;
  };
  // Members of a collective that have arrived, in the order of the communicator's issue sequence.
  struct Pending {
    std::vector<std::uint32_t> arrived;
  };

  static std::size_t queue_index(std::int32_t device, parallel::Stream s) {
    return static_cast<std::size_t>(device) * parallel::kNumStreams + static_cast<std::size_t>(s);
  }
  std::size_t queue_of(const Task& t) const { return queue_index(t.device, t.stream); }

  // Starts the head task of queue `q` if it is idle and the head's dependencies are done.
  void try_issue(std::size_t q) {
    Queue& queue = queues_[q];
    if (queue.busy || queue.head >= queue.tasks.size()) return;
    const std::uint32_t t = queue.tasks[queue.head];
    if (remaining_deps_[t] != 0) return;
    queue.busy = true;
    const Task& task = g_.tasks[t];
    switch (task.kind) {
      case TaskKind::kCompute:
        start({t}, compute_time(task));
        break;
      case TaskKind::kCollective:
      case TaskKind::kP2p: {
        // Wait until every simulated member has issued its matching call.
        auto& pending = comm_pending_[static_cast<std::size_t>(task.communicator)];
        pending.arrived.push_back(t);
        const auto members = comm_members_[static_cast<std::size_t>(task.communicator)];
        // Calls on one communicator match in issue order; with one call in flight per member
        // stream, the first `members` arrivals belong to the same collective.
        if (static_cast<std::int32_t>(pending.arrived.size()) == members) {
          std::vector<std::uint32_t> group;
          group.swap(pending.arrived);
          const network::CollectiveCost cost = comm_cost(task);
          for (std::uint32_t member : group) exec_.comm[member] = {cost.algorithm, cost.protocol};
          start(group, task.hidden_by >= 0 ? exposed_time(task, cost.time) : cost.time);
        }
        break;
      }
    }
  }

  void start(const std::vector<std::uint32_t>& tasks, Duration d) {
    const SimTime now = sim_.now();
    for (std::uint32_t t : tasks) {
      exec_.timings[t].start = now;
      allocate(g_.tasks[t], t, now);
    }
    sim_.schedule_in(d, [this, tasks] { finish(tasks); }, kPhaseEnd);
  }

  void finish(const std::vector<std::uint32_t>& tasks) {
    const SimTime now = sim_.now();
    for (std::uint32_t t : tasks) {
      exec_.timings[t].end = now;
      if (now > exec_.end) exec_.end = now;
      const Task& task = g_.tasks[t];
      release(task, now);
      Queue& queue = queues_[queue_of(task)];
      queue.busy = false;
      ++queue.head;
    }
    for (std::uint32_t t : tasks) {
      for (std::uint32_t i = dependents_begin_[t]; i < dependents_begin_[t + 1]; ++i) {
        const std::uint32_t dep = dependents_[i];
        if (--remaining_deps_[dep] == 0) try_issue(queue_of(g_.tasks[dep]));
      }
      try_issue(queue_of(g_.tasks[t]));
    }
  }

  void allocate(const Task& task, std::uint32_t t, SimTime now) {
    if (task.alloc_at_start.count() == 0) return;
    const auto d = static_cast<std::size_t>(task.device);
    current_[d] += task.alloc_at_start;
    DeviceMemory& mem = exec_.memory[d];
    if (current_[d] > mem.peak_dynamic) {
      mem.peak_dynamic = current_[d];
      mem.peak_task = static_cast<std::int32_t>(t);
    }
    if (options_.memory_timeline) mem.timeline.push_back({now, current_[d]});
  }

  void release(const Task& task, SimTime now) {
    if (task.free_at_end.count() == 0) return;
    const auto d = static_cast<std::size_t>(task.device);
    current_[d] -= task.free_at_end;
    if (options_.memory_timeline) exec_.memory[d].timeline.push_back({now, current_[d]});
  }

  Duration compute_time(const Task& task) {
    if (task.ops < 0) return task.duration;
    return list_time(task.ops);
  }
  Duration list_time(std::int32_t list) {
    auto& cached = op_time_[static_cast<std::size_t>(list)];
    if (cached == Duration::max()) cached = op_list_time(compute_, g_.op_lists[static_cast<std::size_t>(list)]);
    return cached;
  }

  // A collective pipelined with GEMMs in as many chunks as its group has ranks (Transformer
  // Engine's ring-exchange overlap): every chunk but one hides behind the GEMMs' time, so the
  // exposed part is the larger of one chunk and what the GEMMs leave uncovered.
  Duration exposed_time(const Task& task, Duration comm) {
    const auto n = static_cast<std::int64_t>(g_.communicators[static_cast<std::size_t>(task.communicator)].ranks.size());
    const Duration one_chunk = Duration::from_ps(comm.ps() / std::max<std::int64_t>(1, n));
    const Duration uncovered = comm - std::min(comm, list_time(task.hidden_by));
    return std::max(one_chunk, uncovered);
  }

  network::CollectiveCost comm_cost(const Task& task) {
    const auto key = std::make_tuple(task.communicator, static_cast<int>(task.comm), task.bytes.count());
    auto it = comm_cost_.find(key);
    if (it != comm_cost_.end()) return it->second;
    const auto& comm = g_.communicators[static_cast<std::size_t>(task.communicator)];
    network::CollectiveCost cost;
    if (task.kind == TaskKind::kP2p) {
      cost.time = network_.send_recv(comm.ranks[0], comm.ranks[1], task.bytes);
      cost.algorithm = network::Algorithm::kDirect;
    } else {
      network::CollectiveRequest r;
      r.op = to_network(task.comm);
      r.bytes = task.bytes;
      // The request lists this communicator first, then every other group of the same kind
      // (a communicator without parallel axes, e.g. from an imported trace, runs alone).
      r.groups.push_back(comm.ranks);
      if (comm.axes != 0) {
        auto groups = concurrent_groups_.find(comm.axes);
        if (groups == concurrent_groups_.end()) {
          groups = concurrent_groups_.emplace(comm.axes, layout_.all_groups(comm.axes)).first;
        }
        for (const auto& other : groups->second) {
          if (other != comm.ranks) r.groups.push_back(other);
        }
      }
      cost = network_.collective(r);
    }
    comm_cost_.emplace(key, cost);
    return cost;
  }

  const TaskGraph& g_;
  const parallel::Layout& layout_;
  const compute::ComputeModel& compute_;
  const network::NetworkModel& network_;
  const ExecuteOptions& options_;
  engine::Simulator sim_;
  std::vector<std::uint32_t> remaining_deps_;
  std::vector<std::uint32_t> dependents_begin_;
  std::vector<std::uint32_t> dependents_;
  std::vector<Queue> queues_;
  std::map<std::int32_t, std::int32_t> device_of_rank_;
  std::vector<std::int32_t> comm_members_;
  std::vector<Pending> comm_pending_;
  std::vector<Duration> op_time_;
  std::map<std::tuple<std::int32_t, int, std::int64_t>, network::CollectiveCost> comm_cost_;
  std::map<unsigned, std::vector<std::vector<std::int32_t>>> concurrent_groups_;
  std::vector<Bytes> current_;
  Execution exec_;
};

}  // namespace

Execution execute(const TaskGraph& graph, const parallel::Layout& layout,
                  const compute::ComputeModel& compute, const network::NetworkModel& network,
                  const ExecuteOptions& options) {
  return Replay(graph, layout, compute, network, options).run();
}

}  // namespace ts::runtime
