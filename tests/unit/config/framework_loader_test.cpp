// Framework profiles (frameworks/*.textproto): the shipped profiles, lookup by name and alias,
// applying a profile to a plan, and every problem of a broken profile.
#include "sim/config/framework_loader.h"

#include <catch2/catch.hpp>

#include "tests/unit/config/config_test_util.h"

namespace ts::config {
namespace {

using test::TempDir;

TEST_CASE("the shipped framework profiles load, each setting with its source") {
  const auto all = load_all_frameworks();
  REQUIRE(all.size() >= 8);
  for (const auto& p : all) {
    INFO(p.name);
    CHECK_FALSE(p.title.empty());
    CHECK_FALSE(p.given.empty());
    for (const auto& g : p.given) CHECK(g.source.size() > 10);
    CHECK(p.recompute_modes.empty() == p.recompute_modes_source.empty());
  }
  // The frameworks of the issue, by name or alias (any case).
  for (const char* name :
       {"megatron-lm", "Megatron-Core", "nemo", "megatron-bridge", "torchtitan", "deepspeed",
        "megatron-deepspeed", "fsdp", "composer", "llm-foundry", "hf-trainer", "huggingface"}) {
    INFO(name);
    CHECK_NOTHROW(load_framework(name));
  }
  CHECK(load_framework("MCORE").name == "megatron-lm");
}

TEST_CASE("a profile sets what it gives and leaves the rest of the plan alone") {
  const auto tt = load_framework("torchtitan");
  parallel::ParallelPlan plan;
  plan.tp = 8;
  plan.micro_batch = 2;
  tt.apply(plan);
  CHECK(plan.zero_stage == 3);
  CHECK(plan.sequence_parallel);
  CHECK(plan.attention_label() == "FlashAttention-2");
  CHECK(plan.cross_entropy == parallel::CrossEntropy::kFp32Unfused);
  CHECK(plan.elementwise == parallel::Elementwise::kEager);
  CHECK_FALSE(plan.fp8_weight_cache);
  CHECK(plan.tp == 8);
  CHECK(plan.micro_batch == 2);
  CHECK(plan.grad_bucket_params == parallel::ParallelPlan{}.grad_bucket_params);  // not given
  REQUIRE(tt.source_of(FrameworkSetting::kZeroStage) != nullptr);
  CHECK(tt.source_of(FrameworkSetting::kZeroStage)->find("data_parallel_shard_degree") !=
        std::string::npos);
  CHECK(tt.source_of(FrameworkSetting::kGradBucketParams) == nullptr);
  CHECK(tt.recompute_modes == std::vector<parallel::Recompute>{parallel::Recompute::kNone,
                                                               parallel::Recompute::kSelectiveOp,
                                                               parallel::Recompute::kFull});

  const auto md = load_framework("megatron-deepspeed");
  parallel::ParallelPlan old;
  md.apply(old);
  CHECK(old.attention_label() == "unfused");
  CHECK(setting_value(FrameworkSetting::kAttention, old) == "unfused");
  CHECK(setting_value(FrameworkSetting::kHostDispatch, old) == "70");
}

TEST_CASE("an unknown framework name lists the known ones") {
  const auto d = test::first_diagnostic([] { load_framework("jax-maxtext"); });
  CHECK(d.field == "--framework");
  CHECK(d.message.find("torchtitan") != std::string::npos);
}

TEST_CASE("a broken framework profile reports every problem with its line and field") {
  TempDir dir;
  const std::string path = dir.write("mine.textproto",
                                     "name: \"other\"\n"                                       // 1
                                     "title: \"Mine\"\n"                                       // 2
                                     "zero_stage { value: 5 source: \"x\" }\n"                 // 3
                                     "cross_entropy { value: \"fp64\" source: \"x\" }\n"       // 4
                                     "sequence_parallel { value: true }\n"                     // 5
                                     "recompute_modes { values: [\"some\"] source: \"x\" }\n"  // 6
                                     "bogus: 1\n");                                            // 7
  const auto ds = test::diagnostics_of([&] { load_framework(path); });
  INFO(test::dump(ds));
  CHECK(test::find_field(ds, "name"));  // not the file's name
  const Diagnostic* zero = test::find_field(ds, "zero_stage.value");
  REQUIRE(zero);
  CHECK(zero->line == 3);
  CHECK(test::find_field(ds, "cross_entropy.value"));
  CHECK(test::find_field(ds, "sequence_parallel.source"));
  CHECK(test::find_field(ds, "recompute_modes.values"));
  CHECK(test::find_field(ds, "bogus"));
  for (const auto& d : ds) CHECK(d.file == path);
}

}  // namespace
}  // namespace ts::config
