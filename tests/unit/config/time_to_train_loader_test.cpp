// Loading of the time-to-train data file: the shipped file, and every problem of a broken one.
#include "sim/config/time_to_train_loader.h"
#include "sim/config/loader.h"

#include <catch2/catch.hpp>

#include "tests/unit/config/config_test_util.h"

namespace ts::config {
namespace {

using test::TempDir;

TEST_CASE("the shipped time-to-train data loads with sources for every value") {
  const longrun::TrainData d = load_time_to_train_data();
  REQUIRE_FALSE(d.failures.empty());
  double unplanned = 0, planned = 0;
  for (const auto& f : d.failures) {
    CHECK_FALSE(f.source.empty());
    CHECK(f.rate_per_unit_day > 0);
  }
  // The counts of Llama 3's Table 5 and sec. 3.3.4 add up to the 419 unexpected and 47 planned.
  for (const auto& f : d.failures) {
    const double units = f.per == longrun::FailureUnit::kNode ? 2048 : 16384;
    (f.planned ? planned : unplanned) += f.rate_per_unit_day * units * 54;
  }
  CHECK(unplanned == Approx(419));
  CHECK(planned == Approx(47));
  // Every zoo cluster's GPU has an entry (plan's energy is never unknown for a shipped cluster),
  // whose busy power is the cluster file's per-GPU power: one figure in both files.
  for (const auto& name : zoo_clusters()) {
    const Cluster c = load_cluster(name);
    INFO(name << ": " << c.gpu.name);
    const longrun::PowerProfile* p = d.power_for(c.gpu.name);
    REQUIRE(p != nullptr);
    CHECK(p->busy_w > p->idle_w);
    CHECK(p->busy_w == Approx(c.gpu.power_watts));
  }
  CHECK(d.power_for("h100-sxm5-96gb") != nullptr);  // any case
  CHECK(d.power_for("B200") == nullptr);  // a GPU name, not a kind
  CHECK(d.pue >= 1);
  CHECK(d.checkpoint_gbytes_per_s > 0);
}

TEST_CASE("a broken time-to-train file reports every problem with its line and field") {
  TempDir dir;
  const std::string path =
      dir.write("ttt.textproto",
                "failures {\n"                   // 1
                "  name: \"gpu\"\n"              // 2
                "  per: \"rack\"\n"              // 3
                "  observed_interruptions: 1\n"  // 4
                "  observed_units: 0\n"          // 5
                "  observed_days: 1\n"           // 6
                "}\n"                            // 7
                "failures { name: \"gpu\" per: \"gpu\" observed_interruptions: 1 "
                "observed_units: 1 observed_days: 1 source: \"x\" }\n"  // 8
                "pue: 0.9\n"                                            // 9
                "pue_source: \"x\"\n");                                 // 10
  const auto ds = test::diagnostics_of([&] { load_time_to_train_data(path); });
  INFO(test::dump(ds));
  const Diagnostic* per = test::find_field(ds, "failures[0].per");
  REQUIRE(per);
  CHECK(per->line == 3);
  CHECK(test::find_field(ds, "failures[0].observed_units"));
  CHECK(test::find_field(ds, "failures[0].source"));
  CHECK(test::find_field(ds, "failures[1].name"));  // given twice
  const Diagnostic* pue = test::find_field(ds, "pue");
  REQUIRE(pue);
  CHECK(pue->line == 9);
  CHECK(test::find_field(ds, "checkpoint_gbytes_per_s"));  // missing
  CHECK(test::find_field(ds, "restart_source"));
}

}  // namespace
}  // namespace ts::config
