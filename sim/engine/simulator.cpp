#include "sim/engine/simulator.h"

#include <utility>

#include "sim/base/diagnostic.h"

namespace ts::engine {

EventHandle Simulator::schedule_at(SimTime t, Callback cb, Phase phase) {
  SIM_ASSERT(t >= now_, "event scheduled in the past");
  SIM_ASSERT(static_cast<bool>(cb), "event scheduled with an empty callback");
  SIM_ASSERT(seq_ < (std::uint64_t{1} << 56), "event sequence overflow");
  std::uint32_t slot;
  if (free_slots_.empty()) {
    SIM_ASSERT(slots_.size() < 0xffffffffu, "too many pending events");
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
  queue_.push({t.ps(), (std::uint64_t{phase} << 56) | seq_++, slot}, prefetch_slot());
  ++live_;
  return EventHandle(slot, s.generation);
}

bool Simulator::cancel(EventHandle h) {
  if (h.generation_ == 0 || h.slot_ >= slots_.size()) return false;
  Slot& s = slots_[h.slot_];
  if (s.generation != h.generation_ || !s.cb) return false;
  s.cb.reset();  // the queue entry stays and is skipped when popped
  --live_;
  return true;
}

bool Simulator::step() {
  if (live_ == 0) {
    // Only cancelled entries are left (if any): drop them and free their slots. This also keeps
    // the queue's floor at now(), so that events may again be scheduled at any time >= now().
    if (!queue_.empty()) {
      queue_.clear(now_.ps(), [this](const detail::QueueEntry& e) { free_slots_.push_back(e.slot); });
    }
    return false;
  }
  for (;;) {
    const detail::QueueEntry e = queue_.pop(prefetch_slot());
    Slot& s = slots_[e.slot];
    if (!s.cb) {  // cancelled: the slot is free now that its entry is gone
      free_slots_.push_back(e.slot);
      continue;
    }
    now_ = SimTime::from_ps(e.time);
    // Moved out before the call: the callback may schedule events, which may grow slots_.
    Callback cb = std::move(s.cb);
    free_slots_.push_back(e.slot);
    --live_;
    ++processed_;
    cb();
    return true;
  }
}

void Simulator::run() {
  while (step()) {
  }
}

}  // namespace ts::engine
