// The validation's reading vocabulary (reading/published-runs.textproto): model families, released
// Llama widths and vocabularies, GPU parts and InfiniBand line rates, each with its source.
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace ts::config {

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
};

// data_dir()/reading/published-runs.textproto.
std::filesystem::path reading_vocabulary_path();

// Loads a vocabulary file (schema sim/schema/reading.proto). Throws InputError listing every
// problem with its line and field: an entry without its source, an unknown style, an empty
// spelling, a cluster the zoo does not have, a size or rate not > 0.
ReadingVocabulary load_reading_vocabulary(
    const std::filesystem::path& path = reading_vocabulary_path());

}  // namespace ts::config
