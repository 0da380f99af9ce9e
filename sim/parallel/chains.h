// Task emission with chain compression: a back-end pass of the lowering that knows tasks and
// dependencies only (no parallelism).
#pragma once

#include <array>
#include <cstdint>
#include <initializer_list>
#include <unordered_map>
#include <vector>

#include "sim/parallel/task_graph.h"

namespace ts::parallel {

// Appends tasks to a graph. Tasks marked chainable (coarse lowering) become steps of chains (see
// Chain): steps gather in the open chain and are named by handles (kStepHandle + n for the n-th
// step) until the chain closes into one task. A step extends the open chain when it waits for
// exactly the chain's last step, else it opens a new chain. Only a chain's last step may have
// dependents: a handle used as a dependency closes the chain after its step (the steps after it
// open the next chain), and a handle held for later must be resolved when held (resolve());
// resolving an inner step of a closed chain is an internal error, never a silent merge.
class ChainBuilder {
 public:
  static constexpr std::int32_t kStepHandle = std::int32_t{1} << 30;

  // `intern`: chains with the same steps are stored once (a block program stores each recurring
  // block once already, as a template: its chains are not looked up).
  ChainBuilder(TaskGraph& graph, bool intern) : g_(graph), intern_(intern) {}

  // Appends `t` depending on `deps` (task ids or handles; negative entries are ignored): as a
  // chain step if `chainable`, else as a task.
  std::int32_t add(const Task& t, std::initializer_list<std::int32_t> deps, bool chainable);
  // The task id that `id` names (closing the open chain after its step where needed).
  std::int32_t resolve(std::int32_t id);
  // The task or open step that `id` names, to amend it right after it was added.
  Task& task_ref(std::int32_t id);
  // Closes the open chain (at the end of a block or device).
  void close() { close_chain(open_.size()); }
  bool open() const { return !open_.empty(); }
  void discard_open() { open_.clear(); }

 private:
  // Dependencies as task ids: step handles are resolved (closing chains where needed) before the
  // task's entries are appended, since closing a chain appends its own.
  struct Deps {
    std::array<std::int32_t, 4> id{};
    std::size_t count = 0;
  };
  Deps resolved(std::initializer_list<std::int32_t> deps);
  std::int32_t add_task(Task t, const Deps& deps);
  std::int32_t add_step(const Task& t, std::initializer_list<std::int32_t> deps);
  void close_chain(std::size_t count);
  std::int32_t intern_chain(std::size_t count);
  std::vector<std::int32_t>& chain_candidates(std::size_t count);

  TaskGraph& g_;
  bool intern_;
  // The open chain's steps, its first step's dependencies and handle number, and by handle
  // number the task a closed chain ends with (-1 for inner steps).
  std::vector<Task> open_;
  Deps open_deps_;
  std::int32_t open_first_ = 0;
  std::vector<std::int32_t> closed_;
  std::unordered_map<std::uint64_t, std::vector<std::int32_t>> chain_index_;  // by hash of steps
};

}  // namespace ts::parallel
