// The MoE all-to-all overlap's programs (sim/parallel/schedule.h, plan.moe_a2a_overlap): 1F1B
// without pipelining and interleaved 1F1B with one more warm-up forward (Megatron-Core's combined
// 1F1B), each steady-phase forward paired with the backward after it, of another micro-batch;
// every block once, and every dependency met when a pair runs as one step.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <vector>

#include "sim/parallel/schedule.h"

using ts::parallel::ParallelPlan;
using ts::parallel::PipelineBlock;
using ts::parallel::PipelineKind;
using ts::parallel::Schedule;

namespace {

ParallelPlan plan_of(std::int64_t p, std::int64_t v, std::int64_t m, bool overlap) {
  ParallelPlan plan;
  plan.pp = p;
  plan.vpp = v;
  plan.schedule = v > 1 ? Schedule::kInterleaved : Schedule::k1F1B;
  plan.dp = 1;
  plan.micro_batch = 1;
  plan.global_batch = m;
  plan.moe_a2a_overlap = overlap;
  return plan;
}

std::int64_t warmup(const std::vector<PipelineBlock>& blocks) {
  std::int64_t n = 0;
  while (n < static_cast<std::int64_t>(blocks.size()) &&
         blocks[static_cast<std::size_t>(n)].kind == PipelineKind::kForward) {
    ++n;
  }
  return n;
}

// Runs every rank's program in order, a block or an overlapped pair per unit step, each starting
// once its inputs are done: F(k, v) after F(k, v − 1), BW(k, v) after F(k, v) and BW(k, v + 1),
// a pair once both halves may start. Returns whether every block ran (no rank stuck).
bool runs_through(const ParallelPlan& plan) {
  const std::int64_t p = plan.pp;
  const std::int64_t stages = p * plan.model_chunks();
  std::vector<std::vector<PipelineBlock>> progs;
  for (std::int64_t r = 0; r < p; ++r) progs.push_back(ts::parallel::pipeline_blocks(plan, r));
  using Key = std::tuple<int, std::int64_t, std::int64_t>;
  std::map<Key, std::int64_t> end;
  auto done = [&](PipelineKind k, std::int64_t mb, std::int64_t v, std::int64_t t) {
    auto it = end.find({static_cast<int>(k), mb, v});
    return it != end.end() && it->second <= t;
  };
  auto ready = [&](const PipelineBlock& b, std::int64_t r, std::int64_t t) {
    const std::int64_t v = plan.virtual_stage(r, b.chunk);
    if (b.kind == PipelineKind::kForward) return v == 0 || done(PipelineKind::kForward, b.micro_batch, v - 1, t);
    return done(PipelineKind::kForward, b.micro_batch, v, t) &&
           (v == stages - 1 || done(PipelineKind::kBackward, b.micro_batch, v + 1, t));
  };
  std::vector<std::size_t> next(static_cast<std::size_t>(p), 0);
  std::size_t left = 0;
  for (const auto& prog : progs) left += prog.size();
  for (std::int64_t t = 0; left > 0; ++t) {
    bool moving = false;
    for (std::int64_t r = 0; r < p; ++r) {
      const auto& prog = progs[static_cast<std::size_t>(r)];
      std::size_t& i = next[static_cast<std::size_t>(r)];
      if (i == prog.size()) continue;
      const std::size_t n = prog[i].overlapped ? 2 : 1;
      bool all = i + n <= prog.size();
      for (std::size_t k = 0; all && k < n; ++k) all = ready(prog[i + k], r, t);
      if (!all) continue;
      for (std::size_t k = 0; k < n; ++k) {
        const PipelineBlock& b = prog[i + k];
        end[{static_cast<int>(b.kind), b.micro_batch, plan.virtual_stage(r, b.chunk)}] = t + 1;
      }
      i += n;
      left -= n;
      moving = true;
    }
    if (!moving) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("a2a overlap: one more warm-up forward, F paired with another's BW") {
  for (const auto& [p, v] : {std::pair<std::int64_t, std::int64_t>{1, 1}, {2, 2}, {4, 2}, {4, 3}, {8, 4}}) {
    for (std::int64_t m = std::max<std::int64_t>(p, 2); m <= 4 * p; m += p) {
      if (v > 1 && m % p != 0) continue;
      const ParallelPlan on = plan_of(p, v, m, true);
      const ParallelPlan off = plan_of(p, v, m, false);
      for (std::int64_t r = 0; r < p; ++r) {
        INFO("pp " << p << " vpp " << v << " m " << m << " rank " << r);
        const auto a = ts::parallel::pipeline_blocks(on, r);
        const auto b = ts::parallel::pipeline_blocks(off, r);
        // The same blocks, in another order.
        auto key = [](const PipelineBlock& x) { return std::make_tuple(static_cast<int>(x.kind), x.micro_batch, x.chunk); };
        std::vector<std::tuple<int, std::int32_t, std::int32_t>> ka, kb;
        for (const auto& x : a) ka.push_back(key(x));
        for (const auto& x : b) kb.push_back(key(x));
        std::sort(ka.begin(), ka.end());
        std::sort(kb.begin(), kb.end());
        CHECK(ka == kb);
        CHECK(warmup(a) == std::min<std::int64_t>(warmup(b) + 1, m * v));
        CHECK(ts::parallel::max_in_flight(a) <= ts::parallel::max_in_flight(b) + 1);
        std::int64_t pairs = 0;
        for (std::size_t i = 0; i < a.size(); ++i) {
          CHECK_FALSE(b[i].overlapped);
          if (!a[i].overlapped) continue;
          ++pairs;
          REQUIRE(i + 1 < a.size());
          CHECK(a[i].kind == PipelineKind::kForward);
          CHECK(a[i + 1].kind == PipelineKind::kBackward);
          // Another micro-batch or chunk, whose forward ran before the pair.
          CHECK((a[i + 1].micro_batch != a[i].micro_batch || a[i + 1].chunk != a[i].chunk));
          const auto own_forward = std::find_if(a.begin(), a.begin() + static_cast<std::ptrdiff_t>(i), [&](const PipelineBlock& x) {
            return x.kind == PipelineKind::kForward && x.micro_batch == a[i + 1].micro_batch && x.chunk == a[i + 1].chunk;
          });
          CHECK(own_forward != a.begin() + static_cast<std::ptrdiff_t>(i));
        }
        // Steady-phase steps: all but the (one longer) warm-up.
        const std::int64_t total = m * v;
        const std::int64_t warm_off = warmup(b) < total ? warmup(b) - 1 : total;
        CHECK(pairs == total - std::min(total, warm_off + 1));
      }
      CHECK(runs_through(on));
    }
  }
}

TEST_CASE("a2a overlap: 1F1B with pipelining and the split schedules stay unpaired") {
  ParallelPlan plan = plan_of(4, 1, 8, true);
  CHECK_FALSE(plan.pairs_forward_backward());
  for (std::int64_t r = 0; r < 4; ++r) {
    for (const auto& b : ts::parallel::pipeline_blocks(plan, r)) CHECK_FALSE(b.overlapped);
  }
  plan.schedule = Schedule::kZbH1;
  CHECK_FALSE(plan.pairs_forward_backward());
  plan.schedule = Schedule::kDualPipeV;
  CHECK(plan.pairs_forward_backward());
}
