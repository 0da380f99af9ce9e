// trainsim-netbench: wall-clock cost of one network-model collective evaluation, by cluster size.
//
// For DGX H100 clusters of 8, 1024 and 16384 GPUs (rail-optimized fat-tree, two tiers, three
// for 16384) it times NetworkModel::collective for the communication patterns of a training
// step: one all-reduce over every GPU, all tensor-parallel groups (8 GPUs, one per node) at
// once, all data-parallel groups (one GPU per node, 8 concurrent groups), and all-to-all in
// groups of 64. "cold" evaluates the schedule on the topology (routing, max-min sharing);
// "cached" is a later call for another size on the same groups. Prints one table: name, GPUs,
// microseconds per evaluation (median of repeated runs), and the time the model predicts.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "sim/config/network_calibration_loader.h"
#include "sim/network/network_model.h"

using namespace ts;
using namespace ts::network;

namespace {

topology::ClusterSpec dgx_h100(std::int32_t tiers) {
  // Datasheet values of a DGX H100 SuperPOD (topologies/dgx-h100.textproto).
  topology::ClusterSpec c;
  c.name = "dgx-h100";
  c.gpu = "H100-SXM5-80GB";
  c.scale_up.gpus_per_domain = 8;
  c.scale_up.nvlink_bandwidth = Bandwidth::gbytes_per_s(450);
  c.scale_up.nvlink_sharp = true;
  c.host.gpus_per_host = 8;
  c.host.nics_per_host = 8;
  c.host.nic_bandwidth = Bandwidth::gbits_per_s(400);
  c.fabric.kind = topology::FabricKind::kRailOptimizedFatTree;
  c.fabric.tiers = tiers;
  c.fabric.oversubscription = 1;
  c.fabric.switch_radix = 64;
  c.fabric.switch_latency = Duration::from_ns(600);
  return c;
}

std::vector<Group> groups_of(std::int32_t gpus, std::int32_t size, bool strided) {
  const std::int32_t count = gpus / size;
  std::vector<Group> gs(static_cast<std::size_t>(count));
  for (std::int32_t g = 0; g < count; ++g) {
    for (std::int32_t i = 0; i < size; ++i) {
      gs[static_cast<std::size_t>(g)].push_back(strided ? g + i * count : g * size + i);
    }
  }
  return gs;
}

// Median wall time of one call, in microseconds, over at least `min_reps` calls and 0.3 s.
template <typename F>
double time_us(F&& f, int min_reps) {
  std::vector<double> samples;
  const auto start = std::chrono::steady_clock::now();
  while (static_cast<int>(samples.size()) < min_reps ||
         std::chrono::steady_clock::now() - start < std::chrono::milliseconds(300)) {
    const auto t0 = std::chrono::steady_clock::now();
    f();
    const auto t1 = std::chrono::steady_clock::now();
    samples.push_back(std::chrono::duration<double, std::micro>(t1 - t0).count());
    if (samples.size() >= 10000) break;
  }
  std::sort(samples.begin(), samples.end());
  return samples[samples.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string calibration;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--calibration") == 0 && i + 1 < argc) {
      calibration = argv[++i];
    } else {
      std::fprintf(stderr, "usage: trainsim-netbench [--calibration FILE]\n");
      return 2;
    }
  }
  const NetworkCalibration cal = config::load_network_calibration(calibration);
  std::printf("%-42s %6s %7s %14s %10s\n", "benchmark", "gpus", "groups", "us/evaluation", "model_ms");
  for (const std::int32_t gpus : {8, 1024, 16384}) {
    const topology::Topology topo(dgx_h100(gpus > 2048 ? 3 : 2), gpus);
    struct Case {
      std::string name;
      CollectiveOp op;
      std::vector<Group> groups;
      Bytes bytes;
    };
    std::vector<Case> cases;
    cases.push_back({"all_reduce, one group of all", CollectiveOp::kAllReduce, groups_of(gpus, gpus, false), Bytes::gib(1)});
    if (gpus > 8) {
      cases.push_back({"all_reduce, all TP groups (8)", CollectiveOp::kAllReduce, groups_of(gpus, 8, false), Bytes::mib(64)});
      cases.push_back({"all_reduce, all DP groups (TP=8)", CollectiveOp::kAllReduce, groups_of(gpus, gpus / 8, true),
                       Bytes::gib(1)});
      cases.push_back({"all_to_all, all groups of 64", CollectiveOp::kAllToAll, groups_of(gpus, 64, false), Bytes::mib(256)});
    }
    for (const auto& c : cases) {
      CollectiveRequest r;
      r.op = c.op;
      r.groups = c.groups;
      r.bytes = c.bytes;
      NetworkModel cold(topo, cal);
      cold.set_caching(false);
      Duration predicted;
      const double cold_us = time_us([&] { predicted = cold.collective(r).time; }, gpus > 2048 ? 3 : 10);
      NetworkModel warm(topo, cal);
      (void)warm.collective(r);
      std::int64_t b = c.bytes.count();
      const double warm_us = time_us(
          [&] {
            r.bytes = Bytes(b);
            b = b % (std::int64_t{1} << 34) + 4096;  // another size every call: no result reuse
            (void)warm.collective(r);
          },
          1000);
      std::printf("%-42s %6d %7zu %14.1f %10.3f\n", (c.name + ", cold").c_str(), gpus, c.groups.size(), cold_us,
                  predicted.seconds() * 1e3);
      std::printf("%-42s %6d %7zu %14.2f %10s\n", (c.name + ", cached").c_str(), gpus, c.groups.size(), warm_us, "");
    }
  }
  return 0;
}
