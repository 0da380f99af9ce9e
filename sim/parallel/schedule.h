// Pipeline schedules as data: each rank's ordered list of (block kind, micro-batch, model chunk).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/parallel/plan.h"

namespace ts::parallel {

// What one block of a rank's program runs on one micro-batch and model chunk: the forward (F),
// the whole backward (input and weight gradients together, as GPipe and 1F1B run it), or the
// backward split in two (Qi et al., ICLR 2024): the input gradient (B), which the previous stage
// waits for, and the weight gradient (W), which nothing in the pipeline waits for.
enum class PipelineKind : std::uint8_t { kForward, kBackward, kInputGrad, kWeightGrad };
const char* pipeline_kind_name(PipelineKind k);  // "F", "BW", "B", "W"

struct PipelineBlock {
  PipelineKind kind = PipelineKind::kForward;
  std::int32_t micro_batch = 0;
  std::int32_t chunk = 0;  // model chunk of the rank (ParallelPlan::virtual_stage)
  // Runs beside the next block of the list (DualPipeV's overlapped forward and backward of two
  // micro-batches): the two start once both have their inputs, and their compute interleaves
  // so that one micro-batch computes while the other communicates.
  bool overlapped = false;
  bool operator==(const PipelineBlock&) const = default;
};

// The blocks rank `stage` runs in one iteration, in program order. Every (micro-batch, chunk)
// gets one forward and either one whole backward or one B and one W.
std::vector<PipelineBlock> pipeline_blocks(const ParallelPlan& plan, std::int64_t stage);
// The same into `out` (its contents replaced, its memory reused).
void pipeline_blocks(const ParallelPlan& plan, std::int64_t stage, std::vector<PipelineBlock>& out);

// ZB-V's programs of all `pp` ranks at once (its list scheduler places every rank together).
std::vector<std::vector<PipelineBlock>> zb_v_blocks(std::int64_t pp, std::int64_t micro_batches);

// The most micro-batches (counted per model chunk) whose forward has run and whose B (or whole
// backward) has not, over the rank's program: the activations it holds at once.
std::int64_t max_in_flight(const std::vector<PipelineBlock>& blocks);

}  // namespace ts::parallel
