// Validation reports: the per-row table and error statistics as text, JSON and CSV.
#include <cstdio>
#include <nlohmann/json.hpp>

#include "sim/config/names.h"
#include "sim/driver/csv.h"
#include "sim/driver/validate.h"
#include "sim/driver/validate_text.h"

namespace ts::driver {

using reading::str;

// ---------------------------------------------------------------------------------------------
// Reports

namespace {

using nlohmann::ordered_json;

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

std::string join(const std::vector<std::string>& v, const char* sep) {
  std::string out;
  for (const auto& x : v) out += (out.empty() ? "" : sep) + x;
  return out;
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

ordered_json comparison_json(const std::optional<Comparison>& c) {
  if (!c) return nullptr;
  ordered_json j;
  j["metric"] = metric_name(c->metric);
  j["predicted"] = c->predicted;
  j["measured"] = c->measured;
  j["error"] = c->error;
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
  std::string out;
  // The interval column only when the rows have intervals (a report without them is unchanged).
  const bool intervals = !report.summary.coverage.empty();
  out += fmt("%-6s %-26s %-18s %-15s %5s %-9s %-20s %12s %12s %8s", "run", "source", "model", "gpu",
             "gpus", "kind", "metric", "predicted", "measured", "error");
  out += intervals ? "  interval\n" : "\n";
  for (const auto& r : report.rows) {
    if (r.skipped) continue;
    for (const auto* c : {r.throughput ? &*r.throughput : nullptr, r.memory ? &*r.memory : nullptr}) {
      if (c == nullptr) continue;
      out += fmt("%-6s %-26s %-18s %-15s %5lld %-9s %-20s %12.5g %12.5g %+7.1f%%\n", cut(r.run_id, 6).c_str(),
                 cut(r.source, 26).c_str(), cut(r.model, 18).c_str(), cut(r.gpu, 15).c_str(),
                 static_cast<long long>(r.num_gpus), r.parallelism.c_str(), metric_name(c->metric),
                 c->predicted, c->measured, 100 * c->error);
      if (intervals && c == &*r.throughput && r.interval) {
        out.pop_back();
        out += fmt("  [%.5g, %.5g]\n", r.interval->low, r.interval->high);
      }
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
    j["run_id"] = r.run_id;
    j["line"] = r.line;
    j["source"] = r.source;
    j["model"] = r.model;
    j["gpu"] = r.gpu;
    j["num_gpus"] = r.num_gpus;
    j["parallelism"] = r.parallelism;
    j["fp8"] = r.fp8;
    j["status"] = r.skipped ? "skipped" : "compared";
    j["reason"] = r.reason;
    const auto tp = comparison_json(r.throughput);
    j["metric"] = r.throughput ? tp["metric"] : ordered_json(nullptr);
    j["predicted"] = r.throughput ? tp["predicted"] : ordered_json(nullptr);
    j["measured"] = r.throughput ? tp["measured"] : ordered_json(nullptr);
    j["error"] = r.throughput ? tp["error"] : ordered_json(nullptr);
    j["flop_convention"] = r.convention;
    j["memory"] = comparison_json(r.memory);
    j["assumptions"] = r.assumptions;
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
    } else {
      j["plan"] = nullptr;
    }
    if (r.result) {
      const auto& res = *r.result;
      ordered_json sim;
      sim["status"] = status_name(res.status);
      sim["iteration_time_s"] = res.iteration_time_s;
      sim["tokens_per_s"] = res.tokens_per_s;
      sim["tflops_per_gpu"] = res.tflops_per_gpu;
      sim["mfu"] = res.mfu;
      sim["peak_memory_bytes"] = res.peak_memory.count();
      ordered_json tb;
      for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) {
        tb[std::string(runtime::time_category_name(static_cast<runtime::TimeCategory>(c))) + "_s"] =
            res.time.time[c].seconds();
      }
      sim["time_breakdown"] = tb;
      j["simulated"] = sim;
    } else {
      j["simulated"] = nullptr;
    }
    if (report.summary.coverage.empty()) {
      // no intervals asked for: the row is unchanged
    } else if (r.interval) {
      j["interval"] = {r.interval->low, r.interval->high};
      j["input_interval"] = {r.interval->input_low, r.interval->input_high};
    } else {
      j["interval"] = nullptr;
      j["input_interval"] = nullptr;
    }
    rows.push_back(std::move(j));
  }
  const auto& s = report.summary;
  ordered_json sum;
  sum["n"] = s.throughput.n;
  sum["skipped"] = s.skipped;
  sum["rows"] = s.rows;
  sum["overridden"] = s.overridden;
  sum["median_abs_error"] = s.throughput.median_abs;
  sum["p90_abs_error"] = s.throughput.p90_abs;
  sum["mean_signed_error"] = s.throughput.mean_signed;
  sum["max_abs_error"] = s.throughput.max_abs;
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
  std::string out = csv::line({"run_id", "line", "source", "model", "gpu", "num_gpus", "parallelism", "fp8",
                               "status", "metric", "predicted", "measured", "error", "memory_metric",
                               "memory_predicted", "memory_measured", "memory_error", "plan",
                               "iteration_time_s", "reason", "assumptions", "flop_convention",
                               "interval_low", "interval_high"});
  const auto num = [](double v) { return fmt("%.6g", v); };
  for (const auto& r : report.rows) {
    std::vector<std::string> f = {r.run_id, std::to_string(r.line), r.source, r.model, r.gpu,
                                  std::to_string(r.num_gpus), r.parallelism, r.fp8 ? "yes" : "no",
                                  r.skipped ? "skipped" : "compared"};
    for (const auto& c : {r.throughput, r.memory}) {
      if (c) {
        f.insert(f.end(), {metric_name(c->metric), num(c->predicted), num(c->measured), num(c->error)});
      } else {
        f.insert(f.end(), {"", "", "", ""});
      }
    }
    f.push_back(r.scenario ? plan_text(*r.scenario) : "");
    f.push_back(r.result && r.result->iteration_time_s > 0 ? num(r.result->iteration_time_s) : "");
    f.push_back(r.reason);
    f.push_back(join(r.assumptions, "; "));
    f.push_back(r.convention);
    f.push_back(r.interval ? num(r.interval->low) : "");
    f.push_back(r.interval ? num(r.interval->high) : "");
    out += csv::line(f);
  }
  return out;
}


}  // namespace ts::driver
