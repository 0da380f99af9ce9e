// The public validation set (tests/validation/public-runs.csv): every row is simulated or listed
// with its reason, and the accuracy targets of the validation issue hold.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "sim/driver/validate.h"
#include "tests/unit/config/config_test_util.h"

using namespace ts;

namespace {

using config::test::source_dir;

const driver::ValidationReport& public_report() {
  static const driver::ValidationReport report = [] {
    const auto runs = driver::read_published_runs(source_dir() / "tests/validation/public-runs.csv");
    driver::ValidateOptions options;
    options.threads = 2;
    return driver::validate(runs, options);
  }();
  return report;
}

}  // namespace

TEST_CASE("public validation set: every row is compared or listed with its reason") {
  const auto runs = driver::read_published_runs(source_dir() / "tests/validation/public-runs.csv");
  const auto& report = public_report();
  REQUIRE(report.rows.size() == runs.size());
  CHECK(runs.size() >= 150);
  std::int64_t compared = 0;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& r = report.rows[i];
    INFO("run " << runs[i].run_id << ": " << r.reason);
    CHECK(r.run_id == runs[i].run_id);
    if (r.skipped) {
      CHECK_FALSE(r.reason.empty());
      CHECK_FALSE(r.throughput.has_value());
    } else {
      CHECK((r.throughput.has_value() || r.memory.has_value()));
      ++compared;
    }
    // A row whose only measured values are throughput numbers has a throughput comparison.
    if (!r.skipped && !runs[i].max_seq_len && !runs[i].peak_mem) CHECK(r.throughput.has_value());
    if (r.throughput) CHECK(std::isfinite(r.throughput->error));
  }
  CHECK(report.summary.rows == static_cast<std::int64_t>(runs.size()));
  CHECK(report.summary.skipped + compared == report.summary.rows);
}

TEST_CASE("public validation set: the JSON report has rows and the summary keys") {
  const auto j = nlohmann::json::parse(driver::validation_json(public_report()));
  REQUIRE(j.contains("rows"));
  REQUIRE(j.contains("summary"));
  CHECK(j["rows"].size() == public_report().rows.size());
  for (const char* k : {"n", "skipped", "median_abs_error", "p90_abs_error", "by_source", "by_gpu",
                        "by_parallelism", "memory"}) {
    CHECK(j["summary"].contains(k));
  }
  CHECK(j["summary"]["n"].get<std::int64_t>() == public_report().summary.throughput.n);
  const auto& row = j["rows"][0];
  for (const char* k : {"run_id", "status", "reason", "metric", "predicted", "measured", "error", "plan",
                        "assumptions", "simulated"}) {
    CHECK(row.contains(k));
  }
}

// Regression guards for subsets: the Megatron TP+PP rows of Korthikanti et al. 2022 (the
// best-specified runs of the set, iteration times of short benchmark runs) stay within 8 % median
// error, the H100 rows within 12 %.
TEST_CASE("public validation set: errors do not regress") {
  const auto& s = public_report().summary;
  INFO(driver::validation_text(public_report()));
  const auto k = std::find_if(s.by_source.begin(), s.by_source.end(),
                              [](const auto& kv) { return kv.first.rfind("Korthikanti", 0) == 0; });
  REQUIRE(k != s.by_source.end());
  CHECK(k->second.n == 9);
  CHECK(k->second.median_abs <= 0.08);
  // The H100 rows, 29.9 % median before the H100 Triton FlashAttention and 2023 cuBLAS points.
  const auto h = s.by_gpu.find("H100-SXM5-80GB");
  REQUIRE(h != s.by_gpu.end());
  CHECK(h->second.median_abs <= 0.12);
}

// The targets of the validation issue: median absolute throughput error ≤ 8 %, 90th percentile
// ≤ 20 %, memory comparisons within 15 %.
TEST_CASE("public validation set: accuracy targets", "[accuracy]") {
  const auto& s = public_report().summary;
  INFO(driver::validation_text(public_report()));
  CHECK(s.skipped == 0);
  CHECK(s.throughput.median_abs <= 0.08);
  CHECK(s.throughput.p90_abs <= 0.20);
  CHECK(s.memory.max_abs <= 0.15);
}

// vTrain's 1,440 single-node Megatron-DeepSpeed runs (tests/validation/vtrain-single-node.csv):
// small models whose kernels are shorter than the host's time to issue them. The host dispatch
// time was fitted on the hidden-1024 half (tools/calibrate/fit_host_dispatch.py); the hidden-2048
// half checks it.
TEST_CASE("vTrain single-node runs: the host dispatch floor predicts small, host-bound models") {
  const auto runs = driver::read_published_runs(source_dir() / "tests/validation/vtrain-single-node.csv");
  REQUIRE(runs.size() == 1440);
  std::vector<driver::PublishedRun> check;
  for (const auto& r : runs) {
    if (r.hidden && *r.hidden == 2048) check.push_back(r);
  }
  REQUIRE(check.size() == 720);
  driver::ValidateOptions options;
  options.threads = 2;
  const auto all = driver::validate(runs, options);
  INFO(driver::validation_text(all));
  CHECK(all.summary.skipped == 0);
  CHECK(all.summary.throughput.median_abs <= 0.08);
  CHECK(all.summary.throughput.p90_abs <= 0.20);
  const auto held = driver::validate(check, options).summary.throughput;
  CHECK(held.median_abs <= 0.08);
  CHECK(held.p90_abs <= 0.20);
  // Without the floor (CUDA graphs) the micro-batch-1 runs come out two to three times too fast.
  options.host_dispatch = Duration::zero();
  CHECK(driver::validate(runs, options).summary.throughput.median_abs > 0.25);
}
