// Schedule builders: ring, double binary tree, NVLS, direct and hierarchical algorithms.
#include "sim/network/schedule.h"

#include <algorithm>
#include <array>
#include <utility>

#include "sim/base/diagnostic.h"

namespace ts::network {

namespace {

constexpr std::array<std::pair<std::string_view, CollectiveOp>, 6> kOps{{
    {"all_reduce", CollectiveOp::kAllReduce},
    {"all_gather", CollectiveOp::kAllGather},
    {"reduce_scatter", CollectiveOp::kReduceScatter},
    {"all_to_all", CollectiveOp::kAllToAll},
    {"broadcast", CollectiveOp::kBroadcast},
    {"send_recv", CollectiveOp::kSendRecv},
}};
constexpr std::array<std::pair<std::string_view, Algorithm>, 6> kAlgorithms{{
    {"auto", Algorithm::kAuto},
    {"ring", Algorithm::kRing},
    {"tree", Algorithm::kTree},
    {"nvls", Algorithm::kNvls},
    {"direct", Algorithm::kDirect},
    {"hierarchical", Algorithm::kHierarchical},
}};

Pattern shift(Pattern::Kind kind, std::int32_t s, double fraction) {
  Pattern p;
  p.kind = kind;
  p.shift = s;
  p.fraction = fraction;
  return p;
}
Pattern to_switch(double fraction) { return shift(Pattern::Kind::kToSwitch, 0, fraction); }
Pattern from_switch(double fraction) { return shift(Pattern::Kind::kFromSwitch, 0, fraction); }

bool uniform(const GroupShape& s) { return s.per_node > 0 && s.per_node * s.nodes == s.size; }

// One pass of a ring over the whole group moving `fraction` of the bytes per step, as NCCL runs
// it with one channel per rail: inside a node each GPU sends to the next GPU of the node (the
// node's chain closed through the GPU that owns the outgoing NIC, as PXN does), and between
// nodes each rail carries 1/per_node of the step to the same rail of the next node. A group with
// one GPU per node, or irregular, is one flat ring over the positions.
std::vector<Pattern> ring_step(const GroupShape& s, double fraction) {
  if (s.nodes == 1 || !uniform(s) || s.per_node == 1) return {shift(Pattern::Kind::kShift, 1, fraction)};
  return {shift(Pattern::Kind::kNodeShift, 1, fraction),
          shift(Pattern::Kind::kRailShift, 1, fraction / s.per_node)};
}

// Latency hops of `steps` ring steps over a group spanning `nodes` nodes, of which
// `network_steps` cross between nodes (NCCL: nInterSteps = 2(nNodes-1) for all-reduce).
HopCounts ring_hops(std::int32_t steps, std::int32_t network_steps) {
  HopCounts h;
  h.ring_network = network_steps;
  h.ring_nvlink = steps - network_steps;
  return h;
}

Schedule ring(CollectiveOp op, const GroupShape& s) {
  Schedule sc;
  sc.op = op;
  sc.algorithm = Algorithm::kRing;
  sc.shape = s;
  const std::int32_t n = s.size;
  const double chunk = 1.0 / n;
  const std::int32_t inter = s.nodes - 1;
  switch (op) {
    case CollectiveOp::kAllReduce:
      // Reduce-scatter then all-gather: 2(n-1) steps of n chunks (nccl-tests 2(n-1)/n).
      sc.steps.push_back(Step{ring_step(s, chunk), 2 * (n - 1), false, false});
      sc.hops = ring_hops(2 * (n - 1), 2 * inter);
      break;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
      sc.steps.push_back(Step{ring_step(s, chunk), n - 1, false, false});
      sc.hops = ring_hops(n - 1, inter);
      break;
    case CollectiveOp::kBroadcast:
      // Pipelined chain from position 0: every hop carries the whole buffer once.
      if (s.nodes == 1 || s.per_node == 1 || !uniform(s)) {
        Pattern chain;
        chain.fraction = 1.0;
        for (std::int32_t i = 0; i + 1 < n; ++i) chain.transfers.push_back({i, i + 1});
        sc.steps.push_back(Step{{chain}, 1, false, false});
      } else {
        sc.steps.push_back(Step{ring_step(s, 1.0), 1, false, false});
      }
      sc.hops = ring_hops(n - 1, inter);
      break;
    case CollectiveOp::kAllToAll:
    case CollectiveOp::kSendRecv: SIM_ASSERT(false, "no ring schedule for this collective"); break;
  }
  return sc;
}

// Up (child → parent) and down transfers of both trees between the nodes of `s`, on every rail,
// each tree carrying `fraction` of the bytes split evenly over the rails.
Pattern tree_edges(const GroupShape& s, const DoubleBinaryTree& t, double fraction) {
  Pattern p;
  const std::int32_t q = s.per_node;
  p.fraction = fraction / q;
  for (const auto& parent : t.parent) {
    for (std::int32_t child = 0; child < s.nodes; ++child) {
      const std::int32_t up = parent[static_cast<std::size_t>(child)];
      if (up < 0) continue;
      for (std::int32_t k = 0; k < q; ++k) {
        p.transfers.push_back({child * q + k, up * q + k});
        p.transfers.push_back({up * q + k, child * q + k});
      }
    }
  }
  return p;
}

// NCCL's tree all-reduce: a chain inside each node (one per rail, the head on that rail's NIC),
// the double binary tree between nodes, reduce up and broadcast down pipelined together. Over the
// per_node chains every in-node edge k → k+1 carries (per_node-1)/per_node of the bytes up and
// the reverse edge as much down; each tree carries half of the bytes.
Schedule tree(const GroupShape& s) {
  Schedule sc;
  sc.op = CollectiveOp::kAllReduce;
  sc.algorithm = Algorithm::kTree;
  sc.shape = s;
  const DoubleBinaryTree t = double_binary_tree(s.nodes);
  Step step;
  step.tree = true;
  const std::int32_t q = s.per_node;
  if (q > 1) {
    const double f = static_cast<double>(q - 1) / q;
    step.patterns.push_back(shift(Pattern::Kind::kNodeShift, 1, f));
    step.patterns.push_back(shift(Pattern::Kind::kNodeShift, -1, f));
  }
  step.patterns.push_back(tree_edges(s, t, 0.5));
  sc.steps.push_back(std::move(step));
  sc.hops.tree_nvlink = 2 * (q - 1);
  sc.hops.tree_network = 2 * t.depth;
  return sc;
}

// NVLS all-reduce in one node (NVSwitch gen3 multimem): each GPU's reduce-scatter share is read
// from all n GPUs and reduced in the switch (every GPU sends its whole buffer, receives 1/n), then
// multicast (every GPU sends 1/n, receives the whole buffer): (n+1)/n of the bytes each way.
Schedule nvls(const GroupShape& s) {
  Schedule sc;
  sc.op = CollectiveOp::kAllReduce;
  sc.algorithm = Algorithm::kNvls;
  sc.shape = s;
  sc.nvls = true;
  const double f = static_cast<double>(s.size + 1) / s.size;
  sc.steps.push_back(Step{{to_switch(f), from_switch(f)}, 1, true, false});
  return sc;
}

// Reduce-scatter in each node, all-reduce of each GPU's 1/per_node share between nodes on its
// rail, all-gather in each node (NCCL's NVLSTree with NVLS inside the node; ring inside the node
// otherwise).
Schedule hierarchical(const GroupShape& s, bool use_nvls, bool inter_tree) {
  Schedule sc;
  sc.op = CollectiveOp::kAllReduce;
  sc.algorithm = Algorithm::kHierarchical;
  sc.variant = use_nvls ? (inter_tree ? "nvls+tree" : "nvls+ring") : (inter_tree ? "ring+tree" : "ring+ring");
  sc.shape = s;
  sc.nvls = use_nvls;
  const std::int32_t q = s.per_node;
  const double share = 1.0 / q;
  if (use_nvls) {
    sc.steps.push_back(Step{{to_switch(1.0), from_switch(share)}, 1, true, false});
  } else {
    sc.steps.push_back(Step{{shift(Pattern::Kind::kNodeShift, 1, share)}, q - 1, false, false});
    sc.hops.ring_nvlink += q - 1;
  }
  if (inter_tree) {
    const DoubleBinaryTree t = double_binary_tree(s.nodes);
    Step step;
    step.tree = true;
    step.patterns.push_back(tree_edges(s, t, 0.5));
    sc.steps.push_back(std::move(step));
    sc.hops.tree_network += 2 * t.depth;
  } else {
    sc.steps.push_back(
        Step{{shift(Pattern::Kind::kRailShift, 1, share / s.nodes)}, 2 * (s.nodes - 1), false, false});
    sc.hops.ring_network += 2 * (s.nodes - 1);
  }
  if (use_nvls) {
    sc.steps.push_back(Step{{to_switch(share), from_switch(1.0)}, 1, true, false});
  } else {
    sc.steps.push_back(Step{{shift(Pattern::Kind::kNodeShift, 1, share)}, q - 1, false, false});
    sc.hops.ring_nvlink += q - 1;
  }
  return sc;
}

// All-to-all as NCCL runs it (grouped send/recv to every peer at once): each position sends
// 1/n of the buffer to every other position; across nodes the route goes out of the NIC on the
// destination's rail (PXN).
Schedule direct(CollectiveOp op, const GroupShape& s) {
  Schedule sc;
  sc.op = op;
  sc.algorithm = Algorithm::kDirect;
  sc.shape = s;
  Step step;
  if (op == CollectiveOp::kSendRecv) {
    sc.p2p = true;
    step.patterns.push_back(shift(Pattern::Kind::kShift, 1, 1.0));
  } else {
    for (std::int32_t k = 1; k < s.size; ++k) step.patterns.push_back(shift(Pattern::Kind::kShift, k, 1.0 / s.size));
    sc.hops.ring_nvlink = s.per_node == 1 && s.nodes > 1 ? 0 : 1;
  }
  sc.hops.ring_network = s.nodes > 1 ? 1 : 0;
  sc.steps.push_back(std::move(step));
  return sc;
}

// NCCL src/graph/trees.cc ncclGetBtree: rank r's parent in the binary tree over n ranks rooted
// at 0 — clear r's lowest set bit b and set 2b, or only clear b when that is out of range.
std::int32_t btree_parent(std::int32_t n, std::int32_t r) {
  if (r == 0) return -1;
  std::int32_t bit = 1;
  while (bit < n && (bit & r) == 0) bit <<= 1;
  std::int32_t up = (r ^ bit) | (bit << 1);
  if (up >= n) up = r ^ bit;
  return up;
}

std::int32_t tree_depth(const std::vector<std::int32_t>& parent) {
  std::int32_t depth = 0;
  for (std::size_t r = 0; r < parent.size(); ++r) {
    std::int32_t d = 0;
    for (std::int32_t x = static_cast<std::int32_t>(r); parent[static_cast<std::size_t>(x)] >= 0;
         x = parent[static_cast<std::size_t>(x)]) {
      ++d;
    }
    depth = std::max(depth, d);
  }
  return depth;
}

}  // namespace

std::string_view collective_name(CollectiveOp op) {
  for (const auto& [name, v] : kOps) {
    if (v == op) return name;
  }
  return "?";
}

std::string_view algorithm_name(Algorithm a) {
  for (const auto& [name, v] : kAlgorithms) {
    if (v == a) return name;
  }
  return "?";
}

std::optional<CollectiveOp> parse_collective(std::string_view name) {
  for (const auto& [n, v] : kOps) {
    if (n == name) return v;
  }
  return std::nullopt;
}

std::optional<Algorithm> parse_algorithm(std::string_view name) {
  for (const auto& [n, v] : kAlgorithms) {
    if (n == name) return v;
  }
  return std::nullopt;
}

double bus_bandwidth_factor(CollectiveOp op, std::int32_t n) {
  const double nn = n;
  switch (op) {
    case CollectiveOp::kAllReduce: return 2.0 * (nn - 1) / nn;
    case CollectiveOp::kAllGather:
    case CollectiveOp::kReduceScatter:
    case CollectiveOp::kAllToAll: return (nn - 1) / nn;
    case CollectiveOp::kBroadcast:
    case CollectiveOp::kSendRecv: return 1.0;
  }
  return 1.0;
}

DoubleBinaryTree double_binary_tree(std::int32_t n) {
  DoubleBinaryTree t;
  const auto size = static_cast<std::size_t>(n);
  t.parent[0].resize(size);
  t.parent[1].resize(size);
  for (std::int32_t r = 0; r < n; ++r) {
    const auto i = static_cast<std::size_t>(r);
    t.parent[0][i] = btree_parent(n, r);
    if (n % 2 == 1) {
      // Shift: rank r plays rank r-1 of the first tree.
      const std::int32_t u = btree_parent(n, (r - 1 + n) % n);
      t.parent[1][i] = u < 0 ? -1 : (u + 1) % n;
    } else {
      // Mirror: rank r plays rank n-1-r.
      const std::int32_t u = btree_parent(n, n - 1 - r);
      t.parent[1][i] = u < 0 ? -1 : n - 1 - u;
    }
  }
  t.depth = std::max(tree_depth(t.parent[0]), tree_depth(t.parent[1]));
  return t;
}

std::vector<Schedule> build_schedules(CollectiveOp op, Algorithm algorithm, const GroupShape& s,
                                      bool nvls_available) {
  SIM_ASSERT(s.size >= 2, "a schedule needs at least two members");
  std::vector<Schedule> out;
  const bool multi_node = s.nodes > 1;
  switch (algorithm) {
    case Algorithm::kAuto: SIM_ASSERT(false, "build_schedules needs a concrete algorithm"); break;
    case Algorithm::kRing:
      if (op != CollectiveOp::kAllToAll && op != CollectiveOp::kSendRecv) out.push_back(ring(op, s));
      break;
    case Algorithm::kTree:
      if (op == CollectiveOp::kAllReduce && multi_node && uniform(s)) out.push_back(tree(s));
      break;
    case Algorithm::kNvls:
      if (op == CollectiveOp::kAllReduce && !multi_node && nvls_available) out.push_back(nvls(s));
      break;
    case Algorithm::kDirect:
      if (op == CollectiveOp::kAllToAll || op == CollectiveOp::kSendRecv) out.push_back(direct(op, s));
      break;
    case Algorithm::kHierarchical:
      if (op == CollectiveOp::kAllReduce && multi_node && uniform(s) && s.per_node > 1) {
        out.push_back(hierarchical(s, nvls_available, false));
        out.push_back(hierarchical(s, nvls_available, true));
      }
      break;
  }
  return out;
}

namespace {

// C(a − b, k) / C(a, k): the chance that k draws without repetition from a items miss b of them.
double miss_all(std::int64_t a, std::int64_t b, std::int64_t k) {
  double p = 1.0;
  for (std::int64_t i = 0; i < k; ++i) {
    if (a - b - i <= 0) return 0.0;
    p *= static_cast<double>(a - b - i) / static_cast<double>(a - i);
  }
  return p;
}

double binomial(std::int64_t n, std::int64_t k) {
  if (k < 0 || k > n) return 0.0;
  double c = 1.0;
  for (std::int64_t i = 1; i <= k; ++i) c = c * static_cast<double>(n - k + i) / static_cast<double>(i);
  return c;
}

}  // namespace

double node_reach(const TokenRouting& r, std::int32_t nodes) {
  SIM_ASSERT(r.experts > 0 && r.top_k > 0 && nodes > 0 && r.experts % nodes == 0,
             "token routing needs experts spread evenly over the nodes");
  const std::int64_t e = r.experts / nodes;
  const std::int64_t k = r.top_k;
  const bool limited = r.expert_groups > 0 && r.group_limit > 0 && r.group_limit < r.expert_groups &&
                       r.experts % r.expert_groups == 0;
  if (!limited) return 1.0 - miss_all(r.experts, e, k);
  const std::int64_t groups = r.expert_groups;
  const std::int64_t limit = r.group_limit;
  const std::int64_t g = r.experts / groups;
  const std::int64_t pool = limit * g;
  if (e % g == 0) {
    // The node holds m whole groups; s of them are among the token's groups.
    const std::int64_t m = e / g;
    double missed = 0;
    for (std::int64_t s = 0; s <= std::min(m, limit); ++s) {
      missed += binomial(m, s) * binomial(groups - m, limit - s) / binomial(groups, limit) * miss_all(pool, s * g, k);
    }
    return 1.0 - missed;
  }
  if (g % e == 0) {
    const double selected = static_cast<double>(limit) / static_cast<double>(groups);
    return selected * (1.0 - miss_all(pool, e, k));
  }
  // Groups that straddle nodes unevenly: the limit's effect is left out.
  return 1.0 - miss_all(r.experts, e, k);
}

double rank_dedup(const TokenRouting& routing, std::int32_t ranks) {
  if (ranks <= 0 || routing.experts % ranks != 0) return 1.0;  // no even spread to count on
  return static_cast<double>(ranks) * node_reach(routing, ranks) / static_cast<double>(routing.top_k);
}

Schedule dispatch_schedule(const GroupShape& s, const TokenRouting& routing) {
  SIM_ASSERT(s.nodes > 1 && uniform(s), "the hierarchical dispatch needs a uniform multi-node group");
  Schedule sc;
  sc.op = CollectiveOp::kAllToAll;
  sc.algorithm = Algorithm::kHierarchical;
  sc.variant = "dispatch";
  sc.shape = s;
  Step step;
  const double per_node = node_reach(routing, s.nodes) / static_cast<double>(routing.top_k);
  for (std::int32_t j = 1; j < s.nodes; ++j) step.patterns.push_back(shift(Pattern::Kind::kRailShift, j, per_node));
  const double per_peer = rank_dedup(routing, s.size) / s.per_node;
  for (std::int32_t k = 1; k < s.per_node; ++k) step.patterns.push_back(shift(Pattern::Kind::kNodeShift, k, per_peer));
  sc.steps.push_back(std::move(step));
  sc.hops.ring_network = 1;
  sc.hops.ring_nvlink = s.per_node > 1 ? 1 : 0;
  return sc;
}

std::vector<Algorithm> applicable_algorithms(CollectiveOp op, const GroupShape& shape, bool nvls_available) {
  std::vector<Algorithm> out;
  for (const Algorithm a : {Algorithm::kRing, Algorithm::kTree, Algorithm::kNvls, Algorithm::kDirect,
                            Algorithm::kHierarchical}) {
    if (!build_schedules(op, a, shape, nvls_available).empty()) out.push_back(a);
  }
  return out;
}

Traffic traffic(const Schedule& sc) {
  Traffic t;
  const auto n = static_cast<std::size_t>(sc.shape.size);
  t.sent.assign(n, 0.0);
  t.received.assign(n, 0.0);
  for (const Step& step : sc.steps) {
    const double reps = static_cast<double>(step.repeat);
    for (const Pattern& p : step.patterns) {
      const double b = p.fraction * reps;
      for_each_transfer(p, sc.shape, [&](std::int32_t src, std::int32_t dst, bool src_sw, bool dst_sw) {
        if (src_sw) {
          t.switch_sent += b;
        } else {
          t.sent[static_cast<std::size_t>(src)] += b;
        }
        if (dst_sw) {
          t.switch_received += b;
        } else {
          t.received[static_cast<std::size_t>(dst)] += b;
        }
      });
    }
  }
  return t;
}

}  // namespace ts::network
