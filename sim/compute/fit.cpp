// Least-squares fits of the calibrated compute model (calibrated_model.h) to measured points.
#include <Eigen/Dense>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <tuple>
#include <string>
#include <vector>

#include "sim/base/diagnostic.h"
#include "sim/compute/calibrated_model.h"
#include "sim/compute/kernel_features.h"

namespace ts::compute {
namespace {

using Eigen::Index;
using Eigen::MatrixXd;
using Eigen::VectorXd;

[[noreturn]] void fit_error(const Calibration& cal, const std::string& field, const std::string& msg) {
  throw InputError(Diagnostic{cal.file, 0, field, msg});
}

// Non-negative least squares: min |A·x − y| subject to x >= 0 (Lawson & Hanson, "Solving
// Least Squares Problems", 1974, ch. 23, algorithm NNLS). The unconstrained subproblems on the
// passive set are solved with Eigen's column-pivoting Householder QR. Columns are scaled to
// unit norm first, so that regressors in seconds and in waves weigh alike. Every parameter of
// the model is a cost (an inverse efficiency or a time), hence the sign constraint.
VectorXd nnls(const MatrixXd& a_in, const VectorXd& y) {
  const Index n = a_in.cols();
  MatrixXd a = a_in;
  VectorXd scale = VectorXd::Zero(n);
  for (Index i = 0; i < n; ++i) {
    const double norm = a.col(i).norm();
    if (norm > 0) {
      scale(i) = 1.0 / norm;
      a.col(i) *= scale(i);
    }
  }
  VectorXd x = VectorXd::Zero(n);
  std::vector<bool> passive(static_cast<std::size_t>(n), false);
  const double tol = 1e-12 * std::max(1.0, y.norm());
  const int max_iter = 30 * static_cast<int>(n) + 30;
  for (int outer = 0; outer < max_iter; ++outer) {
    const VectorXd w = a.transpose() * (y - a * x);
    Index enter = -1;
    double best = tol;
    for (Index i = 0; i < n; ++i) {
      if (!passive[static_cast<std::size_t>(i)] && scale(i) > 0 && w(i) > best) {
        best = w(i);
        enter = i;
      }
    }
    if (enter < 0) break;
    passive[static_cast<std::size_t>(enter)] = true;
    for (int inner = 0; inner < max_iter; ++inner) {
      std::vector<Index> idx;
      for (Index i = 0; i < n; ++i) {
        if (passive[static_cast<std::size_t>(i)]) idx.push_back(i);
      }
      MatrixXd ap(a.rows(), static_cast<Index>(idx.size()));
      for (std::size_t j = 0; j < idx.size(); ++j) ap.col(static_cast<Index>(j)) = a.col(idx[j]);
      const VectorXd zp = ap.colPivHouseholderQr().solve(y);
      VectorXd z = VectorXd::Zero(n);
      bool feasible = true;
      for (std::size_t j = 0; j < idx.size(); ++j) {
        z(idx[j]) = zp(static_cast<Index>(j));
        if (zp(static_cast<Index>(j)) <= 0) feasible = false;
      }
      if (feasible) {
        x = z;
        break;
      }
      // Step from x towards z until the first passive coordinate reaches zero.
      double alpha = std::numeric_limits<double>::infinity();
      for (const Index i : idx) {
        if (z(i) <= 0) alpha = std::min(alpha, x(i) / (x(i) - z(i)));
      }
      x += alpha * (z - x);
      for (const Index i : idx) {
        if (x(i) <= tol) {
          x(i) = 0;
          passive[static_cast<std::size_t>(i)] = false;
        }
      }
    }
  }
  return x.cwiseProduct(scale);
}

// --- GEMM -----------------------------------------------------------------------------------

struct GemmRow {
  GemmShape shape;
  double measured_s = 0;
};

double gemm_objective(const GemmParams& p, const Calibration& cal, double memory_bps,
                      const std::vector<GemmRow>& rows) {
  double sum = 0;
  for (const auto& r : rows) {
    const double e = predict_gemm(p, cal.gpu, cal.gemm_tiles, memory_bps, r.shape).seconds / r.measured_s - 1.0;
    sum += e * e;
  }
  return sum;
}

// The tile choice (argmin of the predicted time) and the memory floor make the model piecewise
// linear in its parameters. The fit alternates: with the tiles and the memory-bound points
// fixed by the current parameters, a, b and c solve a linear NNLS on the relative errors
// (each row divided by its measured time); then the tiles are chosen again. It stops when the
// choices repeat, and keeps the parameters with the smallest relative squared error.
GemmParams fit_gemm(const Calibration& cal, const std::vector<GemmRow>& rows, double memory_bps) {
  std::array<bool, kNumGemmClasses> present{};
  for (const auto& r : rows) present[static_cast<std::size_t>(gemm_class(r.shape.dtype))] = true;
  std::array<Index, kNumGemmClasses> column{};
  Index ncols = 0;
  for (std::size_t c = 0; c < kNumGemmClasses; ++c) column[c] = present[c] ? ncols++ : -1;
  const Index col_fill = ncols++;
  const Index col_fixed = ncols++;
  if (static_cast<Index>(rows.size()) < ncols) {
    fit_error(cal, "gemm", std::to_string(rows.size()) + " GEMM fit points cannot determine " +
                               std::to_string(ncols) + " parameters");
  }
  if (cal.gemm_tiles.empty()) fit_error(cal, "gemm_model.tile", "GEMM points need at least one tile");

  GemmParams p;
  for (std::size_t c = 0; c < kNumGemmClasses; ++c) {
    p.inv_efficiency[c] = 1.0;  // start from the datasheet peak
    p.fitted[c] = present[c];
  }
  p.num_points = rows.size();
  GemmParams best = p;
  double best_obj = std::numeric_limits<double>::infinity();
  std::vector<int> prev_choice;
  for (int iter = 0; iter < 50; ++iter) {
    std::vector<int> choice(rows.size());
    MatrixXd a = MatrixXd::Zero(static_cast<Index>(rows.size()), ncols);
    VectorXd y = VectorXd::Zero(static_cast<Index>(rows.size()));
    for (std::size_t i = 0; i < rows.size(); ++i) {
      const auto& r = rows[i];
      const auto cls = static_cast<std::size_t>(gemm_class(r.shape.dtype));
      const double peak = cal.gpu.peak(r.shape.dtype).per_s();
      double best_t = std::numeric_limits<double>::infinity();
      detail::GemmFeatures best_f;
      for (std::size_t t = 0; t < cal.gemm_tiles.size(); ++t) {
        const auto f = detail::gemm_features(r.shape, cal.gemm_tiles[t], cal.gpu.num_sms, peak);
        const double time = p.inv_efficiency[cls] * f.mma_s + p.fill_s * f.fill + p.fixed_s;
        if (time < best_t) {
          best_t = time;
          best_f = f;
          choice[i] = static_cast<int>(t);
        }
      }
      const bool memory_bound = iter > 0 && detail::gemm_bytes(r.shape) / memory_bps > best_t;
      if (memory_bound) {
        choice[i] = -1 - choice[i];
        continue;  // a zero row: this point does not constrain the compute terms
      }
      const auto row = static_cast<Index>(i);
      a(row, column[cls]) = best_f.mma_s / r.measured_s;
      a(row, col_fill) = best_f.fill / r.measured_s;
      a(row, col_fixed) = 1.0 / r.measured_s;
      y(row) = 1.0;
    }
    if (choice == prev_choice) break;
    prev_choice = choice;
    const VectorXd x = nnls(a, y);
    for (std::size_t c = 0; c < kNumGemmClasses; ++c) {
      if (present[c]) p.inv_efficiency[c] = x(column[c]);
    }
    p.fill_s = x(col_fill);
    p.fixed_s = x(col_fixed);
    const double obj = gemm_objective(p, cal, memory_bps, rows);
    if (obj < best_obj) {
      best_obj = obj;
      best = p;
    }
  }
  // A class without points runs at the 16-bit efficiency relative to its own peak.
  const double fallback = best.fitted[0] ? best.inv_efficiency[0] : 1.0;
  for (std::size_t c = 0; c < kNumGemmClasses; ++c) {
    if (!best.fitted[c] || best.inv_efficiency[c] <= 0) {
      best.inv_efficiency[c] = fallback;
      best.fitted[c] = false;
    }
  }
  return best;
}

// The grouped kernel: the GEMM fit at each HBM floor `share` × the streaming rate, on a grid
// of 5 % steps from 20 % to 100 %, then of 1 % steps around the best; the floor and parameters
// with the smallest squared relative error win (the floor enters the model through a max, so
// it is searched, not solved).
GroupedGemmParams fit_grouped_gemm(const Calibration& cal, const std::vector<GemmRow>& rows,
                                   double streaming_bps) {
  GroupedGemmParams best;
  double best_obj = std::numeric_limits<double>::infinity();
  const auto consider = [&](int percent) {
    const double bps = streaming_bps * percent / 100.0;
    const GemmParams p = fit_gemm(cal, rows, bps);
    const double obj = gemm_objective(p, cal, bps, rows);
    if (obj < best_obj) {
      best_obj = obj;
      best = GroupedGemmParams{p, bps, true};
    }
    return obj;
  };
  int best_percent = 100;
  double coarse_best = std::numeric_limits<double>::infinity();
  for (int percent = 20; percent <= 100; percent += 5) {
    if (const double obj = consider(percent); obj < coarse_best) {
      coarse_best = obj;
      best_percent = percent;
    }
  }
  for (int percent = std::max(20, best_percent - 4); percent <= std::min(100, best_percent + 4); ++percent) {
    if (percent != best_percent) consider(percent);
  }
  return best;
}

// --- attention ------------------------------------------------------------------------------

struct AttentionRow {
  AttentionPoint point;
  double measured_s = 0;
};

// Columns per direction: a, e, b, and a_c when the kernel has both causal and non-causal
// points (only then is the causal cost identifiable); c is the kernel launch cost.
Index attention_cols(bool causal_col) { return causal_col ? 4 : 3; }

void put_features(MatrixXd& a, Index row, Index col0, bool causal_col, const detail::AttentionFeatures& f,
                  double measured_s) {
  a(row, col0 + 0) += f.mma_s / measured_s;
  a(row, col0 + 1) += f.scores_s / measured_s;
  a(row, col0 + 2) += f.waves / measured_s;
  if (causal_col) a(row, col0 + 3) += f.causal_mma_s / measured_s;
}

AttentionDirParams dir_params(const VectorXd& x, Index col0, bool causal_col, double launch_s) {
  AttentionDirParams d;
  d.inv_efficiency = x(col0 + 0);
  d.score_cost = x(col0 + 1);
  d.per_wave_s = x(col0 + 2);
  d.causal_extra = causal_col ? x(col0 + 3) : 0.0;
  d.fixed_s = launch_s;
  return d;
}

// A kernel with only forward+backward points is a split kernel: the reference for its
// forward share is a kernel of another GPU's file, or (reference null) of this file.
bool split_kernel(const std::vector<AttentionRow>& rows) {
  for (const auto& r : rows) {
    if (r.point.pass != AttentionPass::kForwardBackward) return false;
  }
  return true;
}

// One kernel's parameters by NNLS on relative errors. With forward or backward points the two
// directions have separate parameters (a, e, b, a_c each), and a forward+backward point
// constrains their sum. Without either, the forward+backward sums are fitted with one set over
// the summed features, and the forward share comes from the reference kernel. The fixed
// cost of a kernel is not fitted but taken as the launch cost c: every published attention
// point has the same tokens and hidden size (16k × 2048), so a fitted constant would absorb
// per-token costs and misprice other shapes. The bytes floor is left out of the fit: the
// measured attention points are compute-bound.
// `own`: the kernels of this file fitted so far (a direction split may name one of them).
AttentionParams fit_attention_kernel(const Calibration& cal, const std::string& name, ir::Dtype dtype,
                                     std::int64_t window, std::int64_t head_dim_v,
                                     const std::vector<AttentionRow>& rows,
                                     double memory_bps, double launch_s,
                                     const std::vector<AttentionParams>& own) {
  AttentionParams p;
  p.kernel = name;
  p.dtype = dtype;
  p.window = window;
  p.head_dim_v = head_dim_v;
  p.block = cal.attention_block;
  p.num_sms = cal.gpu.num_sms;
  p.peak_flops = cal.gpu.peak(dtype).per_s();
  // Messages name an FP8 fit as such.
  const std::string kernel = (dtype == ir::Dtype::kBf16 ? name : name + " (fp8)") +
                             (window > 0 ? " (window " + std::to_string(window) + ")" : "") +
                             (head_dim_v > 0 ? " (values " + std::to_string(head_dim_v) + ")" : "");
  p.memory_bps = memory_bps;
  p.num_points = rows.size();
  if (p.block <= 0) fit_error(cal, "attention_model.block", "attention points need a block size");
  bool has_fwd = false, has_bwd = false, has_causal = false, has_full = false;
  for (const auto& r : rows) {
    has_fwd = has_fwd || r.point.pass == AttentionPass::kForward;
    has_bwd = has_bwd || r.point.pass == AttentionPass::kBackward;
    has_causal = has_causal || r.point.causal;
    has_full = has_full || !r.point.causal;
  }
  p.split = split_kernel(rows);
  // The causal cost is fitted where both kinds of points exist and they are enough for it.
  const Index directions = p.split ? 1 : 2;
  const bool causal_col = has_causal && has_full &&
                          static_cast<Index>(rows.size()) >= directions * attention_cols(true);
  const Index dir_cols = attention_cols(causal_col);
  const Index ncols = directions * dir_cols;
  if (static_cast<Index>(rows.size()) < ncols) {
    fit_error(cal, "attention", kernel + ": " + std::to_string(rows.size()) +
                                    " fit points cannot determine " + std::to_string(ncols) + " parameters");
  }
  if (!p.split && !(has_fwd && has_bwd)) {
    bool has_both = false;
    for (const auto& r : rows) has_both = has_both || r.point.pass == AttentionPass::kForwardBackward;
    if (!has_both) {
      fit_error(cal, "attention", kernel + ": only " + std::string(has_fwd ? "forward" : "backward") +
                                      " points; the other direction needs backward or forward+backward points");
    }
  }
  MatrixXd a = MatrixXd::Zero(static_cast<Index>(rows.size()), ncols);
  VectorXd y = VectorXd::Ones(static_cast<Index>(rows.size()));
  for (std::size_t i = 0; i < rows.size(); ++i) {
    const auto& r = rows[i];
    const auto row = static_cast<Index>(i);
    const bool fwd = r.point.pass != AttentionPass::kBackward;
    const bool bwd = r.point.pass != AttentionPass::kForward;
    if (fwd) {
      const auto f = detail::attention_features(detail::attention_point_shape(r.point, false), false,
                                                p.block, p.num_sms, p.peak_flops);
      put_features(a, row, 0, causal_col, f, r.measured_s);
      y(row) -= launch_s / r.measured_s;
    }
    if (bwd) {
      const auto f = detail::attention_features(detail::attention_point_shape(r.point, true), true,
                                                p.block, p.num_sms, p.peak_flops);
      put_features(a, row, p.split ? 0 : dir_cols, causal_col, f, r.measured_s);
      y(row) -= launch_s / r.measured_s;
    }
  }
  const VectorXd x = nnls(a, y);
  if (p.split) {
    p.total = dir_params(x, 0, causal_col, launch_s);
    if (!cal.direction_split) {
      fit_error(cal, "attention_model.direction_split",
                kernel + " has only forward+backward points: name a GPU and kernel whose forward "
                         "and backward were measured apart");
    }
    const auto& split = *cal.direction_split;
    FittedModel ref;
    if (split.reference) {
      ref = fit(*split.reference);
    } else {
      ref.attention = own;
    }
    const AttentionParams* rp = ref.find_attention(split.kernel);
    if (rp == nullptr || rp->split) {
      fit_error(cal, "attention_model.direction_split.kernel",
                "the reference " + (split.reference ? split.reference->gpu.name : cal.gpu.name) +
                    " has no separate forward and backward fit of '" + split.kernel + "'");
    }
    p.reference = std::make_shared<AttentionParams>(*rp);
  } else {
    p.fwd = dir_params(x, 0, causal_col, launch_s);
    p.bwd = dir_params(x, dir_cols, causal_col, launch_s);
  }
  return p;
}

}  // namespace

FittedModel fit(const Calibration& cal, const FitOptions& options) {
  FittedModel out;

  // Memory: the least-squares constant of the load+store streaming points is their mean; so are
  // the native LayerNorm's forward and forward+backward rates of their points.
  {
    double sum = 0, fwd_sum = 0, full_sum = 0;
    std::size_t n = 0, n_fwd = 0, n_full = 0, index = 0;
    // Eager MoE kernels: gather, combine, router (MemoryKernel order from kMoeGather).
    std::array<double, 3> moe_sum{};
    std::array<std::size_t, 3> moe_n{}, moe_index{};
    // Fused norm kernel, forward and backward (their held-out points counted apart, so that a
    // GPU's other memory points keep their held-out split).
    std::array<double, 2> fused_sum{};
    std::array<std::size_t, 2> fused_n{};
    std::size_t fused_index = 0;
    for (const auto& t : cal.memory) {
      if (t.role != TableRole::kFit) continue;
      for (const auto& pt : t.points) {
        // The eager MoE kernels count their held-out points per kernel (their tables cycle
        // through the three kernels, and a shared count would hold out all of one).
        std::size_t& counter = is_moe_pattern(pt.pattern)          ? moe_index[moe_kernel(pt.pattern)]
                               : is_fused_norm_pattern(pt.pattern) ? fused_index
                                                                   : index;
        if (is_held_out(counter++, options.holdout_every)) continue;
        if (pt.pattern == MemoryPattern::kLoadStore) {
          sum += pt.gbps * 1e9;
          ++n;
        } else if (pt.pattern == MemoryPattern::kNormForward) {
          fwd_sum += pt.gbps * 1e9;
          ++n_fwd;
        } else if (pt.pattern == MemoryPattern::kNormForwardBackward) {
          full_sum += pt.gbps * 1e9;
          ++n_full;
        } else if (is_fused_norm_pattern(pt.pattern)) {
          const std::size_t k = pt.pattern == MemoryPattern::kFusedNormForward ? 0 : 1;
          fused_sum[k] += pt.gbps * 1e9;
          ++fused_n[k];
        } else if (is_moe_pattern(pt.pattern)) {
          const std::size_t k = moe_kernel(pt.pattern);
          moe_sum[k] += pt.gbps * 1e9;
          ++moe_n[k];
        }
      }
    }
    if (n == 0) fit_error(cal, "memory", "no load_store memory point to set the achievable HBM bandwidth");
    out.memory.achievable_bps = sum / static_cast<double>(n);
    out.memory.num_points = n;
    // Each eager MoE kernel at the mean of its points (the least-squares rate, as above), or
    // at the streaming rate without points.
    const auto moe_rate = [&](std::size_t k) {
      return moe_n[k] > 0 ? moe_sum[k] / static_cast<double>(moe_n[k]) : out.memory.achievable_bps;
    };
    out.memory.moe_gather_bps = moe_rate(0);
    out.memory.moe_combine_bps = moe_rate(1);
    out.memory.moe_router_bps = moe_rate(2);
    out.memory.moe_points = moe_n[0] + moe_n[1] + moe_n[2];
    // The fused norm kernel at the mean of each direction's points, or at the streaming rate.
    const auto fused_rate = [&](std::size_t k) {
      return fused_n[k] > 0 ? fused_sum[k] / static_cast<double>(fused_n[k]) : out.memory.achievable_bps;
    };
    if ((fused_n[0] == 0) != (fused_n[1] == 0)) {
      fit_error(cal, "memory", "fused norm points need both fused_norm_forward and fused_norm_backward");
    }
    out.memory.fused_norm_fwd_bps = fused_rate(0);
    out.memory.fused_norm_bwd_bps = fused_rate(1);
    out.memory.fused_norm_points = fused_n[0] + fused_n[1];
    if ((n_fwd == 0) != (n_full == 0)) {
      fit_error(cal, "memory",
                "native LayerNorm points need both norm_forward and norm_forward_backward");
    }
    if (n_fwd > 0) {
      const double fwd = fwd_sum / static_cast<double>(n_fwd);
      const double full = full_sum / static_cast<double>(n_full);
      // Forward+backward moves 5 passes in the forward's 2 and the backward's 3.
      const double bwd_s_per_byte = (5.0 / full - 2.0 / fwd) / 3.0;
      if (bwd_s_per_byte <= 0) {
        fit_error(cal, "memory",
                  "native LayerNorm forward+backward points are faster than the forward alone");
      }
      out.memory.native_norm_fwd_bps = fwd;
      out.memory.native_norm_bwd_bps = 1.0 / bwd_s_per_byte;
      out.memory.native_norm_points = n_fwd + n_full;
    } else {
      out.memory.native_norm_fwd_bps = out.memory.native_norm_bwd_bps = out.memory.achievable_bps;
    }
  }

  // GEMM: the dense kernel, and the grouped kernel where the file has grouped points (each
  // family counts its own held-out points).
  {
    std::array<std::vector<GemmRow>, 2> rows;
    std::array<std::size_t, 2> index{};
    for (const auto& t : cal.gemm) {
      if (t.role != TableRole::kFit) continue;
      const auto kind = static_cast<std::size_t>(t.kernel);
      for (const auto& pt : t.points) {
        if (is_held_out(index[kind]++, options.holdout_every)) continue;
        GemmRow r;
        r.shape = GemmShape{pt.m, pt.n, pt.k, pt.batch, pt.dtype};
        r.measured_s = r.shape.flops().value() / (pt.tflops * 1e12);
        rows[kind].push_back(r);
      }
    }
    const auto& dense = rows[static_cast<std::size_t>(GemmKernel::kDense)];
    if (dense.empty()) fit_error(cal, "gemm", "no GEMM fit point");
    out.gemm = fit_gemm(cal, dense, out.memory.achievable_bps);
    const auto& grouped = rows[static_cast<std::size_t>(GemmKernel::kGrouped)];
    if (!grouped.empty()) out.grouped = fit_grouped_gemm(cal, grouped, out.memory.achievable_bps);
  }

  if (cal.launch_overhead) {
    out.memory.launch_s = cal.launch_overhead->seconds();
    out.memory.launch_measured = true;
  } else {
    out.memory.launch_s = out.gemm.fill_s + out.gemm.fixed_s;
  }

  // Attention, per kernel, dtype, sliding window and narrower value width, in order of first
  // appearance.
  {
    using Key = std::tuple<std::string, ir::Dtype, std::int64_t, std::int64_t>;
    std::vector<Key> kernels;
    std::map<Key, std::vector<AttentionRow>> rows;
    std::map<Key, std::size_t> index;
    for (const auto& t : cal.attention) {
      if (t.role != TableRole::kFit) continue;
      const Key key{t.kernel, t.dtype, t.window, t.narrow_value_dim()};
      if (rows.find(key) == rows.end()) kernels.push_back(key);
      auto& list = rows[key];
      for (const auto& pt : t.points) {
        if (is_held_out(index[key]++, options.holdout_every)) continue;
        list.push_back(AttentionRow{pt, detail::attention_point_flops(pt) / (pt.tflops * 1e12)});
      }
    }
    // Kernels measured per direction first, so that a split kernel may take its forward share
    // from one of them; then back in order of first appearance.
    std::stable_partition(kernels.begin(), kernels.end(),
                          [&](const Key& k) { return !split_kernel(rows[k]); });
    std::vector<AttentionParams> fitted;
    for (const auto& k : kernels) {
      fitted.push_back(fit_attention_kernel(cal, std::get<0>(k), std::get<1>(k), std::get<2>(k), std::get<3>(k),
                                            rows[k], out.memory.achievable_bps, out.memory.launch_s, fitted));
    }
    for (const auto& t : cal.attention) {
      const std::int64_t dv = t.narrow_value_dim();
      if (t.role != TableRole::kFit || out.find_attention(t.kernel, t.dtype, t.window, dv) != nullptr) continue;
      for (auto& f : fitted) {
        if (f.kernel == t.kernel && f.dtype == t.dtype && f.window == t.window && f.head_dim_v == dv) {
          out.attention.push_back(std::move(f));
        }
      }
    }
  }

  return out;
}

}  // namespace ts::compute
