// trainsim sweep: every valid plan for a model, cluster, GPU count and batch, simulated on a
// thread pool; CSV rows in plan order, top K by throughput.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <optional>
#include <nlohmann/json.hpp>

#include "sim/base/diagnostic.h"
#include "sim/config/names.h"
#include "sim/driver/intervals.h"
#include "sim/driver/sweep.h"
#include "tools/trainsim/cli.h"
#include "tools/trainsim/scenario_flags.h"
#include "tools/trainsim/sweep_flags.h"

namespace po = boost::program_options;

namespace ts::cli {
namespace {

std::string duration_text(double s) {
  if (!(s >= 0) || s > 1e7) return "?";
  const auto t = static_cast<long long>(s + 0.5);
  char buf[32];
  if (t >= 3600) {
    std::snprintf(buf, sizeof buf, "%lld:%02lld:%02lld", t / 3600, t / 60 % 60, t % 60);
  } else {
    std::snprintf(buf, sizeof buf, "%lld:%02lld", t / 60, t % 60);
  }
  return buf;
}

// "\r done/total (pct) rate ETA" on stderr (a pruned search: simulated, pruned, best so far); a
// newline once everything is done.
void print_progress(const driver::SweepProgress& p) {
  if (p.pruned_search) {
    std::fprintf(stderr, "\r%lld simulated (%lld replayed), %lld pruned, at most %lld left  best %.0f tokens/s  elapsed %s   ",
                 static_cast<long long>(p.done), static_cast<long long>(p.replayed),
                 static_cast<long long>(p.pruned), static_cast<long long>(p.total - p.done),
                 p.best_tokens_per_s, duration_text(p.elapsed_s).c_str());
    if (p.done >= p.total) std::fputc('\n', stderr);
    std::fflush(stderr);
    return;
  }
  const double rate = p.elapsed_s > 0 ? static_cast<double>(p.done) / p.elapsed_s : 0;
  const double eta = rate > 0 ? static_cast<double>(p.total - p.done) / rate : -1;
  std::fprintf(stderr, "\r%lld/%lld plans (%.1f%%)  %.1f plans/s  %lld replayed  best %.0f tokens/s  elapsed %s  ETA %s   ",
               static_cast<long long>(p.done), static_cast<long long>(p.total),
               p.total > 0 ? 100.0 * static_cast<double>(p.done) / static_cast<double>(p.total) : 100.0,
               rate, static_cast<long long>(p.replayed), p.best_tokens_per_s, duration_text(p.elapsed_s).c_str(),
               duration_text(eta).c_str());
  if (p.done >= p.total) std::fputc('\n', stderr);
  std::fflush(stderr);
}

std::string enumeration_text(const driver::SweepSpec& spec, const driver::Enumeration& en) {
  std::string s = "plans: " + std::to_string(en.combinations) + " combinations, " +
                  std::to_string(en.plans.size()) + " valid, " + std::to_string(en.rejected) +
                  " invalid, " + std::to_string(en.equivalent) +
                  " equivalent to another (axis without effect)\n";
  if (!en.reasons.empty()) {
    s += "invalid plans by rule (a plan may break several):\n";
    for (const auto& r : en.reasons) {
      char count[32];
      std::snprintf(count, sizeof count, "%10lld  ", static_cast<long long>(r.count));
      s += count + r.rule + "\n";
    }
  }
  // A model whose layer count few stage counts divide (DeepSeek-V3's 61) loses most pipelines to
  // the even split, the sweep's default; plan sweeps balanced splits by default.
  if (en.uneven_stages > 0 && !driver::has_pp_layers_column(spec)) {
    s += "note: " + std::to_string(en.uneven_stages) + " invalid plans have pipeline stages that do not divide the " +
         std::to_string(spec.model.num_layers) + " layers evenly; --pp-split balanced (or all) sweeps them " +
         "with uneven stages\n";
  }
  return s;
}

}  // namespace

int cmd_sweep(const Args& args) {
  po::options_description o("sweep flags");
  add_fixed_plan_flags(o);
  add_axis_flags(o, AxisDefaults{});
  o.add_options()
      ("out", po::value<std::string>(), "CSV file: rows appended in plan order; plans already in it are skipped")
      ("top", po::value<std::int64_t>()->default_value(10), "print the best K plans by tokens/s (0: all)")
      ("exhaustive", po::bool_switch(),
       "simulate every plan (implied by --out, --shard, a Slurm job array, --top 0 and --stop-after); "
       "else plans that cannot make the top K are skipped, with the same top K")
      ("threads", po::value<int>()->default_value(0), "worker threads (0: every core)")
      ("shard", po::value<std::string>(),
       "run slice I/N (plans with id % N == I); default from SLURM_ARRAY_TASK_ID/COUNT when set")
      ("format", po::value<std::string>()->default_value("text"), "text or json")
      ("rank-by", po::value<std::string>()->default_value("point"),
       "point (tokens/s predicted), or mid or low: the midpoint or low end of its prediction "
       "interval, among the best 3K plans by the point prediction (docs/intervals.md)")
      ("stats", po::bool_switch(), "print wall time and plans/s on stderr (always at a terminal)")
      ("stop-after", po::value<std::int64_t>()->default_value(0),
       "stop after N new rows, as a killed run would (for testing resumption)");
  po::variables_map vm;
  if (!parse_flags(args, o, vm,
                   "usage: trainsim sweep --model M --cluster C --gpus N --global-batch G [axis lists] "
                   "[--out FILE.csv]")) {
    return kExitOk;
  }
  const Format format = parse_format(vm["format"].as<std::string>(), false);

  DiagnosticList problems;
  driver::SweepSpec spec;
  auto& b = spec.base;
  auto fixed = read_fixed_plan_flags(vm, b, problems);
  if (fixed.model) spec.model = std::move(*fixed.model);
  if (fixed.cluster) spec.cluster = std::move(*fixed.cluster);
  spec.num_gpus = fixed.gpus;
  problems.collect([&] { spec.axes = axes_from_flags(vm); });
  problems.collect([&] {
    if (const auto profile = framework_from_flags(vm)) {
      apply_framework(vm, *profile, b);
      apply_framework(vm, *profile, spec.axes);
      spec.framework = vm["framework"].as<std::string>();
    }
  });
  driver::SweepOptions so;
  so.threads = vm["threads"].as<int>();
  if (so.threads < 0) problems.add({"", 0, "--threads", "must be >= 0"});
  so.stop_after = vm["stop-after"].as<std::int64_t>();
  bool sharded = false;
  if (vm.count("shard")) {
    sharded = true;
    problems.collect([&] { so.shard = driver::parse_shard(vm["shard"].as<std::string>(), "--shard"); });
  } else {
    problems.collect([&] {
      if (auto s = driver::slurm_shard([](const char* name) { return std::getenv(name); })) {
        so.shard = *s;
        sharded = true;
      }
    });
  }
  if (vm.count("out")) so.out = vm["out"].as<std::string>();
  const auto top_k = vm["top"].as<std::int64_t>();
  if (top_k < 0) problems.add({"", 0, "--top", "must be >= 0"});
  const std::string rank_text = vm["rank-by"].as<std::string>();
  driver::RankBy rank_by = driver::RankBy::kPoint;
  if (rank_text == "mid") {
    rank_by = driver::RankBy::kMid;
  } else if (rank_text == "low") {
    rank_by = driver::RankBy::kLow;
  } else if (rank_text != "point") {
    problems.add({"", 0, "--rank-by", "unknown value '" + rank_text + "' (one of point, mid, low)"});
  }
  problems.throw_if_any();
  // Ranking by the interval re-ranks the best 3K plans by the point prediction (a plan's
  // interval costs two more replays).
  const std::int64_t pool = rank_by == driver::RankBy::kPoint ? top_k : 3 * top_k;
  std::optional<config::IntervalCalibration> intervals;
  if (rank_by != driver::RankBy::kPoint) intervals = config::load_interval_calibration();

  // A file, a shard or every row asks for every plan; otherwise plans that cannot make the top K
  // are skipped (driver::search_sweep), with the same top K.
  const bool exhaustive = vm["exhaustive"].as<bool>() || so.out || sharded || top_k == 0 || so.stop_after > 0;
  const bool terminal = isatty(STDERR_FILENO) != 0;
  if (terminal) so.progress = print_progress;
  const driver::SweepOutcome res = exhaustive ? driver::run_sweep(spec, so)
                                              : driver::search_sweep(spec, so, static_cast<std::size_t>(pool));
  const auto& st = res.stats;
  std::vector<driver::RankedPlan> ranked;
  std::vector<driver::SweepRecord> top;
  if (intervals) {
    ranked = driver::rank_by_interval(spec, res.enumeration, res.records, static_cast<std::size_t>(top_k),
                                      static_cast<std::size_t>(pool), rank_by, *intervals,
                                      so.compute_cache ? so.compute_cache : std::make_shared<config::ComputeModelCache>());
    for (const auto& r : ranked) top.push_back(r.record);
  } else {
    top = driver::top_records(res.records, static_cast<std::size_t>(top_k));
  }

  if (terminal || vm["stats"].as<bool>()) {
    std::fprintf(stderr,
                 "sweep: %lld plans simulated in %.2f s on %d threads; %lld replayed: %.1f replayed "
                 "plans/s\n",
                 static_cast<long long>(st.simulated), st.wall_s, st.threads,
                 static_cast<long long>(st.replayed), st.replayed_per_s());
    if (st.replayed > 0) {
      std::fprintf(stderr,
                   "sweep: fastest replayed plan %lld: %.4f s (%lld tasks, %llu events); slowest "
                   "plan %lld: %.4f s (%lld tasks, %llu events)\n",
                   static_cast<long long>(st.fastest.plan_id), st.fastest.wall_s,
                   static_cast<long long>(st.fastest.tasks),
                   static_cast<unsigned long long>(st.fastest.events),
                   static_cast<long long>(st.slowest.plan_id), st.slowest.wall_s,
                   static_cast<long long>(st.slowest.tasks),
                   static_cast<unsigned long long>(st.slowest.events));
    }
    if (res.pruned) {
      std::fprintf(stderr, "sweep: bounds of %zu plans in %.2f s (%lld micro-batch shapes lowered); %lld batches simulated\n",
                   res.enumeration.plans.size(), res.pruned->bound_wall_s, static_cast<long long>(res.pruned->shapes),
                   static_cast<long long>(res.pruned->rounds));
    }
  }

  std::int64_t errors = 0;
  for (const auto& r : res.records) errors += r.status == "error" ? 1 : 0;

  const std::string shard_text = std::to_string(so.shard.index) + "/" + std::to_string(so.shard.count);
  if (format == Format::kJson) {
    nlohmann::ordered_json j;
    j["model"] = spec.model.name;
    j["cluster"] = spec.cluster.cluster.name;
    j["gpu"] = spec.cluster.gpu.name;
    j["num_gpus"] = spec.num_gpus;
    j["global_batch"] = b.global_batch;
    j["seq_len"] = b.seq_len;
    const auto& en = res.enumeration;
    j["combinations"] = en.combinations;
    j["valid"] = en.plans.size();
    j["invalid"] = en.rejected;
    j["equivalent"] = en.equivalent;
    j["invalid_uneven_stages"] = en.uneven_stages;
    nlohmann::ordered_json reasons = nlohmann::ordered_json::array();
    for (const auto& r : en.reasons) reasons.push_back({{"rule", r.rule}, {"count", r.count}, {"example", r.example}});
    j["invalid_by_rule"] = reasons;
    j["search"] = res.pruned ? "pruned" : "exhaustive";
    if (res.pruned) {
      j["pruned_static_memory"] = res.pruned->static_oom;
      j["pruned_activation_memory"] = res.pruned->activation_oom;
      j["pruned_by_bound"] = res.pruned->by_bound;
    }
    j["shard"] = shard_text;
    j["plans_in_shard"] = st.in_shard;
    j["resumed"] = st.resumed;
    j["simulated"] = st.simulated;
    j["replayed"] = st.replayed;
    j["ok"] = st.ok;
    j["oom_after_replay"] = st.oom;
    j["oom_static"] = st.early_oom;
    j["unsupported"] = st.unsupported;
    j["errors"] = errors;
    const auto cols = driver::split_csv_line(driver::sweep_csv_header());
    nlohmann::ordered_json rows = nlohmann::ordered_json::array();
    for (const auto& r : top) {
      const auto f = driver::split_csv_line(r.line);
      nlohmann::ordered_json row;
      for (std::size_t c = 0; c + 1 < cols.size() && c < f.size(); ++c) {
        // Numbers stay numbers; names stay strings.
        char* end = nullptr;
        const double v = std::strtod(f[c].c_str(), &end);
        if (!f[c].empty() && end == f[c].c_str() + f[c].size()) {
          row[cols[c]] = v;
        } else if (f[c] == "true" || f[c] == "false") {
          row[cols[c]] = f[c] == "true";
        } else {
          row[cols[c]] = f[c];
        }
      }
      // The pipeline split of sweeps with balanced splits (a column after the reason).
      if (f.size() > cols.size()) row["pp_layers"] = f.back();
      if (intervals) {
        const auto& rp = ranked[rows.size()];
        row["tokens_per_s_interval"] = {rp.tokens_low, rp.tokens_high};
      }
      rows.push_back(row);
    }
    j["top"] = rows;
    if (intervals) j["rank_by"] = rank_text;
    std::cout << j.dump(2) << '\n';
  } else {
    std::cout << "sweep: " << spec.model.name << " on " << spec.num_gpus << " x " << spec.cluster.gpu.name
              << " (" << spec.cluster.cluster.name << "), global batch " << b.global_batch << ", seq "
              << b.seq_len << "\n"
              << enumeration_text(spec, res.enumeration);
    if (res.pruned) {
      std::cout << "pruned search for the best " << top_k << " (--exhaustive simulates every plan): "
                << res.pruned->static_oom << " plans out of memory by static memory, " << res.pruned->activation_oom
                << " by static memory and the activations their schedule holds at once, " << res.pruned->by_bound
                << " pruned by their bound (below the lowest of the best " << top_k << ")";
    } else {
      std::cout << "shard " << shard_text << ": " << st.in_shard << " plans, " << st.resumed << " already in "
                << (so.out ? so.out->string() : "(no file)");
    }
    std::cout << ", " << st.simulated << " simulated now: " << st.replayed << " replayed (" << st.ok
              << " ok, " << st.oom << " out of memory), " << st.early_oom
              << " out of memory before replay (static memory), " << st.unsupported << " unsupported";
    if (errors > 0) std::cout << ", " << errors << " internal errors";
    std::cout << "\n";
    if (top.empty()) {
      std::cout << "no plan fits in memory\n";
    } else {
      if (intervals) {
        std::cout << "top " << top.size() << " by the " << (rank_by == driver::RankBy::kLow ? "low end" : "midpoint")
                  << " of the tokens/s interval, among the best " << (pool > 0 ? std::to_string(pool) : "all")
                  << " by tokens/s (peak memory of the fullest GPU):\n"
                  << driver::format_top_table(top) << "tokens/s intervals (rank: low - high):\n";
        for (std::size_t i = 0; i < ranked.size(); ++i) {
          char line[128];
          std::snprintf(line, sizeof line, "  %zu: %.0f - %.0f (plan %lld)\n", i + 1, ranked[i].tokens_low,
                        ranked[i].tokens_high, static_cast<long long>(ranked[i].record.plan_id));
          std::cout << line;
        }
      } else {
        std::cout << "top " << top.size() << " by tokens/s (peak memory of the fullest GPU):\n"
                  << driver::format_top_table(top);
      }
    }
  }
  if (errors > 0) {
    for (const auto& r : res.records) {
      if (r.status != "error") continue;
      const auto f = driver::split_csv_line(r.line);
      std::cerr << "internal error in plan " << r.plan_id << ": " << f.back() << '\n';
      break;
    }
    return kExitInternal;
  }
  return kExitOk;
}

}  // namespace ts::cli
