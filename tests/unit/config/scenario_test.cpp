// Scenario files: model and cluster by name, path or inline, plan defaults, and plan rules
// reported at the scenario's own fields and lines.
#include <catch2/catch.hpp>

#include "sim/config/loader.h"
#include "tests/unit/config/config_test_util.h"

namespace ts::config {
namespace {

using test::diagnostics_of;
using test::find_field;

TEST_CASE("a scenario with zoo names and plan fields") {
  test::TempDir dir;
  const auto path = dir.write("s.textproto",
                              "model: \"llama3-70b\"\n"
                              "cluster: \"dgx-h100\"\n"
                              "num_gpus: 64\n"
                              "tp: 8\n"
                              "pp: 4\n"
                              "global_batch: 64\n"
                              "seq_len: 8192\n"
                              "schedule: \"interleaved\"\n"
                              "vpp: 2\n"
                              "recompute: \"selective\"\n"
                              "sequence_parallel: true\n"
                              "order: \"tp,dp,cp,pp\"\n"
                              "zero_stage: 1\n"
                              "dtype: \"fp8\"\n"
                              "optimizer_states: \"bf16\"\n"
                              "cp_algo: \"allgather\"\n"
                              "mst_chunks: 4\n"
                              "grad_reduce: \"bf16\"\n"
                              "elementwise: \"eager\"\n"
                              "no_fp8_weight_cache: true\n");
  const Scenario s = load_scenario(path);
  CHECK(s.model.name == "llama3-70b");
  CHECK(s.cluster.cluster.name == "dgx-h100");
  CHECK(s.num_gpus == 64);
  CHECK(s.plan.tp == 8);
  CHECK(s.plan.pp == 4);
  CHECK(s.plan.dp == 2);  // derived: 64 / (8·4·1)
  CHECK(s.plan.cp == 1);
  CHECK(s.plan.vpp == 2);
  CHECK(s.plan.micro_batch == 1);
  CHECK(s.plan.schedule == parallel::Schedule::kInterleaved);
  CHECK(s.plan.recompute == parallel::Recompute::kSelective);
  CHECK(s.plan.sequence_parallel);
  CHECK(s.plan.order == std::vector<parallel::Axis>{parallel::Axis::kTp, parallel::Axis::kDp,
                                                    parallel::Axis::kCp, parallel::Axis::kPp});
  CHECK(s.plan.zero_stage == 1);
  CHECK(s.plan.dtype == ir::Dtype::kFp8);
  CHECK(s.plan.optimizer_states == parallel::OptimizerStates::kBf16);
  CHECK(s.plan.cp_algo == parallel::CpAlgo::kAllGather);
  CHECK(s.plan.mst_chunks == 4);
  CHECK(s.plan.grad_reduce == parallel::GradReduce::kBf16);
  CHECK(s.plan.elementwise == parallel::Elementwise::kEager);
  CHECK_FALSE(s.plan.fp8_weight_cache);
}

TEST_CASE("scenario defaults follow the flags' defaults") {
  test::TempDir dir;
  const auto path = dir.write("s.textproto",
                              "model: \"llama2-7b\"\ncluster: \"dgx-a100\"\nnum_gpus: 8\nglobal_batch: 16\n");
  const Scenario s = load_scenario(path);
  const parallel::ParallelPlan defaults;
  CHECK(s.plan.tp == 1);
  CHECK(s.plan.dp == 8);
  CHECK(s.plan.seq_len == defaults.seq_len);
  CHECK(s.plan.schedule == defaults.schedule);
  CHECK(s.plan.order == defaults.order);
  CHECK(s.plan.dtype == ir::Dtype::kBf16);
  CHECK(s.plan.grad_reduce == parallel::GradReduce::kFp32);
  CHECK(s.plan.elementwise == parallel::Elementwise::kFused);
  CHECK(s.plan.fp8_weight_cache);
}

TEST_CASE("inline model and cluster, and a model path relative to the scenario") {
  test::TempDir dir;
  std::string inline_model = "inline_model {\n" + std::string(test::kValidModel) + "}\n";
  std::string inline_cluster = "inline_cluster {\n" + std::string(test::kValidCluster) + "}\n";
  const auto path = dir.write("s.textproto", inline_model + inline_cluster +
                                                 "num_gpus: 4\ntp: 2\nglobal_batch: 8\nseq_len: 512\n");
  const Scenario s = load_scenario(path);
  CHECK(s.model.name == "tiny");
  CHECK(s.cluster.gpu.name == "TestGPU");
  CHECK(s.plan.dp == 2);

  dir.write("sub/models/m.textproto", test::kValidModel);
  const auto rel = dir.write("sub/s.json", R"({"model": "models/m.textproto", "cluster": "dgx-h100",
  "numGpus": 8, "tp": 2, "globalBatch": 4, "seqLen": 512, "ppLayers": [4], "order": "tp,cp,dp,pp"})");
  const Scenario r = load_scenario(rel);
  CHECK(r.model.name == "tiny");
  CHECK(r.plan.pp_layers == std::vector<std::int64_t>{4});
  CHECK(r.plan.dp == 4);
}

TEST_CASE("plan rules point at the scenario's fields and lines") {
  test::TempDir dir;
  const auto path = dir.write("s.textproto",
                              "model: \"llama3-70b\"\n"   // 1
                              "cluster: \"dgx-a100\"\n"   // 2
                              "num_gpus: 64\n"            // 3
                              "tp: 3\n"                   // 4
                              "pp: 4\n"                   // 5
                              "dp: 2\n"                   // 6
                              "global_batch: 64\n"        // 7
                              "dtype: \"fp8\"\n"          // 8
                              "zero_stage: 7\n");         // 9
  const auto ds = diagnostics_of([&] { load_scenario(path); });
  INFO(test::dump(ds));
  const auto* tp = find_field(ds, "tp");
  REQUIRE(tp != nullptr);
  CHECK(tp->file == path);
  CHECK(tp->line == 4);
  const auto* gpus = find_field(ds, "num_gpus");
  REQUIRE(gpus != nullptr);
  CHECK(gpus->line == 3);
  const auto* dtype = find_field(ds, "dtype");
  REQUIRE(dtype != nullptr);
  CHECK(dtype->line == 8);
  CHECK(dtype->message.find("FP8") != std::string::npos);
  REQUIRE(find_field(ds, "zero_stage") != nullptr);
  CHECK(find_field(ds, "zero_stage")->line == 9);
  for (const auto& d : ds) CHECK(d.field.rfind("--", 0) != 0);  // no flags in a file's errors
}

TEST_CASE("pp_layout in a scenario: read, and its errors at its line") {
  test::TempDir dir;
  const std::string head = "model: \"llama3-8b\"\ncluster: \"dgx-h100\"\nnum_gpus: 8\ntp: 2\npp: 4\n"
                           "global_batch: 8\n";
  const auto good = dir.write("good.textproto", head + "pp_layout: \"E|t*12|t*10|t*10L\"\n");
  CHECK(load_scenario(good).plan.pp_layout == "E|t*12|t*10|t*10L");
  const auto bad = dir.write("bad.textproto", head + "pp_layout: \"E|t*12|t*1x|t*10L\"\n");
  const auto ds = diagnostics_of([&] { load_scenario(bad); });
  INFO(test::dump(ds));
  const auto* f = find_field(ds, "pp_layout");
  REQUIRE(f != nullptr);
  CHECK(f->line == 7);
  CHECK(f->message.find("position 11") != std::string::npos);
}

TEST_CASE("scenario errors: own fields, referenced files and plan, all together") {
  test::TempDir dir;
  dir.write("bad-model.textproto", test::replace_line(test::kValidModel, "num_layers:", "num_layers: 0"));
  const auto path = dir.write("s.textproto",
                              "model: \"bad-model.textproto\"\n"  // 1
                              "cluster: \"dgx-q100\"\n"           // 2
                              "tp: 8\n"                           // 3
                              "schedule: \"zigzag\"\n"            // 4
                              "order: \"tp,ep,dp,pp\"\n"          // 5
                              "pp_layers: [1, 2]\n"               // 6
                              "num_gpu: 8\n"                      // 7
                              "host_dispatch_us: -3\n");          // 8
  const auto ds = diagnostics_of([&] { load_scenario(path); });
  INFO(test::dump(ds));
  // The model file's own problem, at its own file and line.
  const auto* layers = find_field(ds, "num_layers");
  REQUIRE(layers != nullptr);
  CHECK(layers->file == (dir.path() / "bad-model.textproto").string());
  CHECK(layers->line == 2);
  // Unknown cluster name, at the scenario's line.
  const auto* cluster = find_field(ds, "cluster");
  REQUIRE(cluster != nullptr);
  CHECK(cluster->file == path);
  CHECK(cluster->line == 2);
  CHECK(cluster->message.find("dgx-h100") != std::string::npos);
  REQUIRE(find_field(ds, "schedule") != nullptr);
  CHECK(find_field(ds, "schedule")->line == 4);
  REQUIRE(find_field(ds, "order") != nullptr);
  CHECK(find_field(ds, "order")->message.find("'ep'") != std::string::npos);
  REQUIRE(find_field(ds, "num_gpu") != nullptr);  // misspelled: unknown field
  CHECK(find_field(ds, "num_gpu")->line == 7);
  REQUIRE(find_field(ds, "host_dispatch_us") != nullptr);
  CHECK(find_field(ds, "host_dispatch_us")->line == 8);
  CHECK(find_field(ds, "host_dispatch_us")->message.find("between 0 and") != std::string::npos);
  REQUIRE(find_field(ds, "num_gpus") != nullptr);  // hence missing
  REQUIRE(find_field(ds, "global_batch") != nullptr);
}

TEST_CASE("plan messages in a scenario name its fields, not flags") {
  test::TempDir dir;
  const auto path = dir.write("s.textproto",
                              "model: \"llama3-70b\"\ncluster: \"dgx-h100\"\nnum_gpus: 24\ntp: 8\n"
                              "pp: 3\nglobal_batch: 8\n");
  const auto ds = diagnostics_of([&] { load_scenario(path); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].field == "pp");
  CHECK(ds[0].line == 5);
  CHECK(ds[0].message.find("pp_layers") != std::string::npos);
  CHECK(ds[0].message.find("--") == std::string::npos);
}

TEST_CASE("a scenario's recompute_layers counts layers of full recompute") {
  test::TempDir dir;
  const std::string head = "model: \"llama2-7b\"\ncluster: \"dgx-a100\"\nnum_gpus: 8\nglobal_batch: 16\n";
  const Scenario s = load_scenario(dir.write("a.textproto", head + "recompute: \"full\"\nrecompute_layers: 3\n"));
  CHECK(s.plan.recompute == parallel::Recompute::kFull);
  CHECK(s.plan.recompute_layers == 3);
  const auto ds = diagnostics_of(
      [&] { load_scenario(dir.write("b.textproto", head + "recompute: \"selective\"\nrecompute_layers: 3\n")); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].field == "recompute_layers");
  CHECK(ds[0].line == 6);
  CHECK(ds[0].message.find("needs recompute full") != std::string::npos);
}

TEST_CASE("dp that cannot be derived is reported once") {
  test::TempDir dir;
  const auto path = dir.write("s.textproto",
                              "model: \"llama3-8b\"\ncluster: \"dgx-h100\"\nnum_gpus: 16\ntp: 3\n"
                              "global_batch: 16\n");
  const auto ds = diagnostics_of([&] { load_scenario(path); });
  INFO(test::dump(ds));
  const auto* dp = find_field(ds, "dp");
  REQUIRE(dp != nullptr);
  CHECK(dp->message.find("not divisible by tp·pp·cp = 3") != std::string::npos);
  CHECK(find_field(ds, "num_gpus") == nullptr);  // no second report of the same mismatch
  CHECK(find_field(ds, "tp") != nullptr);        // 32 heads % 3
}

TEST_CASE("a scenario needs a model and a cluster") {
  test::TempDir dir;
  const auto path = dir.write("s.textproto", "num_gpus: 8\nglobal_batch: 8\n");
  const auto ds = diagnostics_of([&] { load_scenario(path); });
  CHECK(ds.size() == 2);
  CHECK(find_field(ds, "model") != nullptr);
  CHECK(find_field(ds, "cluster") != nullptr);
}

}  // namespace
}  // namespace ts::config
