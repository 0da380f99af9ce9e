// Layers per pipeline stage balanced by cost (see pipeline_split.h).
#include "sim/parallel/pipeline_split.h"

#include <algorithm>
#include <cmath>

namespace ts::parallel {

std::vector<std::int64_t> balanced_stage_layers(std::int64_t layers, std::int64_t stages,
                                                double first_extra, double last_extra) {
  if (stages < 1 || layers < stages) return {};
  const auto count = static_cast<std::size_t>(stages);
  std::vector<double> extra(count, 0.0);
  extra.front() += std::max(0.0, first_extra);
  extra.back() += std::max(0.0, last_extra);
  // Costs compared with a tolerance: a stage of n layers "fits" a largest cost T when
  // n + extra <= T up to rounding.
  constexpr double kEps = 1e-9;
  const auto caps = [&](double t, std::vector<std::int64_t>& out) {
    std::int64_t sum = 0;
    for (std::size_t s = 0; s < count; ++s) {
      out[s] = static_cast<std::int64_t>(std::floor(t - extra[s] + kEps));
      if (out[s] < 1) return false;
      sum += out[s];
    }
    return sum >= layers;
  };
  // The smallest largest cost is n + extra[s] for some stage s and layer count n: try those
  // candidates in ascending order (binary search over them).
  std::vector<double> candidates;
  for (const double e : {extra.front(), extra.back(), 0.0}) {
    for (std::int64_t n = 1; n <= layers; ++n) candidates.push_back(static_cast<double>(n) + e);
  }
  std::sort(candidates.begin(), candidates.end());
  std::vector<std::int64_t> out(count, 0);
  std::size_t lo = 0, hi = candidates.size() - 1;  // the largest candidate is always feasible
  while (lo < hi) {
    const std::size_t mid = lo + (hi - lo) / 2;
    if (caps(candidates[mid], out)) {
      hi = mid;
    } else {
      lo = mid + 1;
    }
  }
  caps(candidates[lo], out);
  std::int64_t surplus = -layers;
  for (auto n : out) surplus += n;
  for (; surplus > 0; --surplus) {
    // The costliest stage with more than one layer; ties: first stage, last stage, lowest index.
    std::size_t pick = count;
    const auto better = [&](std::size_t a, std::size_t b) {  // a preferred over b
      const double ca = static_cast<double>(out[a]) + extra[a],
                   cb = static_cast<double>(out[b]) + extra[b];
      if (std::abs(ca - cb) > kEps) return ca > cb;
      const auto rank = [&](std::size_t s) { return s == 0 ? 0 : s + 1 == count ? 1 : 2; };
      if (rank(a) != rank(b)) return rank(a) < rank(b);
      return a < b;
    };
    for (std::size_t s = 0; s < count; ++s) {
      if (out[s] > 1 && (pick == count || better(s, pick))) pick = s;
    }
    --out[pick];
  }
  return out;
}

}  // namespace ts::parallel
