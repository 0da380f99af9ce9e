// Loading of calibration/intervals/intervals.textproto: input uncertainties and conformal factors
// of prediction intervals (driver/intervals.h).
#pragma once

#include <cstdint>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace ts::config {

// Relative uncertainty of one GPU's kernel classes (a share of the time).
struct KernelUncertainty {
  std::string gpu;  // empty: the default entry
  double gemm = 0, attention = 0, memory = 0;
};

struct IntervalCalibration {
  std::string file;
  std::vector<KernelUncertainty> kernels;
  KernelUncertainty default_kernels;
  double clock = 0;          // sustained clock spread, every kernel class
  double collectives = 0;    // collective model spread
  double host_dispatch = 0;  // spread of the host time per operation (eager frameworks)
  // Split-conformal score bounds (schema sim/schema/intervals.proto) and the intended coverage.
  double lower = 0, upper = 0, coverage = 0;
  std::int64_t rows = 0;
  std::string fitted_on;

  // The entry of `gpu` (case-insensitive), else the default.
  const KernelUncertainty& kernels_of(std::string_view gpu) const;
};

// data_dir()/calibration/intervals/intervals.textproto.
std::filesystem::path default_interval_calibration_file();

// Loads an interval calibration (empty path: the default file). Throws InputError listing every
// problem with file, line and field: missing values, uncertainties outside [0, 1), a lower bound
// above the upper one, a coverage outside (0, 1), a GPU given twice, an entry without a source.
IntervalCalibration load_interval_calibration(const std::string& path = "");

}  // namespace ts::config
