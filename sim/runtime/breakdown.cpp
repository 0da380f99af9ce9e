#include "sim/runtime/breakdown.h"

#include <algorithm>
#include <array>
#include <limits>
#include <vector>

#include "sim/base/diagnostic.h"

namespace ts::runtime {

using parallel::Stream;

const char* time_category_name(TimeCategory c) {
  switch (c) {
    case TimeCategory::kForward: return "forward";
    case TimeCategory::kBackward: return "backward";
    case TimeCategory::kRecompute: return "recompute";
    case TimeCategory::kOptimizer: return "optimizer";
    case TimeCategory::kContention: return "comm_contention";
    case TimeCategory::kExposedTp: return "exposed_tp_comm";
    case TimeCategory::kExposedCp: return "exposed_cp_comm";
    case TimeCategory::kExposedPp: return "exposed_pp_comm";
    case TimeCategory::kExposedDp: return "exposed_dp_comm";
    case TimeCategory::kExposedEp: return "exposed_ep_comm";
    case TimeCategory::kIdle: return "idle";
  }
  return "?";
}

namespace {

TimeCategory compute_category(parallel::Pass p) {
  switch (p) {
    case parallel::Pass::kForward: return TimeCategory::kForward;
    case parallel::Pass::kBackward:
    case parallel::Pass::kWeightGrad: return TimeCategory::kBackward;
    case parallel::Pass::kRecompute: return TimeCategory::kRecompute;
    case parallel::Pass::kOptimizer: return TimeCategory::kOptimizer;
  }
  return TimeCategory::kForward;
}

// The communication streams, in the priority by which a device waiting on several is charged
// (TP, CP, EP, PP, DP; see device_breakdown).
constexpr std::array kCommStreams = {Stream::kTpComm,      Stream::kCpComm,      Stream::kEpComm,      Stream::kPpRecvPrev,
                                     Stream::kPpSendNext,  Stream::kPpRecvNext,  Stream::kPpSendPrev,
                                     Stream::kPpVRecvNext, Stream::kPpVSendPrev, Stream::kPpVRecvPrev,
                                     Stream::kPpVSendNext, Stream::kDpComm,      Stream::kDpReplica};
static_assert(kCommStreams.size() + 1 == parallel::kNumStreams, "every stream but compute");

// Communication category of a stream; compute streams map to kIdle (not communication).
TimeCategory comm_category(Stream s) {
  switch (s) {
    case Stream::kCompute: return TimeCategory::kIdle;
    case Stream::kTpComm: return TimeCategory::kExposedTp;
    case Stream::kCpComm: return TimeCategory::kExposedCp;
    case Stream::kEpComm: return TimeCategory::kExposedEp;
    case Stream::kDpComm:
    case Stream::kDpReplica: return TimeCategory::kExposedDp;
    case Stream::kPpRecvPrev:
    case Stream::kPpSendNext:
    case Stream::kPpRecvNext:
    case Stream::kPpSendPrev:
    case Stream::kPpVRecvNext:
    case Stream::kPpVSendPrev:
    case Stream::kPpVRecvPrev:
    case Stream::kPpVSendNext: return TimeCategory::kExposedPp;
  }
  return TimeCategory::kIdle;
}

}  // namespace

TimeCategory task_category(const parallel::Task& task) {
  return task.stream == Stream::kCompute ? compute_category(task.pass) : comm_category(task.stream);
}

TimeBreakdown rerun_split(Duration time, Duration rerun) {
  TimeBreakdown b;
  b[TimeCategory::kRecompute] = std::min(rerun, time);
  b[TimeCategory::kBackward] = time - b[TimeCategory::kRecompute];
  return b;
}

namespace {

struct Span {
  std::int64_t start;
  std::int64_t end;
};

// A stream's intervals read in time order, checking that they follow one another.
struct Cursor {
  const StreamInterval* at;
  const StreamInterval* last;
  TimeCategory category;
  const StreamInterval* first;  // the stream's first interval
  std::size_t stream;

  bool done() const { return at == last; }
  // Moves to the next interval.
  void step() {
    ++at;
    SIM_ASSERT(at == last || at->start >= at[-1].end, "tasks of one stream overlap in the execution");
  }
  // Moves past the intervals that end by `t` (the empty ones too).
  void pass(std::int64_t t) {
    while (at != last && at->end.ps() <= t) step();
  }
  // Moves to the next interval that is not empty.
  void skip_empty() {
    while (at != last && at->end == at->start) step();
  }
};

// The cursors of the non-empty communication streams, in priority order (kCommStreams), the
// tensor-parallel one left out with `skip_tp`.
std::vector<Cursor> cursors(const std::array<StreamIntervals, parallel::kNumStreams>& streams, bool skip_tp) {
  std::vector<Cursor> out;
  for (Stream s : kCommStreams) {
    if (skip_tp && s == Stream::kTpComm) continue;
    const StreamIntervals& intervals = streams[static_cast<std::size_t>(s)];
    if (intervals.first != intervals.last) {
      out.push_back({intervals.first, intervals.last, comm_category(s), intervals.first, static_cast<std::size_t>(s)});
    }
  }
  return out;
}

// Over [from, to), where no compute runs: each instant some communication stream runs at goes
// to the category of the first of them in `comm` (the priority order); returns the time they
// cover. Cursors only move forward: successive calls take successive stretches.
std::int64_t charge_gap(std::int64_t from, std::int64_t to, std::vector<Cursor>& comm, TimeBreakdown& out) {
  std::int64_t covered = 0;
  for (std::int64_t t = from; t < to;) {
    std::int64_t next = to;
    const Cursor* top = nullptr;
    for (Cursor& c : comm) {
      c.pass(t);
      if (c.done()) continue;
      if (c.at->start.ps() <= t) {  // running: charged until it ends or a stream before it starts
        top = &c;
        next = std::min(next, c.at->end.ps());
        break;
      }
      next = std::min(next, c.at->start.ps());
    }
    if (top != nullptr) {
      out[top->category] += Duration::from_ps(next - t);
      covered += next - t;
    }
    t = next;
  }
  return covered;
}

// Whether the passes can step over `r`'s copies: three or more, each with compute intervals
// and lasting some time.
bool steps_over(const RepeatedIntervals* r) {
  return r != nullptr && r->copies >= 3 && r->count[static_cast<std::size_t>(Stream::kCompute)] > 0 && r->delta > 0;
}

// Whether a position on stream `s` moved by one copy, from `before` to `pos`, reading indices up
// to `last`, among copies only; if so, `k` is bounded to the copies after which the reads,
// moved as many copies on, still fall among copies (the index read last stays below the end).
bool moved_one_copy(const RepeatedIntervals& r, std::size_t s, std::size_t before, std::size_t pos, std::size_t last,
                    std::size_t& k) {
  const std::size_t n = r.count[s], from = r.from[s], end = from + r.copies * n;
  if (n == 0 || before < from || pos != before + n || last >= end) return false;
  k = std::min(k, (end - 1 - last) / n);
  return true;
}

// Steps device_breakdown's pass over the compute stream across whole copies of repeated
// intervals (RepeatedIntervals). From one compute interval to the next the pass carries the end
// of the last one, the time covered, the breakdown so far and the communication cursors. At the
// starts of the compute stream's copies j − 1 and j it compares them: if the end moved by delta
// and every cursor either moved by its stream's count while reading copies only, or stayed on an
// interval that cannot change the pass's choices (starting after, or running all through, the
// next copies' gaps), then each later copy's pass is copy j − 1's shifted by delta, increments
// and all, as long as the cursors read copies only. The pass then adds those increments K times
// and moves everything K copies on, instead of passing them.
class CopyJump {
 public:
  CopyJump(const RepeatedIntervals* r, const StreamInterval* compute_first, std::size_t cursors)
      : r_(steps_over(r) ? r : nullptr), first_(compute_first) {
    if (r_ == nullptr) return;
    const auto c = static_cast<std::size_t>(Stream::kCompute);
    n_ = r_->count[c];
    next_ = first_ + r_->from[c];
    prev_.at.resize(cursors);
  }

  // Before the pass takes compute interval `i`: where `i` starts a copy, the jump (if any); the
  // interval to take next.
  const StreamInterval* at(const StreamInterval* i, std::int64_t& busy_to, std::int64_t& covered, TimeBreakdown& out,
                           std::vector<Cursor>& comm) {
    if (i != next_) return i;
    auto j = static_cast<std::size_t>(i - first_ - static_cast<std::ptrdiff_t>(r_->from[static_cast<std::size_t>(Stream::kCompute)])) / n_;
    if (prev_.valid && prev_.copy + 1 == j) {
      const std::size_t k = copies_to_jump(i, j, busy_to, comm);
      if (k > 0) {
        const auto times = static_cast<std::int64_t>(k);
        for (std::size_t c = 0; c < kNumTimeCategories; ++c) out.time[c] += (out.time[c] - prev_.out.time[c]) * times;
        covered += (covered - prev_.covered) * times;
        busy_to += r_->delta * times;
        for (Cursor& c : comm) {
          if (c.at - prev_.at[static_cast<std::size_t>(&c - comm.data())] > 0) {
            c.at += static_cast<std::ptrdiff_t>(k * r_->count[c.stream]);
          }
        }
        i += static_cast<std::ptrdiff_t>(k * n_);
        j += k;
        if (r_->stepped_over != nullptr) *r_->stepped_over += k;
      }
    }
    prev_.valid = true;
    prev_.copy = j;
    prev_.busy_to = busy_to;
    prev_.covered = covered;
    prev_.out = out;
    for (std::size_t c = 0; c < comm.size(); ++c) prev_.at[c] = comm[c].at;
    next_ = j < r_->copies ? i + static_cast<std::ptrdiff_t>(n_) : nullptr;
    return i;
  }

 private:
  // How many copies from copy j on repeat copy j − 1's pass (0: none or no proof).
  std::size_t copies_to_jump(const StreamInterval* i, std::size_t j, std::int64_t busy_to,
                             const std::vector<Cursor>& comm) const {
    const std::int64_t delta = r_->delta;
    if (busy_to - prev_.busy_to != delta) return 0;
    std::size_t k = r_->copies - j;  // the compute intervals read stay among the copies
    // The gaps of the copies taken: they end by the start of the last compute interval taken.
    const std::int64_t last_start = i[-1].start.ps();
    for (std::size_t c = 0; c < comm.size() && k > 0; ++c) {
      const Cursor& cursor = comm[c];
      const auto pos = static_cast<std::size_t>(cursor.at - cursor.first);
      const auto before = static_cast<std::size_t>(prev_.at[c] - cursor.first);
      if (pos == before) {
        if (cursor.done()) continue;
        const std::int64_t start = cursor.at->start.ps(), end = cursor.at->end.ps();
        if (start >= last_start) {
          k = std::min(k, static_cast<std::size_t>((start - last_start) / delta));
        } else if (start <= prev_.busy_to && end >= last_start) {
          k = std::min(k, static_cast<std::size_t>((end - last_start) / delta));
        } else {
          return 0;
        }
      } else if (!moved_one_copy(*r_, cursor.stream, before, pos, pos, k)) {
        return 0;
      }
    }
    return k;
  }

  const RepeatedIntervals* r_;
  const StreamInterval* first_;       // the compute stream's first interval
  std::size_t n_ = 0;                 // compute intervals per copy
  const StreamInterval* next_ = nullptr;  // the next copy's first compute interval
  struct {
    bool valid = false;
    std::size_t copy = 0;
    std::int64_t busy_to = 0, covered = 0;
    TimeBreakdown out;
    std::vector<const StreamInterval*> at;
  } prev_;  // the pass at the start of copy `copy`
};

// Steps contention()'s pass across whole copies of repeated intervals (RepeatedIntervals), as
// CopyJump does the compute pass. The pass takes communication intervals by start and closes a
// period where one starts after all taken so far have ended. Copy j's boundary is the first
// close at or after T + j·delta (T: copy 0's first compute interval's start). At boundaries
// j − 1 and j it compares the pass: where the compute and all-to-all positions and each stream's
// cursor moved by its count while reading copies only (a cursor that stayed must start no
// earlier than what the next copies take), each later copy's periods are copy j − 1's shifted
// by delta: the pass adds their losses again, in order (the same sum to the last bit), K times.
class PeriodJump {
 public:
  PeriodJump(const RepeatedIntervals* r, const StreamIntervals& compute, const StreamIntervals& ep,
             std::size_t cursors)
      : r_(steps_over(r) ? r : nullptr), compute_(compute), ep_(ep) {
    if (r_ == nullptr) return;
    origin_ = compute.first[r_->from[static_cast<std::size_t>(Stream::kCompute)]].start.ps();
    prev_.at.resize(cursors);
  }

  bool active() const { return r_ != nullptr; }
  // A period's loss, in the order the pass adds it.
  void added(double loss) {
    if (r_ != nullptr) losses_.push_back(loss);
  }

  // At a close, the next period starting at `a`: the copies jumped (0: none); the pass's
  // positions and `lost` moved past them.
  std::size_t at(std::int64_t a, std::vector<Cursor>& open, const StreamInterval*& i, const StreamInterval*& e,
                 double& lost) {
    if (a < origin_) return 0;
    const auto j = static_cast<std::size_t>((a - origin_) / r_->delta);
    if (seen_ && j <= boundary_) return 0;  // not the first close of a new copy
    std::size_t k = 0;
    if (seen_ && boundary_ + 1 == j) k = copies_to_jump(a, open, i, e);
    if (k > 0) {
      for (std::size_t n = 0; n < k; ++n) {
        for (const double loss : losses_) lost += loss;
      }
      for (std::size_t c = 0; c < open.size(); ++c) {
        if (open[c].at != prev_.at[c]) open[c].at += static_cast<std::ptrdiff_t>(k * r_->count[open[c].stream]);
      }
      i += static_cast<std::ptrdiff_t>(k * count(Stream::kCompute));
      if (e != prev_.e) e += static_cast<std::ptrdiff_t>(k * count(Stream::kEpComm));
      if (r_->stepped_over != nullptr) *r_->stepped_over += k;
      a += static_cast<std::int64_t>(k) * r_->delta;
    }
    seen_ = true;
    boundary_ = j + k;
    prev_.i = i;
    prev_.e = e;
    for (std::size_t c = 0; c < open.size(); ++c) prev_.at[c] = open[c].at;
    losses_.clear();
    return k;
  }

 private:
  std::size_t count(Stream s) const { return r_->count[static_cast<std::size_t>(s)]; }

  std::size_t copies_to_jump(std::int64_t a, const std::vector<Cursor>& open, const StreamInterval* i,
                             const StreamInterval* e) const {
    const std::int64_t delta = r_->delta;
    std::size_t k = r_->copies;
    // Compute: read up to the first interval starting at or after `a` (the periods taken end by then).
    const StreamInterval* ahead = i;
    while (ahead != compute_.last && ahead->start.ps() < a) ++ahead;
    if (!moved_one_copy(*r_, static_cast<std::size_t>(Stream::kCompute), static_cast<std::size_t>(prev_.i - compute_.first),
                        static_cast<std::size_t>(i - compute_.first), static_cast<std::size_t>(ahead - compute_.first), k)) {
      return 0;
    }
    // An interval not taken before the pass reaches a + k·delta (the copies' takes start
    // earlier): a + k·delta ≤ start.
    auto unread = [&](std::int64_t start) {
      if (start <= a) return false;
      k = std::min(k, static_cast<std::size_t>((start - a) / delta));
      return true;
    };
    if (ep_.first != ep_.last) {
      const auto pos = static_cast<std::size_t>(e - ep_.first);
      if (e == prev_.e) {
        if (e != ep_.last && !unread(e->start.ps())) return 0;
      } else if (!moved_one_copy(*r_, static_cast<std::size_t>(Stream::kEpComm), static_cast<std::size_t>(prev_.e - ep_.first),
                                 pos, pos, k)) {
        return 0;
      }
    }
    for (std::size_t c = 0; c < open.size() && k > 0; ++c) {
      const Cursor& cursor = open[c];
      const auto pos = static_cast<std::size_t>(cursor.at - cursor.first);
      if (cursor.at == prev_.at[c]) {
        if (!cursor.done() && !unread(cursor.at->start.ps())) return 0;
      } else if (!moved_one_copy(*r_, cursor.stream, static_cast<std::size_t>(prev_.at[c] - cursor.first), pos, pos, k)) {
        return 0;
      }
    }
    return k;
  }

  const RepeatedIntervals* r_;
  StreamIntervals compute_, ep_;
  std::int64_t origin_ = 0;   // copy 0's first compute interval's start
  bool seen_ = false;         // a boundary was passed
  std::size_t boundary_ = 0;  // the last boundary passed
  std::vector<double> losses_;  // the losses added since it
  struct {
    const StreamInterval* i = nullptr;
    const StreamInterval* e = nullptr;
    std::vector<const StreamInterval*> at;
  } prev_;  // the pass at the last boundary (seen_)
};

// The time compute loses to the communication kernels beside it (see device_breakdown).
// Tensor-parallel traffic runs between the GEMMs it feeds, not beside them (pipelined with them
// in chunks, the exposed chunk already stands for its cost). A chain's span counts with the share
// of its length that its compute steps take.
Duration contention(const std::array<StreamIntervals, parallel::kNumStreams>& streams,
                    const TimeBreakdown* splits, double slowdown, const RepeatedIntervals* repeated) {
  SIM_ASSERT(slowdown >= 0 && slowdown < 1, "compute slowdown under communication out of [0, 1)");
  if (slowdown == 0) return Duration();
  const StreamIntervals& compute = streams[static_cast<std::size_t>(Stream::kCompute)];
  const double stretch = slowdown / (1 - slowdown);
  double lost = 0;
  const StreamInterval* i = compute.first;
  // Each expert-parallel all-to-all closes its own period: what the compute beside one all-to-all
  // loses is not made up by another one's exposed time. The all-to-alls are synchronisation
  // points (the experts wait for the dispatch, the next block for the combine), and in
  // Megatron-Core's 1F1B all-to-all overlap every schedule node waits for the one before it of
  // its micro-batch (ScheduleNode's stream_acquire_context on the chunk's CUDA event,
  // megatron/core/pipeline_parallel/utils.py; TransformerLayerSchedulePlan.run in
  // megatron/core/models/common/model_chunk_schedule_plan.py), so each all-to-all and the
  // compute beside it end together, however busy the EP stream stays around them.
  const StreamIntervals& ep = streams[static_cast<std::size_t>(Stream::kEpComm)];
  const StreamInterval* e = ep.first;
  std::vector<Cursor> open = cursors(streams, true);
  PeriodJump jump(repeated, compute, ep, open.size());
  // One period [from, to) without a cut.
  auto charge = [&](std::int64_t from, std::int64_t to) {
    double slowed = 0;        // compute under the period, chain spans by their compute share
    std::int64_t under = 0;   // time in the period with compute running
    while (i != compute.last && i->end.ps() <= from) ++i;
    for (const StreamInterval* k = i; k != compute.last && k->start.ps() < to; ++k) {
      const std::int64_t a = std::max(from, k->start.ps()), b = std::min(to, k->end.ps());
      if (b <= a) continue;
      under += b - a;
      double share = 1;
      if (k->split >= 0) {
        const TimeBreakdown& split = splits[k->split];
        const Duration computing = split[TimeCategory::kForward] + split[TimeCategory::kBackward] +
                                   split[TimeCategory::kRecompute] + split[TimeCategory::kOptimizer];
        share = std::min(1.0, computing.seconds() / (k->end - k->start).seconds());
      }
      slowed += static_cast<double>(b - a) * share;
    }
    const double alone = static_cast<double>(to - from - under);
    const double loss = std::max(0.0, slowed * stretch - alone);
    lost += loss;
    jump.added(loss);
  };
  // A period of the union, cut where an all-to-all starts or ends inside it.
  auto close = [&](Span period) {
    std::int64_t from = period.start;
    if (ep.first != ep.last) {
      while (e != ep.last && e->end.ps() <= from) ++e;
      for (const StreamInterval* k = e; k != ep.last && k->start.ps() < period.end; ++k) {
        for (const std::int64_t at : {k->start.ps(), k->end.ps()}) {
          if (at <= from || at >= period.end) continue;
          charge(from, at);
          from = at;
        }
      }
    }
    charge(from, period.end);
  };
  // The periods: the union of the streams' intervals, touching ones joined (a merge of the
  // streams by start). Each stream's next start (none: the largest time), read once per interval
  // taken.
  std::array<std::int64_t, parallel::kNumStreams> next{};
  auto head = [&open, &next](std::size_t c) {
    open[c].skip_empty();
    next[c] = open[c].done() ? std::numeric_limits<std::int64_t>::max() : open[c].at->start.ps();
  };
  for (std::size_t c = 0; c < open.size(); ++c) head(c);
  Span period{0, 0};
  bool in_period = false;
  for (;;) {
    std::size_t first = 0;
    for (std::size_t c = 1; c < open.size(); ++c) {
      if (next[c] < next[first]) first = c;
    }
    if (open.empty() || open[first].done()) break;
    const std::int64_t a = next[first];
    if (in_period && a > period.end) {
      close(period);
      in_period = false;
      if (jump.active() && jump.at(a, open, i, e, lost) > 0) {
        for (std::size_t c = 0; c < open.size(); ++c) head(c);
        continue;
      }
    }
    const std::int64_t b = open[first].at->end.ps();
    open[first].step();
    head(first);
    if (in_period) {
      period.end = std::max(period.end, b);
    } else {
      period = {a, b};
      in_period = true;
    }
  }
  if (in_period) close(period);
  // Saturates as the clock does (a slowdown near 1 stretches without bound).
  return Duration::from_ps(static_cast<std::int64_t>(std::min(lost, static_cast<double>(std::int64_t{1} << 62))));
}

}  // namespace

TimeBreakdown device_breakdown(const std::array<StreamIntervals, parallel::kNumStreams>& streams,
                               SimTime end, const TimeBreakdown* splits, double slowdown,
                               const RepeatedIntervals* repeated) {
  // At each instant a device is computing (one compute task at a time), or else waiting on the
  // communication running by priority (TP, CP, PP, DP), or idle. So compute categories take the
  // compute tasks' lengths, and each communication category the instants where its stream runs
  // and no compute nor communication before it in the priority does. The rest is idle. One pass
  // in time order: the stretches between compute tasks go to the communication running there.
  TimeBreakdown out;
  std::vector<Cursor> comm = cursors(streams, false);
  std::int64_t origin = 0;  // before every interval
  for (const StreamIntervals& s : streams) {
    if (s.first != s.last) origin = std::min(origin, s.first->start.ps());
  }
  std::int64_t covered = 0;  // the union of every stream's intervals: its length so far
  std::int64_t busy_to = origin;  // the end of the last compute interval
  const StreamIntervals& compute = streams[static_cast<std::size_t>(Stream::kCompute)];
  CopyJump jump(repeated, compute.first, comm.size());
  for (const StreamInterval* i = compute.first; i != compute.last; ++i) {
    i = jump.at(i, busy_to, covered, out, comm);
    if (i == compute.last) break;
    SIM_ASSERT(i == compute.first || i->start >= i[-1].end, "tasks of one stream overlap in the execution");
    if (i->split >= 0) {
      // A chain's span: its compute steps, and the tensor-parallel ones between them (while
      // no compute runs, TP comes first among communication).
      const TimeBreakdown& split = splits[i->split];
      for (std::size_t c = 0; c < kNumTimeCategories; ++c) out.time[c] += split.time[c];
    } else if (i->end != i->start) {
      out[i->category] += i->end - i->start;
    }
    if (i->end == i->start) continue;
    // Compute intervals follow one another: a stretch of touching ones covers their lengths.
    if (i->start.ps() > busy_to) covered += charge_gap(busy_to, i->start.ps(), comm, out);
    covered += i->end.ps() - i->start.ps();
    busy_to = i->end.ps();
  }
  covered += charge_gap(busy_to, std::numeric_limits<std::int64_t>::max(), comm, out);
  out[TimeCategory::kIdle] += Duration::from_ps(end.ps() - covered);
  out[TimeCategory::kContention] = contention(streams, splits, slowdown, repeated);
  return out;
}

std::vector<TimeBreakdown> time_breakdown(const parallel::TaskGraph& g, const Execution& ex, double slowdown) {
  SIM_ASSERT(g.chains.empty(), "per-task timings of a coarse graph");
  // The intervals of each (device, stream) in program order (a counting sort).
  const std::size_t queues = g.devices.size() * parallel::kNumStreams;
  auto queue_of = [](const parallel::Task& t) {
    return static_cast<std::size_t>(t.device) * parallel::kNumStreams + static_cast<std::size_t>(t.stream);
  };
  std::vector<std::uint32_t> begin(queues + 1, 0);
  for (const auto& task : g.tasks) ++begin[queue_of(task) + 1];
  for (std::size_t q = 0; q < queues; ++q) begin[q + 1] += begin[q];
  std::vector<StreamInterval> intervals(g.tasks.size());
  // Backward tasks whose op lists rerun forward ops: one split per op list (its tasks all last
  // its time).
  std::vector<TimeBreakdown> splits;
  std::vector<std::int32_t> list_split(ex.rerun.size(), -1);
  {
    std::vector<std::uint32_t> fill(begin.begin(), begin.end() - 1);
    for (std::size_t t = 0; t < g.tasks.size(); ++t) {
      const auto& task = g.tasks[t];
      const TaskTiming& at = ex.timings[t];
      const TimeCategory category = task_category(task);
      std::int32_t split = -1;
      if (category == TimeCategory::kBackward && task.kind == parallel::TaskKind::kCompute && task.ops >= 0 &&
          static_cast<std::size_t>(task.ops) < ex.rerun.size() && ex.rerun[static_cast<std::size_t>(task.ops)] > Duration()) {
        std::int32_t& s = list_split[static_cast<std::size_t>(task.ops)];
        if (s < 0) {
          s = static_cast<std::int32_t>(splits.size());
          splits.push_back(rerun_split(at.end - at.start, ex.rerun[static_cast<std::size_t>(task.ops)]));
        }
        split = s;
      }
      intervals[fill[queue_of(task)]++] = {at.start, at.end, category, split};
    }
  }
  std::vector<TimeBreakdown> out(g.devices.size());
  for (std::size_t d = 0; d < g.devices.size(); ++d) {
    std::array<StreamIntervals, parallel::kNumStreams> streams{};
    for (std::size_t s = 0; s < parallel::kNumStreams; ++s) {
      const std::size_t q = d * parallel::kNumStreams + s;
      streams[s] = {intervals.data() + begin[q], intervals.data() + begin[q + 1]};
    }
    out[d] = device_breakdown(streams, ex.end, splits.data(), slowdown);
  }
  return out;
}

ReplaySummary summarize(const parallel::TaskGraph& g, const Execution& ex, double slowdown) {
  ReplaySummary out;
  out.time = time_breakdown(g, ex, slowdown);
  out.end = ex.end;
  SimTime last_end;
  for (std::size_t t = 0; t < g.tasks.size(); ++t) {
    if (ex.timings[t].end > last_end) {
      last_end = ex.timings[t].end;
      out.last_device = g.tasks[t].device;
    }
  }
  out.memory.reserve(ex.memory.size());
  for (const DeviceMemory& m : ex.memory) out.memory.push_back({m.peak_dynamic, m.peak_task, m.peak_step, {}, m.peak_micro_batch});
  out.events = ex.events;
  out.tasks = static_cast<std::int64_t>(g.tasks.size());
  return out;
}

}  // namespace ts::runtime
