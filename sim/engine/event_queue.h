// EventQueue: the engine's priority queue of (time, order, slot) entries, a monotone radix heap.
#pragma once

#include <algorithm>
#include <array>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace ts::engine::detail {

// One queued event: its time, its order among events at the same time (phase in the top 8 bits,
// insertion sequence below) and the slot that holds its callback.
struct QueueEntry {
  std::int64_t time;
  std::uint64_t order;
  std::uint32_t slot;
};

// A radix heap (Ahuja, Mehlhorn, Orlin, Tarjan 1990, "Faster algorithms for the shortest path
// problem", J. ACM 37(2)) over the event time, in base 2^kDigitBits, with ties broken by order.
//
// A discrete-event queue is monotone: no event is scheduled before the current time, so every
// pushed time is >= the last popped time `last_`. An entry whose time differs from last_ lives in
// bucket (level, digit): level = 1 + the index of the highest base-64 digit where its time
// differs from last_, digit = its time's value of that digit. Pushing is an append. Popping takes
// the lowest non-empty bucket (two bit scans), makes its earliest time the new last_ and
// redistributes its other entries into lower levels; every other bucket stays valid because the
// new last_ agrees with the old one on all digits above the bucket's. An entry moves at most
// once per level (11 levels for 64-bit times), in practice about twice.
//
// Entries whose time equals last_ wait in a small binary heap ordered by `order`: same-time
// events run by phase, then insertion sequence, and an event scheduled at the current time with
// a lower phase than the pending ones runs first.
//
// Why this structure: in a bare hold-model loop on the development machine (queue only, same
// random delays as tools/bench), with 1,000 pending entries a binary heap (std::priority_queue)
// ran about 14 M pops/s, this radix heap in base 2 about 18 M and in base 64 about 23 M; with
// 100,000 entries 8, 13 and 16 M. A push costs no comparison, and a pop scans contiguous memory
// instead of following a data-dependent path down a tree. Base 64 moves an entry 1.8 times on
// average with 1,000 entries (base 2: 4.9). tools/bench/README.md has the engine figures.
//
// The `near` hooks are called with the slot of an entry that has just come within one level-1
// bucket (64 ps) of last_, so that its callback can be prefetched a few events before it runs.
class EventQueue {
 public:
  static constexpr int kDigitBits = 6;

  bool empty() const { return size_ == 0; }
  std::size_t size() const { return size_; }
  // The time of the last entry popped; pushes must not be earlier.
  std::int64_t floor() const { return last_; }

  template <class Near>
  void push(const QueueEntry& e, Near&& near) {
    if (e.time == last_) {
      push_current(e);
    } else {
      place(e, near);
    }
    ++size_;
  }

  // Removes and returns the earliest entry. Precondition: !empty().
  template <class Near>
  QueueEntry pop(Near&& near) {
    if (current_.empty()) refill(near);
    if (current_.size() > 1) std::pop_heap(current_.begin(), current_.end(), later_order);
    const QueueEntry e = current_.back();
    current_.pop_back();
    --size_;
    return e;
  }

  // Removes every entry, calling f(entry) for each, and sets the floor to `t`.
  template <class F>
  void clear(std::int64_t t, F&& f) {
    for (const QueueEntry& e : current_) f(e);
    current_.clear();
    for (std::vector<QueueEntry>& b : buckets_) {
      for (const QueueEntry& e : b) f(e);
      b.clear();
    }
    level_mask_ = 0;
    digit_mask_.fill(0);
    size_ = 0;
    last_ = t;
  }

 private:
  static constexpr int kDigits = 1 << kDigitBits;
  static constexpr int kLevels = (64 + kDigitBits - 1) / kDigitBits;

  static bool later_order(const QueueEntry& a, const QueueEntry& b) { return a.order > b.order; }

  template <class Near>
  void place(const QueueEntry& e, Near& near) {
    const auto t = static_cast<std::uint64_t>(e.time);
    const int width = static_cast<int>(std::bit_width(t ^ static_cast<std::uint64_t>(last_)));
    const int level = (width + kDigitBits - 1) / kDigitBits;  // 1..kLevels
    const int digit = static_cast<int>((t >> (kDigitBits * (level - 1))) & (kDigits - 1));
    buckets_[static_cast<std::size_t>(level * kDigits + digit)].push_back(e);
    level_mask_ |= std::uint64_t{1} << level;
    digit_mask_[static_cast<std::size_t>(level)] |= std::uint64_t{1} << digit;
    if (level == 1) near(e.slot);
  }

  void push_current(const QueueEntry& e) {
    current_.push_back(e);
    if (current_.size() > 1) std::push_heap(current_.begin(), current_.end(), later_order);
  }

  // Moves the entries of the earliest time into current_ (precondition: current_ is empty and
  // some bucket is not).
  template <class Near>
  void refill(Near& near) {
    const int level = std::countr_zero(level_mask_);
    auto& digits = digit_mask_[static_cast<std::size_t>(level)];
    const int digit = std::countr_zero(digits);
    std::vector<QueueEntry>& b = buckets_[static_cast<std::size_t>(level * kDigits + digit)];
    digits &= ~(std::uint64_t{1} << digit);
    if (digits == 0) level_mask_ &= ~(std::uint64_t{1} << level);
    if (b.size() == 1) {  // common at level 1: no scan, no redistribution
      last_ = b.front().time;
      current_.push_back(b.front());
      b.clear();
      return;
    }
    std::int64_t t = b.front().time;
    for (const QueueEntry& e : b) t = std::min(t, e.time);
    last_ = t;
    for (const QueueEntry& e : b) {
      if (e.time == t) {
        push_current(e);
      } else {
        place(e, near);  // to a level below `level`: e.time and t agree on the digits above
      }
    }
    b.clear();
  }

  std::vector<QueueEntry> current_;  // time == last_: a min-heap on order
  std::array<std::vector<QueueEntry>, (kLevels + 1) * kDigits> buckets_;  // levels 1..kLevels
  std::array<std::uint64_t, kLevels + 1> digit_mask_{};  // bit d: bucket (level, d) not empty
  std::uint64_t level_mask_ = 0;                         // bit l: some bucket of level l not empty
  std::int64_t last_ = 0;
  std::size_t size_ = 0;
};

}  // namespace ts::engine::detail
