#include "sim/trace/run_stats.h"

#include <algorithm>
#include <map>
#include <utility>

namespace ts::trace {
namespace {

using parallel::Stream;
using parallel::Task;
using parallel::TaskKind;

const char* stream_group(Stream s) {
  switch (s) {
    case Stream::kCompute: return "compute";
    case Stream::kTpComm: return "TP comm";
    case Stream::kCpComm: return "CP comm";
    case Stream::kEpComm: return "EP comm";
    case Stream::kDpComm:
    case Stream::kDpReplica: return "DP comm";
    case Stream::kPpRecvPrev:
    case Stream::kPpSendNext:
    case Stream::kPpRecvNext:
    case Stream::kPpSendPrev:
    case Stream::kPpVRecvNext:
    case Stream::kPpVSendPrev:
    case Stream::kPpVRecvPrev:
    case Stream::kPpVSendNext: return "PP";
  }
  return "?";
}

const char* stream_prefix(Stream s) {
  switch (s) {
    case Stream::kCompute: return "compute";
    case Stream::kTpComm: return "TP";
    case Stream::kCpComm: return "CP";
    case Stream::kEpComm: return "EP";
    case Stream::kDpComm:
    case Stream::kDpReplica: return "DP";
    case Stream::kPpRecvPrev:
    case Stream::kPpSendNext:
    case Stream::kPpRecvNext:
    case Stream::kPpSendPrev:
    case Stream::kPpVRecvNext:
    case Stream::kPpVSendPrev:
    case Stream::kPpVRecvPrev:
    case Stream::kPpVSendNext: return "PP";
  }
  return "?";
}

std::string op_kind_name(const parallel::TaskGraph& g, const Task& t) {
  const std::string prefix = stream_prefix(t.stream);
  if (t.kind == TaskKind::kP2p) {
    const auto& c = g.communicators[static_cast<std::size_t>(t.communicator)];
    const bool send = c.ranks[0] == g.devices[static_cast<std::size_t>(t.device)].rank;
    return prefix + (send ? " send " : " recv ") +
           (t.pass == parallel::Pass::kForward ? "activations" : "gradients");
  }
  return prefix + " " + parallel::comm_op_name(t.comm) + " " + parallel::part_name(t.part) + " " +
         parallel::pass_name(t.pass);
}

}  // namespace

RunStats run_stats(const parallel::TaskGraph& g, const runtime::Execution& ex, std::size_t top_k) {
  RunStats stats;
  stats.computed = true;
  if (g.tasks.empty()) return stats;
  // Hardware FLOPs and the device finishing last.
  double flops = 0;
  SimTime last_end;
  std::size_t critical = 0;
  for (std::size_t t = 0; t < g.tasks.size(); ++t) {
    const Task& task = g.tasks[t];
    if (ex.timings[t].end > last_end) {
      last_end = ex.timings[t].end;
      critical = static_cast<std::size_t>(task.device);
    }
    if (task.kind != TaskKind::kCompute || task.ops < 0) continue;
    const auto& dev = g.devices[static_cast<std::size_t>(task.device)];
    flops += ir::total_flops(g.op_lists[static_cast<std::size_t>(task.ops)]).value() *
             static_cast<double>(dev.represents);
  }
  stats.hardware_flops = Flops(flops);
  stats.exposed_comm_rank = g.devices[critical].rank;

  // Busy intervals of the critical device's compute stream (one task at a time: disjoint).
  std::vector<std::pair<std::int64_t, std::int64_t>> busy;
  for (std::size_t t = 0; t < g.tasks.size(); ++t) {
    const Task& task = g.tasks[t];
    if (static_cast<std::size_t>(task.device) != critical || task.stream != Stream::kCompute) continue;
    if (ex.timings[t].end > ex.timings[t].start) busy.emplace_back(ex.timings[t].start.ps(), ex.timings[t].end.ps());
  }
  std::sort(busy.begin(), busy.end());
  auto overlap_with_busy = [&](std::int64_t a, std::int64_t b) {
    std::int64_t covered = 0;
    // First interval ending after a.
    auto it = std::upper_bound(busy.begin(), busy.end(), a,
                               [](std::int64_t v, const std::pair<std::int64_t, std::int64_t>& iv) { return v < iv.second; });
    for (; it != busy.end() && it->first < b; ++it) covered += std::min(b, it->second) - std::max(a, it->first);
    return covered;
  };
  std::map<std::string, ExposedComm> by_name;
  for (std::size_t t = 0; t < g.tasks.size(); ++t) {
    const Task& task = g.tasks[t];
    if (static_cast<std::size_t>(task.device) != critical || task.kind == TaskKind::kCompute) continue;
    const std::int64_t a = ex.timings[t].start.ps(), b = ex.timings[t].end.ps();
    ExposedComm& e = by_name[op_kind_name(g, task)];
    e.stream = stream_group(task.stream);
    ++e.count;
    e.time += Duration::from_ps(b - a);
    e.exposed += Duration::from_ps(b - a - overlap_with_busy(a, b));
  }
  for (auto& [name, e] : by_name) {
    e.name = name;
    if (e.exposed > Duration::zero()) stats.exposed_comm.push_back(e);
  }
  // Most exposed first; ties by name for a deterministic order.
  std::sort(stats.exposed_comm.begin(), stats.exposed_comm.end(), [](const ExposedComm& x, const ExposedComm& y) {
    return x.exposed != y.exposed ? x.exposed > y.exposed : x.name < y.name;
  });
  if (stats.exposed_comm.size() > top_k) stats.exposed_comm.resize(top_k);
  return stats;
}

}  // namespace ts::trace
