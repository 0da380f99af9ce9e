// The validation's normaliser: a published run mapped to a scenario by the reading rules, with
// the row's overrides applied last and every assumption noted.
#include <cmath>

#include "sim/base/format.h"
#include "sim/config/names.h"
#include "sim/driver/validate.h"
#include "sim/driver/validate_rules.h"
#include "sim/driver/validate_text.h"

namespace ts::driver {

using namespace reading;  // NOLINT: the rules this file applies

RowMapping map_run(const PublishedRun& r) {
  config::ComputeModelCache calibrations;
  return map_run(r, calibrations, config::load_all_frameworks(), config::load_reading_vocabulary());
}

RowMapping map_run(const PublishedRun& r, config::ComputeModelCache& calibrations,
                   const std::vector<config::FrameworkProfile>& frameworks,
                   const config::ReadingVocabulary& vocabulary) {
  RowMapping out;
  auto& notes = out.assumptions;
  const RowFrameworks fw = named_frameworks(r, frameworks, vocabulary);
  out.recompute_modes = fw.recompute_modes();
  const auto skip = [&](std::string why) {
    out.skip_reason = std::move(why);
    out.scenario.reset();
    return out;
  };
  out.max_seq_search = r.max_seq_len.has_value();
  if (!r.seq_len && !out.max_seq_search) return skip("seq_len is empty");
  const std::int64_t seq = r.seq_len ? *r.seq_len : 4096;  // max-seq rows: a start for the search
  if (seq <= 0) return skip("seq_len must be > 0");

  std::string reason;
  auto model = build_model(r, seq, vocabulary, notes, reason);
  if (!model) return skip(reason);
  if (!r.zoo_model.empty()) {
    // A mixture of experts: the architecture is the zoo file's (which cites its config.json),
    // whose expert counts must agree with the row's.
    try {
      model = config::load_model(r.zoo_model);
    } catch (const InputError& e) {
      return skip("zoo_model '" + r.zoo_model + "': " + e.what());
    }
    notes.push_back("architecture of the zoo model " + r.zoo_model);
    const auto differs = [](const std::optional<std::int64_t>& row, std::int64_t zoo) { return row && *row != zoo; };
    const ir::MoeSpec e = model->moe.value_or(ir::MoeSpec{});
    if (differs(r.num_experts, e.num_experts) || differs(r.top_k, e.top_k) ||
        differs(r.moe_ffn_hidden, e.expert_ffn_hidden) || differs(r.shared_experts, e.shared_experts)) {
      return skip("the row's expert counts differ from the zoo model " + r.zoo_model);
    }
  }
  for (const auto& f : fw.named) {
    // A framework whose models train without dropout (its profile: llm-foundry's MPT).
    if (f.dropout && !*f.dropout) {
      model->dropout = false;
      notes.push_back("no dropout (" + f.name + ")");
      break;
    }
  }
  auto cluster = build_cluster(r, vocabulary, notes, reason);
  if (!cluster) return skip(reason);

  parallel::ParallelPlan p;
  p.tp = r.tp.value_or(1);
  p.pp = r.pp.value_or(1);
  p.cp = r.cp.value_or(1);
  // The context-parallel algorithm a row names: DeepSpeed-Ulysses' all-to-all over heads, or
  // all-gathered KV (Llama 3's); ring attention (Megatron-Core's and NeMo's) otherwise.
  if (p.cp > 1) {
    const std::string text = r.framework + " " + r.zero_fsdp + " " + r.notes;
    if (says(vocabulary, config::Words::kCpUlysses, text)) {
      p.cp_algo = parallel::CpAlgo::kUlysses;
      notes.push_back("context parallelism as DeepSpeed-Ulysses (all-to-all over heads)");
    } else if (says(vocabulary, config::Words::kCpAllGather, text)) {
      p.cp_algo = parallel::CpAlgo::kAllGather;
      notes.push_back("context parallelism with all-gathered KV");
    }
  }
  p.ep = r.ep.value_or(1);
  p.etp = r.etp.value_or(1);
  // The token dispatcher a row's recipe names ("dispatcher deepep" or "dispatcher hybridep" in
  // its notes: Megatron-Core's flex dispatcher with that backend); NCCL all-to-all otherwise.
  if (model->moe) {
    if (says(vocabulary, config::Words::kDispatcherHybridEp, r.notes)) {
      p.moe_dispatcher = parallel::MoeDispatcher::kHybridEp;
      notes.push_back("MoE dispatcher hybridep (a token crosses the network once per node)");
    } else if (says(vocabulary, config::Words::kDispatcherDeepEp, r.notes)) {
      p.moe_dispatcher = parallel::MoeDispatcher::kDeepEp;
      notes.push_back("MoE dispatcher deepep (a token crosses the network once per node)");
    }
  }
  // Balanced routing: the MoE rows' sources force-balance the tokens among the experts
  // (Megatron-Bridge's performance summary); a row that says otherwise would set --routing.
  p.vpp = r.vpp.value_or(1);
  if (p.vpp > 1) p.schedule = parallel::Schedule::kInterleaved;
  // Megatron-Bridge's recipes name the 1F1B all-to-all overlap as "moe_a2a_overlap True"
  // (CommOverlapConfig.overlap_moe_expert_parallel_comm); Megatron-Core runs it only with expert
  // parallelism and, with pipelining, the interleaved schedule.
  if (model->moe && says(vocabulary, config::Words::kMoeA2aOverlap, r.notes)) {
    if (p.ep > 1 && p.pairs_forward_backward()) {
      p.moe_a2a_overlap = true;
      notes.push_back("1F1B all-to-all overlap (--moe-a2a-overlap)");
    } else {
      notes.push_back("moe_a2a_overlap named, not applied: it needs ep > 1 and no pipeline or an interleaved one");
    }
  }
  p.seq_len = seq;
  if (const auto split = uneven_stage_layers(model->num_layers, p.pp * p.model_chunks()); !split.empty()) {
    p.pp_layers = split;
    notes.push_back("pp_layers " + join_counts(split) +
                    " (layers not divisible by the stages: one fewer on the first and last stages, which hold the "
                    "embedding and LM head)");
  }
  const std::int64_t model_parallel = p.tp * p.pp * p.cp;
  if (model_parallel <= 0) return skip("tp, pp and cp must be > 0");
  std::int64_t gpus = 0;
  if (r.dp) {
    p.dp = *r.dp;
    gpus = r.n_gpus.value_or(p.dp * model_parallel);
  } else if (r.n_gpus) {
    gpus = *r.n_gpus;
    if (gpus % model_parallel != 0) {
      return skip("n_gpus " + str(gpus) + " is not a multiple of tp·pp·cp = " + str(model_parallel));
    }
    p.dp = gpus / model_parallel;
    if (p.dp > 1) notes.push_back("dp " + str(p.dp) + " = n_gpus/(tp·pp·cp)");
  } else {
    return skip("n_gpus and dp are both empty");
  }

  if (gpus <= 0 || gpus > (std::int64_t{1} << 24)) return skip("n_gpus " + str(gpus) + " out of range");

  // Batch.
  p.micro_batch = r.micro_batch.value_or(1);
  out.micro_batch_given = r.micro_batch.has_value();
  if (r.global_batch) {
    p.global_batch = *r.global_batch;
  } else if (r.micro_batch && r.grad_accum) {
    p.global_batch = *r.micro_batch * *r.grad_accum * p.dp;
    notes.push_back("global_batch " + str(p.global_batch) + " = micro_batch·grad_accum·dp");
  } else if (out.max_seq_search) {
    p.global_batch = p.micro_batch * p.dp;
  } else {
    const double params = r.n_params_b ? *r.n_params_b * 1e9 : static_cast<double>(ir::parameter_count(*model));
    const double sequences = gpt3_batch_tokens(params) / static_cast<double>(seq);
    // Sequences per replica rounded to a power of two (in log scale), so that power-of-two
    // micro-batches divide it.
    const double per = std::max(1.0, sequences / static_cast<double>(p.dp));
    const auto per_replica = static_cast<std::int64_t>(std::llround(std::exp2(std::round(std::log2(per)))));
    p.global_batch = per_replica * p.dp;
    notes.push_back("global_batch " + str(p.global_batch) + " (GPT-3 batch of " +
                    str(static_cast<std::int64_t>(gpt3_batch_tokens(params))) + " tokens for this size)");
  }
  if (!out.micro_batch_given && r.grad_accum && p.dp > 0 && p.global_batch % (p.dp * *r.grad_accum) == 0) {
    p.micro_batch = p.global_batch / (p.dp * *r.grad_accum);
    out.micro_batch_given = true;
    notes.push_back("micro_batch " + str(p.micro_batch) + " = global_batch/(dp·grad_accum)");
  }
  if (out.max_seq_search && !out.micro_batch_given) out.micro_batch_given = true;  // one sequence

  // Sharding, sequence parallelism, recompute, precision.
  const auto zero = parse_zero(r, fw, notes);
  p.zero_stage = zero.value_or(0);
  out.zero_given = zero.has_value();
  if (const auto group = stated_shard_group(r.zero_fsdp); group && p.zero_stage > 0) {
    const std::int64_t ranks = p.dp * p.cp;
    if (*group > 1 && *group < ranks && ranks % *group == 0) {
      p.zero_shard_group = *group;
      notes.push_back("sharded within groups of " + str(*group) + " of the " + str(ranks) +
                      " data-parallel ranks, replicated across groups (stated shard degree)");
    }
  }
  const auto sp = parse_yes_no(r.sequence_parallel, vocabulary);
  if (sp) {
    p.sequence_parallel = *sp && p.tp > 1;
  } else if (p.tp > 1 &&
             !fw.gives(config::FrameworkSetting::kSequenceParallel,
                       [](const parallel::ParallelPlan& v) { return !v.sequence_parallel; })) {
    // Tensor parallelism shards the norms' and dropouts' activations along the sequence
    // (Korthikanti et al. 2022) in the frameworks of the runs published since: Megatron-Core and
    // NeMo (TP communication overlap requires it, and their recipes enable it with TP > 1),
    // torchtitan (its TP plan puts SequenceParallel on the norms) and the 4D-parallel training
    // of Llama 3. Not where a framework the row names ran without it at the row's date (its
    // profile or era: Megatron-LM's legacy models, DeepSpeed and its forks, metaseq).
    p.sequence_parallel = true;
    notes.push_back("sequence parallelism on (tp > 1 in a framework that shards activations with it)");
  } else if (p.tp > 1 && says(vocabulary, config::Words::kTpCommOverlap, r.notes)) {
    p.sequence_parallel = true;
    notes.push_back("sequence parallelism on (--tp-comm-overlap requires it)");
  }
  if (model->moe && p.tp > 1 && !p.sequence_parallel) {
    p.sequence_parallel = true;
    notes.push_back("sequence parallelism on (Megatron-Core requires it for MoE with tp > 1)");
  }
  if (p.sequence_parallel && p.tp > 1 && says(vocabulary, config::Words::kTpCommOverlap, r.notes + " " + r.framework)) {
    p.tp_comm_overlap = true;
    notes.push_back("TP communication overlapped with GEMMs (--tp-comm-overlap)");
  }
  auto rc = parse_recompute(r.recompute, vocabulary);
  for (const auto& f : fw.named) {
    // The recompute a named framework's runs use unless told (its profile: XTuner's full).
    if (rc || !f.recompute) continue;
    rc = f.recompute;
    notes.push_back("recompute " + std::string(config::name(*rc)) + " (" + f.recompute_source +
                    ")");
  }
  out.recompute_given = rc.has_value();
  p.recompute = rc.value_or(parallel::Recompute::kNone);
  const std::string rtext = to_lower(r.recompute);
  if (p.recompute == parallel::Recompute::kSelective &&
      fw.offers(parallel::Recompute::kSelectiveOp) && !says(vocabulary, config::Words::kRecomputeLayerPolicy, rtext)) {
    // torchtitan's selective checkpointing of its Llama training configurations is the op
    // policy (train_configs/llama3_*.toml: selective_ac_option = "op"); "selective layer" (every
    // n-th layer checkpointed whole) is the other option.
    p.recompute = parallel::Recompute::kSelectiveOp;
    notes.push_back("selective checkpointing by op policy (torchtitan's Llama configurations)");
  }
  if (p.recompute != parallel::Recompute::kNone &&
      p.recompute != parallel::Recompute::kSelectiveOp) {
    // Selective checkpointing of whole layers (a framework other than Megatron's, whose
    // "selective" recomputes the attention core in every layer): a row with both HFU and MFU
    // tells the share, as full recompute of a share f of the layers adds f/3 to the model FLOPs
    // (the forward again: 8N instead of 6N per token with every layer).
    std::optional<PartialRecompute> partial = parse_partial_recompute(rtext);
    if (!partial && p.recompute == parallel::Recompute::kSelective &&
        !fw.offers(parallel::Recompute::kSelective) && r.hfu_pct && r.mfu_pct && *r.mfu_pct > 0) {
      const double share = 3.0 * (*r.hfu_pct / *r.mfu_pct - 1.0);
      if (share >= 0.1 && share < 0.95) partial = PartialRecompute{0, share};
    }
    if (partial) {
      const std::int64_t chunk_layers = (model->num_layers + p.pp * p.model_chunks() - 1) / (p.pp * p.model_chunks());
      const std::int64_t n = partial->layers > 0
                                 ? partial->layers
                                 : std::max<std::int64_t>(1, std::llround(partial->share * static_cast<double>(chunk_layers)));
      p.recompute = parallel::Recompute::kFull;
      p.recompute_layers = n < chunk_layers ? n : 0;
      notes.push_back("full recompute of " + (n < chunk_layers ? str(n) + " of the " + str(chunk_layers) : "all " + str(chunk_layers)) +
                      " layers of each model chunk" +
                      (partial->layers > 0 ? "" : " (share " + format_double("%.2f", partial->share) + ")"));
    }
  }
  // A recipe's module recompute ("recompute_modules mla_up_proj, mlp" in a row's notes, as
  // Megatron-Bridge's recipes and the ModelZoo scripts list them): selective recompute of those
  // modules; an empty list ("recompute_modules []") recomputes nothing.
  if (const auto modules = recompute_modules_in(vocabulary, r.notes)) {
    p.recompute = *modules == 0 ? parallel::Recompute::kNone : parallel::Recompute::kSelective;
    p.recompute_modules = *modules;
    p.recompute_layers = 0;
    out.recompute_given = true;
    notes.push_back(*modules == 0 ? std::string("no recompute (recompute_modules [])")
                                  : "selective recompute of " + config::recompute_modules_name(*modules) +
                                        " (--recompute-modules)");
  }
  // Megatron-Core's precision-aware optimizer with bf16 Adam moments ("exp_avg_dtype bf16").
  if (says(vocabulary, config::Words::kBf16Moments, r.notes) &&
      p.optimizer_states == parallel::OptimizerStates::kFp32) {
    p.optimizer_states = parallel::OptimizerStates::kFp32Bf16Moments;
    notes.push_back("bf16 Adam moments, fp32 master weights (--optimizer-states fp32-bf16-moments)");
  }
  if (says(vocabulary, config::Words::kPureBf16, r.precision)) {
    // Pure 16-bit training: the parameters themselves are bf16, so a PyTorch optimizer keeps its
    // state in bf16 and there is no fp32 master copy.
    // Plain SGD on pure bf16 parameters keeps no optimizer state at all.
    const bool stateless = sgd_without_momentum(r);
    p.optimizer_states = stateless ? parallel::OptimizerStates::kNone : parallel::OptimizerStates::kBf16;
    notes.push_back(stateless ? "no optimizer state (SGD without momentum on bf16 weights)"
                              : "bf16 optimizer states (pure bf16 parameters)");
  }
  // The loss of the named frameworks (their profiles): MPT's bf16 fused cross-entropy before
  // PyTorch's on fp32 logits (Hugging Face, torchtitan) before the flash-attention training
  // code's in-place one.
  for (const auto ce : {parallel::CrossEntropy::kBf16, parallel::CrossEntropy::kFp32Unfused,
                        parallel::CrossEntropy::kBf16InPlace}) {
    if (const auto* f =
            fw.giving(config::FrameworkSetting::kCrossEntropy,
                      [&](const parallel::ParallelPlan& v) { return v.cross_entropy == ce; })) {
      p.cross_entropy = ce;
      notes.push_back("cross-entropy " + std::string(config::name(ce)) + " (" + f->name + ")");
      break;
    }
  }
  if (eager_elementwise(r, fw)) {
    p.elementwise = parallel::Elementwise::kEager;
    notes.push_back(
        model->norm == ir::Norm::kLayerNorm
            ? "LayerNorm as PyTorch's native kernel (eager PyTorch, no torch.compile)"
            : "RMSNorm, rotary embedding and SwiGLU as eager PyTorch ops (no torch.compile)");
  }
  // FP8 as Transformer Engine, torchao ("Float8") and the OCP formats (E4M3, E5M2) name it;
  // FP16 also as "float16" (not "bfloat16").
  const std::string& prec = r.precision;
  const auto names = [&](config::Words w) { return says(vocabulary, w, prec); };
  if (names(config::Words::kPrecisionNvfp4) && cluster->gpu.supports(ir::Dtype::kNvfp4)) {
    // NVFP4 (MLPerf Training v5.1 Blackwell submissions): block-scaled FP4 GEMMs.
    p.dtype = ir::Dtype::kNvfp4;
  } else if (names(config::Words::kPrecisionMxfp8) && cluster->gpu.supports(ir::Dtype::kMxfp8)) {
    p.dtype = ir::Dtype::kMxfp8;
  } else if (names(config::Words::kPrecisionFp8)) {
    p.dtype = ir::Dtype::kFp8;
    if (!fw.gives(config::FrameworkSetting::kFp8WeightCache,
                  [](const parallel::ParallelPlan& v) { return v.fp8_weight_cache; })) {
      // Megatron-Core and NeMo tell Transformer Engine which micro-batch is a step's first
      // (is_first_microbatch), which casts the FP8 weights once and reuses them (their
      // profiles); other frameworks (Composer's TE autocast, torchao's float8 in torchtitan)
      // cast them at every micro-batch.
      p.fp8_weight_cache = false;
      notes.push_back("FP8 weights cast at every micro-batch (" + r.framework + ")");
    }
  } else if (names(config::Words::kPrecisionFp16) && !names(config::Words::kPrecisionBf16)) {
    p.dtype = ir::Dtype::kFp16;
  } else {
    p.dtype = ir::Dtype::kBf16;
  }
  apply_gradient_reduction(r, fw, p, notes);
  if (!flash_attention(r, fw)) {
    p.flash_attention = false;
    notes.push_back("attention core unfused (" + r.framework + " without FlashAttention)");
  } else if (const std::string k = attention_kernel(r, fw); !k.empty()) {
    const auto known = calibrated_attention_kernels(cluster->gpu.name, calibrations);
    if (known.count(k) > 0) {
      p.attention_kernel = k;
      notes.push_back("attention kernel " + k);
    } else if (known.count("FlashAttention-2") > 0) {
      p.attention_kernel = "FlashAttention-2";
      notes.push_back("attention kernel FlashAttention-2 (" + k + " is not calibrated for " + cluster->gpu.name + ")");
    }
  }

  // The row's overrides (FILE.overrides.textproto) come last: what its source states outside the
  // CSV's columns.
  for (const auto& o : r.overrides) {
    o.apply(p, cluster->cluster);
    notes.push_back("override: " + o.reason + " (" + o.source + ")");
  }
  // Parts only: validated (config::make_scenario) for each candidate of the search.
  out.scenario = config::Scenario{std::move(*model), std::move(*cluster), static_cast<std::int32_t>(gpus), p};
  return out;
}

}  // namespace ts::driver
