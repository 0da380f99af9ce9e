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

TEST_CASE("DeepSpeed's pipeline engine refuses ZeRO-2 and ZeRO-3") {
  parallel::ParallelPlan plan;
  plan.pp = 4;
  plan.zero_stage = 2;
  for (const char* name : {"deepspeed", "megatron-deepspeed", "gpt-neox"}) {
    INFO(name);
    const auto f = load_framework(name);
    CHECK(f.pipeline_zero_stage_max == 1);
    const std::string why = f.refuses(plan);
    CHECK(why.find("framework " + f.name) != std::string::npos);
    CHECK(why.find("engine.py") != std::string::npos);
  }
  const auto ds = load_framework("deepspeed");
  plan.zero_stage = 1;
  CHECK(ds.refuses(plan).empty());
  plan.zero_stage = 3;
  plan.pp = 1;
  CHECK(ds.refuses(plan).empty());  // ZeRO-3 without a pipeline
  plan.pp = 2;
  CHECK(load_framework("torchtitan").refuses(plan).empty());  // FSDP in a pipeline
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
                                     "bogus: 1\n"                                              // 7
                                     "order { value: \"tp,dp,pp\" source: \"x\" }\n"          // 8
                                     "pipeline_zero_stage_max { value: 4 source: \"x\" }\n");  // 9
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
  const Diagnostic* order = test::find_field(ds, "order.value");  // not all four axes
  REQUIRE(order);
  CHECK(order->line == 8);
  const Diagnostic* pipeline_zero = test::find_field(ds, "pipeline_zero_stage_max.value");
  REQUIRE(pipeline_zero);
  CHECK(pipeline_zero->line == 9);
  for (const auto& d : ds) CHECK(d.file == path);
}

TEST_CASE("a profile's eras give its settings as of a month") {
  const auto mlm = load_framework("megatron-lm");
  REQUIRE(mlm.eras.size() == 2);
  CHECK(mlm.eras[0].before > mlm.eras[1].before);  // latest first
  // Today's recipe: no era applies after the last one.
  const auto now = mlm.as_of(YearMonth{2025, 1});
  CHECK(now.values.sequence_parallel);
  CHECK(now.values.flash_attention);
  CHECK(now.values.zero_stage == 1);
  // Mid-2023: the legacy models (unfused core, no sequence parallelism), the distributed
  // optimizer already there.
  const auto y2023 = mlm.as_of(YearMonth{2023, 6});
  CHECK_FALSE(y2023.values.sequence_parallel);
  CHECK_FALSE(y2023.values.flash_attention);
  CHECK(y2023.values.zero_stage == 1);
  REQUIRE(y2023.source_of(FrameworkSetting::kAttention) != nullptr);
  CHECK(y2023.source_of(FrameworkSetting::kAttention)->find("before 2024-06") != std::string::npos);
  // 2021: both eras; the earlier one wins where both give a setting.
  const auto y2021 = load_framework("Megatron-LM@2021-06");
  CHECK(y2021.name == "megatron-lm@2021-06");
  CHECK(y2021.values.zero_stage == 0);
  CHECK_FALSE(y2021.values.sequence_parallel);
  CHECK(y2021.eras.empty());
  // The month `before` itself is the new era's.
  CHECK(mlm.as_of(YearMonth{2024, 6}).values.sequence_parallel);
  // A validation row's column must name the era's code path when the era lists one.
  const std::string core = "megatron-core r0.5";
  CHECK(mlm.as_of(YearMonth{2023, 6}, &core).values.sequence_parallel);
  const std::string legacy = "megatron-lm (ptd-p)";
  CHECK_FALSE(mlm.as_of(std::nullopt, &legacy).values.sequence_parallel);

  const auto composer = load_framework("composer");
  CHECK(composer.as_of(YearMonth{2023, 6}).values.attention_kernel == "FlashAttention-1");
  CHECK(composer.as_of(YearMonth{2023, 7}).values.attention_kernel == "FlashAttention-2");
  REQUIRE(composer.dropout.has_value());
  CHECK_FALSE(*composer.dropout);
  // NVIDIA's MLPerf implementations: TP-CP-PP-DP rank order from the v5.1 round (NGC 25.09).
  const auto mlperf = load_framework("nvidia-mlperf");
  const std::vector<parallel::Axis> pp_inside{parallel::Axis::kTp, parallel::Axis::kCp,
                                              parallel::Axis::kPp, parallel::Axis::kDp};
  CHECK(mlperf.as_of(YearMonth{2025, 11}).values.order == pp_inside);
  CHECK(mlperf.as_of(YearMonth{2025, 6}).values.order == parallel::ParallelPlan{}.order);
  CHECK(mlperf.values.grad_reduce == parallel::GradReduce::kBf16);
  const auto xt = load_framework("xtuner");
  CHECK(xt.recompute == parallel::Recompute::kFull);
  CHECK(xt.released == YearMonth{2023, 8});
}

TEST_CASE("a framework month must be written YYYY-MM") {
  CHECK(parse_year_month("2024-06") == YearMonth{2024, 6});
  CHECK_FALSE(parse_year_month("2024-13"));
  CHECK_FALSE(parse_year_month("2024-6"));
  CHECK_FALSE(parse_year_month("June 2024"));
  const auto d = test::first_diagnostic([] { load_framework("megatron-lm@2021"); });
  CHECK(d.field == "--framework");
  CHECK(d.message.find("YYYY-MM") != std::string::npos);
}

TEST_CASE("a broken era reports its month, source and non-settings") {
  TempDir dir;
  const std::string path = dir.write("mine.textproto",
                                     "name: \"mine\"\n"                                     // 1
                                     "title: \"Mine\"\n"                                    // 2
                                     "era { before: \"2021\" settings { name: \"x\" } }\n"  // 3
                                     "released { value: \"soon\" source: \"x\" }\n");       // 4
  const auto ds = test::diagnostics_of([&] { load_framework(path); });
  INFO(test::dump(ds));
  CHECK(test::find_field(ds, "era[0].before"));
  CHECK(test::find_field(ds, "era[0].source"));
  CHECK(test::find_field(ds, "era[0].settings"));
  CHECK(test::find_field(ds, "released.value"));
}

TEST_CASE("a precision mode holds only for a row's precision, validation fields checked") {
  const auto composer = load_framework("composer");
  const std::string pure = "bf16 (composer 'pure' mode)", amp = "bf16 amp", column = "composer";
  CHECK(composer.as_of(std::nullopt, &column, &pure).values.grad_reduce == parallel::GradReduce::kBf16);
  CHECK(composer.as_of(std::nullopt, &column, &amp).values.grad_reduce == parallel::GradReduce::kFp32);
  CHECK(composer.as_of(std::nullopt).values.grad_reduce == parallel::GradReduce::kFp32);  // run
  CHECK(load_framework("megatron-deepspeed").builds_on.size() == 2);
  TempDir dir;
  const std::string path = dir.write("mine.textproto",
                                     "name: \"mine\"\n"
                                     "title: \"Mine\"\n"
                                     "attention { value: \"unfused\" source: \"x\" }\n"
                                     "builds_on: [\"nothing\"]\n"
                                     "unstated_sharding { value: \"x\" source: \"y\" }\n"
                                     "kernel_named_by { values: [\"mine\"] source: \"z\" }\n"
                                     "era { source: \"s\" }\n");
  const auto ds = test::diagnostics_of([&] { load_framework(path); });
  INFO(test::dump(ds));
  CHECK(test::find_field(ds, "builds_on[0]"));
  CHECK(test::find_field(ds, "unstated_sharding.value"));  // no zero_stage
  CHECK(test::find_field(ds, "kernel_named_by.values"));   // unfused names no kernel
  CHECK(test::find_field(ds, "era[0].before"));            // neither a month nor a mode
}

}  // namespace
}  // namespace ts::config
