// The normaliser's proposals as text: each row's resolved settings and the rules and overrides that
// gave them (`trainsim validate --emit-scenarios`, checked in as FILE.scenarios.textproto).
#include <cstdio>

#include "sim/config/names.h"
#include "sim/driver/validate.h"
#include "sim/driver/validate_rules.h"
#include "sim/driver/validate_text.h"

namespace ts::driver {

namespace {

using reading::str;

// A protobuf text-format string literal.
std::string quoted(const std::string& s) {
  std::string out = "\"";
  for (const char ch : s) {
    if (ch == '"' || ch == '\\') out += '\\';
    if (ch == '\n') {
      out += "\\n";
      continue;
    }
    out += ch;
  }
  return out + "\"";
}

void field(std::string& out, const char* indent, const std::string& name, const std::string& value) {
  out += std::string(indent) + name + ": " + value + "\n";
}

void row_text(std::string& out, const PublishedRun& r, const RowMapping& m,
              const reading::RowFrameworks& fw) {
  out += "row {\n";
  field(out, "  ", "run_id", quoted(r.run_id));
  field(out, "  ", "line", std::to_string(r.line));
  for (const auto& p : fw.named) field(out, "  ", "framework", quoted(p.name));
  if (fw.date) field(out, "  ", "date", quoted(config::format_year_month(*fw.date)));
  if (!m.scenario) {
    field(out, "  ", "skip_reason", quoted(m.skip_reason));
  } else {
    const auto& sc = *m.scenario;
    const auto& md = sc.model;
    out += "  model {\n";
    field(out, "    ", "name", quoted(md.name));
    field(out, "    ", "layers", str(md.num_layers));
    field(out, "    ", "hidden", str(md.hidden));
    field(out, "    ", "heads", str(md.num_heads));
    field(out, "    ", "kv_heads", str(md.num_kv_heads));
    field(out, "    ", "ffn_hidden", str(md.ffn_hidden));
    field(out, "    ", "vocab", str(md.vocab));
    field(out, "    ", "norm", quoted(std::string(config::name(md.norm))));
    field(out, "    ", "activation", quoted(std::string(config::name(md.activation))));
    field(out, "    ", "position", quoted(std::string(config::name(md.position))));
    if (md.dropout) field(out, "    ", "dropout", *md.dropout ? "true" : "false");
    out += "  }\n";
    field(out, "  ", "cluster", quoted(sc.cluster.cluster.name));
    const auto& domain = sc.cluster.cluster.scale_up;
    if (domain.placed_per_domain() != domain.gpus_per_domain) {
      field(out, "  ", "gpus_per_domain", std::to_string(domain.placed_per_domain()));
    }
    field(out, "  ", "gpus", std::to_string(sc.num_gpus));
    const auto& p = sc.plan;
    out += "  plan {\n";
    field(out, "    ", "tp", str(p.tp));
    field(out, "    ", "pp", str(p.pp));
    field(out, "    ", "dp", str(p.dp));
    field(out, "    ", "cp", str(p.cp));
    if (p.cp > 1) field(out, "    ", "cp_algo", quoted(std::string(config::name(p.cp_algo))));
    if (p.vpp > 1) field(out, "    ", "vpp", str(p.vpp));
    if (!p.pp_layers.empty()) field(out, "    ", "pp_layers", "[" + reading::join(p.pp_layers, ", ") + "]");
    if (!p.pp_layout.empty()) field(out, "    ", "pp_layout", quoted(p.pp_layout));
    if (p.ep > 1 || p.etp > 1) {
      field(out, "    ", "ep", str(p.ep));
      field(out, "    ", "etp", str(p.etp));
      if (p.moe_dispatcher != parallel::MoeDispatcher::kAllToAll) {
        field(out, "    ", "moe_dispatcher", quoted(std::string(config::name(p.moe_dispatcher))));
      }
      if (p.moe_a2a_overlap) field(out, "    ", "moe_a2a_overlap", "true");
    }
    field(out, "    ", "seq_len", str(p.seq_len));
    field(out, "    ", "global_batch", str(p.global_batch));
    field(out, "    ", "micro_batch", m.micro_batch_given ? str(p.micro_batch) : quoted("searched"));
    if (m.recompute_given) {
      field(out, "    ", "recompute", quoted(std::string(config::name(p.recompute))));
      if (p.recompute_layers > 0) field(out, "    ", "recompute_layers", str(p.recompute_layers));
      if (p.recompute_modules != 0) {
        field(out, "    ", "recompute_modules", quoted(config::recompute_modules_name(p.recompute_modules)));
      }
    } else {
      std::string modes;
      for (const auto mode : m.recompute_modes) {
        modes += (modes.empty() ? "" : ", ") + quoted(std::string(config::name(mode)));
      }
      field(out, "    ", "recompute_searched", "[" + modes + "]");
    }
    field(out, "    ", "dtype", quoted(std::string(ir::dtype_name(p.dtype))));
    const parallel::ParallelPlan defaults;
    if (p.optimizer_states != defaults.optimizer_states) {
      field(out, "    ", "optimizer_states", quoted(std::string(config::name(p.optimizer_states))));
    }
    if (p.mst_chunks > 1) field(out, "    ", "mst_chunks", str(p.mst_chunks));
    if (p.optimizer_in_backward) field(out, "    ", "optimizer_in_backward", "true");
    if (p.launch_blocking) field(out, "    ", "launch_blocking", "true");
    if (p.fp8_attention) field(out, "    ", "fp8_attention", "true");
    for (int s = 0; s < config::kNumFrameworkSettings; ++s) {
      const auto setting = static_cast<config::FrameworkSetting>(s);
      if (setting == config::FrameworkSetting::kZeroStage && !m.zero_given) {
        field(out, "    ", "zero", quoted(str(p.zero_stage) + ", or the fastest stage that fits if it does not"));
        continue;
      }
      const std::string value = config::setting_value(setting, p);
      if (value == config::setting_value(setting, defaults)) continue;
      std::string name(config::setting_name(setting));
      for (auto& ch : name) ch = ch == '-' ? '_' : ch;
      field(out, "    ", name, quoted(value));
    }
    out += "  }\n";
  }
  for (const auto& a : m.assumptions) field(out, "  ", "rule", quoted(a));
  for (const auto& o : r.overrides) field(out, "  ", "override", quoted(o.reason + " (" + o.source + ")"));
  out += "}\n";
}

}  // namespace

std::string validation_scenarios(const std::vector<PublishedRun>& runs) {
  config::ComputeModelCache calibrations;
  const auto frameworks = config::load_all_frameworks();
  const auto vocabulary = config::load_reading_vocabulary();
  std::string out =
      "# The scenarios the reading rules propose for these rows, with the rules and overrides that\n"
      "# gave each setting (trainsim validate --runs FILE.csv --emit-scenarios OUT; regenerate, do\n"
      "# not edit). Settings marked searched are chosen per row by validate's search; plan settings\n"
      "# not listed keep the plan defaults of trainsim run.\n";
  for (const auto& r : runs) {
    const RowMapping m = map_run(r, calibrations, frameworks, vocabulary);
    row_text(out, r, m, *m.frameworks);
  }
  return out;
}

}  // namespace ts::driver
