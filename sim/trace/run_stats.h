// Figures of a replay beyond the time breakdown: hardware FLOPs (recompute included) and the
// communication ops that leave the compute stream idle, for the run summaries.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/units.h"
#include "sim/parallel/task_graph.h"
#include "sim/runtime/executor.h"

namespace ts::trace {

// One kind of communication op on one device, summed over its layers and micro-batches.
struct ExposedComm {
  std::string name;      // e.g. "TP all_gather attention fwd", "PP send activations"
  std::string stream;    // "TP comm", "CP comm", "PP", "DP comm"
  std::int64_t count = 0;  // tasks of this kind on the device
  Duration time;         // total time they ran
  Duration exposed;      // the part of it during which the device's compute stream was idle
};

struct RunStats {
  bool computed = false;  // false: a default value, the replay was not analysed
  // FLOPs the GPUs execute in one iteration: every compute task's ops (forward, backward,
  // recompute, optimizer), each simulated device counted for the ranks it stands for.
  Flops hardware_flops;
  // Rank of the device whose exposed communication is listed: the device finishing last, whose
  // time breakdown the reports show.
  std::int32_t exposed_comm_rank = -1;
  std::vector<ExposedComm> exposed_comm;  // most exposed first
};

inline constexpr std::size_t kTopExposedComm = 5;

// Analyses a replay: hardware FLOPs over all ranks and the `top_k` most exposed communication
// ops of the device finishing last. A communication task is exposed while it runs and the compute
// stream of its device is not busy (Megatron-LM's "exposed communication"); concurrent exposed
// tasks on different streams each count their own time, so the sum may exceed the exposed_*
// categories of the time breakdown, which attribute each instant once.
RunStats run_stats(const parallel::TaskGraph& graph, const runtime::Execution& execution,
                   std::size_t top_k = kTopExposedComm);

}  // namespace ts::trace
