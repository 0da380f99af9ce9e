#include "sim/network/nic_sharing.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "sim/base/diagnostic.h"

namespace ts::network {

namespace {

// Picoseconds for `work_ps` of work at `rate`, rounded up so that the transfer is done then.
std::int64_t time_for(double work_ps, double rate) {
  if (rate >= 1.0) return static_cast<std::int64_t>(std::ceil(work_ps - 1e-6));
  return static_cast<std::int64_t>(std::ceil(work_ps / rate - 1e-6));
}

}  // namespace

std::int32_t NicSharing::start(const NicTask& task) {
  SIM_ASSERT(task.start >= now_, "NicSharing: a task started before the last event");
  SIM_ASSERT(task.share > 0 && task.share <= 1, "NicSharing: share outside (0, 1]");
  advance(task.start);
  Task t;
  t.latency = task.latency;
  t.share = task.share;
  t.kind = task.kind;
  t.nics = task.nics;
  t.remaining_ps = static_cast<double>(task.transfer.ps());
  const auto id = static_cast<std::int32_t>(tasks_.size());
  if (task.transfer.ps() <= 0 || task.nics.empty()) {
    // Nothing to share: the task runs at its own speed whatever else is in flight.
    t.done = true;
    t.done_at = task.start + task.transfer;
    t.remaining_ps = 0;
    tasks_.push_back(std::move(t));
    return id;
  }
  tasks_.push_back(std::move(t));
  active_.push_back(id);
  reshare();
  return id;
}

SimTime NicSharing::next_completion() const {
  SimTime next = SimTime::from_ps(std::numeric_limits<std::int64_t>::max());
  for (const std::int32_t id : active_) {
    const Task& t = tasks_[static_cast<std::size_t>(id)];
    next = std::min(next, now_ + Duration::from_ps(time_for(t.remaining_ps, t.rate)));
  }
  return next;
}

void NicSharing::advance(SimTime now) {
  SIM_ASSERT(now >= now_, "NicSharing: time runs backwards");
  // Completions may come one after another before `now`: take each in turn, re-sharing after it.
  while (!active_.empty()) {
    const SimTime next = std::min(now, next_completion());
    const double dt = static_cast<double>((next - now_).ps());
    bool completed = false;
    for (const std::int32_t id : active_) {
      Task& t = tasks_[static_cast<std::size_t>(id)];
      t.remaining_ps -= t.rate * dt;
      if (t.remaining_ps <= 0.5) {
        t.remaining_ps = 0;
        t.done = true;
        t.done_at = next;
        t.rate = 0;
        completed = true;
      }
    }
    now_ = next;
    if (completed) {
      std::erase_if(active_, [&](std::int32_t id) { return tasks_[static_cast<std::size_t>(id)].done; });
      reshare();
    }
    if (next == now) break;
  }
  now_ = now;
}

void NicSharing::reshare() {
  // NIC ids → link ids 0..K-1; then one private link per active task capping it at its speed
  // alone (its share of a NIC).
  std::vector<std::int32_t> ids;
  for (const std::int32_t id : active_) {
    const Task& t = tasks_[static_cast<std::size_t>(id)];
    ids.insert(ids.end(), t.nics.begin(), t.nics.end());
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  const auto num_nics = ids.size();
  capacity_.assign(num_nics, 1.0);
  // One flow per kind: the union of its tasks' NICs, capped at the largest of their shares.
  kinds_.clear();
  for (const std::int32_t id : active_) kinds_.push_back(tasks_[static_cast<std::size_t>(id)].kind);
  std::sort(kinds_.begin(), kinds_.end());
  kinds_.erase(std::unique(kinds_.begin(), kinds_.end()), kinds_.end());
  const auto flow_of = [&](const Task& t) {
    return static_cast<std::size_t>(std::lower_bound(kinds_.begin(), kinds_.end(), t.kind) - kinds_.begin());
  };
  std::vector<std::vector<std::int32_t>> flow_links(kinds_.size());
  std::vector<double> cap(kinds_.size(), 0.0);
  for (const std::int32_t id : active_) {
    const Task& t = tasks_[static_cast<std::size_t>(id)];
    const std::size_t f = flow_of(t);
    for (const std::int32_t nic : t.nics) {
      flow_links[f].push_back(static_cast<std::int32_t>(std::lower_bound(ids.begin(), ids.end(), nic) - ids.begin()));
    }
    cap[f] = std::max(cap[f], t.share);
  }
  solver_.clear();
  for (std::size_t f = 0; f < kinds_.size(); ++f) {
    links_ = flow_links[f];
    std::sort(links_.begin(), links_.end());
    links_.erase(std::unique(links_.begin(), links_.end()), links_.end());
    links_.push_back(static_cast<std::int32_t>(num_nics + f));
    capacity_.push_back(cap[f]);
    solver_.add_flow(links_);
  }
  solver_.solve(capacity_);
  for (const std::int32_t id : active_) {
    Task& t = tasks_[static_cast<std::size_t>(id)];
    const std::size_t f = flow_of(t);
    // The cap link makes the flow's rate <= its share; alone it is exactly that: rate 1.
    t.rate = std::min(1.0, solver_.rate(static_cast<std::int32_t>(f)) / cap[f]);
    if (t.rate >= 1.0 - 1e-12) t.rate = 1.0;
  }
}

SimTime NicSharing::end(std::int32_t id) const {
  const Task& t = tasks_[static_cast<std::size_t>(id)];
  if (t.done) return t.done_at + t.latency;
  return now_ + Duration::from_ps(time_for(t.remaining_ps, t.rate)) + t.latency;
}

bool NicSharing::transfer_done(std::int32_t id) const {
  return tasks_[static_cast<std::size_t>(id)].done;
}

double NicSharing::rate(std::int32_t id) const { return tasks_[static_cast<std::size_t>(id)].rate; }

std::vector<SimTime> shared_ends(std::span<const NicTask> tasks) {
  std::vector<std::size_t> order(tasks.size());
  std::iota(order.begin(), order.end(), std::size_t{0});
  std::stable_sort(order.begin(), order.end(),
                   [&](std::size_t a, std::size_t b) { return tasks[a].start < tasks[b].start; });
  NicSharing sharing;
  std::vector<std::int32_t> id(tasks.size());
  for (const std::size_t i : order) id[i] = sharing.start(tasks[i]);
  sharing.advance(SimTime::from_ps(std::numeric_limits<std::int64_t>::max()));
  std::vector<SimTime> ends(tasks.size());
  for (std::size_t i = 0; i < tasks.size(); ++i) ends[i] = sharing.end(id[i]);
  return ends;
}

}  // namespace ts::network
