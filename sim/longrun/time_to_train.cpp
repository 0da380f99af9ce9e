// Time-to-train formulas: interruption rates, straggler stretch, checkpoint interval, wall time,
// energy.
#include "sim/longrun/time_to_train.h"

#include <algorithm>
#include <cmath>

#include "sim/base/format.h"

namespace ts::longrun {
namespace {

}  // namespace

const char* failure_unit_name(FailureUnit u) {
  switch (u) {
    case FailureUnit::kGpu:
      return "gpu";
    case FailureUnit::kNode:
      return "node";
    case FailureUnit::kNic:
      return "nic";
  }
  return "?";
}

const PowerProfile* TrainData::power_for(const std::string& gpu) const {
  const std::string g = to_lower(gpu);
  for (const auto& p : power) {
    for (const auto& name : p.gpus) {
      if (to_lower(name) == g) return &p;
    }
  }
  return nullptr;
}

double unit_count(FailureUnit u, const JobShape& job) {
  switch (u) {
    case FailureUnit::kGpu:
      return static_cast<double>(job.gpus);
    case FailureUnit::kNode:
      return static_cast<double>(job.nodes);
    case FailureUnit::kNic:
      return static_cast<double>(job.nics);
  }
  return 0;
}

InterruptionRates interruption_rates(const std::vector<FailureComponent>& failures,
                                     const JobShape& job) {
  InterruptionRates r;
  for (const auto& f : failures) {
    const double per_day = f.rate_per_unit_day * unit_count(f.per, job);
    (f.planned ? r.planned_per_day : r.unplanned_per_day) += per_day;
    r.components.push_back(ComponentRate{f.name, f.planned, per_day});
  }
  return r;
}

double inverse_normal_cdf(double p) {
  if (!(p > 0 && p < 1)) return std::nan("");
  // Bisection on Φ(x) = erfc(−x/√2)/2, monotonic: 200 halvings of [−40, 40] reach the double's
  // resolution; deterministic and free of tabulated coefficients.
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    const double cdf = 0.5 * std::erfc(-mid / std::sqrt(2.0));
    (cdf < p ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

double expected_max_standard_normal(std::int64_t n) {
  if (n <= 1) return 0;
  const double nn = static_cast<double>(n);
  return inverse_normal_cdf((nn - 0.375) / (nn + 0.25));
}

Straggled stretch_step(const StepParts& step, const StragglerSettings& s, const JobShape& job) {
  Straggled out;
  const double spread = 1 + s.gpu_cv * expected_max_standard_normal(job.gpus);
  const double slow = s.slow_gpu_speed > 0 ? 1 / s.slow_gpu_speed : 1;
  out.gpu_factor = std::max(spread, slow);
  out.link_factor = 1 + s.link_cv * expected_max_standard_normal(job.nics);
  out.step.compute_s = step.compute_s;
  out.step.comm_s = step.comm_s * out.link_factor;
  // The step's compute-paced part takes gpu_factor longer; a typical GPU computes as before and
  // waits the rest.
  out.step.idle_s = (step.compute_s + step.idle_s) * out.gpu_factor - step.compute_s;
  return out;
}

double optimal_checkpoint_interval_s(double write_s, double mtbf_s) {
  if (!(mtbf_s > 0) || !std::isfinite(mtbf_s)) return 0;
  if (write_s >= 2 * mtbf_s) return mtbf_s;
  const double x = write_s / (2 * mtbf_s);
  return std::sqrt(2 * write_s * mtbf_s) * (1 + std::sqrt(x) / 3 + x / 9) - write_s;
}

WallTime wall_time(double useful_s, const CheckpointPolicy& policy, double unplanned_per_s,
                   double planned_per_s) {
  WallTime w;
  w.useful_s = useful_s;
  if (!(useful_s > 0)) return w;
  const bool periodic = policy.interval_s > 0;
  const double tau = periodic ? policy.interval_s : useful_s;  // one segment: no checkpoint
  const double delta = periodic ? policy.write_s : 0.0;
  const double r = policy.restart_s;
  double wu = 0;
  if (unplanned_per_s > 0) {
    const double m = 1 / unplanned_per_s;
    wu = m * std::exp(r / m) * std::expm1((tau + delta) / m) * useful_s / tau;
  } else {
    wu = useful_s * (1 + delta / tau);
  }
  const double planned_share = planned_per_s * r;
  if (!std::isfinite(wu) || planned_share >= 1) {
    w.feasible = false;
    return w;
  }
  w.wall_s = wu / (1 - planned_share);
  w.goodput = useful_s / w.wall_s;
  w.interruptions = (unplanned_per_s + planned_per_s) * w.wall_s;
  w.checkpoint_s = periodic ? useful_s / tau * delta : 0.0;
  w.restart_s = w.interruptions * r;
  w.lost_s = std::max(0.0, w.wall_s - useful_s - w.checkpoint_s - w.restart_s);
  return w;
}

double gpu_iteration_energy_j(const StepParts& step, const PowerInputs& p) {
  return p.busy_w * step.compute_s + p.comm_w * step.comm_s + p.idle_w * step.idle_s;
}

Energy run_energy(const WallTime& w, const StepParts& step, const JobShape& job,
                  const PowerInputs& p) {
  Energy e;
  const double gpus = static_cast<double>(job.gpus);
  const double step_s = step.total_s();
  const double iterations = step_s > 0 ? (w.useful_s + w.lost_s) / step_s : 0.0;
  e.gpu_j = gpus * (iterations * gpu_iteration_energy_j(step, p) +
                    p.idle_w * (w.checkpoint_s + w.restart_s));
  e.overhead_j =
      (static_cast<double>(job.nodes) * p.node_overhead_w + gpus * p.fabric_w_per_gpu) * w.wall_s;
  e.facility_j = (e.gpu_j + e.overhead_j) * (p.pue - 1);
  return e;
}

}  // namespace ts::longrun
