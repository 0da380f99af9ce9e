// Hand-built cluster specs for topology and network tests (datasheet line rates of the issue).
#pragma once

#include <cstdint>

#include "sim/topology/cluster_spec.h"

namespace ts::testing {

// DGX H100: 8 GPUs, NVLink4 450 GB/s per direction with NVLink SHARP, 8 x 400 Gb/s NDR NICs,
// rail-optimized two-tier fat-tree of 64-port switches (32 nodes per leaf).
inline topology::ClusterSpec dgx_h100() {
  topology::ClusterSpec c;
  c.name = "test-dgx-h100";
  c.gpu = "H100-SXM5-80GB";
  c.scale_up.gpus_per_domain = c.host.gpus_per_host = 8;
  c.scale_up.nvlink_bandwidth = Bandwidth::gbytes_per_s(450);
  c.scale_up.nvlink_latency = Duration::from_ns(600);
  c.scale_up.nvlink_sharp = true;
  c.host.nics_per_host = 8;
  c.host.nic_bandwidth = Bandwidth::gbits_per_s(400);
  c.host.nic_latency = Duration::from_ns(2100);
  c.fabric.kind = topology::FabricKind::kRailOptimizedFatTree;
  c.fabric.tiers = 2;
  c.fabric.oversubscription = 1.0;
  c.fabric.switch_latency = Duration::from_ns(600);
  c.fabric.switch_radix = 64;
  return c;
}

// DGX A100: 8 GPUs, NVLink3 300 GB/s per direction, no NVLS, 8 x 200 Gb/s HDR NICs.
inline topology::ClusterSpec dgx_a100() {
  topology::ClusterSpec c = dgx_h100();
  c.name = "test-dgx-a100";
  c.gpu = "A100-SXM4-80GB";
  c.scale_up.nvlink_bandwidth = Bandwidth::gbytes_per_s(300);
  c.scale_up.nvlink_sharp = false;
  c.host.nic_bandwidth = Bandwidth::gbits_per_s(200);
  c.fabric.switch_radix = 40;
  return c;
}

// GB200 NVL72 racks (topologies/gb200-nvl72.textproto): 72 GPUs per NVLink5 domain at 900 GB/s
// per direction with NVLS, compute trays of 4 GPUs with 4 x 400 Gb/s NICs; `used` GPUs of each
// rack placed (0 = all 72).
inline topology::ClusterSpec gb200_nvl72(std::int32_t used = 0) {
  topology::ClusterSpec c = dgx_h100();
  c.name = "test-gb200-nvl72";
  c.gpu = "GB200-NVL-186GB";
  c.scale_up.gpus_per_domain = 72;
  c.scale_up.gpus_used_per_domain = used;
  c.scale_up.nvlink_generation = 5;
  c.scale_up.nvlink_bandwidth = Bandwidth::gbytes_per_s(900);
  c.host.gpus_per_host = 4;
  c.host.nics_per_host = 4;
  return c;
}

// DGX B200 (topologies/dgx-b200.textproto): 8 GPUs, NVLink5 900 GB/s, 8 x 400 Gb/s NICs.
inline topology::ClusterSpec dgx_b200() {
  topology::ClusterSpec c = dgx_h100();
  c.name = "test-dgx-b200";
  c.gpu = "B200-SXM-180GB";
  c.scale_up.nvlink_generation = 5;
  c.scale_up.nvlink_bandwidth = Bandwidth::gbytes_per_s(900);
  return c;
}

}  // namespace ts::testing
