#include "sim/compute/dispatch_floor.h"

#include <algorithm>
#include <utility>

#include "sim/base/diagnostic.h"

namespace ts::compute {
namespace {

class HostDispatchModel final : public ComputeModel {
 public:
  HostDispatchModel(std::shared_ptr<const ComputeModel> inner, Duration per_op)
      : inner_(std::move(inner)), per_op_(per_op) {}
  Duration gemm(const GemmShape& shape) const override { return std::max(per_op_, inner_->gemm(shape)); }
  Duration attention(const AttentionShape& shape) const override {
    return std::max(per_op_, inner_->attention(shape));
  }
  Duration memory_bound(Bytes moved, MemoryKernel kernel) const override {
    return std::max(per_op_, inner_->memory_bound(moved, kernel));
  }
  const GpuSpec& gpu() const override { return inner_->gpu(); }

 private:
  std::shared_ptr<const ComputeModel> inner_;
  Duration per_op_;
};

}  // namespace

std::unique_ptr<ComputeModel> with_host_dispatch(std::shared_ptr<const ComputeModel> inner, Duration per_op) {
  SIM_ASSERT(inner != nullptr, "null compute model");
  SIM_ASSERT(per_op >= Duration::zero(), "negative host dispatch time");
  return std::make_unique<HostDispatchModel>(std::move(inner), per_op);
}

}  // namespace ts::compute
