#include "sim/runtime/replay_internal.h"

namespace ts::runtime::internal {

void ChainSchedules::plan(const TaskGraph& g, Costs& costs, const std::vector<std::int32_t>* sources) {
  splits.assign(g.chains.size(), TimeBreakdown{});
  list_split.assign(g.op_lists.size(), -1);
  rerun = costs.rerun_times();
  for (std::size_t i = 0; i < g.op_lists.size(); ++i) {
    if (rerun[i] == Duration()) continue;
    list_split[i] = static_cast<std::int32_t>(splits.size());
    splits.push_back(rerun_split(costs.list_time(static_cast<std::int32_t>(i)), rerun[i]));
  }
  steps.resize(g.chain_steps.size());
  plans.assign(g.chains.size(), Plan{});
  for (std::size_t c = 0; c < g.chains.size(); ++c) {
    const parallel::Chain& chain = g.chains[c];
    const std::int32_t source = sources != nullptr ? (*sources)[c] : -1;
    bool as_source = source >= 0;
    for (std::uint32_t k = 0; k < chain.step_count; ++k) {
      const Task& step = g.chain_steps[chain.step_begin + k];
      Step& p = steps[chain.step_begin + k];
      if (source >= 0) {
        // A copy of an earlier chain on another device: the same steps but for communicators.
        p = steps[g.chains[static_cast<std::size_t>(source)].step_begin + k];
        if (step.kind == TaskKind::kCompute) continue;
      }
      if (step.kind == TaskKind::kCompute) {
        p.duration = costs.compute_time(step);
      } else {
        // Started by its own call alone: a chain may hold only collectives of one member.
        SIM_ASSERT(costs.members(step.communicator) == 1, "a chain step waits for other devices");
        const Duration d = costs.comm_time(step, costs.comm_cost(step));
        as_source = as_source && d == p.duration;
        p.duration = d;
      }
      SIM_ASSERT(p.duration >= Duration(), "event scheduled in the past");
      p.stream = static_cast<std::uint8_t>(step.stream);
      p.category = task_category(step);
      p.split = split_of(step);
    }
    if (as_source) {
      plans[c] = plans[static_cast<std::size_t>(source)];
      splits[c] = splits[static_cast<std::size_t>(source)];
      continue;
    }
    Plan& plan = plans[c];
    Duration at;
    for (std::uint32_t k = 0; k < chain.step_count; ++k) {
      Step& step = steps[chain.step_begin + k];
      step.offset = at;
      at += step.duration;
      if (k == 0) plan.stream = step.stream;
      if (step.stream == plan.stream) {
        plan.stream_end = at;
      } else {
        if (plan.other < 0) {
          plan.other = step.stream;
          plan.other_start = step.offset;
        }
        plan.other_end = at;
      }
      if (step.stream == static_cast<std::uint8_t>(parallel::Stream::kCompute)) {
        if (plan.first_compute > plan.last_compute) plan.first_compute = k;
        plan.last_compute = k;
      }
    }
    plan.length = at;
    for (std::uint32_t k = plan.first_compute; k <= plan.last_compute; ++k) {
      const Step& step = steps[chain.step_begin + k];
      if (step.split >= 0) {
        const TimeBreakdown& rerun_split = splits[static_cast<std::size_t>(step.split)];
        for (std::size_t x = 0; x < kNumTimeCategories; ++x) splits[c].time[x] += rerun_split.time[x];
      } else {
        splits[c][step.category] += step.duration;
      }
    }
  }
}

}  // namespace ts::runtime::internal
