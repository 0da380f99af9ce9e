// Simulator: the discrete-event engine (clock, event queue ordered by time, phase, sequence).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

#include "sim/base/units.h"
#include "sim/engine/event_callback.h"
#include "sim/engine/event_queue.h"

namespace ts::engine {

// Events at the same time run in ascending phase, then in the order they were scheduled.
using Phase = std::uint8_t;

class EventHandle {
 public:
  EventHandle() = default;

 private:
  friend class Simulator;
  EventHandle(std::uint32_t slot, std::uint32_t generation) : slot_(slot), generation_(generation) {}
  std::uint32_t slot_ = 0;
  std::uint32_t generation_ = 0;  // 0 = never scheduled
};

class Simulator {
 public:
  using Callback = EventCallback;

  SimTime now() const { return now_; }
  // Schedules `cb` at absolute time `t` (not before now()). An event scheduled at now() runs
  // after the current event (even with a lower phase) and before later times.
  EventHandle schedule_at(SimTime t, Callback cb, Phase phase = 0);
  EventHandle schedule_in(Duration d, Callback cb, Phase phase = 0) {
    return schedule_at(now_ + d, std::move(cb), phase);
  }
  // Cancels a pending event; false if it already ran (or is running), was cancelled, or never
  // existed. The callback (and what it captured) is destroyed at once.
  bool cancel(EventHandle h);
  // Runs the next event; false when none is left.
  bool step();
  // Runs until the queue is empty.
  void run();
  bool empty() const { return live_ == 0; }
  std::uint64_t events_processed() const { return processed_; }

 private:
  // Brings the slot of an event that will run soon into the cache.
  auto prefetch_slot() {
    return [this](std::uint32_t slot) { __builtin_prefetch(&slots_[slot]); };
  }

  // One cache line per slot: the callback (56 bytes) and the generation of the handle.
  struct alignas(64) Slot {
    Callback cb;
    std::uint32_t generation = 0;
  };
  detail::EventQueue queue_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;
  SimTime now_;
  std::uint64_t seq_ = 0;
  std::uint64_t processed_ = 0;
  std::size_t live_ = 0;
};

}  // namespace ts::engine
