// Framework profile files: parse, validate (all problems at once), convert to FrameworkProfile.
#include "sim/config/framework_loader.h"

#include <algorithm>
#include <set>

#include "sim/base/format.h"
#include "sim/config/loader.h"
#include "sim/config/names.h"
#include "sim/config/proto_reader.h"
#include "sim/schema/framework.pb.h"

namespace ts::config {
namespace {

namespace sch = trainsim::schema;
namespace fs = std::filesystem;
using detail::Checker;
using detail::FieldLines;

bool is_profile_file(const fs::path& p) {
  const std::string ext = p.extension().string();
  return ext == ".textproto" || ext == ".json";
}

const char* on_off(bool v) {
  return v ? "on" : "off";
}

// One setting of the file: checks its source and converts its value into `out.values`.
class Reader {
 public:
  Reader(const Checker& c, FrameworkProfile& out) : c_(c), out_(out) {}

  template <class Msg, class Set>
  void setting(bool has, const Msg& m, FrameworkSetting s, std::string_view field, Set&& set) {
    if (!has) return;
    const Checker n = c_.nested(field);
    n.non_empty(m.has_source(), m.source(), "source");
    if (!n.require(m.has_value(), "value")) return;
    set(m.value(), n);
    out_.given.push_back({s, m.source()});
  }

 private:
  const Checker& c_;
  FrameworkProfile& out_;
};

// The settings fields of `m` (a profile's, or an era's) into `out`.
void convert_settings(const sch::FrameworkProfile& m, const Checker& c, FrameworkProfile& out) {
  auto& v = out.values;
  Reader r(c, out);
  r.setting(m.has_zero_stage(), m.zero_stage(), FrameworkSetting::kZeroStage, "zero_stage",
            [&](std::int64_t x, const Checker& n) {
              if (x < 0 || x > 3)
                n.fail("value", "ZeRO stage must be 0-3 (got " + std::to_string(x) + ")");
              v.zero_stage = static_cast<int>(x);
            });
  r.setting(m.has_zero_shard_group(), m.zero_shard_group(), FrameworkSetting::kZeroShardGroup,
            "zero_shard_group", [&](std::int64_t x, const Checker& n) {
              if (x < 0) n.fail("value", "must be >= 0 (got " + std::to_string(x) + ")");
              v.zero_shard_group = x;
            });
  r.setting(m.has_sequence_parallel(), m.sequence_parallel(), FrameworkSetting::kSequenceParallel,
            "sequence_parallel", [&](bool x, const Checker&) { v.sequence_parallel = x; });
  r.setting(m.has_attention(), m.attention(), FrameworkSetting::kAttention, "attention",
            [&](const std::string& x, const Checker& n) {
              if (x.empty())
                n.fail("value", "\"default\", \"unfused\" or a calibrated kernel name");
              v.flash_attention = x != "unfused";
              v.attention_kernel = x == "default" || x == "unfused" ? "" : x;
            });
  const auto named = [&](auto parse, std::string choices) {
    return [parse, choices](const std::string& x, const Checker& n, auto& field) {
      if (auto p = parse(x)) {
        field = *p;
      } else {
        n.fail("value", "unknown value '" + x + "' (one of " + choices + ")");
      }
    };
  };
  const auto ce = named(try_parse_cross_entropy, cross_entropy_choices());
  r.setting(m.has_cross_entropy(), m.cross_entropy(), FrameworkSetting::kCrossEntropy,
            "cross_entropy",
            [&](const std::string& x, const Checker& n) { ce(x, n, v.cross_entropy); });
  const auto ew = named(try_parse_elementwise, elementwise_choices());
  r.setting(m.has_elementwise(), m.elementwise(), FrameworkSetting::kElementwise, "elementwise",
            [&](const std::string& x, const Checker& n) { ew(x, n, v.elementwise); });
  const auto gr = named(try_parse_grad_reduce, grad_reduce_choices());
  r.setting(m.has_grad_reduce(), m.grad_reduce(), FrameworkSetting::kGradReduce, "grad_reduce",
            [&](const std::string& x, const Checker& n) { gr(x, n, v.grad_reduce); });
  r.setting(m.has_overlap_grad_reduce(), m.overlap_grad_reduce(),
            FrameworkSetting::kOverlapGradReduce, "overlap_grad_reduce",
            [&](bool x, const Checker&) { v.overlap_grad_reduce = x; });
  r.setting(m.has_overlap_param_gather(), m.overlap_param_gather(),
            FrameworkSetting::kOverlapParamGather, "overlap_param_gather",
            [&](bool x, const Checker&) { v.overlap_param_gather = x; });
  r.setting(m.has_grad_bucket_params(), m.grad_bucket_params(), FrameworkSetting::kGradBucketParams,
            "grad_bucket_params", [&](std::int64_t x, const Checker& n) {
              if (x < 1) n.fail("value", "must be >= 1 (got " + std::to_string(x) + ")");
              v.grad_bucket_params = x;
            });
  r.setting(m.has_fp8_weight_cache(), m.fp8_weight_cache(), FrameworkSetting::kFp8WeightCache,
            "fp8_weight_cache", [&](bool x, const Checker&) { v.fp8_weight_cache = x; });
  r.setting(m.has_tp_comm_overlap(), m.tp_comm_overlap(), FrameworkSetting::kTpCommOverlap,
            "tp_comm_overlap", [&](bool x, const Checker&) { v.tp_comm_overlap = x; });
  r.setting(m.has_host_dispatch_us(), m.host_dispatch_us(), FrameworkSetting::kHostDispatch,
            "host_dispatch_us", [&](double x, const Checker& n) {
              if (!(x >= 0 && x <= 1e6)) {
                n.fail("value", "must be between 0 and 1e6 microseconds (got " +
                                    detail::format_number(x) + ")");
              } else {
                v.host_dispatch = Duration::from_us(x);
              }
            });
  r.setting(m.has_order(), m.order(), FrameworkSetting::kOrder, "order",
            [&](const std::string& x, const Checker& n) {
              try {
                v.order = parse_order(x, "order");
                const parallel::ParallelPlan defaults;
                if (!std::is_permutation(v.order.begin(), v.order.end(), defaults.order.begin(),
                                         defaults.order.end())) {
                  n.fail("value", "'" + x + "' is not a permutation of tp,cp,dp,pp");
                }
              } catch (const InputError& e) {
                n.fail("value", e.diagnostics().front().message);
              }
            });
  std::sort(out.given.begin(), out.given.end(),
            [](const auto& a, const auto& b) { return a.setting < b.setting; });
  if (m.has_recompute_modes()) {
    const Checker n = c.nested("recompute_modes");
    n.non_empty(m.recompute_modes().has_source(), m.recompute_modes().source(), "source");
    if (m.recompute_modes().values_size() == 0) n.fail("values", "required: at least one mode");
    for (const auto& x : m.recompute_modes().values()) {
      if (auto p = try_parse_recompute(x)) {
        out.recompute_modes.push_back(*p);
      } else {
        n.fail("values", "unknown recompute mode '" + x + "' (one of " + recompute_choices() + ")");
      }
    }
    out.recompute_modes_source = m.recompute_modes().source();
  }
  if (m.has_recompute()) {
    const Checker n = c.nested("recompute");
    n.non_empty(m.recompute().has_source(), m.recompute().source(), "source");
    if (n.require(m.recompute().has_value(), "value")) {
      out.recompute = try_parse_recompute(m.recompute().value());
      if (!out.recompute) {
        n.fail("value", "unknown recompute mode '" + m.recompute().value() + "' (one of " +
                            recompute_choices() + ")");
      }
    }
    out.recompute_source = m.recompute().source();
  }
  if (m.has_dropout()) {
    const Checker n = c.nested("dropout");
    n.non_empty(m.dropout().has_source(), m.dropout().source(), "source");
    if (n.require(m.dropout().has_value(), "value")) out.dropout = m.dropout().value();
    out.dropout_source = m.dropout().source();
  }
}

std::optional<YearMonth> read_month(const std::string& text, const Checker& n,
                                    std::string_view field) {
  const auto month = parse_year_month(text);
  if (!month) n.fail(field, "must be a month written YYYY-MM (got '" + text + "')");
  return month;
}

// A ZeRO stage field ({ value: 0-3 source: ... }) of a profile; nullopt where it is broken.
std::optional<int> read_zero_stage_field(const sch::FrameworkInt& g, const Checker& c, const char* field) {
  const Checker n = c.nested(field);
  n.non_empty(g.has_source(), g.source(), "source");
  if (!n.require(g.has_value(), "value")) return std::nullopt;
  if (g.value() < 0 || g.value() > 3) {
    n.fail("value", "must be 0-3");
    return std::nullopt;
  }
  return static_cast<int>(g.value());
}

FrameworkProfile convert(const sch::FrameworkProfile& m, const std::string& file,
                         const Checker& c) {
  FrameworkProfile out;
  out.file = file;
  c.non_empty(m.has_name(), m.name(), "name");
  c.non_empty(m.has_title(), m.title(), "title");
  out.name = m.name();
  out.title = m.title();
  if (m.has_name() && fs::path(file).stem().string() != m.name()) {
    c.fail("name",
           "must be the file's name without extension ('" + fs::path(file).stem().string() + "')");
  }
  for (const auto& a : m.aliases()) out.aliases.push_back(to_lower(a));
  for (const auto& s : m.spelled()) out.spelled.push_back(to_lower(s));
  convert_settings(m, c, out);
  if (m.has_released()) {
    const Checker n = c.nested("released");
    n.non_empty(m.released().has_source(), m.released().source(), "source");
    if (n.require(m.released().has_value(), "value")) {
      out.released = read_month(m.released().value(), n, "value");
    }
    out.released_source = m.released().source();
  }
  for (int i = 0; i < m.era_size(); ++i) {
    const auto& e = m.era(i);
    const Checker n = c.nested("era[" + std::to_string(i) + "]");
    n.non_empty(e.has_source(), e.source(), "source");
    FrameworkProfile::Era era;
    for (const auto& w : e.precision_spelled()) era.precision_spelled.push_back(to_lower(w));
    if (e.has_before()) {
      era.before = read_month(e.before(), n, "before");
    } else if (era.precision_spelled.empty()) {
      n.fail("before", "required value is missing");
    }
    era.source = e.source();
    for (const auto& w : e.spelled()) era.spelled.push_back(to_lower(w));
    const auto& st = e.settings();
    const Checker sn = n.nested("settings");
    if (st.has_name() || st.has_title() || st.aliases_size() > 0 || st.spelled_size() > 0 ||
        st.has_released() || st.era_size() > 0 || st.has_unstated_sharding() ||
        st.builds_on_size() > 0 || st.has_grad_reduce_from_zero_stage() || st.has_kernel_named_by() ||
        st.has_pipeline_zero_stage_max()) {
      n.fail("settings", "an era gives settings only (no name, title, aliases, spelled, released, era, "
                         "pipeline_zero_stage_max or validation fields)");
    }
    FrameworkProfile settings;
    convert_settings(st, sn, settings);
    if (!settings.recompute_modes.empty()) sn.fail("recompute_modes", "not an era's setting");
    era.given = std::move(settings.given);
    era.values = settings.values;
    era.recompute = settings.recompute;
    era.dropout = settings.dropout;
    out.eras.push_back(std::move(era));
  }
  std::stable_sort(out.eras.begin(), out.eras.end(), [](const auto& a, const auto& b) {
    return !a.before ? b.before.has_value() : b.before && *a.before > *b.before;
  });
  if (m.has_unstated_sharding()) {
    const Checker n = c.nested("unstated_sharding");
    n.non_empty(m.unstated_sharding().has_source(), m.unstated_sharding().source(), "source");
    n.non_empty(m.unstated_sharding().has_value(), m.unstated_sharding().value(), "value");
    if (!m.has_zero_stage()) n.fail("value", "needs the profile's zero_stage");
    out.unstated_sharding = m.unstated_sharding().value();
  }
  const std::vector<std::string> known = framework_names();
  for (int i = 0; i < m.builds_on_size(); ++i) {
    if (std::find(known.begin(), known.end(), m.builds_on(i)) == known.end()) {
      c.fail("builds_on[" + std::to_string(i) + "]", "no profile '" + m.builds_on(i) + "' in frameworks/");
    }
    out.builds_on.push_back(m.builds_on(i));
  }
  if (m.has_grad_reduce_from_zero_stage()) {
    const auto stage = read_zero_stage_field(m.grad_reduce_from_zero_stage(), c, "grad_reduce_from_zero_stage");
    out.grad_reduce_from_zero_stage = stage.value_or(0);
  }
  if (m.has_pipeline_zero_stage_max()) {
    const auto stage = read_zero_stage_field(m.pipeline_zero_stage_max(), c, "pipeline_zero_stage_max");
    out.pipeline_zero_stage_max = stage.value_or(3);
    out.pipeline_zero_stage_max_source = m.pipeline_zero_stage_max().source();
  }
  if (m.has_kernel_named_by()) {
    const Checker n = c.nested("kernel_named_by");
    n.non_empty(m.kernel_named_by().has_source(), m.kernel_named_by().source(), "source");
    if (m.kernel_named_by().values().empty()) n.fail("values", "required value is missing");
    for (const auto& w : m.kernel_named_by().values()) out.kernel_named_by.push_back(to_lower(w));
    if (!out.values.flash_attention) n.fail("values", "the profile's attention is unfused: it names no kernel");
  }
  return out;
}

FrameworkProfile read_profile(const fs::path& path, const std::string& display) {
  DiagnosticList diags;
  sch::FrameworkProfile msg;
  FieldLines lines;
  FrameworkProfile out;
  if (detail::read_message(path, display, msg, lines, diags)) {
    const Checker c(display, lines, diags);
    out = convert(msg, display, c);
  }
  diags.throw_if_any();
  return out;
}

}  // namespace

std::string_view setting_name(FrameworkSetting s) {
  switch (s) {
    case FrameworkSetting::kZeroStage:
      return "zero";
    case FrameworkSetting::kZeroShardGroup:
      return "zero-shard-group";
    case FrameworkSetting::kSequenceParallel:
      return "sequence-parallel";
    case FrameworkSetting::kAttention:
      return "attention";
    case FrameworkSetting::kCrossEntropy:
      return "cross-entropy";
    case FrameworkSetting::kElementwise:
      return "elementwise";
    case FrameworkSetting::kGradReduce:
      return "grad-reduce";
    case FrameworkSetting::kOverlapGradReduce:
      return "overlap-grad-reduce";
    case FrameworkSetting::kOverlapParamGather:
      return "overlap-param-gather";
    case FrameworkSetting::kGradBucketParams:
      return "grad-bucket-params";
    case FrameworkSetting::kFp8WeightCache:
      return "fp8-weight-cache";
    case FrameworkSetting::kTpCommOverlap:
      return "tp-comm-overlap";
    case FrameworkSetting::kHostDispatch:
      return "host-dispatch-us";
    case FrameworkSetting::kOrder:
      return "order";
  }
  return "";
}

std::string setting_value(FrameworkSetting s, const parallel::ParallelPlan& p) {
  switch (s) {
    case FrameworkSetting::kZeroStage:
      return std::to_string(p.zero_stage);
    case FrameworkSetting::kZeroShardGroup:
      return std::to_string(p.zero_shard_group);
    case FrameworkSetting::kSequenceParallel:
      return on_off(p.sequence_parallel);
    case FrameworkSetting::kAttention:
      return p.attention_label();
    case FrameworkSetting::kCrossEntropy:
      return std::string(name(p.cross_entropy));
    case FrameworkSetting::kElementwise:
      return std::string(name(p.elementwise));
    case FrameworkSetting::kGradReduce:
      return std::string(name(p.grad_reduce));
    case FrameworkSetting::kOverlapGradReduce:
      return on_off(p.overlap_grad_reduce);
    case FrameworkSetting::kOverlapParamGather:
      return on_off(p.overlap_param_gather);
    case FrameworkSetting::kGradBucketParams:
      return std::to_string(p.grad_bucket_params);
    case FrameworkSetting::kFp8WeightCache:
      return on_off(p.fp8_weight_cache);
    case FrameworkSetting::kTpCommOverlap:
      return on_off(p.tp_comm_overlap);
    case FrameworkSetting::kHostDispatch:
      return detail::format_number(p.host_dispatch.us());
    case FrameworkSetting::kOrder:
      return format_order(p.order);
  }
  return "";
}

void copy_setting(FrameworkSetting s, const parallel::ParallelPlan& from,
                  parallel::ParallelPlan& to) {
  switch (s) {
    case FrameworkSetting::kZeroStage:
      to.zero_stage = from.zero_stage;
      return;
    case FrameworkSetting::kZeroShardGroup:
      to.zero_shard_group = from.zero_shard_group;
      return;
    case FrameworkSetting::kSequenceParallel:
      to.sequence_parallel = from.sequence_parallel;
      return;
    case FrameworkSetting::kAttention:
      to.flash_attention = from.flash_attention;
      to.attention_kernel = from.attention_kernel;
      return;
    case FrameworkSetting::kCrossEntropy:
      to.cross_entropy = from.cross_entropy;
      return;
    case FrameworkSetting::kElementwise:
      to.elementwise = from.elementwise;
      return;
    case FrameworkSetting::kGradReduce:
      to.grad_reduce = from.grad_reduce;
      return;
    case FrameworkSetting::kOverlapGradReduce:
      to.overlap_grad_reduce = from.overlap_grad_reduce;
      return;
    case FrameworkSetting::kOverlapParamGather:
      to.overlap_param_gather = from.overlap_param_gather;
      return;
    case FrameworkSetting::kGradBucketParams:
      to.grad_bucket_params = from.grad_bucket_params;
      return;
    case FrameworkSetting::kFp8WeightCache:
      to.fp8_weight_cache = from.fp8_weight_cache;
      return;
    case FrameworkSetting::kTpCommOverlap:
      to.tp_comm_overlap = from.tp_comm_overlap;
      return;
    case FrameworkSetting::kHostDispatch:
      to.host_dispatch = from.host_dispatch;
      return;
    case FrameworkSetting::kOrder:
      to.order = from.order;
      return;
  }
}

const std::string* FrameworkProfile::source_of(FrameworkSetting s) const {
  for (const auto& g : given) {
    if (g.setting == s) return &g.source;
  }
  return nullptr;
}

void FrameworkProfile::apply(parallel::ParallelPlan& plan) const {
  for (const auto& g : given) copy_setting(g.setting, values, plan);
}

std::string FrameworkProfile::refuses(const parallel::ParallelPlan& plan) const {
  if (plan.pp <= 1 || plan.zero_stage <= pipeline_zero_stage_max) return "";
  return "framework " + name + " runs ZeRO stages up to " + std::to_string(pipeline_zero_stage_max) +
         " only with pipeline parallelism (" + pipeline_zero_stage_max_source + "); got ZeRO " +
         std::to_string(plan.zero_stage) + " with pp " + std::to_string(plan.pp);
}

std::optional<YearMonth> parse_year_month(std::string_view text) {
  if (text.size() != 7 || text[4] != '-') return std::nullopt;
  for (std::size_t i = 0; i < text.size(); ++i) {
    if (i != 4 && (text[i] < '0' || text[i] > '9')) return std::nullopt;
  }
  const int year = std::stoi(std::string(text.substr(0, 4)));
  const int month = std::stoi(std::string(text.substr(5, 2)));
  if (month < 1 || month > 12) return std::nullopt;
  return YearMonth{year, month};
}

std::string format_year_month(YearMonth m) {
  return std::to_string(m.year) + (m.month < 10 ? "-0" : "-") + std::to_string(m.month);
}

FrameworkProfile FrameworkProfile::as_of(std::optional<YearMonth> month, const std::string* column,
                                         const std::string* precision) const {
  FrameworkProfile out = *this;
  out.eras.clear();
  const auto contains = [](const std::string* text, const std::vector<std::string>& words) {
    return text != nullptr && std::any_of(words.begin(), words.end(), [&](const std::string& w) {
             return text->find(w) != std::string::npos;
           });
  };
  for (const auto& era : eras) {  // latest first: the earliest applies last and wins
    if (month && era.before && !(*month < *era.before)) continue;
    if (!era.precision_spelled.empty() && !contains(precision, era.precision_spelled)) continue;
    if (column != nullptr && !era.spelled.empty() &&
        std::none_of(era.spelled.begin(), era.spelled.end(),
                     [&](const std::string& w) { return column->find(w) != std::string::npos; })) {
      continue;
    }
    for (const auto& g : era.given) {
      copy_setting(g.setting, era.values, out.values);
      auto it = std::find_if(out.given.begin(), out.given.end(),
                             [&](const Given& x) { return x.setting == g.setting; });
      const std::string source =
          era.before ? g.source + " (before " + format_year_month(*era.before) + ")" : g.source;
      if (it == out.given.end()) {
        out.given.push_back({g.setting, source});
      } else {
        it->source = source;
      }
    }
    if (era.recompute) out.recompute = era.recompute;
    if (era.dropout) out.dropout = era.dropout;
  }
  std::sort(out.given.begin(), out.given.end(),
            [](const auto& a, const auto& b) { return a.setting < b.setting; });
  return out;
}

fs::path frameworks_dir() {
  return data_dir() / "frameworks";
}

std::vector<std::string> framework_names() {
  std::set<std::string> names;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator(frameworks_dir(), ec)) {
    if (entry.is_regular_file(ec) && entry.path().extension() == ".textproto")
      names.insert(entry.path().stem().string());
  }
  return {names.begin(), names.end()};
}

FrameworkProfile load_framework(const std::string& spec, std::string_view flag) {
  // NAME@YYYY-MM: the profile as of that month.
  if (const auto at = spec.rfind('@'); at != std::string::npos) {
    const auto month = parse_year_month(std::string_view(spec).substr(at + 1));
    if (!month) {
      throw InputError(Diagnostic{"", 0, std::string(flag),
                                  "'" + spec + "': the month after '@' must be written YYYY-MM"});
    }
    FrameworkProfile p = load_framework(spec.substr(0, at), flag).as_of(*month);
    p.name += "@" + format_year_month(*month);
    return p;
  }
  const std::string& name_or_path = spec;
  if (name_or_path.find('/') != std::string::npos || is_profile_file(name_or_path)) {
    return read_profile(name_or_path, name_or_path);
  }
  const std::string want = to_lower(name_or_path);
  const auto names = framework_names();
  for (const auto& n : names) {
    const fs::path path = frameworks_dir() / (n + ".textproto");
    if (want == to_lower(n)) return read_profile(path, "frameworks/" + n + ".textproto");
  }
  // An alias: read the profiles to find it.
  for (const auto& p : load_all_frameworks()) {
    if (std::find(p.aliases.begin(), p.aliases.end(), want) != p.aliases.end()) return p;
  }
  std::string known;
  for (const auto& n : names) known += (known.empty() ? "" : ", ") + n;
  throw InputError(Diagnostic{"", 0, std::string(flag),
                              "unknown framework '" + name_or_path + "' (known: " + known + ")"});
}

std::vector<FrameworkProfile> load_all_frameworks() {
  std::vector<FrameworkProfile> out;
  DiagnosticList diags;
  for (const auto& n : framework_names()) {
    const fs::path path = frameworks_dir() / (n + ".textproto");
    diags.collect([&] { out.push_back(read_profile(path, "frameworks/" + n + ".textproto")); });
  }
  diags.throw_if_any();
  return out;
}

}  // namespace ts::config
