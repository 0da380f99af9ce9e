// First network model: ring collectives at the bottleneck link bandwidth of the group.
#include "sim/network/network_model.h"

#include <algorithm>

#include "sim/base/diagnostic.h"

namespace ts::network {

std::string_view collective_name(CollectiveOp op) {
  switch (op) {
    case CollectiveOp::kAllReduce: return "all_reduce";
    case CollectiveOp::kAllGather: return "all_gather";
    case CollectiveOp::kReduceScatter: return "reduce_scatter";
    case CollectiveOp::kAllToAll: return "all_to_all";
    case CollectiveOp::kBroadcast: return "broadcast";
  }
  return "?";
}

std::string_view algorithm_name(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto: return "auto";
    case Algorithm::kRing: return "ring";
    case Algorithm::kTree: return "tree";
    case Algorithm::kNvls: return "nvls";
    case Algorithm::kDirect: return "direct";
    case Algorithm::kHierarchical: return "hierarchical";
  }
  return "?";
}

CollectiveCost NetworkModel::collective(const CollectiveRequest& r) const {
  SIM_ASSERT(!r.groups.empty() && !r.groups.front().empty(), "collective without a group");
  const auto& group = r.groups.front();
  const auto n = static_cast<std::int64_t>(group.size());
  if (n == 1) return {Duration::zero(), Algorithm::kRing};
  const auto& node = topo_.spec().node;
  const bool in_node = std::all_of(group.begin(), group.end(), [&](std::int32_t g) {
    return topo_.node_of(g) == topo_.node_of(group.front());
  });
  // Ring: each rank sends (n-1)/n of the buffer per pass over its slowest link (nccl-tests
  // bus bandwidth definitions); all-reduce is two passes (reduce-scatter then all-gather).
  const Bandwidth link = in_node ? node.nvlink_bandwidth : node.nic_bandwidth;
  const Duration hop = in_node ? node.nvlink_latency : node.nic_latency;
  double passes = 1.0;
  switch (r.op) {
    case CollectiveOp::kAllReduce: passes = 2.0; break;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll: passes = 1.0; break;
    case CollectiveOp::kBroadcast: passes = static_cast<double>(n) / static_cast<double>(n - 1); break;
  }
  const double wire = r.bytes.real() * passes * static_cast<double>(n - 1) / static_cast<double>(n);
  const Duration t = Bytes::from_real(wire) / link + hop * static_cast<std::int64_t>(passes * static_cast<double>(n - 1));
  return {t, Algorithm::kRing};
}

Duration NetworkModel::send_recv(std::int32_t src, std::int32_t dst, Bytes bytes) const {
  if (src == dst) return Duration::zero();
  const auto& node = topo_.spec().node;
  const bool in_node = topo_.node_of(src) == topo_.node_of(dst);
  return bytes / (in_node ? node.nvlink_bandwidth : node.nic_bandwidth) +
         (in_node ? node.nvlink_latency : node.nic_latency);
}

}  // namespace ts::network
