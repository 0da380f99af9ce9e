// The replay the trace tests look at: a 4-layer model on 8 GPUs of one node (tp 2, pp 2, dp 2),
// roofline compute, global batch 8 of 1024 tokens.
#pragma once

#include "sim/compute/compute_model.h"
#include "sim/network/network_model.h"
#include "sim/parallel/lowering.h"
#include "sim/runtime/executor.h"
#include "sim/topology/topology.h"

namespace ts::test {

struct TinyReplay {
  parallel::TaskGraph graph;
  runtime::Execution execution;
};

inline compute::GpuSpec tiny_gpu() {
  compute::GpuSpec g;
  g.name = "test-gpu";
  g.peak_bf16 = FlopRate::tflops(1000);
  g.memory_bandwidth = Bandwidth::gbytes_per_s(3000);
  g.matmul_efficiency = 0.7;
  g.memory_efficiency = 0.9;
  g.kernel_launch_overhead = Duration::from_us(4);
  return g;
}

inline TinyReplay tiny_replay(parallel::Recompute recompute = parallel::Recompute::kNone) {
  ir::ModelSpec m;
  m.name = "tiny";
  m.num_layers = 4;
  m.hidden = 1024;
  m.num_heads = 8;
  m.num_kv_heads = 8;
  m.ffn_hidden = 4096;
  m.vocab = 32000;
  m.max_seq_len = 1024;
  parallel::ParallelPlan p;
  p.tp = 2;
  p.pp = 2;
  p.dp = 2;
  p.global_batch = 8;
  p.seq_len = 1024;
  p.recompute = recompute;
  parallel::LoweringOptions lo;
  lo.layer_kept = Bytes(1 << 20);
  lo.layer_rematerialized = Bytes(1 << 20);
  lo.optimizer_bytes_per_param = Bytes(30);
  topology::ClusterSpec c;
  c.name = "test";
  c.scale_up.gpus_per_domain = c.host.gpus_per_host = 8;
  c.scale_up.nvlink_bandwidth = Bandwidth::gbytes_per_s(300);
  c.host.nic_bandwidth = Bandwidth::gbits_per_s(200);
  const topology::Topology topo(c, 8);
  const network::NetworkModel net(topo);
  const auto cm = compute::make_roofline_model(tiny_gpu());
  TinyReplay r{parallel::lower(m, p, lo), {}};
  runtime::ExecuteOptions eo;
  eo.memory_timeline = true;
  r.execution = runtime::execute(r.graph, parallel::Layout(p), *cm, net, eo);
  return r;
}

}  // namespace ts::test
