// Framework and plan reading rules of the validation (validate_rules.h): sharding, sequence
// parallelism, recompute, attention kernel, precision and gradient reduction from a row's cells.
#include <algorithm>
#include <regex>

#include "sim/base/format.h"
#include "sim/driver/validate_rules.h"
#include "sim/driver/validate_text.h"

namespace ts::driver::reading {

namespace {

// The ZeRO stage a text names (the vocabulary's zero-2, zero-3 and zero-1 lists, tried in that
// order: "no reshard after forward" is FSDP's ZeRO-2); nullopt when it names none. HSDP, in the
// zero-3 list, shards within a group and replicates across groups; it is read as ZeRO-3 over the
// whole data-parallel group. The plan can express the groups (ParallelPlan::zero_shard_group,
// with the replicas' all-reduce on its own stream beside the gathers, as FSDP's inter-node process
// group runs it), but read with node-sized groups (FSDP's default, and fms-fsdp's) the IBM/PyTorch
// FSDP blog's three HSDP rows went from -10 / -12 / +1 % to +22 / +18 / +48 % (both with an fp32
// gradient reduction; fms-fsdp's bf16 one makes either reading more optimistic): on their slow
// inter-node links hybrid sharding hides the communication that full sharding exposes, and what
// is left is our compute time, faster than those runs' (measured MFU 0.57 on A100 and 0.37 on
// H100). Full sharding is the better predictor of the published HSDP runs until that gap is
// explained.
std::optional<int> zero_stage_named(std::string_view text, const config::ReadingVocabulary& vocab) {
  if (says(vocab, config::Words::kZero2, text)) return 2;
  if (says(vocab, config::Words::kZero3, text)) return 3;
  if (says(vocab, config::Words::kZero1, text)) return 1;
  return std::nullopt;
}

// The framework, precision and notes columns in lower case: what the rules read of a run's
// software stack.
std::string stack_text(const PublishedRun& r) { return to_lower(r.framework + " " + r.precision + " " + r.notes); }

}  // namespace

bool RowFrameworks::offers(parallel::Recompute m) const {
  for (const auto& p : named) {
    if (std::find(p.recompute_modes.begin(), p.recompute_modes.end(), m) != p.recompute_modes.end())
      return true;
  }
  return false;
}

bool RowFrameworks::refuses(const parallel::ParallelPlan& plan) const {
  return std::any_of(named.begin(), named.end(), [&](const auto& p) { return !p.refuses(plan).empty(); });
}

std::vector<parallel::Recompute> RowFrameworks::recompute_modes() const {
  std::set<parallel::Recompute> modes = {parallel::Recompute::kNone, parallel::Recompute::kFull};
  for (const auto& p : named) modes.insert(p.recompute_modes.begin(), p.recompute_modes.end());
  return {modes.begin(), modes.end()};
}

std::optional<config::YearMonth> stated_date(const std::string& text) {
  // A year 19xx/20xx not inside a longer number or word (arXiv numbers, commit hashes), with its
  // month when written "YYYY-MM"; a venue's "'21" (SC'21, MICRO'24).
  static const std::regex kYear(R"((^|[^0-9A-Za-z])((19|20)\d\d)(-(0[1-9]|1[0-2]))?(?![0-9]))");
  static const std::regex kVenue(R"([A-Za-z]'(\d\d)(?![0-9]))");
  std::optional<config::YearMonth> out;
  const auto keep = [&](config::YearMonth m) {
    if (!out || m < *out) out = m;
  };
  for (std::sregex_iterator it(text.begin(), text.end(), kYear), end; it != end; ++it) {
    const auto& m = *it;
    keep({std::stoi(m[2].str()), m[5].matched ? std::stoi(m[5].str()) : 1});
  }
  for (std::sregex_iterator it(text.begin(), text.end(), kVenue), end; it != end; ++it) {
    keep({2000 + std::stoi((*it)[1].str()), 1});
  }
  return out;
}

RowFrameworks named_frameworks(const PublishedRun& r,
                               const std::vector<config::FrameworkProfile>& profiles,
                               const config::ReadingVocabulary& vocab) {
  RowFrameworks out;
  out.vocab = &vocab;
  out.column = framework_column(vocab, r.framework);
  const std::string& f = out.column;
  std::vector<const config::FrameworkProfile*> named;
  out.date = stated_date(r.source);
  if (!out.date) {
    // A publication named without its year ("MLPerf Training v5.1"): its month, from the vocabulary.
    const std::string source = to_lower(r.source);
    const auto in_source = [&](const std::string& w) { return has(source, w); };
    for (const auto& d : vocab.dated_names) {
      if (std::any_of(d.spelled.begin(), d.spelled.end(), in_source)) {
        out.date = d.date;
        break;
      }
    }
  }
  for (const auto& p : profiles) {
    if (std::any_of(p.spelled.begin(), p.spelled.end(),
                    [&](const std::string& w) { return has(f, w); })) {
      named.push_back(&p);
      // A run that names a framework is no older than its first release.
      if (p.released && (!out.date || *out.date < *p.released)) out.date = p.released;
    }
  }
  const std::string precision = to_lower(r.precision);
  for (const auto* p : named) out.named.push_back(p->as_of(out.date, &f, &precision));
  // A fork's settings over its base's (builds_on): the base keeps only what the fork leaves.
  for (const auto& fork : out.named) {
    for (auto& base : out.named) {
      if (std::find(fork.builds_on.begin(), fork.builds_on.end(), base.name) == fork.builds_on.end()) continue;
      std::erase_if(base.given, [&](const config::FrameworkProfile::Given& g) { return fork.source_of(g.setting); });
    }
  }
  // A kernel named through a framework (any profile's kernel_named_by, not only the named ones).
  for (const auto& p : profiles) {
    if (std::any_of(p.kernel_named_by.begin(), p.kernel_named_by.end(), [&](const auto& w) { return has(f, w); })) {
      out.named_kernel = p.values.attention_kernel;
      break;
    }
  }
  return out;
}

// Frameworks whose profile runs a layer's elementwise ops as PyTorch's eager ops (torchtitan,
// Hugging Face models, Composer's llm-foundry: their sources in frameworks/), unless the step is
// compiled: "compile" or Liger's fused kernels in the framework or precision column make them
// fused; notes are not read, as they may describe other runs of the same table.
bool eager_elementwise(const PublishedRun& r, const RowFrameworks& fw) {
  if (says(*fw.vocab, config::Words::kCompiled, r.framework + " " + r.precision)) return false;
  return fw.gives(config::FrameworkSetting::kElementwise, [](const parallel::ParallelPlan& v) {
    return v.elementwise == parallel::Elementwise::kEager;
  });
}

// Whether a framework the row names ran the attention core unfused at the row's date (its
// profile's or an era's attention "unfused").
namespace {
bool names_unfused_core(const RowFrameworks& fw) {
  return fw.gives(config::FrameworkSetting::kAttention,
                  [](const parallel::ParallelPlan& v) { return !v.flash_attention; });
}
}  // namespace

// Whether the run used a fused attention kernel. A row that names one (framework, precision or
// notes: FlashAttention, SDPA, cuDNN, Transformer Engine) did; otherwise it did unless a framework
// it names ran the core unfused at the row's date (attention "unfused" in the profile or one of
// its eras: Megatron-LM's legacy models, Megatron-DeepSpeed, DeepSpeed before FlashAttention-2,
// GPT-NeoX, metaseq; their sources in frameworks/).
bool flash_attention(const PublishedRun& r, const RowFrameworks& fw) {
  // Said to be off in the columns that describe the run's own stack (notes may compare with
  // other runs: "without FlashAttention 142 TFLOP/s").
  if (says(*fw.vocab, config::Words::kAttentionDisabled, r.framework + " " + r.precision)) return false;
  if (says(*fw.vocab, config::Words::kFusedAttention, stack_text(r))) return true;
  return fw.named_kernel.has_value() || !names_unfused_core(fw);
}

// Plain SGD without momentum: the row names SGD and says nothing of a nonzero momentum.
bool sgd_without_momentum(const PublishedRun& r, const config::ReadingVocabulary& vocab) {
  const std::string all = stack_text(r);
  if (!says(vocab, config::Words::kSgd, all)) return false;
  return !has(all, "momentum") || says(vocab, config::Words::kNoMomentum, all);
}

// The fused-attention kernel a row's framework ran, by name when the row gives a version:
// FlashAttention-3, -2, -1 or the Triton FlashAttention (Triton's own fused-attention kernel,
// triton.ops.flash_attention, the "Triton" of the FlashAttention-2 benchmarks). Otherwise the
// kernel of the frameworks it names at the row's date (their profiles and eras: FlashAttention-1
// for the flash-attention training code and llm-foundry before FlashAttention-2; Transformer
// Engine's fused attention, the GPU's default, for NeMo and Megatron-Core; FlashAttention-2 for
// PyTorch's SDPA and flash-attn code bases: torchtitan, FSDP, fms-fsdp, Hugging Face, Accelerate,
// nanotron, lit-gpt, Colossal-AI, XTuner; why not SDPA's cuDNN backend is in
// frameworks/torchtitan.textproto). A row that says only "FlashAttention" gets FlashAttention-2,
// the version in general use from its release (2023-07) until FlashAttention-3 (2024-07), rather
// than the newest one; a row that names nothing gets the GPU's default. Empty = the GPU's default
// kernel.
std::string attention_kernel(const PublishedRun& r, const RowFrameworks& fw) {
  const std::string all = stack_text(r);
  const auto& vocab = *fw.vocab;
  if (says(vocab, config::Words::kFlashAttention3, all)) return "FlashAttention-3";
  const bool names_fa2 = says(vocab, config::Words::kFlashAttention2, all);
  const auto kernel_is = [](const char* k) {
    return [k](const parallel::ParallelPlan& v) { return v.attention_kernel == k; };
  };
  // A framework that ran FlashAttention-1 at the row's date (its profile or era), or llm-foundry's
  // flash_attn_triton module named (the flash-attention repository's Triton port of 2022, a
  // FlashAttention-1-class kernel: frameworks/composer.textproto), unless FlashAttention-2 is
  // named.
  if ((fw.gives(config::FrameworkSetting::kAttention, kernel_is("FlashAttention-1")) ||
       says(vocab, config::Words::kFlashAttention1Triton, all)) &&
      !names_fa2) {
    return "FlashAttention-1";
  }
  if (names_fa2) return "FlashAttention-2";
  if (says(vocab, config::Words::kTritonAttention, all)) return "FlashAttention-Triton";
  if (says(vocab, config::Words::kFlashAttention1, all)) return "FlashAttention-1";
  if (fw.named_kernel) return *fw.named_kernel;
  // The kernel of the named frameworks: the GPU's default (Transformer Engine's) before a named
  // kernel, unless one of them runs the core unfused (its "default" is then another code path's).
  if (!names_unfused_core(fw) &&
      fw.gives(config::FrameworkSetting::kAttention, [](const parallel::ParallelPlan& v) {
        return v.flash_attention && v.attention_kernel.empty();
      })) {
    return "";
  }
  if (const auto* p =
          fw.giving(config::FrameworkSetting::kAttention,
                    [](const parallel::ParallelPlan& v) { return !v.attention_kernel.empty(); })) {
    return p->values.attention_kernel;
  }
  if (has(all, "flash")) return "FlashAttention-2";
  return "";
}

// The attention kernels with points in `gpu`'s calibration file (none without a file).
std::set<std::string> calibrated_attention_kernels(const std::string& gpu, config::ComputeModelCache& calibrations) {
  std::set<std::string> out;
  if (const auto cal = calibrations.calibration(gpu)) {
    for (const auto& t : cal->attention) out.insert(t.kernel);
  }
  return out;
}
// ZeRO stage of the zero_fsdp column; when it is empty, of the framework column (a stage it
// names, or its documented default); nullopt when neither gives one.
std::optional<int> parse_zero(const PublishedRun& r, const RowFrameworks& fw,
                              std::vector<std::string>& notes) {
  if (!unstated(r.zero_fsdp)) {
    // "none", "no", "False", "off", "DDP": no sharding; a bare stage number: that stage.
    if (says(*fw.vocab, config::Words::kZeroNone, r.zero_fsdp)) return 0;
    const std::string t = trim(r.zero_fsdp);
    if (t == "1" || t == "2" || t == "3") return t[0] - '0';
    return zero_stage_named(r.zero_fsdp, *fw.vocab).value_or(0);
  }
  if (const auto named = zero_stage_named(r.framework, *fw.vocab)) {
    if (*named == 3 && has(fw.column, "fsdp")) {
      notes.push_back("ZeRO-3 (framework runs FSDP, FULL_SHARD is its default)");
    } else {
      notes.push_back("ZeRO-" + std::to_string(*named) + " (named in the framework column)");
    }
    return named;
  }
  // The sharding of a named framework whose runs shard unless told otherwise (its profile's
  // unstated_sharding: torchtitan's FSDP2, NeMo's distributed optimizer).
  for (const auto& p : fw.named) {
    if (p.unstated_sharding.empty() || !p.source_of(config::FrameworkSetting::kZeroStage)) continue;
    notes.push_back("ZeRO-" + std::to_string(p.values.zero_stage) + " (" + p.unstated_sharding + ")");
    return p.values.zero_stage;
  }
  return std::nullopt;
}

// "yes", "True (TP with sequence parallel)", "enabled", "on": true; "no", "False", "off": false;
// empty or "not stated": nullopt.
std::optional<bool> parse_yes_no(const std::string& text, const config::ReadingVocabulary& vocab) {
  const std::string t = to_lower(trim(text));
  if (t.empty() || unstated(t)) return std::nullopt;
  return t == "1" || has(t, "yes") || says(vocab, config::Words::kSwitchOn, t) ||
         says(vocab, config::Words::kSequenceParallelOn, t);
}

// The layers that run full recompute when a recompute cell names only some: a count ("full, 4
// layers per stage", "recompute_num_layers 4": Megatron-LM's block method, per model chunk) or a
// share ("every 2nd layer", "half", "50%", "ratio 0.5": torchtitan's layer policy, fms-fsdp's
// selective_checkpointing), the vocabulary's recompute-layers and recompute-share patterns.
// Nothing when the cell names none.
std::optional<PartialRecompute> parse_partial_recompute(const std::string& text, const config::ReadingVocabulary& vocab) {
  if (const auto n = number_in(vocab, config::Numbers::kRecomputeLayers, text); n && *n >= 1) {
    return PartialRecompute{static_cast<std::int64_t>(std::min(*n, 1e9)), 0};
  }
  const auto share = number_in(vocab, config::Numbers::kRecomputeShare, text);
  if (share && *share > 0 && *share <= 1) return PartialRecompute{0, *share};
  return std::nullopt;
}

// "selective" (with the word "op" or "operator": PyTorch's op-policy selective checkpointing, as
// torchtitan's "selective op"); "full", "uniform", "block" (Megatron's --recompute-method with full
// granularity), "activation checkpointing", "True" (a framework's checkpointing switch, which
// checkpoints every layer: DeepSpeed --checkpoint-activations, Hugging Face
// gradient_checkpointing), or a count or share of layers (parse_partial_recompute); "none",
// "no …", "False", "off": none; empty or "not stated": nullopt.
std::optional<parallel::Recompute> parse_recompute(const std::string& text,
                                                   const config::ReadingVocabulary& vocab) {
  using config::Words;
  const std::string t = to_lower(text);
  if (t.empty() || unstated(t)) return std::nullopt;
  if (says(vocab, Words::kRecomputeSelective, t)) {
    return says(vocab, Words::kRecomputeOpPolicy, t) ? parallel::Recompute::kSelectiveOp
                                                     : parallel::Recompute::kSelective;
  }
  // Megatron's --recompute-activations is its selective granularity; full granularity is named
  // as such.
  if (says(vocab, Words::kRecomputeMegatronSelective, t) && !has(t, "full")) {
    return parallel::Recompute::kSelective;
  }
  if (says(vocab, Words::kRecomputeNone, t)) return parallel::Recompute::kNone;
  if (says(vocab, Words::kRecomputeFull, t) || says(vocab, Words::kSwitchOn, t) || parse_partial_recompute(t, vocab)) {
    return parallel::Recompute::kFull;
  }
  return parallel::Recompute::kNone;
}

// Layers per pipeline stage when `stages` does not divide `layers`: ceil(layers/stages) each,
// less one on the first and last stages, then the second and second-to-last, … until they sum
// to `layers`. The embedding and the LM head sit on the end stages, so frameworks lighten those:
// Llama 3 405B's 126 layers on 16 stages ran 7, 8 × 14, 7 ("we reduce one Transformer layer
// each from the first and the last stages", Dubey et al. 2024, Sec. 3.3.2); BLOOM's 70 on 12 ran
// 5, 6 × 10, 5 (bigscience tr11-176B-ml README, --pp-partition-method type:transformer|embedding).
// Empty when the stages divide the layers, or when a stage would get none.
std::vector<std::int64_t> uneven_stage_layers(std::int64_t layers, std::int64_t stages) {
  if (stages <= 1 || layers <= stages || layers % stages == 0) return {};
  const std::int64_t base = (layers + stages - 1) / stages;
  std::vector<std::int64_t> out(static_cast<std::size_t>(stages), base);
  std::int64_t extra = base * stages - layers;  // < stages
  for (std::int64_t i = 0; extra > 0; ++i) {
    // 0, stages-1, 1, stages-2, …
    const std::int64_t s = i % 2 == 0 ? i / 2 : stages - 1 - i / 2;
    --out[static_cast<std::size_t>(s)];
    --extra;
  }
  return out;
}

// Global batch in tokens of GPT-3 (Brown et al. 2020, Table 2.1) for a model of this size: the
// batch when a source gives none.
double gpt3_batch_tokens(double parameters) {
  if (parameters < 1e9) return 0.5e6;
  if (parameters < 5e9) return 1e6;
  if (parameters < 20e9) return 2e6;
  return 3.2e6;
}
// How the row's framework reduces gradients, given the plan's ZeRO stage (map_run, and again when
// validate() chooses a stage the row does not state):
// - precision: the training precision where a named framework's profile reduces in it (as of
//   the row's date and precision mode, forks over their bases: Composer's PURE mode, fms-fsdp,
//   DeepSpeed's ZeRO optimizers from stage 1), fp32 otherwise;
// - buckets: FSDP reduce-scatters each wrapped unit's gradients after its backward, so its ZeRO-2
//   buckets are single layers, not Megatron's 40 M parameters (ZeRO-3 reduces per layer in any
//   framework).
void apply_gradient_reduction(const PublishedRun& r, const RowFrameworks& rf, parallel::ParallelPlan& p,
                              std::vector<std::string>& notes) {
  const parallel::ParallelPlan defaults;
  p.grad_reduce = defaults.grad_reduce;
  p.grad_bucket_params = defaults.grad_bucket_params;
  const auto* f = rf.giving(config::FrameworkSetting::kGradReduce, [](const parallel::ParallelPlan& v) {
    return v.grad_reduce == parallel::GradReduce::kBf16;
  });
  if (f != nullptr && p.zero_stage >= f->grad_reduce_from_zero_stage) {
    p.grad_reduce = parallel::GradReduce::kBf16;
    notes.push_back("gradients reduced in the training precision (" + f->name + ")");
  } else if (says(*rf.vocab, config::Words::kGradReduceBf16, r.source + " " + r.notes) &&
             !says(*rf.vocab, config::Words::kGradReduceFp32, r.notes)) {
    // The run's recipe (Megatron-Bridge's performance recipes: _benchmark_common).
    p.grad_reduce = parallel::GradReduce::kBf16;
    notes.push_back("gradients reduced in bf16 (the row's recipe: grad_reduce_in_fp32 False)");
  }
  if (p.zero_stage == 2 && says(*rf.vocab, config::Words::kFsdpUnits, r.framework + " " + r.zero_fsdp)) {
    p.grad_bucket_params = 1;
    notes.push_back("gradients reduce-scattered per layer (FSDP units)");
  }
}

}  // namespace ts::driver::reading
