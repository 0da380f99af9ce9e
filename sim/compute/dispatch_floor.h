// The host side of eager execution: a framework that issues kernels from Python (eager PyTorch)
// spends a roughly fixed host time per operation (Python, autograd, the dispatcher, the launch).
// The GPU runs ahead of the host while its kernels are longer than that; when they are shorter
// the host sets the pace. HostDispatchModel makes every modeled operation take at least the
// host's time for it, or, where every launch blocks the host until its kernel ends
// (CUDA_LAUNCH_BLOCKING=1), the host's time plus the kernel's.
#pragma once

#include <memory>

#include "sim/compute/compute_model.h"

namespace ts::compute {

// How the host's work for an operation meets the GPU's. kRunAhead: asynchronous launches, the
// host issues the next kernels while the GPU runs (CUDA's default). kBlocking: the CUDA runtime
// makes every launch synchronous (CUDA_LAUNCH_BLOCKING=1: "disables asynchronous kernel
// launches", CUDA C++ Programming Guide, CUDA Environment Variables), so the host's time for an
// operation and its kernel follow one another instead of overlapping.
enum class HostOverlap { kRunAhead, kBlocking };

// `inner` with every kernel's time raised to at least `per_op`; `per_op` zero returns a model
// with inner's times (CUDA graphs, compiled frameworks).
std::unique_ptr<ComputeModel> with_host_dispatch(std::shared_ptr<const ComputeModel> inner, Duration per_op);
// The same with `overlap`: kRunAhead as above; kBlocking adds `per_op` to every kernel's time.
std::unique_ptr<ComputeModel> with_host_dispatch(std::shared_ptr<const ComputeModel> inner,
                                                 Duration per_op, HostOverlap overlap);

}  // namespace ts::compute
