// Sweeps: plan enumeration and the parallel runner with ordered, resumable output (the CSV, its
// reading and merge: sweep_csv.cpp).
#include "sim/driver/sweep.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "sim/driver/sweep_csv.h"

#include "sim/base/diagnostic.h"
#include "sim/config/names.h"
#include "sim/ir/model_graph.h"
#include "sim/runtime/breakdown.h"

namespace ts::driver {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

[[noreturn]] void bad_flag(std::string_view flag, std::string message) {
  throw InputError(Diagnostic{"", 0, std::string(flag), std::move(message)});
}

// Sorted, without duplicates; every value must be positive.
std::vector<std::int64_t> ascending(std::vector<std::int64_t> v, std::string_view flag) {
  for (auto x : v) {
    if (x <= 0) bad_flag(flag, "values must be > 0 (got " + std::to_string(x) + ")");
  }
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

template <class T>
std::vector<T> ascending_enum(std::vector<T> v, std::string_view flag) {
  if (v.empty()) bad_flag(flag, "needs at least one value");
  std::sort(v.begin(), v.end());
  v.erase(std::unique(v.begin(), v.end()), v.end());
  return v;
}

// A rule of check_plan: its flag and its message without the parenthesized details and with
// every number written N, so that the same rule failing with different values is one group.
// Digits inside a name stay ("deepseek-v3", "A100-SXM4-80GB", "llama3-8b"): a number is a run of
// digits not preceded by a letter or digit and not followed by a letter.
std::string rule_of(const Diagnostic& d) {
  const auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
  const auto is_letter = [](char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); };
  const std::string& m = d.message;
  std::string out;
  int depth = 0;
  for (std::size_t i = 0; i < m.size(); ++i) {
    const char c = m[i];
    if (c == '(') {
      ++depth;
      continue;
    }
    if (c == ')') {
      if (depth > 0) --depth;
      continue;
    }
    if (depth > 0) continue;
    if (is_digit(c) && (i == 0 || !(is_letter(m[i - 1]) || is_digit(m[i - 1])))) {
      std::size_t end = i;
      while (end < m.size() && is_digit(m[end])) ++end;
      if (end == m.size() || !is_letter(m[end])) {
        out += 'N';
        i = end - 1;
        continue;
      }
    }
    out += c;
  }
  // Collapse the blanks left behind by removed details ("num_layers , or" → "num_layers, or").
  std::string tidy;
  for (char c : out) {
    if (c == ' ' && (tidy.empty() || tidy.back() == ' ')) continue;
    if ((c == ',' || c == ';' || c == ':') && !tidy.empty() && tidy.back() == ' ') tidy.pop_back();
    tidy += c;
  }
  while (!tidy.empty() && (tidy.back() == ' ' || tidy.back() == ',')) tidy.pop_back();
  return d.field + ": " + tidy;
}

class ReasonCounter {
 public:
  void add(const std::string& rule, const std::string& example) {
    ++reasons_[group(rule, example)].count;
  }
  // A diagnostic of check_plan. Its group is found by its field and message: millions of
  // rejected combinations repeat a few thousand messages, and grouping each anew (rule_of,
  // Diagnostic::to_string) took most of the enumeration's time.
  void add(const Diagnostic& d) { ++reasons_[group_of(d)].count; }
  // A broken rule of check_plan_failures: a rule seen before goes to its group without its
  // message being formatted (its words are the same, PlanFailure::rule), so that only the first
  // plan breaking each rule formats a message.
  void add(const config::PlanFailure& f) {
    if (f.rule() == 0) {
      add(Diagnostic{"", 0, f.flag(), f.message()});
      return;
    }
    const RuleKey key{f.flag(), f.rule()};
    auto it = by_rule_.find(key);
    if (it == by_rule_.end()) {
      it = by_rule_.emplace(key, group_of(Diagnostic{"", 0, f.flag(), f.message()})).first;
    }
    ++reasons_[it->second].count;
  }
  // Adds the groups of `other`, counted after this one's (its first examples come later).
  void merge(const ReasonCounter& other) {
    for (const RejectReason& r : other.reasons_)
      reasons_[group(r.rule, r.example)].count += r.count;
  }
  std::vector<RejectReason> sorted() const {
    auto out = reasons_;
    std::stable_sort(out.begin(), out.end(),
                     [](const RejectReason& a, const RejectReason& b) { return a.count > b.count; });
    return out;
  }

 private:
  // The group of a diagnostic, made with it as the example if new.
  std::size_t group_of(const Diagnostic& d) {
    key_.assign(d.file);
    key_ += '\n';
    key_ += std::to_string(d.line);
    key_ += '\n';
    key_ += d.field;
    key_ += '\n';
    key_ += d.message;
    auto it = by_message_.find(key_);
    if (it == by_message_.end()) {
      it = by_message_.emplace(key_, group(rule_of(d), d.to_string())).first;
    }
    return it->second;
  }
  // The index of the group of `rule`, made with `example` if new.
  std::size_t group(const std::string& rule, const std::string& example) {
    auto [it, inserted] = index_.try_emplace(rule, reasons_.size());
    if (inserted) reasons_.push_back(RejectReason{rule, 0, example});
    return it->second;
  }
  std::map<std::string, std::size_t> index_;
  std::unordered_map<std::string, std::size_t> by_message_;  // whole diagnostic → group
  struct RuleKey {
    const char* flag;
    std::uint64_t rule;
    bool operator==(const RuleKey&) const = default;
  };
  struct RuleHash {
    std::size_t operator()(const RuleKey& k) const {
      return std::hash<std::uint64_t>()(k.rule) ^ std::hash<const char*>()(k.flag);
    }
  };
  std::unordered_map<RuleKey, std::size_t, RuleHash> by_rule_;  // flag and rule → group
  std::string key_;
  std::vector<RejectReason> reasons_;
};

bool contains(const std::vector<std::int64_t>& v, std::int64_t x) {
  return std::binary_search(v.begin(), v.end(), x);
}

}  // namespace

std::vector<std::int64_t> divisors(std::int64_t n) {
  std::vector<std::int64_t> small, large;
  for (std::int64_t d = 1; d * d <= n; ++d) {
    if (n % d != 0) continue;
    small.push_back(d);
    if (d != n / d) large.push_back(n / d);
  }
  small.insert(small.end(), large.rbegin(), large.rend());
  return small;
}

EndStageCosts end_stage_costs(const ir::ModelSpec& model, const compute::GpuSpec& gpu,
                              const parallel::ParallelPlan& base) {
  ir::LayerShape shape;
  shape.seq = base.seq_len;
  shape.full_seq = base.seq_len;
  shape.gemm_dtype = base.dtype;
  shape.flash_attention = base.flash_attention;
  const double hbm = gpu.memory_bandwidth.bytes_per_s();
  // Seconds of one op at its roofline; GEMMs in a precision the GPU lacks at the bf16 peak.
  const auto seconds = [&](const ir::Op& op) {
    switch (op.kind) {
      case ir::OpKind::kGemm:
      case ir::OpKind::kAttention: {
        const double peak =
            gpu.supports(op.dtype) ? gpu.peak(op.dtype).per_s() : gpu.peak_bf16.per_s();
        return peak > 0 ? op.flops.value() / peak : 0.0;
      }
      case ir::OpKind::kMemoryBound:
        return hbm > 0 ? static_cast<double>(op.moved.count()) / hbm : 0.0;
    }
    return 0.0;
  };
  const auto block_seconds = [&](const ir::Block& b) {
    double t = 0;
    for (const auto& op : b.forward) t += seconds(op);
    for (const auto& op : b.backward) t += seconds(op);
    return t;
  };
  const ir::LayerOps layer = ir::build_layer(model, shape);
  const double per_layer = block_seconds(layer.attention) + block_seconds(layer.mlp);
  if (!(per_layer > 0)) return {};
  const double head = block_seconds(ir::build_lm_head(model, shape)) / per_layer;
  // Multi-token-prediction modules run on the last stage too: each one more layer, its input
  // side and another head.
  const double mtp = static_cast<double>(model.mtp_layers) *
                     (1.0 + head + block_seconds(ir::build_mtp_projection(model, shape)) / per_layer);
  return {block_seconds(ir::build_embedding(model, shape)) / per_layer, head + mtp};
}

int sweep_threads(int requested) {
  if (requested > 0) return requested;
  return static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
}

void run_workers(int workers, const std::function<void(int)>& body) {
  if (workers <= 1) {
    body(0);
    return;
  }
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(workers));
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(workers));
  for (int w = 0; w < workers; ++w) {
    pool.emplace_back([&, w] {
      try {
        body(w);
      } catch (...) {
        errors[static_cast<std::size_t>(w)] = std::current_exception();
      }
    });
  }
  for (auto& t : pool) t.join();
  for (const auto& e : errors) {
    if (e) std::rethrow_exception(e);
  }
}

std::optional<std::vector<std::int64_t>> balanced_split(const ir::ModelSpec& model, std::int64_t stages,
                                                        const EndStageCosts& ends) {
  if (stages > model.num_layers) return std::nullopt;
  auto v = parallel::balanced_stage_layers(model.num_layers, stages, ends.embedding, ends.lm_head);
  if (std::all_of(v.begin(), v.end(), [&](std::int64_t x) { return x == v.front(); })) v.clear();
  return v;
}

Enumeration enumerate_plans(const SweepSpec& spec, int threads) {
  const std::int64_t n = spec.num_gpus;
  if (n <= 0) bad_flag("--gpus", "must be > 0 (got " + std::to_string(n) + ")");
  const auto& ax = spec.axes;
  const auto or_all = [&](const std::vector<std::int64_t>& v, const char* flag) {
    return v.empty() ? divisors(n) : ascending(v, flag);
  };
  const auto tps = or_all(ax.tp, "--tp");
  const auto pps = or_all(ax.pp, "--pp");
  const auto cps = or_all(ax.cp, "--cp");
  const auto dps = ascending(ax.dp, "--dp");
  const auto mbs_given = ascending(ax.micro_batch, "--micro-batch");
  const auto vpps_given = ascending(ax.vpp, "--vpp");
  const auto schedules = ascending_enum(ax.schedule, "--schedule");
  const auto zeros = ascending_enum(ax.zero, "--zero");
  const auto sps = ascending_enum(ax.sequence_parallel, "--sequence-parallel");
  const auto recomputes = ascending_enum(ax.recompute, "--recompute");
  const auto cp_algos = ascending_enum(ax.cp_algo, "--cp-algo");
  if (ax.mst_chunks.empty()) bad_flag("--mst-chunks", "needs at least one value");
  const auto msts = ascending(ax.mst_chunks, "--mst-chunks");
  if (ax.etp.empty()) bad_flag("--etp", "needs at least one value");
  // The MoE settings of every plan: a dense model has no router, no tokens to dispatch and no
  // all-to-all to overlap.
  if (!spec.model.moe) {
    const parallel::ParallelPlan& b = spec.base;
    const auto dense = [&](const char* flag) {
      bad_flag(flag, "needs a mixture-of-experts model (" + spec.model.name + " is dense)");
    };
    if (b.moe_a2a_overlap) dense("--moe-a2a-overlap");
    if (b.moe_dispatcher != parallel::MoeDispatcher::kAllToAll) dense("--moe-dispatcher");
    if (b.routing != parallel::Routing::kBalanced) dense("--routing");
    if (b.moe_imbalance != 1.0) dense("--moe-imbalance");
  }
  // The dtype is every plan's: a GPU without tensor cores for it rejects the whole sweep.
  if (const std::string why = config::dtype_problem(spec.base.dtype, spec.cluster.gpu); !why.empty()) {
    bad_flag("--dtype", why);
  }
  std::vector<std::int64_t> eps = {1};
  if (!ax.ep.empty()) {
    eps = ascending(ax.ep, "--ep");
  } else if (spec.model.moe) {
    eps = divisors(spec.model.moe->num_experts);
  }
  const auto etps = ascending(ax.etp, "--etp");
  const auto splits = ascending_enum(ax.pp_split, "--pp-split");
  const bool balanced = has_pp_layers_column(spec);
  const auto batches = ascending(ax.batch_choices, "--batch-tokens");
  // The largest batch choice that dp·mb divides, with a micro-batch count pp divides when
  // interleaved (SweepAxes::batch_choices); the base batch without choices.
  const auto batch_for = [&](std::int64_t dp, std::int64_t mb, bool interleaved, std::int64_t pp) {
    if (batches.empty()) return spec.base.global_batch;
    for (auto it = batches.rbegin(); it != batches.rend(); ++it) {
      if (*it % (dp * mb) == 0 && (!interleaved || (*it / (dp * mb)) % pp == 0)) return *it;
    }
    return batches.back();  // check_plan says why none fits
  };
  const EndStageCosts ends =
      balanced ? end_stage_costs(spec.model, spec.cluster.gpu, spec.base) : EndStageCosts{};
  // The layers per stage of `split` over `stages` stages: the base plan's (empty: even) for an
  // even split; for a balanced one, empty where it comes out even (the same plan as the even
  // split), nullopt where there are more stages than layers.
  const auto split_layers = [&](parallel::PipelineSplit split,
                                std::int64_t stages) -> std::optional<std::vector<std::int64_t>> {
    switch (split) {
      case parallel::PipelineSplit::kEven:
        return spec.base.pp_layers;
      case parallel::PipelineSplit::kBalanced:
        return balanced_split(spec.model, stages, ends);
    }
    return std::nullopt;
  };
  // Shard group sizes, ascending, 0 (all ranks) first; empty: every divisor (see SweepAxes).
  std::vector<std::int64_t> groups_given;
  for (const auto g : ax.zero_shard_group) {
    if (g < 0) bad_flag("--zero-shard-group", "values must be >= 0 (got " + std::to_string(g) + ")");
    if (g > 0) groups_given.push_back(g);
  }
  groups_given = ascending(groups_given, "--zero-shard-group");
  if (std::find(ax.zero_shard_group.begin(), ax.zero_shard_group.end(), 0) != ax.zero_shard_group.end()) {
    groups_given.insert(groups_given.begin(), 0);
  }
  // The shard groups of one zero stage over `ranks` = dp·cp data-parallel ranks. ZeRO-3 writes
  // a group of all the ranks as 0 (the same plan); other stages have no groups: 0, once.
  const auto shard_groups = [&](int zero, std::int64_t ranks) {
    std::vector<std::int64_t> out;
    if (zero != 3) {
      out.assign(std::max<std::size_t>(1, groups_given.size()), 0);
    } else if (ax.zero_shard_group.empty()) {
      out.push_back(0);
      for (const auto g : divisors(ranks)) {
        if (g > 1 && g < ranks) out.push_back(g);
      }
    } else {
      for (const auto g : groups_given) out.push_back(g == ranks ? 0 : g);
    }
    return out;
  };

  // The plans of one tensor-parallel degree, with their counts and rejections: the degrees are
  // enumerated on `threads` threads and joined in order, which gives the sequential result.
  struct Part {
    Enumeration en;
    ReasonCounter reasons;
  };
  const std::int64_t layers = spec.model.num_layers;
  const auto enumerate_tp = [&](const std::int64_t tp, Part& part) {
    Enumeration& en = part.en;
    ReasonCounter& reasons = part.reasons;
    const auto reject = [&](const std::string& rule, const std::string& example) {
      ++en.rejected;
      reasons.add(rule, example);
    };
    parallel::ParallelPlan p = spec.base;
    bool valid = true;
    const std::function<void(const config::PlanFailure&)> count_failure =
        [&](const config::PlanFailure& f) {
          valid = false;
          reasons.add(f);
        };
    for (const auto pp : pps) {
      for (const auto cp : cps) {
        std::int64_t mp = 0;
        if (__builtin_mul_overflow(tp, pp, &mp) || __builtin_mul_overflow(mp, cp, &mp) ||
            n % mp != 0) {
          ++en.combinations;
          reject("--gpus: tp·pp·cp must divide the number of GPUs",
                 "tp·pp·cp = " + std::to_string(tp) + "·" + std::to_string(pp) + "·" +
                     std::to_string(cp) + " does not divide " + std::to_string(n) + " GPUs");
          continue;
        }
        const std::int64_t dp = n / mp;
        if (!dps.empty() && !contains(dps, dp)) {
          ++en.combinations;
          reject("--dp: gpus/(tp·pp·cp) is not among the --dp values",
                 "tp " + std::to_string(tp) + ", pp " + std::to_string(pp) + ", cp " +
                     std::to_string(cp) + " leave dp " + std::to_string(dp));
          continue;
        }
        std::vector<std::int64_t> mbs = mbs_given;
        if (mbs.empty()) {
          const std::int64_t batch = batch_for(dp, 1, false, pp);
          mbs = batch > 0 && batch % dp == 0 ? divisors(batch / dp)
                                             : std::vector<std::int64_t>{1};  // check_plan says why
        }
        for (const auto mb : mbs) {
          for (const auto schedule : schedules) {
            std::vector<std::int64_t> vpps = {1};
            if (schedule == parallel::Schedule::kInterleaved) {
              vpps = vpps_given;
              if (vpps.empty()) {
                // Balanced splits take about as many layers per chunk as an even split would
                // with layers/pp rounded down.
                if (pp >= 2 && layers > 0 && (layers % pp == 0 || (balanced && layers >= 2 * pp))) {
                  for (auto v : divisors(layers / pp)) {
                    if (v >= 2) vpps.push_back(v);
                  }
                }
                if (vpps.empty()) vpps = {2};  // one candidate, rejected with check_plan's reason
              }
            }
            const std::int64_t batch =
                batch_for(dp, mb, schedule == parallel::Schedule::kInterleaved, pp);
            for (const auto vpp : vpps) {
              // Virtual stages (ParallelPlan::model_chunks): pp·vpp interleaved, 2·pp in a V.
              parallel::ParallelPlan chunked;
              chunked.schedule = schedule;
              chunked.vpp = vpp;
              const std::int64_t stages = pp * chunked.model_chunks();
              for (const auto split : splits) {
                const auto stage_split = split_layers(split, stages);
                const bool same_split =
                    split != splits.front() && stage_split && stage_split->empty();
                for (const auto zero : zeros) {
                  const auto groups = shard_groups(zero, dp * cp);
                  for (std::size_t gi = 0; gi < groups.size(); ++gi) {
                    const std::int64_t group = groups[gi];
                    const bool same_group =
                        std::find(groups.begin(), groups.begin() + static_cast<std::ptrdiff_t>(gi),
                                  group) != groups.begin() + static_cast<std::ptrdiff_t>(gi);
                    for (const bool sp : sps) {
                      for (const auto recompute : recomputes) {
                        for (const auto cp_algo : cp_algos) {
                          for (const auto mst : msts) {
                            for (const auto ep : eps) {
                              for (const auto etp : etps) {
                                ++en.combinations;
                                // Axes without effect on this plan take their first value only.
                                if ((dp == 1 && zero != zeros.front()) || same_group ||
                                    same_split || (tp == 1 && sp != sps.front()) ||
                                    (cp == 1 && cp_algo != cp_algos.front()) ||
                                    (!spec.model.moe &&
                                     (ep != eps.front() || etp != etps.front()))) {
                                  ++en.equivalent;
                                  continue;
                                }
                                p.ep = ep;
                                p.etp = etp;
                                p.tp = tp;
                                p.pp = pp;
                                p.cp = cp;
                                p.dp = dp;
                                p.micro_batch = mb;
                                p.global_batch = batch;
                                p.schedule = schedule;
                                p.vpp = vpp;
                                if (!stage_split) {
                                  reject(
                                      "--pp-split: a balanced split needs a layer per pipeline "
                                      "stage",
                                      std::to_string(stages) + " stages for " +
                                          std::to_string(layers) + " layers");
                                  continue;
                                }
                                if (pp > 1 && zero > spec.axes.pipeline_zero_stage_max) {
                                  reject("--zero: the framework runs higher ZeRO stages without "
                                         "pipeline parallelism only",
                                         "ZeRO " + std::to_string(zero) + " with pp " +
                                             std::to_string(pp) + " (the framework's largest with pp > 1: " +
                                             std::to_string(spec.axes.pipeline_zero_stage_max) + ")");
                                  continue;
                                }
                                p.pp_layers = *stage_split;
                                p.zero_stage = zero;
                                p.zero_shard_group = group;
                                p.sequence_parallel = sp;
                                // TP overlap pipelines sequence parallelism's collectives: plans
                                // without them run as they are.
                                p.tp_comm_overlap = spec.base.tp_comm_overlap && sp && tp > 1;
                                p.recompute = recompute;
                                p.cp_algo = cp_algo;
                                p.mst_chunks = mst;
                                // The all-to-all overlap where the plan allows it (expert
                                // parallelism, no full recompute, a schedule that pairs F and B).
                                p.moe_a2a_overlap = spec.base.moe_a2a_overlap && ep > 1 &&
                                                    recompute != parallel::Recompute::kFull &&
                                                    p.pairs_forward_backward();
                                valid = true;
                                config::check_plan_failures(p, spec.model, spec.cluster, n,
                                                            count_failure);
                                if (valid) {
                                  en.plans.push_back(p);
                                  continue;
                                }
                                ++en.rejected;
                                if (p.pp_layers.empty() && p.pp_layout.empty() && layers > 0 &&
                                    layers % (pp * p.model_chunks()) != 0) {
                                  ++en.uneven_stages;
                                }
                              }
                            }
                          }
                        }
                      }
                    }
                  }
                }
              }
            }
          }
        }
      }
    }
  };
  std::vector<Part> parts(tps.size());
  std::atomic<std::size_t> next{0};
  run_workers(static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(std::max(threads, 1)),
                                                     tps.size())),
              [&](int) {
                for (std::size_t i = next.fetch_add(1); i < tps.size(); i = next.fetch_add(1))
                  enumerate_tp(tps[i], parts[i]);
              });
  Enumeration en;
  ReasonCounter reasons;
  // Room for every plan at once: growing the vector part by part moved each plan (328 bytes)
  // several times, a tenth of the enumeration's time for the broad 530B space.
  std::size_t total = 0;
  for (const Part& part : parts) total += part.en.plans.size();
  en.plans.reserve(total);
  for (Part& part : parts) {
    en.combinations += part.en.combinations;
    en.equivalent += part.en.equivalent;
    en.rejected += part.en.rejected;
    en.uneven_stages += part.en.uneven_stages;
    en.plans.insert(en.plans.end(), std::make_move_iterator(part.en.plans.begin()),
                    std::make_move_iterator(part.en.plans.end()));
    reasons.merge(part.reasons);
  }
  en.reasons = reasons.sorted();
  return en;
}

Shard parse_shard(std::string_view text, std::string_view flag) {
  const auto slash = text.find('/');
  std::int64_t i = -1, k = -1;
  bool ok = slash != std::string_view::npos;
  if (ok) {
    const auto a = text.substr(0, slash), b = text.substr(slash + 1);
    const auto ra = std::from_chars(a.data(), a.data() + a.size(), i);
    const auto rb = std::from_chars(b.data(), b.data() + b.size(), k);
    ok = !a.empty() && !b.empty() && ra.ec == std::errc() && ra.ptr == a.data() + a.size() &&
         rb.ec == std::errc() && rb.ptr == b.data() + b.size() && k >= 1 && i >= 0 && i < k;
  }
  if (!ok) {
    bad_flag(flag, "expected I/N with 0 <= I < N, e.g. 0/4 (got '" + std::string(text) + "')");
  }
  return Shard{i, k};
}

std::optional<Shard> slurm_shard(const std::function<const char*(const char*)>& getenv) {
  const char* id = getenv("SLURM_ARRAY_TASK_ID");
  const char* count = getenv("SLURM_ARRAY_TASK_COUNT");
  if (id == nullptr || count == nullptr) return std::nullopt;
  const auto number = [](const char* name, const char* s, std::int64_t fallback) {
    if (s == nullptr) return fallback;
    std::int64_t v = 0;
    const std::string_view sv(s);
    const auto r = std::from_chars(sv.data(), sv.data() + sv.size(), v);
    if (sv.empty() || r.ec != std::errc() || r.ptr != sv.data() + sv.size()) {
      bad_flag(name, std::string("environment variable is not an integer: '") + s + "'");
    }
    return v;
  };
  const std::int64_t task = number("SLURM_ARRAY_TASK_ID", id, 0);
  const std::int64_t n = number("SLURM_ARRAY_TASK_COUNT", count, 1);
  const std::int64_t min = number("SLURM_ARRAY_TASK_MIN", getenv("SLURM_ARRAY_TASK_MIN"), 0);
  const std::int64_t step = number("SLURM_ARRAY_TASK_STEP", getenv("SLURM_ARRAY_TASK_STEP"), 1);
  if (n < 1 || step < 1 || task < min || (task - min) % step != 0 || (task - min) / step >= n) {
    bad_flag("SLURM_ARRAY_TASK_ID",
             "task " + std::to_string(task) + " is not one of " + std::to_string(n) +
                 " array tasks starting at " + std::to_string(min) + " with step " +
                 std::to_string(step) + "; pass --shard I/N explicitly");
  }
  return Shard{(task - min) / step, n};
}

namespace {

// One finished job, waiting for the writer.
struct Slot {
  std::string line;
  std::string status;
  double tokens_per_s = 0;
  double wall_s = 0;
  bool replayed = false;
  bool early_oom = false;
  std::int64_t tasks = 0;
  std::uint64_t events = 0;
  bool ready = false;
};

}  // namespace

SweepOutcome run_sweep(const SweepSpec& spec, const SweepOptions& options) {
  SweepOutcome out;
  if (!options.enumeration) out.enumeration = enumerate_plans(spec, sweep_threads(options.threads));
  const auto& plans = options.enumeration ? options.enumeration->plans : out.enumeration.plans;
  const auto total = static_cast<std::int64_t>(plans.size());
  if (options.shard.count < 1 || options.shard.index < 0 || options.shard.index >= options.shard.count) {
    bad_flag("--shard", "expected 0 <= I < N");
  }

  // Rows already written by an earlier run of the same sweep.
  ResumedRows resumed;
  if (options.out) {
    // Checked before anything of the file is read or changed.
    check_sweep_settings(spec, *options.out);
    resumed = read_resumed_rows(spec, plans, *options.out, options.shard);
  }
  std::map<std::int64_t, SweepRecord>& done = resumed.rows;
  const bool write_header = resumed.write_header;

  std::vector<std::int64_t> todo;
  if (options.only) {
    out.stats.in_shard = static_cast<std::int64_t>(options.only->size());
    for (const std::int64_t id : *options.only) {
      if (id >= 0 && id < total && options.shard.contains(id) && !done.count(id)) todo.push_back(id);
    }
  } else {
    for (std::int64_t id = options.shard.index; id < total; id += options.shard.count) {
      ++out.stats.in_shard;
      if (done.count(id)) continue;
      if (options.select && !options.select(id)) continue;
      todo.push_back(id);
    }
  }
  out.stats.resumed = static_cast<std::int64_t>(done.size());
  std::size_t jobs = todo.size();
  if (options.stop_after > 0) jobs = std::min(jobs, static_cast<std::size_t>(options.stop_after));

  std::FILE* file = nullptr;
  if (options.out) {
    file = std::fopen(options.out->string().c_str(), "ab");
    if (file == nullptr) {
      throw InputError(Diagnostic{options.out->string(), 0, "--out", "cannot open for writing"});
    }
    if (write_header) {
      write_sweep_settings(spec, *options.out);
      const auto h = sweep_csv_header(has_pp_layers_column(spec));
      std::fwrite(h.data(), 1, h.size(), file);
      std::fflush(file);
    }
  }

  int threads = sweep_threads(options.threads);
  threads = static_cast<int>(std::min<std::size_t>(static_cast<std::size_t>(threads), std::max<std::size_t>(jobs, 1)));
  out.stats.threads = threads;
  auto cache = options.compute_cache ? options.compute_cache
                                     : std::make_shared<config::ComputeModelCache>();
  // An unknown attention kernel is the user's error, reported once (InputError), not per row.
  if (!spec.base.attention_kernel.empty()) cache->get(spec.cluster.gpu, spec.base.attention_kernel);

  // Jobs are taken longest first, so that no long plan started last keeps one worker busy after
  // the others ran out of work (rows are still written in plan order). A plan's work is about
  // its blocks: per pipeline stage, one forward and one backward per micro-batch and model chunk.
  std::vector<std::size_t> order(jobs);
  for (std::size_t k = 0; k < jobs; ++k) order[k] = k;
  auto work = [&](std::size_t k) {
    const parallel::ParallelPlan& p = plans[static_cast<std::size_t>(todo[k])];
    return p.pp * p.num_micro_batches() * p.model_chunks();
  };
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return work(a) > work(b); });

  // Plans that lower alike (ZeRO 1 and 2) replay once for all workers.
  const auto memo = options.replay_memo ? options.replay_memo : std::make_shared<ReplayMemo>();

  std::vector<Slot> slots(jobs);
  std::mutex mutex;
  std::condition_variable cv;
  std::atomic<std::size_t> next{0};
  std::atomic<std::int64_t> finished{0};
  const auto t0 = Clock::now();

  std::size_t written = 0;  // rows written (guarded by `mutex`)

  auto worker = [&] {
    std::unique_ptr<Resources> owned =
        options.resource_pool ? options.resource_pool->take() : std::make_unique<Resources>(cache);
    Resources& resources = *owned;
    config::Scenario sc;
    sc.model = spec.model;
    sc.cluster = spec.cluster;
    sc.num_gpus = static_cast<std::int32_t>(spec.num_gpus);
    RunOptions ro;
    ro.replay_memo = memo;
    ro.only_critical_breakdown = true;  // the CSV has that one breakdown
    for (std::size_t n = next.fetch_add(1); n < jobs; n = next.fetch_add(1)) {
      const std::size_t k = order[n];
      const std::int64_t id = todo[k];
      sc.plan = plans[static_cast<std::size_t>(id)];
      Slot s;
      const auto start = Clock::now();
      try {
        const RunResult r = simulate(sc, ro, resources);
        s.wall_s = seconds_since(start);
        s.line = sweep_csv_row(id, spec, sc.plan, r);
        s.status = status_name(r.status);
        s.tokens_per_s = r.status == Status::kOk ? r.tokens_per_s : 0;
        s.replayed = r.tasks > 0;
        s.early_oom = r.status == Status::kOutOfMemory && r.tasks == 0;
        s.tasks = r.tasks;
        s.events = r.events;
      } catch (const std::exception& e) {
        // A bug for this plan: recorded as a row so that the sweep goes on and stays in order.
        s.wall_s = seconds_since(start);
        RunResult r;
        r.reason = std::string("internal error: ") + e.what();
        s.line = csv_row(id, spec, sc.plan, r, "error");
        s.status = "error";
      }
      s.ready = true;
      finished.fetch_add(1);
      bool awaited;
      {
        std::lock_guard<std::mutex> lock(mutex);
        slots[k] = std::move(s);
        awaited = k == written;
      }
      // The writer waits for the next row in plan order (and wakes for progress reports anyway):
      // waking it for any other costs a context switch per plan.
      if (awaited) cv.notify_one();
    }
    if (options.resource_pool) options.resource_pool->give(std::move(owned));
  };
  std::vector<std::thread> pool;
  pool.reserve(static_cast<std::size_t>(threads));
  for (int t = 0; t < threads && jobs > 0; ++t) pool.emplace_back(worker);

  // The writer: rows in plan order, each batch flushed, so that a killed run leaves a prefix.
  std::vector<SweepRecord> fresh;
  fresh.reserve(jobs);
  double best = 0;  // tokens/s of the best ok plan written (progress reports)
  std::string buffer;
  auto last_progress = Clock::now();
  const auto report = [&] {
    if (!options.progress) return;
    SweepProgress pr;
    pr.done = finished.load();
    pr.total = static_cast<std::int64_t>(jobs);
    pr.replayed = out.stats.replayed;
    pr.best_tokens_per_s = best;
    pr.elapsed_s = seconds_since(t0);
    options.progress(pr);
  };
  const auto interval = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(std::max(0.01, options.progress_interval_s)));
  while (written < jobs) {
    buffer.clear();
    {
      std::unique_lock<std::mutex> lock(mutex);
      cv.wait_for(lock, interval, [&] { return slots[written].ready; });
      while (written < jobs && slots[written].ready) {
        Slot& s = slots[written];
        buffer += s.line;
        SweepRecord rec;
        rec.plan_id = todo[written];
        rec.status = s.status;
        rec.tokens_per_s = s.tokens_per_s;
        rec.line = std::move(s.line);
        rec.line.pop_back();  // the newline
        fresh.push_back(std::move(rec));
        auto& st = out.stats;
        ++st.simulated;
        if (s.replayed) {
          ++st.replayed;
          const PlanTiming pt{todo[written], s.wall_s, s.tasks, s.events};
          if (st.fastest.plan_id < 0 || s.wall_s < st.fastest.wall_s) st.fastest = pt;
          if (st.slowest.plan_id < 0 || s.wall_s > st.slowest.wall_s) st.slowest = pt;
        }
        if (s.early_oom) ++st.early_oom;
        if (s.status == "unsupported") ++st.unsupported;
        if (s.status == "ok") {
          ++st.ok;
          best = std::max(best, s.tokens_per_s);
        }
        if (s.status == "oom" && s.replayed) ++st.oom;
        s = Slot{};
        ++written;
      }
    }
    if (file != nullptr && !buffer.empty()) {
      std::fwrite(buffer.data(), 1, buffer.size(), file);
      std::fflush(file);
    }
    if (Clock::now() - last_progress >= interval) {
      last_progress = Clock::now();
      report();
    }
  }
  for (auto& t : pool) t.join();
  out.stats.wall_s = seconds_since(t0);
  report();
  if (file != nullptr) std::fclose(file);

  // Every row of the shard in plan order: resumed ones and this run's.
  out.records.reserve(done.size() + fresh.size());
  auto f = fresh.begin();
  for (auto& [id, rec] : done) {
    while (f != fresh.end() && f->plan_id < id) out.records.push_back(std::move(*f++));
    out.records.push_back(std::move(rec));
  }
  while (f != fresh.end()) out.records.push_back(std::move(*f++));
  return out;
}

std::unique_ptr<Resources> ResourcePool::take() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (free_.empty()) return std::make_unique<Resources>(cache_);
  auto r = std::move(free_.back());
  free_.pop_back();
  return r;
}

void ResourcePool::give(std::unique_ptr<Resources> resources) {
  std::lock_guard<std::mutex> lock(mutex_);
  free_.push_back(std::move(resources));
}

}  // namespace ts::driver
