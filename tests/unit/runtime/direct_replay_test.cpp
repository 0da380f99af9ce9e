// The fast replays against the event-engine replay of the fine task graph, which they must match
// exactly: the direct evaluation (no event queue) of the fine graph, task by task, the replay
// summary of the coarse graph (chains of compute and tensor-parallel steps as single tasks), and
// the replay of the block program (each device's repeated blocks lowered once).
#include <catch2/catch.hpp>

#include <algorithm>
#include <optional>
#include <string>
#include <vector>

#include "sim/compute/compute_model.h"
#include "sim/network/network_model.h"
#include "sim/parallel/lowering.h"
#include "sim/runtime/block_replay.h"
#include "sim/runtime/breakdown.h"
#include "sim/runtime/executor.h"
#include "sim/topology/topology.h"

using namespace ts;
using parallel::CpAlgo;
using parallel::ParallelPlan;
using parallel::Recompute;
using parallel::Schedule;

namespace {

ir::ModelSpec model() {
  ir::ModelSpec m;
  m.name = "replay-test";
  m.num_layers = 8;
  m.hidden = 2048;
  m.num_heads = 16;
  m.num_kv_heads = 8;
  m.ffn_hidden = 5632;
  m.vocab = 32000;
  m.max_seq_len = 4096;
  return m;
}

compute::GpuSpec gpu() {
  compute::GpuSpec g;
  g.name = "test-gpu";
  g.peak_bf16 = FlopRate::tflops(400);
  g.memory_bandwidth = Bandwidth::gbytes_per_s(2000);
  g.matmul_efficiency = 0.7;
  g.memory_efficiency = 0.9;
  g.kernel_launch_overhead = Duration::from_us(4);
  return g;
}

// Slow enough links that communication overlaps compute, and tensor-parallel collectives that
// span nodes (TP 16 on 8-GPU nodes) outlast the compute next to them.
topology::ClusterSpec cluster() {
  topology::ClusterSpec c;
  c.name = "test";
  c.scale_up.gpus_per_domain = c.host.gpus_per_host = 8;
  c.scale_up.nvlink_bandwidth = Bandwidth::gbytes_per_s(150);
  c.host.nic_bandwidth = Bandwidth::gbits_per_s(100);
  c.host.nics_per_host = 2;
  return c;
}

struct Case {
  std::string name;
  ParallelPlan plan;
};

ParallelPlan base(std::int64_t tp, std::int64_t pp, std::int64_t dp, std::int64_t cp = 1) {
  ParallelPlan p;
  p.tp = tp;
  p.pp = pp;
  p.dp = dp;
  p.cp = cp;
  p.seq_len = 2048;
  p.micro_batch = 1;
  p.global_batch = 8 * dp;
  p.grad_bucket_params = 20'000'000;  // several buckets per stage
  return p;
}

std::vector<Case> cases() {
  std::vector<Case> out;
  auto add = [&](std::string name, ParallelPlan p) { out.push_back({std::move(name), std::move(p)}); };
  // Many micro-batches: the block replay skips steady-state periods.
  const std::pair<Schedule, const char*> long_schedules[] = {
      {Schedule::k1F1B, "1F1B"}, {Schedule::kInterleaved, "interleaved"}, {Schedule::kZbH1, "ZB-H1"}, {Schedule::kGpipe, "GPipe"}};
  for (const auto& [s, name] : long_schedules) {
    auto p = base(2, 4, 1);
    p.global_batch = 96;
    p.schedule = s;
    if (s == Schedule::kInterleaved) p.vpp = 2;
    p.zero_stage = 1;
    add(std::string("96 micro-batches, ") + name, p);
  }
  {
    // Tensor parallelism across nodes: a delay travels down the eight stages and back, and the
    // steady state comes back after eight periods, not one.
    auto p = base(16, 8, 1);
    p.global_batch = 64;
    p.zero_stage = 1;
    add("64 micro-batches, 8 stages, a cycle of 8 periods", p);
  }
  add("1F1B, ZeRO 0", base(2, 4, 2));
  {
    auto p = base(2, 2, 2);
    p.schedule = Schedule::kInterleaved;
    p.vpp = 2;
    p.zero_stage = 1;
    p.sequence_parallel = true;
    p.recompute = Recompute::kSelective;
    add("interleaved, ZeRO 1, sequence parallel, selective recompute", p);
  }
  {
    auto p = base(1, 2, 4);
    p.schedule = Schedule::kGpipe;
    p.zero_stage = 2;
    p.recompute = Recompute::kFull;
    add("GPipe, ZeRO 2, full recompute", p);
  }
  {
    auto p = base(2, 2, 4);
    p.zero_stage = 3;
    p.sequence_parallel = true;
    add("1F1B, ZeRO 3, sequence parallel", p);
  }
  {
    auto p = base(2, 2, 2, 2);
    p.cp_algo = CpAlgo::kRing;
    p.recompute = Recompute::kFull;
    add("ring context parallelism, full recompute", p);
  }
  {
    auto p = base(2, 1, 2, 2);
    p.cp_algo = CpAlgo::kUlysses;
    p.zero_stage = 1;
    add("Ulysses context parallelism", p);
  }
  {
    auto p = base(2, 2, 1, 2);
    p.cp_algo = CpAlgo::kAllGather;
    p.sequence_parallel = true;
    add("all-gather context parallelism", p);
  }
  {
    auto p = base(4, 2, 2);
    p.sequence_parallel = true;
    p.tp_comm_overlap = true;
    p.zero_stage = 1;
    add("TP communication overlap", p);
  }
  {
    auto p = base(2, 2, 2);
    p.mst_chunks = 2;
    p.recompute = Recompute::kSelective;
    add("Mini-Sequence Transformer chunks", p);
  }
  {
    auto p = base(2, 2, 4);
    p.zero_stage = 1;
    p.overlap_grad_reduce = false;
    p.overlap_param_gather = false;
    add("ZeRO 1 without overlapped reduction and gathering", p);
  }
  {
    auto p = base(16, 2, 1);
    p.schedule = Schedule::kInterleaved;
    p.vpp = 4;
    add("TP across nodes, one layer per model chunk", p);
  }
  {
    auto p = base(16, 2, 2);
    p.sequence_parallel = true;
    p.pp_layers = {3, 5};
    p.micro_batch = 2;
    add("TP across nodes, uneven stages, sequence parallel", p);
  }
  {
    auto p = base(4, 1, 4);
    p.flash_attention = false;
    add("no pipeline, unfused attention", p);
  }
  {
    auto p = base(2, 4, 2);
    p.schedule = Schedule::kInterleaved;
    p.vpp = 2;
    p.zero_stage = 3;
    p.recompute = Recompute::kFull;
    p.global_batch = 24 * p.dp;
    add("interleaved, ZeRO 3, full recompute, 24 micro-batches", p);
  }
  {
    auto p = base(2, 4, 2);
    p.schedule = Schedule::kGpipe;
    p.zero_stage = 3;
    p.sequence_parallel = true;
    p.pp_layers = {1, 3, 3, 1};
    add("GPipe, ZeRO 3, uneven stages", p);
  }
  {
    auto p = base(2, 4, 4);
    p.zero_stage = 2;
    p.recompute = Recompute::kSelective;
    p.global_batch = 32 * p.dp;
    add("1F1B, ZeRO 2, selective recompute, 32 micro-batches", p);
  }
  {
    auto p = base(2, 4, 2);
    p.schedule = Schedule::kZbH1;
    p.zero_stage = 1;
    p.sequence_parallel = true;
    add("zero-bubble H1, ZeRO 1, sequence parallel", p);
  }
  {
    auto p = base(2, 2, 2);
    p.schedule = Schedule::kZbH1;
    p.zero_stage = 3;
    p.recompute = Recompute::kFull;
    add("zero-bubble H1, ZeRO 3, full recompute", p);
  }
  {
    auto p = base(2, 2, 2);
    p.schedule = Schedule::kDualPipeV;
    p.sequence_parallel = true;
    p.tp_comm_overlap = true;
    add("DualPipeV, sequence parallel, TP communication overlap", p);
  }
  {
    auto p = base(2, 4, 2);
    p.schedule = Schedule::kDualPipeV;
    p.zero_stage = 3;
    p.pp_layers = {1, 1, 1, 1, 1, 1, 1, 1};
    add("DualPipeV, ZeRO 3, one layer per chunk", p);
  }
  {
    auto p = base(2, 2, 2, 2);
    p.schedule = Schedule::kDualPipeV;
    p.cp_algo = CpAlgo::kRing;
    p.pp_layers = {1, 3, 2, 2};
    add("DualPipeV, ring context parallelism, uneven chunks", p);
  }
  return out;
}

parallel::LoweringOptions lowering(bool coarse) {
  parallel::LoweringOptions lo;
  lo.layer_kept = Bytes(300'000'000);
  lo.layer_rematerialized = Bytes(900'000'000);
  lo.head_transient = Bytes(700'000'000);
  lo.optimizer_bytes_per_param = Bytes(30);
  lo.coarse = coarse;
  return lo;
}


// Two block programs are the same program: every field of every task, dependency, chain step,
// communicator, template and block.
void require_same_program(const parallel::BlockProgram& a, const parallel::BlockProgram& b) {
  auto same_task = [](const parallel::Task& x, const parallel::Task& y) {
    return x.kind == y.kind && x.stream == y.stream && x.pass == y.pass && x.part == y.part && x.device == y.device &&
           x.layer == y.layer && x.micro_batch == y.micro_batch && x.ops == y.ops && x.chain == y.chain &&
           x.duration == y.duration && x.comm == y.comm && x.bytes == y.bytes && x.communicator == y.communicator &&
           x.hidden_by == y.hidden_by && x.dep_begin == y.dep_begin && x.dep_count == y.dep_count &&
           x.alloc_at_start == y.alloc_at_start && x.free_at_end == y.free_at_end;
  };
  const parallel::TaskGraph& g = a.graph;
  const parallel::TaskGraph& h = b.graph;
  REQUIRE(g.tasks.size() == h.tasks.size());
  for (std::size_t i = 0; i < g.tasks.size(); ++i) {
    INFO("task " << i << ": " << parallel::task_label(g, g.tasks[i]) << " / " << parallel::task_label(h, h.tasks[i]));
    REQUIRE(same_task(g.tasks[i], h.tasks[i]));
  }
  REQUIRE(g.deps == h.deps);
  REQUIRE(g.chains.size() == h.chains.size());
  for (std::size_t i = 0; i < g.chains.size(); ++i) {
    REQUIRE(g.chains[i].step_begin == h.chains[i].step_begin);
    REQUIRE(g.chains[i].step_count == h.chains[i].step_count);
  }
  REQUIRE(g.chain_steps.size() == h.chain_steps.size());
  for (std::size_t i = 0; i < g.chain_steps.size(); ++i) REQUIRE(same_task(g.chain_steps[i], h.chain_steps[i]));
  REQUIRE(g.op_lists.size() == h.op_lists.size());
  REQUIRE(g.communicators.size() == h.communicators.size());
  for (std::size_t i = 0; i < g.communicators.size(); ++i) {
    INFO("communicator " << i);
    REQUIRE(g.communicators[i].axes == h.communicators[i].axes);
    REQUIRE(g.communicators[i].ranks == h.communicators[i].ranks);
    REQUIRE(g.communicators[i].tag == h.communicators[i].tag);
    REQUIRE(g.communicators[i].dispatch == h.communicators[i].dispatch);
  }
  REQUIRE(a.templates.size() == b.templates.size());
  for (std::size_t i = 0; i < a.templates.size(); ++i) {
    const auto& x = a.templates[i];
    const auto& y = b.templates[i];
    INFO("template " << i);
    REQUIRE((x.device == y.device && x.task_begin == y.task_begin && x.task_count == y.task_count));
    REQUIRE(x.writes.size() == y.writes.size());
    for (std::size_t k = 0; k < x.writes.size(); ++k) {
      REQUIRE((x.writes[k].reg == y.writes[k].reg && x.writes[k].task == y.writes[k].task &&
               x.writes[k].from_register == y.writes[k].from_register));
    }
  }
  REQUIRE(a.blocks.size() == b.blocks.size());
  for (std::size_t d = 0; d < a.blocks.size(); ++d) {
    REQUIRE(a.blocks[d].size() == b.blocks[d].size());
    for (std::size_t i = 0; i < a.blocks[d].size(); ++i) {
      const auto& x = a.blocks[d][i];
      const auto& y = b.blocks[d][i];
      INFO("device " << d << ", block " << i);
      REQUIRE((x.templ == y.templ && x.micro_batch == y.micro_batch && x.micro_batch2 == y.micro_batch2));
    }
  }
}

}  // namespace

TEST_CASE("the direct replay and the coarse graph's replay match the event replay exactly") {
  const auto cm = compute::make_roofline_model(gpu());
  const ir::ModelSpec m = model();
  for (const Case& c : cases()) {
    DYNAMIC_SECTION(c.name) {
      const ParallelPlan& plan = c.plan;
      const parallel::Layout layout(plan);
      const topology::Topology topo(cluster(), static_cast<std::int32_t>(plan.num_gpus()));
      const network::NetworkModel net(topo);
      const parallel::TaskGraph fine = parallel::lower(m, plan, lowering(false));
      const parallel::TaskGraph coarse = parallel::lower(m, plan, lowering(true));
      REQUIRE(coarse.chains.size() > 0);
      REQUIRE(coarse.tasks.size() < fine.tasks.size());

      runtime::ExecuteOptions reference_options;
      reference_options.event_engine = true;
      const runtime::Execution reference = runtime::execute(fine, layout, *cm, net, reference_options);
      const runtime::ReplaySummary expected = runtime::summarize(fine, reference, 0);
      REQUIRE(runtime::direct_replay_applies(fine, layout, *cm, net));
      // Recompute: full recompute's tasks, or selective recompute's reruns inside backward tasks.
      CHECK((expected.time[0][runtime::TimeCategory::kRecompute] > Duration()) ==
            (plan.recompute != Recompute::kNone));

      // The direct evaluation of the fine graph: the same timings, task by task.
      const runtime::Execution direct = runtime::execute(fine, layout, *cm, net, {});
      REQUIRE(direct.end == reference.end);
      REQUIRE(direct.events == reference.events);
      for (std::size_t t = 0; t < fine.tasks.size(); ++t) {
        INFO("task " << t << ": " << parallel::task_label(fine, fine.tasks[t]));
        REQUIRE(direct.timings[t].start == reference.timings[t].start);
        REQUIRE(direct.timings[t].end == reference.timings[t].end);
        REQUIRE(direct.comm[t].algorithm == reference.comm[t].algorithm);
        REQUIRE(direct.comm[t].protocol == reference.comm[t].protocol);
      }

      // The summaries of the fine graph's and of the coarse graph's direct replays.
      for (const bool use_coarse : {false, true}) {
        const parallel::TaskGraph& g = use_coarse ? coarse : fine;
        INFO((use_coarse ? "coarse graph" : "fine graph"));
        const runtime::ReplaySummary got = runtime::replay_summary(g, layout, *cm, net, {});
        REQUIRE(got.end == expected.end);
        REQUIRE(got.last_device == expected.last_device);
        REQUIRE(got.events == expected.events);
        REQUIRE(got.tasks == static_cast<std::int64_t>(fine.tasks.size()));
        REQUIRE(got.time.size() == expected.time.size());
        for (std::size_t d = 0; d < got.time.size(); ++d) {
          INFO("device " << d);
          for (std::size_t k = 0; k < runtime::kNumTimeCategories; ++k) {
            INFO(runtime::time_category_name(static_cast<runtime::TimeCategory>(k)));
            REQUIRE(got.time[d].time[k] == expected.time[d].time[k]);
          }
          REQUIRE(got.memory[d].peak_dynamic == expected.memory[d].peak_dynamic);
          REQUIRE(runtime::peak_label(g, got.memory[d]) == runtime::peak_label(fine, expected.memory[d]));
        }
      }
    }
  }
}

TEST_CASE("a coarse graph counts its chains' steps as tasks and is refused per-task timings") {
  const auto cm = compute::make_roofline_model(gpu());
  const ParallelPlan plan = base(2, 2, 2);
  const topology::Topology topo(cluster(), static_cast<std::int32_t>(plan.num_gpus()));
  const network::NetworkModel net(topo);
  const parallel::TaskGraph fine = parallel::lower(model(), plan, lowering(false));
  const parallel::TaskGraph coarse = parallel::lower(model(), plan, lowering(true));
  std::size_t steps = 0, chain_tasks = 0;
  for (const auto& t : coarse.tasks) {
    if (t.chain < 0) continue;
    ++chain_tasks;
    steps += coarse.chains[static_cast<std::size_t>(t.chain)].step_count;
  }
  CHECK(coarse.tasks.size() - chain_tasks + steps == fine.tasks.size());
  // Chains recur once per micro-batch: their steps are stored once.
  CHECK(coarse.chain_steps.size() < steps);
  CHECK_THROWS(runtime::execute(coarse, parallel::Layout(plan), *cm, net, {}));
}

TEST_CASE("the block program's replay matches the coarse graph's replay exactly") {
  const auto cm = compute::make_roofline_model(gpu());
  const ir::ModelSpec m = model();
  runtime::ReplayBuffers buffers;  // shared, as a sweep's worker shares it between plans
  for (const Case& c : cases()) {
    DYNAMIC_SECTION(c.name) {
      const ParallelPlan& plan = c.plan;
      const parallel::Layout layout(plan);
      const topology::Topology topo(cluster(), static_cast<std::int32_t>(plan.num_gpus()));
      const network::NetworkModel net(topo);
      const parallel::TaskGraph coarse = parallel::lower(m, plan, lowering(true));
      const runtime::ReplaySummary expected = runtime::replay_summary(coarse, layout, *cm, net, {});
      const parallel::BlockProgram program = parallel::lower_blocks(m, plan, lowering(true));
      // Every micro-batch after the first few reuses a template.
      REQUIRE(program.graph.tasks.size() < coarse.tasks.size());
      const std::optional<runtime::ReplaySummary> got = runtime::replay_blocks(program, layout, *cm, net, buffers, 0);
      REQUIRE(got.has_value());
      // Long enough for a steady state (GPipe: its forwards or its backwards): a third of its
      // blocks or more are skipped.
      if (plan.num_micro_batches() >= 64) CHECK(got->skipped_blocks * 3 > static_cast<std::int64_t>(program.blocks[0].size() * program.blocks.size()));
      REQUIRE(got->end == expected.end);
      REQUIRE(got->last_device == expected.last_device);
      REQUIRE(got->events == expected.events);
      REQUIRE(got->tasks == expected.tasks);
      const auto last = static_cast<std::size_t>(expected.last_device);
      for (std::size_t k = 0; k < runtime::kNumTimeCategories; ++k) {
        INFO(runtime::time_category_name(static_cast<runtime::TimeCategory>(k)));
        REQUIRE(got->time[last].time[k] == expected.time[last].time[k]);
      }
      REQUIRE(got->memory.size() == expected.memory.size());
      for (std::size_t d = 0; d < got->memory.size(); ++d) {
        INFO("device " << d);
        REQUIRE(got->memory[d].peak_dynamic == expected.memory[d].peak_dynamic);
        REQUIRE(runtime::peak_label(program.graph, got->memory[d]) == runtime::peak_label(coarse, expected.memory[d]));
      }
    }
  }
}

TEST_CASE("a block program stores each device's repeated blocks once") {
  auto plan = base(2, 4, 2);
  plan.global_batch = 64 * plan.dp;
  const parallel::BlockProgram program = parallel::lower_blocks(model(), plan, lowering(true));
  REQUIRE(program.blocks.size() == 4);
  for (std::size_t d = 0; d < program.blocks.size(); ++d) {
    // Parameter gathers, 64 forwards and 64 backwards, the optimizer step.
    CHECK(program.blocks[d].size() == 2 + 2 * 64);
    std::vector<std::uint32_t> templates;
    for (const auto& b : program.blocks[d]) templates.push_back(b.templ);
    std::sort(templates.begin(), templates.end());
    templates.erase(std::unique(templates.begin(), templates.end()), templates.end());
    // The gathers, the first and the other forwards, the last and the other backwards, the step.
    CHECK(templates.size() == 6);
  }
}

TEST_CASE("a block program repeats steady runs as lowering every block would") {
  // Every schedule, ZeRO stage and recompute choice, long enough for steady runs; the program
  // lowered block by block is the reference.
  const ir::ModelSpec m = model();
  for (const Schedule s : {Schedule::kGpipe, Schedule::k1F1B, Schedule::kInterleaved, Schedule::kZbH1,
                           Schedule::kDualPipeV, Schedule::kZbV}) {
    for (const int zero : {0, 1, 3}) {
      for (const Recompute r : {Recompute::kNone, Recompute::kFull}) {
        auto plan = base(2, 4, 2);
        plan.global_batch = 48 * plan.dp;
        plan.schedule = s;
        if (s == Schedule::kInterleaved) plan.vpp = 2;
        plan.zero_stage = zero;
        plan.recompute = r;
        INFO("schedule " << static_cast<int>(s) << ", ZeRO " << zero << ", recompute " << static_cast<int>(r));
        parallel::LoweringOptions every = lowering(true);
        every.repeat_steady_runs = false;
        const parallel::BlockProgram expected = parallel::lower_blocks(m, plan, every);
        const parallel::BlockProgram got = parallel::lower_blocks(m, plan, lowering(true));
        require_same_program(got, expected);
      }
    }
  }
}

TEST_CASE("a block program copies templates across stages as lowering would") {
  // Every case above, a mixture of experts with dense first layers (expert parallelism, its
  // all-to-all overlap), banded attention on some layers and uneven stages: the program lowered
  // without copies is the reference, and copies are made wherever stages agree.
  std::vector<std::pair<ir::ModelSpec, Case>> all;
  for (const Case& c : cases()) all.push_back({model(), c});
  ir::ModelSpec moe = model();
  moe.num_layers = 16;
  moe.moe = ir::MoeSpec{8, 2, 1024, 1, 1024, 2};
  for (const Schedule s : {Schedule::k1F1B, Schedule::kInterleaved, Schedule::kDualPipeV, Schedule::kZbH1}) {
    auto p = base(2, 4, 4);
    p.ep = 4;
    p.schedule = s;
    if (s == Schedule::kInterleaved) p.vpp = 2;
    p.moe_a2a_overlap = s == Schedule::kDualPipeV;
    p.global_batch = 16 * p.dp;
    p.zero_stage = 1;
    all.push_back({moe, {"MoE, dense first layers, schedule " + std::to_string(static_cast<int>(s)), p}});
  }
  {
    // ZeRO-3 (FSDP) with experts sharded over their expert data-parallel group.
    auto p = base(1, 1, 8);
    p.ep = 2;
    p.zero_stage = 3;
    p.global_batch = 4 * p.dp;
    all.push_back({moe, {"MoE with ZeRO-3", p}});
  }
  ir::ModelSpec banded = model();
  banded.sliding_window = 512;
  banded.full_attention_every = 3;
  banded.num_layers = 12;
  {
    auto p = base(2, 6, 2);
    p.global_batch = 24 * p.dp;
    p.zero_stage = 3;
    all.push_back({banded, {"banded attention on two of three layers, ZeRO 3", p}});
  }
  {
    auto p = base(2, 4, 2);
    p.pp_layers = {2, 4, 4, 2};
    p.global_batch = 24 * p.dp;
    p.recompute = Recompute::kFull;
    p.recompute_layers = 1;
    all.push_back({banded, {"banded attention, uneven stages, partial recompute", p}});
  }
  std::int64_t copied = 0;
  for (const auto& [m, c] : all) {
    INFO(c.name);
    parallel::LoweringOptions alone = lowering(true);
    alone.share_templates = false;
    const parallel::BlockProgram expected = parallel::lower_blocks(m, c.plan, alone);
    const parallel::BlockProgram got = parallel::lower_blocks(m, c.plan, lowering(true));
    auto copies = [](const parallel::BlockProgram& program) {
      return std::count_if(program.templates.begin(), program.templates.end(),
                           [](const parallel::BlockProgram::Template& t) { return t.copy_of >= 0; });
    };
    REQUIRE(copies(expected) == 0);
    require_same_program(got, expected);
    copied += copies(got);
    // Stages in the middle of a pipeline of four or more agree with each other.
    if (c.plan.pp >= 4 && c.plan.pp_layers.empty()) CHECK(copies(got) > 0);
  }
  CHECK(copied > 50);
}
