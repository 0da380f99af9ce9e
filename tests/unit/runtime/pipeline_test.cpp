// Pipeline schedules replayed with free communication and a FLOP-proportional compute model.
#include <catch2/catch.hpp>

#include "sim/parallel/lowering.h"
#include "sim/parallel/schedule.h"
#include "sim/runtime/breakdown.h"
#include "sim/runtime/executor.h"
#include "tests/unit/runtime/flop_model.h"

using namespace ts;
using testing::FlopModel;
using testing::uniform_model;

namespace {

// A cluster whose links are so fast that communication takes (almost) no time.
topology::ClusterSpec free_network() {
  topology::ClusterSpec c;
  c.name = "ideal";
  c.scale_up.gpus_per_domain = c.host.gpus_per_host = 8;
  c.scale_up.nvlink_bandwidth = Bandwidth::gbytes_per_s(1e9);
  c.host.nic_bandwidth = Bandwidth::gbytes_per_s(1e9);
  c.host.nics_per_host = 8;
  return c;
}

struct Replayed {
  parallel::TaskGraph graph;
  runtime::Execution execution;
  Duration layer_fwd, layer_bwd;
};

Replayed replay(const ir::ModelSpec& m, const parallel::ParallelPlan& plan, bool full = false) {
  parallel::LoweringOptions lo;
  lo.full = full;
  lo.layer_kept = Bytes(1000);
  lo.layer_rematerialized = Bytes(10);
  FlopModel fm;
  const topology::Topology topo(free_network(), static_cast<std::int32_t>(plan.num_gpus()));
  const network::NetworkModel net(topo);
  Replayed r{parallel::lower(m, plan, lo), {}, {}, {}};
  r.execution = runtime::execute(r.graph, parallel::Layout(plan), fm, net, {});
  // Per-layer forward and backward time from the same op lists the replay used.
  ir::LayerShape s;
  s.micro_batch = plan.micro_batch;
  s.seq = plan.seq_len;
  s.full_seq = plan.seq_len;
  const auto layer = ir::build_layer(m, s);
  r.layer_fwd = runtime::op_list_time(fm, layer.attention.forward) + runtime::op_list_time(fm, layer.mlp.forward);
  r.layer_bwd = runtime::op_list_time(fm, layer.attention.backward) + runtime::op_list_time(fm, layer.mlp.backward);
  return r;
}

parallel::ParallelPlan pipeline(std::int64_t p, std::int64_t m, parallel::Schedule schedule) {
  parallel::ParallelPlan plan;
  plan.pp = p;
  plan.global_batch = m;
  plan.seq_len = 1024;
  plan.schedule = schedule;
  return plan;
}

}  // namespace

TEST_CASE("1F1B and GPipe take (m + p − 1) stage slots, the bubble is (p − 1)/(m + p − 1)") {
  // Narayanan et al. 2021, Sec. 2.2: with t_f and t_b per stage and micro-batch, an iteration takes
  // (m + p − 1)(t_f + t_b) and each stage idles (p − 1)(t_f + t_b) of it.
  for (auto schedule : {parallel::Schedule::k1F1B, parallel::Schedule::kGpipe}) {
    for (auto [p, m] : {std::pair{4, 8}, std::pair{4, 16}, std::pair{8, 8}, std::pair{2, 1}}) {
      const std::int64_t layers_per_stage = 2;
      const auto r = replay(uniform_model(p * layers_per_stage), pipeline(p, m, schedule));
      const double slot = ((r.layer_fwd + r.layer_bwd) * layers_per_stage).seconds();
      const double expected = static_cast<double>(m + p - 1) * slot;
      INFO("p=" << p << " m=" << m);
      CHECK(r.execution.end.seconds() == Approx(expected).epsilon(0.01));
      const auto breakdown = runtime::time_breakdown(r.graph, r.execution, 0);
      const double idle = breakdown[0][runtime::TimeCategory::kIdle].seconds();
      CHECK(idle / r.execution.end.seconds() ==
            Approx(static_cast<double>(p - 1) / static_cast<double>(m + p - 1)).epsilon(0.02));
    }
  }
}

TEST_CASE("1F1B holds p − s micro-batches of activations on stage s, GPipe all m") {
  // Peak = in-flight micro-batches × layers × kept activations (1000 B per layer here), reached
  // when the first backward starts, whose MLP block adds its activation gradients (half a layer).
  const std::int64_t p = 4, m = 8, layers_per_stage = 2;
  const auto one_f_one_b = replay(uniform_model(p * layers_per_stage), pipeline(p, m, parallel::Schedule::k1F1B));
  const auto gpipe = replay(uniform_model(p * layers_per_stage), pipeline(p, m, parallel::Schedule::kGpipe));
  for (std::int64_t s = 0; s < p; ++s) {
    const auto idx = static_cast<std::size_t>(s);
    CHECK(one_f_one_b.execution.memory[idx].peak_dynamic.count() == (p - s) * layers_per_stage * 1000 + 500);
    CHECK(gpipe.execution.memory[idx].peak_dynamic.count() == m * layers_per_stage * 1000 + 500);
  }
}

TEST_CASE("symmetric mode and full mode give the same iteration time") {
  parallel::ParallelPlan plan = pipeline(2, 4, parallel::Schedule::k1F1B);
  plan.tp = 2;
  plan.dp = 2;
  plan.global_batch = 8;
  const auto sym = replay(uniform_model(4), plan, false);
  const auto full = replay(uniform_model(4), plan, true);
  CHECK(sym.graph.devices.size() == 2);
  CHECK(full.graph.devices.size() == 8);
  CHECK(sym.execution.end == full.execution.end);
}

TEST_CASE("the replay is deterministic") {
  const auto a = replay(uniform_model(8), pipeline(4, 8, parallel::Schedule::k1F1B));
  const auto b = replay(uniform_model(8), pipeline(4, 8, parallel::Schedule::k1F1B));
  REQUIRE(a.execution.timings.size() == b.execution.timings.size());
  for (std::size_t t = 0; t < a.execution.timings.size(); ++t) {
    CHECK(a.execution.timings[t].start == b.execution.timings[t].start);
    CHECK(a.execution.timings[t].end == b.execution.timings[t].end);
  }
}

namespace {

// A layer whose GEMMs dominate (hidden 4096, sequence 256: the attention core is under 1 % of
// the FLOPs), so that F, B (input gradients) and W (weight gradients) each take about one
// forward's GEMM time, as the closed forms of the zero-bubble schedules picture them.
ir::ModelSpec gemm_model(std::int64_t layers) {
  ir::ModelSpec m = uniform_model(layers);
  m.hidden = 4096;
  m.num_heads = 32;
  m.num_kv_heads = 32;
  m.ffn_hidden = 16384;
  return m;
}

parallel::ParallelPlan short_pipeline(std::int64_t p, std::int64_t m, parallel::Schedule schedule) {
  parallel::ParallelPlan plan = pipeline(p, m, schedule);
  plan.seq_len = 256;
  return plan;
}

// Per-layer F, B and W of the plan's shape, from the op lists the lowering splits.
struct LayerTimes {
  double f = 0, b = 0, w = 0;
};
LayerTimes layer_times(const ir::ModelSpec& m, const parallel::ParallelPlan& plan) {
  FlopModel fm;
  ir::LayerShape s;
  s.micro_batch = plan.micro_batch;
  s.seq = plan.seq_len;
  s.full_seq = plan.seq_len;
  const auto layer = ir::build_layer(m, s);
  LayerTimes t;
  for (const auto* block : {&layer.attention, &layer.mlp}) {
    t.f += runtime::op_list_time(fm, block->forward).seconds();
    for (const auto& op : block->backward) (op.weight_grad ? t.w : t.b) += runtime::op_list_time(fm, {op}).seconds();
  }
  return t;
}

double idle_of(const Replayed& r, std::size_t device) {
  return runtime::time_breakdown(r.graph, r.execution, 0)[device][runtime::TimeCategory::kIdle].seconds();
}

}  // namespace

TEST_CASE("zero-bubble H1 idles (p − 1)(F + B − 2W) per rank, B the whole backward") {
  // deepseek-ai/DualPipe README (Qi et al., ICLR 2024): 1F1B idles (p − 1)(F + B), ZB1P
  // (p − 1)(F + B − 2W), with F a stage's forward, B its whole backward and W the weight-gradient
  // part of B: the input gradients travel back without the W's, which fill the bubbles.
  for (auto [p, m] : {std::pair{4, 8}, std::pair{4, 16}, std::pair{8, 16}}) {
    const std::int64_t layers_per_stage = 2;
    const auto mdl = gemm_model(p * layers_per_stage);
    const auto plan = short_pipeline(p, m, parallel::Schedule::kZbH1);
    const LayerTimes t = layer_times(mdl, plan);
    const double f = t.f * layers_per_stage, b = (t.b + t.w) * layers_per_stage, w = t.w * layers_per_stage;
    const auto zb = replay(mdl, plan);
    const auto base = replay(mdl, short_pipeline(p, m, parallel::Schedule::k1F1B));
    INFO("p=" << p << " m=" << m);
    for (std::size_t s = 0; s < static_cast<std::size_t>(p); ++s) {
      CHECK(idle_of(zb, s) == Approx(static_cast<double>(p - 1) * (f + b - 2 * w)).epsilon(0.02));
      CHECK(idle_of(base, s) == Approx(static_cast<double>(p - 1) * (f + b)).epsilon(0.02));
    }
    // Same work, less idle: the iteration is shorter by (p − 1)·2W.
    const double saved = (base.execution.end - zb.execution.end).seconds();
    CHECK(saved == Approx(static_cast<double>(p - 1) * 2 * w).epsilon(0.02));
  }
}

TEST_CASE("DualPipeV idles (PP/2 − 1)(F&B + B − 3W) per rank with PP = 2p stages") {
  // deepseek-ai/DualPipe README, DualPipeV on PP/2 = p ranks of two chunks: F, B and W of one
  // chunk (B the whole backward), F&B an overlapped forward and backward, which on a free
  // network with nothing to overlap takes F + B.
  for (auto [p, m] : {std::pair{2, 8}, std::pair{4, 8}, std::pair{4, 16}}) {
    const std::int64_t layers_per_chunk = 2;
    const auto mdl = gemm_model(2 * p * layers_per_chunk);
    const auto plan = short_pipeline(p, m, parallel::Schedule::kDualPipeV);
    const LayerTimes t = layer_times(mdl, plan);
    const double f = t.f * layers_per_chunk, b = (t.b + t.w) * layers_per_chunk, w = t.w * layers_per_chunk;
    const auto r = replay(mdl, plan);
    INFO("p=" << p << " m=" << m);
    for (std::size_t s = 0; s < static_cast<std::size_t>(p); ++s) {
      CHECK(idle_of(r, s) == Approx(static_cast<double>(p - 1) * ((f + b) + b - 3 * w)).epsilon(0.03));
    }
  }
}

TEST_CASE("activations in flight: zero-bubble H1 as 1F1B, DualPipeV 2p + 1 chunks on the first rank") {
  // deepseek-ai/DualPipe README: activation per device PP (1F1B, ZB1P) and PP + 1 (DualPipeV,
  // in chunks of a PP-stage pipeline); the count comes from the blocks the replay runs.
  const std::int64_t p = 4, m = 8;
  for (std::int64_t s = 0; s < p; ++s) {
    CHECK(parallel::max_in_flight(parallel::pipeline_blocks(pipeline(p, m, parallel::Schedule::kZbH1), s)) == p - s);
    CHECK(parallel::max_in_flight(parallel::pipeline_blocks(pipeline(p, m, parallel::Schedule::k1F1B), s)) == p - s);
  }
  CHECK(parallel::max_in_flight(parallel::pipeline_blocks(pipeline(p, m, parallel::Schedule::kDualPipeV), 0)) ==
        2 * p + 1);
  // In the replay: 1000 B kept per layer and micro-batch. 1F1B's first stage peaks at p
  // micro-batches of its 2 layers plus the first backward's MLP gradients (half a layer);
  // ZB-H1's W's keep what their B's leave, so its last stage (W's p − 1 blocks late) holds as
  // much as 1F1B's first, and no stage more.
  const auto base = replay(uniform_model(2 * p), pipeline(p, m, parallel::Schedule::k1F1B));
  const auto zb = replay(uniform_model(2 * p), pipeline(p, m, parallel::Schedule::kZbH1));
  std::int64_t base_peak = 0, zb_peak = 0;
  for (std::size_t s = 0; s < static_cast<std::size_t>(p); ++s) {
    base_peak = std::max(base_peak, base.execution.memory[s].peak_dynamic.count());
    zb_peak = std::max(zb_peak, zb.execution.memory[s].peak_dynamic.count());
  }
  CHECK(base_peak == p * 2 * 1000 + 500);
  CHECK(zb_peak == base_peak);
  // DualPipeV: two chunks of one layer each per rank. The first rank starts its (2p + 1)-th
  // forward beside a backward, which runs first layer by layer and frees its layer before the
  // forward's layer allocates: 2p chunk sets at once, plus the backward's MLP gradients.
  const auto dv = replay(uniform_model(2 * p), pipeline(p, m, parallel::Schedule::kDualPipeV));
  CHECK(dv.execution.memory[0].peak_dynamic.count() == 2 * p * 1000 + 500);
}

TEST_CASE("ZB-V in the replay: 1F1B's activation peak, less idle than ZB-H1") {
  // Qi et al. (ICLR 2024; NeurIPS 2024): ZB-V keeps 1F1B's activation memory and, with F, B and
  // W of similar length, idles less than ZB-H1. Free network, balanced stages: 2p virtual stages
  // of `per_chunk` layers.
  for (auto [p, m] : {std::pair{4, 8}, std::pair{4, 16}}) {
    INFO("p=" << p << " m=" << m);
    const auto base = replay(uniform_model(2 * p), pipeline(p, m, parallel::Schedule::k1F1B));
    const auto zbv = replay(uniform_model(2 * p), pipeline(p, m, parallel::Schedule::kZbV));
    std::int64_t base_peak = 0, zbv_peak = 0;
    for (std::size_t s = 0; s < static_cast<std::size_t>(p); ++s) {
      base_peak = std::max(base_peak, base.execution.memory[s].peak_dynamic.count());
      zbv_peak = std::max(zbv_peak, zbv.execution.memory[s].peak_dynamic.count());
    }
    CHECK(zbv_peak <= base_peak);
    const auto mdl = gemm_model(2 * p * 2);
    const auto zb = replay(mdl, short_pipeline(p, m, parallel::Schedule::kZbH1));
    const auto v = replay(mdl, short_pipeline(p, m, parallel::Schedule::kZbV));
    double zb_idle = 0, v_idle = 0;
    for (std::size_t s = 0; s < static_cast<std::size_t>(p); ++s) {
      zb_idle = std::max(zb_idle, idle_of(zb, s));
      v_idle = std::max(v_idle, idle_of(v, s));
    }
    CHECK(v_idle < zb_idle);
    CHECK(v.execution.end < zb.execution.end);
  }
}
