// Collective operations and algorithms, and the nccl-tests bus-bandwidth factors.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace ts::network {

// kSendRecv follows nccl-tests sendrecv_perf: every rank i sends the buffer to rank i+1
// (mod n) of its group, in the group's rank order.
enum class CollectiveOp { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kBroadcast, kSendRecv };
enum class Algorithm { kAuto, kRing, kTree, kNvls, kDirect, kHierarchical };

std::string_view collective_name(CollectiveOp op);
std::string_view algorithm_name(Algorithm a);
std::optional<CollectiveOp> parse_collective(std::string_view name);  // "all_reduce", ...
std::optional<Algorithm> parse_algorithm(std::string_view name);      // "ring", ...

// An all-to-all that is a mixture-of-experts token dispatch or combine run by a hierarchical
// dispatcher (DeepEP, HybridEP): the buffer holds top_k copies of each of a rank's tokens, bound
// for `experts` experts spread evenly over the group's ranks in order; a token's experts lie in
// `group_limit` of `expert_groups` equal groups of consecutive experts (0: no limit). A token
// crosses the network once per destination node and is forwarded over NVLink there, and reaches
// each rank holding any of its experts once (see rank_dedup).
// experts == 0: not a dispatch.
struct TokenRouting {
  std::int64_t experts = 0;
  std::int64_t top_k = 0;
  std::int64_t expert_groups = 0;
  std::int64_t group_limit = 0;
  bool operator==(const TokenRouting&) const = default;
};

// nccl-tests doc/PERFORMANCE.md: busbw = algbw · factor, with factor 2(n-1)/n for all-reduce,
// (n-1)/n for all-gather, reduce-scatter and all-to-all, 1 for broadcast and send/recv.
double bus_bandwidth_factor(CollectiveOp op, std::int32_t n);

}  // namespace ts::network
