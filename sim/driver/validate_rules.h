// Reading rules of the validation: a published run's cells read as model, cluster and plan settings.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/calibration_loader.h"
#include "sim/config/framework_loader.h"
#include "sim/config/loader.h"
#include "sim/driver/validate.h"

// Each rule is written for how sources spell things in general, never for one row; the rules
// and their evidence are listed in docs/validation-rules.md. The normaliser (map_run,
// validate_map.cpp) applies them in order; every rule that fills a field adds a note.
namespace ts::driver::reading {

// The framework profiles (frameworks/*.textproto) a row's framework column names: each with a
// word of its `spelled` list in the normalised column (framework_name), as of the row's date
// (FrameworkProfile::as_of: the earliest date its source column states, or the latest first
// release of the frameworks it names; a row with neither gets every era). A column may name
// several ("NeMo (Megatron-Core)", "HuggingFace Transformers + DeepSpeed"); what the rules take
// from them is what any of them gives.
struct RowFrameworks {
  const config::ReadingVocabulary* vocab = nullptr;  // the words the rules look for
  std::string column;  // the framework column, lower case, its spellings reduced (framework_column)
  std::vector<config::FrameworkProfile> named;
  std::optional<config::YearMonth> date;
  // The attention kernel a profile's kernel_named_by words in the column name ("" for the GPU's
  // default: Transformer Engine's fused attention for "Megatron-Core"); nullopt when none.
  std::optional<std::string> named_kernel;

  // A named framework implements this recompute mode.
  bool offers(parallel::Recompute m) const;
  // A named framework cannot run `plan` (config::FrameworkProfile::refuses).
  bool refuses(const parallel::ParallelPlan& plan) const;
  // The first named framework that gives setting `s` with a value that satisfies `test`.
  template <class Test>
  const config::FrameworkProfile* giving(config::FrameworkSetting s, Test&& test) const {
    for (const auto& p : named) {
      if (p.source_of(s) != nullptr && test(p.values)) return &p;
    }
    return nullptr;
  }
  template <class Test>
  bool gives(config::FrameworkSetting s, Test&& test) const {
    return giving(s, test) != nullptr;
  }
  // The recompute modes the named frameworks implement (in enum order); none and full, which
  // every PyTorch code base can run (torch.utils.checkpoint), when the column names none.
  std::vector<parallel::Recompute> recompute_modes() const;
};
// The earliest month a text states: "2024-04-22" → 2024-04, "2022" → 2022-01, "SC'21" → 2021-01.
std::optional<config::YearMonth> stated_date(const std::string& text);
RowFrameworks named_frameworks(const PublishedRun& r,
                               const std::vector<config::FrameworkProfile>& profiles,
                               const config::ReadingVocabulary& vocab);

// Model (validate_model.cpp): the row's architecture, with its empty fields filled by family
// rules and the vocabulary's released values; nullopt with `reason` when incomplete or invalid.
std::optional<ir::ModelSpec> build_model(const PublishedRun& r, std::int64_t seq,
                                         const config::ReadingVocabulary& vocab,
                                         std::vector<std::string>& notes, std::string& reason);
// Cluster (validate_cluster.cpp): the zoo cluster of the row's GPU (the vocabulary's parts), changed by what the
// interconnect column states; nullopt with `reason` for a GPU without a cluster model.
std::optional<config::Cluster> build_cluster(const PublishedRun& r,
                                             const config::ReadingVocabulary& vocab,
                                             std::vector<std::string>& notes, std::string& reason);

// Framework and plan rules (validate_rules.cpp).
bool eager_elementwise(const PublishedRun& r, const RowFrameworks& fw);
bool flash_attention(const PublishedRun& r, const RowFrameworks& fw);
bool sgd_without_momentum(const PublishedRun& r, const config::ReadingVocabulary& vocab);
std::string attention_kernel(const PublishedRun& r, const RowFrameworks& fw);
std::set<std::string> calibrated_attention_kernels(const std::string& gpu,
                                                   config::ComputeModelCache& calibrations);
std::optional<int> parse_zero(const PublishedRun& r, const RowFrameworks& fw,
                              std::vector<std::string>& notes);
std::optional<bool> parse_yes_no(const std::string& text, const config::ReadingVocabulary& vocab);
struct PartialRecompute {
  std::int64_t layers = 0;  // per model chunk
  double share = 0;         // of each chunk's layers
};
std::optional<PartialRecompute> parse_partial_recompute(const std::string& text,
                                                        const config::ReadingVocabulary& vocab);
std::optional<parallel::Recompute> parse_recompute(const std::string& text,
                                                   const config::ReadingVocabulary& vocab);
std::vector<std::int64_t> uneven_stage_layers(std::int64_t layers, std::int64_t stages);
double gpt3_batch_tokens(double parameters);
// How the row's framework reduces gradients, given the plan's ZeRO stage.
void apply_gradient_reduction(const PublishedRun& r, const RowFrameworks& fw,
                              parallel::ParallelPlan& p, std::vector<std::string>& notes);

}  // namespace ts::driver::reading
