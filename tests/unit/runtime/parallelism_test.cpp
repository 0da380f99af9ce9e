// First-principles checks of the lowered 4D-parallel schedules, replayed with a FLOP-proportional
// compute model and an ideal (line-rate, no latency) network.
#include <catch2/catch.hpp>

#include "sim/parallel/lowering.h"
#include "sim/runtime/breakdown.h"
#include "sim/runtime/executor.h"
#include "tests/unit/runtime/flop_model.h"

using namespace ts;
using testing::FlopModel;
using testing::uniform_model;
using parallel::CommOp;
using parallel::Stream;

namespace {

// One GPU per node, so that data-parallel traffic crosses the NICs at `nic_gbytes` GB/s.
topology::ClusterSpec cluster(double nic_gbytes, std::int32_t gpus_per_node) {
  topology::ClusterSpec c;
  c.name = "ideal";
  c.scale_up.gpus_per_domain = c.host.gpus_per_host = gpus_per_node;
  c.scale_up.nvlink_bandwidth = Bandwidth::gbytes_per_s(1e6);
  c.host.nics_per_host = gpus_per_node;
  c.host.nic_bandwidth = Bandwidth::gbytes_per_s(nic_gbytes);
  c.fabric.switch_radix = 64;
  return c;
}

struct Replayed {
  parallel::TaskGraph graph;
  runtime::Execution execution;
  std::vector<runtime::TimeBreakdown> breakdown;
};

Replayed replay(const ir::ModelSpec& m, const parallel::ParallelPlan& plan, double nic_gbytes = 1e6,
                std::int32_t gpus_per_node = 8) {
  parallel::LoweringOptions lo;
  FlopModel fm;
  const topology::Topology topo(cluster(nic_gbytes, gpus_per_node), static_cast<std::int32_t>(plan.num_gpus()));
  const network::NetworkModel net(topo);
  Replayed r{parallel::lower(m, plan, lo), {}, {}};
  r.execution = runtime::execute(r.graph, parallel::Layout(plan), fm, net, {});
  r.breakdown = runtime::time_breakdown(r.graph, r.execution, 0);
  return r;
}

double seconds(const Replayed& r, runtime::TimeCategory c, std::size_t device = 0) {
  return r.breakdown[device][c].seconds();
}

// Sum over the tasks of device 0 of `bytes` times the bus factor of each data-parallel op:
// all-reduce moves its buffer twice (reduce-scatter + all-gather), the others once.
double dp_volume(const parallel::TaskGraph& g) {
  double v = 0;
  for (const auto& t : g.tasks) {
    if (t.device != 0 || t.stream != Stream::kDpComm) continue;
    v += t.bytes.real() * (t.comm == CommOp::kAllReduce ? 2.0 : 1.0);
  }
  return v;
}

// Four MoE layers of 8 experts (top 2), and 4 data-parallel ranks with EP 2 (expert-DP 2), 2
// micro-batches.
ir::ModelSpec small_moe() {
  ir::ModelSpec m = uniform_model(4);
  m.moe = ir::MoeSpec{8, 2, 512, 0, 0, 0};
  return m;
}
parallel::ParallelPlan small_moe_plan(int zero_stage) {
  parallel::ParallelPlan plan;
  plan.dp = 4;
  plan.ep = 2;
  plan.global_batch = 8;
  plan.seq_len = 1024;
  plan.zero_stage = zero_stage;
  return plan;
}

}  // namespace

TEST_CASE("interleaving with v model chunks divides the pipeline bubble by v") {
  // Narayanan et al. 2021, Sec. 2.2.2: bubble (p − 1)(t_f + t_b)/v for v chunks per rank.
  const std::int64_t p = 4, m = 8;
  parallel::ParallelPlan plan;
  plan.pp = p;
  plan.global_batch = m;
  plan.seq_len = 1024;
  const auto base = replay(uniform_model(16), plan);
  for (std::int64_t v : {2, 4}) {
    plan.schedule = parallel::Schedule::kInterleaved;
    plan.vpp = v;
    const auto inter = replay(uniform_model(16), plan);
    INFO("v=" << v);
    CHECK(seconds(inter, runtime::TimeCategory::kIdle) ==
          Approx(seconds(base, runtime::TimeCategory::kIdle) / static_cast<double>(v)).epsilon(0.03));
    // The work itself does not change.
    CHECK(seconds(inter, runtime::TimeCategory::kForward) ==
          Approx(seconds(base, runtime::TimeCategory::kForward)).epsilon(1e-6));
  }
}

TEST_CASE("symmetric mode and full mode agree within 0.5% for mixes of TP, PP, DP and CP") {
  struct Case {
    std::int64_t tp, pp, dp, cp, vpp;
    int zero;
    bool sp;
    parallel::CpAlgo cp_algo;
  };
  const Case cases[] = {
      {2, 2, 2, 1, 1, 0, false, parallel::CpAlgo::kRing},
      {2, 2, 2, 1, 2, 1, true, parallel::CpAlgo::kRing},
      {4, 2, 4, 2, 1, 1, true, parallel::CpAlgo::kRing},
      {2, 4, 2, 4, 1, 0, false, parallel::CpAlgo::kAllGather},
      {8, 2, 2, 2, 2, 3, true, parallel::CpAlgo::kUlysses},
      {1, 1, 8, 1, 1, 3, false, parallel::CpAlgo::kRing},
  };
  for (const auto& c : cases) {
    parallel::ParallelPlan plan;
    plan.tp = c.tp;
    plan.pp = c.pp;
    plan.dp = c.dp;
    plan.cp = c.cp;
    plan.vpp = c.vpp;
    if (c.vpp > 1) plan.schedule = parallel::Schedule::kInterleaved;
    plan.zero_stage = c.zero;
    plan.sequence_parallel = c.sp;
    plan.cp_algo = c.cp_algo;
    plan.global_batch = c.dp * 2 * c.pp;
    plan.seq_len = 2048;
    parallel::LoweringOptions lo;
    FlopModel fm;
    // 4 GPUs per node and 25 GB/s NICs: groups cross nodes, so placement matters.
    const topology::Topology topo(cluster(25, 4), static_cast<std::int32_t>(plan.num_gpus()));
    const network::NetworkModel net(topo);
    const auto sym_graph = parallel::lower(uniform_model(8), plan, lo);
    lo.full = true;
    const auto full_graph = parallel::lower(uniform_model(8), plan, lo);
    const auto sym = runtime::execute(sym_graph, parallel::Layout(plan), fm, net, {});
    const auto full = runtime::execute(full_graph, parallel::Layout(plan), fm, net, {});
    INFO("tp " << c.tp << " pp " << c.pp << " dp " << c.dp << " cp " << c.cp << " vpp " << c.vpp);
    CHECK(full_graph.devices.size() == static_cast<std::size_t>(plan.num_gpus()));
    CHECK(sym_graph.devices.size() == static_cast<std::size_t>(plan.pp));
    CHECK(sym.end.seconds() == Approx(full.end.seconds()).epsilon(0.005));
  }
}

namespace {

// Two data-parallel ranks, one gradient bucket per layer.
parallel::ParallelPlan bucketed_plan() {
  parallel::ParallelPlan plan;
  plan.dp = 2;
  plan.global_batch = 2;
  plan.seq_len = 4096;
  plan.grad_bucket_params = 1;  // one bucket per layer
  return plan;
}

}  // namespace

TEST_CASE("bucketed data-parallel all-reduce hides behind a long enough backward") {
  parallel::ParallelPlan plan = bucketed_plan();
  const ir::ModelSpec m = uniform_model(8);
  // Gradients: 8 layers × 12.6 M parameters × 4 B = 403 MB; at 1000 GB/s the whole all-reduce
  // takes ~0.4 ms against ~2.6 ms of backward, at 10 GB/s ~40 ms.
  const auto fast = replay(m, plan, 1000, 1);
  const auto slow = replay(m, plan, 10, 1);
  plan.overlap_grad_reduce = false;
  const auto fast_serial = replay(m, plan, 1000, 1);
  const auto slow_serial = replay(m, plan, 10, 1);
  const double backward = seconds(fast, runtime::TimeCategory::kBackward);
  // Without overlap the whole reduction is exposed.
  const double total_fast = seconds(fast_serial, runtime::TimeCategory::kExposedDp);
  const double total_slow = seconds(slow_serial, runtime::TimeCategory::kExposedDp);
  CHECK(total_slow == Approx(100 * total_fast).epsilon(0.02));
  // With overlap: only the last layer's bucket (1/8 of the traffic) is left when backward ends.
  CHECK(seconds(fast, runtime::TimeCategory::kExposedDp) < 0.2 * total_fast);
  // When communication is slower than the backward, what backward cannot cover is exposed.
  CHECK(seconds(slow, runtime::TimeCategory::kExposedDp) >= total_slow - backward - 1e-9);
  CHECK(seconds(slow, runtime::TimeCategory::kExposedDp) < total_slow);
}

TEST_CASE("ZeRO-3 moves 1.5× the data-parallel traffic of an all-reduce") {
  // Rajbhandari et al. 2020, Sec. 7.2.2: all-reduce = 2Ψ; ZeRO-3 = Ψ (forward all-gather) +
  // Ψ (backward all-gather) + Ψ (reduce-scatter) = 3Ψ, with one micro-batch per iteration.
  parallel::ParallelPlan plan;
  plan.dp = 4;
  plan.global_batch = 4;
  plan.seq_len = 1024;
  plan.grad_reduce = parallel::GradReduce::kBf16;  // gradients in the parameters' 2 bytes
  const ir::ModelSpec m = uniform_model(8);
  const auto ddp = replay(m, plan, 100, 8);
  plan.zero_stage = 3;
  const auto zero3 = replay(m, plan, 100, 8);
  CHECK(dp_volume(zero3.graph) == Approx(1.5 * dp_volume(ddp.graph)).epsilon(0.01));
}

TEST_CASE("ZeRO-3 in a pipeline gathers and reduces once per step") {
  // ParallelPlan::fsdp_in_pipeline: each layer's parameters gathered at its first forward and
  // kept, gradients reduce-scattered once after the last backward, whatever the micro-batches.
  parallel::ParallelPlan plan;
  plan.dp = 4;
  plan.pp = 2;
  plan.global_batch = 8;  // 2 micro-batches per pipeline
  plan.seq_len = 1024;
  plan.zero_stage = 3;
  const ir::ModelSpec m = uniform_model(8);
  REQUIRE(plan.fsdp_in_pipeline());
  CHECK(plan.zero_stage_in_effect() == 1);
  const double two = dp_volume(replay(m, plan, 100, 8).graph);
  plan.global_batch = 32;  // 8 micro-batches
  const auto eight = replay(m, plan, 100, 8);
  CHECK(dp_volume(eight.graph) == Approx(two).epsilon(1e-9));
  // ZeRO-1's traffic with its reduction after the last backward: the same graph's volume and time.
  parallel::ParallelPlan zero1 = plan;
  zero1.zero_stage = 1;
  zero1.overlap_grad_reduce = false;
  const auto one = replay(m, zero1, 100, 8);
  CHECK(dp_volume(one.graph) == Approx(dp_volume(eight.graph)).epsilon(1e-9));
  CHECK(one.execution.end == eight.execution.end);
  // Hybrid shard groups too: gathered and reduce-scattered within the group once per step, the
  // gradient shards then all-reduced across the groups on the replicas' stream.
  plan.zero_shard_group = 2;
  REQUIRE(plan.fsdp_in_pipeline());
  const auto hybrid = replay(m, plan, 100, 8);
  bool replica_all_reduce = false;
  for (const auto& t : hybrid.graph.tasks) {
    replica_all_reduce = replica_all_reduce || (t.device == 0 && t.stream == Stream::kDpReplica && t.comm == CommOp::kAllReduce);
  }
  CHECK(replica_all_reduce);
  plan.global_batch = 8;
  CHECK(dp_volume(hybrid.graph) == Approx(dp_volume(replay(m, plan, 100, 8).graph)).epsilon(1e-9));
  // Without a pipeline ZeRO-3 is ZeRO-3.
  plan.zero_shard_group = 0;
  plan.pp = 1;
  plan.dp = 8;
  CHECK_FALSE(plan.fsdp_in_pipeline());
  CHECK(plan.zero_stage_in_effect() == 3);
}

TEST_CASE("ZeRO-3 shards MoE experts over their expert data-parallel group") {
  // Per layer and micro-batch: the shared parameters gathered over DP (forward and backward) and
  // reduce-scattered after the backward, the routed experts likewise over the ranks that hold
  // the same experts (expert_dp = tp·cp·dp/(ep·etp)).
  const ir::ModelSpec m = small_moe();
  parallel::ParallelPlan plan = small_moe_plan(3);
  REQUIRE(plan.expert_dp() == 2);
  const auto r = replay(m, plan, 100, 8);
  const std::int64_t experts = ir::expert_parameter_count(m, 0) / plan.ep;
  const std::int64_t shared = parallel::layer_shared_parameters(m, plan, 0);
  REQUIRE(experts > 0);
  int expert_gathers = 0, shared_gathers = 0, expert_reduces = 0;
  for (const auto& t : r.graph.tasks) {
    if (t.device != 0 || t.stream != Stream::kDpComm) continue;
    if (t.comm == CommOp::kAllGather && t.bytes == Bytes(experts * 2)) ++expert_gathers;
    if (t.comm == CommOp::kAllGather && t.bytes == Bytes(shared * 2)) ++shared_gathers;
    if (t.comm == CommOp::kReduceScatter && t.bytes == Bytes(experts * plan.grad_reduce_bytes())) ++expert_reduces;
  }
  CHECK(expert_gathers == 4 * 2 * 2);  // layers x micro-batches x (forward, backward)
  CHECK(shared_gathers == 4 * 2 * 2);
  CHECK(expert_reduces == 4 * 2);
  // Expert parallelism over every data-parallel rank leaves one copy of each expert: nothing of
  // the experts to gather or reduce, only the shared parameters.
  plan.ep = 4;
  REQUIRE(plan.expert_dp() == 1);
  const auto alone = replay(m, plan, 100, 8);
  const std::int64_t mine = ir::expert_parameter_count(m, 0) / plan.ep;
  for (const auto& t : alone.graph.tasks) {
    if (t.device != 0 || t.stream != Stream::kDpComm) continue;
    CHECK(t.bytes != Bytes(mine * 2));
  }
}

TEST_CASE("ZeRO-1 gathers the experts over expert-DP after the step") {
  // ZeRO-1: every parameter of the rank gathered once per step, the shared ones over DP × CP and
  // the routed experts over their expert-DP group (Megatron-Core's expert-parallel buffers), before
  // the next forward (overlap_param_gather) or right after the step.
  const ir::ModelSpec m = small_moe();
  parallel::ParallelPlan plan = small_moe_plan(1);
  const auto gathered = [](const parallel::TaskGraph& g) {
    double v = 0;
    for (const auto& t : g.tasks) {
      if (t.device == 0 && t.stream == Stream::kDpComm && t.comm == CommOp::kAllGather) v += t.bytes.real();
    }
    return v;
  };
  const auto bytes = [&](bool with_experts) {
    const auto experts = parallel::stage_expert_parameters(m, plan, 0);
    REQUIRE(experts > 0);
    return 2.0 * static_cast<double>(parallel::stage_parameters(m, plan, 0) - (with_experts ? 0 : experts));
  };
  for (const bool overlap : {true, false}) {
    INFO("overlap_param_gather " << overlap);
    plan.overlap_param_gather = overlap;
    plan.ep = 2;  // expert-DP 2
    CHECK(gathered(replay(m, plan, 100, 8).graph) == Approx(bytes(true)));
    plan.ep = 4;  // expert-DP 1: the experts are not gathered
    CHECK(gathered(replay(m, plan, 100, 8).graph) == Approx(bytes(false)));
  }
}

TEST_CASE("a bf16 gradient reduction halves the gradient collectives, not the parameter gathers") {
  parallel::ParallelPlan plan;
  plan.dp = 4;
  plan.global_batch = 4;
  plan.seq_len = 1024;
  const ir::ModelSpec m = uniform_model(8);
  const double ddp_fp32 = dp_volume(replay(m, plan, 100, 8).graph);
  plan.grad_reduce = parallel::GradReduce::kBf16;
  CHECK(dp_volume(replay(m, plan, 100, 8).graph) == Approx(0.5 * ddp_fp32).epsilon(1e-9));
  // ZeRO-3: two bf16 gathers (2 + 2 bytes) and the reduce-scatter (4 bytes, then 2) per parameter.
  plan.zero_stage = 3;
  const double zero3_bf16 = dp_volume(replay(m, plan, 100, 8).graph);
  plan.grad_reduce = parallel::GradReduce::kFp32;
  const double zero3_fp32 = dp_volume(replay(m, plan, 100, 8).graph);
  CHECK(zero3_bf16 == Approx(zero3_fp32 * 6.0 / 8.0).epsilon(0.01));
}

TEST_CASE("ring attention passes one KV block per step, cp − 1 steps per layer and micro-batch") {
  parallel::ParallelPlan plan;
  plan.cp = 4;
  plan.global_batch = 1;
  plan.seq_len = 8192;
  plan.cp_algo = parallel::CpAlgo::kRing;
  const ir::ModelSpec m = uniform_model(2);
  const auto r = replay(m, plan);
  // K and V of the local 8192/4 tokens: b · s/cp · 2 · kv_heads · head_dim · 2 bytes.
  const std::int64_t kv = 1 * (8192 / 4) * 2 * 8 * 128 * 2;
  int forward_steps = 0, backward_steps = 0;
  for (const auto& t : r.graph.tasks) {
    if (t.device != 0 || t.stream != Stream::kCpComm) continue;
    CHECK(t.comm == CommOp::kSendRecv);
    if (t.pass == parallel::Pass::kForward) {
      ++forward_steps;
      CHECK(t.bytes.count() == kv);
    } else {
      ++backward_steps;
      CHECK(t.bytes.count() == 2 * kv);  // K, V and their gradients
    }
  }
  CHECK(forward_steps == 2 * 3);
  CHECK(backward_steps == 2 * 3);
  // With a fast network every KV step hides behind the attention block it overlaps.
  CHECK(seconds(r, runtime::TimeCategory::kExposedCp) < 0.01 * r.execution.end.seconds());
}

namespace {

// A device's streams from intervals in milliseconds: compute (forward) and data-parallel traffic.
struct Streams {
  std::vector<runtime::StreamInterval> compute, dp;
  std::array<runtime::StreamIntervals, parallel::kNumStreams> view() const {
    std::array<runtime::StreamIntervals, parallel::kNumStreams> s{};
    s[static_cast<std::size_t>(Stream::kCompute)] = {compute.data(), compute.data() + compute.size()};
    s[static_cast<std::size_t>(Stream::kDpComm)] = {dp.data(), dp.data() + dp.size()};
    return s;
  }
};

runtime::StreamInterval ms(double a, double b, runtime::TimeCategory c) {
  return {SimTime() + Duration::from_seconds(a * 1e-3), SimTime() + Duration::from_seconds(b * 1e-3), c, -1};
}

double contention_ms(const Streams& s, double slowdown) {
  const auto t = runtime::device_breakdown(s.view(), SimTime() + Duration::from_seconds(0.1), nullptr, slowdown);
  return t[runtime::TimeCategory::kContention].seconds() * 1e3;
}

}  // namespace

TEST_CASE("compute under communication runs slower, except where it waited on that communication") {
  using runtime::TimeCategory;
  Streams s;
  // Communication hidden under compute: the 4 ms under it run 1/(1 − 0.2) as long.
  s.compute = {ms(0, 10, TimeCategory::kBackward)};
  s.dp = {ms(2, 6, TimeCategory::kExposedDp)};
  CHECK(contention_ms(s, 0.2) == Approx(1.0));
  CHECK(contention_ms(s, 0) == 0);
  // Two separate periods under compute, then a tail of communication alone before the last
  // computation (the optimizer waiting on the last bucket): the tail belongs to its own period,
  // so it does not absorb the others' slowdown.
  s.compute = {ms(0, 10, TimeCategory::kBackward), ms(12, 14, TimeCategory::kOptimizer)};
  s.dp = {ms(1, 3, TimeCategory::kExposedDp), ms(5, 7, TimeCategory::kExposedDp), ms(10, 11.5, TimeCategory::kExposedDp)};
  CHECK(contention_ms(s, 0.2) == Approx(1.0));
  // Communication-bound: compute waits 4 ms on the traffic it overlaps 2 ms of, so slower compute
  // fills the wait and the step does not lengthen.
  s.compute = {ms(0, 4, TimeCategory::kForward), ms(8, 12, TimeCategory::kForward)};
  s.dp = {ms(3, 9, TimeCategory::kExposedDp)};
  CHECK(contention_ms(s, 0.2) == 0);
  // Until the slowdown outgrows the wait: 2 ms × 0.8/(1 − 0.8) = 8 ms, less the 4 ms.
  CHECK(contention_ms(s, 0.8) == Approx(4.0));
  // A slowdown near 1 over a long overlap saturates at the clock's range instead of overflowing.
  const SimTime far = SimTime::from_ps(std::int64_t{1} << 61);
  s.compute = {{SimTime(), far, TimeCategory::kBackward, -1}};
  s.dp = {{SimTime(), far, TimeCategory::kExposedDp, -1}};
  const auto t = runtime::device_breakdown(s.view(), far, nullptr, 0.9999);
  CHECK(t[TimeCategory::kContention].ps() == std::int64_t{1} << 62);
}

TEST_CASE("contention: each all-to-all is its own period, however busy the EP stream") {
  using runtime::TimeCategory;
  // Two back-to-back all-to-alls (the 1F1B overlap's EP stream): beside the first, 4 ms of
  // compute (compute-bound, slowed by 4 × 0.25 = 1 ms); the second runs 4 ms alone after 2 ms of
  // compute (communication-bound: its wait absorbs the slowdown). One period over both would net
  // the 1 ms against the 4 ms wait and charge nothing.
  std::vector<runtime::StreamInterval> compute = {ms(0, 4, TimeCategory::kForward),
                                                  ms(4, 6, TimeCategory::kBackward)};
  std::vector<runtime::StreamInterval> ep = {ms(0, 4, TimeCategory::kExposedEp),
                                             ms(4, 10, TimeCategory::kExposedEp)};
  std::array<runtime::StreamIntervals, parallel::kNumStreams> s{};
  s[static_cast<std::size_t>(Stream::kCompute)] = {compute.data(), compute.data() + compute.size()};
  s[static_cast<std::size_t>(Stream::kEpComm)] = {ep.data(), ep.data() + ep.size()};
  const auto end = SimTime() + Duration::from_seconds(0.1);
  const auto t = runtime::device_breakdown(s, end, nullptr, 0.2);
  CHECK(t[TimeCategory::kContention].seconds() * 1e3 == Approx(1.0));
  // Data-parallel traffic alone keeps one period over touching transfers (as before).
  std::array<runtime::StreamIntervals, parallel::kNumStreams> d{};
  d[static_cast<std::size_t>(Stream::kCompute)] = s[static_cast<std::size_t>(Stream::kCompute)];
  d[static_cast<std::size_t>(Stream::kDpComm)] = s[static_cast<std::size_t>(Stream::kEpComm)];
  CHECK(runtime::device_breakdown(d, end, nullptr, 0.2)[TimeCategory::kContention].ps() == 0);
}

namespace {

// The streams and compute categories of the random timelines below, and their generator of
// numbers below n (a linear congruential one: the same draws on every platform).
const std::vector<Stream> kTimelineStreams = {Stream::kCompute,    Stream::kTpComm,     Stream::kCpComm, Stream::kEpComm,
                                              Stream::kPpRecvPrev, Stream::kPpSendNext, Stream::kDpComm};
constexpr std::array kTimelineCategories = {runtime::TimeCategory::kForward, runtime::TimeCategory::kBackward,
                                            runtime::TimeCategory::kRecompute};
struct Random {
  std::uint64_t seed;
  std::int64_t operator()(std::uint64_t n) {
    seed = seed * 6364136223846793005ull + 1442695040888963407ull;
    return static_cast<std::int64_t>((seed >> 33) % n);
  }
};

// What device_breakdown gives, instant by instant (picoseconds on a small grid): compute takes
// its intervals' categories; an instant without compute goes to the first communication stream
// of the priority order running then, or is idle. Contention: the periods are the runs of
// instants with some non-TP communication, cut where an all-to-all starts or ends; each loses
// max(0, compute under it × s/(1 − s) − its time without compute).
runtime::TimeBreakdown breakdown_by_instant(const std::vector<std::vector<runtime::StreamInterval>>& streams,
                                            const std::vector<Stream>& order, std::int64_t end, double slowdown) {
  using runtime::TimeCategory;
  auto running = [&](std::size_t s, std::int64_t t) {
    for (const auto& i : streams[s]) {
      if (i.start.ps() <= t && t < i.end.ps()) return true;
    }
    return false;
  };
  auto on = [&](Stream which, std::int64_t t) {
    for (std::size_t s = 0; s < order.size(); ++s) {
      if (order[s] == which && running(s, t)) return true;
    }
    return false;
  };
  runtime::TimeBreakdown out;
  std::int64_t horizon = end;
  for (const auto& s : streams) {
    for (const auto& i : s) horizon = std::max(horizon, i.end.ps());
  }
  std::int64_t covered = 0;
  double lost = 0, slowed = 0, alone = 0;
  bool in_period = false;
  const double stretch = slowdown / (1 - slowdown);
  auto close = [&] {
    if (in_period) lost += std::max(0.0, slowed * stretch - alone);
    in_period = false;
    slowed = alone = 0;
  };
  for (std::int64_t t = 0; t < horizon; ++t) {
    bool computing = false;
    for (std::size_t s = 0; s < order.size(); ++s) {
      if (order[s] != Stream::kCompute) continue;
      for (const auto& i : streams[s]) {
        if (i.start.ps() <= t && t < i.end.ps()) {
          out[i.category] += Duration::from_ps(1);
          computing = true;
        }
      }
    }
    bool charged = computing, comm = false;
    for (Stream p : {Stream::kTpComm, Stream::kCpComm, Stream::kEpComm, Stream::kPpRecvPrev, Stream::kPpSendNext,
                     Stream::kDpComm}) {
      if (!on(p, t)) continue;
      if (!charged) out[p == Stream::kTpComm   ? TimeCategory::kExposedTp
                        : p == Stream::kCpComm ? TimeCategory::kExposedCp
                        : p == Stream::kEpComm ? TimeCategory::kExposedEp
                        : p == Stream::kDpComm ? TimeCategory::kExposedDp
                                               : TimeCategory::kExposedPp] += Duration::from_ps(1);
      charged = true;
      comm = comm || p != Stream::kTpComm;
    }
    if (charged) ++covered;
    bool cut = false;
    for (std::size_t s = 0; s < order.size(); ++s) {
      if (order[s] != Stream::kEpComm) continue;
      for (const auto& i : streams[s]) cut = cut || i.start.ps() == t || i.end.ps() == t;
    }
    if (!comm || cut) close();
    if (comm) {
      in_period = true;
      (computing ? slowed : alone) += 1;
    }
  }
  close();
  out[TimeCategory::kIdle] += Duration::from_ps(end - covered);
  out[TimeCategory::kContention] = Duration::from_ps(static_cast<std::int64_t>(lost));
  return out;
}

}  // namespace

TEST_CASE("time breakdown: each instant to compute, the first stream running or idle") {
  using runtime::TimeCategory;
  const std::vector<Stream>& order = kTimelineStreams;
  const auto& categories = kTimelineCategories;
  Random next{12345};
  for (int trial = 0; trial < 300; ++trial) {
    // Each stream: intervals in time order, some empty, some touching the one before.
    std::vector<std::vector<runtime::StreamInterval>> streams(order.size());
    for (std::size_t s = 0; s < order.size(); ++s) {
      std::int64_t t = next(4);
      const std::int64_t count = next(s == 0 ? 8 : 5);
      for (std::int64_t k = 0; k < count; ++k) {
        const std::int64_t length = next(4) == 0 ? 0 : 1 + next(9);
        streams[s].push_back({SimTime::from_ps(t), SimTime::from_ps(t + length),
                              categories[static_cast<std::size_t>(next(3))], -1});
        t += length + (next(3) == 0 ? 0 : next(7));
      }
    }
    std::array<runtime::StreamIntervals, parallel::kNumStreams> view{};
    for (std::size_t s = 0; s < order.size(); ++s) {
      view[static_cast<std::size_t>(order[s])] = {streams[s].data(), streams[s].data() + streams[s].size()};
    }
    const std::int64_t end = 60 + next(20);
    for (const double slowdown : {0.0, 0.25}) {
      const runtime::TimeBreakdown got = runtime::device_breakdown(view, SimTime::from_ps(end), nullptr, slowdown);
      const runtime::TimeBreakdown want = breakdown_by_instant(streams, order, end, slowdown);
      for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) {
        INFO("trial " << trial << ", slowdown " << slowdown << ", " << runtime::time_category_name(static_cast<TimeCategory>(c)));
        CHECK(got.time[c].ps() == want.time[c].ps());
      }
    }
  }
}

TEST_CASE("time breakdown: repeated copies stepped over change nothing") {
  using runtime::TimeCategory;
  const std::vector<Stream>& order = kTimelineStreams;
  const auto& categories = kTimelineCategories;
  Random next{2024};
  // Times in units of 1000 ps, so that contention's losses (fractions of an interval, rounded
  // down to picoseconds) tell one period from another.
  constexpr std::int64_t kUnit = 1000;
  std::size_t stepped = 0;
  for (int trial = 0; trial < 3000; ++trial) {
    runtime::RepeatedIntervals repeated;
    const std::int64_t delta = 8 + next(20);
    repeated.delta = delta * kUnit;
    repeated.copies = 3 + static_cast<std::size_t>(next(10));
    repeated.stepped_over = &stepped;
    std::vector<std::vector<runtime::StreamInterval>> streams(order.size());
    std::int64_t horizon = 0;
    const bool sparse = next(2) == 0;  // most communication streams empty
    for (std::size_t s = 0; s < order.size(); ++s) {
      if (s != 0 && sparse && next(3) != 0) continue;
      std::vector<runtime::StreamInterval>& out = streams[s];
      auto add = [&](std::int64_t at, std::int64_t length, std::int64_t category) {
        out.push_back({SimTime::from_ps(at * kUnit), SimTime::from_ps((at + length) * kUnit),
                       categories[static_cast<std::size_t>(category)], -1});
      };
      auto some = [&](std::int64_t t) {  // a few intervals from t on, some empty or touching
        for (std::int64_t k = next(4); k > 0; --k) {
          const std::int64_t length = next(4) == 0 ? 0 : 1 + next(9);
          add(t, length, next(3));
          t += length + next(5);
        }
        return t;
      };
      std::int64_t t = some(next(4));
      // One copy: intervals within delta of its start (a communication stream may have none,
      // and one long interval, from before the copies or from among them, to after them).
      struct Interval {
        std::int64_t at, length, category;
      };
      std::vector<Interval> copy;
      const auto copies = static_cast<std::int64_t>(repeated.copies);
      if (s != 0 && next(4) == 0) {
        add(t + next(static_cast<std::uint64_t>(delta * copies / 2 + 1)), delta * copies + 20 + next(20), 0);
        t = out.back().end.ps();
      } else {
        for (std::int64_t u = next(3), k = s == 0 ? 1 + next(5) : next(4); k > 0; --k) {
          const std::int64_t length = next(3) == 0 ? 0 : 1 + next(6);
          if (u + length > delta) break;
          copy.push_back({u, length, next(3)});
          u += length + next(5);
        }
      }
      const std::int64_t first = std::max(t, 25 + next(15));
      const auto stream = static_cast<std::size_t>(order[s]);
      repeated.from[stream] = out.size();
      repeated.count[stream] = copy.size();
      for (std::int64_t c = 0; c < copies; ++c) {
        for (const Interval& i : copy) add(first + c * delta + i.at, i.length, i.category);
      }
      // After the copies, from the last one's end on (where a next copy might have started).
      t = some(out.empty() ? first : std::max(out.back().end.ps() / kUnit, first + (copies - 1) * delta) + next(3));
      horizon = std::max(horizon, t);
    }
    std::array<runtime::StreamIntervals, parallel::kNumStreams> view{};
    for (std::size_t s = 0; s < order.size(); ++s) {
      view[static_cast<std::size_t>(order[s])] = {streams[s].data(), streams[s].data() + streams[s].size()};
    }
    const SimTime end = SimTime::from_ps((horizon + next(20)) * kUnit);
    for (const double slowdown : {0.0, 0.25}) {
      const runtime::TimeBreakdown want = runtime::device_breakdown(view, end, nullptr, slowdown);
      const runtime::TimeBreakdown got = runtime::device_breakdown(view, end, nullptr, slowdown, &repeated);
      for (std::size_t c = 0; c < runtime::kNumTimeCategories; ++c) {
        INFO("trial " << trial << ", slowdown " << slowdown << ", " << runtime::time_category_name(static_cast<TimeCategory>(c)));
        CHECK(got.time[c].ps() == want.time[c].ps());
      }
    }
  }
  // The copies are stepped over often enough for the comparison to mean something.
  CHECK(stepped > 3000);
}

TEST_CASE("contention of a bucketed all-reduce: what hides under the backward slows it") {
  const parallel::ParallelPlan plan = bucketed_plan();
  const ir::ModelSpec m = uniform_model(8);
  const auto fast = replay(m, plan, 1000, 1);
  const auto slow = replay(m, plan, 10, 1);
  const auto with = [](const Replayed& r, double slowdown) {
    return runtime::time_breakdown(r.graph, r.execution, slowdown)[0][runtime::TimeCategory::kContention].seconds();
  };
  CHECK(with(fast, 0) == 0);
  // Fast network: every bucket but the last hides under the backward, whose compute under it
  // (at most the traffic's length) takes a quarter longer at a 20 % slowdown.
  double traffic = 0;
  for (std::size_t t = 0; t < fast.graph.tasks.size(); ++t) {
    const auto& task = fast.graph.tasks[t];
    if (task.device == 0 && task.stream == Stream::kDpComm) {
      traffic += (fast.execution.timings[t].end - fast.execution.timings[t].start).seconds();
    }
  }
  INFO("traffic " << traffic << " fast " << with(fast, 0.2) << " slow " << with(slow, 0.2));
  CHECK(with(fast, 0.2) > 0.5 * 0.25 * traffic);
  CHECK(with(fast, 0.2) <= 0.25 * traffic + 1e-12);
  // Slow network (communication-bound): the backward is short beside the traffic, which runs on
  // alone after it; slower compute only fills that wait (all but a sliver before the traffic
  // backs up).
  CHECK(with(slow, 0.2) < 0.05 * with(fast, 0.2));
}

TEST_CASE("the op policy's reruns add their matmul FLOPs as recompute") {
  parallel::ParallelPlan plan;
  plan.global_batch = 1;
  plan.seq_len = 2048;
  const ir::ModelSpec m = uniform_model(8);  // hidden 1024, 8 KV heads of 8: K is h wide; ffn 4096
  const auto none = replay(m, plan);
  plan.recompute = parallel::Recompute::kSelectiveOp;
  const auto op = replay(m, plan);
  // Reruns per layer: K (h×h), output (h×h) and up (h×ffn) projections; FLOP-rate compute model
  // at 1e15 FLOP/s, memory-bound ops free.
  const double rerun = 2.0 * 2048 * 8 * (1024.0 * 1024 + 1024.0 * 1024 + 1024.0 * 4096) / 1e15;
  // They run inside each block's backward task and count as recompute (ir::Op::rerun).
  CHECK(seconds(op, runtime::TimeCategory::kRecompute) - seconds(none, runtime::TimeCategory::kRecompute) ==
        Approx(rerun).epsilon(1e-6));
  CHECK(seconds(none, runtime::TimeCategory::kRecompute) == 0);
  CHECK(seconds(op, runtime::TimeCategory::kBackward) == Approx(seconds(none, runtime::TimeCategory::kBackward)));
  CHECK(seconds(op, runtime::TimeCategory::kForward) == Approx(seconds(none, runtime::TimeCategory::kForward)));
}
