// TaskGraph: the per-device compute and communication tasks of one training iteration.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/units.h"
#include "sim/ir/model_graph.h"
#include "sim/parallel/layout.h"

namespace ts::parallel {

// Streams run their tasks one at a time in program order (as CUDA streams do); tasks on different
// streams overlap unless a dependency orders them. Point-to-point traffic gets one stream per
// direction and peer so that sends and receives never block one another.
enum class Stream : std::uint8_t {
  kCompute,
  kTpComm,
  kCpComm,
  kDpComm,
  kPpRecvPrev,  // activations from the previous stage
  kPpSendNext,
  kPpRecvNext,  // gradients from the next stage
  kPpSendPrev,
  // Hybrid sharding's all-reduce of gradient shards across replicas: its own process group,
  // so its own NCCL stream beside the shard group's gathers and reduce-scatters.
  kDpReplica,
  // The second leg of a V-shaped placement (ParallelPlan::v_shape), which runs back up the
  // ranks: activations from the next rank and to the previous one, gradients from the previous
  // rank and to the next one, each pair of direction and traffic on its own stream.
  kPpVRecvNext,
  kPpVSendPrev,
  kPpVRecvPrev,
  kPpVSendNext,
  // Expert parallelism's token dispatch and combine (all-to-all over the EP group): their own
  // process group and stream, as Megatron-Core's EP communicator.
  kEpComm,
};
inline constexpr std::size_t kNumStreams = 14;
const char* stream_name(Stream s);

enum class TaskKind : std::uint8_t { kCompute, kCollective, kP2p };
enum class CommOp : std::uint8_t { kAllReduce, kAllGather, kReduceScatter, kAllToAll, kSendRecv };
const char* comm_op_name(CommOp op);

// What a task belongs to, for reports and traces.
// kWeightGrad: the weight-gradient block of a split backward (ParallelPlan::splits_backward);
// counted as backward time.
enum class Pass : std::uint8_t { kForward, kBackward, kRecompute, kOptimizer, kWeightGrad };
enum class Part : std::uint8_t { kEmbedding, kAttention, kMlp, kLmHead, kGradients, kOptimizer, kActivations };
const char* pass_name(Pass p);
const char* part_name(Part p);

// A communicator: the global ranks of one group, in rank order. Collectives on a communicator are
// matched across its members by issue order, as NCCL does.
struct Communicator {
  unsigned axes = 0;  // axis_bit() mask of the axes the group spans; 0 = not from a plan
  std::vector<std::int32_t> ranks;
  std::int32_t tag = 0;  // point-to-point: separates activation and gradient traffic of a pair
  // The EP group under a hierarchical dispatcher (MoeDispatcher::kDeepEp, kHybridEp): its
  // all-to-alls carry top_k copies of each token to the experts, num_experts / ranks per rank
  // in rank order, a token's experts inside `group_limit` of `expert_groups` groups (0: no
  // limit); the network sends a token once per destination node (network::TokenRouting).
  // experts == 0: an ordinary communicator.
  struct Dispatch {
    std::int64_t experts = 0;
    std::int64_t top_k = 0;
    std::int64_t expert_groups = 0;
    std::int64_t group_limit = 0;
    bool operator==(const Dispatch&) const = default;
  };
  Dispatch dispatch;
};

struct Task {
  TaskKind kind = TaskKind::kCompute;
  Stream stream = Stream::kCompute;
  Pass pass = Pass::kForward;
  Part part = Part::kAttention;
  std::int32_t device = 0;       // index into TaskGraph::devices
  std::int32_t layer = -1;       // global transformer layer, -1 when none
  std::int32_t micro_batch = -1;
  std::int32_t ops = -1;         // compute: index into TaskGraph::op_lists, or -1 to use `duration`
  // Coarse graphs: the chain (index into TaskGraph::chains) whose steps this task runs in place of
  // as many tasks; -1 for an ordinary task.
  std::int32_t chain = -1;
  Duration duration;             // compute without ops: a recorded duration (imported traces)
  CommOp comm = CommOp::kAllReduce;
  Bytes bytes;                   // communication: nccl-tests size (see network::CollectiveRequest)
  std::int32_t communicator = -1;
  // Collective overlapped with GEMMs (TP communication overlap): the op list whose compute time
  // hides it; -1 = none. Only the part the GEMMs cannot hide is exposed (runtime/executor.cpp).
  std::int32_t hidden_by = -1;
  std::uint32_t dep_begin = 0;   // dependencies: TaskGraph::deps[dep_begin, dep_begin + dep_count)
  std::uint32_t dep_count = 0;
  Bytes alloc_at_start;          // memory this task allocates when it starts
  Bytes free_at_end;             // memory it releases when it ends
};

// Coarse lowering (LoweringOptions::coarse): consecutive steps of one device on the compute and
// tensor-parallel streams, each waiting only for the one before and none waited for by anything
// else, replayed as one task. Its steps, TaskGraph::chain_steps[step_begin, step_begin +
// step_count), are tasks (compute, or a collective with one simulated member) whose device and
// micro-batch are the chain task's and whose dependencies are unused; chains with the same steps
// are stored once. The replay runs each step at its own time on its own stream, exactly as the
// separate tasks would run.
struct Chain {
  std::uint32_t step_begin = 0;
  std::uint32_t step_count = 0;
};

// A simulated device: one rank that stands for its class (symmetric mode) or itself (full mode).
struct SimDevice {
  std::int32_t rank = 0;         // global rank = GPU index
  Coord coord;
  std::int64_t stage = 0;
  std::int64_t represents = 1;   // ranks with the same schedule that this device stands for
};

struct TaskGraph {
  std::vector<SimDevice> devices;
  std::vector<Task> tasks;
  std::vector<std::uint32_t> deps;
  std::vector<std::vector<ir::Op>> op_lists;
  std::vector<Communicator> communicators;
  std::vector<Chain> chains;      // coarse graphs only
  std::vector<Task> chain_steps;
};

// A short human-readable name of a task: "L12 attention fwd mb3", "gradients reduce_scatter
// optimizer", "activations rank 8→16 fwd mb0".
std::string task_label(const TaskGraph& graph, const Task& task);
// The label of step `step` (index into TaskGraph::chain_steps) of chain task `task`.
std::string step_label(const TaskGraph& graph, const Task& task, std::int32_t step);

}  // namespace ts::parallel
