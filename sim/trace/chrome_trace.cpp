#include "sim/trace/chrome_trace.h"

#include <zlib.h>

#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>

#include "sim/base/diagnostic.h"

namespace ts::trace {
namespace {

using parallel::Task;
using parallel::TaskKind;

// Microseconds with picosecond resolution, printed exactly (no floating-point rounding).
void append_us(std::string& out, std::int64_t ps) {
  const bool negative = ps < 0;
  if (negative) ps = -ps;
  char buf[48];
  std::snprintf(buf, sizeof buf, "%s%lld.%06lld", negative ? "-" : "",
                static_cast<long long>(ps / 1000000), static_cast<long long>(ps % 1000000));
  out += buf;
}

std::string quoted(const std::string& s) { return nlohmann::json(s).dump(); }

std::string task_name(const parallel::TaskGraph& g, const Task& t) {
  std::string name;
  if (t.layer >= 0) name += "L" + std::to_string(t.layer) + " ";
  switch (t.kind) {
    case TaskKind::kCompute:
      name += parallel::part_name(t.part);
      break;
    case TaskKind::kCollective:
      name += std::string(parallel::part_name(t.part)) + " " + parallel::comm_op_name(t.comm);
      break;
    case TaskKind::kP2p: {
      const auto& c = g.communicators[static_cast<std::size_t>(t.communicator)];
      name += t.pass == parallel::Pass::kForward ? "activations " : "gradients ";
      name += "rank " + std::to_string(c.ranks[0]) + "→" + std::to_string(c.ranks[1]);
      break;
    }
  }
  name += " ";
  name += parallel::pass_name(t.pass);
  if (t.micro_batch >= 0) name += " mb" + std::to_string(t.micro_batch);
  return name;
}

std::string device_name(const parallel::SimDevice& d, std::int32_t gpus_per_node) {
  using parallel::Axis;
  return "node " + std::to_string(d.rank / gpus_per_node) + " · gpu " +
         std::to_string(d.rank % gpus_per_node) + " · tp" + std::to_string(d.coord[Axis::kTp]) +
         " cp" + std::to_string(d.coord[Axis::kCp]) + " dp" + std::to_string(d.coord[Axis::kDp]) +
         " pp" + std::to_string(d.coord[Axis::kPp]);
}

}  // namespace

std::string chrome_trace_json(const parallel::TaskGraph& g, const runtime::Execution& ex,
                              const TraceInfo& info) {
  std::string out;
  out.reserve(g.tasks.size() * 160 + 4096);
  out += "{\"displayTimeUnit\":\"ms\",\"otherData\":{";
  for (std::size_t i = 0; i < info.metadata.size(); ++i) {
    if (i) out += ',';
    out += quoted(info.metadata[i].first) + ":" + quoted(info.metadata[i].second);
  }
  out += "},\"traceEvents\":[\n";
  bool first = true;
  auto begin_event = [&] {
    if (!first) out += ",\n";
    first = false;
  };
  // Process and thread names; sort indices keep streams in a fixed order.
  for (std::size_t d = 0; d < g.devices.size(); ++d) {
    const auto pid = std::to_string(d);
    begin_event();
    out += "{\"ph\":\"M\",\"name\":\"process_name\",\"pid\":" + pid + ",\"args\":{\"name\":" +
           quoted(device_name(g.devices[d], info.gpus_per_node)) + "}}";
    begin_event();
    out += "{\"ph\":\"M\",\"name\":\"process_sort_index\",\"pid\":" + pid + ",\"args\":{\"sort_index\":" + pid + "}}";
    for (std::size_t s = 0; s < parallel::kNumStreams; ++s) {
      begin_event();
      out += "{\"ph\":\"M\",\"name\":\"thread_name\",\"pid\":" + pid + ",\"tid\":" + std::to_string(s) +
             ",\"args\":{\"name\":\"" + parallel::stream_name(static_cast<parallel::Stream>(s)) + "\"}}";
      begin_event();
      out += "{\"ph\":\"M\",\"name\":\"thread_sort_index\",\"pid\":" + pid + ",\"tid\":" +
             std::to_string(s) + ",\"args\":{\"sort_index\":" + std::to_string(s) + "}}";
    }
  }
  // Complete events, one per task that took time.
  for (std::size_t t = 0; t < g.tasks.size(); ++t) {
    const Task& task = g.tasks[t];
    const auto& tm = ex.timings[t];
    begin_event();
    out += "{\"ph\":\"X\",\"name\":" + quoted(task_name(g, task)) + ",\"cat\":\"" +
           parallel::pass_name(task.pass) + "\",\"pid\":" + std::to_string(task.device) +
           ",\"tid\":" + std::to_string(static_cast<int>(task.stream)) + ",\"ts\":";
    append_us(out, tm.start.ps());
    out += ",\"dur\":";
    append_us(out, (tm.end - tm.start).ps());
    out += ",\"args\":{";
    if (task.kind == TaskKind::kCompute && task.ops >= 0) {
      const auto& ops = g.op_lists[static_cast<std::size_t>(task.ops)];
      out += "\"ops\":" + std::to_string(ops.size()) + ",\"gflops\":" +
             nlohmann::json(ir::total_flops(ops).value() * 1e-9).dump();
    } else if (task.kind != TaskKind::kCompute) {
      out += "\"op\":\"" + std::string(parallel::comm_op_name(task.comm)) + "\",\"bytes\":" +
             std::to_string(task.bytes.count()) + ",\"group_size\":" +
             std::to_string(g.communicators[static_cast<std::size_t>(task.communicator)].ranks.size());
    }
    out += "}}";
  }
  // Flow arrows from each pipeline send to the matching receive: the k-th send on a pair
  // communicator matches the k-th receive on it.
  {
    std::vector<std::vector<std::size_t>> sends(g.communicators.size()), recvs(g.communicators.size());
    for (std::size_t t = 0; t < g.tasks.size(); ++t) {
      const Task& task = g.tasks[t];
      if (task.kind != TaskKind::kP2p) continue;
      const auto c = static_cast<std::size_t>(task.communicator);
      const bool is_send = g.communicators[c].ranks[0] == g.devices[static_cast<std::size_t>(task.device)].rank;
      (is_send ? sends : recvs)[c].push_back(t);
    }
    std::size_t flow_id = 0;
    for (std::size_t c = 0; c < g.communicators.size(); ++c) {
      const std::size_t n = std::min(sends[c].size(), recvs[c].size());
      for (std::size_t k = 0; k < n; ++k, ++flow_id) {
        for (int end = 0; end < 2; ++end) {
          const std::size_t t = end == 0 ? sends[c][k] : recvs[c][k];
          const Task& task = g.tasks[t];
          begin_event();
          out += std::string("{\"ph\":\"") + (end == 0 ? "s" : "f") +
                 "\",\"name\":\"pipeline\",\"cat\":\"pipeline\",\"id\":" + std::to_string(flow_id) +
                 ",\"pid\":" + std::to_string(task.device) + ",\"tid\":" +
                 std::to_string(static_cast<int>(task.stream)) + ",\"ts\":";
          append_us(out, ex.timings[t].start.ps());
          out += end == 0 ? "}" : ",\"bp\":\"e\"}";
        }
      }
    }
  }
  // Memory counters (GiB in use: static footprint plus live activations).
  for (std::size_t d = 0; d < ex.memory.size(); ++d) {
    for (const auto& sample : ex.memory[d].timeline) {
      begin_event();
      out += "{\"ph\":\"C\",\"name\":\"memory\",\"pid\":" + std::to_string(d) + ",\"ts\":";
      append_us(out, sample.time.ps());
      out += ",\"args\":{\"GiB\":" +
             nlohmann::json((info.static_memory.at(d) + sample.dynamic).in_gib()).dump() + "}}";
    }
  }
  out += "\n]}\n";
  return out;
}

void write_chrome_trace(const std::filesystem::path& path, const parallel::TaskGraph& g,
                        const runtime::Execution& ex, const TraceInfo& info) {
  const std::string json = chrome_trace_json(g, ex, info);
  const std::filesystem::path tmp = path.string() + ".tmp";
  const bool gz = path.extension() == ".gz";
  bool ok = false;
  if (gz) {
    gzFile f = gzopen(tmp.c_str(), "wb6");
    if (f) {
      ok = gzwrite(f, json.data(), static_cast<unsigned>(json.size())) == static_cast<int>(json.size());
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
}

}  // namespace ts::trace
