// The small mixture-of-experts scenario the driver's MoE tests run: a zoo model cut to 4
// layers on H100s of one node, every GPU a data-parallel rank and the experts spread over all of
// them (EP = GPUs), ZeRO-1.
#pragma once

#include <cstdint>

#include "sim/config/loader.h"

namespace ts::testing {

inline config::Scenario small_moe(const char* model, std::int32_t gpus, std::int64_t micro_batch,
                                  std::int64_t global_batch, std::int64_t seq) {
  config::Scenario sc;
  sc.model = config::load_model(model);
  sc.model.num_layers = 4;
  sc.cluster = config::load_cluster("dgx-h100");
  sc.num_gpus = gpus;
  auto& p = sc.plan;
  p.dp = gpus;
  p.ep = gpus;
  p.micro_batch = micro_batch;
  p.global_batch = global_batch;
  p.seq_len = seq;
  p.zero_stage = 1;
  return sc;
}

}  // namespace ts::testing
