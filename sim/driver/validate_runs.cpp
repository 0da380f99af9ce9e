// Reading published-runs CSV files (tests/validation/README.md) into PublishedRun rows.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <regex>
#include <sstream>

#include "sim/base/diagnostic.h"
#include "sim/base/format.h"
#include "sim/driver/csv.h"
#include "sim/driver/validate.h"
#include "sim/driver/validate_text.h"

namespace ts::driver {

using reading::has;
using reading::starts_with_nocase;
using reading::trim;

namespace {

// "2048", "1008.0", "60k", "1.31M", "44%", "~8", "≈8", "up to 147", "about 150", "12,036": the
// number, nullopt for an empty cell, or false in `ok` for anything else. `binary_k` reads k/K
// and M as 1024 and 1024² (token lengths: "8K" = 8192, "128K" = 131072) instead of 10³ and 10⁶.
std::optional<double> parse_number(const std::string& cell, bool& ok, bool binary_k = false) {
  ok = true;
  std::string s = trim(cell);
  // A remark after the number: "8 (derived)", "2048 (2^11)".
  if (const auto open = s.rfind('('); open != std::string::npos && open > 0 && s.back() == ')') {
    s = trim(s.substr(0, open));
  }
  if (s.empty()) return std::nullopt;
  // What tables print for "no value": "-", "–", "—", "n/a", "?", "not stated".
  {
    const std::string l = to_lower(s);
    for (std::string_view none : {"-", "\u2013", "\u2014", "n/a", "na", "?", "none", "not stated", "unknown"}) {
      if (l == none) return std::nullopt;
    }
  }
  // Qualifiers authors put before a number: approximately, at most.
  for (std::string_view q : {"~", "\u2248", "up to ", "about ", "approx. ", "approx "}) {
    if (starts_with_nocase(s, q)) s = trim(s.substr(q.size()));
  }
  double scale = 1;
  if (!s.empty() && s.back() == '%') s = trim(s.substr(0, s.size() - 1));
  if (!s.empty() && (s.back() == 'k' || s.back() == 'K')) {
    scale = binary_k ? 1024.0 : 1e3;
    s.pop_back();
  } else if (!s.empty() && s.back() == 'M') {
    scale = binary_k ? 1048576.0 : 1e6;
    s.pop_back();
  }
  // Thousands separators: "16,384", "1,071.5".
  static const std::regex kThousands(R"(\d{1,3}(,\d{3})+(\.\d+)?)");
  if (std::regex_match(s, kThousands)) s.erase(std::remove(s.begin(), s.end(), ','), s.end());
  if (s.empty()) {
    ok = false;
    return std::nullopt;
  }
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) {
    ok = false;
    return std::nullopt;
  }
  return v * scale;
}

}  // namespace

const std::vector<std::string>& published_run_columns() {
  static const std::vector<std::string> kColumns = {
      "run_id", "source", "source_table", "trust", "model", "n_params_b", "n_layers", "hidden",
      "n_heads", "n_kv_heads", "ffn_hidden", "vocab", "seq_len", "global_batch", "micro_batch",
      "grad_accum", "tp", "pp", "vpp", "dp", "cp", "zero_fsdp", "sequence_parallel", "recompute",
      "precision", "n_gpus", "gpu", "interconnect", "framework", "tflops_per_gpu", "tflops_kind",
      "mfu_pct", "hfu_pct", "tokens_per_s", "tokens_per_s_per_gpu", "iter_time_s", "peak_mem",
      "peak_mem_unit", "max_seq_len", "notes"};
  return kColumns;
}

std::vector<PublishedRun> parse_published_runs(const std::string& text, const std::string& file) {
  const csv::Table table = csv::parse_table(text, file);
  DiagnosticList problems;
  std::map<std::string, std::size_t> col;
  for (const auto& name : published_run_columns()) {
    const int i = table.column(name);
    if (i < 0) {
      problems.add(Diagnostic{file, 1, name, "required column is missing from the header"});
    } else {
      col[name] = static_cast<std::size_t>(i);
    }
  }
  problems.throw_if_any();
  // The optional columns of mixture-of-experts rows.
  for (const char* name : {"zoo_model", "num_experts", "top_k", "moe_ffn_hidden", "shared_experts", "ep", "etp"}) {
    if (const int i = table.column(name); i >= 0) col[name] = static_cast<std::size_t>(i);
  }

  std::vector<PublishedRun> runs;
  for (const auto& rec : table.rows) {
    PublishedRun r;
    r.file = file;
    r.line = rec.line;
    const auto text_of = [&](const char* name) { return trim(rec.fields[col.at(name)]); };
    r.run_id = text_of("run_id");
    const std::string row_name = r.run_id.empty() ? "row at line " + std::to_string(rec.line)
                                                  : "run_id " + r.run_id;
    const auto bad = [&](const char* name, const std::string& what) {
      problems.add(Diagnostic{file, rec.line, name,
                              row_name + ": '" + text_of(name) + "' is not " + what});
    };
    // `cell`: the column's text, less a unit that the column already implies ("175B" in n_params_b).
    const auto real_of = [&](const char* name, const std::string& cell) -> std::optional<double> {
      bool ok = true;
      auto v = parse_number(cell, ok);
      if (!ok) bad(name, "a number");
      return v;
    };
    const auto real = [&](const char* name) { return real_of(name, text_of(name)); };
    const auto integer = [&](const char* name, bool binary_k = false) -> std::optional<std::int64_t> {
      bool ok = true;
      auto v = parse_number(text_of(name), ok, binary_k);
      if (!ok || (v && (std::fabs(*v - std::round(*v)) > 1e-9 * std::max(1.0, std::fabs(*v)) ||
                        std::fabs(*v) > 9e15))) {
        bad(name, "an integer");
        return std::nullopt;
      }
      if (!v) return std::nullopt;
      return static_cast<std::int64_t>(std::llround(*v));
    };
    r.source = text_of("source");
    r.source_table = text_of("source_table");
    r.trust = text_of("trust");
    r.model = text_of("model");
    {
      // "175B", "6.7 B": the column is in billions already.
      std::string cell = text_of("n_params_b");
      if (!cell.empty() && (cell.back() == 'B' || cell.back() == 'b')) cell = trim(cell.substr(0, cell.size() - 1));
      r.n_params_b = real_of("n_params_b", cell);
    }
    r.n_layers = integer("n_layers");
    r.hidden = integer("hidden");
    r.n_heads = integer("n_heads");
    r.n_kv_heads = integer("n_kv_heads");
    r.ffn_hidden = integer("ffn_hidden");
    r.vocab = integer("vocab");
    r.seq_len = integer("seq_len", /*binary_k=*/true);  // "8K" context = 8192 tokens
    r.global_batch = integer("global_batch");
    r.micro_batch = integer("micro_batch");
    r.grad_accum = integer("grad_accum");
    r.tp = integer("tp");
    r.pp = integer("pp");
    r.vpp = integer("vpp");
    r.dp = integer("dp");
    r.cp = integer("cp");
    r.zero_fsdp = text_of("zero_fsdp");
    r.sequence_parallel = text_of("sequence_parallel");
    r.recompute = text_of("recompute");
    r.precision = text_of("precision");
    r.n_gpus = integer("n_gpus");
    r.gpu = text_of("gpu");
    r.interconnect = text_of("interconnect");
    r.framework = text_of("framework");
    r.tflops_per_gpu = real("tflops_per_gpu");
    r.tflops_kind = text_of("tflops_kind");
    r.mfu_pct = real("mfu_pct");
    r.hfu_pct = real("hfu_pct");
    r.tokens_per_s = real("tokens_per_s");
    r.tokens_per_s_per_gpu = real("tokens_per_s_per_gpu");
    r.iter_time_s = real("iter_time_s");
    r.peak_mem_unit = text_of("peak_mem_unit");
    {
      // "82.4 GiB": a unit written in the value cell; it fills an empty peak_mem_unit.
      std::string cell = text_of("peak_mem");
      static const std::regex kWithUnit(R"(^(.*\d)\s*(gib|gb|mib|mb|tb)$)", std::regex::icase);
      std::smatch mu;
      if (std::regex_match(cell, mu, kWithUnit)) {
        if (r.peak_mem_unit.empty()) r.peak_mem_unit = mu[2].str();
        cell = mu[1].str();
      }
      r.peak_mem = real_of("peak_mem", cell);
    }
    r.max_seq_len = integer("max_seq_len");
    r.notes = text_of("notes");
    if (col.count("zoo_model")) r.zoo_model = text_of("zoo_model");
    const auto optional_integer = [&](const char* name) -> std::optional<std::int64_t> {
      return col.count(name) ? integer(name) : std::nullopt;
    };
    r.num_experts = optional_integer("num_experts");
    r.top_k = optional_integer("top_k");
    r.moe_ffn_hidden = optional_integer("moe_ffn_hidden");
    r.shared_experts = optional_integer("shared_experts");
    r.ep = optional_integer("ep");
    r.etp = optional_integer("etp");
    runs.push_back(std::move(r));
  }
  problems.throw_if_any();
  return runs;
}

std::vector<PublishedRun> read_published_runs(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) throw InputError(Diagnostic{path.string(), 0, "", "cannot open the file"});
  std::ostringstream ss;
  ss << in.rdbuf();
  auto runs = parse_published_runs(ss.str(), path.string());
  // Per-row overrides beside the file (FILE.overrides.textproto), when there are any.
  const auto overrides = config::overrides_path(path);
  std::error_code ec;
  if (std::filesystem::exists(overrides, ec)) {
    DiagnosticList problems;
    for (auto& o : config::load_validation_overrides(overrides)) {
      auto it = std::find_if(runs.begin(), runs.end(),
                             [&](const PublishedRun& r) { return r.run_id == o.run_id; });
      if (it == runs.end()) {
        problems.add({o.file, o.line, "run_id", "no run " + o.run_id + " in " + path.string()});
      } else {
        it->overrides.push_back(std::move(o));
      }
    }
    problems.throw_if_any();
  }
  return runs;
}

}  // namespace ts::driver
