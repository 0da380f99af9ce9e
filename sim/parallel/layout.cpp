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
    case Axis::kEtp: return "etp";
    case Axis::kEp: return "ep";
    case Axis::kEdp: return "edp";
  }
  return "?";
}

Layout::Layout(const ParallelPlan& plan) {
  SIM_ASSERT(plan.ep > 0 && plan.etp > 0 && (plan.tp * plan.cp * plan.dp) % (plan.ep * plan.etp) == 0,
             "ep·etp must divide the ranks of a pipeline stage");
  sizes_ = {plan.tp, plan.cp, plan.dp, plan.pp, plan.etp, plan.ep, plan.expert_dp()};
  SIM_ASSERT(plan.order.size() == kNumOrderAxes, "axis order must name all four axes");
  std::int64_t stride = 1;
  for (Axis a : plan.order) {
    strides_[static_cast<std::size_t>(a)] = stride;
    stride *= size(a);
    if (a != Axis::kPp) stage_order_.push_back(a);
  }
  num_ranks_ = stride;
}

Coord Layout::coord(std::int64_t rank) const {
  Coord c;
  for (std::size_t i = 0; i < kNumOrderAxes; ++i) c.at[i] = (rank / strides_[i]) % sizes_[i];
  // The expert grid over the rank's index within its pipeline stage (TP·CP·DP order).
  std::int64_t index = 0, radix = 1;
  for (Axis a : stage_order_) {
    index += c[a] * radix;
    radix *= size(a);
  }
  c[Axis::kEtp] = index % size(Axis::kEtp);
  index /= size(Axis::kEtp);
  c[Axis::kEp] = index % size(Axis::kEp);
  c[Axis::kEdp] = index / size(Axis::kEp);
  return c;
}

std::int64_t Layout::rank(const Coord& c) const {
  std::int64_t r = 0;
  for (std::size_t i = 0; i < kNumOrderAxes; ++i) r += c.at[i] * strides_[i];
  return r;
}

std::int64_t Layout::rank_of_expert(const Coord& c) const {
  std::int64_t index = c[Axis::kEtp] + size(Axis::kEtp) * (c[Axis::kEp] + size(Axis::kEp) * c[Axis::kEdp]);
  Coord d = c;
  for (Axis a : stage_order_) {
    d[a] = index % size(a);
    index /= size(a);
  }
  return rank(d);
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
  // Enumerate the masked axes in layout order (innermost first), like an odometer; the expert
  // axes in their grid's order.
  const Coord base = coord(rank_in);
  const bool expert = (axes & kExpertAxes) != 0;
  SIM_ASSERT(!expert || (axes & kAxesMask & ~kExpertAxes) == 0, "a group of both grids' axes");
  std::vector<std::size_t> dims;
  std::int64_t count = 1;
  for (std::size_t i = 0; i < kNumAxes; ++i) {
    if (axes & (1u << i)) {
      dims.push_back(i);
      count *= sizes_[i];
    }
  }
  if (!expert) {
    std::sort(dims.begin(), dims.end(), [&](std::size_t a, std::size_t b) { return strides_[a] < strides_[b]; });
  }
  std::vector<std::int32_t> g;
  g.reserve(static_cast<std::size_t>(count));
  for (std::int64_t i = 0; i < count; ++i) {
    Coord c = base;
    std::int64_t rest = i;
    for (std::size_t d : dims) {
      c.at[d] = rest % sizes_[d];
      rest /= sizes_[d];
    }
    g.push_back(static_cast<std::int32_t>(expert ? rank_of_expert(c) : rank(c)));
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
  if ((axes & kExpertAxes) == 0) {
    // Order axes only: a group is its leader (the rank with 0 on the masked axes) plus the
    // masked axes' offsets, both counted in mixed radix, innermost axis first, so leaders come
    // in rank order and each group's ranks in group()'s order.
    std::vector<std::size_t> masked, others;
    for (std::size_t i = 0; i < kNumOrderAxes; ++i) ((axes & (1u << i)) != 0 ? masked : others).push_back(i);
    const auto by_stride = [this](std::size_t a, std::size_t b) { return strides_[a] < strides_[b]; };
    std::sort(masked.begin(), masked.end(), by_stride);
    std::sort(others.begin(), others.end(), by_stride);
    const auto offsets = [this](const std::vector<std::size_t>& dims) {
      std::vector<std::int32_t> offs{0};
      for (const std::size_t d : dims) {
        const std::size_t n = offs.size();
        for (std::int64_t k = 1; k < sizes_[d]; ++k) {
          for (std::size_t j = 0; j < n; ++j) offs.push_back(static_cast<std::int32_t>(offs[j] + k * strides_[d]));
        }
      }
      return offs;
    };
    const std::vector<std::int32_t> members = offsets(masked);
    const std::vector<std::int32_t> leaders = offsets(others);
    out.reserve(leaders.size());
    for (const std::int32_t leader : leaders) {
      std::vector<std::int32_t>& g = out.emplace_back(members);
      for (std::int32_t& r : g) r += leader;
    }
    return out;
  }
  for (std::int64_t r = 0; r < num_ranks_; ++r) {
    const Coord c = coord(r);
    bool leader = true;
    for (std::size_t i = 0; i < kNumAxes; ++i) {
      if ((axes & (1u << i)) && c.at[i] != 0) leader = false;
    }
    if (leader) out.push_back(group(r, axes));
  }
  return out;
}

}  // namespace ts::parallel
