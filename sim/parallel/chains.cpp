#include "sim/parallel/chains.h"

#include "sim/base/diagnostic.h"
#include "sim/base/hash.h"

namespace ts::parallel {

std::int32_t ChainBuilder::add(const Task& t, std::initializer_list<std::int32_t> deps,
                               bool chainable) {
  if (chainable) return add_step(t, deps);
  return add_task(t, resolved(deps));
}

ChainBuilder::Deps ChainBuilder::resolved(std::initializer_list<std::int32_t> deps) {
  Deps out;
  for (std::int32_t d : deps) {
    if (d < 0) continue;
    SIM_ASSERT(out.count < out.id.size(), "too many dependencies");
    out.id[out.count++] = resolve(d);
  }
  return out;
}

std::int32_t ChainBuilder::add_task(Task t, const Deps& deps) {
  t.dep_begin = static_cast<std::uint32_t>(g_.deps.size());
  for (std::size_t i = 0; i < deps.count; ++i)
    g_.deps.push_back(static_cast<std::uint32_t>(deps.id[i]));
  t.dep_count = static_cast<std::uint32_t>(deps.count);
  g_.tasks.push_back(t);
  SIM_ASSERT(g_.tasks.size() < static_cast<std::size_t>(kStepHandle), "too many tasks");
  return static_cast<std::int32_t>(g_.tasks.size() - 1);
}

std::int32_t ChainBuilder::add_step(const Task& t, std::initializer_list<std::int32_t> deps) {
  std::int32_t only = -1;
  std::size_t count = 0;
  for (std::int32_t d : deps) {
    if (d < 0) continue;
    only = d;
    ++count;
  }
  const bool extends =
      !open_.empty() && count == 1 &&
      only == kStepHandle + open_first_ + static_cast<std::int32_t>(open_.size()) - 1 &&
      t.micro_batch == open_.front().micro_batch;
  if (!extends) {
    const Deps d = resolved(deps);
    close_chain(open_.size());
    open_deps_ = d;
    open_first_ = static_cast<std::int32_t>(closed_.size());
  }
  open_.push_back(t);
  closed_.push_back(-1);
  return kStepHandle + static_cast<std::int32_t>(closed_.size()) - 1;
}

std::int32_t ChainBuilder::resolve(std::int32_t id) {
  if (id < kStepHandle) return id;
  const std::int32_t n = id - kStepHandle;
  if (!open_.empty() && n >= open_first_)
    close_chain(static_cast<std::size_t>(n - open_first_) + 1);
  SIM_ASSERT(closed_[static_cast<std::size_t>(n)] >= 0,
             "a chain step is used after its chain closed");
  return closed_[static_cast<std::size_t>(n)];
}

Task& ChainBuilder::task_ref(std::int32_t id) {
  if (id < kStepHandle) return g_.tasks[static_cast<std::size_t>(id)];
  const std::int32_t n = id - kStepHandle;
  SIM_ASSERT(!open_.empty() && n >= open_first_, "a closed chain step is amended");
  return open_[static_cast<std::size_t>(n - open_first_)];
}

// Closes the first `count` steps of the open chain into a task (a lone step is an ordinary task);
// the rest stay open and wait for it.
void ChainBuilder::close_chain(std::size_t count) {
  if (count == 0) return;
  std::int32_t id;
  if (count == 1) {
    id = add_task(open_.front(), open_deps_);
  } else {
    Task c = open_.front();
    c.kind = TaskKind::kCompute;
    c.ops = -1;
    c.comm = CommOp::kAllReduce;
    c.bytes = Bytes();
    c.communicator = -1;
    c.hidden_by = -1;
    c.alloc_at_start = Bytes();
    c.free_at_end = Bytes();
    c.chain = intern_chain(count);
    id = add_task(c, open_deps_);
  }
  closed_[static_cast<std::size_t>(open_first_) + count - 1] = id;
  open_.erase(open_.begin(), open_.begin() + static_cast<std::ptrdiff_t>(count));
  open_first_ += static_cast<std::int32_t>(count);
  open_deps_ = Deps{};
  open_deps_.id[0] = id;
  open_deps_.count = 1;
}

// The chain of the first `count` open steps, shared with an earlier chain of the same steps (the
// same block of layers recurs for every micro-batch).
std::int32_t ChainBuilder::intern_chain(std::size_t count) {
  std::vector<std::int32_t>* candidates = intern_ ? &chain_candidates(count) : nullptr;
  if (candidates != nullptr) {
    auto same = [](const Task& a, const Task& b) {
      return a.kind == b.kind && a.stream == b.stream && a.pass == b.pass && a.part == b.part &&
             a.layer == b.layer && a.ops == b.ops && a.duration == b.duration && a.comm == b.comm &&
             a.bytes == b.bytes && a.communicator == b.communicator && a.hidden_by == b.hidden_by &&
             a.alloc_at_start == b.alloc_at_start && a.free_at_end == b.free_at_end;
    };
    for (std::int32_t c : *candidates) {
      const Chain& chain = g_.chains[static_cast<std::size_t>(c)];
      if (chain.step_count != count) continue;
      bool equal = true;
      for (std::size_t i = 0; i < count && equal; ++i)
        equal = same(g_.chain_steps[chain.step_begin + i], open_[i]);
      if (equal) return c;
    }
  }
  Chain chain;
  chain.step_begin = static_cast<std::uint32_t>(g_.chain_steps.size());
  chain.step_count = static_cast<std::uint32_t>(count);
  for (std::size_t i = 0; i < count; ++i) {
    Task step = open_[i];
    step.micro_batch = -1;  // the chain task's
    step.dep_begin = 0;
    step.dep_count = 0;
    g_.chain_steps.push_back(step);
  }
  g_.chains.push_back(chain);
  const auto id = static_cast<std::int32_t>(g_.chains.size() - 1);
  if (candidates != nullptr) candidates->push_back(id);
  return id;
}

// The chains that may equal the first `count` open steps (by a hash of the steps).
std::vector<std::int32_t>& ChainBuilder::chain_candidates(std::size_t count) {
  std::uint64_t h = kFnvOffset;
  auto mix = [&h](std::uint64_t v) { h = fnv_mix(h, v); };
  for (std::size_t i = 0; i < count; ++i) {
    const Task& t = open_[i];
    mix(static_cast<std::uint64_t>(t.kind) | static_cast<std::uint64_t>(t.stream) << 8 |
        static_cast<std::uint64_t>(t.pass) << 16 | static_cast<std::uint64_t>(t.part) << 24 |
        static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.layer)) << 32);
    mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.ops)) |
        static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.communicator)) << 32);
    mix(static_cast<std::uint64_t>(t.bytes.count()) ^
        static_cast<std::uint64_t>(t.alloc_at_start.count()) << 1 ^
        static_cast<std::uint64_t>(t.free_at_end.count()) << 2 ^
        static_cast<std::uint64_t>(t.duration.ps()) << 3);
    mix(static_cast<std::uint64_t>(static_cast<std::uint32_t>(t.hidden_by)) |
        static_cast<std::uint64_t>(t.comm) << 32);
  }
  return chain_index_[h ^ count];
}

}  // namespace ts::parallel
