#include "sim/trace/chrome_trace.h"

#include <zlib.h>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "sim/base/diagnostic.h"
#include "sim/network/calibration.h"
#include "sim/network/collective.h"

namespace ts::trace {
namespace {

using parallel::Stream;
using parallel::Task;
using parallel::TaskKind;

// Every slice carries one category: the trace engine of Chrome DevTools binds a flow event to a
// slice with the same (ts, pid, tid, cat) and joins flow events of the same cat, so slices joined
// by one arrow must share it. The pass goes into the arguments instead.
constexpr const char* kSliceCategory = "task";
// Operation lists are summarized in the slice arguments up to this many ops (a fused layer block
// has about a dozen; the optimizer step of a stage can have thousands).
constexpr std::size_t kMaxOpsInArgs = 16;
// Communicator ranks listed in the arguments of a collective, at most.
constexpr std::size_t kMaxGroupRanksInArgs = 16;

// Microseconds with picosecond resolution, printed exactly (no floating-point rounding).
void append_us(std::string& out, std::int64_t ps) {
  const bool negative = ps < 0;
  if (negative) ps = -ps;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%lld.%06lld", negative ? "-" : "",
                static_cast<long long>(ps / 1000000), static_cast<long long>(ps % 1000000));
  out += buf;
}

std::string json_quoted(std::string_view s) { return nlohmann::json(std::string(s)).dump(); }
std::string number(double v) { return nlohmann::json(v).dump(); }

// Display names and order of the streams: compute first, then TP, CP, the pipeline pairs, DP.
const char* thread_name(Stream s) {
  switch (s) {
    case Stream::kCompute: return "compute";
    case Stream::kTpComm: return "TP comm";
    case Stream::kCpComm: return "CP comm";
    case Stream::kDpComm: return "DP comm";
    case Stream::kDpReplica: return "DP replica comm";
    case Stream::kPpRecvPrev: return "PP recv from prev";
    case Stream::kPpSendNext: return "PP send to next";
    case Stream::kPpRecvNext: return "PP recv from next";
    case Stream::kPpSendPrev: return "PP send to prev";
    case Stream::kPpVRecvNext: return "PP recv from next (V activations)";
    case Stream::kPpVSendPrev: return "PP send to prev (V activations)";
    case Stream::kPpVRecvPrev: return "PP recv from prev (V gradients)";
    case Stream::kPpVSendNext: return "PP send to next (V gradients)";
    case Stream::kEpComm: return "EP comm (dispatch/combine)";
  }
  return "?";
}
int thread_order(Stream s) {
  switch (s) {
    case Stream::kCompute: return 0;
    case Stream::kTpComm: return 1;
    case Stream::kCpComm: return 2;
    case Stream::kPpRecvPrev: return 3;
    case Stream::kPpSendNext: return 4;
    case Stream::kPpRecvNext: return 5;
    case Stream::kPpSendPrev: return 6;
    case Stream::kDpComm: return 7;
    case Stream::kDpReplica: return 8;
    // After the others (their indices predate the V-shaped schedules).
    case Stream::kPpVRecvNext: return 9;
    case Stream::kPpVSendPrev: return 10;
    case Stream::kPpVRecvPrev: return 11;
    case Stream::kPpVSendNext: return 12;
    case Stream::kEpComm: return 13;
  }
  return 9;
}

struct Names {
  const parallel::TaskGraph& g;

  std::int32_t rank_of(const Task& t) const { return g.devices[static_cast<std::size_t>(t.device)].rank; }
  const parallel::Communicator& comm(const Task& t) const {
    return g.communicators[static_cast<std::size_t>(t.communicator)];
  }
  bool is_send(const Task& t) const { return comm(t).ranks[0] == rank_of(t); }
  std::int32_t peer(const Task& t) const { return comm(t).ranks[is_send(t) ? 1 : 0]; }

  // "L12 attention fwd mb3", "L12 mlp reduce_scatter bwd mb3", "send activations → rank 32 mb3".
  std::string task_name(const Task& t) const {
    std::string name;
    if (t.kind == TaskKind::kP2p) {
      name = is_send(t) ? "send " : "recv ";
      name += t.pass == parallel::Pass::kForward ? "activations " : "gradients ";
      name += is_send(t) ? "→ rank " : "← rank ";
      name += std::to_string(peer(t));
    } else {
      if (t.layer >= 0) name += "L" + std::to_string(t.layer) + " ";
      name += parallel::part_name(t.part);
      if (t.kind == TaskKind::kCollective) {
        name += " ";
        name += parallel::comm_op_name(t.comm);
      }
      name += " ";
      name += parallel::pass_name(t.pass);
    }
    if (t.micro_batch >= 0) name += " mb" + std::to_string(t.micro_batch);
    return name;
  }
};

std::string op_summary(const ir::Op& op) {
  std::string s = op.name;
  if (op.backward) s += " (bwd)";
  char buf[160];
  switch (op.kind) {
    case ir::OpKind::kGemm:
      std::snprintf(buf, sizeof buf, " gemm %lldx%lldx%lld", static_cast<long long>(op.gemm.m),
                    static_cast<long long>(op.gemm.n), static_cast<long long>(op.gemm.k));
      s += buf;
      if (op.gemm.batch != 1) s += " batch " + std::to_string(op.gemm.batch);
      break;
    case ir::OpKind::kAttention:
      std::snprintf(buf, sizeof buf, " b%lld h%lld kv%lld q%lld k%lld d%lld", static_cast<long long>(op.attn.batch),
                    static_cast<long long>(op.attn.heads), static_cast<long long>(op.attn.kv_heads),
                    static_cast<long long>(op.attn.seq_q), static_cast<long long>(op.attn.seq_kv),
                    static_cast<long long>(op.attn.head_dim));
      s += buf;
      if (op.attn.causal) s += " causal";
      if (op.attn.window > 0) s += " window " + std::to_string(op.attn.window);
      break;
    case ir::OpKind::kMemoryBound:
      std::snprintf(buf, sizeof buf, " %.3g MB", op.moved.in_gb() * 1e3);
      s += buf;
      break;
  }
  s += " ";
  s += ir::dtype_name(op.dtype);
  return s;
}

void append_common_args(std::string& out, const Task& t) {
  out += "\"pass\":\"";
  out += parallel::pass_name(t.pass);
  out += "\"";
  if (t.layer >= 0) out += ",\"layer\":" + std::to_string(t.layer);
  if (t.micro_batch >= 0) out += ",\"micro_batch\":" + std::to_string(t.micro_batch);
}

void append_compute_args(std::string& out, const parallel::TaskGraph& g, const Task& t) {
  append_common_args(out, t);
  out += ",\"part\":\"";
  out += parallel::part_name(t.part);
  out += "\"";
  if (t.ops < 0) {
    out += ",\"recorded\":true";
    return;
  }
  const auto& ops = g.op_lists[static_cast<std::size_t>(t.ops)];
  Bytes moved;
  for (const auto& op : ops) moved += op.moved;
  out += ",\"flops\":" + number(ir::total_flops(ops).value()) + ",\"memory_bytes\":" +
         std::to_string(moved.count()) + ",\"op_count\":" + std::to_string(ops.size()) + ",\"ops\":[";
  for (std::size_t i = 0; i < ops.size() && i < kMaxOpsInArgs; ++i) {
    if (i) out += ',';
    out += json_quoted(op_summary(ops[i]));
  }
  if (ops.size() > kMaxOpsInArgs) out += ",\"… " + std::to_string(ops.size() - kMaxOpsInArgs) + " more\"";
  out += "]";
}

void append_comm_args(std::string& out, const Names& n, const Task& t, const runtime::Execution::CommChoice& choice) {
  append_common_args(out, t);
  const auto& c = n.comm(t);
  if (t.kind == TaskKind::kP2p) {
    out += ",\"op\":\"";
    out += n.is_send(t) ? "send" : "recv";
    out += "\",\"peer\":" + std::to_string(n.peer(t));
  } else {
    out += ",\"op\":\"";
    out += parallel::comm_op_name(t.comm);
    out += "\"";
  }
  out += ",\"bytes\":" + std::to_string(t.bytes.count());
  out += ",\"algorithm\":" + json_quoted(network::algorithm_name(choice.algorithm));
  out += ",\"protocol\":" + json_quoted(network::protocol_name(choice.protocol));
  std::string group;
  for (std::size_t i = 0; i < c.ranks.size() && i < kMaxGroupRanksInArgs; ++i) {
    if (i) group += ',';
    group += std::to_string(c.ranks[i]);
  }
  if (c.ranks.size() > kMaxGroupRanksInArgs) group += ",…";
  out += ",\"group\":" + json_quoted(group) + ",\"group_size\":" + std::to_string(c.ranks.size());
}

bool parse_int(std::string_view s, std::int64_t& v) {
  const auto* end = s.data() + s.size();
  const auto r = std::from_chars(s.data(), end, v);
  return r.ec == std::errc() && r.ptr == end && !s.empty();
}

}  // namespace

std::string device_name(const parallel::SimDevice& d, std::int32_t gpus_per_host, bool with_cp) {
  using parallel::Axis;
  std::string s = "node " + std::to_string(d.rank / gpus_per_host) + " · gpu " +
                  std::to_string(d.rank % gpus_per_host) + " · tp" +
                  std::to_string(d.coord[Axis::kTp]);
  if (with_cp) s += " cp" + std::to_string(d.coord[Axis::kCp]);
  s += " pp" + std::to_string(d.coord[Axis::kPp]) + " dp" + std::to_string(d.coord[Axis::kDp]);
  return s;
}

std::vector<std::int32_t> parse_rank_list(std::string_view text, std::int64_t num_ranks, std::string_view flag) {
  std::vector<std::int32_t> ranks;
  auto fail = [&](const std::string& why) {
    throw InputError(Diagnostic{"", 0, std::string(flag), why});
  };
  std::size_t pos = 0;
  while (pos <= text.size()) {
    const std::size_t comma = std::min(text.find(',', pos), text.size());
    const std::string_view item = text.substr(pos, comma - pos);
    const std::size_t dash = item.find('-');
    std::int64_t lo = 0, hi = 0;
    const bool ok = dash == std::string_view::npos
                        ? parse_int(item, lo) && parse_int(item, hi)
                        : parse_int(item.substr(0, dash), lo) && parse_int(item.substr(dash + 1), hi);
    if (!ok || lo < 0 || hi < lo) {
      fail("'" + std::string(item) + "' is not a rank or a range of ranks such as 0-7 (in '" +
           std::string(text) + "')");
    }
    if (hi >= num_ranks) {
      fail("rank " + std::to_string(hi) + " does not exist: the run has ranks 0-" + std::to_string(num_ranks - 1));
    }
    for (std::int64_t r = lo; r <= hi; ++r) ranks.push_back(static_cast<std::int32_t>(r));
    pos = comma + 1;
  }
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  return ranks;
}

std::string chrome_trace_json(const parallel::TaskGraph& g, const runtime::Execution& ex, const TraceInfo& info,
                              TraceSize* size_out) {
  const Names names{g};
  const std::size_t num_devices = g.devices.size();
  SIM_ASSERT(ex.timings.size() == g.tasks.size(), "execution does not match the task graph");

  // Which simulated devices are written.
  std::vector<bool> written(num_devices, info.ranks.empty());
  for (std::size_t d = 0; d < num_devices; ++d) {
    if (std::binary_search(info.ranks.begin(), info.ranks.end(), g.devices[d].rank)) written[d] = true;
  }
  TraceSize size;
  size.devices_simulated = static_cast<std::int64_t>(num_devices);
  size.devices_written = std::count(written.begin(), written.end(), true);
  if (size.devices_written == 0 && num_devices > 0) {
    std::string simulated;
    for (std::size_t d = 0; d < num_devices && d < 32; ++d) {
      simulated += (d ? "," : "") + std::to_string(g.devices[d].rank);
    }
    if (num_devices > 32) simulated += ",…";
    throw InputError(Diagnostic{"", 0, "--trace-devices",
                                "selects none of the simulated ranks (" + simulated +
                                    "); --full simulates every rank"});
  }
  const auto is_written = [&](const Task& t) { return written[static_cast<std::size_t>(t.device)]; };

  // Streams in use per device, and whether any simulated device has a CP coordinate.
  std::vector<std::array<bool, parallel::kNumStreams>> used(num_devices, std::array<bool, parallel::kNumStreams>{});
  for (const Task& t : g.tasks) used[static_cast<std::size_t>(t.device)][static_cast<std::size_t>(t.stream)] = true;
  bool with_cp = false;
  for (const auto& d : g.devices) with_cp = with_cp || d.coord[parallel::Axis::kCp] != 0;

  // Flow arrows. A pipeline transfer links the send slice to the first slice on the receiver
  // that waits for it (a compute block, or the TP all-gather in front of it with sequence
  // parallelism), through the matching receive when that starts later than the send; the
  // k-th send on a pair communicator matches the k-th receive on it. A collective links the
  // slices of its written members in rank order; the k-th call on a communicator by each member
  // belongs to the same collective (NCCL matches calls by issue order).
  struct Flow {
    std::vector<std::size_t> tasks;  // bound slices, in arrow order
  };
  std::vector<Flow> flows;
  std::int64_t pipeline_flows = 0, collective_flows = 0;
  {
    // First task on the same device that depends on each receive (by start time).
    std::vector<std::int64_t> consumer(g.tasks.size(), -1);
    for (std::size_t t = 0; t < g.tasks.size(); ++t) {
      const Task& task = g.tasks[t];
      if (task.kind == TaskKind::kP2p) continue;
      for (std::uint32_t i = 0; i < task.dep_count; ++i) {
        const std::uint32_t dep = g.deps[task.dep_begin + i];
        if (g.tasks[dep].kind != TaskKind::kP2p || g.tasks[dep].device != task.device) continue;
        auto& c = consumer[dep];
        if (c < 0 || ex.timings[t].start < ex.timings[static_cast<std::size_t>(c)].start) c = static_cast<std::int64_t>(t);
      }
    }
    // Calls per communicator and member device, in program order.
    std::vector<std::map<std::int32_t, std::vector<std::size_t>>> calls(g.communicators.size());
    for (std::size_t t = 0; t < g.tasks.size(); ++t) {
      const Task& task = g.tasks[t];
      if (task.kind == TaskKind::kCompute || !is_written(task)) continue;
      calls[static_cast<std::size_t>(task.communicator)][names.rank_of(task)].push_back(t);
    }
    for (std::size_t c = 0; c < g.communicators.size(); ++c) {
      const auto& members = calls[c];
      if (members.size() < 2) continue;
      const bool p2p = g.tasks[members.begin()->second.front()].kind == TaskKind::kP2p;
      std::size_t n = SIZE_MAX;
      for (const auto& [rank, list] : members) n = std::min(n, list.size());
      for (std::size_t k = 0; k < n; ++k) {
        Flow f;
        if (p2p) {
          const auto& send_list = members.at(g.communicators[c].ranks[0]);
          const auto& recv_list = members.at(g.communicators[c].ranks[1]);
          const std::size_t send = send_list[k], recv = recv_list[k];
          // The receive starts with the send (one transfer); when the consumer starts later
          // the arrow goes from the send to it directly: a viewer keying steps by time would
          // otherwise keep the receive in place of the send and lose the device crossing.
          f.tasks = {send};
          const std::int64_t use = consumer[recv];
          const SimTime sent = ex.timings[send].start;
          const bool later_use = use >= 0 && ex.timings[static_cast<std::size_t>(use)].start > sent;
          if (!later_use || ex.timings[recv].start != sent) f.tasks.push_back(recv);
          if (later_use) f.tasks.push_back(static_cast<std::size_t>(use));
          ++pipeline_flows;
        } else {
          for (const auto& [rank, list] : members) f.tasks.push_back(list[k]);
          ++collective_flows;
        }
        flows.push_back(std::move(f));
      }
    }
  }

  std::string out;
  out.reserve(g.tasks.size() * 400 + 4096);
  out += "{\"displayTimeUnit\":\"ms\",\"otherData\":{";
  for (const auto& [key, value] : info.metadata) out += json_quoted(key) + ":" + json_quoted(value) + ",";
  out += "\"simulated_devices\":" + std::to_string(size.devices_simulated) +
         ",\"written_devices\":" + std::to_string(size.devices_written) +
         ",\"tasks\":" + std::to_string(g.tasks.size()) + ",\"pipeline_flows\":" + std::to_string(pipeline_flows) +
         ",\"collective_flows\":" + std::to_string(collective_flows) + ",\"end_us\":";
  append_us(out, ex.end.ps());
  out += "},\"traceEvents\":[\n";
  bool first = true;
  auto begin_event = [&] {
    if (!first) out += ",\n";
    first = false;
    ++size.events;
  };

  // Process and thread names; sort indices keep devices in rank order and streams in a fixed order.
  for (std::size_t d = 0; d < num_devices; ++d) {
    if (!written[d]) continue;
    const auto& dev = g.devices[d];
    const auto pid = std::to_string(dev.rank);
    begin_event();
    out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid +
           ",\"args\":{\"name\":" + json_quoted(device_name(dev, info.gpus_per_host, with_cp)) +
           "}}";
    begin_event();
    out += "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid + ",\"args\":{\"sort_index\":" + pid + "}}";
    if (dev.represents > 1) {
      begin_event();
      out += "{\"ph\":\"M\",\"name\":\"process_labels\",\"pid\":" + pid + ",\"args\":{\"labels\":\"stands for " +
             std::to_string(dev.represents) + " ranks\"}}";
    }
    for (std::size_t s = 0; s < parallel::kNumStreams; ++s) {
      if (!used[d][s]) continue;
      const auto stream = static_cast<Stream>(s);
      begin_event();
      out += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + std::to_string(s) +
             ",\"args\":{\"name\":" + json_quoted(thread_name(stream)) + "}}";
      begin_event();
      out += "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + pid + ",\"tid\":" + std::to_string(s) +
             ",\"args\":{\"sort_index\":" + std::to_string(thread_order(stream)) + "}}";
    }
  }
  // Complete events, one per task, in order of start time (then rank and stream): viewers that
  // take a flow's steps in file order (Chrome DevTools) then draw every arrow forward in time.
  std::vector<std::size_t> order;
  order.reserve(g.tasks.size());
  for (std::size_t t = 0; t < g.tasks.size(); ++t) {
    if (is_written(g.tasks[t])) order.push_back(t);
  }
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto& ta = g.tasks[a];
    const auto& tb = g.tasks[b];
    const SimTime sa = ex.timings[a].start, sb = ex.timings[b].start;
    if (sa != sb) return sa < sb;
    const std::int32_t ra = names.rank_of(ta), rb = names.rank_of(tb);
    if (ra != rb) return ra < rb;
    return static_cast<int>(ta.stream) < static_cast<int>(tb.stream);
  });
  for (const std::size_t t : order) {
    const Task& task = g.tasks[t];
    const auto& tm = ex.timings[t];
    begin_event();
    ++size.slices;
    out += "{\"ph\":\"X\",\"name\":" + json_quoted(names.task_name(task)) + ",\"cat\":\"" + kSliceCategory +
           "\",\"pid\":" + std::to_string(names.rank_of(task)) + ",\"tid\":" +
           std::to_string(static_cast<int>(task.stream)) + ",\"ts\":";
    append_us(out, tm.start.ps());
    out += ",\"dur\":";
    append_us(out, (tm.end - tm.start).ps());
    out += ",\"args\":{";
    if (task.kind == TaskKind::kCompute) {
      append_compute_args(out, g, task);
    } else {
      append_comm_args(out, names, task, ex.comm[t]);
    }
    out += "}}";
  }
  // Flow events: start, steps, finish, each at the start of the slice it binds to.
  for (std::size_t id = 0; id < flows.size(); ++id) {
    const auto& f = flows[id];
    const bool pipeline = g.tasks[f.tasks.front()].kind == TaskKind::kP2p;
    for (std::size_t i = 0; i < f.tasks.size(); ++i) {
      const std::size_t t = f.tasks[i];
      const Task& task = g.tasks[t];
      const char* ph = i == 0 ? "s" : i + 1 == f.tasks.size() ? "f" : "t";
      begin_event();
      out += std::string("{\"ph\":\"") + ph + "\",\"name\":\"" + (pipeline ? "pipeline" : "collective") +
             "\",\"cat\":\"" + kSliceCategory + "\",\"id\":" + std::to_string(id) +
             ",\"pid\":" + std::to_string(names.rank_of(task)) + ",\"tid\":" +
             std::to_string(static_cast<int>(task.stream)) + ",\"ts\":";
      append_us(out, ex.timings[t].start.ps());
      out += i + 1 == f.tasks.size() ? ",\"bp\":\"e\"}" : "}";
    }
  }
  size.flows = static_cast<std::int64_t>(flows.size());
  // Memory counters in GiB: the static footprint (weights, gradients, optimizer states) and the
  // dynamic part (saved activations and transient buffers), stacked; from 0 to the end of the
  // iteration.
  for (std::size_t d = 0; d < ex.memory.size() && d < num_devices; ++d) {
    if (!written[d]) continue;
    const double static_gib = d < info.static_memory.size() ? info.static_memory[d].in_gib() : 0.0;
    const auto pid = std::to_string(g.devices[d].rank);
    auto sample = [&](SimTime time, Bytes dynamic) {
      begin_event();
      ++size.counters;
      out += "{\"ph\":\"C\",\"name\":\"memory GiB\",\"pid\":" + pid + ",\"ts\":";
      append_us(out, time.ps());
      out += ",\"args\":{\"static\":" + number(static_gib) + ",\"dynamic\":" + number(dynamic.in_gib()) + "}}";
    };
    const auto& timeline = ex.memory[d].timeline;
    if (timeline.empty() || timeline.front().time > SimTime()) sample(SimTime(), Bytes());
    Bytes last;
    for (const auto& s : timeline) {
      sample(s.time, s.dynamic);
      last = s.dynamic;
    }
    if (timeline.empty() || timeline.back().time < ex.end) sample(ex.end, last);
  }
  out += "\n]}\n";
  size.json_bytes = static_cast<std::int64_t>(out.size());
  if (size_out) *size_out = size;
  return out;
}

TraceSize write_chrome_trace(const std::filesystem::path& path, const parallel::TaskGraph& g,
                             const runtime::Execution& ex, const TraceInfo& info) {
  TraceSize size;
  const std::string json = chrome_trace_json(g, ex, info, &size);
  const std::filesystem::path tmp = path.string() + ".tmp";
  const bool gz = path.extension() == ".gz";
  bool ok = false;
  if (gz) {
    gzFile f = gzopen(tmp.c_str(), "wb6");
    if (f) {
      // gzwrite takes an unsigned length: write in chunks well below its range.
      constexpr std::size_t kChunk = std::size_t{1} << 30;
      ok = true;
      for (std::size_t pos = 0; ok && pos < json.size(); pos += kChunk) {
        const auto n = static_cast<unsigned>(std::min(kChunk, json.size() - pos));
        ok = gzwrite(f, json.data() + pos, n) == static_cast<int>(n);
      }
      ok = (gzclose(f) == Z_OK) && ok;
    }
  } else {
    std::ofstream f(tmp, std::ios::binary);
    f.write(json.data(), static_cast<std::streamsize>(json.size()));
    f.close();
    ok = static_cast<bool>(f);
  }
  std::error_code ec;
  if (ok) std::filesystem::rename(tmp, path, ec);
  if (!ok || ec) {
    std::filesystem::remove(tmp, ec);
    throw InputError(Diagnostic{"", 0, "--trace", "cannot write trace file " + path.string()});
  }
  size.file_bytes = static_cast<std::int64_t>(std::filesystem::file_size(path, ec));
  return size;
}

std::string describe_trace_size(const std::filesystem::path& path, const TraceSize& s) {
  char buf[256];
  std::snprintf(buf, sizeof buf,
                "trace %s: %lld of %lld simulated devices, %lld slices, %lld flows, %lld counter samples, "
                "%.1f MB of JSON",
                path.string().c_str(), static_cast<long long>(s.devices_written),
                static_cast<long long>(s.devices_simulated), static_cast<long long>(s.slices),
                static_cast<long long>(s.flows), static_cast<long long>(s.counters),
                static_cast<double>(s.json_bytes) * 1e-6);
  std::string out = buf;
  if (s.file_bytes > 0 && s.file_bytes != s.json_bytes) {
    std::snprintf(buf, sizeof buf, ", %.1f MB on disk", static_cast<double>(s.file_bytes) * 1e-6);
    out += buf;
  }
  return out;
}

}  // namespace ts::trace
