// Scale-up domains apart from hosts: NVL72 racks of 4-GPU trays, and jobs on part of a rack.
#include <catch2/catch.hpp>

#include <vector>

#include "sim/topology/topology.h"
#include "tests/unit/topology/test_clusters.h"

using namespace ts;
using namespace ts::topology;

namespace {

std::int32_t count_kind(const Topology& t, const std::vector<LinkId>& path, LinkKind kind) {
  std::int32_t n = 0;
  for (const LinkId l : path) n += t.link(l).kind == kind ? 1 : 0;
  return n;
}

}  // namespace

TEST_CASE("an NVL72 rack is one NVLink domain over 18 hosts of 4 GPUs and their NICs",
          "[topology]") {
  const Topology t(ts::testing::gb200_nvl72(), 144);
  CHECK(t.num_domains() == 2);
  CHECK(t.count(VertexKind::kNvSwitch) == 2);
  // The hosts' NICs: 18 trays x 4 NICs = 72 per rack, one per GPU.
  CHECK(t.rails() == 72);
  CHECK(t.count(VertexKind::kNic) == 144);
  CHECK(t.domain_of(71) == 0);
  CHECK(t.domain_of(72) == 1);
  CHECK(t.host_of(3) == 0);
  CHECK(t.host_of(4) == 1);
  CHECK(t.host_of(71) == 17);
  CHECK(t.host_of(72) == 18);
  // GPUs of different trays of one rack talk over NVLink only: up to the switch and down.
  std::vector<LinkId> path;
  t.route(0, 70, path);
  REQUIRE(path.size() == 2);
  CHECK(count_kind(t, path, LinkKind::kNvLink) == 2);
  CHECK(t.link(path[0]).bandwidth.gbytes_per_s() == Approx(900));
  CHECK(t.switch_hops(0, 70) == 0);
  // Between racks: out of a NIC (over NVLink to the GPU on the destination's rail, PXN).
  path.clear();
  t.route(0, 72 + 5, path);
  CHECK(count_kind(t, path, LinkKind::kNetwork) == 2);
  CHECK(t.switch_hops(0, 72 + 5) >= 1);
}

TEST_CASE("a job may use part of each NVLink domain", "[topology]") {
  // 64 of 72 GPUs per rack: GPU 64 opens the second rack; the 8 spare GPUs have no vertex.
  const Topology t(ts::testing::gb200_nvl72(64), 128);
  CHECK(t.num_domains() == 2);
  CHECK(t.domain_of(63) == 0);
  CHECK(t.domain_of(64) == 1);
  CHECK(t.local_index(64) == 0);
  CHECK(t.host_of(64) == 16);  // 16 trays of 4 per rack used
  CHECK(t.rails() == 64);
  CHECK(t.count(VertexKind::kGpu) == 128);
  // Filling the racks instead puts 56 GPUs in the second rack.
  const Topology full(ts::testing::gb200_nvl72(), 128);
  CHECK(full.domain_of(64) == 0);
  CHECK(full.domain_of(72) == 1);
}

TEST_CASE("a DGX node is a domain of one host: the node shorthand's topology", "[topology]") {
  const auto spec = ts::testing::dgx_h100();
  CHECK(spec.nics_per_domain() == 8);
  const Topology t(spec, 32);
  CHECK(t.num_domains() == 4);
  CHECK(t.host_of(9) == t.domain_of(9));
  CHECK(t.rails() == 8);
}

TEST_CASE("a partly filled last domain routes without PXN where no GPU owns the rail",
          "[topology]") {
  // 80 GPUs on 72-GPU racks: the second rack holds GPUs 72-79 only (local 0-7).
  const Topology t(ts::testing::gb200_nvl72(), 80);
  CHECK(t.num_domains() == 2);
  std::vector<LinkId> path;
  // GPU 75 (rack 1, rail 3) to GPU 10 (rack 0, rail 10): rack 1 has no GPU on rail 10, so the
  // data leaves through GPU 75's own NIC and changes rail at a spine.
  t.route(75, 10, path);
  CHECK(count_kind(t, path, LinkKind::kNvLink) == 0);
  CHECK(count_kind(t, path, LinkKind::kFabric) == 2);
  for (const LinkId l : path) {
    CHECK(t.link(l).from < t.num_vertices());
    if (t.vertex_kind(t.link(l).from) == VertexKind::kGpu) CHECK(t.link(l).from == 75);
  }
  // The other way, rack 0 has every rail: PXN as usual.
  path.clear();
  t.route(10, 75, path);
  CHECK(count_kind(t, path, LinkKind::kNvLink) == 2);
  CHECK(count_kind(t, path, LinkKind::kFabric) == 0);
}
