#include "sim/trace/chakra_writer.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <system_error>

#include "sim/base/diagnostic.h"
#include "sim/base/format.h"
#include "sim/schema/chakra.pb.h"

namespace ts::trace {
namespace {

namespace pb = ::trainsim::chakra;
using parallel::CommOp;
using parallel::Task;
using parallel::TaskKind;

// Chakra's schema version string of the fields written here (et_def.proto, version 0.0.4).
constexpr const char* kChakraVersion = "0.0.4";

void add_int(pb::Node& n, const char* name, std::int64_t v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_int64_val(v);
}
void add_int32(pb::Node& n, const char* name, std::int32_t v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_int32_val(v);
}
void add_string(pb::Node& n, const char* name, const std::string& v) {
  auto* a = n.add_attr();
  a->set_name(name);
  a->set_string_val(v);
}
void add_meta(pb::GlobalMetadata& m, const std::string& name, const std::string& v) {
  auto* a = m.add_attr();
  a->set_name(name);
  a->set_string_val(v);
}
void add_meta_int(pb::GlobalMetadata& m, const std::string& name, std::int64_t v) {
  auto* a = m.add_attr();
  a->set_name(name);
  a->set_int64_val(v);
}
void add_meta_double(pb::GlobalMetadata& m, const std::string& name, double v) {
  auto* a = m.add_attr();
  a->set_name(name);
  a->set_double_val(v);
}

pb::CollectiveCommType comm_type(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce: return pb::ALL_REDUCE;
    case CommOp::kAllGather: return pb::ALL_GATHER;
    case CommOp::kReduceScatter: return pb::REDUCE_SCATTER;
    case CommOp::kAllToAll: return pb::ALL_TO_ALL;
    case CommOp::kSendRecv: break;
  }
  throw InternalError("send/recv is not a Chakra collective");
}

// Bytes an op reads and writes, for Chakra's tensor_size (its roofline divides num_ops by it):
// operands and result for GEMMs, Q, K, V and O (twice that for the backward, which also
// writes their gradients) for attention, the recorded traffic for memory-bound ops.
double op_bytes(const ir::Op& op) {
  const auto elem = static_cast<double>(ir::bytes_per_element(op.dtype));
  switch (op.kind) {
    case ir::OpKind::kGemm: {
      const auto& g = op.gemm;
      return static_cast<double>(g.batch) *
             (static_cast<double>(g.m * g.k) + static_cast<double>(g.k * g.n) + static_cast<double>(g.m * g.n)) *
             elem;
    }
    case ir::OpKind::kAttention: {
      // Q and K at head_dim, V and O at the value head dimension (MLA: narrower values).
      const auto& a = op.attn;
      const double dv = static_cast<double>(a.head_dim_v > 0 ? a.head_dim_v : a.head_dim);
      const double dk = static_cast<double>(a.head_dim);
      const double q = static_cast<double>(a.batch * a.heads * a.seq_q);
      const double kv = static_cast<double>(a.batch * a.kv_heads * a.seq_kv);
      const double io = (q * (dk + dv) + kv * (dk + dv)) * elem;
      return op.backward ? 2.0 * io : io;
    }
    case ir::OpKind::kMemoryBound: return op.moved.real();
  }
  return 0;
}

// One op as text (attribute trainsim_ops; parsed by config::read_chakra):
//   gemm <dtype> <bwd> m n k batch | attention <dtype> <bwd> batch heads kv_heads seq_q seq_kv
//   head_dim causal [window [head_dim_v]] | memory <dtype> <bwd> bytes
// (window only where there is one, or where head_dim_v follows: a value head dimension other
// than head_dim, MLA's).
std::string op_text(const ir::Op& op) {
  std::string s;
  const std::string head = std::string(ir::dtype_name(op.dtype)) + " " + (op.backward ? "1" : "0");
  auto num = [&](std::int64_t v) { s += " " + std::to_string(v); };
  switch (op.kind) {
    case ir::OpKind::kGemm:
      s = "gemm " + head;
      num(op.gemm.m);
      num(op.gemm.n);
      num(op.gemm.k);
      num(op.gemm.batch);
      break;
    case ir::OpKind::kAttention:
      s = "attention " + head;
      num(op.attn.batch);
      num(op.attn.heads);
      num(op.attn.kv_heads);
      num(op.attn.seq_q);
      num(op.attn.seq_kv);
      num(op.attn.head_dim);
      num(op.attn.causal ? 1 : 0);
      if (const bool narrow_v = op.attn.head_dim_v > 0 && op.attn.head_dim_v != op.attn.head_dim;
          op.attn.window > 0 || narrow_v) {
        num(op.attn.window);  // sliding window (0: none)
        if (narrow_v) num(op.attn.head_dim_v);
      }
      break;
    case ir::OpKind::kMemoryBound:
      s = "memory " + head;
      num(op.moved.count());
      break;
  }
  return s;
}

std::string node_name(const parallel::TaskGraph& g, const Task& t) {
  std::string name;
  if (t.layer >= 0) name += "L" + std::to_string(t.layer) + ".";
  name += parallel::part_name(t.part);
  switch (t.kind) {
    case TaskKind::kCompute: break;
    case TaskKind::kCollective: name += std::string(".") + parallel::comm_op_name(t.comm); break;
    case TaskKind::kP2p: {
      const auto& c = g.communicators[static_cast<std::size_t>(t.communicator)];
      name += ".send_recv." + std::to_string(c.ranks[0]) + "to" + std::to_string(c.ranks[1]);
      break;
    }
  }
  name += std::string(".") + parallel::pass_name(t.pass);
  if (t.micro_batch >= 0) name += ".mb" + std::to_string(t.micro_batch);
  return name;
}

void append_varint(std::string& out, std::uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7f) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}

void append_message(std::string& out, const google::protobuf::MessageLite& m) {
  const std::string bytes = m.SerializeAsString();
  append_varint(out, bytes.size());
  out += bytes;
}

void write_file(const std::filesystem::path& path, const std::string& data) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(data.data(), static_cast<std::streamsize>(data.size()));
  f.close();
  if (!f) throw InputError(Diagnostic{path.string(), 0, "", "cannot write the Chakra trace file"});
}

}  // namespace

std::filesystem::path chakra_rank_path(const std::filesystem::path& prefix, std::int64_t rank) {
  return std::filesystem::path(prefix.string() + "." + std::to_string(rank) + ".et");
}

std::vector<std::filesystem::path> write_chakra(const std::filesystem::path& prefix,
                                                const parallel::TaskGraph& g,
                                                const runtime::Execution& ex,
                                                const ChakraExportInfo& info) {
  const std::size_t n = g.devices.size();
  SIM_ASSERT(ex.timings.size() == g.tasks.size(), "execution does not belong to the graph");
  // Every rank, once: the graph must come from a full lowering.
  std::vector<std::int32_t> device_of_rank(n, -1);
  for (std::size_t d = 0; d < n; ++d) {
    const auto r = g.devices[d].rank;
    SIM_ASSERT(r >= 0 && static_cast<std::size_t>(r) < n && device_of_rank[static_cast<std::size_t>(r)] < 0,
               "Chakra export needs a graph with every rank simulated (full mode)");
    device_of_rank[static_cast<std::size_t>(r)] = static_cast<std::int32_t>(d);
  }
  SIM_ASSERT(info.memory.empty() || info.memory.size() == n, "memory must be given per device");

  // Node ids in each device's program order. A ring shift (send/recv collective: every member
  // sends to the next one) is written as a send to the next member and a receive from the
  // previous one: two ids.
  auto ring_shift = [](const Task& t) { return t.kind == TaskKind::kCollective && t.comm == CommOp::kSendRecv; };
  std::vector<std::uint64_t> first_id(g.tasks.size());
  std::vector<std::vector<std::uint32_t>> device_tasks(n);
  {
    std::vector<std::uint64_t> next_id(n, 0);
    for (std::size_t t = 0; t < g.tasks.size(); ++t) {
      const auto d = static_cast<std::size_t>(g.tasks[t].device);
      first_id[t] = next_id[d];
      next_id[d] += ring_shift(g.tasks[t]) ? 2 : 1;
      device_tasks[d].push_back(static_cast<std::uint32_t>(t));
    }
  }

  // Point-to-point messages: the k-th send of a communicator matches its k-th receive; in the
  // k-th ring shift of a communicator, member i sends to member i+1. Each message gets its own
  // tag, the same on both sides (ASTRA-sim matches on src, dst and tag).
  std::vector<std::int64_t> tag(g.tasks.size(), -1);       // p2p, and the send of a ring shift
  std::vector<std::int64_t> recv_tag(g.tasks.size(), -1);  // the receive of a ring shift
  {
    std::int64_t next = 0;
    std::map<std::pair<std::int32_t, bool>, std::vector<std::uint32_t>> by_comm;  // (comm, is_send)
    std::map<std::int32_t, std::map<std::int32_t, std::vector<std::uint32_t>>> shifts;  // comm → rank → tasks
    for (std::size_t t = 0; t < g.tasks.size(); ++t) {
      const Task& task = g.tasks[t];
      const auto& c = g.communicators[static_cast<std::size_t>(task.communicator < 0 ? 0 : task.communicator)];
      const std::int32_t rank = g.devices[static_cast<std::size_t>(task.device)].rank;
      if (task.kind == TaskKind::kP2p) {
        by_comm[{task.communicator, rank == c.ranks[0]}].push_back(static_cast<std::uint32_t>(t));
      } else if (ring_shift(task)) {
        shifts[task.communicator][rank].push_back(static_cast<std::uint32_t>(t));
      }
    }
    for (auto& [key, sends] : by_comm) {
      if (!key.second) continue;
      const auto recvs = by_comm.find({key.first, false});
      SIM_ASSERT(recvs != by_comm.end() && recvs->second.size() == sends.size(),
                 "point-to-point communicator with unmatched sends and receives");
      for (std::size_t k = 0; k < sends.size(); ++k) {
        tag[sends[k]] = next;
        tag[recvs->second[k]] = next;
        ++next;
      }
    }
    for (auto& [comm, members] : shifts) {
      const auto& ranks = g.communicators[static_cast<std::size_t>(comm)].ranks;
      const std::size_t count = members[ranks[0]].size();
      for (const auto r : ranks) SIM_ASSERT(members[r].size() == count, "ring shifts of a group do not match");
      for (std::size_t k = 0; k < count; ++k) {
        for (std::size_t i = 0; i < ranks.size(); ++i) {
          tag[members[ranks[i]][k]] = next;
          recv_tag[members[ranks[(i + 1) % ranks.size()]][k]] = next;
          ++next;
        }
      }
    }
  }

  // Process groups: the collective communicators, named by communicator index + 1.
  std::vector<bool> collective(g.communicators.size(), false);
  for (const Task& task : g.tasks) {
    if (task.kind == TaskKind::kCollective) collective[static_cast<std::size_t>(task.communicator)] = true;
  }
  nlohmann::ordered_json groups = nlohmann::ordered_json::object();
  for (std::size_t c = 0; c < g.communicators.size(); ++c) {
    if (collective[c]) groups[std::to_string(c + 1)] = g.communicators[c].ranks;
  }

  std::vector<std::filesystem::path> files;
  std::vector<std::pair<std::filesystem::path, std::string>> contents;
  for (std::size_t r = 0; r < n; ++r) {
    const auto d = static_cast<std::size_t>(device_of_rank[r]);
    std::string out;
    pb::GlobalMetadata meta;
    meta.set_version(kChakraVersion);
    add_meta(meta, "schema", "trainsim");
    for (const auto& [k, v] : info.metadata) add_meta(meta, k, v);
    if (!info.gpu.empty()) add_meta(meta, "trainsim_gpu", info.gpu);
    if (info.plan) {
      const auto& p = *info.plan;
      add_meta_int(meta, "trainsim_tp", p.tp);
      add_meta_int(meta, "trainsim_pp", p.pp);
      add_meta_int(meta, "trainsim_dp", p.dp);
      add_meta_int(meta, "trainsim_cp", p.cp);
      // Expert parallelism (only when used, so that dense traces are unchanged).
      if (p.ep > 1 || p.etp > 1) {
        add_meta_int(meta, "trainsim_ep", p.ep);
        add_meta_int(meta, "trainsim_etp", p.etp);
      }
      std::string order;
      for (auto a : p.order) order += std::string(order.empty() ? "" : ",") + parallel::axis_name(a);
      add_meta(meta, "trainsim_order", order);
      add_meta(meta, "trainsim_host_dispatch_us", format_double("%.17g", p.host_dispatch.us()));
    }
    if (!info.memory.empty()) {
      const auto& m = info.memory[d];
      add_meta_int(meta, "trainsim_weights_bytes", m.weights.count());
      add_meta_int(meta, "trainsim_gradients_bytes", m.gradients.count());
      add_meta_int(meta, "trainsim_optimizer_states_bytes", m.optimizer_states.count());
      add_meta_int(meta, "trainsim_activations_bytes", m.activations.count());
      add_meta_int(meta, "trainsim_cuda_context_bytes", m.cuda_context.count());
      add_meta_int(meta, "trainsim_nccl_buffers_bytes", m.nccl_buffers.count());
      add_meta_int(meta, "trainsim_fragmentation_bytes", m.fragmentation.count());
    }
    if (info.model_flops > 0) add_meta_double(meta, "trainsim_model_flops", info.model_flops);
    if (info.tokens > 0) add_meta_double(meta, "trainsim_tokens", info.tokens);
    add_meta_int(meta, "trainsim_stage", g.devices[d].stage);
    append_message(out, meta);

    std::array<std::int64_t, parallel::kNumStreams> last_on_stream;  // task index
    last_on_stream.fill(-1);
    pb::Node node;
    for (const std::uint32_t t : device_tasks[d]) {
      const Task& task = g.tasks[t];
      const Duration duration = ex.timings[t].end - ex.timings[t].start;
      const std::int32_t rank = g.devices[d].rank;
      // What every node of the task carries: dependencies (on every node of the tasks it depends
      // on, and on the previous task of its stream), times and trainsim's attributes.
      auto common = [&](std::uint64_t id) {
        node.Clear();
        node.set_id(id);
        node.set_name(node_name(g, task));
        std::vector<std::uint64_t> data;
        for (std::uint32_t i = 0; i < task.dep_count; ++i) {
          const std::uint32_t dep = g.deps[task.dep_begin + i];
          SIM_ASSERT(g.tasks[dep].device == task.device, "dependency across devices cannot be exported");
          data.push_back(first_id[dep]);
          if (ring_shift(g.tasks[dep])) data.push_back(first_id[dep] + 1);
        }
        for (const auto dep : data) node.add_data_deps(dep);
        const auto prev = last_on_stream[static_cast<std::size_t>(task.stream)];
        if (prev >= 0) {
          const auto p = static_cast<std::size_t>(prev);
          for (std::uint64_t k = 0; k < (ring_shift(g.tasks[p]) ? 2u : 1u); ++k) {
            if (std::find(data.begin(), data.end(), first_id[p] + k) == data.end()) node.add_ctrl_deps(first_id[p] + k);
          }
        }
        node.set_start_time_micros(static_cast<std::uint64_t>(std::llround(ex.timings[t].start.us())));
        node.set_duration_micros(static_cast<std::uint64_t>(std::llround(duration.us())));
        auto* cpu = node.add_attr();
        cpu->set_name("is_cpu_op");
        cpu->set_bool_val(false);
        if (task.kind != TaskKind::kCompute) {
          const auto axes = g.communicators[static_cast<std::size_t>(task.communicator)].axes;
          if (axes != 0) add_int(node, "trainsim_axes", axes);
        }
        add_string(node, "trainsim_stream", parallel::stream_name(task.stream));
        add_string(node, "trainsim_pass", parallel::pass_name(task.pass));
        add_string(node, "trainsim_part", parallel::part_name(task.part));
        if (task.layer >= 0) add_int(node, "trainsim_layer", task.layer);
        if (task.micro_batch >= 0) add_int(node, "trainsim_micro_batch", task.micro_batch);
        if (task.alloc_at_start.count() != 0) add_int(node, "trainsim_alloc_bytes", task.alloc_at_start.count());
        if (task.free_at_end.count() != 0) add_int(node, "trainsim_free_bytes", task.free_at_end.count());
      };
      auto p2p = [&](pb::NodeType type, std::int32_t src, std::int32_t dst, std::int64_t message_tag) {
        node.set_type(type);
        add_int32(node, "comm_src", src);
        add_int32(node, "comm_dst", dst);
        add_int32(node, "comm_tag", static_cast<std::int32_t>(message_tag));
        add_int(node, "comm_size", task.bytes.count());
      };
      common(first_id[t]);
      switch (task.kind) {
        case TaskKind::kCompute: {
          node.set_type(pb::COMP_NODE);
          double flops = 0;
          double bytes = 0;
          if (task.ops >= 0) {
            auto* list = node.add_attr();
            list->set_name("trainsim_ops");
            for (const auto& op : g.op_lists[static_cast<std::size_t>(task.ops)]) {
              flops += op.flops.value();
              bytes += op_bytes(op);
              list->mutable_string_list()->add_values(op_text(op));
            }
          }
          add_int(node, "num_ops", std::llround(flops));
          auto* size = node.add_attr();
          size->set_name("tensor_size");
          size->set_uint64_val(static_cast<std::uint64_t>(std::llround(bytes)));
          add_int(node, "trainsim_duration_ps", duration.ps());
          break;
        }
        case TaskKind::kCollective: {
          const auto& c = g.communicators[static_cast<std::size_t>(task.communicator)];
          const std::string pg = std::to_string(task.communicator + 1);
          if (task.comm == CommOp::kSendRecv) {
            // Ring shift: the send (with the group, so that trainsim reads it back as one
            // collective), then the receive, which names its send.
            const auto m = c.ranks.size();
            const auto i = static_cast<std::size_t>(std::find(c.ranks.begin(), c.ranks.end(), rank) - c.ranks.begin());
            SIM_ASSERT(i < m, "rank outside its communicator");
            p2p(pb::COMM_SEND_NODE, rank, c.ranks[(i + 1) % m], tag[t]);
            add_string(node, "pg_name", pg);
            add_int(node, "trainsim_ring_shift", 1);
            append_message(out, node);
            common(first_id[t] + 1);
            p2p(pb::COMM_RECV_NODE, c.ranks[(i + m - 1) % m], rank, recv_tag[t]);
            add_int(node, "trainsim_ring_shift_send", static_cast<std::int64_t>(first_id[t]));
            break;
          }
          node.set_type(pb::COMM_COLL_NODE);
          add_int(node, "comm_type", comm_type(task.comm));
          // Chakra counts all-gather by the shard each rank contributes.
          const std::int64_t size = task.comm == CommOp::kAllGather
                                        ? task.bytes.count() / static_cast<std::int64_t>(c.ranks.size())
                                        : task.bytes.count();
          add_int(node, "comm_size", size);
          add_string(node, "pg_name", pg);
          break;
        }
        case TaskKind::kP2p: {
          const auto& c = g.communicators[static_cast<std::size_t>(task.communicator)];
          p2p(rank == c.ranks[0] ? pb::COMM_SEND_NODE : pb::COMM_RECV_NODE, c.ranks[0], c.ranks[1], tag[t]);
          add_int(node, "trainsim_comm", task.communicator + 1);
          break;
        }
      }
      last_on_stream[static_cast<std::size_t>(task.stream)] = static_cast<std::int64_t>(t);
      append_message(out, node);
    }
    contents.emplace_back(chakra_rank_path(prefix, static_cast<std::int64_t>(r)), std::move(out));
  }
  contents.emplace_back(std::filesystem::path(prefix.string() + ".json"), groups.dump() + "\n");

  // Temporary names first, renamed once everything is written.
  std::vector<std::filesystem::path> tmps;
  try {
    for (const auto& [path, data] : contents) {
      tmps.push_back(std::filesystem::path(path.string() + ".tmp"));
      write_file(tmps.back(), data);
    }
  } catch (...) {
    std::error_code ec;
    for (const auto& tmp : tmps) std::filesystem::remove(tmp, ec);
    throw;
  }
  for (std::size_t i = 0; i < contents.size(); ++i) {
    std::error_code ec;
    std::filesystem::rename(tmps[i], contents[i].first, ec);
    if (ec) {
      throw InputError(Diagnostic{contents[i].first.string(), 0, "", "cannot write: " + ec.message()});
    }
    files.push_back(contents[i].first);
  }
  return files;
}

}  // namespace ts::trace
