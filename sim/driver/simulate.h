// simulate(Scenario) → RunResult: the whole pipeline from a validated scenario to its report.
#pragma once

#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "sim/base/units.h"
#include "sim/config/loader.h"
#include "sim/driver/resources.h"
#include "sim/parallel/layout.h"
#include "sim/parallel/lowering.h"
#include "sim/runtime/breakdown.h"
#include "sim/trace/chrome_trace.h"
#include "sim/trace/run_stats.h"

namespace ts::driver {

enum class Status {
  kOk,           // simulated, fits in memory
  kOutOfMemory,  // simulated or rejected early: the peak exceeds the GPU's capacity
  kUnsupported,  // valid plan that this version cannot simulate (the reason says what)
};
const char* status_name(Status s);

class ReplayMemo;

struct RunOptions {
  bool full = false;  // simulate every rank instead of one per pipeline stage
  // Fraction of the GPU memory a plan may use to be called safe: Fujii et al. (arXiv 2411.06465)
  // saw no out-of-memory failure when their estimate stayed under 80% of the capacity (the rest
  // goes to allocator fragmentation, CUDA context and communication buffers).
  double fit = 0.8;
  std::optional<std::filesystem::path> trace;  // Chrome trace output
  std::vector<std::int32_t> trace_ranks;       // ranks written to the trace; empty = all simulated
  bool stats = false;  // analyse the replay (hardware FLOPs, most exposed communication)
  // Replays shared by the plans that lower to the same task graph (a sweep's); none: each plan
  // replays its own. Used only without per-task output (trace, statistics).
  std::shared_ptr<ReplayMemo> replay_memo;
  // Only the time breakdown of the device finishing last (RunResult::time) is needed; the
  // devices' own are then left empty. Lets plans without per-task output replay as block programs
  // (parallel::lower_blocks), without the task graph of every micro-batch: what a sweep reports.
  bool only_critical_breakdown = false;
  // Replays at a perturbed calibration (a prediction interval's, driver/intervals.h); such
  // replays are not memoized.
  Perturbation perturbation;
  // Network tasks of different kinds in flight on one NIC share its bandwidth (runtime
  // ExecuteOptions::nic_sharing): replays the full task graph on the event engine, slower.
  bool nic_sharing = false;
};

// Per-device memory at its peak.
struct MemoryBreakdown {
  Bytes weights;
  Bytes gradients;
  Bytes optimizer_states;  // Adam moments and fp32 master weights
  Bytes activations;       // saved activations live at the peak
  // Beyond the framework's allocations (calibrated per GPU, calibration/<gpu>.textproto):
  Bytes cuda_context;
  Bytes nccl_buffers;      // of every communicator the rank uses
  Bytes fragmentation;     // the caching allocator's unusable reserve over the activations
  Bytes total() const {
    return weights + gradients + optimizer_states + activations + cuda_context + nccl_buffers + fragmentation;
  }
};

struct DeviceReport {
  std::int32_t rank = 0;
  parallel::Coord coord;
  std::int64_t stage = 0;
  std::int64_t represents = 1;
  runtime::TimeBreakdown time;
  MemoryBreakdown memory;
};

// The range the iteration time of a plan is predicted to fall in (driver/intervals.h).
struct IterationInterval {
  double low_s = 0, high_s = 0;  // calibrated to the stated coverage (split-conformal)
  // The replays at the fast and the slow calibration: the inputs' uncertainty alone.
  double input_low_s = 0, input_high_s = 0;
};

struct RunResult {
  Status status = Status::kOk;
  std::string reason;  // why the status is not ok
  double iteration_time_s = 0;
  double tokens_per_s = 0;
  double tflops_per_gpu = 0;  // model FLOPs (ir::model_flops) per second per GPU
  double mfu = 0;             // tflops_per_gpu over the GPU's dense bf16 peak
  Bytes peak_memory;          // largest per-device peak
  Bytes memory_capacity;
  bool within_fit = true;     // peak_memory ≤ fit × memory_capacity
  std::string peak_at;        // the task that reached the peak, e.g. "L39 mlp bwd mb1"
  MemoryBreakdown memory;     // of the device with the largest peak
  runtime::TimeBreakdown time;  // of the device that finishes last
  std::vector<DeviceReport> devices;
  std::int64_t parameters = 0;
  double model_flops = 0;     // per iteration
  std::int64_t tasks = 0;
  std::uint64_t events = 0;
  trace::RunStats stats;  // computed when RunOptions::stats is set and the plan was replayed
  std::optional<trace::TraceSize> trace_size;  // what the Chrome trace holds, when one was written
  std::optional<IterationInterval> interval;    // set by driver::add_interval
};

// The replay of a task graph as simulate() reports it, kept for the plans that lower to the same
// graph: ZeRO stages 1 and 2 lower alike (both reduce-scatter the gradients and gather the
// updated parameters) and differ only in the static memory that simulate() adds to the replay.
struct MemoizedReplay {
  runtime::ReplaySummary replay;
  std::vector<parallel::SimDevice> devices;
  std::vector<std::string> peak_at;  // per device: the task that reached its dynamic peak
};

// Replays by what lowering reads of a plan: the plans of one model, cluster and GPU count (a
// sweep's) with equal keys lower to the same graph and share one replay. Thread-safe: the
// workers of a sweep share one.
class ReplayMemo {
 public:
  struct Key {
    parallel::ParallelPlan plan;  // ZeRO stage 2 as 1 (see MemoizedReplay)
    parallel::LoweringOptions lowering;
    bool only_critical_breakdown = false;
    bool operator==(const Key&) const = default;
  };
  static Key key(const parallel::ParallelPlan& plan, const parallel::LoweringOptions& lowering,
                 bool only_critical_breakdown);
  std::shared_ptr<const MemoizedReplay> find(const Key& key) const;
  void add(const Key& key, std::shared_ptr<const MemoizedReplay> replay);

 private:
  // Keys by a hash of the fields that sweeps vary, compared in full.
  static std::uint64_t bucket(const Key& key);
  mutable std::mutex mutex_;
  std::unordered_multimap<std::uint64_t, std::pair<Key, std::shared_ptr<const MemoizedReplay>>> replays_;
};

// The static memory (weights, gradients, optimizer states, CUDA context, NCCL buffers) of the
// pipeline stage holding the most: what simulate() checks before any replay (a plan over the
// capacity with it alone is out of memory at once).
MemoryBreakdown static_peak_memory(const config::Scenario& scenario, Resources& resources);
// The same per pipeline stage, without activations.
std::vector<MemoryBreakdown> static_stage_memory(const config::Scenario& scenario, Resources& resources);
// What the forward of one layer and micro-batch keeps for its backward (LoweringOptions::
// layer_kept: under full recompute, only its input); for a mixture of experts with dense layers,
// the smaller of its dense and its MoE layers'.
Bytes kept_layer_activations(const config::Scenario& scenario);

// Simulates one scenario; `resources` carries fitted models and network caches across calls.
RunResult simulate(const config::Scenario& scenario, const RunOptions& options, Resources& resources);
// One-off simulation with fresh resources.
RunResult simulate(const config::Scenario& scenario, const RunOptions& options);

// The longest sequence (a multiple of `step` tokens, at most `limit`) for which the scenario's
// peak memory stays within `fit` × capacity; 0 when even `step` tokens do not fit. Peak memory
// grows with the sequence, so a bisection over simulations finds it.
std::int64_t largest_fitting_sequence(const config::Scenario& scenario, double fit, std::int64_t step,
                                      std::int64_t limit, Resources& resources);

// What can be known without a replay: sizes, FLOPs, static memory per stage and task counts.
struct InspectResult {
  std::int64_t parameters = 0;
  // Mixture-of-experts and multi-token-prediction models: parameters a token uses and those of
  // the MTP modules (ir::active_parameter_count, ir::mtp_parameter_count).
  std::int64_t active_parameters = 0;
  std::int64_t mtp_parameters = 0;
  double model_flops = 0;  // per iteration
  double model_flops_per_token = 0;
  std::vector<MemoryBreakdown> stage_static_memory;  // activations: one micro-batch of all layers
  Bytes layer_activation;  // saved activations of one layer and micro-batch
  std::int64_t micro_batches = 0;
  std::int64_t tasks = 0;
  std::int64_t simulated_devices = 0;
};
InspectResult inspect(const config::Scenario& scenario, bool full);

}  // namespace ts::driver
