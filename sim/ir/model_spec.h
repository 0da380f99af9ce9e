// ModelSpec: the architecture of a decoder-only transformer (GPT or Llama style), validated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ts::ir {

enum class Norm { kLayerNorm, kRmsNorm };
enum class Activation { kGelu, kSwiglu };
enum class Position { kLearned, kRope };

struct ModelSpec {
  std::string name;
  std::int64_t num_layers = 0;
  std::int64_t hidden = 0;
  std::int64_t num_heads = 0;
  std::int64_t num_kv_heads = 0;  // == num_heads for multi-head attention; fewer for GQA/MQA
  std::int64_t ffn_hidden = 0;    // intermediate size of the MLP (per projection for SwiGLU)
  std::int64_t vocab = 0;
  std::int64_t max_seq_len = 0;   // learned position table size, 0 when positions are rotary
  Norm norm = Norm::kLayerNorm;
  Activation activation = Activation::kGelu;
  Position position = Position::kLearned;
  bool tied_embeddings = false;  // LM head shares the input embedding matrix
  bool linear_bias = true;       // GPT-style biases on the linear layers
  // Dropout in training; unset: on for LayerNorm + GELU models, off otherwise
  // (memory::default_activation_options).
  std::optional<bool> dropout;

  std::int64_t head_dim() const { return hidden / num_heads; }
  std::int64_t kv_hidden() const { return head_dim() * num_kv_heads; }
};

}  // namespace ts::ir
