// Error statistics of the validation summary (sim/driver/validate.h).
#include <catch2/catch.hpp>

#include "sim/driver/validate.h"

using namespace ts;

TEST_CASE("percentile interpolates between order statistics (Hyndman-Fan 7, numpy's default)") {
  // Sorted 1..10: position q·(n−1); the median of an even count is the mean of the middle two,
  // the 90th percentile of 1..10 is 9 + 0.1·(10 − 9) = 9.1.
  const std::vector<double> v = {10, 1, 9, 2, 8, 3, 7, 4, 6, 5};
  CHECK(driver::percentile(v, 0.5) == Approx(5.5));
  CHECK(driver::percentile(v, 0.9) == Approx(9.1));
  CHECK(driver::percentile(v, 0.0) == Approx(1));
  CHECK(driver::percentile(v, 1.0) == Approx(10));
  CHECK(driver::percentile({3}, 0.9) == Approx(3));
  CHECK(driver::percentile({}, 0.5) == 0);
}

TEST_CASE("error_stats: absolute median and p90, signed mean, largest absolute error") {
  const auto s = driver::error_stats({-0.2, 0.1, 0.05, -0.05, 0.3});
  CHECK(s.n == 5);
  CHECK(s.median_abs == Approx(0.1));
  CHECK(s.p90_abs == Approx(0.2 + 0.6 * (0.3 - 0.2)));  // |e| sorted .05 .05 .1 .2 .3, position 3.6
  CHECK(s.mean_signed == Approx(0.04));
  CHECK(s.max_abs == Approx(0.3));
}

TEST_CASE("summarize: skipped rows are counted, compared rows grouped by source, GPU and parallelism") {
  std::vector<driver::RowResult> rows(4);
  rows[0].source = "A";
  rows[0].gpu = "H100";
  rows[0].parallelism = "tp+pp";
  rows[0].throughput = driver::Comparison{driver::Metric::kIterationTime, 1.0, 1.1, 0.1};
  rows[1].source = "A";
  rows[1].gpu = "A100";
  rows[1].parallelism = "fsdp-only";
  rows[1].fp8 = true;
  rows[1].throughput = driver::Comparison{driver::Metric::kTokensPerS, 80, 100, -0.2};
  rows[2].source = "B";
  rows[2].skipped = true;
  rows[2].reason = "no cluster model";
  rows[3].source = "C";
  rows[3].memory = driver::Comparison{driver::Metric::kPeakMemory, 50e9, 40e9, 0.25};
  const auto s = driver::summarize(rows);
  CHECK(s.rows == 4);
  CHECK(s.skipped == 1);
  CHECK(s.throughput.n == 2);
  CHECK(s.throughput.median_abs == Approx(0.15));
  CHECK(s.by_source.at("A").n == 2);
  CHECK(s.by_source.count("B") == 0);
  CHECK(s.by_gpu.at("A100").mean_signed == Approx(-0.2));
  CHECK(s.by_parallelism.at("fp8").n == 1);
  CHECK(s.by_parallelism.at("tp+pp").n == 1);
  CHECK(s.memory.n == 1);
  CHECK(s.memory.max_abs == Approx(0.25));
}
