// Pruned sweeps: the best k plans exactly, simulating only the plans whose bound can still
// place them among the best.
#include <algorithm>
#include <chrono>
#include <limits>
#include <numeric>

#include "sim/driver/plan_bound.h"
#include "sim/driver/sweep.h"

namespace ts::driver {
namespace {

// Plans simulated per batch: the k-th best tokens/s is updated between batches. A fixed size
// (not a multiple of the threads) keeps the plans simulated the same for any thread count.
constexpr std::size_t kBatch = 128;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

SweepOutcome search_sweep(const SweepSpec& spec, const SweepOptions& options, std::size_t k) {
  SweepOutcome all;
  const int threads = sweep_threads(options.threads);
  all.enumeration = enumerate_plans(spec, threads);
  const auto& plans = all.enumeration.plans;
  PruneStats prune;
  const auto t0 = std::chrono::steady_clock::now();
  auto cache =
      options.compute_cache ? options.compute_cache : std::make_shared<config::ComputeModelCache>();
  // An unknown attention kernel is the user's error, reported once (InputError).
  if (!spec.base.attention_kernel.empty()) cache->get(spec.cluster.gpu, spec.base.attention_kernel);

  // Bounds, each thread over every threads-th plan with its own bounder.
  std::vector<PlanBound> bounds(plans.size());
  {
    std::vector<std::int64_t> shapes(static_cast<std::size_t>(threads), 0);
    run_workers(threads, [&](int t) {
      PlanBounder bounder(spec.model, spec.cluster, spec.num_gpus, cache);
      for (std::size_t i = static_cast<std::size_t>(t); i < plans.size();
           i += static_cast<std::size_t>(threads)) {
        try {
          bounds[i] = bounder.bound(plans[i]);
        } catch (const std::exception&) {
          // No bound: the plan is simulated, and its row says what went wrong, as in an
          // exhaustive sweep.
          bounds[i].tokens_per_s = std::numeric_limits<double>::infinity();
        }
      }
      shapes[static_cast<std::size_t>(t)] = static_cast<std::int64_t>(bounder.shapes());
    });
    prune.shapes = *std::max_element(shapes.begin(), shapes.end());
  }
  prune.bound_wall_s = seconds_since(t0);

  // Candidates from the highest bound on tokens/s down (ties: lower plan id first).
  std::vector<std::int64_t> order;
  order.reserve(plans.size());
  for (std::size_t i = 0; i < plans.size(); ++i) {
    if (bounds[i].static_oom) {
      ++prune.static_oom;
    } else if (bounds[i].activation_oom) {
      ++prune.activation_oom;
    } else {
      order.push_back(static_cast<std::int64_t>(i));
    }
  }
  std::stable_sort(order.begin(), order.end(), [&](std::int64_t a, std::int64_t b) {
    return bounds[static_cast<std::size_t>(a)].tokens_per_s >
           bounds[static_cast<std::size_t>(b)].tokens_per_s;
  });

  SweepOptions o;
  o.threads = threads;
  o.compute_cache = cache;
  o.resource_pool =
      options.resource_pool ? options.resource_pool : std::make_shared<ResourcePool>(cache);
  o.replay_memo = options.replay_memo ? options.replay_memo : std::make_shared<ReplayMemo>();
  o.enumeration = &all.enumeration;
  o.progress_interval_s = options.progress_interval_s;
  // The best k tokens/s of the plans that fit so far, in descending order.
  std::vector<double> best;
  std::size_t next = 0;
  const auto threshold = [&] { return best.size() < k ? 0.0 : best[k - 1]; };
  // A plan is pruned only when its bound is below the k-th best: with a bound equal to it the
  // plan could tie and rank first by its lower id.
  const auto prunable = [&](std::int64_t id) {
    return bounds[static_cast<std::size_t>(id)].tokens_per_s < threshold();
  };
  const auto progress = [&](const SweepProgress& p) {
    SweepProgress q = p;
    q.pruned_search = true;
    q.done = all.stats.simulated + p.done;
    q.replayed = all.stats.replayed + p.replayed;
    q.best_tokens_per_s = std::max(best.empty() ? 0.0 : best.front(), p.best_tokens_per_s);
    q.elapsed_s = seconds_since(t0);
    // Not pruned yet: the plans of this batch and those after it whose bound is not below the
    // k-th best so far (an upper bound on what is left). The search's last report, with done =
    // total, closes the progress line.
    const auto rest = order.begin() + static_cast<std::ptrdiff_t>(next);
    const auto left =
        std::partition_point(rest, order.end(), [&](std::int64_t id) { return !prunable(id); }) -
        rest;
    q.total = std::max(q.done + (p.total - p.done) + static_cast<std::int64_t>(left), q.done + 1);
    q.pruned = static_cast<std::int64_t>(plans.size()) - q.total;
    options.progress(q);
  };
  if (options.progress) o.progress = progress;
  std::vector<std::int64_t> batch;
  while (next < order.size() && !prunable(order[next])) {
    batch.clear();
    while (next < order.size() && batch.size() < kBatch && !prunable(order[next]))
      batch.push_back(order[next++]);
    std::sort(batch.begin(), batch.end());
    o.only = &batch;
    SweepOutcome r = run_sweep(spec, o);
    ++prune.rounds;
    auto& st = all.stats;
    const auto& rs = r.stats;
    st.simulated += rs.simulated;
    st.replayed += rs.replayed;
    st.early_oom += rs.early_oom;
    st.unsupported += rs.unsupported;
    st.ok += rs.ok;
    st.oom += rs.oom;
    st.threads = std::max(st.threads, rs.threads);
    if (rs.fastest.plan_id >= 0 &&
        (st.fastest.plan_id < 0 || rs.fastest.wall_s < st.fastest.wall_s))
      st.fastest = rs.fastest;
    if (rs.slowest.plan_id >= 0 &&
        (st.slowest.plan_id < 0 || rs.slowest.wall_s > st.slowest.wall_s))
      st.slowest = rs.slowest;
    for (auto& rec : r.records) {
      if (rec.status == "ok") {
        best.insert(std::upper_bound(best.begin(), best.end(), rec.tokens_per_s, std::greater<>()),
                    rec.tokens_per_s);
        if (best.size() > k) best.pop_back();
      }
      all.records.push_back(std::move(rec));
    }
  }
  prune.by_bound = static_cast<std::int64_t>(order.size() - next);
  all.stats.in_shard = static_cast<std::int64_t>(plans.size());
  all.stats.wall_s = seconds_since(t0);
  std::sort(all.records.begin(), all.records.end(),
            [](const SweepRecord& a, const SweepRecord& b) { return a.plan_id < b.plan_id; });
  if (options.progress) {
    SweepProgress q;
    q.pruned_search = true;
    q.done = q.total = all.stats.simulated;
    q.replayed = all.stats.replayed;
    q.pruned = prune.static_oom + prune.activation_oom + prune.by_bound;
    q.best_tokens_per_s = best.empty() ? 0.0 : best.front();
    q.elapsed_s = all.stats.wall_s;
    options.progress(q);
  }
  all.pruned = prune;
  return all;
}

}  // namespace ts::driver
