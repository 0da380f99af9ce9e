// Model reading of the validation: a row's architecture columns and name as a ModelSpec (GPT or
// Llama style, family defaults for empty fields).
#include <algorithm>
#include <cctype>
#include <cmath>

#include "sim/base/format.h"
#include "sim/driver/validate_rules.h"
#include "sim/driver/validate_text.h"
#include "sim/ir/model_graph.h"

namespace ts::driver::reading {

namespace {

// Llama-style (RMSNorm, SwiGLU, rotary positions, no biases, untied head) or GPT-style
// (LayerNorm, GELU, learned positions, biases, tied head). Family names decide first; then GQA
// (kv heads fewer than heads) and an MLP narrower than 3.5h (SwiGLU's 8h/3) mean Llama-style.
// The style a model family's name says; nullopt for a name of no known family.
std::optional<bool> llama_family(const PublishedRun& r, const config::ReadingVocabulary& vocab) {
  const std::string name = to_lower(r.model);
  for (const auto& family : vocab.model_families) {
    for (const auto& w : family.spelled) {
      if (has(name, w)) return family.llama;
    }
  }
  return std::nullopt;
}

bool llama_style(const PublishedRun& r, const config::ReadingVocabulary& vocab,
                 std::vector<std::string>& notes) {
  if (const auto family = llama_family(r, vocab)) return *family;
  if (r.n_heads && r.n_kv_heads && *r.n_kv_heads < *r.n_heads) {
    notes.push_back("Llama-style layers (grouped-query attention)");
    return true;
  }
  if (r.hidden && r.ffn_hidden && *r.ffn_hidden * 2 < *r.hidden * 7) {
    notes.push_back("Llama-style layers (MLP narrower than 3.5h: SwiGLU)");
    return true;
  }
  return false;
}

// Which Llama release a model name names: 1, 2 or 3 (3.1, 3.2 and 3.3 included); 0 for none.
// The release digit is not the start of a size: "LLaMA 30B" and "Llama-13b" are Llama 1.
int llama_release(const std::string& model) {
  const std::string name = to_lower(model);
  for (int release : {3, 2}) {
    for (const char* sep : {" ", "", "-", "_"}) {
      const std::string tag = "llama" + std::string(sep) + std::to_string(release);
      for (auto at = name.find(tag); at != std::string::npos; at = name.find(tag, at + 1)) {
        const auto next = at + tag.size();
        if (next == name.size() || std::isdigit(static_cast<unsigned char>(name[next])) == 0) return release;
      }
    }
  }
  return has(name, "llama") ? 1 : 0;
}

// The width of a released Llama where it departs from the 8h/3 rule (the vocabulary's
// released_widths, by release and hidden size); nullopt otherwise.
std::optional<std::int64_t> llama_release_ffn(const std::string& model, std::int64_t hidden,
                                              const config::ReadingVocabulary& vocab) {
  const int release = llama_release(model);
  for (const auto& f : vocab.released_widths) {
    if (f.llama_release == release && f.hidden == hidden) return f.ffn_hidden;
  }
  return std::nullopt;
}

}  // namespace

std::optional<ir::ModelSpec> build_model(const PublishedRun& r, std::int64_t seq,
                                         const config::ReadingVocabulary& vocab,
                                         std::vector<std::string>& notes, std::string& reason) {
  if (!r.n_layers || !r.hidden) {
    reason = std::string("architecture incomplete: ") + (!r.n_layers ? "n_layers" : "hidden") + " is empty";
    return std::nullopt;
  }
  const bool llama = llama_style(r, vocab, notes);
  ir::ModelSpec m;
  m.name = r.model.empty() ? "run " + r.run_id : r.model;
  m.num_layers = *r.n_layers;
  m.hidden = *r.hidden;
  if (r.n_heads) {
    m.num_heads = *r.n_heads;
  } else {
    // Head dimension 128: GPT-3's large models, Llama, and the FlashAttention GPT configs.
    m.num_heads = std::max<std::int64_t>(1, m.hidden / 128);
    notes.push_back("n_heads " + str(m.num_heads) + " (head dim 128)");
  }
  m.num_kv_heads = r.n_kv_heads ? *r.n_kv_heads : m.num_heads;
  // Squared ReLU (Nemotron-4, Primer): a non-gated MLP of two matrices, 4h wide unless printed.
  const bool squared_relu = says(vocab, config::Words::kSquaredRelu, r.model + " " + r.notes);
  if (r.ffn_hidden) {
    m.ffn_hidden = *r.ffn_hidden;
  } else if (squared_relu) {
    m.ffn_hidden = 4 * m.hidden;
    notes.push_back("ffn_hidden 4h = " + str(m.ffn_hidden) + " (squared-ReLU MLP)");
  } else if (const auto meta = llama_release_ffn(r.model, m.hidden, vocab); llama && meta) {
    m.ffn_hidden = *meta;
    notes.push_back("ffn_hidden " + str(m.ffn_hidden) + " (Meta's released config of this Llama size)");
  } else if (llama) {
    // Llama's rule: 2/3 of 4h rounded up to a multiple of 256 (Touvron et al. 2023, model.py).
    m.ffn_hidden = (8 * m.hidden / 3 + 255) / 256 * 256;
    notes.push_back("ffn_hidden " + str(m.ffn_hidden) + " (Llama: 8h/3 rounded up to 256)");
  } else {
    m.ffn_hidden = 4 * m.hidden;
    notes.push_back("ffn_hidden 4h = " + str(m.ffn_hidden));
  }
  if (r.vocab) {
    m.vocab = *r.vocab;
  } else {
    // The first of the vocabulary's family defaults for this style (and Llama release).
    const int release = llama ? llama_release(r.model) : 0;
    const auto it = std::find_if(vocab.vocabularies.begin(), vocab.vocabularies.end(), [&](const auto& v) {
      return v.llama == llama && (v.llama_release == 0 || v.llama_release == release);
    });
    if (it == vocab.vocabularies.end()) {
      reason = std::string("vocab is empty and the reading vocabulary has no ") + (llama ? "Llama" : "GPT") +
               "-style default";
      return std::nullopt;
    }
    m.vocab = it->vocab;
    notes.push_back("vocab " + str(m.vocab) + " (family default)");
  }
  if (llama) {
    m.norm = ir::Norm::kRmsNorm;
    m.activation = ir::Activation::kSwiglu;
    m.position = ir::Position::kRope;
    m.tied_embeddings = false;
    m.linear_bias = false;
    m.max_seq_len = 0;
    if (squared_relu) {
      m.activation = ir::Activation::kGelu;  // two matrices and one elementwise op, as GELU
      notes.push_back("non-gated MLP (squared ReLU)");
    }
  } else {
    m.norm = ir::Norm::kLayerNorm;
    m.activation = ir::Activation::kGelu;
    m.position = ir::Position::kLearned;
    m.tied_embeddings = true;
    m.linear_bias = true;
    m.max_seq_len = seq;
  }
  // A model of no known family whose printed size fits the other MLP: gated (SwiGLU, three
  // matrices) or not (two, as GELU or Nemotron's squared ReLU). GQA alone does not make the MLP
  // gated.
  if (!llama_family(r, vocab) && r.n_params_b && *r.n_params_b > 0) {
    ir::ModelSpec other = m;
    other.activation = llama ? ir::Activation::kGelu : ir::Activation::kSwiglu;
    const double printed = *r.n_params_b * 1e9;
    const auto off = [&](const ir::ModelSpec& s) {
      return std::abs(static_cast<double>(ir::parameter_count(s)) / printed - 1);
    };
    if (off(other) < 0.05 && off(m) > 0.15) {
      m.activation = other.activation;
      notes.push_back(std::string(other.activation == ir::Activation::kSwiglu ? "gated (SwiGLU)" : "non-gated") +
                      " MLP: its parameter count matches the printed n_params_b");
    }
  }
  const auto problems = config::check_model(m);
  if (!problems.empty()) {
    reason = "model: " + problems.front().field + ": " + problems.front().message;
    return std::nullopt;
  }
  return m;
}

}  // namespace ts::driver::reading
