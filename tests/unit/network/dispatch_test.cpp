// The hierarchical (DeepEP/HybridEP) token dispatch: node reach of a token and its schedule's time.
#include <catch2/catch.hpp>

#include <algorithm>

#include "sim/network/network_model.h"
#include "sim/network/schedule.h"
#include "tests/unit/topology/test_clusters.h"

using namespace ts;
using namespace ts::network;
using topology::Topology;

namespace {

CollectiveRequest all_to_all(Bytes bytes, std::int32_t n, TokenRouting routing) {
  CollectiveRequest r;
  r.op = CollectiveOp::kAllToAll;
  r.bytes = bytes;
  r.routing = routing;
  r.groups.emplace_back();
  for (std::int32_t g = 0; g < n; ++g) r.groups.back().push_back(g);
  return r;
}

}  // namespace

TEST_CASE("node reach of a token without and with a group limit", "[network]") {
  // 4 experts on 2 nodes, top 2: a node is missed when both picks are on the other node,
  // C(2,2)/C(4,2) = 1/6.
  CHECK(node_reach({4, 2, 0, 0}, 2) == Approx(5.0 / 6.0));
  // 8 experts in 4 groups of 2, a token inside 2 groups, one group per node: the node's group is
  // one of the token's with probability C(1,1)C(3,1)/C(4,2) = 1/2, and then missed by both picks
  // from the 4 experts of the two groups with C(2,2)/C(4,2) = 1/6: reach = 1/2 · 5/6.
  CHECK(node_reach({8, 2, 4, 2}, 4) == Approx(5.0 / 12.0));
  // Groups of 4 experts spanning two nodes of 2: the group is chosen with 1/2, then the node is
  // missed with C(2,2)/C(4,2): the same 5/12.
  CHECK(node_reach({8, 2, 2, 1}, 4) == Approx(5.0 / 12.0));
  // A limit of every group is no limit.
  CHECK(node_reach({8, 2, 4, 4}, 4) == Approx(node_reach({8, 2, 0, 0}, 4)));
  // DeepSeek-V3 on 8 nodes: 256 experts, top 8 inside 4 of 8 groups; 8 nodes hold one group
  // each: 1/2 · (1 − C(96,8)/C(128,8)) = 0.4536; without the limit 1 − C(224,8)/C(256,8).
  CHECK(node_reach({256, 8, 8, 4}, 8) == Approx(0.45363).epsilon(1e-4));
  CHECK(node_reach({256, 8, 0, 0}, 8) == Approx(0.66183).epsilon(1e-4));
}

TEST_CASE("a dispatch sends a token once per node over the NICs", "[network]") {
  // 64 B200 GPUs in 8 DGX nodes, uncalibrated (line rates: NVLink 900 GB/s, NIC 50 GB/s).
  const Topology dgx(ts::testing::dgx_b200(), 64);
  const NetworkModel net(dgx);
  const Bytes bytes = Bytes::mib(256);
  const TokenRouting ds{256, 8, 8, 4};
  const CollectiveCost dispatch = net.collective(all_to_all(bytes, 64, ds));
  CHECK(dispatch.algorithm == Algorithm::kHierarchical);
  // Each GPU sends node_reach / top_k of its buffer to each of the 7 other nodes over its own
  // NIC, and rank_dedup / 8 of it to each of its 7 node peers over NVLink; the NIC is the
  // bottleneck.
  const double nic_s = bytes.real() * 7.0 * node_reach(ds, 8) / 8.0 / 50e9;
  const double nvlink_s = bytes.real() * 7.0 * rank_dedup(ds, 64) / 8.0 / 900e9;
  CHECK(dispatch.time.seconds() == Approx(std::max(nic_s, nvlink_s)).epsilon(0.01));
  // NCCL's direct all-to-all sends 56/64 of the buffer over the NIC: 1/0.45 times more.
  const CollectiveCost direct = net.collective(all_to_all(bytes, 64, {}));
  CHECK(direct.algorithm == Algorithm::kDirect);
  CHECK(direct.time.seconds() == Approx(bytes.real() * 56.0 / 64.0 / 50e9).epsilon(0.01));
  CHECK(dispatch.time < direct.time);
}

TEST_CASE("a dispatch sends a token once to each rank of its experts", "[network]") {
  // One expert per rank: every copy goes to its own rank.
  CHECK(rank_dedup({8, 2, 0, 0}, 8) == Approx(1.0));
  // 4 experts on 2 ranks, top 2: a token reaches 2 · 5/6 ranks for its 2 copies.
  CHECK(rank_dedup({4, 2, 0, 0}, 2) == Approx(5.0 / 6.0));
  // Qwen3-30B-A3B (128 experts, top 8) on 8 ranks of 16: 8 · (1 − C(112,8)/C(128,8)) / 8.
  CHECK(rank_dedup({128, 8, 0, 0}, 8) == Approx(0.66742).epsilon(1e-4));
  // Ranks that do not divide the experts: the copies as they are.
  CHECK(rank_dedup({128, 8, 0, 0}, 6) == 1.0);
}

TEST_CASE("inside one node the dispatch is the direct all-to-all of fewer bytes", "[network]") {
  const Topology dgx(ts::testing::dgx_b200(), 8);
  const NetworkModel net(dgx);
  const Bytes bytes = Bytes::mib(64);
  const TokenRouting ds{256, 8, 8, 4};
  const CollectiveCost dispatch = net.collective(all_to_all(bytes, 8, ds));
  const CollectiveCost direct = net.collective(all_to_all(bytes, 8, {}));
  CHECK(dispatch.algorithm == Algorithm::kDirect);
  CHECK(dispatch.latency == direct.latency);
  // DeepSeek-V3 on 8 ranks of one group each: the node reach above, 0.454, of the copies.
  CHECK((dispatch.time - dispatch.latency).seconds() ==
        Approx(rank_dedup(ds, 8) * (direct.time - direct.latency).seconds()).epsilon(1e-6));
  CHECK(rank_dedup(ds, 8) == Approx(node_reach(ds, 8)));
}
