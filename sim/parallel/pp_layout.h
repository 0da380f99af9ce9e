// Megatron-style pipeline layout strings ("Et|(tt|)*30mL"): what each virtual stage holds.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace ts::parallel {

// One virtual stage of a layout: its transformer layers (t), MTP layers (m), and whether it
// holds the embedding (E) or the loss with the LM head (L).
struct LayoutStage {
  std::int64_t layers = 0;
  std::int64_t mtp = 0;
  bool embedding = false;
  bool loss = false;
  bool operator==(const LayoutStage&) const = default;
};

// A parsed layout, or where and why it is malformed (position: 1-based character).
struct ParsedLayout {
  std::vector<LayoutStage> stages;
  std::int64_t error_position = 0;  // 0: no error
  std::string error;
};

// Parses Megatron-Core's --pipeline-model-parallel-layout grammar (Megatron-Core developer guide,
// "Custom Pipeline Model Parallel Layout"): stages separated by '|', in virtual-stage order; E
// embedding, t transformer layer, m MTP layer, L loss; X*N repeats a symbol, (…)*N a group;
// commas are cosmetic; a stage may be empty ("E||t|L"). Syntax only: stage counts and totals
// are the caller's to check against the plan and the model.
ParsedLayout parse_pp_layout(std::string_view text);

// What a well-formed layout means for a plan of `stages` virtual stages and a model of `layers`
// transformer layers and `mtp_layers` MTP layers: empty if it fits, else the reason. The
// embedding must open the first stage and the loss close the last, as the lowering places them,
// and the MTP layers must be on the last stage, where the lowering runs them.
std::string check_pp_layout(const std::vector<LayoutStage>& layout, std::int64_t stages,
                            std::int64_t layers, std::int64_t mtp_layers);

// Transformer layers per virtual stage.
std::vector<std::int64_t> layout_stage_layers(const std::vector<LayoutStage>& layout);

}  // namespace ts::parallel
