// Static memory (weights, gradients, optimizer states) and saved activations of one device.
#pragma once

#include <cstdint>

#include "sim/base/units.h"
#include "sim/ir/model_spec.h"
#include "sim/parallel/plan.h"

namespace ts::memory {

struct StaticFootprint {
  Bytes weights;           // bf16 parameters
  Bytes gradients;         // gradient buffer
  Bytes optimizer_states;  // Adam first and second moments
  Bytes master_weights;    // fp32 copy of the parameters (mixed precision)
  Bytes total() const { return weights + gradients + optimizer_states + master_weights; }
};

// Static memory of one rank of pipeline stage `stage`, which holds `stage_layers` layers.
StaticFootprint static_footprint(const ir::ModelSpec& model, const parallel::ParallelPlan& plan,
                                 std::int64_t stage, std::int64_t stage_layers);

// Activations one transformer layer keeps for its backward pass, for one micro-batch on one
// device (after TP, SP and CP splits and the plan's recompute policy).
Bytes layer_activation_bytes(const ir::ModelSpec& model, const parallel::ParallelPlan& plan);

}  // namespace ts::memory
