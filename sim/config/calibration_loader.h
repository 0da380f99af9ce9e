// Loading of calibration/*.textproto into compute::Calibration, and the simulator's compute model.
#pragma once

#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/compute/calibration.h"
#include "sim/compute/compute_model.h"
#include "sim/compute/gpu_spec.h"
#include "sim/ir/dtype.h"

namespace ts::config {

// A calibration by GPU name or alias, case-insensitive ("H100-SXM5-80GB", "h100-sxm") from
// data_dir()/calibration, or by path to a .textproto file. Imports and the attention direction
// split are resolved (their GPUs loaded by name). Throws InputError listing every problem with
// file, line and field path; an unknown name is an error on `flag` that lists the known GPUs.
std::shared_ptr<const compute::Calibration> load_calibration(const std::string& name_or_path,
                                                             std::string_view flag = "--gpu");

struct CalibratedGpu {
  std::string name;                  // the file's `gpu`
  std::vector<std::string> aliases;
  std::filesystem::path file;
};
// The calibration files in data_dir()/calibration, sorted by name.
std::vector<CalibratedGpu> known_calibrations();
// "A100-SXM4-40GB (a100-40gb, ...), H100-SXM5-80GB (h100-sxm, h100), ..." for error messages.
std::string known_calibrations_text();

// The file of a calibrated GPU kind, if data_dir()/calibration has one.
std::optional<std::filesystem::path> calibration_file(const std::string& gpu_name);

// The compute model the simulator uses for `gpu` (the cluster's GPU): the calibrated model
// fitted to calibration/<gpu.name>.textproto when that file exists, else the roofline
// (compute::make_roofline_model). The calibration's datasheet must agree with `gpu` (peaks,
// bandwidth within 5%, same SM count), else InputError.
// `attention_kernel` selects a calibrated attention kernel other than the file's default
// (InputError on --attention-kernel when the GPU has no calibration or no such kernel).
std::unique_ptr<compute::ComputeModel> make_compute_model(const compute::GpuSpec& gpu,
                                                          const std::string& attention_kernel = "");
// The same from an already loaded calibration (null: the roofline).
std::unique_ptr<compute::ComputeModel> make_compute_model(const compute::GpuSpec& gpu,
                                                          std::shared_ptr<const compute::Calibration> calibration,
                                                          const std::string& attention_kernel = "");

// The compute models of many simulations (a sweep): each distinct GPU spec is loaded and fitted
// once (a fit takes ~10-30 ms), then shared. Thread-safe; the models are immutable, and their
// const methods may be called from any thread.
class ComputeModelCache {
 public:
  std::shared_ptr<const compute::ComputeModel> get(const compute::GpuSpec& gpu,
                                                   const std::string& attention_kernel = "");
  // The calibration of a GPU kind, loaded once; null when it has no calibration file.
  std::shared_ptr<const compute::Calibration> calibration(const std::string& gpu_name);

 private:
  std::shared_ptr<const compute::Calibration> calibration_locked(const std::string& gpu_name);
  std::mutex mutex_;
  std::map<std::string, std::shared_ptr<const compute::ComputeModel>> models_;
  std::map<std::string, std::shared_ptr<const compute::Calibration>> calibrations_;
};

// Kernel dtypes as spelled in calibration files and by `trainsim kernel --dtype`:
// bf16, fp16, fp8, fp32.
std::optional<ir::Dtype> try_parse_kernel_dtype(std::string_view s);
std::string kernel_dtype_choices();

}  // namespace ts::config
