// Hardware sizing: for each GPU kind and fabric, the smallest cluster (and its best plan) that
// trains a model on a token budget before a deadline, with GPU-hours and cost.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "sim/config/loader.h"
#include "sim/driver/sweep.h"
#include "sim/driver/time_to_train.h"

namespace ts::driver {

// A GPU kind one can rent or buy: the cluster file that models it and its price per GPU-hour.
struct GpuOffer {
  std::string kind;     // short name used on the command line ("h100")
  std::string cluster;  // zoo name or path of the cluster file ("dgx-h100")
  std::optional<double> usd_per_gpu_hour;  // none: cost not computed
  std::string basis;    // what the price is (e.g. "AWS EC2 Capacity Blocks, us-east-1")
  std::string source;   // where it was published
};

// The price table: a CSV file with header kind,cluster,usd_per_gpu_hour,basis,source ('#'
// lines are comments; an empty price means none is known). Throws InputError with file:line.
std::vector<GpuOffer> load_prices(const std::filesystem::path& path);
// data_dir()/calibration/prices.csv.
std::filesystem::path default_prices_path();

// One fabric variant: NIC line rate and leaf oversubscription; unset fields keep the cluster's.
struct FabricOption {
  std::optional<double> nic_gbits;
  std::optional<double> oversubscription;
};
// The cluster with the variant applied; its name gains the variant's label so that caches keyed
// by cluster name keep variants apart.
config::Cluster apply_fabric(config::Cluster cluster, const FabricOption& fabric);
// "400G x8, 1:1": NIC rate and count per node, oversubscription.
std::string fabric_label(const config::Cluster& cluster);

enum class Placement { kFill, kSegment };
const char* placement_name(Placement p);  // "fill", "segment"

struct SizingSpec {
  ir::ModelSpec model;
  double tokens = 0;  // training tokens
  double days = 0;    // deadline
  std::optional<double> budget_usd;
  std::vector<GpuOffer> offers;
  std::vector<std::int64_t> cluster_sizes;  // candidate GPU counts
  std::vector<FabricOption> fabrics;        // at least one (an empty option: as in the file)
  parallel::ParallelPlan base;              // global batch, sequence length, dtype, …
  // Global batches (sequences) to choose from at each size (see plan_hardware); empty: the
  // batch is pinned at base.global_batch.
  std::vector<std::int64_t> batch_choices;
  SweepAxes axes;
  // Tensor-parallel degrees from the cluster instead of axes.tp: the powers of two up to the GPUs
  // a job uses of one scale-up domain (1-8 on a DGX, 1-64 on an NVL72 rack), where TP's
  // all-reduces stay on NVLink.
  bool tp_within_domain = false;
  // Where each size's GPUs sit in scale-up domains that hold several hosts (NVL72 racks of 4-GPU
  // trays), unless the cluster file pins scale_up.gpus_used_per_domain: kSegment places the
  // largest whole number of hosts per domain that divides the job's host count
  // (config::segment_gpus); kFill fills every domain in turn.
  Placement placement = Placement::kSegment;
  int threads = 0;
  // Time to train: checkpoints, restarts, stragglers, PUE (goal and price are set per choice).
  TrainSettings train;
  longrun::TrainData train_data;  // default-constructed: the ideal time (no interruptions, …)
  // Also simulate the sizes above the chosen one (their rows for a wall time and cost curve).
  bool all_sizes = false;
};

// One cluster size tried for one GPU kind and fabric.
struct SizeTrial {
  std::int64_t num_gpus = 0;
  // "meets the deadline", "too slow", "skipped: …" (not whole nodes, or too few GPUs even at
  // 100 % MFU), "no valid plan: …" (every combination of the axes breaks a plan rule, the most
  // frequent named), "no plan fits: …" (valid plans, none runs within the GPU's memory).
  std::string outcome;
  double best_tokens_per_s = 0;
  double days = 0;         // wall-clock days of the best plan (time_to_train)
  double ideal_days = 0;   // tokens / tokens per second of that plan, without interruptions
  std::int64_t global_batch = 0;  // of the best plan (the chosen one where the deadline is met)
  std::int64_t plans = 0;  // simulated, over every batch tried
  std::int64_t gpus_per_domain = 0;  // GPUs the job uses of each scale-up domain
  SweepRecord best;        // the plan with the least wall time
  std::optional<TrainReport> train;
};

// Candidate global batches between `min_tokens` and `max_tokens` (inclusive) for sequences of
// `seq_len` tokens: every count of sequences of the form 2^k or 3·2^k in the range, ascending
// (such counts split evenly over the data-parallel degrees of clusters of 2^k and 3·2^k GPUs).
// Empty when none lies in the range.
std::vector<std::int64_t> batch_choices(double min_tokens, double max_tokens, std::int64_t seq_len);

struct SizingChoice {
  std::string kind;
  std::string cluster;  // name of the cluster file
  std::string gpu;      // GPU name
  std::string fabric;   // fabric_label
  bool found = false;   // a candidate size meets the deadline
  // Why no size was tried at all (config::dtype_problem: the GPU has no tensor cores for the
  // dtype); empty otherwise.
  std::string unsupported;
  std::int64_t num_gpus = 0;
  std::int64_t gpus_per_node = 0;
  std::int64_t gpus_per_domain = 0;  // of the cluster's scale-up domain
  SweepRecord best;     // the best plan's sweep row at that size
  double tokens_per_s = 0;
  double mfu = 0;
  double peak_memory_gib = 0;
  double days = 0;         // wall-clock days
  double ideal_days = 0;   // without interruptions, checkpoints and stragglers
  double gpu_hours = 0;    // GPUs × wall-clock hours
  double power_watts = 0;  // per GPU (cluster file gpu.power_watts); 0 = not given
  std::optional<double> usd_per_gpu_hour;
  std::optional<double> cost_usd;
  std::optional<bool> within_budget;
  TrainReport train;  // of the chosen size and plan
  std::vector<SizeTrial> trials;
};

struct SizingProgress {
  std::string kind;
  std::string fabric;
  std::int64_t num_gpus = 0;
  SweepProgress sweep;
};

// For each offer and fabric, walks the candidate sizes upwards: sizes whose GPUs could not meet
// the deadline even at 100 % MFU (model FLOPs over dense peak) are skipped without simulation;
// the others are swept (every valid plan), each plan's wall-clock time to `tokens` is computed
// with interruptions, checkpoints, restarts and stragglers (time_to_train), and the first size
// whose quickest plan finishes within `days` is chosen. GPU-hours = GPUs × wall-clock hours;
// cost = GPU-hours × price.
// With batch choices, each size is first swept with every mapping at the largest batch it
// divides (SweepAxes::batch_choices): the fastest that size can train, as throughput grows with
// the batch at a fixed mapping (the pipeline bubble and the gradient reduction are spread over
// more micro-batches). If that meets the deadline, smaller batches are swept in turn, from the
// next smaller one down, and the smallest before the first that misses the deadline is chosen:
// a batch is a training hyperparameter, and the smallest that is fast enough departs least from
// the usual one (beyond the critical batch size, more tokens are needed for the same loss;
// McCandlish et al. 2018, "An Empirical Model of Large-Batch Training").
std::vector<SizingChoice> plan_hardware(const SizingSpec& spec,
                                        const std::function<void(const SizingProgress&)>& progress = {});

// The comparison table (one row per GPU kind and fabric) and the JSON document.
std::string sizing_table(const SizingSpec& spec, const std::vector<SizingChoice>& choices);
std::string sizing_json(const SizingSpec& spec, const std::vector<SizingChoice>& choices);
// The plan among `ranked` (a sweep's feasible rows at one size, quickest first) with the least
// wall-clock time to the token budget of `settings`, and its report; ties keep the sweep's order.
struct QuickestPlan {
  SweepRecord record;
  TrainReport train;
};
QuickestPlan quickest_plan(const SizingSpec& spec, const config::Cluster& cluster,
                           std::int64_t gpus, const std::vector<SweepRecord>& ranked,
                           const TrainSettings& settings);

// One CSV row per GPU kind, fabric and size tried (plan_time_to_train.cpp): wall time, goodput,
// energy and cost against cluster size, what `tools/plot plan` draws.
std::string sizing_csv(const SizingSpec& spec, const std::vector<SizingChoice>& choices);

}  // namespace ts::driver
