// Topology: the GPUs, NVSwitches, NICs and fabric switches of a cluster, their links, and routing.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <vector>

#include "sim/base/units.h"
#include "sim/topology/cluster_spec.h"

namespace ts::topology {

enum class VertexKind { kGpu, kNvSwitch, kNic, kLeafSwitch, kSpineSwitch, kCoreSwitch };
enum class LinkKind {
  kNvLink,   // GPU ↔ its node's NVSwitch (all NVSwitch chips of a node form one logical switch)
  kPcie,     // GPU ↔ NIC
  kNetwork,  // NIC ↔ leaf switch
  kFabric,   // switch ↔ switch (leaf–spine, spine–core)
};

std::string_view vertex_kind_name(VertexKind k);
std::string_view link_kind_name(LinkKind k);

using LinkId = std::int32_t;

// One direction of a cable (every cable is two links). `bandwidth` is the line rate of that
// direction; the achievable fraction lives in the network calibration, not here.
struct Link {
  std::int32_t from = 0;  // vertex ids
  std::int32_t to = 0;
  LinkKind kind = LinkKind::kNvLink;
  Bandwidth bandwidth;
  Duration latency;
};

// The cluster as a graph (Boost.Graph inside; vertex ids are dense and grouped by kind: GPUs
// first, then NVSwitches, NICs, leaf, spine and core switches). Builders:
// - scale-up domain: one logical NVSwitch per domain with one NVLink link pair per GPU at the
//   domain's NVLink bandwidth. The job's GPUs fill placed_per_domain GPUs of each domain in turn
//   (all of them unless the cluster keeps some spare).
// - host: the domain's NICs are its hosts' (nics_per_domain); min(NICs, GPUs) of them are built
//   per domain, GPU g of the domain on NIC g·nics/gpus (several GPUs share a NIC when NICs are
//   fewer; when NICs are more, each GPU's NICs are merged into one at their total bandwidth).
//   A GPU's NIC is on its own host whenever each host has as many NICs as GPUs or a divisor.
// - fabric: fat-tree of 1–3 switch tiers. Rail-optimized: NIC r of every domain of a group of
//   nodes_per_leaf domains ("scalable unit") goes to that group's leaf r; plain: a leaf takes the
//   NICs of nodes_per_leaf consecutive domains. A leaf has ceil(down / oversubscription) uplinks,
//   one to each spine of its pod; three tiers split the leaves into pods of radix/2 leaves whose
//   spines connect, non-blocking, to core groups (spine s of every pod to core group s). One
//   tier is a single switch per rail (rail-optimized) or for the whole cluster (plain).
// Copies share the immutable graph.
class Topology {
 public:
  // `num_gpus` GPUs filling ceil(num_gpus / placed_per_domain) scale-up domains of `spec`.
  Topology(ClusterSpec spec, std::int32_t num_gpus);

  const ClusterSpec& spec() const { return spec_; }
  std::int32_t num_gpus() const { return num_gpus_; }
  std::int32_t num_domains() const { return num_domains_; }
  std::int32_t domain_of(std::int32_t gpu) const { return gpu / placed_; }
  std::int32_t local_index(std::int32_t gpu) const { return gpu % placed_; }  // within its domain
  std::int32_t host_of(std::int32_t gpu) const {
    return domain_of(gpu) * (placed_ / spec_.host.gpus_per_host) +
           local_index(gpu) / spec_.host.gpus_per_host;
  }

  // Graph.
  std::int32_t num_vertices() const;
  VertexKind vertex_kind(std::int32_t vertex) const;
  std::int32_t num_links() const;
  const Link& link(LinkId id) const;
  std::span<const Link> links() const;
  std::int32_t gpu_vertex(std::int32_t gpu) const { return gpu; }
  std::int32_t nvswitch_vertex(std::int32_t domain) const;
  // Counts by vertex kind.
  std::int32_t count(VertexKind kind) const;

  // Structure.
  std::int32_t rails() const;                    // NICs per domain as built
  std::int32_t rail_of(std::int32_t gpu) const;  // the NIC (rail) of `gpu` within its domain
  std::int32_t nodes_per_leaf() const;
  std::int32_t leaf_uplinks() const;               // uplinks per leaf (= spines per pod)
  std::int32_t leaves_per_pod() const;

  // NVLink links of `gpu` to and from its domain's NVSwitch (NVLS reductions and multicasts use
  // these).
  LinkId nvlink_up(std::int32_t gpu) const;
  LinkId nvlink_down(std::int32_t gpu) const;

  // Appends the links of the route from GPU `src` to GPU `dst` to `out` (nothing when equal).
  // Inside a domain: through the NVSwitch. Across domains: out of the NIC on `dst`'s rail —
  // reached over NVLink first when that is not `src`'s own NIC on a rail-optimized fabric
  // (NCCL's PXN) — up the fat-tree to the lowest common tier and down to `dst`. Among equal
  // uplinks the choice is deterministic by destination (D-mod-k: uplink = destination host mod
  // uplinks, Zahavi 2010, as InfiniBand fat-tree routing does; the host is the domain on a
  // rail, the NIC on a plain fat-tree), so shift patterns spread evenly.
  void route(std::int32_t src, std::int32_t dst, std::vector<LinkId>& out) const;
  // Fabric switches (leaf, spine, core) the route crosses; 0 inside a domain.
  std::int32_t switch_hops(std::int32_t src, std::int32_t dst) const;
  // Latency of the route: its links' latencies plus switch_latency per fabric switch crossed.
  Duration route_latency(std::int32_t src, std::int32_t dst) const;

  // Hop count of a shortest path between two vertices over the graph (breadth-first search);
  // -1 when unreachable. For checks, not for the simulation's inner loop.
  std::int32_t shortest_hops(std::int32_t from_vertex, std::int32_t to_vertex) const;

  struct Impl;

 private:
  ClusterSpec spec_;
  std::int32_t num_gpus_;
  std::int32_t num_domains_;
  std::int32_t placed_;  // GPUs of each domain the job fills
  std::shared_ptr<const Impl> impl_;
};

}  // namespace ts::topology
