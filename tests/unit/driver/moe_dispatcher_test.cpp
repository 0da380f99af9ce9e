// The token dispatchers inside one NVLink domain, where their all-to-alls cost the same: the
// all-to-all dispatcher sorts the received copies by local expert and back (Megatron-Core's
// "Permutation 2" and "Unpermutation 2", sim/ir/model_graph.cpp build_moe), the flex dispatcher
// does not, and with one expert per rank neither sorts.
#include <catch2/catch.hpp>

#include "sim/config/loader.h"
#include "sim/driver/simulate.h"

using namespace ts;

namespace {

config::Scenario one_node(const char* model, parallel::MoeDispatcher dispatcher) {
  config::Scenario sc;
  sc.model = config::load_model(model);
  sc.model.num_layers = 4;
  sc.cluster = config::load_cluster("dgx-h100");
  sc.num_gpus = 8;
  auto& p = sc.plan;
  p.dp = 8;
  p.ep = 8;
  p.micro_batch = 1;
  p.global_batch = 16;
  p.seq_len = 4096;
  p.zero_stage = 1;
  p.moe_dispatcher = dispatcher;
  return sc;
}

double step(const config::Scenario& sc) {
  driver::Resources resources;
  const driver::RunResult r = driver::simulate(sc, driver::RunOptions{}, resources);
  REQUIRE(r.status == driver::Status::kOk);
  return r.iteration_time_s;
}

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
