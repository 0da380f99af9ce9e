#include "sim/engine/simulator.h"

#include <utility>

#include "sim/base/diagnostic.h"

namespace ts::engine {

EventHandle Simulator::schedule_at(SimTime t, Callback cb, Phase phase) {
  SIM_ASSERT(t >= now_, "event scheduled in the past");
  SIM_ASSERT(seq_ < (std::uint64_t{1} << 56), "event sequence overflow");
  std::uint32_t slot;
  if (free_slots_.empty()) {
    slot = static_cast<std::uint32_t>(slots_.size());
    slots_.emplace_back();
  } else {
    slot = free_slots_.back();
    free_slots_.pop_back();
  }
  Slot& s = slots_[slot];
  s.cb = std::move(cb);
  ++s.generation;
  if (s.generation == 0) s.generation = 1;  // 0 means "never scheduled"
  push({t.ps(), (std::uint64_t{phase} << 56) | seq_++, slot, s.generation});
  ++live_;
  return EventHandle(slot, s.generation);
}

bool Simulator::cancel(EventHandle h) {
  if (h.generation_ == 0 || h.slot_ >= slots_.size()) return false;
  Slot& s = slots_[h.slot_];
  if (s.generation != h.generation_ || !s.cb) return false;
  s.cb = nullptr;  // the heap entry stays and is skipped when popped
  --live_;
  return true;
}

bool Simulator::step() {
  while (!heap_.empty()) {
    const Entry e = pop();
    Slot& s = slots_[e.slot];
    if (s.generation != e.generation || !s.cb) {
      if (s.generation == e.generation) free_slots_.push_back(e.slot);
      continue;  // cancelled
    }
    now_ = SimTime::from_ps(e.time);
    Callback cb = std::move(s.cb);
    s.cb = nullptr;
    free_slots_.push_back(e.slot);
    --live_;
    ++processed_;
    cb();
    return true;
  }
  return false;
}

void Simulator::run() {
  while (step()) {
  }
}

void Simulator::push(Entry e) {
  heap_.push_back(e);
  std::size_t i = heap_.size() - 1;
  while (i > 0) {
    const std::size_t parent = (i - 1) / 2;
    if (!later(heap_[parent], e)) break;
    heap_[i] = heap_[parent];
    i = parent;
  }
  heap_[i] = e;
}

Simulator::Entry Simulator::pop() {
  const Entry top = heap_.front();
  const Entry last = heap_.back();
  heap_.pop_back();
  const std::size_t n = heap_.size();
  if (n > 0) {
    std::size_t i = 0;
    for (;;) {
      std::size_t child = 2 * i + 1;
      if (child >= n) break;
      if (child + 1 < n && later(heap_[child], heap_[child + 1])) ++child;
      if (!later(last, heap_[child])) break;
      heap_[i] = heap_[child];
      i = child;
    }
    heap_[i] = last;
  }
  return top;
}

}  // namespace ts::engine
