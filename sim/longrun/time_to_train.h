// Time to train beyond one iteration: interruptions, checkpoints, restarts, stragglers, energy.
//
// Pure functions over explicit inputs. Times are doubles in seconds (a run of months is beyond
// Duration's int64 picoseconds, about 106 days); powers in watts, energies in joules. The data
// (rates, powers, defaults) come from calibration/longrun/time_to_train.textproto, loaded by sim/config.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ts::longrun {

// ---------------------------------------------------------------------------------------------
// Data

// What one unit of a failing component is.
enum class FailureUnit { kGpu, kNode, kNic };
const char* failure_unit_name(FailureUnit u);

struct FailureComponent {
  std::string name;
  FailureUnit per = FailureUnit::kGpu;
  bool planned = false;          // taken at a checkpoint: no lost work, one restart
  double rate_per_unit_day = 0;  // interruptions per unit and day
  std::string source;
};

struct PowerProfile {
  std::vector<std::string> gpus;
  double busy_w = 0;
  double comm_w = 0;
  double idle_w = 0;
  double node_overhead_w = 0;
  std::string source;
};

// The whole data file. Default-constructed: no interruptions, no stragglers, free checkpoints,
// no power entries, PUE 1 (the time to train is then the ideal one).
struct TrainData {
  std::string file;
  std::vector<FailureComponent> failures;
  std::vector<PowerProfile> power;
  double fabric_w_per_gpu = 0;
  double pue = 1;
  double checkpoint_gbytes_per_s = 0;
  double snapshot_gbytes_per_s_per_gpu = 0;
  double restart_overhead_s = 0;
  double gpu_speed_cv = 0;
  // The profile listing `gpu` (case-insensitive), or null.
  const PowerProfile* power_for(const std::string& gpu) const;
};

// ---------------------------------------------------------------------------------------------
// Interruptions

// The units of a job that can fail.
struct JobShape {
  std::int64_t gpus = 0;
  std::int64_t nodes = 0;
  std::int64_t nics = 0;
};
double unit_count(FailureUnit u, const JobShape& job);

struct ComponentRate {
  std::string name;
  bool planned = false;
  double per_day = 0;  // interruptions of the job per day
};
struct InterruptionRates {
  double unplanned_per_day = 0;
  double planned_per_day = 0;
  std::vector<ComponentRate> components;
};
// A job fails when any of its units fails (units in series, independent, constant rates: the
// model of Kokolis et al. 2024, arXiv 2410.21680, whose job MTTF falls as 1/scale):
// rate = sum over components of rate_per_unit_day × units of that kind in the job.
InterruptionRates interruption_rates(const std::vector<FailureComponent>& failures,
                                     const JobShape& job);

// ---------------------------------------------------------------------------------------------
// Stragglers

// The inverse of the standard normal distribution function, p in (0, 1).
double inverse_normal_cdf(double p);
// E[max of n independent standard normals], by Blom's (1958) approximation
// Φ⁻¹((n − 0.375)/(n + 0.25)); 0 for n = 1. Within 1 % of the exact value for n ≥ 10.
double expected_max_standard_normal(std::int64_t n);

struct StragglerSettings {
  double gpu_cv = 0;          // per-GPU step-time multiplier ~ Normal(1, gpu_cv)
  double link_cv = 0;         // per-NIC communication-time multiplier ~ Normal(1, link_cv)
  double slow_gpu_speed = 1;  // one GPU runs at this fraction of the others' speed (0, 1]
};
// One iteration of the device finishing last, split by state (runtime::TimeBreakdown).
struct StepParts {
  double compute_s = 0;  // forward, backward, recompute, optimizer, compute slowed by comm
  double comm_s = 0;     // exposed TP, CP, PP, DP communication
  double idle_s = 0;     // pipeline bubble and waiting on other stages
  double total_s() const { return compute_s + comm_s + idle_s; }
};
struct Straggled {
  double gpu_factor = 1;   // the slowest GPU's step-time multiplier
  double link_factor = 1;  // the slowest link's communication-time multiplier
  StepParts step;          // the stretched iteration, as a typical GPU spends it
};
// A synchronous step waits for its slowest rank: tensor-parallel collectives each layer,
// pipeline sends each micro-batch and the gradient reduction each step tie every GPU to it. The
// compute and the bubble (other stages' compute) stretch by the slowest GPU's multiplier,
// max(1 + gpu_cv·E[max of gpus normals], 1/slow_gpu_speed); exposed communication by the slowest
// link's, 1 + link_cv·E[max of nics normals]. Applied to the step analytically, not in the
// replay. A typical GPU computes at its own speed and waits the difference, counted as idle.
Straggled stretch_step(const StepParts& step, const StragglerSettings& s, const JobShape& job);

// ---------------------------------------------------------------------------------------------
// Checkpoints, restarts, lost work

// Daly's higher-order optimum of the compute time between checkpoints (J. T. Daly, "A higher
// order estimate of the optimum checkpoint interval for restart dumps", FGCS 22(3), 2006):
// τ = sqrt(2δM)·[1 + (1/3)·sqrt(δ/(2M)) + (1/9)·(δ/(2M))] − δ for δ < 2M, else τ = M, with δ the
// checkpoint write time and M the mean time between interruptions. Its first term is Young's
// (1974) sqrt(2δM).
double optimal_checkpoint_interval_s(double write_s, double mtbf_s);

struct CheckpointPolicy {
  double write_s = 0;     // one checkpoint write, blocking training
  double interval_s = 0;  // compute time between checkpoints; 0: no periodic checkpoint
  double restart_s = 0;   // from an interruption to training again (overhead + checkpoint read)
};
struct WallTime {
  bool feasible = true;  // false: interruptions come faster than the job can restart
  double useful_s = 0;
  double wall_s = 0;
  double goodput = 0;        // useful_s / wall_s
  double interruptions = 0;  // expected, planned and unplanned
  double checkpoint_s = 0;   // writing the checkpoints of the useful work
  double restart_s = 0;      // restarting after the interruptions
  double lost_s = 0;         // work and checkpoints redone after unplanned interruptions
};
// Expected wall time of `useful_s` of training under Poisson interruptions, by the complete model
// of Daly (2006) for unplanned ones, with M = 1/rate:
//   W_u = M·e^(R/M)·(e^((τ+δ)/M) − 1)·useful/τ,
// which counts the checkpoints, the restarts, the work lost since the last checkpoint and
// interruptions during restarts; without unplanned interruptions W_u = useful·(1 + δ/τ). Planned
// interruptions cost a restart each, none of the work: W = W_u / (1 − planned_rate·R). Expected
// interruptions = (unplanned + planned rate)·W.
WallTime wall_time(double useful_s, const CheckpointPolicy& policy, double unplanned_per_s,
                   double planned_per_s);

// ---------------------------------------------------------------------------------------------
// Energy

struct PowerInputs {
  double busy_w = 0;
  double comm_w = 0;
  double idle_w = 0;
  double node_overhead_w = 0;
  double fabric_w_per_gpu = 0;
  double pue = 1;
};
// Joules of one GPU over one iteration: busy_w·compute + comm_w·comm + idle_w·idle.
double gpu_iteration_energy_j(const StepParts& step, const PowerInputs& p);
struct Energy {
  double gpu_j = 0;       // GPUs: iterations run (useful and redone) and idle otherwise
  double overhead_j = 0;  // nodes and fabric, all wall time
  double facility_j = 0;  // (gpu + overhead)·(PUE − 1)
  double total_j() const { return gpu_j + overhead_j + facility_j; }
};
// The run's energy: every GPU runs (useful + lost)/step iterations at gpu_iteration_energy_j and
// idles through checkpoints and restarts; nodes and fabric draw their power all the wall time;
// the facility multiplies the IT power by the PUE.
Energy run_energy(const WallTime& w, const StepParts& step, const JobShape& job,
                  const PowerInputs& p);

}  // namespace ts::longrun
