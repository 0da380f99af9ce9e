// The validation's normaliser: a published run mapped to a scenario by a table of reading steps,
// the row's overrides applied last and every assumption noted.
#include <cmath>
#include <regex>

#include "sim/base/format.h"
#include "sim/config/names.h"
#include "sim/driver/validate.h"
#include "sim/driver/validate_rules.h"
#include "sim/driver/validate_text.h"
#include "sim/parallel/pp_layout.h"

namespace ts::driver {

using namespace reading;  // NOLINT: the rules this file applies

namespace {

// "7, 8 (x14), 7": runs of equal counts folded.
std::string join_counts(const std::vector<std::int64_t>& v) {
  std::string out;
  for (std::size_t i = 0; i < v.size();) {
    std::size_t j = i;
    while (j < v.size() && v[j] == v[i]) ++j;
    out += (out.empty() ? "" : ", ") + str(v[i]) + (j - i > 1 ? " (x" + str(static_cast<std::int64_t>(j - i)) + ")" : "");
    i = j;
  }
  return out;
}

// A row as the steps read it: the row, the frameworks it names, and the scenario built so far.
struct Reading {
  const PublishedRun& r;
  const RowFrameworks& fw;
  const config::ReadingVocabulary& vocab;
  config::ComputeModelCache& calibrations;
  RowMapping& out;
  std::int64_t seq = 0;
  std::optional<ir::ModelSpec> model{};
  std::optional<config::Cluster> cluster{};
  parallel::ParallelPlan p{};
  std::int64_t gpus = 0;

  void note(std::string s) { out.assumptions.push_back(std::move(s)); }
  void skip(std::string why) { out.skip_reason = std::move(why); }  // the row cannot be mapped
  bool says(config::Words list, std::string_view text) const { return reading::says(vocab, list, text); }
};

// The steps of the reading, each a section of docs/validation-rules.md: a step reads some cells,
// sets the settings they give and notes every rule that filled one in, or skips the row.

void read_model(Reading& x) {
  x.out.max_seq_search = x.r.max_seq_len.has_value();
  if (!x.r.seq_len && !x.out.max_seq_search) return x.skip("seq_len is empty");
  x.seq = x.r.seq_len ? *x.r.seq_len : 4096;  // max-seq rows: a start for the search
  if (x.seq <= 0) return x.skip("seq_len must be > 0");
  const PublishedRun& r = x.r;
  x.model = build_model(r, x.seq, x.vocab, x.out.assumptions, x.out.skip_reason);
  if (!x.model) return;
  if (!r.zoo_model.empty()) {
    // A mixture of experts: the architecture is the zoo file's (which cites its
    // config.json), whose expert counts must agree with the row's.
    try {
      x.model = config::load_model(r.zoo_model);
    } catch (const InputError& e) {
      return x.skip("zoo_model '" + r.zoo_model + "': " + e.what());
    }
    x.note("architecture of the zoo model " + r.zoo_model);
    const auto differs = [](const std::optional<std::int64_t>& row, std::int64_t zoo) { return row && *row != zoo; };
    const ir::MoeSpec e = x.model->moe.value_or(ir::MoeSpec{});
    if (differs(r.num_experts, e.num_experts) || differs(r.top_k, e.top_k) ||
        differs(r.moe_ffn_hidden, e.expert_ffn_hidden) || differs(r.shared_experts, e.shared_experts)) {
      return x.skip("the row's expert counts differ from the zoo model " + r.zoo_model);
    }
  }
  for (const auto& f : x.fw.named) {
    // A framework whose models train without dropout (its profile: llm-foundry's MPT).
    if (f.dropout && !*f.dropout) {
      x.model->dropout = false;
      x.note("no dropout (" + f.name + ")");
      break;
    }
  }
}

void read_cluster(Reading& x) {
  x.cluster = build_cluster(x.r, x.vocab, x.out.assumptions, x.out.skip_reason);
}

void read_parallel_degrees(Reading& x) {
  auto& p = x.p;
  p.tp = x.r.tp.value_or(1);
  p.pp = x.r.pp.value_or(1);
  p.cp = x.r.cp.value_or(1);
  p.vpp = x.r.vpp.value_or(1);
  if (p.vpp > 1) p.schedule = parallel::Schedule::kInterleaved;
  // The rank order of the axes a named framework's runs use (its profile, as of the row's date).
  if (const auto* f = x.fw.giving(config::FrameworkSetting::kOrder, [](const auto&) { return true; })) {
    p.order = f->values.order;
    x.note("ranks in " + config::format_order(p.order) + " order (" + f->name + ")");
  }
  // The context-parallel algorithm a row names: DeepSpeed-Ulysses' all-to-all over heads, or
  // all-gathered KV (Llama 3's); ring attention (Megatron-Core's and NeMo's) otherwise.
  const std::string text = x.r.framework + " " + x.r.zero_fsdp + " " + x.r.notes;
  if (p.cp > 1 && x.says(config::Words::kCpUlysses, text)) {
    p.cp_algo = parallel::CpAlgo::kUlysses;
    x.note("context parallelism as DeepSpeed-Ulysses (all-to-all over heads)");
  } else if (p.cp > 1 && x.says(config::Words::kCpAllGather, text)) {
    p.cp_algo = parallel::CpAlgo::kAllGather;
    x.note("context parallelism with all-gathered KV");
  }
}

void read_experts(Reading& x) {
  auto& p = x.p;
  p.ep = x.r.ep.value_or(1);
  p.etp = x.r.etp.value_or(1);
  if (!x.model->moe) return;
  // The token dispatcher a row's recipe names ("dispatcher deepep" or "dispatcher hybridep"
  // in its notes: Megatron-Core's flex dispatcher with that backend); NCCL all-to-all
  // otherwise. Routing stays balanced: the MoE rows' sources force-balance the tokens among
  // the experts (Megatron-Bridge's performance summary).
  if (x.says(config::Words::kDispatcherHybridEp, x.r.notes)) {
    p.moe_dispatcher = parallel::MoeDispatcher::kHybridEp;
    x.note("MoE dispatcher hybridep (a token crosses the network once per node)");
  } else if (x.says(config::Words::kDispatcherDeepEp, x.r.notes)) {
    p.moe_dispatcher = parallel::MoeDispatcher::kDeepEp;
    x.note("MoE dispatcher deepep (a token crosses the network once per node)");
  }
  // Megatron-Bridge's recipes name the 1F1B all-to-all overlap as "moe_a2a_overlap True"
  // (CommOverlapConfig.overlap_moe_expert_parallel_comm); Megatron-Core runs it only with
  // expert parallelism and, with pipelining, the interleaved schedule.
  if (!x.says(config::Words::kMoeA2aOverlap, x.r.notes)) return;
  p.moe_a2a_overlap = p.ep > 1 && p.pairs_forward_backward();
  x.note(p.moe_a2a_overlap ? "1F1B all-to-all overlap (--moe-a2a-overlap)"
                           : "moe_a2a_overlap named, not applied: it needs ep > 1 and no pipeline or an "
                             "interleaved one");
}

void read_pipeline_stages(Reading& x) {
  auto& p = x.p;
  p.seq_len = x.seq;
  // A Megatron-Core layout the row's recipe gives ("pipeline layout Et|(tt|)*30mL" in its
  // notes: --pipeline-model-parallel-layout), where it fits the plan and the model.
  static const std::regex named_layout(R"(pipeline layout ([Etm|L()*0-9,]+))");
  if (std::smatch match; std::regex_search(x.r.notes, match, named_layout)) {
    const std::string text = match[1].str();
    const parallel::ParsedLayout layout = parallel::parse_pp_layout(text);
    const std::string why = layout.error.empty()
                                ? parallel::check_pp_layout(layout.stages, p.pp * p.model_chunks(),
                                                            x.model->num_layers, x.model->mtp_layers)
                                : layout.error;
    if (why.empty()) {
      p.pp_layout = text;
      x.note("pipeline layout " + text +
             " (the recipe's; multi-token-prediction modules on the last stage)");
      return;
    }
    x.note("pipeline layout " + text + " not applied: " + why);
  }
  if (const auto split = uneven_stage_layers(x.model->num_layers, p.pp * p.model_chunks()); !split.empty()) {
    p.pp_layers = split;
    x.note("pp_layers " + join_counts(split) +
           " (layers not divisible by the stages: one fewer on the first and last stages, which hold "
           "the embedding and LM head)");
  }
}

void read_data_parallelism(Reading& x) {
  auto& p = x.p;
  const std::int64_t model_parallel = p.tp * p.pp * p.cp;
  if (model_parallel <= 0) return x.skip("tp, pp and cp must be > 0");
  if (x.r.dp) {
    p.dp = *x.r.dp;
    x.gpus = x.r.n_gpus.value_or(p.dp * model_parallel);
  } else if (x.r.n_gpus) {
    x.gpus = *x.r.n_gpus;
    if (x.gpus % model_parallel != 0) {
      return x.skip("n_gpus " + str(x.gpus) + " is not a multiple of tp·pp·cp = " + str(model_parallel));
    }
    p.dp = x.gpus / model_parallel;
    if (p.dp > 1) x.note("dp " + str(p.dp) + " = n_gpus/(tp·pp·cp)");
  } else {
    return x.skip("n_gpus and dp are both empty");
  }
  if (x.gpus <= 0 || x.gpus > (std::int64_t{1} << 24)) x.skip("n_gpus " + str(x.gpus) + " out of range");
}

// A job on scale-up domains of several hosts (NVL72 racks of 4-GPU trays) sits in Slurm
// segments, as NVIDIA's launchers place it (config::place_in_segments; `plan`'s default
// placement), unless the cluster file pins the GPUs used per domain.
void read_placement(Reading& x) {
  auto& c = x.cluster->cluster;
  const std::int64_t per_host = c.host.gpus_per_host, per_domain = c.scale_up.gpus_per_domain;
  if (c.scale_up.gpus_used_per_domain > 0 || per_domain <= per_host) return;
  const std::int64_t used = config::place_in_segments(c, x.gpus);
  if (used == per_domain) return;
  x.note("placed on " + str(used) + " GPUs of each " + str(per_domain) +
         "-GPU NVLink domain (Slurm segments of " + str(used / per_host) +
         " hosts, as NVIDIA's launchers place jobs on rack-scale domains)");
}

void read_batch(Reading& x) {
  const PublishedRun& r = x.r;
  auto& p = x.p;
  auto& out = x.out;
  p.micro_batch = r.micro_batch.value_or(1);
  out.micro_batch_given = r.micro_batch.has_value();
  if (r.global_batch) {
    p.global_batch = *r.global_batch;
  } else if (r.micro_batch && r.grad_accum) {
    p.global_batch = *r.micro_batch * *r.grad_accum * p.dp;
    x.note("global_batch " + str(p.global_batch) + " = micro_batch·grad_accum·dp");
  } else if (out.max_seq_search) {
    p.global_batch = p.micro_batch * p.dp;
  } else {
    const double params =
        r.n_params_b ? *r.n_params_b * 1e9 : static_cast<double>(ir::parameter_count(*x.model));
    const double sequences = gpt3_batch_tokens(params) / static_cast<double>(x.seq);
    // Sequences per replica rounded to a power of two (in log scale), so that power-of-two
    // micro-batches divide it.
    const double per = std::max(1.0, sequences / static_cast<double>(p.dp));
    const auto per_replica = static_cast<std::int64_t>(std::llround(std::exp2(std::round(std::log2(per)))));
    p.global_batch = per_replica * p.dp;
    x.note("global_batch " + str(p.global_batch) + " (GPT-3 batch of " +
           str(static_cast<std::int64_t>(gpt3_batch_tokens(params))) + " tokens for this size)");
  }
  if (!out.micro_batch_given && r.grad_accum && p.dp > 0 && p.global_batch % (p.dp * *r.grad_accum) == 0) {
    p.micro_batch = p.global_batch / (p.dp * *r.grad_accum);
    out.micro_batch_given = true;
    x.note("micro_batch " + str(p.micro_batch) + " = global_batch/(dp·grad_accum)");
  }
  if (out.max_seq_search) out.micro_batch_given = true;  // one sequence
}

void read_sharding(Reading& x) {
  auto& p = x.p;
  const auto zero = parse_zero(x.r, x.fw, x.out.assumptions);
  p.zero_stage = zero.value_or(0);
  x.out.zero_given = zero.has_value();
  // A shard group the sharding cell states as a number: hybrid sharding, parameters sharded
  // within groups of that many data-parallel ranks and replicated across groups. HSDP without
  // one stays full sharding (validate_rules.cpp, zero_stage_named).
  if (const auto stated = number_in(x.vocab, config::Numbers::kShardGroup, x.r.zero_fsdp); stated && p.zero_stage > 0) {
    const std::int64_t ranks = p.dp * p.cp;
    const auto group = static_cast<std::int64_t>(*stated);
    if (group > 1 && group < ranks && ranks % group == 0) {
      p.zero_shard_group = group;
      x.note("sharded within groups of " + str(group) + " of the " + str(ranks) +
             " data-parallel ranks, replicated across groups (stated shard degree)");
    }
  }
}

void read_sequence_parallelism(Reading& x) {
  const PublishedRun& r = x.r;
  auto& p = x.p;
  const auto sp = parse_yes_no(r.sequence_parallel, x.vocab);
  if (sp) {
    p.sequence_parallel = *sp && p.tp > 1;
  } else if (p.tp > 1 &&
             !x.fw.gives(config::FrameworkSetting::kSequenceParallel,
                         [](const parallel::ParallelPlan& v) { return !v.sequence_parallel; })) {
    // Tensor parallelism shards the norms' and dropouts' activations along the sequence
    // (Korthikanti et al. 2022) in the frameworks of the runs published since: Megatron-Core
    // and NeMo (TP communication overlap requires it, and their recipes enable it with
    // TP > 1), torchtitan (its TP plan puts SequenceParallel on the norms) and the 4D-parallel
    // training of Llama 3. Not where a framework the row names ran without it at the row's
    // date (its profile or era: Megatron-LM's legacy models, DeepSpeed and its forks, metaseq).
    p.sequence_parallel = true;
    x.note("sequence parallelism on (tp > 1 in a framework that shards activations with it)");
  } else if (p.tp > 1 && x.says(config::Words::kTpCommOverlap, r.notes)) {
    p.sequence_parallel = true;
    x.note("sequence parallelism on (--tp-comm-overlap requires it)");
  }
  if (x.model->moe && p.tp > 1 && !p.sequence_parallel) {
    p.sequence_parallel = true;
    x.note("sequence parallelism on (Megatron-Core requires it for MoE with tp > 1)");
  }
  if (p.sequence_parallel && p.tp > 1 && x.says(config::Words::kTpCommOverlap, r.notes + " " + r.framework)) {
    p.tp_comm_overlap = true;
    x.note("TP communication overlapped with GEMMs (--tp-comm-overlap)");
  }
}

void read_recompute(Reading& x) {
  const PublishedRun& r = x.r;
  auto& p = x.p;
  auto rc = parse_recompute(r.recompute, x.vocab);
  for (const auto& f : x.fw.named) {
    // The recompute a named framework's runs use unless told (its profile: XTuner's full).
    if (rc || !f.recompute) continue;
    rc = f.recompute;
    x.note("recompute " + std::string(config::name(*rc)) + " (" + f.recompute_source + ")");
  }
  x.out.recompute_given = rc.has_value();
  p.recompute = rc.value_or(parallel::Recompute::kNone);
  const std::string rtext = to_lower(r.recompute);
  if (p.recompute == parallel::Recompute::kSelective && x.fw.offers(parallel::Recompute::kSelectiveOp) &&
      !x.says(config::Words::kRecomputeLayerPolicy, rtext)) {
    // torchtitan's selective checkpointing of its Llama training configurations is the op
    // policy (train_configs/llama3_*.toml: selective_ac_option = "op"); "selective layer"
    // (every n-th layer checkpointed whole) is the other option.
    p.recompute = parallel::Recompute::kSelectiveOp;
    x.note("selective checkpointing by op policy (torchtitan's Llama configurations)");
  }
  if (p.recompute == parallel::Recompute::kNone || p.recompute == parallel::Recompute::kSelectiveOp) return;
  // Selective checkpointing of whole layers (a framework other than Megatron's, whose
  // "selective" recomputes the attention core in every layer): a row with both HFU and MFU
  // tells the share, as full recompute of a share f of the layers adds f/3 to the model
  // FLOPs (the forward again: 8N instead of 6N per token with every layer).
  std::optional<PartialRecompute> partial = parse_partial_recompute(rtext, x.vocab);
  if (!partial && p.recompute == parallel::Recompute::kSelective &&
      !x.fw.offers(parallel::Recompute::kSelective) && r.hfu_pct && r.mfu_pct && *r.mfu_pct > 0) {
    const double share = 3.0 * (*r.hfu_pct / *r.mfu_pct - 1.0);
    if (share >= 0.1 && share < 0.95) partial = PartialRecompute{0, share};
  }
  if (!partial) return;
  const std::int64_t chunks = p.pp * p.model_chunks();
  const std::int64_t chunk_layers = (x.model->num_layers + chunks - 1) / chunks;
  const std::int64_t n =
      partial->layers > 0
          ? partial->layers
          : std::max<std::int64_t>(1, std::llround(partial->share * static_cast<double>(chunk_layers)));
  p.recompute = parallel::Recompute::kFull;
  p.recompute_layers = n < chunk_layers ? n : 0;
  x.note("full recompute of " + (n < chunk_layers ? str(n) + " of the " + str(chunk_layers) : "all " + str(chunk_layers)) +
         " layers of each model chunk" +
         (partial->layers > 0 ? "" : " (share " + format_double("%.2f", partial->share) + ")"));
}

// A recipe's module recompute ("recompute_modules mla_up_proj, mlp" in a row's notes, as
// Megatron-Bridge's recipes and the ModelZoo scripts list them): selective recompute of those
// modules; an empty list ("recompute_modules []") recomputes nothing.
void read_recompute_modules(Reading& x) {
  const auto modules = recompute_modules_in(x.vocab, x.r.notes);
  if (!modules) return;
  auto& p = x.p;
  p.recompute = *modules == 0 ? parallel::Recompute::kNone : parallel::Recompute::kSelective;
  p.recompute_modules = *modules;
  p.recompute_layers = 0;
  x.out.recompute_given = true;
  x.note(*modules == 0 ? std::string("no recompute (recompute_modules [])")
                       : "selective recompute of " + config::recompute_modules_name(*modules) +
                             " (--recompute-modules)");
}

void read_optimizer_states(Reading& x) {
  // Megatron-Core's precision-aware optimizer with bf16 Adam moments ("exp_avg_dtype bf16").
  if (x.says(config::Words::kBf16Moments, x.r.notes) &&
      x.p.optimizer_states == parallel::OptimizerStates::kFp32) {
    x.p.optimizer_states = parallel::OptimizerStates::kFp32Bf16Moments;
    x.note("bf16 Adam moments, fp32 master weights (--optimizer-states fp32-bf16-moments)");
  }
  if (!x.says(config::Words::kPureBf16, x.r.precision)) return;
  // Pure 16-bit training: the parameters themselves are bf16, so a PyTorch optimizer keeps
  // its state in bf16 and there is no fp32 master copy. Plain SGD on pure bf16 parameters
  // keeps no optimizer state at all.
  const bool stateless = sgd_without_momentum(x.r, x.vocab);
  x.p.optimizer_states = stateless ? parallel::OptimizerStates::kNone : parallel::OptimizerStates::kBf16;
  x.note(stateless ? "no optimizer state (SGD without momentum on bf16 weights)"
                   : "bf16 optimizer states (pure bf16 parameters)");
}

// The loss: Transformer Engine's fused loss where the row's recipe selects it (Megatron-Bridge's
// performance recipes), in place on the bf16 logits as the flash-attention code's loss; else the
// loss of the named frameworks (their profiles): MPT's bf16 fused cross-entropy before PyTorch's
// on fp32 logits (Hugging Face, torchtitan) before the flash-attention training code's in-place one.
void read_loss(Reading& x) {
  if (x.says(config::Words::kCrossEntropyTe, x.r.source + " " + x.r.notes)) {
    x.p.cross_entropy = parallel::CrossEntropy::kBf16InPlace;
    x.note("cross-entropy bf16-inplace (the row's recipe: Transformer Engine's fused loss)");
    return;
  }
  for (const auto ce : {parallel::CrossEntropy::kBf16, parallel::CrossEntropy::kFp32Unfused,
                        parallel::CrossEntropy::kBf16InPlace}) {
    if (const auto* f = x.fw.giving(config::FrameworkSetting::kCrossEntropy,
                                    [&](const parallel::ParallelPlan& v) { return v.cross_entropy == ce; })) {
      x.p.cross_entropy = ce;
      x.note("cross-entropy " + std::string(config::name(ce)) + " (" + f->name + ")");
      return;
    }
  }
}

void read_loss_and_elementwise_ops(Reading& x) {
  read_loss(x);
  if (!eager_elementwise(x.r, x.fw)) return;
  x.p.elementwise = parallel::Elementwise::kEager;
  x.note(x.model->norm == ir::Norm::kLayerNorm
             ? "LayerNorm as PyTorch's native kernel (eager PyTorch, no torch.compile)"
             : "RMSNorm, rotary embedding and SwiGLU as eager PyTorch ops (no torch.compile)");
}

void read_precision(Reading& x) {
  // FP8 as Transformer Engine, torchao ("Float8") and the OCP formats (E4M3, E5M2) name it;
  // FP16 also as "float16" (not "bfloat16").
  auto& p = x.p;
  const auto names = [&](config::Words w) { return x.says(w, x.r.precision); };
  const auto& gpu = x.cluster->gpu;
  if (names(config::Words::kPrecisionNvfp4) && gpu.supports(ir::Dtype::kNvfp4)) {
    // NVFP4 (MLPerf Training v5.1 Blackwell submissions): block-scaled FP4 GEMMs.
    p.dtype = ir::Dtype::kNvfp4;
  } else if (names(config::Words::kPrecisionMxfp8) && gpu.supports(ir::Dtype::kMxfp8)) {
    p.dtype = ir::Dtype::kMxfp8;
  } else if (names(config::Words::kPrecisionFp8)) {
    p.dtype = ir::Dtype::kFp8;
    if (!x.fw.gives(config::FrameworkSetting::kFp8WeightCache,
                    [](const parallel::ParallelPlan& v) { return v.fp8_weight_cache; })) {
      // Megatron-Core and NeMo tell Transformer Engine which micro-batch is a step's first
      // (is_first_microbatch), which casts the FP8 weights once and reuses them (their
      // profiles); other frameworks (Composer's TE autocast, torchao's float8 in torchtitan)
      // cast them at every micro-batch.
      p.fp8_weight_cache = false;
      x.note("FP8 weights cast at every micro-batch (" + x.r.framework + ")");
    }
  } else if (names(config::Words::kPrecisionFp16) && !names(config::Words::kPrecisionBf16)) {
    p.dtype = ir::Dtype::kFp16;
  } else {
    p.dtype = ir::Dtype::kBf16;
  }
}

void read_gradient_reduction(Reading& x) { apply_gradient_reduction(x.r, x.fw, x.p, x.out.assumptions); }

void read_attention(Reading& x) {
  const std::string& gpu = x.cluster->gpu.name;
  if (!flash_attention(x.r, x.fw)) {
    x.p.flash_attention = false;
    x.note("attention core unfused (" + x.r.framework + " without FlashAttention)");
  } else if (const std::string k = attention_kernel(x.r, x.fw); !k.empty()) {
    const auto known = calibrated_attention_kernels(gpu, x.calibrations);
    if (known.count(k) > 0) {
      x.p.attention_kernel = k;
      x.note("attention kernel " + k);
    } else if (known.count("FlashAttention-2") > 0) {
      x.p.attention_kernel = "FlashAttention-2";
      x.note("attention kernel FlashAttention-2 (" + k + " is not calibrated for " + gpu + ")");
    }
  }
}

void read_overrides(Reading& x) {
  // What the row's source states outside the CSV's columns (FILE.overrides.textproto), over
  // every rule.
  for (const auto& o : x.r.overrides) {
    o.apply(x.p, x.cluster->cluster);
    x.note("override: " + o.reason + " (" + o.source + ")");
  }
}

// The steps in order (a step may read what an earlier one set); the overrides come last.
struct Step {
  const char* name;
  void (*read)(Reading&);
};
const Step kSteps[] = {
    {"model", read_model},
    {"cluster", read_cluster},
    {"parallel degrees", read_parallel_degrees},
    {"experts", read_experts},
    {"pipeline stages", read_pipeline_stages},
    {"data parallelism", read_data_parallelism},
    {"placement", read_placement},
    {"batch", read_batch},
    {"sharding", read_sharding},
    {"sequence parallelism", read_sequence_parallelism},
    {"recompute", read_recompute},
    {"recompute modules", read_recompute_modules},
    {"optimizer states", read_optimizer_states},
    {"loss and elementwise ops", read_loss_and_elementwise_ops},
    {"precision", read_precision},
    {"gradient reduction", read_gradient_reduction},
    {"attention", read_attention},
    {"overrides", read_overrides},
};

}  // namespace

RowMapping map_run(const PublishedRun& r) {
  config::ComputeModelCache calibrations;
  return map_run(r, calibrations, config::load_all_frameworks(), config::load_reading_vocabulary());
}

RowMapping map_run(const PublishedRun& r, config::ComputeModelCache& calibrations,
                   const std::vector<config::FrameworkProfile>& frameworks,
                   const config::ReadingVocabulary& vocabulary) {
  RowMapping out;
  out.frameworks = std::make_shared<const RowFrameworks>(named_frameworks(r, frameworks, vocabulary));
  out.recompute_modes = out.frameworks->recompute_modes();
  Reading x{r, *out.frameworks, vocabulary, calibrations, out};
  for (const Step& step : kSteps) {
    step.read(x);
    if (!out.skip_reason.empty()) return out;
  }
  // Parts only: validated (config::make_scenario) for each candidate of the search.
  out.scenario = config::Scenario{std::move(*x.model), std::move(*x.cluster), static_cast<std::int32_t>(x.gpus), x.p};
  return out;
}

void restage(const PublishedRun& r, const RowMapping& m, int zero_stage, config::Scenario& sc,
             std::vector<std::string>& notes) {
  sc.plan.zero_stage = zero_stage;
  apply_gradient_reduction(r, *m.frameworks, sc.plan, notes);
  // The row's overrides still come last (their notes are in the row's assumptions already).
  for (const auto& o : r.overrides) o.apply(sc.plan, sc.cluster.cluster);
}

}  // namespace ts::driver
