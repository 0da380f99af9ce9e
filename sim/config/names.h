// Spellings of the enumerated options shared by the command line and the input files.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/ir/dtype.h"
#include "sim/ir/model_spec.h"
#include "sim/parallel/plan.h"
#include "sim/topology/cluster_spec.h"

namespace ts::config {

// Each enumerated option has one spelling, used by flags (--schedule 1f1b), by scenario files
// (schedule: "1f1b") and in outputs. try_parse_* returns nullopt for an unknown spelling;
// *_choices() lists the valid ones ("gpipe|1f1b|interleaved") for error messages.

std::optional<ir::Dtype> try_parse_dtype(std::string_view s);  // bf16 fp16 fp8 mxfp8 nvfp4 (GEMMs)
std::string dtype_choices();
std::optional<parallel::Recompute> try_parse_recompute(std::string_view s);
std::string recompute_choices();
std::optional<parallel::Schedule> try_parse_schedule(std::string_view s);
std::string schedule_choices();
std::optional<parallel::CpAlgo> try_parse_cp_algo(std::string_view s);
std::string cp_algo_choices();
std::optional<parallel::OptimizerStates> try_parse_optimizer_states(std::string_view s);
std::string optimizer_states_choices();
std::optional<parallel::GradReduce> try_parse_grad_reduce(std::string_view s);
std::string grad_reduce_choices();
std::optional<parallel::CrossEntropy> try_parse_cross_entropy(std::string_view s);
std::string cross_entropy_choices();
std::optional<parallel::Elementwise> try_parse_elementwise(std::string_view s);
std::string elementwise_choices();
std::optional<parallel::Axis> try_parse_axis(std::string_view s);
std::string axis_choices();
std::optional<ir::Norm> try_parse_norm(std::string_view s);
std::string norm_choices();
std::optional<ir::Activation> try_parse_activation(std::string_view s);
std::string activation_choices();
std::optional<ir::RouterScore> try_parse_router_score(std::string_view s);
std::string router_score_choices();
std::optional<parallel::MoeDispatcher> try_parse_moe_dispatcher(std::string_view s);
std::optional<ir::Position> try_parse_position(std::string_view s);
std::string position_choices();
std::optional<topology::FabricKind> try_parse_fabric_kind(std::string_view s);
std::string fabric_kind_choices();

// Throwing forms for command-line flags: an unknown spelling throws InputError whose
// diagnostic names `flag` and lists the valid spellings.
ir::Dtype parse_dtype(std::string_view s, std::string_view flag);
parallel::Recompute parse_recompute(std::string_view s, std::string_view flag);
parallel::Schedule parse_schedule(std::string_view s, std::string_view flag);
parallel::CpAlgo parse_cp_algo(std::string_view s, std::string_view flag);
parallel::MoeDispatcher parse_moe_dispatcher(std::string_view s, std::string_view flag);
parallel::OptimizerStates parse_optimizer_states(std::string_view s, std::string_view flag);
parallel::GradReduce parse_grad_reduce(std::string_view s, std::string_view flag);
parallel::CrossEntropy parse_cross_entropy(std::string_view s, std::string_view flag);
parallel::Elementwise parse_elementwise(std::string_view s, std::string_view flag);
// Host dispatch time per operation in microseconds, 0 to 1e6 (1 s): the Duration; else InputError
// naming `flag`.
Duration parse_host_dispatch_us(double us, std::string_view flag);
// "tp,cp,dp,pp" → axes, innermost first. Only the names are checked here; that the list is a
// permutation of the four axes is a plan rule (check_plan, "--order").
std::vector<parallel::Axis> parse_order(std::string_view s, std::string_view flag);
// --routing: "balanced", "dropless" or "capacity:F" (F, the capacity factor, >= 1 is checked
// with the plan).
struct RoutingChoice {
  parallel::Routing routing = parallel::Routing::kBalanced;
  double capacity_factor = 0;
};
RoutingChoice parse_routing(std::string_view s, std::string_view flag);
std::string format_routing(parallel::Routing routing, double capacity_factor);
// "15,16,16,15" → {15, 16, 16, 15}; each item an integer (signs allowed, ranges are plan rules).
std::vector<std::int64_t> parse_int_list(std::string_view s, std::string_view flag);
// Recompute modules (parallel::RecomputeModule) as Megatron-Core spells them: core_attn,
// layernorm, moe_act, mla_up_proj, mlp. A comma-separated list becomes a set of module_bit()s
// (exit 2 naming `flag` on an unknown name); the set prints back in that order.
std::optional<parallel::RecomputeModule> try_parse_recompute_module(std::string_view s);
std::uint32_t parse_recompute_modules(std::string_view s, std::string_view flag);
std::string recompute_modules_name(std::uint32_t set);

// The spelling of each value, for outputs.
std::string_view name(ir::Dtype v);
std::string_view name(parallel::Recompute v);
std::string_view name(parallel::Schedule v);
std::string_view name(parallel::CpAlgo v);
std::string_view name(parallel::MoeDispatcher v);
std::string_view name(parallel::OptimizerStates v);
std::string_view name(parallel::GradReduce v);
std::string_view name(parallel::CrossEntropy v);
std::string_view name(parallel::Elementwise v);
std::string_view name(parallel::Axis v);
std::string_view name(ir::Norm v);
std::string_view name(ir::Activation v);
std::string_view name(ir::Position v);
std::string_view name(topology::FabricKind v);
// Axes joined with commas ("tp,cp,dp,pp").
std::string format_order(const std::vector<parallel::Axis>& order);

}  // namespace ts::config
