// Network calibration: NCCL protocol latencies and achievable link fractions per GPU generation.
// Plain structs filled by config (calibration/network/*.textproto); no value is set here
// except the neutral defaults of an uncalibrated, wire-rate model.
#pragma once

#include <array>
#include <cctype>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "sim/base/units.h"

namespace ts::network {

// NCCL's wire protocols (NCCL src/device/prims_*.h): LL (8-byte stores carrying a 4-byte flag,
// lowest latency), LL128 (128-byte lines with an 8-byte flag) and Simple (bulk copies with
// fences, highest latency, full bandwidth).
enum class Protocol { kLL, kLL128, kSimple };
inline constexpr int kNumProtocols = 3;
inline constexpr std::array<Protocol, kNumProtocols> kProtocols = {Protocol::kLL, Protocol::kLL128,
                                                                   Protocol::kSimple};

inline std::string_view protocol_name(Protocol p) {
  switch (p) {
    case Protocol::kLL: return "LL";
    case Protocol::kLL128: return "LL128";
    case Protocol::kSimple: return "Simple";
  }
  return "?";
}

// Per-step latency of one hop of an algorithm, by the kind of hop.
struct StepLatency {
  Duration nvlink;   // a hop inside a node
  Duration network;  // a hop between nodes (the fabric's extra switch traversals are added)
};

struct ProtocolCalibration {
  bool enabled = true;
  // Fraction of the links' achievable bandwidth this protocol reaches.
  double bandwidth_fraction = 1.0;
  // Fixed cost of one collective call with this protocol (launch, setup, synchronisation).
  Duration base_latency;
  StepLatency ring;  // per ring step
  StepLatency tree;  // per tree level
};

// One GPU generation's network behaviour.
struct NetworkProfile {
  std::string name;               // "hopper"
  std::vector<std::string> gpus;  // cluster GPU names it applies to ("H100-SXM5-80GB")
  // Achievable fraction of the NVLink line rate for ring traffic (NCCL's ring plateau).
  double nvlink_efficiency = 1.0;
  // Extra factor on nvlink_efficiency by the number of a domain's GPUs in the ring, index =
  // that count (entries 0 and 1 unused); missing entries are 1. The published curves end at 8
  // GPUs (the factor is plateau(n) / plateau(8)), so rings of more than 8 GPUs of one NVLink
  // domain (NVL72) run at the 8-GPU plateau, nvlink_efficiency itself: a ring's per-GPU
  // traffic does not depend on its length, and no measurement says otherwise.
  std::vector<double> ring_nvlink_factor_by_ranks;
  // Achievable fraction of the NVLink line rate for NVLS (in-switch reduction) traffic;
  // 0 = the GPU generation has no NVLS.
  double nvls_efficiency = 0.0;
  Duration nvls_base_latency;  // fixed cost of an NVLS collective (replaces the protocol base)
  // Achievable fraction of the NIC and fabric line rate.
  double network_efficiency = 1.0;
  // Fraction of the flow-level bandwidth a double binary tree reaches (pipelining losses).
  double tree_bandwidth_fraction = 1.0;
  // Fixed cost of a send/recv pair.
  Duration p2p_latency;
  std::array<ProtocolCalibration, kNumProtocols> protocols{};

  const ProtocolCalibration& protocol(Protocol p) const { return protocols[static_cast<std::size_t>(p)]; }
  double ring_nvlink_factor(std::int32_t ranks_in_node) const {
    const auto i = static_cast<std::size_t>(ranks_in_node);
    return i < ring_nvlink_factor_by_ranks.size() && ring_nvlink_factor_by_ranks[i] > 0
               ? ring_nvlink_factor_by_ranks[i]
               : 1.0;
  }
};

struct NetworkCalibration {
  std::string file;  // where it was loaded from (for messages)
  std::vector<NetworkProfile> profiles;
};

// The profile listing `gpu` (case-insensitive), or nullptr.
inline const NetworkProfile* find_profile(const NetworkCalibration& c, std::string_view gpu) {
  const auto same = [](std::string_view a, std::string_view b) {
    if (a.size() != b.size()) return false;
    for (std::size_t i = 0; i < a.size(); ++i) {
      if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
        return false;
      }
    }
    return true;
  };
  for (const auto& p : c.profiles) {
    for (const auto& g : p.gpus) {
      if (same(g, gpu)) return &p;
    }
  }
  return nullptr;
}

// `p` with every collective's and transfer's time multiplied by `factor` (> 0): each protocol's
// bandwidth fraction divided by it and every latency multiplied (the fabric's per-switch hop
// extra, a topology property, is left as is). A perturbed calibration, replayed to propagate the
// collective model's spread into a prediction interval (driver/intervals.h).
inline NetworkProfile time_scaled_profile(NetworkProfile p, double factor) {
  const auto scale = [factor](Duration& d) { d = d.scaled(factor); };
  for (ProtocolCalibration& pc : p.protocols) {
    pc.bandwidth_fraction /= factor;
    scale(pc.base_latency);
    for (StepLatency* s : {&pc.ring, &pc.tree}) {
      scale(s->nvlink);
      scale(s->network);
    }
  }
  scale(p.nvls_base_latency);
  scale(p.p2p_latency);
  p.name += " x" + std::to_string(factor);
  return p;
}

// The uncalibrated model: links at line rate, no protocol latency, Simple only, NVLS allowed
// where the cluster has it at line rate. What NetworkModel uses without a calibration.
inline NetworkProfile ideal_profile() {
  NetworkProfile p;
  p.name = "ideal";
  p.nvls_efficiency = 1.0;
  p.protocols[static_cast<std::size_t>(Protocol::kLL)].enabled = false;
  p.protocols[static_cast<std::size_t>(Protocol::kLL128)].enabled = false;
  return p;
}

}  // namespace ts::network
