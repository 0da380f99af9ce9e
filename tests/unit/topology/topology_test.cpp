// Topology builders (NVSwitch node, NICs, rail-optimized and plain fat-trees) and routing.
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "sim/topology/topology.h"
#include "tests/unit/topology/test_clusters.h"

using ts::Bandwidth;
using ts::Duration;
using ts::topology::LinkId;
using ts::topology::LinkKind;
using ts::topology::Topology;
using ts::topology::VertexKind;

namespace {

// Checks that `path` is a chain of links from GPU `src` to GPU `dst`.
void require_chain(const Topology& t, std::int32_t src, std::int32_t dst, const std::vector<LinkId>& path) {
  REQUIRE(!path.empty());
  REQUIRE(t.link(path.front()).from == t.gpu_vertex(src));
  REQUIRE(t.link(path.back()).to == t.gpu_vertex(dst));
  for (std::size_t i = 1; i < path.size(); ++i) REQUIRE(t.link(path[i - 1]).to == t.link(path[i]).from);
}

std::int32_t links_of_kind(const Topology& t, LinkKind k) {
  std::int32_t n = 0;
  for (const auto& l : t.links()) n += l.kind == k ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("rail-optimized two-tier fat-tree of DGX H100 nodes: counts follow the radix", "[topology]") {
  // 64 nodes, radix 64, non-blocking: a leaf has 64·1/(1+1) = 32 downlinks (32 nodes per leaf,
  // one leaf per rail per 32-node unit → 2 units · 8 rails = 16 leaves) and 32 uplinks, one to
  // each of 32 spines.
  const Topology t(ts::testing::dgx_h100(), 512);
  CHECK(t.num_domains() == 64);
  CHECK(t.count(VertexKind::kGpu) == 512);
  CHECK(t.count(VertexKind::kNvSwitch) == 64);
  CHECK(t.count(VertexKind::kNic) == 512);
  CHECK(t.nodes_per_leaf() == 32);
  CHECK(t.count(VertexKind::kLeafSwitch) == 16);
  CHECK(t.leaf_uplinks() == 32);
  CHECK(t.count(VertexKind::kSpineSwitch) == 32);
  CHECK(t.count(VertexKind::kCoreSwitch) == 0);
  // Every cable is two links: 512 NVLink, 512 PCIe, 512 NIC-leaf, 16·32 leaf-spine cables.
  CHECK(links_of_kind(t, LinkKind::kNvLink) == 2 * 512);
  CHECK(links_of_kind(t, LinkKind::kPcie) == 2 * 512);
  CHECK(links_of_kind(t, LinkKind::kNetwork) == 2 * 512);
  CHECK(links_of_kind(t, LinkKind::kFabric) == 2 * 16 * 32);
  CHECK(t.num_vertices() == 512 + 64 + 512 + 16 + 32);
  // Line rates as given: NVLink 450 GB/s, NDR 400 Gb/s = 50 GB/s.
  CHECK(t.link(t.nvlink_up(3)).bandwidth.gbytes_per_s() == Approx(450));
  for (const auto& l : t.links()) {
    if (l.kind == LinkKind::kNetwork || l.kind == LinkKind::kFabric) CHECK(l.bandwidth.gbytes_per_s() == Approx(50));
  }
}

TEST_CASE("routes are chains of links and shortest paths of the graph", "[topology]") {
  const Topology t(ts::testing::dgx_h100(), 512);
  std::vector<LinkId> path;
  // Inside a node: GPU → NVSwitch → GPU.
  t.route(0, 5, path);
  require_chain(t, 0, 5, path);
  CHECK(path.size() == 2);
  CHECK(t.switch_hops(0, 5) == 0);
  // Pairs across nodes, same and other rails, same and other leaf groups: on the same rail the
  // route's length is the breadth-first-search distance in the graph; to another rail it adds
  // at most the NVLink detour to the destination's rail (PXN), 2 links.
  for (const auto& [a, b] : std::vector<std::pair<int, int>>{{0, 8}, {0, 9}, {3, 300}, {7, 256}, {12, 511}, {511, 0},
                                                             {4, 300}, {7, 263}}) {
    path.clear();
    t.route(a, b, path);
    INFO(a << " -> " << b);
    require_chain(t, a, b, path);
    const auto len = static_cast<std::int32_t>(path.size());
    const std::int32_t shortest = t.shortest_hops(t.gpu_vertex(a), t.gpu_vertex(b));
    if (t.rail_of(a) == t.rail_of(b)) {
      CHECK(len == shortest);
    } else {
      CHECK(len >= shortest);
      CHECK(len <= shortest + 2);
    }
  }
  // Same rail, same 32-node unit: one leaf. Other unit: leaf, spine, leaf.
  CHECK(t.switch_hops(0, 8) == 1);
  CHECK(t.switch_hops(0, 8 * 32) == 3);
  // Other rail: PXN moves the data over NVLink to the GPU on the destination's rail first, so
  // it still crosses only that rail's leaf.
  path.clear();
  t.route(0, 9, path);
  CHECK(t.link(path[0]).kind == LinkKind::kNvLink);
  CHECK(t.switch_hops(0, 9) == 1);
}

TEST_CASE("route latency sums link and switch latencies", "[topology]") {
  const Topology t(ts::testing::dgx_h100(), 512);
  // In a node: two NVLink hops of 600 ns.
  CHECK(t.route_latency(0, 1).us() == Approx(1.2));
  // Same leaf: NIC→leaf and leaf→NIC (2100 ns each) and one switch (600 ns).
  CHECK(t.route_latency(0, 8).us() == Approx(2 * 2.1 + 0.6));
  // Across units: three switches.
  CHECK(t.route_latency(0, 256).us() == Approx(2 * 2.1 + 3 * 0.6));
}

TEST_CASE("D-mod-k spreads a shift permutation over all leaf uplinks", "[topology]") {
  // Every node of the first unit sends on rail 0 to the node 32 places on: 32 flows leave leaf 0
  // and D-mod-k gives each its own uplink, so no uplink carries two.
  const Topology t(ts::testing::dgx_h100(), 512);
  std::map<LinkId, int> load;
  std::vector<LinkId> path;
  for (int node = 0; node < 32; ++node) {
    path.clear();
    t.route(node * 8, (node + 32) * 8, path);
    for (const LinkId l : path) {
      if (t.link(l).kind == LinkKind::kFabric) ++load[l];
    }
  }
  CHECK(load.size() == 2 * 32);
  for (const auto& [l, n] : load) CHECK(n == 1);
}

TEST_CASE("D-mod-k collides flows to destinations congruent modulo the uplinks, adaptive routing does not",
          "[topology]") {
  // Two flows leave leaf 1 (nodes 32..63, rail 0) for nodes 0 and 64: both destinations are
  // 0 modulo the 32 uplinks, so static routing puts them on one 50 GB/s uplink. Adaptive
  // routing spreads a leaf's cross traffic over all its uplinks: one aggregated link of
  // 32 · 50 GB/s, with the same route latency.
  for (const bool adaptive : {false, true}) {
    auto spec = ts::testing::dgx_h100();
    spec.fabric.adaptive_routing = adaptive;
    const Topology t(spec, 8 * 96);
    std::vector<LinkId> a, b;
    t.route(47 * 8, 0, a);
    t.route(63 * 8, 64 * 8, b);
    require_chain(t, 47 * 8, 0, a);
    require_chain(t, 63 * 8, 64 * 8, b);
    const auto uplink = [&](const std::vector<LinkId>& path) {
      for (const LinkId l : path) {
        if (t.vertex_kind(t.link(l).to) == VertexKind::kSpineSwitch) return l;
      }
      FAIL("no uplink on the path");
      return LinkId{-1};
    };
    CHECK(uplink(a) == uplink(b));  // the same leaf: one (aggregated) link either way
    CHECK(t.link(uplink(a)).bandwidth.gbytes_per_s() == Approx(adaptive ? 32 * 50 : 50));
    CHECK(t.route_latency(47 * 8, 0).us() == Approx(2 * 2.1 + 3 * 0.6));
    CHECK(t.leaf_uplinks() == 32);  // the switches are the same
  }
}

TEST_CASE("oversubscription divides the leaf uplinks", "[topology]") {
  auto spec = ts::testing::dgx_h100();
  spec.fabric.nodes_per_leaf = 4;
  spec.fabric.oversubscription = 2;
  const Topology t(spec, 8 * 16);
  // 4 downlinks per leaf, 4 / 2 = 2 uplinks, 2 spines; 4 units · 8 rails = 32 leaves.
  CHECK(t.leaf_uplinks() == 2);
  CHECK(t.count(VertexKind::kSpineSwitch) == 2);
  CHECK(t.count(VertexKind::kLeafSwitch) == 32);
  spec.fabric.oversubscription = 1;
  CHECK(Topology(spec, 8 * 16).leaf_uplinks() == 4);
}

TEST_CASE("three tiers: pods of radix/2 leaves joined by core switches", "[topology]") {
  // 16384 GPUs = 2048 nodes; 32 nodes per leaf → 64 units · 8 rails = 512 leaves; pods of
  // 64/2 = 32 leaves → 16 pods of 32 spines; a spine's 32 uplinks spread over the
  // ceil(32·16/64) = 8 cores of its group, 32 groups.
  auto spec = ts::testing::dgx_h100();
  spec.fabric.tiers = 3;
  const Topology t(spec, 16384);
  CHECK(t.count(VertexKind::kLeafSwitch) == 512);
  CHECK(t.leaves_per_pod() == 32);
  CHECK(t.count(VertexKind::kSpineSwitch) == 16 * 32);
  CHECK(t.count(VertexKind::kCoreSwitch) == 32 * 8);
  std::vector<LinkId> path;
  // Same pod (units 0 and 1 both in pod 0: 4 units of 8 rails = 32 leaves): leaf, spine, leaf.
  CHECK(t.switch_hops(0, 8 * 32) == 3);
  // Other pod: leaf, spine, core, spine, leaf.
  const std::int32_t far = 8 * 32 * 4 * 3;  // unit 12, pod 3
  t.route(0, far, path);
  require_chain(t, 0, far, path);
  CHECK(t.switch_hops(0, far) == 5);
  CHECK(static_cast<std::int32_t>(path.size()) == t.shortest_hops(t.gpu_vertex(0), t.gpu_vertex(far)));
  // The spine-core links of a pod carry as much as its leaves' uplinks: 32 · 50 / 8 per link.
  for (const LinkId l : path) {
    if (t.vertex_kind(t.link(l).to) == VertexKind::kCoreSwitch) CHECK(t.link(l).bandwidth.gbytes_per_s() == Approx(200));
  }
  // Adaptive routing: one aggregated spine-core link per pod, of all 32 spines' 8 links.
  spec.fabric.adaptive_routing = true;
  const Topology ar(spec, 16384);
  path.clear();
  ar.route(0, far, path);
  require_chain(ar, 0, far, path);
  CHECK(ar.switch_hops(0, far) == 5);
  for (const LinkId l : path) {
    if (ar.vertex_kind(ar.link(l).to) == VertexKind::kCoreSwitch) {
      CHECK(ar.link(l).bandwidth.gbytes_per_s() == Approx(32 * 8 * 200));
    }
  }
}

TEST_CASE("plain fat-tree: a node's NICs share one leaf", "[topology]") {
  auto spec = ts::testing::dgx_h100();
  spec.fabric.kind = ts::topology::FabricKind::kFatTree;
  const Topology t(spec, 64);
  // 32 NIC ports down per leaf = 4 nodes of 8 NICs; 8 nodes → 2 leaves.
  CHECK(t.nodes_per_leaf() == 4);
  CHECK(t.count(VertexKind::kLeafSwitch) == 2);
  // Other rail, same leaf: no PXN, out of the GPU's own NIC.
  std::vector<LinkId> path;
  t.route(0, 9, path);
  CHECK(t.link(path[0]).kind == LinkKind::kPcie);
  CHECK(t.switch_hops(0, 9) == 1);
  CHECK(t.switch_hops(0, 4 * 8) == 3);
}

TEST_CASE("fewer NICs than GPUs: neighbouring GPUs share a NIC", "[topology]") {
  auto spec = ts::testing::dgx_a100();
  spec.host.nics_per_host = 4;
  const Topology t(spec, 24);
  CHECK(t.rails() == 4);
  CHECK(t.rail_of(0) == 0);
  CHECK(t.rail_of(1) == 0);
  CHECK(t.rail_of(2) == 1);
  CHECK(t.rail_of(7) == 3);
  // GPUs 0 and 1 leave through the same NIC link.
  std::vector<LinkId> a, b;
  t.route(0, 8, a);
  t.route(1, 9, b);
  const auto nic_link = [&](const std::vector<LinkId>& p) {
    for (const LinkId l : p) {
      if (t.link(l).kind == LinkKind::kNetwork) return l;
    }
    return LinkId{-1};
  };
  CHECK(nic_link(a) == nic_link(b));
  CHECK(nic_link(a) >= 0);
}

TEST_CASE("more NICs than GPUs act as one NIC per GPU of their total bandwidth", "[topology]") {
  auto spec = ts::testing::dgx_h100();
  spec.host.nics_per_host = 32;  // AWS p5: 32 x 100 Gb/s EFA
  spec.host.nic_bandwidth = Bandwidth::gbits_per_s(100);
  const Topology t(spec, 16);
  CHECK(t.rails() == 8);
  for (const auto& l : t.links()) {
    if (l.kind == LinkKind::kNetwork) CHECK(l.bandwidth.gbytes_per_s() == Approx(50));
  }
}

TEST_CASE("a single node has no fabric", "[topology]") {
  const Topology t(ts::testing::dgx_h100(), 8);
  CHECK(t.count(VertexKind::kLeafSwitch) == 0);
  CHECK(links_of_kind(t, LinkKind::kFabric) == 0);
  CHECK(t.shortest_hops(t.gpu_vertex(0), t.gpu_vertex(7)) == 2);
}
