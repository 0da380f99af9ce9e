#include "sim/driver/validate.h"
#include "sim/driver/validate_intervals.h"

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <regex>
#include <set>
#include <sstream>
#include <thread>

#include "sim/base/diagnostic.h"
#include "sim/base/format.h"
#include "sim/config/calibration_loader.h"
#include "sim/config/loader.h"
#include "sim/config/names.h"
#include "sim/driver/csv.h"
#include "sim/ir/model_graph.h"
#include "sim/parallel/lowering.h"

namespace ts::driver {

// ---------------------------------------------------------------------------------------------
// Reading

namespace {

std::string trim(std::string_view s) {
  std::size_t b = 0, e = s.size();
  while (b < e && std::isspace(static_cast<unsigned char>(s[b])) != 0) ++b;
  while (e > b && std::isspace(static_cast<unsigned char>(s[e - 1])) != 0) --e;
  return std::string(s.substr(b, e - b));
}

bool has(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// Whether `s` starts with `prefix`, ignoring ASCII case.
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

const std::vector<std::string>& moe_run_columns() {
  static const std::vector<std::string> kColumns = {"zoo_model", "num_experts", "top_k", "moe_ffn_hidden",
                                                    "shared_experts", "ep", "etp"};
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
  for (const auto& name : moe_run_columns()) {
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

// ---------------------------------------------------------------------------------------------
// FLOP conventions

double megatron_model_flops(const ir::ModelSpec& m, std::int64_t seq, double sequences) {
  // Mixture-of-experts, latent-attention and MTP models: Megatron-Core's count is ir::model_flops.
  if (m.moe || m.mla || m.mtp_layers > 0) return ir::model_flops(m, seq, sequences * static_cast<double>(seq)).value();
  const double h = static_cast<double>(m.hidden);
  const double s = static_cast<double>(seq);
  const double layers = static_cast<double>(m.num_layers);
  const double gated = m.activation == ir::Activation::kSwiglu ? 1.5 : 1.0;
  const double kv_ratio = static_cast<double>(m.num_kv_heads) / static_cast<double>(m.num_heads);
  const double per = (1.0 + kv_ratio + s / h) + static_cast<double>(m.ffn_hidden) / h * gated +
                     static_cast<double>(m.vocab) / (2.0 * layers * h);
  return 12.0 * sequences * s * layers * h * h * per;
}

double megatron_hardware_flops(const ir::ModelSpec& m, std::int64_t seq, double sequences,
                               parallel::Recompute recompute, double recomputed_share) {
  const double h = static_cast<double>(m.hidden);
  const double s = static_cast<double>(seq);
  const double layers = static_cast<double>(m.num_layers);
  const double model = megatron_model_flops(m, seq, sequences);
  switch (recompute) {
    case parallel::Recompute::kNone: return model;
    case parallel::Recompute::kFull: {
      // The layers' forward again: a third of their forward + backward FLOPs; the LM head is not
      // recomputed, which turns V/12hL into V/16hL in SC'21's 96·B·s·L·h² form.
      const double gated = m.activation == ir::Activation::kSwiglu ? 1.5 : 1.0;
      const double kv_ratio = static_cast<double>(m.num_kv_heads) / static_cast<double>(m.num_heads);
      const double layer_part = 12.0 * sequences * s * layers * h * h *
                                ((1.0 + kv_ratio + s / h) + static_cast<double>(m.ffn_hidden) / h * gated);
      return model + recomputed_share * layer_part / 3.0;
    }
    case parallel::Recompute::kSelectiveOp: {
      // The matmuls the op policy reruns, per token and layer (its other reruns carry no FLOPs).
      const auto policy = ir::op_policy_per_token(m, 1, true);
      const double rerun = (ir::total_flops(policy.attention) + ir::total_flops(policy.mlp)).value();
      return model + rerun * sequences * s * layers;
    }
    case parallel::Recompute::kSelective:
      // Korthikanti et al. 2022 print HFU/MFU pairs (their Table 5 rows, 22B to 1T) that add the
      // whole attention-score term again, 12·B·s²·h·L: e.g. 175B, 52.8/51.4 = 1 + 12(s/h) /
      // (72(1 + s/6h + V/12hL)) with s/h = 1/6.
      return model + 12.0 * sequences * s * s * h * layers;
  }
  return model;
}

double six_n_flops(double parameters, const ir::ModelSpec& m, std::int64_t seq, double tokens,
                   bool causal_halved, double recomputed_share) {
  const double attention = (causal_halved ? 6.0 : 12.0) * static_cast<double>(m.num_layers) *
                           static_cast<double>(m.hidden) * static_cast<double>(seq);
  const double per_token = 6.0 * parameters + attention;
  return tokens * per_token * (1.0 + recomputed_share / 3.0);
}

double recomputed_layer_share(const parallel::ParallelPlan& plan, const ir::ModelSpec& model) {
  if (model.num_layers <= 0) return 0;
  std::int64_t recomputed = 0;
  for (const std::int64_t layers : parallel::virtual_stage_layers(plan, model)) recomputed += plan.recomputed_layers(layers);
  return static_cast<double>(recomputed) / static_cast<double>(model.num_layers);
}

FlopConvention flop_convention(const PublishedRun& run) {
  const std::string kind = to_lower(run.tflops_kind);
  const std::string text = kind + " " + to_lower(run.notes);
  FlopConvention c;
  // "6N", "6*N", "6·N", "6ND", "6 * params", "6 × parameters", "6*seqlen*params": FLOPs from
  // the parameter count.
  static const std::regex kSixN(
      R"((^|[^0-9.])6\s*(\*|·|×)?\s*(n(\s*(\*|·|×)?\s*d)?|params|parameters|seqlen\s*(\*|·|×)\s*params)([^a-z]|$))");
  if (std::regex_search(text, kSixN)) c.family = FlopFamily::kSixN;
  c.hardware = has(kind, "hardware") || has(kind, "hfu");
  c.causal_halved = has(text, "halved") && !has(text, "not halved") && !has(text, "not causal-halved") &&
                    !has(text, "not be halved");
  return c;
}

std::string describe(const FlopConvention& c) {
  std::string out = c.family == FlopFamily::kSixN ? "6N+12Lhs per token" : "Megatron 72BsLh^2(1+s/6h+V/12hL)";
  if (c.family == FlopFamily::kSixN && c.causal_halved) out = "6N+6Lhs per token";
  if (c.hardware) out += c.family == FlopFamily::kSixN ? ", x4/3 with full recompute" : ", + recompute FLOPs";
  return out;
}

// ---------------------------------------------------------------------------------------------
// Row → scenario

namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

bool any_of(const std::string& text, std::initializer_list<std::string_view> words) {
  for (auto w : words) {
    if (has(text, w)) return true;
  }
  return false;
}

// " fsdp full shard zero 3 like ": lower case, every run of characters other than letters,
// digits and '+' turned into one space, with a space at each end, so that spellings that differ
// only in separators ("FULL_SHARD", "full-shard", "full shard") compare equal as " full shard ".
std::string words(std::string_view text) {
  std::string out = " ";
  for (char ch : text) {
    const auto u = static_cast<unsigned char>(ch);
    if (std::isalnum(u) != 0 || ch == '+') {
      out += static_cast<char>(std::tolower(u));
    } else if (out.back() != ' ') {
      out += ' ';
    }
  }
  if (out.back() != ' ') out += ' ';
  return out;
}

// The first word of a cell ("true" for "True (--checkpoint-activations)").
std::string first_word(std::string_view text) {
  const std::string w = words(text);
  const auto end = w.find(' ', 1);
  return end == std::string::npos ? "" : w.substr(1, end - 1);
}

bool first_word_in(std::string_view text, std::initializer_list<std::string_view> options) {
  const std::string f = first_word(text);
  for (auto o : options) {
    if (f == o) return true;
  }
  return false;
}

// A cell that says the source does not give the value ("not stated", "unknown", "n/a", "?"):
// treated as empty.
bool unstated(std::string_view text) {
  const std::string w = words(text);
  return w == " " || w.rfind(" not stated", 0) == 0 || w.rfind(" not given", 0) == 0 ||
         w.rfind(" unknown", 0) == 0 || w.rfind(" unspecified", 0) == 0 || w == " n a ";
}

// The framework column in lower case, with the spellings of the Megatron code bases reduced to
// one each: "Megatron LM", "MegatronLM", "megatron_lm" → "megatron-lm"; "Megatron DeepSpeed" →
// "megatron-deepspeed"; "Megatron Core", "MCore", "megatron_core" → "megatron-core"; "Megatron
// Bridge" → "megatron-bridge"; "TransformerEngine", "transformer_engine" → "transformer engine".
std::string framework_name(const PublishedRun& r) {
  std::string f = to_lower(r.framework);
  static const std::regex kLm(R"(megatron[\s_]?lm)");
  static const std::regex kDs(R"(megatron[\s_]deepspeed)");
  static const std::regex kCore(R"(megatron[\s_]core|\bm-?core\b)");
  static const std::regex kBridge(R"(megatron[\s_]bridge)");
  static const std::regex kTe(R"(transformer[\s_-]?engine)");
  f = std::regex_replace(f, kLm, "megatron-lm");
  f = std::regex_replace(f, kDs, "megatron-deepspeed");
  f = std::regex_replace(f, kCore, "megatron-core");
  f = std::regex_replace(f, kBridge, "megatron-bridge");
  f = std::regex_replace(f, kTe, "transformer engine");
  return f;
}

// The framework profiles (frameworks/*.textproto) a row's framework column names: each with a
// word of its `spelled` list in the normalised column (framework_name). A column may
// name several ("NeMo (Megatron-Core)", "HuggingFace Transformers + DeepSpeed"); what the rules
// below take from them is what any of them gives.
struct RowFrameworks {
  std::vector<const config::FrameworkProfile*> named;

  const config::FrameworkProfile* find(std::string_view name) const {
    for (const auto* p : named) {
      if (p->name == name) return p;
    }
    return nullptr;
  }
  // A named framework implements this recompute mode.
  bool offers(parallel::Recompute m) const {
    for (const auto* p : named) {
      if (std::find(p->recompute_modes.begin(), p->recompute_modes.end(), m) !=
          p->recompute_modes.end())
        return true;
    }
    return false;
  }
  // A named framework gives setting `s` and its value satisfies `test`.
  template <class Test>
  bool gives(config::FrameworkSetting s, Test&& test) const {
    for (const auto* p : named) {
      if (p->source_of(s) != nullptr && test(p->values)) return true;
    }
    return false;
  }
  // The recompute modes the named frameworks implement (in enum order); none and full, which
  // every PyTorch code base can run (torch.utils.checkpoint), when the column names none.
  std::vector<parallel::Recompute> recompute_modes() const {
    std::set<parallel::Recompute> modes = {parallel::Recompute::kNone, parallel::Recompute::kFull};
    for (const auto* p : named) modes.insert(p->recompute_modes.begin(), p->recompute_modes.end());
    return {modes.begin(), modes.end()};
  }
};

RowFrameworks named_frameworks(const PublishedRun& r,
                               const std::vector<config::FrameworkProfile>& profiles) {
  RowFrameworks out;
  const std::string f = framework_name(r);
  for (const auto& p : profiles) {
    if (std::any_of(p.spelled.begin(), p.spelled.end(),
                    [&](const std::string& w) { return has(f, w); })) {
      out.named.push_back(&p);
    }
  }
  return out;
}

// Megatron-Core, NeMo (and its Megatron-Bridge) and Transformer Engine run Transformer Engine's
// fused attention.
bool te_attention(const PublishedRun& r) {
  return any_of(framework_name(r), {"megatron-core", "nemo", "megatron-bridge", "transformer engine"});
}

// XTuner (InternLM), which fine-tunes HuggingFace models through its SupervisedFinetune wrapper:
// that wrapper turns gradient checkpointing on unless told otherwise
// (`use_activation_checkpointing=True`, xtuner/model/sft.py) and loads every Llama-family model
// with attn_implementation 'flash_attention_2' when flash-attn 2 is installed, else 'sdpa'
// (`_prepare_for_flash_attn`), both FlashAttention-2 kernels on A100 and H100.
bool xtuner(const PublishedRun& r) { return has(framework_name(r), "xtuner"); }

// Frameworks whose profile runs a layer's elementwise ops as PyTorch's eager ops (torchtitan,
// Hugging Face models, Composer's llm-foundry: their sources in frameworks/), unless the step is
// compiled: "compile" or Liger's fused kernels in the framework or precision column make them
// fused; notes are not read, as they may describe other runs of the same table.
bool eager_elementwise(const PublishedRun& r, const RowFrameworks& fw) {
  const std::string own = to_lower(r.framework + " " + r.precision);
  if (any_of(own, {"compile", "liger"})) return false;
  return fw.gives(config::FrameworkSetting::kElementwise, [](const parallel::ParallelPlan& v) {
    return v.elementwise == parallel::Elementwise::kEager;
  });
}

// The code bases whose published runs of 2021–2022 predate FlashAttention and sequence
// parallelism: Megatron-LM, DeepSpeed and its forks (Megatron-DeepSpeed, GPT-NeoX),
// metaseq/fairseq.
bool pre_2022_code_base(const PublishedRun& r) {
  return any_of(framework_name(r), {"megatron-lm", "deepspeed", "neox", "metaseq", "fairseq"});
}

// Whether the run used FlashAttention. A row that names it (framework, precision or notes) did;
// otherwise Megatron-LM, Megatron-DeepSpeed and DeepSpeed ran their own attention core (QKᵀ,
// fused softmax, dropout, ·V as separate kernels) unless --use-flash-attn was given, which their
// published configurations of 2021–2022 predate; so did GPT-NeoX, whose attention_config
// defaults to "global" (the unfused core; "flash" must be asked for, configs/neox_arguments.md),
// and metaseq/fairseq (OPT), whose ModelParallelMultiheadAttention computes QKᵀ, softmax and ·V
// as separate kernels. Megatron-Core's Transformer Engine, NeMo, torchtitan, Composer/MPT and
// Hugging Face (SDPA) use fused attention by default.
bool flash_attention(const PublishedRun& r) {
  const std::string all = to_lower(r.framework + " " + r.precision + " " + r.notes);
  // "no flash attention", "without FlashAttention", "flash-attn not supported", "FA disabled" in
  // the columns that describe the run's own stack (notes may compare with other runs: "without
  // FlashAttention 142 TFLOP/s").
  static const std::regex kNoFlash(
      R"(\b(no|without|not|disabled?)\s+(use\s+|using\s+)?(flash|fa2?\b|fused attention)|(flash[- _]?(attn|attention)?|\bfa2?)\s+(is\s+)?(not|disabled|off)\b)");
  if (std::regex_search(to_lower(r.framework + " " + r.precision), kNoFlash)) return false;
  if (any_of(all, {"flash", "fused attention", "sdpa", "cudnn attention"})) return true;
  return te_attention(r) || xtuner(r) || !pre_2022_code_base(r);
}

// MosaicML's MPT models trained with its own stack (Composer, llm-foundry).
bool llm_foundry_mpt(const PublishedRun& r) {
  return any_of(to_lower(r.model), {"mpt"}) && any_of(to_lower(r.framework), {"composer", "llm-foundry", "mpt"});
}

// Pure 16-bit training: the model's parameters themselves are bf16 (Lightning's "bf16-true" /
// "16-true" precision, a Hugging Face model loaded as torch.bfloat16 without autocast), so a
// PyTorch optimizer keeps its state in bf16 and there is no fp32 master copy.
bool pure_bf16(const PublishedRun& r) {
  return any_of(to_lower(r.precision), {"bf16-true", "16-true", "torch.bfloat16", "pure bf16"});
}

// Plain SGD without momentum: the row names SGD and says nothing of a nonzero momentum.
bool sgd_without_momentum(const PublishedRun& r) {
  const std::string all = to_lower(r.framework + " " + r.precision + " " + r.notes);
  static const std::regex kSgd(R"(\bsgd\b)");
  static const std::regex kNoMomentum(R"((no|without) momentum|momentum\s*=\s*0(\.0+)?(?![\d.]))");
  if (!std::regex_search(all, kSgd)) return false;
  return !any_of(all, {"momentum"}) || std::regex_search(all, kNoMomentum);
}

// PyTorch frameworks whose attention is torch's scaled_dot_product_attention or the flash-attn
// package: FlashAttention-2 on every GPU unless the row names another kernel (the profiles that
// give it: torchtitan, FSDP, Hugging Face; and the code bases below without a profile). SDPA's
// flash backend is FlashAttention-2 (PyTorch 2.2 onward); its cuDNN backend, the
// FlashAttention-3-class kernel
// on Hopper, was the H100 default only in PyTorch 2.5.0 (made opt-in again by pytorch#138522 for
// 2.5.1, and preferred again only with cuDNN 9.15+), and FlashAttention-3 ships as its own
// package. Tritonbench on H100 (pytorch#142132, 2024-12): SDPA 329 TFLOP/s against cuDNN 631 and
// FlashAttention-3 632 at one shape. Transformer Engine frameworks (cuDNN fused attention), JAX
// (cuDNN through XLA) and llm.c (cuDNN) keep the GPU's default kernel.
bool pytorch_sdpa_attention(const PublishedRun& r, const RowFrameworks& fw) {
  const bool profile = fw.gives(
      config::FrameworkSetting::kAttention,
      [](const parallel::ParallelPlan& v) { return v.attention_kernel == "FlashAttention-2"; });
  return profile || xtuner(r) ||
         any_of(framework_name(r),
                {"fms", "composer", "nanotron", "lit-gpt", "litgpt", "colossal", "accelerate"});
}

// The fused-attention kernel a row's framework ran, by name when the row gives a version:
// FlashAttention-3, -2, -1 or the Triton FlashAttention (Triton's own fused-attention kernel,
// triton.ops.flash_attention, the "Triton" of the FlashAttention-2 benchmarks). Megatron-Core,
// NeMo and Transformer Engine run their fused attention (cuDNN on Hopper, FlashAttention-3
// class): the GPU's default. PyTorch frameworks run FlashAttention-2 (pytorch_sdpa_attention);
// MosaicML's MPT rows and the flash-attention repository's training code, FlashAttention-1 unless
// a version is named. A row that says only "FlashAttention" gets FlashAttention-2, the version in
// general use from its release (2023-07) until FlashAttention-3 (2024-07), rather than the newest
// one; a row that names nothing gets the GPU's default. Empty = the GPU's default kernel.
std::string attention_kernel(const PublishedRun& r, const RowFrameworks& fw) {
  const std::string all = to_lower(r.framework + " " + r.precision + " " + r.notes);
  if (any_of(all, {"flashattention-3", "flashattention 3", "flash attention 3", "flash-attention 3", "fa3"})) {
    return "FlashAttention-3";
  }
  const bool names_fa2 = any_of(all, {"flashattention-2", "flashattention 2", "flash attention 2",
                                      "flash-attention 2", "flash-attention-2", "fa2", "flash_attn_2",
                                      "flash-attn 2"});
  // MosaicML's MPT configurations (llm-foundry scripts/train/yamls/pretrain/mpt-*.yaml, on which
  // its published benchmarks are based) set attn_config.attn_impl: triton, llm-foundry's
  // flash_attn_triton.py: the flash-attention repository's Triton port (2022, run by the
  // triton-pre-mlir compiler), the kernel that supports MPT's ALiBi bias. Its docstring: "Overall
  // Triton forward + backward is slightly slower than CUDA forward + backward", the CUDA version
  // being FlashAttention-1 then; it is not Triton's own kernel of the FlashAttention-2 benchmarks.
  // A row naming that module gets the same reading.
  if ((llm_foundry_mpt(r) || any_of(all, {"flash_attn_triton"})) && !names_fa2) {
    return "FlashAttention-1";
  }
  if (names_fa2) return "FlashAttention-2";
  // Triton named as the attention kernel ("Triton FlashAttention", "triton attention"), not as a
  // compiler version or Inductor's code generation ("pytorch-triton 2.1.0").
  static const std::regex kTritonAttention(
      R"(triton[^,;]{0,16}(flash|attention|attn)|(flash|attention|attn)[^,;]{0,16}triton)");
  if (std::regex_search(all, kTritonAttention)) return "FlashAttention-Triton";
  if (any_of(all, {"flashattention-1", "flashattention (v1)", "flashattention v1", "fa1"})) return "FlashAttention-1";
  // A framework whose profile gives FlashAttention-1, version unnamed in the row (the
  // flash-attention repository's GPT training code, whose published speeds were measured with it).
  if (fw.gives(config::FrameworkSetting::kAttention,
               [](const parallel::ParallelPlan& v) { return v.attention_kernel == "FlashAttention-1"; })) {
    return "FlashAttention-1";
  }
  if (te_attention(r)) return "";
  if (pytorch_sdpa_attention(r, fw)) return "FlashAttention-2";
  if (any_of(all, {"flash"})) return "FlashAttention-2";
  return "";
}

// The attention kernels with points in `gpu`'s calibration file (none without a file).
std::set<std::string> calibrated_attention_kernels(const std::string& gpu, config::ComputeModelCache& calibrations) {
  std::set<std::string> out;
  if (const auto cal = calibrations.calibration(gpu)) {
    for (const auto& t : cal->attention) out.insert(t.kernel);
  }
  return out;
}

// Llama-style (RMSNorm, SwiGLU, rotary positions, no biases, untied head) or GPT-style
// (LayerNorm, GELU, learned positions, biases, tied head). Family names decide first; then GQA
// (kv heads fewer than heads) and an MLP narrower than 3.5h (SwiGLU's 8h/3) mean Llama-style.
// The style a model family's name says; nullopt for a name of no known family.
std::optional<bool> llama_family(const PublishedRun& r) {
  const std::string name = to_lower(r.model);
  if (any_of(name, {"gpt", "mpt", "opt-", "opt ", "bloom", "falcon", "pythia", "neox", "starcoder"})) return false;
  if (any_of(name, {"llama", "mistral", "mixtral", "qwen", "gemma", "yi-", "deepseek", "internlm",
                    "baichuan", "olmo"})) {
    return true;
  }
  return std::nullopt;
}

bool llama_style(const PublishedRun& r, std::vector<std::string>& notes) {
  if (const auto family = llama_family(r)) return *family;
  if (r.n_heads && r.n_kv_heads && *r.n_kv_heads < *r.n_heads) {
    notes.push_back("Llama-style layers (grouped-query attention)");
    return true;
  }
  if (r.hidden && r.ffn_hidden && *r.ffn_hidden * 2 < *r.hidden * 7) {
    notes.push_back("Llama-style layers (MLP narrower than 3.5h: SwiGLU)");
    return true;
  }
  return false;
}

// Which Llama release a model name names: 1, 2 or 3 (3.1, 3.2 and 3.3 included); 0 for none.
// The release digit is not the start of a size: "LLaMA 30B" and "Llama-13b" are Llama 1.
int llama_release(const std::string& model) {
  const std::string name = to_lower(model);
  for (int release : {3, 2}) {
    for (const char* sep : {" ", "", "-", "_"}) {
      const std::string tag = "llama" + std::string(sep) + std::to_string(release);
      for (auto at = name.find(tag); at != std::string::npos; at = name.find(tag, at + 1)) {
        const auto next = at + tag.size();
        if (next == name.size() || std::isdigit(static_cast<unsigned char>(name[next])) == 0) return release;
      }
    }
  }
  return has(name, "llama") ? 1 : 0;
}

// The MLP widths of Meta's released Llama models, by release and hidden size (intermediate_size
// of each config.json). Meta's rule is ffn_dim_multiplier · 8h/3 rounded up to multiple_of, with
// the multiplier and the multiple set per model: Llama 1 and Llama 2 7B/13B use 1.0 and 256 (the
// 8h/3 rule below gives the same widths); Llama 2 70B uses 1.3 and 4096; Llama 3 8B/70B 1.3 and
// 1024/4096; Llama 3.1 405B 1.2 and 4096; Llama 3.2 1B/3B 1.5 and 1.0 with 256.
struct ReleasedFfn {
  int release;
  std::int64_t hidden;
  std::int64_t ffn_hidden;
};
constexpr ReleasedFfn kReleasedFfn[] = {
    {2, 8192, 28672},                                                          // Llama 2 70B
    {3, 2048, 8192},  {3, 3072, 8192},                                         // Llama 3.2 1B, 3B
    {3, 4096, 14336}, {3, 8192, 28672}, {3, 16384, 53248},                     // Llama 3 8B, 70B, 405B
};

// The width of a released Llama where it departs from the 8h/3 rule; nullopt otherwise.
std::optional<std::int64_t> llama_release_ffn(const std::string& model, std::int64_t hidden) {
  const int release = llama_release(model);
  for (const auto& f : kReleasedFfn) {
    if (f.release == release && f.hidden == hidden) return f.ffn_hidden;
  }
  return std::nullopt;
}

std::optional<ir::ModelSpec> build_model(const PublishedRun& r, std::int64_t seq,
                                         std::vector<std::string>& notes, std::string& reason) {
  if (!r.n_layers || !r.hidden) {
    reason = std::string("architecture incomplete: ") + (!r.n_layers ? "n_layers" : "hidden") + " is empty";
    return std::nullopt;
  }
  const bool llama = llama_style(r, notes);
  ir::ModelSpec m;
  m.name = r.model.empty() ? "run " + r.run_id : r.model;
  m.num_layers = *r.n_layers;
  m.hidden = *r.hidden;
  if (r.n_heads) {
    m.num_heads = *r.n_heads;
  } else {
    // Head dimension 128: GPT-3's large models, Llama, and the FlashAttention GPT configs.
    m.num_heads = std::max<std::int64_t>(1, m.hidden / 128);
    notes.push_back("n_heads " + str(m.num_heads) + " (head dim 128)");
  }
  m.num_kv_heads = r.n_kv_heads ? *r.n_kv_heads : m.num_heads;
  // Squared ReLU (Nemotron-4, Primer): a non-gated MLP of two matrices, 4h wide unless printed.
  const bool squared_relu = any_of(to_lower(r.model + " " + r.notes),
                                   {"squared relu", "squared-relu", "squared_relu", "relu²", "relu^2", "relu2"});
  if (r.ffn_hidden) {
    m.ffn_hidden = *r.ffn_hidden;
  } else if (squared_relu) {
    m.ffn_hidden = 4 * m.hidden;
    notes.push_back("ffn_hidden 4h = " + str(m.ffn_hidden) + " (squared-ReLU MLP)");
  } else if (const auto meta = llama_release_ffn(r.model, m.hidden); llama && meta) {
    m.ffn_hidden = *meta;
    notes.push_back("ffn_hidden " + str(m.ffn_hidden) + " (Meta's released config of this Llama size)");
  } else if (llama) {
    // Llama's rule: 2/3 of 4h rounded up to a multiple of 256 (Touvron et al. 2023, model.py).
    m.ffn_hidden = (8 * m.hidden / 3 + 255) / 256 * 256;
    notes.push_back("ffn_hidden " + str(m.ffn_hidden) + " (Llama: 8h/3 rounded up to 256)");
  } else {
    m.ffn_hidden = 4 * m.hidden;
    notes.push_back("ffn_hidden 4h = " + str(m.ffn_hidden));
  }
  if (r.vocab) {
    m.vocab = *r.vocab;
  } else {
    if (llama && llama_release(r.model) == 3) {
      m.vocab = 128256;
    } else if (llama) {
      m.vocab = 32000;
    } else {
      m.vocab = 50257;  // the GPT-2 BPE of GPT-3 and its reproductions
    }
    notes.push_back("vocab " + str(m.vocab) + " (family default)");
  }
  if (llama) {
    m.norm = ir::Norm::kRmsNorm;
    m.activation = ir::Activation::kSwiglu;
    m.position = ir::Position::kRope;
    m.tied_embeddings = false;
    m.linear_bias = false;
    m.max_seq_len = 0;
    if (squared_relu) {
      m.activation = ir::Activation::kGelu;  // two matrices and one elementwise op, as GELU
      notes.push_back("non-gated MLP (squared ReLU)");
    }
  } else {
    m.norm = ir::Norm::kLayerNorm;
    m.activation = ir::Activation::kGelu;
    m.position = ir::Position::kLearned;
    m.tied_embeddings = true;
    m.linear_bias = true;
    m.max_seq_len = seq;
  }
  // A model of no known family whose printed size fits the other MLP: gated (SwiGLU, three
  // matrices) or not (two, as GELU or Nemotron's squared ReLU). GQA alone does not make the MLP
  // gated.
  if (!llama_family(r) && r.n_params_b && *r.n_params_b > 0) {
    ir::ModelSpec other = m;
    other.activation = llama ? ir::Activation::kGelu : ir::Activation::kSwiglu;
    const double printed = *r.n_params_b * 1e9;
    const auto off = [&](const ir::ModelSpec& s) {
      return std::abs(static_cast<double>(ir::parameter_count(s)) / printed - 1);
    };
    if (off(other) < 0.05 && off(m) > 0.15) {
      m.activation = other.activation;
      notes.push_back(std::string(other.activation == ir::Activation::kSwiglu ? "gated (SwiGLU)" : "non-gated") +
                      " MLP: its parameter count matches the printed n_params_b");
    }
  }
  const auto problems = config::check_model(m);
  if (!problems.empty()) {
    reason = "model: " + problems.front().field + ": " + problems.front().message;
    return std::nullopt;
  }
  return m;
}

// Per-NIC line rate of an InfiniBand generation named in the interconnect text.
std::optional<double> ib_rate_gbits(const std::string& word) {
  if (word == "ndr200") return 200;
  if (word == "ndr") return 400;
  if (word == "hdr100") return 100;
  if (word == "hdr") return 200;
  if (word == "edr") return 100;
  if (word == "xdr") return 800;
  return std::nullopt;
}

// A line rate in Gb/s from a number as written ("400", "3.2", "3,200") and its unit (Gb/s,
// Gbps, Gbit, G, Tb/s, Tbps).
double rate_gbits(const std::string& number, const std::string& unit) {
  std::string n = number;
  n.erase(std::remove(n.begin(), n.end(), ','), n.end());
  const double v = std::stod(n);
  return unit.front() == 't' ? v * 1000.0 : v;
}

std::optional<config::Cluster> build_cluster(const PublishedRun& r, std::vector<std::string>& notes,
                                             std::string& reason) {
  const std::string g = to_lower(r.gpu);
  std::string zoo;
  std::int64_t nominal_gb = 0;
  if (g.empty()) {
    reason = "gpu is empty";
    return std::nullopt;
  }
  const bool pcie = any_of(g, {"pcie", "nvl"});
  // A800 and H800: the export versions of the A100 and H100 SXM, the same chip with NVLink cut
  // to 400 GB/s (bidirectional, per GPU) from 600 GB/s (A100) and 900 GB/s (H100) (NVIDIA A800
  // and H800 datasheets).
  const bool nvlink_400 = any_of(g, {"a800", "h800"});
  // Memory size as written ("80GB", "40 GB", "40GiB", "40G"); a wattage or model number is not one.
  static const std::regex kGb(R"((?:^|[^0-9])(\d{1,5})\s*(gb|gib|g)\b)");
  std::smatch mg;
  std::int64_t gb = 0;
  if (std::regex_search(g, mg, kGb)) gb = std::stoll(mg[1].str());
  // A column naming only the architecture ("NVIDIA Ampere GPUs", "Hopper GPUs") is read as its
  // data-centre training part, the A100 or H100 SXM (the A800 and H800 share their compute).
  const bool ampere_only = has(g, "ampere") && !any_of(g, {"a100", "a800", "a30", "a10", "a40", "a6000", "rtx"});
  const bool hopper_only = has(g, "hopper") && !any_of(g, {"h100", "h800", "h200", "h20"});
  if (ampere_only || hopper_only) {
    notes.push_back(std::string(ampere_only ? "A100" : "H100") + " SXM for the architecture named ('" + r.gpu + "')");
  }
  // Blackwell: the rack-scale parts (GB200/GB300 NVL72; "NVL" here is the 72-GPU NVLink domain,
  // not a PCIe card) before the HGX/DGX ones whose names they contain.
  if (has(g, "gb300")) {
    zoo = "gb300-nvl72";
    nominal_gb = 279;
  } else if (has(g, "gb200")) {
    zoo = "gb200-nvl72";
    nominal_gb = 186;
  } else if (has(g, "b300") && !pcie) {
    zoo = "dgx-b300";
    nominal_gb = 288;
  } else if (has(g, "b200") && !pcie) {
    zoo = "dgx-b200";
    nominal_gb = 180;
  } else if (has(g, "h200") && !pcie) {
    zoo = "hgx-h200";
    nominal_gb = 141;
  } else if ((has(g, "h100") || has(g, "h800") || hopper_only) && !pcie) {
    // The 94/96 GB part is HBM2e (2.41 TB/s) where the 80 GB one is HBM3 (3.35 TB/s).
    const bool hbm2e = gb == 94 || gb == 96 || has(g, "hbm2e");
    zoo = hbm2e ? "dgx-h100-96gb" : "dgx-h100";
    nominal_gb = hbm2e ? 96 : 80;
  } else if ((has(g, "a100") || has(g, "a800") || ampere_only) && !pcie) {
    nominal_gb = gb == 40 ? 40 : 80;
    zoo = gb == 40 ? "dgx-a100-40gb" : "dgx-a100";
  } else {
    reason = "no cluster model for GPU '" + r.gpu +
             "' (known: A100/A800 SXM 40/80GB, H100/H800 SXM 80GB and its 94/96GB HBM2e variant, "
             "H200 SXM, B200, B300, GB200 and GB300 NVL72; PCIe and NVL cards are not modelled)";
    return std::nullopt;
  }
  config::Cluster c = config::load_cluster(zoo);
  std::string variant;
  // A memory size other than the zoo GPU's (H100 SXM 94 GB on the 96 GB HBM2e cluster): same
  // compute and bandwidth, the capacity named in the GPU column ("GB" as marketed, which
  // nvidia-smi shows as about that many GiB, e.g. 81920 MiB for the A100 80GB).
  {
    if (gb > 0 && gb != nominal_gb && gb >= 16 && gb <= 1024) {
      c.gpu.memory_capacity = Bytes::gib(static_cast<double>(gb));
      variant += " " + str(gb) + "GB";
      notes.push_back(c.gpu.name + " with " + str(gb) + " GiB of memory");
    }
  }
  auto& domain = c.cluster.scale_up;
  auto& host = c.cluster.host;
  if (nvlink_400) {
    domain.nvlink_bandwidth = Bandwidth::gbytes_per_s(200);  // per direction
    variant += " NVLink 400GB/s";
    notes.push_back(c.gpu.name + " compute with NVLink at 400 GB/s bidirectional (" +
                    std::string(has(g, "a800") ? "A800" : "H800") + ")");
  }

  // Interconnect: GPUs per node, NIC count and line rate when the text states them; the zoo
  // cluster's DGX-class node otherwise. A count is a whole number, not the digit ending a word
  // ("ConnectX-6", "NVLink4", "H100").
  const std::string ic = to_lower(r.interconnect);
  std::smatch m;
  static const std::regex kGpusPerNode(
      R"((?:^|[^a-z0-9.\-])(\d{1,4})\s*(?:x\s*)?(?:gpus?|[ah][18]00s?|h200s?)(?:\s+gpus?)?\s*(?:per|/|each)\s*(?:node|server|host))");
  if (std::regex_search(ic, m, kGpusPerNode)) {
    const auto n = static_cast<std::int32_t>(std::stoi(m[1].str()));
    // A server of n GPUs is its own NVLink domain; in a rack-scale domain (NVL72) only the
    // host changes, when whole hosts still fill the domain.
    const bool server = domain.gpus_per_domain == host.gpus_per_host;
    if (n > 0 && n != host.gpus_per_host && (server || domain.placed_per_domain() % n == 0)) {
      if (server) {
        domain.gpus_per_domain = n;
        domain.gpus_used_per_domain = 0;
      }
      host.gpus_per_host = n;
      host.nics_per_host = std::min(host.nics_per_host, n);
      variant += " " + str(n) + "gpu/node";
    }
  }
  std::optional<std::int32_t> nics;
  std::optional<double> gbits;
  // The text of a match's clause up to the match (from the last ',' or ';' before it).
  const auto clause_before = [&ic](const std::smatch& match) {
    const std::string before = ic.substr(0, static_cast<std::size_t>(match.position()));
    const auto start = before.find_last_of(",;");
    return start == std::string::npos ? before : before.substr(start);
  };
  // "8x200Gb/s", "8 x 400 Gbps", "4×100G", "8x NVIDIA Mellanox 400 Gbps" (up to three words
  // between the count and the rate, none of them a GPU: "8x A100 with 200 Gb/s" counts GPUs).
  static const std::regex kCountRate(
      R"((?:^|[^a-z0-9.\-])(\d{1,4})\s*(?:x|×|\*)\s*(?:(?!gpus?\b|[ah][18]00|h200|per\b)[a-z][^\s,;()]*\s+){0,3}(\d{1,7}(?:\.\d+)?)\s*(gb/s|gbps|gbit/s|gbits?\b|gb\b|g\b|tb/s|tbps))");
  // "8x HDR", "8 x NDR400", "2xHDR100".
  static const std::regex kCountIb(R"((?:^|[^a-z0-9.\-])(\d{1,4})\s*(?:x|×|\*)?\s*(ndr|hdr|edr|xdr)(\d{3})?\b)");
  // "4 ConnectX-6 HCAs", "4 OmniPath links", "8 NICs": a count of network adapters, up to four
  // words before the adapter word; a number with a rate unit ("400 Gbps HDR HCAs") is a rate.
  static const std::regex kNicCount(
      R"((?:^|[^a-z0-9.\-])(\d{1,4})(?!\d|\s*(?:gb|gbps|gbit|g\b|tb|tbps))\s*(?:x|×)?\s*(?:(?!gpus?\b|per\b|and\b|with\b)[a-z0-9][^\s,;()]*\s+){0,4}(?:hcas?|nics?|adapters?|links|ports|rails)\b)");
  static const std::regex kNum(R"((\d{1,3}(?:,\d{3}){1,3}|\d{1,7}(?:\.\d+)?)\s*(gb/s|gbps|gbit/s|gbits?\b|tb/s|tbps|tbit/s))");
  static const std::regex kPerNode(
      R"(^[^;.]*(per node|/node|node-node|node-to-node|inter-node|internode|inter node|per server|per instance|per host))");
  static const std::regex kPerGpu(R"(^\s*(per gpu|/gpu|per device|each gpu|per nic|/nic))");
  static const std::regex kIb(R"(\b(ndr|hdr|edr|xdr)(\d{3})?\b)");
  if (std::regex_search(ic, m, kCountRate)) {
    nics = static_cast<std::int32_t>(std::stoi(m[1].str()));
    gbits = rate_gbits(m[2].str(), m[3].str());
  } else if (std::regex_search(ic, m, kCountIb)) {
    nics = static_cast<std::int32_t>(std::stoi(m[1].str()));
    gbits = m[3].matched ? std::stod(m[3].str()) : ib_rate_gbits(m[2].str());
  } else {
    std::optional<std::int32_t> stated_nics;
    // The first count whose clause is not about NVLink ("NVLink4 with 18 links per GPU").
    for (auto it = std::sregex_iterator(ic.begin(), ic.end(), kNicCount); it != std::sregex_iterator(); ++it) {
      if (has(clause_before(*it), "nvlink")) continue;
      stated_nics = static_cast<std::int32_t>(std::stoi((*it)[1].str()));
      break;
    }
    std::optional<double> rate;
    bool per_node = false;
    // The first rate whose clause is not about NVLink ("NVLink/NVSwitch in node (900 GB/s)").
    bool found = false;
    for (auto it = std::sregex_iterator(ic.begin(), ic.end(), kNum); it != std::sregex_iterator(); ++it) {
      if (any_of(clause_before(*it), {"nvlink", "nvswitch"})) continue;
      m = *it;
      found = true;
      break;
    }
    if (found) {
      rate = rate_gbits(m[1].str(), m[2].str());
      const std::string after = m.suffix().str();
      std::smatch pn;
      // A per-node aggregate: "1600 Gbps per node", "800Gbps inter-node interconnect" (the
      // node's links to the others) unless the rate is said to be per GPU; an AWS EFA rate,
      // which AWS quotes per instance (p4d 400 Gbps over 4 EFA adapters, p5 3200 Gbps over 32);
      // or a rate no single NIC port reaches (above 800 Gb/s, XDR).
      per_node = (std::regex_search(after, pn, kPerNode) && !std::regex_search(after, pn, kPerGpu)) ||
                 has(ic, "efa") || *rate > 800;
    } else if (std::regex_search(ic, m, kIb)) {
      rate = m[2].matched ? std::stod(m[2].str()) : ib_rate_gbits(m[1].str());
    }
    if (stated_nics && *stated_nics > 0) {
      // With the adapters counted, a rate is per adapter unless no adapter reaches it.
      nics = stated_nics;
      if (rate) gbits = *rate > 800 ? *rate / *stated_nics : *rate;
    } else if (rate && per_node) {
      // A per-node aggregate: one NIC per GPU sharing it.
      nics = host.nics_per_host > 0 ? host.nics_per_host : host.gpus_per_host;
      gbits = *rate / *nics;
    } else {
      // A bare rate: per NIC, one NIC per GPU (the DGX-class layout).
      gbits = rate;
    }
  }
  if (nics && *nics > 0 && *nics != host.nics_per_host) {
    host.nics_per_host = std::min(*nics, host.gpus_per_host * 4);
    variant += " " + str(host.nics_per_host) + "nic";
  }
  if (gbits && *gbits > 0 && std::fabs(host.nic_bandwidth.bytes_per_s() * 8e-9 - *gbits) > 1e-6) {
    host.nic_bandwidth = Bandwidth::gbits_per_s(*gbits);
    variant += " " + str(static_cast<std::int64_t>(std::llround(*gbits))) + "Gb/s";
  }
  // RoCE fabrics route by ECMP hashing (static per flow); adaptive routing is the InfiniBand
  // subnet manager's default, which the zoo clusters assume.
  if (any_of(ic, {"roce", "ethernet"}) && c.cluster.fabric.adaptive_routing) {
    c.cluster.fabric.adaptive_routing = false;
    variant += " static routing";
  }
  if (!variant.empty()) {
    c.cluster.name += " [" + trim(variant) + "]";
    notes.push_back("cluster " + c.cluster.name + " from the interconnect/gpu columns");
  }
  return c;
}

}  // namespace

namespace {

// The ZeRO stage a text names, by the spellings of DeepSpeed (ZeRO-1/2/3, "stage 2"), PyTorch
// FSDP (FULL_SHARD, SHARD_GRAD_OP, HYBRID_SHARD = HSDP, FSDP2's fully_shard and
// reshard_after_forward=False, which keeps the gathered parameters from the forward for the
// backward: ZeRO-2's traffic), Megatron (--use-distributed-optimizer) and NeMo
// (optim.name distributed_fused_adam, its distributed optimizer); nullopt when it names none.
// HSDP shards within a group and replicates across groups; it is read as ZeRO-3 over the whole
// data-parallel group. The plan can express the groups (ParallelPlan::zero_shard_group, with the
// replicas' all-reduce on its own stream beside the gathers, as FSDP's inter-node process group
// runs it), but read with node-sized groups (FSDP's default, and fms-fsdp's) the IBM/PyTorch FSDP
// blog's three HSDP rows went from -10 / -12 / +1 % to +22 / +18 / +48 % (both with an fp32
// gradient reduction; fms-fsdp's bf16 one makes either reading more optimistic): on their slow inter-node
// links hybrid sharding hides the communication that full sharding exposes, and what is left is
// our compute time, faster than those runs' (measured MFU 0.57 on A100 and 0.37 on H100). Full
// sharding is the better predictor of the published HSDP runs until that gap is explained.
std::optional<int> zero_stage_named(std::string_view text) {
  const std::string w = words(text);
  if (any_of(w, {" shard grad op ", " zero 2 ", " zero2 ", " stage 2 ", " no reshard", " without reshard",
                 " reshard after forward false ", " reshard after forward 0 "})) {
    return 2;
  }
  // Colossal-AI's Gemini plugin shards parameters, gradients and optimizer states in chunks
  // (ZeRO-3 with its chunk manager).
  if (any_of(w, {" full shard ", " hybrid shard ", " hsdp ", " fully shard", " zero 3 ", " zero3 ", " stage 3 ",
                 " fsdp", " zero++ ", " gemini "})) {
    return 3;
  }
  if (any_of(w, {" zero 1 ", " zero1 ", " stage 1 ", " distributed optimizer", " distributed fused adam",
                 " distopt ", " dist opt "})) {
    return 1;
  }
  return std::nullopt;
}

// ZeRO stage of the zero_fsdp column; when it is empty, of the framework column (a stage it
// names, or its documented default); nullopt when neither gives one.
std::optional<int> parse_zero(const PublishedRun& r, const RowFrameworks& fw,
                              std::vector<std::string>& notes) {
  if (!unstated(r.zero_fsdp)) {
    // "none", "no", "False", "off", "DDP": no sharding; a bare stage number: that stage.
    if (first_word_in(r.zero_fsdp, {"none", "no", "false", "off", "disabled", "0"})) return 0;
    const std::string t = trim(r.zero_fsdp);
    if (t == "1" || t == "2" || t == "3") return t[0] - '0';
    return zero_stage_named(r.zero_fsdp).value_or(0);
  }
  const std::string f = framework_name(r);
  if (const auto named = zero_stage_named(r.framework)) {
    if (*named == 3 && has(f, "fsdp")) {
      notes.push_back("ZeRO-3 (framework runs FSDP, FULL_SHARD is its default)");
    } else {
      notes.push_back("ZeRO-" + std::to_string(*named) + " (named in the framework column)");
    }
    return named;
  }
  if (const auto* tt = fw.find("torchtitan");
      tt != nullptr && tt->source_of(config::FrameworkSetting::kZeroStage)) {
    // torchtitan shards over every data-parallel rank unless told otherwise (its profile).
    notes.push_back("ZeRO-" + std::to_string(tt->values.zero_stage) +
                    " (torchtitan's default: FSDP2 over all data-parallel ranks)");
    return tt->values.zero_stage;
  }
  if (const auto* nemo = fw.find("nemo");
      nemo != nullptr && nemo->source_of(config::FrameworkSetting::kZeroStage)) {
    // NeMo's training configs use the distributed optimizer (its profile).
    notes.push_back("ZeRO-" + std::to_string(nemo->values.zero_stage) +
                    " (NeMo's default distributed optimizer)");
    return nemo->values.zero_stage;
  }
  return std::nullopt;
}

// The shard group a sharding cell states as a number ("FSDP=128 x DP=16", "shard degree 8",
// data_parallel_shard_degree=8): hybrid sharding, parameters sharded within groups of that many
// data-parallel ranks and replicated across groups (MaxText's ici/dcn_fsdp_parallelism beside
// dcn_data_parallelism, PyTorch's HYBRID_SHARD, torchtitan's data_parallel_replicate_degree).
// nullopt when no number is stated: HSDP without one stays full sharding (see zero_stage_named).
std::optional<std::int64_t> stated_shard_group(const std::string& text) {
  static const std::regex kGroup(
      R"((?:fsdp|shard(?:ing)?(?:[ _](?:group|degree|size))?)\s*[=:]\s*(\d{1,9})\b|shard(?:ing)?[ _](?:group|degree|size)\s+(?:of\s+)?(\d{1,9})\b)");
  const std::string t = to_lower(text);
  std::smatch m;
  if (!std::regex_search(t, m, kGroup)) return std::nullopt;
  const std::string digits = m[1].matched ? m[1].str() : m[2].str();
  return std::stoll(digits);
}

// "yes", "True (TP with sequence parallel)", "enabled", "on": true; "no", "False", "off": false;
// empty or "not stated": nullopt.
std::optional<bool> parse_yes_no(const std::string& text) {
  const std::string t = to_lower(trim(text));
  if (t.empty() || unstated(t)) return std::nullopt;
  return t == "1" || has(t, "yes") || first_word_in(t, {"y", "true", "on", "enabled", "sp"});
}

// The share of layers that run full recompute when a recompute cell names only some: a count
// ("full, 4 layers per stage", "recompute_num_layers 4": Megatron-LM's block method, per model
// chunk) or a share ("every 2nd layer", "every other block", "half", "50%", "ratio 0.5": layer
// checkpointing of torchtitan's layer policy or fms-fsdp's selective_checkpointing). Nothing
// when the cell names none.
struct PartialRecompute {
  std::int64_t layers = 0;  // per model chunk
  double share = 0;         // of each chunk's layers
};
std::optional<PartialRecompute> parse_partial_recompute(const std::string& text) {
  const std::string t = to_lower(text);
  std::smatch m;
  static const std::regex kCount(R"((\d+)\s*(transformer\s+)?(layers?|blocks?)([^a-z]|$))");
  static const std::regex kNumLayers(R"(num[_ -]?layers[^0-9]{0,3}(\d+))");
  if (std::regex_search(t, m, kNumLayers) || std::regex_search(t, m, kCount)) {
    const std::int64_t n = std::stoll(m[1].str().substr(0, 9));
    if (n > 0) return PartialRecompute{n, 0};
  }
  static const std::regex kEvery(R"(every\s+(other|second|third|fourth|(\d+)(st|nd|rd|th)?)([^a-z0-9]|$))");
  if (std::regex_search(t, m, kEvery)) {
    const std::string w = m[1].str();
    const double n = w == "other" || w == "second" ? 2 : w == "third" ? 3 : w == "fourth" ? 4
                                                                      : std::stod(m[2].str().substr(0, 9));
    if (n >= 1) return PartialRecompute{0, 1.0 / n};
  }
  static const std::regex kPercent(R"((\d+(\.\d+)?)\s*%)");
  static const std::regex kRatio(R"((ratio|fraction|share)[^0-9]{0,3}(0?\.\d+|1(\.0+)?)([^0-9]|$))");
  static const std::regex kHalf(R"((^|[^a-z])half([^a-z]|$))");
  if (std::regex_search(t, m, kPercent)) {
    const double share = std::stod(m[1].str()) / 100.0;
    if (share > 0 && share <= 1) return PartialRecompute{0, share};
  } else if (std::regex_search(t, m, kRatio)) {
    const double share = std::stod(m[2].str());
    if (share > 0 && share <= 1) return PartialRecompute{0, share};
  } else if (std::regex_search(t, kHalf)) {
    return PartialRecompute{0, 0.5};
  }
  return std::nullopt;
}

// "selective" (with the word "op" or "operator": PyTorch's op-policy selective checkpointing, as
// torchtitan's "selective op"); "full", "uniform", "block" (Megatron's --recompute-method with full
// granularity), "activation checkpointing", "True" (a framework's checkpointing switch, which
// checkpoints every layer: DeepSpeed --checkpoint-activations, Hugging Face
// gradient_checkpointing), or a count or share of layers (parse_partial_recompute); "none",
// "no …", "False", "off": none; empty or "not stated": nullopt.
std::optional<parallel::Recompute> parse_recompute(const std::string& text) {
  const std::string t = to_lower(text);
  if (t.empty() || unstated(t)) return std::nullopt;
  if (has(t, "selective")) {
    static const std::regex kOp(R"((^|[^a-z])(op|ops|operator|per-op)([^a-z]|$))");
    return std::regex_search(t, kOp) ? parallel::Recompute::kSelectiveOp : parallel::Recompute::kSelective;
  }
  // Megatron's --recompute-activations is its selective granularity (arguments.py sets
  // recompute_granularity = 'selective'); full granularity is named as such.
  if (any_of(t, {"recompute-activations", "recompute_activations"}) && !has(t, "full")) {
    return parallel::Recompute::kSelective;
  }
  if (first_word_in(t, {"none", "no", "false", "off", "disabled", "0", "without"})) return parallel::Recompute::kNone;
  if (has(t, "full") || has(t, "checkpoint") || has(t, "uniform") || has(t, "block") ||
      first_word_in(t, {"true", "yes", "y", "on", "enabled", "1"}) || parse_partial_recompute(t)) {
    return parallel::Recompute::kFull;
  }
  return parallel::Recompute::kNone;
}

// Layers per pipeline stage when `stages` does not divide `layers`: ceil(layers/stages) each,
// less one on the first and last stages, then the second and second-to-last, … until they sum
// to `layers`. The embedding and the LM head sit on the end stages, so frameworks lighten those:
// Llama 3 405B's 126 layers on 16 stages ran 7, 8 × 14, 7 ("we reduce one Transformer layer
// each from the first and the last stages", Dubey et al. 2024, Sec. 3.3.2); BLOOM's 70 on 12 ran
// 5, 6 × 10, 5 (bigscience tr11-176B-ml README, --pp-partition-method type:transformer|embedding).
// Empty when the stages divide the layers, or when a stage would get none.
std::vector<std::int64_t> uneven_stage_layers(std::int64_t layers, std::int64_t stages) {
  if (stages <= 1 || layers <= stages || layers % stages == 0) return {};
  const std::int64_t base = (layers + stages - 1) / stages;
  std::vector<std::int64_t> out(static_cast<std::size_t>(stages), base);
  std::int64_t extra = base * stages - layers;  // < stages
  for (std::int64_t i = 0; extra > 0; ++i) {
    // 0, stages-1, 1, stages-2, …
    const std::int64_t s = i % 2 == 0 ? i / 2 : stages - 1 - i / 2;
    --out[static_cast<std::size_t>(s)];
    --extra;
  }
  return out;
}

// "7, 8 (x14), 7": runs of equal counts folded.
std::string join_counts(const std::vector<std::int64_t>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j < v.size() && v[j] == v[i]) ++j;
    out += (out.empty() ? "" : ", ") + str(v[i]) + (j - i > 1 ? " (x" + str(static_cast<std::int64_t>(j - i)) + ")" : "");
    i = j;
  }
  return out;
}

// Global batch in tokens of GPT-3 (Brown et al. 2020, Table 2.1) for a model of this size: the
// batch when a source gives none.
double gpt3_batch_tokens(double parameters) {
  if (parameters < 1e9) return 0.5e6;
  if (parameters < 5e9) return 1e6;
  if (parameters < 20e9) return 2e6;
  return 3.2e6;
}

}  // namespace

RowMapping map_run(const PublishedRun& r) {
  config::ComputeModelCache calibrations;
  return map_run(r, calibrations);
}

RowMapping map_run(const PublishedRun& r, config::ComputeModelCache& calibrations) {
  return map_run(r, calibrations, config::load_all_frameworks());
}

// How the row's framework reduces gradients, given the plan's ZeRO stage (map_run, and again when
// validate() chooses a stage the row does not state):
// - precision: the training precision for Composer's PURE FSDP mode (reduce_dtype = the
//   precision; DEFAULT reduces in fp32), fms-fsdp's MixedPrecisionPolicy (bfSixteen:
//   reduce_dtype=torch.bfloat16) and DeepSpeed's ZeRO optimizers (communication_data_type
//   defaults to the training precision; Megatron-DeepSpeed and GPT-NeoX keep fp32 gradients in
//   their BF16_Optimizer or Megatron's main_grad); fp32 for everything else;
// - buckets: FSDP reduce-scatters each wrapped unit's gradients after its backward (Composer and
//   fms-fsdp wrap every transformer block), so its ZeRO-2 buckets are single layers, not
//   Megatron's 40 M parameters (ZeRO-3 reduces per layer in any framework).
void apply_gradient_reduction(const PublishedRun& r, parallel::ParallelPlan& p, std::vector<std::string>& notes) {
  const parallel::ParallelPlan defaults;
  p.grad_reduce = defaults.grad_reduce;
  p.grad_bucket_params = defaults.grad_bucket_params;
  const std::string fw = framework_name(r);
  const bool composer_pure = has(to_lower(r.precision), "pure") &&
                             any_of(to_lower(r.framework + " " + r.precision), {"composer", "llm-foundry", "mpt"});
  const bool fms_fsdp = any_of(fw, {"fms-fsdp", "foundation model stack", "foundation-model-stack"});
  const bool deepspeed_zero =
      p.zero_stage >= 1 && has(fw, "deepspeed") && !any_of(fw, {"megatron-deepspeed", "neox"});
  if (composer_pure || fms_fsdp || deepspeed_zero) {
    p.grad_reduce = parallel::GradReduce::kBf16;
    notes.push_back(std::string("gradients reduced in the training precision (") +
                    (composer_pure ? "Composer PURE" : fms_fsdp ? "fms-fsdp" : "DeepSpeed ZeRO") + ")");
  }
  const bool fsdp = any_of(to_lower(r.framework + " " + r.zero_fsdp), {"fsdp", "fully sharded", "shard_grad_op",
                                                                      "shard grad op", "composer"});
  if (p.zero_stage == 2 && fsdp) {
    p.grad_bucket_params = 1;
    notes.push_back("gradients reduce-scattered per layer (FSDP units)");
  }
}

RowMapping map_run(const PublishedRun& r, config::ComputeModelCache& calibrations,
                   const std::vector<config::FrameworkProfile>& frameworks) {
  RowMapping out;
  auto& notes = out.assumptions;
  const RowFrameworks fw = named_frameworks(r, frameworks);
  out.recompute_modes = fw.recompute_modes();
  const auto skip = [&](std::string why) {
    out.skip_reason = std::move(why);
    out.scenario.reset();
    return out;
  };
  out.max_seq_search = r.max_seq_len.has_value();
  if (!r.seq_len && !out.max_seq_search) return skip("seq_len is empty");
  const std::int64_t seq = r.seq_len ? *r.seq_len : 4096;  // max-seq rows: a start for the search
  if (seq <= 0) return skip("seq_len must be > 0");

  std::string reason;
  auto model = build_model(r, seq, notes, reason);
  if (!model) return skip(reason);
  if (!r.zoo_model.empty()) {
    // A mixture of experts: the architecture is the zoo file's (which cites its config.json),
    // whose expert counts must agree with the row's.
    try {
      model = config::load_model(r.zoo_model);
    } catch (const InputError& e) {
      return skip("zoo_model '" + r.zoo_model + "': " + e.what());
    }
    notes.push_back("architecture of the zoo model " + r.zoo_model);
    const auto differs = [](const std::optional<std::int64_t>& row, std::int64_t zoo) { return row && *row != zoo; };
    const ir::MoeSpec e = model->moe.value_or(ir::MoeSpec{});
    if (differs(r.num_experts, e.num_experts) || differs(r.top_k, e.top_k) ||
        differs(r.moe_ffn_hidden, e.expert_ffn_hidden) || differs(r.shared_experts, e.shared_experts)) {
      return skip("the row's expert counts differ from the zoo model " + r.zoo_model);
    }
  }
  if (llm_foundry_mpt(r)) {
    // MPTConfig (llm-foundry llmfoundry/models/mpt/configuration_mpt.py) defaults attn_pdrop,
    // resid_pdrop and emb_pdrop to 0, and the MPT pretrain yamls keep them.
    model->dropout = false;
    notes.push_back("no dropout (MPT)");
  }
  auto cluster = build_cluster(r, notes, reason);
  if (!cluster) return skip(reason);

  parallel::ParallelPlan p;
  p.tp = r.tp.value_or(1);
  p.pp = r.pp.value_or(1);
  p.cp = r.cp.value_or(1);
  // The context-parallel algorithm a row names: DeepSpeed-Ulysses' all-to-all over heads, or
  // all-gathered KV (Llama 3's); ring attention (Megatron-Core's and NeMo's) otherwise.
  if (p.cp > 1) {
    const std::string text = to_lower(r.framework + " " + r.zero_fsdp + " " + r.notes);
    if (any_of(text, {"ulysses", "all-to-all sequence", "alltoall sequence"})) {
      p.cp_algo = parallel::CpAlgo::kUlysses;
      notes.push_back("context parallelism as DeepSpeed-Ulysses (all-to-all over heads)");
    } else if (any_of(text, {"all-gather kv", "allgather kv", "all-gathered kv", "all-gather based cp",
                             "allgather-based"})) {
      p.cp_algo = parallel::CpAlgo::kAllGather;
      notes.push_back("context parallelism with all-gathered KV");
    }
  }
  p.ep = r.ep.value_or(1);
  p.etp = r.etp.value_or(1);
  // Balanced routing: the MoE rows' sources force-balance the tokens among the experts
  // (Megatron-Bridge's performance summary); a row that says otherwise would set --routing.
  p.vpp = r.vpp.value_or(1);
  if (p.vpp > 1) p.schedule = parallel::Schedule::kInterleaved;
  p.seq_len = seq;
  if (const auto split = uneven_stage_layers(model->num_layers, p.pp * p.model_chunks()); !split.empty()) {
    p.pp_layers = split;
    notes.push_back("pp_layers " + join_counts(split) +
                    " (layers not divisible by the stages: one fewer on the first and last stages, which hold the "
                    "embedding and LM head)");
  }
  const std::int64_t model_parallel = p.tp * p.pp * p.cp;
  if (model_parallel <= 0) return skip("tp, pp and cp must be > 0");
  std::int64_t gpus = 0;
  if (r.dp) {
    p.dp = *r.dp;
    gpus = r.n_gpus.value_or(p.dp * model_parallel);
  } else if (r.n_gpus) {
    gpus = *r.n_gpus;
    if (gpus % model_parallel != 0) {
      return skip("n_gpus " + str(gpus) + " is not a multiple of tp·pp·cp = " + str(model_parallel));
    }
    p.dp = gpus / model_parallel;
    if (p.dp > 1) notes.push_back("dp " + str(p.dp) + " = n_gpus/(tp·pp·cp)");
  } else {
    return skip("n_gpus and dp are both empty");
  }

  if (gpus <= 0 || gpus > (std::int64_t{1} << 24)) return skip("n_gpus " + str(gpus) + " out of range");

  // Batch.
  p.micro_batch = r.micro_batch.value_or(1);
  out.micro_batch_given = r.micro_batch.has_value();
  if (r.global_batch) {
    p.global_batch = *r.global_batch;
  } else if (r.micro_batch && r.grad_accum) {
    p.global_batch = *r.micro_batch * *r.grad_accum * p.dp;
    notes.push_back("global_batch " + str(p.global_batch) + " = micro_batch·grad_accum·dp");
  } else if (out.max_seq_search) {
    p.global_batch = p.micro_batch * p.dp;
  } else {
    const double params = r.n_params_b ? *r.n_params_b * 1e9 : static_cast<double>(ir::parameter_count(*model));
    const double sequences = gpt3_batch_tokens(params) / static_cast<double>(seq);
    // Sequences per replica rounded to a power of two (in log scale), so that power-of-two
    // micro-batches divide it.
    const double per = std::max(1.0, sequences / static_cast<double>(p.dp));
    const auto per_replica = static_cast<std::int64_t>(std::llround(std::exp2(std::round(std::log2(per)))));
    p.global_batch = per_replica * p.dp;
    notes.push_back("global_batch " + str(p.global_batch) + " (GPT-3 batch of " +
                    str(static_cast<std::int64_t>(gpt3_batch_tokens(params))) + " tokens for this size)");
  }
  if (!out.micro_batch_given && r.grad_accum && p.dp > 0 && p.global_batch % (p.dp * *r.grad_accum) == 0) {
    p.micro_batch = p.global_batch / (p.dp * *r.grad_accum);
    out.micro_batch_given = true;
    notes.push_back("micro_batch " + str(p.micro_batch) + " = global_batch/(dp·grad_accum)");
  }
  if (out.max_seq_search && !out.micro_batch_given) out.micro_batch_given = true;  // one sequence

  // Sharding, sequence parallelism, recompute, precision.
  const auto zero = parse_zero(r, fw, notes);
  p.zero_stage = zero.value_or(0);
  out.zero_given = zero.has_value();
  if (const auto group = stated_shard_group(r.zero_fsdp); group && p.zero_stage > 0) {
    const std::int64_t ranks = p.dp * p.cp;
    if (*group > 1 && *group < ranks && ranks % *group == 0) {
      p.zero_shard_group = *group;
      notes.push_back("sharded within groups of " + str(*group) + " of the " + str(ranks) +
                      " data-parallel ranks, replicated across groups (stated shard degree)");
    }
  }
  const auto sp = parse_yes_no(r.sequence_parallel);
  if (sp) {
    p.sequence_parallel = *sp && p.tp > 1;
  } else if (p.tp > 1 && !pre_2022_code_base(r)) {
    // Tensor parallelism shards the norms' and dropouts' activations along the sequence
    // (Korthikanti et al. 2022) in the frameworks of the runs published since: Megatron-Core and
    // NeMo (TP communication overlap requires it, and their recipes enable it with TP > 1),
    // torchtitan (its TP plan puts SequenceParallel on the norms) and the 4D-parallel training
    // of Llama 3. Not in the code bases whose published runs predate it: Megatron-LM's 2021
    // configurations, DeepSpeed and its forks (Megatron-DeepSpeed, GPT-NeoX), metaseq/fairseq.
    p.sequence_parallel = true;
    notes.push_back("sequence parallelism on (tp > 1 in a framework that shards activations with it)");
  } else if (p.tp > 1 && has(to_lower(r.notes), "tp-comm-overlap")) {
    p.sequence_parallel = true;
    notes.push_back("sequence parallelism on (--tp-comm-overlap requires it)");
  }
  if (model->moe && p.tp > 1 && !p.sequence_parallel) {
    p.sequence_parallel = true;
    notes.push_back("sequence parallelism on (Megatron-Core requires it for MoE with tp > 1)");
  }
  if (p.sequence_parallel && p.tp > 1 && any_of(to_lower(r.notes + " " + r.framework), {"tp-comm-overlap", "tp_comm_overlap"})) {
    p.tp_comm_overlap = true;
    notes.push_back("TP communication overlapped with GEMMs (--tp-comm-overlap)");
  }
  auto rc = parse_recompute(r.recompute);
  if (!rc && xtuner(r)) {
    rc = parallel::Recompute::kFull;
    notes.push_back("recompute full (XTuner's SupervisedFinetune default, use_activation_checkpointing=True)");
  }
  out.recompute_given = rc.has_value();
  p.recompute = rc.value_or(parallel::Recompute::kNone);
  const std::string rtext = to_lower(r.recompute);
  if (p.recompute == parallel::Recompute::kSelective &&
      fw.offers(parallel::Recompute::kSelectiveOp) && !has(rtext, "layer")) {
    // torchtitan's selective checkpointing of its Llama training configurations is the op
    // policy (train_configs/llama3_*.toml: selective_ac_option = "op"); "selective layer" (every
    // n-th layer checkpointed whole) is the other option.
    p.recompute = parallel::Recompute::kSelectiveOp;
    notes.push_back("selective checkpointing by op policy (torchtitan's Llama configurations)");
  }
  if (p.recompute != parallel::Recompute::kNone &&
      p.recompute != parallel::Recompute::kSelectiveOp) {
    // Selective checkpointing of whole layers (a framework other than Megatron's, whose
    // "selective" recomputes the attention core in every layer): a row with both HFU and MFU
    // tells the share, as full recompute of a share f of the layers adds f/3 to the model FLOPs
    // (the forward again: 8N instead of 6N per token with every layer).
    std::optional<PartialRecompute> partial = parse_partial_recompute(rtext);
    if (!partial && p.recompute == parallel::Recompute::kSelective &&
        !fw.offers(parallel::Recompute::kSelective) && r.hfu_pct && r.mfu_pct && *r.mfu_pct > 0) {
      const double share = 3.0 * (*r.hfu_pct / *r.mfu_pct - 1.0);
      if (share >= 0.1 && share < 0.95) partial = PartialRecompute{0, share};
    }
    if (partial) {
      const std::int64_t chunk_layers = (model->num_layers + p.pp * p.model_chunks() - 1) / (p.pp * p.model_chunks());
      const std::int64_t n = partial->layers > 0
                                 ? partial->layers
                                 : std::max<std::int64_t>(1, std::llround(partial->share * static_cast<double>(chunk_layers)));
      p.recompute = parallel::Recompute::kFull;
      p.recompute_layers = n < chunk_layers ? n : 0;
      notes.push_back("full recompute of " + (n < chunk_layers ? str(n) + " of the " + str(chunk_layers) : "all " + str(chunk_layers)) +
                      " layers of each model chunk" +
                      (partial->layers > 0 ? "" : " (share " + format_double("%.2f", partial->share) + ")"));
    }
  }
  if (pure_bf16(r)) {
    // Plain SGD on pure bf16 parameters keeps no optimizer state at all.
    const bool stateless = sgd_without_momentum(r);
    p.optimizer_states = stateless ? parallel::OptimizerStates::kNone : parallel::OptimizerStates::kBf16;
    notes.push_back(stateless ? "no optimizer state (SGD without momentum on bf16 weights)"
                              : "bf16 optimizer states (pure bf16 parameters)");
  }
  if (llm_foundry_mpt(r)) {
    // MPT's loss_fn `fused_crossentropy` is flash_attn.losses.cross_entropy.CrossEntropyLoss:
    // the loss of the bf16 logits without an fp32 copy, with a bf16 gradient.
    p.cross_entropy = parallel::CrossEntropy::kBf16;
    notes.push_back("bf16 fused cross-entropy (MPT fused_crossentropy)");
  } else if (fw.gives(config::FrameworkSetting::kCrossEntropy, [](const parallel::ParallelPlan& v) {
               return v.cross_entropy == parallel::CrossEntropy::kFp32Unfused;
             })) {
    // HuggingFace causal LMs and torchtitan: F.cross_entropy on logits.float() (their profiles).
    p.cross_entropy = parallel::CrossEntropy::kFp32Unfused;
    notes.push_back(fw.find("torchtitan") ? "PyTorch cross-entropy on fp32 logits (torchtitan)"
                                          : "PyTorch cross-entropy on fp32 logits (HuggingFace)");
  } else if (fw.gives(config::FrameworkSetting::kCrossEntropy, [](const parallel::ParallelPlan& v) {
               return v.cross_entropy == parallel::CrossEntropy::kBf16InPlace;
             })) {
    // The flash-attention training code's CrossEntropyLossApex with inplace_backward (its profile).
    p.cross_entropy = parallel::CrossEntropy::kBf16InPlace;
    notes.push_back("fused cross-entropy with its gradient in place (flash-attention training code)");
  }
  if (eager_elementwise(r, fw)) {
    p.elementwise = parallel::Elementwise::kEager;
    notes.push_back(
        model->norm == ir::Norm::kLayerNorm
            ? "LayerNorm as PyTorch's native kernel (eager PyTorch, no torch.compile)"
            : "RMSNorm, rotary embedding and SwiGLU as eager PyTorch ops (no torch.compile)");
  }
  // FP8 as Transformer Engine, torchao ("Float8") and the OCP formats (E4M3, E5M2) name it;
  // FP16 also as "float16" (not "bfloat16").
  const std::string prec = to_lower(r.precision);
  const bool bf16_named = any_of(prec, {"bf16", "bfloat16"});
  const bool fp16_named = has(prec, "fp16") || (has(prec, "float16") && !has(prec, "bfloat16"));
  if (any_of(prec, {"nvfp4", "fp4"}) && cluster->gpu.supports(ir::Dtype::kNvfp4)) {
    // NVFP4 (MLPerf Training v5.1 Blackwell submissions): block-scaled FP4 GEMMs.
    p.dtype = ir::Dtype::kNvfp4;
  } else if (has(prec, "mxfp8") && cluster->gpu.supports(ir::Dtype::kMxfp8)) {
    p.dtype = ir::Dtype::kMxfp8;
  } else if (any_of(prec, {"fp8", "float8", "e4m3", "e5m2"})) {
    p.dtype = ir::Dtype::kFp8;
    if (!fw.gives(config::FrameworkSetting::kFp8WeightCache,
                  [](const parallel::ParallelPlan& v) { return v.fp8_weight_cache; })) {
      // Megatron-Core and NeMo tell Transformer Engine which micro-batch is a step's first
      // (is_first_microbatch), which casts the FP8 weights once and reuses them (their
      // profiles); other frameworks (Composer's TE autocast, torchao's float8 in torchtitan)
      // cast them at every micro-batch.
      p.fp8_weight_cache = false;
      notes.push_back("FP8 weights cast at every micro-batch (" + r.framework + ")");
    }
  } else if (fp16_named && !bf16_named) {
    p.dtype = ir::Dtype::kFp16;
  } else {
    p.dtype = ir::Dtype::kBf16;
  }
  apply_gradient_reduction(r, p, notes);
  if (!flash_attention(r)) {
    p.flash_attention = false;
    notes.push_back("attention core unfused (" + r.framework + " without FlashAttention)");
  } else if (const std::string k = attention_kernel(r, fw); !k.empty()) {
    const auto known = calibrated_attention_kernels(cluster->gpu.name, calibrations);
    if (known.count(k) > 0) {
      p.attention_kernel = k;
      notes.push_back("attention kernel " + k);
    } else if (known.count("FlashAttention-2") > 0) {
      p.attention_kernel = "FlashAttention-2";
      notes.push_back("attention kernel FlashAttention-2 (" + k + " is not calibrated for " + cluster->gpu.name + ")");
    }
  }

  // The row's overrides (FILE.overrides.textproto) come last: what its source states outside the
  // CSV's columns.
  for (const auto& o : r.overrides) {
    o.apply(p);
    notes.push_back("override: " + o.reason + " (" + o.source + ")");
  }
  // Parts only: validated (config::make_scenario) for each candidate of the search.
  out.scenario = config::Scenario{std::move(*model), std::move(*cluster), static_cast<std::int32_t>(gpus), p};
  return out;
}

// ---------------------------------------------------------------------------------------------
// Comparison

const char* metric_name(Metric m) {
  switch (m) {
    case Metric::kIterationTime: return "iteration_time_s";
    case Metric::kTokensPerS: return "tokens_per_s";
    case Metric::kTokensPerSPerGpu: return "tokens_per_s_per_gpu";
    case Metric::kTflopsPerGpu: return "tflops_per_gpu";
    case Metric::kMfu: return "mfu_pct";
    case Metric::kHfu: return "hfu_pct";
    case Metric::kPeakMemory: return "peak_memory_bytes";
    case Metric::kMaxSeqLen: return "max_seq_len";
  }
  return "?";
}

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
std::optional<Attempt> try_simulate(const config::Scenario& parts, Resources& resources, std::string& reason) {
  try {
    config::Scenario sc = config::make_scenario(parts.model, parts.cluster, parts.num_gpus, parts.plan);
    RunResult r = simulate(sc, RunOptions{}, resources);
    return Attempt{std::move(sc), std::move(r)};
  } catch (const InputError& e) {
    if (reason.empty()) reason = plan_reason(e);
    return std::nullopt;
  }
}

bool static_oom(const RunResult& r) { return r.status == Status::kOutOfMemory && r.iteration_time_s <= 0; }

std::string join_values(const std::vector<std::int64_t>& v) {
  std::string out;
  for (auto x : v) out += (out.empty() ? "" : "/") + str(x);
  return out;
}

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
              std::vector<std::string>& notes) {
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
      auto a = try_simulate(cand, resources, plan_error);
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
                      (mbs.size() > 1 ? " (fastest that fits of " + join_values(mbs) + ")" : ""));
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
                                             const RunResult& res, std::string& convention) {
  const double t = res.iteration_time_s;
  if (!(t > 0)) return std::nullopt;
  const auto& p = sc.plan;
  const double tokens = static_cast<double>(p.global_batch * p.seq_len);
  const double gpus = static_cast<double>(sc.num_gpus);
  Comparison c;
  const auto rate = [&](Metric m, double predicted, double measured) {
    c.metric = m;
    c.predicted = predicted;
    c.measured = measured;
    c.error = predicted / measured - 1.0;
    return c;
  };
  if (r.iter_time_s && *r.iter_time_s > 0) {
    c.metric = Metric::kIterationTime;
    c.predicted = t;
    c.measured = *r.iter_time_s;
    c.error = c.measured / c.predicted - 1.0;
    return c;
  }
  if (r.tokens_per_s && *r.tokens_per_s > 0) return rate(Metric::kTokensPerS, tokens / t, *r.tokens_per_s);
  if (r.tokens_per_s_per_gpu && *r.tokens_per_s_per_gpu > 0) {
    return rate(Metric::kTokensPerSPerGpu, tokens / t / gpus, *r.tokens_per_s_per_gpu);
  }
  FlopConvention conv = flop_convention(r);
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
    return rate(Metric::kTflopsPerGpu, flops(conv.hardware) / t / gpus * 1e-12, *r.tflops_per_gpu);
  }
  // The source's peak: the GPU's dense peak in the run's precision (312 A100, 989 H100 BF16,
  // 1979 H100 FP8, as the README of the validation set lists).
  const double peak = sc.cluster.gpu.peak(p.dtype).per_s();
  if (r.mfu_pct && *r.mfu_pct > 0 && peak > 0) {
    conv.hardware = false;
    convention = describe(conv) + ", peak " + str(std::llround(peak * 1e-12)) + " TF";
    return rate(Metric::kMfu, flops(false) / t / gpus / peak * 100.0, *r.mfu_pct);
  }
  if (r.hfu_pct && *r.hfu_pct > 0 && peak > 0) {
    conv.hardware = true;
    convention = describe(conv) + ", peak " + str(std::llround(peak * 1e-12)) + " TF";
    return rate(Metric::kHfu, flops(true) / t / gpus / peak * 100.0, *r.hfu_pct);
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
std::int64_t max_fitting_seq(config::Scenario parts, Resources& resources, std::optional<Attempt>& at_max) {
  const bool learned = parts.model.position == ir::Position::kLearned;
  const auto fits = [&](std::int64_t seq) {
    config::Scenario c = parts;
    c.plan.seq_len = seq;
    c.plan.global_batch = c.plan.micro_batch * c.plan.dp;
    if (learned) c.model.max_seq_len = seq;
    std::string reason;
    auto a = try_simulate(c, resources, reason);
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
                   const std::vector<config::FrameworkProfile>& frameworks) {
  RowResult out;
  out.run_id = row.run_id;
  out.line = row.line;
  out.held_out = row.held_out;
  out.overrides = static_cast<std::int64_t>(row.overrides.size());
  out.source = short_source(row.source);
  out.model = row.model;
  out.gpu = row.gpu;
  out.num_gpus = row.n_gpus.value_or(0);
  const auto skip = [&](std::string why) {
    out.skipped = true;
    out.reason = std::move(why);
    return out;
  };
  RowMapping m = map_run(row, resources.compute_cache(), frameworks);
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

  Choice ch = search(m, parts, resources, out.assumptions);
  if (!ch.attempt && !ch.unsupported && ch.oom == false && ch.reason.empty()) ch.reason = "no valid plan";
  // A row that states no sharding, whose weights and optimizer states cannot fit even before
  // activations, ran with some: the fastest ZeRO stage that fits (the search's rule for a setting
  // the row does not give).
  if (!m.zero_given && ch.oom && ch.attempt && static_oom(ch.attempt->result) && parts.plan.dp * parts.plan.cp > 1) {
    std::optional<std::pair<config::Scenario, Choice>> best;
    std::vector<std::string> best_notes;
    for (const int stage : {1, 2, 3}) {
      config::Scenario sharded = parts;
      sharded.plan.zero_stage = stage;
      std::vector<std::string> extra;
      apply_gradient_reduction(row, sharded.plan, extra);
      Choice again = search(m, sharded, resources, extra);
      if (!again.attempt || again.oom) continue;
      if (!best || again.attempt->result.iteration_time_s < best->second.attempt->result.iteration_time_s) {
        best.emplace(std::move(sharded), std::move(again));
        best_notes = std::move(extra);
      }
    }
    if (best) {
      out.assumptions.push_back("ZeRO-" + str(best->first.plan.zero_stage) +
                                " (no sharding stated; the fastest stage that fits)");
      out.assumptions.insert(out.assumptions.end(), best_notes.begin(), best_notes.end());
      parts = std::move(best->first);
      ch = std::move(best->second);
    }
  }
  // Mixed-precision Adam (16-18 bytes per parameter) that cannot fit even before activations
  // means the source trained otherwise: pure bf16 weights, gradients and Adam states (8 bytes).
  if (ch.oom && ch.attempt && static_oom(ch.attempt->result) &&
      parts.plan.optimizer_states == parallel::OptimizerStates::kFp32) {
    config::Scenario bf16 = parts;
    bf16.plan.optimizer_states = parallel::OptimizerStates::kBf16;
    std::vector<std::string> extra;
    Choice again = search(m, bf16, resources, extra);
    if (again.attempt && !again.oom) {
      out.assumptions.push_back("bf16 optimizer states (fp32 mixed-precision Adam does not fit)");
      out.assumptions.insert(out.assumptions.end(), extra.begin(), extra.end());
      parts = bf16;
      ch = std::move(again);
    }
  }
  if (ch.unsupported) return skip("simulator: " + ch.reason);
  if (!ch.attempt) return skip(ch.reason);
  if (ch.oom && static_oom(ch.attempt->result)) return skip("predicted out of memory: " + ch.reason);
  if (ch.oom) out.reason = "predicted out of memory (" + ch.reason + "); compared anyway";

  const Attempt& a = *ch.attempt;
  out.parallelism = parallelism_kind(a.scenario.plan);
  out.throughput = compare_throughput(row, a.scenario, a.result, out.convention);
  if (row.peak_mem && *row.peak_mem > 0) {
    Comparison c;
    c.metric = Metric::kPeakMemory;
    c.predicted = a.result.peak_memory.real();
    c.measured = bytes_of(*row.peak_mem, row.peak_mem_unit, out.assumptions);
    c.error = c.predicted / c.measured - 1.0;
    out.memory = c;
  }
  out.scenario = a.scenario;
  out.result = a.result;
  if (m.max_seq_search && row.max_seq_len && *row.max_seq_len > 0) {
    std::optional<Attempt> at_max;
    const std::int64_t seq = max_fitting_seq(a.scenario, resources, at_max);
    Comparison c;
    c.metric = Metric::kMaxSeqLen;
    c.predicted = static_cast<double>(seq);
    c.measured = static_cast<double>(*row.max_seq_len);
    c.error = c.predicted / c.measured - 1.0;
    out.memory = c;
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
  std::atomic<std::size_t> next{0};
  const auto worker = [&] {
    Resources resources(cache);
    for (std::size_t i = next++; i < runs.size(); i = next++) {
      try {
        report.rows[i] = evaluate(runs[i], resources, options, frameworks);
        if (options.intervals) add_row_interval(report.rows[i], *options.intervals, resources);
      } catch (const std::exception& e) {
        RowResult r;
        r.run_id = runs[i].run_id;
        r.line = runs[i].line;
        r.source = short_source(runs[i].source);
        r.model = runs[i].model;
        r.gpu = runs[i].gpu;
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
  out += " " + std::string(ir::dtype_name(p.dtype));
  if (p.optimizer_states == parallel::OptimizerStates::kBf16) out += " bf16-states";
  if (p.optimizer_states == parallel::OptimizerStates::kNone) out += " no-states";
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
  std::string out = "\nPrediction intervals (share of measurements inside; median width over the prediction)\n";
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
