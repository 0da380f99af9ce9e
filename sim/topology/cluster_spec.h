// ClusterSpec: node (GPUs, NVLink, NICs) and fabric of a cluster as read from a topology file, validated.
#pragma once

#include <cstdint>
#include <string>

#include "sim/base/units.h"

namespace ts::topology {

struct NodeSpec {
  std::int32_t gpus_per_node = 0;
  Bandwidth nvlink_bandwidth;  // per GPU, per direction, into the NVSwitch
  Duration nvlink_latency;
  bool nvlink_sharp = false;  // NVLS in-switch reduction (H100/H200 NVSwitch gen3)
  std::int32_t nics_per_node = 0;
  Bandwidth nic_bandwidth;  // per NIC, per direction
  Duration nic_latency;
  // GPU ↔ NIC path (PCIe), per direction; zero = never the bottleneck (not modelled).
  Bandwidth pcie_bandwidth;
};

enum class FabricKind { kRailOptimizedFatTree, kFatTree };

struct FabricSpec {
  FabricKind kind = FabricKind::kRailOptimizedFatTree;
  std::int32_t tiers = 2;
  double oversubscription = 1.0;  // downlink:uplink ratio at the leaf; 1 = non-blocking
  Duration switch_latency;
  std::int32_t switch_radix = 0;  // ports per switch (64 on a Quantum-2 NDR switch)
  // Switch-to-switch links, per direction; zero = the NIC line rate.
  Bandwidth link_bandwidth;
  // Nodes under one leaf switch (rail-optimized: one leaf per rail per group of this many
  // nodes, a DGX SuperPOD "scalable unit"); 0 = the leaf's downlink ports,
  // switch_radix · oversubscription / (1 + oversubscription).
  std::int32_t nodes_per_leaf = 0;
  // Adaptive routing (InfiniBand's subnet manager default, ar_updn): a switch spreads traffic
  // over all its uplinks by load. Off: static destination-based routing (D-mod-k, as ECMP
  // hashing on Ethernet), where flows to destinations congruent modulo the uplinks collide.
  bool adaptive_routing = false;
};

struct ClusterSpec {
  std::string name;
  std::string gpu;  // GPU kind name; its compute properties live in compute::GpuSpec
  NodeSpec node;
  FabricSpec fabric;
};

}  // namespace ts::topology
