// Time to train of one plan: inputs from the plan and the data file, then the longrun formulas.
#include "sim/driver/time_to_train.h"

#include <algorithm>
#include <cmath>

#include "sim/base/diagnostic.h"
#include "sim/ir/model_graph.h"
#include "sim/memory/footprint.h"

namespace ts::driver {
namespace {

constexpr double kDay = 86400.0;

}  // namespace

const char* checkpoint_mode_name(CheckpointMode m) {
  switch (m) {
    case CheckpointMode::kAsync:
      return "async";
    case CheckpointMode::kSync:
      return "sync";
  }
  return "?";
}

longrun::StepParts step_parts(const runtime::TimeBreakdown& t) {
  using runtime::TimeCategory;
  longrun::StepParts p;
  for (const TimeCategory c :
       {TimeCategory::kForward, TimeCategory::kBackward, TimeCategory::kRecompute,
        TimeCategory::kOptimizer, TimeCategory::kContention}) {
    p.compute_s += t[c].seconds();
  }
  for (const TimeCategory c : {TimeCategory::kExposedTp, TimeCategory::kExposedCp,
                               TimeCategory::kExposedPp, TimeCategory::kExposedDp,
                               TimeCategory::kExposedEp}) {
    p.comm_s += t[c].seconds();
  }
  p.idle_s = t[TimeCategory::kIdle].seconds();
  return p;
}

TrainInputs train_inputs(const ir::ModelSpec& model, const config::Cluster& cluster,
                         std::int64_t gpus, const parallel::ParallelPlan& plan,
                         const longrun::StepParts& step) {
  TrainInputs in;
  in.gpus = gpus;
  in.gpus_per_node = cluster.cluster.host.gpus_per_host;  // failure and NIC units are hosts
  in.nics_per_node = cluster.cluster.host.nics_per_host;
  in.gpu = cluster.gpu.name;
  in.parameters = static_cast<double>(ir::parameter_count(model));
  const memory::BytesPerParameter b = memory::bytes_per_parameter(plan);
  in.checkpoint_bytes_per_parameter =
      static_cast<double>(b.weights + b.optimizer_states + b.master_weights);
  in.tokens_per_iteration =
      static_cast<double>(plan.global_batch) * static_cast<double>(plan.seq_len);
  in.step = step;
  return in;
}

void check_train_settings(const TrainSettings& s) {
  DiagnosticList problems;
  const auto positive = [&](const std::optional<double>& v, const char* flag) {
    if (v && !(*v > 0 && std::isfinite(*v))) {
      problems.add({"", 0, flag, "must be a positive finite number"});
    }
  };
  positive(s.days, "--train-days");
  positive(s.tokens, "--train-tokens");
  if (s.days && s.tokens) {
    problems.add({"", 0, "--train-days", "give --train-days or --train-tokens, not both"});
  }
  positive(s.checkpoint_gbytes_per_s, "--checkpoint-gbps");
  positive(s.checkpoint_interval_s, "--checkpoint-interval-min");
  positive(s.usd_per_gpu_hour, "--price");
  if (s.restart_overhead_s &&
      !(*s.restart_overhead_s >= 0 && std::isfinite(*s.restart_overhead_s))) {
    problems.add({"", 0, "--restart-min", "must be >= 0"});
  }
  if (s.gpu_cv && !(*s.gpu_cv >= 0 && *s.gpu_cv < 1)) {
    problems.add({"", 0, "--straggler", "gpu_cv must be in [0, 1)"});
  }
  if (!(s.link_cv >= 0 && s.link_cv < 1)) {
    problems.add({"", 0, "--straggler", "link_cv must be in [0, 1)"});
  }
  if (!(s.slow_gpu_speed > 0 && s.slow_gpu_speed <= 1)) {
    problems.add({"", 0, "--straggler", "slow_gpu must be a percentage in (0, 100]"});
  }
  if (s.pue && !(*s.pue >= 1 && std::isfinite(*s.pue))) {
    problems.add({"", 0, "--pue", "must be >= 1"});
  }
  problems.throw_if_any();
}

TrainReport time_to_train(const TrainInputs& in, const TrainSettings& s,
                          const longrun::TrainData& data) {
  check_train_settings(s);
  TrainReport r;
  r.tokens_goal = s.tokens.has_value();
  const std::int64_t nodes =
      in.gpus_per_node > 0 ? (in.gpus + in.gpus_per_node - 1) / in.gpus_per_node : in.gpus;
  const longrun::JobShape job{in.gpus, nodes, nodes * std::max<std::int64_t>(in.nics_per_node, 0)};

  // Stragglers.
  longrun::StragglerSettings st;
  st.gpu_cv = s.gpu_cv.value_or(data.gpu_speed_cv);
  st.link_cv = s.link_cv;
  st.slow_gpu_speed = s.slow_gpu_speed;
  const longrun::Straggled sg = longrun::stretch_step(in.step, st, job);
  r.gpu_cv = st.gpu_cv;
  r.link_cv = st.link_cv;
  r.slow_gpu_speed = st.slow_gpu_speed;
  r.gpu_factor = sg.gpu_factor;
  r.link_factor = sg.link_factor;
  r.step_s = sg.step.total_s();

  // Interruptions.
  const longrun::InterruptionRates rates = longrun::interruption_rates(data.failures, job);
  r.unplanned_per_day = rates.unplanned_per_day;
  r.planned_per_day = rates.planned_per_day;
  r.components = rates.components;
  const double all_per_day = rates.unplanned_per_day + rates.planned_per_day;
  r.mtbf_hours = all_per_day > 0 ? 24.0 / all_per_day : 0.0;

  // Checkpoints: the model state (weights, optimizer states, master weights), written once.
  r.checkpoint_mode = s.checkpoint_mode;
  r.checkpoint_bytes = in.parameters * in.checkpoint_bytes_per_parameter;
  r.checkpoint_gbytes_per_s = s.checkpoint_gbytes_per_s.value_or(data.checkpoint_gbytes_per_s);
  // A rate of 0 (a TrainData without checkpoint data) makes checkpoints free.
  const auto transfer_s = [](double bytes, double gbytes_per_s) {
    return gbytes_per_s > 0 ? bytes / (gbytes_per_s * 1e9) : 0.0;
  };
  r.checkpoint_write_s = transfer_s(r.checkpoint_bytes, r.checkpoint_gbytes_per_s);
  const double overhead_s = s.restart_overhead_s.value_or(data.restart_overhead_s);
  longrun::CheckpointPolicy policy;
  // Checkpoints are taken between steps: at most one a step.
  double min_interval_s = r.step_s;
  switch (s.checkpoint_mode) {
    case CheckpointMode::kSync:
      r.checkpoint_blocking_s = r.checkpoint_write_s;
      // Restart: overhead, then read the checkpoint back.
      r.restart_s = overhead_s + r.checkpoint_write_s;
      break;
    case CheckpointMode::kAsync:
      // Each GPU copies its share of the state to host memory; the next snapshot waits for the
      // previous write, and a checkpoint counts only once written, so an interruption also loses
      // the write time: added to the restart (a first-order approximation of that loss).
      r.checkpoint_blocking_s =
          transfer_s(r.checkpoint_bytes / static_cast<double>(std::max<std::int64_t>(in.gpus, 1)),
                     data.snapshot_gbytes_per_s_per_gpu);
      r.restart_s = overhead_s + 2 * r.checkpoint_write_s;
      min_interval_s = std::max(min_interval_s, r.checkpoint_write_s);
      break;
  }
  policy.write_s = r.checkpoint_blocking_s;
  policy.restart_s = r.restart_s;
  const double unplanned_per_s = rates.unplanned_per_day / kDay;
  const double planned_per_s = rates.planned_per_day / kDay;
  if (s.checkpoint_interval_s) {
    policy.interval_s = std::max(*s.checkpoint_interval_s, min_interval_s);
  } else if (unplanned_per_s > 0) {
    policy.interval_s =
        std::max(longrun::optimal_checkpoint_interval_s(policy.write_s, 1 / unplanned_per_s),
                 min_interval_s);
  }
  if (policy.interval_s > 0) r.checkpoint_interval_s = policy.interval_s;

  // Wall time: Daly's model is linear in the useful time, so one evaluation gives the goodput.
  const longrun::WallTime unit = longrun::wall_time(1.0, policy, unplanned_per_s, planned_per_s);
  if (!unit.feasible || !(r.step_s > 0) || !(in.tokens_per_iteration > 0)) {
    r.feasible = false;
    r.reason = !unit.feasible ? "interruptions come faster than the job restarts" : "no step time";
    return r;
  }
  double useful_s = 0;
  if (s.tokens) {
    r.steps = std::ceil(*s.tokens / in.tokens_per_iteration);
    useful_s = r.steps * r.step_s;
  } else {
    useful_s = s.days.value_or(0) * kDay * unit.goodput;
    r.steps = std::floor(useful_s / r.step_s);
  }
  r.tokens = r.steps * in.tokens_per_iteration;
  r.wall = longrun::wall_time(useful_s, policy, unplanned_per_s, planned_per_s);
  r.wall_days = r.wall.wall_s / kDay;
  r.useful_days = r.wall.useful_s / kDay;

  // Energy.
  r.pue = s.pue.value_or(data.pue);
  if (const longrun::PowerProfile* p = data.power_for(in.gpu)) {
    const longrun::PowerInputs pw{
        p->busy_w, p->comm_w, p->idle_w, p->node_overhead_w, data.fabric_w_per_gpu, r.pue};
    const longrun::Energy e = longrun::run_energy(r.wall, sg.step, job, pw);
    r.energy_known = true;
    r.power_source = p->source;
    r.energy_mwh = e.total_j() / 3.6e9;
    r.average_power_mw = r.wall.wall_s > 0 ? e.total_j() / r.wall.wall_s * 1e-6 : 0.0;
    r.energy_per_iteration_j =
        r.pue * (static_cast<double>(job.gpus) * longrun::gpu_iteration_energy_j(sg.step, pw) +
                 (static_cast<double>(job.nodes) * pw.node_overhead_w +
                  static_cast<double>(job.gpus) * pw.fabric_w_per_gpu) *
                     r.step_s);
  }

  // Cost: every GPU is paid for all the wall time.
  r.gpu_hours = static_cast<double>(in.gpus) * r.wall.wall_s / 3600.0;
  r.usd_per_gpu_hour = s.usd_per_gpu_hour;
  if (r.usd_per_gpu_hour) r.cost_usd = r.gpu_hours * *r.usd_per_gpu_hour;
  return r;
}

}  // namespace ts::driver
