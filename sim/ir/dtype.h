// Numeric formats of tensors and kernels.
#pragma once

#include <cstdint>

namespace ts::ir {

// kMxfp8 and kNvfp4 are the block-scaled GEMM formats of Blackwell tensor cores: MXFP8 (OCP
// Microscaling Formats v1.0: FP8 E4M3 elements, one E8M0 scale per block of 32) and NVFP4 (FP4
// E2M1 elements, one FP8 E4M3 scale per block of 16, plus a per-tensor FP32 scale).
enum class Dtype { kBf16, kFp16, kFp8, kFp32, kMxfp8, kNvfp4 };

// Bytes per element, block scales included (MXFP8 1 + 1/32, NVFP4 1/2 + 1/16).
constexpr double bytes_per_element(Dtype d) {
  switch (d) {
    case Dtype::kBf16: return 2;
    case Dtype::kFp16: return 2;
    case Dtype::kFp8: return 1;
    case Dtype::kFp32: return 4;
    case Dtype::kMxfp8:
      return 1.0 + 1.0 / 32.0;
    case Dtype::kNvfp4:
      return 0.5 + 1.0 / 16.0;
  }
  return 0;
}

// A GEMM format whose inputs are quantized from bf16 before the GEMM, with a 16-bit output
// (Transformer Engine's FP8, MXFP8 and NVFP4 recipes); the rest of the layer stays in bf16.
constexpr bool quantized_gemm(Dtype d) {
  switch (d) {
    case Dtype::kFp8:
    case Dtype::kMxfp8:
    case Dtype::kNvfp4:
      return true;
    case Dtype::kBf16:
    case Dtype::kFp16:
    case Dtype::kFp32:
      return false;
  }
  return false;
}

constexpr const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::kBf16: return "bf16";
    case Dtype::kFp16: return "fp16";
    case Dtype::kFp8: return "fp8";
    case Dtype::kFp32: return "fp32";
    case Dtype::kMxfp8:
      return "mxfp8";
    case Dtype::kNvfp4:
      return "nvfp4";
  }
  return "?";
}

}  // namespace ts::ir
