// trainsim kernel: the calibrated time of one GEMM, attention or memory-bound kernel on a GPU.
#include <cctype>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "sim/base/diagnostic.h"
#include "sim/compute/calibrated_model.h"
#include "sim/compute/fit_report.h"
#include "sim/config/calibration_loader.h"
#include "tools/trainsim/cli.h"

namespace po = boost::program_options;

namespace ts::cli {
namespace {

constexpr const char* kUsage =
    "usage: trainsim kernel --gpu G --op gemm --m M --n N --k K [--batch B] [--dtype "
    "bf16|fp16|fp8|fp32|mxfp8|nvfp4]\n"
    "       trainsim kernel --gpu G --op attention --batch B --heads H [--kv-heads KV] --seq S "
    "[--seq-kv S2]\n"
    "                       --head-dim D [--head-dim-v DV] [--causal [--window W]] --direction fwd|bwd [--kernel NAME]\n"
    "       trainsim kernel --gpu G --op memory --bytes SIZE        (SIZE: 1GiB, 512MB, 1e9)\n"
    "       trainsim kernel --gpu G --fit-report [--holdout-every K]\n"
    "The time of one kernel from the calibrated compute model of GPU G (a calibrated GPU name or\n"
    "alias, e.g. h100-sxm, or a calibration file). --format json prints time_s, tflops and gbps.";

[[noreturn]] void bad(const std::string& flag, const std::string& message) {
  throw InputError(Diagnostic{"", 0, flag, message});
}

// A positive integer flag that the op needs.
std::int64_t need(const po::variables_map& vm, const char* name, const std::string& op) {
  const std::string flag = std::string("--") + name;
  if (!vm.count(name)) bad(flag, "required by --op " + op);
  const std::int64_t v = vm[name].as<std::int64_t>();
  if (v <= 0) bad(flag, "must be > 0 (got " + std::to_string(v) + ")");
  // Far above any real kernel; keeps tile, wave and block counts inside int64.
  constexpr std::int64_t kMaxDim = std::int64_t{1} << 24;
  if (v > kMaxDim) bad(flag, "must be <= " + std::to_string(kMaxDim) + " (got " + std::to_string(v) + ")");
  return v;
}

// "1GiB", "512MB", "4096", "1e9": decimal suffixes (kB, MB, GB, TB) are powers of 1000, binary
// ones (KiB, MiB, GiB, TiB) powers of 1024; a bare number is bytes.
Bytes parse_size(const std::string& text, const std::string& flag) {
  std::size_t used = 0;
  double value = 0;
  try {
    value = std::stod(text, &used);
  } catch (const std::exception&) {
    bad(flag, "not a size: '" + text + "' (examples: 1GiB, 512MB, 4096)");
  }
  std::string unit = text.substr(used);
  std::string lower;
  for (char ch : unit) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  double scale = 0;
  if (lower.empty() || lower == "b") scale = 1;
  else if (lower == "kb") scale = 1e3;
  else if (lower == "mb") scale = 1e6;
  else if (lower == "gb") scale = 1e9;
  else if (lower == "tb") scale = 1e12;
  else if (lower == "kib") scale = 1024.0;
  else if (lower == "mib") scale = 1024.0 * 1024;
  else if (lower == "gib") scale = 1024.0 * 1024 * 1024;
  else if (lower == "tib") scale = 1024.0 * 1024 * 1024 * 1024;
  else bad(flag, "unknown size unit '" + unit + "' (known: B, kB, MB, GB, TB, KiB, MiB, GiB, TiB)");
  if (!std::isfinite(value) || value <= 0) bad(flag, "must be > 0 (got '" + text + "')");
  if (value * scale > 0x1p50) bad(flag, "must be at most 1 PiB (got '" + text + "')");
  return Bytes::from_real(value * scale);
}

ir::Dtype parse_dtype(const std::string& s) {
  if (auto d = config::try_parse_kernel_dtype(s)) return *d;
  bad("--dtype", "unknown dtype '" + s + "' (known: " + config::kernel_dtype_choices() + ")");
}

struct Result {
  std::string op;
  double seconds = 0;
  double flops = 0;
  double bytes = 0;
  nlohmann::ordered_json extra = nlohmann::ordered_json::object();
  std::string shape;  // for the text line
};

std::string fmt_time(double s) {
  char buf[64];
  if (s >= 1e-3) std::snprintf(buf, sizeof buf, "%.3f ms", s * 1e3);
  else std::snprintf(buf, sizeof buf, "%.2f us", s * 1e6);
  return buf;
}

int fit_report(const compute::Calibration& cal, int holdout_every, Format format) {
  const auto r = compute::evaluate_fit(cal, holdout_every);
  if (format == Format::kJson) {
    nlohmann::ordered_json j;
    j["gpu"] = r.gpu;
    j["holdout_every"] = holdout_every;
    auto& fams = j["families"] = nlohmann::ordered_json::array();
    for (const auto& s : r.summary()) {
      fams.push_back({{"family", s.family},
                      {"fit_points", s.fit_points},
                      {"median_fit_error", s.median_fit},
                      {"max_fit_error", s.max_fit},
                      {"held_out_points", s.held_out_points},
                      {"median_held_out_error", s.median_held_out},
                      {"max_held_out_error", s.max_held_out},
                      {"check_points", s.check_points},
                      {"median_check_error", s.median_check}});
    }
    auto& pts = j["points"] = nlohmann::ordered_json::array();
    for (const auto& p : r.points) {
      nlohmann::ordered_json o{{"family", p.family}, {"table", p.table},       {"shape", p.label},
                               {"origin", p.origin}, {"measured", p.measured}, {"fitted_error", p.fitted_error},
                               {"check", p.check}};
      if (p.held_out) o["held_out_error"] = p.held_out_error;
      if (p.derived) o["derived"] = true;  // `measured` is derived from another GPU, not measured
      pts.push_back(o);
    }
    std::cout << j.dump(2) << '\n';
    return kExitOk;
  }
  const auto& g = r.fitted.gemm;
  std::printf("%s: fit of %s\nerrors: predicted / measured time - 1", r.gpu.c_str(), cal.file.c_str());
  if (holdout_every > 0) {
    std::printf("; held out: points %d, %d, %d, ... of each family (refitted without them)", holdout_every,
                2 * holdout_every, 3 * holdout_every);
  }
  std::printf("\n");
  std::size_t derived = 0;
  for (const auto& p : r.points) derived += p.derived ? 1 : 0;
  if (derived > 0) {
    // No kernel of this GPU was measured for these points: the "measured" column holds values
    // moved from another GPU by the calibration file's imports (peak, bandwidth and ceiling
    // ratios).
    std::printf(
        "derived, not measured: %zu of %zu points (tables marked 'derived from ..., not "
        "measured');\n"
        "  their 'measured' values come from another GPU's measurements scaled to this one\n",
        derived, r.points.size());
  }
  std::printf("\n");
  std::printf("GEMM  t = max(a*W*2*Tm*Tn*K/(P/S) + b*W*(Tm+Tn)/256 + c, bytes/B_hbm), %zu points\n",
              g.num_points);
  for (std::size_t c = 0; c < compute::kNumGemmClasses; ++c) {
    std::printf("  a[%s] = %.4f (%.1f%% of peak)%s\n", compute::gemm_class_name(static_cast<compute::GemmClass>(c)),
                g.inv_efficiency[c], 100.0 / g.inv_efficiency[c], g.fitted[c] ? "" : "  (no points: bf16 value)");
  }
  std::printf("  b = %.3f us per wave of 128x128 tiles, c = %.3f us\n", g.fill_s * 1e6, g.fixed_s * 1e6);
  for (const auto d : {ir::Dtype::kMxfp8, ir::Dtype::kNvfp4}) {
    if (!cal.gpu.supports(d)) continue;
    const auto bs = cal.block_scaled_gemm.find(d);
    if (bs == cal.block_scaled_gemm.end()) {
      std::printf("  %s: a[fp8] at the %s peak (no measurement beside fp8: an assumption)\n",
                  ir::dtype_name(d), ir::dtype_name(d));
    } else {
      std::printf("  %s: a[fp8] / %.3f at the %s peak (%s)\n", ir::dtype_name(d), bs->second.ratio,
                  ir::dtype_name(d), bs->second.source.c_str());
    }
  }
  const auto& gg = r.fitted.grouped;
  if (gg.fitted) {
    std::printf("GEMM grouped (MoE experts)  same form, own a, b, c and B_grouped, %zu points\n",
                gg.gemm.num_points);
    for (std::size_t c = 0; c < compute::kNumGemmClasses; ++c) {
      if (!gg.gemm.fitted[c]) continue;
      std::printf("  a[%s] = %.4f (%.1f%% of peak)\n",
                  compute::gemm_class_name(static_cast<compute::GemmClass>(c)), gg.gemm.inv_efficiency[c],
                  100.0 / gg.gemm.inv_efficiency[c]);
    }
    std::printf("  b = %.3f us per wave of 128x128 tiles, c = %.3f us, B_grouped = %.1f GB/s (%.0f%% of B_hbm)\n",
                gg.gemm.fill_s * 1e6, gg.gemm.fixed_s * 1e6, gg.memory_bps * 1e-9,
                100 * gg.memory_bps / r.fitted.memory.achievable_bps);
  } else {
    std::printf("GEMM grouped (MoE experts): no grouped points, priced by the dense fit\n");
  }
  std::printf("memory  B_hbm = %.1f GB/s (%.1f%% of %.0f), launch %.3f us (%s)\n",
              r.fitted.memory.achievable_bps * 1e-9,
              100 * r.fitted.memory.achievable_bps / cal.gpu.memory_bandwidth.bytes_per_s(),
              cal.gpu.memory_bandwidth.gbytes_per_s(), r.fitted.memory.launch_s * 1e6,
              r.fitted.memory.launch_measured ? "measured" : "b + c of the GEMM fit");
  const auto& mem = r.fitted.memory;
  if (mem.native_norm_points > 0) {
    std::printf("  native LayerNorm forward %.1f GB/s (%.2f of B_hbm), backward %.1f GB/s (%.2f), %zu points\n",
                mem.native_norm_fwd_bps * 1e-9, mem.native_norm_fwd_bps / mem.achievable_bps,
                mem.native_norm_bwd_bps * 1e-9, mem.native_norm_bwd_bps / mem.achievable_bps,
                mem.native_norm_points);
  } else {
    std::printf("  native LayerNorm: no points (its norms stream)\n");
  }
  if (mem.fused_norm_points > 0) {
    std::printf("  fused norm (cuDNN) forward %.1f GB/s (%.2f of B_hbm), backward %.1f GB/s (%.2f), %zu points\n",
                mem.fused_norm_fwd_bps * 1e-9, mem.fused_norm_fwd_bps / mem.achievable_bps,
                mem.fused_norm_bwd_bps * 1e-9, mem.fused_norm_bwd_bps / mem.achievable_bps,
                mem.fused_norm_points);
  }
  for (const auto& a : r.fitted.attention) {
    std::printf("attention %s%s%s (block %lld)%s\n", a.kernel.c_str(),
                a.dtype == ir::Dtype::kFp8 ? " fp8" : "",
                (a.window > 0 ? " window " + std::to_string(a.window)
                 : a.head_dim_v > 0 ? " values " + std::to_string(a.head_dim_v) : std::string()).c_str(),
                static_cast<long long>(a.block),
                a.split ? ", forward share from the direction-split reference" : "");
    const auto pr = [](const char* n, const compute::AttentionDirParams& d) {
      std::printf("  %-5s a = %.4f, a_c = %.4f (causal), e = %.1f FLOP/score, b = %.3f us/wave, c = %.3f us\n", n,
                  d.inv_efficiency, d.causal_extra, d.score_cost, d.per_wave_s * 1e6, d.fixed_s * 1e6);
    };
    if (a.split) {
      pr("total", a.total);
    } else {
      pr("fwd", a.fwd);
      pr("bwd", a.bwd);
    }
  }
  std::printf("\n%-40s %5s %8s %8s %5s %8s %8s %5s %8s\n", "family", "fit", "median", "max", "held", "median",
              "max", "check", "median");
  for (const auto& s : r.summary()) {
    std::printf("%-40s %5zu %7.1f%% %7.1f%% %5zu %7.1f%% %7.1f%% %5zu %7.1f%%\n", s.family.c_str(), s.fit_points,
                100 * s.median_fit, 100 * s.max_fit, s.held_out_points, 100 * s.median_held_out,
                100 * s.max_held_out, s.check_points, 100 * s.median_check);
  }
  std::printf("\n%-36s %-46s %10s %8s %8s  %s\n", "family", "shape", "measured", "fit", "held", "table");
  for (const auto& p : r.points) {
    char held[16] = "";
    if (p.held_out) std::snprintf(held, sizeof held, "%+.1f%%", 100 * p.held_out_error);
    std::printf("%-36s %-46s %10.1f %+7.1f%% %8s  %s%s\n", p.family.c_str(), p.label.c_str(), p.measured,
                100 * p.fitted_error, held, p.table.c_str(), p.check ? " (check)" : "");
  }
  return kExitOk;
}

}  // namespace

int cmd_kernel(const Args& args) {
  po::options_description o("kernel flags");
  o.add_options()("gpu", po::value<std::string>(),
                  "calibrated GPU: name, alias (h100-sxm, a100, ...) or calibration file")(
      "op", po::value<std::string>(), "gemm | attention | memory")("m", po::value<std::int64_t>(),
                                                                   "GEMM rows of A and C")(
      "n", po::value<std::int64_t>(), "GEMM columns of B and C")("k", po::value<std::int64_t>(),
                                                                 "GEMM reduction dimension")(
      "batch", po::value<std::int64_t>(),
      "GEMM: independent products (default 1); attention: sequences")(
      "dtype", po::value<std::string>()->default_value("bf16"),
      "bf16 | fp16 | fp8 | fp32 | mxfp8 | nvfp4")("heads", po::value<std::int64_t>(),
                                                  "attention query heads")(
      "kv-heads", po::value<std::int64_t>(), "attention key/value heads (default: --heads)")(
      "seq", po::value<std::int64_t>(), "attention query length")(
      "seq-kv", po::value<std::int64_t>(), "attention key length (default: --seq)")(
      "head-dim", po::value<std::int64_t>(), "attention head dimension")(
      "head-dim-v", po::value<std::int64_t>(), "attention value head dimension (default: --head-dim; MLA: 128)")(
      "window", po::value<std::int64_t>(), "causal sliding window in keys per query (GPT-OSS: 128)")(
      "causal", po::value<std::string>()->implicit_value("true"),
      "causal mask (--causal, or --causal=false)")(
      "direction", po::value<std::string>()->default_value("fwd"), "attention pass: fwd | bwd")(
      "kernel", po::value<std::string>(),
      "attention kernel of the calibration (default: the simulator's)")(
      "bytes", po::value<std::string>(), "memory: bytes read plus written (1GiB, 512MB, ...)")(
      "fit-report", po::bool_switch(),
      "print the fit: parameters, and the error of every measured point")(
      "holdout-every", po::value<int>()->default_value(3),
      "fit report: leave out every k-th point")(
      "format", po::value<std::string>()->default_value("text"), "text | json");
  po::variables_map vm;
  if (!parse_flags(args, o, vm, kUsage)) return kExitOk;
  const Format format = parse_format(vm["format"].as<std::string>(), false);
  if (!vm.count("gpu")) bad("--gpu", "required (known: " + config::known_calibrations_text() + ")");
  const auto cal = config::load_calibration(vm["gpu"].as<std::string>(), "--gpu");
  if (vm["fit-report"].as<bool>()) {
    const int k = vm["holdout-every"].as<int>();
    if (k < 0) bad("--holdout-every", "must be >= 0");
    return fit_report(*cal, k, format);
  }
  const auto model = compute::make_calibrated_model(cal);
  if (!vm.count("op")) bad("--op", "required (known: gemm, attention, memory)");
  const std::string op = vm["op"].as<std::string>();
  const ir::Dtype dtype = parse_dtype(vm["dtype"].as<std::string>());

  Result r;
  r.op = op;
  if (op == "gemm") {
    if (!cal->gpu.supports(dtype)) {
      bad("--dtype", cal->gpu.name + " has no " + ir::dtype_name(dtype) + " tensor cores (known: bf16, fp16" +
                         std::string(cal->gpu.supports(ir::Dtype::kFp8) ? ", fp8" : "") + ", fp32)");
    }
    compute::GemmShape s;
    s.m = need(vm, "m", op);
    s.n = need(vm, "n", op);
    s.k = need(vm, "k", op);
    s.batch = vm.count("batch") ? need(vm, "batch", op) : 1;
    s.dtype = dtype;
    const auto d = model->gemm_detail(s);
    r.seconds = Duration::from_seconds(d.seconds).seconds();
    r.flops = s.flops().value();
    r.bytes = compute::gemm_bytes(s);
    r.extra["dtype"] = ir::dtype_name(dtype);
    r.extra["tile"] = std::to_string(d.tile.m) + "x" + std::to_string(d.tile.n);
    r.extra["waves"] = d.waves;
    r.extra["memory_bound"] = d.memory_bound;
    r.shape = std::to_string(s.m) + "x" + std::to_string(s.n) + "x" + std::to_string(s.k) +
              (s.batch != 1 ? " batch " + std::to_string(s.batch) : "") + " " + ir::dtype_name(dtype) +
              " (tile " + r.extra["tile"].get<std::string>() + ", " + std::to_string(d.waves) + " waves" +
              (d.memory_bound ? ", HBM-bound" : "") + ")";
  } else if (op == "attention") {
    const std::string kernel = vm.count("kernel") ? vm["kernel"].as<std::string>() : model->default_attention_kernel();
    const bool fp8_fit = model->fitted().find_attention(kernel, ir::Dtype::kFp8) != nullptr;
    if (dtype != ir::Dtype::kBf16 && dtype != ir::Dtype::kFp16 && !(dtype == ir::Dtype::kFp8 && fp8_fit)) {
      bad("--dtype", "attention of " + kernel + " on " + cal->gpu.name +
                         " is calibrated for bf16 and fp16" + (fp8_fit ? " and fp8" : "") + " only");
    }
    compute::AttentionShape s;
    s.batch = need(vm, "batch", op);
    s.heads = need(vm, "heads", op);
    s.kv_heads = vm.count("kv-heads") ? need(vm, "kv-heads", op) : s.heads;
    if (s.heads % s.kv_heads != 0) bad("--kv-heads", "must divide --heads");
    s.seq_q = need(vm, "seq", op);
    s.seq_kv = vm.count("seq-kv") ? need(vm, "seq-kv", op) : s.seq_q;
    s.head_dim = need(vm, "head-dim", op);
    s.causal = false;
    if (vm.count("causal")) {
      const std::string c = vm["causal"].as<std::string>();
      if (c == "true" || c == "1") s.causal = true;
      else if (c == "false" || c == "0") s.causal = false;
      else bad("--causal", "expects true or false (got '" + c + "')");
    }
    if (vm.count("head-dim-v")) s.head_dim_v = need(vm, "head-dim-v", op);
    if (vm.count("window")) {
      s.window = need(vm, "window", op);
      if (!s.causal) bad("--window", "a sliding window needs --causal");
    }
    const std::string dir = vm["direction"].as<std::string>();
    if (dir == "fwd") s.direction = compute::Direction::kForward;
    else if (dir == "bwd") s.direction = compute::Direction::kBackward;
    else bad("--direction", "unknown direction '" + dir + "' (known: fwd, bwd)");
    s.dtype = dtype;
    r.seconds = model->attention(s, kernel).seconds();
    r.flops = s.flops().value();
    r.bytes = compute::attention_bytes(s);
    r.extra["kernel"] = kernel;
    r.extra["direction"] = dir;
    r.extra["causal"] = s.causal;
    r.shape = kernel + " " + dir + (s.causal ? " causal" : " non-causal") + " batch " + std::to_string(s.batch) +
              " heads " + std::to_string(s.heads) + "/" + std::to_string(s.kv_heads) + " seq " +
              std::to_string(s.seq_q) + (s.seq_kv != s.seq_q ? "x" + std::to_string(s.seq_kv) : "") +
              " head_dim " + std::to_string(s.head_dim) +
              (s.head_dim_v > 0 ? "/" + std::to_string(s.head_dim_v) : "") +
              (s.window > 0 ? " window " + std::to_string(s.window) : "");
    if (s.window > 0) r.extra["window"] = s.window;
  } else if (op == "memory") {
    if (!vm.count("bytes")) bad("--bytes", "required by --op memory");
    const Bytes b = parse_size(vm["bytes"].as<std::string>(), "--bytes");
    r.seconds = model->memory_bound(b, compute::MemoryKernel::kStreaming).seconds();
    r.bytes = b.real();
    r.shape = std::to_string(b.count()) + " bytes moved";
  } else {
    bad("--op", "unknown op '" + op + "' (known: gemm, attention, memory)");
  }

  const double tflops = r.seconds > 0 ? r.flops / r.seconds * 1e-12 : 0.0;
  const double gbps = r.seconds > 0 ? r.bytes / r.seconds * 1e-9 : 0.0;
  if (format == Format::kJson) {
    nlohmann::ordered_json j;
    j["gpu"] = cal->gpu.name;
    j["op"] = r.op;
    j["time_s"] = r.seconds;
    j["tflops"] = tflops;
    j["gbps"] = gbps;
    j["flops"] = r.flops;
    j["bytes"] = r.bytes;
    for (auto it = r.extra.begin(); it != r.extra.end(); ++it) j[it.key()] = it.value();
    std::cout << j.dump() << '\n';
  } else {
    std::cout << cal->gpu.name << " " << r.op << " " << r.shape << ": " << fmt_time(r.seconds);
    char buf[96];
    if (r.flops > 0) {
      std::snprintf(buf, sizeof buf, ", %.1f TFLOP/s (%.1f%% of peak)", tflops,
                    100 * r.flops / r.seconds / cal->gpu.peak(dtype).per_s());
      std::cout << buf;
    }
    std::snprintf(buf, sizeof buf, ", %.1f GB/s", gbps);
    std::cout << buf << '\n';
  }
  return kExitOk;
}

}  // namespace ts::cli
