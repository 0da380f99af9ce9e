// The sweep's replay (sim/driver/simulate.h: RunOptions::only_critical_breakdown and
// replay_memo): block programs and replays shared between plans must report what the replay of
// each plan's own task graph reports.
#include <catch2/catch.hpp>

#include <memory>
#include <string>

#include "sim/driver/simulate.h"
#include "sim/driver/sweep.h"

using namespace ts;
using parallel::Recompute;
using parallel::Schedule;

namespace {

// Llama 3 8B on 16 H100s: every schedule, ZeRO stage and recompute mode, with enough
// micro-batches for the blocks to repeat.
driver::SweepSpec spec() {
  driver::SweepSpec s;
  s.model = config::load_model("llama3-8b");
  s.cluster = config::load_cluster("dgx-h100");
  s.num_gpus = 16;
  s.base.global_batch = 32;
  s.base.seq_len = 2048;
  s.axes.tp = {2, 8};
  s.axes.pp = {1, 2, 4};
  s.axes.micro_batch = {1, 2};
  s.axes.schedule = {Schedule::kGpipe, Schedule::k1F1B, Schedule::kInterleaved, Schedule::kZbH1,
                     Schedule::kDualPipeV, Schedule::kZbV};
  s.axes.vpp = {2};
  s.axes.zero = {0, 1, 2, 3};
  s.axes.sequence_parallel = {false, true};
  s.axes.recompute = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  return s;
}

}  // namespace

TEST_CASE("sweep replay: block programs and shared replays report what each plan's graph does") {
  const driver::SweepSpec s = spec();
  const driver::Enumeration e = driver::enumerate_plans(s);
  REQUIRE(e.plans.size() > 100);
  driver::Resources fast_resources, reference_resources;
  driver::RunOptions fast;
  fast.only_critical_breakdown = true;
  fast.replay_memo = std::make_shared<driver::ReplayMemo>();
  const driver::RunOptions reference;
  config::Scenario sc;
  sc.model = s.model;
  sc.cluster = s.cluster;
  sc.num_gpus = static_cast<std::int32_t>(s.num_gpus);
  int replayed = 0;
  for (const parallel::ParallelPlan& plan : e.plans) {
    sc.plan = plan;
    INFO("plan " << driver::sweep_plan_key(s, plan));
    const driver::RunResult got = driver::simulate(sc, fast, fast_resources);
    const driver::RunResult want = driver::simulate(sc, reference, reference_resources);
    REQUIRE(got.status == want.status);
    REQUIRE(got.reason == want.reason);
    REQUIRE(got.iteration_time_s == want.iteration_time_s);
    REQUIRE(got.tokens_per_s == want.tokens_per_s);
    REQUIRE(got.mfu == want.mfu);
    REQUIRE(got.peak_memory == want.peak_memory);
    REQUIRE(got.memory.total() == want.memory.total());
    REQUIRE(got.memory.activations == want.memory.activations);
    REQUIRE(got.peak_at == want.peak_at);
    REQUIRE(got.tasks == want.tasks);
    REQUIRE(got.events == want.events);
    for (std::size_t k = 0; k < runtime::kNumTimeCategories; ++k) {
      INFO(runtime::time_category_name(static_cast<runtime::TimeCategory>(k)));
      REQUIRE(got.time.time[k] == want.time.time[k]);
    }
    // The CSV row, which holds all the sweep reports.
    REQUIRE(driver::sweep_csv_row(0, s, plan, got) == driver::sweep_csv_row(0, s, plan, want));
    if (want.tasks > 0) ++replayed;
  }
  CHECK(replayed > 100);
}
