// Collective schedules: traffic each algorithm moves, conservation of bytes, NCCL's trees.
#include <catch2/catch.hpp>

#include <numeric>
#include <set>

#include "sim/network/schedule.h"

using namespace ts::network;

namespace {

double sum(const std::vector<double>& v) { return std::accumulate(v.begin(), v.end(), 0.0); }

const std::vector<GroupShape> kShapes = {
    {2, 1, 2},   {3, 1, 3},   {5, 1, 5},    {8, 1, 8},     {2, 2, 1},  {16, 16, 1},  {16, 2, 8},
    {24, 3, 8},  {12, 3, 4},  {64, 8, 8},   {6, 3, 2},     {7, 3, 0},  {128, 16, 8}, {9, 9, 1},
};
const std::vector<CollectiveOp> kOps = {CollectiveOp::kAllReduce, CollectiveOp::kAllGather,
                                        CollectiveOp::kReduceScatter, CollectiveOp::kAllToAll,
                                        CollectiveOp::kBroadcast, CollectiveOp::kSendRecv};
const std::vector<Algorithm> kAlgos = {Algorithm::kRing, Algorithm::kTree, Algorithm::kNvls, Algorithm::kDirect,
                                       Algorithm::kHierarchical};

}  // namespace

TEST_CASE("every schedule conserves bytes: what is sent is received", "[network][property]") {
  // For every (collective, algorithm, group shape): Σ over positions and NVSwitches of bytes
  // sent equals Σ of bytes received, every transfer stays inside the group, and every position
  // takes part (sends and receives something).
  int checked = 0;
  for (const auto& shape : kShapes) {
    for (const auto op : kOps) {
      for (const auto algo : kAlgos) {
        for (const auto& sc : build_schedules(op, algo, shape, true)) {
          INFO(collective_name(op) << " " << algorithm_name(algo) << " " << sc.variant << " n=" << shape.size
                                   << " nodes=" << shape.nodes << " per_node=" << shape.per_node);
          const Traffic t = traffic(sc);
          REQUIRE(t.sent.size() == static_cast<std::size_t>(shape.size));
          CHECK(sum(t.sent) + t.switch_sent == Approx(sum(t.received) + t.switch_received).epsilon(1e-12));
          for (std::size_t i = 0; i < t.sent.size(); ++i) {
            // A broadcast chain's last position only receives; everyone else sends.
            if (!(op == CollectiveOp::kBroadcast && i + 1 == t.sent.size())) CHECK(t.sent[i] > 0);
            if (!(op == CollectiveOp::kBroadcast && i == 0)) CHECK(t.received[i] > 0);
          }
          ++checked;
        }
      }
    }
  }
  CHECK(checked > 60);
}

TEST_CASE("ring traffic per rank matches the nccl-tests bus bandwidth factors", "[network]") {
  // One node, n ranks, bytes S: a ring all-reduce sends 2(n-1)/n·S per rank, all-gather and
  // reduce-scatter (n-1)/n·S (nccl-tests doc/PERFORMANCE.md), all-to-all (n-1)/n·S.
  for (const int n : {2, 3, 4, 7, 8}) {
    const GroupShape s{n, 1, n};
    const auto ar = traffic(build_schedules(CollectiveOp::kAllReduce, Algorithm::kRing, s, false).at(0));
    const auto ag = traffic(build_schedules(CollectiveOp::kAllGather, Algorithm::kRing, s, false).at(0));
    const auto rs = traffic(build_schedules(CollectiveOp::kReduceScatter, Algorithm::kRing, s, false).at(0));
    const auto a2a = traffic(build_schedules(CollectiveOp::kAllToAll, Algorithm::kDirect, s, false).at(0));
    for (int i = 0; i < n; ++i) {
      const auto k = static_cast<std::size_t>(i);
      CHECK(ar.sent[k] == Approx(2.0 * (n - 1) / n));
      CHECK(ag.sent[k] == Approx(1.0 * (n - 1) / n));
      CHECK(rs.received[k] == Approx(1.0 * (n - 1) / n));
      CHECK(a2a.sent[k] == Approx(1.0 * (n - 1) / n));
    }
    CHECK(bus_bandwidth_factor(CollectiveOp::kAllReduce, n) == Approx(2.0 * (n - 1) / n));
  }
}

TEST_CASE("multi-node ring: each rail carries 1/per_node of a step to the next node", "[network]") {
  // 3 nodes of 8: per step every GPU sends the chunk S/n over NVLink (the node's chain closed
  // through the GPU owning the outgoing NIC) and its NIC carries S/(n·8) to the same rail of the
  // next node, so a rank sends 2(n-1)/n·S·(1 + 1/8) in total.
  const GroupShape s{24, 3, 8};
  const auto sc = build_schedules(CollectiveOp::kAllReduce, Algorithm::kRing, s, false).at(0);
  REQUIRE(sc.steps.size() == 1);
  CHECK(sc.steps[0].repeat == 2 * 23);
  CHECK(sc.hops.ring_network == 2 * 2);
  CHECK(sc.hops.ring_nvlink == 2 * 23 - 4);
  const auto t = traffic(sc);
  CHECK(t.sent[5] == Approx(2.0 * 23 / 24 * (1 + 1.0 / 8)));
}

TEST_CASE("NVLS moves (n+1)/n of the buffer each way between a GPU and the switch", "[network]") {
  const GroupShape s{8, 1, 8};
  CHECK(build_schedules(CollectiveOp::kAllReduce, Algorithm::kNvls, s, false).empty());
  const auto sc = build_schedules(CollectiveOp::kAllReduce, Algorithm::kNvls, s, true).at(0);
  const auto t = traffic(sc);
  for (const double x : t.sent) CHECK(x == Approx(9.0 / 8));
  for (const double x : t.received) CHECK(x == Approx(9.0 / 8));
  CHECK(t.switch_received == Approx(9.0));
  // No NVLS across nodes, nor for other collectives.
  CHECK(build_schedules(CollectiveOp::kAllReduce, Algorithm::kNvls, GroupShape{16, 2, 8}, true).empty());
  CHECK(build_schedules(CollectiveOp::kAllGather, Algorithm::kNvls, s, true).empty());
}

TEST_CASE("NCCL double binary tree: two spanning trees, inner ranks of one are leaves of the other",
          "[network]") {
  // ncclGetBtree's inner ranks are the even ones (odd ranks have no children). The mirror
  // (n even) maps even to odd, so no rank is inner twice; the shift (n odd) maps r to r-1, so
  // only rank 0 (playing n-1, even) can be.
  for (int n = 1; n <= 300; ++n) {
    INFO("n=" << n);
    const DoubleBinaryTree t = double_binary_tree(n);
    std::vector<int> inner(static_cast<std::size_t>(n), 0);
    for (const auto& parent : t.parent) {
      int roots = 0;
      for (int r = 0; r < n; ++r) {
        const int p = parent[static_cast<std::size_t>(r)];
        if (p < 0) {
          ++roots;
          continue;
        }
        REQUIRE(p < n);
        // Walking up reaches the root in fewer than n steps (no cycle).
        int x = r, steps = 0;
        while (parent[static_cast<std::size_t>(x)] >= 0 && steps <= n) {
          x = parent[static_cast<std::size_t>(x)];
          ++steps;
        }
        REQUIRE(steps < n);
      }
      CHECK(roots == 1);
      // Binary: at most two children.
      std::vector<int> children(static_cast<std::size_t>(n), 0);
      for (int r = 0; r < n; ++r) {
        const int p = parent[static_cast<std::size_t>(r)];
        if (p >= 0) ++children[static_cast<std::size_t>(p)];
      }
      for (int r = 0; r < n; ++r) {
        CHECK(children[static_cast<std::size_t>(r)] <= 2);
        if (children[static_cast<std::size_t>(r)] > 0) ++inner[static_cast<std::size_t>(r)];
      }
    }
    for (int r = 0; r < n; ++r) CHECK(inner[static_cast<std::size_t>(r)] <= (r == 0 && n % 2 == 1 ? 2 : 1));
    // Depth is logarithmic: ≤ ceil(log2 n) + 1.
    int lg = 0;
    while ((1 << lg) < n) ++lg;
    CHECK(t.depth <= lg + 1);
  }
}

TEST_CASE("tree all-reduce: an inner node of one tree sends twice the buffer over its NICs", "[network]") {
  // 16 nodes, 1 GPU each: in the tree where a node is inner it sends S/2 up and S/2 to each of
  // two children (1.5·S), and as a leaf of the other tree S/2 up: 2·S out; a leaf of both
  // sends S. Received likewise. This is NCCL's tree bandwidth of half the NIC rate (tuning.cc).
  const GroupShape s{16, 16, 1};
  const auto t = traffic(build_schedules(CollectiveOp::kAllReduce, Algorithm::kTree, s, false).at(0));
  double most = 0;
  for (const double x : t.sent) most = std::max(most, x);
  CHECK(most == Approx(2.0));
}

TEST_CASE("hierarchical all-reduce: reduce-scatter in node, all-reduce of a 1/p share across", "[network]") {
  const GroupShape s{32, 4, 8};
  const auto all = build_schedules(CollectiveOp::kAllReduce, Algorithm::kHierarchical, s, false);
  REQUIRE(all.size() == 2);
  CHECK(all[0].variant == "ring+ring");
  CHECK(all[1].variant == "ring+tree");
  // ring+ring: in node 2·(7/8)·S over NVLink; across nodes 2·(3/4)·(S/8) per rank.
  const auto t = traffic(all[0]);
  CHECK(t.sent[0] == Approx(2 * 7.0 / 8 + 2 * 3.0 / 4 / 8));
  CHECK(build_schedules(CollectiveOp::kAllReduce, Algorithm::kHierarchical, GroupShape{8, 8, 1}, false).empty());
  CHECK(build_schedules(CollectiveOp::kAllReduce, Algorithm::kHierarchical, s, true).at(0).variant == "nvls+ring");
}

TEST_CASE("applicable algorithms by collective and group shape", "[network]") {
  using V = std::vector<Algorithm>;
  CHECK(applicable_algorithms(CollectiveOp::kAllReduce, {8, 1, 8}, true) == V{Algorithm::kRing, Algorithm::kNvls});
  CHECK(applicable_algorithms(CollectiveOp::kAllReduce, {8, 1, 8}, false) == V{Algorithm::kRing});
  CHECK(applicable_algorithms(CollectiveOp::kAllReduce, {16, 2, 8}, true) ==
        V{Algorithm::kRing, Algorithm::kTree, Algorithm::kHierarchical});
  CHECK(applicable_algorithms(CollectiveOp::kAllToAll, {16, 2, 8}, true) == V{Algorithm::kDirect});
  CHECK(applicable_algorithms(CollectiveOp::kAllGather, {16, 2, 8}, true) == V{Algorithm::kRing});
  // Irregular placement (7 ranks on 3 nodes): flat ring only.
  CHECK(applicable_algorithms(CollectiveOp::kAllReduce, {7, 3, 0}, true) == V{Algorithm::kRing});
}

TEST_CASE("collective and algorithm names round-trip", "[network]") {
  for (const auto op : kOps) CHECK(parse_collective(collective_name(op)) == op);
  for (const auto a : kAlgos) CHECK(parse_algorithm(algorithm_name(a)) == a);
  CHECK(!parse_collective("allreduce").has_value());
}
