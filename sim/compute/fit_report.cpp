// Fit report: the calibrated model against every measured point, fitted and held out.
#include "sim/compute/fit_report.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <tuple>
#include <optional>

#include "sim/compute/kernel_features.h"

namespace ts::compute {

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

namespace {

std::string origin_of(const PointOrigin& o) {
  return o.line > 0 ? o.file + ":" + std::to_string(o.line) : o.file;
}

double gemm_seconds(const Calibration& cal, const FittedModel& f, const GemmShape& s) {
  return predict_gemm(f, cal, s).seconds;
}

double attention_seconds(const AttentionParams& p, const AttentionPoint& pt) {
  const AttentionShape s = detail::attention_point_shape(pt, pt.pass == AttentionPass::kBackward);
  if (pt.pass == AttentionPass::kForwardBackward) return predict_attention_fwd_bwd(p, s);
  return predict_attention(p, s);
}

}  // namespace

FitReport evaluate_fit(const Calibration& cal, int holdout_every) {
  FitReport r;
  r.gpu = cal.gpu.name;
  r.holdout_every = holdout_every;
  r.fitted = fit(cal);
  std::optional<FittedModel> partial;
  if (holdout_every > 0) partial = fit(cal, FitOptions{holdout_every});

  // GEMM (a grouped table's points priced by the grouped kernel's fit, with its own family and
  // held-out count; without grouped fit points, by the dense fit)
  std::array<std::size_t, 2> gemm_index{};
  for (const auto& t : cal.gemm) {
    const bool grouped = t.kernel == GemmKernel::kGrouped;
    for (const auto& pt : t.points) {
      GemmShape s{pt.m, pt.n, pt.k, pt.batch, pt.dtype};
      s.grouped = grouped;
      const double measured_s = s.flops().value() / (pt.tflops * 1e12);
      PointError e;
      e.family = std::string(grouped ? "gemm grouped " : "gemm ") + gemm_class_name(gemm_class(pt.dtype));
      e.table = t.name;
      e.derived = t.derived;
      e.label = std::to_string(pt.m) + "x" + std::to_string(pt.n) + "x" + std::to_string(pt.k) +
                (pt.batch != 1 ? " batch " + std::to_string(pt.batch) : "") + " " + ir::dtype_name(pt.dtype);
      e.origin = origin_of(pt.origin);
      e.measured = pt.tflops;
      e.check = t.role == TableRole::kCheck;
      e.fitted_error = gemm_seconds(cal, r.fitted, s) / measured_s - 1.0;
      if (!e.check) {
        e.held_out = is_held_out(gemm_index[static_cast<std::size_t>(t.kernel)]++, holdout_every);
        if (e.held_out) e.held_out_error = gemm_seconds(cal, *partial, s) / measured_s - 1.0;
      }
      r.points.push_back(e);
    }
  }

  // Attention
  // as fit() counts them
  std::map<std::tuple<std::string, ir::Dtype, std::int64_t, std::int64_t>, std::size_t> att_index;
  for (const auto& t : cal.attention) {
    const std::int64_t dv = t.narrow_value_dim();
    const AttentionParams* full = r.fitted.find_attention(t.kernel, t.dtype, t.window, dv);
    if (full == nullptr) continue;  // a kernel with check points only
    const AttentionParams* part = partial ? partial->find_attention(t.kernel, t.dtype, t.window, dv) : nullptr;
    for (const auto& pt : t.points) {
      const double measured_s = detail::attention_point_flops(pt) / (pt.tflops * 1e12);
      PointError e;
      e.family = "attention " + t.kernel + (t.dtype == ir::Dtype::kFp8 ? " fp8 " : " ") +
                 (t.window > 0 ? "window " + std::to_string(t.window) + " " : "") +
                 (dv > 0 ? "values " + std::to_string(dv) + " " : "") +
                 attention_pass_name(pt.pass);
      e.table = t.name;
      e.derived = t.derived;
      e.label = std::string(pt.causal ? "causal" : "non-causal") + " d=" + std::to_string(pt.head_dim) +
                (pt.head_dim_v > 0 ? "/" + std::to_string(pt.head_dim_v) : "") +
                " seq=" + std::to_string(pt.seq) + " batch=" + std::to_string(pt.batch) +
                " heads=" + std::to_string(pt.heads);
      e.origin = origin_of(pt.origin);
      e.measured = pt.tflops;
      e.check = t.role == TableRole::kCheck;
      e.fitted_error = attention_seconds(*full, pt) / measured_s - 1.0;
      if (!e.check) {
        e.held_out = is_held_out(att_index[{t.kernel, t.dtype, t.window, dv}]++, holdout_every);
        if (e.held_out && part != nullptr) e.held_out_error = attention_seconds(*part, pt) / measured_s - 1.0;
      }
      r.points.push_back(e);
    }
  }

  // Memory: the model predicts load+store streaming kernels and the native LayerNorm; load-only
  // and store-only points are listed as checks.
  std::size_t index = 0;
  std::array<std::size_t, 3> moe_index{};  // per eager MoE kernel, as fit() counts them
  std::size_t fused_index = 0;             // fused norm points, as fit() counts them
  for (const auto& t : cal.memory) {
    for (const auto& pt : t.points) {
      PointError e;
      e.family = std::string("memory ") + memory_pattern_name(pt.pattern);
      e.table = t.name;
      e.derived = t.derived;
      e.label = pt.kernel;
      e.origin = origin_of(pt.origin);
      e.measured = pt.gbps;
      e.check = t.role == TableRole::kCheck ||
                (pt.pattern != MemoryPattern::kLoadStore && !is_norm_pattern(pt.pattern) &&
                 !is_fused_norm_pattern(pt.pattern) && !is_moe_pattern(pt.pattern));
      // time ∝ 1/bandwidth, so predicted/measured time = measured/predicted bandwidth.
      e.fitted_error = pt.gbps * 1e9 / r.fitted.memory.predicted_bps(pt.pattern) - 1.0;
      if (t.role == TableRole::kFit) {
        std::size_t& counter = is_moe_pattern(pt.pattern)          ? moe_index[moe_kernel(pt.pattern)]
                               : is_fused_norm_pattern(pt.pattern) ? fused_index
                                                                   : index;
        e.held_out = is_held_out(counter++, holdout_every) && !e.check;
        if (e.held_out)
          e.held_out_error = pt.gbps * 1e9 / partial->memory.predicted_bps(pt.pattern) - 1.0;
      }
      r.points.push_back(e);
    }
  }
  return r;
}

std::vector<FamilySummary> FitReport::summary() const {
  std::vector<FamilySummary> out;
  std::map<std::string, std::size_t> pos;
  std::map<std::string, std::vector<double>> fit_e, held_e, check_e;
  for (const auto& p : points) {
    if (pos.find(p.family) == pos.end()) {
      pos[p.family] = out.size();
      out.push_back(FamilySummary{p.family});
    }
    if (p.check) {
      check_e[p.family].push_back(std::fabs(p.fitted_error));
    } else {
      fit_e[p.family].push_back(std::fabs(p.fitted_error));
      if (p.held_out) held_e[p.family].push_back(std::fabs(p.held_out_error));
    }
  }
  const auto max_of = [](const std::vector<double>& v) {
    return v.empty() ? 0.0 : *std::max_element(v.begin(), v.end());
  };
  for (auto& s : out) {
    s.fit_points = fit_e[s.family].size();
    s.held_out_points = held_e[s.family].size();
    s.check_points = check_e[s.family].size();
    s.median_fit = median(fit_e[s.family]);
    s.max_fit = max_of(fit_e[s.family]);
    s.median_held_out = median(held_e[s.family]);
    s.max_held_out = max_of(held_e[s.family]);
    s.median_check = median(check_e[s.family]);
    s.max_check = max_of(check_e[s.family]);
  }
  return out;
}

}  // namespace ts::compute
