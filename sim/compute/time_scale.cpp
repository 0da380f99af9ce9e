#include "sim/compute/time_scale.h"

#include <utility>

#include "sim/base/diagnostic.h"

namespace ts::compute {
namespace {

class TimeScaledModel final : public ComputeModel {
 public:
  TimeScaledModel(std::shared_ptr<const ComputeModel> inner, KernelTimeScale scale)
      : inner_(std::move(inner)), scale_(scale) {}
  Duration gemm(const GemmShape& shape) const override {
    return inner_->gemm(shape).scaled(scale_.gemm);
  }
  Duration attention(const AttentionShape& shape) const override {
    return inner_->attention(shape).scaled(scale_.attention);
  }
  Duration memory_bound(Bytes moved, MemoryKernel kernel) const override {
    return inner_->memory_bound(moved, kernel).scaled(scale_.memory);
  }
  const GpuSpec& gpu() const override { return inner_->gpu(); }

 private:
  std::shared_ptr<const ComputeModel> inner_;
  KernelTimeScale scale_;
};

}  // namespace

std::unique_ptr<ComputeModel> with_time_scale(std::shared_ptr<const ComputeModel> inner,
                                              KernelTimeScale scale) {
  SIM_ASSERT(inner != nullptr, "null compute model");
  SIM_ASSERT(scale.gemm > 0 && scale.attention > 0 && scale.memory > 0,
             "non-positive kernel time scale");
  return std::make_unique<TimeScaledModel>(std::move(inner), scale);
}

}  // namespace ts::compute
