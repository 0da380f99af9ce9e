// Chakra execution trace import: per-rank Chakra ET files read and checked into plain nodes.
#pragma once

#include <array>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "sim/base/units.h"
#include "sim/ir/model_graph.h"
#include "sim/parallel/plan.h"
#include "sim/parallel/task_graph.h"

namespace ts::config {

// What a node does in a replay. Node types without a time of their own (METADATA_NODE, memory
// and storage nodes, …) are kNone: they only pass their dependencies on.
enum class ChakraKind : std::uint8_t { kCompute, kCollective, kSend, kRecv, kNone };

// One Chakra Node, with the attributes ASTRA-sim reads (num_ops, tensor_size, comm_type,
// comm_size, pg_name, comm_src, comm_dst, comm_tag) and the trainsim_* attributes that
// trace::write_chakra adds.
struct ChakraNode {
  std::uint64_t id = 0;
  std::string name;
  ChakraKind kind = ChakraKind::kNone;
  std::int64_t offset = 0;          // byte offset of the node's length prefix in its file
  std::vector<std::uint32_t> deps;  // ctrl and data deps: indices into ChakraRank::nodes

  // Compute.
  std::optional<Duration> duration;  // recorded: trainsim_duration_ps, else duration_micros > 0
  Flops flops;                       // num_ops
  Bytes tensor_bytes;                // tensor_size
  std::string op_type;               // op_type (symbolic tensor graph: "M" = matmul, …)
  std::vector<ir::Op> ops;           // trainsim_ops: the kernels with their shapes

  // Communication.
  parallel::CommOp comm = parallel::CommOp::kAllReduce;
  Bytes bytes;              // nccl-tests convention: the gathered output for all-gather
  std::int32_t group = -1;  // collectives: index into ChakraTrace::groups
  std::int32_t src = -1;    // send/recv: sending and receiving rank
  std::int32_t dst = -1;
  std::int64_t tag = 0;

  // Written by trainsim (absent in other traces).
  std::optional<parallel::Stream> stream;
  std::optional<parallel::Pass> pass;
  std::optional<parallel::Part> part;
  std::int32_t layer = -1;
  std::int32_t micro_batch = -1;
  Bytes alloc;
  Bytes release;
  unsigned axes = 0;         // parallel axes of the communicator (axis_bit mask)
  std::int64_t comm_id = 0;  // trainsim communicator of a send/recv (0 = none)
};

// Memory fields a trainsim trace records per rank (trainsim_*_bytes metadata), in this order:
// weights, gradients, optimizer states, activations, CUDA context, NCCL buffers, fragmentation.
inline constexpr std::size_t kMemoryFields = 7;

struct ChakraRank {
  std::filesystem::path file;
  std::vector<ChakraNode> nodes;    // in file order
  std::vector<std::uint32_t> order;  // a topological order: among ready nodes, smallest id first
  std::vector<std::pair<std::string, std::string>> metadata;  // string attributes of GlobalMetadata
  // Memory of the run that wrote the trace (trainsim), kMemoryFields values; and the rank's
  // pipeline stage.
  std::optional<std::array<Bytes, kMemoryFields>> memory;
  std::int64_t stage = 0;
};

// A process group: pg_name and its ranks. A collective without pg_name uses every rank.
struct ChakraGroup {
  std::string name;
  std::vector<std::int32_t> ranks;
};

struct ChakraTrace {
  std::filesystem::path prefix;
  std::vector<ChakraRank> ranks;
  std::vector<ChakraGroup> groups;
  std::string schema;  // GlobalMetadata attribute "schema" of rank 0 ("trainsim", …)
  // Written by trainsim: the plan's axis sizes and rank order (when they multiply to the rank
  // count), model FLOPs and tokens per iteration, and the GPU the durations were computed for.
  std::optional<parallel::ParallelPlan> plan;
  double model_flops = 0;
  double tokens = 0;
  std::string gpu;
};

// Reads `<prefix>.0.et`, `<prefix>.1.et`, … (ranks 0..n-1, no gaps) and the process groups from
// `comm_groups` (a JSON object: group name → list of ranks, as ASTRA-sim's
// --comm-group-configuration), by default `<prefix>.json` when it exists. Each file is one
// length-delimited GlobalMetadata and then length-delimited Nodes. Checks everything a replay
// relies on: framing and protobuf encoding, node types, dependencies (known ids, no cycles),
// the attributes of communication nodes, process groups and their membership. Throws
// InputError listing the problems, each with its file, the byte offset of the message and the
// node id.
ChakraTrace read_chakra(const std::filesystem::path& prefix,
                        const std::optional<std::filesystem::path>& comm_groups = std::nullopt);

// One rank's file (`rank` checks comm_src of sends and comm_dst of receives). Process groups are
// not resolved: collective nodes keep group = -1 and their pg_name in `pg_names` (same index as
// nodes; empty = every rank).
ChakraRank read_chakra_file(const std::filesystem::path& file, std::int32_t rank,
                            std::vector<std::string>* pg_names = nullptr);

}  // namespace ts::config
