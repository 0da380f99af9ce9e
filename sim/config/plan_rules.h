// The rules behind check_plan and check_model, in the forms the file loaders need. Internal to config.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/loader.h"

namespace ts::config::detail {

// check_plan; with check_gpu_count = false the rule tp·pp·dp·cp = GPUs is skipped (load_scenario
// uses this when dp was left out and could not be derived, which it reports itself).
std::vector<Diagnostic> check_plan(const parallel::ParallelPlan& plan, const ir::ModelSpec& model,
                                   const Cluster& cluster, std::int64_t num_gpus,
                                   bool check_gpu_count);
// The same, each broken rule passed to `on_failure` as it is found (check_plan_failures).
void check_plan_rules(const parallel::ParallelPlan& plan, const ir::ModelSpec& model,
                      const Cluster& cluster, std::int64_t num_gpus, bool check_gpu_count,
                      const std::function<void(const PlanFailure&)>& on_failure);

// The value rules of a model (sizes, head divisibility), each failure reported as
// fail(field, message) with the ModelSpec field name, which is also the model file's.
void model_rules(const ir::ModelSpec& m,
                 const std::function<void(std::string_view, std::string)>& fail);

}  // namespace ts::config::detail
