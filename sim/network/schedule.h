// Schedules: each collective algorithm as compact, per-step transfer patterns over group positions.
//
// A schedule is data, independent of the buffer size and of where the group sits: transfer
// sizes are fractions of the collective's bytes (nccl-tests size), and endpoints are positions
// in the group (node by node, by local index in the node — the order NCCL's rings follow), or
// the NVSwitch of a position's node. The runner (NetworkModel) maps positions to GPUs for every
// concurrent group, routes the transfers on the topology and shares links max-min fairly.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "sim/network/collective.h"

namespace ts::network {

// The placement of a group, as far as schedules care: n members on `nodes` nodes, `per_node`
// on each (0 when nodes hold different numbers: only flat ring and direct schedules apply).
// A "node" here is a scale-up (NVLink) domain: 8 GPUs of a DGX, up to 72 of an NVL72 rack, so
// every schedule's in-node part runs over NVLink and only its between-node part uses NICs.
struct GroupShape {
  std::int32_t size = 0;
  std::int32_t nodes = 0;
  std::int32_t per_node = 0;
  bool operator==(const GroupShape&) const = default;
};

struct Transfer {
  std::int32_t src = 0;
  std::int32_t dst = 0;
};

// A set of transfers of equal size, `fraction` of the collective's bytes each.
struct Pattern {
  enum class Kind {
    kShift,       // position i → (i + shift) mod n, for every i
    kNodeShift,   // (node j, member k) → (j, (k + shift) mod per_node), for every j, k
    kRailShift,   // (node j, member k) → ((j + shift) mod nodes, k): same rail, next node
    kToSwitch,    // every position → its node's NVSwitch (NVLS reduction reads)
    kFromSwitch,  // its node's NVSwitch → every position (NVLS multicast writes)
    kList,        // the explicit `transfers`
  };
  Kind kind = Kind::kList;
  std::int32_t shift = 0;
  std::vector<Transfer> transfers;
  double fraction = 0;
};

struct Step {
  std::vector<Pattern> patterns;
  std::int64_t repeat = 1;  // identical steps in sequence (a ring's 2(n-1) steps)
  bool nvls = false;        // NVLink links run at the NVLS efficiency
  bool tree = false;        // time divided by the tree bandwidth fraction
};

// Hops on the latency-critical chain, counted per kind (NCCL tuning.cc: ring latency =
// base + Σ per-step latency over its steps, tree = base + 2 · (levels in node + levels across)).
struct HopCounts {
  std::int32_t ring_nvlink = 0;
  std::int32_t ring_network = 0;
  std::int32_t tree_nvlink = 0;
  std::int32_t tree_network = 0;
};

struct Schedule {
  CollectiveOp op = CollectiveOp::kAllReduce;
  Algorithm algorithm = Algorithm::kRing;
  std::string_view variant;  // what runs inside a hierarchical schedule ("nvls+tree"), else empty
  GroupShape shape;
  std::vector<Step> steps;
  HopCounts hops;
  bool nvls = false;  // fixed cost is the NVLS base latency; Simple protocol only
  bool p2p = false;   // fixed cost is the send/recv latency
};

// The schedules `algorithm` (not kAuto) has for `op` on `shape`: empty when it does not apply
// (tree on one node, NVLS without NVLink SHARP or across nodes, ring for all-to-all, …); one,
// or for kHierarchical one per algorithm between nodes (ring, tree).
std::vector<Schedule> build_schedules(CollectiveOp op, Algorithm algorithm, const GroupShape& shape,
                                      bool nvls_available);

// The probability that one token's top_k copies reach a given one of `nodes` nodes (scale-up
// domains) holding experts/nodes consecutive experts each. The top_k experts are taken as drawn
// uniformly without repetition from the experts of the token's group_limit groups, themselves
// drawn uniformly from the expert_groups (without a limit, from all experts):
//   P(missed) = Σ_s P(s of the node's m whole groups selected) · C(L·g − s·g, k) / C(L·g, k)
// with g experts per group, L = group_limit (hypergeometric over groups, then over experts), or
// for groups larger than a node (1 − L/G) + (L/G) · C(L·g − e, k) / C(L·g, k) with e = experts
// per node. DeepSeek-V3 (256 experts, top 8, 4 of 8 groups) on 8 nodes: 0.453 (3.6 nodes per
// token where the limit allows 4); without the limit 0.66.
double node_reach(const TokenRouting& routing, std::int32_t nodes);

// What a dispatcher that sends a token once to each rank holding any of its experts puts on the
// wire among `ranks` ranks, as a share of the top_k copies: the expected number of distinct
// ranks a token reaches (ranks · node_reach with each rank as a "node") over top_k. 1 with one
// expert per rank; Qwen3-30B-A3B (128 experts, top 8) on 8 ranks of 16 experts: 0.67. DeepEP's
// dispatch layout marks each token once per rank (get_dispatch_layout: num_tokens_per_rank,
// is_token_in_rank), and the receiving rank expands it to its local experts' copies; HybridEP
// keeps DeepEP's interface. 1 where the ranks do not divide the experts.
double rank_dedup(const TokenRouting& routing, std::int32_t ranks);

// The hierarchical (DeepEP/HybridEP) all-to-all of `routing` on a uniform multi-node `shape`:
// in one step, every position sends node_reach/top_k of the buffer (each token once) to the
// position of the same local index in every other node (its rail), and rank_dedup/per_node of
// the buffer to every other position of its node over NVLink (the tokens for local peers and
// those it forwards for the other nodes, each once per destination rank: a token crosses NVLink
// once to each rank that needs it unless that rank is on its rail).
Schedule dispatch_schedule(const GroupShape& shape, const TokenRouting& routing);

// The algorithms that have a schedule for `op` on `shape`.
std::vector<Algorithm> applicable_algorithms(CollectiveOp op, const GroupShape& shape, bool nvls_available);

// Parents of NCCL's double binary tree over n ranks (src/graph/trees.cc ncclGetDtree): tree 0 is
// the binary tree of ncclGetBtree, tree 1 its mirror (n even) or its shift by one (n odd), so
// that no rank is an inner node of both. parent[t][r] = -1 for the roots.
struct DoubleBinaryTree {
  std::vector<std::int32_t> parent[2];
  std::int32_t depth = 0;  // levels of edges of the deeper tree
};
DoubleBinaryTree double_binary_tree(std::int32_t n);

// Bytes (as fractions of the collective's bytes) each position sends and receives over a whole
// schedule, and what the NVSwitches send and receive for NVLS.
struct Traffic {
  std::vector<double> sent;
  std::vector<double> received;
  double switch_sent = 0;
  double switch_received = 0;
};
Traffic traffic(const Schedule& schedule);

// Calls f(src, dst, src_is_switch, dst_is_switch) for every transfer of `p` on `shape`.
template <typename F>
void for_each_transfer(const Pattern& p, const GroupShape& shape, F&& f) {
  const std::int32_t n = shape.size;
  switch (p.kind) {
    case Pattern::Kind::kShift:
      for (std::int32_t i = 0; i < n; ++i) f(i, ((i + p.shift) % n + n) % n, false, false);
      return;
    case Pattern::Kind::kNodeShift: {
      const std::int32_t q = shape.per_node;
      for (std::int32_t j = 0; j < shape.nodes; ++j) {
        for (std::int32_t k = 0; k < q; ++k) f(j * q + k, j * q + ((k + p.shift) % q + q) % q, false, false);
      }
      return;
    }
    case Pattern::Kind::kRailShift: {
      const std::int32_t q = shape.per_node;
      const std::int32_t nn = shape.nodes;
      for (std::int32_t j = 0; j < nn; ++j) {
        for (std::int32_t k = 0; k < q; ++k) f(j * q + k, ((j + p.shift) % nn + nn) % nn * q + k, false, false);
      }
      return;
    }
    case Pattern::Kind::kToSwitch:
      for (std::int32_t i = 0; i < n; ++i) f(i, i, false, true);
      return;
    case Pattern::Kind::kFromSwitch:
      for (std::int32_t i = 0; i < n; ++i) f(i, i, true, false);
      return;
    case Pattern::Kind::kList:
      for (const auto& t : p.transfers) f(t.src, t.dst, false, false);
      return;
  }
}

}  // namespace ts::network
