// Prediction intervals (sim/driver/intervals.h): the perturbed calibrations, the conformal
// mapping of the replays' range, the replays themselves and the coverage statistics.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "sim/base/diagnostic.h"
#include "sim/config/interval_loader.h"
#include "sim/driver/intervals.h"
#include "sim/driver/simulate.h"

using namespace ts;

namespace {

config::IntervalCalibration calibration(double lower, double upper) {
  config::IntervalCalibration c;
  c.default_kernels = config::KernelUncertainty{"", 0.05, 0.08, 0.04};
  c.kernels = {config::KernelUncertainty{"H100-SXM5-80GB", 0.03, 0.06, 0.02}};
  c.clock = 0.04;
  c.collectives = 0.1;
  c.lower = lower;
  c.upper = upper;
  c.coverage = 0.8;
  return c;
}

config::Scenario llama_8b_on_16() {
  config::Scenario sc;
  sc.model = config::load_model("llama3-8b");
  sc.cluster = config::load_cluster("dgx-h100");
  sc.num_gpus = 16;
  sc.plan.tp = 2;
  sc.plan.pp = 2;
  sc.plan.dp = 4;
  sc.plan.micro_batch = 1;
  sc.plan.global_batch = 32;
  sc.plan.seq_len = 4096;
  return sc;
}

}  // namespace

TEST_CASE("intervals: corners combine class and clock spreads") {
  const auto cal = calibration(-1, 1);
  // u = sqrt(0.03^2 + 0.04^2) = 0.05 for the H100's GEMMs; the default entry for other GPUs.
  const driver::Perturbation slow = driver::corner(cal, "h100-sxm5-80gb", true);
  const driver::Perturbation fast = driver::corner(cal, "H100-SXM5-80GB", false);
  CHECK(slow.kernels.gemm == Approx(1.05));
  CHECK(fast.kernels.gemm == Approx(1 / 1.05));
  CHECK(slow.kernels.memory == Approx(1 + std::hypot(0.02, 0.04)));
  CHECK(slow.collectives == Approx(1.1));
  CHECK(fast.collectives == Approx(1 / 1.1));
  CHECK(driver::corner(cal, "A100-SXM4-80GB", true).kernels.attention ==
        Approx(1 + std::hypot(0.08, 0.04)));
}

TEST_CASE("intervals: conformal bounds scale the replays' log range") {
  // Identity factors give the replays' range itself.
  const auto id = driver::calibrated_interval(2.0, 1.8, 2.5, calibration(-1, 1));
  CHECK(id.low_s == Approx(1.8));
  CHECK(id.high_s == Approx(2.5));
  // lower -2, upper 3: t·(fast/t)^2 and t·(slow/t)^3.
  const auto w = driver::calibrated_interval(2.0, 1.8, 2.5, calibration(-2, 3));
  CHECK(w.low_s == Approx(2.0 * std::pow(0.9, 2)));
  CHECK(w.high_s == Approx(2.0 * std::pow(1.25, 3)));
  CHECK(w.input_low_s == Approx(1.8));
  CHECK(w.input_high_s == Approx(2.5));
  // A positive lower score puts the whole interval above the prediction (a model that is
  // optimistic on every fitting row).
  const auto above = driver::calibrated_interval(2.0, 1.8, 2.5, calibration(0.5, 2));
  CHECK(above.low_s == Approx(2.0 * std::sqrt(1.25)));
  CHECK(above.low_s > 2.0);
}

TEST_CASE("intervals: perturbed replays bracket the prediction") {
  const config::Scenario sc = llama_8b_on_16();
  driver::Resources resources;
  driver::RunResult r = driver::simulate(sc, {}, resources);
  REQUIRE(r.status == driver::Status::kOk);
  driver::add_interval(sc, r, calibration(-1.5, 2), resources);
  REQUIRE(r.interval);
  const double t = r.iteration_time_s;
  // Every kernel and collective 3-13 % slower or faster: the replays move by less than the
  // largest factor and more than the smallest.
  CHECK(r.interval->input_high_s > t * 1.03);
  CHECK(r.interval->input_high_s < t * 1.11);
  CHECK(r.interval->input_low_s < t / 1.03);
  CHECK(r.interval->input_low_s > t / 1.11);
  CHECK(r.interval->low_s < r.interval->input_low_s);
  CHECK(r.interval->high_s > r.interval->input_high_s);
  // The unperturbed replay is untouched by the perturbed ones (separate models).
  CHECK(driver::simulate(sc, {}, resources).iteration_time_s == t);
}

TEST_CASE("intervals: coverage and median width") {
  const std::vector<driver::IntervalCheck> checks = {
      {10, 11, 9, 12}, {10, 13, 9, 12}, {10, 9.5, 9, 11}, {10, 8, 9, 13}};
  const driver::Coverage c = driver::coverage(checks);
  CHECK(c.n == 4);
  CHECK(c.coverage == Approx(0.5));
  CHECK(c.median_relative_width == Approx(0.3));  // widths 0.3, 0.3, 0.2, 0.4
}

TEST_CASE("intervals: the shipped calibration loads, bad files name the field") {
  const config::IntervalCalibration cal = config::load_interval_calibration();
  CHECK(cal.coverage == Approx(0.8));
  CHECK(cal.lower < 0);
  CHECK(cal.upper > 0);
  CHECK(cal.rows > 100);
  CHECK(cal.kernels_of("H100-SXM5-80GB").gemm > 0);
  const std::string path = "intervals_test_bad.textproto";
  {
    std::ofstream f(path);
    f << "default_kernels { gemm: 0.05 attention: 1.5 memory: 0.04 source: \"x\" }\n"
         "clock: 0.01\nclock_source: \"x\"\ncollectives_source: \"x\"\n"
         "conformal { lower: 2 upper: 1 coverage: 0.8 rows: 10 fitted_on: \"x\" method: \"x\" "
         "date: \"x\" }\n";
  }
  try {
    config::load_interval_calibration(path);
    FAIL("no error");
  } catch (const InputError& e) {
    const std::string m = e.what();
    CHECK(m.find("default_kernels.attention") != std::string::npos);
    CHECK(m.find("collectives") != std::string::npos);
    CHECK(m.find("conformal.lower") != std::string::npos);
  }
  std::filesystem::remove(path);
}

TEST_CASE("intervals: a time-scaled network profile scales every collective") {
  driver::Resources resources;
  const config::Cluster cluster = config::load_cluster("dgx-h100");
  const network::NetworkModel& base = resources.network(cluster, 16);
  const network::NetworkModel& slow = resources.network(cluster, 16, 1.25);
  for (const double bytes : {64e3, 16e6, 1e9}) {
    network::CollectiveRequest r;
    r.op = network::CollectiveOp::kAllReduce;
    r.bytes = Bytes(static_cast<std::int64_t>(bytes));
    r.groups = {{0, 2, 4, 6, 8, 10, 12, 14}};
    const double t0 = base.collective(r).time.seconds();
    const double t1 = slow.collective(r).time.seconds();
    // Latencies and bandwidth terms scale alike; the fabric's per-switch hop extra does not.
    CHECK(t1 / t0 == Approx(1.25).epsilon(0.02));
  }
  CHECK(&resources.network(cluster, 16, 1.0) == &base);
}
