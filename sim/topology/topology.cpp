#include "sim/topology/topology.h"

#include "sim/base/diagnostic.h"

namespace ts::topology {

Topology::Topology(ClusterSpec spec, std::int32_t num_gpus)
    : spec_(std::move(spec)), num_gpus_(num_gpus) {
  SIM_ASSERT(spec_.node.gpus_per_node > 0, "node without GPUs");
  SIM_ASSERT(num_gpus_ > 0, "cluster without GPUs");
  num_nodes_ = (num_gpus_ + spec_.node.gpus_per_node - 1) / spec_.node.gpus_per_node;
}

}  // namespace ts::topology
