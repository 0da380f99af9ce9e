// FLOP conventions of the published sources (Megatron model/hardware FLOPs, 6N) and their reading.
#include <cmath>

#include "sim/base/format.h"
#include "sim/driver/validate.h"
#include "sim/driver/validate_text.h"
#include "sim/ir/model_graph.h"

namespace ts::driver {

namespace {

// The layers' part of Megatron's bracket, (1 + kv/a + s/h) + ffn/h·g: all but the LM head's V/2Lh.
double megatron_layer_term(const ir::ModelSpec& m, double s) {
  const double h = static_cast<double>(m.hidden);
  const double gated = m.activation == ir::Activation::kSwiglu ? 1.5 : 1.0;
  const double kv_ratio = static_cast<double>(m.num_kv_heads) / static_cast<double>(m.num_heads);
  return (1.0 + kv_ratio + s / h) + static_cast<double>(m.ffn_hidden) / h * gated;
}

}  // namespace

double megatron_model_flops(const ir::ModelSpec& m, std::int64_t seq, double sequences) {
  // Mixture-of-experts, latent-attention and MTP models: Megatron-Core's count is ir::model_flops.
  if (m.moe || m.mla || m.mtp_layers > 0) return ir::model_flops(m, seq, sequences * static_cast<double>(seq)).value();
  const double h = static_cast<double>(m.hidden);
  const double s = static_cast<double>(seq);
  const double layers = static_cast<double>(m.num_layers);
  const double per = megatron_layer_term(m, s) + static_cast<double>(m.vocab) / (2.0 * layers * h);
  return 12.0 * sequences * s * layers * h * h * per;
}

double megatron_hardware_flops(const ir::ModelSpec& m, std::int64_t seq, double sequences,
                               parallel::Recompute recompute, double recomputed_share) {
  const double h = static_cast<double>(m.hidden);
  const double s = static_cast<double>(seq);
  const double layers = static_cast<double>(m.num_layers);
  const double model = megatron_model_flops(m, seq, sequences);
  switch (recompute) {
    case parallel::Recompute::kNone: return model;
    case parallel::Recompute::kFull: {
      // The layers' forward again: a third of their forward + backward FLOPs; the LM head is not
      // recomputed, which turns V/12hL into V/16hL in SC'21's 96·B·s·L·h² form.
      const double layer_part = 12.0 * sequences * s * layers * h * h * megatron_layer_term(m, s);
      return model + recomputed_share * layer_part / 3.0;
    }
    case parallel::Recompute::kSelectiveOp: {
      // The matmuls the op policy reruns, per token and layer (its other reruns carry no FLOPs).
      const auto policy = ir::op_policy_per_token(m, 1, true);
      const double rerun = (ir::total_flops(policy.attention) + ir::total_flops(policy.mlp)).value();
      return model + rerun * sequences * s * layers;
    }
    case parallel::Recompute::kSelective:
      // Korthikanti et al. 2022 print HFU/MFU pairs (their Table 5 rows, 22B to 1T) that add the
      // whole attention-score term again, 12·B·s²·h·L: e.g. 175B, 52.8/51.4 = 1 + 12(s/h) /
      // (72(1 + s/6h + V/12hL)) with s/h = 1/6.
      return model + 12.0 * sequences * s * s * h * layers;
  }
  return model;
}

double six_n_flops(double parameters, const ir::ModelSpec& m, std::int64_t seq, double tokens,
                   bool causal_halved, double recomputed_share) {
  const double attention = (causal_halved ? 6.0 : 12.0) * static_cast<double>(m.num_layers) *
                           static_cast<double>(m.hidden) * static_cast<double>(seq);
  const double per_token = 6.0 * parameters + attention;
  return tokens * per_token * (1.0 + recomputed_share / 3.0);
}

double recomputed_layer_share(const parallel::ParallelPlan& plan, const ir::ModelSpec& model) {
  if (model.num_layers <= 0) return 0;
  std::int64_t recomputed = 0;
  for (const std::int64_t layers : parallel::virtual_stage_layers(plan, model)) recomputed += plan.recomputed_layers(layers);
  return static_cast<double>(recomputed) / static_cast<double>(model.num_layers);
}

FlopConvention flop_convention(const PublishedRun& run, const config::ReadingVocabulary& vocab) {
  const std::string text = run.tflops_kind + " " + run.notes;
  FlopConvention c;
  if (reading::says(vocab, config::Words::kFlops6n, text)) c.family = FlopFamily::kSixN;
  c.hardware = reading::says(vocab, config::Words::kFlopsHardware, run.tflops_kind);
  c.causal_halved = reading::says(vocab, config::Words::kFlopsHalved, text) &&
                    !reading::says(vocab, config::Words::kFlopsNotHalved, text);
  return c;
}

std::string describe(const FlopConvention& c) {
  std::string out = c.family == FlopFamily::kSixN ? "6N+12Lhs per token" : "Megatron 72BsLh^2(1+s/6h+V/12hL)";
  if (c.family == FlopFamily::kSixN && c.causal_halved) out = "6N+6Lhs per token";
  if (c.hardware) out += c.family == FlopFamily::kSixN ? ", x4/3 with full recompute" : ", + recompute FLOPs";
  return out;
}

}  // namespace ts::driver
