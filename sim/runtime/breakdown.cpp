#include "sim/runtime/breakdown.h"

#include <algorithm>

namespace ts::runtime {

using parallel::Stream;

const char* time_category_name(TimeCategory c) {
  switch (c) {
    case TimeCategory::kForward: return "forward";
    case TimeCategory::kBackward: return "backward";
    case TimeCategory::kRecompute: return "recompute";
    case TimeCategory::kOptimizer: return "optimizer";
    case TimeCategory::kExposedTp: return "exposed_tp_comm";
    case TimeCategory::kExposedCp: return "exposed_cp_comm";
    case TimeCategory::kExposedPp: return "exposed_pp_comm";
    case TimeCategory::kExposedDp: return "exposed_dp_comm";
    case TimeCategory::kIdle: return "idle";
  }
  return "?";
}

namespace {

TimeCategory compute_category(parallel::Pass p) {
  switch (p) {
    case parallel::Pass::kForward: return TimeCategory::kForward;
    case parallel::Pass::kBackward: return TimeCategory::kBackward;
    case parallel::Pass::kRecompute: return TimeCategory::kRecompute;
    case parallel::Pass::kOptimizer: return TimeCategory::kOptimizer;
  }
  return TimeCategory::kForward;
}

// Communication category of a stream; compute streams map to kIdle (not communication).
TimeCategory comm_category(Stream s) {
  switch (s) {
    case Stream::kCompute: return TimeCategory::kIdle;
    case Stream::kTpComm: return TimeCategory::kExposedTp;
    case Stream::kCpComm: return TimeCategory::kExposedCp;
    case Stream::kDpComm: return TimeCategory::kExposedDp;
    case Stream::kPpRecvPrev:
    case Stream::kPpSendNext:
    case Stream::kPpRecvNext:
    case Stream::kPpSendPrev: return TimeCategory::kExposedPp;
  }
  return TimeCategory::kIdle;
}

struct Edge {
  std::int64_t time;
  int delta;          // +1 start, -1 end
  TimeCategory cat;   // compute categories or communication categories
  bool compute;
};

}  // namespace

std::vector<TimeBreakdown> time_breakdown(const parallel::TaskGraph& g, const Execution& ex) {
  std::vector<std::vector<Edge>> edges(g.devices.size());
  for (std::size_t t = 0; t < g.tasks.size(); ++t) {
    const auto& task = g.tasks[t];
    const auto& timing = ex.timings[t];
    if (timing.end == timing.start) continue;
    const bool compute = task.stream == Stream::kCompute;
    const TimeCategory cat = compute ? compute_category(task.pass) : comm_category(task.stream);
    auto& e = edges[static_cast<std::size_t>(task.device)];
    e.push_back({timing.start.ps(), +1, cat, compute});
    e.push_back({timing.end.ps(), -1, cat, compute});
  }
  std::vector<TimeBreakdown> out(g.devices.size());
  for (std::size_t d = 0; d < g.devices.size(); ++d) {
    auto& e = edges[d];
    std::sort(e.begin(), e.end(), [](const Edge& a, const Edge& b) {
      return a.time != b.time ? a.time < b.time : a.delta < b.delta;  // ends first
    });
    std::array<int, kNumTimeCategories> active{};
    std::int64_t prev = 0;
    auto attribute = [&](std::int64_t until) {
      if (until <= prev) return;
      // Compute first (one compute task at a time), then communication by priority, else idle.
      TimeCategory cat = TimeCategory::kIdle;
      for (auto c : {TimeCategory::kForward, TimeCategory::kBackward, TimeCategory::kRecompute,
                     TimeCategory::kOptimizer, TimeCategory::kExposedTp, TimeCategory::kExposedCp,
                     TimeCategory::kExposedPp, TimeCategory::kExposedDp}) {
        if (active[static_cast<std::size_t>(c)] > 0) {
          cat = c;
          break;
        }
      }
      out[d][cat] += Duration::from_ps(until - prev);
      prev = until;
    };
    for (const Edge& edge : e) {
      attribute(edge.time);
      active[static_cast<std::size_t>(edge.cat)] += edge.delta;
    }
    attribute(ex.end.ps());
  }
  return out;
}

}  // namespace ts::runtime
