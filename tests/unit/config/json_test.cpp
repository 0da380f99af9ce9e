// JSON inputs: the same schema and checks as text format, with lines for keys and syntax errors.
#include <catch2/catch.hpp>

#include "sim/config/loader.h"
#include "tests/unit/config/config_test_util.h"

namespace ts::config {
namespace {

using test::diagnostics_of;
using test::find_field;

constexpr std::string_view kModelJson = R"({
  "name": "tiny-json",
  "num_layers": 4,
  "hidden": 256,
  "numHeads": 8,
  "num_kv_heads": 2,
  "ffn_hidden": 1024,
  "vocab": 1000,
  "max_seq_len": 512,
  "norm": "rmsnorm",
  "activation": "swiglu",
  "position": "learned",
  "tied_embeddings": true,
  "linear_bias": false
}
)";

TEST_CASE("a JSON model loads, with proto and lowerCamelCase key names") {
  test::TempDir dir;
  const auto m = load_model(dir.write("m.json", kModelJson));
  CHECK(m.name == "tiny-json");
  CHECK(m.num_heads == 8);
  CHECK(m.num_kv_heads == 2);
  CHECK(m.position == ir::Position::kLearned);
  CHECK(m.max_seq_len == 512);
  CHECK(m.tied_embeddings);
}

TEST_CASE("JSON value errors and unknown keys carry their line") {
  test::TempDir dir;
  std::string text(kModelJson);
  text.replace(text.find("\"hidden\": 256"), 13, "\"hidden\": -256");
  text.replace(text.find("\"vocab\""), 7, "\"vocabulary\"");
  const auto path = dir.write("m.json", text);
  const auto ds = diagnostics_of([&] { load_model(path); });
  INFO(test::dump(ds));
  const auto* hidden = find_field(ds, "hidden");
  REQUIRE(hidden != nullptr);
  CHECK(hidden->line == 4);
  CHECK(hidden->file == path);
  const auto* unknown = find_field(ds, "vocabulary");
  REQUIRE(unknown != nullptr);
  CHECK(unknown->line == 8);
  CHECK(unknown->message.find("unknown field") != std::string::npos);
  const auto* missing = find_field(ds, "vocab");
  REQUIRE(missing != nullptr);
  CHECK(missing->message == "required value is missing");
}

TEST_CASE("JSON syntax error names the line") {
  test::TempDir dir;
  std::string text(kModelJson);
  text.replace(text.find("\"hidden\": 256,"), 14, "\"hidden\": 256");  // missing comma
  const auto path = dir.write("m.json", text);
  const auto ds = diagnostics_of([&] { load_model(path); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].file == path);
  CHECK(ds[0].line == 5);  // the error is seen at the next key
  CHECK(ds[0].message.find("JSON syntax error") != std::string::npos);
}

TEST_CASE("JSON type mismatch is reported by the protobuf parser") {
  test::TempDir dir;
  std::string text(kModelJson);
  text.replace(text.find("\"hidden\": 256"), 13, "\"hidden\": \"wide\"");
  const auto path = dir.write("m.json", text);
  const auto ds = diagnostics_of([&] { load_model(path); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].file == path);
  CHECK(ds[0].message.find("hidden") != std::string::npos);
}

TEST_CASE("JSON cluster with nested unknown key") {
  test::TempDir dir;
  const std::string text = R"({
  "name": "j",
  "gpu": {"name": "G", "peakBf16Tflops": 100, "peak_fp16_tflops": 100, "peak_fp8_tflops": 0,
          "peak_tf32_tflops": 50, "peak_fp32_tflops": 10, "memory_gb": 80,
          "memory_bandwidth_gbps": 2000, "num_sms": 100, "matmul_efficiency": 0.8,
          "memory_efficiency": 0.8, "kernel_launch_overhead_us": 1},
  "node": {"gpus_per_node": 8, "nvlink_bandwidth_gbps": 300, "nvlink_latency_ns": 1,
           "nics_per_node": 8, "nic_bandwidth_gbits": 200, "nic_latency_ns": 1,
           "nic_count": 8},
  "fabric": {"kind": "fat_tree", "tiers": 3, "oversubscription": 2, "switch_latency_ns": 1,
             "switch_radix": 64}
}
)";
  const auto path = dir.write("c.json", text);
  const auto ds = diagnostics_of([&] { load_cluster(path); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].field == "node.nic_count");
  CHECK(ds[0].line == 9);

  std::string ok = text;
  const std::string extra = ",\n           \"nic_count\": 8";
  ok.erase(ok.find(extra), extra.size());
  const auto c = load_cluster(dir.write("ok.json", ok));
  CHECK(c.cluster.fabric.tiers == 3);
  CHECK(c.gpu.memory_capacity.count() == 80'000'000'000LL);
  CHECK(c.gpu.peak_bf16.tflops() == Approx(100));
}

}  // namespace
}  // namespace ts::config
