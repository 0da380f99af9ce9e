// Cluster files with a scale-up domain apart from the host: loading, checks, the Blackwell zoo.
#include <catch2/catch.hpp>

#include <string>

#include "sim/config/loader.h"
#include "tests/unit/config/config_test_util.h"

namespace ts::config {
namespace {

using test::diagnostics_of;
using test::find_field;

// kValidCluster with its node block replaced by `blocks`.
std::string with_blocks(const std::string& blocks) {
  std::string text(test::kValidCluster);
  const auto start = text.find("node {");
  const auto end = text.find("}\n", start) + 2;
  return text.substr(0, start) + blocks + text.substr(end);
}

const std::string kRack =
    "scale_up {\n"
    "  gpus_per_domain: 72\n"
    "  nvlink_generation: 5\n"
    "  nvlink_bandwidth_gbps: 900\n"
    "  nvlink_latency_ns: 600\n"
    "  nvlink_sharp: true\n"
    "}\n"
    "host {\n"
    "  gpus_per_host: 4\n"
    "  nics_per_host: 4\n"
    "  nic_bandwidth_gbits: 400\n"
    "  nic_latency_ns: 2100\n"
    "}\n";

TEST_CASE("a cluster file may give the NVLink domain and the host apart") {
  test::TempDir dir;
  const auto c = load_cluster(dir.write("rack.textproto", with_blocks(kRack)));
  CHECK(c.cluster.scale_up.gpus_per_domain == 72);
  CHECK(c.cluster.scale_up.placed_per_domain() == 72);
  CHECK(c.cluster.scale_up.nvlink_generation == 5);
  CHECK(c.cluster.scale_up.nvlink_bandwidth.gbytes_per_s() == Approx(900));
  CHECK(c.cluster.host.gpus_per_host == 4);
  CHECK(c.cluster.nics_per_domain() == 72);
  // The node shorthand: one host per domain.
  const auto n = load_cluster(dir.write("node.textproto", std::string(test::kValidCluster)));
  CHECK(n.cluster.scale_up.gpus_per_domain == 4);
  CHECK(n.cluster.host.gpus_per_host == 4);
  CHECK(n.cluster.nics_per_domain() == 4);
}

TEST_CASE("domain and host must agree, and node excludes them") {
  test::TempDir dir;
  // 70 GPUs are not whole 4-GPU hosts.
  std::string text = with_blocks(kRack);
  text = test::replace_line(text, "gpus_per_domain:", "  gpus_per_domain: 70");
  auto ds = diagnostics_of([&] { load_cluster(dir.write("a.textproto", text)); });
  INFO(test::dump(ds));
  REQUIRE(find_field(ds, "scale_up.gpus_per_domain") != nullptr);
  CHECK(
      find_field(ds, "scale_up.gpus_per_domain")->message.find("multiple of host.gpus_per_host") !=
      std::string::npos);

  // More GPUs used than the domain has.
  text = test::replace_line(
      with_blocks(kRack), "gpus_per_domain:", "  gpus_per_domain: 72\n  gpus_used_per_domain: 80");
  ds = diagnostics_of([&] { load_cluster(dir.write("b.textproto", text)); });
  REQUIRE(find_field(ds, "scale_up.gpus_used_per_domain") != nullptr);

  // A host without a domain.
  text = with_blocks(kRack.substr(kRack.find("host {")));
  ds = diagnostics_of([&] { load_cluster(dir.write("c.textproto", text)); });
  REQUIRE(find_field(ds, "scale_up") != nullptr);
  CHECK(find_field(ds, "scale_up")->message.find("missing") != std::string::npos);

  // Both forms at once.
  text = std::string(test::kValidCluster) + kRack;
  ds = diagnostics_of([&] { load_cluster(dir.write("d.textproto", text)); });
  CHECK(find_field(ds, "scale_up") != nullptr);
  CHECK(find_field(ds, "host") != nullptr);
}

TEST_CASE("the Blackwell clusters: NVLink5 domains of 8 and 72 GPUs, sourced peaks and power") {
  const auto b200 = load_cluster("dgx-b200");
  CHECK(b200.gpu.name == "B200-SXM-180GB");
  CHECK(b200.gpu.peak_bf16.tflops() == Approx(2250));
  CHECK(b200.gpu.peak_fp8.tflops() == Approx(4500));
  CHECK(b200.gpu.memory_capacity.count() == 180LL * 1000 * 1000 * 1000);
  CHECK(b200.gpu.power_watts == Approx(1000));
  CHECK(b200.cluster.scale_up.gpus_per_domain == 8);
  CHECK(b200.cluster.scale_up.nvlink_bandwidth.gbytes_per_s() == Approx(900));
  CHECK(b200.cluster.host.nics_per_host == 8);
  CHECK(b200.cluster.host.nic_bandwidth.gbytes_per_s() == Approx(50));  // 400 Gb/s

  const auto gb200 = load_cluster("gb200-nvl72");
  CHECK(gb200.gpu.peak_bf16.tflops() == Approx(2500));
  CHECK(gb200.gpu.power_watts == Approx(1200));
  CHECK(gb200.cluster.scale_up.gpus_per_domain == 72);
  CHECK(gb200.cluster.host.gpus_per_host == 4);
  CHECK(gb200.cluster.host.nics_per_host == 4);
  CHECK(gb200.cluster.nics_per_domain() == 72);

  const auto b300 = load_cluster("dgx-b300");
  CHECK(b300.gpu.memory_capacity.count() == 288LL * 1000 * 1000 * 1000);
  CHECK(b300.cluster.host.nic_bandwidth.gbytes_per_s() == Approx(100));  // 800 Gb/s
  CHECK(b300.cluster.fabric.switch_radix == 144);

  const auto gb300 = load_cluster("gb300-nvl72");
  CHECK(gb300.cluster.scale_up.gpus_per_domain == 72);
  CHECK(gb300.cluster.host.nic_bandwidth.gbytes_per_s() == Approx(100));
  CHECK(gb300.gpu.power_watts == Approx(1400));
}

}  // namespace
}  // namespace ts::config
