// The host side of eager execution: a framework that issues kernels from Python (eager PyTorch)
// spends a roughly fixed host time per operation (Python, autograd, the dispatcher, the launch).
// The GPU runs ahead of the host while its kernels are longer than that; when they are shorter
// the host sets the pace. HostDispatchModel makes every modeled operation take at least the
// host's time for it.
#pragma once

#include <memory>

#include "sim/compute/compute_model.h"

namespace ts::compute {

// `inner` with every kernel's time raised to at least `per_op`; `per_op` zero returns a model
// with inner's times (CUDA graphs, compiled frameworks).
std::unique_ptr<ComputeModel> with_host_dispatch(std::shared_ptr<const ComputeModel> inner, Duration per_op);

}  // namespace ts::compute
