// Loading calibration files: names and aliases, provenance, imports, errors, make_compute_model.
#include <catch2/catch.hpp>

#include <algorithm>
#include <string>

#include "sim/compute/calibrated_model.h"
#include "sim/config/calibration_loader.h"
#include "tests/unit/config/config_test_util.h"

namespace {

using namespace ts;
using namespace ts::config;
using test::diagnostics_of;
using test::find_field;

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

void check_provenance(const compute::Provenance& p, const std::string& what) {
  INFO(what);
  CHECK(!p.source.empty());
  CHECK(!p.date.empty());
  CHECK(!p.software.empty());
  CHECK(!p.method.empty());
}

// A small valid file; each line numbered in its comment.
constexpr std::string_view kValid =
    "gpu: \"TEST-GPU\"\n"                                                          // 1
    "aliases: \"test\"\n"                                                          // 2
    "datasheet {\n"                                                                // 3
    "  peak_bf16_tflops: 100 peak_fp16_tflops: 100 peak_fp8_tflops: 0\n"           // 4
    "  peak_tf32_tflops: 50 peak_fp32_tflops: 10\n"                                // 5
    "  memory_gb: 80 memory_bandwidth_gbps: 1000 num_sms: 100\n"                   // 6
    "  provenance { source: \"s\" date: \"d\" software: \"w\" method: \"m\" }\n"   // 7
    "}\n"                                                                          // 8
    "gemm_model { tile { m: 128 n: 128 }\n"                                        // 9
    "  provenance { source: \"s\" date: \"d\" software: \"w\" method: \"m\" } }\n" // 10
    "gemm {\n"                                                                     // 11
    "  name: \"t\"\n"                                                              // 12
    "  provenance { source: \"s\" date: \"d\" software: \"w\" method: \"m\" }\n"   // 13
    "  point { m: 1024 n: 1024 k: 1024 dtype: \"bf16\" tflops: 40 }\n"             // 14
    "  point { m: 2048 n: 2048 k: 2048 dtype: \"bf16\" tflops: 60 }\n"             // 15
    "  point { m: 4096 n: 4096 k: 4096 dtype: \"bf16\" tflops: 70 }\n"             // 16
    "  point { m: 8192 n: 8192 k: 8192 dtype: \"bf16\" tflops: 75 }\n"             // 17
    "}\n"                                                                          // 18
    "attention_model { block: 128 kernel: \"k\"\n"                                 // 19
    "  provenance { source: \"s\" date: \"d\" software: \"w\" method: \"m\" } }\n" // 20
    "attention {\n"                                                                // 21
    "  name: \"a\" kernel: \"k\"\n"                                                // 22
    "  provenance { source: \"s\" date: \"d\" software: \"w\" method: \"m\" }\n"   // 23
    "  point { direction: \"fwd\" causal: false head_dim: 128 seq: 1024 batch: 16 heads: 16 tflops: 50 }\n"
    "  point { direction: \"fwd\" causal: false head_dim: 128 seq: 4096 batch: 4 heads: 16 tflops: 60 }\n"
    "  point { direction: \"fwd\" causal: true head_dim: 64 seq: 2048 batch: 8 heads: 32 tflops: 40 }\n"
    "  point { direction: \"bwd\" causal: false head_dim: 128 seq: 1024 batch: 16 heads: 16 tflops: 40 }\n"
    "  point { direction: \"bwd\" causal: false head_dim: 128 seq: 4096 batch: 4 heads: 16 tflops: 50 }\n"
    "  point { direction: \"bwd\" causal: false head_dim: 64 seq: 2048 batch: 8 heads: 32 tflops: 35 }\n"
    "}\n"
    "memory {\n"
    "  name: \"m\"\n"
    "  provenance { source: \"s\" date: \"d\" software: \"w\" method: \"m\" }\n"
    "  point { kernel: \"copy\" pattern: \"load_store\" achieved_gbps: 850 }\n"
    "}\n";

}  // namespace

TEST_CASE("the four zoo GPU kinds are calibrated and found by name or alias, any case") {
  std::vector<std::string> names;
  for (const auto& g : known_calibrations()) names.push_back(g.name);
  for (const char* want : {"A100-SXM4-40GB", "A100-SXM4-80GB", "H100-SXM5-80GB", "H200-SXM-141GB"}) {
    CHECK(std::find(names.begin(), names.end(), want) != names.end());
  }
  CHECK(load_calibration("h100-sxm")->gpu.name == "H100-SXM5-80GB");
  CHECK(load_calibration("H100")->gpu.name == "H100-SXM5-80GB");
  CHECK(load_calibration("a100-sxm")->gpu.name == "A100-SXM4-80GB");
  CHECK(load_calibration("a100-40gb")->gpu.name == "A100-SXM4-40GB");
  CHECK(load_calibration("h200-sxm")->gpu.name == "H200-SXM-141GB");
  CHECK(calibration_file("H100-SXM5-80GB").has_value());
  CHECK_FALSE(calibration_file("B200").has_value());
}

TEST_CASE("an unknown GPU is an error on the flag that lists the known ones") {
  const auto ds = diagnostics_of([] { load_calibration("mi300x", "--gpu"); });
  REQUIRE(ds.size() == 1);
  CHECK(ds[0].field == "--gpu");
  CHECK(ds[0].message.find("mi300x") != std::string::npos);
  CHECK(ds[0].message.find("H100-SXM5-80GB (h100-sxm5-80gb, h100-sxm, h100)") != std::string::npos);
  CHECK(ds[0].message.find("A100-SXM4-40GB") != std::string::npos);
}

TEST_CASE("every table of every calibration carries its provenance") {
  for (const auto& g : known_calibrations()) {
    const auto cal = load_calibration(g.name);
    INFO(g.name);
    check_provenance(cal->datasheet_provenance, "datasheet");
    check_provenance(cal->gemm_model_provenance, "gemm_model");
    check_provenance(cal->attention_model_provenance, "attention_model");
    for (const auto& t : cal->gemm) check_provenance(t.provenance, t.name);
    for (const auto& t : cal->attention) check_provenance(t.provenance, t.name);
    for (const auto& t : cal->memory) check_provenance(t.provenance, t.name);
    // Every point knows the file and line it came from.
    for (const auto& t : cal->gemm) {
      for (const auto& p : t.points) CHECK(p.origin.line > 0);
    }
  }
}

TEST_CASE("imports bring another GPU's points with their efficiency and say so") {
  const auto h100 = load_calibration("H100-SXM5-80GB");
  const auto h200 = load_calibration("H200-SXM-141GB");
  // H200 pools the H100's bf16 GEMM points at the same peak (ratio 1) with its own measured ones;
  // each imported table is named and annotated as such.
  std::size_t imported_bf16 = 0;
  for (const auto& t : h200->gemm) {
    const bool imported = ends_with(t.name, "[from H100-SXM5-80GB]");
    CHECK(imported ==
          (t.provenance.notes.find("imported from H100-SXM5-80GB") != std::string::npos));
    for (const auto& p : t.points) {
      if (imported && (p.dtype == ir::Dtype::kBf16 || p.dtype == ir::Dtype::kFp16)) ++imported_bf16;
    }
  }
  CHECK(imported_bf16 >= 5);
  // The two pool their GEMM points both ways: each has every point of the other, at ratio 1.
  const auto count = [](const compute::Calibration& c) {
    std::size_t n = 0;
    for (const auto& t : c.gemm) n += t.points.size();
    return n;
  };
  CHECK(count(*h100) == count(*h200));
  // A100-40GB memory: the 80GB measurements scaled by the datasheet ratio 1555/2039.
  const auto a40 = load_calibration("A100-SXM4-40GB");
  const auto a80 = load_calibration("A100-SXM4-80GB");
  REQUIRE(!a40->memory.empty());
  REQUIRE(!a80->memory.empty());
  CHECK(a40->memory[0].points[0].gbps == Approx(a80->memory[0].points[0].gbps * 1555.0 / 2039.0));
  // A100 FP32 GEMM: H100 SGEMM efficiency at the A100 FP32 peak (19.5 vs 67 TFLOP/s).
  double h100_fp32 = 0, a100_fp32 = 0;
  for (const auto& t : h100->gemm) {
    for (const auto& p : t.points) {
      if (p.dtype == ir::Dtype::kFp32 && p.m == 8192) h100_fp32 = p.tflops;
    }
  }
  for (const auto& t : a80->gemm) {
    for (const auto& p : t.points) {
      if (p.dtype == ir::Dtype::kFp32 && p.m == 8192) a100_fp32 = p.tflops;
    }
  }
  CHECK(a100_fp32 == Approx(h100_fp32 * 19.5 / 67));
  // The A100's FlashAttention-2 has only fwd+bwd points: its forward share comes from H100.
  REQUIRE(a80->direction_split.has_value());
  CHECK(a80->direction_split->reference->gpu.name == "H100-SXM5-80GB");
  REQUIRE(a40->direction_split.has_value());  // inherited with the imported points
  // The H100's FlashAttention-1 and Triton FlashAttention (forward+backward only) take their
  // forward share from its own FlashAttention-2.
  REQUIRE(h100->direction_split.has_value());
  CHECK(h100->direction_split->reference == nullptr);
  CHECK(h100->direction_split->kernel == "FlashAttention-2");
  compute::AttentionShape shape;
  shape.batch = 8;
  shape.heads = shape.kv_heads = 16;
  shape.seq_q = shape.seq_kv = 2048;
  shape.head_dim = 128;
  const auto time = [&](const char* kernel, compute::Direction d) {
    shape.direction = d;
    return compute::make_calibrated_model(h100, h100->gpu, kernel)->attention(shape).seconds();
  };
  for (const auto d : {compute::Direction::kForward, compute::Direction::kBackward}) {
    // Published order on Hopper: FlashAttention-2 about twice as fast as -1 and the Triton kernel.
    CHECK(time("FlashAttention-1", d) > 1.5 * time("FlashAttention-2", d));
    CHECK(time("FlashAttention-Triton", d) > 1.5 * time("FlashAttention-2", d));
  }
}

TEST_CASE("a valid small calibration file loads and fits") {
  test::TempDir dir;
  const auto path = dir.write("TEST-GPU.textproto", kValid);
  const auto cal = load_calibration(path);
  CHECK(cal->gpu.name == "TEST-GPU");
  CHECK(cal->gpu.num_sms == 100);
  CHECK(cal->gemm.at(0).points.size() == 4);
  CHECK(cal->gemm.at(0).points.at(1).origin.line == 15);
  const auto model = compute::make_calibrated_model(cal);
  CHECK(model->gemm(compute::GemmShape{4096, 4096, 4096, 1, ir::Dtype::kBf16}) > Duration::zero());
  // Without native LayerNorm points the norm streams.
  const Bytes moved = Bytes::gb(1);
  CHECK(model->memory_bound(moved, compute::MemoryKernel::kNativeNormBackward) ==
        model->memory_bound(moved, compute::MemoryKernel::kStreaming));
}

TEST_CASE("a normalization import takes only the native LayerNorm points, scaled by bandwidth") {
  test::TempDir dir;
  const auto path = dir.write(
      "TEST-GPU.textproto",
      std::string(kValid) + "imports { gpu: \"A100-SXM4-80GB\" family: \"normalization\"\n"
                            "  relationship: \"r\" }\n");
  const auto cal = load_calibration(path);
  const auto a80 = load_calibration("A100-SXM4-80GB");
  // Native LayerNorm GB/s of a calibration, own tables or imported ones.
  const auto norm_gbps = [](const compute::Calibration& c, bool imported) {
    std::vector<double> out;
    for (const auto& t : c.memory) {
      if (t.role != compute::TableRole::kFit ||
          ends_with(t.name, "[from A100-SXM4-80GB]") != imported)
        continue;
      for (const auto& p : t.points) {
        CHECK((compute::is_norm_pattern(p.pattern) || !imported));
        if (compute::is_norm_pattern(p.pattern)) out.push_back(p.gbps);
      }
    }
    return out;
  };
  const auto a80_norms = norm_gbps(*a80, false);
  const auto imported = norm_gbps(*cal, true);
  REQUIRE(a80_norms.size() == 6);
  REQUIRE(imported.size() == 6);
  // TEST-GPU has 1000 GB/s against the A100-80GB's 2039.
  for (std::size_t i = 0; i < 6; ++i) CHECK(imported[i] == Approx(a80_norms[i] * 1000.0 / 2039.0));
  CHECK(norm_gbps(*cal, false).empty());
}

TEST_CASE("an import names the source tables it takes, a name the source lacks is an error") {
  test::TempDir dir;
  const std::string import_block =
      "imports { gpu: \"H100-SXM5-80GB\" family: \"gemm\" tables: \"no such table\"\n"
      "  relationship: \"r\" }\n";
  const auto bad = dir.write("TEST-GPU.textproto", std::string(kValid) + import_block);
  const auto ds = diagnostics_of([&] { load_calibration(bad); });
  INFO(test::dump(ds));
  const Diagnostic* d = find_field(ds, "imports[0].tables[0]");
  REQUIRE(d != nullptr);
  CHECK(d->message.find("no gemm table named 'no such table' in H100-SXM5-80GB") !=
        std::string::npos);

  // Naming one table takes that table and no other.
  const auto h100 = load_calibration("H100-SXM5-80GB");
  REQUIRE(!h100->gemm.empty());
  const std::string first = h100->gemm.front().name;
  test::TempDir dir2;
  const auto good = dir2.write(
      "TEST-GPU.textproto",
      std::string(kValid) + "imports { gpu: \"H100-SXM5-80GB\" family: \"gemm\" tables: \"" +
          first + "\"\n  relationship: \"r\" }\n");
  const auto cal = load_calibration(good);
  std::size_t imported = 0;
  for (const auto& t : cal->gemm) {
    if (!ends_with(t.name, "[from H100-SXM5-80GB]")) continue;
    ++imported;
    CHECK(t.name == first + " [from H100-SXM5-80GB]");
  }
  CHECK(imported == 1);
}

TEST_CASE("native LayerNorm points: forward and forward+backward together, the backward slower") {
  test::TempDir dir;
  int files = 0;
  const auto with = [&](const std::string& points) {
    std::string text(kValid);
    const std::string copy =
        "  point { kernel: \"copy\" pattern: \"load_store\" achieved_gbps: 850 }\n";
    text.replace(text.find(copy), copy.size(), copy + points);
    return dir.write("NORM-" + std::to_string(++files) + ".textproto", text);
  };
  const std::string fwd =
      "  point { kernel: \"ln\" pattern: \"norm_forward\" achieved_gbps: 500 }\n";
  const std::string full =
      "  point { kernel: \"ln\" pattern: \"norm_forward_backward\" achieved_gbps: 400 }\n";
  const auto model = compute::make_calibrated_model(load_calibration(with(fwd + full)));
  const auto& m = model->fitted().memory;
  CHECK(m.native_norm_fwd_bps == Approx(500e9));
  // 5 passes in 5/400 = 2/500 + 3/bwd: bwd = 3 / (5/400 - 2/500) GB/s.
  CHECK(m.native_norm_bwd_bps == Approx(3.0 / (5.0 / 400 - 2.0 / 500) * 1e9));
  CHECK(m.predicted_bps(compute::MemoryPattern::kNormForwardBackward) == Approx(400e9));
  // One without the other, or a forward+backward faster than the forward alone, is an error.
  for (const std::string& bad :
       {fwd, full + "  point { kernel: \"ln\" pattern: \"norm_forward\" achieved_gbps: 150 }\n"}) {
    const auto ds =
        diagnostics_of([&] { compute::make_calibrated_model(load_calibration(with(bad))); });
    REQUIRE(ds.size() == 1);
    CHECK(ds[0].message.find("native LayerNorm") != std::string::npos);
  }
}

TEST_CASE("every problem of a calibration file is reported at once, with line and field path") {
  test::TempDir dir;
  std::string text(kValid);
  const auto replace = [&](const std::string& from, const std::string& to) {
    const auto at = text.find(from);
    REQUIRE(at != std::string::npos);
    text.replace(at, from.size(), to);
  };
  replace("tflops: 60 }", "tflops: 600 }");                 // line 15: above the 100 TFLOP/s peak
  replace("dtype: \"bf16\" tflops: 70", "dtype: \"bf8\" tflops: 70");  // line 16: unknown dtype
  replace("dtype: \"bf16\" tflops: 75", "dtype: \"fp8\" tflops: 75");  // line 17: no fp8 on this GPU
  replace("  provenance { source: \"s\" date: \"d\" software: \"w\" method: \"m\" }\n  point { m: 1024",
          "  provenance { source: \"s\" software: \"w\" method: \"m\" }\n  point { m: 1024");  // line 13
  replace("name: \"a\" kernel: \"k\"", "name: \"a\" kernel: \"k\" colour: \"red\"");          // line 22
  replace("  name: \"t\"\n", "  name: \"t\" kernel: \"ragged\"\n");                      // line 12
  const auto path = dir.write("BAD.textproto", text);
  const auto ds = diagnostics_of([&] { load_calibration(path); });
  INFO(test::dump(ds));
  const Diagnostic* d = nullptr;
  REQUIRE((d = find_field(ds, "gemm[0].point[1].tflops")) != nullptr);
  CHECK(d->line == 15);
  CHECK(d->message.find("exceeds the datasheet peak") != std::string::npos);
  REQUIRE((d = find_field(ds, "gemm[0].point[2].dtype")) != nullptr);
  CHECK(d->line == 16);
  REQUIRE((d = find_field(ds, "gemm[0].point[3].dtype")) != nullptr);
  CHECK(d->message.find("no fp8 tensor cores") != std::string::npos);
  REQUIRE((d = find_field(ds, "gemm[0].provenance.date")) != nullptr);
  CHECK(d->line == 13);
  REQUIRE((d = find_field(ds, "attention.colour")) != nullptr);
  CHECK(d->line == 22);
  REQUIRE((d = find_field(ds, "gemm[0].kernel")) != nullptr);
  CHECK(d->message.find("known: dense, grouped") != std::string::npos);
  for (const auto& x : ds) CHECK(ends_with(x.file, "BAD.textproto"));
}

TEST_CASE("an attention table's dtype is bf16 or fp8, fp8 on fp8 tensor cores") {
  test::TempDir dir;
  for (const auto& [dtype, message] : {std::pair{"fp6", "known: bf16, fp8"},
                                       std::pair{"fp8", "no fp8 tensor cores"}}) {
    std::string text(kValid);
    const std::string from = "name: \"a\" kernel: \"k\"";
    text.replace(text.find(from), from.size(), from + " dtype: \"" + dtype + "\"");
    const auto path = dir.write("DT.textproto", text);
    const auto ds = diagnostics_of([&] { load_calibration(path); });
    INFO(test::dump(ds));
    const Diagnostic* d = find_field(ds, "attention[0].dtype");
    REQUIRE(d != nullptr);
    CHECK(d->line == 22);
    CHECK(d->message.find(message) != std::string::npos);
  }
}

TEST_CASE("make_compute_model: calibrated for a calibrated GPU, roofline otherwise") {
  const auto cal = load_calibration("H100-SXM5-80GB");
  compute::GpuSpec gpu = cal->gpu;  // the cluster's spec of the same GPU
  gpu.matmul_efficiency = 0.7;
  gpu.memory_efficiency = 0.9;
  gpu.kernel_launch_overhead = Duration::from_us(3);
  const auto model = make_compute_model(gpu);
  const auto* calibrated = dynamic_cast<const compute::CalibratedModel*>(model.get());
  REQUIRE(calibrated != nullptr);
  CHECK(model->gpu().name == "H100-SXM5-80GB");
  CHECK(calibrated->default_attention_kernel() == "FlashAttention-3");
  // An uncalibrated GPU kind falls back to the roofline.
  compute::GpuSpec other = gpu;
  other.name = "MI300X";
  const auto roofline = make_compute_model(other);
  CHECK(dynamic_cast<const compute::CalibratedModel*>(roofline.get()) == nullptr);
  const compute::GemmShape s{8192, 8192, 8192, 1, ir::Dtype::kBf16};
  CHECK(roofline->gemm(s).seconds() == Approx(s.flops().value() / (989e12 * 0.7) + 3e-6).epsilon(1e-6));
  // A cluster whose GPU contradicts the calibration's datasheet is an input error.
  compute::GpuSpec wrong = gpu;
  wrong.num_sms = 114;  // an H100 PCIe under the SXM name
  wrong.memory_bandwidth = Bandwidth::gbytes_per_s(2000);
  const auto ds = diagnostics_of([&] { make_compute_model(wrong); });
  CHECK(find_field(ds, "datasheet.num_sms") != nullptr);
  CHECK(find_field(ds, "datasheet.memory_bandwidth_gbps") != nullptr);
}

TEST_CASE("kernel dtypes: bf16, fp16, fp8, fp32") {
  CHECK(try_parse_kernel_dtype("bf16") == ir::Dtype::kBf16);
  CHECK(try_parse_kernel_dtype("fp32") == ir::Dtype::kFp32);
  CHECK_FALSE(try_parse_kernel_dtype("tf32").has_value());
  CHECK(kernel_dtype_choices() == "bf16, fp16, fp8, fp32, mxfp8, nvfp4");
}

TEST_CASE("ComputeModelCache fits each GPU spec once and shares the model") {
  ComputeModelCache cache;
  const auto cal = load_calibration("H100-SXM5-80GB");
  compute::GpuSpec gpu = cal->gpu;
  gpu.matmul_efficiency = 0.7;
  gpu.memory_efficiency = 0.9;
  const auto a = cache.get(gpu);
  const auto b = cache.get(gpu);
  CHECK(a.get() == b.get());
  compute::GpuSpec other = gpu;
  other.name = "MI300X";  // uncalibrated: a roofline, cached apart
  const auto c = cache.get(other);
  CHECK(c.get() != a.get());
  CHECK(dynamic_cast<const compute::CalibratedModel*>(a.get()) != nullptr);
  CHECK(dynamic_cast<const compute::CalibratedModel*>(c.get()) == nullptr);
}

TEST_CASE("Blackwell calibrations name every derived kernel table") {
  const auto h100 = load_calibration("H100-SXM5-80GB");
  for (const char* gpu : {"b200", "gb200", "b300", "gb300"}) {
    INFO(gpu);
    const auto cal = load_calibration(gpu);
    REQUIRE(!cal->gemm.empty());
    REQUIRE(!cal->attention.empty());
    REQUIRE(!cal->memory.empty());
    for (const auto& t : cal->gemm) {
      CHECK(t.derived);
      CHECK(t.name.find(", not measured]") != std::string::npos);
    }
    // cuDNN's fused attention is measured on the Grace-Blackwell parts (cudnn-frontend's SDPA
    // benchmark) and is their default kernel; the HGX parts of the same dies derive it from them.
    const bool grace = std::string(gpu).rfind("gb", 0) == 0;
    CHECK(cal->attention_kernel == "cuDNN SDPA");
    for (const auto& t : cal->attention) {
      INFO(t.name);
      const bool measured = grace && t.kernel == "cuDNN SDPA";
      CHECK(t.derived != measured);
      CHECK((t.name.find(", not measured]") == std::string::npos) == measured);
    }
    // cuDNN's RMSNorm is measured on the Grace-Blackwell parts (cudnn-frontend's norm benchmark);
    // the HGX parts derive it from them, and every streaming table is derived from the H100's.
    for (const auto& t : cal->memory) {
      INFO(t.name);
      const bool measured = grace && t.name.rfind("cudnn-frontend RMSNorm", 0) == 0;
      CHECK((t.name.find(", not measured]") == std::string::npos) == measured);
      CHECK((t.provenance.notes.find("derived, not measured") == std::string::npos) == measured);
    }
  }
  // Imports within a GPU generation (the same die) are not derived.
  const auto h100_96 = load_calibration("H100-SXM5-96GB");
  for (const auto& t : h100_96->gemm) CHECK_FALSE(t.derived);
  // A GEMM point moves by the peak ratio times the ratio of the published ceilings (MAMF):
  // B200 bf16 1745/2250 against H100 794.5/989.
  const auto b200 = load_calibration("B200-SXM-180GB");
  const compute::GemmTable* src = nullptr;
  const compute::GemmTable* dst = nullptr;
  for (const auto& t : h100->gemm) {
    for (const auto& p : t.points) {
      if (p.dtype == ir::Dtype::kBf16 && src == nullptr) src = &t;
    }
  }
  REQUIRE(src != nullptr);
  for (const auto& t : b200->gemm) {
    if (t.name == src->name + " [derived from H100-SXM5-80GB, not measured]") dst = &t;
  }
  REQUIRE(dst != nullptr);
  REQUIRE(dst->points.size() == src->points.size());
  for (std::size_t i = 0; i < src->points.size(); ++i) {
    if (src->points[i].dtype != ir::Dtype::kBf16) continue;
    CHECK(dst->points[i].tflops ==
          Approx(src->points[i].tflops * (2250.0 / 989.0) * (0.7756 / 0.8033)).epsilon(1e-6));
  }
  // The B200's cuDNN attention is the GB200's measurement moved by the bf16 peak ratio.
  const auto gb200 = load_calibration("GB200-NVL-186GB");
  std::size_t compared = 0;
  for (const auto& s : gb200->attention) {
    if (s.kernel != "cuDNN SDPA") continue;
    for (const auto& d : b200->attention) {
      if (d.name != s.name + " [derived from GB200-NVL-186GB, not measured]") continue;
      REQUIRE(d.points.size() == s.points.size());
      for (std::size_t i = 0; i < s.points.size(); ++i, ++compared)
        CHECK(d.points[i].tflops == Approx(s.points[i].tflops * 2250.0 / 2500.0).epsilon(1e-9));
    }
  }
  CHECK(compared >= 20);
}

TEST_CASE("NVFP4 GEMMs: fp8 efficiency times the measured block-scaled ratio") {
  // The B200 file's ratio comes from one harness's NVFP4 and FP8 GEMMs at one shape
  // (hardware.csv harness_nvfp4_gemm / harness_fp8_gemm): 3904.33/9000 over 2544.68/4500.
  const auto b200 = load_calibration("B200-SXM-180GB");
  REQUIRE(b200->block_scaled_gemm.count(ir::Dtype::kNvfp4) == 1);
  const auto& bs = b200->block_scaled_gemm.at(ir::Dtype::kNvfp4);
  CHECK(bs.ratio == Approx((3904.329097 / 9000) / (2544.683145 / 4500)).epsilon(1e-3));
  CHECK(bs.source.find("bench_nvfp4_gemm.py") != std::string::npos);
  CHECK(b200->block_scaled_gemm.count(ir::Dtype::kMxfp8) == 0);
  // Priced like an fp8 GEMM at the FP4 peak with the efficiency scaled: the compute-bound time
  // grows by 1/ratio against the same calibration without the entry.
  auto without = std::make_shared<compute::Calibration>(*b200);
  without->block_scaled_gemm.clear();
  const auto with_model = compute::make_calibrated_model(b200);
  const auto without_model = compute::make_calibrated_model(without);
  const compute::GemmShape big{16384, 6144, 4096, 1, ir::Dtype::kNvfp4};
  const double t_with = with_model->gemm(big).seconds();
  const double t_without = without_model->gemm(big).seconds();
  CHECK(t_with > t_without * 1.2);
  CHECK(t_with < t_without / bs.ratio * 1.001);
  // The other dtypes are untouched.
  const compute::GemmShape fp8{16384, 6144, 4096, 1, ir::Dtype::kFp8};
  CHECK(with_model->gemm(fp8) == without_model->gemm(fp8));
  // The other Blackwell GPUs carry the same ratio.
  for (const char* gpu : {"gb200", "b300", "gb300"}) {
    INFO(gpu);
    CHECK(load_calibration(gpu)->block_scaled_gemm.at(ir::Dtype::kNvfp4).ratio == Approx(bs.ratio));
  }
}

TEST_CASE("block-scaled ratio: a block-scaled dtype the GPU has, and a source") {
  test::TempDir dir;
  const auto path = dir.write("TEST-GPU.textproto",
                              std::string(kValid) +
                                  "block_scaled_gemm { dtype: \"fp8\" ratio: 0.8 source: \"s\" }\n"
                                  "block_scaled_gemm { dtype: \"nvfp4\" ratio: 3 }\n");
  const auto ds = diagnostics_of([&] { load_calibration(path); });
  INFO(test::dump(ds));
  const Diagnostic* d = nullptr;
  REQUIRE((d = find_field(ds, "block_scaled_gemm[0].dtype")) != nullptr);
  CHECK(d->message.find("mxfp8 or nvfp4") != std::string::npos);
  REQUIRE((d = find_field(ds, "block_scaled_gemm[1].dtype")) != nullptr);
  CHECK(d->message.find("no nvfp4 tensor cores") != std::string::npos);
  CHECK(find_field(ds, "block_scaled_gemm[1].ratio") != nullptr);
  CHECK(find_field(ds, "block_scaled_gemm[1].source") != nullptr);
}
