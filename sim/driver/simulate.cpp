#include "sim/driver/simulate.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "sim/base/diagnostic.h"
#include "sim/base/hash.h"
#include "sim/compute/compute_model.h"
#include "sim/memory/footprint.h"
#include "sim/memory/transients.h"
#include "sim/network/network_model.h"
#include "sim/parallel/lowering.h"
#include "sim/runtime/block_replay.h"
#include "sim/runtime/executor.h"
#include "sim/trace/chrome_trace.h"

namespace ts::driver {

const char* status_name(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kOutOfMemory: return "oom";
    case Status::kUnsupported: return "unsupported";
  }
  return "?";
}

namespace {

// What a rank of `stage` holds whatever it computes: weights, gradients, optimizer states, and
// the CUDA context and NCCL buffers. `layers`: parallel::stage_layers of the plan.
MemoryBreakdown static_memory(const config::Scenario& sc, const compute::MemoryOverheads& overheads,
                              const std::vector<std::int64_t>& layers, std::int64_t stage) {
  const memory::StaticFootprint fp =
      memory::static_footprint(sc.model, sc.plan, stage, layers[static_cast<std::size_t>(stage)]);
  MemoryBreakdown m;
  m.weights = fp.weights;
  m.gradients = fp.gradients;
  m.optimizer_states = fp.optimizer_states + fp.master_weights;
  m.cuda_context = overheads.cuda_context;
  m.nccl_buffers = overheads.nccl_buffers_per_communicator * memory::nccl_communicators(sc.plan);
  return m;
}

// Adds the activations at a device's peak, with the allocator's reserve over them.
void set_activations(MemoryBreakdown& m, Bytes activations, const compute::MemoryOverheads& overheads) {
  m.activations = activations;
  m.fragmentation = memory::fragmentation_reserve(activations, overheads.allocator_fragmentation);
}

std::string describe(const config::Scenario& sc) {
  const auto& p = sc.plan;
  return sc.model.name + " on " + std::to_string(sc.num_gpus) + "× " + sc.cluster.gpu.name +
         " tp" + std::to_string(p.tp) + " pp" + std::to_string(p.pp) + " dp" + std::to_string(p.dp) +
         " cp" + std::to_string(p.cp);
}

// The memory model's activation options for the scenario's model and attention kernel.
memory::ActivationOptions activation_options(const config::Scenario& sc) {
  memory::ActivationOptions ao = memory::default_activation_options(sc.model);
  ao.flash_attention = sc.plan.flash_attention;
  return ao;
}

// A mixture of experts' dense layers (DeepSeek-V3's first three: a dense MLP of ffn_hidden in
// place of the experts): the model without its experts, whose activation formulas and module
// recompute (`mlp` applies to them) are a dense layer's.
ir::ModelSpec dense_layers_model(const ir::ModelSpec& model) {
  ir::ModelSpec dense = model;
  dense.moe.reset();
  return dense;
}

parallel::LoweringOptions lowering_options(const config::Scenario& sc, bool full) {
  const auto& plan = sc.plan;
  parallel::LoweringOptions lo;
  lo.full = full;
  const memory::ActivationOptions ao = activation_options(sc);
  const memory::LayerActivations act = memory::layer_activations(sc.model, plan, ao);
  lo.layer_kept = act.kept;
  lo.layer_rematerialized = act.rematerialized;
  if (plan.recompute_layers > 0) lo.layer_kept_whole = memory::whole_layer_activation_bytes(sc.model, plan, ao);
  lo.dense_layer_kept = lo.layer_kept;
  lo.dense_layer_rematerialized = lo.layer_rematerialized;
  lo.dense_layer_kept_whole = lo.layer_kept_whole;
  if (sc.model.moe && sc.model.moe->dense_layers > 0) {
    const ir::ModelSpec dense = dense_layers_model(sc.model);
    const memory::LayerActivations d = memory::layer_activations(dense, plan, ao);
    lo.dense_layer_kept = d.kept;
    lo.dense_layer_rematerialized = d.rematerialized;
    if (plan.recompute_layers > 0) lo.dense_layer_kept_whole = memory::whole_layer_activation_bytes(dense, plan, ao);
  }
  lo.head_transient = memory::lm_head_logits_bytes(sc.model, plan);
  lo.optimizer_bytes_per_param = memory::optimizer_step_bytes_per_parameter(plan);
  return lo;
}

}  // namespace

ReplayMemo::Key ReplayMemo::key(const parallel::ParallelPlan& plan, const parallel::LoweringOptions& lowering,
                                bool only_critical_breakdown) {
  Key k{plan, lowering, only_critical_breakdown};
  if (k.plan.zero_stage == 2) k.plan.zero_stage = 1;
  return k;
}

std::uint64_t ReplayMemo::bucket(const Key& key) {
  const auto& p = key.plan;
  std::uint64_t h = kFnvOffset;
  for (std::int64_t v : {p.tp, p.pp, p.dp, p.cp, p.vpp, p.micro_batch, p.mst_chunks, std::int64_t{p.zero_stage},
                         static_cast<std::int64_t>(p.schedule), static_cast<std::int64_t>(p.recompute), p.recompute_layers, p.zero_shard_group,
                         static_cast<std::int64_t>(p.cp_algo), static_cast<std::int64_t>(p.sequence_parallel)}) {
    h = fnv_mix(h, static_cast<std::uint64_t>(v));
  }
  return h;
}

std::shared_ptr<const MemoizedReplay> ReplayMemo::find(const Key& key) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [first, last] = replays_.equal_range(bucket(key));
  for (auto it = first; it != last; ++it) {
    if (it->second.first == key) return it->second.second;
  }
  return nullptr;
}

void ReplayMemo::add(const Key& key, std::shared_ptr<const MemoizedReplay> replay) {
  std::lock_guard<std::mutex> lock(mutex_);
  replays_.emplace(bucket(key), std::make_pair(key, std::move(replay)));
}

InspectResult inspect(const config::Scenario& sc, bool full) {
  InspectResult r;
  r.parameters = ir::parameter_count(sc.model);
  r.model_flops = ir::model_flops(sc.model, sc.plan.seq_len,
                                  static_cast<double>(sc.plan.global_batch * sc.plan.seq_len)).value();
  r.active_parameters = ir::active_parameter_count(sc.model);
  r.mtp_parameters = ir::mtp_parameter_count(sc.model);
  r.model_flops_per_token = ir::model_flops(sc.model, sc.plan.seq_len, 1.0).value();
  const auto lo = lowering_options(sc, full);
  r.layer_activation = lo.layer_kept;
  const auto layers = parallel::stage_layers(sc.plan, sc.model);
  Resources resources;
  const compute::MemoryOverheads& overheads = resources.memory_overheads(sc.cluster.gpu);
  const memory::ActivationOptions ao = activation_options(sc);
  const std::int64_t chunks = sc.plan.model_chunks();
  for (std::int64_t s = 0; s < sc.plan.pp; ++s) {
    MemoryBreakdown m = static_memory(sc, overheads, layers, s);
    const double chunk_layers = static_cast<double>(layers[static_cast<std::size_t>(s)]) / static_cast<double>(chunks);
    set_activations(m, memory::chunk_activation_bytes(sc.model, sc.plan, chunk_layers, ao) * chunks, overheads);
    r.stage_static_memory.push_back(m);
  }
  r.micro_batches = sc.plan.num_micro_batches();
  const auto graph = parallel::lower(sc.model, sc.plan, lo);
  r.tasks = static_cast<std::int64_t>(graph.tasks.size());
  r.simulated_devices = static_cast<std::int64_t>(graph.devices.size());
  return r;
}

std::vector<MemoryBreakdown> static_stage_memory(const config::Scenario& sc, Resources& resources) {
  const compute::MemoryOverheads& overheads = resources.memory_overheads(sc.cluster.gpu);
  const auto layers = parallel::stage_layers(sc.plan, sc.model);
  std::vector<MemoryBreakdown> out;
  out.reserve(static_cast<std::size_t>(sc.plan.pp));
  for (std::int64_t s = 0; s < sc.plan.pp; ++s) out.push_back(static_memory(sc, overheads, layers, s));
  return out;
}

MemoryBreakdown static_peak_memory(const config::Scenario& sc, Resources& resources) {
  MemoryBreakdown peak;
  for (const MemoryBreakdown& m : static_stage_memory(sc, resources)) {
    if (m.total() > peak.total()) peak = m;
  }
  return peak;
}

Bytes kept_layer_activations(const config::Scenario& sc) {
  const parallel::LoweringOptions lo = lowering_options(sc, false);
  return std::min(lo.layer_kept, lo.dense_layer_kept);
}

RunResult simulate(const config::Scenario& sc, const RunOptions& options) {
  Resources resources;
  return simulate(sc, options, resources);
}

RunResult simulate(const config::Scenario& sc, const RunOptions& options, Resources& resources) {
  const auto& plan = sc.plan;
  RunResult r;
  r.parameters = ir::parameter_count(sc.model);
  const double tokens = static_cast<double>(plan.global_batch * plan.seq_len);
  r.model_flops = ir::model_flops(sc.model, plan.seq_len, tokens).value();
  r.memory_capacity = sc.cluster.gpu.memory_capacity;

  // Static memory first: a plan whose weights and optimizer states alone overflow the GPU is
  // rejected without a replay.
  const compute::MemoryOverheads& overheads = resources.memory_overheads(sc.cluster.gpu);
  const auto layers = parallel::stage_layers(plan, sc.model);
  r.memory = static_peak_memory(sc, resources);
  r.peak_memory = r.memory.total();
  r.within_fit = r.peak_memory.real() <= options.fit * r.memory_capacity.real();
  if (r.peak_memory > r.memory_capacity) {
    r.status = Status::kOutOfMemory;
    r.reason = "weights, gradients, optimizer states, CUDA context and NCCL buffers need " +
               std::to_string(r.peak_memory.in_gib()) + " GiB per GPU, more than the " +
               std::to_string(r.memory_capacity.in_gib()) + " GiB available";
    return r;
  }

  // The graph reuses the memory of the previous plan's (see lower()).
  parallel::TaskGraph& graph = resources.task_graph();
  // Without per-task output (trace, statistics), chains of steps stand for their tasks: the same
  // replay from a smaller graph.
  const bool per_task = options.trace.has_value() || options.stats;
  parallel::LoweringOptions lo = lowering_options(sc, options.full);
  // NIC sharing replays every task on the event engine: no chains.
  lo.coarse = !per_task && !options.nic_sharing;
  const bool memo = options.replay_memo && !per_task && options.perturbation.identity() && !options.nic_sharing;
  const ReplayMemo::Key key = memo ? ReplayMemo::key(plan, lo, options.only_critical_breakdown) : ReplayMemo::Key{};
  std::shared_ptr<const MemoizedReplay> replayed = memo ? options.replay_memo->find(key) : nullptr;
  // Per-task timings only for the trace and the statistics; otherwise the replay's summary (the
  // same ends, breakdowns and memory peaks) is cheaper to get.
  std::optional<runtime::Execution> ex;
  if (!replayed) {
    const parallel::Layout layout(plan);
    const network::NetworkModel& network =
        resources.network(sc.cluster, sc.num_gpus, options.perturbation.collectives);
    const compute::ComputeModel& compute = resources.compute(sc.cluster.gpu, sc.plan, options.perturbation.kernels,
                                                             options.perturbation.host_dispatch);
    const double slowdown = sc.cluster.gpu.compute_slowdown_under_comm;
    auto fresh = std::make_shared<MemoizedReplay>();
    auto label_peaks = [&fresh](const parallel::TaskGraph& g) {
      for (const runtime::DeviceMemory& mem : fresh->replay.memory) fresh->peak_at.push_back(runtime::peak_label(g, mem));
      fresh->devices = g.devices;
    };
    bool done = false;
    if (options.only_critical_breakdown && lo.coarse && !lo.full) {
      parallel::BlockProgram& program = resources.replay_buffers().block_program();
      program = parallel::lower_blocks(sc.model, plan, lo, std::move(program));
      if (std::optional<runtime::ReplaySummary> summary =
              runtime::replay_blocks(program, layout, compute, network, resources.replay_buffers(), slowdown)) {
        fresh->replay = std::move(*summary);
        label_peaks(program.graph);
        done = true;
      }
    }
    if (!done) {
      graph = parallel::lower(sc.model, plan, lo, std::move(graph));
      runtime::ExecuteOptions eo;
      eo.memory_timeline = options.trace.has_value();
      eo.compute_slowdown_under_comm = slowdown;
      eo.nic_sharing = options.nic_sharing;
      if (per_task) ex = runtime::execute(graph, layout, compute, network, eo);
      fresh->replay = ex ? runtime::summarize(graph, *ex, slowdown)
                         : runtime::replay_summary(graph, layout, compute, network, eo, &resources.replay_buffers());
      label_peaks(graph);
    }
    replayed = std::move(fresh);
    if (memo) options.replay_memo->add(key, replayed);
  }
  const runtime::ReplaySummary& replay = replayed->replay;
  // The replay runs compute at its uncontended speed: the iteration is the replay's end plus the
  // time the critical device's compute loses to the communication running beside it.
  const auto& breakdowns = replay.time;
  const auto critical = static_cast<std::size_t>(replay.last_device);
  const SimTime end = replay.iteration_end();
  // Time arithmetic saturates at the int64 picosecond range (106 days); an iteration anywhere
  // near it comes only from absurd sizes (a hidden size of 10^5 on one GPU, …).
  if (replay.end.ps() >= (std::int64_t{1} << 62) || end.ps() >= (std::int64_t{1} << 62)) {
    throw InputError(Diagnostic{"", 0, "", "the simulated iteration lasts more than 53 days, beyond "
                                "the range of the simulated clock: the model or plan sizes are out of range"});
  }

  r.tasks = replay.tasks;
  r.events = replay.events;
  r.iteration_time_s = end.seconds();
  r.tokens_per_s = tokens / r.iteration_time_s;
  r.tflops_per_gpu = r.model_flops / r.iteration_time_s / static_cast<double>(sc.num_gpus) * 1e-12;
  r.mfu = r.tflops_per_gpu / sc.cluster.gpu.peak_bf16.tflops();

  // The breakdown shown is that of the device finishing last (the critical path's end).
  r.peak_memory = Bytes();
  for (std::size_t d = 0; d < replayed->devices.size(); ++d) {
    const auto& dev = replayed->devices[d];
    DeviceReport rep;
    rep.rank = dev.rank;
    rep.coord = dev.coord;
    rep.stage = dev.stage;
    rep.represents = dev.represents;
    rep.time = breakdowns[d];
    rep.memory = static_memory(sc, overheads, layers, dev.stage);
    set_activations(rep.memory, replay.memory[d].peak_dynamic, overheads);
    if (rep.memory.total() > r.peak_memory) {
      r.peak_memory = rep.memory.total();
      r.memory = rep.memory;
    }
    r.devices.push_back(rep);
  }
  r.time = breakdowns[critical];
  r.within_fit = r.peak_memory.real() <= options.fit * r.memory_capacity.real();
  for (std::size_t d = 0; d < replayed->devices.size(); ++d) {
    if (r.devices[d].memory.total() == r.peak_memory && !replayed->peak_at[d].empty()) {
      r.peak_at = replayed->peak_at[d];
      break;
    }
  }
  if (r.peak_memory > r.memory_capacity) {
    r.status = Status::kOutOfMemory;
    r.reason = "peak memory " + std::to_string(r.peak_memory.in_gib()) + " GiB exceeds the " +
               std::to_string(r.memory_capacity.in_gib()) + " GiB of the GPU";
  }

  if (options.stats) r.stats = trace::run_stats(graph, *ex);
  if (options.trace) {
    trace::TraceInfo info;
    info.ranks = options.trace_ranks;
    info.gpus_per_host = sc.cluster.cluster.host.gpus_per_host;
    for (const auto& dev : r.devices) {
      info.static_memory.push_back(dev.memory.total() - dev.memory.activations - dev.memory.fragmentation);
    }
    const auto num = [](double v) {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%.6g", v);
      return std::string(buf);
    };
    info.metadata = {{"scenario", describe(sc)},
                     {"model", sc.model.name},
                     {"cluster", sc.cluster.cluster.name},
                     {"num_gpus", std::to_string(sc.num_gpus)},
                     {"status", status_name(r.status)},
                     {"iteration_time_s", std::to_string(r.iteration_time_s)},
                     // The timeline runs compute at its uncontended speed; the iteration also
                     // counts the compute lost to the communication beside it.
                     {"comm_contention_s", std::to_string(r.time[runtime::TimeCategory::kContention].seconds())},
                     {"tokens_per_s", num(r.tokens_per_s)},
                     {"model_flops_per_iteration", num(r.model_flops)},
                     {"mfu", num(r.mfu)},
                     {"peak_memory_bytes", std::to_string(r.peak_memory.count())},
                     {"memory_capacity_bytes", std::to_string(r.memory_capacity.count())}};
    if (r.stats.computed) {
      info.metadata.emplace_back("hardware_flops_per_iteration", num(r.stats.hardware_flops.value()));
    }
    r.trace_size = trace::write_chrome_trace(*options.trace, graph, *ex, info);
  }
  return r;
}

std::int64_t largest_fitting_sequence(const config::Scenario& scenario, double fit, std::int64_t step,
                                      std::int64_t limit, Resources& resources) {
  RunOptions options;
  options.fit = fit;
  auto fits = [&](std::int64_t steps) {
    config::Scenario sc = scenario;
    sc.plan.seq_len = steps * step;
    return simulate(sc, options, resources).within_fit;
  };
  std::int64_t lo = 0, hi = limit / step + 1;  // fits(lo) (or lo = 0), !fits(hi)
  while (hi - lo > 1) {
    const std::int64_t mid = lo + (hi - lo) / 2;
    (fits(mid) ? lo : hi) = mid;
  }
  return lo * step;
}

}  // namespace ts::driver
