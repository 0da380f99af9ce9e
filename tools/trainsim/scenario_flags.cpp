#include "tools/trainsim/scenario_flags.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "sim/base/diagnostic.h"
#include "sim/config/names.h"
#include "sim/driver/sweep.h"

namespace po = boost::program_options;

namespace ts::cli {

namespace {

// Whether `name` was given on the command line (not only its default).
bool flag_given(const po::variables_map& vm, const char* name) {
  if (vm.count(name) == 0 || vm[name].defaulted()) return false;
  // Switches are "given" only when set (bool_switch has a default of false).
  if (const bool* b = boost::any_cast<bool>(&vm[name].value())) return *b;
  return true;
}

// The flag that sets `s` when it was given, else nullptr.
const char* given_flag(const po::variables_map& vm, config::FrameworkSetting s) {
  using S = config::FrameworkSetting;
  const auto one = [&](const char* name) { return flag_given(vm, name) ? name : nullptr; };
  switch (s) {
    case S::kZeroStage: return one("zero");
    case S::kZeroShardGroup: return one("zero-shard-group");
    case S::kSequenceParallel: return one("sequence-parallel");
    case S::kAttention: return flag_given(vm, "unfused-attention") ? "unfused-attention" : one("attention-kernel");
    case S::kCrossEntropy: return one("cross-entropy");
    case S::kElementwise: return one("elementwise");
    case S::kGradReduce: return one("grad-reduce");
    case S::kOverlapGradReduce: return one("no-overlap-grad-reduce");
    case S::kOverlapParamGather: return one("no-overlap-param-gather");
    case S::kGradBucketParams: return one("grad-bucket-params");
    case S::kFp8WeightCache: return one("no-fp8-weight-cache");
    case S::kTpCommOverlap: return one("tp-comm-overlap");
    case S::kHostDispatch: return one("host-dispatch-us");
    case S::kOrder: return one("order");
  }
  return nullptr;
}

// "on"/"off" (also yes/no, true/false) of a switch that takes a value, else InputError.
bool on_off(const std::string& text, const char* flag) {
  if (text == "on" || text == "yes" || text == "true") return true;
  if (text == "off" || text == "no" || text == "false") return false;
  throw InputError(Diagnostic{"", 0, std::string("--") + flag, "expected on or off (got '" + text + "')"});
}

// --pp-layers balanced: the split sweep --pp-split balanced gives this plan's (virtual) stages
// (driver::balanced_split); empty where it comes out even.
std::vector<std::int64_t> balanced_pp_layers(const ir::ModelSpec& model, const compute::GpuSpec& gpu,
                                             const parallel::ParallelPlan& plan) {
  const std::int64_t chunks = plan.model_chunks();
  if (plan.pp < 1 || chunks < 1 || model.num_layers < 1) return {};  // check_plan says what is wrong
  // More stages than layers is refused before pp·chunks is formed (it may overflow).
  std::optional<std::vector<std::int64_t>> split;
  if (plan.pp <= model.num_layers / chunks) {
    split = driver::balanced_split(model, plan.pp * chunks, driver::end_stage_costs(model, gpu, plan));
  }
  if (!split) {
    throw InputError(Diagnostic{"", 0, "--pp-layers",
                                "balanced needs a layer per pipeline stage (pp " + std::to_string(plan.pp) + " × " +
                                    std::to_string(chunks) + " chunks for " + std::to_string(model.num_layers) +
                                    " layers)"});
  }
  return *split;
}

}  // namespace

std::optional<config::FrameworkProfile> framework_from_flags(const po::variables_map& vm) {
  if (vm.count("framework") == 0) return std::nullopt;
  return config::load_framework(vm["framework"].as<std::string>(), "--framework");
}

void apply_framework(const po::variables_map& vm, const config::FrameworkProfile& profile,
                     parallel::ParallelPlan& plan) {
  using S = config::FrameworkSetting;
  for (const auto& g : profile.given) {
    if (given_flag(vm, g.setting) != nullptr) continue;
    config::copy_setting(g.setting, profile.values, plan);
    if (g.setting == S::kSequenceParallel) plan.sequence_parallel = plan.sequence_parallel && plan.tp > 1;
  }
  if (profile.source_of(S::kTpCommOverlap) != nullptr && given_flag(vm, S::kTpCommOverlap) == nullptr) {
    plan.tp_comm_overlap = plan.tp_comm_overlap && plan.sequence_parallel && plan.tp > 1;
  }
  if (profile.recompute && !flag_given(vm, "recompute")) plan.recompute = *profile.recompute;
}

void apply_framework(const po::variables_map& vm, const config::FrameworkProfile& profile, driver::SweepAxes& axes) {
  using S = config::FrameworkSetting;
  const auto& v = profile.values;
  if (profile.source_of(S::kZeroStage) && !flag_given(vm, "zero")) axes.zero = {v.zero_stage};
  if (profile.source_of(S::kZeroShardGroup) && !flag_given(vm, "zero-shard-group")) {
    axes.zero_shard_group = {v.zero_shard_group};
  }
  if (profile.source_of(S::kSequenceParallel) && !flag_given(vm, "sequence-parallel")) {
    axes.sequence_parallel = {v.sequence_parallel};
  }
  if (!profile.recompute_modes.empty() && !flag_given(vm, "recompute")) {
    axes.recompute = profile.recompute_modes;
    std::sort(axes.recompute.begin(), axes.recompute.end());
  }
  axes.pipeline_zero_stage_max = profile.pipeline_zero_stage_max;
}

std::vector<SettingInEffect> settings_in_effect(const po::variables_map& vm, const config::FrameworkProfile& profile,
                                                const parallel::ParallelPlan& plan) {
  std::vector<SettingInEffect> out;
  for (int i = 0; i < config::kNumFrameworkSettings; ++i) {
    const auto s = static_cast<config::FrameworkSetting>(i);
    SettingInEffect e;
    e.name = std::string(config::setting_name(s));
    e.value = config::setting_value(s, plan);
    if (const char* flag = given_flag(vm, s)) {
      e.origin = std::string("flag --") + flag;
    } else if (const std::string* src = profile.source_of(s)) {
      e.origin = "framework " + profile.name;
      // Sequence parallelism and TP overlap from a profile need tp > 1 (and the overlap, SP).
      if (e.value != config::setting_value(s, profile.values)) {
        e.origin += s == config::FrameworkSetting::kSequenceParallel ? " (needs tp > 1)"
                                                                     : " (needs tp > 1 and sequence parallelism)";
      }
      e.source = *src;
    } else {
      e.origin = "default";
    }
    out.push_back(std::move(e));
  }
  SettingInEffect rc;
  rc.name = "recompute";
  rc.value = std::string(config::name(plan.recompute));
  rc.origin = flag_given(vm, "recompute") ? "flag --recompute"
              : profile.recompute         ? "framework " + profile.name
                                          : "default";
  if (profile.recompute && !flag_given(vm, "recompute")) {
    rc.source = profile.recompute_source;
  } else if (!profile.recompute_modes.empty()) {
    std::string modes;
    for (auto m : profile.recompute_modes) modes += (modes.empty() ? "" : ", ") + std::string(config::name(m));
    rc.source = profile.name + " offers " + modes + ": " + profile.recompute_modes_source;
  }
  out.push_back(std::move(rc));
  return out;
}

std::string settings_text(const config::FrameworkProfile& profile, const std::vector<SettingInEffect>& settings) {
  std::string out = "\nsettings in effect (framework " + profile.name + ", " + profile.title + ": " + profile.file + ")\n";
  std::size_t name_w = 0, value_w = 0, origin_w = 0;
  for (const auto& s : settings) {
    name_w = std::max(name_w, s.name.size());
    value_w = std::max(value_w, s.value.size());
    origin_w = std::max(origin_w, s.origin.size());
  }
  for (const auto& s : settings) {
    std::string line = "  " + s.name + std::string(name_w - s.name.size() + 2, ' ') + s.value +
                       std::string(value_w - s.value.size() + 2, ' ') + s.origin;
    if (!s.source.empty()) line += std::string(origin_w - s.origin.size() + 2, ' ') + s.source;
    out += line + "\n";
  }
  return out;
}

void add_fixed_plan_flags(po::options_description& o) {
  o.add_options()(
      "framework", po::value<std::string>(),
      "framework profile (frameworks/NAME.textproto: megatron-lm, nemo, torchtitan, deepspeed, "
      "megatron-deepspeed, fsdp, composer, hf-trainer, xtuner, …, or a path; NAME@YYYY-MM: as of "
      "that month): its defaults for the settings whose flags are not given")(
      "grad-bucket-params",
      po::value<std::int64_t>()->default_value(parallel::ParallelPlan{}.grad_bucket_params),
      "parameters per data-parallel gradient bucket (1: one bucket per layer, as FSDP's units)")(
      "model", po::value<std::string>()->required(), "model: zoo name (llama3-70b) or file path")(
      "cluster", po::value<std::string>()->required(), "cluster: zoo name (dgx-h100) or file path")(
      "gpus", po::value<std::int64_t>()->required(), "number of GPUs")(
      "global-batch", po::value<std::int64_t>()->required(), "sequences per iteration")(
      "seq", po::value<std::int64_t>()->default_value(2048), "sequence length (tokens)")(
      "dtype", po::value<std::string>()->default_value("bf16"),
      "GEMM precision: bf16, fp16, fp8, mxfp8 or nvfp4 (Blackwell)")(
      "order", po::value<std::string>()->default_value("tp,cp,dp,pp"),
      "rank order, innermost first")(
      "gpus-per-domain", po::value<std::int64_t>(),
      "GPUs of each NVLink domain the job uses (64 of an NVL72 rack's 72, as a Slurm segment of "
      "16 trays places it); default: the cluster's")(
      "optimizer-states", po::value<std::string>()->default_value("fp32"),
      "fp32 (mixed-precision Adam), bf16 (pure bf16 Adam), none (SGD without momentum on bf16 "
      "weights) or fp32-bf16-moments (fp32 master weights, bf16 Adam m and v: Megatron-Core's "
      "precision-aware optimizer)")("grad-reduce", po::value<std::string>()->default_value("fp32"),
                  "data-parallel gradient reduction precision: fp32 or bf16")(
      "elementwise", po::value<std::string>()->default_value("fused"),
      "norms, rotary embedding and SwiGLU: fused (one kernel each) or eager (PyTorch's op-by-op "
      "composition and its native LayerNorm, as torchtitan without torch.compile, HuggingFace "
      "models and llm-foundry)")("optimizer-in-backward", po::bool_switch(),
                                 "apply the optimizer per parameter during backward")(
      "unfused-attention", po::bool_switch(),
      "attention core as separate kernels (QK^T, softmax, dropout, ·V), not FlashAttention")(
      "attention-kernel", po::value<std::string>()->default_value(""),
      "calibrated attention kernel, e.g. FlashAttention-2 (default: the GPU's)")(
      "tp-comm-overlap", po::value<std::string>()->default_value("off")->implicit_value("on"),
      "overlap TP all-gathers/reduce-scatters with their GEMMs (with sequence parallelism); "
      "--tp-comm-overlap=off against a framework profile")(
      "host-dispatch-us",
      po::value<double>()->default_value(parallel::ParallelPlan{}.host_dispatch.us()),
      "host time per modeled operation of an eager framework (microseconds); no operation runs "
      "faster; "
      "0 for CUDA graphs or a compiled step")(
      "fp8-attention", po::bool_switch(),
      "FP8 recipes: run the fused attention kernel in FP8 (Transformer Engine's "
      "fp8_dot_product_attention); default bf16")(
      "launch-blocking", po::bool_switch(),
      "the run exports CUDA_LAUNCH_BLOCKING=1: the host time per operation adds to each kernel's "
      "instead of overlapping it")(
      "no-overlap-grad-reduce", po::bool_switch(),
      "reduce gradients after the backward, not in buckets during it")(
      "no-overlap-param-gather", po::bool_switch(),
      "ZeRO 1/2: gather parameters after the step, not during the next forward")(
      "no-fp8-weight-cache", po::bool_switch(),
      "FP8: cast weights at every micro-batch, not once per step (TE without is_first_microbatch)")(
      "moe-a2a-overlap", po::bool_switch(),
      "MoE: run each forward beside another micro-batch's backward, interleaved at the expert "
      "all-to-alls (Megatron-Core --overlap-moe-expert-parallel-comm; needs --ep > 1 and --pp 1, "
      "interleaved with --vpp > 1 or dualpipev; a sweep applies it where it can)");
  add_moe_token_flags(o);
}

void add_moe_token_flags(po::options_description& o) {
  o.add_options()(
      "routing", po::value<std::string>()->default_value("balanced"),
      "MoE token load: balanced, dropless (with --moe-imbalance) or capacity:F")(
      "moe-imbalance", po::value<double>()->default_value(1.0),
      "tokens of the most loaded EP rank over the mean (dropless and capacity routing)")(
      "moe-dispatcher", po::value<std::string>()->default_value("alltoall"),
      "MoE token dispatch: alltoall (NCCL), deepep or hybridep (a token once per rank that holds "
      "its experts, once per node over the network and forwarded over NVLink)");
}

void read_moe_token_flags(const po::variables_map& vm, parallel::ParallelPlan& p, DiagnosticList& problems) {
  p.moe_imbalance = vm["moe-imbalance"].as<double>();
  problems.collect([&] {
    p.moe_dispatcher = config::parse_moe_dispatcher(vm["moe-dispatcher"].as<std::string>(), "--moe-dispatcher");
  });
  problems.collect([&] {
    const auto r = config::parse_routing(vm["routing"].as<std::string>(), "--routing");
    p.routing = r.routing;
    p.capacity_factor = r.capacity_factor;
  });
}

FixedPlanFlags read_fixed_plan_flags(const po::variables_map& vm, parallel::ParallelPlan& p, DiagnosticList& problems) {
  FixedPlanFlags out;
  // Files first: their problems carry file and line.
  problems.collect([&] { out.model = config::load_model(vm["model"].as<std::string>()); });
  problems.collect([&] { out.cluster = config::load_cluster(vm["cluster"].as<std::string>()); });
  if (vm.count("gpus-per-domain") && out.cluster) {
    const std::string why =
        config::place_per_domain(out.cluster->cluster, vm["gpus-per-domain"].as<std::int64_t>());
    if (!why.empty()) problems.add({"", 0, "--gpus-per-domain", why});
  }
  out.gpus = vm["gpus"].as<std::int64_t>();
  if (out.gpus <= 0 || out.gpus > config::kMaxGpus) {
    problems.add({"", 0, "--gpus", "must be between 1 and 2^30, got " + std::to_string(out.gpus)});
  }
  p.global_batch = vm["global-batch"].as<std::int64_t>();
  p.seq_len = vm["seq"].as<std::int64_t>();
  p.optimizer_in_backward = vm["optimizer-in-backward"].as<bool>();
  p.flash_attention = !vm["unfused-attention"].as<bool>();
  p.attention_kernel = vm["attention-kernel"].as<std::string>();
  problems.collect([&] { p.tp_comm_overlap = on_off(vm["tp-comm-overlap"].as<std::string>(), "tp-comm-overlap"); });
  p.grad_bucket_params = vm["grad-bucket-params"].as<std::int64_t>();
  if (p.grad_bucket_params < 1) {
    problems.add({"", 0, "--grad-bucket-params", "must be >= 1 (got " + std::to_string(p.grad_bucket_params) + ")"});
  }
  p.overlap_grad_reduce = !vm["no-overlap-grad-reduce"].as<bool>();
  p.overlap_param_gather = !vm["no-overlap-param-gather"].as<bool>();
  p.fp8_weight_cache = !vm["no-fp8-weight-cache"].as<bool>();
  p.moe_a2a_overlap = vm["moe-a2a-overlap"].as<bool>();
  read_moe_token_flags(vm, p, problems);
  p.launch_blocking = vm["launch-blocking"].as<bool>();
  p.fp8_attention = vm["fp8-attention"].as<bool>();
  problems.collect([&] {
    p.host_dispatch = config::parse_host_dispatch_us(vm["host-dispatch-us"].as<double>(), "--host-dispatch-us");
  });
  problems.collect([&] { p.dtype = config::parse_dtype(vm["dtype"].as<std::string>(), "--dtype"); });
  problems.collect([&] { p.order = config::parse_order(vm["order"].as<std::string>(), "--order"); });
  problems.collect([&] {
    p.optimizer_states = config::parse_optimizer_states(vm["optimizer-states"].as<std::string>(), "--optimizer-states");
  });
  problems.collect([&] {
    p.grad_reduce = config::parse_grad_reduce(vm["grad-reduce"].as<std::string>(), "--grad-reduce");
  });
  problems.collect([&] {
    p.elementwise = config::parse_elementwise(vm["elementwise"].as<std::string>(), "--elementwise");
  });
  return out;
}

void add_scenario_flags(po::options_description& o) {
  add_fixed_plan_flags(o);
  o.add_options()
      ("tp", po::value<std::int64_t>()->default_value(1), "tensor-parallel degree")
      ("pp", po::value<std::int64_t>()->default_value(1), "pipeline-parallel degree")
      ("dp", po::value<std::int64_t>(), "data-parallel degree (default: gpus / (tp·pp·cp))")
      ("cp", po::value<std::int64_t>()->default_value(1), "context-parallel degree")
      ("vpp", po::value<std::int64_t>()->default_value(1),
       "virtual pipeline stages per rank (model chunks; > 1 implies --schedule interleaved unless "
       "--schedule is given)")
      ("micro-batch", po::value<std::int64_t>()->default_value(1), "sequences per micro-batch")
      ("zero", po::value<int>()->default_value(0), "ZeRO stage 0-3 (1 = distributed optimizer)")
      ("zero-shard-group", po::value<std::int64_t>()->default_value(0),
       "ZeRO-3 sharding within groups of N data-parallel ranks, replicated across them (FSDP HYBRID_SHARD); 0: all")
      ("sequence-parallel", po::value<std::string>()->default_value("off")->implicit_value("on"),
       "Megatron sequence parallelism with TP; --sequence-parallel=off against a framework profile")
      ("recompute", po::value<std::string>()->default_value("none"), "none, selective, selective-op or full")
      ("recompute-modules", po::value<std::string>(),
       "modules selective recompute reruns (Megatron-Core --recompute-modules): core_attn, layernorm, "
       "moe_act, mla_up_proj, mlp (dense MLPs); implies --recompute selective; default core_attn")
      ("recompute-layers", po::value<std::int64_t>()->default_value(0),
       "full recompute of only the first N layers of each model chunk (Megatron's block method); 0: all")
      ("schedule", po::value<std::string>()->default_value("1f1b"), "gpipe, 1f1b, interleaved, zb-h1, dualpipev or zb-v")
      ("pp-layers", po::value<std::string>(),
       "layers per pipeline stage, e.g. 15,16,16,15; balanced: the split sweep --pp-split balanced "
       "gives (any pp·vpp up to the layers, by the cost of a layer, the embedding and the LM head)")
      ("pp-layout", po::value<std::string>(),
       "Megatron-style layout of the (virtual) stages, e.g. Et|(tt|)*30tL: E embedding, t layer, "
       "m MTP layer, L loss, | between stages")
      ("cp-algo", po::value<std::string>()->default_value("ring"), "ring, allgather or ulysses")
      ("mst-chunks", po::value<std::int64_t>()->default_value(1), "Mini-Sequence Transformer chunks")
      ("ep", po::value<std::int64_t>()->default_value(1),
       "expert-parallel degree (MoE models; folded over the tp·cp·dp ranks of a stage)")
      ("etp", po::value<std::int64_t>()->default_value(1), "expert tensor-parallel degree (MoE models)")
      ("cross-entropy", po::value<std::string>()->default_value("fp32"),
       "loss on the logits: fp32 (Megatron's fused upcast), bf16, bf16-inplace (gradient written into the "
       "logits) or fp32-unfused (PyTorch cross_entropy on upcast logits, as HuggingFace)");
}

config::Scenario scenario_from_flags(const po::variables_map& vm) {
  DiagnosticList problems;
  config::Scenario sc;
  auto& p = sc.plan;
  auto fixed = read_fixed_plan_flags(vm, p, problems);
  const std::int64_t gpus = fixed.gpus;
  p.tp = vm["tp"].as<std::int64_t>();
  p.pp = vm["pp"].as<std::int64_t>();
  p.cp = vm["cp"].as<std::int64_t>();
  p.vpp = vm["vpp"].as<std::int64_t>();
  p.micro_batch = vm["micro-batch"].as<std::int64_t>();
  p.zero_stage = vm["zero"].as<int>();
  problems.collect([&] {
    p.sequence_parallel = on_off(vm["sequence-parallel"].as<std::string>(), "sequence-parallel");
  });
  p.mst_chunks = vm["mst-chunks"].as<std::int64_t>();
  p.recompute_layers = vm["recompute-layers"].as<std::int64_t>();
  p.zero_shard_group = vm["zero-shard-group"].as<std::int64_t>();
  p.ep = vm["ep"].as<std::int64_t>();
  p.etp = vm["etp"].as<std::int64_t>();
  if (vm.count("dp")) {
    p.dp = vm["dp"].as<std::int64_t>();
  } else {
    // When --gpus is not a multiple of tp·pp·cp, the plan check reports the mismatch.
    const std::int64_t mp = p.tp * p.pp * p.cp;
    p.dp = mp > 0 ? std::max<std::int64_t>(1, gpus / mp) : 1;
  }
  problems.collect([&] { p.recompute = config::parse_recompute(vm["recompute"].as<std::string>(), "--recompute"); });
  if (vm.count("recompute-modules")) {
    problems.collect([&] {
      p.recompute_modules =
          config::parse_recompute_modules(vm["recompute-modules"].as<std::string>(), "--recompute-modules");
      if (flag_given(vm, "recompute") && p.recompute != parallel::Recompute::kSelective) {
        throw InputError(Diagnostic{"", 0, "--recompute-modules", "needs --recompute selective (or no --recompute)"});
      }
      p.recompute = parallel::Recompute::kSelective;
    });
  }
  problems.collect([&] { p.schedule = config::parse_schedule(vm["schedule"].as<std::string>(), "--schedule"); });
  // Model chunks per rank ask for the interleaved schedule, as Megatron's
  // --num-layers-per-virtual-pipeline-stage does, unless a schedule is named.
  if (p.vpp > 1 && !flag_given(vm, "schedule")) p.schedule = parallel::Schedule::kInterleaved;
  problems.collect([&] { p.cp_algo = config::parse_cp_algo(vm["cp-algo"].as<std::string>(), "--cp-algo"); });
  problems.collect([&] {
    p.cross_entropy = config::parse_cross_entropy(vm["cross-entropy"].as<std::string>(), "--cross-entropy");
  });
  if (vm.count("pp-layout")) p.pp_layout = vm["pp-layout"].as<std::string>();
  const bool balanced_layers = vm.count("pp-layers") && vm["pp-layers"].as<std::string>() == "balanced";
  if (vm.count("pp-layers") && !balanced_layers) {
    problems.collect([&] { p.pp_layers = config::parse_int_list(vm["pp-layers"].as<std::string>(), "--pp-layers"); });
  }
  std::optional<bool> dropout;  // the profile's, for the model
  problems.collect([&] {
    if (const auto profile = framework_from_flags(vm)) {
      apply_framework(vm, *profile, p);
      dropout = profile->dropout;
      if (const std::string why = profile->refuses(p); !why.empty()) problems.add({"", 0, "--zero", why});
    }
  });
  sc.num_gpus = static_cast<std::int32_t>(gpus > 0 && gpus <= config::kMaxGpus ? gpus : 1);
  if (balanced_layers && fixed.model && fixed.cluster) {
    problems.collect([&] { p.pp_layers = balanced_pp_layers(*fixed.model, fixed.cluster->gpu, p); });
  }
  if (fixed.model && fixed.cluster) {
    for (auto& d : config::check_plan(p, *fixed.model, *fixed.cluster, gpus)) problems.add(std::move(d));
  }
  problems.throw_if_any();
  sc.model = std::move(*fixed.model);
  if (dropout) sc.model.dropout = *dropout;
  sc.cluster = std::move(*fixed.cluster);
  return sc;
}

}  // namespace ts::cli
