// The validation's reading vocabulary (reading/published-runs.textproto): the shipped file, and
// every problem of a broken one with its line and field.
#include "sim/config/reading_loader.h"

#include <catch2/catch.hpp>

#include "sim/config/loader.h"

#include "tests/unit/config/config_test_util.h"

namespace ts::config {
namespace {

using test::TempDir;

TEST_CASE("the shipped reading vocabulary loads, each entry with its source") {
  const auto v = load_reading_vocabulary();
  REQUIRE(v.model_families.size() >= 2);
  REQUIRE_FALSE(v.released_widths.empty());
  REQUIRE_FALSE(v.gpu_parts.empty());
  REQUIRE_FALSE(v.link_generations.empty());
  for (const auto& f : v.model_families) CHECK(f.source.size() > 10);
  for (const auto& w : v.released_widths) {
    INFO(w.model);
    CHECK(w.source.size() > 10);
    // Meta's multipliers are >= 1: a released width is at least the 8h/3 rule's.
    CHECK(w.ffn_hidden >= 8 * w.hidden / 3);
  }
  for (const auto& g : v.gpu_parts) {
    INFO(g.cluster);
    CHECK(g.source.size() > 10);
    // The cluster exists in the zoo and loads.
    CHECK_NOTHROW(load_cluster(g.cluster));
  }
  for (const auto& l : v.link_generations) CHECK(l.source.size() > 10);
  // Rack-scale parts come before the parts whose names theirs contain ("gb200" contains "b200").
  const auto first = [&](std::string_view word) {
    for (std::size_t i = 0; i < v.gpu_parts.size(); ++i) {
      for (const auto& w : v.gpu_parts[i].spelled) {
        if (w == word) return i;
      }
    }
    return v.gpu_parts.size();
  };
  CHECK(first("gb200") < first("b200"));
  CHECK(first("gb300") < first("b300"));
}

TEST_CASE("a bad reading vocabulary names each problem's line and field") {
  TempDir dir;
  const std::string path = dir.write("vocab.textproto",
                                     "model_families { style: \"t5\" spelled: [\"t5\"] source: \"x\" }\n"
                                     "released_widths { llama_release: 3 hidden: 0 ffn_hidden: 1 source: \"x\" }\n"
                                     "gpu_parts { spelled: [\"\"] cluster: \"no-such\" nominal_gb: 80 source: \"x\" }\n"
                                     "link_generations { word: \"n|dr\" gbits: 400 }\n"
                                     "dated_names { spelled: [\"v1\"] date: \"2025\" source: \"x\" }\n");
  const auto ds = test::diagnostics_of([&] { load_reading_vocabulary(path); });
  INFO(test::dump(ds));
  const auto* style = test::find_field(ds, "model_families[0].style");
  REQUIRE(style != nullptr);
  CHECK(style->line == 1);
  CHECK(test::find_field(ds, "released_widths[0].hidden") != nullptr);
  CHECK(test::find_field(ds, "gpu_parts[0].spelled") != nullptr);
  const auto* cluster = test::find_field(ds, "gpu_parts[0].cluster");
  REQUIRE(cluster != nullptr);
  CHECK(cluster->line == 3);
  CHECK(test::find_field(ds, "link_generations[0].word") != nullptr);
  CHECK(test::find_field(ds, "link_generations[0].source") != nullptr);
  const auto* date = test::find_field(ds, "dated_names[0].date");
  REQUIRE(date != nullptr);
  CHECK(date->line == 5);
  CHECK(ds.front().file == path);
}

TEST_CASE("the reading rules' word lists load, bad ones are named") {
  const auto v = load_reading_vocabulary();
  for (int w = 0; w < kNumWordLists; ++w) {
    INFO(word_list_name(static_cast<Words>(w)));
    CHECK_FALSE(v.list(static_cast<Words>(w)).spelled.empty());
    CHECK(v.list(static_cast<Words>(w)).source.size() > 5);
  }
  CHECK(v.list(Words::kZero3).match == WordMatch::kWords);
  for (int n = 0; n < kNumNumberRules; ++n) {
    INFO(number_rule_name(static_cast<Numbers>(n)));
    CHECK_FALSE(v.patterns(static_cast<Numbers>(n)).empty());
    for (const auto& p : v.patterns(static_cast<Numbers>(n))) CHECK(p.source.size() > 5);
  }
  REQUIRE_FALSE(v.framework_spellings.empty());

  TempDir dir;
  const std::string path = dir.write("vocab.textproto",
                                     "words { rule: \"zero-9\" spelled: [\"x\"] source: \"s\" }\n"
                                     "words { rule: \"zero-1\" match: \"regex\" spelled: [\"x\"] source: \"s\" }\n"
                                     "words { rule: \"zero-1\" spelled: [\"\"] source: \"s\" }\n"
                                     "words { rule: \"sgd\" match: \"pattern\" spelled: [\"(sgd\"] source: \"s\" }\n"
                                     "numbers { rule: \"shard-group\" pattern: \"shard\" source: \"s\" }\n"
                                     "framework_spellings { as: \"x\" spelled: [\"y\"] }\n"
                                     "gpu_architectures { word: \"volta\" part: \"v100\" source: \"s\" }\n");
  const auto ds = test::diagnostics_of([&] { load_reading_vocabulary(path); });
  INFO(test::dump(ds));
  const auto* unknown = test::find_field(ds, "words[0].rule");
  REQUIRE(unknown != nullptr);
  CHECK(unknown->line == 1);
  const auto* match = test::find_field(ds, "words[1].match");
  REQUIRE(match != nullptr);
  CHECK(match->line == 2);
  CHECK(test::find_field(ds, "words[2].rule") != nullptr);     // given twice
  CHECK(test::find_field(ds, "words[2].spelled") != nullptr);  // empty spelling
  CHECK(test::find_field(ds, "words[3].spelled") != nullptr);  // not a regular expression
  CHECK(test::find_field(ds, "numbers[0].pattern") != nullptr);  // neither a capture nor a value
  CHECK(test::find_field(ds, "numbers") != nullptr);  // the other rules' patterns are missing
  CHECK(test::find_field(ds, "framework_spellings[0].source") != nullptr);
  CHECK(test::find_field(ds, "gpu_architectures[0].part") != nullptr);  // no such GPU part
  CHECK(test::find_field(ds, "words") != nullptr);  // the other rules' lists are missing
}

}  // namespace
}  // namespace ts::config
