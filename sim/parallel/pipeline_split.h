// Layers per pipeline stage balanced by cost, with the embedding and LM head on the end stages.
#pragma once

#include <cstdint>
#include <vector>

namespace ts::parallel {

// How the sweep splits the layers over the pipeline stages. kEven: the same number of layers on
// every stage (pp·vpp must divide num_layers); kBalanced: balanced_stage_layers with the
// embedding and LM head costs of the model, for any pp·vpp up to num_layers.
enum class PipelineSplit { kEven, kBalanced };

// Whole layers per stage (each >= 1, summing to `layers`) that minimize the largest stage cost,
// where a stage of n layers costs n, plus `first_extra` on stage 0 (the embedding) and
// `last_extra` on the last stage (final norm, LM head and loss), all in units of one layer's
// cost. Each stage first gets as many layers as that smallest largest cost allows; the layers
// left over are then taken one at a time off the costliest stage, the first stage and then the
// last one on ties (they hold the embedding, the LM head and, in 1F1B, the most activations),
// else the lowest index. Empty when stages < 1 or stages > layers.
// Example: 80 layers on 4 stages with an LM head of 1.1 layers and an embedding of 0.01:
// 20, 20, 21, 19 (largest cost 21; an even split of 20 per stage has 21.1 on the last stage).
std::vector<std::int64_t> balanced_stage_layers(std::int64_t layers, std::int64_t stages,
                                                double first_extra, double last_extra);

}  // namespace ts::parallel
