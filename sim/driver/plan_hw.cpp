// Hardware sizing over GPU kinds, fabrics and cluster sizes, each size swept over every plan.
#include "sim/base/format.h"
#include "sim/driver/plan_hw.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "sim/base/diagnostic.h"
#include "sim/ir/model_graph.h"

namespace ts::driver {
namespace {

// Columns of a sweep row by name.
class RowReader {
 public:
  RowReader() {
    const auto cols = split_csv_line(sweep_csv_header());
    for (std::size_t i = 0; i < cols.size(); ++i) at_[cols[i]] = i;
  }
  std::vector<std::string> fields(const SweepRecord& r) const { return split_csv_line(r.line); }
  const std::string& get(const std::vector<std::string>& f, const char* col) const { return f[at_.at(col)]; }
  double num(const std::vector<std::string>& f, const char* col) const {
    const auto& s = get(f, col);
    return s.empty() ? 0.0 : std::stod(s);
  }

 private:
  std::map<std::string, std::size_t> at_;
};

// "tp8 pp4 dp64 vpp5 mb1 interleaved zero1 sp recompute=selective".
std::string plan_text(const RowReader& rr, const std::vector<std::string>& f) {
  std::string s = "tp" + rr.get(f, "tp") + " pp" + rr.get(f, "pp") + " dp" + rr.get(f, "dp");
  if (rr.get(f, "cp") != "1") s += " cp" + rr.get(f, "cp") + " " + rr.get(f, "cp_algo");
  if (rr.get(f, "vpp") != "1") s += " vpp" + rr.get(f, "vpp");
  s += " mb" + rr.get(f, "micro_batch") + " " + rr.get(f, "schedule") + " zero" + rr.get(f, "zero");
  if (rr.get(f, "sequence_parallel") == "true") s += " sp";
  if (rr.get(f, "recompute") != "none") s += " rc:" + rr.get(f, "recompute");
  if (rr.get(f, "mst_chunks") != "1") s += " mst" + rr.get(f, "mst_chunks");
  return s;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

}  // namespace

std::filesystem::path default_prices_path() { return config::data_dir() / "calibration" / "prices.csv"; }

std::vector<GpuOffer> load_prices(const std::filesystem::path& path) {
  std::ifstream in(path);
  if (!in) throw InputError(Diagnostic{path.string(), 0, "--prices", "cannot open the price table"});
  std::vector<GpuOffer> out;
  DiagnosticList problems;
  std::string line;
  int no = 0;
  bool header = false;
  while (std::getline(in, line)) {
    ++no;
    const std::string t = trim(line);
    if (t.empty() || t[0] == '#') continue;
    const auto f = split_csv_line(t);
    if (!header) {
      if (f != std::vector<std::string>{"kind", "cluster", "usd_per_gpu_hour", "basis", "source"}) {
        problems.add({path.string(), no, "", "the header must be kind,cluster,usd_per_gpu_hour,basis,source"});
        break;
      }
      header = true;
      continue;
    }
    if (f.size() != 5) {
      problems.add({path.string(), no, "", "has " + std::to_string(f.size()) + " columns, expected 5"});
      continue;
    }
    GpuOffer o{trim(f[0]), trim(f[1]), std::nullopt, trim(f[3]), trim(f[4])};
    if (o.kind.empty() || o.cluster.empty()) problems.add({path.string(), no, "kind", "kind and cluster are required"});
    const std::string price = trim(f[2]);
    if (!price.empty()) {
      char* end = nullptr;
      const double v = std::strtod(price.c_str(), &end);
      if (end != price.c_str() + price.size() || !(v > 0)) {
        problems.add({path.string(), no, "usd_per_gpu_hour", "must be a positive number or empty (got '" + price + "')"});
      } else {
        o.usd_per_gpu_hour = v;
      }
    }
    if (o.usd_per_gpu_hour && o.source.empty()) {
      problems.add({path.string(), no, "source", "a price needs its source"});
    }
    for (const auto& other : out) {
      if (other.kind == o.kind) problems.add({path.string(), no, "kind", "'" + o.kind + "' is listed twice"});
    }
    out.push_back(std::move(o));
  }
  if (!header && problems.empty()) problems.add({path.string(), 0, "", "no header line"});
  problems.throw_if_any();
  return out;
}

namespace {

std::vector<std::int64_t> powers_of_two_up_to(std::int64_t n) {
  std::vector<std::int64_t> out;
  for (std::int64_t v = 1; v <= n; v *= 2) out.push_back(v);
  return out;
}

}  // namespace

config::Cluster apply_fabric(config::Cluster c, const FabricOption& f) {
  if (f.nic_gbits) c.cluster.host.nic_bandwidth = Bandwidth::gbits_per_s(*f.nic_gbits);
  if (f.oversubscription) c.cluster.fabric.oversubscription = *f.oversubscription;
  if (f.nic_gbits || f.oversubscription) c.cluster.name += " @" + fabric_label(c);
  return c;
}

std::string fabric_label(const config::Cluster& c) {
  const auto& h = c.cluster.host;
  return format_double("%gG", h.nic_bandwidth.bytes_per_s() * 8e-9) + " x" +
         std::to_string(h.nics_per_host) + ", " +
         format_double("%g:1", c.cluster.fabric.oversubscription);
}

std::vector<SizingChoice> plan_hardware(const SizingSpec& spec,
                                        const std::function<void(const SizingProgress&)>& progress) {
  if (!(spec.tokens > 0)) throw InputError(Diagnostic{"", 0, "--tokens", "must be > 0"});
  if (!(spec.days > 0)) throw InputError(Diagnostic{"", 0, "--days", "must be > 0"});
  std::vector<std::int64_t> sizes = spec.cluster_sizes;
  std::sort(sizes.begin(), sizes.end());
  sizes.erase(std::unique(sizes.begin(), sizes.end()), sizes.end());
  if (sizes.empty() || sizes.front() <= 0) throw InputError(Diagnostic{"", 0, "--gpus", "needs positive GPU counts"});
  const std::vector<FabricOption> fabrics = spec.fabrics.empty() ? std::vector<FabricOption>{FabricOption{}} : spec.fabrics;

  // Model FLOPs of the whole training run (the MFU numerator, ir::model_flops).
  const double total_flops = ir::model_flops(spec.model, spec.base.seq_len, spec.tokens).value();
  const RowReader rr;
  auto cache = std::make_shared<config::ComputeModelCache>();
  std::vector<SizingChoice> out;
  for (const auto& offer : spec.offers) {
    const config::Cluster file_cluster = config::load_cluster(offer.cluster);
    for (const auto& fab : fabrics) {
      SizingChoice ch;
      ch.kind = offer.kind;
      ch.cluster = offer.cluster;
      ch.gpu = file_cluster.gpu.name;
      const config::Cluster cluster = apply_fabric(file_cluster, fab);
      ch.fabric = fabric_label(cluster);
      ch.gpus_per_node = cluster.cluster.host.gpus_per_host;
      ch.usd_per_gpu_hour = offer.usd_per_gpu_hour;
      ch.power_watts = cluster.gpu.power_watts;
      const double peak = cluster.gpu.peak(spec.base.dtype).per_s();
      for (const std::int64_t n : sizes) {
        SizeTrial trial;
        trial.num_gpus = n;
        const std::int64_t per_node = cluster.cluster.host.gpus_per_host;
        if (n > per_node && per_node > 0 && n % per_node != 0) {
          trial.outcome = "skipped: not whole nodes";
          ch.trials.push_back(trial);
          continue;
        }
        // Even at 100 % MFU these GPUs would need this many days.
        const double ideal_days = peak > 0 ? total_flops / (static_cast<double>(n) * peak) / 86400.0 : INFINITY;
        if (ideal_days > spec.days) {
          trial.outcome = "skipped: " + format_double("%.1f", ideal_days) + " days even at 100% MFU";
          ch.trials.push_back(trial);
          continue;
        }
        SweepSpec ss;
        ss.model = spec.model;
        ss.cluster = cluster;
        ss.num_gpus = n;
        ss.base = spec.base;
        ss.axes = spec.axes;
        if (spec.tp_within_domain)
          ss.axes.tp = powers_of_two_up_to(cluster.cluster.scale_up.placed_per_domain());
        SweepOptions so;
        so.threads = spec.threads;
        so.compute_cache = cache;
        if (progress) {
          so.progress = [&](const SweepProgress& p) { progress(SizingProgress{offer.kind, ch.fabric, n, p}); };
        }
        const SweepOutcome res = run_sweep(ss, so);
        trial.plans = res.stats.simulated;
        const auto top = top_records(res.records, 1);
        if (top.empty()) {
          trial.outcome = "no plan fits";
          ch.trials.push_back(trial);
          continue;
        }
        trial.best_tokens_per_s = top.front().tokens_per_s;
        trial.days = spec.tokens / trial.best_tokens_per_s / 86400.0;
        const bool meets = trial.days <= spec.days;
        trial.outcome = meets ? "meets the deadline" : "too slow";
        ch.trials.push_back(trial);
        if (!meets) continue;
        ch.found = true;
        ch.num_gpus = n;
        ch.best = top.front();
        const auto f = rr.fields(ch.best);
        ch.tokens_per_s = trial.best_tokens_per_s;
        ch.mfu = rr.num(f, "mfu");
        ch.peak_memory_gib = rr.num(f, "peak_memory_bytes") / 1073741824.0;
        ch.days = trial.days;
        ch.gpu_hours = static_cast<double>(n) * ch.days * 24.0;
        if (ch.usd_per_gpu_hour) {
          ch.cost_usd = ch.gpu_hours * *ch.usd_per_gpu_hour;
          if (spec.budget_usd) ch.within_budget = *ch.cost_usd <= *spec.budget_usd;
        }
        break;
      }
      out.push_back(std::move(ch));
    }
  }
  return out;
}

std::string sizing_table(const SizingSpec& spec, const std::vector<SizingChoice>& choices) {
  const RowReader rr;
  std::vector<std::vector<std::string>> t = {{"GPU", "fabric", "GPUs", "nodes", "best plan", "tokens/s", "MFU",
                                              "days", "GPU-hours", "$/GPU-h", "cost", "budget"}};
  for (const auto& c : choices) {
    if (!c.found) {
      t.push_back({c.kind + " (" + c.gpu + ")", c.fabric, "-", "-",
                   "no candidate size meets " + format_double("%g", spec.days) + " days", "-", "-", "-", "-",
                   c.usd_per_gpu_hour ? format_double("%.3f", *c.usd_per_gpu_hour) : "n/a", "-", "-"});
      continue;
    }
    const auto f = rr.fields(c.best);
    const std::int64_t nodes = c.gpus_per_node > 0 ? (c.num_gpus + c.gpus_per_node - 1) / c.gpus_per_node : 0;
    t.push_back({c.kind + " (" + c.gpu + ")", c.fabric, std::to_string(c.num_gpus), std::to_string(nodes),
                 plan_text(rr, f), format_double("%.3g", c.tokens_per_s), format_double("%.1f%%", 100 * c.mfu), format_double("%.1f", c.days),
                 format_double("%.3gM", c.gpu_hours * 1e-6), c.usd_per_gpu_hour ? format_double("%.3f", *c.usd_per_gpu_hour) : "n/a",
                 c.cost_usd ? "$" + format_double("%.1fM", *c.cost_usd * 1e-6) : "n/a",
                 c.within_budget ? (*c.within_budget ? "within" : "over") : "-"});
  }
  std::vector<std::size_t> w(t.front().size(), 0);
  for (const auto& row : t) {
    for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  }
  std::string s;
  for (const auto& row : t) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      const bool left = i <= 1 || i == 4 || i == 11;
      const std::string pad(w[i] - row[i].size(), ' ');
      s += left ? row[i] + pad : pad + row[i];
      s += i + 1 < row.size() ? "  " : "\n";
    }
  }
  return s;
}

std::string sizing_json(const SizingSpec& spec, const std::vector<SizingChoice>& choices) {
  using nlohmann::ordered_json;
  const RowReader rr;
  ordered_json j;
  j["model"] = spec.model.name;
  j["tokens"] = spec.tokens;
  j["days"] = spec.days;
  if (spec.budget_usd) j["budget_usd"] = *spec.budget_usd;
  j["global_batch"] = spec.base.global_batch;
  j["seq_len"] = spec.base.seq_len;
  ordered_json arr = ordered_json::array();
  for (const auto& c : choices) {
    ordered_json o;
    o["kind"] = c.kind;
    o["cluster"] = c.cluster;
    o["gpu"] = c.gpu;
    o["fabric"] = c.fabric;
    o["found"] = c.found;
    if (c.found) {
      const auto f = rr.fields(c.best);
      o["num_gpus"] = c.num_gpus;
      o["nodes"] = c.gpus_per_node > 0 ? (c.num_gpus + c.gpus_per_node - 1) / c.gpus_per_node : 0;
      ordered_json plan;
      for (const char* k : {"tp", "pp", "dp", "cp", "vpp", "micro_batch", "zero", "mst_chunks"}) {
        plan[k] = std::stoll(rr.get(f, k));
      }
      for (const char* k : {"schedule", "recompute", "cp_algo"}) plan[k] = rr.get(f, k);
      plan["sequence_parallel"] = rr.get(f, "sequence_parallel") == "true";
      o["plan"] = plan;
      o["tokens_per_s"] = c.tokens_per_s;
      o["mfu"] = c.mfu;
      o["iteration_time_s"] = rr.num(f, "iteration_time_s");
      o["peak_memory_bytes"] = static_cast<std::int64_t>(rr.num(f, "peak_memory_bytes"));
      o["training_days"] = c.days;
      o["gpu_hours"] = c.gpu_hours;
      // GPU board energy at full power (GPU-hours x TDP): CPUs, NICs, switches and cooling not
      // counted.
      o["gpu_energy_mwh"] = c.power_watts > 0 ? ordered_json(c.gpu_hours * c.power_watts * 1e-6)
                                              : ordered_json(nullptr);
    }
    o["gpu_power_watts"] = c.power_watts > 0 ? ordered_json(c.power_watts) : ordered_json(nullptr);
    o["usd_per_gpu_hour"] = c.usd_per_gpu_hour ? ordered_json(*c.usd_per_gpu_hour) : ordered_json(nullptr);
    o["cost_usd"] = c.cost_usd ? ordered_json(*c.cost_usd) : ordered_json(nullptr);
    if (spec.budget_usd) o["within_budget"] = c.within_budget ? ordered_json(*c.within_budget) : ordered_json(nullptr);
    ordered_json trials = ordered_json::array();
    for (const auto& tr : c.trials) {
      ordered_json x;
      x["num_gpus"] = tr.num_gpus;
      x["outcome"] = tr.outcome;
      x["plans_simulated"] = tr.plans;
      if (tr.best_tokens_per_s > 0) {
        x["best_tokens_per_s"] = tr.best_tokens_per_s;
        x["training_days"] = tr.days;
      }
      trials.push_back(x);
    }
    o["sizes_tried"] = trials;
    arr.push_back(o);
  }
  j["choices"] = arr;
  return j.dump(2) + "\n";
}

}  // namespace ts::driver
