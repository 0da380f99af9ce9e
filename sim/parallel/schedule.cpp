#include "sim/parallel/schedule.h"

#include <algorithm>
#include <array>
#include <deque>
#include <utility>

#include "sim/base/diagnostic.h"

namespace ts::parallel {

const char* pipeline_kind_name(PipelineKind k) {
  switch (k) {
    case PipelineKind::kForward:
      return "F";
    case PipelineKind::kBackward:
      return "BW";
    case PipelineKind::kInputGrad:
      return "B";
    case PipelineKind::kWeightGrad:
      return "W";
  }
  return "?";
}

namespace {

using Blocks = std::vector<PipelineBlock>;

PipelineBlock block(PipelineKind kind, std::int64_t mb, std::int64_t chunk) {
  return {kind, static_cast<std::int32_t>(mb), static_cast<std::int32_t>(chunk), false};
}

// GPipe (Huang et al. 2019): every forward, then every backward.
Blocks gpipe(std::int64_t m) {
  Blocks out;
  for (std::int64_t i = 0; i < m; ++i) out.push_back(block(PipelineKind::kForward, i, 0));
  for (std::int64_t i = 0; i < m; ++i) out.push_back(block(PipelineKind::kBackward, i, 0));
  return out;
}

// Megatron's non-interleaved 1F1B: p − s − 1 warm-up forwards, then one forward and one backward
// alternately, then the remaining backwards (Narayanan et al. 2021, Fig. 4).
Blocks one_f_one_b(std::int64_t p, std::int64_t m, std::int64_t s) {
  Blocks out;
  const std::int64_t warmup = std::min(p - s - 1, m);
  std::int64_t f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back(block(PipelineKind::kForward, f, 0));
  for (; f < m; ++f, ++b) {
    out.push_back(block(PipelineKind::kForward, f, 0));
    out.push_back(block(PipelineKind::kBackward, b, 0));
  }
  for (; b < m; ++b) out.push_back(block(PipelineKind::kBackward, b, 0));
  return out;
}

// Interleaved 1F1B (Megatron-LM schedules.py, forward_backward_pipelining_with_interleaving):
// virtual micro-step k runs micro-batch (k / (p·v))·p + k mod p of model chunk (k / p) mod v
// forward, and of chunk v − 1 − (k / p) mod v backward; rank s warms up with 2(p − s − 1) +
// (v − 1)·p forward steps.
Blocks interleaved(std::int64_t p, std::int64_t m, std::int64_t v, std::int64_t s) {
  Blocks out;
  const std::int64_t total = m * v;
  auto mb_of = [&](std::int64_t k) { return (k / (p * v)) * p + k % p; };
  auto chunk_of = [&](std::int64_t k, bool fwd) {
    const std::int64_t c = (k / p) % v;
    return fwd ? c : v - 1 - c;
  };
  const std::int64_t warmup = std::min(total, 2 * (p - s - 1) + (v - 1) * p);
  std::int64_t f = 0, b = 0;
  auto forward = [&](std::int64_t k) {
    out.push_back(block(PipelineKind::kForward, mb_of(k), chunk_of(k, true)));
  };
  auto backward = [&](std::int64_t k) {
    out.push_back(block(PipelineKind::kBackward, mb_of(k), chunk_of(k, false)));
  };
  for (; f < warmup; ++f) forward(f);
  for (; f < total; ++f, ++b) {
    forward(f);
    backward(b);
  }
  for (; b < total; ++b) backward(b);
  return out;
}

// Zero-bubble H1 (Qi et al., ICLR 2024, Sec. 3.1 and Fig. 3): 1F1B's forwards and input
// gradients in 1F1B's order, each weight gradient run `s` blocks later on rank s (none later on
// the first rank, p − 1 on the last), so that the input gradients travel back without waiting
// for weight gradients and the W's fill the time 1F1B leaves idle. The activations of 1F1B
// (p − s micro-batches between F and B) plus the weight gradients' inputs of up to s more. On
// a balanced pipeline the idle time is (p − 1)(F + B − W) per rank with B the input-gradient
// time, (p − 1)(F + B' − 2W) with B' = B + W the whole backward (deepseek-ai/DualPipe README).
Blocks zb_h1(std::int64_t p, std::int64_t m, std::int64_t s) {
  Blocks out;
  const std::int64_t warmup = std::min(p - s - 1, m);
  std::int64_t f = 0, b = 0, w = 0;
  auto input_grad = [&] {
    out.push_back(block(PipelineKind::kInputGrad, b++, 0));
    if (b - w > s) out.push_back(block(PipelineKind::kWeightGrad, w++, 0));
  };
  for (; f < warmup; ++f) out.push_back(block(PipelineKind::kForward, f, 0));
  for (; f < m; ++f) {
    out.push_back(block(PipelineKind::kForward, f, 0));
    input_grad();
  }
  while (b < m) input_grad();
  while (w < m) out.push_back(block(PipelineKind::kWeightGrad, w++, 0));
  return out;
}

// DualPipeV (deepseek-ai/DualPipe dualpipev.py, DualPipeV.step; the "cut-in-half" DualPipe of
// Sea AI Lab): chunk 0 runs down the ranks, chunk 1 back up (the V), steps 1-8 as named there.
// The weight gradients of the backwards run "with zero bubble" go to a FIFO that the W blocks
// pop. Needs m ≥ 2p.
Blocks dualpipev(std::int64_t p, std::int64_t m, std::int64_t s) {
  Blocks out;
  std::int64_t next_f[2] = {0, 0};
  std::int64_t next_b[2] = {0, 0};
  std::deque<std::pair<std::int64_t, std::int64_t>> deferred;  // (micro-batch, chunk) of W's
  auto forward = [&](std::int64_t c) {
    out.push_back(block(PipelineKind::kForward, next_f[c]++, c));
  };
  auto backward = [&](std::int64_t c, bool zero_bubble) {
    if (zero_bubble) {
      deferred.emplace_back(next_b[c], c);
      out.push_back(block(PipelineKind::kInputGrad, next_b[c]++, c));
    } else {
      out.push_back(block(PipelineKind::kBackward, next_b[c]++, c));
    }
  };
  auto weight = [&] {
    SIM_ASSERT(!deferred.empty(), "DualPipeV pops a weight gradient that no backward deferred");
    out.push_back(
        block(PipelineKind::kWeightGrad, deferred.front().first, deferred.front().second));
    deferred.pop_front();
  };
  // F&B: the forward of one micro-batch beside the backward of another.
  auto overlapped = [&](std::int64_t fc, std::int64_t bc) {
    forward(fc);
    out.back().overlapped = true;
    backward(bc, false);
  };
  for (std::int64_t i = 0; i < (p - s - 1) * 2; ++i) forward(0);  // step 1: nF0
  for (std::int64_t i = 0; i < s + 1; ++i) {                      // step 2: nF0F1
    forward(0);
    forward(1);
  }
  for (std::int64_t i = 0; i < p - s - 1; ++i) {  // step 3: nB1W1F1
    backward(1, true);
    weight();
    forward(1);
  }
  for (std::int64_t i = 0; i < m - 2 * p + s + 1; ++i) {  // step 4: nF0B1F1B0
    if (i == 0 && s == p - 1) {
      // The turn of the V: not overlapped, to shorten the bubble (as dualpipev.py does).
      forward(0);
      backward(1, false);
    } else {
      overlapped(0, 1);
    }
    overlapped(1, 0);
  }
  for (std::int64_t i = 0; i < p - s - 1; ++i) {  // step 5: nB1F1B0
    backward(1, false);
    overlapped(1, 0);
  }
  bool zero_bubble = false;  // step 6: nB1B0, the second half with zero bubble
  const std::int64_t step6 = s + 1;
  for (std::int64_t i = 0; i < step6; ++i) {
    if (i == step6 / 2 && s % 2 == 1) zero_bubble = true;
    backward(1, zero_bubble);
    if (i == step6 / 2 && s % 2 == 0) zero_bubble = true;
    backward(0, zero_bubble);
  }
  for (std::int64_t i = 0; i < p - s - 1; ++i) {  // step 7: nWB0
    weight();
    backward(0, true);
  }
  for (std::int64_t i = 0; i < s + 1; ++i) weight();  // step 8: nW
  SIM_ASSERT(deferred.empty(), "DualPipeV left weight gradients undone");
  return out;
}

// ZB-V (Qi et al., "Pipeline Parallelism with Controllable Memory", NeurIPS 2024: the V-shaped
// zero-bubble schedule): two chunks per rank in a V as DualPipeV places them, each backward split
// into B and W, the order found by the greedy construction of sail-sg/zero-bubble-pipeline-
// parallelism (zerobubble/scheduler/zbv.py, PipelineGraph.try_v_schedule) with unit costs
// F = B = W = 1 and free transfers, under 1F1B's activation memory: a forward adds 2 units, a B
// and a W free 1 each, at most 4p units per rank (2p chunk forwards in flight). Of its four
// variants (whether W's fill the waits before B's, before F's), the one whose most idle rank
// idles least.
class ZbV {
 public:
  ZbV(std::int64_t p, std::int64_t m) : p_(p), m_(m) {}

  std::vector<Blocks> run() {
    std::vector<Blocks> best;
    std::int64_t least = -1;
    for (const bool fill_b : {true, false}) {
      for (const bool fill_f : {true, false}) {
        const std::int64_t bubble = attempt(fill_f, fill_b);
        if (least < 0 || bubble < least) {
          least = bubble;
          best = sched_;
        }
      }
    }
    return best;
  }

 private:
  static constexpr std::int64_t kCost = 1;
  static constexpr std::array<std::int64_t, 3> kMem = {2, -1, -1};

  std::size_t id(int cat, int chunk, std::int64_t stage, std::int64_t micro) const {
    return static_cast<std::size_t>(((cat * 2 + chunk) * p_ + stage) * m_ + micro);
  }
  std::int64_t& count(std::int64_t stage, int k) { return count_[static_cast<std::size_t>(stage * 6 + k)]; }
  std::int64_t end_at(std::int64_t i) const {
    // zbv.py reads end_time[-1], the last entry, where there is no dependency.
    return i < 0 ? end_.back() : end_[static_cast<std::size_t>(i)];
  }
  std::int64_t max_bubble() const { return *std::max_element(bubble_.begin(), bubble_.end()); }
  bool waits(std::int64_t stage) const { return !pending_[static_cast<std::size_t>(stage)].empty(); }

  void put(int cat, int chunk, std::int64_t stage) {
    const auto st = static_cast<std::size_t>(stage);
    std::int64_t t = cur_[st] + kCost;
    const std::int64_t no_bubble = t;
    const std::int64_t c = count(stage, cat * 2 + chunk);
    SIM_ASSERT(c < m_, "ZB-V schedules a block past the last micro-batch");
    if (chunk == 1 && cat < 2 && stage < p_ - 1) t = std::max(t, end_[id(cat, chunk, stage + 1, c)] + kCost);
    if (chunk == 0 && cat < 2 && stage > 0) t = std::max(t, end_[id(cat, chunk, stage - 1, c)] + kCost);
    if (count(stage, 0) > 0) bubble_[st] += t - no_bubble;
    end_[id(cat, chunk, stage, c)] = t;
    cur_[st] = t;
    mem_[st] += kMem[static_cast<std::size_t>(cat)];
    // zbv.py numbers a backward's chunk from the top of the V: its chunk 1 is chunk 0 here.
    static constexpr PipelineKind kKinds[3] = {PipelineKind::kForward, PipelineKind::kInputGrad,
                                               PipelineKind::kWeightGrad};
    sched_[st].push_back(block(kKinds[cat], c, cat == 0 ? chunk : 1 - chunk));
    if (cat == 1) pending_[st].emplace_back(chunk, c);
    ++count(stage, cat * 2 + chunk);
  }
  void put_w(std::int64_t stage) {
    auto& q = pending_[static_cast<std::size_t>(stage)];
    SIM_ASSERT(!q.empty(), "ZB-V runs a weight gradient that no B left");
    const int chunk = q.front().first;
    q.pop_front();
    put(2, chunk, stage);
  }
  // Weight gradients into the wait for the next block's input (entry `fa` of end_), and one more
  // where that wait exceeds the idle time this rank may still take.
  void fill(std::int64_t i, std::int64_t fa, bool extra) {
    const auto st = static_cast<std::size_t>(i);
    while (waits(i) && fa >= 0 && end_at(fa) >= cur_[st] + kCost) put_w(i);
    if (waits(i) && end_at(fa) - cur_[st] > max_bubble() - bubble_[st] && extra) put_w(i);
  }

  std::int64_t attempt(bool fill_f, bool fill_b) {
    const auto n = static_cast<std::size_t>(p_);
    count_.assign(n * 6, 0);
    end_.assign(static_cast<std::size_t>(6 * p_ * m_), -1);
    cur_.assign(n, 0);
    mem_.assign(n, 0);
    bubble_.assign(n, 0);
    pending_.assign(n, {});
    sched_.assign(n, {});
    const std::int64_t max_mem = kMem[0] * p_ * 2;
    auto mem = [&](std::int64_t i) { return mem_[static_cast<std::size_t>(i)]; };
    for (std::int64_t i = 0; i < p_; ++i) put(0, 0, i);
    for (std::int64_t i = p_ - 1; i >= 0; --i) {
      if (i == p_ - 1) {
        put(0, 1, i);
        continue;
      }
      const std::int64_t until = end_[id(0, 1, i + 1, 0)];
      while (mem(i) + kMem[0] * (2 + i * 2) <= max_mem && cur_[static_cast<std::size_t>(i)] + kCost <= until &&
             count(i, 0) < m_) {
        for (std::int64_t j = 0; j <= i; ++j) put(0, 0, j);
      }
      put(0, 1, i);
    }
    int chunk = 0;
    for (std::int64_t i = 1; i < p_; ++i) {
      while (count(i, 0) + count(i, 1) < count(i - 1, 0) + count(i - 1, 1) ||
             (count(i, 1) <= count(i - 1, 1) && count(i - 1, 1) < m_)) {
        for (std::int64_t j = p_ - 1; j >= i; --j) {
          if (count(j, chunk) < m_) put(0, chunk, j);
        }
        chunk = 1 - chunk;
      }
    }
    for (std::int64_t step = 0; step < 2 * m_; ++step) {
      for (std::int64_t i = 0; i < p_; ++i) {
        while (mem(i) + kMem[1] > max_mem) put_w(i);
      }
      std::vector<std::int64_t> b0, b1;
      for (std::int64_t i = 0; i < p_; ++i) {
        if (count(i, 3) >= count(i, 2)) {
          b0.push_back(i);
        } else if (i == p_ - 1 || end_[id(1, 1, i + 1, count(i, 3))] >= 0 || count(i, 2) >= m_) {
          b1.push_back(i);
        } else {
          b0.push_back(i);
        }
      }
      std::vector<std::pair<std::int64_t, int>> order;  // (rank, chunk) of this round's B's
      for (auto it = b1.rbegin(); it != b1.rend(); ++it) order.emplace_back(*it, 1);
      for (const std::int64_t i : b0) order.emplace_back(i, 0);
      for (const auto& [i, c] : order) {
        std::int64_t fa = -1;
        if (c == 1 && i < p_ - 1) fa = static_cast<std::int64_t>(id(1, 1, i + 1, count(i, 3)));
        if (c == 0 && i > 0) fa = static_cast<std::int64_t>(id(1, 0, i - 1, count(i, 2)));
        fill(i, fa, c == 1 || fill_b);
        put(1, c, i);
      }
      for (std::int64_t i = 0; i < p_; ++i) {
        if (count(i, 1) >= m_) continue;
        int item = -1;
        if (count(i, 1) >= count(i, 0)) {
          item = 0;
        } else if (i == p_ - 1 || end_[id(0, 1, i + 1, count(i, 1))] >= 0) {
          item = 1;
        } else if (count(i, 0) < m_ && (i == 0 || end_[id(0, 0, i - 1, count(i, 0))] >= 0)) {
          item = 0;
        }
        if (item < 0) continue;
        while (mem(i) + kMem[0] > max_mem) put_w(i);
        std::int64_t fa = -1;
        if (item == 0 && i > 0) fa = static_cast<std::int64_t>(id(0, 0, i - 1, count(i, 0)));
        if (item == 1 && i < p_ - 1) fa = static_cast<std::int64_t>(id(0, 1, i + 1, count(i, 1)));
        fill(i, fa, fill_f);
        put(0, item, i);
      }
    }
    for (std::int64_t i = 0; i < p_; ++i) {
      while (waits(i)) put_w(i);
    }
    return max_bubble();
  }

  std::int64_t p_, m_;
  std::vector<std::int64_t> count_, end_, cur_, mem_, bubble_;
  std::vector<std::deque<std::pair<int, std::int64_t>>> pending_;
  std::vector<Blocks> sched_;
};

}  // namespace

std::vector<PipelineBlock> pipeline_blocks(const ParallelPlan& plan, std::int64_t stage) {
  const std::int64_t p = plan.pp;
  const std::int64_t m = plan.num_micro_batches();
  SIM_ASSERT(stage >= 0 && stage < p, "pipeline stage out of range");
  SIM_ASSERT(m >= 1, "no micro-batch in the iteration");
  switch (plan.schedule) {
    case Schedule::kGpipe:
      return gpipe(m);
    case Schedule::k1F1B:
      return one_f_one_b(p, m, stage);
    case Schedule::kInterleaved:
      if (plan.model_chunks() == 1) return one_f_one_b(p, m, stage);
      return interleaved(p, m, plan.model_chunks(), stage);
    case Schedule::kZbH1:
      return zb_h1(p, m, stage);
    case Schedule::kZbV:
      return ZbV(p, m).run()[static_cast<std::size_t>(stage)];
    case Schedule::kDualPipeV:
      SIM_ASSERT(m >= 2 * p, "DualPipeV needs at least 2·pp micro-batches");
      return dualpipev(p, m, stage);
  }
  return {};
}

std::vector<std::vector<PipelineBlock>> pipeline_programs(const ParallelPlan& plan) {
  if (plan.schedule == Schedule::kZbV) {
    SIM_ASSERT(plan.num_micro_batches() >= 1, "no micro-batch in the iteration");
    return ZbV(plan.pp, plan.num_micro_batches()).run();
  }
  std::vector<std::vector<PipelineBlock>> out;
  for (std::int64_t s = 0; s < plan.pp; ++s) out.push_back(pipeline_blocks(plan, s));
  return out;
}

std::int64_t max_in_flight(const std::vector<PipelineBlock>& blocks) {
  std::int64_t now = 0, most = 0;
  for (const PipelineBlock& b : blocks) {
    switch (b.kind) {
      case PipelineKind::kForward:
        most = std::max(most, ++now);
        break;
      case PipelineKind::kBackward:
      case PipelineKind::kInputGrad:
        --now;
        break;
      case PipelineKind::kWeightGrad:
        break;
    }
  }
  return most;
}

}  // namespace ts::parallel
