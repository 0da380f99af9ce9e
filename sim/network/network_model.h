// NetworkModel: time of collectives and point-to-point transfers on a topology.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/base/units.h"
#include "sim/topology/topology.h"

namespace ts::network {

enum class CollectiveOp { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast };
enum class Algorithm { kAuto, kRing, kTree, kNvls, kDirect, kHierarchical };

std::string_view collective_name(CollectiveOp op);
std::string_view algorithm_name(Algorithm a);

using Group = std::vector<std::int32_t>;  // global GPU indices, in rank order

// One collective run at the same time by several disjoint groups of the same shape (e.g. every
// TP group of the cluster). `bytes` follows nccl-tests: the whole buffer for all-reduce,
// broadcast and all-to-all, the full gathered output for all-gather and the full input for
// reduce-scatter (each rank holds bytes / n before the all-gather and after the reduce-scatter).
struct CollectiveRequest {
  CollectiveOp op = CollectiveOp::kAllReduce;
  Bytes bytes;
  std::vector<Group> groups;  // all concurrent groups; at least one, all of equal size
  Algorithm algorithm = Algorithm::kAuto;
};

struct CollectiveCost {
  Duration time;  // of the slowest group
  Algorithm algorithm = Algorithm::kRing;
};

class NetworkModel {
 public:
  explicit NetworkModel(const topology::Topology& topo) : topo_(topo) {}

  CollectiveCost collective(const CollectiveRequest& request) const;
  Duration send_recv(std::int32_t src, std::int32_t dst, Bytes bytes) const;

 private:
  const topology::Topology& topo_;
};

}  // namespace ts::network
