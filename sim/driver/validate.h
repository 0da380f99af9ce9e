// Validation against published training runs: rows of the public-runs CSV format mapped to scenarios, simulated and compared, with error statistics.
#pragma once

#include <cstdint>
#include <filesystem>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "sim/config/calibration_loader.h"
#include "sim/config/framework_loader.h"
#include "sim/config/loader.h"
#include "sim/config/reading_loader.h"
#include "sim/config/validation_overrides.h"
#include "sim/driver/intervals.h"
#include "sim/driver/simulate.h"

namespace ts::driver {

// ---------------------------------------------------------------------------------------------
// Published runs

// One row of a published-runs CSV (columns described in tests/validation/README.md), as the
// source printed it: empty cells are nullopt or empty strings.
struct PublishedRun {
  std::string file;
  int line = 0;  // line of the row in `file`
  std::string run_id, source, source_table, trust, model;
  std::optional<double> n_params_b;
  std::optional<std::int64_t> n_layers, hidden, n_heads, n_kv_heads, ffn_hidden, vocab;
  std::optional<std::int64_t> seq_len, global_batch, micro_batch, grad_accum;
  std::optional<std::int64_t> tp, pp, vpp, dp, cp, n_gpus;
  std::string zero_fsdp, sequence_parallel, recompute, precision, gpu, interconnect, framework;
  std::optional<double> tflops_per_gpu;
  std::string tflops_kind;
  std::optional<double> mfu_pct, hfu_pct, tokens_per_s, tokens_per_s_per_gpu, iter_time_s, peak_mem;
  std::string peak_mem_unit;
  std::optional<std::int64_t> max_seq_len;
  std::string notes;
  // Set by the caller, not a column: the row comes from a file of the frozen held-out set
  // (tests/validation/held-out.csv), reported apart from the public rows.
  bool held_out = false;
  // Read from FILE.overrides.textproto beside the CSV: settings the row's source states outside
  // the columns, applied after the reading rules.
  std::vector<config::RowOverride> overrides;
  // Optional columns of mixture-of-experts rows: the zoo model whose
  // architecture the row names (MoE, latent attention and MTP come from its file), the expert
  // counts as the source prints them (checked against it), and expert and expert-tensor
  // parallelism.
  std::string zoo_model;
  std::optional<std::int64_t> num_experts, top_k, moe_ffn_hidden, shared_experts, ep, etp;
};

// The columns every file must have (any order; other columns are ignored).
const std::vector<std::string>& published_run_columns();

// Reads a published-runs CSV (RFC 4180) and the per-row overrides beside it
// (config::overrides_path; an override naming no row of the file is an InputError). A missing
// column, a record with the wrong number of fields or a value that is not a number where one is
// expected throws InputError naming the file, the line, the run_id and the column; all problems
// are reported at once. Numbers may
// carry a k/K (×1000) or M (×10⁶) suffix ("60k"); percentages may end in '%'.
std::vector<PublishedRun> read_published_runs(const std::filesystem::path& path);
std::vector<PublishedRun> parse_published_runs(const std::string& text, const std::string& file);

// ---------------------------------------------------------------------------------------------
// FLOP conventions of the sources (FLOPs of one iteration of `sequences` sequences)

// Megatron-LM's model FLOPs (Korthikanti et al. 2022, Appendix; Megatron-LM
// training.py num_floating_point_operations): for MHA and a 4h GELU MLP
// 72·B·s·L·h²·(1 + s/6h + V/12hL); in general 12·B·s·L·h²·((1 + kv/a + s/h) + ffn/h·g +
// V/2Lh) with g = 3/2 for SwiGLU. Attention scores are counted in full (not halved for causal).
double megatron_model_flops(const ir::ModelSpec& model, std::int64_t seq, double sequences);
// Megatron's hardware FLOPs: model FLOPs plus what recompute adds. Full recompute reruns every
// layer's forward (one third of the layer FLOPs): 96·B·s·L·h²·(1 + s/6h + V/16hL) (Narayanan et
// al. SC'21, Sec. 5.1); selective recompute reruns the attention scores (one third of the s/h
// term, Korthikanti et al. 2022, Sec. 6.3 HFU). Full recompute of only a share of the layers
// (ParallelPlan::recompute_layers) adds that share of the rerun.
double megatron_hardware_flops(const ir::ModelSpec& model, std::int64_t seq, double sequences,
                               parallel::Recompute recompute, double recomputed_share = 1.0);
// The "6N" convention of MosaicML llm-foundry and FlashAttention (Dao 2023, Table 1):
// (6·N + 12·L·h·s) per token, N the parameter count, attention not halved for causal masks
// (6·L·h·s when `causal_halved`). Hardware FLOPs with full recompute use 8·N + 16·L·h·s
// (llm-foundry benchmarking README, "MFU and HFU"); with a share f of the layers recomputed
// (`recomputed_share`, 0 for model FLOPs or no recompute), (6 + 2f)·N + (12 + 4f)·L·h·s.
double six_n_flops(double parameters, const ir::ModelSpec& model, std::int64_t seq, double tokens,
                   bool causal_halved, double recomputed_share);
// The share of the model's layers that full recompute reruns under `plan` (0 without it).
double recomputed_layer_share(const parallel::ParallelPlan& plan, const ir::ModelSpec& model);

enum class FlopFamily { kMegatron, kSixN };
struct FlopConvention {
  FlopFamily family = FlopFamily::kMegatron;
  bool hardware = false;       // counts recompute FLOPs (HFU-like)
  bool causal_halved = false;  // attention scores halved for causal masks
};
// The convention a row's throughput numbers use, read from tflops_kind and notes by the
// vocabulary's flops-* lists (the 6N family, hardware FLOPs, causal halving); otherwise Megatron
// model FLOPs.
FlopConvention flop_convention(const PublishedRun& run, const config::ReadingVocabulary& vocab);
std::string describe(const FlopConvention& c);

// ---------------------------------------------------------------------------------------------
// Row → scenario

namespace reading {
struct RowFrameworks;  // validate_rules.h
}

// A row mapped to a scenario, or the reason it cannot be.
struct RowMapping {
  // Model, cluster, GPU count and plan; not yet checked against each other (config::check_plan
  // runs per candidate of the search in validate()).
  std::optional<config::Scenario> scenario;
  std::string skip_reason;               // set when scenario is empty
  std::vector<std::string> assumptions;  // every rule applied to fill a missing field
  bool recompute_given = true;           // false: recompute is chosen by the search
  bool micro_batch_given = true;         // false: micro-batch is chosen by the search
  bool zero_given = true;                // false: no ZeRO stage stated or implied by the framework
  bool max_seq_search = false;           // the row asks for the largest sequence that fits
  // The recompute modes the search tries when the row gives none: those the frameworks its
  // framework column names implement (their profiles), else none and full.
  std::vector<parallel::Recompute> recompute_modes;
  // The framework profiles the row names, as of its date (reading::named_frameworks).
  std::shared_ptr<const reading::RowFrameworks> frameworks;
};
// Builds the model, cluster and plan of a row (rules in docs/validation-rules.md). Does not
// simulate; the micro-batch and recompute of rows that omit them are provisional (see validate()).
RowMapping map_run(const PublishedRun& run);
// The same with GPU calibrations from `calibrations`, the framework profiles
// (config::load_all_frameworks) and the reading vocabulary (config::load_reading_vocabulary)
// loaded once for all rows.
RowMapping map_run(const PublishedRun& run, config::ComputeModelCache& calibrations,
                   const std::vector<config::FrameworkProfile>& frameworks,
                   const config::ReadingVocabulary& vocabulary);
// Sets a mapped row's scenario `sc` to ZeRO `zero_stage` (validate()'s search for a stage the row
// does not state): the gradient reduction of that stage, then the row's overrides again.
void restage(const PublishedRun& r, const RowMapping& m, int zero_stage, config::Scenario& sc,
             std::vector<std::string>& notes);

// ---------------------------------------------------------------------------------------------
// Comparison

enum class Metric {
  kIterationTime,      // seconds per iteration
  kTokensPerS,         // tokens per second, all GPUs
  kTokensPerSPerGpu,   // tokens per second per GPU
  kTflopsPerGpu,       // TFLOP/s per GPU in the row's FLOP convention
  kMfu,                // percent of the source's peak, model FLOPs of the row's convention
  kHfu,                // percent of the source's peak, hardware FLOPs
  kPeakMemory,         // bytes per GPU
  kMaxSeqLen,          // tokens
};

struct Comparison {
  Metric metric = Metric::kIterationTime;
  double predicted = 0;
  double measured = 0;
  // Signed relative error as throughput (or capacity): predicted/measured − 1 for rates, sizes
  // and lengths, measured/predicted − 1 for times; positive means trainsim is optimistic.
  double error = 0;
};

// The row's group for the summary by parallelism: "with-cp" (cp > 1), else "tp+pp" (tp or pp >
// 1), else "fsdp-only" (ZeRO-2/3 or FSDP sharding), else "dp-only".
std::string parallelism_kind(const parallel::ParallelPlan& plan);
// Source column up to its first " (" (drops the arXiv id, commit, …).
std::string short_source(const std::string& source);

struct RowResult {
  std::string run_id;
  int line = 0;
  std::string source;  // short_source
  std::string model;
  std::string gpu;
  std::int64_t num_gpus = 0;
  std::string parallelism;  // parallelism_kind, empty when not mapped
  bool fp8 = false;
  bool skipped = false;      // neither throughput nor memory could be compared
  bool held_out = false;     // PublishedRun::held_out
  std::int64_t overrides = 0;  // per-row overrides applied
  std::string reason;        // why skipped, or a note (predicted out of memory, …)
  std::optional<Comparison> throughput;
  std::optional<Comparison> memory;  // peak memory or largest sequence
  std::vector<std::string> assumptions;
  std::optional<config::Scenario> scenario;  // as simulated
  std::optional<RunResult> result;
  std::string convention;  // FLOP convention used when the metric is TFLOP/s or MFU
  std::optional<MetricInterval> interval;  // of the throughput metric (ValidateOptions::intervals)
};

struct ErrorStats {
  std::int64_t n = 0;
  double median_abs = 0;
  double p90_abs = 0;
  double mean_signed = 0;
  double max_abs = 0;
};
// Statistics of signed errors; percentiles interpolate linearly between order statistics
// (Hyndman and Fan 1996, definition 7, the numpy default).
ErrorStats error_stats(const std::vector<double>& errors);
double percentile(std::vector<double> values, double q);  // q in [0, 1]

struct ValidationSummary {
  ErrorStats throughput;
  ErrorStats memory;
  std::int64_t rows = 0;
  std::int64_t skipped = 0;
  std::int64_t overridden = 0;  // rows with a per-row override
  std::map<std::string, ErrorStats> by_source, by_gpu, by_parallelism;
  // Throughput errors of the public rows ("public") and of the held-out rows ("held-out"), each
  // present when it has a row.
  std::map<std::string, ErrorStats> by_set;
  // Of the rows with an interval: "all", and "public" and "held-out" when present; the
  // calibrated intervals and the inputs' uncertainty alone (driver/validate_intervals.h).
  std::map<std::string, Coverage> coverage, input_coverage;
};

struct ValidationReport {
  std::vector<RowResult> rows;
  ValidationSummary summary;
};

struct ValidateOptions {
  int threads = 1;  // rows simulated concurrently, each thread with its own Resources
  // Every row's host dispatch time per operation instead of the plan default (what-if runs and
  // tools/calibrate/fit_host_dispatch.py).
  std::optional<Duration> host_dispatch;
  // Gives every compared row an interval of its throughput metric (driver/intervals.h); none:
  // no intervals.
  const config::IntervalCalibration* intervals = nullptr;
  // Every simulation with RunOptions::nic_sharing (NIC bandwidth shared between network tasks of
  // different kinds in flight at once).
  bool nic_sharing = false;
};

// Maps, simulates and compares every row. Rows that omit the micro-batch or the recompute policy
// get the choice the source's framework would make (docs/validation-rules.md): the fastest
// simulated combination of recompute and micro-batch (powers of two) that fits. Never throws for a
// row: a row that cannot be simulated is reported as skipped with its reason.
ValidationReport validate(const std::vector<PublishedRun>& runs, const ValidateOptions& options = {});
ValidationSummary summarize(const std::vector<RowResult>& rows);

// The scenario each row's reading proposes (map_run: model, cluster, plan, the settings left to
// the search) with the rules and overrides that gave it, one `row { … }` per row in protobuf text
// format; no simulation. Checked in beside the validation files (FILE.scenarios.textproto) so
// that every per-row decision shows in diffs.
std::string validation_scenarios(const std::vector<PublishedRun>& runs);

std::string validation_text(const ValidationReport& report);
std::string validation_json(const ValidationReport& report);
std::string validation_csv(const ValidationReport& report);

}  // namespace ts::driver
