// Prediction intervals: a prediction's input uncertainty propagated by two replays at perturbed
// calibrations, widened to the stated coverage by split-conformal factors fitted on public runs.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/config/interval_loader.h"
#include "sim/config/loader.h"
#include "sim/driver/resources.h"
#include "sim/driver/simulate.h"
#include "sim/driver/sweep.h"

namespace ts::driver {

// The calibration at the slow (`slow`) or the fast end of the inputs' uncertainty for `gpu`: each
// kernel class's time × (1 + u) or ÷ (1 + u), u = sqrt(class² + clock²) (independent sources);
// every collective × or ÷ (1 + collectives), the host time per operation × or ÷ (1 +
// host_dispatch).
Perturbation corner(const config::IntervalCalibration& cal, const std::string& gpu, bool slow);

// The calibrated interval of a predicted time `t` whose replays at the fast and slow corners took
// `fast` and `slow` seconds: with w_lo = ln(t/fast), w_hi = ln(slow/t), the times whose
// normalized score (ln(m/t) / w_hi above t, / w_lo below) lies in [cal.lower, cal.upper].
IterationInterval calibrated_interval(double t, double fast, double slow,
                                      const config::IntervalCalibration& cal);

// Replays `scenario` at both corners and sets result.interval; leaves it empty when the plan was
// not replayed (out of memory before the replay, unsupported). `options`: those that gave
// `result` (their trace and statistics are not repeated).
void add_interval(const config::Scenario& scenario, RunResult& result,
                  const config::IntervalCalibration& cal, Resources& resources,
                  const RunOptions& options = {});

// Coverage of a set of intervals against measurements: the share inside, and the median width
// (high − low) relative to the prediction.
struct Coverage {
  std::int64_t n = 0;
  double coverage = 0;
  double median_relative_width = 0;
};
// An interval of a validated row's metric in the metric's unit (rates are inverse to the time:
// their low end comes from the slow end of the time).
struct MetricInterval {
  double low = 0, high = 0;              // calibrated
  double input_low = 0, input_high = 0;  // the inputs' uncertainty alone
};
struct IntervalCheck {
  double predicted = 0, measured = 0, low = 0, high = 0;
};
Coverage coverage(const std::vector<IntervalCheck>& checks);

// How a sweep orders its best plans: by the point prediction of tokens/s, or by the midpoint or
// the low end of its interval.
enum class RankBy { kPoint, kMid, kLow };

struct RankedPlan {
  SweepRecord record;
  double tokens_per_s = 0;                 // the point prediction
  double tokens_low = 0, tokens_high = 0;  // its interval
  double key = 0;                          // what the ranking sorts by
};

// The best `k` plans (k = 0: all) by `by` (kMid, kLow) among the best `pool` ok plans of
// `records` by the point prediction (pool = 0: all): each pooled plan replayed at both corners
// (add_interval). Ties by plan id. `enumeration`: of `spec`, as the sweep made it.
std::vector<RankedPlan> rank_by_interval(const SweepSpec& spec, const Enumeration& enumeration,
                                         const std::vector<SweepRecord>& records, std::size_t k,
                                         std::size_t pool, RankBy by,
                                         const config::IntervalCalibration& cal,
                                         std::shared_ptr<config::ComputeModelCache> cache);

}  // namespace ts::driver
