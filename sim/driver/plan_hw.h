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

struct SizingSpec {
  ir::ModelSpec model;
  double tokens = 0;  // training tokens
  double days = 0;    // deadline
  std::optional<double> budget_usd;
  std::vector<GpuOffer> offers;
  std::vector<std::int64_t> cluster_sizes;  // candidate GPU counts
  std::vector<FabricOption> fabrics;        // at least one (an empty option: as in the file)
  parallel::ParallelPlan base;              // global batch, sequence length, dtype, …
  SweepAxes axes;
  // Tensor-parallel degrees from the cluster instead of axes.tp: the powers of two up to the GPUs
  // a job uses of one scale-up domain (1-8 on a DGX, 1-64 on an NVL72 rack), where TP's
  // all-reduces stay on NVLink.
  bool tp_within_domain = false;
  int threads = 0;
};

// One cluster size tried for one GPU kind and fabric.
struct SizeTrial {
  std::int64_t num_gpus = 0;
  std::string outcome;  // "meets the deadline", "too slow", "skipped: …", "no plan fits"
  double best_tokens_per_s = 0;
  double days = 0;
  std::int64_t plans = 0;  // simulated
};

struct SizingChoice {
  std::string kind;
  std::string cluster;  // name of the cluster file
  std::string gpu;      // GPU name
  std::string fabric;   // fabric_label
  bool found = false;   // a candidate size meets the deadline
  std::int64_t num_gpus = 0;
  std::int64_t gpus_per_node = 0;
  SweepRecord best;     // the best plan's sweep row at that size
  double tokens_per_s = 0;
  double mfu = 0;
  double peak_memory_gib = 0;
  double days = 0;
  double gpu_hours = 0;
  double power_watts = 0;  // per GPU (cluster file gpu.power_watts); 0 = not given
  std::optional<double> usd_per_gpu_hour;
  std::optional<double> cost_usd;
  std::optional<bool> within_budget;
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
// the others are swept (every valid plan) and the first whose best plan trains `tokens` within
// `days` is chosen. Training days = tokens / (tokens/s of the best plan) / 86400; GPU-hours =
// GPUs × days × 24; cost = GPU-hours × price.
std::vector<SizingChoice> plan_hardware(const SizingSpec& spec,
                                        const std::function<void(const SizingProgress&)>& progress = {});

// The comparison table (one row per GPU kind and fabric) and the JSON document.
std::string sizing_table(const SizingSpec& spec, const std::vector<SizingChoice>& choices);
std::string sizing_json(const SizingSpec& spec, const std::vector<SizingChoice>& choices);

}  // namespace ts::driver
