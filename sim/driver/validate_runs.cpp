// Reading published-runs CSV files (tests/validation/README.md) into PublishedRun rows.
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>
#include <iterator>
#include <regex>
#include <variant>

#include "sim/base/diagnostic.h"
#include "sim/base/format.h"
#include "sim/driver/csv.h"
#include "sim/driver/validate.h"
#include "sim/driver/validate_text.h"

namespace ts::driver {

using reading::trim;

namespace {

// Whether `s` starts with `prefix` (lower case), ignoring ASCII case.
bool starts_with_nocase(const std::string& s, std::string_view prefix) {
  if (s.size() < prefix.size()) return false;
  for (std::size_t i = 0; i < prefix.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(s[i])) != static_cast<unsigned char>(prefix[i])) return false;
  }
  return true;
}

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

// The columns, in the order problems are reported: each read into its member as text, a number
// or an integer (by the member's type), after what `unit` drops from the cell.
enum class Unit {
  kNone,
  kBinaryK,   // integer with k and M as 1024 and 1024²: "8K" context = 8192 tokens
  kBillions,  // "175B", "6.7 B": the column is in billions already
  kMemory,    // "82.4 GiB": a unit written in the value cell; it fills an empty peak_mem_unit
};
struct Column {
  const char* name;
  std::variant<std::string PublishedRun::*, std::optional<double> PublishedRun::*,
               std::optional<std::int64_t> PublishedRun::*>
      member;
  Unit unit = Unit::kNone;
  bool required = true;  // false: the optional columns of mixture-of-experts rows
};
using R = PublishedRun;
const Column kColumns[] = {
    {"run_id", &R::run_id}, {"source", &R::source}, {"source_table", &R::source_table},
    {"trust", &R::trust}, {"model", &R::model}, {"n_params_b", &R::n_params_b, Unit::kBillions},
    {"n_layers", &R::n_layers}, {"hidden", &R::hidden}, {"n_heads", &R::n_heads},
    {"n_kv_heads", &R::n_kv_heads}, {"ffn_hidden", &R::ffn_hidden}, {"vocab", &R::vocab},
    {"seq_len", &R::seq_len, Unit::kBinaryK}, {"global_batch", &R::global_batch},
    {"micro_batch", &R::micro_batch}, {"grad_accum", &R::grad_accum}, {"tp", &R::tp},
    {"pp", &R::pp}, {"vpp", &R::vpp}, {"dp", &R::dp}, {"cp", &R::cp},
    {"zero_fsdp", &R::zero_fsdp}, {"sequence_parallel", &R::sequence_parallel},
    {"recompute", &R::recompute}, {"precision", &R::precision}, {"n_gpus", &R::n_gpus},
    {"gpu", &R::gpu}, {"interconnect", &R::interconnect}, {"framework", &R::framework},
    {"tflops_per_gpu", &R::tflops_per_gpu}, {"tflops_kind", &R::tflops_kind},
    {"mfu_pct", &R::mfu_pct}, {"hfu_pct", &R::hfu_pct}, {"tokens_per_s", &R::tokens_per_s},
    {"tokens_per_s_per_gpu", &R::tokens_per_s_per_gpu}, {"iter_time_s", &R::iter_time_s},
    {"peak_mem", &R::peak_mem, Unit::kMemory}, {"peak_mem_unit", &R::peak_mem_unit},
    {"max_seq_len", &R::max_seq_len}, {"notes", &R::notes},
    {"zoo_model", &R::zoo_model, Unit::kNone, false},
    {"num_experts", &R::num_experts, Unit::kNone, false},
    {"top_k", &R::top_k, Unit::kNone, false},
    {"moe_ffn_hidden", &R::moe_ffn_hidden, Unit::kNone, false},
    {"shared_experts", &R::shared_experts, Unit::kNone, false},
    {"ep", &R::ep, Unit::kNone, false},
    {"etp", &R::etp, Unit::kNone, false},
};

// The rows of a published-runs table (parse_published_runs, read_published_runs).
std::vector<PublishedRun> runs_of(const csv::Table& table) {
  const std::string& file = table.file;
  DiagnosticList problems;
  std::vector<int> col;  // each column's field in the records; -1 for an absent optional column
  for (const auto& c : kColumns) {
    col.push_back(table.column(c.name));
    if (col.back() < 0 && c.required) {
      problems.add(Diagnostic{file, 1, c.name, "required column is missing from the header"});
    }
  }
  problems.throw_if_any();

  std::vector<PublishedRun> runs;
  for (const auto& rec : table.rows) {
    PublishedRun r;
    r.file = file;
    r.line = rec.line;
    const auto text_of = [&](std::size_t i) {
      return trim(rec.fields[static_cast<std::size_t>(col[i])]);
    };
    const std::string run_id = text_of(0);
    const std::string row_name = run_id.empty() ? "row at line " + std::to_string(rec.line)
                                                : "run_id " + run_id;
    std::string unit_in_cell;
    for (std::size_t i = 0; i < std::size(kColumns); ++i) {
      if (col[i] < 0) continue;
      const Column& c = kColumns[i];
      const std::string written = text_of(i);
      std::string cell = written;
      if (c.unit == Unit::kBillions && !cell.empty() &&
          (cell.back() == 'B' || cell.back() == 'b')) {
        cell = trim(cell.substr(0, cell.size() - 1));
      }
      static const std::regex kWithUnit(R"(^(.*\d)\s*(gib|gb|mib|mb|tb)$)", std::regex::icase);
      if (std::smatch mu; c.unit == Unit::kMemory && std::regex_match(written, mu, kWithUnit)) {
        unit_in_cell = mu[2].str();
        cell = mu[1].str();
      }
      const auto bad = [&](const char* what) {
        problems.add(
            Diagnostic{file, rec.line, c.name, row_name + ": '" + written + "' is not " + what});
      };
      bool ok = true;
      if (const auto* s = std::get_if<std::string PublishedRun::*>(&c.member)) {
        r.*(*s) = cell;
      } else if (const auto* d = std::get_if<std::optional<double> PublishedRun::*>(&c.member)) {
        r.*(*d) = parse_number(cell, ok);
        if (!ok) bad("a number");
      } else {
        auto v = parse_number(cell, ok, c.unit == Unit::kBinaryK);
        if (!ok || (v && (std::fabs(*v - std::round(*v)) > 1e-9 * std::max(1.0, std::fabs(*v)) ||
                          std::fabs(*v) > 9e15))) {
          bad("an integer");
          v.reset();
        }
        r.*std::get<std::optional<std::int64_t> PublishedRun::*>(c.member) =
            v ? std::optional<std::int64_t>(std::llround(*v)) : std::nullopt;
      }
    }
    if (r.peak_mem_unit.empty()) r.peak_mem_unit = unit_in_cell;
    runs.push_back(std::move(r));
  }
  problems.throw_if_any();
  return runs;
}

}  // namespace

const std::vector<std::string>& published_run_columns() {
  static const std::vector<std::string> kNames = [] {
    std::vector<std::string> names;
    for (const auto& c : kColumns) {
      if (c.required) names.emplace_back(c.name);
    }
    return names;
  }();
  return kNames;
}

std::vector<PublishedRun> parse_published_runs(const std::string& text, const std::string& file) {
  return runs_of(csv::parse_table(text, file));
}

std::vector<PublishedRun> read_published_runs(const std::filesystem::path& path) {
  auto runs = runs_of(csv::read_table(path));
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
