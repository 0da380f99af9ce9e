// Fit report: the calibrated model against every measured point, fitted and held out.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "sim/compute/calibrated_model.h"
#include "sim/compute/calibration.h"

namespace ts::compute {

// One measured point and the model's predictions for it. Errors are on time:
// predicted / measured − 1 (positive: the model is slower than the measurement).
struct PointError {
  std::string family;  // "gemm bf16/fp16", "attention FlashAttention-3 fwd", "memory load_store"
  std::string table;
  std::string label;   // the shape, e.g. "8192x8192x8192 bf16"
  std::string origin;  // file:line
  double measured = 0;     // TFLOP/s (GEMM, attention) or GB/s (memory)
  double fitted_error = 0;    // of the model fitted on every fit point
  double held_out_error = 0;  // of the model fitted without the held-out points (held_out only)
  bool held_out = false;
  bool check = false;  // from a check-only table, or a memory pattern the model does not cover
  bool derived = false;  // `measured` is derived from another GPU's measurement (table.derived)
};

struct FamilySummary {
  std::string family;
  std::size_t fit_points = 0, held_out_points = 0, check_points = 0;
  double median_fit = 0, max_fit = 0;          // |error| over fit points, full fit
  double median_held_out = 0, max_held_out = 0;  // |error| over held-out points
  double median_check = 0, max_check = 0;      // |error| over check points, full fit
};

struct FitReport {
  std::string gpu;
  int holdout_every = 0;
  FittedModel fitted;  // on every fit point
  std::vector<PointError> points;
  std::vector<FamilySummary> summary() const;  // families in order of first appearance
};

// Fits `cal` on all fit points and, when holdout_every > 0, again without every
// holdout_every-th point of each family (FitOptions), and predicts every point with both.
FitReport evaluate_fit(const Calibration& cal, int holdout_every);

double median(std::vector<double> v);

}  // namespace ts::compute
