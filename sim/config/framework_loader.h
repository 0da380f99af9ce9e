// Framework profiles (frameworks/*.textproto): the plan settings a framework's runs get unless told
// otherwise, each with its source.
#pragma once

#include <compare>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/parallel/plan.h"

namespace ts::config {

// A plan setting a framework profile may give, named as the flag of `trainsim run` that sets it.
enum class FrameworkSetting {
  kZeroStage,           // --zero
  kZeroShardGroup,      // --zero-shard-group
  kSequenceParallel,    // --sequence-parallel
  kAttention,           // --attention-kernel / --unfused-attention
  kCrossEntropy,        // --cross-entropy
  kElementwise,         // --elementwise
  kGradReduce,          // --grad-reduce
  kOverlapGradReduce,   // --no-overlap-grad-reduce
  kOverlapParamGather,  // --no-overlap-param-gather
  kGradBucketParams,    // --grad-bucket-params
  kFp8WeightCache,      // --no-fp8-weight-cache
  kTpCommOverlap,       // --tp-comm-overlap
  kHostDispatch,        // --host-dispatch-us
  kOrder,               // --order
};
inline constexpr int kNumFrameworkSettings = 14;

// The setting's name in outputs ("zero", "sequence-parallel", "attention", …).
std::string_view setting_name(FrameworkSetting s);
// Its value in `plan`, as outputs spell it ("3", "on", "FlashAttention-2", "fp32-unfused").
std::string setting_value(FrameworkSetting s, const parallel::ParallelPlan& plan);
// Copies the setting's field from `from` into `to`.
void copy_setting(FrameworkSetting s, const parallel::ParallelPlan& from,
                  parallel::ParallelPlan& to);

// A month of a framework's history ("2024-06"), ordered.
struct YearMonth {
  int year = 0;
  int month = 1;  // 1-12
  auto operator<=>(const YearMonth&) const = default;
};
// "YYYY-MM"; nullopt for anything else.
std::optional<YearMonth> parse_year_month(std::string_view text);
std::string format_year_month(YearMonth m);

struct FrameworkProfile {
  std::string name;   // the file's stem, what --framework takes
  std::string title;  // "Megatron-LM / Megatron-Core"
  std::string file;   // where it was read from
  std::vector<std::string> aliases;
  std::vector<std::string> spelled;  // words naming it in a validation row's framework column
  // The settings the profile gives, in FrameworkSetting order, each with its source; their
  // values are in `values` (the other fields of `values` are the plan defaults).
  struct Given {
    FrameworkSetting setting;
    std::string source;
  };
  std::vector<Given> given;
  parallel::ParallelPlan values;
  std::vector<parallel::Recompute> recompute_modes;  // empty: not given
  std::string recompute_modes_source;
  std::optional<parallel::Recompute> recompute;  // what its runs use unless told
  std::string recompute_source;
  std::optional<bool> dropout;  // whether its models train with dropout
  std::string dropout_source;
  // The largest ZeRO stage it runs with pp > 1 (3: any), and the source that says so.
  int pipeline_zero_stage_max = 3;
  std::string pipeline_zero_stage_max_source;
  std::optional<YearMonth> released;  // its first release
  std::string released_source;
  // Validation only (sim/schema/framework.proto): what a row silent on sharding ran, in words
  // (empty: not given); the forks' bases; the ZeRO stage from which grad_reduce holds; the words
  // naming the profile's attention kernel.
  std::string unstated_sharding;
  std::vector<std::string> builds_on;
  int grad_reduce_from_zero_stage = 0;
  std::vector<std::string> kernel_named_by;
  // Settings of earlier times (FrameworkEra in sim/schema/framework.proto), latest `before` first
  // (undated modes first).
  struct Era {
    std::optional<YearMonth> before;  // none: a mode of any date (precision_spelled)
    std::vector<std::string> precision_spelled;  // lower case; empty: any row
    std::string source;
    std::vector<std::string> spelled;  // lower case; empty: any row naming the profile
    std::vector<Given> given;
    parallel::ParallelPlan values;
    std::optional<parallel::Recompute> recompute;
    std::optional<bool> dropout;
  };
  std::vector<Era> eras;

  // The source of `s`, or nullptr when the profile does not give it.
  const std::string* source_of(FrameworkSetting s) const;
  // `plan` with every setting the profile gives.
  void apply(parallel::ParallelPlan& plan) const;
  // Why the framework cannot run `plan` (a ZeRO stage above pipeline_zero_stage_max with
  // pp > 1), naming the profile and its source; empty when it can.
  std::string refuses(const parallel::ParallelPlan& plan) const;
  // The profile as a run of `month` got it: every era whose `before` is later applied, the
  // earliest last (no month: every era). With `column` (a validation row's normalised framework
  // column), an era with `spelled` words applies only when the column contains one of them; an
  // era with `precision_spelled` words only when `precision` (a row's lower-cased precision
  // column) is given and contains one.
  FrameworkProfile as_of(std::optional<YearMonth> month, const std::string* column = nullptr,
                         const std::string* precision = nullptr) const;
};

// data_dir()/frameworks.
std::filesystem::path frameworks_dir();
// The profiles' names (file stems under frameworks_dir()), sorted.
std::vector<std::string> framework_names();
// A profile by name or alias (case-insensitive), or by path to a .textproto/.json file, with
// "@YYYY-MM" after it for the profile as of that month (FrameworkProfile::as_of). Throws
// InputError naming `flag` for an unknown name (listing the known ones), and listing every
// problem of the file with its line and field: a value without its source, an unknown spelling,
// a value out of range.
FrameworkProfile load_framework(const std::string& name_or_path,
                                std::string_view flag = "--framework");
// Every profile of frameworks_dir(), in name order.
std::vector<FrameworkProfile> load_all_frameworks();

}  // namespace ts::config
