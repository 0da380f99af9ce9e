#include "sim/driver/resources.h"

#include <string>

#include "sim/base/diagnostic.h"
#include "sim/compute/calibrated_model.h"
#include "sim/compute/dispatch_floor.h"
#include "sim/compute/time_scale.h"
#include "sim/config/network_calibration_loader.h"

namespace ts::driver {
namespace {

compute::HostOverlap host_overlap(const parallel::ParallelPlan& plan) {
  return plan.launch_blocking ? compute::HostOverlap::kBlocking : compute::HostOverlap::kRunAhead;
}

// GPU, attention kernel and launch mode: what a host-dispatch wrapper is cached by.
std::string model_key(const compute::GpuSpec& gpu, const parallel::ParallelPlan& plan) {
  return gpu.name + "|" + plan.attention_kernel + (plan.launch_blocking ? "|blocking" : "");
}

// FP8 attention is timed by the attention kernel's FP8 fit: a calibration without one cannot
// price it (an uncalibrated GPU's roofline runs it at the FP8 peak).
void require_fp8_attention(const compute::ComputeModel& model, const compute::GpuSpec& gpu) {
  const auto* calibrated = dynamic_cast<const compute::CalibratedModel*>(&model);
  if (calibrated != nullptr && !calibrated->fp8_attention_calibrated()) {
    throw InputError(Diagnostic{"", 0, "--fp8-attention",
                                "no FP8 attention is calibrated for " + gpu.name + " (its " +
                                    calibrated->attention_kernel() + " has bf16 points only)"});
  }
}

}  // namespace

Resources::Resources(std::shared_ptr<config::ComputeModelCache> compute_cache)
    : compute_cache_(std::move(compute_cache)) {}

Resources::~Resources() = default;

const std::shared_ptr<const compute::ComputeModel>& Resources::gpu_model(const compute::GpuSpec& gpu,
                                                                          const std::string& attention_kernel) {
  auto& slot = compute_[gpu.name + "|" + attention_kernel];
  if (!slot) slot = compute_cache_->get(gpu, attention_kernel);
  return slot;
}

const compute::ComputeModel& Resources::compute(const compute::GpuSpec& gpu,
                                                const std::string& attention_kernel) {
  return *gpu_model(gpu, attention_kernel);
}

const compute::ComputeModel& Resources::compute(const compute::GpuSpec& gpu, const parallel::ParallelPlan& plan) {
  if (plan.fp8_attention) require_fp8_attention(*gpu_model(gpu, plan.attention_kernel), gpu);
  if (plan.host_dispatch == Duration::zero()) return compute(gpu, plan.attention_kernel);
  auto& slot = dispatched_[{model_key(gpu, plan), plan.host_dispatch.ps()}];
  if (!slot) {
    slot = compute::with_host_dispatch(gpu_model(gpu, plan.attention_kernel), plan.host_dispatch,
                                       host_overlap(plan));
  }
  return *slot;
}

const compute::ComputeModel& Resources::compute(const compute::GpuSpec& gpu, const parallel::ParallelPlan& plan,
                                                const compute::KernelTimeScale& scale, double host) {
  if (scale.identity() && host == 1.0) return compute(gpu, plan);
  Scaled& slot = scaled_[{model_key(gpu, plan), plan.host_dispatch.ps(), scale.gemm,
                          scale.attention, scale.memory, host}];
  if (!slot.gpu) {
    slot.gpu = compute::with_time_scale(gpu_model(gpu, plan.attention_kernel), scale);
    slot.dispatched =
        compute::with_host_dispatch(slot.gpu, plan.host_dispatch.scaled(host), host_overlap(plan));
  }
  return *slot.dispatched;
}

const network::NetworkModel& Resources::network(const config::Cluster& cluster, std::int32_t num_gpus,
                                                double collectives) {
  const network::NetworkModel& base = network(cluster, num_gpus);
  if (collectives == 1.0) return base;
  auto& slot = scaled_networks_[{cluster.cluster.name + "/" + cluster.gpu.name, num_gpus, collectives}];
  if (!slot) {
    slot = std::make_unique<network::NetworkModel>(base.topology(),
                                                   network::time_scaled_profile(base.profile(), collectives));
  }
  return *slot;
}

const network::NetworkModel& Resources::network(const config::Cluster& cluster, std::int32_t num_gpus) {
  // Cluster files are identified by name; a sweep or validation run uses few distinct ones.
  auto& f = fabrics_[{cluster.cluster.name + "/" + cluster.gpu.name, num_gpus}];
  if (!f.network) {
    if (!calibration_) calibration_ = config::load_network_calibration();
    f.topology = std::make_unique<topology::Topology>(cluster.cluster, num_gpus);
    f.network = std::make_unique<network::NetworkModel>(*f.topology, *calibration_);
  }
  return *f.network;
}

const compute::MemoryOverheads& Resources::memory_overheads(const compute::GpuSpec& gpu) {
  auto it = memory_overheads_.find(gpu.name);
  if (it == memory_overheads_.end()) {
    const auto cal = compute_cache_->calibration(gpu.name);
    it = memory_overheads_.emplace(gpu.name, cal ? cal->memory_overheads : compute::MemoryOverheads{}).first;
  }
  return it->second;
}

}  // namespace ts::driver
