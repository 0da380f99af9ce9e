// The token dispatchers inside one NVLink domain: the all-to-all dispatcher sends every copy and
// sorts the received copies by local expert and back (Megatron-Core's "Permutation 2" and
// "Unpermutation 2", sim/ir/model_graph.cpp build_moe); DeepEP sends a token once per rank
// (network::rank_dedup) and permutes it into copies there; HybridEP does the same inside its
// dispatch and combine kernels, with no permutation kernels of its own. With one expert per
// rank the all-to-all dispatcher and DeepEP move and permute the same.
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

TEST_CASE("dispatchers: all-to-all, DeepEP, HybridEP in one node") {
  using parallel::MoeDispatcher;
  // Qwen3-30B-A3B: 128 experts over EP 8, 16 per rank.
  const double a2a = step(one_node("qwen3-30b-a3b", MoeDispatcher::kAllToAll));
  const double deepep = step(one_node("qwen3-30b-a3b", MoeDispatcher::kDeepEp));
  const double hybridep = step(one_node("qwen3-30b-a3b", MoeDispatcher::kHybridEp));
  CHECK(a2a > deepep);
  CHECK(deepep > hybridep);
  // Mixtral-8x7B: 8 experts over EP 8, one per rank: nothing to sort or to send once.
  const double mixtral_a2a = step(one_node("mixtral-8x7b", MoeDispatcher::kAllToAll));
  CHECK(mixtral_a2a == step(one_node("mixtral-8x7b", MoeDispatcher::kDeepEp)));
  CHECK(mixtral_a2a > step(one_node("mixtral-8x7b", MoeDispatcher::kHybridEp)));
}
