// A lower bound on a plan's simulated iteration time without its replay, for pruned sweeps.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

#include "sim/base/units.h"
#include "sim/config/calibration_loader.h"
#include "sim/config/loader.h"
#include "sim/driver/resources.h"
#include "sim/ir/model_spec.h"
#include "sim/parallel/plan.h"

namespace ts::driver {

struct PlanBound {
  // Weights, gradients, optimizer states, CUDA context and NCCL buffers alone exceed the GPU:
  // simulate() rejects the plan as out of memory before any replay.
  bool static_oom = false;
  // With the activations the pipeline schedule must hold at once as well: simulate() replays
  // the plan and finds it out of memory.
  bool activation_oom = false;
  Duration time;  // no replay of the plan ends its iteration sooner (see plan_bound.cpp)
  // The tokens/s of an iteration of `time`, computed as simulate() computes a plan's: no
  // simulated tokens/s of the plan is higher.
  double tokens_per_s = 0;
};

// Per-micro-batch compute of one transformer layer, of the embedding and of the LM head at the
// compute model's calibrated speed: forward, everything of the backward (recompute and weight
// gradients included), and the part that the gradient waits for (the backward pass proper).
struct BlockCompute {
  Duration forward, backward, backward_chain;
};
struct PlanCompute {
  BlockCompute layer, embedding, head;
};

// Bounds plans of one model on one cluster. Not thread-safe (one per thread); the compute of a
// layer is kept per distinct micro-batch shape (what of a plan its layers' kernels depend on).
class PlanBounder {
 public:
  PlanBounder(ir::ModelSpec model, config::Cluster cluster, std::int64_t num_gpus,
              std::shared_ptr<config::ComputeModelCache> cache);
  PlanBound bound(const parallel::ParallelPlan& plan);
  // The compute of one micro-batch through the blocks of `plan` (memoized).
  const PlanCompute& compute(const parallel::ParallelPlan& plan);
  std::size_t shapes() const { return shapes_; }  // distinct micro-batch shapes lowered

 private:
  // Per rank: the most micro-batches (per model chunk) in flight, by schedule, pp, model
  // chunks and micro-batches.
  using InFlightKey = std::tuple<parallel::Schedule, std::int64_t, std::int64_t, std::int64_t>;
  const std::vector<std::int64_t>& in_flight(const parallel::ParallelPlan& plan);
  std::map<InFlightKey, std::vector<std::int64_t>> in_flight_;
  // ZeRO-3: what the first rank's data-parallel stream runs at least (see plan_bound.cpp).
  Duration zero3_stream(const parallel::ParallelPlan& plan);
  config::Scenario scenario_;  // the model, cluster and GPU count; the plan of the last bound
  Resources resources_;
  // Per sample plan: compute only, and with the serial tensor-parallel collectives.
  std::unordered_map<std::uint64_t,
                     std::vector<std::pair<parallel::ParallelPlan, std::array<PlanCompute, 2>>>>
      memo_;
  std::size_t shapes_ = 0;
};

}  // namespace ts::driver
