// Batch choice and pipeline splits of the hardware sizing (sim/driver/plan_hw.h) and of the sweep
// enumeration (sim/driver/sweep.h): batch candidates, per-plan batches that data-parallel degrees
// which are not powers of two divide, cost-balanced uneven splits, and the verdict of each size.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <sstream>

#include "sim/config/loader.h"
#include "sim/driver/plan_hw.h"
#include "sim/driver/sweep.h"
#include "tests/unit/config/config_test_util.h"

using namespace ts;
using parallel::PipelineSplit;
using parallel::Recompute;
using parallel::Schedule;

namespace {

// Llama 3 70B on H100s with tp 8, sequences of 8192: enumeration only (nothing simulated).
driver::SweepSpec llama70b(std::int64_t gpus) {
  driver::SweepSpec s;
  s.model = config::load_model("llama3-70b");
  s.cluster = config::load_cluster("dgx-h100");
  s.num_gpus = gpus;
  s.base.seq_len = 8192;
  s.base.global_batch = 512;
  s.axes.tp = {8};
  s.axes.cp = {1};
  s.axes.micro_batch = {1, 2};
  s.axes.schedule = {Schedule::k1F1B};
  s.axes.zero = {1};
  s.axes.sequence_parallel = {true};
  s.axes.recompute = {Recompute::kSelective};
  return s;
}

}  // namespace

TEST_CASE("plan: batch candidates are 2^k and 3·2^k sequences within the token range") {
  const double mi = 1048576.0;
  // 4Mi-16Mi tokens of 8192-token sequences: 512 to 2048 sequences.
  CHECK(driver::batch_choices(4 * mi, 16 * mi, 8192) ==
        std::vector<std::int64_t>{512, 768, 1024, 1536, 2048});
  CHECK(driver::batch_choices(4 * mi, 4 * mi, 8192) == std::vector<std::int64_t>{512});
  // 6.25e6 to 7.5e6 tokens are 763 to 915 sequences: only 768 (3·2^8) lies between.
  CHECK(driver::batch_choices(6.25e6, 7.5e6, 8192) == std::vector<std::int64_t>{768});
  CHECK(driver::batch_choices(5e6, 6e6, 8192).empty());  // 610 to 732 sequences: none
  CHECK(driver::batch_choices(1, 8, 1) == std::vector<std::int64_t>{1, 2, 3, 4, 6, 8});
}

TEST_CASE("plan: the embedding is far lighter than a layer, the LM head about one layer") {
  const auto m = config::load_model("llama3-70b");
  const auto c = config::load_cluster("dgx-h100");
  parallel::ParallelPlan p;
  p.seq_len = 8192;
  const auto e = driver::end_stage_costs(m, c.gpu, p);
  // The LM head's GEMM is 6·h·V FLOPs per token (forward and backward) = 6·8192·128256 = 6.3e9;
  // a layer's GEMMs are 6·(parameters per layer, 0.86e9) = 5.2e9 plus causal attention, about
  // 0.4e9: 1.1 layers in FLOPs; the loss over fp32 logits (V values per token, read and written
  // several times) adds memory traffic that a layer's norms and activations do not match.
  CHECK(e.lm_head > 1.1);
  CHECK(e.lm_head < 1.5);
  // The embedding is a row lookup: bytes of one activation, no FLOPs.
  CHECK(e.embedding >= 0);
  CHECK(e.embedding < 0.01);
}

TEST_CASE("sweep: balanced splits give plans to pipeline degrees that do not divide the layers") {
  // 80 layers; 3,072 GPUs with tp 8 leave pp·dp = 384: pp 3 and 6 need uneven splits.
  auto spec = llama70b(3072);
  spec.axes.pp = {3, 4, 6};
  const auto even = driver::enumerate_plans(spec);
  for (const auto& p : even.plans) CHECK(p.pp == 4);
  CHECK_FALSE(driver::has_pp_layers_column(spec));

  spec.axes.pp_split = {PipelineSplit::kEven, PipelineSplit::kBalanced};
  const auto both = driver::enumerate_plans(spec);
  CHECK(driver::has_pp_layers_column(spec));
  CHECK(both.combinations ==
        static_cast<std::int64_t>(both.plans.size()) + both.rejected + both.equivalent);
  const auto ends = driver::end_stage_costs(spec.model, spec.cluster.gpu, spec.base);
  int uneven = 0;
  for (const auto& p : both.plans) {
    INFO("pp " << p.pp);
    CHECK(config::check_plan(p, spec.model, spec.cluster, spec.num_gpus).empty());
    if (p.pp_layers.empty()) continue;
    ++uneven;
    CHECK(static_cast<std::int64_t>(p.pp_layers.size()) == p.pp);
    CHECK(std::accumulate(p.pp_layers.begin(), p.pp_layers.end(), std::int64_t{0}) == 80);
    CHECK(p.pp_layers == parallel::balanced_stage_layers(80, p.pp, ends.embedding, ends.lm_head));
    // The LM head's stage is the lightest in layers.
    CHECK(p.pp_layers.back() == *std::min_element(p.pp_layers.begin(), p.pp_layers.end()));
  }
  CHECK(uneven > 0);
  const auto has_pp = [&](std::int64_t pp) {
    return std::any_of(both.plans.begin(), both.plans.end(),
                       [&](const auto& p) { return p.pp == pp; });
  };
  CHECK(has_pp(3));
  CHECK(has_pp(6));
  // The V schedules split over their 2·pp virtual stages (two chunks per rank); a batch with
  // the 2·pp micro-batches per pipeline that DualPipeV needs.
  auto v = spec;
  v.base.global_batch = 3072;
  v.axes.schedule = {Schedule::kDualPipeV};
  v.axes.pp_split = {PipelineSplit::kBalanced};
  int v_uneven = 0;
  for (const auto& p : driver::enumerate_plans(v).plans) {
    INFO("dualpipev pp " << p.pp);
    CHECK(config::check_plan(p, v.model, v.cluster, v.num_gpus).empty());
    if (p.pp_layers.empty()) continue;
    ++v_uneven;
    CHECK(static_cast<std::int64_t>(p.pp_layers.size()) == 2 * p.pp);
  }
  CHECK(v_uneven > 0);

  // More stages than layers: a counted rejection naming --pp-split.
  spec.axes.pp = {96};
  spec.axes.pp_split = {PipelineSplit::kBalanced};
  const auto too_many = driver::enumerate_plans(spec);
  CHECK(too_many.plans.empty());
  REQUIRE_FALSE(too_many.reasons.empty());
  CHECK(too_many.reasons.front().rule.rfind("--pp-split", 0) == 0);
}

TEST_CASE(
    "sweep: with batch choices, data-parallel degrees that are not powers of two get a batch") {
  // 12,288 GPUs with tp 8 and pp 16 leave dp 96, which divides none of 512, 1024, 2048.
  auto spec = llama70b(12288);
  spec.axes.pp = {16};
  CHECK(driver::enumerate_plans(spec).plans.empty());
  spec.axes.batch_choices = {512, 768, 1024, 1536, 2048};
  const auto en = driver::enumerate_plans(spec);
  REQUIRE_FALSE(en.plans.empty());
  for (const auto& p : en.plans) {
    CHECK(p.dp == 96);
    // The largest choice dp·micro_batch divides: 1536 for micro-batches of 1 and 2.
    CHECK(p.global_batch == 1536);
    CHECK(p.global_batch % (p.dp * p.micro_batch) == 0);
  }
  // Interleaved: the micro-batch count must also be a multiple of pp; 1536/(96·2) = 8 is not.
  spec.axes.schedule = {Schedule::kInterleaved};
  spec.axes.vpp = {5};
  for (const auto& p : driver::enumerate_plans(spec).plans) {
    CHECK(p.global_batch / (p.dp * p.micro_batch) % p.pp == 0);
  }
}

TEST_CASE("sweep: a CSV of balanced splits ends with their layers, without them it is unchanged") {
  config::test::TempDir dir;
  // Llama 3 8B (32 layers) on 24 H100s, tp 8, pp 3: one plan, a split of 32 layers in 3.
  driver::SweepSpec s;
  s.model = config::load_model("llama3-8b");
  s.cluster = config::load_cluster("dgx-h100");
  s.num_gpus = 24;
  s.base.seq_len = 2048;
  s.base.global_batch = 6;
  s.axes.tp = {8};
  s.axes.pp = {3};
  s.axes.micro_batch = {1};
  s.axes.pp_split = {PipelineSplit::kBalanced};
  driver::SweepOptions o;
  o.threads = 1;
  o.out = dir.path() / "a.csv";
  const auto res = driver::run_sweep(s, o);
  REQUIRE(res.records.size() == 1);
  const auto& split = res.enumeration.plans.front().pp_layers;
  REQUIRE(split.size() == 3);
  std::ifstream in(*o.out);
  std::string header, row;
  std::getline(in, header);
  std::getline(in, row);
  CHECK(header ==
        driver::sweep_csv_header(true).substr(0, driver::sweep_csv_header(true).size() - 1));
  CHECK(header.ends_with(",reason,pp_layers"));
  CHECK(row.ends_with(",\"" + std::to_string(split[0]) + "," + std::to_string(split[1]) + "," +
                      std::to_string(split[2]) + "\""));
  // Resuming the same sweep keeps the file; the even-split sweep refuses it (other columns).
  CHECK(driver::run_sweep(s, o).stats.resumed == 1);
  s.axes.pp_split = {PipelineSplit::kEven};
  CHECK_THROWS_AS(driver::run_sweep(s, o), InputError);
  CHECK(driver::sweep_csv_header() == driver::sweep_csv_header(false));
  CHECK(driver::sweep_csv_header().ends_with(",reason\n"));
}

TEST_CASE("plan: a size without a valid plan says which rule they break") {
  driver::SizingSpec s;
  s.model = config::load_model("llama3-8b");
  s.base.seq_len = 2048;
  s.base.global_batch = 32;
  s.axes.tp = {3};  // divides neither the 32 heads nor the 8 GPUs
  s.axes.pp = {1};
  s.axes.micro_batch = {1};
  s.offers = {driver::GpuOffer{"h100", "dgx-h100", 2.0, "test", "test"}};
  s.cluster_sizes = {8};
  s.tokens = 1e6;
  s.days = 1;
  s.threads = 1;
  const auto choices = driver::plan_hardware(s);
  REQUIRE(choices.size() == 1);
  REQUIRE(choices[0].trials.size() == 1);
  const auto& t = choices[0].trials[0];
  CHECK_FALSE(choices[0].found);
  CHECK(t.outcome.rfind("no valid plan: ", 0) == 0);
  CHECK(t.outcome.find("--gpus") != std::string::npos);
  CHECK(t.plans == 0);
}

TEST_CASE("plan: the chosen batch is the smallest that meets the deadline") {
  driver::SizingSpec s;
  s.model = config::load_model("llama3-8b");
  s.base.seq_len = 2048;
  s.axes.tp = {8};
  s.axes.pp = {1, 2};
  s.axes.micro_batch = {1};
  s.axes.zero = {1};
  s.axes.sequence_parallel = {true};
  s.axes.recompute = {Recompute::kSelective};
  s.offers = {driver::GpuOffer{"h100", "dgx-h100", 2.0, "test", "test"}};
  s.cluster_sizes = {16};
  s.tokens = 1e9;
  s.days = 1e6;
  s.threads = 2;
  const std::vector<std::int64_t> batches = {8, 16, 32};
  // Days at each batch, pinned.
  std::vector<double> days;
  for (const auto b : batches) {
    auto pinned = s;
    pinned.base.global_batch = b;
    const auto c = driver::plan_hardware(pinned);
    REQUIRE(c.at(0).found);
    days.push_back(c[0].days);
  }
  // Throughput grows with the batch here (the premise of the search).
  REQUIRE(days[0] > days[1]);
  REQUIRE(days[1] > days[2]);
  // A deadline between the days at 8 and 16 sequences: 16 is chosen, not the fastest 32.
  s.batch_choices = batches;
  s.base.global_batch = batches.back();
  s.days = 0.5 * (days[0] + days[1]);
  auto c = driver::plan_hardware(s);
  REQUIRE(c.at(0).found);
  CHECK(c[0].trials.back().global_batch == 16);
  CHECK(c[0].days == Approx(days[1]));
  CHECK(driver::sizing_json(s, c).find("\"global_batch\": 16") != std::string::npos);
  // A deadline only the largest batch meets.
  s.days = 0.5 * (days[1] + days[2]);
  c = driver::plan_hardware(s);
  REQUIRE(c.at(0).found);
  CHECK(c[0].trials.back().global_batch == 32);
  // None meets: too slow, reported at the fastest batch.
  s.days = 0.5 * days[2];
  c = driver::plan_hardware(s);
  CHECK_FALSE(c.at(0).found);
  CHECK(c[0].trials.back().outcome == "too slow");
  CHECK(c[0].trials.back().global_batch == 32);
  CHECK(c[0].trials.back().days == Approx(days[2]));
}

TEST_CASE("plan: a segment is the largest tray divisor that fits a rack") {
  // NVL72 racks of 18 four-GPU trays.
  CHECK(config::segment_gpus(5120, 4, 72) == 64);  // 1,280 trays: 16 per rack
  CHECK(config::segment_gpus(512, 4, 72) == 64);
  CHECK(config::segment_gpus(144, 4, 72) == 72);   // 36 trays: 18 per rack
  CHECK(config::segment_gpus(80, 4, 72) == 40);    // 20 trays: 10 per rack
  CHECK(config::segment_gpus(68, 4, 72) == 72);    // within one rack: the rack
  CHECK(config::segment_gpus(4 * 19, 4, 72) == 4); // 19 trays, a prime: one tray per rack
  CHECK(config::segment_gpus(1024, 8, 8) == 8);    // 8-GPU nodes: the node
}

TEST_CASE("plan: segment placement uses 64 GPUs per NVL72 rack, fill 72") {
  driver::SizingSpec s;
  s.model = config::load_model("llama3-8b");
  s.base.seq_len = 2048;
  s.base.global_batch = 256;
  s.axes.tp = {4};
  s.axes.pp = {1};
  s.axes.micro_batch = {1};
  s.axes.zero = {1};
  s.axes.sequence_parallel = {true};
  s.axes.recompute = {Recompute::kSelective};
  s.offers = {driver::GpuOffer{"gb200", "gb200-nvl72", 2.0, "test", "test"}};
  s.cluster_sizes = {128};
  s.tokens = 1e9;
  s.days = 1e6;
  s.threads = 2;
  const auto segment = driver::plan_hardware(s);
  s.placement = driver::Placement::kFill;
  const auto fill = driver::plan_hardware(s);
  REQUIRE(segment.at(0).trials.size() == 1);
  REQUIRE(fill.at(0).trials.size() == 1);
  CHECK(segment[0].trials[0].gpus_per_domain == 64);
  CHECK(fill[0].trials[0].gpus_per_domain == 72);
  // Two racks of 64 against 72 + 56: filled, the data-parallel rings change NIC rails between
  // racks and share NICs (PXN), and the plan runs slower.
  CHECK(segment[0].trials[0].best_tokens_per_s > fill[0].trials[0].best_tokens_per_s);
  CHECK(driver::sizing_json(s, fill).find("\"gpus_per_domain\": 72") != std::string::npos);
}
