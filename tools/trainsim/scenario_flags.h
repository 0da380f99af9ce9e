// The flags that describe one scenario (model, cluster, GPUs, plan), shared by run, inspect and
// chakra; the part that sweep also takes (files, GPU count, batch, the plan's fixed options) is one
// block of its own, so that both commands spell, default and read those flags alike.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <boost/program_options.hpp>

#include "sim/base/diagnostic.h"
#include "sim/config/framework_loader.h"
#include "sim/config/loader.h"
#include "sim/driver/sweep.h"

namespace ts::cli {

// Adds --model, --cluster, --gpus, --global-batch, --seq, --dtype, --order and the plan options
// that a sweep keeps fixed (optimizer states, attention kernel, overlaps, host dispatch).
void add_fixed_plan_flags(boost::program_options::options_description& options);

// The MoE token settings every plan of a run, sweep or plan shares: --routing, --moe-imbalance
// and --moe-dispatcher (part of add_fixed_plan_flags), and their reading into `plan`.
void add_moe_token_flags(boost::program_options::options_description& options);
void read_moe_token_flags(const boost::program_options::variables_map& vm, parallel::ParallelPlan& plan,
                          DiagnosticList& problems);

// What add_fixed_plan_flags' flags hold: the loaded files (empty when a file has a problem, which
// is then in `problems`), the GPU count, and `plan` with those fields set.
struct FixedPlanFlags {
  std::optional<ir::ModelSpec> model;
  std::optional<config::Cluster> cluster;
  std::int64_t gpus = 0;
};
FixedPlanFlags read_fixed_plan_flags(const boost::program_options::variables_map& vm, parallel::ParallelPlan& plan,
                                     DiagnosticList& problems);

// --framework NAME (frameworks/NAME.textproto, an alias, or a path): the profile; nullopt without
// the flag. InputError naming --framework for an unknown name or a broken file.
std::optional<config::FrameworkProfile> framework_from_flags(
    const boost::program_options::variables_map& vm);

// Sets in `plan` every setting the profile gives whose flag was not given on the command line
// (explicit flags override the profile). Sequence parallelism and TP communication overlap from
// the profile apply only with tp > 1 (and the overlap only with sequence parallelism).
void apply_framework(const boost::program_options::variables_map& vm,
                     const config::FrameworkProfile& profile, parallel::ParallelPlan& plan);

// The same for the axes of sweep and plan: the profile's ZeRO stage, shard group, sequence
// parallelism and recompute modes become the axes whose flags were not given.
void apply_framework(const boost::program_options::variables_map& vm,
                     const config::FrameworkProfile& profile, driver::SweepAxes& axes);

// One setting a profile may give, with its value in the plan and where that value came from.
struct SettingInEffect {
  std::string name;  // config::setting_name, or "recompute"
  std::string value;
  std::string origin;  // "flag --zero", "framework torchtitan", "default"
  std::string source;  // the profile's source, when the origin is the framework
};
std::vector<SettingInEffect> settings_in_effect(const boost::program_options::variables_map& vm,
                                                const config::FrameworkProfile& profile,
                                                const parallel::ParallelPlan& plan);
// Those settings as an aligned text section ("settings in effect (framework …)").
std::string settings_text(const config::FrameworkProfile& profile,
                          const std::vector<SettingInEffect>& settings);

// Adds --model, --cluster, --gpus, --tp, … to `options`.
void add_scenario_flags(boost::program_options::options_description& options);

// Builds and validates the scenario; every problem of the flags and files is reported at once
// (InputError). --dp defaults to gpus / (tp · pp · cp).
config::Scenario scenario_from_flags(const boost::program_options::variables_map& vm);

}  // namespace ts::cli
