// Kernel times scaled per kernel class: the compute model at a perturbed calibration, replayed to
// propagate the calibration's uncertainty into a prediction interval (driver/intervals.h).
#pragma once

#include <memory>

#include "sim/compute/compute_model.h"

namespace ts::compute {

// Multipliers on the time of each kernel class (1: the calibrated time).
struct KernelTimeScale {
  double gemm = 1.0;
  double attention = 1.0;
  double memory = 1.0;
  bool identity() const { return gemm == 1.0 && attention == 1.0 && memory == 1.0; }
  bool operator==(const KernelTimeScale&) const = default;
};

// `inner` with every GEMM, attention and memory-bound kernel time multiplied by its class's
// factor (each > 0).
std::unique_ptr<ComputeModel> with_time_scale(std::shared_ptr<const ComputeModel> inner,
                                              KernelTimeScale scale);

}  // namespace ts::compute
