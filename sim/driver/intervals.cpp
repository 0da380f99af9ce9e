#include "sim/driver/intervals.h"

#include <algorithm>
#include <cmath>

#include "sim/base/diagnostic.h"

namespace ts::driver {

Perturbation corner(const config::IntervalCalibration& cal, const std::string& gpu, bool slow) {
  const config::KernelUncertainty& k = cal.kernels_of(gpu);
  const auto factor = [&](double u) {
    const double f = 1.0 + std::hypot(u, cal.clock);
    return slow ? f : 1.0 / f;
  };
  Perturbation p;
  p.kernels = compute::KernelTimeScale{factor(k.gemm), factor(k.attention), factor(k.memory)};
  p.collectives = slow ? 1.0 + cal.collectives : 1.0 / (1.0 + cal.collectives);
  p.host_dispatch = slow ? 1.0 + cal.host_dispatch : 1.0 / (1.0 + cal.host_dispatch);
  return p;
}

IterationInterval calibrated_interval(double t, double fast, double slow,
                                      const config::IntervalCalibration& cal) {
  SIM_ASSERT(t > 0 && fast > 0 && slow > 0, "interval of a non-positive time");
  // A perturbed replay may reorder overlapped work; the range is taken as at least the point.
  const double w_lo = std::log(t / std::min(fast, t));
  const double w_hi = std::log(std::max(slow, t) / t);
  const auto bound = [&](double score) { return t * std::exp(score * (score >= 0 ? w_hi : w_lo)); };
  IterationInterval iv;
  iv.input_low_s = std::min(fast, t);
  iv.input_high_s = std::max(slow, t);
  iv.low_s = bound(cal.lower);
  iv.high_s = bound(cal.upper);
  return iv;
}

void add_interval(const config::Scenario& scenario, RunResult& result,
                  const config::IntervalCalibration& cal, Resources& resources,
                  const RunOptions& options) {
  result.interval.reset();
  if (!(result.iteration_time_s > 0)) return;
  RunOptions o;
  o.full = options.full;
  o.fit = options.fit;
  o.nic_sharing = options.nic_sharing;
  o.only_critical_breakdown = true;
  double ends[2] = {0, 0};
  for (int i = 0; i < 2; ++i) {
    o.perturbation = corner(cal, scenario.cluster.gpu.name, i == 1);
    ends[i] = simulate(scenario, o, resources).iteration_time_s;
    if (!(ends[i] > 0)) return;
  }
  result.interval = calibrated_interval(result.iteration_time_s, ends[0], ends[1], cal);
}

Coverage coverage(const std::vector<IntervalCheck>& checks) {
  Coverage c;
  c.n = static_cast<std::int64_t>(checks.size());
  if (checks.empty()) return c;
  std::int64_t inside = 0;
  std::vector<double> widths;
  for (const auto& k : checks) {
    if (k.measured >= k.low && k.measured <= k.high) ++inside;
    widths.push_back((k.high - k.low) / k.predicted);
  }
  c.coverage = static_cast<double>(inside) / static_cast<double>(c.n);
  std::sort(widths.begin(), widths.end());
  const std::size_t m = widths.size() / 2;
  c.median_relative_width = widths.size() % 2 == 1 ? widths[m] : 0.5 * (widths[m - 1] + widths[m]);
  return c;
}

std::vector<RankedPlan> rank_by_interval(const SweepSpec& spec, const Enumeration& enumeration,
                                         const std::vector<SweepRecord>& records, std::size_t k,
                                         std::size_t pool, RankBy by,
                                         const config::IntervalCalibration& cal,
                                         std::shared_ptr<config::ComputeModelCache> cache) {
  Resources resources(std::move(cache));
  config::Scenario sc;
  sc.model = spec.model;
  sc.cluster = spec.cluster;
  sc.num_gpus = static_cast<std::int32_t>(spec.num_gpus);
  RunOptions ro;
  ro.only_critical_breakdown = true;
  std::vector<RankedPlan> out;
  for (const SweepRecord& rec : top_records(records, pool)) {
    sc.plan = enumeration.plans.at(static_cast<std::size_t>(rec.plan_id));
    RunResult r = simulate(sc, ro, resources);
    add_interval(sc, r, cal, resources, ro);
    if (!r.interval) continue;
    RankedPlan p;
    p.record = rec;
    p.tokens_per_s = rec.tokens_per_s;
    const double tokens = r.tokens_per_s * r.iteration_time_s;
    p.tokens_low = tokens / r.interval->high_s;
    p.tokens_high = tokens / r.interval->low_s;
    switch (by) {
      case RankBy::kPoint:
        p.key = p.tokens_per_s;
        break;
      case RankBy::kMid:
        p.key = 0.5 * (p.tokens_low + p.tokens_high);
        break;
      case RankBy::kLow:
        p.key = p.tokens_low;
        break;
    }
    out.push_back(std::move(p));
  }
  std::stable_sort(out.begin(), out.end(), [](const RankedPlan& a, const RankedPlan& b) {
    if (a.key != b.key) return a.key > b.key;
    return a.record.plan_id < b.record.plan_id;
  });
  if (k > 0 && out.size() > k) out.resize(k);
  return out;
}

}  // namespace ts::driver
