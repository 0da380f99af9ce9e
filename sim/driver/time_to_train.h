// Time to train of one simulated plan: the longrun model fed with the plan's step, the job's shape,
// its checkpoint size and the data file's defaults; shared by `trainsim run` and `trainsim plan`.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "sim/config/loader.h"
#include "sim/longrun/time_to_train.h"
#include "sim/runtime/breakdown.h"

namespace ts::driver {

enum class CheckpointMode {
  kAsync,  // training stops while each GPU copies its shard to host memory; the write runs behind
  kSync,   // training stops for the whole write to storage
};
const char* checkpoint_mode_name(CheckpointMode m);

// The goal and what the command line overrides; unset values come from the data file.
struct TrainSettings {
  std::optional<double> days;    // wall-clock days of training (tokens follow)
  std::optional<double> tokens;  // training tokens (wall time follows)
  std::optional<double> checkpoint_gbytes_per_s;
  std::optional<double> checkpoint_interval_s;  // none: Daly's optimum
  CheckpointMode checkpoint_mode = CheckpointMode::kAsync;
  std::optional<double> restart_overhead_s;
  std::optional<double> gpu_cv;
  double link_cv = 0;
  double slow_gpu_speed = 1;
  std::optional<double> pue;
  std::optional<double> usd_per_gpu_hour;
  bool any_goal() const { return days.has_value() || tokens.has_value(); }
};

// One plan on one cluster.
struct TrainInputs {
  std::int64_t gpus = 0;
  std::int64_t gpus_per_node = 0;
  std::int64_t nics_per_node = 0;
  std::string gpu;  // GPU name: selects the power entry
  double parameters = 0;
  double checkpoint_bytes_per_parameter = 0;  // weights + optimizer states + master weights
  double tokens_per_iteration = 0;
  longrun::StepParts step;  // one iteration of the device finishing last
};

// The step split into compute, exposed communication and idle.
longrun::StepParts step_parts(const runtime::TimeBreakdown& t);

// The inputs of `plan` for `model` on `gpus` GPUs of `cluster`, whose device finishing last
// spends an iteration as `step`. The checkpoint holds the weights, optimizer states and master
// weights by memory::bytes_per_parameter (14 bytes per parameter for mixed-precision Adam).
TrainInputs train_inputs(const ir::ModelSpec& model, const config::Cluster& cluster,
                         std::int64_t gpus, const parallel::ParallelPlan& plan,
                         const longrun::StepParts& step);

struct TrainReport {
  bool feasible = true;
  std::string reason;        // why not feasible
  bool tokens_goal = false;  // the goal was a token budget (else wall-clock days)
  double tokens = 0;
  double steps = 0;
  double step_s = 0;       // with stragglers
  double gpu_factor = 1;   // slowest GPU's step-time multiplier
  double link_factor = 1;  // slowest link's communication-time multiplier
  double gpu_cv = 0;
  double slow_gpu_speed = 1;
  double link_cv = 0;
  double unplanned_per_day = 0;
  double planned_per_day = 0;
  std::vector<longrun::ComponentRate> components;
  double mtbf_hours = 0;  // mean time between interruptions of the job; 0 when none
  CheckpointMode checkpoint_mode = CheckpointMode::kAsync;
  double checkpoint_bytes = 0;
  double checkpoint_gbytes_per_s = 0;
  double checkpoint_write_s = 0;                // to storage
  double checkpoint_blocking_s = 0;             // training stopped per checkpoint
  std::optional<double> checkpoint_interval_s;  // none: no periodic checkpoint (no failures)
  double restart_s = 0;
  longrun::WallTime wall;
  double wall_days = 0;
  double useful_days = 0;
  bool energy_known = false;  // a power entry exists for the GPU
  std::string power_source;
  double pue = 1;
  double energy_per_iteration_j = 0;  // the whole job, facility included
  double energy_mwh = 0;
  double average_power_mw = 0;
  double gpu_hours = 0;
  std::optional<double> usd_per_gpu_hour;
  std::optional<double> cost_usd;
};

// Throws InputError for settings out of range (naming the flag). A valid plan whose interruptions
// outpace its restarts is a report with feasible = false and the reason.
TrainReport time_to_train(const TrainInputs& in, const TrainSettings& s,
                          const longrun::TrainData& data);

// Checks the settings (each problem names its flag); throws InputError.
void check_train_settings(const TrainSettings& s);

}  // namespace ts::driver
