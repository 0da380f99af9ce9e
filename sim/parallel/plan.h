// ParallelPlan: the 4D mapping and training options of one run, validated against model and GPUs.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "sim/base/units.h"
#include "sim/ir/dtype.h"

namespace ts::parallel {

// kSelective: Megatron's selective recompute (Korthikanti et al. 2022, the attention core);
// kSelectiveOp: PyTorch selective checkpointing with torchtitan's op policy (every second matmul
// and all non-matmul ops of a layer rerun, ir::op_policy_recompute); kFull: whole layers.
enum class Recompute { kNone, kSelective, kSelectiveOp, kFull };
// Modules that selective recompute reruns (Megatron-Core --recompute-granularity selective
// --recompute-modules; megatron/core/transformer/transformer_config.py): kCoreAttn, the attention
// core (Korthikanti et al. 2022, the default); kLayernorm, both norms of a layer, whose outputs are
// discarded once the next linear layer has read them; kMoeAct, the routed experts' activation
// (SwiGLU or GELU) between their two grouped GEMMs; kMlaUpProj, multi-head latent attention's
// up projections and rotary embedding (the queries, keys and values); kMlp, the MLP of a dense
// layer (an MoE layer's is not: Megatron-Core applies "mlp" to dense MLPs only). A bit each.
enum class RecomputeModule : std::uint8_t { kCoreAttn, kLayernorm, kMoeAct, kMlaUpProj, kMlp };
inline constexpr std::size_t kNumRecomputeModules = 5;
constexpr std::uint32_t module_bit(RecomputeModule m) { return 1u << static_cast<unsigned>(m); }
// Pipeline schedules (sim/parallel/schedule.h generates each rank's order of blocks). kZbH1:
// zero-bubble H1 (Qi et al., ICLR 2024), 1F1B with each backward split into its input-gradient
// (B) and weight-gradient (W) halves and the W's delayed into the bubbles; kDualPipeV: DeepSeek's
// DualPipeV (deepseek-ai/DualPipe dualpipev.py), two model chunks per rank placed in a V (rank s
// holds stages s and 2·pp − 1 − s) with the forward of one micro-batch overlapped with the
// backward of another; kZbV: zero-bubble V (Qi et al., ICLR 2024 and NeurIPS 2024), DualPipeV's
// V placement with split backwards ordered by a list scheduler at 1F1B's activation memory.
enum class Schedule { kGpipe, k1F1B, kInterleaved, kZbH1, kDualPipeV, kZbV };
enum class CpAlgo { kRing, kAllGather, kUlysses };
// What the optimizer keeps per parameter: kFp32, mixed-precision Adam (fp32 master weights, m
// and v); kBf16, pure bf16 Adam (the bf16 weights are the master copy, m and v in bf16); kNone, a
// stateless optimizer on pure bf16 weights (SGD without momentum, as Lightning's bf16-true
// benchmarks train).
// kFp32Bf16Moments: mixed-precision Adam with fp32 master weights and gradients and bf16 m and v
// (Megatron-Core's precision-aware optimizer, --use-precision-aware-optimizer --exp-avg-dtype
// bf16 --exp-avg-sq-dtype bf16; TransformerEngine FusedAdam).
enum class OptimizerStates { kFp32, kBf16, kNone, kFp32Bf16Moments };
// Precision of the data-parallel gradient reduction: fp32 (Megatron-LM and NeMo's default with
// bf16, --accumulate-allreduce-grads-in-fp32; torchtitan's mixed_precision_reduce; FSDP
// MixedPrecision reduce_dtype=float32) or bf16 (Megatron-Core --grad-reduce-in-bf16; FSDP
// reduce_dtype=bfloat16; DeepSpeed communication_data_type).
enum class GradReduce { kFp32, kBf16 };
// How the cross-entropy loss treats the LM head's logits, which sets their memory at the peak.
enum class CrossEntropy {
  // Megatron-LM's default: the bf16 logits are upcast (vocab_parallel_cross_entropy(
  // output.float(), labels); fp16_lm_cross_entropy off) and the fp32 copy becomes the softmax and
  // then the gradient in place (megatron/core/tensor_parallel/cross_entropy.py). At the peak the
  // bf16 logits (or their bf16 gradient) and the fp32 buffer coexist: 2 + 4 bytes per logit.
  kFp32,
  // A loss on the bf16 logits that allocates their bf16 gradient (--fp16-lm-cross-entropy,
  // flash_attn.losses.cross_entropy as MPT's `fused_crossentropy` uses it): 2 + 2 bytes.
  kBf16,
  // A fused loss writing the gradient into the logits (flash-attention's training code,
  // CrossEntropyLossApex with inplace_backward: True): 2 bytes.
  kBf16InPlace,
  // PyTorch's F.cross_entropy on the fp32-upcast logits (HuggingFace transformers' causal LMs):
  // log_softmax keeps its fp32 output, and its backward holds that output, the incoming fp32
  // gradient and the fp32 gradient it produces: 4 + 4 + 4 bytes.
  kFp32Unfused,
};
// How the norms, rotary embedding and SwiGLU product run. kFused: one kernel each (Megatron-Core,
// Transformer Engine, Apex, flash-attention's fused ops, or torch.compile of the layer). kEager:
// as PyTorch composes them op by op in eager mode, each a kernel with its own read and write:
// RMSNorm as x.float(), pow, mean, rsqrt, the product and .type_as(x), then the weight
// (torchtitan models/norms.py RMSNorm, HuggingFace LlamaRMSNorm); the rotary embedding on an fp32
// copy (torchtitan apply_rotary_emb via view_as_complex; HuggingFace rotate_half: slices, cat,
// two products and a sum); SwiGLU as silu(w1·x) and a separate product with w3·x. LayerNorm and
// GELU are single kernels either way; in eager code the LayerNorm is PyTorch's native kernel,
// which streams at a lower, measured rate (compute::MemoryKernel), GELU an elementwise kernel.
enum class Elementwise { kFused, kEager };
// The axes of the rank layout. Tensor, context, data and pipeline parallelism are the mixed
// radix of the ranks (ParallelPlan::order); the expert axes fold a second grid over the ranks of
// each pipeline stage (Megatron-Core parallel folding, Liu et al. 2025 "MoE Parallel Folding",
// arXiv 2504.14960): expert tensor parallelism innermost, then expert parallelism, then expert
// data parallelism, over the stage's ranks in their TP·CP·DP order.
enum class Axis { kTp, kCp, kDp, kPp, kEtp, kEp, kEdp };
inline constexpr std::size_t kNumAxes = 7;
inline constexpr std::size_t kNumOrderAxes = 4;  // the axes ParallelPlan::order arranges
// How tokens are spread over the experts (the load of the slowest EP rank). kBalanced: evenly,
// as Megatron-Bridge's benchmarks force (--moe-router-force-load-balancing); kDropless: every
// token kept, the most loaded rank holding `moe_imbalance` times the mean; kCapacity: each
// expert keeps at most capacity_factor times its mean share (GShard, Lepikhin et al. 2021;
// Megatron --moe-expert-capacity-factor), the rest dropped.
enum class Routing { kBalanced, kDropless, kCapacity };
// How an MoE layer's tokens travel to their experts and back (Megatron-Core
// --moe-token-dispatcher-type alltoall, or flex with --moe-flex-dispatcher-backend deepep or
// hybridep). kAllToAll: NCCL's all-to-all of every token copy. kDeepEp, kHybridEp: a token goes
// over the network once per destination node (scale-up domain) to the GPU of its own rail there,
// which forwards it over NVLink to the ranks of its experts (DeepEP README, "normal kernels";
// HybridEP the same inside and across NVLink domains); with node-limited routing
// (ir::MoeSpec::group_limit) a token reaches at most that many groups' nodes.
enum class MoeDispatcher { kAllToAll, kDeepEp, kHybridEp };

struct ParallelPlan {
  std::int64_t tp = 1;
  std::int64_t pp = 1;
  std::int64_t dp = 1;
  std::int64_t cp = 1;
  std::int64_t vpp = 1;  // virtual stages per pipeline rank (interleaved schedule)
  std::int64_t micro_batch = 1;   // sequences per micro-batch per DP replica
  std::int64_t global_batch = 1;  // sequences per iteration over all DP replicas
  std::int64_t seq_len = 2048;
  ir::Dtype dtype = ir::Dtype::kBf16;  // GEMM precision (fp8: FP8 GEMMs, bf16 elsewhere)
  int zero_stage = 0;
  // ZeRO-3 sharding within groups of this many data-parallel ranks (consecutive in the DP × CP
  // order), replicated across the groups: PyTorch FSDP's HYBRID_SHARD (HSDP), torchtitan's
  // dp_shard × dp_replicate, DeepSpeed MiCS, SageMaker's sharded data parallelism degree. Each
  // layer's parameters are gathered and its gradients reduce-scattered within the group, and the
  // gradient shards all-reduced across the groups. Zero: one group of all dp·cp ranks.
  std::int64_t zero_shard_group = 0;
  bool sequence_parallel = false;
  Recompute recompute = Recompute::kNone;
  // With Recompute::kSelective: the modules it reruns, module_bit() each; 0 = the attention core
  // alone (Megatron-Core's default recompute_modules ["core_attn"]).
  std::uint32_t recompute_modules = 0;
  bool recomputes(RecomputeModule m) const {
    if (recompute != Recompute::kSelective) return false;
    const std::uint32_t set = recompute_modules == 0 ? module_bit(RecomputeModule::kCoreAttn) : recompute_modules;
    return (set & module_bit(m)) != 0;
  }
  // Full recompute of only the first `recompute_layers` layers of each model chunk (a pipeline
  // stage, or each virtual stage when interleaved); the others keep all their activations.
  // Megatron-LM's --recompute-method block --recompute-num-layers N, NeMo's
  // activations_checkpoint_num_layers; a checkpointed fraction of the layers (every k-th layer,
  // as torchtitan's layer policy and fms-fsdp do) costs the same time and peak memory with the
  // same count. Zero: every layer (with Recompute::kFull; other modes take no count).
  std::int64_t recompute_layers = 0;
  Schedule schedule = Schedule::k1F1B;
  std::vector<std::int64_t> pp_layers;  // explicit layers per stage; empty = even split
  // Megatron-style layout string of the virtual stages (sim/parallel/pp_layout.h), in place of
  // pp_layers; empty = none.
  std::string pp_layout;
  std::vector<Axis> order = {Axis::kTp, Axis::kCp, Axis::kDp, Axis::kPp};  // innermost first
  CpAlgo cp_algo = CpAlgo::kRing;
  std::int64_t mst_chunks = 1;
  // FlashAttention (one fused kernel per attention core, Dao et al. 2022); off = the attention
  // core as separate kernels (batched QKᵀ GEMM, scale-mask-softmax, dropout, batched ·V GEMM)
  // as Megatron-LM ran it before FlashAttention, with the a·s² scores kept for the backward.
  bool flash_attention = true;
  // The calibrated fused-attention kernel ("FlashAttention-2", …); empty = the GPU calibration's
  // default (FlashAttention-3 on H100, FlashAttention-2 on A100).
  std::string attention_kernel;
  OptimizerStates optimizer_states = OptimizerStates::kFp32;
  GradReduce grad_reduce = GradReduce::kFp32;
  CrossEntropy cross_entropy = CrossEntropy::kFp32;
  Elementwise elementwise = Elementwise::kFused;
  bool optimizer_in_backward = false;
  // Gradient reduction in buckets overlapped with the last micro-batch's backward (PyTorch DDP,
  // FSDP and Megatron-Core --overlap-grad-reduce); off = one reduction after the backward.
  bool overlap_grad_reduce = true;
  // ZeRO ≥ 1: the updated parameters' all-gather overlaps the next iteration's forward
  // (Megatron-Core --overlap-param-gather); off = gathered right after the optimizer step.
  bool overlap_param_gather = true;
  // Tensor-parallel all-gathers and reduce-scatters (sequence parallelism) pipelined in chunks
  // with the GEMM next to them (Megatron-Core --tp-comm-overlap, Transformer Engine userbuffers).
  bool tp_comm_overlap = false;
  // FP8 (Transformer Engine): each linear layer's weight is cast to FP8 on the first micro-batch
  // of a step and the cast reused by the others (TE's `is_first_microbatch`, which Megatron-Core
  // and NeMo set); off = cast at every micro-batch (TE modules called without it).
  bool fp8_weight_cache = true;
  // FP8 attention (Transformer Engine's fp8_dot_product_attention, Megatron-Core
  // --fp8-dot-product-attention): the fused attention kernel runs on FP8 Q, K and V under an FP8,
  // MXFP8 or NVFP4 recipe; off = bf16 attention, Transformer Engine's default in every recipe.
  bool fp8_attention = false;
  // Parameters per data-parallel bucket (gradient reduction; ZeRO 1-2's parameter gather): the
  // Megatron-Core DDP default of 40 M (newer Megatron-Core grows it to 1 M × dp·cp above 40
  // data-parallel ranks, which is not modelled); 1: one bucket per layer (FSDP's units).
  std::int64_t grad_bucket_params = 40'000'000;
  // Host time to issue one modeled operation (a GEMM, the attention core, a memory-bound op):
  // the eager framework's Python, autograd and dispatch work for the kernels it stands for. No
  // operation finishes faster (compute::with_host_dispatch). Zero: CUDA graphs or a compiled
  // step. The default is eager PyTorch as measured on Megatron-DeepSpeed's single-node runs of
  // vTrain (Bang et al., MICRO'24; VIA-Research/vTrain data/ground_truth_single.csv): fitted on
  // the hidden-1024 runs, checked on the hidden-2048 ones (tools/calibrate/fit_host_dispatch.py).
  Duration host_dispatch = Duration::from_us(70);
  // CUDA_LAUNCH_BLOCKING=1: every kernel launch waits for the kernel to end, so the host's time
  // per operation adds to the kernel's instead of overlapping it (compute::HostOverlap::kBlocking).
  // Off by default; a run sets it where its launch script exports the variable.
  bool launch_blocking = false;
  // Mixture of experts: expert-parallel and expert-tensor-parallel degrees, folded over the
  // tp·cp·dp ranks of a pipeline stage (ep·etp divides them; the rest is expert data
  // parallelism, expert_dp()), and the routing load.
  std::int64_t ep = 1;
  std::int64_t etp = 1;
  Routing routing = Routing::kBalanced;
  double capacity_factor = 0;  // Routing::kCapacity
  double moe_imbalance = 1.0;  // kDropless, kCapacity: most loaded EP rank's tokens / mean
  MoeDispatcher moe_dispatcher = MoeDispatcher::kAllToAll;
  // 1F1B all-to-all overlap (Megatron-Core --overlap-moe-expert-parallel-comm, "combined
  // 1F1B"): in the steady phase each forward runs beside the backward of another micro-batch,
  // the two interleaved at the all-to-all boundaries of each MoE layer so that one's dispatch
  // and combine run beside the other's compute. One more warm-up forward per rank.
  bool moe_a2a_overlap = false;

  std::int64_t num_gpus() const { return tp * pp * dp * cp; }
  // Ranks that hold the same experts and reduce their gradients together.
  std::int64_t expert_dp() const { return tp * cp * dp / (ep * etp); }
  // Tokens of the most loaded EP rank over the mean.
  double expert_load() const {
    switch (routing) {
      case Routing::kBalanced: return 1.0;
      case Routing::kDropless: return moe_imbalance;
      case Routing::kCapacity: return std::min(moe_imbalance, capacity_factor);
    }
    return 1.0;
  }
  // How the attention core runs, as reports name it: "unfused", the named kernel, or "flash"
  // (the GPU calibration's default kernel).
  std::string attention_label() const {
    if (!flash_attention) return "unfused";
    return attention_kernel.empty() ? "flash" : attention_kernel;
  }
  bool interleaved() const { return schedule == Schedule::kInterleaved && vpp > 1; }
  // Two model chunks per rank in a V: virtual stage s on rank s, stage 2·pp − 1 − s on rank s
  // too (the first rank holds the embedding and the LM head, the last rank the turn).
  bool v_shape() const { return schedule == Schedule::kDualPipeV || schedule == Schedule::kZbV; }
  // Backward split into input-gradient (B) and weight-gradient (W) blocks.
  bool splits_backward() const {
    return schedule == Schedule::kZbH1 || schedule == Schedule::kDualPipeV ||
           schedule == Schedule::kZbV;
  }
  std::int64_t model_chunks() const { return v_shape() ? 2 : interleaved() ? vpp : 1; }
  // Schedules whose steady phase can pair a forward with another micro-batch's backward for
  // the all-to-all overlap: Megatron-Core's combined 1F1B without pipelining, its interleaved
  // schedule (it asserts virtual_pipeline_model_parallel_size when pp > 1,
  // megatron/core/transformer/transformer_config.py), and DualPipeV's F&B pairs.
  bool pairs_forward_backward() const {
    switch (schedule) {
      case Schedule::k1F1B:
      case Schedule::kInterleaved: return pp == 1 || interleaved();
      case Schedule::kDualPipeV: return true;
      case Schedule::kGpipe:
      case Schedule::kZbH1:
      case Schedule::kZbV: return false;
    }
    return false;
  }
  // Virtual stage of model chunk `chunk` on pipeline rank `stage`, and the rank that holds
  // virtual stage `vs` (pp · model_chunks() virtual stages).
  std::int64_t virtual_stage(std::int64_t stage, std::int64_t chunk) const {
    if (v_shape()) return chunk == 0 ? stage : 2 * pp - 1 - stage;
    return chunk * pp + stage;
  }
  std::int64_t stage_of(std::int64_t vs) const {
    if (v_shape()) return vs < pp ? vs : 2 * pp - 1 - vs;
    return vs % pp;
  }
  // The rank that holds the LM head (the last virtual stage).
  std::int64_t head_stage() const { return stage_of(pp * model_chunks() - 1); }
  // Micro-batches each pipeline runs per iteration.
  std::int64_t num_micro_batches() const { return global_batch / (dp * micro_batch); }
  // Bytes per parameter that the data-parallel gradient collectives move.
  std::int64_t grad_reduce_bytes() const { return grad_reduce == GradReduce::kFp32 ? 4 : 2; }
  // Ranks over which ZeRO shards parameters, gradients and optimizer states.
  std::int64_t zero_shards() const { return zero_shard_group > 0 ? zero_shard_group : dp * cp; }
  // ZeRO-3 inside a pipeline runs as PyTorch's pipelining runs FSDP, the one stack that combines
  // them (DeepSpeed's pipeline engine refuses ZeRO-2 and -3: deepspeed/runtime/pipe/engine.py).
  // torchtitan keeps each layer's gathered parameters after its forward when pipelining
  // (apply_fsdp: reshard_after_forward = not pp_enabled), and a pipeline stage runs every
  // backward without resharding or gradient sync (torch/distributed/pipelining/stage.py,
  // backward_maybe_with_nosync: set_reshard_after_backward(False),
  // set_requires_gradient_sync(False)), reducing the accumulated gradients once, after all its
  // micro-batches' backwards (perform_reduce_grad, the schedule's REDUCE_GRAD action). So the
  // parameters are gathered once per step and stay whole, the gradients accumulate whole and are
  // reduce-scattered once, not overlapped with the backward: ZeRO-1's traffic and peak memory
  // (with shard groups, within the group, the gradient shards then all-reduced across groups).
  bool fsdp_in_pipeline() const { return zero_stage == 3 && pp > 1; }
  // The ZeRO stage whose communication and memory the plan has: 1 for fsdp_in_pipeline().
  int zero_stage_in_effect() const { return fsdp_in_pipeline() ? 1 : zero_stage; }
  // Layers of a model chunk of `chunk_layers` layers that run again in the backward pass.
  std::int64_t recomputed_layers(std::int64_t chunk_layers) const {
    if (recompute != Recompute::kFull) return 0;
    return recompute_layers > 0 ? std::min(recompute_layers, chunk_layers) : chunk_layers;
  }
  bool operator==(const ParallelPlan&) const = default;
};

}  // namespace ts::parallel
