// Validation of a parallel plan against a model, a cluster and a GPU count (check_plan).
#include <array>
#include <string>

#include "sim/config/loader.h"
#include "sim/config/names.h"
#include "sim/config/plan_rules.h"
#include "sim/config/proto_reader.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/pp_layout.h"

namespace ts::config {
namespace detail {
namespace {

std::string str(std::int64_t v) { return std::to_string(v); }

constexpr std::size_t kNumOrderAxesIndex = parallel::kNumOrderAxes;

// check_plan's `words` for a message whose words vary with more than the schedule.
constexpr std::uint64_t kVaryingWords = ~std::uint64_t{0};

std::size_t axis_index(parallel::Axis a) {
  switch (a) {
    case parallel::Axis::kTp: return 0;
    case parallel::Axis::kCp: return 1;
    case parallel::Axis::kDp: return 2;
    case parallel::Axis::kPp: return 3;
    case parallel::Axis::kEtp:
    case parallel::Axis::kEp:
    case parallel::Axis::kEdp: return kNumOrderAxesIndex;  // not an order axis
  }
  return 0;
}

// a·b, or false when it overflows int64.
bool mul(std::int64_t a, std::int64_t b, std::int64_t& out) {
  return !__builtin_mul_overflow(a, b, &out);
}

}  // namespace

void model_rules(const ir::ModelSpec& m,
                 const std::function<void(std::string_view, std::string)>& fail) {
  if (m.name.empty()) fail("name", "must not be empty");
  const auto positive = [&](std::int64_t v, std::string_view field) {
    if (v > 0) return true;
    fail(field, "must be > 0 (got " + str(v) + ")");
    return false;
  };
  // Upper bounds far above any real model (the largest dense ones have ~130 layers, hidden
  // 25600, vocabularies of 256k), low enough that parameter, FLOP and byte counts computed from
  // them stay inside int64 and a double's exact integers.
  const auto at_most = [&](std::int64_t v, std::int64_t max, std::string_view field) {
    if (v <= max) return true;
    fail(field, "must be <= " + str(max) + " (got " + str(v) + ")");
    return false;
  };
  const bool layers_ok = positive(m.num_layers, "num_layers");
  if (layers_ok) at_most(m.num_layers, kMaxLayers, "num_layers");
  const bool hidden_ok = positive(m.hidden, "hidden") && at_most(m.hidden, kMaxHidden, "hidden");
  const bool heads_ok = positive(m.num_heads, "num_heads");
  const bool kv_ok = positive(m.num_kv_heads, "num_kv_heads");
  if (positive(m.ffn_hidden, "ffn_hidden")) at_most(m.ffn_hidden, kMaxFfnHidden, "ffn_hidden");
  if (positive(m.vocab, "vocab")) at_most(m.vocab, kMaxVocab, "vocab");
  if (heads_ok && hidden_ok) at_most(m.num_heads, m.hidden, "num_heads");
  if (hidden_ok && heads_ok && m.kv_channels == 0 && m.hidden % m.num_heads != 0) {
    fail("hidden", "must be divisible by num_heads (" + str(m.num_heads) +
                       "): every head has hidden/num_heads channels (got " + str(m.hidden) + ")");
  }
  // Grouped-query attention (Ainslie et al. 2023): each KV head serves num_heads/num_kv_heads
  // query heads, so the groups must be whole.
  if (heads_ok && kv_ok && m.num_heads % m.num_kv_heads != 0) {
    fail("num_kv_heads", "must divide num_heads (" + str(m.num_heads) + ") so that query heads form "
                         "whole groups (got " + str(m.num_kv_heads) + ")");
  }
  if (m.kv_channels > 0) at_most(m.kv_channels, kMaxHidden, "head_dim");
  if (m.mtp_layers < 0 || m.mtp_layers > kMaxLayers) {
    fail("mtp_layers", "must be in 0.." + str(kMaxLayers) + " (got " + str(m.mtp_layers) + ")");
  }
  if (m.sliding_window < 0 || m.sliding_window > kMaxSeqLen) {
    fail("sliding_window.tokens",
         "must be in 1.." + str(kMaxSeqLen) + " (got " + str(m.sliding_window) + ")");
  }
  if (m.full_attention_every < 0 || m.full_attention_every > kMaxLayers) {
    fail("sliding_window.full_every",
         "must be in 0.." + str(kMaxLayers) + " (got " + str(m.full_attention_every) + ")");
  }
  if (m.moe) {
    const ir::MoeSpec& e = *m.moe;
    // An upper bound far above any published model (Kimi-K2: 384 routed experts), low enough
    // that expert parameter counts stay inside int64.
    constexpr std::int64_t kMaxExperts = 1 << 10;
    if (e.num_experts < 2 || e.num_experts > kMaxExperts) {
      fail("moe.num_experts", "must be in 2.." + str(kMaxExperts) + " (got " + str(e.num_experts) + ")");
    } else if (e.top_k < 1 || e.top_k > e.num_experts) {
      fail("moe.top_k", "must be in 1..num_experts = " + str(e.num_experts) + " (got " + str(e.top_k) + ")");
    }
    if (e.expert_ffn_hidden <= 0 || e.expert_ffn_hidden > kMaxFfnHidden) {
      fail("moe.expert_ffn_hidden", "must be in 1.." + str(kMaxFfnHidden) + " (got " + str(e.expert_ffn_hidden) + ")");
    }
    if (e.shared_experts < 0 || e.shared_experts > kMaxExperts) {
      fail("moe.shared_experts", "must be in 0.." + str(kMaxExperts) + " (got " + str(e.shared_experts) + ")");
    } else if (e.shared_experts > 0 && (e.shared_ffn_hidden <= 0 || e.shared_ffn_hidden > kMaxFfnHidden)) {
      fail("moe.shared_ffn_hidden", "must be in 1.." + str(kMaxFfnHidden) + " with shared experts (got " +
                                        str(e.shared_ffn_hidden) + ")");
    }
    if (e.expert_groups != 0 || e.group_limit != 0) {
      if (e.expert_groups < 1 || e.num_experts % e.expert_groups != 0) {
        fail("moe.expert_groups", "must divide num_experts = " + str(e.num_experts) + " (got " +
                                      str(e.expert_groups) + ")");
      } else if (e.group_limit < 1 || e.group_limit > e.expert_groups) {
        fail("moe.group_limit", "must be in 1..expert_groups = " + str(e.expert_groups) + " (got " +
                                    str(e.group_limit) + ")");
      }
    }
    if (e.dense_layers < 0 || (layers_ok && e.dense_layers >= m.num_layers)) {
      fail("moe.dense_layers", "must be in 0..num_layers - 1 (got " + str(e.dense_layers) + ")");
    }
  }
  if (m.mla) {
    const ir::MlaSpec& a = *m.mla;
    const auto in_range = [&](std::int64_t v, std::int64_t lo, std::string_view field) {
      if (v >= lo && v <= kMaxHidden) return;
      fail(field, "must be in " + str(lo) + ".." + str(kMaxHidden) + " (got " + str(v) + ")");
    };
    in_range(a.q_lora_rank, 0, "mla.q_lora_rank");
    in_range(a.kv_lora_rank, 1, "mla.kv_lora_rank");
    in_range(a.rope_head_dim, 1, "mla.rope_head_dim");
    if (heads_ok && kv_ok && m.num_kv_heads != m.num_heads) {
      fail("num_kv_heads", "must equal num_heads with mla: latent attention expands keys and values per head");
    }
  }
  // A learned position table bounds the sequence length; rotary positions have no table.
  if (m.position == ir::Position::kLearned && m.max_seq_len <= 0) {
    fail("max_seq_len", "must be > 0 for learned positions: it is the size of the position "
                        "table (got " + str(m.max_seq_len) + ")");
  }
  if (m.max_seq_len < 0) fail("max_seq_len", "must be >= 0 (got " + str(m.max_seq_len) + ")");
  at_most(m.max_seq_len, kMaxSeqLen, "max_seq_len");
}

// Expert parallelism (Megatron-Core parallel folding): each EP rank holds num_experts/ep whole
// experts, the EP × ETP grid tiles the tp·cp·dp ranks of a stage, expert TP splits the expert
// width, and with TP > 1 the MoE layer takes its tokens from sequence parallelism (Megatron-Core
// asserts --sequence-parallel for MoE with tensor parallelism).
template <class Fail>
void moe_plan_rules(const parallel::ParallelPlan& p, const ir::ModelSpec& m, bool sizes_ok, const Fail& fail) {
  // Recompute modules need the part they rerun (Megatron-Core ignores the others silently; a
  // plan that names one is told).
  if (p.recomputes(parallel::RecomputeModule::kMlaUpProj) && !m.mla) {
    fail("--recompute-modules", [&] {
      return std::string("mla_up_proj needs a model with multi-head latent attention (mla { })");
    });
  }
  if (!m.moe) {
    if (p.recomputes(parallel::RecomputeModule::kMoeAct)) {
      fail("--recompute-modules", [&] {
        return std::string("moe_act: " + m.name + " is a dense model: it has no experts");
      });
    }
    if (p.ep != 1)
      fail("--ep", [&] {
        return std::string(m.name +
                           " is a dense model: expert parallelism needs a model with moe { }");
      });
    if (p.etp != 1)
      fail("--etp", [&] {
        return std::string(
            m.name + " is a dense model: expert tensor parallelism needs a model with moe { }");
      });
    if (p.routing != parallel::Routing::kBalanced)
      fail("--routing",
           [&] { return std::string(m.name + " is a dense model: it has no router"); });
    if (p.moe_imbalance != 1.0)
      fail("--moe-imbalance",
           [&] { return std::string(m.name + " is a dense model: it has no experts"); });
    if (p.moe_dispatcher != parallel::MoeDispatcher::kAllToAll) {
      fail("--moe-dispatcher",
           [&] { return std::string(m.name + " is a dense model: it dispatches no tokens"); });
    }
    if (p.moe_a2a_overlap)
      fail("--moe-a2a-overlap", [&] {
        return std::string(m.name + " is a dense model: it has no all-to-all to overlap");
      });
    return;
  }
  const bool ep_ok = p.ep > 0 && p.ep <= m.moe->num_experts;
  if (!ep_ok) {
    fail("--ep", [&] {
      return std::string("must be in 1..num_experts = " + str(m.moe->num_experts) + " (got " +
                         str(p.ep) + ")");
    });
  } else if (m.moe->num_experts % p.ep != 0) {
    fail("--ep", [&] {
      return std::string(str(p.ep) + " must divide the routed experts of " + m.name + " (" +
                         str(m.moe->num_experts) + ")");
    });
  }
  const bool etp_ok = p.etp > 0 && p.etp <= m.moe->expert_ffn_hidden;
  if (!etp_ok) {
    fail("--etp",
         [&] { return std::string("must be in 1..expert_ffn_hidden (got " + str(p.etp) + ")"); });
  } else if (m.moe->expert_ffn_hidden % p.etp != 0) {
    fail("--etp", [&] {
      return std::string(str(p.etp) + " must divide the expert width " +
                         str(m.moe->expert_ffn_hidden));
    });
  }
  if (ep_ok && etp_ok && sizes_ok && (p.tp * p.cp * p.dp) % (p.ep * p.etp) != 0) {
    fail("--ep", [&] {
      return std::string("ep·etp = " + str(p.ep) + "·" + str(p.etp) +
                         " must divide the ranks of a pipeline stage, tp·cp·dp = " + str(p.tp) +
                         "·" + str(p.cp) + "·" + str(p.dp));
    });
  }
  if (sizes_ok && p.tp > 1 && !p.sequence_parallel) {
    fail("--sequence-parallel", [&] {
      return std::string(
          "is required with --tp > 1 for a mixture-of-experts model (the MoE layer routes "
          "each TP rank's share of the sequence)");
    });
  }
  if (!(p.moe_imbalance >= 1.0 && p.moe_imbalance <= 1e3)) {
    fail("--moe-imbalance", [&] {
      return std::string("must be in 1..1000: the most loaded rank's tokens over the mean (got " +
                         detail::format_number(p.moe_imbalance) + ")");
    });
  }
  if (p.routing == parallel::Routing::kCapacity && !(p.capacity_factor >= 1.0 && p.capacity_factor <= 1e3)) {
    fail("--routing", [&] {
      return std::string("capacity:F needs F in 1..1000 (got " +
                         detail::format_number(p.capacity_factor) + ")");
    });
  }
  // Megatron-Core's conditions for --overlap-moe-expert-parallel-comm
  // (megatron/core/transformer/transformer_config.py): expert parallelism, no full recompute,
  // and with pp > 1 the interleaved schedule (DualPipeV pairs forwards and backwards as well).
  if (p.moe_a2a_overlap) {
    if (p.ep == 1)
      fail("--moe-a2a-overlap", [&] {
        return std::string("needs --ep > 1: with one EP rank there is no all-to-all to overlap");
      });
    if (p.recompute == parallel::Recompute::kFull) {
      fail("--moe-a2a-overlap", [&] {
        return std::string("does not run with --recompute full (Megatron-Core asserts it)");
      });
    }
    if (!p.pairs_forward_backward()) {
      fail("--moe-a2a-overlap", [&] {
        return std::string(
            "needs a schedule that pairs a forward with another micro-batch's backward: "
            "1f1b without pipelining (--pp 1), interleaved with --vpp > 1, or dualpipev");
      });
    }
  }
  if (p.zero_stage == 3 && p.zero_shard_group > 0) {
    fail("--zero-shard-group", [&] {
      return std::string("hybrid sharding with a mixture-of-experts model is not modelled (ZeRO-3 shards "
                         "the routed experts over their expert data-parallel group)");
    });
  }
}

}  // namespace detail

std::string dtype_problem(ir::Dtype dtype, const compute::GpuSpec& gpu) {
  switch (dtype) {
    case ir::Dtype::kBf16:
    case ir::Dtype::kFp16: return "";
    case ir::Dtype::kFp8:
      return gpu.peak_fp8.per_s() > 0 ? ""
                                      : "fp8 needs FP8 tensor cores, which " + gpu.name +
                                            " does not have (peak_fp8_tflops is 0)";
    case ir::Dtype::kMxfp8:
      return gpu.supports(dtype) ? ""
                                 : "mxfp8 needs block-scaled FP8 tensor cores (Blackwell), which " +
                                       gpu.name + " does not have (peak_fp4_tflops is 0)";
    case ir::Dtype::kNvfp4:
      return gpu.supports(dtype) ? ""
                                 : "nvfp4 needs FP4 tensor cores (Blackwell), which " + gpu.name +
                                       " does not have (peak_fp4_tflops is 0)";
    case ir::Dtype::kFp32: return "fp32 training is not modelled (expected " + dtype_choices() + ")";
  }
  return "";
}

namespace detail {

void check_plan_rules(const parallel::ParallelPlan& p, const ir::ModelSpec& m, const Cluster& cl,
                      std::int64_t num_gpus, bool check_gpu_count,
                      const std::function<void(const PlanFailure&)>& on_failure) {
  // A rule is its line and the schedule (the stage words and schedule names outside parentheses
  // depend on it), and `words` where a message's other words vary (kVaryingWords: no rule).
  // The line is the caller's (__builtin_LINE() as a default argument, which GCC and Clang both
  // evaluate at the call; std::source_location is not usable with Clang 14 and libstdc++ 12).
  const auto fail = [&](const char* flag, const auto& message, std::uint64_t words = 0,
                        std::uint32_t line = __builtin_LINE()) {
    const std::uint64_t rule = words == kVaryingWords
                                   ? 0
                                   : (std::uint64_t{line} << 32) | (words << 8) |
                                         static_cast<std::uint64_t>(p.schedule);
    on_failure(PlanFailure(flag, rule, message));
  };
  const auto positive = [&](std::int64_t v, const char* flag) {
    if (v > 0) return true;
    fail(flag, [&] { return std::string("must be > 0 (got " + str(v) + ")"); });
    return false;
  };

  // Sizes. Rules that divide by a size run only when it is positive.
  const bool gpus_ok = positive(num_gpus, "--gpus");
  const bool tp_ok = positive(p.tp, "--tp");
  const bool pp_ok = positive(p.pp, "--pp");
  const bool dp_ok = positive(p.dp, "--dp");
  const bool cp_ok = positive(p.cp, "--cp");
  const bool vpp_ok = positive(p.vpp, "--vpp");
  const bool mb_ok = positive(p.micro_batch, "--micro-batch");
  const bool gb_ok = positive(p.global_batch, "--global-batch");
  const bool seq_ok = positive(p.seq_len, "--seq");
  const bool mst_ok = positive(p.mst_chunks, "--mst-chunks");
  // Upper bounds far above any real run (see model_rules), so that token, byte and FLOP counts
  // stay inside int64 and the simulated clock (int64 picoseconds, 106 days).
  const auto at_most = [&](std::int64_t v, std::int64_t max, const char* flag) {
    if (v <= max) return true;
    fail(flag, [&] { return std::string("must be <= " + str(max) + " (got " + str(v) + ")"); });
    return false;
  };
  if (seq_ok) at_most(p.seq_len, kMaxSeqLen, "--seq");
  if (gb_ok) at_most(p.global_batch, kMaxGlobalBatch, "--global-batch");
  if (vpp_ok) at_most(p.vpp, kMaxLayers, "--vpp");
  if (mst_ok) at_most(p.mst_chunks, kMaxSeqLen, "--mst-chunks");
  if (mb_ok && seq_ok && p.seq_len <= kMaxSeqLen && p.micro_batch > kMaxMicroBatchTokens / p.seq_len) {
    fail("--micro-batch", [&] {
      return std::string("micro_batch·seq = " + str(p.micro_batch) + "·" + str(p.seq_len) +
                         " tokens must be <= " + str(kMaxMicroBatchTokens));
    });
  }
  if (p.recompute_layers < 0) {
    fail("--recompute-layers",
         [&] { return std::string("must be >= 0 (got " + str(p.recompute_layers) + ")"); });
  } else if (p.recompute_layers > 0 && p.recompute != parallel::Recompute::kFull) {
    fail("--recompute-layers", [&] {
      return std::string("counts layers of full recompute: needs --recompute full (got " +
                         std::string(name(p.recompute)) + ")");
    });
  }
  if (p.zero_shard_group < 0) {
    fail("--zero-shard-group",
         [&] { return std::string("must be >= 0 (got " + str(p.zero_shard_group) + ")"); });
  } else if (p.zero_shard_group > 0 && at_most(p.zero_shard_group, parallel::kMaxSplit, "--zero-shard-group")) {
    if (p.zero_stage != 3) {
      fail("--zero-shard-group", [&] {
        return std::string("shards parameters in groups: needs --zero 3 (got " +
                           std::to_string(p.zero_stage) + ")");
      });
    } else if (dp_ok && cp_ok && (p.dp * p.cp) % p.zero_shard_group != 0) {
      fail("--zero-shard-group", [&] {
        return std::string(str(p.zero_shard_group) + " must divide dp·cp = " + str(p.dp * p.cp));
      });
    }
  }
  if (p.zero_stage < 0 || p.zero_stage > 3) {
    fail("--zero", [&] {
      return std::string("must be 0, 1, 2 or 3 (got " + std::to_string(p.zero_stage) + ")");
    });
  }

  // The rank layout is a mixed radix over the four axes (Megatron-LM parallel_state), so the
  // order must name each exactly once.
  {
    std::array<int, parallel::kNumOrderAxes + 1> seen{};
    for (auto a : p.order) ++seen[axis_index(a)];
    const std::array<int, parallel::kNumOrderAxes + 1> once{1, 1, 1, 1, 0};
    if (p.order.size() != parallel::kNumOrderAxes || seen != once) {
      fail("--order", [&] {
        return std::string("must name each of tp, cp, dp, pp exactly once (got '" +
                           format_order(p.order) + "')");
      });
    }
  }

  moe_plan_rules(p, m, tp_ok && dp_ok && cp_ok, fail);

  // GPU count.
  if (gpus_ok && tp_ok && pp_ok && dp_ok && cp_ok && check_gpu_count) {
    std::int64_t product = 0, a = 0, b = 0;
    const bool fits = mul(p.tp, p.pp, a) && mul(a, p.dp, b) && mul(b, p.cp, product);
    if (!fits || product != num_gpus) {
      fail(
          "--gpus",
          [&] {
            return std::string("tp·pp·dp·cp = " + str(p.tp) + "·" + str(p.pp) + "·" + str(p.dp) +
                               "·" + str(p.cp) +
                               (fits ? " = " + str(product) : std::string(" overflows")) +
                               " must equal the number of GPUs (" + str(num_gpus) + ")");
          },
          fits ? 1 : 2);
    }
  }
  // Runs smaller than a host are allowed (a few GPUs of one server); larger ones use whole
  // hosts (servers, or the compute trays of a rack-scale NVLink domain).
  const std::int64_t per_host = cl.cluster.host.gpus_per_host;
  if (gpus_ok && per_host > 0 && num_gpus > per_host && num_gpus % per_host != 0) {
    const bool node = per_host == cl.cluster.scale_up.gpus_per_domain;  // a DGX-class server
    const std::string unit = node ? "node" : "host";
    fail("--gpus", [&] {
      return std::string(str(num_gpus) + " GPUs span more than one " + unit + " but not whole " +
                         unit + "s (" + cl.cluster.name + " has " + str(per_host) + " GPUs per " +
                         unit + ")");
    });
  }
  // tp larger than a node is allowed: it is valid, only slow (TP traffic then crosses the
  // fabric), which is what the simulation will show.

  // Tensor parallelism splits attention heads and the MLP evenly (Megatron-LM, Shoeybi et al.
  // 2019, §3): ColumnParallelLinear divides its output size by tp.
  if (tp_ok) {
    if (m.num_heads > 0 && m.num_heads % p.tp != 0) {
      fail("--tp", [&] {
        return std::string("must divide the number of attention heads (" + m.name + " has " +
                           str(m.num_heads) + "; got tp " + str(p.tp) + ")");
      });
    }
    // KV heads of grouped-query attention: with tp <= kv each rank holds kv/tp whole KV heads
    // (Megatron-Core's attention requires num_query_groups % tp == 0). With tp > kv each KV
    // head is replicated on tp/kv ranks (as vLLM does for tp above the KV head count), which
    // needs tp to be a multiple of kv; the replicated KV projections cost extra FLOPs and memory
    // that the lowering must account for.
    const std::int64_t kv = m.num_kv_heads;
    if (kv > 0 && kv != m.num_heads) {
      const bool ok = p.tp <= kv ? kv % p.tp == 0 : p.tp % kv == 0;
      if (!ok) {
        fail("--tp", [&] {
          return std::string("must divide the number of key/value heads (" + m.name + " has " +
                             str(kv) +
                             "), or be a multiple of it so that each KV head is replicated on tp/" +
                             "kv ranks (got tp " + str(p.tp) + ")");
        });
      }
    }
    if (m.ffn_hidden > 0 && m.ffn_hidden % p.tp != 0) {
      fail("--tp", [&] {
        return std::string("must divide ffn_hidden (" + m.name + " has " + str(m.ffn_hidden) +
                           "): the MLP projections are split evenly across tp ranks (got tp " +
                           str(p.tp) + ")");
      });
    }
    // The vocabulary is not checked: Megatron-LM pads it to a multiple of 128·tp
    // (--make-vocab-size-divisible-by, _vocab_size_with_padding), so any tp splits it; the
    // padded rows are the model builder's concern.
  }

  // Pipeline stages: whole layers per stage. With the interleaved schedule each rank holds vpp
  // model chunks, so there are pp·vpp stages (Narayanan et al. SC'21, §2.2.2).
  // The V-shaped schedules place two chunks on each rank: 2·pp stages.
  const bool interleaved = p.schedule == parallel::Schedule::kInterleaved;
  const bool v_shape = p.v_shape();
  if (pp_ok && vpp_ok) {
    std::int64_t stages = p.pp;
    if (interleaved && !mul(p.pp, p.vpp, stages)) stages = -1;
    if (v_shape && !mul(p.pp, 2, stages)) stages = -1;
    // Formatted only for a message: most of a sweep's millions of checked plans need none.
    const auto stage_words = [&]() -> std::string {
      return interleaved ? "pp·vpp = " + str(p.pp) + "·" + str(p.vpp) + " = " + str(stages) + " (interleaved)"
             : v_shape   ? "2·pp = " + str(stages) + " (" + std::string(name(p.schedule)) + ": two chunks per rank in a V)"
                         : "pp = " + str(p.pp);
    };
    if (!p.pp_layout.empty()) {
      if (!p.pp_layers.empty())
        fail("--pp-layout",
             [&] { return std::string("give --pp-layout or --pp-layers, not both"); });
      const parallel::ParsedLayout layout = parallel::parse_pp_layout(p.pp_layout);
      if (layout.error_position > 0) {
        fail("--pp-layout", [&] {
          return std::string("'" + p.pp_layout + "' at position " + str(layout.error_position) +
                             ": " + layout.error);
        });
      } else if (stages > 0) {
        const std::string why =
            parallel::check_pp_layout(layout.stages, stages, m.num_layers, m.mtp_layers);
        if (!why.empty()) {
          fail(
              "--pp-layout",
              [&] {
                return std::string("'" + p.pp_layout + "' " + why + "; stages: " + stage_words());
              },
              kVaryingWords);
        }
      }
    } else if (p.pp_layers.empty()) {
      if (m.num_layers > 0 && stages > 0 && m.num_layers % stages != 0) {
        if (interleaved && m.num_layers % p.pp == 0) {
          fail("--vpp", [&] {
            return std::string("the interleaved schedule needs num_layers (" + str(m.num_layers) +
                               ") divisible by " + stage_words() + ", or --pp-layers (counts, or balanced)");
          });
        } else {
          fail("--pp", [&] {
            return std::string("must divide num_layers (" + m.name + " has " + str(m.num_layers) +
                               "; stages: " + stage_words() +
                               "), or give the layers of each stage "
                               "with --pp-layers (counts, or balanced)");
          });
        }
      }
    } else {
      if (static_cast<std::int64_t>(p.pp_layers.size()) != stages) {
        fail("--pp-layers", [&] {
          return std::string("has " + str(static_cast<std::int64_t>(p.pp_layers.size())) +
                             " entries; needs one per pipeline stage: " + stage_words());
        });
      }
      std::int64_t sum = 0;
      bool all_positive = true;
      bool sum_fits = true;
      for (auto n : p.pp_layers) {
        if (n <= 0) all_positive = false;
        if (__builtin_add_overflow(sum, n, &sum)) sum_fits = false;
      }
      if (!all_positive)
        fail("--pp-layers", [&] {
          return std::string("every stage needs at least one layer (entries must be > 0)");
        });
      if (all_positive && (!sum_fits || sum != m.num_layers)) {
        fail("--pp-layers", [&] {
          return std::string("entries sum to " + str(sum) + " but " + m.name + " has " +
                             str(m.num_layers) + " layers");
        });
      }
    }
  }
  if (vpp_ok && p.vpp > 1 && !interleaved) {
    fail("--vpp", [&] {
      return std::string("virtual pipeline stages (vpp " + str(p.vpp) +
                         ") need --schedule interleaved (got " + std::string(name(p.schedule)) +
                         ")");
    });
  }
  if (v_shape && pp_ok && p.pp < 2) {
    fail("--schedule", [&] {
      return std::string(std::string(name(p.schedule)) +
                         " needs --pp >= 2 (two chunks per rank in a V)");
    });
  }
  if (p.schedule == parallel::Schedule::kDualPipeV) {
    // dualpipev.py asserts num_chunks >= num_ranks * 2 (DualPipeV.step).
    std::int64_t per_step = 0;
    if (pp_ok && dp_ok && mb_ok && gb_ok && p.pp >= 2 && mul(p.dp, p.micro_batch, per_step) &&
        p.global_batch % per_step == 0 && p.global_batch / per_step < 2 * p.pp) {
      fail("--schedule", [&] {
        return std::string("dualpipev needs at least 2·pp = " + str(2 * p.pp) +
                           " micro-batches per pipeline (global_batch/(dp·micro_batch) = " +
                           str(p.global_batch / per_step) + ")");
      });
    }
  }
  if (interleaved) {
    if (vpp_ok && p.vpp < 2)
      fail("--schedule", [&] {
        return std::string("interleaved needs --vpp >= 2 model chunks per pipeline rank");
      });
    if (pp_ok && p.pp < 2)
      fail("--schedule", [&] { return std::string("interleaved needs --pp >= 2"); });
    // Megatron-LM's interleaved 1F1B raises "number of microbatches is not divisible by
    // pipeline-model-parallel-size when using interleaved schedule"
    // (megatron/core/pipeline_parallel/schedules.py, forward_backward_pipelining_with_interleaving;
    // the requirement is stated in Narayanan et al. SC'21 §2.2.2).
    std::int64_t per_step = 0;
    if (pp_ok && dp_ok && mb_ok && gb_ok && p.pp >= 2 && mul(p.dp, p.micro_batch, per_step) &&
        p.global_batch % per_step == 0) {
      const std::int64_t micro = p.global_batch / per_step;
      if (micro % p.pp != 0) {
        fail("--schedule", [&] {
          return std::string(
              "interleaved needs the micro-batches per pipeline (global_batch/(dp·"
              "micro_batch) = " +
              str(micro) + ") to be a multiple of pp (" + str(p.pp) + ")");
        });
      }
    }
  }

  // Batch: every DP replica runs whole micro-batches.
  if (dp_ok && mb_ok && gb_ok) {
    std::int64_t per_step = 0;
    if (!mul(p.dp, p.micro_batch, per_step) || p.global_batch % per_step != 0) {
      fail("--global-batch", [&] {
        return std::string("must be a multiple of dp·micro_batch = " + str(p.dp) + "·" +
                           str(p.micro_batch) + " = " + str(per_step) + " (got " +
                           str(p.global_batch) + ")");
      });
    }
  }

  // Context parallelism splits each sequence across cp ranks.
  if (p.tp_comm_overlap && (!p.sequence_parallel || p.tp <= 1)) {
    // Transformer Engine pipelines the all-gather and reduce-scatter of sequence parallelism.
    fail("--tp-comm-overlap", [&] {
      return std::string("needs --sequence-parallel with tp > 1 (got tp " + str(p.tp) +
                         (p.sequence_parallel ? ")" : ", no sequence parallelism)"));
    });
  }
  if (!p.flash_attention && !p.attention_kernel.empty()) {
    fail("--attention-kernel", [&] {
      return std::string("names a fused kernel ('" + p.attention_kernel +
                         "') but --unfused-attention runs the attention core unfused");
    });
  }
  // Transformer Engine runs FP8 attention inside an FP8 recipe (fp8_autocast) and only in its
  // fused attention kernel.
  if (p.fp8_attention && !ir::quantized_gemm(p.dtype)) {
    fail("--fp8-attention", [&] {
      return std::string("needs an FP8 recipe: --dtype fp8, mxfp8 or nvfp4 (got " +
                         std::string(ir::dtype_name(p.dtype)) + ")");
    });
  }
  if (p.fp8_attention && !p.flash_attention) {
    fail("--fp8-attention",
         [&] { return std::string("runs the fused attention kernel, not --unfused-attention"); });
  }
  if (cp_ok && p.cp > 1 && !p.flash_attention) {
    // Ring and all-gather CP merge partial results with the log-sum-exp of blockwise (flash)
    // attention; Ulysses is modeled with the same kernel.
    fail("--unfused-attention", [&] {
      return std::string("context parallelism (cp " + str(p.cp) +
                         ") is modeled with FlashAttention only");
    });
  }
  if (seq_ok && cp_ok && p.cp > 1) {
    switch (p.cp_algo) {
      case parallel::CpAlgo::kRing:
      case parallel::CpAlgo::kAllGather:
        // Causal load balancing cuts the sequence into 2·cp chunks and gives rank i chunks i and
        // 2·cp−1−i (Megatron-Core / Transformer Engine context parallelism; Llama 3, Dubey et
        // al. 2024 §3.3.2, splits the same way for its all-gather CP).
        if (p.seq_len % (2 * p.cp) != 0) {
          fail("--seq", [&] {
            return std::string(
                "must be divisible by 2·cp = " + str(2 * p.cp) +
                ": causal load balancing splits each sequence into 2·cp chunks (got " +
                str(p.seq_len) + ")");
          });
        }
        break;
      case parallel::CpAlgo::kUlysses:
        if (p.seq_len % p.cp != 0) {
          fail("--seq", [&] {
            return std::string("must be divisible by cp (" + str(p.cp) + ") (got " +
                               str(p.seq_len) + ")");
          });
        }
        // The all-to-all trades the sequence split for a head split (Jacobs et al. 2023,
        // DeepSpeed-Ulysses): each cp rank needs whole heads of its tp rank's share.
        if (tp_ok && m.num_heads > 0 && m.num_heads % p.tp == 0 && (m.num_heads / p.tp) % p.cp != 0) {
          fail("--cp", [&] {
            return std::string("Ulysses needs the heads per tp rank (" + str(m.num_heads) + "/" +
                               str(p.tp) + " = " + str(m.num_heads / p.tp) + ") divisible by cp (" +
                               str(p.cp) + ")");
          });
        }
        break;
    }
  }
  // Sequence parallelism splits the tokens of each cp rank across its tp ranks outside
  // attention and the MLP (Korthikanti et al. 2022, §4.2.2).
  if (p.sequence_parallel && seq_ok && cp_ok && tp_ok && p.tp > 1) {
    std::int64_t split = 0;
    if (!mul(p.cp, p.tp, split) || p.seq_len % split != 0) {
      fail("--sequence-parallel", [&] {
        return std::string("needs --seq (" + str(p.seq_len) + ") divisible by cp·tp = " +
                           str(p.cp) + "·" + str(p.tp) + " = " + str(split));
      });
    }
  }
  if (seq_ok && m.position == ir::Position::kLearned && m.max_seq_len > 0 && p.seq_len > m.max_seq_len) {
    fail("--seq", [&] {
      return std::string(str(p.seq_len) + " exceeds the learned position table of " + m.name +
                         " (max_seq_len " + str(m.max_seq_len) + ")");
    });
  }
  if (mst_ok && seq_ok && cp_ok && p.mst_chunks > p.seq_len / p.cp) {
    fail("--mst-chunks", [&] {
      return std::string(str(p.mst_chunks) + " chunks exceed the " + str(p.seq_len / p.cp) +
                         " tokens of a sequence on one cp rank");
    });
  }

  // Precision.
  if (!dtype_problem(p.dtype, cl.gpu).empty()) {
    fail("--dtype", [&] { return dtype_problem(p.dtype, cl.gpu); });
  }

  // The optimizer steps each parameter as soon as its gradient is complete (PyTorch's
  // _apply_optimizer_in_backward: "the optimizer ... will fire after the gradient has been
  // accumulated into the parameter"), so gradients cannot be accumulated over micro-batches.
  if (p.optimizer_in_backward && dp_ok && mb_ok && gb_ok) {
    std::int64_t per_step = 0;
    if (mul(p.dp, p.micro_batch, per_step) && p.global_batch != per_step) {
      fail("--optimizer-in-backward", [&] {
        return std::string(
            "steps the optimizer during the backward pass, so it needs "
            "one micro-batch per iteration: global_batch must equal "
            "dp·micro_batch = " +
            str(per_step) + " (got " + str(p.global_batch) + ")");
      });
    }
  }
}

std::vector<Diagnostic> check_plan(const parallel::ParallelPlan& plan, const ir::ModelSpec& model,
                                   const Cluster& cluster, std::int64_t num_gpus,
                                   bool check_gpu_count) {
  std::vector<Diagnostic> out;
  check_plan_rules(plan, model, cluster, num_gpus, check_gpu_count, [&](const PlanFailure& f) {
    out.push_back(Diagnostic{"", 0, f.flag(), f.message()});
  });
  return out;
}

}  // namespace detail

std::vector<Diagnostic> check_plan(const parallel::ParallelPlan& plan, const ir::ModelSpec& model,
                                   const Cluster& cluster, std::int64_t num_gpus) {
  return detail::check_plan(plan, model, cluster, num_gpus, true);
}

void check_plan_failures(const parallel::ParallelPlan& plan, const ir::ModelSpec& model,
                         const Cluster& cluster, std::int64_t num_gpus,
                         const std::function<void(const PlanFailure&)>& on_failure) {
  detail::check_plan_rules(plan, model, cluster, num_gpus, true, on_failure);
}

std::vector<Diagnostic> check_model(const ir::ModelSpec& model) {
  std::vector<Diagnostic> out;
  detail::model_rules(model, [&](std::string_view field, std::string message) {
    out.push_back(Diagnostic{"", 0, std::string(field), std::move(message)});
  });
  return out;
}

}  // namespace ts::config
