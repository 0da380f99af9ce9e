// NicSharing: network tasks of different kinds in flight on the same NICs share their bandwidth.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sim/base/units.h"
#include "sim/network/flow_solver.h"

namespace ts::network {

// One network task as the replay starts it (docs/network-model.md, "Collectives of different
// kinds sharing a NIC"): its cost alone split into the size-independent latency (never shared)
// and the transfer (bytes over bandwidth, the part that shares), and the NICs it crosses with
// the share of each NIC's bandwidth it uses when alone. Symmetric schedules cross every NIC of
// their groups alike; for others `share` is the largest over the NICs (a task then waits as if
// it loaded each of them that much).
struct NicTask {
  SimTime start;
  Duration latency;
  Duration transfer;
  std::vector<std::int32_t> nics;  // NIC ids (any non-negative numbering), each once
  double share = 1;                // in (0, 1]
  // Tasks of one kind do not slow each other: their cost already counts them running together
  // (the same collective of equivalent groups, costed as one request). They take one flow of
  // the max-min sharing, over all their NICs, at the largest of their shares.
  std::int64_t kind = 0;
};

// Runs tasks through time as a fluid: each in-flight transfer progresses at a rate r ≤ 1 (its
// speed alone = 1), and the rates are re-shared max-min fairly over the NICs whenever a task
// starts or a transfer completes (Bertsekas & Gallager §6.5.2, the progressive filling of
// MaxMinSolver: a kind's bandwidth on each of its NICs is r · share, a NIC's is 1, and no task
// goes faster than alone; tasks of one kind share one rate). A task's end is its transfer's completion plus its latency; a task
// alone, or on NICs no other task uses while it runs, ends at start + latency + transfer
// exactly. Events must come in time order: start() at or after the last event, advance() to
// at most next_completion().
class NicSharing {
 public:
  // Starts `task` at task.start (>= the last event's time); returns its id (0, 1, ...).
  std::int32_t start(const NicTask& task);
  // When the earliest in-flight transfer completes at the current rates; SimTime max if none.
  SimTime next_completion() const;
  // Moves the clock to `now` (<= next_completion()): advances every transfer at its rate,
  // completes those done and re-shares the rest.
  void advance(SimTime now);
  // Task `id`'s end: final once its transfer completed, else projected at the current rates.
  SimTime end(std::int32_t id) const;
  bool transfer_done(std::int32_t id) const;
  // Current rate of task `id`'s transfer (1 = as fast as alone; 0 once done).
  double rate(std::int32_t id) const;

 private:
  struct Task {
    Duration latency;
    double share = 1;
    std::int64_t kind = 0;
    std::vector<std::int32_t> nics;
    double remaining_ps = 0;  // transfer work left, in picoseconds at rate 1
    double rate = 0;
    SimTime done_at;          // transfer completion once done
    bool done = false;
  };
  void reshare();

  std::vector<Task> tasks_;
  std::vector<std::int32_t> active_;  // ids of tasks whose transfer is in flight
  SimTime now_;
  MaxMinSolver solver_;
  std::vector<double> capacity_;
  std::vector<std::int32_t> links_;
  std::vector<std::int64_t> kinds_;
};

// Ends of tasks all known in advance (any order of starts), by NicSharing.
std::vector<SimTime> shared_ends(std::span<const NicTask> tasks);

}  // namespace ts::network
