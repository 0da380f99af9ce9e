// Reading vocabulary file: parse, validate (all problems at once), convert to ReadingVocabulary.
#include "sim/config/reading_loader.h"

#include <algorithm>

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
  }
  diags.throw_if_any();
  return out;
}

}  // namespace ts::config
