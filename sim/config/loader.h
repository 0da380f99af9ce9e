// Loading and validation of model, cluster and scenario files, and of a plan against them.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "sim/base/diagnostic.h"
#include "sim/compute/gpu_spec.h"
#include "sim/ir/model_spec.h"
#include "sim/parallel/plan.h"
#include "sim/topology/cluster_spec.h"

namespace ts::config {

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

}  // namespace ts::config
