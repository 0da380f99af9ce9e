// Lowering of a model and a parallel plan into the per-device task graph of one iteration.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/ir/model_spec.h"
#include "sim/parallel/plan.h"
#include "sim/parallel/task_graph.h"

namespace ts::parallel {

struct LoweringOptions {
  bool full = false;              // every rank simulated (else one rank per pipeline stage)
  Bytes layer_activation;         // saved activations of one layer and micro-batch (memory model)
  Bytes layer_input;              // what full recompute keeps of a layer (its input)
  std::int64_t grad_reduce_bytes_per_param = 4;  // DP gradient reduction precision
  Bytes optimizer_bytes_per_param;  // HBM traffic of the optimizer step per local parameter
};

// Layers held by each pipeline stage: the explicit split if given, else an even one.
std::vector<std::int64_t> stage_layers(const ParallelPlan& plan, const ir::ModelSpec& model);

// Parameters held by one rank of pipeline stage `stage` (after TP, before ZeRO sharding).
std::int64_t stage_parameters(const ir::ModelSpec& model, const ParallelPlan& plan, std::int64_t stage);

TaskGraph lower(const ir::ModelSpec& model, const ParallelPlan& plan, const LoweringOptions& options);

}  // namespace ts::parallel
