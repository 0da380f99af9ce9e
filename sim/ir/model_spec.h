// ModelSpec: the architecture of a decoder-only transformer (GPT or Llama style), validated.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace ts::ir {

enum class Norm { kLayerNorm, kRmsNorm };
enum class Activation { kGelu, kSwiglu };
enum class Position { kLearned, kRope };
// How a mixture-of-experts router scores experts before its top-k choice: softmax over the
// experts (Mixtral, Qwen3-MoE, GPT-OSS) or independent sigmoids (DeepSeek-V3, Kimi-K2).
enum class RouterScore { kSoftmax, kSigmoid };

// The mixture of experts replacing the MLP of a layer (Shazeer et al. 2017; Fedus et al. 2022).
struct MoeSpec {
  std::int64_t num_experts = 0;        // routed experts per MoE layer
  std::int64_t top_k = 0;              // experts per token
  std::int64_t expert_ffn_hidden = 0;  // intermediate size of a routed expert
  std::int64_t shared_experts = 0;     // experts every token passes through
  std::int64_t shared_ffn_hidden = 0;  // intermediate size of each shared expert
  std::int64_t dense_layers = 0;       // the first layers keep a dense MLP
  RouterScore router_score = RouterScore::kSoftmax;
  // Node-limited routing: a token's experts lie in at most `group_limit` of `expert_groups`
  // groups of consecutive experts; 0 = no limit.
  std::int64_t expert_groups = 0;
  std::int64_t group_limit = 0;
  bool operator==(const MoeSpec&) const = default;
};

// Multi-head latent attention (DeepSeek-AI 2024, arXiv 2405.04434 Sec. 2.1).
struct MlaSpec {
  std::int64_t q_lora_rank = 0;   // 0: queries projected directly
  std::int64_t kv_lora_rank = 0;
  std::int64_t rope_head_dim = 0;  // decoupled rotary channels per head
  bool operator==(const MlaSpec&) const = default;
};

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
  std::int64_t kv_channels = 0;  // channels per head; 0: hidden / num_heads
  std::optional<MoeSpec> moe;    // absent: a dense model
  std::optional<MlaSpec> mla;    // absent: grouped-query attention
  std::int64_t mtp_layers = 0;   // multi-token prediction modules
  // Sliding-window attention: keys a query of a banded layer attends to (0: none), and every
  // how many layers one keeps full attention (0: none does; Megatron-Core window_attn_skip_freq).
  std::int64_t sliding_window = 0;
  std::int64_t full_attention_every = 0;

  std::int64_t head_dim() const { return kv_channels > 0 ? kv_channels : hidden / num_heads; }
  std::int64_t q_hidden() const { return head_dim() * num_heads; }
  std::int64_t kv_hidden() const { return head_dim() * num_kv_heads; }
  // Whether layer `layer` (0-based) has a mixture of experts instead of a dense MLP.
  bool is_moe_layer(std::int64_t layer) const { return moe && layer >= moe->dense_layers; }
  std::int64_t moe_layers() const { return moe ? num_layers - moe->dense_layers : 0; }
  // Keys a query of layer `layer` (0-based) attends to under its sliding window; 0: full causal
  // attention (Megatron-Core is_layer_window_attention: 1-based n is banded unless n % freq == 0).
  std::int64_t attention_window(std::int64_t layer) const {
    if (sliding_window <= 0) return 0;
    if (full_attention_every > 0 && (layer + 1) % full_attention_every == 0) return 0;
    return sliding_window;
  }
};

}  // namespace ts::ir
