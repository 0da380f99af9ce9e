// Hardware sizing over GPU kinds, fabrics and cluster sizes, each size swept over every plan.
#include "sim/base/format.h"
#include "sim/driver/plan_hw.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

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
  // The layers per pipeline stage of a balanced split ("" for an even one): the column after the
  // reason, which sweeps with balanced splits add.
  std::string pp_layers(const std::vector<std::string>& f) const {
    return f.size() > at_.size() ? f.back() : "";
  }
  const std::string& get(const std::vector<std::string>& f, const char* col) const { return f[at_.at(col)]; }
  double num(const std::vector<std::string>& f, const char* col) const {
    const auto& s = get(f, col);
    return s.empty() ? 0.0 : std::stod(s);
  }

 private:
  std::map<std::string, std::size_t> at_;
};

// Tokens of a batch: "8Mi" or "64Ki" where a whole number of them (2^20, 2^10), else "%.3g".
std::string tokens_text(double tokens) {
  const double mi = tokens / 1048576.0, ki = tokens / 1024.0;
  if (mi >= 1 && mi == std::floor(mi)) return format_double("%.0fMi", mi);
  if (ki >= 1 && ki == std::floor(ki)) return format_double("%.0fKi", ki);
  return format_double("%.3g", tokens);
}

// "tp8 pp4 [19,20x2,21] dp64 vpp5 mb1 interleaved zero1 sp rc:selective" (and "ep8" for an MoE plan).
std::string plan_text(const RowReader& rr, const std::vector<std::string>& f) {
  std::string s = "tp" + rr.get(f, "tp") + " pp" + rr.get(f, "pp");
  if (const std::string split = rr.pp_layers(f); !split.empty())
    s += " [" + fold_layer_counts(split) + "]";
  s += " dp" + rr.get(f, "dp");
  if (rr.get(f, "cp") != "1") s += " cp" + rr.get(f, "cp") + " " + rr.get(f, "cp_algo");
  if (rr.get(f, "vpp") != "1") s += " vpp" + rr.get(f, "vpp");
  s += " mb" + rr.get(f, "micro_batch") + " " + rr.get(f, "schedule") + " zero" + rr.get(f, "zero");
  // Sequence parallelism shards activations over the tensor-parallel ranks: nothing to say at tp 1.
  if (rr.get(f, "sequence_parallel") == "true" && rr.get(f, "tp") != "1") s += " sp";
  if (rr.get(f, "recompute") != "none") s += " rc:" + rr.get(f, "recompute");
  if (rr.get(f, "mst_chunks") != "1") s += " mst" + rr.get(f, "mst_chunks");
  if (rr.get(f, "ep") != "1") s += " ep" + rr.get(f, "ep");
  if (rr.get(f, "etp") != "1") s += " etp" + rr.get(f, "etp");
  return s;
}

// Why a swept size has no plan that runs: no valid combination (the rule most of them break),
// or valid plans none of which fits in memory or is supported.
std::string no_plan_verdict(const RowReader& rr, const SweepOutcome& res) {
  const auto& en = res.enumeration;
  if (en.plans.empty()) {
    if (en.reasons.empty()) return "no valid plan: no combination of the axes";
    const auto& top = en.reasons.front();
    return "no valid plan: " + std::to_string(en.combinations) + " combinations, " +
           std::to_string(top.count) + " break '" + top.rule + "' (e.g. " + top.example + ")";
  }
  std::int64_t oom = 0, unsupported = 0, other = 0;
  double least_peak = 0, capacity = 0;
  std::string unsupported_reason;
  for (const auto& r : res.records) {
    const auto f = rr.fields(r);
    if (r.status == "oom") {
      ++oom;
      const double peak = rr.num(f, "peak_memory_bytes");
      if (least_peak == 0 || peak < least_peak) least_peak = peak;
      capacity = rr.num(f, "memory_capacity_bytes");
    } else if (r.status == "unsupported") {
      ++unsupported;
      if (unsupported_reason.empty()) unsupported_reason = rr.get(f, "reason");
    } else {
      ++other;
    }
  }
  std::string s = "no plan fits: " + std::to_string(en.plans.size()) + " valid plans";
  if (oom > 0) {
    s += ", " + std::to_string(oom) + " out of memory (least peak " +
         format_double("%.1f", least_peak / 1073741824.0) + " GiB of " +
         format_double("%.1f", capacity / 1073741824.0) + " GiB)";
  }
  if (unsupported > 0)
    s += ", " + std::to_string(unsupported) + " unsupported (" + unsupported_reason + ")";
  if (other > 0) s += ", " + std::to_string(other) + " failed";
  return s;
}

// "1536 (12Mi)": sequences and tokens of a row's global batch.
std::string batch_text(const RowReader& rr, const std::vector<std::string>& f,
                       std::int64_t seq_len) {
  const std::string gb = rr.get(f, "global_batch");
  return gb + " (" + tokens_text(std::stod(gb) * static_cast<double>(seq_len)) + ")";
}

// An upper bound on a plan's tokens/s: every GPU at the dense peak of the plan's dtype on an
// equal share of the iteration's model FLOPs (ir::model_flops; recompute only adds to them),
// stretched by the pipeline bubble of m micro-batches over pp stages, (m + pp − 1)/m, or
// (m + (pp − 1)/v)/m with v model chunks per rank interleaved (Narayanan et al. SC'21, §2.2).
// Communication, kernel efficiency and unequal stages only lengthen an iteration.
double tokens_per_s_bound(const SweepSpec& spec, const parallel::ParallelPlan& p) {
  const double peak = spec.cluster.gpu.peak(p.dtype).per_s();
  const double tokens = static_cast<double>(p.global_batch) * static_cast<double>(p.seq_len);
  const double flops = ir::model_flops(spec.model, p.seq_len, tokens).value();
  const double m = static_cast<double>(std::max<std::int64_t>(1, p.num_micro_batches()));
  const double fill = static_cast<double>(p.pp - 1) / static_cast<double>(p.model_chunks());
  const double seconds = flops / (static_cast<double>(spec.num_gpus) * peak) * (m + fill) / m;
  return seconds > 0 ? tokens / seconds : INFINITY;
}

// The best plans of `spec` without simulating those that cannot beat them, or cannot reach
// `needed_tokens_per_s` (0: any rate). Two rules, each exact for the best plan's throughput:
// - recompute adds work and saves only memory, so the recompute modes are tried in ascending
//   order of the work they add (none, selective, selective-op, full; parallel::Recompute), and
//   a mapping only with a mode while it did not fit with any cheaper one;
// - within a mode, plans are simulated from the highest tokens_per_s_bound down: a quarter of
//   them first, then those of the rest whose bound is above both the best rate found so far
//   and `needed_tokens_per_s`.
// The records of every plan simulated, with the enumeration; `stats.simulated` counts them all.
SweepOutcome search_plans(const SweepSpec& spec, const SweepOptions& options,
                          double needed_tokens_per_s) {
  SweepOutcome all;
  all.enumeration = enumerate_plans(spec);
  const auto& plans = all.enumeration.plans;
  std::vector<double> bound(plans.size());
  for (std::size_t i = 0; i < plans.size(); ++i) bound[i] = tokens_per_s_bound(spec, plans[i]);
  auto modes = spec.axes.recompute;
  std::sort(modes.begin(), modes.end());
  modes.erase(std::unique(modes.begin(), modes.end()), modes.end());
  // The mapping without its recompute mode.
  const auto mapping = [&](parallel::ParallelPlan p) {
    p.recompute = parallel::Recompute::kNone;
    std::string key = sweep_plan_key(spec, p);
    for (auto n : p.pp_layers) key += "," + std::to_string(n);
    key += p.pp_layout;
    return key;
  };
  std::set<std::string> fits;
  double best = 0;
  const auto run = [&](const std::vector<char>& chosen) {
    SweepOptions o = options;
    o.select = [&](std::int64_t id) { return chosen[static_cast<std::size_t>(id)] != 0; };
    SweepOutcome r = run_sweep(spec, o);
    all.stats.simulated += r.stats.simulated;
    for (auto& rec : r.records) {
      if (rec.status == "ok") {
        fits.insert(mapping(plans[static_cast<std::size_t>(rec.plan_id)]));
        best = std::max(best, rec.tokens_per_s);
      }
      all.records.push_back(std::move(rec));
    }
  };
  for (const auto mode : modes) {
    std::vector<std::size_t> ids;
    for (std::size_t i = 0; i < plans.size(); ++i) {
      if (plans[i].recompute == mode && !fits.count(mapping(plans[i]))) ids.push_back(i);
    }
    std::stable_sort(ids.begin(), ids.end(),
                     [&](std::size_t a, std::size_t b) { return bound[a] > bound[b]; });
    const std::size_t first = std::min(ids.size(), std::max<std::size_t>(8, (ids.size() + 3) / 4));
    std::vector<char> chosen(plans.size(), 0);
    for (std::size_t k = 0; k < first; ++k) chosen[ids[k]] = bound[ids[k]] > needed_tokens_per_s;
    run(chosen);
    std::fill(chosen.begin(), chosen.end(), 0);
    bool any = false;
    for (std::size_t k = first; k < ids.size(); ++k) {
      chosen[ids[k]] = bound[ids[k]] > std::max(best, needed_tokens_per_s);
      any = any || chosen[ids[k]] != 0;
    }
    if (any) run(chosen);
  }
  // Plan order, as a sweep's records.
  std::stable_sort(
      all.records.begin(), all.records.end(),
      [](const SweepRecord& a, const SweepRecord& b) { return a.plan_id < b.plan_id; });
  return all;
}

std::string trim(std::string s) {
  while (!s.empty() && (s.back() == ' ' || s.back() == '\r')) s.pop_back();
  std::size_t i = 0;
  while (i < s.size() && s[i] == ' ') ++i;
  return s.substr(i);
}

}  // namespace

std::vector<std::int64_t> batch_choices(double min_tokens, double max_tokens,
                                        std::int64_t seq_len) {
  std::vector<std::int64_t> out;
  if (seq_len <= 0 || !(min_tokens <= max_tokens)) return out;
  const double seq = static_cast<double>(seq_len);
  for (std::int64_t p = 1;
       static_cast<double>(p) * seq <= max_tokens && p < (std::int64_t{1} << 50); p *= 2) {
    for (const std::int64_t b : {p, 3 * p}) {
      const double tokens = static_cast<double>(b) * seq;
      if (tokens >= min_tokens && tokens <= max_tokens) out.push_back(b);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

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

const char* placement_name(Placement p) {
  switch (p) {
    case Placement::kFill:
      return "fill";
    case Placement::kSegment:
      return "segment";
  }
  return "?";
}

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
      ch.gpus_per_domain = cluster.cluster.scale_up.gpus_per_domain;
      ch.usd_per_gpu_hour = offer.usd_per_gpu_hour;
      ch.power_watts = cluster.gpu.power_watts;
      // No size can help a GPU without tensor cores for the dtype (A100 and fp8).
      ch.unsupported = config::dtype_problem(spec.base.dtype, cluster.gpu);
      if (!ch.unsupported.empty()) {
        out.push_back(std::move(ch));
        continue;
      }
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
        const double ideal_days = total_flops / (static_cast<double>(n) * peak) / 86400.0;
        if (ideal_days > spec.days) {
          trial.outcome = "skipped: " + format_double("%.1f", ideal_days) + " days even at 100% MFU";
          ch.trials.push_back(trial);
          continue;
        }
        config::Cluster placed = cluster;
        if (spec.placement == Placement::kSegment) config::place_in_segments(placed.cluster, n);
        trial.gpus_per_domain = placed.cluster.scale_up.placed_per_domain();
        SweepSpec ss;
        ss.model = spec.model;
        ss.cluster = placed;
        ss.num_gpus = n;
        ss.base = spec.base;
        ss.axes = spec.axes;
        // One batch: pinned. Several: each mapping at the largest it divides.
        if (spec.batch_choices.size() > 1) ss.axes.batch_choices = spec.batch_choices;
        if (spec.batch_choices.size() == 1) ss.base.global_batch = spec.batch_choices.front();
        if (spec.tp_within_domain)
          ss.axes.tp = powers_of_two_up_to(placed.cluster.scale_up.placed_per_domain());
        SweepOptions so;
        so.threads = spec.threads;
        so.compute_cache = cache;
        // Every sweep of this size (recompute modes, batches) reuses the workers' topologies.
        so.resource_pool = std::make_shared<ResourcePool>(cache);
        if (progress) {
          so.progress = [&](const SweepProgress& p) { progress(SizingProgress{offer.kind, ch.fabric, n, p}); };
        }
        const SweepOutcome res = search_plans(ss, so, 0.0);
        trial.plans = res.stats.simulated;
        const auto ranked = top_records(res.records, 0);
        if (ranked.empty()) {
          trial.outcome = no_plan_verdict(rr, res);
          ch.trials.push_back(trial);
          continue;
        }
        // The quickest plan by wall-clock time to the tokens, interruptions and stragglers
        // included.
        TrainSettings ts = spec.train;
        ts.days.reset();
        ts.tokens = spec.tokens;
        ts.usd_per_gpu_hour = offer.usd_per_gpu_hour;
        QuickestPlan q = quickest_plan(spec, placed, n, ranked, ts);
        const auto meets_deadline = [&](const QuickestPlan& p) {
          return p.train.feasible && p.train.wall_days <= spec.days;
        };
        // The ideal rate that meets the deadline (a lower bound on the rate needed once
        // interruptions count): smaller batches need only say whether they reach it.
        const double needed = spec.tokens / (spec.days * 86400.0);
        if (meets_deadline(q) && spec.batch_choices.size() > 1) {
          // Smaller batches, from the next smaller one down, while the deadline is still met.
          const std::int64_t fastest_batch = std::stoll(rr.get(rr.fields(q.record), "global_batch"));
          for (auto it = spec.batch_choices.rbegin(); it != spec.batch_choices.rend(); ++it) {
            if (*it >= fastest_batch) continue;
            SweepSpec smaller = ss;
            smaller.axes.batch_choices.clear();
            smaller.base.global_batch = *it;
            const SweepOutcome r = search_plans(smaller, so, needed);
            trial.plans += r.stats.simulated;
            const auto t = top_records(r.records, 0);
            if (t.empty()) break;
            const QuickestPlan qs = quickest_plan(spec, placed, n, t, ts);
            if (!meets_deadline(qs)) break;
            q = qs;
          }
        }
        trial.best = q.record;
        trial.train = q.train;
        trial.best_tokens_per_s = q.record.tokens_per_s;
        trial.global_batch = std::stoll(rr.get(rr.fields(q.record), "global_batch"));
        trial.ideal_days = spec.tokens / trial.best_tokens_per_s / 86400.0;
        trial.days = q.train.feasible ? q.train.wall_days : INFINITY;
        const bool meets = meets_deadline(q);
        trial.outcome = meets              ? "meets the deadline"
                        : q.train.feasible ? "too slow"
                                           : "too slow: " + q.train.reason;
        ch.trials.push_back(trial);
        if (!meets || ch.found) continue;  // past the chosen size: only with spec.all_sizes
        ch.found = true;
        ch.num_gpus = n;
        ch.best = q.record;
        ch.train = q.train;
        const auto f = rr.fields(ch.best);
        ch.tokens_per_s = trial.best_tokens_per_s;
        ch.mfu = rr.num(f, "mfu");
        ch.peak_memory_gib = rr.num(f, "peak_memory_bytes") / 1073741824.0;
        ch.days = trial.days;
        ch.ideal_days = trial.ideal_days;
        ch.gpu_hours = ch.train.gpu_hours;
        if (ch.usd_per_gpu_hour) {
          ch.cost_usd = ch.gpu_hours * *ch.usd_per_gpu_hour;
          if (spec.budget_usd) ch.within_budget = *ch.cost_usd <= *spec.budget_usd;
        }
        if (!spec.all_sizes) break;
      }
      out.push_back(std::move(ch));
    }
  }
  return out;
}

std::string sizing_table(const SizingSpec& spec, const std::vector<SizingChoice>& choices) {
  const RowReader rr;
  std::vector<std::vector<std::string>> t = {{"GPU", "fabric", "GPUs", "nodes", "best plan",
                                              "batch", "tokens/s", "MFU", "days", "goodput",
                                              "MWh", "GPU-hours", "$/GPU-h", "cost", "budget"}};
  for (const auto& c : choices) {
    if (!c.found) {
      t.push_back({c.kind + " (" + c.gpu + ")", c.fabric, "-", "-",
                   c.unsupported.empty() ? "no candidate size meets " + format_double("%g", spec.days) + " days"
                                         : c.unsupported,
                   "-", "-",
                   "-", "-", "-", "-", "-",
                   c.usd_per_gpu_hour ? format_double("%.3f", *c.usd_per_gpu_hour) : "n/a", "-",
                   "-"});
      continue;
    }
    const auto f = rr.fields(c.best);
    const std::int64_t nodes = c.gpus_per_node > 0 ? (c.num_gpus + c.gpus_per_node - 1) / c.gpus_per_node : 0;
    t.push_back({c.kind + " (" + c.gpu + ")", c.fabric, std::to_string(c.num_gpus),
                 std::to_string(nodes), plan_text(rr, f), batch_text(rr, f, spec.base.seq_len),
                 format_double("%.3g", c.tokens_per_s), format_double("%.1f%%", 100 * c.mfu),
                 format_double("%.1f", c.days), format_double("%.1f%%", 100 * c.train.wall.goodput),
                 c.train.energy_known ? format_double("%.4g", c.train.energy_mwh) : "n/a",
                 format_double("%.3gM", c.gpu_hours * 1e-6),
                 c.usd_per_gpu_hour ? format_double("%.3f", *c.usd_per_gpu_hour) : "n/a",
                 c.cost_usd ? "$" + format_double("%.3gM", *c.cost_usd * 1e-6) : "n/a",
                 c.within_budget ? (*c.within_budget ? "within" : "over") : "-"});
  }
  std::vector<std::size_t> w(t.front().size(), 0);
  for (const auto& row : t) {
    for (std::size_t i = 0; i < row.size(); ++i) w[i] = std::max(w[i], row[i].size());
  }
  std::string s;
  for (const auto& row : t) {
    for (std::size_t i = 0; i < row.size(); ++i) {
      const bool left = i <= 1 || i == 4 || i == 14;
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
  // A pinned batch, or null and the choices tried at each size.
  j["global_batch"] =
      spec.batch_choices.size() > 1 ? ordered_json(nullptr) : ordered_json(spec.base.global_batch);
  j["batch_choices"] = spec.batch_choices.size() > 1
                           ? spec.batch_choices
                           : std::vector<std::int64_t>{spec.base.global_batch};
  j["seq_len"] = spec.base.seq_len;
  ordered_json arr = ordered_json::array();
  for (const auto& c : choices) {
    ordered_json o;
    o["kind"] = c.kind;
    o["cluster"] = c.cluster;
    o["gpu"] = c.gpu;
    o["fabric"] = c.fabric;
    o["found"] = c.found;
    if (!c.unsupported.empty()) o["unsupported"] = c.unsupported;
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
      std::vector<std::int64_t> layers;  // empty: an even split
      if (const std::string split = rr.pp_layers(f); !split.empty()) {
        for (const auto& x : split_csv_line(split)) layers.push_back(std::stoll(x));
      }
      plan["pp_layers"] = layers;
      o["plan"] = plan;
      o["global_batch"] = std::stoll(rr.get(f, "global_batch"));
      o["batch_tokens"] = std::stoll(rr.get(f, "global_batch")) * spec.base.seq_len;
      o["tokens_per_s"] = c.tokens_per_s;
      o["mfu"] = c.mfu;
      o["iteration_time_s"] = rr.num(f, "iteration_time_s");
      o["peak_memory_bytes"] = static_cast<std::int64_t>(rr.num(f, "peak_memory_bytes"));
      o["training_days"] = c.days;
      o["ideal_days"] = c.ideal_days;
      o["goodput"] = c.train.wall.goodput;
      o["expected_interruptions"] = c.train.wall.interruptions;
      o["checkpoint_interval_s"] = c.train.checkpoint_interval_s
                                       ? ordered_json(*c.train.checkpoint_interval_s)
                                       : ordered_json(nullptr);
      o["energy_mwh"] =
          c.train.energy_known ? ordered_json(c.train.energy_mwh) : ordered_json(nullptr);
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
      if (tr.gpus_per_domain > 0) x["gpus_per_domain"] = tr.gpus_per_domain;
      if (tr.best_tokens_per_s > 0) {
        x["best_tokens_per_s"] = tr.best_tokens_per_s;
        x["training_days"] = std::isfinite(tr.days) ? ordered_json(tr.days) : ordered_json(nullptr);
        x["ideal_days"] = tr.ideal_days;
        x["global_batch"] = tr.global_batch;
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
