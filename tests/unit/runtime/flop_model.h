// Shared fixtures of the runtime tests: a FLOP-proportional compute model and a uniform model.
#pragma once

#include "sim/compute/compute_model.h"
#include "sim/ir/model_graph.h"

namespace ts::testing {

// Time proportional to FLOPs (1 PFLOP/s), memory-bound ops free: every layer costs the same.
class FlopModel final : public compute::ComputeModel {
 public:
  Duration gemm(const compute::GemmShape& s) const override { return s.flops() / FlopRate::per_s(1e15); }
  Duration attention(const compute::AttentionShape& s) const override {
    return s.flops() / FlopRate::per_s(1e15);
  }
  Duration memory_bound(Bytes, compute::MemoryKernel) const override { return Duration::zero(); }
  const compute::GpuSpec& gpu() const override { return gpu_; }

 private:
  compute::GpuSpec gpu_;
};

// `layers` identical dense layers (hidden 1024, 8 heads, SwiGLU FFN 4096); the vocabulary is so
// small that the embedding and the LM head are negligible next to the layers.
inline ir::ModelSpec uniform_model(std::int64_t layers) {
  ir::ModelSpec m;
  m.name = "uniform";
  m.num_layers = layers;
  m.hidden = 1024;
  m.num_heads = 8;
  m.num_kv_heads = 8;
  m.ffn_hidden = 4096;
  m.vocab = 16;
  m.norm = ir::Norm::kRmsNorm;
  m.activation = ir::Activation::kSwiglu;
  m.position = ir::Position::kRope;
  m.linear_bias = false;
  return m;
}

}  // namespace ts::testing
