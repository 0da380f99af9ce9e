// Each device's program in the Lowerer: the schedule's blocks in order, lowered directly or
// as instances of block templates (lower_blocks).
#include "sim/parallel/lowerer.h"

namespace ts::parallel::detail {

std::uint32_t Lowerer::holding(bool with_params) const {
  const bool params = with_params && std::any_of(param_ready_.begin(), param_ready_.end(),
                                                 [](std::int32_t t) { return t != kNone; });
  return (prefetch_gate_ != kNone ? register_bit(kGateRegister) : 0u) |
         (bucket_ready_ != kNone ? register_bit(kBucketRegister) : 0u) |
         (last_backward_ != kNone ? register_bit(kLastBackwardRegister) : 0u) |
         (last_grad_reduce_ != kNone ? register_bit(kLastReduceRegister) : 0u) |
         (params ? register_bit(kFirstParamRegister) : 0u);
}

void Lowerer::run_block(BlockKind kind, std::int32_t mb, std::int64_t chunk, bool last, std::int32_t mb2) {
  switch (kind) {
    case BlockKind::kParamGathers: param_gathers(); break;
    case BlockKind::kForward: forward(mb, chunk); break;
    case BlockKind::kBackward: backward(mb, chunk, last, false); break;
    case BlockKind::kInputGrad: backward(mb, chunk, last, true); break;
    case BlockKind::kWeightGrad: weight_gradients(mb, chunk, last); break;
    case BlockKind::kOverlapped:
    case BlockKind::kOverlappedSplit:
      overlapped(mb, chunk / chunks_, mb2, chunk % chunks_, last, kind == BlockKind::kOverlappedSplit);
      break;
    case BlockKind::kOptimizer: optimizer(); break;
  }
}

void Lowerer::block(BlockKind kind, std::int32_t mb, std::int64_t chunk, bool last, std::int32_t mb2) {
  if (program_ == nullptr) return run_block(kind, mb, chunk, last, mb2);
  const bool overlapped = kind == BlockKind::kOverlapped || kind == BlockKind::kOverlappedSplit;
  const std::int64_t forward_chunk = overlapped ? chunk / chunks_ : chunk;
  const bool forwards = kind == BlockKind::kForward || overlapped;
  const bool forwarded = forwarded_[static_cast<std::size_t>(forward_chunk)] != 0;
  const BlockKey key{kind, chunk, last, forwarded, bucket_params_};
  const std::uint32_t holds = holding(false);
  if (forwards) forwarded_[static_cast<std::size_t>(forward_chunk)] = 1;
  auto& blocks = program_->blocks[static_cast<std::size_t>(device_)];
  // The device's templates by kind and chunk: a handful each.
  const auto per_kind = static_cast<std::size_t>(chunks_ * chunks_);
  auto& known_here = known_[static_cast<std::size_t>(kind) * per_kind + static_cast<std::size_t>(chunk)];
  for (const KnownBlock& known : known_here) {
    if (!(known.key == key)) continue;
    const bool params = (known.read & register_bit(kFirstParamRegister)) != 0;
    if (((params ? holding(true) : holds) ^ known.holding) & known.read) continue;
    bucket_params_ = known.bucket_after;
    for (std::int32_t r = 0; r < kFirstParamRegister; ++r) {
      if ((known.written & register_bit(r)) == 0) continue;
      reg(r) = (known.holding_after & register_bit(r)) != 0 ? BlockProgram::kRegisterBase + r : kNone;
    }
    if (known.writes_params) {
      for (const BlockProgram::Template::Write& w : program_->templates[known.templ].writes) {
        reg(w.reg) = w.task >= 0 || w.from_register >= 0 ? BlockProgram::kRegisterBase + w.reg : kNone;
      }
    }
    blocks.push_back({known.templ, mb, mb2});
    return;
  }
  // The registers the block may read or write: the parameter gathers' only where it waits for
  // them or makes them.
  const bool params = kind == BlockKind::kParamGathers || (forwards && !forwarded);
  const std::int32_t registers = params ? program_->registers : kFirstParamRegister;
  held_before_.resize(static_cast<std::size_t>(registers));
  for (std::int32_t r = 0; r < registers; ++r) {
    held_before_[static_cast<std::size_t>(r)] = reg(r) != kNone;
    if (reg(r) != kNone) reg(r) = BlockProgram::kRegisterBase + r;
  }
  SIM_ASSERT(!chains_.open(), "a chain spans blocks");
  read_ = 0;
  const std::uint32_t held = holding(true);
  BlockProgram::Template templ;
  templ.device = device_;
  templ.task_begin = static_cast<std::uint32_t>(g_.tasks.size());
  run_block(kind, mb, chunk, last, mb2);
  close_chain();
  templ.task_count = static_cast<std::uint32_t>(g_.tasks.size()) - templ.task_begin;
  SIM_ASSERT(g_.tasks.size() < static_cast<std::size_t>(BlockProgram::kRegisterBase), "too many tasks");
  for (std::int32_t r = 0; r < registers; ++r) {
    const std::int32_t v = reg(r);
    if (v == BlockProgram::kRegisterBase + r || (v == kNone && !held_before_[static_cast<std::size_t>(r)])) continue;
    BlockProgram::Template::Write w;
    w.reg = r;
    if (v >= BlockProgram::kRegisterBase) {
      w.from_register = v - BlockProgram::kRegisterBase;
    } else if (v != kNone) {
      SIM_ASSERT(v >= static_cast<std::int32_t>(templ.task_begin), "a register holds a task of another block");
      w.task = v - static_cast<std::int32_t>(templ.task_begin);
    }
    templ.writes.push_back(w);
  }
  KnownBlock known{key, static_cast<std::uint32_t>(program_->templates.size()), read_, held, bucket_params_, 0, 0, false};
  for (const BlockProgram::Template::Write& w : templ.writes) {
    if (w.reg >= kFirstParamRegister) {
      known.writes_params = true;
    } else {
      known.written |= register_bit(w.reg);
    }
  }
  known.holding_after = holding(false) & known.written;
  program_->templates.push_back(std::move(templ));
  known_here.push_back(known);
  blocks.push_back({known.templ, mb, mb2});
}

std::array<std::int32_t, Lowerer::kFirstParamRegister> Lowerer::block_registers() const {
  return {prefetch_gate_, bucket_ready_, last_backward_, last_grad_reduce_};
}

void Lowerer::save_known_state(KnownState& out) const {
  out.bucket = bucket_params_;
  out.registers = block_registers();
  out.params.assign(param_ready_.begin(), param_ready_.end());
  out.forwarded.assign(forwarded_.begin(), forwarded_.end());
}

bool Lowerer::in_known_state(const KnownState& s) const {
  return s.bucket == bucket_params_ && s.registers == block_registers() && s.params == param_ready_ &&
         s.forwarded == forwarded_;
}

void Lowerer::find_call_runs(std::size_t lo, std::size_t hi) {
  // Shorter stretches are lowered block by block; a search costs at most a few passes over its
  // stretch.
  constexpr std::size_t kShortest = 32, kLongestPeriod = 4096;
  if (hi - lo < kShortest) return;
  auto same = [this](std::size_t a, std::size_t b) { return calls_[a].same_step(calls_[b]); };
  const std::size_t mid = lo + (hi - lo) / 2;
  CallRun best;
  std::size_t work = 0;
  for (std::size_t p = 1; p <= kLongestPeriod && 4 * p <= hi - lo && work < 4 * (hi - lo); ++p) {
    std::size_t i = 0;
    while (i < p && same(mid + i, mid + p + i)) ++i;
    work += i + 1;
    if (i < p) continue;
    std::size_t begin = mid, end = mid + 2 * p;
    while (begin > lo && same(begin - 1, begin - 1 + p)) --begin;
    while (end < hi && same(end, end - p)) ++end;
    work += end - begin;
    if (end - begin > best.end - best.begin) best = {begin, p, end};
    if (2 * (end - begin) >= hi - lo) break;
  }
  if (best.period == 0 || best.end - best.begin < 4 * best.period) return;
  find_call_runs(lo, best.begin);
  call_runs_.push_back(best);
  find_call_runs(best.end, hi);
}

void Lowerer::lower_calls() {
  auto call = [this](const BlockCall& c) { block(c.kind, c.mb, c.chunk, c.last, c.mb2); };
  call_runs_.clear();
  if (program_ != nullptr && options_.repeat_steady_runs) find_call_runs(0, calls_.size());
  std::size_t i = 0;
  for (const CallRun& run : call_runs_) {
    const std::size_t period = run.period, end = run.end;
    for (; i < run.begin; ++i) call(calls_[i]);
    auto& blocks = program_->blocks[static_cast<std::size_t>(device_)];
    const std::size_t base = blocks.size() - i;  // the block of call 0
    while (i + 2 * period <= end) {
      save_known_state(period_start_);
      const std::size_t templates = program_->templates.size();
      for (const std::size_t stop = i + period; i < stop; ++i) call(calls_[i]);
      if (templates != program_->templates.size() || !in_known_state(period_start_)) continue;
      // The period found known templates only and left the state as it found it: so do the
      // next ones, made of the same calls.
      for (; i + period <= end; i += period) {
        for (std::size_t k = i; k < i + period; ++k) {
          const std::uint32_t templ = blocks[base + k - period].templ;
          blocks.push_back({templ, calls_[k].mb, calls_[k].mb2});
        }
      }
      break;
    }
  }
  for (; i < calls_.size(); ++i) call(calls_[i]);
}

void Lowerer::lower_device(std::int32_t d) {
  device_ = d;
  const SimDevice& dev = g_.devices[static_cast<std::size_t>(d)];
  rank_ = dev.rank;
  group_comm_.clear();
  p2p_comm_.fill(P2pComm{});
  stage_ = dev.stage;
  last_backward_ = kNone;
  last_grad_reduce_ = kNone;
  prefetch_gate_ = kNone;
  bucket_params_ = 0;
  // Every register empty before the first block (block programs look at which hold a task).
  bucket_ready_ = kNone;
  param_ready_.assign(static_cast<std::size_t>(model_.num_layers), kNone);
  chains_.discard_open();
  for (auto& k : known_) k.clear();
  known_.resize(kBlockKinds * static_cast<std::size_t>(chunks_ * chunks_));
  forwarded_.assign(static_cast<std::size_t>(chunks_), 0);
  block(BlockKind::kParamGathers, -1, 0, false);
  pipeline_blocks(plan_, stage_, pipeline_);
  const std::vector<PipelineBlock>& program = pipeline_;
  // The block after which each chunk's gradients are complete (its last whole backward or
  // weight-gradient block): the gradients join the data-parallel buckets there.
  last_gradient_block_.assign(static_cast<std::size_t>(chunks_), -1);
  for (std::size_t i = 0; i < program.size(); ++i) {
    const PipelineKind k = program[i].kind;
    if (k == PipelineKind::kBackward || k == PipelineKind::kWeightGrad) {
      last_gradient_block_[static_cast<std::size_t>(program[i].chunk)] = static_cast<std::int64_t>(i);
    }
  }
  auto last = [&](std::size_t i) {
    return last_gradient_block_[static_cast<std::size_t>(program[i].chunk)] == static_cast<std::int64_t>(i);
  };
  calls_.clear();
  for (std::size_t i = 0; i < program.size(); ++i) {
    const PipelineBlock& b = program[i];
    switch (b.kind) {
      case PipelineKind::kForward:
        if (b.overlapped) {
          SIM_ASSERT(i + 1 < program.size() && (program[i + 1].kind == PipelineKind::kBackward ||
                                                program[i + 1].kind == PipelineKind::kInputGrad),
                     "an overlapped forward is followed by a backward");
          const PipelineBlock& n = program[i + 1];
          calls_.push_back({n.kind == PipelineKind::kBackward ? BlockKind::kOverlapped : BlockKind::kOverlappedSplit,
                            b.micro_batch, b.chunk * chunks_ + n.chunk, last(i + 1), n.micro_batch});
          ++i;
        } else {
          calls_.push_back({BlockKind::kForward, b.micro_batch, b.chunk, false, -1});
        }
        break;
      case PipelineKind::kBackward: calls_.push_back({BlockKind::kBackward, b.micro_batch, b.chunk, last(i), -1}); break;
      case PipelineKind::kInputGrad: calls_.push_back({BlockKind::kInputGrad, b.micro_batch, b.chunk, false, -1}); break;
      case PipelineKind::kWeightGrad: calls_.push_back({BlockKind::kWeightGrad, b.micro_batch, b.chunk, last(i), -1}); break;
    }
  }
  lower_calls();
  block(BlockKind::kOptimizer, -1, 0, false);
  close_chain();
}

}  // namespace ts::parallel::detail
