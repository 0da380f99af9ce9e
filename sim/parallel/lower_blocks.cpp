// Each device's program in the Lowerer: the schedule's blocks in order, lowered directly or
// as instances of block templates (lower_blocks).
#include "sim/parallel/lowerer.h"

namespace ts::parallel::detail {

namespace {

// Room for `more` elements after the last, growing geometrically (so that appending elements of
// the vector itself cannot move them).
template <class T>
void reserve_more(std::vector<T>& v, std::size_t more) {
  if (v.capacity() < v.size() + more) v.reserve(std::max(v.size() + more, 2 * v.capacity()));
}

}  // namespace

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
  const std::array<std::int64_t, 2> chunks = block_chunks(kind, chunk);  // forward, backward
  const std::int64_t forward_chunk = chunks[0];
  const bool forwards = kind == BlockKind::kForward || kind == BlockKind::kOverlapped ||
                        kind == BlockKind::kOverlappedSplit;
  const bool forwarded = forwarded_[static_cast<std::size_t>(forward_chunk)] != 0;
  const BlockKey key{kind, chunk, last, forwarded, bucket_params_};
  const std::uint32_t holds = holding(false);
  if (forwards) forwarded_[static_cast<std::size_t>(forward_chunk)] = 1;
  auto& blocks = program_->blocks[static_cast<std::size_t>(device_)];
  // The device's templates by kind and chunk: a handful each.
  const auto per_kind = static_cast<std::size_t>(chunks_ * chunks_);
  auto& known_here = known_[static_cast<std::size_t>(kind) * per_kind + static_cast<std::size_t>(chunk)];
  for (const KnownBlock& known : known_here) {
    if (!instance_of(known, key, holds)) continue;
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
  // Another device's template of the block, where sharing applies (not to the parameter
  // gathers and the optimizer step, which read the whole device).
  const bool shareable = options_.share_templates && kind != BlockKind::kParamGathers && kind != BlockKind::kOptimizer;
  const SharedBlock* shared = shareable ? find_shared(key, holds, chunks, mb == mb2) : nullptr;
  // The registers the block may read or write: the parameter gathers' only where it waits for
  // them or makes them.
  const bool params = kind == BlockKind::kParamGathers || (forwards && !forwarded);
  const std::int32_t registers = params ? program_->registers : kFirstParamRegister;
  held_before_.resize(static_cast<std::size_t>(registers));
  each_register(registers, [this](std::int32_t r, std::int32_t& v) {
    held_before_[static_cast<std::size_t>(r)] = v != kNone;
    if (v != kNone) v = BlockProgram::kRegisterBase + r;
  });
  SIM_ASSERT(!chains_.open(), "a chain spans blocks");
  read_ = 0;
  const std::uint32_t held = holding(true);
  BlockProgram::Template templ;
  templ.device = device_;
  templ.task_begin = static_cast<std::uint32_t>(g_.tasks.size());
  if (shared != nullptr) {
    copy_template(*shared, chunks, mb, mb2);
    templ.copy_of = static_cast<std::int32_t>(shared->known.templ);
  } else {
    lookup_begin_ = static_cast<std::uint32_t>(lookups_.size());
    recording_ = shareable;
    run_block(kind, mb, chunk, last, mb2);
    recording_ = false;
    close_chain();
  }
  templ.task_count = static_cast<std::uint32_t>(g_.tasks.size()) - templ.task_begin;
  SIM_ASSERT(g_.tasks.size() < static_cast<std::size_t>(BlockProgram::kRegisterBase), "too many tasks");
  each_register(registers, [this, &templ](std::int32_t r, std::int32_t v) {
    if (v == BlockProgram::kRegisterBase + r || (v == kNone && held_before_[static_cast<std::size_t>(r)] == 0)) return;
    BlockProgram::Template::Write w;
    w.reg = r;
    if (v >= BlockProgram::kRegisterBase) {
      w.from_register = v - BlockProgram::kRegisterBase;
    } else if (v != kNone) {
      SIM_ASSERT(v >= static_cast<std::int32_t>(templ.task_begin), "a register holds a task of another block");
      w.task = v - static_cast<std::int32_t>(templ.task_begin);
    }
    templ.writes.push_back(w);
  });
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
  if (!shareable || shared != nullptr) return;
  if (known.writes_params) {
    lookups_.resize(lookup_begin_);
    return;
  }
  SharedBlock entry{known, {}, {}, {}, mb, mb2, lookup_begin_,
                    static_cast<std::uint32_t>(lookups_.size()) - lookup_begin_};
  for (std::size_t k = 0; k < 2; ++k) {
    const std::int64_t vs = vstage(chunks[k]);
    entry.views[k] = views_[static_cast<std::size_t>(chunks[k])];
    entry.first_layer[k] = vfirst_[static_cast<std::size_t>(vs)];
    entry.layers[k] = chunk_layers(vs);
  }
  shared_[static_cast<std::size_t>(kind) * per_kind + static_cast<std::size_t>(chunk)].push_back(entry);
}

void Lowerer::classify_virtual_stages() {
  // Layers lower alike (up to their index) when these agree: all that lowering reads of a layer.
  auto alike = [this](std::int64_t a, std::int64_t b) {
    return model_.is_moe_layer(a) == model_.is_moe_layer(b) &&
           (model_.attention_window(a) > 0) == (model_.attention_window(b) > 0) &&
           layer_params(a) == layer_params(b) && expert_params(a) == expert_params(b);
  };
  std::vector<std::size_t> firsts;  // the first virtual stage of each class
  vs_class_.assign(vlayers_.size(), -1);
  for (std::size_t v = 0; v < vlayers_.size(); ++v) {
    for (std::size_t c = 0; c < firsts.size() && vs_class_[v] < 0; ++c) {
      const std::size_t u = firsts[c];
      if (vlayers_[u] != vlayers_[v]) continue;
      bool same = true;
      for (std::int64_t i = 0; i < vlayers_[v] && same; ++i) same = alike(vfirst_[u] + i, vfirst_[v] + i);
      if (same) vs_class_[v] = static_cast<std::int32_t>(c);
    }
    if (vs_class_[v] < 0) {
      vs_class_[v] = static_cast<std::int32_t>(firsts.size());
      firsts.push_back(v);
    }
  }
}

std::array<std::int64_t, 2> Lowerer::block_chunks(BlockKind kind, std::int64_t chunk) const {
  if (kind == BlockKind::kOverlapped || kind == BlockKind::kOverlappedSplit) return {chunk / chunks_, chunk % chunks_};
  return {chunk, chunk};
}

void Lowerer::note_lookup(const CommLookup& lookup) {
  for (std::size_t i = lookup_begin_; i < lookups_.size(); ++i) {
    if (lookups_[i].comm == lookup.comm) return;
  }
  lookups_.push_back(lookup);
}

const Lowerer::SharedBlock* Lowerer::find_shared(const BlockKey& key, std::uint32_t holds,
                                                 const std::array<std::int64_t, 2>& chunks, bool one_micro_batch) {
  const auto per_kind = static_cast<std::size_t>(chunks_ * chunks_);
  const auto& candidates = shared_[static_cast<std::size_t>(key.kind) * per_kind + static_cast<std::size_t>(key.chunk)];
  for (const SharedBlock& s : candidates) {
    if ((s.mb == s.mb2) != one_micro_batch || !(s.views[0] == views_[static_cast<std::size_t>(chunks[0])]) ||
        !(s.views[1] == views_[static_cast<std::size_t>(chunks[1])])) {
      continue;
    }
    if (instance_of(s.known, key, holds)) return &s;
  }
  return nullptr;
}

void Lowerer::copy_template(const SharedBlock& s, const std::array<std::int64_t, 2>& chunks, std::int32_t mb,
                            std::int32_t mb2) {
  // The communicators, looked up in the order the template's lowering first did (so that new
  // ones are made in the order lowering this block would make them).
  comm_map_.resize(g_.communicators.size(), -1);
  for (std::uint32_t i = s.lookup_begin; i < s.lookup_begin + s.lookup_count; ++i) {
    const CommLookup& l = lookups_[i];
    comm_map_[static_cast<std::size_t>(l.comm)] =
        l.pair ? pair_communicator(l.stream, stage_ + l.src, stage_ + l.dst, l.tag) : group_communicator(l.axes);
  }
  auto comm_of = [this](std::int32_t c) {
    if (c < 0) return c;
    const std::int32_t mine = comm_map_[static_cast<std::size_t>(c)];
    SIM_ASSERT(mine >= 0, "a copied template's communicator was not looked up");
    return mine;
  };
  // The layers' indices move by each chunk's shift (the two chunks of an overlapped block by
  // their own, told apart by the source's layers).
  std::array<std::int64_t, 2> shift{};
  for (std::size_t k = 0; k < 2; ++k) shift[k] = vfirst_[static_cast<std::size_t>(vstage(chunks[k]))] - s.first_layer[k];
  const bool one_shift = shift[0] == shift[1];
  auto layer_of = [&](std::int64_t layer) {
    if (layer < 0 || one_shift) return layer < 0 ? layer : layer + shift[0];
    for (std::size_t k = 0; k < 2; ++k) {
      if (layer >= s.first_layer[k] && layer < s.first_layer[k] + s.layers[k]) return layer + shift[k];
    }
    SIM_ASSERT(false, "a copied template's layer is in none of its chunks");
    return layer;
  };
  auto register_of = [&](std::int32_t r) {
    return r < kFirstParamRegister ? r : kFirstParamRegister + static_cast<std::int32_t>(layer_of(r - kFirstParamRegister));
  };
  auto micro_batch_of = [&](std::int32_t m) {
    if (m < 0 || m == s.mb) return m < 0 ? m : mb;
    SIM_ASSERT(m == s.mb2, "a copied template's task is of neither micro-batch");
    return mb2;
  };
  auto own = [&](Task& t) {
    t.device = device_;
    t.layer = static_cast<std::int32_t>(layer_of(t.layer));
    t.communicator = comm_of(t.communicator);
  };
  // A template's tasks, their dependencies, chains and chain steps each lie in one stretch of
  // the graph's arrays (its lowering appended them in order): each is copied as a whole and
  // moved to its new place.
  const BlockProgram::Template& from = program_->templates[s.known.templ];
  const std::uint32_t count = from.task_count;
  const auto begin = static_cast<std::uint32_t>(g_.tasks.size());
  if (count > 0) {
    const Task& last = g_.tasks[from.task_begin + count - 1];
    const std::uint32_t dep_from = g_.tasks[from.task_begin].dep_begin;
    const std::uint32_t dep_count = last.dep_begin + last.dep_count - dep_from;
    std::int32_t chain_from = -1, chain_to = -1;
    for (std::uint32_t i = 0; i < count; ++i) {
      const std::int32_t c = g_.tasks[from.task_begin + i].chain;
      if (c < 0) continue;
      if (chain_from < 0) chain_from = c;
      chain_to = c + 1;
    }
    const auto dep_at = static_cast<std::uint32_t>(g_.deps.size());
    const auto chain_at = static_cast<std::int32_t>(g_.chains.size());
    reserve_more(g_.tasks, count);
    for (std::uint32_t i = 0; i < count; ++i) {
      g_.tasks.push_back(g_.tasks[from.task_begin + i]);
      Task& t = g_.tasks.back();
      own(t);
      t.micro_batch = micro_batch_of(t.micro_batch);
      if (t.chain >= 0) t.chain += chain_at - chain_from;
      t.dep_begin = t.dep_begin - dep_from + dep_at;
    }
    const auto base = static_cast<std::uint32_t>(BlockProgram::kRegisterBase);
    reserve_more(g_.deps, dep_count);
    for (std::uint32_t k = 0; k < dep_count; ++k) {
      const std::uint32_t d = g_.deps[dep_from + k];
      if (d >= base) {
        g_.deps.push_back(base + static_cast<std::uint32_t>(register_of(static_cast<std::int32_t>(d - base))));
      } else {
        SIM_ASSERT(d - from.task_begin < count, "a template's task waits for a task of another block");
        g_.deps.push_back(d - from.task_begin + begin);
      }
    }
    if (chain_from >= 0) {
      const Chain& first_chain = g_.chains[static_cast<std::size_t>(chain_from)];
      const Chain& last_chain = g_.chains[static_cast<std::size_t>(chain_to - 1)];
      const std::uint32_t step_from = first_chain.step_begin;
      const std::uint32_t steps = last_chain.step_begin + last_chain.step_count - step_from;
      const auto step_at = static_cast<std::uint32_t>(g_.chain_steps.size());
      g_.chains.resize(static_cast<std::size_t>(chain_at + chain_to - chain_from));
      for (std::int32_t c = 0; c < chain_to - chain_from; ++c) {
        Chain& chain = g_.chains[static_cast<std::size_t>(chain_at + c)];
        chain = g_.chains[static_cast<std::size_t>(chain_from + c)];
        chain.step_begin = chain.step_begin - step_from + step_at;
      }
      reserve_more(g_.chain_steps, steps);
      for (std::uint32_t k = 0; k < steps; ++k) {
        g_.chain_steps.push_back(g_.chain_steps[step_from + k]);
        own(g_.chain_steps.back());
      }
    }
  }
  // The state lowering the block would leave: the registers it writes, what it read, the
  // bucket's fill, and its forward chunk's layers past their first forward.
  for (const BlockProgram::Template::Write& w : from.writes) {
    reg(w.reg) = w.task >= 0 ? static_cast<std::int32_t>(begin) + w.task
                 : w.from_register >= 0 ? BlockProgram::kRegisterBase + register_of(w.from_register)
                                        : kNone;
  }
  for (std::uint32_t i = s.lookup_begin; i < s.lookup_begin + s.lookup_count; ++i) {
    comm_map_[static_cast<std::size_t>(lookups_[i].comm)] = -1;
  }
  read_ = s.known.read;
  bucket_params_ = s.known.bucket_after;
  if (s.known.key.kind == BlockKind::kForward || s.known.key.kind == BlockKind::kOverlapped ||
      s.known.key.kind == BlockKind::kOverlappedSplit) {
    for (std::int64_t i = 0; i < s.layers[0]; ++i) first_forward_of_layer_[static_cast<std::size_t>(s.first_layer[0] + shift[0] + i)] = false;
  }
}

bool Lowerer::instance_of(const KnownBlock& known, const BlockKey& key, std::uint32_t holds) const {
  if (!(known.key == key)) return false;
  const bool params = (known.read & register_bit(kFirstParamRegister)) != 0;
  return (((params ? holding(true) : holds) ^ known.holding) & known.read) == 0;
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
  experts_gather_ = kNone;
  bucket_params_ = 0;
  // Every register empty before the first block (block programs look at which hold a task).
  bucket_ready_ = kNone;
  param_ready_.assign(static_cast<std::size_t>(all_layers()), kNone);
  chains_.discard_open();
  for (auto& k : known_) k.clear();
  known_.resize(kBlockKinds * static_cast<std::size_t>(chunks_ * chunks_));
  forwarded_.assign(static_cast<std::size_t>(chunks_), 0);
  views_.resize(static_cast<std::size_t>(chunks_));
  for (std::int64_t c = 0; c < chunks_; ++c) {
    const std::int64_t vs = vstage(c);
    ChunkView& v = views_[static_cast<std::size_t>(c)];
    v.layers_class = vs_class_[static_cast<std::size_t>(vs)];
    v.embedding = vs == 0;
    v.head = vs == last_vstage();
    v.before = vs > 0 ? stage_before(vs) - stage_ : kNoPeer;
    v.after = vs < last_vstage() ? stage_after(vs) - stage_ : kNoPeer;
  }
  shared_.resize(kBlockKinds * static_cast<std::size_t>(chunks_ * chunks_));
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
