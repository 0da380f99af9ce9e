#include "sim/runtime/executor.h"

#include <algorithm>
#include <limits>
#include <map>
#include <optional>
#include <unordered_map>
#include <string>

#include "sim/base/diagnostic.h"
#include "sim/engine/simulator.h"
#include "sim/network/nic_sharing.h"
#include "sim/runtime/breakdown.h"
#include "sim/runtime/replay_internal.h"

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
        total += model.gemm({op.gemm.m, op.gemm.n, op.gemm.k, op.gemm.batch, op.dtype, op.grouped});
        break;
      case ir::OpKind::kAttention: {
        compute::AttentionShape a;
        a.batch = op.attn.batch;
        a.heads = op.attn.heads;
        a.kv_heads = op.attn.kv_heads;
        a.seq_q = op.attn.seq_q;
        a.seq_kv = op.attn.seq_kv;
        a.head_dim = op.attn.head_dim;
        a.head_dim_v = op.attn.head_dim_v;
        a.window = op.attn.window;
        a.causal = op.attn.causal;
        a.direction = op.backward ? compute::Direction::kBackward : compute::Direction::kForward;
        // bf16, or FP8 where the plan asks for FP8 attention (ir::LayerShape::fp8_attention).
        a.dtype = op.dtype;
        total += model.attention(a);
        break;
      }
      case ir::OpKind::kMemoryBound: {
        using compute::MemoryKernel;
        MemoryKernel kernel = MemoryKernel::kStreaming;
        switch (op.norm) {
          case ir::NormKernel::kNone: break;
          case ir::NormKernel::kFused:
            kernel = op.backward ? MemoryKernel::kFusedNormBackward : MemoryKernel::kFusedNormForward;
            break;
          case ir::NormKernel::kNative:
            kernel = op.backward ? MemoryKernel::kNativeNormBackward : MemoryKernel::kNativeNormForward;
            break;
        }
        switch (op.eager_moe) {
          case ir::EagerMoeKernel::kNone: break;
          case ir::EagerMoeKernel::kGather: kernel = MemoryKernel::kMoeGather; break;
          case ir::EagerMoeKernel::kScatterAdd: kernel = MemoryKernel::kMoeCombine; break;
          case ir::EagerMoeKernel::kRouterTopk: kernel = MemoryKernel::kMoeRouter; break;
        }
        total += model.memory_bound(op.moved, kernel);
        break;
      }
    }
  }
  return total;
}

std::string peak_label(const TaskGraph& graph, const DeviceMemory& memory) {
  if (memory.peak_task < 0) return "";
  Task task = graph.tasks[static_cast<std::size_t>(memory.peak_task)];
  // A block program's template task carries the micro-batch of the template's first block.
  if (memory.peak_micro_batch >= 0 && task.micro_batch >= 0) task.micro_batch = memory.peak_micro_batch;
  return memory.peak_step >= 0 ? parallel::step_label(graph, task, memory.peak_step) : parallel::task_label(graph, task);
}

namespace {

using internal::ChainSchedules;
using internal::CostCache;
using internal::Costs;

std::size_t queue_index(const Task& t) {
  return static_cast<std::size_t>(t.device) * parallel::kNumStreams + static_cast<std::size_t>(t.stream);
}

// Event phases: completions before starts at the same instant, so a freed stream is seen.
constexpr engine::Phase kPhaseEnd = 0;

// The replay on the discrete-event engine: tasks start and end as events in time order. It
// records the memory timeline (for traces) and runs any graph.
//
// Replay semantics (both replays implement them): each stream runs its tasks in program order,
// one at a time; a task is ready when it heads its stream queue, the stream is idle and its
// dependencies are done. A compute task starts when ready; a collective or point-to-point task
// starts when every simulated member of its communicator has issued its call (calls on one
// communicator match in issue order, as NCCL's), all members together. Memory is allocated when a
// task starts and released when it ends.
class EventReplay {
 public:
  EventReplay(const TaskGraph& g, const parallel::Layout& layout, const compute::ComputeModel& compute,
              const network::NetworkModel& network, const ExecuteOptions& options)
      : g_(g), costs_(g, layout, compute, network), timeline_(options.memory_timeline) {
    SIM_ASSERT(g.chains.empty(), "the event replay runs no chains");
    if (options.nic_sharing) nic_.emplace();
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
    for (std::size_t t = 0; t < n; ++t) queues_[queue_index(g.tasks[t])].tasks.push_back(static_cast<std::uint32_t>(t));
    comm_pending_.resize(g.communicators.size());
    exec_.timings.resize(n);
    exec_.comm.resize(n);
    exec_.memory.resize(g.devices.size());
    exec_.rerun = costs_.rerun_times();
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
        begin(t);
        sim_.schedule_in(costs_.compute_time(task), [this, t] { finish_one(t); }, kPhaseEnd);
        break;
      case TaskKind::kCollective:
      case TaskKind::kP2p: {
        // Wait until every simulated member has issued its matching call: with one call in
        // flight per member stream, the first `members` arrivals belong to the same collective.
        auto& pending = comm_pending_[static_cast<std::size_t>(task.communicator)];
        pending.push_back(t);
        if (static_cast<std::int32_t>(pending.size()) != costs_.members(task.communicator)) break;
        const network::CollectiveCost& cost = costs_.comm_cost(task);
        for (std::uint32_t member : pending) exec_.comm[member] = {cost.algorithm, cost.protocol};
        const Duration d = costs_.comm_time(task, cost);
        // The group's members go to a pool slot that the end event names by index, so that
        // events carry no heap-allocated capture.
        std::uint32_t slot;
        if (free_groups_.empty()) {
          slot = static_cast<std::uint32_t>(groups_.size());
          groups_.emplace_back();
        } else {
          slot = free_groups_.back();
          free_groups_.pop_back();
        }
        groups_[slot].swap(pending);
        pending.clear();
        for (std::uint32_t member : groups_[slot]) begin(member);
        if (nic_ && task.hidden_by < 0) {
          const network::NicLoad& load = costs_.nic_load(task);
          if (!load.nics.empty()) {
            start_shared(slot, d, cost.latency, load, share_kind(task));
            break;
          }
        }
        sim_.schedule_in(d, [this, slot] { finish_group(slot); }, kPhaseEnd);
        break;
      }
    }
  }

  void begin(std::uint32_t t) {
    const SimTime now = sim_.now();
    exec_.timings[t].start = now;
    const Task& task = g_.tasks[t];
    if (task.alloc_at_start.count() == 0) return;
    const auto d = static_cast<std::size_t>(task.device);
    current_[d] += task.alloc_at_start;
    DeviceMemory& mem = exec_.memory[d];
    mem.reach(current_[d], static_cast<std::int32_t>(t));
    if (timeline_) mem.timeline.push_back({now, current_[d]});
  }

  void end(std::uint32_t t) {
    const SimTime now = sim_.now();
    exec_.timings[t].end = now;
    if (now > exec_.end) exec_.end = now;
    const Task& task = g_.tasks[t];
    if (task.free_at_end.count() != 0) {
      const auto d = static_cast<std::size_t>(task.device);
      current_[d] -= task.free_at_end;
      if (timeline_) exec_.memory[d].timeline.push_back({now, current_[d]});
    }
    Queue& queue = queues_[queue_index(task)];
    queue.busy = false;
    ++queue.head;
  }

  void wake(std::uint32_t t) {
    for (std::uint32_t i = dependents_begin_[t]; i < dependents_begin_[t + 1]; ++i) {
      const std::uint32_t dep = dependents_[i];
      if (--remaining_deps_[dep] == 0) try_issue(queue_index(g_.tasks[dep]));
    }
    try_issue(queue_index(g_.tasks[t]));
  }

  void finish_one(std::uint32_t t) {
    end(t);
    wake(t);
  }

  void finish_group(std::uint32_t slot) {
    // Waking members may start other groups, which take pool slots: work on the list moved out.
    std::vector<std::uint32_t> members;
    members.swap(groups_[slot]);
    free_groups_.push_back(slot);
    for (std::uint32_t t : members) end(t);
    for (std::uint32_t t : members) wake(t);
    members.clear();
    if (groups_[slot].capacity() == 0) groups_[slot].swap(members);  // keep the storage
  }

  // NIC sharing: the group in pool slot `slot` starts a network task of duration `d` alone
  // (`latency` of it fixed) on the NICs of `load`; its end, and every other shared task's, is
  // rescheduled at the re-shared rates.
  void start_shared(std::uint32_t slot, Duration d, Duration latency, const network::NicLoad& load,
                    std::int64_t kind) {
    const Duration fixed = std::min(latency, d);
    const std::int32_t id =
        nic_->start({sim_.now(), fixed, d - fixed, load.nics, std::max(load.share, 1e-9), kind});
    if (static_cast<std::size_t>(id) >= shared_.size()) shared_.resize(static_cast<std::size_t>(id) + 1);
    shared_[static_cast<std::size_t>(id)] = {slot, {}, SimTime(), true};
    in_flight_.push_back(id);
    reschedule_shared();
  }

  // Tasks of one kind were costed together (a collective over a set of parallel axes, every group
  // of those axes in one request: NicTask::kind); a transfer, or a communicator without axes, is
  // costed alone and is its own kind.
  std::int64_t share_kind(const Task& task) {
    const auto& comm = g_.communicators[static_cast<std::size_t>(task.communicator)];
    if (task.kind == TaskKind::kP2p || comm.axes == 0) return -(++own_kinds_);
    return (static_cast<std::int64_t>(comm.axes) << 8) | static_cast<std::int64_t>(task.comm);
  }

  // After a start or a transfer's completion: every shared task's end at the current rates, and
  // the next completion (which re-shares the NICs it frees).
  void reschedule_shared() {
    for (const std::int32_t id : in_flight_) {
      Shared& s = shared_[static_cast<std::size_t>(id)];
      const SimTime end = nic_->end(id);
      if (s.scheduled && end == s.end) continue;
      if (s.scheduled) sim_.cancel(s.handle);
      s.end = end;
      s.scheduled = true;
      s.handle = sim_.schedule_at(end, [this, id] { finish_shared(id); }, kPhaseEnd);
    }
    sim_.cancel(tick_);
    const SimTime next = nic_->next_completion();
    if (next.ps() != std::numeric_limits<std::int64_t>::max()) {
      tick_ = sim_.schedule_at(next, [this] {
        nic_->advance(sim_.now());
        reschedule_shared();
      }, kPhaseEnd);
    }
  }

  void finish_shared(std::int32_t id) {
    Shared& s = shared_[static_cast<std::size_t>(id)];
    s.scheduled = false;
    std::erase(in_flight_, id);
    nic_->advance(sim_.now());
    reschedule_shared();
    finish_group(s.slot);
  }

  struct Shared {
    std::uint32_t slot = 0;
    engine::EventHandle handle;
    SimTime end;
    bool scheduled = false;
  };

  const TaskGraph& g_;
  Costs costs_;
  bool timeline_;
  std::optional<network::NicSharing> nic_;  // with ExecuteOptions::nic_sharing
  std::vector<Shared> shared_;              // by NicSharing id
  std::vector<std::int32_t> in_flight_;     // shared tasks not yet ended
  engine::EventHandle tick_;
  std::int64_t own_kinds_ = 0;
  engine::Simulator sim_;
  std::vector<std::uint32_t> remaining_deps_;
  std::vector<std::uint32_t> dependents_begin_;
  std::vector<std::uint32_t> dependents_;
  std::vector<Queue> queues_;
  std::vector<std::vector<std::uint32_t>> comm_pending_;  // per communicator: arrived calls
  std::vector<std::vector<std::uint32_t>> groups_;        // members of running groups, by slot
  std::vector<std::uint32_t> free_groups_;
  std::vector<Bytes> current_;
  Execution exec_;
};

// Whether the direct replay below gives the event replay's results, checked task by task:
//  - every device's memory changes on one stream, so that they happen in program order;
//  - every communicator is called from one stream per device, by at most as many devices as it
//    has simulated members: then a collective's group is the k-th call of every user, whatever
//    the order in which calls arrive (with more users, which calls meet would depend on timing).
class DirectCheck {
 public:
  DirectCheck(const TaskGraph& g, const Costs& costs)
      : costs_(costs), memory_stream_(g.devices.size(), -1), users_(g.communicators.size()) {}

  void add(const Task& t) {
    if (t.alloc_at_start.count() != 0 || t.free_at_end.count() != 0) {
      int& s = memory_stream_[static_cast<std::size_t>(t.device)];
      if (s < 0) s = static_cast<int>(t.stream);
      ok_ = ok_ && s == static_cast<int>(t.stream);
    }
    if (t.kind == TaskKind::kCompute) return;
    auto& u = users_[static_cast<std::size_t>(t.communicator)];
    // Lowering emits device by device: the last user is the usual match.
    auto it = !u.empty() && u.back().device == t.device
                  ? u.end() - 1
                  : std::find_if(u.begin(), u.end(), [&](const User& x) { return x.device == t.device; });
    if (it == u.end()) {
      u.push_back({t.device, t.stream});
      ok_ = ok_ && (u.size() <= 1 || static_cast<std::int32_t>(u.size()) <= costs_.members(t.communicator));
    } else {
      ok_ = ok_ && it->stream == t.stream;
    }
  }
  bool ok() const { return ok_; }

 private:
  struct User {
    std::int32_t device;
    parallel::Stream stream;
  };
  const Costs& costs_;
  std::vector<int> memory_stream_;
  std::vector<std::vector<User>> users_;  // per communicator
  bool ok_ = true;
};

}  // namespace

// The direct replay's per-task state, kept in ReplayBuffers between replays.
struct ReplayBuffers::Storage {
  static constexpr std::uint32_t kNil = 0xffffffffu;

  struct Record {
    SimTime ready;                    // latest end among finished dependencies; once the task
                                      // waits for its communicator, when it was issued
    Duration duration;
    std::uint32_t remaining = 0;      // dependencies not finished
    std::uint32_t queue = 0;
    std::uint32_t dependents = kNil;  // first link of the tasks waiting for this one
    std::uint32_t queue_next = kNil;  // next task on the same stream
    std::uint32_t communicator = 0;   // communication tasks
    std::uint32_t cost = 0;           // communication tasks: Costs::comm_cost_id
    std::uint32_t chain = kNil;       // chain tasks: TaskGraph::chains index
    std::uint32_t queue2 = kNil;      // chain tasks: the other stream they run steps on
    std::uint32_t queue_next2 = kNil; // next task on queue2
    TaskKind kind = TaskKind::kCompute;
    TimeCategory category = TimeCategory::kIdle;
    std::int32_t split = -1;          // compute tasks: ChainSchedules::split_of
  };
  struct Link {
    std::uint32_t next;  // next link of the same task's dependents
    std::uint32_t task;  // the dependent
  };
  struct Queue {
    std::uint32_t head = kNil;  // next task to run
    bool busy = false;          // its head waits for the other members of its communicator
    SimTime free;               // end of its last task
    std::uint32_t count = 0;
    std::uint32_t next_interval = 0;
  };

  std::vector<Record> records;
  std::vector<Link> links;  // by index into TaskGraph::deps
  std::vector<Queue> queues;
  std::vector<std::uint32_t> tails;                 // last task of each queue while building
  std::vector<std::vector<std::uint32_t>> pending;  // per communicator: calls issued so far
  std::vector<std::uint32_t> bounds;
  std::vector<StreamInterval> intervals;            // summary: each stream's, in program order
  std::vector<std::uint32_t> work;                  // queues whose head may have become ready
  ChainSchedules chains;  // of the graph replayed
  CostCache costs;
  std::shared_ptr<internal::BlockStorage> blocks;  // block replays' (block_replay.cpp)
};

ReplayBuffers::ReplayBuffers() : storage_(std::make_unique<Storage>()) {}
ReplayBuffers::~ReplayBuffers() = default;
ReplayBuffers::ReplayBuffers(ReplayBuffers&&) noexcept = default;
ReplayBuffers& ReplayBuffers::operator=(ReplayBuffers&&) noexcept = default;

CostCache& internal::cost_cache(ReplayBuffers& buffers) { return buffers.storage().costs; }

std::shared_ptr<internal::BlockStorage>& internal::block_storage_slot(ReplayBuffers& buffers) {
  return buffers.storage().blocks;
}

namespace {

// The replay without an event queue. Under the replay semantics a task's start time is a
// function of when the conditions it waits for were met: the end of the previous task on its
// stream, the ends of its dependencies and, for communication, the same for every member's call.
// So the tasks can be evaluated in any order that respects those waits (a worklist of streams
// whose head may have become ready), computing
//   ready(t) = max(end of t's stream predecessor, ends of t's dependencies)
//   start(t) = ready(t) for compute, max over the group's members of ready for communication
//   end(t)   = start(t) + duration(t),
// which gives the event replay's times without its time-ordered queue. Memory peaks depend only
// on the order of allocations and releases, which is program order when one stream per device
// carries them (DirectCheck): they are found in one pass over the tasks, before the evaluation.
// The per-task state sits in one record so that the evaluation, which hops between devices,
// touches few cache lines per task.
class DirectReplay {
  using Storage = ReplayBuffers::Storage;
  static constexpr std::uint32_t kNil = Storage::kNil;

 public:
  // With `summary`, the replay keeps each task's interval (for the breakdown) by its position in
  // its stream instead of per-task timings in the Execution.
  DirectReplay(const TaskGraph& g, const parallel::Layout& layout, const compute::ComputeModel& compute,
               const network::NetworkModel& network, bool summary, ReplayBuffers& buffers)
      : g_(g), costs_(g, layout, compute, network, &internal::cost_cache(buffers)), summary_(summary), s_(buffers.storage()) {
    const std::size_t n = g.tasks.size();
    SIM_ASSERT(n < kNil && g.deps.size() < kNil, "task graph too large");
    DirectCheck check(g, costs_);
    s_.records.assign(n, Storage::Record{});
    s_.links.resize(g.deps.size());
    s_.queues.assign(g.devices.size() * parallel::kNumStreams, Storage::Queue{});
    s_.tails.assign(s_.queues.size(), kNil);
    exec_.memory.resize(g.devices.size());
    std::vector<Bytes> current(g.devices.size());
    plan_chains();
    tasks_ = static_cast<std::int64_t>(n);
    // One pass in program order: records, queues and dependents as linked lists, memory peaks.
    for (std::uint32_t t = 0; t < n; ++t) {
      const Task& task = g.tasks[t];
      Storage::Record& r = s_.records[t];
      r.remaining = task.dep_count;
      r.queue = static_cast<std::uint32_t>(queue_index(task));
      r.kind = task.kind;
      r.category = task_category(task);
      if (task.chain >= 0) {
        add_chain(t, task, current, check);
      } else {
        check.add(task);
        if (task.kind == TaskKind::kCompute) {
          r.duration = costs_.compute_time(task);
          r.split = s_.chains.split_of(task);
        } else {
          r.communicator = static_cast<std::uint32_t>(task.communicator);
          r.cost = costs_.comm_cost_id(task);
          r.duration = costs_.comm_time(task, costs_.cost(r.cost));
        }
        link(t, r.queue);
        ++s_.queues[r.queue].count;
        account(task, t, -1, current);
      }
      for (std::uint32_t i = task.dep_begin; i < task.dep_begin + task.dep_count; ++i) {
        Storage::Record& target = s_.records[g.deps[i]];
        s_.links[i] = {target.dependents, t};
        target.dependents = i;
      }
    }
    applies_ = check.ok();
    if (summary_) {
      // Intervals of queue q go to intervals[bounds[q], bounds[q + 1]): room for one per task or
      // chain step (a chain run as planned takes fewer).
      s_.bounds.assign(s_.queues.size() + 1, 0);
      for (std::size_t q = 0; q < s_.queues.size(); ++q) {
        s_.bounds[q + 1] = s_.bounds[q] + s_.queues[q].count;
        s_.queues[q].next_interval = s_.bounds[q];
      }
      s_.intervals.resize(s_.bounds.back());
    } else {
      exec_.timings.resize(n);
      exec_.comm.resize(n);
      exec_.rerun = s_.chains.rerun;  // planned above (plan_chains)
    }
    for (auto& p : s_.pending) p.clear();
    s_.pending.resize(g.communicators.size());
    s_.work.clear();
  }

  // Durations and gapless schedules of the chains' steps, once per graph (chains share steps).
  void plan_chains() {
    SIM_ASSERT(summary_ || g_.chains.empty(), "per-task timings of a coarse graph");
    s_.chains.plan(g_, costs_);
  }

  // Appends task t to queue q (to the queue's list through the link of q in its last task).
  void link(std::uint32_t t, std::uint32_t q) {
    std::uint32_t& tail = s_.tails[q];
    if (tail == kNil) {
      s_.queues[q].head = t;
    } else {
      Storage::Record& last = s_.records[tail];
      (last.queue == q ? last.queue_next : last.queue_next2) = t;
    }
    tail = t;
  }

  // Memory changes of a task (or of step `step` of chain task t), in program order.
  void account(const Task& task, std::uint32_t t, std::int32_t step, std::vector<Bytes>& current) {
    if (task.alloc_at_start.count() == 0 && task.free_at_end.count() == 0) return;
    const auto d = static_cast<std::size_t>(task.device);
    current[d] += task.alloc_at_start;
    exec_.memory[d].reach(current[d], static_cast<std::int32_t>(t), step);
    current[d] -= task.free_at_end;
  }

  // A chain task joins the queue of each stream its steps run on (two at most: compute and
  // tensor-parallel), at its place in program order.
  void add_chain(std::uint32_t t, const Task& task, std::vector<Bytes>& current, DirectCheck& check) {
    Storage::Record& r = s_.records[t];
    const parallel::Chain& chain = g_.chains[static_cast<std::size_t>(task.chain)];
    r.chain = static_cast<std::uint32_t>(task.chain);
    r.queue = kNil;
    for (std::uint32_t i = chain.step_begin; i < chain.step_begin + chain.step_count; ++i) {
      Task step = g_.chain_steps[i];
      step.device = task.device;
      check.add(step);
      const auto q = static_cast<std::uint32_t>(queue_index(step));
      if (r.queue == kNil) r.queue = q;
      if (q != r.queue) {
        SIM_ASSERT(r.queue2 == kNil || r.queue2 == q, "a chain runs on more than two streams");
        r.queue2 = q;
      }
      ++s_.queues[q].count;
      account(step, t, static_cast<std::int32_t>(i), current);
    }
    link(t, r.queue);
    if (r.queue2 != kNil) link(t, r.queue2);
    tasks_ += static_cast<std::int64_t>(chain.step_count) - 1;
  }

  // False when the graph needs the event replay (see DirectCheck).
  bool applies() const { return applies_; }

  // The execution, or none when members of a collective would be costed differently (then the
  // event replay must decide, by which member arrives last).
  std::optional<Execution> run() {
    for (std::size_t q = s_.queues.size(); q-- > 0;) s_.work.push_back(static_cast<std::uint32_t>(q));
    while (!s_.work.empty() && consistent_) {
      const std::uint32_t q = s_.work.back();
      s_.work.pop_back();
      advance(q);
    }
    if (!consistent_) return std::nullopt;
    for (const Storage::Queue& q : s_.queues) {
      SIM_ASSERT(q.head == kNil, "replay deadlocked: a stream has tasks that never became ready");
    }
    exec_.events = events_;
    return std::move(exec_);
  }

  std::optional<ReplaySummary> summarize(double slowdown) {
    std::optional<Execution> ex = run();
    if (!ex) return std::nullopt;
    ReplaySummary out;
    out.end = ex->end;
    out.last_device = last_task_ != kNil ? g_.tasks[last_task_].device : 0;
    out.events = ex->events;
    out.tasks = tasks_;
    out.memory = std::move(ex->memory);
    out.time.resize(g_.devices.size());
    for (std::size_t d = 0; d < g_.devices.size(); ++d) {
      std::array<StreamIntervals, parallel::kNumStreams> streams{};
      for (std::size_t k = 0; k < parallel::kNumStreams; ++k) {
        const std::size_t q = d * parallel::kNumStreams + k;
        streams[k] = {s_.intervals.data() + s_.bounds[q], s_.intervals.data() + s_.queues[q].next_interval};
      }
      out.time[d] = device_breakdown(streams, ex->end, s_.chains.splits.data(), slowdown);
    }
    return out;
  }

 private:
  // Runs the tasks of queue `q` from its head for as long as they are ready.
  void advance(std::uint32_t q) {
    Storage::Queue& queue = s_.queues[q];
    while (!queue.busy && queue.head != kNil) {
      const std::uint32_t t = queue.head;
      Storage::Record& r = s_.records[t];
      if (r.remaining != 0) return;
      if (r.chain != kNil) {
        // It runs once it heads both its streams.
        if (r.queue2 != kNil) {
          const Storage::Queue& other = s_.queues[q == r.queue ? r.queue2 : r.queue];
          if (other.head != t || other.busy) return;
        }
        run_chain(t);
        if (r.queue2 != kNil) s_.work.push_back(q == r.queue ? r.queue2 : r.queue);
        continue;
      }
      const SimTime ready = std::max(queue.free, r.ready);
      if (r.kind == TaskKind::kCompute) {
        ++events_;
        finish(t, ready, r.duration);
        continue;
      }
      auto& pending = s_.pending[r.communicator];
      pending.push_back(t);
      if (static_cast<std::int32_t>(pending.size()) != costs_.members(static_cast<std::int32_t>(r.communicator))) {
        queue.busy = true;
        r.ready = ready;
        return;
      }
      // The last member to arrive completes the group: all start when the latest is ready. The
      // event replay costs the group by its last arrival, which comes in time order: members
      // that would be costed differently make the result depend on that order, and then this
      // replay gives up (run() returns none).
      ++events_;
      const Duration d = r.duration;
      SimTime start = ready;
      for (std::uint32_t member : pending) {
        const Storage::Record& m = s_.records[member];
        consistent_ = consistent_ && m.cost == r.cost && m.duration == d;
        if (member != t) start = std::max(start, m.ready);
      }
      for (std::uint32_t member : pending) {
        if (!summary_) exec_.comm[member] = {costs_.cost(r.cost).algorithm, costs_.cost(r.cost).protocol};
        if (member == t) continue;
        const std::uint32_t mq = s_.records[member].queue;
        s_.queues[mq].busy = false;
        finish(member, start, d);
        s_.work.push_back(mq);
      }
      pending.clear();
      finish(t, start, d);
    }
  }

  // Task t ran over [start, start + d]: its stream moves on and what waited for it learns when.
  void finish(std::uint32_t t, SimTime start, Duration d) {
    // As the event engine, which refuses events in the past.
    SIM_ASSERT(d >= Duration(), "event scheduled in the past");
    Storage::Record& r = s_.records[t];
    Storage::Queue& queue = s_.queues[r.queue];
    const SimTime end = start + d;
    if (summary_) {
      interval(queue, start, end, r.category, r.split);
    } else {
      exec_.timings[t] = {start, end};
    }
    queue.free = end;
    queue.head = r.queue_next;
    ended(t, end);
  }

  void interval(Storage::Queue& queue, SimTime start, SimTime end, TimeCategory category, std::int32_t split = -1) {
    StreamInterval& iv = s_.intervals[queue.next_interval++];
    iv.start = start;
    iv.end = end;
    iv.category = category;
    iv.split = split;
  }

  // Chain task t (see ChainSchedules::run).
  void run_chain(std::uint32_t t) {
    Storage::Record& r = s_.records[t];
    const auto device_queues = static_cast<std::uint32_t>(r.queue / parallel::kNumStreams * parallel::kNumStreams);
    auto queue_of_stream = [&](std::uint32_t stream) -> Storage::Queue& { return s_.queues[device_queues + stream]; };
    const SimTime end = s_.chains.run(
        g_, r.chain, r.ready, [&](std::uint8_t stream) -> SimTime& { return queue_of_stream(stream).free; },
        [&](std::uint8_t stream, SimTime start, SimTime stop, TimeCategory category, std::int32_t split) {
          interval(queue_of_stream(stream), start, stop, category, split);
        });
    events_ += g_.chains[r.chain].step_count;
    s_.queues[r.queue].head = r.queue_next;
    if (r.queue2 != kNil) s_.queues[r.queue2].head = r.queue_next2;
    ended(t, end);
  }

  // What waited for task t, which ended at `end`, learns when.
  void ended(std::uint32_t t, SimTime end) {
    // The first task in graph order to end last (as a scan of the timings finds it).
    if (end > exec_.end || (end == exec_.end && last_task_ != kNil && t < last_task_)) {
      exec_.end = end;
      last_task_ = t;
    }
    for (std::uint32_t i = s_.records[t].dependents; i != kNil; i = s_.links[i].next) {
      Storage::Record& w = s_.records[s_.links[i].task];
      if (end > w.ready) w.ready = end;
      if (--w.remaining == 0) s_.work.push_back(w.queue);
    }
  }

  const TaskGraph& g_;
  Costs costs_;
  bool summary_;
  Storage& s_;
  bool applies_ = false;
  bool consistent_ = true;  // every group's members are costed alike
  std::uint64_t events_ = 0;
  std::int64_t tasks_ = 0;  // a chain counting as its steps
  std::uint32_t last_task_ = kNil;
  Execution exec_;
};

}  // namespace

bool direct_replay_applies(const TaskGraph& graph, const parallel::Layout& layout,
                           const compute::ComputeModel& compute, const network::NetworkModel& network) {
  ReplayBuffers buffers;
  return DirectReplay(graph, layout, compute, network, true, buffers).applies();
}

Execution execute(const TaskGraph& graph, const parallel::Layout& layout,
                  const compute::ComputeModel& compute, const network::NetworkModel& network,
                  const ExecuteOptions& options) {
  if (!options.memory_timeline && !options.event_engine && !options.nic_sharing) {
    ReplayBuffers buffers;
    DirectReplay direct(graph, layout, compute, network, false, buffers);
    if (direct.applies()) {
      if (std::optional<Execution> ex = direct.run()) return std::move(*ex);
    }
  }
  return EventReplay(graph, layout, compute, network, options).run();
}

ReplaySummary replay_summary(const TaskGraph& graph, const parallel::Layout& layout,
                             const compute::ComputeModel& compute, const network::NetworkModel& network,
                             const ExecuteOptions& options, ReplayBuffers* buffers) {
  if (!options.memory_timeline && !options.event_engine && !options.nic_sharing) {
    ReplayBuffers local;
    DirectReplay direct(graph, layout, compute, network, true, buffers != nullptr ? *buffers : local);
    if (direct.applies()) {
      if (std::optional<ReplaySummary> summary = direct.summarize(options.compute_slowdown_under_comm)) {
        return std::move(*summary);
      }
    }
  }
  return summarize(graph, EventReplay(graph, layout, compute, network, options).run(),
                   options.compute_slowdown_under_comm);
}

}  // namespace ts::runtime
