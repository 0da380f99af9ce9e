#include "sim/runtime/replay_internal.h"

namespace ts::runtime::internal {

void ChainSchedules::plan(const TaskGraph& g, Costs& costs) {
  splits.assign(g.chains.size(), TimeBreakdown{});
  list_split.assign(g.op_lists.size(), -1);
  rerun = costs.rerun_times();
  for (std::size_t i = 0; i < g.op_lists.size(); ++i) {
    if (rerun[i] == Duration()) continue;
    list_split[i] = static_cast<std::int32_t>(splits.size());
    splits.push_back(rerun_split(costs.list_time(static_cast<std::int32_t>(i)), rerun[i]));
  }
  steps.resize(g.chain_steps.size());
  for (std::size_t i = 0; i < g.chain_steps.size(); ++i) {
    const Task& step = g.chain_steps[i];
    Step& p = steps[i];
    if (step.kind == TaskKind::kCompute) {
      p.duration = costs.compute_time(step);
    } else {
      // Started by its own call alone: a chain may hold only collectives of one member.
      SIM_ASSERT(costs.members(step.communicator) == 1, "a chain step waits for other devices");
      p.duration = costs.comm_time(step, costs.comm_cost(step));
    }
    SIM_ASSERT(p.duration >= Duration(), "event scheduled in the past");
    p.stream = static_cast<std::uint8_t>(step.stream);
    p.category = task_category(step);
    p.split = split_of(step);
  }
  plans.assign(g.chains.size(), Plan{});
  for (std::size_t c = 0; c < g.chains.size(); ++c) {
    const parallel::Chain& chain = g.chains[c];
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
