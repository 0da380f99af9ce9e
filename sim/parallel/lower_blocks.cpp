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
  const std::vector<PipelineBlock> program = pipeline_blocks(plan_, stage_);
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
  for (std::size_t i = 0; i < program.size(); ++i) {
    const PipelineBlock& b = program[i];
    switch (b.kind) {
      case PipelineKind::kForward:
        if (b.overlapped) {
          SIM_ASSERT(i + 1 < program.size() && (program[i + 1].kind == PipelineKind::kBackward ||
                                                program[i + 1].kind == PipelineKind::kInputGrad),
                     "an overlapped forward is followed by a backward");
          const PipelineBlock& n = program[i + 1];
          block(n.kind == PipelineKind::kBackward ? BlockKind::kOverlapped : BlockKind::kOverlappedSplit,
                b.micro_batch, b.chunk * chunks_ + n.chunk, last(i + 1), n.micro_batch);
          ++i;
        } else {
          block(BlockKind::kForward, b.micro_batch, b.chunk, false);
        }
        break;
      case PipelineKind::kBackward: block(BlockKind::kBackward, b.micro_batch, b.chunk, last(i)); break;
      case PipelineKind::kInputGrad: block(BlockKind::kInputGrad, b.micro_batch, b.chunk, false); break;
      case PipelineKind::kWeightGrad: block(BlockKind::kWeightGrad, b.micro_batch, b.chunk, last(i)); break;
    }
  }
  block(BlockKind::kOptimizer, -1, 0, false);
  close_chain();
}

}  // namespace ts::parallel::detail
