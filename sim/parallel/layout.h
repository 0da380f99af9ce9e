// Rank layout: Megatron-style mixed radix over an ordered axis list, and communicator groups.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/parallel/plan.h"

namespace ts::parallel {

// A rank's coordinate along each axis, indexed by Axis.
struct Coord {
  std::array<std::int64_t, 4> at{};
  std::int64_t& operator[](Axis a) { return at[static_cast<std::size_t>(a)]; }
  std::int64_t operator[](Axis a) const { return at[static_cast<std::size_t>(a)]; }
};

class Layout {
 public:
  explicit Layout(const ParallelPlan& plan);

  std::int64_t size(Axis a) const { return sizes_[static_cast<std::size_t>(a)]; }
  std::int64_t num_ranks() const { return num_ranks_; }
  // Rank r ↔ coordinates: the first axis of `order` varies fastest (TP innermost by default, so a
  // TP group occupies consecutive ranks, i.e. GPUs of one node).
  Coord coord(std::int64_t rank) const;
  std::int64_t rank(const Coord& c) const;
  // Ranks that differ from `rank` only along `axis`, in axis order (the communicator of `rank`).
  std::vector<std::int32_t> group(std::int64_t rank, Axis axis) const;
  // Every group along `axis` (all communicators of that kind; they run concurrently).
  std::vector<std::vector<std::int32_t>> all_groups(Axis axis) const;
  // Groups spanning several axes at once (e.g. DP × CP for gradient reduction), as bit masks of
  // axis_bit(); ranks in mixed-radix order of the masked axes.
  std::vector<std::int32_t> group(std::int64_t rank, unsigned axes) const;
  std::vector<std::vector<std::int32_t>> all_groups(unsigned axes) const;

 private:
  std::array<std::int64_t, 4> sizes_{};
  std::array<std::int64_t, 4> strides_{};
  std::int64_t num_ranks_ = 1;
};

const char* axis_name(Axis a);
constexpr unsigned axis_bit(Axis a) { return 1u << static_cast<unsigned>(a); }

}  // namespace ts::parallel
