// Topology: the GPUs of a cluster, their nodes, and the links between them.
#pragma once

#include <cstdint>

#include "sim/topology/cluster_spec.h"

namespace ts::topology {

class Topology {
 public:
  // `num_gpus` GPUs filling ceil(num_gpus / gpus_per_node) nodes of `spec`.
  Topology(ClusterSpec spec, std::int32_t num_gpus);

  const ClusterSpec& spec() const { return spec_; }
  std::int32_t num_gpus() const { return num_gpus_; }
  std::int32_t num_nodes() const { return num_nodes_; }
  std::int32_t node_of(std::int32_t gpu) const { return gpu / spec_.node.gpus_per_node; }
  std::int32_t local_index(std::int32_t gpu) const { return gpu % spec_.node.gpus_per_node; }

 private:
  ClusterSpec spec_;
  std::int32_t num_gpus_;
  std::int32_t num_nodes_;
};

}  // namespace ts::topology
