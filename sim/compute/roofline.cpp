// Roofline compute model: the stand-in used when no calibrated tables are given.
#include <algorithm>

#include "sim/compute/compute_model.h"

namespace ts::compute {
namespace {

class RooflineModel final : public ComputeModel {
 public:
  explicit RooflineModel(const GpuSpec& gpu) : gpu_(gpu) {}

  Duration gemm(const GemmShape& s) const override {
    const Duration math = s.flops() / (gpu_.peak(s.dtype) * gpu_.matmul_efficiency);
    const double elem = ir::bytes_per_element(s.dtype);
    const Bytes io =
        Bytes::from_real(static_cast<double>((s.m * s.k + s.k * s.n + s.m * s.n) * s.batch) * elem);
    return std::max(math, memory_time(io)) + gpu_.kernel_launch_overhead;
  }

  Duration attention(const AttentionShape& s) const override {
    return s.flops() / (gpu_.peak(s.dtype) * gpu_.matmul_efficiency) + gpu_.kernel_launch_overhead;
  }

  // No calibration: every memory-bound kernel streams.
  Duration memory_bound(Bytes moved, MemoryKernel /*kernel*/) const override {
    return memory_time(moved) + gpu_.kernel_launch_overhead;
  }

  const GpuSpec& gpu() const override { return gpu_; }

 private:
  Duration memory_time(Bytes b) const { return b / (gpu_.memory_bandwidth * gpu_.memory_efficiency); }
  GpuSpec gpu_;
};

}  // namespace

std::unique_ptr<ComputeModel> make_roofline_model(const GpuSpec& gpu) {
  return std::make_unique<RooflineModel>(gpu);
}

}  // namespace ts::compute
