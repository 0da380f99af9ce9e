// Loading and validation of model, cluster and scenario files, and of a plan against them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <string>
#include <vector>

#include "sim/base/diagnostic.h"
#include "sim/compute/gpu_spec.h"
#include "sim/ir/model_spec.h"
#include "sim/parallel/plan.h"
#include "sim/topology/cluster_spec.h"

namespace ts::config {

// Upper bounds of input sizes (model files, scenario files and flags): far above any real model
// or run, low enough that parameter, token, byte and FLOP counts derived from them stay inside
// int64. A larger value is an input error naming the field or flag.
inline constexpr std::int64_t kMaxGpus = std::int64_t{1} << 30;
inline constexpr std::int64_t kMaxLayers = std::int64_t{1} << 16;
inline constexpr std::int64_t kMaxHidden = std::int64_t{1} << 18;
inline constexpr std::int64_t kMaxFfnHidden = std::int64_t{1} << 20;
inline constexpr std::int64_t kMaxVocab = std::int64_t{1} << 24;
inline constexpr std::int64_t kMaxSeqLen = std::int64_t{1} << 24;
inline constexpr std::int64_t kMaxGlobalBatch = std::int64_t{1} << 30;
inline constexpr std::int64_t kMaxMicroBatchTokens = std::int64_t{1} << 27;

// Root of the data folders (models/, topologies/, calibration/): $TRAINSIM_DATA_DIR if set,
// else the source tree the program was built from.
std::filesystem::path data_dir();

// A model by zoo name ("llama3-70b" → models/llama3-70b.textproto) or by path to a
// .textproto/.json file. Throws InputError listing every problem (file, line, field path).
ir::ModelSpec load_model(const std::string& name_or_path);

struct Cluster {
  topology::ClusterSpec cluster;
  compute::GpuSpec gpu;
};
// A cluster by zoo name ("dgx-h100" → topologies/dgx-h100.textproto) or path.
Cluster load_cluster(const std::string& name_or_path);

// Places a job on `used` GPUs of each scale-up domain (scale_up.gpus_used_per_domain: 64 of an
// NVL72 rack's 72, as a Slurm segment of 16 trays does). Returns what is wrong (`used` outside
// [1, gpus_per_domain] or not whole hosts), empty when it is applied.
std::string place_per_domain(topology::ClusterSpec& cluster, std::int64_t used);

// The GPUs per scale-up domain of a job of `num_gpus` GPUs in Slurm segments, as NVIDIA's
// launchers place jobs on NVL72 racks (Megatron-Bridge scripts/performance/utils/executors.py:
// a segment of the job's tray count, or of its largest divisor up to the trays of a rack; the
// MLPerf Training v5.1 GB200/GB300 scripts set SEGMENT alike): `gpus_per_host` times the largest
// divisor of the host count that fits one domain. A job of one domain or less, or of a broken
// host, keeps the whole domain.
std::int64_t segment_gpus(std::int64_t num_gpus, std::int64_t gpus_per_host,
                          std::int64_t gpus_per_domain);
// Places a job of `num_gpus` GPUs in those segments (place_per_domain of segment_gpus), unless
// the cluster pins scale_up.gpus_used_per_domain; returns the GPUs it uses of each domain.
std::int64_t place_in_segments(topology::ClusterSpec& cluster, std::int64_t num_gpus);

// A complete, validated input to one simulation.
struct Scenario {
  ir::ModelSpec model;
  Cluster cluster;
  std::int32_t num_gpus = 0;
  parallel::ParallelPlan plan;
};

// Every problem of `plan` for this model and GPU count (TP not dividing heads, PP not dividing
// layers without --pp-layers, TP·PP·DP·CP ≠ GPUs, batch not divisible, …), each naming the
// flag ("--tp"). Empty when the plan is valid.
std::vector<Diagnostic> check_plan(const parallel::ParallelPlan& plan, const ir::ModelSpec& model,
                                   const Cluster& cluster, std::int64_t num_gpus);

// Why a plan in `dtype` cannot run on `gpu` (no tensor cores for it, or fp32 training), naming
// the GPU; empty when it can. check_plan's --dtype rule, and sweep's check before enumerating
// (every plan of a sweep has the base's dtype).
std::string dtype_problem(ir::Dtype dtype, const compute::GpuSpec& gpu);

// One rule of check_plan that a plan breaks: its flag, the rule, and its message, formatted only
// when asked for (valid while the check_plan_failures callback runs).
class PlanFailure {
 public:
  template <class F>
  PlanFailure(const char* flag, std::uint64_t rule, const F& message)
      : flag_(flag),
        rule_(rule),
        message_(&message),
        format_([](const void* f) { return std::string((*static_cast<const F*>(f))()); }) {}
  const char* flag() const { return flag_; }
  // Within one model and cluster, failures with the same flag and a rule other than 0 have the
  // same message but for its numbers and parenthesized details (what a sweep groups rejected
  // plans by); 0 where the words vary otherwise.
  std::uint64_t rule() const { return rule_; }
  std::string message() const { return format_(message_); }

 private:
  const char* flag_;
  std::uint64_t rule_;
  const void* message_;
  std::string (*format_)(const void*);
};

// check_plan, each broken rule passed to `on_failure` in check_plan's order: a sweep checks
// millions of plans and needs the messages of a few thousand.
void check_plan_failures(const parallel::ParallelPlan& plan, const ir::ModelSpec& model,
                         const Cluster& cluster, std::int64_t num_gpus,
                         const std::function<void(const PlanFailure&)>& on_failure);

// A scenario file (.textproto or .json, schema sim/schema/scenario.proto): model and cluster by
// zoo name, path (relative to the scenario's folder) or inline, the GPU count and the plan
// fields (spelled and defaulted as the flags of `trainsim run`; dp defaults to
// num_gpus/(tp·pp·cp)). Throws InputError with every problem at once: of the scenario file, of
// the model and cluster files it names, and of the plan (check_plan's rules, each naming the
// scenario's field and line instead of the flag).
Scenario load_scenario(const std::string& path);

// A Scenario from parts given on the command line; throws InputError with every check_plan
// problem (each naming its flag).
Scenario make_scenario(ir::ModelSpec model, Cluster cluster, std::int64_t num_gpus,
                       parallel::ParallelPlan plan);

// Every problem of a model built in code (e.g. from a row of a validation table), each naming
// its ModelSpec field. Empty when valid. load_model applies the same rules.
std::vector<Diagnostic> check_model(const ir::ModelSpec& model);

// The names in the model and cluster zoos (file stems under data_dir()/models and
// data_dir()/topologies), sorted.
std::vector<std::string> zoo_models();
std::vector<std::string> zoo_clusters();

}  // namespace ts::config
