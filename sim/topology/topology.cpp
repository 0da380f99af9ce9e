#include "sim/topology/topology.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <boost/graph/visitors.hpp>

#include "sim/base/diagnostic.h"

namespace ts::topology {

std::string_view vertex_kind_name(VertexKind k) {
  switch (k) {
    case VertexKind::kGpu: return "gpu";
    case VertexKind::kNvSwitch: return "nvswitch";
    case VertexKind::kNic: return "nic";
    case VertexKind::kLeafSwitch: return "leaf";
    case VertexKind::kSpineSwitch: return "spine";
    case VertexKind::kCoreSwitch: return "core";
  }
  return "?";
}

std::string_view link_kind_name(LinkKind k) {
  switch (k) {
    case LinkKind::kNvLink: return "nvlink";
    case LinkKind::kPcie: return "pcie";
    case LinkKind::kNetwork: return "network";
    case LinkKind::kFabric: return "fabric";
  }
  return "?";
}

namespace {

struct VertexProps {
  VertexKind kind = VertexKind::kGpu;
};
struct EdgeProps {
  LinkId id = 0;
};
using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::directedS, VertexProps, EdgeProps>;

constexpr int kNumKinds = 6;
int kind_index(VertexKind k) { return static_cast<int>(k); }

std::int32_t ceil_div(std::int32_t a, std::int32_t b) { return (a + b - 1) / b; }

}  // namespace

struct Topology::Impl {
  Graph graph;
  std::vector<Link> links;
  std::int32_t first[kNumKinds] = {};
  std::int32_t counts[kNumKinds] = {};

  bool rail_optimized = true;
  std::int32_t gpus_per_domain = 0;
  std::int32_t rails = 0;  // NICs per domain as built
  std::int32_t nodes_per_leaf = 0;
  std::int32_t leaves = 0;
  std::int32_t uplinks = 0;         // per leaf = spines per pod
  // Adaptive routing spreads a leaf's (a spine's) cross traffic over all its uplinks: routes
  // then use one aggregated link per leaf (per spine of the first slot) of all their capacity.
  bool adaptive = false;
  std::int32_t route_slots() const { return adaptive ? 1 : uplinks; }
  std::int32_t route_cores() const { return adaptive ? 1 : cores_per_group; }
  std::int32_t leaves_per_pod = 0;
  std::int32_t pods = 0;
  std::int32_t cores_per_group = 0;

  std::vector<LinkId> nvl_up, nvl_down;      // per GPU
  std::vector<LinkId> pcie_up, pcie_down;    // per GPU (GPU→NIC, NIC→GPU)
  std::vector<LinkId> nic_up, nic_down;      // per NIC (NIC→leaf, leaf→NIC)
  std::vector<LinkId> leaf_up, leaf_down;    // per (leaf, spine slot): leaf→spine, spine→leaf
  std::vector<LinkId> spine_up, spine_down;  // per (spine, core slot): spine→core, core→spine
  std::vector<std::int32_t> leaf_of_nic;

  std::int32_t vertex(VertexKind k, std::int32_t i) const { return first[kind_index(k)] + i; }

  LinkId add_link(std::int32_t from, std::int32_t to, LinkKind kind, Bandwidth bw, Duration lat) {
    const auto id = static_cast<LinkId>(links.size());
    links.push_back(Link{from, to, kind, bw, lat});
    boost::add_edge(static_cast<std::size_t>(from), static_cast<std::size_t>(to), EdgeProps{id}, graph);
    return id;
  }
  // A cable: two links; returns {from→to, to→from}.
  std::pair<LinkId, LinkId> add_cable(std::int32_t a, std::int32_t b, LinkKind kind, Bandwidth bw,
                                      Duration lat) {
    const LinkId up = add_link(a, b, kind, bw, lat);
    const LinkId down = add_link(b, a, kind, bw, lat);
    return {up, down};
  }

  std::int32_t rail_of_local(std::int32_t local) const {
    return static_cast<std::int32_t>(static_cast<std::int64_t>(local) * rails / gpus_per_domain);
  }
  // The first GPU (local index) attached to NIC `rail`.
  std::int32_t local_of_rail(std::int32_t rail) const {
    return static_cast<std::int32_t>(
        (static_cast<std::int64_t>(rail) * gpus_per_domain + rails - 1) / rails);
  }
};

Topology::Topology(ClusterSpec spec, std::int32_t num_gpus)
    : spec_(std::move(spec)), num_gpus_(num_gpus) {
  placed_ = spec_.scale_up.placed_per_domain();
  SIM_ASSERT(placed_ > 0, "scale-up domain without GPUs");
  SIM_ASSERT(spec_.host.gpus_per_host > 0 && placed_ % spec_.host.gpus_per_host == 0,
             "a domain's placed GPUs are not whole hosts");
  SIM_ASSERT(num_gpus_ > 0, "cluster without GPUs");
  num_domains_ = (num_gpus_ + placed_ - 1) / placed_;

  auto impl = std::make_shared<Impl>();
  Impl& m = *impl;
  const auto& domain = spec_.scale_up;
  const auto& host = spec_.host;
  const auto& fabric = spec_.fabric;
  m.gpus_per_domain = placed_;
  m.rail_optimized = fabric.kind == FabricKind::kRailOptimizedFatTree;
  m.adaptive = fabric.adaptive_routing;
  const std::int32_t nics = std::max<std::int32_t>(0, spec_.nics_per_domain());
  m.rails = std::min(nics, placed_);
  // More NICs than GPUs: each GPU's NICs act as one NIC of their total bandwidth.
  const double nic_merge = m.rails > 0 ? static_cast<double>(nics) / m.rails : 1.0;
  const Bandwidth nic_bw = host.nic_bandwidth * nic_merge;
  const bool has_fabric = m.rails > 0 && num_domains_ > 1;

  // Fabric shape.
  const std::int32_t tiers = std::clamp(fabric.tiers, 1, 3);
  const double oversub = std::max(1.0, fabric.oversubscription);
  const std::int32_t radix = std::max(0, fabric.switch_radix);
  if (has_fabric) {
    const std::int32_t leaves_per_group = m.rail_optimized ? m.rails : 1;
    std::int32_t npl = fabric.nodes_per_leaf;
    if (npl <= 0) {
      // Leaf downlink ports: radix · o / (1 + o); one per node (rail-optimized) or one per NIC.
      const auto down_ports =
          radix > 0 ? static_cast<std::int32_t>(std::floor(radix * oversub / (1.0 + oversub)))
                    : num_domains_ * (m.rail_optimized ? 1 : m.rails);
      npl = m.rail_optimized ? down_ports : down_ports / m.rails;
    }
    if (tiers == 1) npl = num_domains_;
    m.nodes_per_leaf = std::clamp(npl, 1, num_domains_);
    m.leaves = ceil_div(num_domains_, m.nodes_per_leaf) * leaves_per_group;
    if (tiers >= 2) {
      const std::int32_t down = m.nodes_per_leaf * (m.rail_optimized ? 1 : m.rails);
      m.uplinks = std::max<std::int32_t>(1, static_cast<std::int32_t>(std::ceil(down * nic_merge / oversub - 1e-9)));
      if (tiers == 3 && radix > 0) {
        const std::int32_t lp = std::max(leaves_per_group, (radix / 2) / leaves_per_group * leaves_per_group);
        m.leaves_per_pod = std::min(lp, m.leaves);
      } else {
        m.leaves_per_pod = m.leaves;
      }
      m.pods = ceil_div(m.leaves, m.leaves_per_pod);
      if (tiers == 3) {
        m.cores_per_group = radix > 0 ? std::max(1, ceil_div(m.leaves_per_pod * m.pods, radix)) : 1;
      }
    } else {
      m.leaves_per_pod = m.leaves;
      m.pods = 1;
    }
  }

  // Vertices, grouped by kind.
  m.counts[kind_index(VertexKind::kGpu)] = num_gpus_;
  m.counts[kind_index(VertexKind::kNvSwitch)] = num_domains_;
  m.counts[kind_index(VertexKind::kNic)] = m.rails * num_domains_;
  m.counts[kind_index(VertexKind::kLeafSwitch)] = m.leaves;
  m.counts[kind_index(VertexKind::kSpineSwitch)] = m.uplinks * m.pods;
  m.counts[kind_index(VertexKind::kCoreSwitch)] = m.uplinks * m.cores_per_group;
  std::int32_t total = 0;
  for (int k = 0; k < kNumKinds; ++k) {
    m.first[k] = total;
    total += m.counts[k];
  }
  for (int k = 0; k < kNumKinds; ++k) {
    for (std::int32_t i = 0; i < m.counts[k]; ++i) boost::add_vertex(VertexProps{static_cast<VertexKind>(k)}, m.graph);
  }
  SIM_ASSERT(static_cast<std::int32_t>(boost::num_vertices(m.graph)) == total, "vertex count");

  // Domain and host: NVLink to the domain's NVSwitch, PCIe to the host's NIC.
  const Bandwidth pcie = host.pcie_bandwidth.bytes_per_s() > 0
                             ? host.pcie_bandwidth
                             : Bandwidth::bytes_per_s(std::numeric_limits<double>::infinity());
  m.nvl_up.resize(static_cast<std::size_t>(num_gpus_));
  m.nvl_down.resize(static_cast<std::size_t>(num_gpus_));
  m.pcie_up.assign(static_cast<std::size_t>(num_gpus_), -1);
  m.pcie_down.assign(static_cast<std::size_t>(num_gpus_), -1);
  for (std::int32_t g = 0; g < num_gpus_; ++g) {
    const auto sw = m.vertex(VertexKind::kNvSwitch, domain_of(g));
    const auto [up, down] =
        m.add_cable(g, sw, LinkKind::kNvLink, domain.nvlink_bandwidth, domain.nvlink_latency);
    m.nvl_up[static_cast<std::size_t>(g)] = up;
    m.nvl_down[static_cast<std::size_t>(g)] = down;
    if (m.rails > 0) {
      const auto nic =
          m.vertex(VertexKind::kNic, domain_of(g) * m.rails + m.rail_of_local(local_index(g)));
      const auto [pu, pd] = m.add_cable(g, nic, LinkKind::kPcie, pcie, Duration::zero());
      m.pcie_up[static_cast<std::size_t>(g)] = pu;
      m.pcie_down[static_cast<std::size_t>(g)] = pd;
    }
  }

  // Fabric.
  if (has_fabric) {
    const Bandwidth link_bw =
        fabric.link_bandwidth.bytes_per_s() > 0 ? fabric.link_bandwidth : host.nic_bandwidth;
    const std::int32_t num_nics = m.rails * num_domains_;
    m.nic_up.resize(static_cast<std::size_t>(num_nics));
    m.nic_down.resize(static_cast<std::size_t>(num_nics));
    m.leaf_of_nic.resize(static_cast<std::size_t>(num_nics));
    for (std::int32_t nic = 0; nic < num_nics; ++nic) {
      const std::int32_t n = nic / m.rails;
      const std::int32_t r = nic % m.rails;
      const std::int32_t group = n / m.nodes_per_leaf;
      const std::int32_t leaf = m.rail_optimized ? group * m.rails + r : group;
      m.leaf_of_nic[static_cast<std::size_t>(nic)] = leaf;
      const auto [up, down] =
          m.add_cable(m.vertex(VertexKind::kNic, nic), m.vertex(VertexKind::kLeafSwitch, leaf),
                      LinkKind::kNetwork, nic_bw, host.nic_latency);
      m.nic_up[static_cast<std::size_t>(nic)] = up;
      m.nic_down[static_cast<std::size_t>(nic)] = down;
    }
    if (m.uplinks > 0) {
      const std::int32_t slots = m.route_slots();
      const Bandwidth leaf_bw = link_bw * (static_cast<double>(m.uplinks) / slots);
      m.leaf_up.resize(static_cast<std::size_t>(m.leaves * slots));
      m.leaf_down.resize(m.leaf_up.size());
      for (std::int32_t leaf = 0; leaf < m.leaves; ++leaf) {
        const std::int32_t pod = leaf / m.leaves_per_pod;
        for (std::int32_t s = 0; s < slots; ++s) {
          const auto spine = m.vertex(VertexKind::kSpineSwitch, pod * m.uplinks + s);
          const auto [up, down] = m.add_cable(m.vertex(VertexKind::kLeafSwitch, leaf), spine, LinkKind::kFabric,
                                              leaf_bw, Duration::zero());
          m.leaf_up[static_cast<std::size_t>(leaf * slots + s)] = up;
          m.leaf_down[static_cast<std::size_t>(leaf * slots + s)] = down;
        }
      }
    }
    if (m.cores_per_group > 0) {
      // A spine has as many uplinks as downlinks (leaves of its pod), spread over the cores of
      // its group: one aggregated link per (spine, core); under adaptive routing one per pod,
      // carrying all its spines' uplinks.
      const std::int32_t slots = m.route_slots();
      const std::int32_t cores = m.route_cores();
      const double aggregated = static_cast<double>(m.uplinks) / slots * m.cores_per_group / cores;
      const Bandwidth spine_core_bw = link_bw * (static_cast<double>(m.leaves_per_pod) / m.cores_per_group) * aggregated;
      m.spine_up.resize(static_cast<std::size_t>(m.pods * slots * cores));
      m.spine_down.resize(m.spine_up.size());
      for (std::int32_t pod = 0; pod < m.pods; ++pod) {
        for (std::int32_t s = 0; s < slots; ++s) {
          const std::int32_t sp = pod * m.uplinks + s;
          for (std::int32_t c = 0; c < cores; ++c) {
            const auto core = m.vertex(VertexKind::kCoreSwitch, s * m.cores_per_group + c);
            const auto [up, down] = m.add_cable(m.vertex(VertexKind::kSpineSwitch, sp), core, LinkKind::kFabric,
                                                spine_core_bw, Duration::zero());
            const auto i = static_cast<std::size_t>((pod * slots + s) * cores + c);
            m.spine_up[i] = up;
            m.spine_down[i] = down;
          }
        }
      }
    }
  }
  impl_ = std::move(impl);
}

std::int32_t Topology::num_vertices() const {
  return static_cast<std::int32_t>(boost::num_vertices(impl_->graph));
}
VertexKind Topology::vertex_kind(std::int32_t v) const {
  return impl_->graph[static_cast<std::size_t>(v)].kind;
}
std::int32_t Topology::num_links() const { return static_cast<std::int32_t>(impl_->links.size()); }
const Link& Topology::link(LinkId id) const { return impl_->links[static_cast<std::size_t>(id)]; }
std::span<const Link> Topology::links() const { return impl_->links; }
std::int32_t Topology::nvswitch_vertex(std::int32_t domain) const {
  return impl_->vertex(VertexKind::kNvSwitch, domain);
}
std::int32_t Topology::count(VertexKind kind) const { return impl_->counts[kind_index(kind)]; }
std::int32_t Topology::rails() const { return impl_->rails; }
std::int32_t Topology::rail_of(std::int32_t gpu) const { return impl_->rail_of_local(local_index(gpu)); }
std::int32_t Topology::nodes_per_leaf() const { return impl_->nodes_per_leaf; }
std::int32_t Topology::leaf_uplinks() const { return impl_->uplinks; }
std::int32_t Topology::leaves_per_pod() const { return impl_->leaves_per_pod; }
LinkId Topology::nvlink_up(std::int32_t gpu) const { return impl_->nvl_up[static_cast<std::size_t>(gpu)]; }
LinkId Topology::nvlink_down(std::int32_t gpu) const { return impl_->nvl_down[static_cast<std::size_t>(gpu)]; }

void Topology::route(std::int32_t src, std::int32_t dst, std::vector<LinkId>& out) const {
  if (src == dst) return;
  const Impl& m = *impl_;
  const auto s = static_cast<std::size_t>(src);
  const auto d = static_cast<std::size_t>(dst);
  const std::int32_t src_domain = domain_of(src);
  const std::int32_t dst_domain = domain_of(dst);
  if (src_domain == dst_domain) {
    out.push_back(m.nvl_up[s]);
    out.push_back(m.nvl_down[d]);
    return;
  }
  SIM_ASSERT(m.rails > 0, "route between domains of a cluster without NICs");
  const std::int32_t dst_rail = m.rail_of_local(local_index(dst));
  std::int32_t out_rail = m.rail_of_local(local_index(src));
  std::int32_t proxy = src;
  const std::int32_t pxn_proxy = src_domain * m.gpus_per_domain + m.local_of_rail(dst_rail);
  // PXN needs a GPU on the destination's rail in the sender's domain: the last domain of a job
  // may be partly filled (512 GPUs on 72-GPU racks), and then the data leaves through the
  // sender's own NIC and crosses rails at the spines.
  if (m.rail_optimized && out_rail != dst_rail && pxn_proxy < num_gpus_) {
    // PXN: hand the data over NVLink to the GPU on the destination's rail.
    proxy = pxn_proxy;
    out_rail = dst_rail;
    if (proxy != src) {
      out.push_back(m.nvl_up[s]);
      out.push_back(m.nvl_down[static_cast<std::size_t>(proxy)]);
    }
  }
  const std::int32_t nic_s = src_domain * m.rails + out_rail;
  const std::int32_t nic_d = dst_domain * m.rails + dst_rail;
  out.push_back(m.pcie_up[static_cast<std::size_t>(proxy)]);
  out.push_back(m.nic_up[static_cast<std::size_t>(nic_s)]);
  const std::int32_t leaf_s = m.leaf_of_nic[static_cast<std::size_t>(nic_s)];
  const std::int32_t leaf_d = m.leaf_of_nic[static_cast<std::size_t>(nic_d)];
  if (leaf_s != leaf_d) {
    SIM_ASSERT(m.uplinks > 0, "route between leaves of a one-tier fabric");
    // D-mod-k on the destination's index among the hosts of its leaves: the node on a rail
    // (NIC ids of one rail are all congruent modulo the rail count), the NIC otherwise.
    // Adaptive routing: the one aggregated slot and core.
    const std::int32_t dest = m.rail_optimized ? dst_domain : nic_d;
    const std::int32_t slots = m.route_slots();
    const std::int32_t cores = m.route_cores();
    const std::int32_t slot = dest % slots;
    const std::int32_t pod_s = leaf_s / m.leaves_per_pod;
    const std::int32_t pod_d = leaf_d / m.leaves_per_pod;
    out.push_back(m.leaf_up[static_cast<std::size_t>(leaf_s * slots + slot)]);
    if (pod_s != pod_d) {
      SIM_ASSERT(m.cores_per_group > 0, "route between pods of a two-tier fabric");
      const std::int32_t core = (dest / m.uplinks) % cores;
      out.push_back(m.spine_up[static_cast<std::size_t>((pod_s * slots + slot) * cores + core)]);
      out.push_back(m.spine_down[static_cast<std::size_t>((pod_d * slots + slot) * cores + core)]);
    }
    out.push_back(m.leaf_down[static_cast<std::size_t>(leaf_d * slots + slot)]);
  }
  out.push_back(m.nic_down[static_cast<std::size_t>(nic_d)]);
  out.push_back(m.pcie_down[d]);
}

std::int32_t Topology::switch_hops(std::int32_t src, std::int32_t dst) const {
  std::vector<LinkId> path;
  route(src, dst, path);
  std::int32_t hops = 0;
  for (const LinkId id : path) {
    switch (vertex_kind(link(id).to)) {
      case VertexKind::kLeafSwitch:
      case VertexKind::kSpineSwitch:
      case VertexKind::kCoreSwitch: ++hops; break;
      case VertexKind::kGpu:
      case VertexKind::kNvSwitch:
      case VertexKind::kNic: break;
    }
  }
  return hops;
}

Duration Topology::route_latency(std::int32_t src, std::int32_t dst) const {
  std::vector<LinkId> path;
  route(src, dst, path);
  Duration total = spec_.fabric.switch_latency * switch_hops(src, dst);
  for (const LinkId id : path) total += link(id).latency;
  return total;
}

std::int32_t Topology::shortest_hops(std::int32_t from_vertex, std::int32_t to_vertex) const {
  const Graph& g = impl_->graph;
  std::vector<std::int32_t> dist(boost::num_vertices(g), -1);
  dist[static_cast<std::size_t>(from_vertex)] = 0;
  // Records the tree edge distances: d(target) = d(source) + 1.
  struct Recorder : boost::default_bfs_visitor {
    std::vector<std::int32_t>* dist;
    void tree_edge(Graph::edge_descriptor e, const Graph& graph) const {
      (*dist)[boost::target(e, graph)] = (*dist)[boost::source(e, graph)] + 1;
    }
  };
  Recorder rec;
  rec.dist = &dist;
  boost::breadth_first_search(g, static_cast<std::size_t>(from_vertex), boost::visitor(rec));
  return dist[static_cast<std::size_t>(to_vertex)];
}

}  // namespace ts::topology
