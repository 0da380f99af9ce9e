// Per-row overrides file: parse, validate (all problems at once), convert to RowOverride.
#include "sim/config/validation_overrides.h"

#include <set>

#include "sim/config/loader.h"
#include "sim/config/names.h"
#include "sim/config/proto_reader.h"
#include "sim/schema/validation_overrides.pb.h"

namespace ts::config {

void RowOverride::apply(parallel::ParallelPlan& plan, topology::ClusterSpec& cluster) const {
  if (mst_chunks) plan.mst_chunks = *mst_chunks;
  if (optimizer_states) plan.optimizer_states = *optimizer_states;
  if (optimizer_in_backward) plan.optimizer_in_backward = *optimizer_in_backward;
  if (order) plan.order = *order;
  if (grad_reduce) plan.grad_reduce = *grad_reduce;
  if (launch_blocking) plan.launch_blocking = *launch_blocking;
  if (fp8_attention) plan.fp8_attention = *fp8_attention;
  if (gpus_per_domain) {
    const std::string why = place_per_domain(cluster, *gpus_per_domain);
    if (!why.empty()) throw InputError(Diagnostic{file, line, "gpus_per_domain", why});
  }
}

namespace {

// An enum-like field given by name: its value, or nothing with a problem naming the file, line,
// field and the choices.
template <class T>
std::optional<T> choice(const detail::Checker& c, bool given, const std::string& value, const char* field,
                        std::optional<T> (*parse)(std::string_view), std::string (*choices)()) {
  if (!given) return std::nullopt;
  std::optional<T> v = parse(value);
  if (!v) c.fail(field, "unknown value '" + value + "' (one of " + choices() + ")");
  return v;
}

}  // namespace

std::filesystem::path overrides_path(const std::filesystem::path& runs_csv) {
  return runs_csv.parent_path() / (runs_csv.stem().string() + ".overrides.textproto");
}

std::vector<RowOverride> load_validation_overrides(const std::filesystem::path& path) {
  namespace sch = trainsim::schema;
  DiagnosticList diags;
  sch::ValidationOverrides msg;
  detail::FieldLines lines;
  std::vector<RowOverride> out;
  const std::string display = path.string();
  if (detail::read_message(path, display, msg, lines, diags)) {
    const detail::Checker top(display, lines, diags);
    std::set<std::string> ids;
    for (int i = 0; i < msg.overrides_size(); ++i) {
      const auto& m = msg.overrides(i);
      const detail::Checker c = top.nested("overrides[" + std::to_string(i) + "]");
      RowOverride o;
      o.file = display;
      o.line = c.line_of("run_id");
      c.non_empty(m.has_run_id(), m.run_id(), "run_id");
      c.non_empty(m.has_reason(), m.reason(), "reason");
      c.non_empty(m.has_source(), m.source(), "source");
      o.run_id = m.run_id();
      o.reason = m.reason();
      o.source = m.source();
      if (!o.run_id.empty() && !ids.insert(o.run_id).second)
        c.fail("run_id", "run " + o.run_id + " given twice");
      if (m.has_mst_chunks()) {
        if (m.mst_chunks() < 1)
          c.fail("mst_chunks", "must be >= 1 (got " + std::to_string(m.mst_chunks()) + ")");
        o.mst_chunks = m.mst_chunks();
      }
      o.optimizer_states = choice(c, m.has_optimizer_states(), m.optimizer_states(), "optimizer_states",
                                  try_parse_optimizer_states, optimizer_states_choices);
      if (m.has_optimizer_in_backward()) o.optimizer_in_backward = m.optimizer_in_backward();
      if (m.has_order()) {
        try {
          o.order = parse_order(m.order(), "order");
        } catch (const InputError& e) {
          c.fail("order", e.diagnostics().front().message);
        }
      }
      if (m.has_gpus_per_domain()) o.gpus_per_domain = m.gpus_per_domain();
      o.grad_reduce = choice(c, m.has_grad_reduce(), m.grad_reduce(), "grad_reduce", try_parse_grad_reduce,
                             grad_reduce_choices);
      if (m.has_launch_blocking()) o.launch_blocking = m.launch_blocking();
      if (m.has_fp8_attention()) o.fp8_attention = m.fp8_attention();
      if (!o.mst_chunks && !o.optimizer_states && !o.optimizer_in_backward && !o.order &&
          !o.gpus_per_domain && !o.grad_reduce && !o.launch_blocking && !o.fp8_attention) {
        c.fail("run_id", "the override sets no plan field");
      }
      out.push_back(std::move(o));
    }
  }
  diags.throw_if_any();
  return out;
}

}  // namespace ts::config
