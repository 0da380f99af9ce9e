// Collectives in a rack-scale NVLink domain (NVL72) against the same GPUs in 8-GPU nodes.
#include <catch2/catch.hpp>

#include "sim/network/network_model.h"
#include "tests/unit/topology/test_clusters.h"

using namespace ts;
using namespace ts::network;
using topology::Topology;

namespace {

CollectiveRequest all_ranks(CollectiveOp op, Bytes bytes, std::int32_t n) {
  CollectiveRequest r;
  r.op = op;
  r.bytes = bytes;
  r.groups.emplace_back();
  for (std::int32_t g = 0; g < n; ++g) r.groups.back().push_back(g);
  return r;
}

}  // namespace

TEST_CASE("a 64-rank all-to-all inside one NVL72 domain runs over NVLink only", "[network]") {
  const Bytes bytes = Bytes::mib(256);
  const Topology nvl72(ts::testing::gb200_nvl72(), 64);
  const NetworkModel net(nvl72);  // uncalibrated: links at line rate, no protocol latency
  const CollectiveCost c = net.collective(all_ranks(CollectiveOp::kAllToAll, bytes, 64));
  // Direct all-to-all: every GPU sends 63/64 of the buffer through its own NVLink port at
  // 900 GB/s, and nothing else is shared (the NVSwitch is non-blocking).
  const double expected_s = bytes.real() * 63.0 / 64.0 / 900e9;
  CHECK(c.time.seconds() == Approx(expected_s).epsilon(0.01));
  CHECK(net.shape_of(all_ranks(CollectiveOp::kAllToAll, bytes, 64).groups.front()).nodes == 1);

  // The same 64 GPUs as eight DGX B200 nodes: 56/64 of each GPU's buffer leaves through its
  // 400 Gb/s NIC (50 GB/s), 18 times slower than NVLink; the issue asks for at least 3x.
  const Topology dgx(ts::testing::dgx_b200(), 64);
  const NetworkModel net8(dgx);
  const CollectiveCost c8 = net8.collective(all_ranks(CollectiveOp::kAllToAll, bytes, 64));
  CHECK(c8.time.seconds() >= 3.0 * c.time.seconds());
  CHECK(c8.time.seconds() >= bytes.real() * 56.0 / 64.0 / 50e9 * 0.99);
}

TEST_CASE("across NVL72 domains the all-to-all is bound by the NICs", "[network]") {
  const Bytes bytes = Bytes::mib(256);
  // 128 GPUs, 64 per rack: half of each GPU's buffer crosses racks over its 400 Gb/s NIC.
  const Topology t(ts::testing::gb200_nvl72(64), 128);
  const NetworkModel net(t);
  const CollectiveCost c = net.collective(all_ranks(CollectiveOp::kAllToAll, bytes, 128));
  CHECK(c.time.seconds() >= bytes.real() * 64.0 / 128.0 / 50e9 * 0.99);
  const Topology one(ts::testing::gb200_nvl72(), 64);
  const CollectiveCost inside =
      NetworkModel(one).collective(all_ranks(CollectiveOp::kAllToAll, bytes, 64));
  CHECK(c.time > inside.time);
}

TEST_CASE("a ring all-reduce over 72 GPUs of one domain runs at the NVLink rate", "[network]") {
  // Ring busbw = NVLink line rate, whatever the ring's length (no per-count factor above 8).
  const Bytes bytes = Bytes::gib(1);
  const Topology t(ts::testing::gb200_nvl72(), 72);
  const NetworkModel net(t);
  CollectiveRequest r = all_ranks(CollectiveOp::kAllReduce, bytes, 72);
  r.algorithm = Algorithm::kRing;
  const CollectiveCost c = net.collective(r);
  const double busbw = bytes.real() * 2.0 * 71.0 / 72.0 / c.time.seconds();
  CHECK(busbw == Approx(900e9).epsilon(0.01));
}
