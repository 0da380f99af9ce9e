// Data parallelism and ZeRO in the Lowerer: per-layer parameter gathers and gradient
// reduce-scatters (ZeRO-3), gradient buckets, the parameter gathers that open the iteration, and
// the optimizer step.
#include "sim/parallel/lowerer.h"

namespace ts::parallel::detail {

std::int32_t Lowerer::gather_layer(const Label& l) {
  experts_gather_ = kNone;
  if (!zero3()) return kNone;
  const std::int32_t g = collective(Stream::kDpComm, shard_axes(), CommOp::kAllGather,
                                    Bytes(layer_params(l.layer) * 2), l, {read(kGateRegister)});
  // An MoE layer's routed experts are sharded over the ranks that hold the same experts (the
  // expert data-parallel group; torchtitan shards them as an FSDP unit of their own over its
  // dp_shard_mod_ep mesh): gathered there, after the rest of the layer on the same stream.
  if (const std::int64_t experts = expert_params(l.layer); experts > 0 && plan_.expert_dp() > 1) {
    experts_gather_ = collective(Stream::kDpComm, axis_bit(Axis::kEdp), CommOp::kAllGather, Bytes(experts * 2),
                                   l, {read(kGateRegister)});
  }
  return g;
}

std::int32_t Lowerer::reduce_gradients(std::int64_t params, CommOp op, const Label& grads, std::int32_t dep) {
  std::int32_t reduced =
      collective(Stream::kDpComm, shard_axes(), op, Bytes(params * plan_.grad_reduce_bytes()), grads, {dep});
  if (shard_replicas() > 1) {
    const std::int64_t shard = (params + plan_.zero_shards() - 1) / plan_.zero_shards();
    reduced = collective(Stream::kDpReplica, replica_groups(dp_axes(), plan_.zero_shards()), CommOp::kAllReduce,
                         Bytes(shard * plan_.grad_reduce_bytes()), grads, {reduced});
  }
  return reduced;
}

void Lowerer::reduce_layer_gradients(const Label& grads, std::int32_t dep) {
  // The step waits for the last layer's gradients (each stream runs its collectives in
  // order, and every replica all-reduce follows its reduce-scatter).
  last_grad_reduce_ = held(reduce_gradients(layer_params(grads.layer), CommOp::kReduceScatter, grads, dep));
  // The routed experts' gradients, reduce-scattered over their own group after the rest.
  reduce_expert_gradients(grads, dep);
}

void Lowerer::layer_gradients_ready(std::int64_t layer, std::int32_t ready) {
  gradients_ready(layer_params(layer), ready, false);
  if (zero3()) return;
  reduce_expert_gradients({Pass::kOptimizer, Part::kGradients, static_cast<std::int32_t>(layer), -1}, ready);
}

void Lowerer::reduce_expert_gradients(const Label& grads, std::int32_t dep) {
  // The routed experts' gradients: one reduction per layer over the ranks that hold the same
  // experts (Megatron-Core's expert data-parallel group; all-reduce, or with the distributed
  // optimizer a reduce-scatter), on the data-parallel stream.
  const std::int64_t params = expert_params(grads.layer);
  if (params == 0 || plan_.expert_dp() == 1) return;
  const CommOp op = plan_.zero_stage_in_effect() == 0 ? CommOp::kAllReduce : CommOp::kReduceScatter;
  last_grad_reduce_ = collective(Stream::kDpComm, axis_bit(Axis::kEdp), op,
                                 Bytes(params * plan_.grad_reduce_bytes()), grads, {dep});
}

void Lowerer::gradients_ready(std::int64_t params, std::int32_t ready, bool last_of_iteration) {
  if (zero3() || replicas() == 1) return;
  bucket_params_ += params;
  bucket_ready_ = held(ready);
  // FSDP in a pipeline reduces after the last backward (ParallelPlan::fsdp_in_pipeline).
  const bool full = plan_.overlap_grad_reduce && !plan_.fsdp_in_pipeline() && bucket_params_ >= plan_.grad_bucket_params;
  if (full || last_of_iteration) flush_bucket();
}

void Lowerer::flush_bucket() {
  if (bucket_params_ == 0) return;
  const CommOp op = plan_.zero_stage_in_effect() == 0 ? CommOp::kAllReduce : CommOp::kReduceScatter;
  // (Hybrid shard groups reach the buckets only as FSDP in a pipeline.)
  last_grad_reduce_ =
      reduce_gradients(bucket_params_, op, {Pass::kOptimizer, Part::kGradients, -1, -1}, read(kBucketRegister));
  bucket_params_ = 0;
}

void Lowerer::optimizer() {
  const std::int64_t experts = stage_expert_parameters(model_, plan_, stage_);
  const std::int64_t params = stage_parameters(model_, plan_, stage_) - experts;
  if (!zero3()) gradients_ready(0, read(kLastBackwardRegister), true);
  std::int64_t updated = params;
  if (replicas() > 1 && plan_.zero_stage_in_effect() > 0) updated = (params + plan_.zero_shards() - 1) / plan_.zero_shards();
  // Expert states are sharded over the expert-DP ranks.
  updated += plan_.zero_stage_in_effect() > 0 ? (experts + plan_.expert_dp() - 1) / plan_.expert_dp() : experts;
  ir::Op step;
  step.name = "adam_step";
  step.kind = ir::OpKind::kMemoryBound;
  step.moved = options_.optimizer_bytes_per_param * updated;
  const std::int32_t dep = compute(add_ops({step}), {Pass::kOptimizer, Part::kOptimizer, -1, -1},
                                   {read(kLastBackwardRegister), read(kLastReduceRegister)});
  if (plan_.overlap_param_gather) return;  // gathered before the next forward (param_gathers)
  // The updated shards gathered again after the step: the shared parameters over DP × CP, the
  // routed experts over their expert-DP group (Megatron-Core's distributed optimizer keeps the
  // experts in buffers of their own over that group).
  if (gathers_shared_shards()) {
    collective(Stream::kDpComm, shard_axes(), CommOp::kAllGather, Bytes(params * 2),
               {Pass::kOptimizer, Part::kOptimizer, -1, -1}, {dep});
  }
  if (gathers_expert_shards() && experts > 0) {
    collective(Stream::kDpComm, axis_bit(Axis::kEdp), CommOp::kAllGather, Bytes(experts * 2),
               {Pass::kOptimizer, Part::kOptimizer, -1, -1}, {dep});
  }
}

void Lowerer::param_gathers() {
  param_ready_.assign(static_cast<std::size_t>(all_layers()), kNone);
  first_forward_of_layer_.assign(static_cast<std::size_t>(all_layers()), true);
  if (!plan_.overlap_param_gather) return;
  // Buckets of the shared parameters over DP × CP and of the routed experts over expert-DP
  // (Megatron-Core's dense and expert-parallel buffers), each gathered when full; a layer's
  // first forward waits for the buckets holding its parameters.
  struct Buckets {
    bool on;
    unsigned axes;
    std::int64_t params = 0;
    std::vector<std::int64_t> waiting;
  };
  Buckets shared{gathers_shared_shards(), shard_axes(), 0, {}};
  Buckets experts{gathers_expert_shards(), axis_bit(Axis::kEdp), 0, {}};
  if (!shared.on && !experts.on) return;
  const auto flush = [&](Buckets& b) {
    if (b.params == 0) return;
    const std::int32_t t = collective(Stream::kDpComm, b.axes, CommOp::kAllGather, Bytes(b.params * 2),
                                      {Pass::kForward, Part::kOptimizer, -1, -1}, {});
    // The stream runs its gathers in order: the later of a layer's two buckets ends last.
    for (auto layer : b.waiting) param_ready_[static_cast<std::size_t>(layer)] = std::max(param_ready_[static_cast<std::size_t>(layer)], t);
    b.waiting.clear();
    b.params = 0;
  };
  const auto add = [&](Buckets& b, std::int64_t params, std::int64_t layer) {
    if (!b.on || params == 0) return;
    b.params += params;
    b.waiting.push_back(layer);
    if (b.params >= plan_.grad_bucket_params) flush(b);
  };
  for (std::int64_t chunk = 0; chunk < chunks_; ++chunk) {
    const std::int64_t vs = vstage(chunk);
    if (vs == 0 && shared.on) shared.params += embedding_parameters(model_, plan_);
    for (std::int64_t i = 0; i < chunk_layers(vs); ++i) {
      const std::int64_t layer = vfirst_[static_cast<std::size_t>(vs)] + i;
      add(shared, layer_params(layer), layer);
      add(experts, expert_params(layer), layer);
    }
    if (vs == last_vstage() && shared.on) shared.params += head_parameters(model_, plan_, plan_.pp == 1);
  }
  flush(shared);
  flush(experts);
}

}  // namespace ts::parallel::detail
