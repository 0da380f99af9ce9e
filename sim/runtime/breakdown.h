// Time breakdown of a replay: where each simulated device spent the iteration.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/base/units.h"
#include "sim/parallel/task_graph.h"
#include "sim/runtime/executor.h"

namespace ts::runtime {

// Categories partition the iteration [0, end] of one device: at each instant the device is
// computing (forward, backward, recompute or optimizer), or else waiting on the communication
// that is running (exposed TP, CP, PP or DP traffic, in that priority when several run), or idle
// (pipeline bubble and waiting for other stages).
enum class TimeCategory : std::uint8_t {
  kForward,
  kBackward,
  kRecompute,
  kOptimizer,
  kExposedTp,
  kExposedCp,
  kExposedPp,
  kExposedDp,
  kIdle,
};
inline constexpr std::size_t kNumTimeCategories = 9;
const char* time_category_name(TimeCategory c);

struct TimeBreakdown {
  std::array<Duration, kNumTimeCategories> time{};
  Duration& operator[](TimeCategory c) { return time[static_cast<std::size_t>(c)]; }
  Duration operator[](TimeCategory c) const { return time[static_cast<std::size_t>(c)]; }
};

// One breakdown per simulated device over [0, execution.end].
std::vector<TimeBreakdown> time_breakdown(const parallel::TaskGraph& graph, const Execution& execution);

}  // namespace ts::runtime
