// The Chrome trace of a small pipeline replay is valid Trace Event Format.
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <tuple>
#include <nlohmann/json.hpp>

#include "sim/base/diagnostic.h"
#include "sim/parallel/lowering.h"
#include "sim/runtime/executor.h"
#include "sim/trace/chrome_trace.h"

using namespace ts;

namespace {

compute::GpuSpec gpu() {
  compute::GpuSpec g;
  g.name = "test-gpu";
  g.peak_bf16 = FlopRate::tflops(1000);
  g.memory_bandwidth = Bandwidth::gbytes_per_s(3000);
  g.matmul_efficiency = 0.7;
  g.memory_efficiency = 0.9;
  g.kernel_launch_overhead = Duration::from_us(4);
  return g;
}

struct Run {
  parallel::TaskGraph graph;
  runtime::Execution execution;
};

Run run() {
  ir::ModelSpec m;
  m.name = "tiny";
  m.num_layers = 4;
  m.hidden = 1024;
  m.num_heads = 8;
  m.num_kv_heads = 8;
  m.ffn_hidden = 4096;
  m.vocab = 32000;
  m.max_seq_len = 1024;
  parallel::ParallelPlan p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.global_batch = 8;
  p.seq_len = 1024;
  parallel::LoweringOptions lo;
  lo.layer_kept = Bytes(1 << 20);
  lo.optimizer_bytes_per_param = Bytes(30);
  topology::ClusterSpec c;
  c.name = "test";
  c.node.gpus_per_node = 8;
  c.node.nvlink_bandwidth = Bandwidth::gbytes_per_s(300);
  c.node.nic_bandwidth = Bandwidth::gbits_per_s(200);
  const topology::Topology topo(c, 8);
  const network::NetworkModel net(topo);
  const auto cm = compute::make_roofline_model(gpu());
  Run r{parallel::lower(m, p, lo), {}};
  runtime::ExecuteOptions eo;
  eo.memory_timeline = true;
  r.execution = runtime::execute(r.graph, parallel::Layout(p), *cm, net, eo);
  return r;
}

}  // namespace

TEST_CASE("trace events are well formed and nest per thread") {
  const Run r = run();
  trace::TraceInfo info;
  info.static_memory.assign(r.graph.devices.size(), Bytes::gib(1));
  info.metadata = {{"scenario", "tiny \"quoted\""}};
  const auto j = nlohmann::json::parse(trace::chrome_trace_json(r.graph, r.execution, info));
  REQUIRE(j.contains("traceEvents"));
  CHECK(j["otherData"]["scenario"] == "tiny \"quoted\"");
  std::map<std::pair<int, int>, std::vector<std::pair<double, double>>> slices;
  std::map<long, int> flow_ends;
  int processes = 0, counters = 0;
  for (const auto& e : j["traceEvents"]) {
    const std::string ph = e["ph"];
    if (ph == "M" && e["name"] == "process_name") ++processes;
    if (ph == "X") {
      const double ts = e["ts"], dur = e["dur"];
      CHECK(ts >= 0);
      CHECK(dur >= 0);
      slices[{e["pid"], e["tid"]}].push_back({ts, ts + dur});
    }
    if (ph == "s") flow_ends[e["id"]] += 1;
    if (ph == "f") flow_ends[e["id"]] += 10;
    if (ph == "C") ++counters;
  }
  CHECK(processes == static_cast<int>(r.graph.devices.size()));
  CHECK(counters > 0);
  // Streams run one task at a time: slices of one thread never overlap.
  for (auto& [key, v] : slices) {
    std::sort(v.begin(), v.end());
    for (std::size_t i = 1; i < v.size(); ++i) CHECK(v[i].first >= v[i - 1].second - 1e-9);
  }
  // Every flow has exactly one start and one finish; one per pipeline send (2 stages: m forward
  // sends and m backward sends).
  CHECK(flow_ends.size() == 2 * 4);
  for (const auto& [id, ends] : flow_ends) CHECK(ends == 11);
}

TEST_CASE("a trace that cannot be written is an input error and leaves nothing behind") {
  const Run r = run();
  trace::TraceInfo info;
  info.static_memory.assign(r.graph.devices.size(), Bytes());
  CHECK_THROWS_AS(trace::write_chrome_trace("/nonexistent-dir/x.json", r.graph, r.execution, info), InputError);
}

TEST_CASE("slices are written in time order and pipeline arrows cross devices forward in time") {
  const Run r = run();
  const auto j =
      nlohmann::json::parse(trace::chrome_trace_json(r.graph, r.execution, trace::TraceInfo{}));
  double last = -1;
  std::map<std::tuple<int, int, double>, std::string> slice_at;  // (pid, tid, ts) -> name
  std::map<long, std::vector<nlohmann::json>> flows;
  for (const auto& e : j["traceEvents"]) {
    if (e["ph"] == "X") {
      CHECK(e["ts"].get<double>() >= last);
      last = e["ts"];
      slice_at.emplace(std::make_tuple(e["pid"].get<int>(), e["tid"].get<int>(), e["ts"].get<double>()),
                       e["name"]);
    }
    if (e["ph"] == "s" || e["ph"] == "t" || e["ph"] == "f") flows[e["id"]].push_back(e);
  }
  REQUIRE(flows.size() == 8);
  for (const auto& [id, f] : flows) {
    REQUIRE(f.size() >= 2);
    // Starts on a send, ends on another device at a later time (the slice waiting for the data).
    const auto first = slice_at.find({f.front()["pid"], f.front()["tid"], f.front()["ts"]});
    REQUIRE(first != slice_at.end());
    CHECK(first->second.rfind("send ", 0) == 0);
    CHECK(f.back()["pid"] != f.front()["pid"]);
    CHECK(f.back()["ts"].get<double>() > f.front()["ts"].get<double>());
    for (const auto& e : f) CHECK(slice_at.count({e["pid"], e["tid"], e["ts"]}) == 1);
  }
}

TEST_CASE("a rank selection (--trace-devices) writes only those simulated devices") {
  const Run r = run();
  REQUIRE(r.graph.devices.size() == 2);  // one device per pipeline stage
  trace::TraceInfo info;
  info.ranks = {r.graph.devices[1].rank};
  trace::TraceSize size;
  const std::string json = trace::chrome_trace_json(r.graph, r.execution, info, &size);
  const auto j = nlohmann::json::parse(json);
  std::set<int> pids;
  for (const auto& e : j["traceEvents"]) pids.insert(e["pid"].get<int>());
  CHECK(pids == std::set<int>{r.graph.devices[1].rank});
  CHECK(size.devices_written == 1);
  CHECK(size.devices_simulated == 2);
  CHECK(size.flows == 0);  // arrows need both ends written
  CHECK(size.json_bytes == static_cast<std::int64_t>(json.size()));
  CHECK(size.events == static_cast<std::int64_t>(j["traceEvents"].size()));
  const std::string text = trace::describe_trace_size("t.json", size);
  CHECK(text.find("1 of 2 simulated devices") != std::string::npos);
  // A rank that exists but is not simulated selects nothing: an input error naming the flag.
  info.ranks = {1};
  CHECK_THROWS_AS(trace::chrome_trace_json(r.graph, r.execution, info), InputError);
}

TEST_CASE("rank lists of the trace device selection") {
  CHECK(trace::parse_rank_list("0-3,8,2", 16, "--trace-devices") ==
        std::vector<std::int32_t>{0, 1, 2, 3, 8});
  CHECK(trace::parse_rank_list("15", 16, "--trace-devices") == std::vector<std::int32_t>{15});
  for (const char* bad : {"16", "3-1", "x", "", "1,,2", "-1", "0-16"}) {
    CHECK_THROWS_AS(trace::parse_rank_list(bad, 16, "--trace-devices"), InputError);
  }
}
