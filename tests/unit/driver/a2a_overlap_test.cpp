// The MoE all-to-all overlap (--moe-a2a-overlap) reorders a plan's tasks and nothing else: the
// lowering of Qwen3-30B-A3B (cut to 4 layers, one pipeline stage, EP 4) has the same tasks with
// the same dependencies with and without it; the replay hides EP communication.
#include <catch2/catch.hpp>

#include <algorithm>
#include <tuple>
#include <vector>

#include "sim/driver/simulate.h"
#include "sim/parallel/lowering.h"
#include "tests/unit/driver/moe_scenario.h"

using namespace ts;

namespace {

using Key = std::tuple<int, int, int, int, std::int32_t, std::int32_t, std::int32_t, int, std::int64_t,
                       std::int64_t, std::int64_t>;

Key key_of(const parallel::Task& t) {
  return {static_cast<int>(t.kind),  static_cast<int>(t.stream), static_cast<int>(t.pass), static_cast<int>(t.part),
          t.layer,                   t.micro_batch,              t.ops,                    static_cast<int>(t.comm),
          t.bytes.count(),           t.alloc_at_start.count(),   t.free_at_end.count()};
}

// Every task with what it waits for, by content (task indices differ between orders).
std::vector<std::pair<Key, std::vector<Key>>> tasks_with_deps(const parallel::TaskGraph& g) {
  std::vector<std::pair<Key, std::vector<Key>>> out;
  for (const parallel::Task& t : g.tasks) {
    std::vector<Key> deps;
    for (std::uint32_t k = 0; k < t.dep_count; ++k) deps.push_back(key_of(g.tasks[g.deps[t.dep_begin + k]]));
    std::sort(deps.begin(), deps.end());
    out.emplace_back(key_of(t), std::move(deps));
  }
  std::sort(out.begin(), out.end());
  return out;
}

config::Scenario scenario(bool overlap) {
  config::Scenario sc = testing::small_moe("qwen3-30b-a3b", 4, 1, 16, 2048);
  sc.plan.moe_a2a_overlap = overlap;
  return sc;
}

}  // namespace

TEST_CASE("a2a overlap: the same tasks and dependencies, EP comm hidden") {
  const config::Scenario off = scenario(false);
  const config::Scenario on = scenario(true);
  parallel::LoweringOptions lo;
  const parallel::TaskGraph a = parallel::lower(off.model, off.plan, lo);
  const parallel::TaskGraph b = parallel::lower(on.model, on.plan, lo);
  REQUIRE(a.tasks.size() == b.tasks.size());
  CHECK(tasks_with_deps(a) == tasks_with_deps(b));
  // Not the same order: some forward task comes before a backward task of an earlier
  // micro-batch on the compute stream.
  bool reordered = false;
  for (std::size_t i = 0; i < a.tasks.size(); ++i) reordered = reordered || !(key_of(a.tasks[i]) == key_of(b.tasks[i]));
  CHECK(reordered);

  driver::Resources resources;
  const driver::RunResult ra = driver::simulate(off, driver::RunOptions{}, resources);
  const driver::RunResult rb = driver::simulate(on, driver::RunOptions{}, resources);
  REQUIRE(ra.status == driver::Status::kOk);
  REQUIRE(rb.status == driver::Status::kOk);
  const auto ep = runtime::TimeCategory::kExposedEp;
  INFO("step " << ra.iteration_time_s << " -> " << rb.iteration_time_s << " s, exposed EP "
               << ra.time[ep].seconds() << " -> " << rb.time[ep].seconds());
  CHECK(rb.time[ep] < ra.time[ep]);
  CHECK(rb.iteration_time_s <= ra.iteration_time_s);
}
