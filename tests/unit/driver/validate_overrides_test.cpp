// Per-row overrides of a published-runs file (FILE.overrides.textproto): read with the CSV,
// applied after the reading rules with their reason and source, counted in the summary, and bad
// override files rejected with their line and field.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "sim/config/names.h"
#include "sim/driver/validate.h"
#include "tests/unit/config/config_test_util.h"

using namespace ts;

namespace {

using config::test::source_dir;

const driver::PublishedRun& run_by_id(const std::vector<driver::PublishedRun>& runs,
                                      const std::string& id) {
  for (const auto& r : runs) {
    if (r.run_id == id) return r;
  }
  FAIL("no run " << id);
  return runs.front();
}

// The public file's header and its MsT row 368, written as FILE.csv in `dir`.
std::string write_mst_row(const config::test::TempDir& dir, const std::string& name) {
  std::ifstream in(source_dir() / "tests/validation/public-runs.csv");
  std::string line, header, row;
  std::getline(in, header);
  while (std::getline(in, line)) {
    if (line.rfind("368,", 0) == 0) row = line;
  }
  REQUIRE_FALSE(row.empty());
  return dir.write(name, header + "\n" + row + "\n");
}

}  // namespace

TEST_CASE(
    "validation overrides: the MsT rows take their source's settings from the overrides file") {
  const auto runs = driver::read_published_runs(source_dir() / "tests/validation/public-runs.csv");
  std::int64_t with = 0;
  for (const auto& r : runs) with += r.overrides.empty() ? 0 : 1;
  CHECK(with == 2);
  for (const char* id : {"368", "369"}) {
    INFO("run " << id);
    const auto& r = run_by_id(runs, id);
    REQUIRE(r.overrides.size() == 1);
    const auto m = driver::map_run(r);
    REQUIRE(m.scenario);
    CHECK(m.scenario->plan.mst_chunks == 8);
    CHECK(m.scenario->plan.optimizer_states == parallel::OptimizerStates::kBf16);
    CHECK(m.scenario->plan.optimizer_in_backward);
    bool noted = false;
    for (const auto& a : m.assumptions)
      noted = noted || (a.rfind("override: MsT chunks 8", 0) == 0 &&
                        a.find("2407.15892") != std::string::npos);
    CHECK(noted);
  }
}

TEST_CASE("validation overrides: without its override the row gets no per-row settings") {
  config::test::TempDir dir;
  const auto path = write_mst_row(dir, "mst.csv");  // no mst.overrides.textproto beside it
  const auto runs = driver::read_published_runs(path);
  REQUIRE(runs.size() == 1);
  CHECK(runs[0].overrides.empty());
  const auto m = driver::map_run(runs[0]);
  REQUIRE(m.scenario);
  CHECK(m.scenario->plan.mst_chunks == 1);
  CHECK_FALSE(m.scenario->plan.optimizer_in_backward);
  // Counted in the summary when present.
  driver::RowResult a, b;
  b.overrides = 1;
  CHECK(driver::summarize({a, b, b}).overridden == 2);
}

TEST_CASE("validation overrides: a bad overrides file names its line and field") {
  config::test::TempDir dir;
  const auto path = write_mst_row(dir, "bad.csv");
  dir.write("bad.overrides.textproto",
            "overrides { run_id: \"999\" reason: \"r\" source: \"s\" mst_chunks: 8 }\n"  // 1
            "overrides {\n"                                                              // 2
            "  run_id: \"368\"\n"                                                        // 3
            "  reason: \"r\"\n"                                                          // 4
            "  optimizer_states: \"fp64\"\n"                                             // 5
            "  grad_reduce: \"fp8\"\n"                                                   // 6
            "}\n");
  const auto ds = config::test::diagnostics_of([&] { driver::read_published_runs(path); });
  INFO(config::test::dump(ds));
  const Diagnostic* states = config::test::find_field(ds, "overrides[1].optimizer_states");
  REQUIRE(states);
  CHECK(states->line == 5);
  CHECK(config::test::find_field(ds, "overrides[1].source"));
  const Diagnostic* reduce = config::test::find_field(ds, "overrides[1].grad_reduce");
  REQUIRE(reduce);
  CHECK(reduce->line == 6);
  // Both name the value and the choices (one helper for every enum-like field).
  CHECK(states->message == "unknown value 'fp64' (one of " + config::optimizer_states_choices() + ")");
  CHECK(reduce->message == "unknown value 'fp8' (one of " + config::grad_reduce_choices() + ")");
  dir.write("bad.overrides.textproto",
            "overrides { run_id: \"999\" reason: \"r\" source: \"s\" mst_chunks: 8 }\n");
  const auto d = config::test::first_diagnostic([&] { driver::read_published_runs(path); });
  CHECK(d.field == "run_id");
  CHECK(d.line == 1);
  CHECK(d.message.find("no run 999") != std::string::npos);
}

TEST_CASE("validation overrides: MLPerf Blackwell rows get their placement") {
  const auto runs = driver::read_published_runs(source_dir() / "tests/validation/blackwell-public.csv");
  for (const char* id : {"1", "2"}) {
    INFO("run " << id);
    const auto& r = run_by_id(runs, id);
    const auto m = driver::map_run(r);
    REQUIRE(m.scenario);
    CHECK(m.scenario->cluster.cluster.scale_up.gpus_per_domain == 72);
    CHECK(m.scenario->cluster.cluster.scale_up.placed_per_domain() == 64);
    using parallel::Axis;
    CHECK(m.scenario->plan.order == std::vector<Axis>{Axis::kTp, Axis::kCp, Axis::kPp, Axis::kDp});
  }
  // The 8-GPU row keeps the default placement.
  const auto m = driver::map_run(run_by_id(runs, "3"));
  REQUIRE(m.scenario);
  CHECK(m.scenario->cluster.cluster.scale_up.placed_per_domain() == 72);
  // NVIDIA's MLPerf pretrain.py reduces gradients in bf16 (grad_reduce_in_fp32=False), where the
  // NeMo profile says fp32: every row of the file takes the override.
  for (const char* id : {"1", "2", "3", "4"}) {
    INFO("run " << id);
    const auto mm = driver::map_run(run_by_id(runs, id));
    REQUIRE(mm.scenario);
    CHECK(mm.scenario->plan.grad_reduce == parallel::GradReduce::kBf16);
  }
}

TEST_CASE("validation overrides: BLOOM search rows run with launch blocking") {
  const auto runs =
      driver::read_published_runs(source_dir() / "tests/validation/multinode-ranking.csv");
  REQUIRE(runs.size() == 39);
  for (const auto& r : runs) {
    INFO("run " << r.run_id);
    REQUIRE(r.overrides.size() == 1);
    const auto m = driver::map_run(r);
    REQUIRE(m.scenario);
    CHECK(m.scenario->plan.launch_blocking);
  }
  // Rows of other files keep asynchronous launches.
  const auto m = driver::map_run(run_by_id(
      driver::read_published_runs(source_dir() / "tests/validation/blackwell-public.csv"), "3"));
  REQUIRE(m.scenario);
  CHECK_FALSE(m.scenario->plan.launch_blocking);
}

TEST_CASE("validation overrides: a bad placement names its line") {
  config::test::TempDir dir;
  std::ifstream in(source_dir() / "tests/validation/blackwell-public.csv");
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  const auto path = dir.write("bw.csv", header + "\n" + row + "\n");
  dir.write("bw.overrides.textproto",
            "overrides {\n"                        // 1
            "  run_id: \"1\"\n"                    // 2
            "  reason: \"r\" source: \"s\"\n"      // 3
            "  gpus_per_domain: 70\n"              // 4
            "}\n"
            "overrides { run_id: \"2\" reason: \"r\" source: \"s\" order: \"tp,xx\" }\n");
  const auto bad_order = config::test::first_diagnostic([&] { driver::read_published_runs(path); });
  CHECK(bad_order.field == "overrides[1].order");
  CHECK(bad_order.line == 6);
  dir.write("bw.overrides.textproto",
            "overrides {\n  run_id: \"1\"\n  reason: \"r\" source: \"s\"\n  gpus_per_domain: 70\n}\n");
  const auto runs = driver::read_published_runs(path);
  REQUIRE(runs.size() == 1);
  const auto d = config::test::first_diagnostic([&] { driver::map_run(runs[0]); });
  CHECK(d.field == "gpus_per_domain");
  CHECK(d.line == 2);
  CHECK(d.message.find("multiple of 4") != std::string::npos);
}
