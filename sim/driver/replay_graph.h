// Replay of task graphs that come from a trace rather than a model and plan (Chakra import), with
// the reports and Chrome trace of `run`, and the Chakra export of a scenario.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "sim/config/chakra_reader.h"
#include "sim/config/loader.h"
#include "sim/driver/resources.h"
#include "sim/driver/simulate.h"
#include "sim/parallel/task_graph.h"

namespace ts::driver {

// A task graph with what the reports need to know about it.
struct GraphWorkload {
  parallel::TaskGraph graph;           // every rank simulated: device d is rank d
  parallel::ParallelPlan plan;         // rank layout (axis sizes and order); dp = ranks when unknown
  std::vector<MemoryBreakdown> static_memory;  // per device; activations = recorded peak, if any
  double model_flops = 0;  // per iteration, for MFU; 0 = unknown (the trace's FLOPs are used)
  double trace_flops = 0;  // FLOPs of every compute node of every rank
  double tokens = 0;       // per iteration; 0 = unknown
  std::string description;
};

struct ImportOptions {
  // Cost compute nodes that carry op shapes (trainsim_ops) or FLOPs and bytes (num_ops,
  // tensor_size) with the compute model even when they record a duration. Nodes without a
  // recorded duration are always costed so.
  bool recost = false;
};

// Turns a Chakra trace into a task graph:
//  - collectives of a process group are matched across its ranks in each rank's program order
//    (a topological order preferring the smallest node id, as Chakra's feeder issues nodes), and
//    must agree in type and size; sends and receives are matched on (src, dst, tag) in order;
//  - compute nodes take their recorded duration, or the compute model's time for their op
//    shapes, or for their FLOPs and bytes (see compute_node_time);
//  - nodes without a time of their own (metadata, memory) pass their dependencies on;
//  - the program order of each stream is the order in which the nodes start when the trace is
//    run as ASTRA-sim runs it (one compute node at a time per rank, ready nodes by smallest id,
//    communication concurrent, each collective timed alone by the network model), which is a
//    global order consistent with every dependency and every match, so the replay cannot
//    deadlock unless the trace itself does (then InputError names the nodes that never run).
// Streams, passes and memory come from trainsim_* attributes when the trace was written by
// trainsim; otherwise compute runs on the compute stream, each rank's collectives go to the TP,
// DP and CP streams by their process group (most frequent first) and sends and receives to the
// pipeline streams by the direction of the peer.
GraphWorkload import_chakra(const config::ChakraTrace& trace, const compute::ComputeModel& compute,
                            const network::NetworkModel& network, const ImportOptions& options);

// Time of a compute node from its FLOPs and bytes when it has no op shapes: matrix-multiply
// nodes (op_type "M", or unknown op_type with FLOPs) take the longer of a square bf16 GEMM of the
// same FLOPs (the calibrated efficiency at that size) and of streaming tensor_size bytes; other
// nodes (elementwise, normalization, …) stream tensor_size bytes. As ASTRA-sim's roofline, with
// calibrated kernels instead of peaks.
Duration compute_node_time(const compute::ComputeModel& compute, const config::ChakraNode& node);

struct GraphRunResult {
  RunResult run;
  std::vector<double> device_end_s;  // when each device finished its last task, with the compute it lost to contention
};

// simulate() for a graph: replays `w` on `cluster` (network for graph.devices.size() GPUs) and
// fills the same result, optionally writing the Chrome trace.
GraphRunResult simulate_graph(const GraphWorkload& w, const config::Cluster& cluster, const RunOptions& options,
                              Resources& resources);

// Reports of simulate_graph, with the keys of `run`'s reports where they apply (docs/cli.md).
std::string graph_report_text(const GraphWorkload& w, const config::Cluster& cluster, const GraphRunResult& r);
std::string graph_report_json(const GraphWorkload& w, const config::Cluster& cluster, const GraphRunResult& r);

struct ExportResult {
  RunResult run;  // simulate() with every rank simulated
  std::vector<std::filesystem::path> files;
};

// Simulates `sc` with every rank (RunOptions::full) and writes its workload as Chakra ET files
// (trace::write_chakra): `<prefix>.<rank>.et` and `<prefix>.json`. Nothing is written when the
// plan cannot be simulated (status unsupported).
ExportResult export_chakra(const config::Scenario& sc, const std::filesystem::path& prefix, Resources& resources);

}  // namespace ts::driver
