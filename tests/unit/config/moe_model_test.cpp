// Mixture-of-experts zoo models: published parameter counts and model FLOPs, and bad MoE fields.
#include <catch2/catch.hpp>

#include <string>

#include "sim/config/loader.h"
#include "sim/ir/model_graph.h"
#include "tests/unit/config/config_test_util.h"

namespace ts::config {
namespace {

using test::diagnostics_of;
using test::find_field;

// Total and active parameters as published (billions), without the MTP modules. Sources:
// DeepSeek-V3 671B / 37B (arXiv 2412.19437 abstract); Kimi K2 1.04T / 32.6B (arXiv 2507.20534
// Sec. 2); Qwen3-30B-A3B 30.5B / 3.3B and Qwen3-235B-A22B 235B / 22B (Qwen3 model cards,
// arXiv 2505.09388 Table 2); Mixtral 8x7B 46.7B / 12.9B (arXiv 2401.04088 Sec. 2); Mixtral
// 8x22B 141B / 39B (mistral.ai/news/mixtral-8x22b); gpt-oss-120b 116.8B (arXiv 2508.10925
// Table 1), whose 5.13B active parameters leave out the 0.58B embedding table.
struct Published {
  const char* model;
  double total_b, active_b;
  double active_tolerance;  // relative: the cards round to 2-3 digits
};
constexpr Published kPublished[] = {
    {"deepseek-v3", 671, 37, 0.03},       {"kimi-k2", 1040, 32.6, 0.03},
    {"qwen3-30b-a3b", 30.5, 3.3, 0.03},   {"qwen3-235b-a22b", 235, 22, 0.03},
    {"mixtral-8x7b", 46.7, 12.9, 0.01},   {"mixtral-8x22b", 141, 39, 0.01},
    {"gpt-oss-120b", 116.8, 5.13 + 0.58, 0.01},
};

TEST_CASE("MoE zoo models have their published total and active parameters") {
  for (const auto& p : kPublished) {
    INFO(p.model);
    const ir::ModelSpec m = load_model(p.model);
    REQUIRE(m.moe.has_value());
    const double total = static_cast<double>(ir::parameter_count(m) - ir::mtp_parameter_count(m)) * 1e-9;
    const double active = static_cast<double>(ir::active_parameter_count(m)) * 1e-9;
    CHECK(total == Approx(p.total_b).epsilon(0.015));
    CHECK(active == Approx(p.active_b).epsilon(p.active_tolerance));
    CHECK(active < total);
  }
}

TEST_CASE("DeepSeek-V3's model FLOPs per token match Megatron-Bridge's TFLOP/s over tokens/s") {
  // Megatron-Bridge archive 25.09 (shared/validation/moe-blackwell-public.md): 338 model TFLOP/s
  // per GPU at 1,297 tokens/s per GPU, sequence 4096: 2.606e11 FLOPs per token, MTP included.
  const ir::ModelSpec m = load_model("deepseek-v3");
  const double per_token = ir::model_flops(m, 4096, 1.0).value();
  CHECK(per_token == Approx(338e12 / 1297).epsilon(0.01));
  // Without the MTP module a token costs less: one layer, a projection and an LM head fewer.
  ir::ModelSpec no_mtp = m;
  no_mtp.mtp_layers = 0;
  CHECK(ir::model_flops(no_mtp, 4096, 1.0).value() < per_token * 0.97);
}

TEST_CASE("a dense model's FLOPs are unchanged by the MoE-aware count") {
  // 6 FLOPs per weight plus 6·L·h·s per token (the dense formula) for Llama 3 8B.
  const ir::ModelSpec m = load_model("llama3-8b");
  const double h = 4096, L = 32, kv = 1024, ffn = 14336, V = 128256, s = 8192;
  const double expected = 6 * (L * (h * (h + 2 * kv) + h * h + 3 * h * ffn) + V * h) + 6 * L * h * s;
  CHECK(ir::model_flops(m, 8192, 1.0).value() == Approx(expected).epsilon(1e-12));
}

constexpr std::string_view kMoeBlock =
    "moe {\n"
    "  num_experts: 8\n"
    "  top_k: 2\n"
    "  expert_ffn_hidden: 512\n"
    "  router_score: \"softmax\"\n"
    "}\n";

TEST_CASE("an MoE model file loads, and bad MoE fields are named") {
  test::TempDir dir;
  const auto ok = load_model(dir.write("m.textproto", std::string(test::kValidModel) + std::string(kMoeBlock)));
  REQUIRE(ok.moe.has_value());
  CHECK(ok.moe->num_experts == 8);
  CHECK(ok.is_moe_layer(0));

  std::string bad(test::kValidModel);
  bad += "moe {\n  num_experts: 8\n  top_k: 9\n  expert_ffn_hidden: 512\n  router_score: \"argmax\"\n"
         "  dense_layers: 4\n}\n";
  const auto path = dir.write("bad.textproto", bad);
  const auto ds = diagnostics_of([&] { load_model(path); });
  CHECK(find_field(ds, "moe.top_k") != nullptr);
  CHECK(find_field(ds, "moe.router_score") != nullptr);
  CHECK(find_field(ds, "moe.dense_layers") != nullptr);

  // Node-limited routing: DeepSeek-V3's config.json n_group 8, topk_group 4; a limit above the
  // groups is named.
  const ir::ModelSpec ds3 = load_model("deepseek-v3");
  CHECK(ds3.moe->expert_groups == 8);
  CHECK(ds3.moe->group_limit == 4);
  std::string limit(test::kValidModel);
  limit += "moe {\n  num_experts: 8\n  top_k: 2\n  expert_ffn_hidden: 512\n  router_score: \"softmax\"\n"
           "  expert_groups: 4\n  group_limit: 5\n}\n";
  const auto limit_path = dir.write("limit.textproto", limit);
  CHECK(find_field(diagnostics_of([&] { load_model(limit_path); }), "moe.group_limit") != nullptr);
}

}  // namespace
}  // namespace ts::config
