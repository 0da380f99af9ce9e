// NetworkModel: max-min sharing, line-rate formulas, contention between groups, monotonicity.
#include <catch2/catch.hpp>

#include <limits>
#include <set>

#include "sim/base/diagnostic.h"
#include "sim/network/flow_solver.h"
#include "sim/network/network_model.h"
#include "tests/unit/topology/test_clusters.h"

using namespace ts;
using namespace ts::network;
using topology::Topology;

namespace {

std::vector<Group> contiguous_groups(int size, int count, int first = 0) {
  std::vector<Group> gs(static_cast<std::size_t>(count));
  for (int g = 0; g < count; ++g) {
    for (int i = 0; i < size; ++i) gs[static_cast<std::size_t>(g)].push_back(first + g * size + i);
  }
  return gs;
}

// `count` groups of `size`, group g = {g, g + count, g + 2·count, …} (data-parallel groups of a
// tensor-parallel degree `count`).
std::vector<Group> strided_groups(int size, int count) {
  std::vector<Group> gs(static_cast<std::size_t>(count));
  for (int g = 0; g < count; ++g) {
    for (int i = 0; i < size; ++i) gs[static_cast<std::size_t>(g)].push_back(g + i * count);
  }
  return gs;
}

CollectiveRequest request(CollectiveOp op, Bytes bytes, std::vector<Group> groups, Algorithm a = Algorithm::kAuto) {
  CollectiveRequest r;
  r.op = op;
  r.bytes = bytes;
  r.groups = std::move(groups);
  r.algorithm = a;
  return r;
}

// A profile with protocol latencies, to exercise the latency terms (values are arbitrary test
// inputs, not calibration).
NetworkProfile test_profile() {
  NetworkProfile p = ideal_profile();
  p.nvlink_efficiency = 0.8;
  p.nvls_efficiency = 0.7;
  p.network_efficiency = 0.9;
  p.tree_bandwidth_fraction = 0.9;
  p.nvls_base_latency = Duration::from_us(20);
  p.p2p_latency = Duration::from_us(3);
  const auto set = [&](Protocol proto, double frac, double base, double nvl, double net) {
    auto& pc = p.protocols[static_cast<std::size_t>(proto)];
    pc.enabled = true;
    pc.bandwidth_fraction = frac;
    pc.base_latency = Duration::from_us(base);
    pc.ring = {Duration::from_us(nvl), Duration::from_us(net)};
    pc.tree = {Duration::from_us(nvl), Duration::from_us(2 * net)};
  };
  set(Protocol::kLL, 0.3, 10, 0.6, 2.7);
  set(Protocol::kLL128, 0.9, 20, 1.9, 4);
  set(Protocol::kSimple, 1.0, 40, 3.4, 14);
  return p;
}

}  // namespace

TEST_CASE("max-min fair rates: the textbook example", "[network][flow]") {
  // Bertsekas & Gallager §6.5.2: link 0 (capacity 1) carries flows a, b, c; link 1 (capacity 2)
  // carries c and d. Filling: all grow to 1/3 where link 0 saturates (a, b, c frozen at 1/3);
  // d grows alone to 2 - 1/3 = 5/3.
  MaxMinSolver s;
  const std::vector<std::int32_t> l0{0}, l01{0, 1}, l1{1};
  s.add_flow(l0);
  s.add_flow(l0);
  s.add_flow(l01);
  s.add_flow(l1);
  const std::vector<double> cap{1.0, 2.0};
  s.solve(cap);
  CHECK(s.rate(0) == Approx(1.0 / 3));
  CHECK(s.rate(1) == Approx(1.0 / 3));
  CHECK(s.rate(2) == Approx(1.0 / 3));
  CHECK(s.rate(3) == Approx(5.0 / 3));
  CHECK(s.rounds() == 2);
  // Infinite links never limit; a flow over none is unbounded.
  s.clear();
  const std::vector<std::int32_t> l2{2}, none{};
  s.add_flow(l2);
  s.add_flow(none);
  const std::vector<double> cap2{1.0, 1.0, std::numeric_limits<double>::infinity()};
  s.solve(cap2);
  CHECK(s.rate(0) == std::numeric_limits<double>::infinity());
  CHECK(s.rate(1) == std::numeric_limits<double>::infinity());
}

TEST_CASE("uncalibrated ring all-reduce in a node runs at the NVLink line rate", "[network]") {
  // Ideal profile, one 8-GPU node at 450 GB/s: ring time = 2(n-1)/n · S / B, so the bus bandwidth
  // S/t · 2(n-1)/n is exactly 450 GB/s (nccl-tests definition).
  const Topology topo(testing::dgx_h100(), 8);
  const NetworkModel net(topo);
  const Bytes s = Bytes::gib(1);
  const auto c = net.collective(request(CollectiveOp::kAllReduce, s, contiguous_groups(8, 1), Algorithm::kRing));
  CHECK(c.algorithm == Algorithm::kRing);
  CHECK(c.time.seconds() == Approx(2.0 * 7 / 8 * s.real() / 450e9).epsilon(1e-9));
  // NVLS at line rate: (n+1)/n · S / B each way, busbw = 2(n-1)/(n+1) · B = 700 GB/s.
  const auto v = net.collective(request(CollectiveOp::kAllReduce, s, contiguous_groups(8, 1), Algorithm::kNvls));
  CHECK(s.real() / v.time.seconds() * 2 * 7 / 8 == Approx(2.0 * 7 / 9 * 450e9).epsilon(1e-9));
  // Auto picks the faster: NVLS.
  CHECK(net.collective(request(CollectiveOp::kAllReduce, s, contiguous_groups(8, 1))).algorithm == Algorithm::kNvls);
}

TEST_CASE("multi-node ring is bound by the node's NICs: busbw = rails · NIC rate", "[network]") {
  // 4 nodes of 8 A100 with 8 HDR NICs (25 GB/s): per step each rail carries chunk/8 while NVLink
  // carries chunk, so NICs bound the step: busbw = 8 · 25 = 200 GB/s < NVLink 300. With 4 NICs,
  // 100 GB/s (the 3-node A100 system of nccl-tests#119 computes the same bound).
  for (const int nics : {8, 4}) {
    auto spec = testing::dgx_a100();
    spec.host.nics_per_host = nics;
    const Topology topo(spec, 32);
    const NetworkModel net(topo);
    const Bytes s = Bytes::gib(1);
    const auto c = net.collective(request(CollectiveOp::kAllReduce, s, contiguous_groups(32, 1), Algorithm::kRing));
    const double busbw = s.real() / c.time.seconds() * bus_bandwidth_factor(CollectiveOp::kAllReduce, 32);
    CHECK(busbw == Approx(nics * 25e9).epsilon(1e-6));
  }
}

TEST_CASE("K disjoint groups inside nodes take the same time as one", "[network][property]") {
  const Topology topo(testing::dgx_h100(), 64);
  const NetworkModel net(topo, test_profile());
  for (const auto op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                        CollectiveOp::kAllToAll, CollectiveOp::kBroadcast}) {
    for (const int size : {2, 4, 8}) {
      const Bytes s = Bytes::mib(64);
      const auto one = net.collective(request(op, s, contiguous_groups(size, 1)));
      const auto all = net.collective(request(op, s, contiguous_groups(size, 64 / size)));
      INFO(collective_name(op) << " size " << size);
      CHECK(all.time == one.time);
      CHECK(all.algorithm == one.algorithm);
    }
  }
}

TEST_CASE("groups inside nodes use disjoint links, NVLS included", "[network]") {
  // Why the model costs one in-node group for all: every transfer of a group inside a node runs
  // over its own GPUs' NVLink links to the NVSwitch, so two groups never share a link.
  const Topology topo(testing::dgx_h100(), 16);
  std::set<topology::LinkId> first, second;
  std::vector<topology::LinkId> path;
  for (int a = 0; a < 4; ++a) {
    for (int b = 0; b < 4; ++b) {
      path.clear();
      topo.route(a, b, path);
      first.insert(path.begin(), path.end());
      path.clear();
      topo.route(4 + a, 4 + b, path);
      second.insert(path.begin(), path.end());
    }
    first.insert({topo.nvlink_up(a), topo.nvlink_down(a)});
    second.insert({topo.nvlink_up(4 + a), topo.nvlink_down(4 + a)});
  }
  for (const auto l : first) CHECK(second.count(l) == 0);
  CHECK(first.size() == 8);
}

TEST_CASE("eight TP groups in eight nodes do not contend, DP groups across an oversubscribed spine do",
          "[network][property]") {
  // 16 nodes, 4 per leaf unit; DP pairs {node j, node j+4} for j in the first unit cross the
  // spine on one rail. Non-blocking: 4 uplinks, D-mod-k gives each pair its own → as fast as a
  // single pair. Oversubscribed 4:1: one uplink shared by the 4 pairs → 4x the bandwidth time.
  auto spec = testing::dgx_h100();
  spec.fabric.nodes_per_leaf = 4;
  const Bytes s = Bytes::gib(1);
  std::vector<Group> pairs;
  for (int j = 0; j < 4; ++j) pairs.push_back({j * 8, (j + 4) * 8});
  for (const double oversub : {1.0, 4.0}) {
    spec.fabric.oversubscription = oversub;
    const Topology topo(spec, 128);
    const NetworkModel net(topo);
    const auto one = net.collective(request(CollectiveOp::kAllReduce, s, {pairs[0]}, Algorithm::kRing));
    const auto four = net.collective(request(CollectiveOp::kAllReduce, s, pairs, Algorithm::kRing));
    INFO("oversubscription " << oversub);
    // Bandwidth parts (the latency, here the fabric's switch traversals, is the same).
    CHECK((four.time - four.latency).seconds() / (one.time - one.latency).seconds() == Approx(oversub).epsilon(1e-9));
    // TP groups (8 GPUs of one node each) never leave their node.
    const auto tp_one = net.collective(request(CollectiveOp::kAllReduce, s, contiguous_groups(8, 1)));
    const auto tp_all = net.collective(request(CollectiveOp::kAllReduce, s, contiguous_groups(8, 16)));
    CHECK(tp_all.time == tp_one.time);
  }
}

TEST_CASE("concurrent DP groups on separate rails do not contend, on a shared NIC they do", "[network]") {
  // 8 DP groups (one per local GPU index) of 4 GPUs across 4 nodes: each on its own rail.
  auto spec = testing::dgx_a100();
  const Bytes s = Bytes::mib(256);
  {
    const Topology topo(spec, 32);
    const NetworkModel net(topo);
    const auto one = net.collective(request(CollectiveOp::kAllReduce, s, {strided_groups(4, 8)[0]}, Algorithm::kRing));
    const auto all = net.collective(request(CollectiveOp::kAllReduce, s, strided_groups(4, 8), Algorithm::kRing));
    CHECK(all.time == one.time);
  }
  {
    // Two GPUs per NIC: two DP groups share every NIC → twice the bandwidth time.
    spec.host.nics_per_host = 4;
    const Topology topo(spec, 32);
    const NetworkModel net(topo);
    const auto one = net.collective(request(CollectiveOp::kAllReduce, s, {strided_groups(4, 8)[0]}, Algorithm::kRing));
    const auto all = net.collective(request(CollectiveOp::kAllReduce, s, strided_groups(4, 8), Algorithm::kRing));
    CHECK(all.time.seconds() == Approx(2 * one.time.seconds()).epsilon(1e-9));
  }
}

TEST_CASE("time is monotone in size and never grows with more bandwidth", "[network][property]") {
  // For every collective, algorithm and group placement: t(S) is non-decreasing in S, and doubling
  // every line rate (NVLink, NICs, fabric) never makes it slower.
  // Doubling only NVLink or only the NICs is checked too: max-min sharing is not monotone in one
  // link's capacity in general, but for these schedules it must be.
  const auto profile = test_profile();
  for (const int which : {0, 1, 2, 3, 4, 5}) {
    const bool multi = which >= 3;
    auto slow = testing::dgx_h100();
    auto fast = slow;
    if (which % 3 != 2) fast.scale_up.nvlink_bandwidth = slow.scale_up.nvlink_bandwidth * 2;
    if (which % 3 != 1) fast.host.nic_bandwidth = slow.host.nic_bandwidth * 2;
    const int gpus = multi ? 64 : 8;
    const Topology ts(slow, gpus), tf(fast, gpus);
    const NetworkModel ns(ts, profile), nf(tf, profile);
    const std::vector<std::vector<Group>> placements =
        multi ? std::vector<std::vector<Group>>{contiguous_groups(64, 1), strided_groups(8, 8), contiguous_groups(16, 4)}
              : std::vector<std::vector<Group>>{contiguous_groups(8, 1), contiguous_groups(4, 2)};
    for (const auto& groups : placements) {
      for (const auto op : {CollectiveOp::kAllReduce, CollectiveOp::kAllGather, CollectiveOp::kReduceScatter,
                            CollectiveOp::kAllToAll, CollectiveOp::kBroadcast, CollectiveOp::kSendRecv}) {
        for (const auto algo : {Algorithm::kAuto, Algorithm::kRing, Algorithm::kTree, Algorithm::kNvls,
                                Algorithm::kDirect, Algorithm::kHierarchical}) {
          if (algo != Algorithm::kAuto &&
              build_schedules(op, algo, ns.shape_of(groups.front()), ns.nvls_available()).empty()) {
            continue;
          }
          Duration prev = Duration::zero();
          for (std::int64_t b = 1024; b <= (std::int64_t{16} << 30); b *= 4) {
            const auto r = request(op, Bytes(b), groups, algo);
            const Duration t = ns.collective(r).time;
            INFO(collective_name(op) << " " << algorithm_name(algo) << " groups " << groups.size() << " bytes " << b);
            CHECK(t >= prev);
            CHECK(nf.collective(r).time <= t);
            prev = t;
          }
        }
      }
    }
  }
}

TEST_CASE("protocol choice follows size: low latency small, full bandwidth large", "[network]") {
  const Topology topo(testing::dgx_a100(), 8);
  const NetworkModel net(topo, test_profile());
  const auto small = net.collective(request(CollectiveOp::kAllReduce, Bytes(4096), contiguous_groups(8, 1)));
  const auto large = net.collective(request(CollectiveOp::kAllReduce, Bytes::gib(4), contiguous_groups(8, 1)));
  CHECK(small.protocol == Protocol::kLL);
  CHECK(large.protocol == Protocol::kSimple);
  // Latency of LL: base 10 + 14 ring steps · 0.6 us.
  CHECK(small.latency.us() == Approx(10 + 14 * 0.6));
  // A100 has no NVLink SHARP: never NVLS.
  CHECK(large.algorithm == Algorithm::kRing);
}

TEST_CASE("across many nodes the tree wins at small sizes, by latency", "[network]") {
  // 64 nodes x 1 GPU: ring latency grows with 2(n-1) network steps, the tree's with 2·depth.
  auto spec = testing::dgx_a100();
  const Topology topo(spec, 512);
  const NetworkModel net(topo, test_profile());
  const auto groups = strided_groups(64, 8);
  const auto small = net.collective(request(CollectiveOp::kAllReduce, Bytes::mib(1), groups));
  CHECK(small.algorithm == Algorithm::kTree);
  const auto ring = net.collective(request(CollectiveOp::kAllReduce, Bytes::mib(1), groups, Algorithm::kRing));
  CHECK(ring.latency > small.latency);
}

TEST_CASE("send/recv: NVLink inside a node, the NIC across", "[network]") {
  const Topology topo(testing::dgx_h100(), 16);
  const NetworkModel net(topo);
  const Bytes s = Bytes::gib(1);
  CHECK(net.send_recv(0, 1, s).seconds() == Approx(s.real() / 450e9));
  CHECK(net.send_recv(0, 8, s).seconds() == Approx(s.real() / 50e9));
  CHECK(net.send_recv(3, 3, s) == Duration::zero());
  const NetworkModel cal(topo, test_profile());
  // Latency: 3 us in a node; across nodes plus one network step (LL 2.7 us) for small messages.
  CHECK(cal.send_recv(0, 1, Bytes(8)).us() == Approx(3.0).epsilon(1e-3));
  CHECK(cal.send_recv(0, 8, Bytes(8)).us() == Approx(3.0 + 2.7).epsilon(1e-3));
}

TEST_CASE("an algorithm that does not apply is an input error", "[network]") {
  const Topology topo(testing::dgx_a100(), 8);
  const NetworkModel net(topo);
  CHECK_THROWS_AS(net.collective(request(CollectiveOp::kAllReduce, Bytes::mib(1), contiguous_groups(8, 1), Algorithm::kNvls)),
                  InputError);
  CHECK_THROWS_AS(net.collective(request(CollectiveOp::kAllToAll, Bytes::mib(1), contiguous_groups(8, 1), Algorithm::kRing)),
                  InputError);
}

TEST_CASE("a calibration without the cluster's GPU is an input error naming it", "[network]") {
  const Topology topo(testing::dgx_a100(), 8);
  NetworkCalibration cal;
  cal.file = "calibration/network/nccl.textproto";
  cal.profiles.push_back(test_profile());
  cal.profiles.back().gpus = {"H100-SXM5-80GB"};
  try {
    const NetworkModel net(topo, cal);
    FAIL("expected InputError");
  } catch (const InputError& e) {
    CHECK(e.diagnostics().front().message.find("A100-SXM4-80GB") != std::string::npos);
  }
  cal.profiles.back().gpus.push_back("a100-sxm4-80gb");
  const NetworkModel net(topo, cal);
  CHECK(net.profile().nvlink_efficiency == 0.8);
}

TEST_CASE("cached and uncached evaluations agree", "[network]") {
  const Topology topo(testing::dgx_h100(), 128);
  NetworkModel a(topo, test_profile());
  NetworkModel b(topo, test_profile());
  b.set_caching(false);
  for (const std::int64_t mib : {1, 64, 1024}) {
    for (int rep = 0; rep < 2; ++rep) {
      const auto r = request(CollectiveOp::kAllReduce, Bytes::mib(static_cast<double>(mib)), strided_groups(16, 8));
      CHECK(a.collective(r).time == b.collective(r).time);
    }
  }
}
