#include "sim/parallel/schedule.h"

#include <algorithm>
#include <deque>
#include <limits>
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
void gpipe(std::int64_t m, Blocks& out) {
  out.clear();
  out.reserve(static_cast<std::size_t>(2 * m));
  for (std::int64_t i = 0; i < m; ++i) out.push_back(block(PipelineKind::kForward, i, 0));
  for (std::int64_t i = 0; i < m; ++i) out.push_back(block(PipelineKind::kBackward, i, 0));
}

// Megatron's non-interleaved 1F1B: p − s − 1 warm-up forwards, then one forward and one backward
// alternately, then the remaining backwards (Narayanan et al. 2021, Fig. 4). With `paired` (the
// MoE all-to-all overlap, only without pipelining: Megatron-Core's
// combined_1f1b_schedule_for_no_pipelining) one more warm-up forward, and each steady-phase
// forward runs beside the backward after it, of an earlier micro-batch.
void one_f_one_b(std::int64_t p, std::int64_t m, std::int64_t s, bool paired, Blocks& out) {
  out.clear();
  out.reserve(static_cast<std::size_t>(2 * m));
  const std::int64_t warmup = std::min(p - s - 1 + (paired ? 1 : 0), m);
  std::int64_t f = 0, b = 0;
  for (; f < warmup; ++f) out.push_back(block(PipelineKind::kForward, f, 0));
  for (; f < m; ++f, ++b) {
    out.push_back(block(PipelineKind::kForward, f, 0));
    out.back().overlapped = paired;
    out.push_back(block(PipelineKind::kBackward, b, 0));
  }
  for (; b < m; ++b) out.push_back(block(PipelineKind::kBackward, b, 0));
}

// Interleaved 1F1B (Megatron-LM schedules.py, forward_backward_pipelining_with_interleaving):
// virtual micro-step k runs micro-batch (k / (p·v))·p + k mod p of model chunk (k / p) mod v
// forward, and of chunk v − 1 − (k / p) mod v backward; rank s warms up with 2(p − s − 1) +
// (v − 1)·p forward steps. With `paired` (the MoE all-to-all overlap, Megatron-Core's
// forward_backward_pipelining_with_interleaving under overlap_moe_expert_parallel_comm: one more
// warm-up step, so that a step's forward and backward are of different micro-batches even on
// the last rank) each steady-phase forward runs beside the backward after it.
void interleaved(std::int64_t p, std::int64_t m, std::int64_t v, std::int64_t s, bool paired, Blocks& out) {
  out.clear();
  const std::int64_t total = m * v;
  out.reserve(static_cast<std::size_t>(2 * total));
  // Virtual micro-step k as (k / (p·v), (k / p) mod v, k mod p), stepped without dividing.
  struct Step {
    std::int64_t group = 0, chunk = 0, lane = 0;
    void next(std::int64_t p, std::int64_t v) {
      if (++lane < p) return;
      lane = 0;
      if (++chunk < v) return;
      chunk = 0;
      ++group;
    }
  };
  const std::int64_t warmup = std::min(total, 2 * (p - s - 1) + (v - 1) * p + (paired ? 1 : 0));
  Step fs, bs;
  auto forward = [&] {
    out.push_back(block(PipelineKind::kForward, fs.group * p + fs.lane, fs.chunk));
    fs.next(p, v);
  };
  auto backward = [&] {
    out.push_back(block(PipelineKind::kBackward, bs.group * p + bs.lane, v - 1 - bs.chunk));
    bs.next(p, v);
  };
  std::int64_t f = 0, b = 0;
  for (; f < warmup; ++f) forward();
  for (; f < total; ++f, ++b) {
    forward();
    out.back().overlapped = paired;
    backward();
  }
  for (; b < total; ++b) backward();
}

// Zero-bubble H1 (Qi et al., ICLR 2024, Sec. 3.1 and Fig. 3): 1F1B's forwards and input
// gradients in 1F1B's order, each weight gradient run `s` blocks later on rank s (none later on
// the first rank, p − 1 on the last), so that the input gradients travel back without waiting
// for weight gradients and the W's fill the time 1F1B leaves idle. The activations of 1F1B
// (p − s micro-batches between F and B) plus the weight gradients' inputs of up to s more. On
// a balanced pipeline the idle time is (p − 1)(F + B − W) per rank with B the input-gradient
// time, (p − 1)(F + B' − 2W) with B' = B + W the whole backward (deepseek-ai/DualPipe README).
void zb_h1(std::int64_t p, std::int64_t m, std::int64_t s, Blocks& out) {
  out.clear();
  out.reserve(static_cast<std::size_t>(3 * m));
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


// ZB-V (Qi et al., "Zero Bubble Pipeline Parallelism", ICLR 2024, and "Pipeline Parallelism
// with Controllable Memory", NeurIPS 2024): two chunks per rank in a V, as DualPipeV places them,
// the backward split into B and W, the W's filling the bubbles, and no rank holding more
// activations than 1F1B's first (p micro-batches of a stage, 2p of a half-stage chunk). The
// authors report zero bubble for equal F, B and W times at 1F1B's activation memory
// (sail-sg's description of ZBV: bubble rate 0, activation memory 1x).
//
// This order comes from a list scheduler over unit-time F, B and W blocks, the papers'
// assumption T_F = T_B = T_W: every rank, at every unit step, runs the first of
//   1. a B whose inputs are there (lowest micro-batch first, then the upper chunk, the one
//      nearer the loss): the input gradients are the critical path back;
//   2. an F whose input is there, if the rank holds fewer than 2p chunk activations, counted
//      from each F until its W (the W's inputs stay until the W runs), upper chunk first so
//      that micro-batches reach the loss and their backwards start early;
//   3. the oldest W still to run (the W's fill what is left).
// With unit times each rank idles p − 1 steps, the last rank's wait for its first forward, and
// the iteration takes 6m + p − 1 steps (tests/unit/parallel/schedule_test.cpp).
class ZbvScheduler {
 public:
  ZbvScheduler(std::int64_t p, std::int64_t m)
      : p_(p),
        m_(m),
        ready_f_(cells(), kNever),
        ready_b_(cells(), kNever),
        ranks_(static_cast<std::size_t>(p)) {}

  std::vector<Blocks> run() {
    const std::int64_t total = 6 * m_ * p_;
    std::int64_t done = 0;
    for (std::int64_t t = 0; done < total; ++t) {
      SIM_ASSERT(t <= 6 * m_ * p_ + 2 * p_, "ZB-V's list scheduler made no progress");
      for (std::int64_t r = 0; r < p_; ++r) {
        if (rank(r).busy_until > t) continue;
        if (step(r, t)) ++done;
      }
    }
    std::vector<Blocks> out;
    for (Rank& r : ranks_) out.push_back(std::move(r.blocks));
    return out;
  }

 private:
  static constexpr std::int64_t kNever = std::numeric_limits<std::int64_t>::max();
  struct Rank {
    std::int64_t next_f[2] = {0, 0};
    std::int64_t next_b[2] = {0, 0};
    std::int64_t held = 0;  // chunk activations from F until W
    std::int64_t busy_until = 0;
    std::deque<std::pair<std::int64_t, std::int64_t>> weights;  // (micro-batch, chunk)
    Blocks blocks;
  };

  Rank& rank(std::int64_t r) { return ranks_[static_cast<std::size_t>(r)]; }
  const Rank& rank(std::int64_t r) const { return ranks_[static_cast<std::size_t>(r)]; }
  std::size_t cells() const { return static_cast<std::size_t>(2 * p_ * m_); }
  std::size_t cell(std::int64_t mb, std::int64_t vs) const {
    return static_cast<std::size_t>(mb * 2 * p_ + vs);
  }
  std::int64_t vstage(std::int64_t r, std::int64_t c) const { return c == 0 ? r : 2 * p_ - 1 - r; }

  bool b_ready(std::int64_t r, std::int64_t c, std::int64_t t) const {
    const std::int64_t mb = rank(r).next_b[c];
    if (mb >= m_ || mb >= rank(r).next_f[c]) return false;
    const std::int64_t vs = vstage(r, c);
    if (ready_f_[cell(mb, vs)] > t) return false;
    return vs == 2 * p_ - 1 || ready_b_[cell(mb, vs + 1)] <= t;
  }
  bool f_ready(std::int64_t r, std::int64_t c, std::int64_t t) const {
    const std::int64_t mb = rank(r).next_f[c];
    if (mb >= m_) return false;
    const std::int64_t vs = vstage(r, c);
    return vs == 0 || ready_f_[cell(mb, vs - 1)] <= t;
  }

  // Runs one block on rank r from step t if one can run; false if the rank waits.
  bool step(std::int64_t r, std::int64_t t) {
    Rank& k = rank(r);
    std::int64_t bc = -1;
    for (std::int64_t c : {0, 1}) {
      if (!b_ready(r, c, t)) continue;
      if (bc < 0 || k.next_b[c] < k.next_b[bc] || (k.next_b[c] == k.next_b[bc] && c > bc)) bc = c;
    }
    if (bc >= 0) {
      const std::int64_t mb = k.next_b[bc]++;
      ready_b_[cell(mb, vstage(r, bc))] = t + 1;
      k.weights.emplace_back(mb, bc);
      return run(k, block(PipelineKind::kInputGrad, mb, bc), t);
    }
    if (k.held < 2 * p_) {
      for (std::int64_t c : {1, 0}) {
        if (!f_ready(r, c, t)) continue;
        const std::int64_t mb = k.next_f[c]++;
        ready_f_[cell(mb, vstage(r, c))] = t + 1;
        ++k.held;
        return run(k, block(PipelineKind::kForward, mb, c), t);
      }
    }
    if (!k.weights.empty()) {
      const auto [mb, c] = k.weights.front();
      k.weights.pop_front();
      --k.held;
      return run(k, block(PipelineKind::kWeightGrad, mb, c), t);
    }
    return false;
  }
  static bool run(Rank& k, PipelineBlock b, std::int64_t t) {
    k.blocks.push_back(b);
    k.busy_until = t + 1;
    return true;
  }

  std::int64_t p_, m_;
  std::vector<std::int64_t> ready_f_, ready_b_;  // step at which (micro-batch, vstage) is done
  std::vector<Rank> ranks_;
};

}  // namespace

void pipeline_blocks(const ParallelPlan& plan, std::int64_t stage, std::vector<PipelineBlock>& out) {
  const std::int64_t p = plan.pp;
  const std::int64_t m = plan.num_micro_batches();
  SIM_ASSERT(stage >= 0 && stage < p, "pipeline stage out of range");
  SIM_ASSERT(m >= 1, "no micro-batch in the iteration");
  // DualPipeV pairs its forwards and backwards anyway; the others only where checked to.
  const bool paired = plan.moe_a2a_overlap && plan.pairs_forward_backward();
  switch (plan.schedule) {
    case Schedule::kGpipe:
      return gpipe(m, out);
    case Schedule::k1F1B:
      return one_f_one_b(p, m, stage, paired, out);
    case Schedule::kInterleaved:
      if (plan.model_chunks() == 1) return one_f_one_b(p, m, stage, paired, out);
      return interleaved(p, m, plan.model_chunks(), stage, paired, out);
    case Schedule::kZbH1:
      return zb_h1(p, m, stage, out);
    case Schedule::kDualPipeV:
      SIM_ASSERT(m >= 2 * p, "DualPipeV needs at least 2·pp micro-batches");
      out = dualpipev(p, m, stage);
      return;
    case Schedule::kZbV:
      out = std::move(zb_v_blocks(p, m)[static_cast<std::size_t>(stage)]);
      return;
  }
  out.clear();
}

std::vector<PipelineBlock> pipeline_blocks(const ParallelPlan& plan, std::int64_t stage) {
  std::vector<PipelineBlock> out;
  pipeline_blocks(plan, stage, out);
  return out;
}

std::vector<std::vector<PipelineBlock>> zb_v_blocks(std::int64_t pp, std::int64_t micro_batches) {
  SIM_ASSERT(pp >= 1 && micro_batches >= 1, "ZB-V needs a rank and a micro-batch");
  return ZbvScheduler(pp, micro_batches).run();
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
