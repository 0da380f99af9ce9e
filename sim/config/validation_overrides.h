// Per-row overrides of a published-runs file: plan settings with their reason and source
// (<file>.overrides.textproto).
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "sim/parallel/plan.h"
#include "sim/topology/cluster_spec.h"

namespace ts::config {

struct RowOverride {
  std::string run_id;
  std::string reason;
  std::string source;
  std::string file;  // the overrides file
  int line = 0;      // of the override in it
  std::optional<std::int64_t> mst_chunks;
  std::optional<parallel::OptimizerStates> optimizer_states;
  std::optional<bool> optimizer_in_backward;
  std::optional<std::vector<parallel::Axis>> order;
  std::optional<std::int32_t> gpus_per_domain;
  std::optional<parallel::GradReduce> grad_reduce;
  std::optional<bool> launch_blocking;
  std::optional<bool> fp8_attention;

  // Sets the fields the override gives. Throws InputError naming the overrides file, line and
  // field when gpus_per_domain does not fit the row's cluster.
  void apply(parallel::ParallelPlan& plan, topology::ClusterSpec& cluster) const;
};

// The overrides file of a published-runs CSV: FILE.overrides.textproto beside FILE.csv.
std::filesystem::path overrides_path(const std::filesystem::path& runs_csv);

// Loads an overrides file. Throws InputError listing every problem with its line and field: a
// missing run_id, reason or source, a run_id given twice, an unknown spelling, chunks below 1.
std::vector<RowOverride> load_validation_overrides(const std::filesystem::path& path);

}  // namespace ts::config
