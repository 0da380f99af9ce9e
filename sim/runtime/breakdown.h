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
// (pipeline bubble and waiting for other stages). One more category lies beyond `end`: the time
// the device's compute loses to the communication kernels running beside it (kContention, see
// device_breakdown), which the replay, running every compute task at its uncontended speed, leaves
// out; the iteration lasts `end` plus the contention of the device finishing last.
enum class TimeCategory : std::uint8_t {
  kForward,
  kBackward,
  kRecompute,
  kOptimizer,
  kContention,
  kExposedTp,
  kExposedCp,
  kExposedPp,
  kExposedDp,
  kExposedEp,  // expert parallelism's all-to-all (after CP in priority, before PP)
  kIdle,
};
inline constexpr std::size_t kNumTimeCategories = 11;
const char* time_category_name(TimeCategory c);

struct TimeBreakdown {
  std::array<Duration, kNumTimeCategories> time{};
  Duration& operator[](TimeCategory c) { return time[static_cast<std::size_t>(c)]; }
  Duration operator[](TimeCategory c) const { return time[static_cast<std::size_t>(c)]; }
};

// One breakdown per simulated device over [0, execution.end], plus its contention (see
// device_breakdown) for compute running `slowdown` slower under communication.
std::vector<TimeBreakdown> time_breakdown(const parallel::TaskGraph& graph, const Execution& execution,
                                          double slowdown);

// What a task's running time counts as: its pass on the compute stream, else its stream's
// communication category.
TimeCategory task_category(const parallel::Task& task);

// A backward compute task of `time` whose op list reruns forward ops for `rerun` of it
// (ir::Op::rerun: selective recompute, the op policy, Mini-Sequence's chunks): recompute and
// backward, as the split of its interval (StreamInterval::split).
TimeBreakdown rerun_split(Duration time, Duration rerun);

// A task's interval on its stream, with its category; or, with `split` ≥ 0, the span of a chain
// (LoweringOptions::coarse) from its first to its last compute step, run without a gap: covered
// all along by its compute steps and the tensor-parallel steps between them, which take the
// time in the proportions of split number `split` (see device_breakdown).
struct StreamInterval {
  SimTime start;
  SimTime end;
  TimeCategory category = TimeCategory::kIdle;
  std::int32_t split = -1;
};

// The intervals of one stream, in time order and disjoint (a stream runs one task at a time).
struct StreamIntervals {
  const StreamInterval* first = nullptr;
  const StreamInterval* last = nullptr;
};

// Intervals that repeat, as a skip of steady-state periods records them (replay_blocks): on
// each stream s, the count[s] intervals from index from[s] on occur `copies` times in a row,
// each copy `delta` later than the one before (so the copies take indices from[s] to
// from[s] + copies·count[s]).
struct RepeatedIntervals {
  std::array<std::size_t, parallel::kNumStreams> from{};
  std::array<std::size_t, parallel::kNumStreams> count{};
  std::size_t copies = 0;
  std::int64_t delta = 0;  // picoseconds
  // Where set, device_breakdown adds the copies it stepped over (tests, statistics).
  std::size_t* stepped_over = nullptr;
};

// The breakdown of one device over [0, end] from the intervals of its streams; merging the
// streams' ordered intervals replaces a sort. `splits`: the splits that chain spans name.
// Its contention: communication kernels (NCCL's collectives and transfers) hold SMs and memory
// bandwidth while they run, so compute kernels beside them run `slowdown` slower (a fraction of
// their speed; runtime::ExecuteOptions). Over each period in which CP, PP or DP communication is
// in flight without a break, the compute under it takes slowdown/(1 − slowdown) of its length
// longer, less the time the period's communication ran alone: there the compute waited on the
// communication, which set the pace, and slower compute fills that wait first.
// `repeated` (optional) says which intervals repeat: the result is the same, and the pass over
// the compute stream steps over copies where the state it carries repeats shifted by delta.
TimeBreakdown device_breakdown(const std::array<StreamIntervals, parallel::kNumStreams>& streams,
                               SimTime end, const TimeBreakdown* splits, double slowdown,
                               const RepeatedIntervals* repeated = nullptr);

// What the reports of a replay need (ends, breakdowns, memory peaks) without per-task timings:
// the sweep's replay. Same results as execute() followed by time_breakdown(); it also replays
// coarse graphs (chains of steps, LoweringOptions::coarse), with the results of the fine graph.
struct ReplaySummary {
  SimTime end;                        // when the last task finished
  std::int32_t last_device = 0;       // device of the first task (in graph order) ending at `end`
  std::vector<TimeBreakdown> time;    // per simulated device
  std::vector<DeviceMemory> memory;   // per simulated device, without timeline
  std::uint64_t events = 0;
  std::int64_t tasks = 0;             // of the graph, a chain counting as its steps
  // Blocks of a block program's replay that a skip of steady-state periods passed over
  // (replay_blocks: their results are those of the periods before them, shifted in time).
  std::int64_t skipped_blocks = 0;
  // The iteration's end: the replay's, plus the compute the device finishing last loses to the
  // communication beside it (its kContention).
  SimTime iteration_end() const {
    return time.empty() ? end : end + time[static_cast<std::size_t>(last_device)][TimeCategory::kContention];
  }
};
// The summary of an execution (as replay_summary gives it), with compute `slowdown` slower under
// communication.
ReplaySummary summarize(const parallel::TaskGraph& graph, const Execution& execution, double slowdown);
// `buffers`: memory to reuse (none: the replay allocates its own).
ReplaySummary replay_summary(const parallel::TaskGraph& graph, const parallel::Layout& layout,
                             const compute::ComputeModel& compute, const network::NetworkModel& network,
                             const ExecuteOptions& options, ReplayBuffers* buffers = nullptr);

}  // namespace ts::runtime
