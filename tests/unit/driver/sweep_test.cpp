// Sweeps (sim/driver/sweep.h): plan enumeration and its counted rejections, sharding, the
// ordered and resumable CSV output, merge; hardware sizing (sim/driver/plan_hw.h).
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>

#include "sim/base/diagnostic.h"
#include "sim/driver/plan_hw.h"
#include "sim/driver/sweep.h"
#include "sim/ir/model_graph.h"
#include "tests/unit/config/config_test_util.h"

using namespace ts;
using driver::SweepAxes;
using driver::SweepSpec;
using parallel::Recompute;
using parallel::Schedule;

namespace {

std::string slurp(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

using config::test::TempDir;

// Llama 3 8B on 16 H100s, a small sweep whose plans simulate in about a millisecond each.
SweepSpec small_spec() {
  SweepSpec s;
  s.model = config::load_model("llama3-8b");
  s.cluster = config::load_cluster("dgx-h100");
  s.num_gpus = 16;
  s.base.global_batch = 32;
  s.base.seq_len = 2048;
  s.axes.tp = {1, 2, 4, 8};
  s.axes.pp = {1, 2, 4};
  s.axes.micro_batch = {1, 2};
  s.axes.schedule = {Schedule::k1F1B, Schedule::kInterleaved};
  s.axes.zero = {0, 1};
  s.axes.sequence_parallel = {false, true};
  s.axes.recompute = {Recompute::kNone, Recompute::kFull};
  return s;
}


}  // namespace

TEST_CASE("sweep: divisors in ascending order") {
  CHECK(driver::divisors(1) == std::vector<std::int64_t>{1});
  CHECK(driver::divisors(12) == std::vector<std::int64_t>{1, 2, 3, 4, 6, 12});
  CHECK(driver::divisors(49) == std::vector<std::int64_t>{1, 7, 49});
  // 2240 = 2^6·5·7 has (6+1)(1+1)(1+1) = 28 divisors.
  CHECK(driver::divisors(2240).size() == 28);
}

TEST_CASE("sweep: every enumerated plan is valid, distinct and counted") {
  const SweepSpec spec = small_spec();
  const auto en = driver::enumerate_plans(spec);
  REQUIRE_FALSE(en.plans.empty());
  // Each combination is a plan, an invalid one or one equivalent to an earlier one.
  CHECK(en.combinations == static_cast<std::int64_t>(en.plans.size()) + en.rejected + en.equivalent);
  std::set<std::string> keys;
  for (const auto& p : en.plans) {
    CHECK(config::check_plan(p, spec.model, spec.cluster, spec.num_gpus).empty());
    CHECK(p.num_gpus() == spec.num_gpus);
    CHECK(keys.insert(driver::sweep_plan_key(spec, p)).second);
    // Axes without effect take their first value only.
    if (p.dp == 1) CHECK(p.zero_stage == 0);
    if (p.tp == 1) CHECK_FALSE(p.sequence_parallel);
    if (p.schedule != Schedule::kInterleaved) CHECK(p.vpp == 1);
    if (p.schedule == Schedule::kInterleaved) CHECK(p.vpp >= 2);
  }
  // Nested-loop order: tp is the outermost axis.
  for (std::size_t i = 1; i < en.plans.size(); ++i) CHECK(en.plans[i - 1].tp <= en.plans[i].tp);
  // Reasons are sorted by count and the counts add up to at least the rejected plans.
  std::int64_t sum = 0;
  for (std::size_t i = 0; i < en.reasons.size(); ++i) {
    sum += en.reasons[i].count;
    if (i > 0) CHECK(en.reasons[i - 1].count >= en.reasons[i].count);
  }
  CHECK(sum >= en.rejected);
}

TEST_CASE("sweep: a rule keeps the digits of names and drops numbers") {
  SweepSpec spec = small_spec();
  spec.model = config::load_model("qwen3-30b-a3b");  // 128 routed experts
  spec.num_gpus = 8;
  spec.base.global_batch = 8;
  spec.base.sequence_parallel = false;
  spec.axes.tp = {1};
  spec.axes.pp = {1};
  spec.axes.cp = {1};
  spec.axes.micro_batch = {1};
  spec.axes.schedule = {Schedule::k1F1B};
  spec.axes.zero = {0};
  spec.axes.sequence_parallel = {false};
  spec.axes.recompute = {Recompute::kNone};
  spec.axes.ep = {3};  // does not divide 128
  const auto en = driver::enumerate_plans(spec);
  CHECK(en.plans.empty());
  bool found = false;
  for (const auto& r : en.reasons) {
    INFO(r.rule);
    CHECK(r.rule.find("qwenN") == std::string::npos);
    found = found || r.rule == "--ep: N must divide the routed experts of qwen3-30b-a3b";
  }
  CHECK(found);
}

TEST_CASE("sweep: invalid plans are counted by rule, numbers removed") {
  SweepSpec spec = small_spec();
  // Llama 3 8B has 32 layers: pp 3 divides 48 (a divisor of the GPU count below) but not 32.
  spec.num_gpus = 48;
  spec.base.global_batch = 48;
  spec.axes.tp = {1};
  spec.axes.pp = {3};
  spec.axes.cp = {1};
  spec.axes.micro_batch = {1};
  spec.axes.schedule = {Schedule::k1F1B};
  spec.axes.zero = {0};
  spec.axes.sequence_parallel = {false};
  spec.axes.recompute = {Recompute::kNone, Recompute::kSelective, Recompute::kFull};
  const auto en = driver::enumerate_plans(spec);
  CHECK(en.plans.empty());
  CHECK(en.rejected == 3);
  REQUIRE(en.reasons.size() == 1);
  CHECK(en.reasons[0].count == 3);
  CHECK(en.reasons[0].rule.rfind("--pp: must divide num_layers", 0) == 0);
  CHECK(en.reasons[0].rule.find('(') == std::string::npos);
  CHECK(en.reasons[0].example.find("32") != std::string::npos);  // the full message keeps details
  // No blank is left before the comma that followed the removed details.
  CHECK(en.reasons[0].rule.find(" ,") == std::string::npos);
  // Each plan had stages that do not divide the layers under the even split: the hint counts
  // them; a balanced split sweeps the same pipelines as valid plans.
  CHECK(en.uneven_stages == 3);
  spec.axes.pp_split = {parallel::PipelineSplit::kBalanced};
  const auto balanced = driver::enumerate_plans(spec);
  CHECK(balanced.plans.size() == 3);
  CHECK(balanced.uneven_stages == 0);
}

TEST_CASE("sweep: fixed axes restrict the plans, bad lists name their flag") {
  SweepSpec spec = small_spec();
  spec.axes.tp = {8, 4, 8};  // unsorted, with a duplicate
  spec.axes.dp = {2};
  const auto en = driver::enumerate_plans(spec);
  REQUIRE_FALSE(en.plans.empty());
  for (const auto& p : en.plans) {
    CHECK((p.tp == 4 || p.tp == 8));
    CHECK(p.dp == 2);
  }
  spec.axes.tp = {0};
  CHECK(config::test::first_diagnostic([&] { driver::enumerate_plans(spec); }).field == "--tp");
  spec.axes.tp = {8};
  spec.axes.schedule.clear();
  CHECK(config::test::first_diagnostic([&] { driver::enumerate_plans(spec); }).field == "--schedule");
}

TEST_CASE("sweep: ZeRO-3 shard groups are an axis of ZeRO-3 plans only") {
  SweepSpec spec = small_spec();
  spec.axes.tp = {1};
  spec.axes.pp = {1};
  spec.axes.cp = {1};
  spec.axes.micro_batch = {1};
  spec.axes.schedule = {Schedule::k1F1B};
  spec.axes.sequence_parallel = {false};
  spec.axes.recompute = {Recompute::kFull};
  spec.axes.zero = {1, 3};
  spec.axes.zero_shard_group.clear();  // all: full sharding and every proper divisor of dp = 16
  auto en = driver::enumerate_plans(spec);
  std::multiset<std::int64_t> zero3_groups;
  std::set<std::string> keys;
  for (const auto& p : en.plans) {
    CHECK(keys.insert(driver::sweep_plan_key(spec, p)).second);
    if (p.zero_stage == 3) {
      zero3_groups.insert(p.zero_shard_group);
    } else {
      CHECK(p.zero_shard_group == 0);
    }
  }
  CHECK(zero3_groups == std::multiset<std::int64_t>{0, 2, 4, 8});
  CHECK(en.plans.size() == 5);
  CHECK(en.equivalent == 0);

  // A listed group of all 16 ranks is full sharding again; one that does not divide 16 is
  // rejected by the plan check; ZeRO-1 plans take the first value only.
  spec.axes.zero_shard_group = {16, 4, 0, 3};
  en = driver::enumerate_plans(spec);
  zero3_groups.clear();
  for (const auto& p : en.plans) {
    if (p.zero_stage == 3) zero3_groups.insert(p.zero_shard_group);
  }
  CHECK(zero3_groups == std::multiset<std::int64_t>{0, 4});
  CHECK(en.plans.size() == 3);
  CHECK(en.equivalent == 3 + 1);  // ZeRO-1 with the other three values; 16 after 0
  CHECK(en.rejected == 1);
  REQUIRE(en.reasons.size() == 1);
  CHECK(en.reasons[0].rule.rfind("--zero-shard-group", 0) == 0);

  // The group is a column of the CSV, so that merged and resumed files keep the plans apart.
  const auto header = driver::split_csv_line(driver::sweep_csv_header());
  CHECK(std::count(header.begin(), header.end(), "zero_shard_group") == 1);
  spec.axes.zero_shard_group = {-1};
  CHECK(config::test::first_diagnostic([&] { driver::enumerate_plans(spec); }).field == "--zero-shard-group");
}

TEST_CASE("sweep: shards from --shard and from a Slurm job array") {
  const auto s = driver::parse_shard("1/4", "--shard");
  CHECK(s.index == 1);
  CHECK(s.count == 4);
  CHECK(s.contains(5));
  CHECK_FALSE(s.contains(6));
  CHECK(config::test::first_diagnostic([] { driver::parse_shard("4/4", "--shard"); }).field == "--shard");
  CHECK(config::test::first_diagnostic([] { driver::parse_shard("x/2", "--shard"); }).field == "--shard");
  CHECK(config::test::first_diagnostic([] { driver::parse_shard("1", "--shard"); }).field == "--shard");

  std::map<std::string, std::string> env;
  const auto getenv = [&](const char* name) -> const char* {
    const auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  CHECK_FALSE(driver::slurm_shard(getenv).has_value());
  // sbatch --array=3-9:2 → tasks 3, 5, 7, 9: task 7 is the third of four.
  env = {{"SLURM_ARRAY_TASK_ID", "7"}, {"SLURM_ARRAY_TASK_COUNT", "4"},
         {"SLURM_ARRAY_TASK_MIN", "3"}, {"SLURM_ARRAY_TASK_STEP", "2"}};
  const auto slurm = driver::slurm_shard(getenv);
  REQUIRE(slurm.has_value());
  CHECK(slurm->index == 2);
  CHECK(slurm->count == 4);
  env["SLURM_ARRAY_TASK_ID"] = "11";
  CHECK(config::test::first_diagnostic([&] { driver::slurm_shard(getenv); }).field == "SLURM_ARRAY_TASK_ID");
}

TEST_CASE("sweep: CSV lines split with RFC 4180 quoting") {
  CHECK(driver::split_csv_line("1,\"a,b\",\"say \"\"x\"\"\",") ==
        std::vector<std::string>{"1", "a,b", "say \"x\"", ""});
  const auto header = driver::split_csv_line(driver::sweep_csv_header());
  CHECK(header.front() == "plan_id");
  CHECK(header.back() == "reason");
}

TEST_CASE("sweep: the output file is the same for any thread count, shard split or interruption") {
  TempDir dir;
  const SweepSpec spec = small_spec();
  const auto run = [&](const std::filesystem::path& out, int threads, driver::Shard shard = {},
                       std::int64_t stop_after = 0) {
    driver::SweepOptions o;
    o.threads = threads;
    o.out = out;
    o.shard = shard;
    o.stop_after = stop_after;
    return driver::run_sweep(spec, o);
  };
  const auto full = run(dir.path() / "full.csv", 2);
  const std::string reference = slurp(dir.path() / "full.csv");
  const auto n = static_cast<std::int64_t>(full.enumeration.plans.size());
  REQUIRE(n > 20);
  CHECK(full.stats.simulated == n);
  CHECK(static_cast<std::int64_t>(full.records.size()) == n);
  // One header and one row per plan, in plan order.
  CHECK(std::count(reference.begin(), reference.end(), '\n') == n + 1);
  for (std::int64_t i = 0; i < n; ++i) CHECK(full.records[static_cast<std::size_t>(i)].plan_id == i);

  SECTION("one thread") {
    run(dir.path() / "one.csv", 1);
    CHECK(slurp(dir.path() / "one.csv") == reference);
  }
  SECTION("two shards merged") {
    const auto a = run(dir.path() / "s0.csv", 2, {0, 2});
    const auto b = run(dir.path() / "s1.csv", 1, {1, 2});
    CHECK(a.stats.in_shard + b.stats.in_shard == n);
    const auto m = driver::merge_sweep_files({dir.path() / "s1.csv", dir.path() / "s0.csv"});
    CHECK(m.csv == reference);
    CHECK(m.missing_count == 0);
    // Only shard 0: every odd id is missing.
    const auto half = driver::merge_sweep_files({dir.path() / "s0.csv"});
    CHECK(half.missing_count == (n - 1) / 2);
  }
  SECTION("interrupted, with a torn last line, then resumed") {
    const auto path = dir.path() / "resumed.csv";
    const auto first = run(path, 2, {}, n / 3);
    CHECK(first.stats.simulated == n / 3);
    // A write cut short by a kill leaves part of a line.
    std::filesystem::resize_file(path, std::filesystem::file_size(path) - 10);
    const auto second = run(path, 2, {}, n / 3);
    CHECK(second.stats.resumed == n / 3 - 1);
    const auto third = run(path, 1);
    CHECK(third.stats.resumed + third.stats.simulated == n);
    CHECK(slurp(path) == reference);
    // Nothing left to do: the file stays the same.
    const auto again = run(path, 2);
    CHECK(again.stats.simulated == 0);
    CHECK(slurp(path) == reference);
    CHECK(again.records.size() == full.records.size());
  }
  SECTION("a file of another sweep is refused") {
    SweepSpec other = spec;
    other.base.global_batch = 64;
    driver::SweepOptions o;
    o.out = dir.path() / "full.csv";
    const auto d = config::test::first_diagnostic([&] { driver::run_sweep(other, o); });
    CHECK(d.field == "--out");
    CHECK(d.line == 2);
  }
  SECTION("a shard's file is refused by another shard") {
    run(dir.path() / "s0.csv", 2, {0, 2});
    CHECK(config::test::first_diagnostic([&] { run(dir.path() / "s0.csv", 2, {1, 2}); }).field == "--shard");
  }
}

TEST_CASE("sweep: statuses and counts of a run") {
  const SweepSpec spec = small_spec();
  driver::SweepOptions o;
  o.threads = 2;
  const auto r = driver::run_sweep(spec, o);
  const auto& st = r.stats;
  CHECK(st.simulated == static_cast<std::int64_t>(r.enumeration.plans.size()));
  CHECK(st.replayed == st.ok + st.oom);
  CHECK(st.simulated == st.replayed + st.early_oom + st.unsupported);
  CHECK(st.fastest.wall_s <= st.slowest.wall_s);
  CHECK(st.fastest.tasks > 0);
  // tp 1, pp 1, dp 16 without ZeRO holds all 8B parameters' optimizer states: out of memory
  // before any replay (16 bytes per parameter > 80 GB).
  bool static_oom_row = false;
  for (const auto& rec : r.records) {
    if (rec.status == "oom" && rec.line.find(",0,0,0,0,") != std::string::npos) static_oom_row = true;
  }
  CHECK(static_oom_row);
  // Top rows: ok only, best first.
  const auto top = driver::top_records(r.records, 5);
  REQUIRE(top.size() == 5);
  for (std::size_t i = 1; i < top.size(); ++i) CHECK(top[i - 1].tokens_per_s >= top[i].tokens_per_s);
  for (const auto& t : top) CHECK(t.status == "ok");
  const std::string table = driver::format_top_table(top);
  CHECK(std::count(table.begin(), table.end(), '\n') == 6);
}

TEST_CASE("plan: the shipped price table names a cluster, a price and a source for each kind") {
  const auto offers = driver::load_prices(driver::default_prices_path());
  std::map<std::string, driver::GpuOffer> by_kind;
  for (const auto& o : offers) by_kind[o.kind] = o;
  for (const char* k : {"a100", "h100", "h200"}) {
    REQUIRE(by_kind.count(k));
    REQUIRE(by_kind[k].usd_per_gpu_hour.has_value());
    CHECK(*by_kind[k].usd_per_gpu_hour > 0);
    CHECK_FALSE(by_kind[k].source.empty());
    CHECK_NOTHROW(config::load_cluster(by_kind[k].cluster));
  }
}

TEST_CASE("plan: a malformed price table is reported with file and line") {
  TempDir dir;
  const auto path = dir.path() / "prices.csv";
  std::ofstream(path) << "# comment\nkind,cluster,usd_per_gpu_hour,basis,source\nh100,dgx-h100,-3,x,y\n"
                         "h200,hgx-h200,2.5,x,\n";
  try {
    driver::load_prices(path);
    FAIL("no InputError");
  } catch (const InputError& e) {
    REQUIRE(e.diagnostics().size() == 2);
    CHECK(e.diagnostics()[0].line == 3);
    CHECK(e.diagnostics()[0].field == "usd_per_gpu_hour");
    CHECK(e.diagnostics()[1].line == 4);
    CHECK(e.diagnostics()[1].field == "source");
  }
}

TEST_CASE("plan: a fabric variant changes the NIC rate and oversubscription, and the name") {
  const auto c = config::load_cluster("dgx-h100");
  driver::FabricOption f;
  f.nic_gbits = 200;
  f.oversubscription = 2;
  const auto v = driver::apply_fabric(c, f);
  CHECK(v.cluster.host.nic_bandwidth.gbytes_per_s() == Approx(25.0));  // 200 Gb/s = 25 GB/s
  CHECK(v.cluster.fabric.oversubscription == 2.0);
  CHECK(v.cluster.name != c.cluster.name);
  CHECK(driver::fabric_label(v) == "200G x8, 2:1");
  CHECK(driver::apply_fabric(c, driver::FabricOption{}).cluster.name == c.cluster.name);
}

TEST_CASE("plan: the smallest size meeting the deadline, its days, GPU-hours and cost") {
  driver::SizingSpec s;
  s.model = config::load_model("llama3-8b");
  s.base.seq_len = 2048;
  s.base.global_batch = 32;
  s.axes.tp = {1, 2, 8};
  s.axes.pp = {1, 2};
  s.axes.micro_batch = {1};
  s.axes.schedule = {Schedule::k1F1B};
  s.axes.zero = {1};
  s.axes.sequence_parallel = {true};
  s.axes.recompute = {Recompute::kSelective};
  s.offers = {driver::GpuOffer{"h100", "dgx-h100", 2.0, "test", "test"}};
  s.cluster_sizes = {8, 16, 32};
  s.threads = 2;
  // Model FLOPs of 1e9 tokens; 8 H100s at 100 % MFU need F / (8·989e12) seconds.
  s.tokens = 1e9;
  const double flops = ir::model_flops(s.model, s.base.seq_len, s.tokens).value();
  const double ideal8_days = flops / (8 * 989e12) / 86400;
  // A deadline 8 GPUs cannot meet even at 100 % MFU, 16 GPUs at 60 % can.
  s.days = ideal8_days * 0.9;
  const auto choices = driver::plan_hardware(s);
  REQUIRE(choices.size() == 1);
  const auto& c = choices[0];
  REQUIRE(c.trials.size() >= 2);
  CHECK(c.trials[0].num_gpus == 8);
  CHECK(c.trials[0].plans == 0);  // skipped without simulation
  CHECK(c.trials[0].outcome.rfind("skipped", 0) == 0);
  REQUIRE(c.found);
  CHECK(c.num_gpus == c.trials.back().num_gpus);
  CHECK(c.days <= s.days);
  // Without time-to-train data (no interruptions, no stragglers) the wall time is the ideal one,
  // in whole steps: ceil(1e9 / 65,536 tokens) = 15,259 steps of 65,536 tokens.
  CHECK(c.days == Approx(15259 * 65536.0 / c.tokens_per_s / 86400.0));
  CHECK(c.ideal_days == Approx(s.tokens / c.tokens_per_s / 86400.0));
  CHECK(c.gpu_hours == Approx(static_cast<double>(c.num_gpus) * c.days * 24.0));
  REQUIRE(c.cost_usd.has_value());
  CHECK(*c.cost_usd == Approx(c.gpu_hours * 2.0));
  CHECK(c.mfu > 0);
  CHECK(c.mfu < 1);
  const std::string json = driver::sizing_json(s, choices);
  CHECK(json.find("\"training_days\"") != std::string::npos);
  CHECK(driver::sizing_table(s, choices).find("h100") != std::string::npos);
}
