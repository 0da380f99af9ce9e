// Megatron-style pipeline layout strings (sim/parallel/pp_layout.h): expansion, errors with their
// position, and the checks against a plan and a model.
#include <catch2/catch.hpp>

#include "sim/parallel/pp_layout.h"

using ts::parallel::check_pp_layout;
using ts::parallel::layout_stage_layers;
using ts::parallel::parse_pp_layout;

TEST_CASE("pp layout: repetition, groups, commas and empty stages") {
  // The Megatron-Core guide's example for DeepSeek-V3 (61 layers, one MTP layer, PP 16 VPP 2).
  const auto ds = parse_pp_layout("Et*3|(tt|)*29,m|L");
  REQUIRE(ds.error_position == 0);
  REQUIRE(ds.stages.size() == 32);
  CHECK(ds.stages[0].embedding);
  CHECK(ds.stages[0].layers == 3);
  CHECK(ds.stages[29].layers == 2);
  CHECK(ds.stages[30].mtp == 1);
  CHECK(ds.stages[30].layers == 0);
  CHECK(ds.stages[31].loss);
  CHECK(ds.stages[31].layers == 0);
  // Its standalone MTP stage is parsed but not run: trainsim lowers MTP layers with the loss.
  CHECK(check_pp_layout(ds.stages, 32, 61, 1).find("standalone") != std::string::npos);
  // The example: embedding with a layer, 30 stages of two, MTP and loss last.
  const auto e = parse_pp_layout("Et|(tt|)*30mL");
  REQUIRE(e.stages.size() == 32);
  CHECK(e.stages[31].mtp == 1);
  CHECK(e.stages[31].loss);
  CHECK(check_pp_layout(e.stages, 32, 61, 1).empty());
  const auto empty = parse_pp_layout("E||t|L");
  REQUIRE(empty.stages.size() == 4);
  CHECK(layout_stage_layers(empty.stages) == std::vector<std::int64_t>{0, 0, 1, 0});
  CHECK(layout_stage_layers(parse_pp_layout("E(t*2|)*2tL").stages) == std::vector<std::int64_t>{2, 2, 1});
  CHECK(layout_stage_layers(parse_pp_layout("E((t|)*2)*2L").stages) ==
        std::vector<std::int64_t>{1, 1, 1, 1, 0});
}

TEST_CASE("pp layout: malformed strings name the position") {
  const auto at = [](const char* s) { return parse_pp_layout(s).error_position; };
  CHECK(at("") == 1);
  CHECK(at("Et|x|L") == 4);
  CHECK(at("Et|(tt|L") == 4);
  CHECK(at("Et|(tt|*2L") == 4);  // "|*2" repeats the bar; the group stays open
  CHECK(at("Et|tt)|L") == 6);
  CHECK(at("Et*|L") == 3);
  CHECK(at("Et*0|L") == 3);
  CHECK(at("E()*2|L") == 2);
  CHECK(at("tE|L") == 2);
  CHECK(at("EtLt") == 4);
  CHECK(at("Et|tt|L") == 0);
}

TEST_CASE("pp layout: stage count, E first, L last, layer totals") {
  const auto l = parse_pp_layout("Et|tt|tL").stages;
  CHECK(check_pp_layout(l, 3, 4, 0).empty());
  CHECK(check_pp_layout(l, 4, 4, 0).find("lists 3 stages") != std::string::npos);
  CHECK(check_pp_layout(l, 3, 5, 0).find("has 4 't'") != std::string::npos);
  CHECK(check_pp_layout(l, 3, 4, 1).find("'m'") != std::string::npos);
  CHECK(check_pp_layout(parse_pp_layout("t|Et|tL").stages, 3, 4, 0).find("'E'") != std::string::npos);
  CHECK(check_pp_layout(parse_pp_layout("EtL|tt|t").stages, 3, 4, 0).find("'L'") != std::string::npos);
}
