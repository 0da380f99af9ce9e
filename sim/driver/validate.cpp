// Validation: each row mapped, its open settings searched, simulated and compared; error statistics.
#include "sim/driver/validate.h"
#include "sim/driver/validate_intervals.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <thread>

#include "sim/base/diagnostic.h"
#include "sim/base/format.h"
#include "sim/config/names.h"
#include "sim/driver/validate_rules.h"
#include "sim/driver/validate_text.h"

namespace ts::driver {

using reading::str;
using reading::trim;

// ---------------------------------------------------------------------------------------------
// Comparison

std::string parallelism_kind(const parallel::ParallelPlan& plan) {
  if (plan.cp > 1) return "with-cp";
  if (plan.tp > 1 || plan.pp > 1) return "tp+pp";
  if (plan.zero_stage >= 2) return "fsdp-only";
  return "dp-only";
}

std::string short_source(const std::string& source) {
  const auto cut = source.find(" (");
  return trim(cut == std::string::npos ? source : source.substr(0, cut));
}

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const auto lo = static_cast<std::size_t>(std::floor(pos));
  const auto hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return v[lo] + (v[hi] - v[lo]) * frac;
}

ErrorStats error_stats(const std::vector<double>& errors) {
  ErrorStats st;
  st.n = static_cast<std::int64_t>(errors.size());
  if (errors.empty()) return st;
  std::vector<double> abs;
  double sum = 0;
  for (double e : errors) {
    abs.push_back(std::fabs(e));
    sum += e;
  }
  st.median_abs = percentile(abs, 0.5);
  st.p90_abs = percentile(abs, 0.9);
  st.mean_signed = sum / static_cast<double>(errors.size());
  st.max_abs = *std::max_element(abs.begin(), abs.end());
  return st;
}

namespace {

// Comparison's error: measured/predicted - 1 for a time, predicted/measured - 1 otherwise.
Comparison compared(Metric metric, double predicted, double measured) {
  const double error = metric == Metric::kIterationTime ? measured / predicted - 1.0
                                                        : predicted / measured - 1.0;
  return Comparison{metric, predicted, measured, error};
}

// A report row with the row's identity (also for a row whose simulation throws).
RowResult row_of(const PublishedRun& row) {
  RowResult out;
  out.run_id = row.run_id;
  out.line = row.line;
  out.source = short_source(row.source);
  out.model = row.model;
  out.gpu = row.gpu;
  return out;
}

struct Attempt {
  config::Scenario scenario;
  RunResult result;
};

std::string plan_reason(const InputError& e) {
  std::string why = "plan: ";
  for (std::size_t i = 0; i < e.diagnostics().size(); ++i) {
    const auto& d = e.diagnostics()[i];
    if (i > 0) why += "; ";
    why += d.field.empty() ? d.message : d.field + " " + d.message;
  }
  return why;
}

// Validates and simulates one candidate; nullopt (with the reason) when its plan is invalid.
std::optional<Attempt> try_simulate(const config::Scenario& parts, Resources& resources, std::string& reason,
                                    const RunOptions& run_options) {
  try {
    config::Scenario sc = config::make_scenario(parts.model, parts.cluster, parts.num_gpus, parts.plan);
    RunResult r = simulate(sc, run_options, resources);
    return Attempt{std::move(sc), std::move(r)};
  } catch (const InputError& e) {
    if (reason.empty()) reason = plan_reason(e);
    return std::nullopt;
  }
}

bool static_oom(const RunResult& r) { return r.status == Status::kOutOfMemory && r.iteration_time_s <= 0; }

// The search over what a row leaves open: recompute and micro-batch (powers of two dividing the
// per-replica batch). Among the combinations that fit it takes the fastest simulated, as a team
// tuning a published run would: taking the least recompute first can leave a sharded (ZeRO-3)
// run at micro-batch 1, gathering every layer's weights once per sequence, where full recompute
// with a large micro-batch is several times faster. Returns the chosen attempt; `oom` tells that
// nothing fitted and the attempt is the last one tried (the most recompute, smallest micro-batch).
struct Choice {
  std::optional<Attempt> attempt;
  bool oom = false;
  bool unsupported = false;
  std::string reason;
};

Choice search(const RowMapping& m, const config::Scenario& parts, Resources& resources,
              std::vector<std::string>& notes, const RunOptions& run_options) {
  Choice ch;
  std::vector<parallel::Recompute> recomputes;
  if (m.recompute_given) {
    recomputes = {parts.plan.recompute};
  } else {
    recomputes = m.recompute_modes;
  }
  std::vector<std::int64_t> mbs;
  if (m.micro_batch_given) {
    mbs = {parts.plan.micro_batch};
  } else {
    const std::int64_t per_replica = parts.plan.dp > 0 ? parts.plan.global_batch / parts.plan.dp : 1;
    for (std::int64_t b = 16; b >= 1; b /= 2) {
      if (b <= per_replica && per_replica % b == 0) mbs.push_back(b);
    }
    if (mbs.empty()) mbs = {1};
  }
  std::string plan_error;
  std::optional<Attempt> best;
  std::optional<Attempt> fallback;
  for (auto rc : recomputes) {
    bool static_overflow = false;
    for (auto mb : mbs) {
      config::Scenario cand = parts;
      cand.plan.recompute = rc;
      cand.plan.micro_batch = mb;
      auto a = try_simulate(cand, resources, plan_error, run_options);
      if (!a) continue;
      if (a->result.status == Status::kUnsupported) {
        ch.unsupported = true;
        ch.reason = a->result.reason;
        return ch;
      }
      if (a->result.status == Status::kOk) {
        if (!best || a->result.iteration_time_s < best->result.iteration_time_s) best = std::move(a);
        continue;
      }
      static_overflow = static_oom(a->result);
      fallback = std::move(a);
      if (static_overflow) break;  // weights and optimizer states alone overflow: no micro-batch helps
    }
    // Recompute frees activations only: with the static state overflowing, none helps.
    if (static_overflow && !best) break;
  }
  if (best) {
    const auto& chosen = best->scenario.plan;
    if (!m.recompute_given) {
      notes.push_back(std::string("recompute ") + std::string(config::name(chosen.recompute)) +
                      " (fastest that fits of " + std::to_string(recomputes.size()) + " modes)");
    }
    if (!m.micro_batch_given) {
      notes.push_back("micro_batch " + str(chosen.micro_batch) +
                      (mbs.size() > 1 ? " (fastest that fits of " + reading::join(mbs, "/") + ")" : ""));
    }
    ch.attempt = std::move(best);
    return ch;
  }
  if (fallback) {
    ch.oom = true;
    ch.reason = fallback->result.reason;
    ch.attempt = std::move(fallback);
    return ch;
  }
  ch.reason = plan_error.empty() ? "no valid plan" : plan_error;
  return ch;
}

double bytes_of(double value, const std::string& unit, std::vector<std::string>& notes) {
  const std::string u = to_lower(trim(unit));
  if (u == "gb") return value * 1e9;
  if (u == "mib") return value * 1048576.0;
  if (u == "mb") return value * 1e6;
  if (u == "tb") return value * 1e12;
  if (u != "gib") notes.push_back("peak_mem unit '" + unit + "' read as GiB");
  return value * 1073741824.0;
}

std::optional<Comparison> compare_throughput(const PublishedRun& r, const config::Scenario& sc,
                                             const RunResult& res, const config::ReadingVocabulary& vocab,
                                             std::string& convention) {
  const double t = res.iteration_time_s;
  if (!(t > 0)) return std::nullopt;
  const auto& p = sc.plan;
  const double tokens = static_cast<double>(p.global_batch * p.seq_len);
  const double gpus = static_cast<double>(sc.num_gpus);
  if (r.iter_time_s && *r.iter_time_s > 0) return compared(Metric::kIterationTime, t, *r.iter_time_s);
  if (r.tokens_per_s && *r.tokens_per_s > 0) return compared(Metric::kTokensPerS, tokens / t, *r.tokens_per_s);
  if (r.tokens_per_s_per_gpu && *r.tokens_per_s_per_gpu > 0) {
    return compared(Metric::kTokensPerSPerGpu, tokens / t / gpus, *r.tokens_per_s_per_gpu);
  }
  FlopConvention conv = flop_convention(r, vocab);
  const double params = r.n_params_b ? *r.n_params_b * 1e9 : static_cast<double>(ir::parameter_count(sc.model));
  const auto flops = [&](bool hardware) {
    if (conv.family == FlopFamily::kSixN) {
      return six_n_flops(params, sc.model, p.seq_len, tokens, conv.causal_halved,
                         hardware ? recomputed_layer_share(p, sc.model) : 0.0);
    }
    const double seqs = static_cast<double>(p.global_batch);
    return hardware ? megatron_hardware_flops(sc.model, p.seq_len, seqs, p.recompute, recomputed_layer_share(p, sc.model))
                    : megatron_model_flops(sc.model, p.seq_len, seqs);
  };
  if (r.tflops_per_gpu && *r.tflops_per_gpu > 0) {
    convention = describe(conv);
    return compared(Metric::kTflopsPerGpu, flops(conv.hardware) / t / gpus * 1e-12, *r.tflops_per_gpu);
  }
  // The source's peak: the GPU's dense peak in the run's precision (312 A100, 989 H100 BF16,
  // 1979 H100 FP8, as the README of the validation set lists).
  // MFU (model FLOPs), else HFU (hardware FLOPs).
  const double peak = sc.cluster.gpu.peak(p.dtype).per_s();
  for (const bool hardware : {false, true}) {
    const auto& measured = hardware ? r.hfu_pct : r.mfu_pct;
    if (!measured || !(*measured > 0) || !(peak > 0)) continue;
    conv.hardware = hardware;
    convention = describe(conv) + ", peak " + str(std::llround(peak * 1e-12)) + " TF";
    return compared(hardware ? Metric::kHfu : Metric::kMfu, flops(hardware) / t / gpus / peak * 100.0,
                    *measured);
  }
  return std::nullopt;
}

bool has_throughput_value(const PublishedRun& r) {
  for (const auto& v : {r.iter_time_s, r.tokens_per_s, r.tokens_per_s_per_gpu, r.tflops_per_gpu, r.mfu_pct, r.hfu_pct}) {
    if (v && *v > 0) return true;
  }
  return false;
}

// Largest sequence (a multiple of 256) whose simulated peak fits; 0 when none does.
std::int64_t max_fitting_seq(config::Scenario parts, Resources& resources, std::optional<Attempt>& at_max,
                             const RunOptions& run_options) {
  const bool learned = parts.model.position == ir::Position::kLearned;
  const auto fits = [&](std::int64_t seq) {
    config::Scenario c = parts;
    c.plan.seq_len = seq;
    c.plan.global_batch = c.plan.micro_batch * c.plan.dp;
    if (learned) c.model.max_seq_len = seq;
    std::string reason;
    auto a = try_simulate(c, resources, reason, run_options);
    if (!a || a->result.status != Status::kOk) return false;
    at_max = std::move(a);
    return true;
  };
  constexpr std::int64_t kStep = 256;
  constexpr std::int64_t kLimit = std::int64_t{1} << 23;
  std::int64_t lo = 0, hi = 1024;
  while (hi <= kLimit && fits(hi)) {
    lo = hi;
    hi *= 2;
  }
  if (hi > kLimit) return lo;
  while (hi - lo > kStep) {
    const std::int64_t mid = (lo + hi) / 2 / kStep * kStep;
    if (mid <= lo) break;
    if (fits(mid)) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

RowResult evaluate(const PublishedRun& row, Resources& resources, const ValidateOptions& options,
                   const std::vector<config::FrameworkProfile>& frameworks,
                   const config::ReadingVocabulary& vocabulary) {
  RowResult out = row_of(row);
  out.held_out = row.held_out;
  out.overrides = static_cast<std::int64_t>(row.overrides.size());
  out.num_gpus = row.n_gpus.value_or(0);
  const auto skip = [&](std::string why) {
    out.skipped = true;
    out.reason = std::move(why);
    return out;
  };
  RowMapping m = map_run(row, resources.compute_cache(), frameworks, vocabulary);
  out.assumptions = m.assumptions;
  if (!m.scenario) return skip(m.skip_reason);
  config::Scenario parts = *m.scenario;
  if (options.host_dispatch) parts.plan.host_dispatch = *options.host_dispatch;
  out.gpu = parts.cluster.gpu.name;
  out.num_gpus = parts.num_gpus;
  out.parallelism = parallelism_kind(parts.plan);
  out.fp8 = parts.plan.dtype == ir::Dtype::kFp8;
  if (!has_throughput_value(row) && !row.peak_mem && !row.max_seq_len) {
    return skip("no measured value to compare (iter_time_s, tokens_per_s, tflops_per_gpu, mfu_pct, "
                "hfu_pct, peak_mem and max_seq_len are empty)");
  }

  RunOptions run_options;
  run_options.nic_sharing = options.nic_sharing;
  Choice ch = search(m, parts, resources, out.assumptions, run_options);
  if (!ch.attempt && !ch.unsupported && ch.oom == false && ch.reason.empty()) ch.reason = "no valid plan";
  // Settings the row does not give, tried when even the static state overflows: the fastest
  // variant that fits replaces the search's choice, noted with its reason and its own notes.
  struct Variant {
    config::Scenario scenario;
    std::string reason;
    std::vector<std::string> notes;
  };
  const auto overflows = [&] { return ch.oom && ch.attempt && static_oom(ch.attempt->result); };
  const auto take_fastest = [&](std::vector<Variant> variants) {
    std::optional<std::pair<Variant, Choice>> best;
    for (auto& v : variants) {
      Choice again = search(m, v.scenario, resources, v.notes, run_options);
      if (!again.attempt || again.oom) continue;
      if (!best || again.attempt->result.iteration_time_s < best->second.attempt->result.iteration_time_s) {
        best.emplace(std::move(v), std::move(again));
      }
    }
    if (!best) return;
    out.assumptions.push_back(best->first.reason);
    out.assumptions.insert(out.assumptions.end(), best->first.notes.begin(), best->first.notes.end());
    parts = std::move(best->first.scenario);
    ch = std::move(best->second);
  };
  // A row that states no sharding, whose weights and optimizer states cannot fit even before
  // activations, ran with some: the fastest ZeRO stage that fits (the search's rule for a setting
  // the row does not give).
  if (!m.zero_given && overflows() && parts.plan.dp * parts.plan.cp > 1) {
    std::vector<Variant> stages;
    for (const int stage : {1, 2, 3}) {
      Variant v{parts, "ZeRO-" + str(stage) + " (no sharding stated; the fastest stage that fits)", {}};
      v.scenario.plan.zero_stage = stage;
      if (m.frameworks->refuses(v.scenario.plan)) continue;  // the framework cannot run it
      restage(row, m, stage, v.scenario, v.notes);
      stages.push_back(std::move(v));
    }
    take_fastest(std::move(stages));
  }
  // Mixed-precision Adam (16-18 bytes per parameter) that cannot fit even before activations
  // means the source trained otherwise: pure bf16 weights, gradients and Adam states (8 bytes).
  if (overflows() && parts.plan.optimizer_states == parallel::OptimizerStates::kFp32) {
    Variant v{parts, "bf16 optimizer states (fp32 mixed-precision Adam does not fit)", {}};
    v.scenario.plan.optimizer_states = parallel::OptimizerStates::kBf16;
    take_fastest({std::move(v)});
  }
  if (ch.unsupported) return skip("simulator: " + ch.reason);
  if (!ch.attempt) return skip(ch.reason);
  if (ch.oom && static_oom(ch.attempt->result)) return skip("predicted out of memory: " + ch.reason);
  if (ch.oom) out.reason = "predicted out of memory (" + ch.reason + "); compared anyway";

  const Attempt& a = *ch.attempt;
  out.parallelism = parallelism_kind(a.scenario.plan);
  out.throughput = compare_throughput(row, a.scenario, a.result, vocabulary, out.convention);
  if (row.peak_mem && *row.peak_mem > 0) {
    out.memory = compared(Metric::kPeakMemory, a.result.peak_memory.real(),
                          bytes_of(*row.peak_mem, row.peak_mem_unit, out.assumptions));
  }
  out.scenario = a.scenario;
  out.result = a.result;
  if (m.max_seq_search && row.max_seq_len && *row.max_seq_len > 0) {
    std::optional<Attempt> at_max;
    const std::int64_t seq = max_fitting_seq(a.scenario, resources, at_max, run_options);
    out.memory = compared(Metric::kMaxSeqLen, static_cast<double>(seq), static_cast<double>(*row.max_seq_len));
    if (at_max) {
      out.scenario = at_max->scenario;
      out.result = at_max->result;
    }
  }
  if (!out.throughput && !out.memory) {
    return skip("nothing comparable: the measured values need a simulated iteration time");
  }
  return out;
}

}  // namespace

ValidationSummary summarize(const std::vector<RowResult>& rows) {
  ValidationSummary s;
  s.rows = static_cast<std::int64_t>(rows.size());
  std::vector<double> all, mem;
  std::map<std::string, std::vector<double>> src, gpu, par, set;
  for (const auto& r : rows) {
    if (r.skipped) ++s.skipped;
    if (r.overrides > 0) ++s.overridden;
    if (r.memory) mem.push_back(r.memory->error);
    if (!r.throughput) continue;
    const double e = r.throughput->error;
    all.push_back(e);
    set[r.held_out ? "held-out" : "public"].push_back(e);
    src[r.source].push_back(e);
    gpu[r.gpu].push_back(e);
    par[r.parallelism].push_back(e);
    if (r.fp8) par["fp8"].push_back(e);
  }
  s.throughput = error_stats(all);
  s.memory = error_stats(mem);
  for (const auto& [k, v] : src) s.by_source[k] = error_stats(v);
  for (const auto& [k, v] : gpu) s.by_gpu[k] = error_stats(v);
  for (const auto& [k, v] : par) s.by_parallelism[k] = error_stats(v);
  for (const auto& [k, v] : set) s.by_set[k] = error_stats(v);
  s.coverage = interval_coverage(rows, false);
  s.input_coverage = interval_coverage(rows, true);
  return s;
}

ValidationReport validate(const std::vector<PublishedRun>& runs, const ValidateOptions& options) {
  ValidationReport report;
  report.rows.resize(runs.size());
  auto cache = std::make_shared<config::ComputeModelCache>();
  const std::vector<config::FrameworkProfile> frameworks = config::load_all_frameworks();
  const config::ReadingVocabulary vocabulary = config::load_reading_vocabulary();
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    Resources resources(cache);
    for (std::size_t i = next++; i < runs.size(); i = next++) {
      try {
        report.rows[i] = evaluate(runs[i], resources, options, frameworks, vocabulary);
        if (options.intervals) add_row_interval(report.rows[i], *options.intervals, resources);
      } catch (const std::exception& e) {
        RowResult r = row_of(runs[i]);
        r.skipped = true;
        r.reason = std::string("error while simulating: ") + e.what();
        report.rows[i] = std::move(r);
      }
    }
  };
  const int threads = std::max(1, std::min<int>(options.threads, static_cast<int>(runs.size())));
  if (threads == 1) {
    worker();
  } else {
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; ++t) pool.emplace_back(worker);
    for (auto& t : pool) t.join();
  }
  report.summary = summarize(report.rows);
  return report;
}

}  // namespace ts::driver
