// Validation reports: the per-row table and error statistics as text, JSON and CSV, written from
// one table of columns.
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "sim/config/names.h"
#include "sim/driver/csv.h"
#include "sim/driver/validate.h"
#include "sim/driver/validate_text.h"

namespace ts::driver {

using reading::str;

namespace {

using nlohmann::ordered_json;
using J = ordered_json;

const char* metric_name(Metric m) {
  switch (m) {
    case Metric::kIterationTime: return "iteration_time_s";
    case Metric::kTokensPerS: return "tokens_per_s";
    case Metric::kTokensPerSPerGpu: return "tokens_per_s_per_gpu";
    case Metric::kTflopsPerGpu: return "tflops_per_gpu";
    case Metric::kMfu: return "mfu_pct";
    case Metric::kHfu: return "hfu_pct";
    case Metric::kPeakMemory: return "peak_memory_bytes";
    case Metric::kMaxSeqLen: return "max_seq_len";
  }
  return "?";
}

#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
template <typename... T>
std::string fmt(const char* f, T... v) {
  char buf[512];
  std::snprintf(buf, sizeof buf, f, v...);
  return buf;
}
#pragma GCC diagnostic pop

std::string cut(const std::string& s, std::size_t n) {
  if (s.size() <= n) return s;
  return s.substr(0, n - 1) + "~";
}

// One column of the reports: its JSON key and CSV header, its text-table header and width
// (negative: left-aligned; no header: not in the text table), and its value as JSON, which the
// text table and the CSV write as text (cell below).
template <class T>
struct Column {
  const char* key;
  const char* header = nullptr;
  int width = 0;
  bool percent = false;  // the text table writes the value ×100 with a sign and '%'
  ordered_json (*value)(const T&) = nullptr;
};

// The columns that say which row a line is (every report), and those of a comparison (the
// throughput and the memory metric).
const Column<RowResult> kRowColumns[] = {
    {"run_id", "run", -6, false, [](const RowResult& r) { return J(r.run_id); }},
    {"line", nullptr, 0, false, [](const RowResult& r) { return J(r.line); }},
    {"source", "source", -26, false, [](const RowResult& r) { return J(r.source); }},
    {"model", "model", -18, false, [](const RowResult& r) { return J(r.model); }},
    {"gpu", "gpu", -15, false, [](const RowResult& r) { return J(r.gpu); }},
    {"num_gpus", "gpus", 5, false, [](const RowResult& r) { return J(r.num_gpus); }},
    {"parallelism", "kind", -9, false, [](const RowResult& r) { return J(r.parallelism); }},
    {"fp8", nullptr, 0, false, [](const RowResult& r) { return J(r.fp8); }},
    {"status", nullptr, 0, false, [](const RowResult& r) { return J(r.skipped ? "skipped" : "compared"); }},
};
const Column<Comparison> kComparisonColumns[] = {
    {"metric", "metric", -20, false, [](const Comparison& c) { return J(metric_name(c.metric)); }},
    {"predicted", "predicted", 12, false, [](const Comparison& c) { return J(c.predicted); }},
    {"measured", "measured", 12, false, [](const Comparison& c) { return J(c.measured); }},
    {"error", "error", 8, true, [](const Comparison& c) { return J(c.error); }},
};

// A value as a text-table cell `width` wide (negative: left-aligned), or as a CSV field (width 0).
std::string cell(const ordered_json& v, int width = 0, bool percent = false) {
  if (v.is_null()) return "";
  if (v.is_boolean()) return v.get<bool>() ? "yes" : "no";
  if (v.is_string()) {
    const auto& s = v.get_ref<const std::string&>();
    return width == 0 ? s : fmt("%*s", width, cut(s, static_cast<std::size_t>(std::abs(width))).c_str());
  }
  if (v.is_number_integer()) return fmt("%*lld", width, v.get<long long>());
  if (width == 0) return fmt("%.6g", v.get<double>());
  return percent ? fmt("%+*.1f%%", width - 1, 100 * v.get<double>()) : fmt("%*.5g", width, v.get<double>());
}

// The text table's header, or one line of it (the row's cells, then the comparison's).
std::string text_line(const RowResult* r, const Comparison* c) {
  std::string out;
  const auto add = [&](const auto& col, const auto* of) {
    if (col.header == nullptr) return;
    out += (out.empty() ? "" : " ") +
           (of ? cell(col.value(*of), col.width, col.percent) : fmt("%*s", col.width, col.header));
  };
  for (const auto& col : kRowColumns) add(col, r);
  for (const auto& col : kComparisonColumns) add(col, c);
  return out;
}

// A comparison's keys and values in a JSON object (null when absent).
void put(ordered_json& j, const std::optional<Comparison>& c) {
  for (const auto& col : kComparisonColumns) j[col.key] = c ? col.value(*c) : ordered_json(nullptr);
}

std::string plan_text(const config::Scenario& sc) {
  const auto& p = sc.plan;
  std::string out = "tp" + str(p.tp) + " pp" + str(p.pp) + " dp" + str(p.dp) + " cp" + str(p.cp);
  if (p.vpp > 1) out += " vpp" + str(p.vpp);
  out += " mb" + str(p.micro_batch) + " gb" + str(p.global_batch) + " seq" + str(p.seq_len);
  out += " zero" + std::to_string(p.zero_stage);
  if (p.zero_shard_group > 0) out += "/" + str(p.zero_shard_group);
  if (p.sequence_parallel) out += " sp";
  out += " rc=" + std::string(config::name(p.recompute));
  if (p.recompute_layers > 0) out += ":" + str(p.recompute_layers);
  if (p.recompute_modules != 0) out += "(" + config::recompute_modules_name(p.recompute_modules) + ")";
  out += " " + std::string(ir::dtype_name(p.dtype));
  if (p.optimizer_states == parallel::OptimizerStates::kBf16) out += " bf16-states";
  if (p.optimizer_states == parallel::OptimizerStates::kNone) out += " no-states";
  if (p.optimizer_states == parallel::OptimizerStates::kFp32Bf16Moments) out += " bf16-moments";
  return out;
}

ordered_json stats_json(const ErrorStats& s) {
  ordered_json j;
  j["n"] = s.n;
  j["median_abs_error"] = s.median_abs;
  j["p90_abs_error"] = s.p90_abs;
  j["mean_signed_error"] = s.mean_signed;
  j["max_abs_error"] = s.max_abs;
  return j;
}

ordered_json coverage_json(const std::map<std::string, Coverage>& m) {
  ordered_json j = ordered_json::object();
  for (const auto& [k, c] : m) {
    j[k] = {{"n", c.n}, {"coverage", c.coverage}, {"median_relative_width", c.median_relative_width}};
  }
  return j;
}

// The summary's coverage lines: calibrated intervals and the inputs' uncertainty alone, by set.
std::string interval_coverage_text(const ValidationSummary& s) {
  if (s.coverage.empty()) return "";
  std::string out =
      "\nPrediction intervals (share of measurements inside; median width over the prediction)\n";
  out += fmt("  %-44s %4s  %8s  %8s\n", "group", "n", "coverage", "width");
  for (const auto* m : {&s.coverage, &s.input_coverage}) {
    const char* what = m == &s.coverage ? "calibrated" : "inputs alone";
    for (const auto& [k, c] : *m) {
      out += fmt("  %-44s %4lld  %7.1f%%  %7.1f%%\n", (std::string(what) + ": " + k).c_str(),
                 static_cast<long long>(c.n), 100 * c.coverage, 100 * c.median_relative_width);
    }
  }
  return out;
}

std::string stats_line(const std::string& name, const ErrorStats& s) {
  return fmt("  %-44s %4lld  %7.1f%%  %7.1f%%  %+7.1f%%  %7.1f%%\n", cut(name, 44).c_str(),
             static_cast<long long>(s.n), 100 * s.median_abs, 100 * s.p90_abs, 100 * s.mean_signed,
             100 * s.max_abs);
}

}  // namespace

std::string validation_text(const ValidationReport& report) {
  // The interval column only when the rows have intervals (a report without them is unchanged).
  const bool intervals = !report.summary.coverage.empty();
  std::string out = text_line(nullptr, nullptr) + (intervals ? "  interval\n" : "\n");
  for (const auto& r : report.rows) {
    if (r.skipped) continue;
    for (const auto* c : {r.throughput ? &*r.throughput : nullptr, r.memory ? &*r.memory : nullptr}) {
      if (c == nullptr) continue;
      out += text_line(&r, c);
      const bool interval = intervals && c == &*r.throughput && r.interval;
      out += interval ? fmt("  [%.5g, %.5g]\n", r.interval->low, r.interval->high) : "\n";
    }
  }
  const auto& s = report.summary;
  out += fmt("\nSkipped: %lld of %lld rows\n", static_cast<long long>(s.skipped), static_cast<long long>(s.rows));
  for (const auto& r : report.rows) {
    if (r.skipped) out += "  run " + r.run_id + " (line " + std::to_string(r.line) + "): " + r.reason + "\n";
  }
  // Rows whose settings a per-row override changed (their reasons are in the assumptions).
  if (s.overridden > 0) {
    out += fmt("\nOverridden: %lld of %lld rows\n", static_cast<long long>(s.overridden),
               static_cast<long long>(s.rows));
    for (const auto& r : report.rows) {
      if (r.overrides > 0) out += "  run " + r.run_id + " (line " + std::to_string(r.line) + ")\n";
    }
  }
  bool notes = false;
  for (const auto& r : report.rows) {
    if (r.skipped || r.reason.empty()) continue;
    if (!notes) out += "\nNotes:\n";
    notes = true;
    out += "  run " + r.run_id + ": " + r.reason + "\n";
  }
  out += "\nThroughput error (predicted/measured - 1 as a rate; + means trainsim is optimistic)\n";
  out += fmt("  %-44s %4s  %8s  %8s  %8s  %8s\n", "group", "n", "median", "p90", "mean", "max");
  out += stats_line("all", s.throughput);
  // The public and held-out rows apart, when the report has held-out rows (a report of public
  // files alone is unchanged).
  if (s.by_set.count("held-out") != 0) {
    for (const auto& [k, v] : s.by_set) out += stats_line("set: " + k, v);
  }
  for (const auto& [k, v] : s.by_source) out += stats_line("source: " + k, v);
  for (const auto& [k, v] : s.by_gpu) out += stats_line("gpu: " + k, v);
  for (const auto& [k, v] : s.by_parallelism) out += stats_line("parallelism: " + k, v);
  out += "\nMemory error (peak memory, largest trainable sequence)\n";
  out += stats_line("all", s.memory);
  out += interval_coverage_text(s);
  return out;
}

std::string validation_json(const ValidationReport& report) {
  ordered_json rows = ordered_json::array();
  for (const auto& r : report.rows) {
    ordered_json j;
    for (const auto& col : kRowColumns) j[col.key] = col.value(r);
    j["reason"] = r.reason;
    put(j, r.throughput);
    j["flop_convention"] = r.convention;
    j["memory"] = nullptr;
    if (r.memory) put(j["memory"], r.memory);
    j["assumptions"] = r.assumptions;
    j["plan"] = nullptr;
    if (r.scenario) {
      const auto& p = r.scenario->plan;
      ordered_json plan;
      plan["cluster"] = r.scenario->cluster.cluster.name;
      plan["tp"] = p.tp;
      plan["pp"] = p.pp;
      plan["dp"] = p.dp;
      plan["cp"] = p.cp;
      plan["vpp"] = p.vpp;
      plan["micro_batch"] = p.micro_batch;
      plan["global_batch"] = p.global_batch;
      plan["seq_len"] = p.seq_len;
      plan["zero_stage"] = p.zero_stage;
      plan["sequence_parallel"] = p.sequence_parallel;
      plan["recompute"] = std::string(config::name(p.recompute));
      if (p.recompute_modules != 0) plan["recompute_modules"] = config::recompute_modules_name(p.recompute_modules);
      plan["dtype"] = ir::dtype_name(p.dtype);
      plan["schedule"] = std::string(config::name(p.schedule));
      plan["optimizer_states"] = std::string(config::name(p.optimizer_states));
      j["plan"] = plan;
    }
    j["simulated"] = nullptr;
    if (r.result) {
      const auto& res = *r.result;
      ordered_json tb;
      for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) {
        tb[std::string(runtime::time_category_name(static_cast<runtime::TimeCategory>(c))) + "_s"] =
            res.time.time[c].seconds();
      }
      j["simulated"] = {{"status", status_name(res.status)}, {"iteration_time_s", res.iteration_time_s},
                        {"tokens_per_s", res.tokens_per_s}, {"tflops_per_gpu", res.tflops_per_gpu},
                        {"mfu", res.mfu}, {"peak_memory_bytes", res.peak_memory.count()}, {"time_breakdown", tb}};
    }
    // The intervals only when asked for (a report without them is unchanged).
    if (!report.summary.coverage.empty()) {
      j["interval"] = r.interval ? ordered_json{r.interval->low, r.interval->high} : ordered_json(nullptr);
      j["input_interval"] =
          r.interval ? ordered_json{r.interval->input_low, r.interval->input_high} : ordered_json(nullptr);
    }
    rows.push_back(std::move(j));
  }
  const auto& s = report.summary;
  // The throughput statistics, with the row counts after their n.
  ordered_json sum = {{"n", s.throughput.n}, {"skipped", s.skipped}, {"rows", s.rows},
                      {"overridden", s.overridden}};
  sum.update(stats_json(s.throughput));
  const auto groups = [](const std::map<std::string, ErrorStats>& m) {
    ordered_json j = ordered_json::object();
    for (const auto& [k, v] : m) j[k] = stats_json(v);
    return j;
  };
  sum["by_source"] = groups(s.by_source);
  sum["by_gpu"] = groups(s.by_gpu);
  sum["by_parallelism"] = groups(s.by_parallelism);
  sum["by_set"] = groups(s.by_set);
  sum["memory"] = stats_json(s.memory);
  if (!s.coverage.empty()) {
    sum["interval_coverage"] = coverage_json(s.coverage);
    sum["input_interval_coverage"] = coverage_json(s.input_coverage);
  }
  ordered_json root;
  root["rows"] = std::move(rows);
  root["summary"] = std::move(sum);
  return root.dump(2) + "\n";
}

std::string validation_csv(const ValidationReport& report) {
  std::vector<std::string> header;
  for (const auto& col : kRowColumns) header.push_back(col.key);
  for (const char* prefix : {"", "memory_"}) {
    for (const auto& col : kComparisonColumns) header.push_back(prefix + std::string(col.key));
  }
  header.insert(header.end(), {"plan", "iteration_time_s", "reason", "assumptions", "flop_convention",
                               "interval_low", "interval_high"});
  std::string out = csv::line(header);
  for (const auto& r : report.rows) {
    std::vector<std::string> f;
    for (const auto& col : kRowColumns) f.push_back(cell(col.value(r)));
    for (const auto& c : {r.throughput, r.memory}) {
      for (const auto& col : kComparisonColumns) f.push_back(c ? cell(col.value(*c)) : "");
    }
    const bool timed = r.result && r.result->iteration_time_s > 0;
    f.insert(f.end(), {r.scenario ? plan_text(*r.scenario) : "", timed ? cell(r.result->iteration_time_s) : "",
                       r.reason, reading::join(r.assumptions, "; "), r.convention});
    f.push_back(r.interval ? cell(r.interval->low) : "");
    f.push_back(r.interval ? cell(r.interval->high) : "");
    out += csv::line(f);
  }
  return out;
}

}  // namespace ts::driver
