// NIC sharing between network tasks in flight at once: alone unchanged, shared longer, re-shared
// at each start and completion, latency never shared.
#include <catch2/catch.hpp>

#include <vector>

#include "sim/network/network_model.h"
#include "sim/network/nic_sharing.h"
#include "tests/unit/topology/test_clusters.h"

using namespace ts;
using namespace ts::network;

namespace {

SimTime at_us(double us) { return SimTime::zero() + Duration::from_us(us); }

// Every task of its own kind unless `kind` is given.
NicTask task(double start_us, double latency_us, double transfer_us, std::vector<std::int32_t> nics,
             double share = 1, std::int64_t kind = -1) {
  static std::int64_t next_kind = 1000;
  return NicTask{at_us(start_us), Duration::from_us(latency_us), Duration::from_us(transfer_us),
                 std::move(nics), share, kind >= 0 ? kind : next_kind++};
}

}  // namespace

TEST_CASE("nic sharing: a task alone ends at start + latency + transfer") {
  const std::vector<NicTask> one = {task(3, 7, 100, {0, 1}, 0.5)};
  const auto ends = shared_ends(one);
  CHECK(ends[0] == at_us(110));
  // Tasks on disjoint NICs do not slow each other.
  const std::vector<NicTask> apart = {task(0, 5, 100, {0}), task(10, 5, 50, {1})};
  const auto e = shared_ends(apart);
  CHECK(e[0] == at_us(105));
  CHECK(e[1] == at_us(65));
}

TEST_CASE("nic sharing: two tasks on one NIC take longer than either alone") {
  // Both use the whole NIC alone and start together: each runs at half speed, so both
  // transfers of 100 µs end at 200 µs; the latency (10 µs) is added unshared.
  const std::vector<NicTask> both = {task(0, 10, 100, {4}), task(0, 10, 100, {4})};
  const auto e = shared_ends(both);
  CHECK(e[0] == at_us(210));
  CHECK(e[1] == at_us(210));
  CHECK(e[0] > shared_ends(std::vector<NicTask>{both[0]})[0]);
}

TEST_CASE("nic sharing: tasks of one kind do not slow each other") {
  // The same collective of two equivalent groups, costed together: each keeps its time. A task
  // of another kind shares the NIC with both as one flow.
  const std::vector<NicTask> same = {task(0, 0, 100, {0}, 1, 7), task(30, 0, 100, {0}, 1, 7)};
  const auto e = shared_ends(same);
  CHECK(e[0] == at_us(100));
  CHECK(e[1] == at_us(130));
  NicSharing s;
  const auto a = s.start(task(0, 0, 100, {0}, 1, 7));
  const auto b = s.start(task(0, 0, 100, {1}, 1, 7));
  const auto c = s.start(task(0, 0, 100, {0}, 1, 8));
  CHECK(s.rate(a) == Approx(0.5));
  CHECK(s.rate(b) == Approx(0.5));  // its kind is held to half by NIC 0
  CHECK(s.rate(c) == Approx(0.5));
}

TEST_CASE("nic sharing: rates are re-shared at each start and completion") {
  // A (100 µs) starts at 0, B (40 µs) at 20 on the same NIC. 0-20: A alone, 80 µs of work left.
  // From 20 both at half speed: B's 40 µs take 80 (ends 100); A does 40 meanwhile, then its
  // last 40 µs at full speed: 140. Work is conserved: 140 µs of transfer in 140 µs.
  NicSharing s;
  const auto a = s.start(task(0, 0, 100, {0}));
  CHECK(s.end(a) == at_us(100));
  const auto b = s.start(task(20, 0, 40, {0}));
  CHECK(s.rate(a) == Approx(0.5));
  CHECK(s.rate(b) == Approx(0.5));
  CHECK(s.end(b) == at_us(100));
  CHECK(s.end(a) == at_us(180));  // projected at the current rates
  CHECK(s.next_completion() == at_us(100));
  s.advance(at_us(100));
  CHECK(s.transfer_done(b));
  CHECK(s.rate(a) == 1.0);
  CHECK(s.end(a) == at_us(140));
}

TEST_CASE("nic sharing: max-min over NICs and shares") {
  // A uses half of NIC 0 alone, B all of it: max-min gives each half the NIC, so A keeps its
  // speed and B runs at half. C, on NICs 0 and 1, with D alone on NIC 1: on NIC 0 the three
  // split it (A 1/3 of the NIC, below its 1/2 cap), on NIC 1, C and D could have 1/2 each,
  // but C is held to 1/3 by NIC 0, so D gets 2/3.
  NicSharing s;
  const auto a = s.start(task(0, 0, 100, {0}, 0.5));
  const auto b = s.start(task(0, 0, 100, {0}));
  CHECK(s.rate(a) == Approx(1.0));
  CHECK(s.rate(b) == Approx(0.5));
  const auto c = s.start(task(0, 0, 100, {0, 1}));
  const auto d = s.start(task(0, 0, 100, {1}));
  CHECK(s.rate(a) == Approx(2.0 / 3));
  CHECK(s.rate(b) == Approx(1.0 / 3));
  CHECK(s.rate(c) == Approx(1.0 / 3));
  CHECK(s.rate(d) == Approx(2.0 / 3));
}

TEST_CASE("nic sharing: sharing only lengthens tasks") {
  // Any mix of tasks: each ends no earlier than alone, and the NIC-busy time is at least the
  // sum of the transfers that use one NIC in full (work conservation).
  std::vector<NicTask> tasks;
  for (int i = 0; i < 12; ++i) {
    tasks.push_back(task(7.0 * i, 1.0 + i % 3, 20.0 + 13.0 * (i % 5), {i % 3, 3 + i % 2},
                         i % 2 == 0 ? 1.0 : 0.4));
  }
  const auto ends = shared_ends(tasks);
  for (std::size_t i = 0; i < tasks.size(); ++i) {
    INFO("task " << i);
    CHECK(ends[i] >= tasks[i].start + tasks[i].latency + tasks[i].transfer);
  }
  // No-NIC and zero-transfer tasks are never shared.
  const std::vector<NicTask> free = {task(0, 2, 50, {}), task(0, 2, 50, {}), task(0, 3, 0, {0})};
  const auto f = shared_ends(free);
  CHECK(f[0] == at_us(52));
  CHECK(f[1] == at_us(52));
  CHECK(f[2] == at_us(3));
}

TEST_CASE("nic load: what a collective puts on the NICs it crosses") {
  auto spec = testing::dgx_a100();
  spec.host.nics_per_host = 4;  // two GPUs per NIC
  const topology::Topology topo(spec, 16);
  const NetworkModel net(topo);
  CollectiveRequest tp;
  tp.op = CollectiveOp::kAllReduce;
  tp.bytes = Bytes(std::int64_t{1} << 30);
  tp.groups = {{0, 1, 2, 3, 4, 5, 6, 7}};
  const NicLoad inside = net.nic_load(tp, net.collective(tp));
  CHECK(inside.nics.empty());

  CollectiveRequest dp = tp;
  dp.groups = {{0, 8}};
  const NicLoad ring = net.nic_load(dp, net.collective(dp));
  REQUIRE(!ring.nics.empty());
  for (const auto l : ring.nics) CHECK(topo.link(l).kind == topology::LinkKind::kNetwork);
  // Two GPUs over one NIC each: the NICs are the bottleneck, used in full.
  CHECK(ring.share == Approx(1.0).epsilon(1e-6));
  // Eight DP rings over the nodes' four NICs: each NIC carries two rings' traffic.
  dp.groups = {};
  for (int g = 0; g < 8; ++g) dp.groups.push_back({g, 8 + g});
  const NicLoad eight = net.nic_load(dp, net.collective(dp));
  // The first group's NICs only (NIC 0 of each node, both directions), used in full with the
  // group on GPUs 1 and 9 beside it.
  CHECK(eight.nics.size() == 4);
  CHECK(eight.share == Approx(1.0).epsilon(1e-6));
}

TEST_CASE("nic sharing: a DP all-reduce beside a pipeline send on one NIC") {
  // GPUs 0 and 1 share NIC 0 of their node (4 NICs for 8 GPUs): GPU 0's data-parallel
  // all-reduce with GPU 8 and GPU 1's pipeline send to GPU 9 start together.
  auto spec = testing::dgx_a100();
  spec.host.nics_per_host = 4;
  const topology::Topology topo(spec, 16);
  const NetworkModel net(topo);
  CollectiveRequest dp;
  dp.op = CollectiveOp::kAllReduce;
  dp.bytes = Bytes(std::int64_t{256} << 20);
  dp.groups = {{0, 8}};
  CollectiveRequest pp;
  pp.op = CollectiveOp::kSendRecv;
  pp.bytes = Bytes(std::int64_t{64} << 20);
  pp.groups = {{1, 9}};
  std::vector<NicTask> tasks;
  for (const CollectiveRequest* r : {&dp, &pp}) {
    const CollectiveCost c = net.collective(*r);
    const NicLoad load = net.nic_load(*r, c);
    REQUIRE(!load.nics.empty());
    tasks.push_back(NicTask{SimTime::zero(), c.latency, c.time - c.latency, load.nics, load.share,
                            static_cast<std::int64_t>(tasks.size())});
  }
  const auto ends = shared_ends(tasks);
  for (std::size_t i = 0; i < 2; ++i) {
    const SimTime alone = shared_ends(std::span<const NicTask>(&tasks[i], 1))[0];
    CHECK(alone == tasks[i].start + tasks[i].latency + tasks[i].transfer);
    INFO("task " << i);
    CHECK(ends[i] > alone);
    // Never longer than running after the other one (work conservation on the shared NIC).
    CHECK(ends[i] <= alone + tasks[1 - i].transfer + Duration::from_ps(2));
  }
  // On GPUs 0 and 2 (NICs 0 and 1) they share nothing and keep their times.
  pp.groups = {{2, 10}};
  const CollectiveCost c = net.collective(pp);
  tasks[1] = NicTask{SimTime::zero(), c.latency, c.time - c.latency, net.nic_load(pp, c).nics, 1.0, 1};
  const auto apart = shared_ends(tasks);
  CHECK(apart[0] == tasks[0].start + tasks[0].latency + tasks[0].transfer);
  CHECK(apart[1] == tasks[1].start + tasks[1].latency + tasks[1].transfer);
}
