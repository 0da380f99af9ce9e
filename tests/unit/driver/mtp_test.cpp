// Multi-token-prediction modules (DeepSeek-V3 Sec. 2.2; Megatron-Core places them with the loss
// on the last virtual stage): each lowers as its input side (embedding, two norms, the 2h → h
// projection), one more layer and its own LM head and loss on the LM head's rank, with their
// parameters there; the validation reads a recipe's pipeline layout from a row's notes.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "sim/driver/simulate.h"
#include "sim/driver/sweep.h"
#include "sim/driver/validate.h"
#include "sim/parallel/lowering.h"
#include "tests/unit/config/config_test_util.h"
#include "tests/unit/driver/moe_scenario.h"
#include "tests/unit/driver/run_ok.h"

using namespace ts;

namespace {

// Llama 3 8B cut to 4 layers on two pipeline stages of 4 H100s each.
config::Scenario two_stages(std::int64_t mtp_layers) {
  config::Scenario sc;
  sc.model = config::load_model("llama3-8b");
  sc.model.num_layers = 4;
  sc.model.mtp_layers = mtp_layers;
  sc.cluster = config::load_cluster("dgx-h100");
  sc.num_gpus = 8;
  auto& p = sc.plan;
  p.pp = 2;
  p.dp = 4;
  p.micro_batch = 1;
  p.global_batch = 16;
  p.seq_len = 4096;
  p.zero_stage = 1;
  return sc;
}

struct StageTasks {
  std::int64_t head_forwards = 0;  // LM-head compute tasks of the forward
  std::int64_t mtp_layer_tasks = 0;  // tasks of layers numbered after the model's
};

// Per pipeline stage, over micro-batch 0 of the uncoarsened lowering.
std::vector<StageTasks> tasks_by_stage(const config::Scenario& sc) {
  parallel::LoweringOptions lo;
  lo.coarse = false;
  const parallel::TaskGraph g = parallel::lower(sc.model, sc.plan, lo);
  std::vector<StageTasks> out(static_cast<std::size_t>(sc.plan.pp));
  for (const parallel::Task& t : g.tasks) {
    if (t.micro_batch != 0) continue;
    StageTasks& s = out[static_cast<std::size_t>(t.device)];
    if (t.kind == parallel::TaskKind::kCompute && t.part == parallel::Part::kLmHead &&
        t.pass == parallel::Pass::kForward) {
      ++s.head_forwards;
    }
    if (t.layer >= sc.model.num_layers) ++s.mtp_layer_tasks;
  }
  return out;
}

}  // namespace

TEST_CASE("MTP: input side, layer and head lowered on the last stage") {
  const auto without = tasks_by_stage(two_stages(0));
  const auto with = tasks_by_stage(two_stages(1));
  REQUIRE(with.size() == 2);
  CHECK(without[1].head_forwards == 1);
  CHECK(without[1].mtp_layer_tasks == 0);
  // The model's head, the module's input side and its own head.
  CHECK(with[1].head_forwards == 3);
  CHECK(with[1].mtp_layer_tasks > 3);
  CHECK(with[0].head_forwards == 0);
  CHECK(with[0].mtp_layer_tasks == 0);
}

TEST_CASE("MTP: its parameters are the LM head stage's") {
  const config::Scenario a = two_stages(0);
  const config::Scenario b = two_stages(2);
  const auto params = [](const config::Scenario& s, std::int64_t stage) {
    return parallel::stage_parameters(s.model, s.plan, stage);
  };
  CHECK(params(b, 0) == params(a, 0));
  const std::int64_t module = parallel::layer_shared_parameters(b.model, b.plan, 4) +
                              parallel::mtp_projection_parameters(b.model, b.plan);
  CHECK(params(b, 1) - params(a, 1) == 2 * module);
  const auto last = parallel::stage_layer_indices(b.plan, b.model, 1);
  CHECK(last == std::vector<std::int64_t>{2, 3, 4, 5});
}

TEST_CASE("MTP: it lengthens the step, less where the layout moves a layer off") {
  const double plain = testing::run_ok(two_stages(0)).iteration_time_s;
  config::Scenario even = two_stages(1);
  const double with = testing::run_ok(even).iteration_time_s;
  CHECK(with > plain);
  // Megatron-style layouts: "Ettt|tmL" leaves the module's stage one layer fewer than the
  // first; "Ett|ttmL" gives it the module on top of an even split.
  config::Scenario moved = two_stages(1);
  moved.plan.pp_layout = "Ettt|tmL";
  even.plan.pp_layout = "Ett|ttmL";
  CHECK(testing::run_ok(moved).iteration_time_s < testing::run_ok(even).iteration_time_s);
}

TEST_CASE("MTP rows: the recipe's pipeline layout is read where it fits") {
  const auto runs =
      driver::read_published_runs(config::test::source_dir() / "tests/validation/moe-public.csv");
  const auto row = std::find_if(runs.begin(), runs.end(), [](const auto& r) { return r.run_id == "1"; });
  REQUIRE(row != runs.end());
  const auto fits = driver::map_run(*row);
  REQUIRE(fits.scenario);
  CHECK(fits.scenario->plan.pp_layout == "Et|(tt|)*30mL");
  CHECK(fits.scenario->plan.pp_layers.empty());
  // A layout of the wrong stage count is noted and left for the even split.
  driver::PublishedRun wrong = *row;
  const std::string layout = "Et|(tt|)*30mL";
  wrong.notes.replace(wrong.notes.find(layout), layout.size(), "Et|(tt|)*29ttmL");
  const auto m = driver::map_run(wrong);
  REQUIRE(m.scenario);
  CHECK(m.scenario->plan.pp_layout.empty());
  CHECK_FALSE(m.scenario->plan.pp_layers.empty());
  const bool noted = std::any_of(m.assumptions.begin(), m.assumptions.end(), [](const std::string& a) {
    return a.find("not applied") != std::string::npos;
  });
  CHECK(noted);
}

TEST_CASE("MTP: the balanced split counts its module on the last stage") {
  config::Scenario a = two_stages(0);
  config::Scenario b = two_stages(1);
  const auto without = driver::end_stage_costs(a.model, a.cluster.gpu, a.plan);
  const auto with = driver::end_stage_costs(b.model, b.cluster.gpu, b.plan);
  CHECK(with.embedding == without.embedding);
  // One more layer, another head and the input side.
  CHECK(with.lm_head > 2 * without.lm_head + 1.0);
  CHECK(with.lm_head < 2 * without.lm_head + 1.5);
}

TEST_CASE("MTP: the all-to-all overlap keeps the module's input side and head") {
  // Qwen3-30B-A3B cut to 4 MoE layers, one MTP module, the 1F1B all-to-all overlap without a
  // pipeline: the module's MoE layer pairs with another micro-batch's first layer.
  config::Scenario sc = testing::small_moe("qwen3-30b-a3b", 8, 1, 16, 4096);
  sc.model.mtp_layers = 1;
  sc.plan.moe_a2a_overlap = true;
  parallel::LoweringOptions lo;
  const parallel::TaskGraph g = parallel::lower(sc.model, sc.plan, lo);
  std::vector<std::int64_t> heads(static_cast<std::size_t>(sc.plan.num_micro_batches()), 0);
  for (const parallel::Task& t : g.tasks) {
    if (t.device == 0 && t.micro_batch >= 0 && t.kind == parallel::TaskKind::kCompute &&
        t.part == parallel::Part::kLmHead && t.pass == parallel::Pass::kForward) {
      ++heads[static_cast<std::size_t>(t.micro_batch)];
    }
  }
  for (const std::int64_t n : heads) CHECK(n == 3);
}

TEST_CASE("MTP: the projection's TP collectives, with and without sequence parallelism") {
  // Per micro-batch: with sequence parallelism, all-gathers of eh_proj's input and output
  // forward, of the output gradient and a reduce-scatter of the input gradient backward;
  // without it, the output's all-gather forward and the input gradient's all-reduce backward.
  for (const bool sp : {true, false}) {
    INFO("sequence parallel " << sp);
    config::Scenario sc = two_stages(1);
    sc.plan.tp = 2;
    sc.plan.dp = 2;
    sc.plan.sequence_parallel = sp;
    const parallel::TaskGraph g = parallel::lower(sc.model, sc.plan, parallel::LoweringOptions{});
    std::int64_t forward = 0, backward = 0, reduced = 0;
    for (const parallel::Task& t : g.tasks) {
      const bool module_collective = t.kind == parallel::TaskKind::kCollective &&
                                     t.part == parallel::Part::kLmHead && t.layer >= sc.model.num_layers;
      if (t.micro_batch != 0 || !module_collective) continue;
      (t.pass == parallel::Pass::kForward ? forward : backward) += 1;
      if (t.comm == (sp ? parallel::CommOp::kReduceScatter : parallel::CommOp::kAllReduce)) ++reduced;
    }
    CHECK(forward == (sp ? 2 : 1));
    CHECK(backward == (sp ? 2 : 1));
    CHECK(reduced == 1);
  }
}
