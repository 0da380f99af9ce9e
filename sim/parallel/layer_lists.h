// The op lists the lowering interns for one plan: how tensor and context parallelism, recompute,
// Mini-Sequence chunking, TP communication overlap and a split backward cut a layer's ops.
#pragma once

#include <cstdint>
#include <vector>

#include "sim/base/units.h"
#include "sim/ir/model_graph.h"
#include "sim/ir/model_spec.h"
#include "sim/parallel/plan.h"

namespace ts::parallel {

// The MLP block of an MoE layer (ir::build_moe) as the expert strategy runs it: each piece's
// forward and backward, a split backward's input-gradient pieces and the block's weight
// gradients, and the traffic of one token all-to-all (indices into TaskGraph::op_lists; -1:
// none, or a dense model).
struct MoeLists {
  std::int32_t router_fwd = -1, router_bwd = -1, shared_fwd = -1, shared_bwd = -1;
  std::int32_t experts_fwd = -1, experts_bwd = -1, unpermute_fwd = -1, unpermute_bwd = -1;
  std::int32_t router_bwd_in = -1, shared_bwd_in = -1, experts_bwd_in = -1, w = -1;
  Bytes w_held;
  // What one rank sends in the dispatch (and receives back in the combine): its token copies,
  // bf16 (Megatron-Core's all-to-all dispatcher; DeepEP/HybridEP move the same tokens).
  Bytes dispatch_bytes;
  // Expert tensor parallelism: the dispatched tokens the ETP group all-gathers before the
  // experts and reduce-scatters after them (0 without ETP).
  Bytes etp_bytes;
};

// The op lists of one layer, the embedding and the LM head as the plan cuts them (indices into
// TaskGraph::op_lists; -1: none).
struct LayerLists {
  // Without context parallelism the attention block is one task; with it, the block is cut
  // around the attention core (pre → core → post) for the KV exchange.
  std::int32_t attn_fwd = -1, attn_bwd = -1;
  std::int32_t pre_fwd = -1, pre_bwd = -1, core_fwd = -1, core_bwd = -1;
  std::int32_t post_fwd = -1, post_bwd = -1;
  std::int32_t mlp_fwd = -1, mlp_bwd = -1;
  // A split backward (ParallelPlan::splits_backward): the input-gradient part of each backward
  // list, and each block's weight gradients.
  std::int32_t attn_bwd_in = -1, pre_bwd_in = -1, post_bwd_in = -1, mlp_bwd_in = -1;
  std::int32_t attn_w = -1, mlp_w = -1;
  // TP communication overlap: the GEMMs that hide the collective before / after each block,
  // indexed [part: 0 attention, 1 MLP][backward][after].
  std::int32_t tp_hide[2][2][2] = {{{-1, -1}, {-1, -1}}, {{-1, -1}, {-1, -1}}};
  std::int32_t emb_fwd = -1, emb_bwd = -1, head_fwd = -1, head_bwd = -1;
  // A multi-token-prediction module's input side (ir::build_mtp_projection; -1 without MTP).
  std::int32_t mtp_fwd = -1, mtp_bwd = -1;
  // A split backward: what a layer's weight-gradient blocks keep from the input-gradient
  // blocks' end to theirs (see split_weight_gradients in layer_lists.cpp).
  Bytes w_held_attn, w_held_mlp;
  MoeLists moe;  // MoE models
};

// Appends the plan's op lists to `op_lists` and names them.
// `attention_window` > 0: the lists of a sliding-window layer (ir::LayerShape::attention_window).
LayerLists build_layer_lists(const ir::ModelSpec& model, const ParallelPlan& plan,
                             std::vector<std::vector<ir::Op>>& op_lists,
                             std::int64_t attention_window = 0);

}  // namespace ts::parallel
