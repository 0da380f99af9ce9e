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
                                     "link_generations { word: \"n|dr\" gbits: 400 }\n");
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
  CHECK(ds.front().file == path);
}

}  // namespace
}  // namespace ts::config
