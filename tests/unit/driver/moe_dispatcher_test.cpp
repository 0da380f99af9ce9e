// The token dispatchers inside one NVLink domain, where their all-to-alls cost the same: the
// all-to-all dispatcher sorts the received copies by local expert and back (Megatron-Core's
// "Permutation 2" and "Unpermutation 2", sim/ir/model_graph.cpp build_moe), the flex dispatcher
// does not, and with one expert per rank neither sorts.
#include <catch2/catch.hpp>

#include "sim/driver/simulate.h"
#include "tests/unit/driver/moe_scenario.h"
#include "tests/unit/driver/run_ok.h"

using namespace ts;

namespace {

config::Scenario one_node(const char* model, parallel::MoeDispatcher dispatcher) {
  config::Scenario sc = testing::small_moe(model, 8, 1, 16, 4096);
  sc.plan.moe_dispatcher = dispatcher;
  return sc;
}

double step(const config::Scenario& sc) { return testing::run_ok(sc).iteration_time_s; }

}  // namespace

TEST_CASE("all-to-all dispatcher pays for its sort by local expert") {
  using parallel::MoeDispatcher;
  // Qwen3-30B-A3B: 128 experts over EP 8, 16 per rank.
  const double a2a = step(one_node("qwen3-30b-a3b", MoeDispatcher::kAllToAll));
  const double flex = step(one_node("qwen3-30b-a3b", MoeDispatcher::kDeepEp));
  CHECK(a2a > flex);
  // Mixtral-8x7B: 8 experts over EP 8, one per rank: nothing to sort.
  CHECK(step(one_node("mixtral-8x7b", MoeDispatcher::kAllToAll)) ==
        step(one_node("mixtral-8x7b", MoeDispatcher::kDeepEp)));
}
