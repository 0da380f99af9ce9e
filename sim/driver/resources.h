// Resources: what many simulations share — fitted compute models, the network calibration, and
// one network model (with its collective cache) per cluster and GPU count.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "sim/config/calibration_loader.h"
#include "sim/compute/time_scale.h"
#include "sim/config/loader.h"
#include "sim/network/calibration.h"
#include "sim/network/network_model.h"
#include "sim/parallel/plan.h"
#include "sim/parallel/task_graph.h"
#include "sim/runtime/executor.h"
#include "sim/topology/topology.h"

namespace ts::driver {

// A calibration perturbed for the replays of a prediction interval (driver/intervals.h): kernel
// times per class and every collective's time multiplied; the identity by default.
struct Perturbation {
  compute::KernelTimeScale kernels;
  double collectives = 1.0;
  double host_dispatch = 1.0;  // multiplies the plan's host time per operation
  bool identity() const { return kernels.identity() && collectives == 1.0 && host_dispatch == 1.0; }
  bool operator==(const Perturbation&) const = default;
};

// Not thread-safe: a sweep gives each worker thread its own Resources (sharing one
// ComputeModelCache, which is).
class Resources {
 public:
  explicit Resources(std::shared_ptr<config::ComputeModelCache> compute_cache =
                         std::make_shared<config::ComputeModelCache>());
  ~Resources();
  Resources(const Resources&) = delete;
  Resources& operator=(const Resources&) = delete;

  // The compute model of `gpu`, with a named attention kernel (empty: the calibration's): GPU
  // time alone.
  const compute::ComputeModel& compute(const compute::GpuSpec& gpu, const std::string& attention_kernel = "");
  // The compute model a plan runs with: its attention kernel, and no operation faster than its
  // host dispatch time (compute::with_host_dispatch).
  const compute::ComputeModel& compute(const compute::GpuSpec& gpu, const parallel::ParallelPlan& plan);
  // The same with the GPU's kernel times scaled (before the host dispatch floor: the host's time
  // per operation is not a GPU kernel's) and the host dispatch time multiplied by `host`.
  const compute::ComputeModel& compute(const compute::GpuSpec& gpu, const parallel::ParallelPlan& plan,
                                       const compute::KernelTimeScale& scale, double host);
  const network::NetworkModel& network(const config::Cluster& cluster, std::int32_t num_gpus);
  // The same with every collective's time multiplied by `collectives` (network::time_scaled_profile).
  const network::NetworkModel& network(const config::Cluster& cluster, std::int32_t num_gpus, double collectives);
  // The calibrated memory overheads of `gpu` (CUDA context, NCCL buffers, fragmentation); zero
  // for a GPU without a calibration file.
  const compute::MemoryOverheads& memory_overheads(const compute::GpuSpec& gpu);
  // The fitted models and loaded calibrations these resources share (thread-safe).
  config::ComputeModelCache& compute_cache() { return *compute_cache_; }
  // Storage that simulate() reuses from one plan to the next: the task graph and the replay's
  // buffers (fresh memory for graphs of up to a million tasks costs as much as replaying them).
  parallel::TaskGraph& task_graph() { return task_graph_; }
  runtime::ReplayBuffers& replay_buffers() { return replay_buffers_; }

 private:
  // The GPU-time model of `gpu` with `attention_kernel`, shared with the host-dispatch wrappers.
  const std::shared_ptr<const compute::ComputeModel>& gpu_model(const compute::GpuSpec& gpu,
                                                                const std::string& attention_kernel);
  struct Fabric {
    std::unique_ptr<topology::Topology> topology;
    std::unique_ptr<network::NetworkModel> network;
  };
  std::shared_ptr<config::ComputeModelCache> compute_cache_;
  std::map<std::string, std::shared_ptr<const compute::ComputeModel>> compute_;
  std::map<std::pair<std::string, std::int64_t>, std::unique_ptr<compute::ComputeModel>> dispatched_;
  // Perturbed models (scaled GPU model, and the plan's host dispatch over it), by GPU, kernel,
  // host dispatch and scale.
  struct Scaled {
    std::shared_ptr<const compute::ComputeModel> gpu;
    std::unique_ptr<compute::ComputeModel> dispatched;
  };
  std::map<std::tuple<std::string, std::int64_t, double, double, double, double>, Scaled> scaled_;
  std::optional<network::NetworkCalibration> calibration_;
  std::map<std::pair<std::string, std::int32_t>, Fabric> fabrics_;
  // Networks at a perturbed calibration, sharing the unperturbed fabric's topology.
  std::map<std::tuple<std::string, std::int32_t, double>, std::unique_ptr<network::NetworkModel>> scaled_networks_;
  std::map<std::string, compute::MemoryOverheads> memory_overheads_;
  parallel::TaskGraph task_graph_;
  runtime::ReplayBuffers replay_buffers_;
};

}  // namespace ts::driver
