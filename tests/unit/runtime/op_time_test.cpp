// The time of an op list: each memory-bound op is priced by the kernel that runs it.
#include <catch2/catch.hpp>

#include "sim/ir/model_graph.h"
#include "sim/runtime/executor.h"
#include "tests/unit/runtime/flop_model.h"

using namespace ts;

namespace {

// Memory-bound ops only: 1 ns per byte streamed, 2 ns forward and 3 ns backward per byte of a
// native LayerNorm.
class MemoryOnlyModel final : public compute::ComputeModel {
 public:
  Duration gemm(const compute::GemmShape&) const override { return Duration::zero(); }
  Duration attention(const compute::AttentionShape&) const override { return Duration::zero(); }
  Duration memory_bound(Bytes moved, compute::MemoryKernel kernel) const override {
    double ns_per_byte = 1;
    if (kernel == compute::MemoryKernel::kNativeNormForward) ns_per_byte = 2;
    if (kernel == compute::MemoryKernel::kNativeNormBackward) ns_per_byte = 3;
    return Duration::from_seconds(moved.real() * ns_per_byte * 1e-9);
  }
  const compute::GpuSpec& gpu() const override { return gpu_; }

 private:
  compute::GpuSpec gpu_;
};

// A GPT-style model (LayerNorm, GELU, learned positions) of two layers.
ir::ModelSpec gpt() {
  ir::ModelSpec m = testing::uniform_model(2);
  m.name = "gpt";
  m.norm = ir::Norm::kLayerNorm;
  m.activation = ir::Activation::kGelu;
  m.position = ir::Position::kLearned;
  m.linear_bias = ir::ModelSpec{}.linear_bias;
  return m;
}

}  // namespace

TEST_CASE("eager PyTorch LayerNorms take the native kernel's time, forward and backward") {
  const MemoryOnlyModel model;
  ir::LayerShape s;
  s.micro_batch = 2;
  s.seq = 512;
  s.full_seq = 512;
  const auto fused = ir::build_layer(gpt(), s);
  s.eager_elementwise = true;
  const auto eager = ir::build_layer(gpt(), s);
  // A LayerNorm moves 2 passes of its activation forward, 3 backward; one pass is 2 B × 1024².
  const double pass_bytes = 2.0 * 1024 * 1024;
  const auto secs = [&](const std::vector<ir::Op>& ops) {
    return runtime::op_list_time(model, ops).seconds();
  };
  // Forward: one LayerNorm per block costs 2 ns instead of 1 ns per byte.
  CHECK(secs(eager.mlp.forward) - secs(fused.mlp.forward) == Approx(2 * pass_bytes * 1e-9));
  CHECK(secs(eager.attention.forward) - secs(fused.attention.forward) ==
        Approx(2 * pass_bytes * 1e-9));
  // Backward: 3 ns instead of 1 ns per byte.
  CHECK(secs(eager.mlp.backward) - secs(fused.mlp.backward) == Approx(3 * pass_bytes * 2e-9));
}
