// Pruned sweeps (driver::search_sweep, driver::PlanBounder): the bound of every plan is below
// what its replay gives, and the pruned search's best plans are the exhaustive sweep's, row for
// row, on several models, clusters and pipeline schedules.
#include <catch2/catch.hpp>

#include <memory>
#include <string>
#include <vector>

#include "sim/driver/plan_bound.h"
#include "sim/driver/simulate.h"
#include "sim/driver/sweep.h"

using namespace ts;
using parallel::Recompute;
using parallel::Schedule;

namespace {

driver::SweepSpec make(const char* model, const char* cluster, std::int64_t gpus,
                       std::int64_t batch, std::int64_t seq) {
  driver::SweepSpec s;
  s.model = config::load_model(model);
  s.cluster = config::load_cluster(cluster);
  s.num_gpus = gpus;
  s.base.global_batch = batch;
  s.base.seq_len = seq;
  s.axes.micro_batch = {1, 2, 4};
  s.axes.schedule = {Schedule::kGpipe, Schedule::k1F1B, Schedule::kInterleaved, Schedule::kZbH1,
                     Schedule::kDualPipeV, Schedule::kZbV};
  s.axes.zero = {0, 1, 3};
  s.axes.sequence_parallel = {false, true};
  s.axes.recompute = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  return s;
}

// Small sweeps whose best plans are close to one another (so that the bound must be tight to
// prune) and whose spaces hold plans of every kind: out of memory statically, after a replay,
// pipelined or not, with context parallelism (ring, all-gather, Ulysses), with TP collectives
// overlapped with GEMMs, with ZeRO-3 over all data-parallel ranks or a shard group (dense and MoE
// layers).
std::vector<driver::SweepSpec> specs() {
  std::vector<driver::SweepSpec> out;
  {
    auto s = make("llama3-8b", "dgx-h100", 16, 32, 4096);
    s.axes.cp = {1, 2};
    s.axes.zero_shard_group = {0, 8};  // ZeRO-3 within a node, replicated across the two
    s.axes.cp_algo = {parallel::CpAlgo::kRing, parallel::CpAlgo::kAllGather, parallel::CpAlgo::kUlysses};
    out.push_back(s);
  }
  {
    auto s = make("llama2-13b", "dgx-a100", 32, 64, 2048);
    s.axes.tp = {2, 4, 8};
    s.axes.cp = {1};
    s.base.tp_comm_overlap = true;  // sequence-parallel plans overlap their TP collectives
    out.push_back(s);
  }
  {
    auto s = make("gpt3-175b", "dgx-a100", 64, 64, 2048);
    s.axes.tp = {8};
    s.axes.cp = {1};
    s.axes.zero = {1};
    out.push_back(s);
  }
  {
    // A mixture of experts whose first 2 layers keep a dense MLP four times as wide as the
    // experts' total (Qwen3-30B-A3B cut to 6 layers, with dense layers added as DeepSeek-V3 and
    // Kimi-K2 have): a dense layer costs more than an MoE one, so a bound sampling the first
    // layers only would exceed the replay of the stages holding MoE layers.
    auto s = make("qwen3-30b-a3b", "dgx-h100", 16, 32, 2048);
    s.model.num_layers = 6;
    s.model.ffn_hidden *= 4;
    s.model.moe->dense_layers = 2;
    s.axes.tp = {1, 2};
    s.axes.cp = {1};
    s.axes.ep = {1, 2, 4};
    s.axes.zero = {1, 3};
    s.axes.micro_batch = {1, 2};
    out.push_back(s);
  }
  {
    // The same with the MoE all-to-all overlap on the plans that take it (expert parallelism,
    // no full recompute, 1F1B without pipelining, interleaved or DualPipeV): forwards beside
    // backwards, their all-to-alls beside the other's compute.
    auto s = make("qwen3-30b-a3b", "dgx-h100", 16, 32, 2048);
    s.model.num_layers = 8;
    s.base.moe_a2a_overlap = true;
    s.axes.schedule = {Schedule::k1F1B, Schedule::kInterleaved, Schedule::kDualPipeV};
    s.axes.tp = {1, 2};
    s.axes.cp = {1};
    s.axes.ep = {2, 4};
    s.axes.zero = {1};
    s.axes.micro_batch = {1, 2};
    out.push_back(s);
  }
  return out;
}

}  // namespace

TEST_CASE(
    "sweep prune: no replay ends sooner than the plan's bound, none fits that the bound rules "
    "out") {
  for (const driver::SweepSpec& s : specs()) {
    const driver::Enumeration e = driver::enumerate_plans(s);
    REQUIRE(e.plans.size() > 50);
    driver::PlanBounder bounder(s.model, s.cluster, s.num_gpus,
                                std::make_shared<config::ComputeModelCache>());
    driver::Resources resources;
    driver::RunOptions ro;
    ro.only_critical_breakdown = true;
    config::Scenario sc;
    sc.model = s.model;
    sc.cluster = s.cluster;
    sc.num_gpus = static_cast<std::int32_t>(s.num_gpus);
    int replayed = 0, activation_pruned = 0, tight = 0;
    for (const parallel::ParallelPlan& plan : e.plans) {
      sc.plan = plan;
      INFO(s.model.name << " plan " << driver::sweep_plan_key(s, plan));
      const driver::PlanBound b = bounder.bound(plan);
      const driver::RunResult r = driver::simulate(sc, ro, resources);
      if (b.static_oom) {
        // simulate() rejects it the same way, before any replay.
        REQUIRE(r.status == driver::Status::kOutOfMemory);
        REQUIRE(r.tasks == 0);
        continue;
      }
      if (b.activation_oom) {
        ++activation_pruned;
        REQUIRE(r.status == driver::Status::kOutOfMemory);
        continue;
      }
      if (r.tasks == 0) continue;  // out of memory by static memory, or unsupported
      ++replayed;
      REQUIRE(b.time.ps() > 0);
      REQUIRE(b.time.seconds() <= r.iteration_time_s);
      REQUIRE(b.tokens_per_s >= r.tokens_per_s);
      if (b.time.seconds() > 0.7 * r.iteration_time_s) ++tight;
    }
    INFO(s.model.name << ": " << replayed << " replayed, " << tight
                      << " with a bound above 70% of the time");
    CHECK(replayed > 20);
    // The bound is meant to prune: most plans' compute is most of their time.
    CHECK(tight * 2 > replayed);
    if (s.model.name == "llama3-8b") CHECK(activation_pruned > 0);
  }
}

TEST_CASE(
    "sweep prune: the pruned search's best plans are the exhaustive sweep's, for any thread "
    "count") {
  for (const driver::SweepSpec& s : specs()) {
    driver::SweepOptions o;
    o.threads = 2;
    const driver::SweepOutcome all = driver::run_sweep(s, o);
    for (const std::size_t k : {std::size_t{1}, std::size_t{5}, std::size_t{20}}) {
      INFO(s.model.name << " top " << k);
      const auto want = driver::top_records(all.records, k);
      REQUIRE(!want.empty());
      std::vector<driver::SweepRecord> first;
      for (const int threads : {1, 3}) {
        o.threads = threads;
        const driver::SweepOutcome pruned = driver::search_sweep(s, o, k);
        REQUIRE(pruned.pruned.has_value());
        const auto got = driver::top_records(pruned.records, k);
        REQUIRE(got.size() == want.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
          REQUIRE(got[i].plan_id == want[i].plan_id);
          REQUIRE(got[i].line == want[i].line);
        }
        // Every row it simulated is the exhaustive sweep's row of that plan.
        for (const auto& r : pruned.records) {
          REQUIRE(r.line == all.records[static_cast<std::size_t>(r.plan_id)].line);
        }
        const auto& p = *pruned.pruned;
        CHECK(p.static_oom + p.activation_oom + p.by_bound + pruned.stats.simulated ==
              static_cast<std::int64_t>(all.records.size()));
        // The same plans simulated with 1 and 3 threads.
        if (threads == 1) {
          first = pruned.records;
        } else {
          REQUIRE(first.size() == pruned.records.size());
        }
      }
    }
  }
}
