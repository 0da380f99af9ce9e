// Plan ranking against measured runs: vTrain's 1,440 single-node Megatron-DeepSpeed runs
// (tests/validation/vtrain-single-node.csv; 8 GPT models, 180 plans each: tp, pp, dp, micro-batch
// and global batch on 2-8 A100s). A sweep is useful only if it orders plans as the cluster did:
// per model, the Spearman rank correlation of predicted and measured iteration times, and the
// plan with the highest measured throughput per GPU among the predicted best three.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

#include "sim/driver/validate.h"
#include "tests/unit/config/config_test_util.h"

using namespace ts;

namespace {

// Ranks from 0, ties at their mean rank.
std::vector<double> ranks(const std::vector<double>& v) {
  std::vector<std::size_t> order(v.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) { return v[a] < v[b]; });
  std::vector<double> r(v.size());
  for (std::size_t i = 0; i < order.size();) {
    std::size_t j = i;
    while (j + 1 < order.size() && v[order[j + 1]] == v[order[i]]) ++j;
    for (std::size_t k = i; k <= j; ++k) r[order[k]] = 0.5 * static_cast<double>(i + j);
    i = j + 1;
  }
  return r;
}

// Spearman's rho: Pearson's correlation of the ranks.
double spearman(const std::vector<double>& a, const std::vector<double>& b) {
  const auto ra = ranks(a), rb = ranks(b);
  const double n = static_cast<double>(a.size());
  const double ma = std::accumulate(ra.begin(), ra.end(), 0.0) / n;
  const double mb = std::accumulate(rb.begin(), rb.end(), 0.0) / n;
  double num = 0, da = 0, db = 0;
  for (std::size_t i = 0; i < ra.size(); ++i) {
    num += (ra[i] - ma) * (rb[i] - mb);
    da += (ra[i] - ma) * (ra[i] - ma);
    db += (rb[i] - mb) * (rb[i] - mb);
  }
  return num / std::sqrt(da * db);
}

// The position of the measured best (largest `measured`) in the order of `predicted`, largest
// first.
std::size_t predicted_place_of_best(const std::vector<double>& predicted,
                                    const std::vector<double>& measured) {
  const auto best = static_cast<std::size_t>(std::max_element(measured.begin(), measured.end()) -
                                             measured.begin());
  std::size_t place = 0;
  for (std::size_t i = 0; i < predicted.size(); ++i)
    place += predicted[i] > predicted[best] ? 1 : 0;
  return place;
}

struct Plans {
  std::vector<double> predicted_s, measured_s;              // iteration times
  std::vector<double> predicted_per_gpu, measured_per_gpu;  // tokens/s per GPU
};

}  // namespace

TEST_CASE("ranking: Spearman spot checks") {
  CHECK(spearman({1, 2, 3, 4}, {10, 20, 30, 40}) == Approx(1.0));
  CHECK(spearman({1, 2, 3, 4}, {4, 3, 2, 1}) == Approx(-1.0));
  // One swapped pair of four: 1 - 6·2/(4·15) = 0.8.
  CHECK(spearman({1, 2, 3, 4}, {1, 3, 2, 4}) == Approx(0.8));
  CHECK(predicted_place_of_best({5, 9, 7}, {1, 2, 3}) == 1);
}

TEST_CASE("ranking: vTrain single-node plans are ordered as measured") {
  const auto runs = driver::read_published_runs(config::test::source_dir() /
                                                "tests/validation/vtrain-single-node.csv");
  REQUIRE(runs.size() == 1440);
  driver::ValidateOptions options;
  options.threads = 2;
  const driver::ValidationReport report = driver::validate(runs, options);
  std::map<std::string, Plans> by_model;
  // Plans of one job (model, global batch, GPUs): the choice a sweep makes.
  std::map<std::tuple<std::string, std::int64_t, std::int64_t>, Plans> by_job;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& row = report.rows[i];
    REQUIRE(row.throughput);
    REQUIRE(row.throughput->metric == driver::Metric::kIterationTime);
    const auto& run = runs[i];
    const double tokens_per_gpu =
        static_cast<double>(*run.global_batch * *run.seq_len) / static_cast<double>(*run.n_gpus);
    for (Plans* p : {&by_model[run.model], &by_job[{run.model, *run.global_batch, *run.n_gpus}]}) {
      p->predicted_s.push_back(row.throughput->predicted);
      p->measured_s.push_back(row.throughput->measured);
      p->predicted_per_gpu.push_back(tokens_per_gpu / row.throughput->predicted);
      p->measured_per_gpu.push_back(tokens_per_gpu / row.throughput->measured);
    }
  }
  REQUIRE(by_model.size() == 8);
  for (const auto& [model, p] : by_model) {
    INFO(model);
    REQUIRE(p.predicted_s.size() == 180);
    // Measured at this version: 0.984-0.991.
    CHECK(spearman(p.predicted_s, p.measured_s) >= 0.97);
    // Measured: the best plan predicted first (hidden 1024) or third (hidden 2048).
    CHECK(predicted_place_of_best(p.predicted_per_gpu, p.measured_per_gpu) < 3);
  }
  // Within each job of at least three plans: measured at this version, 125 of 136 jobs have their
  // best measured plan among the predicted best three (the misses are jobs of global batch 4 or 8
  // on as many GPUs, predicted 4th to 6th).
  std::int64_t jobs = 0, hits = 0;
  for (const auto& [job, p] : by_job) {
    if (p.predicted_s.size() < 3) continue;
    ++jobs;
    hits += predicted_place_of_best(p.predicted_per_gpu, p.measured_per_gpu) < 3 ? 1 : 0;
  }
  CHECK(jobs == 136);
  CHECK(static_cast<double>(hits) >= 0.85 * static_cast<double>(jobs));
}

// Multi-node plans: BigScience's throughput search before the BLOOM-176B run (tests/validation/
// multinode-ranking.csv, from bigscience-workshop/bigscience train/tr11-176B-ml/
// chronicles-prequel.md): 39 plans of six series (one model measured on one day each) on 48 nodes
// of 8 A100 80GB with 4 Omni-Path 100 Gb/s links per node, so two GPUs share each NIC; TP 2-8 inside
// a node, PP 2-24, DP 4-24, micro-batch 1-8. A check, never fitted: no constant is tuned to it.
TEST_CASE("ranking: multi-node BLOOM search plans") {
  const auto runs = driver::read_published_runs(config::test::source_dir() /
                                                "tests/validation/multinode-ranking.csv");
  REQUIRE(runs.size() == 39);
  driver::ValidateOptions options;
  options.threads = 2;
  const driver::ValidationReport report = driver::validate(runs, options);
  std::map<std::string, Plans> by_series;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    const auto& row = report.rows[i];
    INFO(runs[i].run_id << " " << row.reason);
    REQUIRE(row.throughput);
    const auto& run = runs[i];
    const double tokens_per_gpu =
        static_cast<double>(*run.global_batch * *run.seq_len) / static_cast<double>(*run.n_gpus);
    Plans& p = by_series[run.model + " | " + run.source_table];
    p.predicted_s.push_back(row.throughput->predicted);
    p.measured_s.push_back(row.throughput->measured);
    p.predicted_per_gpu.push_back(tokens_per_gpu / row.throughput->predicted);
    p.measured_per_gpu.push_back(tokens_per_gpu / row.throughput->measured);
  }
  REQUIRE(by_series.size() == 6);
  // Floors 0.1 below the values measured at this version (a regression guard: the ranking is far
  // from vTrain's single-node 0.98; see docs/validation.md, "Plan ranking"). Measured per series,
  // with the rows' CUDA_LAUNCH_BLOCKING=1 (multinode-ranking.overrides.textproto; before it in
  // brackets): 02-21 (7 plans) 0.714 (0.179), 02-23 (3) 0.5 (-0.5), 02-25 (20) 0.692 (0.510),
  // 02-26 (3) 1.0 (0.5), 02-28 (3 and 3) 1.0; all 39 plans pooled (one job: tokens/s per GPU on
  // 384 GPUs) 0.757 (0.568).
  const std::map<std::string, double> floors = {{"'48 node contenders' (02-21)", 0.614},
                                                {"'GBS Variations' (three tables) (02-25)", 0.592}};
  // Where the best measured plan is predicted (1 = first), at most: 02-21 1st (2nd before);
  // 02-25 4th (3rd before): its best, DP 8 TP 4 PP 12 micro-batch 2 (98.9 tokens/s per GPU), is
  // predicted 0.3 % behind DP 16 TP 2 PP 12, and the plan predicted first, DP 16 TP 4 PP 6,
  // measured 97.8, 1.1 % below the best (so also before).
  const std::map<std::string, std::size_t> places = {
      {"'48 node contenders' (02-21)", 1}, {"'GBS Variations' (three tables) (02-25)", 4}};
  std::vector<double> all_predicted, all_measured;
  for (const auto& [series, p] : by_series) {
    const double rho = spearman(p.predicted_per_gpu, p.measured_per_gpu);
    const auto place = predicted_place_of_best(p.predicted_per_gpu, p.measured_per_gpu);
    INFO(series << ": " << p.predicted_s.size() << " plans, Spearman " << rho
                << ", best measured plan predicted " << place + 1);
    all_predicted.insert(all_predicted.end(), p.predicted_per_gpu.begin(), p.predicted_per_gpu.end());
    all_measured.insert(all_measured.end(), p.measured_per_gpu.begin(), p.measured_per_gpu.end());
    for (const auto& [table, floor] : floors) {
      if (series.ends_with(table)) CHECK(rho >= floor);
    }
    // The 3-plan series make no claim here. Regret: what choosing the predicted best plan loses
    // against the best measured one (measured 0 % at 02-21, 1.1 % at 02-25).
    for (const auto& [table, most] : places) {
      if (!series.ends_with(table)) continue;
      CHECK(place < most);
      const auto& pred = p.predicted_per_gpu;
      const auto chosen =
          static_cast<std::size_t>(std::max_element(pred.begin(), pred.end()) - pred.begin());
      const double best = *std::max_element(p.measured_per_gpu.begin(), p.measured_per_gpu.end());
      CHECK(p.measured_per_gpu[chosen] >= 0.98 * best);
    }
  }
  CHECK(spearman(all_predicted, all_measured) >= 0.657);
}
