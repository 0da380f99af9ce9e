#include "sim/parallel/layer_lists.h"

#include <algorithm>
#include <string_view>
#include <utility>

namespace ts::parallel {

namespace {

constexpr std::int32_t kNone = -1;

// The first (or last) `count` GEMMs of an op list, in order.
std::vector<ir::Op> edge_gemms(const std::vector<ir::Op>& ops, bool last, std::size_t count) {
  std::vector<ir::Op> out;
  for (std::size_t i = 0; i < ops.size() && out.size() < count; ++i) {
    const ir::Op& op = ops[last ? ops.size() - 1 - i : i];
    if (op.kind == ir::OpKind::kGemm) out.push_back(op);
  }
  if (last) std::reverse(out.begin(), out.end());
  return out;
}

class ListBuilder {
 public:
  ListBuilder(const ir::ModelSpec& model, const ParallelPlan& plan,
              std::vector<std::vector<ir::Op>>& op_lists, std::int64_t attention_window)
      : model_(model), plan_(plan), op_lists_(op_lists), attention_window_(attention_window) {}

  LayerLists run() {
    build_op_lists();
    return lists_;
  }

 private:
  ir::LayerShape base_shape() const {
    ir::LayerShape shape;
    shape.micro_batch = plan_.micro_batch;
    shape.seq = plan_.seq_len / plan_.cp;
    shape.full_seq = plan_.seq_len;
    shape.tp = plan_.tp;
    shape.sequence_parallel = plan_.sequence_parallel;
    shape.gemm_dtype = plan_.dtype;
    // Every micro-batch of a step uses each layer's weights once; the first casts them (FP8,
    // MXFP8 and NVFP4 alike).
    if (plan_.fp8_weight_cache) {
      shape.fp8_weight_cast_share =
          1.0 / static_cast<double>(std::max<std::int64_t>(1, plan_.num_micro_batches()));
    }
    shape.flash_attention = plan_.flash_attention;
    shape.fp8_attention = plan_.fp8_attention;
    shape.eager_elementwise = plan_.elementwise == Elementwise::kEager;
    shape.attention_window = attention_window_;
    return shape;
  }

  void build_op_lists() {
    ir::LayerShape shape = base_shape();
    if (plan_.cp > 1) {
      switch (plan_.cp_algo) {
        case CpAlgo::kAllGather:
          break;  // local queries against all gathered keys
        case CpAlgo::kRing:
          // One block of local queries against one block of keys per ring step; with the
          // load-balanced (zig-zag) split every step does the same, causal-halved, work.
          shape.attention_q = shape.seq;
          shape.attention_kv = shape.seq;
          break;
        case CpAlgo::kUlysses:
          // All-to-all turns the sequence split into a head split: full sequence, heads / cp.
          shape.attention_q = plan_.seq_len;
          shape.attention_kv = plan_.seq_len;
          shape.attention_heads_divisor = plan_.cp;
          break;
      }
    }
    const ir::LayerOps layer = ir::build_layer(model_, shape);
    auto with_selective = [&](std::vector<ir::Op> bwd, const std::vector<ir::Op>& fwd) {
      // Selective recompute (Korthikanti et al. 2022) reruns the attention core before its
      // backward; with flash attention this is the forward kernel. Other modules of the block
      // (the norm, MLA's up projections) rerun with it, in forward order.
      return with_rerun(std::move(bwd), fwd);
    };
    // The op policy reruns part of each block before the block's backward.
    const ir::OpPolicyRecompute op_policy = ir::op_policy_recompute(model_, layer);
    auto with_op_policy = [&](std::vector<ir::Op> bwd, const std::vector<ir::Op>& rerun) {
      if (plan_.recompute == Recompute::kSelectiveOp) {
        const std::vector<ir::Op> marked = reruns(rerun);
        bwd.insert(bwd.begin(), marked.begin(), marked.end());
      }
      return bwd;
    };
    if (plan_.cp == 1) {
      lists_.attn_fwd = add_ops(layer.attention.forward);
      lists_.attn_bwd = add_ops(with_op_policy(
          with_selective(layer.attention.backward, layer.attention.forward), op_policy.attention));
    } else {
      const ir::SplitAttention split = ir::split_attention(layer.attention);
      lists_.pre_fwd = add_ops(split.pre.forward);
      lists_.pre_bwd = add_ops(with_rerun(split.pre.backward, split.pre.forward));
      lists_.core_fwd = add_ops(split.core.forward);
      lists_.core_bwd = add_ops(with_selective(split.core.backward, split.core.forward));
      lists_.post_fwd = add_ops(split.post.forward);
      // The block's backward starts with the part after the core: the rerun goes first.
      lists_.post_bwd = add_ops(with_op_policy(split.post.backward, op_policy.attention));
    }
    if (plan_.mst_chunks > 1) {
      // Mini-Sequence Transformer (Luo et al. 2024): the MLP runs on K mini-sequences one after
      // another, and its backward recomputes each chunk's intermediate before using it (its own
      // recompute of the MLP, in place of the op policy's).
      ir::LayerShape mini = shape;
      mini.seq = shape.seq / plan_.mst_chunks;
      const ir::LayerOps chunk = ir::build_layer(model_, mini);
      std::vector<ir::Op> fwd, bwd;
      for (std::int64_t k = 0; k < plan_.mst_chunks; ++k) {
        fwd.insert(fwd.end(), chunk.mlp.forward.begin(), chunk.mlp.forward.end());
        std::vector<ir::Op> rerun;
        for (const auto& op : chunk.mlp.forward) {
          if (op.kind == ir::OpKind::kGemm) break;  // recompute up to the intermediate
          rerun.push_back(op);
        }
        bool seen_gemm = false;
        for (const auto& op : chunk.mlp.forward) {
          if (seen_gemm && op.kind == ir::OpKind::kGemm) break;
          if (op.kind == ir::OpKind::kGemm) seen_gemm = true;
          if (seen_gemm) rerun.push_back(op);
        }
        for (const auto& op : reruns(rerun)) bwd.push_back(op);
        bwd.insert(bwd.end(), chunk.mlp.backward.begin(), chunk.mlp.backward.end());
      }
      lists_.mlp_fwd = add_ops(fwd);
      lists_.mlp_bwd = add_ops(bwd);
    } else {
      lists_.mlp_fwd = add_ops(layer.mlp.forward);
      lists_.mlp_bwd = add_ops(with_rerun(with_op_policy(layer.mlp.backward, op_policy.mlp), layer.mlp.forward));
    }
    if (model_.moe) build_moe_lists(shape);
    if (plan_.splits_backward()) split_weight_gradients();
    if (plan_.tp_comm_overlap && plan_.sequence_parallel && plan_.tp > 1) {
      // Transformer Engine overlaps the all-gather before a block with its first GEMM and the
      // reduce-scatter after it with its last GEMM; in the backward, with the data- and
      // weight-gradient GEMMs at the same ends.
      const ir::Block* blocks[2] = {&layer.attention, &layer.mlp};
      for (int part = 0; part < 2; ++part) {
        for (int bwd = 0; bwd < 2; ++bwd) {
          // A split backward's input-gradient block has the data-gradient GEMM alone at each end.
          const bool split = bwd && plan_.splits_backward();
          const auto ops = split ? without_weight_gradients(blocks[part]->backward)
                           : bwd ? blocks[part]->backward
                                 : blocks[part]->forward;
          const std::size_t n = bwd && !split ? 2 : 1;
          lists_.tp_hide[part][bwd][0] = add_ops(edge_gemms(ops, false, n));
          lists_.tp_hide[part][bwd][1] = add_ops(edge_gemms(ops, true, n));
        }
      }
    }
    const ir::LayerShape plain = base_shape();
    const ir::Block embedding = ir::build_embedding(model_, plain);
    lists_.emb_fwd = add_ops(embedding.forward);
    lists_.emb_bwd = add_ops(embedding.backward);
    if (plan_.mst_chunks > 1) {
      // The LM head and loss also run per mini-sequence (logits of one chunk at a time).
      ir::LayerShape mini = plain;
      mini.seq = plain.seq / plan_.mst_chunks;
      const ir::Block head = ir::build_lm_head(model_, mini);
      std::vector<ir::Op> fwd, bwd;
      for (std::int64_t k = 0; k < plan_.mst_chunks; ++k) {
        fwd.insert(fwd.end(), head.forward.begin(), head.forward.end());
        bwd.insert(bwd.end(), head.forward.begin(), head.forward.end());  // logits recomputed
        bwd.insert(bwd.end(), head.backward.begin(), head.backward.end());
      }
      lists_.head_fwd = add_ops(fwd);
      lists_.head_bwd = add_ops(bwd);
    } else {
      const ir::Block head = ir::build_lm_head(model_, plain);
      lists_.head_fwd = add_ops(head.forward);
      lists_.head_bwd = add_ops(head.backward);
    }
    if (model_.mtp_layers > 0) {
      const ir::Block mtp = ir::build_mtp_projection(model_, plain);
      lists_.mtp_fwd = add_ops(mtp.forward);
      lists_.mtp_bwd = add_ops(mtp.backward);
    }
  }

  // The MoE block at the plan's expert parallelism and routing load.
  void build_moe_lists(const ir::LayerShape& shape) {
    const bool sorts = plan_.moe_dispatcher == MoeDispatcher::kAllToAll && model_.moe->num_experts / plan_.ep > 1;
    const bool permutes = plan_.moe_dispatcher != MoeDispatcher::kHybridEp;
    const ir::MoeShape moe{plan_.ep, plan_.etp, plan_.expert_load(), sorts, permutes};
    const ir::MoeOps ops = ir::build_moe(model_, shape, moe);
    MoeLists& m = lists_.moe;
    m.router_fwd = add_ops(ops.router.forward);
    m.router_bwd = add_ops(with_rerun(ops.router.backward, ops.router.forward));
    if (!ops.shared.forward.empty()) {
      m.shared_fwd = add_ops(ops.shared.forward);
      m.shared_bwd = add_ops(ops.shared.backward);
    }
    m.experts_fwd = add_ops(ops.experts.forward);
    m.experts_bwd = add_ops(with_rerun(ops.experts.backward, ops.experts.forward));
    m.unpermute_fwd = add_ops(ops.unpermute.forward);
    m.unpermute_bwd = add_ops(ops.unpermute.backward);
    const std::int64_t tokens = shape.micro_batch * shape.seq / (shape.sequence_parallel ? shape.tp : 1);
    const double copies = static_cast<double>(tokens * model_.moe->top_k) * plan_.expert_load();
    m.dispatch_bytes = Bytes::from_real(copies * static_cast<double>(model_.hidden) * 2.0);
    if (plan_.etp > 1) m.etp_bytes = m.dispatch_bytes * plan_.etp;
  }

  // The forward ops of a block that selective recompute reruns before the block's backward
  // (ParallelPlan::recomputes), in forward order, put in front of `bwd`. By module: core_attn,
  // the attention core; layernorm, the norm opening an attention, MLP or router block;
  // mla_up_proj, MLA's q_up and kv_up GEMMs (with their input casts) and the rotary embedding
  // (Megatron-Core's MLA checkpoints the up projections and rope together); moe_act, the routed
  // experts' activation; mlp, a dense MLP between its norm and the residual add.
  std::vector<ir::Op> with_rerun(std::vector<ir::Op> bwd, const std::vector<ir::Op>& fwd) const {
    if (plan_.recompute != Recompute::kSelective) return bwd;
    using M = RecomputeModule;
    auto named = [](const ir::Op& op, std::string_view a, std::string_view b = {}) {
      return op.name == a || (!b.empty() && op.name == b);
    };
    auto is_cast = [](const ir::Op& op) {
      const std::string_view n = op.name;
      return n == "fp8_cast" || n == "mxfp8_quantize" || n == "nvfp4_quantize";
    };
    const bool dense_mlp = !fwd.empty() && std::any_of(fwd.begin(), fwd.end(), [&](const ir::Op& op) {
      return named(op, "mlp_down");
    });
    std::vector<bool> take(fwd.size(), false);
    for (std::size_t i = 0; i < fwd.size(); ++i) {
      const ir::Op& op = fwd[i];
      bool t = op.core && plan_.recomputes(M::kCoreAttn);
      if (i == 0 && named(op, "rmsnorm", "layernorm") && plan_.recomputes(M::kLayernorm)) t = true;
      if (plan_.recomputes(M::kMlaUpProj) && model_.mla &&
          (named(op, "q_up", "kv_up") || named(op, "rotary"))) {
        t = true;
        if (i > 0 && is_cast(fwd[i - 1])) take[i - 1] = true;
      }
      if (named(op, "expert_swiglu", "expert_gelu") && plan_.recomputes(M::kMoeAct)) t = true;
      if (dense_mlp && plan_.recomputes(M::kMlp) && i > 0 && i + 1 < fwd.size()) t = true;
      if (t) take[i] = true;
    }
    std::vector<ir::Op> rerun;
    for (std::size_t i = 0; i < fwd.size(); ++i) {
      if (take[i]) rerun.push_back(fwd[i]);
    }
    rerun = reruns(std::move(rerun));
    bwd.insert(bwd.begin(), rerun.begin(), rerun.end());
    return bwd;
  }

  // Forward ops as a backward list reruns them (ir::Op::rerun).
  static std::vector<ir::Op> reruns(std::vector<ir::Op> ops) {
    for (auto& op : ops) op.rerun = true;
    return ops;
  }

  static std::vector<ir::Op> without_weight_gradients(const std::vector<ir::Op>& ops) {
    std::vector<ir::Op> out;
    for (const auto& op : ops) {
      if (!op.weight_grad) out.push_back(op);
    }
    return out;
  }

  // The backward op lists cut into input gradients (B) and weight gradients (W), and what the
  // W's of a layer keep from the B's end to theirs: each weight-gradient GEMM's input X and
  // output gradient dY (dW = Xᵀ·dY, bf16), at most what the block's backward would release.
  void split_weight_gradients() {
    auto cut = [this](std::int32_t list, std::int32_t& in, std::vector<ir::Op>& w) {
      if (list == kNone) return;
      const std::vector<ir::Op> ops = op_lists_[static_cast<std::size_t>(list)];
      in = add_ops(without_weight_gradients(ops));
      for (const auto& op : ops) {
        if (op.weight_grad) w.push_back(op);
      }
    };
    auto held = [](const std::vector<ir::Op>& w) {
      std::int64_t elements = 0;
      for (const auto& op : w)
        elements += op.gemm.batch * (op.gemm.m * op.gemm.k + op.gemm.k * op.gemm.n);
      return Bytes(2 * elements);
    };
    std::vector<ir::Op> attn_w, mlp_w;
    cut(lists_.attn_bwd, lists_.attn_bwd_in, attn_w);
    cut(lists_.post_bwd, lists_.post_bwd_in, attn_w);
    cut(lists_.pre_bwd, lists_.pre_bwd_in, attn_w);
    cut(lists_.mlp_bwd, lists_.mlp_bwd_in, mlp_w);
    lists_.w_held_attn = held(attn_w);
    lists_.w_held_mlp = held(mlp_w);
    lists_.attn_w = add_ops(std::move(attn_w));
    lists_.mlp_w = add_ops(std::move(mlp_w));
    if (lists_.moe.router_fwd != kNone) {
      MoeLists& m = lists_.moe;
      std::vector<ir::Op> moe_w;
      cut(m.experts_bwd, m.experts_bwd_in, moe_w);
      cut(m.shared_bwd, m.shared_bwd_in, moe_w);
      cut(m.router_bwd, m.router_bwd_in, moe_w);
      m.w_held = held(moe_w);
      m.w = add_ops(std::move(moe_w));
    }
  }

  std::int32_t add_ops(std::vector<ir::Op> ops) {
    op_lists_.push_back(std::move(ops));
    return static_cast<std::int32_t>(op_lists_.size() - 1);
  }

  const ir::ModelSpec& model_;
  const ParallelPlan& plan_;
  std::vector<std::vector<ir::Op>>& op_lists_;
  std::int64_t attention_window_ = 0;  // > 0: a sliding-window layer's lists
  LayerLists lists_;
};

}  // namespace

LayerLists build_layer_lists(const ir::ModelSpec& model, const ParallelPlan& plan,
                             std::vector<std::vector<ir::Op>>& op_lists,
                             std::int64_t attention_window) {
  return ListBuilder(model, plan, op_lists, attention_window).run();
}

}  // namespace ts::parallel
