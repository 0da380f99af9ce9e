// Reading vocabulary file: parse, validate (all problems at once), convert to ReadingVocabulary.
#include "sim/config/reading_loader.h"

#include <algorithm>
#include <array>
#include <optional>

#include "sim/config/loader.h"
#include "sim/config/proto_reader.h"
#include "sim/schema/reading.pb.h"

namespace ts::config {

namespace {

// "gpt" or "llama" as the bool Llama-style; a diagnostic for anything else.
bool llama_style(const detail::Checker& c, bool has, const std::string& style) {
  if (!c.require(has, "style")) return false;
  if (style != "gpt" && style != "llama") c.fail("style", "unknown value '" + style + "' (one of gpt, llama)");
  return style == "llama";
}

void spellings(const detail::Checker& c, const google::protobuf::RepeatedPtrField<std::string>& in,
               std::vector<std::string>& out, std::string_view field, bool required) {
  if (required && in.empty()) c.fail(field, "required value is missing");
  for (const auto& w : in) {
    if (w.empty()) c.fail(field, "an empty spelling matches every row");
    out.push_back(w);
  }
}

std::optional<WordMatch> word_match(const std::string& s) {
  if (s.empty() || s == "text") return WordMatch::kText;
  if (s == "words") return WordMatch::kWords;
  if (s == "first-word") return WordMatch::kFirstWord;
  if (s == "letters") return WordMatch::kLetters;
  if (s == "pattern") return WordMatch::kPattern;
  return std::nullopt;
}

}  // namespace

std::string_view word_list_name(Words w) {
  switch (w) {
    case Words::kZero1: return "zero-1";
    case Words::kZero2: return "zero-2";
    case Words::kZero3: return "zero-3";
    case Words::kZeroNone: return "zero-none";
    case Words::kFsdpUnits: return "fsdp-units";
    case Words::kSwitchOn: return "switch-on";
    case Words::kSequenceParallelOn: return "sequence-parallel-on";
    case Words::kTpCommOverlap: return "tp-comm-overlap";
    case Words::kRecomputeSelective: return "recompute-selective";
    case Words::kRecomputeOpPolicy: return "recompute-op-policy";
    case Words::kRecomputeLayerPolicy: return "recompute-layer-policy";
    case Words::kRecomputeMegatronSelective: return "recompute-megatron-selective";
    case Words::kRecomputeNone: return "recompute-none";
    case Words::kRecomputeFull: return "recompute-full";
    case Words::kFusedAttention: return "fused-attention";
    case Words::kFlashAttention3: return "flash-attention-3";
    case Words::kFlashAttention2: return "flash-attention-2";
    case Words::kFlashAttention1: return "flash-attention-1";
    case Words::kFlashAttention1Triton: return "flash-attention-1-triton";
    case Words::kPrecisionNvfp4: return "precision-nvfp4";
    case Words::kPrecisionMxfp8: return "precision-mxfp8";
    case Words::kPrecisionFp8: return "precision-fp8";
    case Words::kPrecisionBf16: return "precision-bf16";
    case Words::kPrecisionFp16: return "precision-fp16";
    case Words::kPureBf16: return "pure-bf16";
    case Words::kCompiled: return "compiled";
    case Words::kCpUlysses: return "cp-ulysses";
    case Words::kCpAllGather: return "cp-all-gather";
    case Words::kDispatcherHybridEp: return "dispatcher-hybridep";
    case Words::kDispatcherDeepEp: return "dispatcher-deepep";
    case Words::kMoeA2aOverlap: return "moe-a2a-overlap";
    case Words::kRecomputeModules: return "recompute-modules";
    case Words::kBf16Moments: return "bf16-moments";
    case Words::kGradReduceBf16: return "grad-reduce-bf16";
    case Words::kGradReduceFp32: return "grad-reduce-fp32";
    case Words::kCrossEntropyTe: return "cross-entropy-te";
    case Words::kSquaredRelu: return "squared-relu";
    case Words::kUnmodelledCard: return "unmodelled-card";
    case Words::kNvlink400: return "nvlink-400";
    case Words::kStaticRouting: return "static-routing";
    case Words::kPerInstanceRate: return "per-instance-rate";
    case Words::kNvlinkClause: return "nvlink-clause";
    case Words::kPerNodeRate: return "per-node-rate";
    case Words::kPerGpuRate: return "per-gpu-rate";
    case Words::kAttentionDisabled: return "attention-disabled";
    case Words::kTritonAttention: return "triton-attention";
    case Words::kSgd: return "sgd";
    case Words::kNoMomentum: return "no-momentum";
    case Words::kFlops6n: return "flops-6n";
    case Words::kFlopsHardware: return "flops-hardware";
    case Words::kFlopsHalved: return "flops-halved";
    case Words::kFlopsNotHalved: return "flops-not-halved";
  }
  return "";
}

std::string_view number_rule_name(Numbers n) {
  switch (n) {
    case Numbers::kGpuMemoryGb: return "gpu-memory-gb";
    case Numbers::kGpusPerNode: return "gpus-per-node";
    case Numbers::kShardGroup: return "shard-group";
    case Numbers::kRecomputeLayers: return "recompute-layers";
    case Numbers::kRecomputeShare: return "recompute-share";
  }
  return "";
}

namespace {

// The index of the rule a file entry names (its enum value), or -1 when no rule has that name.
template <class Rule>
int rule_index(const std::string& name, int count, std::string_view (*name_of)(Rule)) {
  for (int r = 0; r < count; ++r) {
    if (name_of(static_cast<Rule>(r)) == name) return r;
  }
  return -1;
}

}  // namespace

std::filesystem::path reading_vocabulary_path() { return data_dir() / "reading" / "published-runs.textproto"; }

ReadingVocabulary load_reading_vocabulary(const std::filesystem::path& path) {
  namespace sch = trainsim::schema;
  DiagnosticList diags;
  sch::ReadingVocabulary msg;
  detail::FieldLines lines;
  ReadingVocabulary out;
  const std::string display = path.string();
  if (detail::read_message(path, display, msg, lines, diags)) {
    const detail::Checker top(display, lines, diags);
    const auto item = [&](std::string_view field, int i) {
      return top.nested(std::string(field) + "[" + std::to_string(i) + "]");
    };
    for (int i = 0; i < msg.model_families_size(); ++i) {
      const auto& m = msg.model_families(i);
      const auto c = item("model_families", i);
      ReadingVocabulary::ModelFamily f;
      f.llama = llama_style(c, m.has_style(), m.style());
      spellings(c, m.spelled(), f.spelled, "spelled", true);
      c.non_empty(m.has_source(), m.source(), "source");
      f.source = m.source();
      out.model_families.push_back(std::move(f));
    }
    for (int i = 0; i < msg.released_widths_size(); ++i) {
      const auto& m = msg.released_widths(i);
      const auto c = item("released_widths", i);
      ReadingVocabulary::ReleasedWidth w;
      w.model = m.model();
      c.positive(m.has_llama_release(), m.llama_release(), "llama_release");
      c.positive(m.has_hidden(), static_cast<double>(m.hidden()), "hidden");
      c.positive(m.has_ffn_hidden(), static_cast<double>(m.ffn_hidden()), "ffn_hidden");
      c.non_empty(m.has_source(), m.source(), "source");
      w.llama_release = m.llama_release();
      w.hidden = m.hidden();
      w.ffn_hidden = m.ffn_hidden();
      w.source = m.source();
      out.released_widths.push_back(std::move(w));
    }
    for (int i = 0; i < msg.vocabularies_size(); ++i) {
      const auto& m = msg.vocabularies(i);
      const auto c = item("vocabularies", i);
      ReadingVocabulary::FamilyVocab v;
      v.llama = llama_style(c, m.has_style(), m.style());
      if (m.llama_release() < 0) c.fail("llama_release", "must be >= 0");
      c.positive(m.has_vocab(), static_cast<double>(m.vocab()), "vocab");
      c.non_empty(m.has_source(), m.source(), "source");
      v.llama_release = m.llama_release();
      v.vocab = m.vocab();
      v.source = m.source();
      out.vocabularies.push_back(std::move(v));
    }
    const std::vector<std::string> clusters = zoo_clusters();
    for (int i = 0; i < msg.gpu_parts_size(); ++i) {
      const auto& m = msg.gpu_parts(i);
      const auto c = item("gpu_parts", i);
      ReadingVocabulary::GpuPart g;
      spellings(c, m.spelled(), g.spelled, "spelled", true);
      spellings(c, m.when_words(), g.when_words, "when_words", false);
      c.non_empty(m.has_cluster(), m.cluster(), "cluster");
      if (!m.cluster().empty() && std::find(clusters.begin(), clusters.end(), m.cluster()) == clusters.end()) {
        c.fail("cluster", "no zoo cluster '" + m.cluster() + "' in topologies/");
      }
      c.positive(m.has_nominal_gb(), static_cast<double>(m.nominal_gb()), "nominal_gb");
      for (const auto gb : m.when_gb()) {
        if (gb <= 0) c.fail("when_gb", "must be > 0");
        g.when_gb.push_back(gb);
      }
      c.non_empty(m.has_source(), m.source(), "source");
      g.cluster = m.cluster();
      g.nominal_gb = m.nominal_gb();
      g.rack_scale = m.rack_scale();
      g.source = m.source();
      out.gpu_parts.push_back(std::move(g));
    }
    for (int i = 0; i < msg.link_generations_size(); ++i) {
      const auto& m = msg.link_generations(i);
      const auto c = item("link_generations", i);
      ReadingVocabulary::LinkGeneration l;
      c.non_empty(m.has_word(), m.word(), "word");
      const bool letters = std::all_of(m.word().begin(), m.word().end(), [](char ch) { return ch >= 'a' && ch <= 'z'; });
      if (!m.word().empty() && !letters) c.fail("word", "must be lower-case letters (got '" + m.word() + "')");
      c.positive(m.has_gbits(), m.gbits(), "gbits");
      c.non_empty(m.has_source(), m.source(), "source");
      l.word = m.word();
      l.gbits = m.gbits();
      l.source = m.source();
      out.link_generations.push_back(std::move(l));
    }
    for (int i = 0; i < msg.dated_names_size(); ++i) {
      const auto& m = msg.dated_names(i);
      const auto c = item("dated_names", i);
      ReadingVocabulary::DatedName d;
      spellings(c, m.spelled(), d.spelled, "spelled", true);
      c.non_empty(m.has_source(), m.source(), "source");
      if (const auto month = parse_year_month(m.date())) {
        d.date = *month;
      } else {
        c.fail("date", "must be a month written YYYY-MM (got '" + m.date() + "')");
      }
      d.source = m.source();
      out.dated_names.push_back(std::move(d));
    }
    for (int i = 0; i < msg.gpu_architectures_size(); ++i) {
      const auto& m = msg.gpu_architectures(i);
      const auto c = item("gpu_architectures", i);
      ReadingVocabulary::GpuArchitecture a;
      c.non_empty(m.has_word(), m.word(), "word");
      c.non_empty(m.has_part(), m.part(), "part");
      const bool known = std::any_of(out.gpu_parts.begin(), out.gpu_parts.end(), [&](const auto& g) {
        return std::find(g.spelled.begin(), g.spelled.end(), m.part()) != g.spelled.end();
      });
      if (!m.part().empty() && !known) c.fail("part", "'" + m.part() + "' is no spelling of a gpu_parts entry");
      spellings(c, m.unless(), a.unless, "unless", false);
      c.non_empty(m.has_source(), m.source(), "source");
      a.word = m.word();
      a.part = m.part();
      a.source = m.source();
      out.gpu_architectures.push_back(std::move(a));
    }
    for (int i = 0; i < msg.framework_spellings_size(); ++i) {
      const auto& m = msg.framework_spellings(i);
      const auto c = item("framework_spellings", i);
      ReadingVocabulary::FrameworkSpelling f;
      c.non_empty(m.has_as(), m.as(), "as");
      spellings(c, m.spelled(), f.spelled, "spelled", true);
      c.non_empty(m.has_source(), m.source(), "source");
      f.as = m.as();
      f.whole_word = m.whole_word();
      f.source = m.source();
      out.framework_spellings.push_back(std::move(f));
    }
    std::array<bool, kNumWordLists> given{};
    for (int i = 0; i < msg.words_size(); ++i) {
      const auto& m = msg.words(i);
      const auto c = item("words", i);
      const int index = rule_index<Words>(m.rule(), kNumWordLists, word_list_name);
      if (!c.require(m.has_rule(), "rule")) continue;
      if (index < 0) {
        c.fail("rule", "no reading rule reads a list '" + m.rule() + "'");
        continue;
      }
      if (given[static_cast<std::size_t>(index)]) c.fail("rule", "list '" + m.rule() + "' given twice");
      given[static_cast<std::size_t>(index)] = true;
      auto& list = out.words[static_cast<std::size_t>(index)];
      if (const auto match = word_match(m.match())) {
        list.match = *match;
      } else {
        c.fail("match", "unknown value '" + m.match() + "' (one of text, words, first-word, letters, pattern)");
      }
      spellings(c, m.spelled(), list.spelled, "spelled", true);
      if (list.match == WordMatch::kPattern) {
        for (const auto& w : list.spelled) {
          try {
            list.patterns.emplace_back(w);
          } catch (const std::regex_error& e) {
            c.fail("spelled", "'" + w + "' is not a regular expression (" + e.what() + ")");
          }
        }
      }
      c.non_empty(m.has_source(), m.source(), "source");
      list.source = m.source();
    }
    for (int i = 0; i < msg.numbers_size(); ++i) {
      const auto& m = msg.numbers(i);
      const auto c = item("numbers", i);
      const int index = rule_index<Numbers>(m.rule(), kNumNumberRules, number_rule_name);
      if (!c.require(m.has_rule(), "rule")) continue;
      if (index < 0) {
        c.fail("rule", "no reading rule reads a number '" + m.rule() + "'");
        continue;
      }
      ReadingVocabulary::NumberPattern n;
      c.non_empty(m.has_pattern(), m.pattern(), "pattern");
      n.pattern = m.pattern();
      try {
        n.compiled = std::regex(m.pattern());
        if (n.compiled.mark_count() == 0 && !m.has_value()) c.fail("pattern", "captures no number and no value is given");
      } catch (const std::regex_error& e) {
        c.fail("pattern", "'" + m.pattern() + "' is not a regular expression (" + e.what() + ")");
      }
      if (m.has_value()) n.value = m.value();
      if (m.has_divide_by()) c.positive(true, m.divide_by(), "divide_by");
      n.divide_by = m.has_divide_by() ? m.divide_by() : 1.0;
      n.invert = m.invert();
      c.non_empty(m.has_source(), m.source(), "source");
      n.source = m.source();
      out.numbers[static_cast<std::size_t>(index)].push_back(std::move(n));
    }
    for (int n = 0; n < kNumNumberRules; ++n) {
      if (out.numbers[static_cast<std::size_t>(n)].empty()) {
        top.fail("numbers", "no pattern for the rule '" + std::string(number_rule_name(static_cast<Numbers>(n))) + "'");
      }
    }
    for (int w = 0; w < kNumWordLists; ++w) {
      if (!given[static_cast<std::size_t>(w)]) {
        top.fail("words", "no list for the rule '" + std::string(word_list_name(static_cast<Words>(w))) + "'");
      }
    }
  }
  diags.throw_if_any();
  return out;
}

}  // namespace ts::config
