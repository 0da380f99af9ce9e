// The model and cluster zoos: every file loads, cites its source, and has the published values.
#include <catch2/catch.hpp>

#include <algorithm>
#include <fstream>
#include <sstream>

#include "sim/config/loader.h"
#include "tests/unit/config/config_test_util.h"

namespace ts::config {
namespace {

std::string read_text(const std::filesystem::path& p) {
  std::ifstream in(p);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST_CASE("zoo lists the required models and clusters") {
  const auto models = zoo_models();
  for (const char* m : {"gpt3-175b", "llama2-7b", "llama2-13b", "llama2-70b", "llama3-8b",
                        "llama3-70b", "llama3-405b", "megatron-530b"}) {
    INFO(m);
    CHECK(std::find(models.begin(), models.end(), m) != models.end());
  }
  const auto clusters = zoo_clusters();
  for (const char* c : {"dgx-a100", "dgx-a100-40gb", "dgx-h100", "dgx-h100-96gb", "hgx-h200",
                        "dgx-b200", "gb200-nvl72", "dgx-b300", "gb300-nvl72"}) {
    INFO(c);
    CHECK(std::find(clusters.begin(), clusters.end(), c) != clusters.end());
  }
}

TEST_CASE("every zoo model loads, is named after its file, and cites a source") {
  for (const auto& name : zoo_models()) {
    INFO(name);
    ir::ModelSpec m;
    REQUIRE_NOTHROW(m = load_model(name));
    CHECK(m.name == name);
    CHECK(check_model(m).empty());
    const std::string text = read_text(data_dir() / "models" / (name + ".textproto"));
    CHECK(text.find("source: \"") != std::string::npos);
  }
}

TEST_CASE("every zoo cluster loads, is named after its file, and cites a source") {
  for (const auto& name : zoo_clusters()) {
    INFO(name);
    Cluster c;
    REQUIRE_NOTHROW(c = load_cluster(name));
    CHECK(c.cluster.name == name);
    CHECK(c.cluster.gpu == c.gpu.name);
    CHECK(c.cluster.fabric.kind == topology::FabricKind::kRailOptimizedFatTree);
    CHECK(c.cluster.fabric.tiers == 2);
    CHECK(c.cluster.fabric.oversubscription == 1.0);
    CHECK(c.gpu.matmul_efficiency > 0.5);
    CHECK(c.gpu.matmul_efficiency <= 1.0);
    const std::string text = read_text(data_dir() / "topologies" / (name + ".textproto"));
    CHECK(text.find("source: \"") != std::string::npos);
  }
}

TEST_CASE("published architectures") {
  // Brown et al. 2020 Table 2.1; vocab padded to 51200 as in Megatron-LM SC'21.
  const auto gpt3 = load_model("gpt3-175b");
  CHECK(gpt3.num_layers == 96);
  CHECK(gpt3.hidden == 12288);
  CHECK(gpt3.num_heads == 96);
  CHECK(gpt3.num_kv_heads == 96);  // defaulted to num_heads
  CHECK(gpt3.ffn_hidden == 4 * 12288);
  CHECK(gpt3.vocab == 51200);
  CHECK(gpt3.max_seq_len == 2048);  // learned positions keep their table size
  CHECK(gpt3.position == ir::Position::kLearned);
  CHECK(gpt3.norm == ir::Norm::kLayerNorm);
  CHECK(gpt3.activation == ir::Activation::kGelu);
  CHECK(gpt3.linear_bias);

  const auto l70 = load_model("llama2-70b");
  CHECK(l70.num_kv_heads == 8);
  CHECK(l70.ffn_hidden == 28672);
  CHECK(l70.vocab == 32000);

  // Dubey et al. 2024 Table 3.
  const auto l405 = load_model("llama3-405b");
  CHECK(l405.num_layers == 126);
  CHECK(l405.hidden == 16384);
  CHECK(l405.num_heads == 128);
  CHECK(l405.num_kv_heads == 8);
  CHECK(l405.ffn_hidden == 53248);
  CHECK(l405.vocab == 128256);
  CHECK(l405.max_seq_len == 0);  // rotary positions: no table
  CHECK(l405.position == ir::Position::kRope);
  CHECK(l405.norm == ir::Norm::kRmsNorm);
  CHECK(l405.activation == ir::Activation::kSwiglu);
  CHECK_FALSE(l405.tied_embeddings);
  CHECK_FALSE(l405.linear_bias);
  CHECK(l405.head_dim() == 128);

  const auto mt = load_model("megatron-530b");
  CHECK(mt.num_layers == 105);
  CHECK(mt.hidden == 20480);
  CHECK(mt.num_heads == 128);
  CHECK(mt.ffn_hidden == 4 * 20480);
}

TEST_CASE("datasheet values and units of the cluster zoo") {
  const auto a100 = load_cluster("dgx-a100");
  // nvidia-smi: 81920 MiB = 80 GiB exactly (85.9 GB), not 80e9 bytes.
  CHECK(a100.gpu.memory_capacity.count() == 81920LL * 1024 * 1024);
  CHECK(a100.gpu.memory_capacity.in_gib() == Approx(80.0));
  CHECK(a100.gpu.peak_bf16.tflops() == Approx(312));
  CHECK(a100.gpu.peak_fp8.per_s() == 0);
  CHECK(a100.gpu.peak_tf32.tflops() == Approx(156));
  CHECK(a100.gpu.memory_bandwidth.gbytes_per_s() == Approx(2039));
  CHECK(a100.gpu.num_sms == 108);
  // 300 GB/s per direction of NVLink3; 200 Gb/s HDR = 25 GB/s per NIC.
  CHECK(a100.cluster.scale_up.nvlink_bandwidth.gbytes_per_s() == Approx(300));
  CHECK(a100.cluster.host.nic_bandwidth.gbytes_per_s() == Approx(25));
  CHECK(a100.cluster.host.nics_per_host == 8);
  CHECK_FALSE(a100.cluster.scale_up.nvlink_sharp);
  CHECK(a100.cluster.scale_up.nvlink_latency == Duration::from_ns(600));

  const auto a40 = load_cluster("dgx-a100-40gb");
  CHECK(a40.gpu.memory_capacity.count() == 40960LL * 1024 * 1024);
  CHECK(a40.gpu.memory_bandwidth.gbytes_per_s() == Approx(1555));

  const auto h100 = load_cluster("dgx-h100");
  CHECK(h100.gpu.peak_bf16.tflops() == Approx(989));
  CHECK(h100.gpu.peak_fp8.tflops() == Approx(1979));
  CHECK(h100.gpu.memory_capacity.count() == 81559LL * 1024 * 1024);
  CHECK(h100.gpu.memory_bandwidth.gbytes_per_s() == Approx(3350));
  CHECK(h100.gpu.num_sms == 132);
  CHECK(h100.cluster.scale_up.nvlink_bandwidth.gbytes_per_s() == Approx(450));
  CHECK(h100.cluster.scale_up.nvlink_sharp);
  CHECK(h100.cluster.host.nic_bandwidth.gbytes_per_s() == Approx(50));  // 400 Gb/s NDR
  CHECK(h100.cluster.fabric.switch_radix == 64);
  CHECK(h100.gpu.kernel_launch_overhead == Duration::from_us(3));

  // The 96GB HBM2e part: the 80GB part's compute, slower and larger memory, the same nodes.
  const auto h96 = load_cluster("dgx-h100-96gb");
  CHECK(h96.gpu.name == "H100-SXM5-96GB");
  CHECK(h96.gpu.peak_bf16.tflops() == h100.gpu.peak_bf16.tflops());
  CHECK(h96.gpu.num_sms == h100.gpu.num_sms);
  CHECK(h96.gpu.memory_bandwidth.gbytes_per_s() == Approx(2410));
  CHECK(h96.gpu.memory_capacity.in_gib() == Approx(96));
  CHECK(h96.cluster.host.nic_bandwidth == h100.cluster.host.nic_bandwidth);
  CHECK(h96.gpu.compute_slowdown_under_comm == h100.gpu.compute_slowdown_under_comm);

  const auto h200 = load_cluster("hgx-h200");
  CHECK(h200.gpu.memory_bandwidth.gbytes_per_s() == Approx(4800));
  CHECK(h200.gpu.memory_capacity.in_gib() == Approx(143771.0 / 1024));
}

TEST_CASE("zoo files load from TRAINSIM_DATA_DIR when it is set") {
  test::TempDir dir;
  dir.write("models/custom.textproto", test::kValidModel);
  const char* old = std::getenv("TRAINSIM_DATA_DIR");
  const std::string saved = old != nullptr ? old : "";
  ::setenv("TRAINSIM_DATA_DIR", dir.path().c_str(), 1);
  CHECK(data_dir() == dir.path());
  const auto models = zoo_models();
  CHECK(models == std::vector<std::string>{"custom"});
  CHECK(load_model("custom").name == "tiny");
  if (old != nullptr) {
    ::setenv("TRAINSIM_DATA_DIR", saved.c_str(), 1);
  } else {
    ::unsetenv("TRAINSIM_DATA_DIR");
  }
}

}  // namespace
}  // namespace ts::config
