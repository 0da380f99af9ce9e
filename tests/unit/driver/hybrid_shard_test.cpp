// ZeRO-3 sharding within groups of data-parallel ranks, replicated across the groups
// (ParallelPlan::zero_shard_group, FSDP's HYBRID_SHARD).
#include <catch2/catch.hpp>

#include <cstdint>

#include "sim/driver/simulate.h"
#include "tests/unit/config/config_test_util.h"
#include "tests/unit/driver/run_ok.h"

using namespace ts;

namespace {

// Llama 2 7B, FSDP over 32 A100s (4 nodes) with full recompute, micro-batch 2, no gradient
// accumulation, on an inter-node network slow enough to set the pace (a sixteenth of the DGX
// A100's NIC rate: 12.5 Gb/s per GPU). Per layer, full sharding moves three bf16 gathers and an
// fp32 reduce-scatter of its parameters across the nodes; sharding within the node moves only
// the fp32 all-reduce of each GPU's eighth of them: 6 instead of 10 bytes per parameter per node.
config::Scenario llama2_7b_fsdp(std::int64_t shard_group) {
  config::Scenario sc;
  sc.model = config::load_model("llama2-7b");
  sc.cluster = config::load_cluster("dgx-a100");
  sc.cluster.cluster.host.nic_bandwidth = sc.cluster.cluster.host.nic_bandwidth * (1.0 / 16);
  sc.num_gpus = 32;
  sc.plan.dp = 32;
  sc.plan.micro_batch = 2;
  sc.plan.global_batch = 64;
  sc.plan.seq_len = 4096;
  sc.plan.zero_stage = 3;
  sc.plan.recompute = parallel::Recompute::kFull;
  sc.plan.zero_shard_group = shard_group;
  return sc;
}

using testing::run_ok;

}  // namespace

TEST_CASE("hybrid sharding keeps the gathers in the node and shards the states over the group",
          "[driver][zero]") {
  const auto whole = run_ok(llama2_7b_fsdp(0));
  const auto all = run_ok(llama2_7b_fsdp(32));  // one group of every rank: the same plan
  CHECK(all.iteration_time_s == whole.iteration_time_s);
  CHECK(all.peak_memory == whole.peak_memory);

  const auto node = run_ok(llama2_7b_fsdp(8));  // shard within each node, replicate across the 4
  // Weights, gradients and Adam states sharded 8 ways instead of 32: 4× the bytes.
  CHECK(node.memory.weights.real() == Approx(whole.memory.weights.real() * 4).epsilon(1e-3));
  CHECK(node.memory.optimizer_states.real() == Approx(whole.memory.optimizer_states.real() * 4).epsilon(1e-3));
  // Each layer's gathers and reduce-scatters run over NVLink; only the gradient shards cross the
  // slow network: less exposed data-parallel time and a shorter iteration.
  const auto dp_s = [](const driver::RunResult& r) {
    return r.time[runtime::TimeCategory::kExposedDp].seconds();
  };
  CHECK(dp_s(node) < dp_s(whole));
  CHECK(node.iteration_time_s < whole.iteration_time_s);
}

TEST_CASE("hybrid sharding reduces across replicas beside the shard group's gathers", "[driver][zero]") {
  // FSDP runs the replicas' all-reduce through its own (inter-node) process group, so NCCL runs
  // it on a stream of its own, concurrently with the next layers' gathers and reduce-scatters on
  // the shard group's. With NVLink slowed as much as the network (a 64th of its rate), the
  // in-node gathers and reduce-scatters and the cross-node all-reduces both set the pace; the
  // data-parallel collectives together then run longer than the iteration, which they can only
  // by overlapping (on one stream they would queue: 18.7 s of them in a 20.1 s iteration).
  config::Scenario sc = llama2_7b_fsdp(8);
  sc.cluster.cluster.scale_up.nvlink_bandwidth =
      sc.cluster.cluster.scale_up.nvlink_bandwidth * (1.0 / 64);
  driver::RunOptions options;
  options.stats = true;
  const driver::RunResult r = run_ok(sc, options);
  double dp_busy = 0;
  bool replica_all_reduce = false;
  for (const auto& c : r.stats.exposed_comm) {
    if (c.stream != "DP comm") continue;
    dp_busy += c.time.seconds();
    replica_all_reduce = replica_all_reduce || c.name.find("all_reduce") != std::string::npos;
  }
  CHECK(replica_all_reduce);
  CHECK(dp_busy > 1.05 * r.iteration_time_s);
}
