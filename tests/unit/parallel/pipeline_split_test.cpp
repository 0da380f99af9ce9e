// Balanced pipeline splits (sim/parallel/pipeline_split.h): the smallest largest stage cost, with
// the embedding and LM head on the end stages, checked against every split of small cases.
#include <catch2/catch.hpp>

#include <algorithm>
#include <functional>
#include <numeric>

#include "sim/parallel/pipeline_split.h"

using ts::parallel::balanced_stage_layers;

namespace {

// Largest stage cost of a split: n layers cost n, plus the extras on the end stages.
double largest_cost(const std::vector<std::int64_t>& v, double first, double last) {
  double worst = 0;
  for (std::size_t s = 0; s < v.size(); ++s) {
    double c = static_cast<double>(v[s]);
    if (s == 0) c += first;
    if (s + 1 == v.size()) c += last;
    worst = std::max(worst, c);
  }
  return worst;
}

// The smallest largest cost over every split of `layers` into `stages` parts of at least one.
double best_by_search(std::int64_t layers, std::int64_t stages, double first, double last) {
  double best = 1e300;
  std::vector<std::int64_t> v;
  std::function<void(std::int64_t)> go = [&](std::int64_t left) {
    if (static_cast<std::int64_t>(v.size()) + 1 == stages) {
      v.push_back(left);
      best = std::min(best, largest_cost(v, first, last));
      v.pop_back();
      return;
    }
    const std::int64_t rest = stages - static_cast<std::int64_t>(v.size()) - 1;
    for (std::int64_t n = 1; n <= left - rest; ++n) {
      v.push_back(n);
      go(left - n);
      v.pop_back();
    }
  };
  go(layers);
  return best;
}

}  // namespace

TEST_CASE("balanced split: an LM head of 1.1 layers takes a layer off the last stage") {
  // 80 layers on 3 stages: 27 + 27 + 26 + 1.1 = 27.1 is the smallest largest cost (any split
  // with 26 layers on stage 0 or 1 puts 28 elsewhere).
  CHECK(balanced_stage_layers(80, 3, 0.0, 1.1) == std::vector<std::int64_t>{27, 27, 26});
  // 80 on 4: the largest cost 21 (a stage of 21 layers) beats the even 20 + 1.1 = 21.1; the
  // layer left over from caps 20, 21, 21, 19 comes off the first of the costliest stages.
  CHECK(balanced_stage_layers(80, 4, 0.01, 1.1) == std::vector<std::int64_t>{20, 20, 21, 19});
  // Without extras the end stages give up the left-over layers first: caps 3,3,3,3 for 10.
  CHECK(balanced_stage_layers(10, 4, 0.0, 0.0) == std::vector<std::int64_t>{2, 3, 3, 2});
  // An LM head costing 2.5 layers: caps at the smallest cost 6.5 are 6, 6, 6, 4 (22 layers).
  CHECK(balanced_stage_layers(22, 4, 0.0, 2.5) == std::vector<std::int64_t>{6, 6, 6, 4});
}

TEST_CASE("balanced split: edge cases") {
  CHECK(balanced_stage_layers(80, 1, 0.3, 1.1) == std::vector<std::int64_t>{80});
  CHECK(balanced_stage_layers(4, 4, 0.0, 5.0) == std::vector<std::int64_t>{1, 1, 1, 1});
  CHECK(balanced_stage_layers(3, 4, 0.0, 0.0).empty());
  CHECK(balanced_stage_layers(3, 0, 0.0, 0.0).empty());
}

TEST_CASE("balanced split: as good as the best split, whole layers, at least one per stage") {
  for (std::int64_t layers = 1; layers <= 12; ++layers) {
    for (std::int64_t stages = 1; stages <= std::min<std::int64_t>(layers, 5); ++stages) {
      for (const double first : {0.0, 0.02, 0.7}) {
        for (const double last : {0.0, 1.1, 2.6}) {
          const auto v = balanced_stage_layers(layers, stages, first, last);
          INFO(layers << " layers, " << stages << " stages, extras " << first << ", " << last);
          REQUIRE(static_cast<std::int64_t>(v.size()) == stages);
          CHECK(std::accumulate(v.begin(), v.end(), std::int64_t{0}) == layers);
          CHECK(*std::min_element(v.begin(), v.end()) >= 1);
          CHECK(largest_cost(v, first, last) ==
                Approx(best_by_search(layers, stages, first, last)));
        }
      }
    }
  }
}
