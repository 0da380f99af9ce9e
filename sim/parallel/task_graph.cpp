#include "sim/parallel/task_graph.h"

namespace ts::parallel {

const char* stream_name(Stream s) {
  switch (s) {
    case Stream::kCompute:
      return "compute";
    case Stream::kTpComm:
      return "tp comm";
    case Stream::kCpComm:
      return "cp comm";
    case Stream::kDpComm:
      return "dp comm";
    case Stream::kPpRecvPrev:
      return "pp recv prev";
    case Stream::kPpSendNext:
      return "pp send next";
    case Stream::kPpRecvNext:
      return "pp recv next";
    case Stream::kPpSendPrev:
      return "pp send prev";
    case Stream::kDpReplica:
      return "dp replica comm";
    case Stream::kPpVRecvNext:
      return "pp recv next (V)";
    case Stream::kPpVSendPrev:
      return "pp send prev (V)";
    case Stream::kPpVRecvPrev:
      return "pp recv prev (V)";
    case Stream::kPpVSendNext:
      return "pp send next (V)";
    case Stream::kEpComm:
      return "ep comm";
  }
  return "?";
}

const char* comm_op_name(CommOp op) {
  switch (op) {
    case CommOp::kAllReduce:
      return "all_reduce";
    case CommOp::kAllGather:
      return "all_gather";
    case CommOp::kReduceScatter:
      return "reduce_scatter";
    case CommOp::kAllToAll:
      return "all_to_all";
    case CommOp::kSendRecv:
      return "send_recv";
  }
  return "?";
}

const char* pass_name(Pass p) {
  switch (p) {
    case Pass::kForward:
      return "fwd";
    case Pass::kBackward:
      return "bwd";
    case Pass::kRecompute:
      return "recompute";
    case Pass::kOptimizer:
      return "optimizer";
    case Pass::kWeightGrad:
      return "wgrad";
  }
  return "?";
}

const char* part_name(Part p) {
  switch (p) {
    case Part::kEmbedding:
      return "embedding";
    case Part::kAttention:
      return "attention";
    case Part::kMlp:
      return "mlp";
    case Part::kLmHead:
      return "lm_head";
    case Part::kGradients:
      return "gradients";
    case Part::kOptimizer:
      return "optimizer";
    case Part::kActivations:
      return "activations";
  }
  return "?";
}

std::string task_label(const TaskGraph& g, const Task& t) {
  std::string name;
  if (t.layer >= 0) name += "L" + std::to_string(t.layer) + " ";
  switch (t.kind) {
    case TaskKind::kCompute:
      name += part_name(t.part);
      break;
    case TaskKind::kCollective:
      name += std::string(part_name(t.part)) + " " + comm_op_name(t.comm);
      break;
    case TaskKind::kP2p: {
      const auto& c = g.communicators[static_cast<std::size_t>(t.communicator)];
      name += t.pass == Pass::kForward ? "activations " : "gradients ";
      name += "rank " + std::to_string(c.ranks[0]) + "→" + std::to_string(c.ranks[1]);
      break;
    }
  }
  name += " ";
  name += pass_name(t.pass);
  if (t.micro_batch >= 0) name += " mb" + std::to_string(t.micro_batch);
  return name;
}

std::string step_label(const TaskGraph& g, const Task& task, std::int32_t step) {
  Task t = g.chain_steps[static_cast<std::size_t>(step)];
  t.device = task.device;
  t.micro_batch = task.micro_batch;
  return task_label(g, t);
}

}  // namespace ts::parallel
