// Selective recompute of modules (--recompute-modules, ParallelPlan::recompute_modules) and bf16
// Adam moments (--optimizer-states fp32-bf16-moments): each module drops the tensors the
// activation derivation counts for it (sim/memory/footprint.cpp) and reruns its forward ops
// before the block's backward; the default module set is the attention core alone, as before.
#include <catch2/catch.hpp>

#include "sim/base/diagnostic.h"
#include "sim/config/loader.h"
#include "sim/config/names.h"
#include "sim/config/reading_loader.h"
#include "sim/driver/simulate.h"
#include "sim/driver/validate_text.h"
#include "sim/memory/footprint.h"
#include "tests/unit/driver/moe_scenario.h"

using namespace ts;
using parallel::RecomputeModule;

namespace {

// Qwen3-30B-A3B cut to 4 layers on 8 H100s, EP 8 (the recipe shape of the B200 row, smaller).
config::Scenario moe_scenario(std::uint32_t modules) {
  config::Scenario sc = testing::small_moe("qwen3-30b-a3b", 8, 2, 32, 4096);
  auto& p = sc.plan;
  if (modules != 0) {
    p.recompute = parallel::Recompute::kSelective;
    p.recompute_modules = modules;
  }
  return sc;
}

double kept(const config::Scenario& sc) {
  return memory::layer_activations(sc.model, sc.plan, memory::default_activation_options(sc.model)).kept.real();
}

// DeepSeek-V3 cut to 4 layers on the same 8 H100s: 3 dense (an 18,432-wide MLP), then one MoE
// layer.
config::Scenario deepseek_scenario() {
  config::Scenario ds = moe_scenario(0);
  ds.model = config::load_model("deepseek-v3");
  ds.model.num_layers = 4;
  ds.plan.ep = 8;
  ds.plan.micro_batch = 1;
  return ds;
}

driver::RunResult run(const config::Scenario& sc) {
  driver::Resources resources;
  return driver::simulate(sc, driver::RunOptions{}, resources);
}

}  // namespace

TEST_CASE("recompute modules: each drops its tensors from a layer") {
  const config::Scenario none = moe_scenario(0);
  const config::Scenario act = moe_scenario(parallel::module_bit(RecomputeModule::kMoeAct));
  const config::Scenario norm = moe_scenario(parallel::module_bit(RecomputeModule::kLayernorm));
  const config::Scenario both = moe_scenario(parallel::module_bit(RecomputeModule::kMoeAct) |
                                             parallel::module_bit(RecomputeModule::kLayernorm));
  // moe_act: the fc2 input of every token copy, bf16: rows · 2 · expert width, rows = tokens ·
  // top_k at balanced routing (tp 1, no ETP).
  const double tokens = 2.0 * 4096;
  const double rows = tokens * static_cast<double>(none.model.moe->top_k);
  const double act_bytes = rows * 2 * static_cast<double>(none.model.moe->expert_ffn_hidden);
  CHECK(kept(none) - kept(act) == Approx(act_bytes).epsilon(1e-12));
  // layernorm: both norms' outputs, 2 · 2 · s·b·h.
  const double norm_bytes = 2 * 2 * tokens * static_cast<double>(none.model.hidden);
  CHECK(kept(none) - kept(norm) == Approx(norm_bytes).epsilon(1e-12));
  CHECK(kept(none) - kept(both) == Approx(act_bytes + norm_bytes).epsilon(1e-12));
  const auto both_act =
      memory::layer_activations(both.model, both.plan, memory::default_activation_options(both.model));
  CHECK(both_act.rematerialized.real() == Approx(act_bytes + norm_bytes).epsilon(1e-12));
}

TEST_CASE("recompute modules: the default set is the attention core") {
  config::Scenario a = moe_scenario(0);
  a.plan.recompute = parallel::Recompute::kSelective;
  const config::Scenario b = moe_scenario(parallel::module_bit(RecomputeModule::kCoreAttn));
  CHECK(kept(a) == kept(b));
  const driver::RunResult ra = run(a), rb = run(b);
  CHECK(ra.iteration_time_s == rb.iteration_time_s);
  CHECK(ra.peak_memory == rb.peak_memory);
}

TEST_CASE("recompute modules: MoE peak falls, backward reruns the ops") {
  const driver::RunResult none = run(moe_scenario(0));
  const driver::RunResult mods = run(moe_scenario(parallel::module_bit(RecomputeModule::kMoeAct) |
                                                  parallel::module_bit(RecomputeModule::kLayernorm)));
  REQUIRE(none.status == driver::Status::kOk);
  REQUIRE(mods.status == driver::Status::kOk);
  INFO("peak " << none.peak_memory.real() / 1073741824.0 << " -> " << mods.peak_memory.real() / 1073741824.0
               << " GiB, step " << none.iteration_time_s << " -> " << mods.iteration_time_s << " s");
  CHECK(mods.peak_memory < none.peak_memory);
  // The reruns count as recompute, the backward proper is unchanged.
  const auto bwd = runtime::TimeCategory::kBackward;
  const auto rc = runtime::TimeCategory::kRecompute;
  CHECK(none.time[rc] == Duration());
  CHECK(mods.time[rc] > Duration());
  CHECK(mods.time[bwd].seconds() == Approx(none.time[bwd].seconds()).epsilon(1e-9));
  CHECK(mods.time[runtime::TimeCategory::kForward] == none.time[runtime::TimeCategory::kForward]);
  CHECK(mods.iteration_time_s > none.iteration_time_s);
}

TEST_CASE("recompute modules: mla_up_proj and dense mlp") {
  const config::Scenario ds = deepseek_scenario();
  config::Scenario up = ds;
  up.plan.recompute = parallel::Recompute::kSelective;
  up.plan.recompute_modules = parallel::module_bit(RecomputeModule::kMlaUpProj);
  CHECK(kept(up) < kept(ds));
  const driver::RunResult rd = run(ds), ru = run(up);
  CHECK(ru.peak_memory < rd.peak_memory);
  CHECK(ru.time[runtime::TimeCategory::kRecompute] > rd.time[runtime::TimeCategory::kRecompute]);
  CHECK(ru.time[runtime::TimeCategory::kBackward].seconds() ==
        Approx(rd.time[runtime::TimeCategory::kBackward].seconds()).epsilon(1e-9));

  config::Scenario dense;
  dense.model = config::load_model("llama3-8b");
  dense.model.num_layers = 4;
  dense.cluster = config::load_cluster("dgx-h100");
  dense.num_gpus = 8;
  dense.plan.dp = 8;
  dense.plan.global_batch = 16;
  dense.plan.seq_len = 4096;
  config::Scenario mlp = dense;
  mlp.plan.recompute = parallel::Recompute::kSelective;
  mlp.plan.recompute_modules = parallel::module_bit(RecomputeModule::kMlp);
  // The MLP keeps its input only: fc1's input (2sbh), the three SwiGLU tensors (3 · 2sbf), no
  // dropout in Llama.
  const double sb = 4096.0;
  const double mlp_bytes = 2 * sb * 4096 + 3 * 2 * sb * static_cast<double>(dense.model.ffn_hidden);
  CHECK(kept(dense) - kept(mlp) == Approx(mlp_bytes).epsilon(1e-12));
  const driver::RunResult a = run(dense), b = run(mlp);
  CHECK(b.peak_memory < a.peak_memory);
  CHECK(b.time[runtime::TimeCategory::kRecompute] > a.time[runtime::TimeCategory::kRecompute]);
  CHECK(b.time[runtime::TimeCategory::kBackward].seconds() ==
        Approx(a.time[runtime::TimeCategory::kBackward].seconds()).epsilon(1e-9));
}

TEST_CASE("recompute modules: mlp drops the dense layers' MLP of an MoE model") {
  // `mlp` applies to the dense layers only; they keep a dense MLP's activations, not the
  // experts'.
  config::Scenario ds = deepseek_scenario();
  ds.plan.recompute = parallel::Recompute::kSelective;
  ds.plan.recompute_modules = parallel::module_bit(RecomputeModule::kCoreAttn);
  config::Scenario mlp = ds;
  mlp.plan.recompute_modules |= parallel::module_bit(RecomputeModule::kMlp);
  // The MoE layers' formula gives mlp nothing to drop ...
  CHECK(kept(mlp) == kept(ds));
  // ... the replay's dense layers do: the peak falls and their MLPs rerun.
  const driver::RunResult a = run(ds), b = run(mlp);
  CHECK(b.peak_memory < a.peak_memory);
  CHECK(b.time[runtime::TimeCategory::kRecompute] > a.time[runtime::TimeCategory::kRecompute]);
  // The pruned search's activation bound takes the smaller of the two layer kinds.
  config::Scenario plain = ds;
  plain.model.moe->dense_layers = 0;
  CHECK(driver::kept_layer_activations(ds) <= driver::kept_layer_activations(plain));
}

TEST_CASE("bf16 moments: 4 bytes of optimizer state per parameter") {
  parallel::ParallelPlan p;
  p.zero_stage = 1;
  const memory::BytesPerParameter fp32 = memory::bytes_per_parameter(p);
  p.optimizer_states = parallel::OptimizerStates::kFp32Bf16Moments;
  const memory::BytesPerParameter m = memory::bytes_per_parameter(p);
  CHECK(m.optimizer_states == 4);
  CHECK(m.master_weights == fp32.master_weights);
  CHECK(m.gradients == fp32.gradients);
  CHECK(memory::optimizer_step_bytes_per_parameter(p).count() == 22);
  config::Scenario a = moe_scenario(0), b = moe_scenario(0);
  b.plan.optimizer_states = parallel::OptimizerStates::kFp32Bf16Moments;
  const driver::RunResult ra = run(a), rb = run(b);
  CHECK(rb.peak_memory < ra.peak_memory);
  CHECK(rb.time[runtime::TimeCategory::kOptimizer] < ra.time[runtime::TimeCategory::kOptimizer]);
}

TEST_CASE("recompute modules: names, notes and plan rules") {
  using parallel::module_bit;
  CHECK(config::parse_recompute_modules("layernorm,moe_act", "--recompute-modules") ==
        (module_bit(RecomputeModule::kLayernorm) | module_bit(RecomputeModule::kMoeAct)));
  CHECK_THROWS_AS(config::parse_recompute_modules("layernorm,attn", "--recompute-modules"), InputError);
  CHECK(config::recompute_modules_name(module_bit(RecomputeModule::kMlp) | module_bit(RecomputeModule::kMlaUpProj)) ==
        "mla_up_proj,mlp");
  const config::ReadingVocabulary vocab = config::load_reading_vocabulary(config::reading_vocabulary_path());
  CHECK(driver::reading::recompute_modules_in(vocab, "recipe X: recompute_modules mla_up_proj, mlp. Other") ==
        (module_bit(RecomputeModule::kMlaUpProj) | module_bit(RecomputeModule::kMlp)));
  CHECK(driver::reading::recompute_modules_in(vocab, "recompute_modules [], cuda graphs") == 0u);
  CHECK_FALSE(driver::reading::recompute_modules_in(vocab, "recompute mla_up_proj").has_value());

  config::Scenario dense = moe_scenario(0);
  dense.model = config::load_model("llama3-8b");
  dense.plan.ep = 1;
  dense.plan.recompute = parallel::Recompute::kSelective;
  dense.plan.recompute_modules = module_bit(RecomputeModule::kMoeAct) | module_bit(RecomputeModule::kMlaUpProj);
  const auto problems = config::check_plan(dense.plan, dense.model, dense.cluster, dense.num_gpus);
  int named = 0;
  for (const auto& d : problems) named += d.field == "--recompute-modules" ? 1 : 0;
  CHECK(named == 2);
}
