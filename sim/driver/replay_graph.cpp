#include "sim/base/format.h"
#include "sim/driver/replay_graph.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <map>
#include <nlohmann/json.hpp>
#include <queue>
#include <tuple>

#include "sim/base/diagnostic.h"
#include "sim/memory/footprint.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/lowering.h"
#include "sim/runtime/breakdown.h"
#include "sim/runtime/executor.h"
#include "sim/trace/chakra_writer.h"
#include "sim/trace/chrome_trace.h"

namespace ts::driver {
namespace {

using config::ChakraKind;
using config::ChakraNode;
using parallel::CommOp;
using parallel::Pass;
using parallel::Part;
using parallel::Stream;
using parallel::TaskKind;

// ---------------------------------------------------------------------------------------------
// Names of nodes from traces not written by trainsim: what a Chrome trace and the time breakdown
// can tell from them.

std::string lowercase(std::string s) {
  for (char& c : s) c = static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
  return s;
}

bool has(const std::string& s, std::string_view key) { return s.find(key) != std::string::npos; }

// The number after `key` in `name` ("mb3." → 3 for key "mb"), or -1.
std::int32_t number_after(const std::string& name, std::string_view key) {
  for (std::size_t at = name.find(key); at != std::string::npos; at = name.find(key, at + 1)) {
    if (at > 0 && std::isalnum(static_cast<unsigned char>(name[at - 1]))) continue;
    std::size_t p = at + key.size();
    std::int64_t v = 0;
    std::size_t digits = 0;
    while (p < name.size() && std::isdigit(static_cast<unsigned char>(name[p])) && digits < 9) {
      v = v * 10 + (name[p] - '0');
      ++p;
      ++digits;
    }
    if (digits > 0) return static_cast<std::int32_t>(v);
  }
  return -1;
}

// Pass of a compute node: PyTorch names backward kernels "...Backward..."; ASTRA-sim's symbolic
// tensor graph names gradient tensors d<x> ("mha.dx@0", "ffn.dwqkv@1").
Pass guess_pass(const ChakraNode& n, bool symbolic) {
  const std::string l = lowercase(n.name);
  if (has(l, "optim") || has(l, "adam") || has(l, "sgd")) return Pass::kOptimizer;
  if (has(l, "backward") || has(l, "bwd") || has(l, "grad")) return Pass::kBackward;
  if (symbolic) {
    const std::string head = n.name.substr(0, n.name.find('@'));
    const std::size_t dot = head.rfind('.');
    const std::string last = dot == std::string::npos ? head : head.substr(dot + 1);
    if (last.size() > 1 && last[0] == 'd') return Pass::kBackward;
  }
  return Pass::kForward;
}

Part guess_part(const ChakraNode& n) {
  const std::string l = lowercase(n.name);
  if (has(l, "optim") || has(l, "adam")) return Part::kOptimizer;
  if (has(l, "grad")) return Part::kGradients;
  if (has(l, "emb")) return Part::kEmbedding;
  if (has(l, "attn") || has(l, "attention") || has(l, "mha") || has(l, "qkv")) return Part::kAttention;
  if (has(l, "head") || has(l, "loss") || has(l, "logit")) return Part::kLmHead;
  if (n.kind == ChakraKind::kSend || n.kind == ChakraKind::kRecv) return Part::kActivations;
  return Part::kMlp;
}

// ---------------------------------------------------------------------------------------------

struct NodeRef {
  std::int32_t rank;
  std::uint32_t node;
};

// A unit of the ASTRA-sim-like dry run: one compute node, or one matched communication (the
// nodes of every rank taking part).
struct Unit {
  std::vector<NodeRef> members;
  Duration duration;
  bool compute = false;
  std::int32_t communicator = -1;
};

class Importer {
 public:
  Importer(const config::ChakraTrace& t, const compute::ComputeModel& compute, const network::NetworkModel& network,
           const ImportOptions& options)
      : t_(t), compute_(compute), network_(network), options_(options), n_(t.ranks.size()) {}

  GraphWorkload run() {
    GraphWorkload w;
    w.plan = plan();
    layout_.emplace(w.plan);
    classify();
    effective_deps();
    match();
    problems_.throw_if_any();
    cost();
    schedule();
    problems_.throw_if_any();
    w.graph = build();
    w.model_flops = t_.model_flops;
    w.tokens = t_.tokens;
    w.trace_flops = trace_flops_;
    for (std::size_t r = 0; r < n_; ++r) {
      MemoryBreakdown m;
      if (const auto& mem = t_.ranks[r].memory) {
        m.weights = (*mem)[0];
        m.gradients = (*mem)[1];
        m.optimizer_states = (*mem)[2];
        m.activations = (*mem)[3];
        m.cuda_context = (*mem)[4];
        m.nccl_buffers = (*mem)[5];
        m.fragmentation = (*mem)[6];
      }
      w.static_memory.push_back(m);
    }
    w.description = "Chakra trace " + t_.prefix.string() + " (" + std::to_string(n_) + " ranks" +
                    (t_.schema.empty() ? "" : ", " + t_.schema) + ")";
    return w;
  }

 private:
  // The trace's plan when it carries one (trainsim), else every rank along DP (a layout of the
  // right size; communicators without axes do not use it) with no host floor: a recorded
  // duration already holds whatever the host cost.
  parallel::ParallelPlan plan() const {
    if (t_.plan) return *t_.plan;
    parallel::ParallelPlan p;
    p.dp = static_cast<std::int64_t>(n_);
    p.host_dispatch = Duration::zero();
    return p;
  }

  std::string where(NodeRef ref) const {
    const auto& node = t_.ranks[static_cast<std::size_t>(ref.rank)].nodes[ref.node];
    return "byte " + std::to_string(node.offset) + ", node " + std::to_string(node.id) +
           (node.name.empty() ? "" : " (" + node.name + ")");
  }
  void fail(NodeRef ref, std::string message) {
    problems_.add({t_.ranks[static_cast<std::size_t>(ref.rank)].file.string(), 0, where(ref), std::move(message)});
  }
  const ChakraNode& node(NodeRef ref) const { return t_.ranks[static_cast<std::size_t>(ref.rank)].nodes[ref.node]; }

  // Which nodes take time: compute, communication with more than one rank.
  void classify() {
    real_.resize(n_);
    for (std::size_t r = 0; r < n_; ++r) {
      const auto& nodes = t_.ranks[r].nodes;
      real_[r].assign(nodes.size(), false);
      for (std::size_t i = 0; i < nodes.size(); ++i) {
        const auto& nd = nodes[i];
        switch (nd.kind) {
          case ChakraKind::kCompute:
          case ChakraKind::kSend:
          case ChakraKind::kRecv: real_[r][i] = true; break;
          case ChakraKind::kCollective:
            real_[r][i] = t_.groups[static_cast<std::size_t>(nd.group)].ranks.size() > 1;
            break;
          case ChakraKind::kNone: break;
        }
      }
    }
  }

  // Dependencies of each node on nodes that take time: those of a node without time are passed
  // on to its dependents.
  void effective_deps() {
    deps_.resize(n_);
    for (std::size_t r = 0; r < n_; ++r) {
      const auto& rank = t_.ranks[r];
      std::vector<std::vector<std::uint32_t>> through(rank.nodes.size());  // what depending on i means
      deps_[r].resize(rank.nodes.size());
      for (const std::uint32_t i : rank.order) {
        std::vector<std::uint32_t> d;
        for (const std::uint32_t p : rank.nodes[i].deps) d.insert(d.end(), through[p].begin(), through[p].end());
        std::sort(d.begin(), d.end());
        d.erase(std::unique(d.begin(), d.end()), d.end());
        if (real_[r][i]) {
          deps_[r][i] = std::move(d);
          through[i] = {i};
        } else {
          through[i] = std::move(d);
        }
      }
    }
  }

  std::int32_t communicator(std::vector<std::int32_t> ranks, unsigned axes) {
    // Axes only when the plan's layout gives exactly this group, so that the replay costs it
    // together with the other groups of its kind.
    if (axes != 0 && t_.plan) {
      for (const auto r : ranks) {
        if (layout_->group(r, axes) != ranks) {
          axes = 0;
          break;
        }
      }
    } else {
      axes = 0;
    }
    const auto key = std::make_pair(axes, ranks);
    const auto it = comm_index_.find(key);
    if (it != comm_index_.end()) return it->second;
    const auto id = static_cast<std::int32_t>(communicators_.size());
    parallel::Communicator c;
    c.axes = axes;
    c.ranks = std::move(ranks);
    communicators_.push_back(std::move(c));
    comm_index_.emplace(key, id);
    return id;
  }

  // Matches communication nodes across ranks into units.
  void match() {
    unit_of_.resize(n_);
    for (std::size_t r = 0; r < n_; ++r) unit_of_[r].assign(t_.ranks[r].nodes.size(), -1);
    // Collectives: per process group, each member's calls in program order.
    std::vector<std::map<std::int32_t, std::vector<std::uint32_t>>> calls(t_.groups.size());  // group → rank → nodes
    // Point-to-point: (src, dst, tag, trainsim communicator) → sends, receives.
    std::map<std::tuple<std::int32_t, std::int32_t, std::int64_t, std::int64_t>,
             std::pair<std::vector<std::uint32_t>, std::vector<std::uint32_t>>>
        messages;
    for (std::size_t r = 0; r < n_; ++r) {
      const auto& rank = t_.ranks[r];
      for (const std::uint32_t i : rank.order) {
        if (!real_[r][i]) continue;
        const auto& nd = rank.nodes[i];
        switch (nd.kind) {
          case ChakraKind::kCollective:
            calls[static_cast<std::size_t>(nd.group)][static_cast<std::int32_t>(r)].push_back(i);
            break;
          case ChakraKind::kSend: std::get<0>(messages[{nd.src, nd.dst, nd.tag, nd.comm_id}]).push_back(i); break;
          case ChakraKind::kRecv: std::get<1>(messages[{nd.src, nd.dst, nd.tag, nd.comm_id}]).push_back(i); break;
          case ChakraKind::kCompute: {
            Unit u;
            u.compute = true;
            u.members.push_back({static_cast<std::int32_t>(r), i});
            unit_of_[r][i] = static_cast<std::int32_t>(units_.size());
            units_.push_back(std::move(u));
            break;
          }
          case ChakraKind::kNone: break;
        }
      }
    }
    for (std::size_t g = 0; g < t_.groups.size(); ++g) {
      const auto& group = t_.groups[g];
      if (calls[g].empty()) continue;
      const std::string pg = group.name.empty() ? "of all ranks" : "'" + group.name + "'";
      const std::int32_t first = group.ranks.front();
      const std::size_t count = calls[g][first].size();
      bool ok = true;
      if (count == 0 && std::all_of(group.ranks.begin(), group.ranks.end(),
                                    [&](std::int32_t r) { return calls[g][r].empty(); })) {
        continue;
      }
      for (const auto r : group.ranks) {
        if (calls[g][r].size() == count) continue;
        problems_.add({t_.ranks[static_cast<std::size_t>(r)].file.string(), 0, "",
                       "process group " + pg + ": rank " + std::to_string(r) + " issues " +
                           std::to_string(calls[g][r].size()) + " collectives, rank " + std::to_string(first) +
                           " issues " + std::to_string(count) + " (collectives of a group must match)"});
        ok = false;
      }
      if (!ok) continue;
      const std::int32_t comm = communicator(group.ranks, node({first, calls[g][first][0]}).axes);
      for (std::size_t k = 0; k < count; ++k) {
        Unit u;
        u.communicator = comm;
        const NodeRef lead{first, calls[g][first][k]};
        for (const auto r : group.ranks) {
          const NodeRef ref{r, calls[g][r][k]};
          const auto& a = node(lead);
          const auto& b = node(ref);
          if (a.comm != b.comm || a.bytes != b.bytes) {
            fail(ref, std::string("collective #") + std::to_string(k + 1) + " of process group " + pg + " is " +
                          parallel::comm_op_name(b.comm) + " of " + std::to_string(b.bytes.count()) +
                          " bytes on this rank but " + parallel::comm_op_name(a.comm) + " of " +
                          std::to_string(a.bytes.count()) + " bytes on rank " + std::to_string(first) + " (" +
                          where(lead) + ")");
            ok = false;
            break;
          }
          u.members.push_back(ref);
        }
        if (!ok) break;
        for (const auto& m : u.members) unit_of_[static_cast<std::size_t>(m.rank)][m.node] = static_cast<std::int32_t>(units_.size());
        units_.push_back(std::move(u));
      }
    }
    for (const auto& [key, lists] : messages) {
      const auto& [src, dst, tag, comm_id] = key;
      const auto& [sends, recvs] = lists;
      if (sends.size() != recvs.size()) {
        const bool more_sends = sends.size() > recvs.size();
        const std::int32_t r = more_sends ? src : dst;
        const std::uint32_t extra = more_sends ? sends[recvs.size()] : recvs[sends.size()];
        fail({r, extra}, std::string(more_sends ? "send" : "receive") + " from rank " + std::to_string(src) +
                             " to rank " + std::to_string(dst) + " with tag " + std::to_string(tag) +
                             " has no matching " + (more_sends ? "receive" : "send") + " (" +
                             std::to_string(sends.size()) + " sends, " + std::to_string(recvs.size()) + " receives)");
        continue;
      }
      if (sends.empty()) continue;
      const std::int32_t comm = communicator({src, dst}, node({src, sends[0]}).axes);
      for (std::size_t k = 0; k < sends.size(); ++k) {
        const NodeRef s{src, sends[k]};
        const NodeRef d{dst, recvs[k]};
        if (node(s).bytes != node(d).bytes) {
          fail(d, "receives " + std::to_string(node(d).bytes.count()) + " bytes but the matching send sends " +
                      std::to_string(node(s).bytes.count()) + " (rank " + std::to_string(src) + ", " + where(s) + ")");
          continue;
        }
        Unit u;
        u.communicator = comm;
        u.members = {s, d};
        for (const auto& m : u.members) unit_of_[static_cast<std::size_t>(m.rank)][m.node] = static_cast<std::int32_t>(units_.size());
        units_.push_back(std::move(u));
      }
    }
  }

  Duration op_time(const std::vector<ir::Op>& ops) {
    std::string key;
    for (const auto& op : ops) {
      key += std::to_string(static_cast<int>(op.kind)) + ":" + std::to_string(static_cast<int>(op.dtype)) +
             (op.backward ? "b" : "f") + (op.grouped ? "g" : "") + ":" + std::to_string(op.gemm.m) + "," + std::to_string(op.gemm.n) + "," +
             std::to_string(op.gemm.k) + "," + std::to_string(op.gemm.batch) + "," + std::to_string(op.attn.batch) +
             "," + std::to_string(op.attn.heads) + "," + std::to_string(op.attn.kv_heads) + "," +
             std::to_string(op.attn.seq_q) + "," + std::to_string(op.attn.seq_kv) + "," +
             std::to_string(op.attn.head_dim) + "/" + std::to_string(op.attn.head_dim_v) + "w" +
             std::to_string(op.attn.window) + (op.attn.causal ? "c" : "n") + std::to_string(op.moved.count()) +
             "k" + std::to_string(static_cast<int>(op.norm)) + std::to_string(static_cast<int>(op.eager_moe)) + ";";
    }
    auto it = op_cache_.find(key);
    if (it == op_cache_.end()) it = op_cache_.emplace(key, runtime::op_list_time(compute_, ops)).first;
    return it->second;
  }

  Duration compute_time(const ChakraNode& nd) {
    const bool costable = !nd.ops.empty() || nd.flops.value() > 0 || nd.tensor_bytes.count() > 0;
    if (nd.duration && !(options_.recost && costable)) return *nd.duration;
    if (!nd.ops.empty()) return op_time(nd.ops);
    if (costable) return compute_node_time(compute_, nd);
    return Duration();
  }

  Duration comm_time(const Unit& u) {
    const auto& c = communicators_[static_cast<std::size_t>(u.communicator)];
    const auto& nd = node(u.members.front());
    const auto key = std::make_tuple(u.communicator, static_cast<int>(nd.comm), nd.bytes.count());
    auto it = comm_cache_.find(key);
    if (it != comm_cache_.end()) return it->second;
    Duration d;
    if (nd.kind != ChakraKind::kCollective) {
      d = network_.send_recv(c.ranks[0], c.ranks[1], nd.bytes);
    } else {
      network::CollectiveRequest req;
      switch (nd.comm) {
        case CommOp::kAllReduce: req.op = network::CollectiveOp::kAllReduce; break;
        case CommOp::kAllGather: req.op = network::CollectiveOp::kAllGather; break;
        case CommOp::kReduceScatter: req.op = network::CollectiveOp::kReduceScatter; break;
        case CommOp::kAllToAll: req.op = network::CollectiveOp::kAllToAll; break;
        case CommOp::kSendRecv: req.op = network::CollectiveOp::kSendRecv; break;  // ring shift
      }
      req.bytes = nd.bytes;
      req.groups.push_back(c.ranks);
      d = network_.collective(req).time;
    }
    comm_cache_.emplace(key, d);
    return d;
  }

  void cost() {
    for (auto& u : units_) {
      if (u.compute) {
        const auto& nd = node(u.members.front());
        u.duration = compute_time(nd);
        trace_flops_ += nd.ops.empty() ? nd.flops.value() : [&] {
          double f = 0;
          for (const auto& op : nd.ops) f += op.flops.value();
          return f;
        }();
      } else {
        u.duration = comm_time(u);
      }
    }
  }

  // The dry run: the order in which units start when each rank runs one compute node at a time
  // (the ready one with the smallest id) and communication as soon as every member is ready.
  void schedule() {
    const std::size_t nu = units_.size();
    std::vector<std::uint32_t> remaining(nu, 0);
    std::vector<std::vector<std::uint32_t>> dependents(nu);
    for (std::size_t u = 0; u < nu; ++u) {
      for (const auto& m : units_[u].members) {
        for (const std::uint32_t p : deps_[static_cast<std::size_t>(m.rank)][m.node]) {
          const auto pu = unit_of_[static_cast<std::size_t>(m.rank)][p];
          SIM_ASSERT(pu >= 0, "dependency on a node outside every unit");
          dependents[static_cast<std::size_t>(pu)].push_back(static_cast<std::uint32_t>(u));
          ++remaining[u];
        }
      }
    }
    using Ready = std::pair<std::uint64_t, std::uint32_t>;  // (node id, unit)
    std::vector<std::priority_queue<Ready, std::vector<Ready>, std::greater<>>> ready(n_);
    std::vector<bool> busy(n_, false);
    using Event = std::tuple<std::int64_t, std::uint64_t, std::uint32_t>;  // (end ps, seq, unit)
    std::priority_queue<Event, std::vector<Event>, std::greater<>> events;
    std::uint64_t seq = 0;
    std::int64_t now = 0;
    order_.clear();
    order_.reserve(nu);
    auto start = [&](std::uint32_t u) {
      order_.push_back(u);
      if (units_[u].compute) busy[static_cast<std::size_t>(units_[u].members.front().rank)] = true;
      events.emplace(now + units_[u].duration.ps(), seq++, u);
    };
    auto make_ready = [&](std::uint32_t u) {
      if (units_[u].compute) {
        const auto& m = units_[u].members.front();
        ready[static_cast<std::size_t>(m.rank)].emplace(node(m).id, u);
      } else {
        start(u);
      }
    };
    auto dispatch = [&](std::size_t r) {
      if (busy[r] || ready[r].empty()) return;
      const auto u = ready[r].top().second;
      ready[r].pop();
      start(u);
    };
    for (std::size_t u = 0; u < nu; ++u) {
      if (remaining[u] == 0) make_ready(static_cast<std::uint32_t>(u));
    }
    for (std::size_t r = 0; r < n_; ++r) dispatch(r);
    std::vector<std::size_t> touched;
    while (!events.empty()) {
      const auto [end, s, u] = events.top();
      events.pop();
      now = end;
      touched.clear();
      if (units_[u].compute) {
        const auto r = static_cast<std::size_t>(units_[u].members.front().rank);
        busy[r] = false;
        touched.push_back(r);
      }
      for (const auto d : dependents[u]) {
        if (--remaining[d] != 0) continue;
        make_ready(d);
        if (units_[d].compute) touched.push_back(static_cast<std::size_t>(units_[d].members.front().rank));
      }
      for (const auto r : touched) dispatch(r);
    }
    if (order_.size() == nu) return;
    // Deadlock: name a few nodes that never ran, with what they wait for.
    std::vector<bool> started(nu, false);
    for (const auto u : order_) started[u] = true;
    std::size_t named = 0;
    for (std::size_t u = 0; u < nu && named < 5; ++u) {
      if (started[u]) continue;
      for (const auto& m : units_[u].members) {
        std::string waits;
        for (const std::uint32_t p : deps_[static_cast<std::size_t>(m.rank)][m.node]) {
          if (!started[static_cast<std::size_t>(unit_of_[static_cast<std::size_t>(m.rank)][p])]) {
            waits = "waits for node " + std::to_string(t_.ranks[static_cast<std::size_t>(m.rank)].nodes[p].id);
            break;
          }
        }
        if (waits.empty()) continue;
        fail(m, "never runs: it " + waits + (units_[u].members.size() > 1 ? " (matched communication)" : ""));
        ++named;
        break;
      }
    }
    problems_.add({"", 0, "--prefix",
                   "the trace cannot run to completion: " + std::to_string(nu - order_.size()) + " of " +
                       std::to_string(nu) + " nodes never become ready (circular waits across ranks)"});
  }

  // Streams of each rank's communicators (trainsim's when recorded, else by kind).
  Stream stream_of(NodeRef ref, std::int32_t comm) {
    const auto key = std::make_pair(ref.rank, comm);
    const auto it = stream_.find(key);
    if (it != stream_.end()) return it->second;
    const auto& nd = node(ref);
    Stream s = Stream::kTpComm;
    if (nd.stream && *nd.stream != Stream::kCompute) {
      s = *nd.stream;
    } else if (nd.kind == ChakraKind::kSend) {
      s = nd.dst > nd.src ? Stream::kPpSendNext : Stream::kPpSendPrev;
    } else if (nd.kind == ChakraKind::kRecv) {
      s = nd.src < nd.dst ? Stream::kPpRecvPrev : Stream::kPpRecvNext;
    } else {
      // The rank's collective communicators by number of calls: the most frequent is tensor-
      // parallel-like traffic (per layer and micro-batch), the next data-parallel-like (per
      // bucket or micro-batch), the third context-parallel-like.
      const auto& counts = collective_calls_[static_cast<std::size_t>(ref.rank)];
      std::vector<std::pair<std::int64_t, std::int32_t>> ranked;
      for (const auto& [c, k] : counts) ranked.emplace_back(-k, c);
      std::sort(ranked.begin(), ranked.end());
      std::size_t pos = 0;
      while (pos < ranked.size() && ranked[pos].second != comm) ++pos;
      s = pos == 0 ? Stream::kTpComm : pos == 2 ? Stream::kCpComm : Stream::kDpComm;
    }
    stream_.emplace(key, s);
    return s;
  }

  parallel::TaskGraph build() {
    parallel::TaskGraph g;
    const bool symbolic = t_.schema == "symbolic_tensor_network";
    for (std::size_t r = 0; r < n_; ++r) {
      parallel::SimDevice d;
      d.rank = static_cast<std::int32_t>(r);
      d.coord = layout_->coord(static_cast<std::int64_t>(r));
      d.stage = t_.plan ? d.coord[parallel::Axis::kPp] : t_.ranks[r].stage;
      g.devices.push_back(d);
    }
    collective_calls_.resize(n_);
    for (const auto& u : units_) {
      if (u.compute || node(u.members.front()).kind != ChakraKind::kCollective) continue;
      for (const auto& m : u.members) ++collective_calls_[static_cast<std::size_t>(m.rank)][u.communicator];
    }
    std::vector<std::vector<std::int64_t>> task_of(n_);
    for (std::size_t r = 0; r < n_; ++r) task_of[r].assign(t_.ranks[r].nodes.size(), -1);
    for (const auto u : order_) {
      const Unit& unit = units_[u];
      for (const auto& m : unit.members) {
        const auto& nd = node(m);
        parallel::Task task;
        task.device = m.rank;
        task.layer = nd.layer >= 0 ? nd.layer
                                   : std::max(number_after(nd.name, "transformer."), number_after(nd.name, "layers."));
        task.micro_batch = nd.micro_batch >= 0 ? nd.micro_batch : number_after(nd.name, "mb");
        task.pass = nd.pass ? *nd.pass : guess_pass(nd, symbolic);
        task.part = nd.part ? *nd.part : guess_part(nd);
        task.alloc_at_start = nd.alloc;
        task.free_at_end = nd.release;
        if (unit.compute) {
          task.kind = TaskKind::kCompute;
          task.stream = Stream::kCompute;
          task.duration = unit.duration;
        } else {
          task.kind = nd.kind == ChakraKind::kCollective ? TaskKind::kCollective : TaskKind::kP2p;
          task.comm = nd.comm;
          task.bytes = nd.bytes;
          task.communicator = unit.communicator;
          task.stream = stream_of(m, unit.communicator);
        }
        const auto index = static_cast<std::int64_t>(g.tasks.size());
        task.dep_begin = static_cast<std::uint32_t>(g.deps.size());
        for (const std::uint32_t p : deps_[static_cast<std::size_t>(m.rank)][m.node]) {
          const auto dep = task_of[static_cast<std::size_t>(m.rank)][p];
          SIM_ASSERT(dep >= 0 && dep < index, "replay order is not topological");
          g.deps.push_back(static_cast<std::uint32_t>(dep));
        }
        task.dep_count = static_cast<std::uint32_t>(g.deps.size()) - task.dep_begin;
        task_of[static_cast<std::size_t>(m.rank)][m.node] = index;
        g.tasks.push_back(task);
      }
    }
    g.communicators = communicators_;
    return g;
  }

  const config::ChakraTrace& t_;
  const compute::ComputeModel& compute_;
  const network::NetworkModel& network_;
  const ImportOptions& options_;
  const std::size_t n_;
  std::optional<parallel::Layout> layout_;
  DiagnosticList problems_;
  std::vector<std::vector<bool>> real_;
  std::vector<std::vector<std::vector<std::uint32_t>>> deps_;
  std::vector<std::vector<std::int32_t>> unit_of_;
  std::vector<Unit> units_;
  std::vector<std::uint32_t> order_;
  std::vector<parallel::Communicator> communicators_;
  std::map<std::pair<unsigned, std::vector<std::int32_t>>, std::int32_t> comm_index_;
  std::map<std::pair<std::int32_t, std::int32_t>, Stream> stream_;
  std::vector<std::map<std::int32_t, std::int64_t>> collective_calls_;
  std::map<std::string, Duration> op_cache_;
  std::map<std::tuple<std::int32_t, int, std::int64_t>, Duration> comm_cache_;
  double trace_flops_ = 0;
};

// ---------------------------------------------------------------------------------------------
// Reports

using nlohmann::ordered_json;

ordered_json memory_json(const MemoryBreakdown& m) {
  ordered_json j;
  j["weights_bytes"] = m.weights.count();
  j["gradients_bytes"] = m.gradients.count();
  j["optimizer_states_bytes"] = m.optimizer_states.count();
  j["activations_bytes"] = m.activations.count();
  return j;
}

ordered_json time_json(const runtime::TimeBreakdown& t) {
  ordered_json j;
  for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) {
    j[std::string(runtime::time_category_name(static_cast<runtime::TimeCategory>(c))) + "_s"] = t.time[c].seconds();
  }
  return j;
}

}  // namespace

Duration compute_node_time(const compute::ComputeModel& compute, const config::ChakraNode& node) {
  const double flops = node.flops.value();
  const Duration stream =
      node.tensor_bytes.count() > 0
          ? compute.memory_bound(node.tensor_bytes, compute::MemoryKernel::kStreaming)
          : Duration();
  const bool matmul = node.op_type.empty() ? flops > 0 : node.op_type == "M";
  if (!matmul || flops <= 0) return stream;
  // A square GEMM with the node's FLOPs: 2·m³ = flops; its time scaled by the rounding of m.
  const auto m = std::max<std::int64_t>(1, std::llround(std::cbrt(flops / 2.0)));
  const double gemm_flops = 2.0 * std::pow(static_cast<double>(m), 3.0);
  const Duration gemm = compute.gemm({m, m, m, 1, ir::Dtype::kBf16}).scaled(flops / gemm_flops);
  return std::max(gemm, stream);
}

GraphWorkload import_chakra(const config::ChakraTrace& trace, const compute::ComputeModel& compute,
                            const network::NetworkModel& network, const ImportOptions& options) {
  return Importer(trace, compute, network, options).run();
}

GraphRunResult simulate_graph(const GraphWorkload& w, const config::Cluster& cluster, const RunOptions& options,
                              Resources& resources) {
  const auto& g = w.graph;
  const auto num_gpus = static_cast<std::int32_t>(g.devices.size());
  SIM_ASSERT(w.static_memory.empty() || w.static_memory.size() == g.devices.size(), "memory per device");
  GraphRunResult out;
  RunResult& r = out.run;
  r.model_flops = w.model_flops > 0 ? w.model_flops : w.trace_flops;
  r.memory_capacity = cluster.gpu.memory_capacity;
  const parallel::Layout layout(w.plan);
  SIM_ASSERT(layout.num_ranks() == num_gpus, "layout size differs from the graph's devices");
  const network::NetworkModel& network = resources.network(cluster, num_gpus);
  const compute::ComputeModel& compute = resources.compute(cluster.gpu, w.plan);
  runtime::ExecuteOptions eo;
  eo.memory_timeline = options.trace.has_value();
  const runtime::Execution ex = runtime::execute(g, layout, compute, network, eo);
  // Time arithmetic saturates at the int64 picosecond range (106 days): only absurd recorded
  // durations or sizes get near it.
  const auto out_of_range = [](SimTime t) {
    if (t.ps() >= (std::int64_t{1} << 62)) {
      throw InputError(Diagnostic{"", 0, "", "the replayed iteration lasts more than 53 days, beyond the "
                                  "range of the simulated clock: the trace's durations or sizes are out of range"});
    }
  };
  out_of_range(ex.end);
  // As simulate(): each device's breakdown carries the time its compute loses to the
  // communication beside it, and the iteration adds the critical device's.
  const runtime::ReplaySummary summary = runtime::summarize(g, ex, cluster.gpu.compute_slowdown_under_comm);
  const auto& breakdowns = summary.time;
  const auto critical = static_cast<std::size_t>(summary.last_device);
  const SimTime end = summary.iteration_end();
  out_of_range(end);

  r.tasks = static_cast<std::int64_t>(g.tasks.size());
  r.events = ex.events;
  r.iteration_time_s = end.seconds();
  if (r.iteration_time_s > 0) {
    r.tokens_per_s = w.tokens / r.iteration_time_s;
    r.tflops_per_gpu = r.model_flops / r.iteration_time_s / static_cast<double>(num_gpus) * 1e-12;
    r.mfu = r.tflops_per_gpu / cluster.gpu.peak_bf16.tflops();
  }
  out.device_end_s.assign(g.devices.size(), 0);
  for (std::size_t t = 0; t < g.tasks.size(); ++t) {
    const auto d = static_cast<std::size_t>(g.tasks[t].device);
    out.device_end_s[d] = std::max(out.device_end_s[d], ex.timings[t].end.seconds());
  }
  for (std::size_t d = 0; d < breakdowns.size(); ++d) {
    out.device_end_s[d] += breakdowns[d][runtime::TimeCategory::kContention].seconds();
  }
  for (std::size_t d = 0; d < g.devices.size(); ++d) {
    const auto& dev = g.devices[d];
    DeviceReport rep;
    rep.rank = dev.rank;
    rep.coord = dev.coord;
    rep.stage = dev.stage;
    rep.represents = dev.represents;
    rep.time = breakdowns[d];
    if (!w.static_memory.empty()) rep.memory = w.static_memory[d];
    rep.memory.activations = std::max(rep.memory.activations, ex.memory[d].peak_dynamic);
    if (rep.memory.total() > r.peak_memory) {
      r.peak_memory = rep.memory.total();
      r.memory = rep.memory;
    }
    r.devices.push_back(rep);
  }
  if (!breakdowns.empty()) r.time = breakdowns[critical];
  if (r.peak_memory > r.memory_capacity) {
    r.status = Status::kOutOfMemory;
    r.reason = "peak memory " + std::to_string(r.peak_memory.in_gib()) + " GiB exceeds the " +
               std::to_string(r.memory_capacity.in_gib()) + " GiB of the GPU";
  }
  if (options.trace) {
    trace::TraceInfo info;
    info.gpus_per_host = cluster.cluster.host.gpus_per_host;
    for (const auto& dev : r.devices) {
      info.static_memory.push_back(dev.memory.total() - dev.memory.activations - dev.memory.fragmentation);
    }
    info.metadata = {{"scenario", w.description},
                     {"iteration_time_s", std::to_string(r.iteration_time_s)},
                     {"comm_contention_s", std::to_string(r.time[runtime::TimeCategory::kContention].seconds())},
                     {"status", status_name(r.status)}};
    trace::write_chrome_trace(*options.trace, g, ex, info);
  }
  return out;
}

std::string graph_report_json(const GraphWorkload& w, const config::Cluster& cluster, const GraphRunResult& gr) {
  const RunResult& r = gr.run;
  ordered_json j;
  j["status"] = status_name(r.status);
  j["reason"] = r.reason;
  j["workload"] = w.description;
  j["cluster"] = cluster.cluster.name;
  j["gpu"] = cluster.gpu.name;
  j["num_gpus"] = w.graph.devices.size();
  j["model_flops_per_iteration"] = r.model_flops;
  j["iteration_time_s"] = r.iteration_time_s;
  j["tokens_per_s"] = r.tokens_per_s;
  j["tflops_per_gpu"] = r.tflops_per_gpu;
  j["mfu"] = r.mfu;
  j["peak_memory_bytes"] = r.peak_memory.count();
  j["memory_capacity_bytes"] = r.memory_capacity.count();
  j["memory_breakdown"] = memory_json(r.memory);
  j["time_breakdown"] = time_json(r.time);
  ordered_json devices = ordered_json::array();
  for (std::size_t d = 0; d < r.devices.size(); ++d) {
    const auto& dev = r.devices[d];
    ordered_json dj;
    dj["rank"] = dev.rank;
    dj["stage"] = dev.stage;
    dj["end_time_s"] = gr.device_end_s[d];
    dj["peak_memory_bytes"] = dev.memory.total().count();
    dj["memory_breakdown"] = memory_json(dev.memory);
    dj["time_breakdown"] = time_json(dev.time);
    devices.push_back(dj);
  }
  j["devices"] = devices;
  j["tasks"] = r.tasks;
  j["events"] = r.events;
  return j.dump(2) + "\n";
}

std::string graph_report_text(const GraphWorkload& w, const config::Cluster& cluster, const GraphRunResult& gr) {
  const RunResult& r = gr.run;
  std::string out;
  auto line = [&](const std::string& k, const std::string& v) {
    out += k;
    out += std::string(k.size() < 26 ? 26 - k.size() : 1, ' ');
    out += v;
    out += '\n';
  };
  line("workload", w.description);
  line("cluster", cluster.cluster.name + ", " + std::to_string(w.graph.devices.size()) + " × " + cluster.gpu.name);
  line("status", std::string(status_name(r.status)) + (r.reason.empty() ? "" : " (" + r.reason + ")"));
  if (r.iteration_time_s > 0) {
    line("iteration time", format_double("%.4f s", r.iteration_time_s));
    if (r.tokens_per_s > 0) line("throughput", format_double("%.0f tokens/s", r.tokens_per_s));
    line(w.model_flops > 0 ? "model TFLOP/s per GPU" : "trace TFLOP/s per GPU", format_double("%.1f", r.tflops_per_gpu));
    line(w.model_flops > 0 ? "MFU" : "FLOP utilization", format_double("%.1f %%", 100.0 * r.mfu));
  }
  line("peak memory", format_double("%.2f GiB", r.peak_memory.in_gib()) + " of " + format_double("%.2f GiB", r.memory_capacity.in_gib()));
  line("  weights", format_double("%.2f GiB", r.memory.weights.in_gib()));
  line("  gradients", format_double("%.2f GiB", r.memory.gradients.in_gib()));
  line("  optimizer states", format_double("%.2f GiB", r.memory.optimizer_states.in_gib()));
  line("  activations", format_double("%.2f GiB", r.memory.activations.in_gib()));
  if (r.iteration_time_s > 0) {
    out += "time breakdown (device finishing last)\n";
    for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) {
      const Duration t = r.time.time[c];
      line(std::string("  ") + runtime::time_category_name(static_cast<runtime::TimeCategory>(c)),
           format_double("%.4f s", t.seconds()) + format_double("  (%.1f %%)", 100.0 * t.seconds() / r.iteration_time_s));
    }
    // When each rank finishes, ranks with the same end time on one line.
    out += "rank end times\n";
    std::map<std::int64_t, std::vector<std::int32_t>> by_end;
    for (std::size_t d = 0; d < gr.device_end_s.size(); ++d) {
      by_end[std::llround(gr.device_end_s[d] * 1e9)].push_back(r.devices[d].rank);
    }
    for (const auto& [ns, ranks] : by_end) {
      std::string list;
      for (std::size_t i = 0; i < ranks.size() && i < 16; ++i) list += (i ? "," : "") + std::to_string(ranks[i]);
      if (ranks.size() > 16) list += ",… (" + std::to_string(ranks.size()) + " ranks)";
      line("  " + format_double("%.4f s", static_cast<double>(ns) * 1e-9), "ranks " + list);
    }
  }
  return out;
}

ExportResult export_chakra(const config::Scenario& sc, const std::filesystem::path& prefix, Resources& resources) {
  ExportResult out;
  RunOptions ro;
  ro.full = true;
  out.run = simulate(sc, ro, resources);
  if (out.run.status == Status::kUnsupported) return out;

  // The same lowering as simulate() with every rank. Only the options that set durations are
  // given: the memory timeline is carried by each rank's recorded peak instead.
  parallel::LoweringOptions lo;
  lo.full = true;
  lo.optimizer_bytes_per_param = memory::optimizer_step_bytes_per_parameter(sc.plan);
  const parallel::TaskGraph graph = parallel::lower(sc.model, sc.plan, lo);
  const parallel::Layout layout(sc.plan);
  const runtime::Execution ex = runtime::execute(graph, layout, resources.compute(sc.cluster.gpu, sc.plan),
                                                 resources.network(sc.cluster, sc.num_gpus), runtime::ExecuteOptions{});
  // The simulation's iteration adds the compute its critical device loses to contention.
  const double replayed = out.run.iteration_time_s - out.run.time[runtime::TimeCategory::kContention].seconds();
  if (out.run.iteration_time_s > 0 && std::abs(ex.end.seconds() - replayed) > 1e-9 * out.run.iteration_time_s) {
    throw InternalError("Chakra export: the exported graph runs " + std::to_string(ex.end.seconds()) +
                        " s but the simulation replays " + std::to_string(replayed) + " s");
  }

  trace::ChakraExportInfo info;
  info.plan = sc.plan;
  info.gpu = sc.cluster.gpu.name;
  info.model_flops = out.run.model_flops;
  info.tokens = static_cast<double>(sc.plan.global_batch * sc.plan.seq_len);
  info.metadata = {{"trainsim_model", sc.model.name}, {"trainsim_cluster", sc.cluster.cluster.name}};
  std::map<std::int32_t, const DeviceReport*> by_rank;
  for (const auto& d : out.run.devices) by_rank[d.rank] = &d;
  for (const auto& dev : graph.devices) {
    trace::ChakraRankMemory m;
    if (const auto it = by_rank.find(dev.rank); it != by_rank.end()) {
      m.weights = it->second->memory.weights;
      m.gradients = it->second->memory.gradients;
      m.optimizer_states = it->second->memory.optimizer_states;
      m.activations = it->second->memory.activations;
      m.cuda_context = it->second->memory.cuda_context;
      m.nccl_buffers = it->second->memory.nccl_buffers;
      m.fragmentation = it->second->memory.fragmentation;
    }
    info.memory.push_back(m);
  }
  out.files = trace::write_chakra(prefix, graph, ex, info);
  return out;
}

}  // namespace ts::driver
