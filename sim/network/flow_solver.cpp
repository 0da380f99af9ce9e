#include "sim/network/flow_solver.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "sim/base/diagnostic.h"

namespace ts::network {

void MaxMinSolver::clear() {
  offsets_.assign(1, 0);
  links_.clear();
  rates_.clear();
  rounds_ = 0;
}

std::int32_t MaxMinSolver::add_flow(std::span<const std::int32_t> links) {
  links_.insert(links_.end(), links.begin(), links.end());
  offsets_.push_back(static_cast<std::int32_t>(links_.size()));
  return num_flows() - 1;
}

void MaxMinSolver::solve(std::span<const double> capacity) {
  constexpr double kInf = std::numeric_limits<double>::infinity();
  const auto nf = static_cast<std::size_t>(num_flows());
  rates_.assign(nf, kInf);
  rounds_ = 0;
  if (nf == 0) return;
  if (count_.size() < capacity.size()) {
    count_.resize(capacity.size(), 0);
    remaining_.resize(capacity.size(), 0.0);
  }

  // Flows per link (only links of finite capacity constrain).
  touched_.clear();
  for (const std::int32_t l : links_) {
    const auto li = static_cast<std::size_t>(l);
    SIM_ASSERT(li < capacity.size(), "flow over a link without capacity");
    if (!std::isfinite(capacity[li])) continue;
    if (count_[li]++ == 0) touched_.push_back(l);
  }
  if (touched_.empty()) return;
  // CSR of link → flows over the touched links, keyed by position in touched_.
  link_offsets_.assign(touched_.size() + 1, 0);
  for (std::size_t t = 0; t < touched_.size(); ++t) {
    const auto li = static_cast<std::size_t>(touched_[t]);
    link_offsets_[t + 1] = link_offsets_[t] + count_[li];
    remaining_[li] = capacity[li];
    count_[li] = static_cast<std::int32_t>(t);  // temporarily: the link's slot
  }
  std::vector<std::int32_t> fill(link_offsets_.begin(), link_offsets_.end() - 1);
  link_flows_.resize(static_cast<std::size_t>(link_offsets_.back()));
  for (std::size_t f = 0; f < nf; ++f) {
    for (std::int32_t i = offsets_[f]; i < offsets_[f + 1]; ++i) {
      const auto li = static_cast<std::size_t>(links_[static_cast<std::size_t>(i)]);
      if (!std::isfinite(capacity[li])) continue;
      const auto slot = static_cast<std::size_t>(count_[li]);
      link_flows_[static_cast<std::size_t>(fill[slot]++)] = static_cast<std::int32_t>(f);
    }
  }
  for (std::size_t t = 0; t < touched_.size(); ++t) {
    const auto li = static_cast<std::size_t>(touched_[t]);
    count_[li] = link_offsets_[t + 1] - link_offsets_[t];
  }

  // Progressive filling over the links that still carry unfrozen flows.
  std::vector<std::size_t> active(touched_.size());
  for (std::size_t t = 0; t < active.size(); ++t) active[t] = t;
  std::vector<char> frozen(nf, 0);
  std::vector<std::size_t> saturated;
  double level = 0;
  while (!active.empty()) {
    ++rounds_;
    double delta = kInf;
    for (const std::size_t t : active) {
      const auto li = static_cast<std::size_t>(touched_[t]);
      delta = std::min(delta, remaining_[li] / count_[li]);
    }
    delta = std::max(delta, 0.0);
    level += delta;
    const double tol = delta * 1e-9;
    // Every active link gives delta to each of its unfrozen flows (counts as at the round's
    // start); those left with no spare capacity saturate and freeze their flows.
    saturated.clear();
    for (const std::size_t t : active) {
      const auto li = static_cast<std::size_t>(touched_[t]);
      if (remaining_[li] / count_[li] <= delta + tol) {
        remaining_[li] = 0.0;
        saturated.push_back(t);
      } else {
        remaining_[li] -= delta * count_[li];
      }
    }
    for (const std::size_t t : saturated) {
      for (std::int32_t i = link_offsets_[t]; i < link_offsets_[t + 1]; ++i) {
        const auto f = static_cast<std::size_t>(link_flows_[static_cast<std::size_t>(i)]);
        if (frozen[f]) continue;
        frozen[f] = 1;
        rates_[f] = level;
        for (std::int32_t k = offsets_[f]; k < offsets_[f + 1]; ++k) {
          const auto lk = static_cast<std::size_t>(links_[static_cast<std::size_t>(k)]);
          if (std::isfinite(capacity[lk])) --count_[lk];
        }
      }
    }
    std::erase_if(active, [&](std::size_t t) {
      const auto li = static_cast<std::size_t>(touched_[t]);
      return count_[li] <= 0 || remaining_[li] <= 0.0;
    });
  }
  for (const std::int32_t l : touched_) count_[static_cast<std::size_t>(l)] = 0;
}

}  // namespace ts::network
