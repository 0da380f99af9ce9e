#include "sim/compute/dispatch_floor.h"

#include <algorithm>
#include <utility>

#include "sim/base/diagnostic.h"

namespace ts::compute {
namespace {

class HostDispatchModel final : public ComputeModel {
 public:
  HostDispatchModel(std::shared_ptr<const ComputeModel> inner, Duration per_op, HostOverlap overlap)
      : inner_(std::move(inner)), per_op_(per_op), overlap_(overlap) {}
  Duration gemm(const GemmShape& shape) const override { return with_host(inner_->gemm(shape)); }
  Duration attention(const AttentionShape& shape) const override {
    return with_host(inner_->attention(shape));
  }
  Duration memory_bound(Bytes moved, MemoryKernel kernel) const override {
    return with_host(inner_->memory_bound(moved, kernel));
  }
  const GpuSpec& gpu() const override { return inner_->gpu(); }

 private:
  Duration with_host(Duration kernel) const {
    switch (overlap_) {
      case HostOverlap::kRunAhead:
        return std::max(per_op_, kernel);
      case HostOverlap::kBlocking:
        return per_op_ + kernel;
    }
    SIM_ASSERT(false, "unknown host overlap");
    return kernel;
  }
  std::shared_ptr<const ComputeModel> inner_;
  Duration per_op_;
  HostOverlap overlap_;
};

}  // namespace

std::unique_ptr<ComputeModel> with_host_dispatch(std::shared_ptr<const ComputeModel> inner, Duration per_op) {
  return with_host_dispatch(std::move(inner), per_op, HostOverlap::kRunAhead);
}

std::unique_ptr<ComputeModel> with_host_dispatch(std::shared_ptr<const ComputeModel> inner,
                                                 Duration per_op, HostOverlap overlap) {
  SIM_ASSERT(inner != nullptr, "null compute model");
  SIM_ASSERT(per_op >= Duration::zero(), "negative host dispatch time");
  return std::make_unique<HostDispatchModel>(std::move(inner), per_op, overlap);
}

}  // namespace ts::compute
