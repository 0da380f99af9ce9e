// Time-to-train formulas against hand calculations (each test states its derivation).
#include "sim/longrun/time_to_train.h"

#include <catch2/catch.hpp>
#include <cmath>

namespace ts::longrun {
namespace {

TEST_CASE("interruption rates add up every component times its units in the job") {
  const std::vector<FailureComponent> f = {
      {"gpu", FailureUnit::kGpu, false, 0.001, "s"},
      {"host", FailureUnit::kNode, false, 0.01, "s"},
      {"nic", FailureUnit::kNic, false, 0.002, "s"},
      {"maintenance", FailureUnit::kNode, true, 0.005, "s"},
  };
  const JobShape job{64, 8, 64};
  const InterruptionRates r = interruption_rates(f, job);
  // Unplanned: 0.001·64 + 0.01·8 + 0.002·64 = 0.064 + 0.08 + 0.128 = 0.272 a day.
  CHECK(r.unplanned_per_day == Approx(0.272));
  // Planned: 0.005·8 = 0.04 a day.
  CHECK(r.planned_per_day == Approx(0.04));
  REQUIRE(r.components.size() == 4);
  CHECK(r.components[1].per_day == Approx(0.08));
  // Twice the job, twice the rate: the job's mean time to interruption falls as 1/scale.
  const InterruptionRates r2 = interruption_rates(f, JobShape{128, 16, 128});
  CHECK(r2.unplanned_per_day == Approx(2 * r.unplanned_per_day));
}

TEST_CASE("inverse normal distribution function") {
  CHECK(inverse_normal_cdf(0.5) == Approx(0.0).margin(1e-12));
  CHECK(inverse_normal_cdf(0.975) == Approx(1.959964).epsilon(1e-6));
  CHECK(inverse_normal_cdf(0.025) == Approx(-1.959964).epsilon(1e-6));
  CHECK(std::isnan(inverse_normal_cdf(1.0)));
}

TEST_CASE("expected maximum of n standard normals by Blom's approximation") {
  CHECK(expected_max_standard_normal(1) == 0);
  // Exact values (tables of normal order statistics, e.g. Harter 1961): E[max of 10] = 1.53875,
  // E[max of 100] = 2.50759. Blom's Φ⁻¹((n − 0.375)/(n + 0.25)) is within 1 % of both.
  CHECK(expected_max_standard_normal(10) == Approx(1.53875).epsilon(0.01));
  CHECK(expected_max_standard_normal(100) == Approx(2.50759).epsilon(0.01));
  // It grows with n: the more GPUs, the slower the slowest.
  CHECK(expected_max_standard_normal(16384) > expected_max_standard_normal(1024));
  // 65,536 GPUs: Φ⁻¹(65535.625/65536.25) = Φ⁻¹(1 − 9.54e-6) ≈ 4.27 (the data file's PRISM reading).
  CHECK(expected_max_standard_normal(65536) == Approx(4.27).epsilon(0.005));
}

TEST_CASE("a synchronous step stretches to its slowest GPU and link") {
  const StepParts step{0.8, 0.1, 0.1};
  const JobShape job{10, 2, 10};
  StragglerSettings s;
  s.gpu_cv = 0.02;
  const double z10 = expected_max_standard_normal(10);
  const Straggled a = stretch_step(step, s, job);
  // Slowest GPU: 1 + 0.02·z10 ≈ 1.0309; compute and bubble (0.9 s) stretch by it, communication
  // (0.1 s) does not: 0.1 + 0.9·1.0309 ≈ 1.0278 s.
  CHECK(a.gpu_factor == Approx(1 + 0.02 * z10));
  CHECK(a.link_factor == 1);
  CHECK(a.step.total_s() == Approx(0.1 + 0.9 * (1 + 0.02 * z10)));
  // A typical GPU still computes 0.8 s and waits the rest.
  CHECK(a.step.compute_s == Approx(0.8));
  CHECK(a.step.idle_s == Approx(0.9 * (1 + 0.02 * z10) - 0.8));
  // One GPU at 80 % speed: factor 1/0.8 = 1.25 dominates the spread; 0.1 + 0.9·1.25 = 1.225 s.
  s.slow_gpu_speed = 0.8;
  CHECK(stretch_step(step, s, job).step.total_s() == Approx(1.225));
  // Slow links stretch only the exposed communication: 0.1·(1 + 0.05·z10) + 0.9.
  StragglerSettings l;
  l.link_cv = 0.05;
  CHECK(stretch_step(step, l, job).step.total_s() == Approx(0.1 * (1 + 0.05 * z10) + 0.9));
  // No spread: unchanged.
  CHECK(stretch_step(step, StragglerSettings{}, job).step.total_s() == Approx(1.0));
}

TEST_CASE("Daly's optimum checkpoint interval") {
  // δ = 60 s, M = 3600 s: x = δ/(2M) = 1/120; sqrt(2δM) = sqrt(432000) = 657.267;
  // τ = 657.267·(1 + sqrt(1/120)/3 + 1/1080) − 60 = 657.267·1.031355 − 60 = 617.88 s.
  CHECK(optimal_checkpoint_interval_s(60, 3600) == Approx(617.88).epsilon(1e-4));
  // δ ≥ 2M: checkpoint every M.
  CHECK(optimal_checkpoint_interval_s(100, 40) == Approx(40));
  // No interruptions: no optimum (0: no periodic checkpoint).
  CHECK(optimal_checkpoint_interval_s(60, 0) == 0);
}

TEST_CASE("wall time under interruptions, Daly's complete model") {
  SECTION("no interruptions: useful time plus the checkpoints") {
    // U = 1000 s, δ = 10 s every τ = 100 s: W = 1000·(1 + 10/100) = 1100 s.
    const WallTime w = wall_time(1000, CheckpointPolicy{10, 100, 50}, 0, 0);
    CHECK(w.wall_s == Approx(1100));
    CHECK(w.goodput == Approx(1000.0 / 1100));
    CHECK(w.interruptions == 0);
    CHECK(w.checkpoint_s == Approx(100));
    CHECK(w.lost_s == Approx(0).margin(1e-9));
  }
  SECTION("unplanned interruptions") {
    // M = 1000 s, R = 50 s, τ = 100 s, δ = 10 s, U = 1000 s:
    // W = M·e^(R/M)·(e^((τ+δ)/M) − 1)·U/τ = 1000·e^0.05·(e^0.11 − 1)·10
    //   = 1000·1.0512711·0.1162781·10 = 1222.40 s.
    const WallTime w = wall_time(1000, CheckpointPolicy{10, 100, 50}, 1e-3, 0);
    CHECK(w.wall_s == Approx(1222.40).epsilon(1e-5));
    // Expected interruptions = W/M = 1.2224; restarts 1.2224·50 = 61.12 s; checkpoints 100 s;
    // lost work the rest: 1222.40 − 1000 − 100 − 61.12 = 61.28 s.
    CHECK(w.interruptions == Approx(1.22240).epsilon(1e-5));
    CHECK(w.restart_s == Approx(61.120).epsilon(1e-4));
    CHECK(w.lost_s == Approx(61.28).epsilon(1e-3));
    // First-order check: W ≈ U(1 + δ/τ) / (1 − λ(R + (τ+δ)/2)) = 1100/0.895 = 1229: close.
    CHECK(w.wall_s == Approx(1100 / 0.895).epsilon(0.01));
    // Linear in the useful time: twice the work, twice the wall time (goodput independent of it).
    CHECK(wall_time(2000, CheckpointPolicy{10, 100, 50}, 1e-3, 0).wall_s == Approx(2 * w.wall_s));
  }
  SECTION("planned interruptions cost a restart each") {
    // Planned rate 1e-3/s, R = 50 s: 5 % of the wall time restarts: W = 1100/0.95 = 1157.9 s.
    const WallTime w = wall_time(1000, CheckpointPolicy{10, 100, 50}, 0, 1e-3);
    CHECK(w.wall_s == Approx(1100 / 0.95));
    CHECK(w.interruptions == Approx(1100 / 0.95 * 1e-3));
    // Interruptions faster than restarts: infeasible, not a crash.
    CHECK_FALSE(wall_time(1000, CheckpointPolicy{10, 100, 50}, 0, 0.03).feasible);
  }
  SECTION("no periodic checkpoint: the whole run is one segment") {
    // U = 100 s, M = 1000 s, R = 0: W = 1000·(e^0.1 − 1) = 105.17 s.
    const WallTime w = wall_time(100, CheckpointPolicy{10, 0, 0}, 1e-3, 0);
    CHECK(w.wall_s == Approx(1000 * std::expm1(0.1)));
    CHECK(w.checkpoint_s == 0);
  }
}

TEST_CASE("energy of a GPU iteration and of the run") {
  const StepParts step{1.0, 0.5, 0.5};
  const PowerInputs p{700, 350, 100, 2800, 75, 1.1};
  // 700·1 + 350·0.5 + 100·0.5 = 925 J per GPU and iteration.
  CHECK(gpu_iteration_energy_j(step, p) == Approx(925));
  WallTime w;
  w.useful_s = 100;
  w.lost_s = 20;
  w.checkpoint_s = 5;
  w.restart_s = 10;
  w.wall_s = 135;
  const Energy e = run_energy(w, step, JobShape{16, 2, 16}, p);
  // Iterations run: (100 + 20)/2 = 60; GPUs: 16·(60·925 + 100 W·15 s) = 16·57000 = 912000 J.
  CHECK(e.gpu_j == Approx(912000));
  // Nodes and fabric all the wall time: (2·2800 + 16·75)·135 = 6800·135 = 918000 J.
  CHECK(e.overhead_j == Approx(918000));
  // Facility: (912000 + 918000)·(1.1 − 1) = 183000 J; total 2013000 J.
  CHECK(e.facility_j == Approx(183000));
  CHECK(e.total_j() == Approx(2013000));
}

}  // namespace
}  // namespace ts::longrun
