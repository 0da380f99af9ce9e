// The flags that describe one scenario (model, cluster, GPUs, plan), shared by run, inspect and
// chakra; the part that sweep also takes (files, GPU count, batch, the plan's fixed options) is one
// block of its own, so that both commands spell, default and read those flags alike.
#pragma once

#include <cstdint>
#include <optional>

#include <boost/program_options.hpp>

#include "sim/base/diagnostic.h"
#include "sim/config/loader.h"

namespace ts::cli {

// Adds --model, --cluster, --gpus, --global-batch, --seq, --dtype, --order and the plan options
// that a sweep keeps fixed (optimizer states, attention kernel, overlaps, host dispatch).
void add_fixed_plan_flags(boost::program_options::options_description& options);

// What add_fixed_plan_flags' flags hold: the loaded files (empty when a file has a problem, which
// is then in `problems`), the GPU count, and `plan` with those fields set.
struct FixedPlanFlags {
  std::optional<ir::ModelSpec> model;
  std::optional<config::Cluster> cluster;
  std::int64_t gpus = 0;
};
FixedPlanFlags read_fixed_plan_flags(const boost::program_options::variables_map& vm, parallel::ParallelPlan& plan,
                                     DiagnosticList& problems);

// Adds --model, --cluster, --gpus, --tp, … to `options`.
void add_scenario_flags(boost::program_options::options_description& options);

// Builds and validates the scenario; every problem of the flags and files is reported at once
// (InputError). --dp defaults to gpus / (tp · pp · cp).
config::Scenario scenario_from_flags(const boost::program_options::variables_map& vm);

}  // namespace ts::cli
