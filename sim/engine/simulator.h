// Simulator: the discrete-event engine (clock, event queue ordered by time, phase, sequence).
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "sim/base/units.h"

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
  using Callback = std::function<void()>;

  SimTime now() const { return now_; }
  // Schedules `cb` at absolute time `t` (not before now()).
  EventHandle schedule_at(SimTime t, Callback cb, Phase phase = 0);
  EventHandle schedule_in(Duration d, Callback cb, Phase phase = 0) {
    return schedule_at(now_ + d, std::move(cb), phase);
  }
  // Cancels a pending event; false if it already ran, was cancelled, or never existed.
  bool cancel(EventHandle h);
  // Runs the next event; false when none is left.
  bool step();
  // Runs until the queue is empty.
  void run();
  bool empty() const { return live_ == 0; }
  std::uint64_t events_processed() const { return processed_; }

 private:
  struct Entry {
    std::int64_t time;
    std::uint64_t order;  // phase in the top 8 bits, insertion sequence below
    std::uint32_t slot;
    std::uint32_t generation;
  };
  static bool later(const Entry& a, const Entry& b) {
    return a.time != b.time ? a.time > b.time : a.order > b.order;
  }
  void push(Entry e);
  Entry pop();

  struct Slot {
    Callback cb;
    std::uint32_t generation = 0;
  };
  std::vector<Entry> heap_;
  std::vector<Slot> slots_;
  std::vector<std::uint32_t> free_slots_;
  SimTime now_;
  std::uint64_t seq_ = 0;
  std::uint64_t processed_ = 0;
  std::size_t live_ = 0;
};

}  // namespace ts::engine
