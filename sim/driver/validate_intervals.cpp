#include "sim/driver/validate_intervals.h"

#include <utility>

namespace ts::driver {

namespace {

// The interval of a metric predicted as `predicted` from iteration time `t`: times map to
// themselves, rates (tokens/s, TFLOP/s, MFU) as predicted · t / time.
std::pair<double, double> metric_range(Metric m, double predicted, double t, double low_s,
                                       double high_s) {
  switch (m) {
    case Metric::kIterationTime:
      return {low_s, high_s};
    case Metric::kTokensPerS:
    case Metric::kTokensPerSPerGpu:
    case Metric::kTflopsPerGpu:
    case Metric::kMfu:
    case Metric::kHfu:
      return {predicted * t / high_s, predicted * t / low_s};
    case Metric::kPeakMemory:
    case Metric::kMaxSeqLen:
      break;
  }
  return {0, 0};
}

}  // namespace

void add_row_interval(RowResult& row, const config::IntervalCalibration& cal,
                      Resources& resources) {
  row.interval.reset();
  if (row.skipped || !row.throughput || !row.scenario || !row.result) return;
  if (row.memory && row.memory->metric == Metric::kMaxSeqLen) return;
  const Metric m = row.throughput->metric;
  if (m == Metric::kPeakMemory || m == Metric::kMaxSeqLen) return;
  RunResult& res = *row.result;
  add_interval(*row.scenario, res, cal, resources);
  if (!res.interval) return;
  const double t = res.iteration_time_s;
  const auto [lo, hi] =
      metric_range(m, row.throughput->predicted, t, res.interval->low_s, res.interval->high_s);
  const auto [ilo, ihi] = metric_range(m, row.throughput->predicted, t, res.interval->input_low_s,
                                       res.interval->input_high_s);
  row.interval = MetricInterval{lo, hi, ilo, ihi};
}

std::map<std::string, Coverage> interval_coverage(const std::vector<RowResult>& rows, bool input) {
  std::map<std::string, std::vector<IntervalCheck>> sets;
  for (const auto& r : rows) {
    if (!r.interval || !r.throughput) continue;
    const IntervalCheck c{r.throughput->predicted, r.throughput->measured,
                          input ? r.interval->input_low : r.interval->low,
                          input ? r.interval->input_high : r.interval->high};
    sets["all"].push_back(c);
    sets[r.held_out ? "held-out" : "public"].push_back(c);
  }
  std::map<std::string, Coverage> out;
  for (const auto& [k, v] : sets) out[k] = coverage(v);
  return out;
}

}  // namespace ts::driver
