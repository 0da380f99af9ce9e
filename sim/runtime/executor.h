// Executor: replays a task graph on the event engine with the compute, network and memory models.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/base/units.h"
#include "sim/compute/compute_model.h"
#include "sim/network/network_model.h"
#include "sim/parallel/layout.h"
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
  std::vector<MemorySample> timeline;  // filled when ExecuteOptions::memory_timeline
};

struct ExecuteOptions {
  bool memory_timeline = false;
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
};

// Duration of a compute task's op list on one GPU.
Duration op_list_time(const compute::ComputeModel& model, const std::vector<ir::Op>& ops);

Execution execute(const parallel::TaskGraph& graph, const parallel::Layout& layout,
                  const compute::ComputeModel& compute, const network::NetworkModel& network,
                  const ExecuteOptions& options);

}  // namespace ts::runtime
