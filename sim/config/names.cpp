// Spellings of the enumerated options shared by the command line and the input files.
#include "sim/config/names.h"

#include <cstdio>
#include <cstdlib>

#include <array>
#include <charconv>
#include <utility>

#include "sim/base/diagnostic.h"

namespace ts::config {
namespace {

template <class E, std::size_t N>
std::optional<E> lookup(const std::array<std::pair<std::string_view, E>, N>& table,
                        std::string_view s) {
  for (const auto& [n, v] : table) {
    if (n == s) return v;
  }
  return std::nullopt;
}

template <class E, std::size_t N>
std::string choices(const std::array<std::pair<std::string_view, E>, N>& table) {
  std::string out;
  for (const auto& entry : table) {
    if (!out.empty()) out += '|';
    out += entry.first;
  }
  return out;
}

template <class E, std::size_t N>
std::string_view spelling(const std::array<std::pair<std::string_view, E>, N>& table, E v) {
  for (const auto& [n, value] : table) {
    if (value == v) return n;
  }
  SIM_ASSERT(false, "enumerator without a spelling");
  return "?";
}

template <class E, std::size_t N>
E parse_flag(const std::array<std::pair<std::string_view, E>, N>& table, std::string_view s,
             std::string_view flag) {
  if (auto v = lookup(table, s)) return *v;
  throw InputError(Diagnostic{"", 0, std::string(flag),
                              "unknown value '" + std::string(s) + "' (expected " +
                                  choices(table) + ")"});
}

// fp32 is a GPU peak but not a training precision trainsim models (mixed precision only).
constexpr std::array<std::pair<std::string_view, ir::Dtype>, 5> kDtypes{
    {{"bf16", ir::Dtype::kBf16},
     {"fp16", ir::Dtype::kFp16},
     {"fp8", ir::Dtype::kFp8},
     {"mxfp8", ir::Dtype::kMxfp8},
     {"nvfp4", ir::Dtype::kNvfp4}}};
constexpr std::array<std::pair<std::string_view, parallel::Recompute>, 4> kRecompute{{
    {"none", parallel::Recompute::kNone},
    {"selective", parallel::Recompute::kSelective},
    {"selective-op", parallel::Recompute::kSelectiveOp},
    {"full", parallel::Recompute::kFull}}};
constexpr std::array<std::pair<std::string_view, parallel::Schedule>, 6> kSchedules{{
    {"gpipe", parallel::Schedule::kGpipe},
    {"1f1b", parallel::Schedule::k1F1B},
    {"interleaved", parallel::Schedule::kInterleaved},
    {"zb-h1", parallel::Schedule::kZbH1},
    {"dualpipev", parallel::Schedule::kDualPipeV},
    {"zb-v", parallel::Schedule::kZbV}}};
constexpr std::array<std::pair<std::string_view, parallel::CpAlgo>, 3> kCpAlgos{{
    {"ring", parallel::CpAlgo::kRing},
    {"allgather", parallel::CpAlgo::kAllGather},
    {"ulysses", parallel::CpAlgo::kUlysses}}};
constexpr std::array<std::pair<std::string_view, parallel::CrossEntropy>, 4> kCrossEntropies{{
    {"fp32", parallel::CrossEntropy::kFp32},
    {"bf16", parallel::CrossEntropy::kBf16},
    {"bf16-inplace", parallel::CrossEntropy::kBf16InPlace},
    {"fp32-unfused", parallel::CrossEntropy::kFp32Unfused}}};
constexpr std::array<std::pair<std::string_view, parallel::Elementwise>, 2> kElementwise{{
    {"fused", parallel::Elementwise::kFused}, {"eager", parallel::Elementwise::kEager}}};
constexpr std::array<std::pair<std::string_view, parallel::OptimizerStates>, 4> kOptStates{{
    {"fp32", parallel::OptimizerStates::kFp32},
    {"bf16", parallel::OptimizerStates::kBf16},
    {"none", parallel::OptimizerStates::kNone},
    {"fp32-bf16-moments", parallel::OptimizerStates::kFp32Bf16Moments}}};
constexpr std::array<std::pair<std::string_view, parallel::GradReduce>, 2> kGradReduces{{
    {"fp32", parallel::GradReduce::kFp32}, {"bf16", parallel::GradReduce::kBf16}}};
constexpr std::array<std::pair<std::string_view, parallel::Axis>, 4> kAxes{{
    {"tp", parallel::Axis::kTp},
    {"cp", parallel::Axis::kCp},
    {"dp", parallel::Axis::kDp},
    {"pp", parallel::Axis::kPp}}};
constexpr std::array<std::pair<std::string_view, ir::Norm>, 2> kNorms{{
    {"layernorm", ir::Norm::kLayerNorm}, {"rmsnorm", ir::Norm::kRmsNorm}}};
constexpr std::array<std::pair<std::string_view, ir::Activation>, 2> kActivations{{
    {"gelu", ir::Activation::kGelu}, {"swiglu", ir::Activation::kSwiglu}}};
constexpr std::array<std::pair<std::string_view, ir::RouterScore>, 2> kRouterScores{{
    {"softmax", ir::RouterScore::kSoftmax}, {"sigmoid", ir::RouterScore::kSigmoid}}};
constexpr std::array<std::pair<std::string_view, parallel::MoeDispatcher>, 3> kMoeDispatchers{{
    {"alltoall", parallel::MoeDispatcher::kAllToAll},
    {"deepep", parallel::MoeDispatcher::kDeepEp},
    {"hybridep", parallel::MoeDispatcher::kHybridEp}}};
constexpr std::array<std::pair<std::string_view, ir::Position>, 2> kPositions{{
    {"learned", ir::Position::kLearned}, {"rope", ir::Position::kRope}}};
constexpr std::array<std::pair<std::string_view, topology::FabricKind>, 2> kFabricKinds{{
    {"rail_optimized_fat_tree", topology::FabricKind::kRailOptimizedFatTree},
    {"fat_tree", topology::FabricKind::kFatTree}}};

// Splits "a,b,c" at commas, trimming spaces around items.
std::vector<std::string_view> split_list(std::string_view s) {
  std::vector<std::string_view> out;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = s.find(',', start);
    std::string_view item = s.substr(start, comma == std::string_view::npos ? s.npos : comma - start);
    while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
    while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
    out.push_back(item);
    if (comma == std::string_view::npos) break;
    start = comma + 1;
  }
  return out;
}

}  // namespace

std::optional<ir::Dtype> try_parse_dtype(std::string_view s) { return lookup(kDtypes, s); }
std::string dtype_choices() { return choices(kDtypes); }
std::optional<parallel::Recompute> try_parse_recompute(std::string_view s) {
  return lookup(kRecompute, s);
}
std::string recompute_choices() { return choices(kRecompute); }
std::optional<parallel::Schedule> try_parse_schedule(std::string_view s) {
  return lookup(kSchedules, s);
}
std::string schedule_choices() { return choices(kSchedules); }
std::optional<parallel::CpAlgo> try_parse_cp_algo(std::string_view s) { return lookup(kCpAlgos, s); }
std::string cp_algo_choices() { return choices(kCpAlgos); }
std::optional<parallel::OptimizerStates> try_parse_optimizer_states(std::string_view s) {
  return lookup(kOptStates, s);
}
std::string optimizer_states_choices() { return choices(kOptStates); }
std::optional<parallel::GradReduce> try_parse_grad_reduce(std::string_view s) { return lookup(kGradReduces, s); }
std::string grad_reduce_choices() { return choices(kGradReduces); }
std::optional<parallel::CrossEntropy> try_parse_cross_entropy(std::string_view s) { return lookup(kCrossEntropies, s); }
std::string cross_entropy_choices() { return choices(kCrossEntropies); }
std::optional<parallel::Elementwise> try_parse_elementwise(std::string_view s) { return lookup(kElementwise, s); }
std::string elementwise_choices() { return choices(kElementwise); }
std::optional<parallel::Axis> try_parse_axis(std::string_view s) { return lookup(kAxes, s); }
std::string axis_choices() { return choices(kAxes); }
std::optional<ir::Norm> try_parse_norm(std::string_view s) { return lookup(kNorms, s); }
std::string norm_choices() { return choices(kNorms); }
std::optional<ir::Activation> try_parse_activation(std::string_view s) {
  return lookup(kActivations, s);
}
std::string activation_choices() { return choices(kActivations); }
std::optional<ir::Position> try_parse_position(std::string_view s) { return lookup(kPositions, s); }
std::string position_choices() { return choices(kPositions); }
std::optional<ir::RouterScore> try_parse_router_score(std::string_view s) { return lookup(kRouterScores, s); }
std::string router_score_choices() { return choices(kRouterScores); }
std::optional<parallel::MoeDispatcher> try_parse_moe_dispatcher(std::string_view s) {
  return lookup(kMoeDispatchers, s);
}
parallel::MoeDispatcher parse_moe_dispatcher(std::string_view s, std::string_view flag) {
  return parse_flag(kMoeDispatchers, s, flag);
}
std::optional<topology::FabricKind> try_parse_fabric_kind(std::string_view s) {
  return lookup(kFabricKinds, s);
}
std::string fabric_kind_choices() { return choices(kFabricKinds); }

ir::Dtype parse_dtype(std::string_view s, std::string_view flag) {
  return parse_flag(kDtypes, s, flag);
}
parallel::Recompute parse_recompute(std::string_view s, std::string_view flag) {
  return parse_flag(kRecompute, s, flag);
}
parallel::Schedule parse_schedule(std::string_view s, std::string_view flag) {
  return parse_flag(kSchedules, s, flag);
}
parallel::CpAlgo parse_cp_algo(std::string_view s, std::string_view flag) {
  return parse_flag(kCpAlgos, s, flag);
}
parallel::OptimizerStates parse_optimizer_states(std::string_view s, std::string_view flag) {
  return parse_flag(kOptStates, s, flag);
}
parallel::GradReduce parse_grad_reduce(std::string_view s, std::string_view flag) {
  return parse_flag(kGradReduces, s, flag);
}
parallel::CrossEntropy parse_cross_entropy(std::string_view s, std::string_view flag) {
  return parse_flag(kCrossEntropies, s, flag);
}
parallel::Elementwise parse_elementwise(std::string_view s, std::string_view flag) {
  return parse_flag(kElementwise, s, flag);
}

Duration parse_host_dispatch_us(double us, std::string_view flag) {
  if (!(us >= 0 && us <= 1e6)) {
    throw InputError(Diagnostic{"", 0, std::string(flag),
                                "must be between 0 and 1e6 microseconds (got " + std::to_string(us) + ")"});
  }
  return Duration::from_us(us);
}

std::vector<parallel::Axis> parse_order(std::string_view s, std::string_view flag) {
  std::vector<parallel::Axis> out;
  for (std::string_view item : split_list(s)) {
    auto axis = lookup(kAxes, item);
    if (!axis) {
      throw InputError(Diagnostic{"", 0, std::string(flag),
                                  "unknown axis '" + std::string(item) + "' in '" +
                                      std::string(s) + "' (expected a permutation of tp,cp,dp,pp)"});
    }
    out.push_back(*axis);
  }
  return out;
}

RoutingChoice parse_routing(std::string_view s, std::string_view flag) {
  if (s == "balanced") return {parallel::Routing::kBalanced, 0};
  if (s == "dropless") return {parallel::Routing::kDropless, 0};
  constexpr std::string_view kCapacity = "capacity:";
  if (s.substr(0, kCapacity.size()) == kCapacity) {
    const std::string number(s.substr(kCapacity.size()));
    char* end = nullptr;
    const double f = std::strtod(number.c_str(), &end);
    if (!number.empty() && end == number.c_str() + number.size()) return {parallel::Routing::kCapacity, f};
  }
  throw InputError(Diagnostic{"", 0, std::string(flag),
                              "unknown routing '" + std::string(s) + "' (expected balanced, dropless or capacity:F, "
                              "e.g. capacity:1.25)"});
}

std::string format_routing(parallel::Routing routing, double capacity_factor) {
  switch (routing) {
    case parallel::Routing::kBalanced: return "balanced";
    case parallel::Routing::kDropless: return "dropless";
    case parallel::Routing::kCapacity: {
      char buf[48];
      std::snprintf(buf, sizeof buf, "capacity:%g", capacity_factor);
      return buf;
    }
  }
  return "balanced";
}

// Megatron-Core's spellings of the recompute modules (TransformerConfig.recompute_modules).
constexpr std::array<std::pair<std::string_view, parallel::RecomputeModule>, parallel::kNumRecomputeModules>
    kRecomputeModules{{{"core_attn", parallel::RecomputeModule::kCoreAttn},
                       {"layernorm", parallel::RecomputeModule::kLayernorm},
                       {"moe_act", parallel::RecomputeModule::kMoeAct},
                       {"mla_up_proj", parallel::RecomputeModule::kMlaUpProj},
                       {"mlp", parallel::RecomputeModule::kMlp}}};

std::optional<parallel::RecomputeModule> try_parse_recompute_module(std::string_view s) {
  return lookup(kRecomputeModules, s);
}

std::uint32_t parse_recompute_modules(std::string_view s, std::string_view flag) {
  std::uint32_t set = 0;
  for (std::string_view item : split_list(s)) set |= parallel::module_bit(parse_flag(kRecomputeModules, item, flag));
  if (set == 0) throw InputError(Diagnostic{"", 0, std::string(flag), "names no module"});
  return set;
}

std::string recompute_modules_name(std::uint32_t set) {
  std::string out;
  for (const auto& [n, m] : kRecomputeModules) {
    if ((set & parallel::module_bit(m)) == 0) continue;
    if (!out.empty()) out += ',';
    out += n;
  }
  return out;
}

std::vector<std::int64_t> parse_int_list(std::string_view s, std::string_view flag) {
  std::vector<std::int64_t> out;
  for (std::string_view item : split_list(s)) {
    std::int64_t v = 0;
    const char* end = item.data() + item.size();
    auto [ptr, ec] = std::from_chars(item.data(), end, v);
    if (item.empty() || ec != std::errc() || ptr != end) {
      throw InputError(Diagnostic{"", 0, std::string(flag),
                                  "'" + std::string(item) + "' in '" + std::string(s) +
                                      "' is not an integer (expected a comma-separated list such "
                                      "as 15,16,16,15)"});
    }
    out.push_back(v);
  }
  return out;
}

std::string_view name(ir::Dtype v) {
  if (v == ir::Dtype::kFp32) return "fp32";
  return spelling(kDtypes, v);
}
std::string_view name(parallel::Recompute v) { return spelling(kRecompute, v); }
std::string_view name(parallel::Schedule v) { return spelling(kSchedules, v); }
std::string_view name(parallel::CpAlgo v) { return spelling(kCpAlgos, v); }
std::string_view name(parallel::MoeDispatcher v) { return spelling(kMoeDispatchers, v); }
std::string_view name(parallel::OptimizerStates v) { return spelling(kOptStates, v); }
std::string_view name(parallel::GradReduce v) { return spelling(kGradReduces, v); }
std::string_view name(parallel::CrossEntropy v) { return spelling(kCrossEntropies, v); }
std::string_view name(parallel::Elementwise v) { return spelling(kElementwise, v); }
std::string_view name(parallel::Axis v) { return spelling(kAxes, v); }
std::string_view name(ir::Norm v) { return spelling(kNorms, v); }
std::string_view name(ir::Activation v) { return spelling(kActivations, v); }
std::string_view name(ir::Position v) { return spelling(kPositions, v); }
std::string_view name(topology::FabricKind v) { return spelling(kFabricKinds, v); }

std::string format_order(const std::vector<parallel::Axis>& order) {
  std::string out;
  for (auto a : order) {
    if (!out.empty()) out += ',';
    out += name(a);
  }
  return out;
}

}  // namespace ts::config
