// ZB-V's list-scheduled programs (sim/parallel/schedule.h): complete, dependency-respecting,
// within 1F1B's activation memory, and at the papers' bubble for unit-time F, B and W.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "sim/parallel/schedule.h"

using ts::parallel::PipelineBlock;
using ts::parallel::PipelineKind;

namespace {

using Programs = std::vector<std::vector<PipelineBlock>>;
using Key = std::tuple<int, std::int64_t, std::int64_t>;  // (kind, micro-batch, virtual stage)

struct UnitRun {
  bool finished = false;
  std::int64_t span = 0;                 // steps until the last block ends
  std::vector<std::int64_t> idle;        // steps each rank waits before its last block ends
  std::vector<std::int64_t> most_held;   // chunk activations from F to W, at most, per rank
};

// Runs every rank's program in order, one unit step per block, each block starting once its
// inputs are done: F(k, v) after F(k, v − 1); B(k, v) after F(k, v) and B(k, v + 1) (the last
// virtual stage after its own F); W(k, v) after B(k, v). Stops if no rank can move.
UnitRun run_unit(const Programs& progs, std::int64_t p) {
  const std::int64_t stages = 2 * p;
  auto vstage = [&](std::int64_t r, std::int64_t c) { return c == 0 ? r : stages - 1 - r; };
  std::map<Key, std::int64_t> end;  // step at which a block's result is there
  auto done = [&](PipelineKind k, std::int64_t mb, std::int64_t v, std::int64_t t) {
    auto it = end.find({static_cast<int>(k), mb, v});
    return it != end.end() && it->second <= t;
  };
  UnitRun out;
  out.idle.assign(static_cast<std::size_t>(p), 0);
  out.most_held.assign(static_cast<std::size_t>(p), 0);
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::vector<std::int64_t> held(static_cast<std::size_t>(p), 0), busy(static_cast<std::size_t>(p), 0);
  std::size_t left = 0;
  for (const auto& prog : progs) left += prog.size();
  for (std::int64_t t = 0; left > 0; ++t) {
    bool moving = false;
    for (std::int64_t r = 0; r < p; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      if (busy[ri] > t) {
        moving = true;
        continue;
      }
      if (next[ri] == progs[ri].size()) continue;
      const PipelineBlock& b = progs[ri][next[ri]];
      const std::int64_t v = vstage(r, b.chunk);
      bool ready = false;
      switch (b.kind) {
        case PipelineKind::kForward:
          ready = v == 0 || done(PipelineKind::kForward, b.micro_batch, v - 1, t);
          break;
        case PipelineKind::kInputGrad:
          ready = done(PipelineKind::kForward, b.micro_batch, v, t) &&
                  (v == stages - 1 || done(PipelineKind::kInputGrad, b.micro_batch, v + 1, t));
          break;
        case PipelineKind::kWeightGrad:
          ready = done(PipelineKind::kInputGrad, b.micro_batch, v, t);
          break;
        case PipelineKind::kBackward:
          ready = false;  // ZB-V splits every backward
          break;
      }
      if (!ready) {
        ++out.idle[ri];
        continue;
      }
      moving = true;
      end[{static_cast<int>(b.kind), b.micro_batch, v}] = t + 1;
      if (b.kind == PipelineKind::kForward) ++held[ri];
      if (b.kind == PipelineKind::kWeightGrad) --held[ri];
      out.most_held[ri] = std::max(out.most_held[ri], held[ri]);
      busy[ri] = t + 1;
      out.span = std::max(out.span, t + 1);
      ++next[ri];
      --left;
    }
    if (!moving) return out;  // a rank waits for a block that never comes
  }
  // Idle counted only up to each rank's last block; the span is the longest rank's.
  out.finished = true;
  for (std::int64_t r = 0; r < p; ++r) {
    const auto ri = static_cast<std::size_t>(r);
    out.idle[ri] = busy[ri] - static_cast<std::int64_t>(progs[ri].size());
  }
  return out;
}

}  // namespace

TEST_CASE("ZB-V: every block once, each after its own F and B on the rank") {
  for (std::int64_t p : {2, 3, 4, 8}) {
    for (std::int64_t m : {std::int64_t{1}, p, 2 * p + 1, 4 * p}) {
      const Programs progs = ts::parallel::zb_v_blocks(p, m);
      REQUIRE(progs.size() == static_cast<std::size_t>(p));
      for (const auto& prog : progs) {
        std::map<Key, int> seen;
        for (const PipelineBlock& b : prog) {
          INFO("p=" << p << " m=" << m << " mb=" << b.micro_batch << " chunk=" << b.chunk);
          CHECK(!b.overlapped);
          CHECK(b.kind != PipelineKind::kBackward);
          CHECK(b.chunk >= 0);
          CHECK(b.chunk <= 1);
          CHECK(++seen[{static_cast<int>(b.kind), b.micro_batch, b.chunk}] == 1);
          const int f = static_cast<int>(PipelineKind::kForward);
          const int i = static_cast<int>(PipelineKind::kInputGrad);
          if (b.kind == PipelineKind::kInputGrad) CHECK(seen.count({f, b.micro_batch, b.chunk}) == 1);
          if (b.kind == PipelineKind::kWeightGrad) CHECK(seen.count({i, b.micro_batch, b.chunk}) == 1);
        }
        CHECK(seen.size() == static_cast<std::size_t>(3 * 2 * m));
      }
    }
  }
}

TEST_CASE("ZB-V: dependencies met, 1F1B's memory, p - 1 idle steps per rank") {
  // Unit-time F, B and W per chunk (Qi et al. assume T_F = T_B = T_W): the last rank cannot
  // start before the first micro-batch's forward passed p − 1 ranks, so p − 1 idle steps per
  // rank (6m blocks each) is the least any order reaches; sail-sg's description of ZBV gives
  // bubble rate 0 and 1F1B's activation memory (p micro-batches of a stage = 2p chunks).
  for (std::int64_t p : {2, 4, 8}) {
    for (std::int64_t m : {p, 2 * p, 4 * p}) {
      INFO("p=" << p << " m=" << m);
      const UnitRun r = run_unit(ts::parallel::zb_v_blocks(p, m), p);
      REQUIRE(r.finished);
      CHECK(r.span == 6 * m + p - 1);
      for (std::size_t s = 0; s < static_cast<std::size_t>(p); ++s) {
        CHECK(r.idle[s] <= p - 1);
        CHECK(r.most_held[s] <= 2 * p);
        CHECK(ts::parallel::max_in_flight(ts::parallel::zb_v_blocks(p, m)[s]) <= 2 * p);
      }
    }
  }
  // Fewer micro-batches than ranks: still complete and in order.
  CHECK(run_unit(ts::parallel::zb_v_blocks(8, 3), 8).finished);
}
