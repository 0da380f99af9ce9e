// Replay of a block program (parallel::lower_blocks): a sweep's replay without the task graph of
// every micro-batch.
#pragma once

#include <optional>

#include "sim/compute/compute_model.h"
#include "sim/network/network_model.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/lowering.h"
#include "sim/runtime/breakdown.h"
#include "sim/runtime/executor.h"

namespace ts::runtime {

// What replay_summary() gives for the coarse graph that lower() makes of the same plan, with one
// difference: only the device finishing last (`last_device`) has its time breakdown; the others'
// are left empty. DeviceMemory::peak_task and peak_step name a template's task (in
// program.graph), peak_micro_batch the block that reached the peak. None where the program falls
// outside what this replay evaluates (then replay the graph): communication other than pipeline
// transfers between two simulated devices and collectives with one, transfers whose receiving
// call waits for anything, a stream carrying transfers of more than one pair, a block receiving
// twice, memory changes off the compute stream, or an evaluation order that stalls. `buffers`:
// memory and network costs kept from the previous plans (one per thread). `slowdown`: of compute
// under communication (ExecuteOptions::compute_slowdown_under_comm).
std::optional<ReplaySummary> replay_blocks(const parallel::BlockProgram& program, const parallel::Layout& layout,
                                           const compute::ComputeModel& compute,
                                           const network::NetworkModel& network, ReplayBuffers& buffers,
                                           double slowdown);

}  // namespace ts::runtime
