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
#include "tests/unit/trace/tiny_replay.h"

using namespace ts;

TEST_CASE("trace events are well formed and nest per thread") {
  const test::TinyReplay r = test::tiny_replay();
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
  const test::TinyReplay r = test::tiny_replay();
  trace::TraceInfo info;
  info.static_memory.assign(r.graph.devices.size(), Bytes());
  CHECK_THROWS_AS(trace::write_chrome_trace("/nonexistent-dir/x.json", r.graph, r.execution, info), InputError);
}

TEST_CASE("slices are written in time order and pipeline arrows cross devices forward in time") {
  const test::TinyReplay r = test::tiny_replay();
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
  const test::TinyReplay r = test::tiny_replay();
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
