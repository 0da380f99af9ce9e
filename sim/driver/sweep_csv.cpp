// The sweep CSV: header, rows and plan keys, reading a file back (resumption), the merge of
// shards and the table of the best plans.
#include "sim/driver/sweep_csv.h"

#include <algorithm>
#include <charconv>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>

#include "sim/base/diagnostic.h"
#include "sim/base/format.h"
#include "sim/config/names.h"
#include "sim/runtime/breakdown.h"

namespace ts::driver {
namespace {

[[noreturn]] void bad_flag(std::string_view flag, std::string message) {
  throw InputError(Diagnostic{"", 0, std::string(flag), std::move(message)});
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

std::string join_layers(const std::vector<std::int64_t>& layers) {
  std::string s;
  for (auto n : layers) s += (s.empty() ? "" : ",") + std::to_string(n);
  return s;
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

ResumedRows read_resumed_rows(const SweepSpec& spec, const std::vector<parallel::ParallelPlan>& plans,
                              const std::filesystem::path& path, const Shard& shard) {
  ResumedRows resumed;
  if (!std::filesystem::exists(path)) return resumed;
  const auto total = static_cast<std::int64_t>(plans.size());
  bool empty = true;
  bool pp_layers_column = false;
  auto rows = read_sweep_file(path, true, empty, pp_layers_column);
  resumed.write_header = empty;
  if (!empty && pp_layers_column != has_pp_layers_column(spec)) {
    throw InputError(
        Diagnostic{path.string(), 1, "--out",
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
      throw InputError(Diagnostic{path.string(), line_no, "--out",
                                  "row of plan " + std::to_string(r.plan_id) +
                                      " was written by a different sweep (other model, cluster, "
                                      "GPUs, batch or axes); use another output file"});
    }
    if (!shard.contains(r.plan_id)) {
      throw InputError(Diagnostic{path.string(), line_no, "--shard",
                                  "plan " + std::to_string(r.plan_id) + " belongs to another shard "
                                  "than " + std::to_string(shard.index) + "/" +
                                  std::to_string(shard.count)});
    }
    resumed.rows.emplace(r.plan_id, std::move(r));
  }
  return resumed;
}


namespace {

// One setting of the settings file: its name there, the flag that sets it, its value.
struct Setting {
  const char* name;
  const char* flag;
  std::string value;
};

std::vector<Setting> sweep_settings(const SweepSpec& spec) {
  const parallel::ParallelPlan& b = spec.base;
  const auto yes_no = [](bool v) { return std::string(v ? "true" : "false"); };
  return {
      {"framework", "--framework", spec.framework},
      {"launch_blocking", "--launch-blocking", yes_no(b.launch_blocking)},
      {"moe_a2a_overlap", "--moe-a2a-overlap", yes_no(b.moe_a2a_overlap)},
      {"moe_dispatcher", "--moe-dispatcher", std::string(config::name(b.moe_dispatcher))},
      {"routing", "--routing", config::format_routing(b.routing, b.capacity_factor)},
      {"moe_imbalance", "--moe-imbalance", format_double("%.17g", b.moe_imbalance)},
      {"fp8_attention", "--fp8-attention", yes_no(b.fp8_attention)},
      {"grad_bucket_params", "--grad-bucket-params", std::to_string(b.grad_bucket_params)},
      // Set by a framework profile only (sweep has no flag of its own for it).
      {"cross_entropy", "--framework", std::string(config::name(b.cross_entropy))},
      {"gpus_used_per_domain", "--gpus-per-domain",
       std::to_string(spec.cluster.cluster.scale_up.gpus_used_per_domain)},
  };
}

}  // namespace

std::filesystem::path sweep_settings_path(const std::filesystem::path& csv) {
  std::filesystem::path p = csv;
  p += ".settings";
  return p;
}

std::string sweep_settings_text(const SweepSpec& spec) {
  std::string text =
      "# base settings of a trainsim sweep CSV that are no column of it "
      "(checked on --out resume)\n";
  for (const Setting& s : sweep_settings(spec)) {
    text += s.name;
    text += '=';
    text += s.value;
    text += '\n';
  }
  return text;
}

void check_sweep_settings(const SweepSpec& spec, const std::filesystem::path& csv) {
  const auto path = sweep_settings_path(csv);
  std::error_code ec;
  if (!std::filesystem::exists(path, ec) || std::filesystem::file_size(csv, ec) == 0) return;
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Diagnostic{path.string(), 0, "--out", "cannot open the file"});
  std::map<std::string, std::pair<std::string, int>> recorded;  // name → value, line
  std::string line;
  int line_no = 0;
  while (std::getline(in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty() || line.front() == '#') continue;
    const auto eq = line.find('=');
    if (eq == std::string::npos) {
      throw InputError(Diagnostic{path.string(), line_no, "--out",
                                  "expected name=value (got '" + line + "')"});
    }
    recorded[line.substr(0, eq)] = {line.substr(eq + 1), line_no};
  }
  for (const Setting& s : sweep_settings(spec)) {
    const auto it = recorded.find(s.name);
    if (it == recorded.end()) {
      throw InputError(Diagnostic{path.string(), 0, s.flag,
                                  std::string("the settings of ") + csv.string() + " lack " +
                                      s.name + ": written by another version; use another "
                                      "output file"});
    }
    if (it->second.first == s.value) continue;
    throw InputError(Diagnostic{path.string(), it->second.second, s.flag,
                                std::string("the rows of ") + csv.string() +
                                    " were simulated with " + s.name + " = '" +
                                    it->second.first + "', this run has '" + s.value +
                                    "': resume with the same setting or use another output "
                                    "file"});
  }
}

void write_sweep_settings(const SweepSpec& spec, const std::filesystem::path& csv) {
  const auto path = sweep_settings_path(csv);
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const std::string text = sweep_settings_text(spec);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  out.close();
  if (!out) throw InputError(Diagnostic{path.string(), 0, "--out", "cannot write the file"});
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
