// Chakra execution trace export: the per-rank task graph of a replay as Chakra ET files.
#pragma once

#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/units.h"
#include "sim/parallel/plan.h"
#include "sim/parallel/task_graph.h"
#include "sim/runtime/executor.h"

namespace ts::trace {

// Memory of one rank in the run that wrote the trace (weights, gradients, optimizer states and
// the peak of saved activations), kept in the trace so that a replay reports the same peak.
struct ChakraRankMemory {
  Bytes weights;
  Bytes gradients;
  Bytes optimizer_states;
  Bytes activations;
  Bytes cuda_context;
  Bytes nccl_buffers;
  Bytes fragmentation;
};

struct ChakraExportInfo {
  // Free-form description written as string attributes of every file's GlobalMetadata.
  std::vector<std::pair<std::string, std::string>> metadata;
  // The parallel plan the graph was lowered from: its axis sizes and rank order are written so
  // that a replay costs each collective together with the other groups of its kind.
  std::optional<parallel::ParallelPlan> plan;
  std::vector<ChakraRankMemory> memory;  // per device of the graph; empty = unknown
  double model_flops = 0;  // per iteration (model FLOPs, for MFU); 0 = unknown
  double tokens = 0;       // per iteration; 0 = unknown
  std::string gpu;         // GPU the durations were computed for
};

// Writes `<prefix>.<rank>.et` for every rank and `<prefix>.json` (process group id → ranks, the
// communicator file ASTRA-sim takes with --comm-group-configuration). `graph` must simulate every
// rank (parallel::LoweringOptions::full): ranks 0..n-1, one device each. Each file holds one
// length-delimited GlobalMetadata and then one length-delimited Node per task of that rank, in
// program order:
//  - compute: COMP_NODE with duration_micros (rounded) and the exact duration in picoseconds
//    (attribute trainsim_duration_ps), num_ops (FLOPs) and tensor_size (bytes moved), and the op
//    shapes (trainsim_ops) so that a replay can re-cost it on another GPU;
//  - collectives: COMM_COLL_NODE with comm_type, comm_size (Chakra's convention: the whole buffer,
//    except the per-rank shard for all-gather) and pg_name;
//  - point-to-point: COMM_SEND_NODE / COMM_RECV_NODE with comm_src, comm_dst, a comm_tag unique
//    to the message, and comm_size.
// data_deps are the task's dependencies; ctrl_deps add the previous task of the same stream
// (streams run their tasks in order). trainsim_* attributes keep stream, pass, part, layer,
// micro-batch and memory so that `trainsim chakra import` rebuilds the same graph; other readers
// ignore them. Files are written under temporary names and renamed at the end; throws InputError
// naming the path when one cannot be written. Returns the files written.
std::vector<std::filesystem::path> write_chakra(const std::filesystem::path& prefix,
                                                const parallel::TaskGraph& graph,
                                                const runtime::Execution& execution,
                                                const ChakraExportInfo& info);

// Path of rank `rank`'s file for `prefix` (`<prefix>.<rank>.et`).
std::filesystem::path chakra_rank_path(const std::filesystem::path& prefix, std::int64_t rank);

}  // namespace ts::trace
