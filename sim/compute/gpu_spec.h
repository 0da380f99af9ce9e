// GpuSpec: datasheet peaks, memory and roofline efficiencies of one GPU kind.
#pragma once

#include <cstdint>
#include <string>

#include "sim/base/units.h"
#include "sim/ir/dtype.h"

namespace ts::compute {

// Dense (no 2:4 sparsity) datasheet peaks and memory of one GPU kind.
struct GpuSpec {
  std::string name;  // e.g. "H100-SXM5-80GB"
  FlopRate peak_bf16;
  FlopRate peak_fp16;
  FlopRate peak_fp8;  // zero where the GPU has no FP8 tensor cores (A100)
  FlopRate peak_fp4;  // NVFP4; zero without FP4 tensor cores (before Blackwell)
  FlopRate peak_tf32;
  FlopRate peak_fp32;
  Bytes memory_capacity;
  Bandwidth memory_bandwidth;
  std::int32_t num_sms = 0;
  // Roofline stand-ins used when no calibration table is loaded: fraction of the tensor peak
  // reached by GEMM/attention kernels, and of HBM bandwidth reached by memory-bound kernels.
  double matmul_efficiency = 0;
  double memory_efficiency = 0;
  Duration kernel_launch_overhead;
  // Fraction by which compute kernels slow while communication kernels run beside them
  // (runtime::contention).
  double compute_slowdown_under_comm = 0;
  // Board power (maximum TDP) per GPU, W, for energy figures; 0 = not given.
  double power_watts = 0;

  FlopRate peak(ir::Dtype d) const {
    switch (d) {
      case ir::Dtype::kBf16: return peak_bf16;
      case ir::Dtype::kFp16: return peak_fp16;
      case ir::Dtype::kFp8: return peak_fp8;
      case ir::Dtype::kFp32: return peak_fp32;
      // Block-scaled FP8 runs at the FP8 rate on the tensor cores that also run FP4 (Blackwell's
      // fifth generation); Hopper's FP8 tensor cores have no hardware block scaling.
      case ir::Dtype::kMxfp8:
        return peak_fp4.per_s() > 0 ? peak_fp8 : FlopRate{};
      case ir::Dtype::kNvfp4:
        return peak_fp4;
    }
    return peak_bf16;
  }
  // Whether the GPU has a math path for `d` (no FP8 tensor cores on A100: peak_fp8 == 0; no
  // MXFP8 or NVFP4 before Blackwell: peak_fp4 == 0).
  bool supports(ir::Dtype d) const { return peak(d).per_s() > 0; }
};

}  // namespace ts::compute
