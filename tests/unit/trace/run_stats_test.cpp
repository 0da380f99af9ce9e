// Run statistics of a replay: hardware FLOPs count the recomputed forward work, and the most
// exposed communication ops are ranked by the time the compute stream waited on them.
#include <catch2/catch.hpp>

#include "sim/parallel/lowering.h"
#include "sim/runtime/executor.h"
#include "sim/trace/run_stats.h"
#include "tests/unit/trace/tiny_replay.h"

using namespace ts;

namespace {

// FLOPs of the compute tasks with `pass` inside transformer layers, each device counted for the
// ranks it stands for.
double layer_flops(const parallel::TaskGraph& g, parallel::Pass pass) {
  double f = 0;
  for (const auto& t : g.tasks) {
    const bool in_layer = t.kind == parallel::TaskKind::kCompute && t.layer >= 0 && t.ops >= 0;
    if (!in_layer || t.pass != pass) continue;
    f += ir::total_flops(g.op_lists[static_cast<std::size_t>(t.ops)]).value() *
         static_cast<double>(g.devices[static_cast<std::size_t>(t.device)].represents);
  }
  return f;
}

}  // namespace

TEST_CASE("hardware FLOPs add the forward work that full recompute replays") {
  const test::TinyReplay none = test::tiny_replay(parallel::Recompute::kNone);
  const test::TinyReplay full = test::tiny_replay(parallel::Recompute::kFull);
  const auto s_none = trace::run_stats(none.graph, none.execution);
  const auto s_full = trace::run_stats(full.graph, full.execution);
  REQUIRE(s_none.computed);
  // Full recompute runs every layer's forward a second time before its backward (Chen et al.
  // 2016; Megatron-LM "full" granularity): the difference is the forward FLOPs of all layers.
  const double forward = layer_flops(none.graph, parallel::Pass::kForward);
  REQUIRE(forward > 0);
  const double added = s_full.hardware_flops.value() - s_none.hardware_flops.value();
  CHECK(added == Approx(forward).epsilon(1e-9));
  // Without recompute: the layers' forward and backward, whose data- and weight-gradient GEMMs
  // do twice the forward's work (6N = 2N + 4N per token; flash-attention backward 2.5×), plus
  // the embedding, LM head and optimizer outside the layers.
  const double backward = layer_flops(none.graph, parallel::Pass::kBackward);
  CHECK(backward >= 2 * forward);
  CHECK(backward <= 2.5 * forward);
  CHECK(s_none.hardware_flops.value() > forward + backward);
  CHECK(layer_flops(none.graph, parallel::Pass::kRecompute) == 0);
}

TEST_CASE("exposed communication: most exposed first, never more than the time it ran") {
  const test::TinyReplay r = test::tiny_replay(parallel::Recompute::kNone);
  const auto s = trace::run_stats(r.graph, r.execution, 3);
  REQUIRE(!s.exposed_comm.empty());
  CHECK(s.exposed_comm.size() <= 3);
  CHECK(s.exposed_comm_rank >= 0);
  for (std::size_t i = 0; i < s.exposed_comm.size(); ++i) {
    const auto& e = s.exposed_comm[i];
    CHECK(e.count > 0);
    CHECK(e.exposed > Duration::zero());
    CHECK(e.exposed <= e.time);
    if (i > 0) CHECK(s.exposed_comm[i - 1].exposed >= e.exposed);
  }
  // A default RunStats says it was not computed (reports print null).
  CHECK_FALSE(trace::RunStats{}.computed);
}
