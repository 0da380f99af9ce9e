// Sweeps: enumeration of every valid parallel plan for a model, cluster and GPU count, the
// parallel runner (one simulator per job, results written in enumeration order, resumable and
// shardable), the sweep CSV and its merge.
#pragma once

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "sim/config/calibration_loader.h"
#include "sim/config/loader.h"
#include "sim/driver/resources.h"
#include "sim/driver/simulate.h"
#include "sim/parallel/pipeline_split.h"

namespace ts::driver {

// The values tried on each axis. An empty integer list means "every value the other axes allow"
// (tp, pp, cp: every divisor of the GPU count; dp: whatever gpus/(tp·pp·cp) is; micro_batch:
// every divisor of global_batch/dp; vpp: every divisor ≥ 2 of layers/pp). Enumerated lists must
// not be empty.
struct SweepAxes {
  std::vector<std::int64_t> tp, pp, dp, cp;
  std::vector<std::int64_t> micro_batch;
  // Model chunks per pipeline rank, tried with the interleaved schedule only (others use 1).
  std::vector<std::int64_t> vpp;
  std::vector<parallel::Schedule> schedule = {parallel::Schedule::k1F1B};
  std::vector<int> zero = {0};
  // The largest ZeRO stage a plan with pp > 1 may have (a framework whose pipeline engine refuses
  // the others: config::FrameworkProfile::pipeline_zero_stage_max); larger ones are rejected.
  int pipeline_zero_stage_max = 3;
  // ZeRO-3 shard group sizes (FSDP HYBRID_SHARD: shard within groups of g data-parallel ranks,
  // replicate across them), tried with ZeRO-3 only; 0 shards over all of dp·cp, as does
  // g = dp·cp. Empty: 0 and every divisor g of dp·cp with 1 < g < dp·cp.
  std::vector<std::int64_t> zero_shard_group = {0};
  std::vector<bool> sequence_parallel = {false};
  std::vector<parallel::Recompute> recompute = {parallel::Recompute::kNone};
  std::vector<parallel::CpAlgo> cp_algo = {parallel::CpAlgo::kRing};
  std::vector<std::int64_t> mst_chunks = {1};
  // Expert and expert-tensor parallelism (mixture-of-experts models; a dense model takes the
  // first value only, and any value but 1 is rejected for it). Empty ep: every divisor of the
  // routed experts.
  std::vector<std::int64_t> ep = {1};
  std::vector<std::int64_t> etp = {1};
  // How the layers are split over the pipeline stages: kEven needs pp·vpp to divide the layers;
  // kBalanced gives every pp·vpp up to the layer count the split of
  // parallel::balanced_stage_layers with the end_stage_costs of the model on the cluster's GPU
  // (ParallelPlan::pp_layers; the sweep CSV then ends with a pp_layers column). With both,
  // a balanced split equal to the even one is the same plan, tried once.
  std::vector<parallel::PipelineSplit> pp_split = {parallel::PipelineSplit::kEven};
  // Global batches (sequences) to choose from, ascending; empty: base.global_batch. Each plan
  // takes the largest of them that dp·micro_batch divides and, interleaved, whose micro-batch
  // count pp divides (else the largest, rejected with check_plan's reason): the batch at which
  // that mapping runs fastest, since a larger batch spreads the pipeline bubble and the
  // gradient reduction over more micro-batches.
  std::vector<std::int64_t> batch_choices;
};

// The cost of the embedding (first pipeline stage) and of the final norm, LM head and loss (last
// stage, with the model's multi-token-prediction modules), in transformer layers: forward and
// backward of one sequence of base.seq_len on one GPU of the cluster, each op at its roofline
// (GEMM and attention FLOPs at the dense peak of the plan's dtype, memory-bound bytes at HBM
// bandwidth). The extras of balanced_stage_layers.
struct EndStageCosts {
  double embedding = 0;
  double lm_head = 0;
};
EndStageCosts end_stage_costs(const ir::ModelSpec& model, const compute::GpuSpec& gpu,
                              const parallel::ParallelPlan& base);
// The layers of each of `stages` (virtual) pipeline stages split by cost
// (parallel::balanced_stage_layers with `ends`): empty where that comes out even (the even
// split's plan), nullopt where there are more stages than layers. sweep --pp-split balanced and
// run --pp-layers balanced.
std::optional<std::vector<std::int64_t>> balanced_split(const ir::ModelSpec& model, std::int64_t stages,
                                                        const EndStageCosts& ends);

// What to sweep: model, cluster and GPU count, the plan fields that stay fixed (global batch,
// sequence length, dtype, rank order, optimizer options) in `base`, and the axes.
struct SweepSpec {
  ir::ModelSpec model;
  config::Cluster cluster;
  std::int64_t num_gpus = 0;
  parallel::ParallelPlan base;
  SweepAxes axes;
  std::string framework;  // the --framework profile applied to base and axes ("": none)
};

// Plans that check_plan rejected, grouped by rule: the flag and the message with its numbers
// and parenthesized details removed; `example` is the first full message of the group.
struct RejectReason {
  std::string rule;
  std::int64_t count = 0;
  std::string example;
};

struct Enumeration {
  std::vector<parallel::ParallelPlan> plans;  // valid plans; a plan's id is its index here
  std::int64_t combinations = 0;  // every combination of the axes considered
  // Combinations equal to an earlier one because an axis has no effect on them (sequence
  // parallelism without tp, the CP algorithm without cp, ZeRO without dp, shard groups without
  // ZeRO-3 or equal to all of dp·cp, vpp without the interleaved schedule): each such axis takes
  // only its first value.
  std::int64_t equivalent = 0;
  std::int64_t rejected = 0;           // invalid plans, in total
  // Invalid plans whose pipeline stages (pp, or pp·vpp interleaved) do not divide the model's
  // layers and that have no per-stage split (an even split): --pp-split balanced sweeps them.
  std::int64_t uneven_stages = 0;
  std::vector<RejectReason> reasons;   // most frequent first
};

// Every valid plan in a fixed order: nested loops over tp, pp, cp, dp, micro_batch, schedule
// (with vpp), pp_split, zero, zero_shard_group, sequence_parallel, recompute, cp_algo,
// mst_chunks, outermost first, each list in ascending order. Throws InputError (naming the flag)
// for an empty enumerated list or a non-positive value.
// `threads` > 1 enumerates the tensor-parallel degrees on that many threads (the same result).
Enumeration enumerate_plans(const SweepSpec& spec, int threads = 1);

// The worker threads of a sweep: `requested` when positive, else one per core (at least one).
int sweep_threads(int requested);
// Runs body(0) … body(workers − 1), each on its own thread (inline for one worker), waits for
// all, and rethrows the exception of the lowest-numbered worker that threw.
void run_workers(int workers, const std::function<void(int)>& body);

// Every divisor of n, ascending.
std::vector<std::int64_t> divisors(std::int64_t n);

// A deterministic slice of a sweep: the plans whose id ≡ index (mod count).
struct Shard {
  std::int64_t index = 0;
  std::int64_t count = 1;
  bool contains(std::int64_t plan_id) const { return plan_id % count == index; }
};
// "I/N" (0 ≤ I < N); throws InputError naming `flag`.
Shard parse_shard(std::string_view text, std::string_view flag);
// The shard of a Slurm job array task (SLURM_ARRAY_TASK_ID, minus SLURM_ARRAY_TASK_MIN when
// set, of SLURM_ARRAY_TASK_COUNT), or nullopt outside a job array. `getenv` is injected so that
// tests need not touch the process environment. Throws InputError on malformed values.
std::optional<Shard> slurm_shard(const std::function<const char*(const char*)>& getenv);

// The sweep CSV: one row per plan, columns plan_id, the plan, status, the metrics of
// report_json, the time breakdown and the reason, and, for sweeps that try balanced pipeline
// splits (`pp_layers_column`), the layers per stage ("20,20,21,19"; empty for an even split).
// Numbers are printed with fixed formats, so the same results give the same bytes.
std::string sweep_csv_header(bool pp_layers_column = false);
// Whether the sweep's CSV has the pp_layers column.
bool has_pp_layers_column(const SweepSpec& spec);
// A pp_layers value with runs of equal counts folded: "2,2,2,3,1" → "2x3,3,1".
std::string fold_layer_counts(std::string_view pp_layers);
// Layers per stage as the pp_layers column writes them: "20,20,21,19"; empty for an even split.
std::string join_layers(const std::vector<std::int64_t>& layers);
std::string sweep_csv_row(std::int64_t plan_id, const SweepSpec& spec,
                          const parallel::ParallelPlan& plan, const RunResult& result);
// The columns that identify a plan (all before `status`, without plan_id), comma-joined.
std::string sweep_plan_key(const SweepSpec& spec, const parallel::ParallelPlan& plan);

// One row of a sweep CSV, as read back or as just written.
struct SweepRecord {
  std::int64_t plan_id = 0;
  std::string status;
  double tokens_per_s = 0;
  std::string line;  // the CSV line, without its newline
};

// Splits one CSV line (RFC 4180 quoting, no embedded newlines).
std::vector<std::string> split_csv_line(std::string_view line);

struct SweepProgress {
  std::int64_t done = 0;   // plans finished in this run (resumed rows not counted)
  // Plans this run has to finish; in a pruned search, those not pruned yet (an upper bound).
  std::int64_t total = 0;
  double elapsed_s = 0;
  std::int64_t replayed = 0;      // of `done`, plans whose task graph was replayed
  std::int64_t pruned = 0;        // pruned search: plans skipped, as they cannot make the top
  double best_tokens_per_s = 0;   // of the best plan that fits so far (0: none yet)
  bool pruned_search = false;
};

// Workers' Resources kept from one run_sweep to the next (their topologies and collective costs
// cached per cluster and GPU count): for searches that sweep one cluster several times.
// Thread-safe; each Resources is used by one worker at a time.
class ResourcePool {
 public:
  explicit ResourcePool(std::shared_ptr<config::ComputeModelCache> cache)
      : cache_(std::move(cache)) {}
  std::unique_ptr<Resources> take();  // a kept one, else a new one
  void give(std::unique_ptr<Resources> resources);

 private:
  std::shared_ptr<config::ComputeModelCache> cache_;
  std::mutex mutex_;
  std::vector<std::unique_ptr<Resources>> free_;
};

struct SweepOptions {
  int threads = 0;  // 0: every core
  Shard shard;
  // Rows are appended to this file in plan order; plans already in it are skipped.
  std::optional<std::filesystem::path> out;
  // Called from the writing thread at most every `progress_interval_s`, and at the end.
  std::function<void(const SweepProgress&)> progress;
  double progress_interval_s = 0.25;
  // Shared fitted compute models (one Resources per worker thread uses it).
  std::shared_ptr<config::ComputeModelCache> compute_cache;
  // Stop after this many new rows (0: no limit): what a killed sweep leaves behind, for tests.
  std::int64_t stop_after = 0;
  // Only the plans (by id) it accepts are simulated (none: all); the others have no row. For
  // searches that skip plans which cannot win (plan_hardware); not for sweep files.
  std::function<bool(std::int64_t plan_id)> select;
  // Workers take their Resources from it and give them back (none: fresh ones per run).
  std::shared_ptr<ResourcePool> resource_pool;
  // The enumeration of the same spec, made before: not enumerated again (and not copied into
  // SweepOutcome::enumeration, which stays empty).
  const Enumeration* enumeration = nullptr;
  // Only these plan ids (of the shard, ascending), instead of every id that `select` accepts.
  const std::vector<std::int64_t>* only = nullptr;
  // Replays shared with other runs of the same spec (none: one for this run).
  std::shared_ptr<ReplayMemo> replay_memo;
};

struct PlanTiming {
  std::int64_t plan_id = -1;
  double wall_s = 0;  // simulate() of this plan on its worker thread
  std::int64_t tasks = 0;
  std::uint64_t events = 0;
};

struct SweepStats {
  std::int64_t in_shard = 0;   // valid plans in this shard
  std::int64_t resumed = 0;    // rows already in the output file
  std::int64_t simulated = 0;  // simulate() calls in this run
  std::int64_t replayed = 0;   // of those, plans whose task graph was replayed
  std::int64_t early_oom = 0;  // rejected by static memory without a replay
  std::int64_t unsupported = 0;
  std::int64_t ok = 0;         // replayed and fitting in memory
  std::int64_t oom = 0;        // replayed, peak over capacity
  double wall_s = 0;           // of the simulation phase
  int threads = 0;
  PlanTiming fastest, slowest;  // among replayed plans
  // Replayed plans per second of wall time (the figure quoted for sweep speed).
  double replayed_per_s() const { return wall_s > 0 ? static_cast<double>(replayed) / wall_s : 0; }
};

// What a pruned search (search_sweep) skipped and why.
struct PruneStats {
  std::int64_t static_oom = 0;  // static memory alone over the GPU's capacity: can never fit
  // With the activations the schedule holds at once (PlanBound::activation_oom): cannot fit.
  std::int64_t activation_oom = 0;
  std::int64_t by_bound = 0;    // bound on tokens/s below the k-th best plan simulated before
  std::int64_t shapes = 0;      // micro-batch shapes lowered for the bounds (PlanBounder)
  std::int64_t rounds = 0;      // batches of plans simulated
  double bound_wall_s = 0;      // time taken by the bounds
};

struct SweepOutcome {
  Enumeration enumeration;
  SweepStats stats;
  std::vector<SweepRecord> records;  // every row of this shard (resumed and new), in plan order
  std::optional<PruneStats> pruned;  // set by search_sweep
};

// Simulates every plan of `spec` in `options.shard` on a thread pool. Each worker owns its
// Resources (and so its simulators); results are written in plan order, so the output file is
// the same for any thread count, and a killed run resumed later ends with the same bytes as an
// uninterrupted one. Throws InputError if `options.out` holds rows of another sweep.
SweepOutcome run_sweep(const SweepSpec& spec, const SweepOptions& options);

// The best `k` > 0 plans of `spec` without simulating those that cannot be among them: the
// records of the plans simulated (plan order), whose top_records(records, k) equal those of
// run_sweep's records. Each valid plan gets a bound (PlanBounder: static memory, and a lower
// bound on its iteration time); plans that cannot fit in memory are skipped, the others simulated in
// batches from the highest bound on tokens/s down, until the next bound falls below the k-th
// best tokens/s found. Batches do not depend on the thread count, so neither does the result.
// Options: threads, progress, compute_cache, resource_pool (not out, shard, stop_after, select).
SweepOutcome search_sweep(const SweepSpec& spec, const SweepOptions& options, std::size_t k);

// The best `k` ok rows by tokens/s (ties: lower plan id first); k = 0: all.
std::vector<SweepRecord> top_records(const std::vector<SweepRecord>& records, std::size_t k);
// An aligned table of `records` (rank, throughput, MFU, iteration time, peak memory, plan).
std::string format_top_table(const std::vector<SweepRecord>& records);

// Joins the CSV files of a sharded sweep: rows sorted by plan_id (identical to the unsharded
// sweep's file when every shard is complete). Throws InputError for a missing file, a header
// that is not the sweep header, a malformed row, or one plan id with two different rows.
struct MergeResult {
  std::string csv;                   // header and rows
  std::vector<SweepRecord> records;  // in plan order
  std::int64_t duplicates = 0;       // identical rows found in more than one input
  std::vector<std::int64_t> missing; // ids absent below the largest id present (first 20)
  std::int64_t missing_count = 0;
};
MergeResult merge_sweep_files(const std::vector<std::filesystem::path>& inputs);

}  // namespace ts::driver
