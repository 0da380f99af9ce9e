// NetworkModel: runs collective schedules on the topology with max-min link sharing.
#include "sim/network/network_model.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>

#include "sim/base/diagnostic.h"
#include "sim/base/hash.h"
#include "sim/network/flow_solver.h"

namespace ts::network {

using topology::LinkId;
using topology::LinkKind;

// The size-independent cost of one schedule on one set of groups.
struct NetworkModel::Evaluated {
  Algorithm algorithm = Algorithm::kRing;
  std::string_view variant;
  double seconds_per_byte = 0;  // bandwidth term per byte of the collective
  HopCounts hops;
  bool nvls = false;
  bool p2p = false;
  Duration network_hop_extra;  // fabric switches beyond the first, per hop between nodes
};

struct NetworkModel::State {
  std::mutex mutex;
  MaxMinSolver solver;
  std::vector<LinkId> path;
  std::vector<double> fractions;
  // Achievable capacity per link id, by NVLink mode: key = NVLink efficiency used.
  std::map<double, std::vector<double>> capacity;

  struct Entry {
    CollectiveOp op;
    Algorithm algorithm;
    TokenRouting routing;
    std::vector<std::int32_t> flat;  // the groups, concatenated
    std::int32_t group_size;
    std::vector<Evaluated> evaluated;
  };
  std::unordered_map<std::uint64_t, std::vector<Entry>> cache;
  std::size_t cache_entries = 0;
};

namespace {

constexpr std::size_t kMaxCacheEntries = 1 << 14;

}  // namespace

NetworkModel::NetworkModel(const topology::Topology& topo) : NetworkModel(topo, ideal_profile()) {}

NetworkModel::NetworkModel(const topology::Topology& topo, const NetworkCalibration& calibration)
    : topo_(topo), state_(std::make_unique<State>()) {
  const NetworkProfile* p = find_profile(calibration, topo.spec().gpu);
  if (p == nullptr) {
    std::string known;
    for (const auto& prof : calibration.profiles) {
      for (const auto& g : prof.gpus) known += (known.empty() ? "" : ", ") + g;
    }
    throw InputError(Diagnostic{calibration.file, 0, "profile",
                                "no network profile lists GPU '" + topo.spec().gpu + "' (listed: " + known + ")"});
  }
  profile_ = *p;
}

NetworkModel::NetworkModel(const topology::Topology& topo, NetworkProfile profile)
    : topo_(topo), profile_(std::move(profile)), state_(std::make_unique<State>()) {}

NetworkModel::~NetworkModel() = default;
NetworkModel::NetworkModel(NetworkModel&&) noexcept = default;

bool NetworkModel::nvls_available() const {
  return topo_.spec().scale_up.nvlink_sharp && profile_.nvls_efficiency > 0 &&
         topo_.spec().scale_up.gpus_per_domain > 1;
}

namespace {

// The request's groups as the schedules walk them (`positions`: node by node for collectives, as
// NCCL orders rings by topology; rank order for send/recv) and their common shape (flat when the
// groups differ; no per-node split for send/recv).
GroupShape place(const NetworkModel& model, const CollectiveRequest& r, std::vector<Group>& positions) {
  const auto n = static_cast<std::int32_t>(r.groups.front().size());
  positions = r.groups;
  const bool ranked = r.op == CollectiveOp::kSendRecv;
  if (!ranked) {
    for (auto& g : positions) std::sort(g.begin(), g.end());
  }
  GroupShape shape = model.shape_of(positions.front());
  for (const auto& g : positions) {
    const GroupShape s = model.shape_of(g);
    if (!(s == shape)) shape = GroupShape{n, std::max(shape.nodes, s.nodes), 0};
  }
  if (ranked) shape.per_node = 0;
  return shape;
}

}  // namespace

GroupShape NetworkModel::shape_of(const Group& group) const {
  GroupShape s;
  s.size = static_cast<std::int32_t>(group.size());
  if (group.empty()) return s;
  // Scale-up domain of every member, sorted: runs of equal domains are the per-domain counts
  // (GroupShape calls a domain a node).
  std::vector<std::int32_t> nodes;
  nodes.reserve(group.size());
  for (const std::int32_t g : group) {
    SIM_ASSERT(g >= 0 && g < topo_.num_gpus(), "GPU index outside the cluster");
    nodes.push_back(topo_.domain_of(g));
  }
  if (!std::is_sorted(nodes.begin(), nodes.end())) std::sort(nodes.begin(), nodes.end());
  std::int32_t run = 0;
  for (std::size_t i = 0; i < nodes.size(); ++i) {
    ++run;
    if (i + 1 == nodes.size() || nodes[i + 1] != nodes[i]) {
      if (s.nodes == 0) s.per_node = run;
      if (run != s.per_node) s.per_node = 0;
      ++s.nodes;
      run = 0;
    }
  }
  return s;
}

namespace {

// The capacity of every link at the achievable fraction of its line rate: NVLink at
// `nvlink_efficiency`, NIC and fabric links at the network efficiency, PCIe at line rate.
std::vector<double> capacities(const topology::Topology& topo, double nvlink_efficiency, double network_efficiency) {
  std::vector<double> cap;
  cap.reserve(static_cast<std::size_t>(topo.num_links()));
  for (const auto& l : topo.links()) {
    double eff = 1.0;
    switch (l.kind) {
      case LinkKind::kNvLink: eff = nvlink_efficiency; break;
      case LinkKind::kPcie: eff = 1.0; break;
      case LinkKind::kNetwork:
      case LinkKind::kFabric: eff = network_efficiency; break;
    }
    cap.push_back(l.bandwidth.bytes_per_s() * eff);
  }
  return cap;
}

}  // namespace

std::vector<CollectiveCost> NetworkModel::candidates(const CollectiveRequest& r) const {
  SIM_ASSERT(!r.groups.empty() && !r.groups.front().empty(), "collective without a group");
  const auto n = static_cast<std::int32_t>(r.groups.front().size());
  for (const auto& g : r.groups) SIM_ASSERT(static_cast<std::int32_t>(g.size()) == n, "groups of unequal size");
  if (n == 1) return {CollectiveCost{Duration::zero(), r.algorithm == Algorithm::kAuto ? Algorithm::kRing : r.algorithm,
                                     Protocol::kSimple, {}, Duration::zero()}};

  std::unique_lock lock(state_->mutex);
  State& st = *state_;

  // Cache lookup by (op, algorithm, groups).
  std::uint64_t h = fnv_mix(fnv_mix(kFnvOffset, static_cast<std::uint64_t>(r.op)), static_cast<std::uint64_t>(r.algorithm));
  h = fnv_mix(h, static_cast<std::uint64_t>(n));
  for (const std::int64_t v : {r.routing.experts, r.routing.top_k, r.routing.expert_groups, r.routing.group_limit}) {
    h = fnv_mix(h, static_cast<std::uint64_t>(v));
  }
  for (const auto& g : r.groups) {
    for (const std::int32_t x : g) h = fnv_mix(h, static_cast<std::uint64_t>(x));
  }
  const auto matches = [&](const State::Entry& e) {
    if (e.op != r.op || e.algorithm != r.algorithm || e.group_size != n || !(e.routing == r.routing)) return false;
    if (e.flat.size() != r.groups.size() * static_cast<std::size_t>(n)) return false;
    std::size_t i = 0;
    for (const auto& g : r.groups) {
      if (!std::equal(g.begin(), g.end(), e.flat.begin() + static_cast<std::ptrdiff_t>(i))) return false;
      i += g.size();
    }
    return true;
  };
  const std::vector<Evaluated>* evaluated = nullptr;
  std::vector<Evaluated> fresh;
  if (caching_) {
    auto it = st.cache.find(h);
    if (it != st.cache.end()) {
      for (const auto& e : it->second) {
        if (matches(e)) evaluated = &e.evaluated;
      }
    }
  }

  if (evaluated == nullptr) {
    std::vector<Group> positions;
    GroupShape shape = place(*this, r, positions);
    // Groups inside one node each use only their own GPUs' NVLink links (the NVSwitch is
    // non-blocking), so they cannot slow each other down: cost the first alone.
    if (shape.nodes == 1) positions.resize(1);

    std::vector<Algorithm> algos;
    if (r.algorithm != Algorithm::kAuto) {
      algos.push_back(r.algorithm);
    } else {
      switch (r.op) {
        case CollectiveOp::kAllReduce:
          // NCCL's all-reduce algorithms: ring, tree, NVLS in a node, NVLSTree across nodes.
          algos = {Algorithm::kRing, Algorithm::kTree, Algorithm::kNvls};
          if (nvls_available()) algos.push_back(Algorithm::kHierarchical);
          break;
        case CollectiveOp::kAllGather:
        case CollectiveOp::kReduceScatter:
        case CollectiveOp::kBroadcast: algos = {Algorithm::kRing}; break;
        case CollectiveOp::kAllToAll:
        case CollectiveOp::kSendRecv: algos = {Algorithm::kDirect}; break;
      }
    }
    // A hierarchical token dispatch runs its own schedule across nodes (inside one node, or on
    // groups spread unevenly, it is the direct all-to-all).
    const bool dispatch = r.op == CollectiveOp::kAllToAll && r.routing.experts > 0 && shape.nodes > 1 &&
                          shape.per_node > 0 && shape.per_node * shape.nodes == n &&
                          r.routing.experts % shape.nodes == 0;
    if (dispatch && r.algorithm == Algorithm::kAuto) algos = {Algorithm::kHierarchical};

    const std::int32_t ranks_in_node = shape.nodes == 1 ? n : shape.per_node;
    const double ring_nvlink = profile_.nvlink_efficiency * profile_.ring_nvlink_factor(ranks_in_node);
    for (const Algorithm a : algos) {
      const bool hierarchical_dispatch = dispatch && a == Algorithm::kHierarchical;
      const std::vector<Schedule> schedules = hierarchical_dispatch
                                                  ? std::vector<Schedule>{dispatch_schedule(shape, r.routing)}
                                                  : build_schedules(r.op, a, shape, nvls_available());
      for (const Schedule& sc : schedules) {
        Evaluated ev;
        ev.algorithm = sc.algorithm;
        ev.variant = sc.variant;
        ev.hops = sc.hops;
        ev.nvls = sc.nvls;
        ev.p2p = sc.p2p;
        std::int32_t fabric_links = 0;
        for (const Step& step : sc.steps) {
          st.solver.clear();
          st.fractions.clear();
          for (const auto& g : positions) {
            for (const Pattern& p : step.patterns) {
              for_each_transfer(p, sc.shape, [&](std::int32_t src, std::int32_t dst, bool src_sw, bool dst_sw) {
                st.path.clear();
                const std::int32_t gs = g[static_cast<std::size_t>(src)];
                const std::int32_t gd = g[static_cast<std::size_t>(dst)];
                if (src_sw) {
                  st.path.push_back(topo_.nvlink_down(gd));
                } else if (dst_sw) {
                  st.path.push_back(topo_.nvlink_up(gs));
                } else {
                  topo_.route(gs, gd, st.path);
                  std::int32_t f = 0;
                  for (const LinkId l : st.path) f += topo_.link(l).kind == LinkKind::kFabric ? 1 : 0;
                  fabric_links = std::max(fabric_links, f);
                }
                st.solver.add_flow(st.path);
                st.fractions.push_back(p.fraction);
              });
            }
          }
          const double nvl = step.nvls ? profile_.nvls_efficiency : ring_nvlink;
          auto cap = st.capacity.find(nvl);
          if (cap == st.capacity.end()) {
            cap = st.capacity.emplace(nvl, capacities(topo_, nvl, profile_.network_efficiency)).first;
          }
          st.solver.solve(cap->second);
          double step_spb = 0;
          for (std::int32_t f = 0; f < st.solver.num_flows(); ++f) {
            const double rate = st.solver.rate(f);
            SIM_ASSERT(rate > 0, "a transfer over a link without bandwidth");
            step_spb = std::max(step_spb, st.fractions[static_cast<std::size_t>(f)] / rate);
          }
          if (step.tree) step_spb /= profile_.tree_bandwidth_fraction;
          ev.seconds_per_byte += static_cast<double>(step.repeat) * step_spb;
        }
        ev.network_hop_extra = topo_.spec().fabric.switch_latency * fabric_links;
        // A dispatch inside one node or on groups spread unevenly runs the direct all-to-all,
        // each token once per destination rank (rank_dedup): every pair's share alike.
        if (r.routing.experts > 0 && !hierarchical_dispatch && r.op == CollectiveOp::kAllToAll) {
          ev.seconds_per_byte *= rank_dedup(r.routing, n);
        }
        fresh.push_back(ev);
      }
    }
    if (fresh.empty()) {
      throw InputError(Diagnostic{"", 0, "algorithm",
                                  "algorithm '" + std::string(algorithm_name(r.algorithm)) + "' does not apply to " +
                                      std::string(collective_name(r.op)) + " on this group (" + std::to_string(n) +
                                      " GPUs on " + std::to_string(shape.nodes) + " nodes)"});
    }
    if (caching_) {
      if (st.cache_entries >= kMaxCacheEntries) {
        st.cache.clear();
        st.cache_entries = 0;
      }
      State::Entry e{r.op, r.algorithm, r.routing, {}, n, fresh};
      e.flat.reserve(r.groups.size() * static_cast<std::size_t>(n));
      for (const auto& g : r.groups) e.flat.insert(e.flat.end(), g.begin(), g.end());
      auto& bucket = st.cache[h];
      bucket.push_back(std::move(e));
      ++st.cache_entries;
      evaluated = &bucket.back().evaluated;
    } else {
      evaluated = &fresh;
    }
  }

  // Protocols: time = fixed + hops · step latency + bytes · seconds_per_byte / fraction.
  const double bytes = r.bytes.real();
  std::vector<CollectiveCost> out;
  for (const Evaluated& ev : *evaluated) {
    CollectiveCost best;
    best.time = Duration::max();
    bool found = false;  // a time saturated at Duration::max() (absurd sizes) still counts
    for (const Protocol proto : kProtocols) {
      const ProtocolCalibration& pc = profile_.protocol(proto);
      if (!pc.enabled || pc.bandwidth_fraction <= 0) continue;
      if (ev.nvls && proto != Protocol::kSimple) continue;
      Duration latency = ev.nvls ? profile_.nvls_base_latency : ev.p2p ? profile_.p2p_latency : pc.base_latency;
      latency += pc.ring.nvlink * ev.hops.ring_nvlink + (pc.ring.network + ev.network_hop_extra) * ev.hops.ring_network +
                 pc.tree.nvlink * ev.hops.tree_nvlink + (pc.tree.network + ev.network_hop_extra) * ev.hops.tree_network;
      const Duration t = bytes <= 0 ? Duration::zero()
                                    : latency + Duration::from_seconds(bytes * ev.seconds_per_byte / pc.bandwidth_fraction);
      if (!found || t < best.time) {
        best = CollectiveCost{t, ev.algorithm, proto, ev.variant, bytes <= 0 ? Duration::zero() : latency};
        found = true;
      }
    }
    if (found) out.push_back(best);
  }
  std::stable_sort(out.begin(), out.end(), [](const CollectiveCost& a, const CollectiveCost& b) { return a.time < b.time; });
  return out;
}

NicLoad NetworkModel::nic_load(const CollectiveRequest& r, const CollectiveCost& cost) const {
  NicLoad load;
  const auto n = static_cast<std::int32_t>(r.groups.front().size());
  if (n == 1 || r.bytes.count() <= 0) return load;
  // The groups' positions and shape, and the schedule, as candidates() builds them.
  std::vector<Group> positions;
  const GroupShape shape = place(*this, r, positions);
  if (shape.nodes == 1) return load;  // no NIC crossed
  const bool dispatch = r.op == CollectiveOp::kAllToAll && r.routing.experts > 0 && shape.per_node > 0 &&
                        shape.per_node * shape.nodes == n && r.routing.experts % shape.nodes == 0 &&
                        cost.algorithm == Algorithm::kHierarchical;
  const std::vector<Schedule> schedules = dispatch ? std::vector<Schedule>{dispatch_schedule(shape, r.routing)}
                                                   : build_schedules(r.op, cost.algorithm, shape, nvls_available());
  const Schedule* sc = nullptr;
  for (const Schedule& s : schedules) {
    if (s.variant == cost.variant) sc = &s;
  }
  SIM_ASSERT(sc != nullptr, "nic_load: the cost's algorithm does not apply to the request");
  const double ring_nvlink = profile_.nvlink_efficiency * profile_.ring_nvlink_factor(shape.per_node);

  MaxMinSolver solver;
  std::vector<LinkId> path;
  std::vector<double> fractions;
  std::set<LinkId> mine;          // NIC links the first group crosses
  std::map<LinkId, double> busy;  // NIC link → Σ over steps of repeat · bytes / capacity
  double total = 0;               // Σ over steps of repeat · step time, per byte
  for (const Step& step : sc->steps) {
    solver.clear();
    fractions.clear();
    std::vector<std::vector<LinkId>> nic_links;  // per flow, its NIC links
    for (const auto& g : positions) {
      const bool own = &g == &positions.front();
      for (const Pattern& p : step.patterns) {
        for_each_transfer(p, sc->shape, [&](std::int32_t src, std::int32_t dst, bool src_sw, bool dst_sw) {
          path.clear();
          const std::int32_t gs = g[static_cast<std::size_t>(src)];
          const std::int32_t gd = g[static_cast<std::size_t>(dst)];
          if (src_sw) {
            path.push_back(topo_.nvlink_down(gd));
          } else if (dst_sw) {
            path.push_back(topo_.nvlink_up(gs));
          } else {
            topo_.route(gs, gd, path);
          }
          solver.add_flow(path);
          fractions.push_back(p.fraction);
          auto& nics = nic_links.emplace_back();
          for (const LinkId l : path) {
            if (topo_.link(l).kind != LinkKind::kNetwork) continue;
            nics.push_back(l);
            if (own) mine.insert(l);
          }
        });
      }
    }
    const std::vector<double> cap =
        capacities(topo_, step.nvls ? profile_.nvls_efficiency : ring_nvlink, profile_.network_efficiency);
    solver.solve(cap);
    // The step lasts as long as its slowest transfer (as in candidates()); a NIC link carries
    // its transfers' bytes in that time, so its load over the step is bytes / (capacity · time).
    double step_spb = 0;
    std::map<LinkId, double> bytes_on;
    for (std::int32_t f = 0; f < solver.num_flows(); ++f) {
      const double fraction = fractions[static_cast<std::size_t>(f)];
      step_spb = std::max(step_spb, fraction / solver.rate(f));
      for (const LinkId l : nic_links[static_cast<std::size_t>(f)]) bytes_on[l] += fraction;
    }
    if (step.tree) step_spb /= profile_.tree_bandwidth_fraction;
    total += static_cast<double>(step.repeat) * step_spb;
    // A link's share counts every group's bytes on it (the equivalents load it too).
    for (const auto& [l, b] : bytes_on) {
      busy[l] += static_cast<double>(step.repeat) * b / cap[static_cast<std::size_t>(l)];
    }
  }
  if (total <= 0) return load;
  for (const auto& [l, seconds] : busy) {
    if (mine.count(l) == 0) continue;
    load.nics.push_back(l);
    load.share = std::max(load.share, std::min(1.0, seconds / total));
  }
  return load;
}

CollectiveCost NetworkModel::collective(const CollectiveRequest& request) const {
  const auto all = candidates(request);
  SIM_ASSERT(!all.empty(), "no protocol is enabled for this collective");
  return all.front();
}

Duration NetworkModel::send_recv(std::int32_t src, std::int32_t dst, Bytes bytes) const {
  if (src == dst || bytes.count() <= 0) return Duration::zero();
  CollectiveRequest r;
  r.op = CollectiveOp::kSendRecv;
  r.bytes = bytes;
  r.groups = {{src, dst}};
  // A pair exchanging in both directions loads each link direction once, as one transfer does.
  return collective(r).time;
}

}  // namespace ts::network
