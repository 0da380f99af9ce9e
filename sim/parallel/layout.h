// Rank layout: Megatron-style mixed radix over an ordered axis list, and communicator groups.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "sim/parallel/plan.h"

namespace ts::parallel {

// A rank's coordinate along each axis, indexed by Axis.
struct Coord {
  std::array<std::int64_t, kNumAxes> at{};
  std::int64_t& operator[](Axis a) { return at[static_cast<std::size_t>(a)]; }
  std::int64_t operator[](Axis a) const { return at[static_cast<std::size_t>(a)]; }
};

class Layout {
 public:
  explicit Layout(const ParallelPlan& plan);

  std::int64_t size(Axis a) const { return sizes_[static_cast<std::size_t>(a)]; }
  // A rank's coordinates carry both grids; rank() reads the TP, CP, DP and PP ones, and
  // rank_of_expert() the PP and expert ones.
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
  // axis_bit(); ranks in mixed-radix order of the masked axes; a mask with a split (shard_groups,
  // replica_groups) gives the rank's sub-group.
  std::vector<std::int32_t> group(std::int64_t rank, unsigned axes) const;
  std::vector<std::vector<std::int32_t>> all_groups(unsigned axes) const;

 private:
  std::int64_t rank_of_expert(const Coord& c) const;
  std::array<std::int64_t, kNumAxes> sizes_{};
  std::array<std::int64_t, kNumAxes> strides_{};  // of the order axes
  std::vector<Axis> stage_order_;  // the order axes but PP, innermost first
  std::int64_t num_ranks_ = 1;
};

const char* axis_name(Axis a);
constexpr unsigned axis_bit(Axis a) { return 1u << static_cast<unsigned>(a); }

// A group of several axes cut into sub-groups (ParallelPlan::zero_shard_group), in the same mask:
// bits 8–30 hold the sub-group size k, bit 31 which cut. Shard groups: consecutive blocks of k
// ranks of the axes' group; replica groups: the ranks k apart (one of each block).
constexpr unsigned kAxesMask = (1u << kNumAxes) - 1;
constexpr unsigned kExpertAxes = (1u << static_cast<unsigned>(Axis::kEtp)) |
                                 (1u << static_cast<unsigned>(Axis::kEp)) |
                                 (1u << static_cast<unsigned>(Axis::kEdp));
constexpr unsigned kSplitShift = 8;
constexpr unsigned kReplicaBit = 1u << 31;
constexpr std::int64_t kMaxSplit = (std::int64_t{1} << 23) - 1;
constexpr unsigned shard_groups(unsigned axes, std::int64_t k) {
  return (axes & kAxesMask) | (static_cast<unsigned>(k) << kSplitShift);
}
constexpr unsigned replica_groups(unsigned axes, std::int64_t k) { return shard_groups(axes, k) | kReplicaBit; }
constexpr std::int64_t split_size(unsigned axes) { return (axes & ~kReplicaBit) >> kSplitShift; }

}  // namespace ts::parallel
