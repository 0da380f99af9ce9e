// Numeric formats of tensors and kernels.
#pragma once

#include <cstdint>

namespace ts::ir {

enum class Dtype { kBf16, kFp16, kFp8, kFp32 };

constexpr std::int64_t bytes_per_element(Dtype d) {
  switch (d) {
    case Dtype::kBf16: return 2;
    case Dtype::kFp16: return 2;
    case Dtype::kFp8: return 1;
    case Dtype::kFp32: return 4;
  }
  return 0;
}

constexpr const char* dtype_name(Dtype d) {
  switch (d) {
    case Dtype::kBf16: return "bf16";
    case Dtype::kFp16: return "fp16";
    case Dtype::kFp8: return "fp8";
    case Dtype::kFp32: return "fp32";
  }
  return "?";
}

}  // namespace ts::ir
