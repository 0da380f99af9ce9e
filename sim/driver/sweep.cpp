// Sweeps: plan enumeration, the parallel runner with ordered, resumable output, CSV and merge.
#include "sim/base/format.h"
#include "sim/driver/sweep.h"

#include <algorithm>
#include <atomic>
#include <charconv>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <optional>
#include <sstream>
#include <thread>

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
std::string rule_of(const Diagnostic& d) {
  std::string out;
  int depth = 0;
  bool in_number = false;
  for (char c : d.message) {
    if (c == '(') {
      ++depth;
      continue;
    }
    if (c == ')') {
      if (depth > 0) --depth;
      continue;
    }
    if (depth > 0) continue;
    if (c >= '0' && c <= '9') {
      if (!in_number) out += 'N';
      in_number = true;
      continue;
    }
    in_number = false;
    out += c;
  }
  // Collapse the blanks left behind by removed details.
  std::string tidy;
  for (char c : out) {
    if (c == ' ' && (tidy.empty() || tidy.back() == ' ')) continue;
    tidy += c;
  }
  while (!tidy.empty() && (tidy.back() == ' ' || tidy.back() == ',')) tidy.pop_back();
  return d.field + ": " + tidy;
}

class ReasonCounter {
 public:
  void add(const std::string& rule, const std::string& example) {
    auto [it, inserted] = index_.try_emplace(rule, reasons_.size());
    if (inserted) reasons_.push_back(RejectReason{rule, 0, example});
    ++reasons_[it->second].count;
  }
  std::vector<RejectReason> sorted() const {
    auto out = reasons_;
    std::stable_sort(out.begin(), out.end(),
                     [](const RejectReason& a, const RejectReason& b) { return a.count > b.count; });
    return out;
  }

 private:
  std::map<std::string, std::size_t> index_;
  std::vector<RejectReason> reasons_;
};

bool contains(const std::vector<std::int64_t>& v, std::int64_t x) {
  return std::binary_search(v.begin(), v.end(), x);
}

// Shortest round-trip-safe form is not needed: 9 significant digits identify a double to well
// below any modelled effect, and the same double always prints the same.
std::string num(double v) { return format_double("%.9g", v); }

std::string quote(std::string_view s) {  // RFC 4180; newlines would break line-based reading
  std::string o = "\"";
  for (char c : s) {
    if (c == '"') o += '"';
    o += (c == '\n' || c == '\r') ? ' ' : c;
  }
  o += '"';
  return o;
}

constexpr const char* kPlanColumns =
    "model,cluster,gpu,num_gpus,global_batch,seq_len,dtype,order,optimizer_states,grad_reduce,"
    "optimizer_in_backward,overlap_grad_reduce,overlap_param_gather,tp,pp,dp,cp,vpp,micro_batch,schedule,zero,"
    "zero_shard_group,sequence_parallel,"
    "recompute,cp_algo,mst_chunks,attention,tp_comm_overlap,host_dispatch_us,fp8_weight_cache,elementwise,ep,etp";

std::size_t count_columns(std::string_view header) {
  return static_cast<std::size_t>(std::count(header.begin(), header.end(), ',')) + 1;
}

std::int64_t parse_id(const std::string& s, const std::filesystem::path& file, int line) {
  std::int64_t v = -1;
  const auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size() || v < 0) {
    throw InputError(Diagnostic{file.string(), line, "plan_id", "not a plan id: '" + s + "'"});
  }
  return v;
}

double parse_double(const std::string& s) {
  try {
    return s.empty() ? 0.0 : std::stod(s);
  } catch (const std::exception&) {
    return 0.0;
  }
}

struct HeaderIndex {
  std::size_t status = 0, tokens_per_s = 0;
};
HeaderIndex header_index() {
  HeaderIndex h;
  const auto cols = split_csv_line(sweep_csv_header());
  for (std::size_t i = 0; i < cols.size(); ++i) {
    if (cols[i] == "status") h.status = i;
    if (cols[i] == "tokens_per_s") h.tokens_per_s = i;
  }
  return h;
}

// "20,20,21,19"; empty for an even split.
std::string join_layers(const std::vector<std::int64_t>& layers) {
  std::string s;
  for (auto n : layers) s += (s.empty() ? "" : ",") + std::to_string(n);
  return s;
}

// Reads a sweep CSV: checks the header (with or without the pp_layers column, said in
// `pp_layers_column`), parses the rows. `fix_partial` truncates a last line without its newline
// (what a killed writer can leave) instead of reading it.
std::vector<SweepRecord> read_sweep_file(const std::filesystem::path& path, bool fix_partial,
                                         bool& empty, bool& pp_layers_column) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Diagnostic{path.string(), 0, "", "cannot open the file"});
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  in.close();
  if (!text.empty() && text.back() != '\n') {
    const auto cut = text.rfind('\n');
    text.resize(cut == std::string::npos ? 0 : cut + 1);
    if (fix_partial) std::filesystem::resize_file(path, text.size());
  }
  empty = text.empty();
  std::vector<SweepRecord> out;
  if (text.empty()) return out;
  const std::string header = sweep_csv_header();
  const std::string plain = header.substr(0, header.size() - 1);
  const std::string with_layers = plain + ",pp_layers";
  std::size_t columns = count_columns(plain);
  const HeaderIndex hx = header_index();
  pp_layers_column = false;
  std::size_t pos = 0;
  int line_no = 0;
  while (pos < text.size()) {
    const auto end = text.find('\n', pos);
    std::string line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line_no == 1) {
      if (line != plain && line != with_layers) {
        throw InputError(Diagnostic{path.string(), 1, "",
                                    "not a sweep CSV of this trainsim version: the header differs "
                                    "from '" +
                                        plain + "' (and from it with ',pp_layers')"});
      }
      pp_layers_column = line == with_layers;
      if (pp_layers_column) ++columns;
      continue;
    }
    if (line.empty()) continue;
    auto fields = split_csv_line(line);
    if (fields.size() != columns) {
      throw InputError(Diagnostic{path.string(), line_no, "",
                                  "has " + std::to_string(fields.size()) + " columns, expected " +
                                      std::to_string(columns)});
    }
    SweepRecord r;
    r.plan_id = parse_id(fields[0], path, line_no);
    r.status = fields[hx.status];
    r.tokens_per_s = parse_double(fields[hx.tokens_per_s]);
    r.line = std::move(line);
    out.push_back(std::move(r));
  }
  return out;
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
  return {block_seconds(ir::build_embedding(model, shape)) / per_layer,
          block_seconds(ir::build_lm_head(model, shape)) / per_layer};
}

Enumeration enumerate_plans(const SweepSpec& spec) {
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
      case parallel::PipelineSplit::kBalanced: {
        if (stages > spec.model.num_layers) return std::nullopt;
        auto v = parallel::balanced_stage_layers(spec.model.num_layers, stages, ends.embedding,
                                                 ends.lm_head);
        if (std::all_of(v.begin(), v.end(), [&](std::int64_t x) { return x == v.front(); }))
          v.clear();
        return v;
      }
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

  Enumeration en;
  ReasonCounter reasons;
  const auto reject = [&](const std::string& rule, const std::string& example) {
    ++en.rejected;
    reasons.add(rule, example);
  };
  const std::int64_t layers = spec.model.num_layers;
  parallel::ParallelPlan p = spec.base;
  for (const auto tp : tps) {
    for (const auto pp : pps) {
      for (const auto cp : cps) {
        std::int64_t mp = 0;
        if (__builtin_mul_overflow(tp, pp, &mp) || __builtin_mul_overflow(mp, cp, &mp) || n % mp != 0) {
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
              const std::int64_t stages =
                  schedule == parallel::Schedule::kInterleaved ? pp * vpp : pp;
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
                            if ((dp == 1 && zero != zeros.front()) || same_group || same_split ||
                                (tp == 1 && sp != sps.front()) ||
                                (cp == 1 && cp_algo != cp_algos.front()) ||
                                (!spec.model.moe && (ep != eps.front() || etp != etps.front()))) {
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
                                  "--pp-split: a balanced split needs a layer per pipeline stage",
                                  std::to_string(stages) + " stages for " + std::to_string(layers) +
                                      " layers");
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
                            const auto diags = config::check_plan(p, spec.model, spec.cluster, n);
                            if (diags.empty()) {
                              en.plans.push_back(p);
                              continue;
                            }
                            ++en.rejected;
                            for (const auto& d : diags) reasons.add(rule_of(d), d.to_string());
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

std::string fold_layer_counts(std::string_view pp_layers) {
  const auto v = split_csv_line(pp_layers);
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j < v.size() && v[j] == v[i]) ++j;
    out += (out.empty() ? "" : ",") + v[i] + (j - i > 1 ? "x" + std::to_string(j - i) : "");
    i = j;
  }
  return out;
}

bool has_pp_layers_column(const SweepSpec& spec) {
  const auto& v = spec.axes.pp_split;
  return std::find(v.begin(), v.end(), parallel::PipelineSplit::kBalanced) != v.end();
}

std::string sweep_csv_header(bool pp_layers_column) {
  std::string h = "plan_id,";
  h += kPlanColumns;
  h += ",status,iteration_time_s,tokens_per_s,tflops_per_gpu,mfu,peak_memory_bytes,"
       "memory_capacity_bytes,weights_bytes,gradients_bytes,optimizer_states_bytes,"
       "activations_bytes,cuda_context_bytes,nccl_buffers_bytes,fragmentation_bytes";
  for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) {
    h += ',';
    h += runtime::time_category_name(static_cast<runtime::TimeCategory>(c));
    h += "_s";
  }
  h += pp_layers_column ? ",reason,pp_layers\n" : ",reason\n";
  return h;
}

std::string sweep_plan_key(const SweepSpec& spec, const parallel::ParallelPlan& p) {
  const auto i = [](std::int64_t v) { return std::to_string(v); };
  std::string k;
  k.reserve(160);
  // Names are quoted: a fabric variant's cluster name has a comma ("dgx-h100 @400G x8, 2:1").
  k += quote(spec.model.name) + ',' + quote(spec.cluster.cluster.name) + ',' +
       quote(spec.cluster.gpu.name) + ',' +
       i(spec.num_gpus) + ',' + i(p.global_batch) + ',' + i(p.seq_len) + ',' +
       std::string(config::name(p.dtype)) + ',' + quote(config::format_order(p.order)) + ',' +
       std::string(config::name(p.optimizer_states)) + ',' + std::string(config::name(p.grad_reduce)) + ',' +
       (p.optimizer_in_backward ? "true" : "false") + ',' +
       (p.overlap_grad_reduce ? "true" : "false") + ',' + (p.overlap_param_gather ? "true" : "false") +
       ',' + i(p.tp) + ',' + i(p.pp) + ',' +
       i(p.dp) + ',' + i(p.cp) + ',' + i(p.vpp) + ',' + i(p.micro_batch) + ',' +
       std::string(config::name(p.schedule)) + ',' + i(p.zero_stage) + ',' + i(p.zero_shard_group) + ',' +
       (p.sequence_parallel ? "true" : "false") + ',' + std::string(config::name(p.recompute)) +
       ',' + std::string(config::name(p.cp_algo)) + ',' + i(p.mst_chunks) + ',' +
       quote(p.attention_label()) +
       ',' + (p.tp_comm_overlap ? "true" : "false") + ',' + format_double("%.6g", p.host_dispatch.us()) + ',' +
       (p.fp8_weight_cache ? "true" : "false") + ',' + std::string(config::name(p.elementwise)) + ',' +
       i(p.ep) + ',' + i(p.etp);
  return k;
}

namespace {

std::string csv_row(std::int64_t plan_id, const SweepSpec& spec, const parallel::ParallelPlan& plan,
                    const RunResult& r, std::string_view status) {
  std::string row = std::to_string(plan_id) + ',' + sweep_plan_key(spec, plan) + ',' +
                    std::string(status) + ',' + num(r.iteration_time_s) + ',' +
                    num(r.tokens_per_s) + ',' + num(r.tflops_per_gpu) + ',' + num(r.mfu) + ',' +
                    std::to_string(r.peak_memory.count()) + ',' +
                    std::to_string(r.memory_capacity.count()) + ',' +
                    std::to_string(r.memory.weights.count()) + ',' +
                    std::to_string(r.memory.gradients.count()) + ',' +
                    std::to_string(r.memory.optimizer_states.count()) + ',' +
                    std::to_string(r.memory.activations.count()) + ',' +
                    std::to_string(r.memory.cuda_context.count()) + ',' +
                    std::to_string(r.memory.nccl_buffers.count()) + ',' +
                    std::to_string(r.memory.fragmentation.count());
  for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) {
    row += ',';
    row += num(r.time.time[c].seconds());
  }
  row += ',';
  row += quote(r.reason);
  if (has_pp_layers_column(spec)) {
    row += ',';
    row += quote(join_layers(plan.pp_layers));
  }
  row += '\n';
  return row;
}

}  // namespace

std::string sweep_csv_row(std::int64_t plan_id, const SweepSpec& spec,
                          const parallel::ParallelPlan& plan, const RunResult& r) {
  return csv_row(plan_id, spec, plan, r, status_name(r.status));
}

std::vector<std::string> split_csv_line(std::string_view line) {
  std::vector<std::string> out;
  std::string cur;
  bool quoted = false;
  for (std::size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (quoted) {
      if (c == '"') {
        if (i + 1 < line.size() && line[i + 1] == '"') {
          cur += '"';
          ++i;
        } else {
          quoted = false;
        }
      } else {
        cur += c;
      }
    } else if (c == '"') {
      quoted = true;
    } else if (c == ',') {
      out.push_back(std::move(cur));
      cur.clear();
    } else if (c != '\n' && c != '\r') {
      cur += c;
    }
  }
  out.push_back(std::move(cur));
  return out;
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
  out.enumeration = enumerate_plans(spec);
  const auto& plans = out.enumeration.plans;
  const auto total = static_cast<std::int64_t>(plans.size());
  if (options.shard.count < 1 || options.shard.index < 0 || options.shard.index >= options.shard.count) {
    bad_flag("--shard", "expected 0 <= I < N");
  }

  // Rows already written by an earlier run of the same sweep.
  std::map<std::int64_t, SweepRecord> done;
  bool write_header = true;
  if (options.out && std::filesystem::exists(*options.out)) {
    bool empty = true;
    bool pp_layers_column = false;
    auto rows = read_sweep_file(*options.out, true, empty, pp_layers_column);
    write_header = empty;
    if (!empty && pp_layers_column != has_pp_layers_column(spec)) {
      throw InputError(
          Diagnostic{options.out->string(), 1, "--out",
                     std::string("the file ") + (pp_layers_column ? "has" : "lacks") +
                         " the pp_layers column of sweeps with --pp-split balanced; use "
                         "another output file"});
    }
    int line_no = 1;
    for (auto& r : rows) {
      ++line_no;
      // A row is this sweep's if it starts with the id and the key of the plan with that id (and
      // ends with its pipeline split, where the file has that column).
      const auto* plan = r.plan_id < total ? &plans[static_cast<std::size_t>(r.plan_id)] : nullptr;
      const bool known =
          plan != nullptr &&
          r.line.starts_with(std::to_string(r.plan_id) + ',' + sweep_plan_key(spec, *plan) + ',') &&
          (!pp_layers_column || r.line.ends_with(',' + quote(join_layers(plan->pp_layers))));
      if (!known) {
        throw InputError(Diagnostic{options.out->string(), line_no, "--out",
                                    "row of plan " + std::to_string(r.plan_id) +
                                        " was written by a different sweep (other model, cluster, "
                                        "GPUs, batch or axes); use another output file"});
      }
      if (!options.shard.contains(r.plan_id)) {
        throw InputError(Diagnostic{options.out->string(), line_no, "--shard",
                                    "plan " + std::to_string(r.plan_id) + " belongs to another shard "
                                    "than " + std::to_string(options.shard.index) + "/" +
                                    std::to_string(options.shard.count)});
      }
      done.emplace(r.plan_id, std::move(r));
    }
  }

  std::vector<std::int64_t> todo;
  for (std::int64_t id = options.shard.index; id < total; id += options.shard.count) {
    ++out.stats.in_shard;
    if (done.count(id)) continue;
    if (options.select && !options.select(id)) continue;
    todo.push_back(id);
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
      const auto h = sweep_csv_header(has_pp_layers_column(spec));
      std::fwrite(h.data(), 1, h.size(), file);
      std::fflush(file);
    }
  }

  int threads = options.threads > 0 ? options.threads
                                    : static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
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
  const auto memo = std::make_shared<ReplayMemo>();

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
  std::string buffer;
  auto last_progress = Clock::now();
  const auto report = [&] {
    if (!options.progress) return;
    SweepProgress pr;
    pr.done = finished.load();
    pr.total = static_cast<std::int64_t>(jobs);
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
        if (s.status == "ok") ++st.ok;
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

std::vector<SweepRecord> top_records(const std::vector<SweepRecord>& records, std::size_t k) {
  std::vector<SweepRecord> ok;
  for (const auto& r : records) {
    if (r.status == "ok") ok.push_back(r);
  }
  std::stable_sort(ok.begin(), ok.end(), [](const SweepRecord& a, const SweepRecord& b) {
    if (a.tokens_per_s != b.tokens_per_s) return a.tokens_per_s > b.tokens_per_s;
    return a.plan_id < b.plan_id;
  });
  if (k > 0 && ok.size() > k) ok.resize(k);
  return ok;
}

std::string format_top_table(const std::vector<SweepRecord>& records) {
  // ZeRO-3's shard group: "all" data-parallel ranks, or the group size.
  const auto shard_text = [](const std::string& group) { return group == "0" ? std::string("all") : group; };
  const auto cols = split_csv_line(sweep_csv_header());
  std::map<std::string, std::size_t> at;
  for (std::size_t i = 0; i < cols.size(); ++i) at[cols[i]] = i;
  const std::vector<std::string> heads = {"rank", "tokens/s", "MFU", "iter s", "peak GiB", "tp",
                                          "pp", "dp", "cp", "vpp", "mb", "schedule", "zero",
                                          "shard", "sp", "recompute", "cp-algo", "mst", "ep", "plan"};
  std::vector<std::vector<std::string>> table = {heads};
  std::size_t rank = 0;
  for (const auto& r : records) {
    const auto f = split_csv_line(r.line);
    const auto get = [&](const char* c) { return f[at.at(c)]; };
    // A balanced pipeline split (the pp_layers column after the reason) follows pp.
    const std::string pp_text = f.size() > cols.size() && !f.back().empty()
                                    ? get("pp") + " [" + fold_layer_counts(f.back()) + "]"
                                    : get("pp");
    table.push_back({std::to_string(++rank),
                     format_double("%.0f", parse_double(get("tokens_per_s"))),
                     format_double("%.1f%%", 100.0 * parse_double(get("mfu"))),
                     format_double("%.3f", parse_double(get("iteration_time_s"))),
                     format_double("%.1f", parse_double(get("peak_memory_bytes")) / 1073741824.0),
                     get("tp"), pp_text, get("dp"), get("cp"), get("vpp"), get("micro_batch"),
                     get("schedule"), get("zero"), shard_text(get("zero_shard_group")),
                     get("sequence_parallel") == "true" ? "on" : "off", get("recompute"),
                     get("cp_algo"), get("mst_chunks"), get("ep"), std::to_string(r.plan_id)});
  }
  std::vector<std::size_t> width(heads.size(), 0);
  for (const auto& row : table) {
    for (std::size_t c = 0; c < row.size(); ++c) width[c] = std::max(width[c], row[c].size());
  }
  std::string s;
  for (const auto& row : table) {
    for (std::size_t c = 0; c < row.size(); ++c) {
      // Numbers right-aligned, words left-aligned.
      const bool left = c == 11 || (c >= 14 && c <= 16);
      const std::string pad(width[c] - row[c].size(), ' ');
      s += left ? row[c] + pad : pad + row[c];
      s += c + 1 < row.size() ? "  " : "\n";
    }
  }
  return s;
}

MergeResult merge_sweep_files(const std::vector<std::filesystem::path>& inputs) {
  if (inputs.empty()) bad_flag("inputs", "no sweep files given");
  MergeResult m;
  std::map<std::int64_t, SweepRecord> rows;
  std::optional<bool> layers_column;  // of the first input with a header
  for (const auto& path : inputs) {
    if (!std::filesystem::exists(path)) {
      throw InputError(Diagnostic{path.string(), 0, "", "no such file"});
    }
    bool empty = true;
    bool pp_layers_column = false;
    auto records = read_sweep_file(path, false, empty, pp_layers_column);
    if (!empty && layers_column && *layers_column != pp_layers_column) {
      throw InputError(Diagnostic{path.string(), 1, "",
                                  "the header differs from the other inputs' (pp_layers column): "
                                  "the files come from different sweeps"});
    }
    if (!empty) layers_column = pp_layers_column;
    for (auto& r : records) {
      auto [it, inserted] = rows.try_emplace(r.plan_id, r);
      if (inserted) continue;
      if (it->second.line != r.line) {
        throw InputError(Diagnostic{path.string(), 0, "plan_id",
                                    "plan " + std::to_string(r.plan_id) + " has a different row "
                                    "in another input: the files come from different sweeps"});
      }
      ++m.duplicates;
    }
  }
  m.csv = sweep_csv_header(layers_column.value_or(false));
  std::int64_t expect = 0;
  for (auto& [id, r] : rows) {
    for (; expect < id; ++expect) {
      if (m.missing.size() < 20) m.missing.push_back(expect);
      ++m.missing_count;
    }
    expect = id + 1;
    m.csv += r.line;
    m.csv += '\n';
    m.records.push_back(std::move(r));
  }
  return m;
}

}  // namespace ts::driver
