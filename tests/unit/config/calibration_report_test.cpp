// Prints the fit report of every calibrated GPU (hidden test: run with `test_config "[.report]"`).
#include <catch2/catch.hpp>

#include <cstdio>
#include <iostream>

#include "sim/compute/fit_report.h"
#include "sim/config/calibration_loader.h"

namespace {

using namespace ts;

void print_report(const compute::FitReport& r, bool points) {
  std::printf("== %s (held out: every %d-th point)\n", r.gpu.c_str(), r.holdout_every);
  std::printf("  %-40s %4s %7s %7s %4s %7s %7s %4s %7s\n", "family", "fit", "med", "max", "held", "med",
              "max", "chk", "med");
  for (const auto& s : r.summary()) {
    std::printf("  %-40s %4zu %6.1f%% %6.1f%% %4zu %6.1f%% %6.1f%% %4zu %6.1f%%\n", s.family.c_str(), s.fit_points,
                100 * s.median_fit, 100 * s.max_fit, s.held_out_points, 100 * s.median_held_out,
                100 * s.max_held_out, s.check_points, 100 * s.median_check);
  }
  if (!points) return;
  for (const auto& p : r.points) {
    std::printf("    %-34s %-44s meas %8.1f fit %+6.1f%%", p.family.c_str(), p.label.c_str(), p.measured,
                100 * p.fitted_error);
    if (p.held_out) std::printf(" held %+6.1f%%", 100 * p.held_out_error);
    if (p.check) std::printf(" (check)");
    std::printf("\n");
  }
}

}  // namespace

TEST_CASE("fit report of every calibrated GPU", "[.report]") {
  for (const auto& g : config::known_calibrations()) {
    const auto cal = config::load_calibration(g.name);
    const auto r = compute::evaluate_fit(*cal, 3);
    print_report(r, true);
    const auto& gp = r.fitted.gemm;
    std::printf("  gemm: a16 %.4f a8 %.4f a32 %.4f fill %.3f us fixed %.3f us; mem %.1f GB/s launch %.3f us\n",
                gp.inv_efficiency[0], gp.inv_efficiency[1], gp.inv_efficiency[2], gp.fill_s * 1e6,
                gp.fixed_s * 1e6, r.fitted.memory.achievable_bps * 1e-9, r.fitted.memory.launch_s * 1e6);
    for (const auto& a : r.fitted.attention) {
      const auto pr = [](const char* n, const compute::AttentionDirParams& d) {
        std::printf("    %s a %.4f e %.2f per-wave %.3f us fixed %.3f us\n", n, d.inv_efficiency, d.score_cost,
                    d.per_wave_s * 1e6, d.fixed_s * 1e6);
      };
      std::printf("  attention %s%s\n", a.kernel.c_str(), a.split ? " (split)" : "");
      if (a.split) {
        pr("total", a.total);
      } else {
        pr("fwd", a.fwd);
        pr("bwd", a.bwd);
      }
    }
    CHECK(!r.points.empty());
  }
}
