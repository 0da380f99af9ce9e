// Interval calibration file: parse, validate (all problems at once), convert to plain structs.
#include "sim/config/interval_loader.h"

#include <cstdint>
#include <set>

#include "sim/base/format.h"
#include "sim/config/loader.h"
#include "sim/config/proto_reader.h"
#include "sim/schema/intervals.pb.h"

namespace ts::config {
namespace {

namespace sch = trainsim::schema;

// A relative uncertainty: required, in [0, 1).
void share(const detail::Checker& c, bool has, double v, std::string_view field) {
  if (!c.require(has, field)) return;
  if (!(v >= 0 && v < 1))
    c.fail(field, "must be in [0, 1) (a share of the time), got " + detail::format_number(v));
}

KernelUncertainty convert(const sch::KernelUncertainty& k, const detail::Checker& c, bool named) {
  if (named) c.non_empty(k.has_gpu(), k.gpu(), "gpu");
  share(c, k.has_gemm(), k.gemm(), "gemm");
  share(c, k.has_attention(), k.attention(), "attention");
  share(c, k.has_memory(), k.memory(), "memory");
  c.non_empty(k.has_source(), k.source(), "source");
  return KernelUncertainty{k.gpu(), k.gemm(), k.attention(), k.memory()};
}

}  // namespace

const KernelUncertainty& IntervalCalibration::kernels_of(std::string_view gpu) const {
  for (const auto& k : kernels) {
    if (to_lower(k.gpu) == to_lower(std::string(gpu))) return k;
  }
  return default_kernels;
}

std::filesystem::path default_interval_calibration_file() {
  return data_dir() / "calibration" / "intervals" / "intervals.textproto";
}

IntervalCalibration load_interval_calibration(const std::string& path) {
  const std::filesystem::path file =
      path.empty() ? default_interval_calibration_file() : std::filesystem::path(path);
  DiagnosticList diags;
  sch::IntervalCalibration msg;
  detail::FieldLines lines;
  IntervalCalibration out;
  out.file = file.string();
  if (detail::read_message(file, out.file, msg, lines, diags)) {
    const detail::Checker top(out.file, lines, diags);
    std::set<std::string> gpus;
    for (int i = 0; i < msg.kernels_size(); ++i) {
      const detail::Checker c = top.nested("kernels[" + std::to_string(i) + "]");
      out.kernels.push_back(convert(msg.kernels(i), c, true));
      if (!out.kernels.back().gpu.empty() &&
          !gpus.insert(to_lower(out.kernels.back().gpu)).second) {
        c.fail("gpu", "'" + out.kernels.back().gpu + "' given twice");
      }
    }
    if (top.require(msg.has_default_kernels(), "default_kernels")) {
      out.default_kernels = convert(msg.default_kernels(), top.nested("default_kernels"), false);
    }
    share(top, msg.has_clock(), msg.clock(), "clock");
    top.non_empty(msg.has_clock_source(), msg.clock_source(), "clock_source");
    share(top, msg.has_collectives(), msg.collectives(), "collectives");
    top.non_empty(msg.has_collectives_source(), msg.collectives_source(), "collectives_source");
    share(top, msg.has_host_dispatch(), msg.host_dispatch(), "host_dispatch");
    top.non_empty(msg.has_host_dispatch_source(), msg.host_dispatch_source(),
                  "host_dispatch_source");
    out.host_dispatch = msg.host_dispatch();
    out.clock = msg.clock();
    out.collectives = msg.collectives();
    if (top.require(msg.has_conformal(), "conformal")) {
      const auto& cf = msg.conformal();
      const detail::Checker c = top.nested("conformal");
      c.require(cf.has_lower(), "lower");
      c.require(cf.has_upper(), "upper");
      if (cf.has_lower() && cf.has_upper() && !(cf.lower() <= cf.upper())) {
        c.fail("lower", "must not exceed upper (" + detail::format_number(cf.upper()) + "), got " +
                            detail::format_number(cf.lower()));
      }
      if (c.require(cf.has_coverage(), "coverage") && !(cf.coverage() > 0 && cf.coverage() < 1)) {
        c.fail("coverage", "must be in (0, 1), got " + detail::format_number(cf.coverage()));
      }
      c.at_least(cf.has_rows(), static_cast<double>(cf.rows()), 1, "rows");
      c.non_empty(cf.has_fitted_on(), cf.fitted_on(), "fitted_on");
      c.non_empty(cf.has_method(), cf.method(), "method");
      c.non_empty(cf.has_date(), cf.date(), "date");
      out.lower = cf.lower();
      out.upper = cf.upper();
      out.coverage = cf.coverage();
      out.rows = cf.rows();
      out.fitted_on = cf.fitted_on();
    }
  }
  diags.throw_if_any();
  return out;
}

}  // namespace ts::config
