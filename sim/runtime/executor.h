// Executor: replays a task graph with the compute, network and memory models, on the event engine
// or, with the same results, by direct evaluation of each task's start and end (see
// executor.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "sim/base/units.h"
#include "sim/compute/compute_model.h"
#include "sim/network/network_model.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/lowering.h"
#include "sim/parallel/task_graph.h"

namespace ts::runtime {

struct TaskTiming {
  SimTime start;
  SimTime end;
};

struct MemorySample {
  SimTime time;
  Bytes dynamic;  // memory above the static footprint
};

struct DeviceMemory {
  Bytes peak_dynamic;            // largest dynamic allocation over the replay
  std::int32_t peak_task = -1;   // task whose start reached that peak
  std::int32_t peak_step = -1;   // coarse graphs: the step of chain task peak_task that did
                                 // (index into TaskGraph::chain_steps), else -1
  std::vector<MemorySample> timeline;  // filled when ExecuteOptions::memory_timeline
  // Block programs (replay_blocks): the micro-batch of the block that reached the peak, whose
  // template's tasks carry another block's; -1 otherwise.
  std::int32_t peak_micro_batch = -1;

  // Records `current` dynamic memory, reached when task `task` (step `step`) started.
  void reach(Bytes current, std::int32_t task, std::int32_t step = -1) {
    if (current <= peak_dynamic) return;
    peak_dynamic = current;
    peak_task = task;
    peak_step = step;
  }
};

// The task during which a device reached its peak, as reports name it ("L79 mlp bwd mb0"); empty
// when it never allocated. `graph`: the graph (or block program's graph) replayed.
std::string peak_label(const parallel::TaskGraph& graph, const DeviceMemory& memory);

struct ExecuteOptions {
  bool memory_timeline = false;  // record DeviceMemory::timeline (replays on the event engine)
  // Replay on the discrete-event engine even where the direct evaluation gives the same result
  // (see direct_replay_applies); tests compare the two.
  bool event_engine = false;
  // How much slower compute kernels run while communication kernels run beside them (the GPU's
  // compute_slowdown_under_comm): sets the breakdowns' contention (see device_breakdown).
  double compute_slowdown_under_comm = 0;
  // Network tasks in flight on the same NICs at once share their bandwidth (network/nic_sharing.h;
  // docs/network-model.md, "Collectives of different kinds sharing a NIC"): replays on the event
  // engine, and needs a graph without chains.
  bool nic_sharing = false;
};

struct Execution {
  SimTime end;                          // when the last task finished
  std::vector<TaskTiming> timings;      // per task
  // Per communication task, how the network model ran it (empty algorithm for compute tasks).
  struct CommChoice {
    network::Algorithm algorithm = network::Algorithm::kAuto;
    network::Protocol protocol = network::Protocol::kSimple;
  };
  std::vector<CommChoice> comm;
  std::vector<DeviceMemory> memory;     // per simulated device
  std::uint64_t events = 0;
  // Per op list of the graph: the time of the forward ops it reruns (ir::Op::rerun), which the
  // time breakdown counts as recompute.
  std::vector<Duration> rerun;
};

// Memory that replays reuse from one call to the next, and the network costs they found: a sweep
// replays thousands of graphs of up to a million tasks, and faulting in fresh memory for each
// costs as much as the replay itself. Not thread-safe: one per thread.
class ReplayBuffers {
 public:
  ReplayBuffers();
  ~ReplayBuffers();
  ReplayBuffers(ReplayBuffers&&) noexcept;
  ReplayBuffers& operator=(ReplayBuffers&&) noexcept;
  struct Storage;  // defined by the replay
  Storage& storage() { return *storage_; }
  // A block program (parallel::lower_blocks) whose memory the next plan's reuses.
  parallel::BlockProgram& block_program() { return block_program_; }

 private:
  std::unique_ptr<Storage> storage_;
  parallel::BlockProgram block_program_;
};

// Duration of a compute task's op list on one GPU.
Duration op_list_time(const compute::ComputeModel& model, const std::vector<ir::Op>& ops);

// Whether the direct evaluation (no event queue: each task's start computed from the ends of
// what it waits for) reproduces the event replay exactly: it needs every device's memory changes
// on one stream and every communicator called from one stream per device by at most its
// simulated members (true of lowered graphs); execute() uses it wherever it applies. (It also
// needs the members of each collective costed alike, which only the replay finds out; where they
// are not, execute() falls back to the event engine.)
bool direct_replay_applies(const parallel::TaskGraph& graph, const parallel::Layout& layout,
                           const compute::ComputeModel& compute, const network::NetworkModel& network);

// Replays the graph: on the event engine, or by direct evaluation where that gives the same
// result and no memory timeline is asked for.
Execution execute(const parallel::TaskGraph& graph, const parallel::Layout& layout,
                  const compute::ComputeModel& compute, const network::NetworkModel& network,
                  const ExecuteOptions& options);

}  // namespace ts::runtime
