// The validation's reading vocabulary (reading/published-runs.textproto): model families, released
// Llama widths and vocabularies, GPU parts, InfiniBand line rates, framework spellings and the
// word lists of the reading rules, each with its source.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <regex>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/framework_loader.h"

namespace ts::config {

// The word lists the reading rules look for (WordList.rule in sim/schema/reading.proto), each
// named in the file as word_list_name gives it.
enum class Words {
  kZero1,                     // "zero-1": ZeRO-1 / distributed optimizer spellings
  kZero2,                     // "zero-2"
  kZero3,                     // "zero-3"
  kZeroNone,                  // "zero-none": a sharding cell saying there is none
  kFsdpUnits,                 // "fsdp-units": FSDP wraps layers, so ZeRO-2 buckets are single layers
  kSwitchOn,                  // "switch-on": a yes/no cell saying yes
  kSequenceParallelOn,        // "sequence-parallel-on": more words of a sequence-parallel cell saying yes
  kTpCommOverlap,             // "tp-comm-overlap"
  kRecomputeSelective,        // "recompute-selective"
  kRecomputeOpPolicy,         // "recompute-op-policy": selective by op policy
  kRecomputeLayerPolicy,      // "recompute-layer-policy": selective by whole layers
  kRecomputeMegatronSelective,  // "recompute-megatron-selective": Megatron's selective flag
  kRecomputeNone,             // "recompute-none"
  kRecomputeFull,             // "recompute-full"
  kFusedAttention,            // "fused-attention": a fused attention kernel named
  kFlashAttention3,           // "flash-attention-3"
  kFlashAttention2,           // "flash-attention-2"
  kFlashAttention1,           // "flash-attention-1"
  kFlashAttention1Triton,     // "flash-attention-1-triton": llm-foundry's Triton port of FlashAttention-1
  kPrecisionNvfp4,            // "precision-nvfp4"
  kPrecisionMxfp8,            // "precision-mxfp8"
  kPrecisionFp8,              // "precision-fp8"
  kPrecisionBf16,             // "precision-bf16"
  kPrecisionFp16,             // "precision-fp16"
  kPureBf16,                  // "pure-bf16": the parameters themselves are bf16
  kCompiled,                  // "compiled": the step's elementwise ops are compiled or fused
  kCpUlysses,                 // "cp-ulysses"
  kCpAllGather,               // "cp-all-gather"
  kDispatcherHybridEp,        // "dispatcher-hybridep"
  kDispatcherDeepEp,          // "dispatcher-deepep"
  kMoeA2aOverlap,             // "moe-a2a-overlap": the 1F1B all-to-all overlap
  kRecomputeModules,          // "recompute-modules": the module names follow it
  kBf16Moments,               // "bf16-moments": Adam's m and v in bf16, fp32 master weights
  kGradReduceBf16,            // "grad-reduce-bf16": the run's recipe reduces gradients in bf16
  kGradReduceFp32,            // "grad-reduce-fp32": its notes say fp32 over that
  kCrossEntropyTe,            // "cross-entropy-te": Transformer Engine's fused loss, in place on bf16 logits
  kSquaredRelu,               // "squared-relu"
  kUnmodelledCard,            // "unmodelled-card": PCIe and NVL cards
  kNvlink400,                 // "nvlink-400": export parts with NVLink cut to 400 GB/s
  kStaticRouting,             // "static-routing": fabrics routed by ECMP hashing
  kPerInstanceRate,           // "per-instance-rate": rates quoted per instance (AWS EFA)
  kNvlinkClause,              // "nvlink-clause": a clause about the NVLink domain, not the NICs
  kPerNodeRate,               // "per-node-rate": what follows a rate says it is the node's
  kPerGpuRate,                // "per-gpu-rate": what follows a rate says it is a GPU's or NIC's
  kAttentionDisabled,         // "attention-disabled": the fused attention kernel said to be off
  kTritonAttention,           // "triton-attention": Triton named as the attention kernel
  kSgd,                       // "sgd": plain SGD named
  kNoMomentum,                // "no-momentum": SGD said to run without momentum
  kFlops6n,                   // "flops-6n": the 6N FLOP convention named
  kFlopsHardware,             // "flops-hardware": hardware FLOPs (HFU)
  kFlopsHalved,               // "flops-halved": causal attention halved
  kFlopsNotHalved,            // "flops-not-halved"
};
inline constexpr int kNumWordLists = 52;
std::string_view word_list_name(Words w);

// The numbers the reading rules read with patterns (NumberPattern.rule), each named in the file as
// number_rule_name gives it.
enum class Numbers {
  kGpuMemoryGb,      // "gpu-memory-gb": a memory size in the gpu column
  kGpusPerNode,      // "gpus-per-node": in the interconnect column
  kShardGroup,       // "shard-group": the data-parallel ranks a sharding cell shards within
  kRecomputeLayers,  // "recompute-layers": layers per model chunk a recompute cell names
  kRecomputeShare,   // "recompute-share": the share of layers a recompute cell names
};
inline constexpr int kNumNumberRules = 5;
std::string_view number_rule_name(Numbers n);

// How a cell is compared with a word list (WordList.match).
enum class WordMatch { kText, kWords, kFirstWord, kLetters, kPattern };

struct ReadingVocabulary {
  struct ModelFamily {
    bool llama = false;  // Llama-style (RMSNorm, SwiGLU, RoPE); else GPT-style
    std::vector<std::string> spelled;
    std::string source;
  };
  struct ReleasedWidth {
    std::string model;
    int llama_release = 0;
    std::int64_t hidden = 0;
    std::int64_t ffn_hidden = 0;
    std::string source;
  };
  struct FamilyVocab {
    bool llama = false;
    int llama_release = 0;  // 0: any
    std::int64_t vocab = 0;
    std::string source;
  };
  struct GpuPart {
    std::vector<std::string> spelled;
    std::string cluster;
    std::int64_t nominal_gb = 0;
    std::vector<std::int64_t> when_gb;
    std::vector<std::string> when_words;
    bool rack_scale = false;
    std::string source;
  };
  struct LinkGeneration {
    std::string word;
    double gbits = 0;
    std::string source;
  };
  std::vector<ModelFamily> model_families;
  std::vector<ReleasedWidth> released_widths;
  std::vector<FamilyVocab> vocabularies;
  std::vector<GpuPart> gpu_parts;
  std::vector<LinkGeneration> link_generations;
  struct GpuArchitecture {
    std::string word;
    std::string part;
    std::vector<std::string> unless;
    std::string source;
  };
  std::vector<GpuArchitecture> gpu_architectures;
  struct FrameworkSpelling {
    std::string as;
    std::vector<std::string> spelled;
    bool whole_word = false;
    std::string source;
  };
  std::vector<FrameworkSpelling> framework_spellings;
  struct WordList {
    WordMatch match = WordMatch::kText;
    std::vector<std::string> spelled;
    std::vector<std::regex> patterns;  // kPattern: `spelled` compiled
    std::string source;
  };
  std::array<WordList, kNumWordLists> words;  // by Words
  const WordList& list(Words w) const { return words[static_cast<std::size_t>(w)]; }
  struct NumberPattern {
    std::string pattern;
    std::regex compiled;
    std::optional<double> value;
    double divide_by = 1;
    bool invert = false;
    std::string source;
  };
  std::array<std::vector<NumberPattern>, kNumNumberRules> numbers;  // by Numbers, in file order
  struct DatedName {
    std::vector<std::string> spelled;
    YearMonth date;
    std::string source;
  };
  std::vector<DatedName> dated_names;
  const std::vector<NumberPattern>& patterns(Numbers n) const { return numbers[static_cast<std::size_t>(n)]; }
};

// data_dir()/reading/published-runs.textproto.
std::filesystem::path reading_vocabulary_path();

// Loads a vocabulary file (schema sim/schema/reading.proto). Throws InputError listing every
// problem with its line and field: an entry without its source, an unknown style, an empty
// spelling, a cluster the zoo does not have, a size or rate not > 0, a word list no rule reads
// or given twice, a rule's list missing, an unknown match, a pattern that does not compile, a number rule without patterns.
ReadingVocabulary load_reading_vocabulary(
    const std::filesystem::path& path = reading_vocabulary_path());

}  // namespace ts::config
