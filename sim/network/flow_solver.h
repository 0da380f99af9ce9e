// Max-min fair bandwidth sharing of flows over links (progressive filling).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace ts::network {

// Flows are lists of link ids; capacities are bytes/s per link id. solve() gives every flow
// its max-min fair rate by progressive filling (Bertsekas & Gallager, "Data Networks", 2nd ed.,
// §6.5.2): all unfrozen flows grow at the same rate until a link saturates, whose flows are then
// frozen; repeat. No flow can then get more without taking from one that has no more.
// Reusable: clear() keeps the buffers.
class MaxMinSolver {
 public:
  void clear();
  // Adds a flow over `links` (a link listed twice counts twice); returns its index.
  std::int32_t add_flow(std::span<const std::int32_t> links);
  std::int32_t num_flows() const { return static_cast<std::int32_t>(offsets_.size()) - 1; }

  // `capacity[l]` for every link id used; infinite capacity never limits.
  // Flows over no link get an infinite rate.
  void solve(std::span<const double> capacity);
  double rate(std::int32_t flow) const { return rates_[static_cast<std::size_t>(flow)]; }
  // Levels of the filling (saturation rounds) of the last solve, for cost reports.
  std::int32_t rounds() const { return rounds_; }

 private:
  std::vector<std::int32_t> offsets_{0};
  std::vector<std::int32_t> links_;
  std::vector<double> rates_;
  std::int32_t rounds_ = 0;
  // Scratch, indexed by link id (grown on demand).
  std::vector<std::int32_t> count_;
  std::vector<double> remaining_;
  std::vector<std::int32_t> link_offsets_;
  std::vector<std::int32_t> link_flows_;
  std::vector<std::int32_t> touched_;
};

}  // namespace ts::network
