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
  // Chains of compute and tensor-parallel steps as single tasks (see Chain): the same replay with
  // fewer tasks, for runs that need no per-task output. Applies in symmetric mode only, where a
  // tensor-parallel collective has one simulated member.
  bool coarse = false;
  // Memory of one layer and micro-batch (from the memory model): what its forward keeps for the
  // backward (under full recompute: only its input), what full recompute rebuilds, and the LM
  // head's logits and loss buffers, live from the head's forward to its backward.
  Bytes layer_kept;
  Bytes layer_rematerialized;
  Bytes head_transient;
  std::int64_t grad_reduce_bytes_per_param = 4;  // DP gradient reduction precision
  Bytes optimizer_bytes_per_param;  // HBM traffic of the optimizer step per local parameter
};

// Layers of each virtual pipeline stage (pp · model_chunks entries, virtual stage c·pp + s is
// chunk c of rank s): the explicit split if given, else an even one.
std::vector<std::int64_t> virtual_stage_layers(const ParallelPlan& plan, const ir::ModelSpec& model);
// Layers held by each pipeline rank (summed over its model chunks).
std::vector<std::int64_t> stage_layers(const ParallelPlan& plan, const ir::ModelSpec& model);

// Parameters held by one rank of pipeline stage `stage` (after TP, before ZeRO sharding).
std::int64_t stage_parameters(const ir::ModelSpec& model, const ParallelPlan& plan, std::int64_t stage);

// `storage`: a graph whose memory the result reuses, its contents discarded (a sweep lowers
// thousands of plans: growing and faulting in fresh task arrays cost more than filling them).
TaskGraph lower(const ir::ModelSpec& model, const ParallelPlan& plan, const LoweringOptions& options,
                TaskGraph storage = {});

}  // namespace ts::parallel
