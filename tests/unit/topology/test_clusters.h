// Hand-built cluster specs for topology and network tests (datasheet line rates of the issue).
#pragma once

#include "sim/topology/cluster_spec.h"

namespace ts::testing {

// DGX H100: 8 GPUs, NVLink4 450 GB/s per direction with NVLink SHARP, 8 x 400 Gb/s NDR NICs,
// rail-optimized two-tier fat-tree of 64-port switches (32 nodes per leaf).
inline topology::ClusterSpec dgx_h100() {
  topology::ClusterSpec c;
  c.name = "test-dgx-h100";
  c.gpu = "H100-SXM5-80GB";
  c.node.gpus_per_node = 8;
  c.node.nvlink_bandwidth = Bandwidth::gbytes_per_s(450);
  c.node.nvlink_latency = Duration::from_ns(600);
  c.node.nvlink_sharp = true;
  c.node.nics_per_node = 8;
  c.node.nic_bandwidth = Bandwidth::gbits_per_s(400);
  c.node.nic_latency = Duration::from_ns(2100);
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
  c.node.nvlink_bandwidth = Bandwidth::gbytes_per_s(300);
  c.node.nvlink_sharp = false;
  c.node.nic_bandwidth = Bandwidth::gbits_per_s(200);
  c.fabric.switch_radix = 40;
  return c;
}

}  // namespace ts::testing
