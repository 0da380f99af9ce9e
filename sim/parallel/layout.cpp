#include "sim/parallel/layout.h"

#include <algorithm>

#include "sim/base/diagnostic.h"

namespace ts::parallel {

const char* axis_name(Axis a) {
  switch (a) {
    case Axis::kTp: return "tp";
    case Axis::kCp: return "cp";
    case Axis::kDp: return "dp";
    case Axis::kPp: return "pp";
  }
  return "?";
}

Layout::Layout(const ParallelPlan& plan) {
  sizes_ = {plan.tp, plan.cp, plan.dp, plan.pp};
  SIM_ASSERT(plan.order.size() == 4, "axis order must name all four axes");
  std::int64_t stride = 1;
  for (Axis a : plan.order) {
    strides_[static_cast<std::size_t>(a)] = stride;
    stride *= size(a);
  }
  num_ranks_ = stride;
}

Coord Layout::coord(std::int64_t rank) const {
  Coord c;
  for (std::size_t i = 0; i < 4; ++i) c.at[i] = (rank / strides_[i]) % sizes_[i];
  return c;
}

std::int64_t Layout::rank(const Coord& c) const {
  std::int64_t r = 0;
  for (std::size_t i = 0; i < 4; ++i) r += c.at[i] * strides_[i];
  return r;
}

std::vector<std::int32_t> Layout::group(std::int64_t rank_in, Axis axis) const {
  return group(rank_in, axis_bit(axis));
}

std::vector<std::vector<std::int32_t>> Layout::all_groups(Axis axis) const {
  return all_groups(axis_bit(axis));
}

namespace {

// The sub-groups of `full` that `axes` names (shard_groups, replica_groups), in order.
std::vector<std::vector<std::int32_t>> split_group(const std::vector<std::int32_t>& full, unsigned axes) {
  const auto k = static_cast<std::size_t>(split_size(axes));
  SIM_ASSERT(k > 0 && full.size() % k == 0, "a sub-group size must divide its group");
  const std::size_t blocks = full.size() / k;
  std::vector<std::vector<std::int32_t>> out;
  if (axes & kReplicaBit) {
    out.resize(k);
    for (std::size_t i = 0; i < full.size(); ++i) out[i % k].push_back(full[i]);
  } else {
    out.resize(blocks);
    for (std::size_t i = 0; i < full.size(); ++i) out[i / k].push_back(full[i]);
  }
  return out;
}

}  // namespace

std::vector<std::int32_t> Layout::group(std::int64_t rank_in, unsigned axes) const {
  if (split_size(axes) > 0) {
    for (auto& g : split_group(group(rank_in, axes & kAxesMask), axes)) {
      if (std::find(g.begin(), g.end(), static_cast<std::int32_t>(rank_in)) != g.end()) return g;
    }
    SIM_ASSERT(false, "a rank outside its group");
  }
  // Enumerate the masked axes in layout order (innermost first), like an odometer.
  const Coord base = coord(rank_in);
  std::vector<std::size_t> dims;
  std::int64_t count = 1;
  for (std::size_t i = 0; i < 4; ++i) {
    if (axes & (1u << i)) {
      dims.push_back(i);
      count *= sizes_[i];
    }
  }
  std::sort(dims.begin(), dims.end(), [&](std::size_t a, std::size_t b) { return strides_[a] < strides_[b]; });
  std::vector<std::int32_t> g;
  g.reserve(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    Coord c = base;
    std::int64_t rest = i;
    for (std::size_t d : dims) {
      c.at[d] = rest % sizes_[d];
      rest /= sizes_[d];
    }
    g.push_back(static_cast<std::int32_t>(rank(c)));
  }
  return g;
}

std::vector<std::vector<std::int32_t>> Layout::all_groups(unsigned axes) const {
  std::vector<std::vector<std::int32_t>> out;
  if (split_size(axes) > 0) {
    for (const auto& full : all_groups(axes & kAxesMask)) {
      for (auto& g : split_group(full, axes)) out.push_back(std::move(g));
    }
    return out;
  }
  for (std::int64_t r = 0; r < num_ranks_; ++r) {
    const Coord c = coord(r);
    bool leader = true;
    for (std::size_t i = 0; i < 4; ++i) {
      if ((axes & (1u << i)) && c.at[i] != 0) leader = false;
    }
    if (leader) out.push_back(group(r, axes));
  }
  return out;
}

}  // namespace ts::parallel
