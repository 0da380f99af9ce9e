// ClusterSpec: scale-up domain (NVLink), host (GPUs, NICs) and fabric of a cluster, validated.
#pragma once

#include <cstdint>
#include <string>

#include "sim/base/units.h"

namespace ts::topology {

// The scale-up domain: GPUs that reach each other over NVLink through NVSwitches (8 in a DGX or
// HGX node, 72 in an NVL72 rack). Collectives inside one domain never touch a NIC.
struct ScaleUpSpec {
  std::int32_t gpus_per_domain = 0;
  // GPUs of each domain a job is placed on (NVL72 jobs often use 64 of 72, keeping spares);
  // 0 = all of them. A multiple of the host's GPUs.
  std::int32_t gpus_used_per_domain = 0;
  std::int32_t nvlink_generation = 0;  // 3 = A100, 4 = H100/H200, 5 = Blackwell; 0 = not stated
  Bandwidth nvlink_bandwidth;  // per GPU, per direction, into the NVSwitch
  Duration nvlink_latency;
  bool nvlink_sharp = false;  // NVLS in-switch reduction (NVSwitch gen3 and later)

  // GPUs of each domain the job's ranks fill before the next domain.
  std::int32_t placed_per_domain() const {
    return gpus_used_per_domain > 0 ? gpus_used_per_domain : gpus_per_domain;
  }
};

// The host (a server, or a compute tray of a rack): its GPUs own its NICs.
struct HostSpec {
  std::int32_t gpus_per_host = 0;
  std::int32_t nics_per_host = 0;  // compute-fabric NICs
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
  // Domains under one leaf switch (rail-optimized: one leaf per rail per group of this many
  // domains, a DGX SuperPOD "scalable unit"); 0 = the leaf's downlink ports,
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
  ScaleUpSpec scale_up;
  HostSpec host;
  FabricSpec fabric;

  // NICs serving the placed GPUs of one domain: those of its hosts (the hosts of a domain are
  // whole: placed_per_domain is a multiple of gpus_per_host).
  std::int32_t nics_per_domain() const {
    if (host.gpus_per_host <= 0) return 0;
    return static_cast<std::int32_t>(static_cast<std::int64_t>(host.nics_per_host) *
                                     scale_up.placed_per_domain() / host.gpus_per_host);
  }
};

}  // namespace ts::topology
