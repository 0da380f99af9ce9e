// Full recompute of only some layers of each model chunk (ParallelPlan::recompute_layers,
// Megatron-LM's --recompute-method block --recompute-num-layers): time and memory between no
// recompute and full recompute, in proportion to the recomputed layers.
#include <catch2/catch.hpp>

#include <cstdint>

#include "sim/driver/simulate.h"
#include "sim/memory/footprint.h"
#include "tests/unit/config/config_test_util.h"
#include "tests/unit/driver/run_ok.h"

using namespace ts;

namespace {

// Llama 2 7B (32 layers) on 8 H100s: tp 2, pp 2, dp 2, 4 micro-batches of 2 sequences.
config::Scenario llama2_7b(parallel::Recompute recompute, std::int64_t layers) {
  config::Scenario sc;
  sc.model = config::load_model("llama2-7b");
  sc.cluster = config::load_cluster("dgx-h100");
  sc.num_gpus = 8;
  sc.plan.tp = 2;
  sc.plan.pp = 2;
  sc.plan.dp = 2;
  sc.plan.micro_batch = 2;
  sc.plan.global_batch = 16;
  sc.plan.seq_len = 4096;
  sc.plan.sequence_parallel = true;
  sc.plan.recompute = recompute;
  sc.plan.recompute_layers = layers;
  return sc;
}

using testing::run_ok;

double recompute_s(const driver::RunResult& r) {
  return r.time[runtime::TimeCategory::kRecompute].seconds();
}

}  // namespace

TEST_CASE("recomputing some layers of each stage costs their share of full recompute's time",
          "[driver][recompute]") {
  const auto none = run_ok(llama2_7b(parallel::Recompute::kNone, 0));
  const auto full = run_ok(llama2_7b(parallel::Recompute::kFull, 0));
  const auto quarter = run_ok(llama2_7b(parallel::Recompute::kFull, 4));  // of 16 layers per stage
  const auto half = run_ok(llama2_7b(parallel::Recompute::kFull, 8));
  CHECK(recompute_s(none) == 0);
  REQUIRE(recompute_s(full) > 0);
  // Every layer's recompute is the same work: 4 and 8 of 16 layers are a quarter and a half.
  CHECK(recompute_s(quarter) == Approx(recompute_s(full) / 4).epsilon(0.02));
  CHECK(recompute_s(half) == Approx(recompute_s(full) / 2).epsilon(0.02));
  CHECK(none.iteration_time_s < quarter.iteration_time_s);
  CHECK(quarter.iteration_time_s < half.iteration_time_s);
  CHECK(half.iteration_time_s < full.iteration_time_s);
  // A count of at least the chunk's layers is full recompute.
  const auto all = run_ok(llama2_7b(parallel::Recompute::kFull, 16));
  CHECK(all.iteration_time_s == full.iteration_time_s);
  CHECK(all.peak_memory == full.peak_memory);
}

TEST_CASE("the layers left out of recompute keep all their activations", "[driver][recompute]") {
  const auto sc = llama2_7b(parallel::Recompute::kFull, 4);
  memory::ActivationOptions ao = memory::default_activation_options(sc.model);
  const Bytes input = memory::layer_activations(sc.model, sc.plan, ao).kept;
  const Bytes whole = memory::whole_layer_activation_bytes(sc.model, sc.plan, ao);
  auto none_plan = sc.plan;
  none_plan.recompute = parallel::Recompute::kNone;
  none_plan.recompute_layers = 0;
  CHECK(whole == memory::layer_activations(sc.model, none_plan, ao).kept);
  REQUIRE(input < whole);
  // 4 of 16 layers keep their input, the other 12 everything.
  CHECK(memory::chunk_activation_bytes(sc.model, sc.plan, 16, ao).real() ==
        Approx((input * 4 + whole * 12).real()).epsilon(1e-12));

  // The replay's peak falls by the same per-layer step as layers are added to the recompute:
  // stage 0 holds two micro-batches' activations at its peak (1F1B, pp 2).
  const auto four = run_ok(sc);
  const auto eight = run_ok(llama2_7b(parallel::Recompute::kFull, 8));
  const double step = (whole - input).real();
  CHECK((four.memory.activations - eight.memory.activations).real() == Approx(2 * 4 * step).epsilon(0.01));
}
