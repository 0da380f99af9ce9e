// Bad model and cluster files: every problem is reported at once with its file, line and field.
#include <catch2/catch.hpp>

#include "sim/config/loader.h"
#include "tests/unit/config/config_test_util.h"

namespace ts::config {
namespace {

using test::diagnostics_of;
using test::find_field;
using test::replace_line;

TEST_CASE("the valid test inputs load") {
  test::TempDir dir;
  const auto m = load_model(dir.write("m.textproto", test::kValidModel));
  CHECK(m.name == "tiny");
  CHECK(m.num_kv_heads == 2);
  const auto c = load_cluster(dir.write("c.textproto", test::kValidCluster));
  CHECK(c.gpu.memory_capacity.count() == 16LL << 30);
  CHECK(c.cluster.fabric.kind == topology::FabricKind::kFatTree);
  CHECK(c.cluster.host.nic_bandwidth.gbytes_per_s() == Approx(12.5));  // 100 Gb/s
}

TEST_CASE("syntax error names the file and line") {
  test::TempDir dir;
  const auto path = dir.write("broken.textproto", replace_line(test::kValidModel, "hidden:", "hidden 256 }"));
  const auto ds = diagnostics_of([&] { load_model(path); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].file == path);
  CHECK(ds[0].line == 3);
  CHECK(ds[0].to_string().rfind(path + ":3: ", 0) == 0);
}

TEST_CASE("unknown fields are all reported, each with its line and path, and the rest is still validated") {
  test::TempDir dir;
  std::string text = replace_line(test::kValidCluster, "nvlink_bandwidth_gbps:", "  nvlink_bw: 100");
  text = replace_line(text, "switch_radix:", "  radix: 32");
  text = replace_line(text, "num_sms:", "  num_sms: -3");
  const auto path = dir.write("c.textproto", text);
  const auto ds = diagnostics_of([&] { load_cluster(path); });
  INFO(test::dump(ds));
  const auto* bw = find_field(ds, "node.nvlink_bw");
  REQUIRE(bw != nullptr);
  CHECK(bw->line == 18);
  CHECK(bw->file == path);
  CHECK(bw->message.find("unknown field") != std::string::npos);
  CHECK(bw->message.find("nvlink_bandwidth_gbps") != std::string::npos);  // lists the valid ones
  const auto* radix = find_field(ds, "fabric.radix");
  REQUIRE(radix != nullptr);
  CHECK(radix->line == 29);
  // The misspelled fields are now missing: reported at their enclosing block.
  const auto* missing = find_field(ds, "node.nvlink_bandwidth_gbps");
  REQUIRE(missing != nullptr);
  CHECK(missing->line == 16);
  CHECK(missing->message.find("missing") != std::string::npos);
  // And an unrelated value error in the same file.
  const auto* sms = find_field(ds, "gpu.num_sms");
  REQUIRE(sms != nullptr);
  CHECK(sms->line == 11);
  CHECK(sms->message.find("> 0") != std::string::npos);
}

TEST_CASE("missing required model values") {
  test::TempDir dir;
  std::string text = replace_line(test::kValidModel, "hidden:", "");
  text = replace_line(text, "norm:", "");
  const auto path = dir.write("m.textproto", text);
  const auto ds = diagnostics_of([&] { load_model(path); });
  INFO(test::dump(ds));
  REQUIRE(find_field(ds, "hidden") != nullptr);
  CHECK(find_field(ds, "hidden")->message == "required value is missing");
  CHECK(find_field(ds, "hidden")->file == path);
  REQUIRE(find_field(ds, "norm") != nullptr);
  CHECK(ds.size() == 2);  // nothing reported twice (e.g. "hidden must be > 0")
}

TEST_CASE("negative and zero sizes name the field and its line") {
  test::TempDir dir;
  std::string text = replace_line(test::kValidModel, "num_layers:", "num_layers: -4");
  text = replace_line(text, "vocab:", "vocab: 0");
  const auto path = dir.write("m.textproto", text);
  const auto ds = diagnostics_of([&] { load_model(path); });
  INFO(test::dump(ds));
  REQUIRE(ds.size() == 2);
  const auto* layers = find_field(ds, "num_layers");
  REQUIRE(layers != nullptr);
  CHECK(layers->line == 2);
  CHECK(layers->to_string() == path + ":2: num_layers: must be > 0 (got -4)");
  REQUIRE(find_field(ds, "vocab") != nullptr);
  CHECK(find_field(ds, "vocab")->line == 7);
}

TEST_CASE("unknown enumerated values list the valid spellings") {
  test::TempDir dir;
  std::string text = replace_line(test::kValidModel, "norm:", "norm: \"batchnorm\"");
  text = replace_line(text, "position:", "position: \"alibi\"");
  const auto path = dir.write("m.textproto", text);
  const auto ds = diagnostics_of([&] { load_model(path); });
  INFO(test::dump(ds));
  REQUIRE(find_field(ds, "norm") != nullptr);
  CHECK(find_field(ds, "norm")->line == 9);
  CHECK(find_field(ds, "norm")->message == "unknown value 'batchnorm' (expected layernorm|rmsnorm)");
  REQUIRE(find_field(ds, "position") != nullptr);
  CHECK(find_field(ds, "position")->line == 11);

  const auto cpath = dir.write("c.textproto", replace_line(test::kValidCluster, "kind:", "  kind: \"torus\""));
  const auto cds = diagnostics_of([&] { load_cluster(cpath); });
  REQUIRE(find_field(cds, "fabric.kind") != nullptr);
  CHECK(find_field(cds, "fabric.kind")->line == 25);
  CHECK(find_field(cds, "fabric.kind")->message.find("rail_optimized_fat_tree|fat_tree") != std::string::npos);
}

TEST_CASE("head divisibility rules of the model") {
  test::TempDir dir;
  SECTION("num_kv_heads must divide num_heads") {
    const auto path = dir.write("m.textproto", replace_line(test::kValidModel, "num_kv_heads:", "num_kv_heads: 3"));
    const auto ds = diagnostics_of([&] { load_model(path); });
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].field == "num_kv_heads");
    CHECK(ds[0].line == 5);
  }
  SECTION("hidden must be divisible by num_heads") {
    const auto path = dir.write("m.textproto", replace_line(test::kValidModel, "hidden:", "hidden: 260"));
    const auto ds = diagnostics_of([&] { load_model(path); });
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].field == "hidden");
    CHECK(ds[0].line == 3);
  }
  SECTION("num_kv_heads defaults to num_heads") {
    const auto path = dir.write("m.textproto", replace_line(test::kValidModel, "num_kv_heads:", ""));
    CHECK(load_model(path).num_kv_heads == 8);
  }
}

TEST_CASE("cluster value ranges") {
  test::TempDir dir;
  std::string text = replace_line(test::kValidCluster, "matmul_efficiency:", "  matmul_efficiency: 1.5");
  text = replace_line(text, "memory_efficiency:", "  memory_efficiency: 0");
  text = replace_line(text, "oversubscription:", "  oversubscription: 0.5");
  text = replace_line(text, "nic_latency_ns:", "  nic_latency_ns: -1");
  text = replace_line(text, "peak_fp8_tflops:", "  peak_fp8_tflops: nan");
  const auto path = dir.write("c.textproto", text);
  const auto ds = diagnostics_of([&] { load_cluster(path); });
  INFO(test::dump(ds));
  CHECK(ds.size() == 5);
  REQUIRE(find_field(ds, "gpu.matmul_efficiency") != nullptr);
  CHECK(find_field(ds, "gpu.matmul_efficiency")->line == 12);
  CHECK(find_field(ds, "gpu.matmul_efficiency")->message == "must be in (0, 1] (got 1.5)");
  REQUIRE(find_field(ds, "gpu.memory_efficiency") != nullptr);
  REQUIRE(find_field(ds, "fabric.oversubscription") != nullptr);
  CHECK(find_field(ds, "fabric.oversubscription")->line == 27);
  REQUIRE(find_field(ds, "node.nic_latency_ns") != nullptr);
  CHECK(find_field(ds, "node.nic_latency_ns")->line == 22);
  REQUIRE(find_field(ds, "gpu.peak_fp8_tflops") != nullptr);
}

TEST_CASE("cluster: compute slowdown under communication is optional, at least 0 and below 1") {
  test::TempDir dir;
  CHECK(load_cluster(dir.write("c.textproto", std::string(test::kValidCluster))).gpu.compute_slowdown_under_comm == 0);
  const std::string with = replace_line(test::kValidCluster, "kernel_launch_overhead_us:",
                                        "  kernel_launch_overhead_us: 2\n  compute_slowdown_under_comm: 0.2");
  CHECK(load_cluster(dir.write("c.textproto", with)).gpu.compute_slowdown_under_comm == 0.2);
  for (const char* bad : {"1", "-0.1", "nan"}) {
    const std::string text = replace_line(test::kValidCluster, "kernel_launch_overhead_us:",
                                          std::string("  kernel_launch_overhead_us: 2\n  compute_slowdown_under_comm: ") + bad);
    const auto ds = diagnostics_of([&] { load_cluster(dir.write("c.textproto", text)); });
    INFO(bad << ": " << test::dump(ds));
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].field == "gpu.compute_slowdown_under_comm");
    CHECK(ds[0].line == 15);
    CHECK(ds[0].message.find("must be in [0, 1)") == 0);
  }
}

TEST_CASE("missing blocks and memory") {
  test::TempDir dir;
  std::string text = replace_line(test::kValidCluster, "memory_gib:", "");
  const auto path = dir.write("c.textproto", text);
  const auto ds = diagnostics_of([&] { load_cluster(path); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].field == "gpu.memory_gib");
  CHECK(ds[0].line == 2);  // the gpu block
  CHECK(ds[0].message.find("memory_gb") != std::string::npos);

  const auto only_name = dir.write("n.textproto", "name: \"x\"\n");
  const auto ds2 = diagnostics_of([&] { load_cluster(only_name); });
  CHECK(ds2.size() == 3);
  CHECK(find_field(ds2, "gpu") != nullptr);
  CHECK(find_field(ds2, "node") != nullptr);
  CHECK(find_field(ds2, "fabric") != nullptr);
}

TEST_CASE("memory in MiB, GiB or GB, but only one") {
  test::TempDir dir;
  const auto gb = dir.write("gb.textproto", replace_line(test::kValidCluster, "memory_gib:", "  memory_gb: 16"));
  CHECK(load_cluster(gb).gpu.memory_capacity.count() == 16'000'000'000LL);
  const auto mib = dir.write("mib.textproto", replace_line(test::kValidCluster, "memory_gib:", "  memory_mib: 1024"));
  CHECK(load_cluster(mib).gpu.memory_capacity.count() == 1LL << 30);
  const auto both = dir.write("both.textproto",
                              replace_line(test::kValidCluster, "memory_gib:", "  memory_gib: 16 memory_gb: 16"));
  const auto ds = diagnostics_of([&] { load_cluster(both); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].line == 9);
  CHECK(ds[0].message.find("oneof") != std::string::npos);
}

TEST_CASE("names and paths") {
  SECTION("unknown zoo name lists the known ones and names the flag") {
    const auto ds = diagnostics_of([] { load_model("llama9-1t"); });
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].field == "--model");
    CHECK(ds[0].message.find("unknown model 'llama9-1t'") != std::string::npos);
    CHECK(ds[0].message.find("llama3-70b") != std::string::npos);
    const auto cds = diagnostics_of([] { load_cluster("dgx-z100"); });
    REQUIRE(cds.size() == 1);
    CHECK(cds[0].field == "--cluster");
    CHECK(cds[0].message.find("dgx-h100") != std::string::npos);
  }
  SECTION("a missing path") {
    const auto ds = diagnostics_of([] { load_model("/nonexistent/m.textproto"); });
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].message.find("no such file") != std::string::npos);
  }
  SECTION("a file of another type") {
    test::TempDir dir;
    const auto path = dir.write("m.yaml", "name: tiny\n");
    const auto ds = diagnostics_of([&] { load_model(path); });
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].message.find(".textproto") != std::string::npos);
  }
}

TEST_CASE("check_model on a model built in code") {
  ir::ModelSpec m;
  m.name = "code";
  m.num_layers = 2;
  m.hidden = 100;
  m.num_heads = 8;
  m.num_kv_heads = 3;
  m.ffn_hidden = 0;
  m.vocab = 10;
  m.max_seq_len = 0;
  m.position = ir::Position::kLearned;
  const auto ds = check_model(m);
  CHECK(find_field(ds, "hidden") != nullptr);        // 100 % 8
  CHECK(find_field(ds, "num_kv_heads") != nullptr);  // 8 % 3
  CHECK(find_field(ds, "ffn_hidden") != nullptr);
  CHECK(find_field(ds, "max_seq_len") != nullptr);   // learned positions need a table
  CHECK(ds.size() == 4);
}

}  // namespace
}  // namespace ts::config
