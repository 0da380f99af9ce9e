#include <catch2/catch.hpp>

#include "sim/parallel/layout.h"

using namespace ts::parallel;

namespace {
ParallelPlan plan(std::int64_t tp, std::int64_t cp, std::int64_t dp, std::int64_t pp) {
  ParallelPlan p;
  p.tp = tp;
  p.cp = cp;
  p.dp = dp;
  p.pp = pp;
  return p;
}
}  // namespace

TEST_CASE("default order puts TP innermost, then CP, DP, PP (Megatron)") {
  const Layout l(plan(8, 1, 4, 2));
  CHECK(l.num_ranks() == 64);
  const Coord c = l.coord(8 * 4 * 1 + 8 * 2 + 3);  // pp 1, dp 2, tp 3
  CHECK(c[Axis::kTp] == 3);
  CHECK(c[Axis::kDp] == 2);
  CHECK(c[Axis::kPp] == 1);
  for (std::int64_t r = 0; r < 64; ++r) CHECK(l.rank(l.coord(r)) == r);
  CHECK(l.group(10, Axis::kTp) == std::vector<std::int32_t>{8, 9, 10, 11, 12, 13, 14, 15});
  CHECK(l.group(10, Axis::kDp) == std::vector<std::int32_t>{2, 10, 18, 26});
  CHECK(l.group(10, Axis::kPp) == std::vector<std::int32_t>{10, 42});
}

TEST_CASE("all groups of an axis partition the ranks") {
  const Layout l(plan(2, 2, 3, 2));
  for (Axis a : {Axis::kTp, Axis::kCp, Axis::kDp, Axis::kPp}) {
    const auto groups = l.all_groups(a);
    CHECK(static_cast<std::int64_t>(groups.size()) == l.num_ranks() / l.size(a));
    std::vector<int> seen(static_cast<std::size_t>(l.num_ranks()), 0);
    for (const auto& g : groups) {
      CHECK(static_cast<std::int64_t>(g.size()) == l.size(a));
      for (auto r : g) ++seen[static_cast<std::size_t>(r)];
    }
    for (int s : seen) CHECK(s == 1);
  }
  // DP × CP gradient groups.
  const auto dpcp = l.all_groups(axis_bit(Axis::kDp) | axis_bit(Axis::kCp));
  CHECK(dpcp.size() == 4);
  CHECK(dpcp.front().size() == 6);
}

TEST_CASE("all groups of any axis set are the leaders' groups in rank order") {
  // Reference: scan the ranks; a rank with 0 on every masked axis leads the group() it is in.
  const std::vector<std::vector<Axis>> orders = {{Axis::kTp, Axis::kCp, Axis::kDp, Axis::kPp},
                                                 {Axis::kDp, Axis::kPp, Axis::kTp, Axis::kCp},
                                                 {Axis::kCp, Axis::kTp, Axis::kPp, Axis::kDp}};
  for (const auto& order : orders) {
    for (const ParallelPlan& base : {plan(2, 3, 4, 5), plan(1, 2, 1, 3), plan(4, 1, 6, 1)}) {
      ParallelPlan p = base;
      p.order = order;
      const Layout l(p);
      for (unsigned axes = 1; axes < 16; ++axes) {
        std::vector<std::vector<std::int32_t>> expected;
        for (std::int64_t r = 0; r < l.num_ranks(); ++r) {
          const Coord c = l.coord(r);
          bool leader = true;
          for (std::size_t i = 0; i < 4; ++i) leader = leader && ((axes >> i & 1u) == 0 || c.at[i] == 0);
          if (leader) expected.push_back(l.group(r, axes));
        }
        CHECK(l.all_groups(axes) == expected);
      }
    }
  }
}

TEST_CASE("a custom order changes which ranks are neighbours") {
  ParallelPlan p = plan(2, 1, 4, 1);
  p.order = {Axis::kDp, Axis::kTp, Axis::kCp, Axis::kPp};
  const Layout l(p);
  CHECK(l.group(0, Axis::kDp) == std::vector<std::int32_t>{0, 1, 2, 3});
  CHECK(l.group(0, Axis::kTp) == std::vector<std::int32_t>{0, 4});
}

TEST_CASE("hybrid sharding cuts a data-parallel group into shard and replica groups") {
  const Layout l(plan(2, 1, 8, 1));  // DP group of rank 0: 0, 2, …, 14
  const unsigned dp = axis_bit(Axis::kDp);
  CHECK(split_size(shard_groups(dp, 4)) == 4);
  CHECK(l.group(0, dp) == std::vector<std::int32_t>{0, 2, 4, 6, 8, 10, 12, 14});
  CHECK(l.group(6, shard_groups(dp, 4)) == std::vector<std::int32_t>{0, 2, 4, 6});
  CHECK(l.group(10, shard_groups(dp, 4)) == std::vector<std::int32_t>{8, 10, 12, 14});
  CHECK(l.group(10, replica_groups(dp, 4)) == std::vector<std::int32_t>{2, 10});
  for (const unsigned axes : {shard_groups(dp, 4), replica_groups(dp, 4), shard_groups(dp, 2)}) {
    const auto groups = l.all_groups(axes);
    std::vector<int> seen(16, 0);
    for (const auto& g : groups) {
      CHECK(g == l.group(g.front(), axes));  // each rank's group is one of them
      for (auto r : g) ++seen[static_cast<std::size_t>(r)];
    }
    for (int s : seen) CHECK(s == 1);  // they partition the ranks
  }
  CHECK(l.all_groups(shard_groups(dp, 4)).size() == 4);    // 2 TP ranks × 2 blocks of 4
  CHECK(l.all_groups(replica_groups(dp, 4)).size() == 8);  // 2 TP ranks × 4 pairs
}

TEST_CASE("expert parallelism folds EP x ETP x expert-DP over each stage's ranks") {
  // tp 2, dp 8, pp 2: 16 ranks per stage. ep 4, etp 2: expert-DP 2. Megatron-Core's expert
  // rank order (etp innermost, then ep, then edp) over the stage's TP·CP·DP order: ETP groups
  // are pairs of consecutive ranks, EP groups every second rank of a block of 8, expert-DP
  // groups ranks 8 apart; the second stage repeats the pattern 16 ranks on.
  ParallelPlan p = plan(2, 1, 8, 2);
  p.ep = 4;
  p.etp = 2;
  const Layout l(p);
  CHECK(l.size(Axis::kEdp) == 2);
  CHECK(l.group(0, axis_bit(Axis::kEtp)) == std::vector<std::int32_t>{0, 1});
  CHECK(l.group(3, axis_bit(Axis::kEp)) == std::vector<std::int32_t>{1, 3, 5, 7});
  CHECK(l.group(5, axis_bit(Axis::kEdp)) == std::vector<std::int32_t>{5, 13});
  CHECK(l.group(21, axis_bit(Axis::kEp)) == std::vector<std::int32_t>{17, 19, 21, 23});
  // Every expert axis partitions the ranks, and a rank's expert coordinates round-trip.
  for (const Axis a : {Axis::kEtp, Axis::kEp, Axis::kEdp}) {
    std::vector<int> seen(32, 0);
    for (const auto& g : l.all_groups(axis_bit(a))) {
      CHECK(static_cast<std::int64_t>(g.size()) == l.size(a));
      for (auto r : g) ++seen[static_cast<std::size_t>(r)];
    }
    for (int s : seen) CHECK(s == 1);
  }
  // The dense axes are unchanged by the folding: TP groups are still consecutive pairs.
  CHECK(l.group(4, Axis::kTp) == std::vector<std::int32_t>{4, 5});
}

TEST_CASE("without expert parallelism every stage rank is one expert-DP group") {
  const Layout l(plan(2, 1, 4, 1));
  CHECK(l.size(Axis::kEdp) == 8);
  CHECK(l.group(0, axis_bit(Axis::kEdp)).size() == 8);
  CHECK(l.group(0, axis_bit(Axis::kEp)) == std::vector<std::int32_t>{0});
}
