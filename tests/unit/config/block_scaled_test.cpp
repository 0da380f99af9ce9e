// MXFP8 and NVFP4 GEMMs on Blackwell: where they run, at what rate, and what they cost around.
#include <catch2/catch.hpp>

#include "sim/compute/calibrated_model.h"
#include "sim/config/calibration_loader.h"
#include "sim/config/loader.h"
#include "sim/config/names.h"
#include "sim/ir/model_graph.h"
#include "tests/unit/config/config_test_util.h"

namespace ts::config {
namespace {

parallel::ParallelPlan plan_8(ir::Dtype d) {
  parallel::ParallelPlan p;
  p.dp = 8;
  p.micro_batch = 1;
  p.global_batch = 8;
  p.seq_len = 4096;
  p.dtype = d;
  return p;
}

TEST_CASE("block-scaled formats: bytes with their scales, and only on Blackwell tensor cores") {
  // OCP MX v1.0: one 8-bit scale per 32 FP8 elements; NVFP4: one FP8 scale per 16 FP4 elements.
  CHECK(ir::bytes_per_element(ir::Dtype::kMxfp8) == Approx(1.03125));
  CHECK(ir::bytes_per_element(ir::Dtype::kNvfp4) == Approx(0.5625));
  CHECK(ir::quantized_gemm(ir::Dtype::kNvfp4));
  CHECK_FALSE(ir::quantized_gemm(ir::Dtype::kBf16));

  const auto model = load_model("llama3-8b");
  const auto h100 = load_cluster("dgx-h100");
  const auto b200 = load_cluster("dgx-b200");
  CHECK(b200.gpu.peak(ir::Dtype::kNvfp4).tflops() == Approx(9000));
  CHECK(b200.gpu.peak(ir::Dtype::kMxfp8).tflops() == Approx(4500));
  CHECK_FALSE(h100.gpu.supports(ir::Dtype::kMxfp8));  // FP8 without hardware block scaling
  for (const auto d : {ir::Dtype::kMxfp8, ir::Dtype::kNvfp4}) {
    INFO(ir::dtype_name(d));
    const auto ds = check_plan(plan_8(d), model, h100, 8);
    REQUIRE(test::find_field(ds, "--dtype") != nullptr);
    CHECK(test::find_field(ds, "--dtype")->message.find("Blackwell") != std::string::npos);
    CHECK(check_plan(plan_8(d), model, b200, 8).empty());
  }
  CHECK(parse_dtype("nvfp4", "--dtype") == ir::Dtype::kNvfp4);
  CHECK(parse_dtype("mxfp8", "--dtype") == ir::Dtype::kMxfp8);
}

TEST_CASE("NVFP4 GEMMs: FP8 efficiency at the FP4 peak times its ratio, MXFP8 as FP8") {
  const auto b200 = load_cluster("dgx-b200");
  // The B200 calibration's measured NVFP4-over-FP8 efficiency (block_scaled_gemm).
  const double ratio =
      load_calibration("B200-SXM-180GB")->block_scaled_gemm.at(ir::Dtype::kNvfp4).ratio;
  const auto model = make_compute_model(b200.gpu);
  const compute::GemmShape fp8{8192, 8192, 8192, 1, ir::Dtype::kFp8};
  const compute::GemmShape mx{8192, 8192, 8192, 1, ir::Dtype::kMxfp8};
  const compute::GemmShape fp4{8192, 8192, 8192, 1, ir::Dtype::kNvfp4};
  const compute::GemmShape bf16{8192, 8192, 8192, 1, ir::Dtype::kBf16};
  CHECK(model->gemm(mx).seconds() == Approx(model->gemm(fp8).seconds()).epsilon(0.01));
  // A large GEMM is compute-bound: half the FP8 time over the ratio, less the fixed cost.
  CHECK(model->gemm(fp4).seconds() < 0.6 / ratio * model->gemm(fp8).seconds());
  CHECK(model->gemm(fp4).seconds() > 0.4 / ratio * model->gemm(fp8).seconds());
  CHECK(model->gemm(fp8).seconds() < model->gemm(bf16).seconds());
}

TEST_CASE("a quantized linear layer casts its input first: 2 + 2 x bytes per element") {
  const auto model = load_model("llama3-8b");
  ir::LayerShape s;
  s.micro_batch = 1;
  s.seq = 4096;
  s.full_seq = 4096;
  s.flash_attention = true;
  for (const auto d : {ir::Dtype::kFp8, ir::Dtype::kMxfp8, ir::Dtype::kNvfp4}) {
    INFO(ir::dtype_name(d));
    s.gemm_dtype = d;
    const auto layer = ir::build_layer(model, s);
    std::vector<ir::Op> ops = layer.attention.forward;
    ops.insert(ops.end(), layer.mlp.forward.begin(), layer.mlp.forward.end());
    double cast_bytes = 0;
    std::int64_t gemms = 0;
    for (const auto& op : ops) {
      if (op.kind == ir::OpKind::kGemm) {
        ++gemms;
        CHECK(op.dtype == d);
      }
      if (std::string(op.name).find("fp8_cast") != std::string::npos ||
          std::string(op.name).find("quantize") != std::string::npos) {
        cast_bytes += op.moved.real();
      }
    }
    CHECK(gemms >= 4);
    // QKV's input alone: 4096 x 4096 elements at 2 + 2 x bytes per element.
    CHECK(cast_bytes > 4096.0 * 4096.0 * (2 + 2 * ir::bytes_per_element(d)));
  }
}

}  // namespace
}  // namespace ts::config
