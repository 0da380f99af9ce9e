#!/usr/bin/env python3
"""Turn the published measurements (calibration-sources CSVs) into calibration/*.textproto.

Usage: import_published.py SOURCES_DIR OUT_DIR

SOURCES_DIR holds gemm.csv, attention.csv, memory_bw.csv and hardware.csv as collected in the
shared calibration-sources folder (each row with its source). calibration/sources/ beside this
project's calibration files adds published rows found since, in the same columns, and
memory_kernels.csv (PyTorch's native LayerNorm, measured forward and forward+backward). This script only selects, groups
and re-labels rows: every number written comes from a CSV row, and each table carries the
provenance (source, date, software, method) of its rows. Rows are left out, with the reason in
the table notes or in EXCLUDED below, when they measure another GPU variant, an unsupported
dtype, or a value the source itself flags as unusable (zero-initialised inputs).

The output files are complete calibration files; re-running the script reproduces them.
"""
import csv
import os
import re
import sys

EXCLUDED = """\
Rows of the published sources deliberately not used:
  gemm.csv: A100 PCIe and GH200 MAMF rows (other GPU variants: lower/higher power limits);
    TF32 rows (the simulator has no tf32 dtype); Horace He zero- and integer-initialised rows
    (the source says they overstate by 10-15%); shape-less summary rows (DeepGEMM/ThunderKittens
    best values); DeepGEMM masked grouped rows (tokens per group vary at run time).
  attention.csv: PyTorch standard attention, xformers, cuDNN and the Triton tutorial kernels (the
    unfused core is modeled op by op; the others have no training-framework use modeled); FP8
    attention (causal flag inferred by the transcriber; the simulator runs attention in bf16);
    Azure single points (direction and causal flag not identifiable); shape-less best values.
  memory_bw.csv: H100 PCIe and A800 PCIe rows (other GPU variants); L2-resident plateaus;
    PCIe and NVLink rows (not HBM).
  calibration/sources/memory_kernels.csv: LayerNorm rows with N < 4096 (data sets of 34-168 MB,
    within a few times the L2 and dominated by launch and tail effects); the H100 NVL rows
    (another variant: 400 W, 3.9 TB/s HBM3), which checked the A100's LayerNorm rates that the
    Hoppers imported before the H100 SXM and H200 were measured (scaled to 3350 GB/s they sit up
    to 19% below the SXM's measured rates).
  cudnn-frontend benchmark/norms results (GB200, GB300, H200), taken into memory_kernels.csv as
    fused_norm rows: only cuDNN's RMSNorm at hidden >= 4096 and >= 2^24 elements (32 MiB per
    activation pass). Left out: the PyTorch (F.rms_norm, F.layer_norm) and torch.compile
    backends (the eager RMSNorm is modelled op by op; compiled norms are not a modelled
    framework); the per-head q/k norms (hidden 128) and hidden-2048 shapes (a few MB, launch
    and tail bound); the one LayerNorm shape (GPT-3, 1024 x 12288: 25 MB, its backward's
    weight and bias gradients reduce over only 1024 rows).
"""


def read(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def q(s):
    """Text-format string literal."""
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


def fmt(x):
    s = ("%.6f" % x).rstrip("0").rstrip(".")
    return s if s else "0"


def provenance(indent, source, date, software, method, notes=None):
    pad = " " * indent
    out = [pad + "provenance {"]
    out.append(pad + "  source: " + q(source))
    out.append(pad + "  date: " + q(date))
    out.append(pad + "  software: " + q(software))
    out.append(pad + "  method: " + q(method))
    if notes:
        out.append(pad + "  notes: " + q(notes))
    out.append(pad + "}")
    return out


# ---------------------------------------------------------------------------------------------
# Datasheets (hardware.csv)

def hw_value(rows, gpu, variant, metric):
    for r in rows:
        if r["gpu"] == gpu and r["variant"] == variant and r["metric"] == metric:
            return r
    return None


def datasheet(hw, gpu, variant, compute_variant=None, fp16_from_bf16=False):
    cv = compute_variant or variant
    def val(metric, variant_=None):
        r = hw_value(hw, gpu, variant_ or cv, metric)
        if r is None:
            raise KeyError((gpu, variant_ or cv, metric))
        return r
    rows = {}
    rows["bf16"] = val("bf16_tensor_peak")
    rows["fp16"] = rows["bf16"] if fp16_from_bf16 else val("fp16_tensor_peak")
    fp8 = hw_value(hw, gpu, cv, "fp8_tensor_peak")
    rows["fp8"] = fp8
    rows["tf32"] = val("tf32_tensor_peak")
    rows["fp32"] = val("fp32_simt_peak")
    rows["mem"] = val("hbm_capacity", variant)
    rows["bw"] = val("hbm_bandwidth", variant)
    rows["sms"] = val("sm_count")
    sources = []
    for key in ["bf16", "fp16", "fp8", "tf32", "fp32", "mem", "bw", "sms"]:
        r = rows[key]
        # "same"/"same as above" rows repeat the previous row's source.
        if r is not None and r["source"] not in sources and not r["source"].startswith("same"):
            sources.append(r["source"])
    fp8v = float(fp8["value"]) if fp8 is not None and fp8["value"] else 0.0
    out = ["datasheet {"]
    out.append("  peak_bf16_tflops: " + fmt(float(rows["bf16"]["value"])))
    out.append("  peak_fp16_tflops: " + fmt(float(rows["fp16"]["value"])))
    out.append("  peak_fp8_tflops: " + fmt(fp8v))
    fp4 = hw_value(hw, gpu, cv, "fp4_tensor_peak")
    if fp4 is not None and fp4["value"]:
        out.append("  peak_fp4_tflops: " + fmt(float(fp4["value"])))
    out.append("  peak_tf32_tflops: " + fmt(float(rows["tf32"]["value"])))
    out.append("  peak_fp32_tflops: " + fmt(float(rows["fp32"]["value"])))
    out.append("  memory_gb: " + fmt(float(rows["mem"]["value"])))
    out.append("  memory_bandwidth_gbps: " + fmt(float(rows["bw"]["value"])))
    out.append("  num_sms: " + str(int(float(rows["sms"]["value"]))))
    notes = "dense (no 2:4 sparsity) peaks; hardware.csv rows " + gpu + " " + variant
    if compute_variant:
        notes += "; compute rows from " + compute_variant + " (same die and clocks)"
    if fp16_from_bf16:
        notes += "; fp16 peak equals the bf16 peak (same tensor-core rate; not listed separately)"
    if fp8v == 0:
        notes += "; no FP8 tensor cores (fp8 peak 0: an fp8 plan on this GPU is a config error)"
    out += provenance(2, "; ".join(sources), "datasheet values as compiled in the sources above",
                      "not applicable (datasheet)",
                      "vendor datasheet peaks, cross-checked between the listed sources", notes)
    out.append("}")
    return out


# ---------------------------------------------------------------------------------------------
# GEMM (gemm.csv)

GEMM_TILES = ["256x128", "128x256", "256x64", "64x256", "128x128", "128x64", "64x128", "64x64"]


def gemm_model():
    out = ["gemm_model {"]
    for t in GEMM_TILES:
        m, n = t.split("x")
        out.append("  tile { m: %s n: %s }" % (m, n))
    out += provenance(
        2, "NVIDIA/cutlass python/cutlass_library/generator.py, GenerateSM80_TensorOp_16816 "
        "tile_descriptions (threadblock shapes of the 16-bit tensor-op GEMM kernels)",
        "CUTLASS 3.x generator (2024)", "CUTLASS library generator",
        "threadblock (CTA) tile shapes; cuBLAS chooses among kernels with such tiles by "
        "heuristics, and the model takes the tile with the shortest predicted time",
        "the Hopper (SM90) kernels use the same family of 64..256-wide tiles")
    out.append("}")
    return out


def norm_dtype(d):
    d = d.strip()
    if d.startswith("fp16/bf16"):
        return "bf16"
    if d.startswith("bf16"):
        return "bf16"
    if d.startswith("fp16"):
        return "fp16"
    if d.startswith("fp8"):
        return "fp8"
    if d.startswith("fp32"):
        return "fp32"
    return None


def gemm_point(r, dtype=None, batch=1, m=None, note=None):
    d = dtype or norm_dtype(r["dtype"])
    s = "  point { m: %s n: %s k: %s" % (m or r["M"], r["N"], r["K"])
    if batch != 1:
        s += " batch: %d" % batch
    s += " dtype: %s tflops: %s" % (q(d), fmt(float(r["tflops"])))
    if note:
        s += " note: " + q(note)
    return s + " }"


def table(kind, fields, rows, prov, point_fn):
    """One calibration table block: `kind {`, its header fields (name, value text) in order,
    the provenance, one point per row."""
    out = ["%s {" % kind] + ["  %s: %s" % f for f in fields]
    out += provenance(2, *prov)
    out += [point_fn(r) for r in rows]
    out.append("}")
    return out


def gemm_table(name, rows, prov, role=None, point_fn=gemm_point):
    fields = [("name", q(name))] + ([("role", q(role))] if role else [])
    return table("gemm", fields, rows, prov, point_fn)


def gemm_tables(gemm, gpu):
    def rows(pred):
        return [r for r in gemm if pred(r)]
    t = []
    if gpu == "A100-SXM4-80GB":
        mamf = rows(lambda r: r["gpu"] == "A100" and r["variant"] == "SXM" and r["dtype"] == "bf16")
        t += gemm_table("ml-engineering MAMF A100 SXM bf16", mamf, (
            mamf[0]["source"], "repo snapshot 744d01e (2026)", mamf[0]["software"],
            "best shape of a brute-force mamf-finder.py scan; mean of 100 iterations after 50 "
            "warm-up; torch.mm",
            "A100 SXM, memory variant not stated (compute identical for 40 and 80 GB); "
            "a ceiling: the best of many shapes"),
            role="check")
        az = rows(lambda r: r["gpu"] == "A100" and r["variant"] == "SXM4-80GB" and r["dtype"] == "fp16")
        t += gemm_table("Azure cuBLASLt A100-SXM4-80GB fp16", az, (
            az[0]["source"], "2024-09 (commit 8fd0c6e)", az[0]["software"],
            "cuBLASLt, random initialisation, 10000 warm-up iterations; ND A100 v4 VM",
            "fp16 and bf16 share the tensor-core rate (312 TFLOP/s)"))
        hh = rows(lambda r: r["gpu"] == "A100" and r["notes"].startswith("randn inputs"))
        t += gemm_table("Horace He A100 8192^3 randn", hh, (
            hh[0]["source"], "2022", "PyTorch (cuBLAS), versions not stated by the source",
            "torch matmul with randn inputs (the source shows zero and integer inputs overstate "
            "by 10-15%; those rows are not used)", "A100 SXM, memory variant not stated"),
            point_fn=lambda r: gemm_point(r, dtype="bf16"))
    elif gpu == "H100-SXM5-80GB":
        mamf = rows(lambda r: r["gpu"] == "H100" and r["variant"] == "SXM" and r["dtype"] == "bf16")
        t += gemm_table("ml-engineering MAMF H100 SXM bf16", mamf, (
            mamf[0]["source"], "repo snapshot 744d01e (2026)", mamf[0]["software"],
            "best shape of a brute-force mamf-finder.py scan; mean of 100 iterations after 50 "
            "warm-up; torch.mm", "a ceiling: the best of many shapes"),
            role="check")
        mamf8 = rows(lambda r: r["gpu"] == "H100" and r["variant"] == "SXM" and r["dtype"] == "fp8_e4m3")
        t += gemm_table("ml-engineering MAMF H100 SXM fp8", mamf8, (
            mamf8[0]["source"], "repo snapshot 744d01e (2026)", mamf8[0]["software"],
            "best shape of a brute-force mamf-finder.py scan; mean of 100 iterations after 50 "
            "warm-up; torch._scaled_mm (per-tensor scaled FP8 e4m3)",
            "a ceiling: the best of many shapes"),
            role="check")
        az = rows(lambda r: r["gpu"] == "H100" and r["variant"].startswith("SXM5-80GB (ND") and r["dtype"] == "fp8")
        t += gemm_table("Azure cuBLASLt H100 SXM fp8", az, (
            az[0]["source"], "2024-09 (commit 8fd0c6e)", az[0]["software"],
            "cuBLASLt FP8, random initialisation, 10000 warm-up iterations; ND H100 v5 VM",
            "Azure published FP8 only for Hopper"))
        wh = rows(lambda r: r["gpu"] == "H100" and r["variant"] == "SXM5-80GB (HBM3)"
                  and norm_dtype(r["dtype"]) in ("fp16", "fp32"))
        t += gemm_table("waynehacking8 cuBLAS H100 SXM square sweep", wh, (
            wh[0]["source"], "not stated by the source (commit fd74d2a)",
            "CUDA/cuBLAS 12.x (sm_90a build)",
            "cublasGemmEx (FP16 in, FP32 accumulate) and cublasSgemm (FP32 SIMT); single run on "
            "one idle GPU of a shared 8xH100 SXM5 box; clocks not locked",
            "TF32 rows of the same sweep are not used (no tf32 dtype in the simulator)"))
        tr = rows(lambda r: r["gpu"] == "H100" and "triton-lang/triton issue #2339" in r["source"])
        t += gemm_table("triton#2339 cuBLAS H100 SXM fp16 (2023)", tr, (
            tr[0]["source"], "2023-09-19", tr[0]["software"],
            "cuBLAS column of the Triton tutorial matmul benchmark (torch.matmul on fp16 randn "
            "inputs, triton.testing.do_bench)",
            "cuBLAS as shipped with PyTorch in 2023, the software of the 2023 H100 training runs; "
            "the other H100 bf16/fp16 tables are 2025-26 cuBLAS, faster at mid-size shapes"))
        nv = rows(lambda r: r["gpu"] == "H100" and r["variant"] == "SXM5-80GB" and r["dtype"] == "fp16"
                  and "triton-lang" not in r["source"])
        t += gemm_table("waynehacking8 cuBLAS nvjet H100 SXM fp16", nv, (
            nv[0]["source"], "not stated by the source (commit fcfa413)",
            "cuBLAS (nvjet_sm90 kernel), version not stated",
            "single run on the same box as the square sweep", "77% of the FP16 peak"))
        dg = rows(lambda r: r["gpu"] == "H800" and r["dtype"] == "fp8 (block-scaled)")
        dg_prov = (dg[0]["source"], "2025-04-03 (commit d14962f)", "DeepGEMM, NVCC 12.8",
                   "DeepGEMM benchmark table of its README (FP8 e4m3 with 1x128/128x128 block "
                   "scaling, NT layout) on H800 SXM5 (H100 SXM compute, reduced NVLink)",
                   "check only: another library with block-scaled FP8, compared with the "
                   "cuBLAS-fitted model but not fitted; M=64/128 rows probe the small-M regime")
        gg = [r for r in gemm if r["gpu"] == "H800" and "grouped contiguous" in r["library"]]
        def grouped_point(r):
            groups, mper = r["M"].split(" ")[0].split("x")
            return gemm_point(r, dtype="fp8", batch=int(groups), m=mper,
                              note="grouped contiguous GEMM: %s groups of M=%s" % (groups, mper))
        t += gemm_table("DeepGEMM H800 fp8", dg, dg_prov, role="check")
        t += gemm_table("DeepGEMM H800 fp8 grouped", gg, dg_prov, role="check",
                        point_fn=grouped_point)
    elif gpu == "H200-SXM-141GB":
        mamf8 = rows(lambda r: r["gpu"] == "H200" and r["variant"] == "SXM" and r["dtype"] == "fp8_e4m3")
        t += gemm_table("ml-engineering MAMF H200 SXM fp8", mamf8, (
            mamf8[0]["source"], "repo snapshot 744d01e (2026)", mamf8[0]["software"],
            "best shape of a brute-force mamf-finder.py scan; mean of 100 iterations after 50 "
            "warm-up; torch._scaled_mm", "a ceiling: the best of many shapes"),
            role="check")
        az = rows(lambda r: r["gpu"] == "H200" and r["dtype"] == "fp8")
        t += gemm_table("Azure cuBLASLt H200 SXM fp8", az, (
            az[0]["source"], "2024-09 (commit 8fd0c6e)", az[0]["software"],
            "cuBLASLt FP8, random initialisation, 10000 warm-up iterations; ND H200 v5 VM",
            "Azure published FP8 only for Hopper"))
    return t


# ---------------------------------------------------------------------------------------------
# Attention (attention.csv)

FA_SETUP = ("FlashAttention benchmark setup: batch x seqlen = 16k tokens, hidden 2048, heads = "
            "2048/head_dim; TFLOP/s with the FlashAttention convention (fwd 4.seq^2.d.heads per "
            "sequence, halved when causal; bwd 2.5x; fwd+bwd 3.5x)")


def attn_point(r):
    d = {"fwd": "fwd", "bwd": "bwd", "fwd+bwd": "fwd+bwd"}[r["direction"]]
    s = "  point { direction: %s causal: %s head_dim: %s seq: %s batch: %s heads: %s tflops: %s" % (
        q(d), "true" if r["causal"] == "True" else "false", r["head_dim"], r["seqlen"],
        r["batch"], r["n_heads"], fmt(float(r["tflops"])))
    if r.get("n_kv_heads") and r["n_kv_heads"] != r["n_heads"]:
        s += " kv_heads: " + r["n_kv_heads"]
    if r.get("head_dim_v"):
        s += " head_dim_v: " + r["head_dim_v"]
    if "approx" in r["notes"]:
        s += " note: " + q("read from a partly occluded bar label (approx)")
    return s + " }"


def attn_table(name, kernel, rows, prov, role=None, point_fn=attn_point, dtype=None, window=None):
    fields = [("name", q(name)), ("kernel", q(kernel))]
    fields += [("role", q(role))] if role else []
    fields += [("dtype", q(dtype))] if dtype else []
    fields += [("window", str(window))] if window else []
    return table("attention", fields, rows, prov, point_fn)


def older_kernel_tables(att, gpu, kernels):
    """Forward+backward tables of the kernels that preceded FlashAttention-2, from the same
    benchmark figure as the FlashAttention-2 bars (one setup, one machine): FlashAttention v1
    (Dao et al. 2022) and the Triton FlashAttention, Triton's own triton.ops.flash_attention, which
    the figure's benchmark script imports."""
    t = []
    for csv_name, kernel, short in kernels:
        fb = [r for r in att if r["gpu"] == gpu and r["kernel"] == csv_name
              and r["direction"] == "fwd+bwd" and r["tflops"]]
        if not fb:
            continue
        figure = "a100" if gpu.startswith("A100") else "h100"
        t += attn_table("%s %s fwd+bwd" % (short, figure.upper()), kernel, fb, (
            fb[0]["source"], "2023-07 (repo snapshot 0251105)",
            "%s as benchmarked beside FlashAttention-2; versions not stated in the figure" % kernel,
            "bar labels transcribed from the benchmark figure; " + FA_SETUP,
            "selected with --attention-kernel %s; the forward share of a shape's time comes from "
            "the direction split of this file's attention model" % kernel))
    return t


def derived_triton_table(att):
    """The Triton FlashAttention of the FlashAttention-2 benchmarks is Triton's own fused-attention
    kernel (triton.ops.flash_attention, imported by flash-attention's
    benchmarks/benchmark_flash_attention.py), benchmarked on A100 only. It is not llm-foundry's
    flash_attn_triton.py (MPT's kernel, the flash-attention repository's Triton port of 2022,
    which the validation reads as FlashAttention-1). Taken, like FlashAttention-1 and -2 of that
    time, to run Ampere-style mma.sync code on Hopper, its speed relative to FlashAttention-2 is
    carried over from A100 to H100: H100 Triton = H100 FlashAttention-2 x (A100 Triton / A100
    FlashAttention-2), shape by shape, all three bars from the same benchmark setup. The same
    transfer applied to FlashAttention-1 predicts its measured H100 bars within 5.1 % (median over
    23 shapes, mean +0.9 %)."""
    def bars(gpu, kernel, src):
        return {(r["causal"], r["head_dim"], r["seqlen"]): r for r in att
                if r["gpu"] == gpu and r["kernel"] == kernel and r["direction"] == "fwd+bwd"
                and src in r["source"] and r["tflops"]}
    a_tri = bars("A100-SXM4-80GB", "FlashAttention Triton", "flash2_a100")
    a_fa2 = bars("A100-SXM4-80GB", "FlashAttention-2", "flash2_a100")
    h_fa2 = bars("H100-SXM5-80GB", "FlashAttention-2", "flash2_h100")
    points = []
    for key in sorted(a_tri, key=lambda k: (k[0], int(k[1]), int(k[2]))):
        if key not in a_fa2 or key not in h_fa2:
            continue
        r = dict(h_fa2[key])
        r["tflops"] = str(float(h_fa2[key]["tflops"]) * float(a_tri[key]["tflops"])
                          / float(a_fa2[key]["tflops"]))
        r["notes"] = ""
        points.append(r)
    return attn_table("FA Triton H100 fwd+bwd (derived from A100)", "FlashAttention-Triton",
                      points, (
        "derived: %s (H100 FlashAttention-2) x the Triton/FlashAttention-2 ratio of %s (A100)" % (
            list(h_fa2.values())[0]["source"], list(a_tri.values())[0]["source"]),
        "2023-07 (repo snapshot 0251105)",
        "triton.ops.flash_attention (Triton's fused-attention kernel, as imported by "
        "flash-attention benchmarks/benchmark_flash_attention.py); Triton version not stated",
        "no H100 measurement of this kernel is published; the A100 ratio to FlashAttention-2 at "
        "the same shape carries over because both kernels run Ampere mma.sync code on Hopper. "
        "Check: the same transfer predicts the measured H100 FlashAttention-1 bars within 5.1 % "
        "(median of 23 shapes)",
        "selected with --attention-kernel FlashAttention-Triton; the forward share of a shape's "
        "time comes from this file's FlashAttention-2 fit (attention_model.direction_split)"))


# cuDNN's fused attention as NVIDIA's cudnn-frontend SDPA training benchmark measured it on the
# Grace-Blackwell GPUs (calibration/sources/attention.csv). Transformer Engine's fused attention,
# the backend of Megatron-Core and NeMo, runs these cuDNN kernels.
CUDNN_SDPA = "cuDNN SDPA"
CUDNN_SDPA_GPUS = ("GB200-NVL-186GB", "GB300-NVL-279GB")
# The HGX parts of the same dies take the Grace-Blackwell part's tables.
CUDNN_SDPA_TWIN = {"B200-SXM-180GB": "GB200-NVL-186GB", "B300-SXM-288GB": "GB300-NVL-279GB"}


def sdpa_provenance(rs, files, config, flops_note, rows_note):
    """Provenance of a cuDNN SDPA benchmark table (NVIDIA cudnn-frontend's
    benchmark/sdpa_benchmark_training results): files, date, software, method, rows."""
    notes = rs[0]["notes"].split("; ")
    return (files, "2026-04-24 (results file time stamps)", notes[1] + " (" + notes[0] + ")",
            "NVIDIA's SDPA training benchmark (benchmark/sdpa_benchmark_training, "
            "benchmark_single_sdpa.py" + config + "): mean of " + notes[2] + flops_note,
            rows_note)


def attention_tables(att, gpu):
    def rows(g, kernel, direction, dtype_prefix, src_contains, shape="full"):
        # shape: "full" (equal query/value head dims, no window), "mla" (narrower values) or
        # "window" (causal sliding window).
        def kind(r):
            return "window" if r.get("window") else "mla" if r.get("head_dim_v") else "full"
        return [r for r in att if r["gpu"] == g and r["kernel"] == kernel
                and r["direction"] == direction and r["dtype"].startswith(dtype_prefix)
                and src_contains in r["source"] and r["tflops"] and kind(r) == shape]
    t = []
    if gpu == "A100-SXM4-80GB":
        fb = rows(gpu, "FlashAttention-2", "fwd+bwd", "fp16/bf16", "flash2_a100")
        t += attn_table("FA2 paper A100 fwd+bwd", "FlashAttention-2", fb, (
            fb[0]["source"], "2023-07 (arXiv:2307.08691)",
            "FlashAttention-2 as benchmarked for the paper; PyTorch/CUDA versions not stated in "
            "the figure", "bar labels transcribed from the benchmark figure; " + FA_SETUP,
            "one bar hidden by the legend is left out; labels marked approx were partly occluded"))
        t += older_kernel_tables(att, gpu, [("FlashAttention (v1)", "FlashAttention-1", "FA1"),
                                            ("FlashAttention Triton", "FlashAttention-Triton",
                                             "FA Triton")])
    elif gpu == "H100-SXM5-80GB":
        fb = rows(gpu, "FlashAttention-2", "fwd+bwd", "fp16/bf16", "flash2_h100")
        t += attn_table("FA2 repo H100 fwd+bwd", "FlashAttention-2", fb, (
            fb[0]["source"], "2023 (repo snapshot 0251105)",
            "FlashAttention-2 (early Hopper run of the Ampere-style kernel); versions not stated",
            "bar labels transcribed from the benchmark figure; " + FA_SETUP))
        f2 = rows(gpu, "FlashAttention-2", "fwd", "bf16/fp16", "flash3_fp16_fwd")
        t += attn_table("FA3 paper H100 FA2 fwd", "FlashAttention-2", f2, (
            f2[0]["source"], "2024-07 (arXiv:2407.08608)",
            "FlashAttention-2 as of the FlashAttention-3 paper (2024-07)",
            "bar labels transcribed from the paper figure; " + FA_SETUP))
        b2 = rows(gpu, "FlashAttention-2", "bwd", "bf16/fp16", "Fig.6")
        t += attn_table("FA3 paper H100 FA2 bwd", "FlashAttention-2", b2, (
            "FA3 paper arXiv:2407.08608 Fig.6 (backward, no causal mask), bar labels transcribed "
            "by subtext.edge.nugit.net image extraction (images 40bf2854, f60142e2)",
            "2024-07 (arXiv:2407.08608)", "FlashAttention-2 as of the FlashAttention-3 paper",
            "third-party transcription of the figure bar labels, not verified against the PDF; "
            + FA_SETUP, "two independent transcriptions agree for head_dim 128"))
        f3 = rows(gpu, "FlashAttention-3", "fwd", "bf16/fp16", "flash3_fp16_fwd")
        t += attn_table("FA3 paper H100 FA3 fwd", "FlashAttention-3", f3, (
            f3[0]["source"], "2024-07 (arXiv:2407.08608)", "FlashAttention-3 beta (2024-07)",
            "bar labels transcribed from the paper figure; " + FA_SETUP,
            "head_dim 256 at 1k is hidden by the legend and left out"))
        b3 = rows(gpu, "FlashAttention-3", "bwd", "bf16/fp16", "Fig.6")
        t += attn_table("FA3 paper H100 FA3 bwd", "FlashAttention-3", b3, (
            "FA3 paper arXiv:2407.08608 Fig.6 (backward, no causal mask), bar labels transcribed "
            "by subtext.edge.nugit.net image extraction (images 40bf2854, f60142e2)",
            "2024-07 (arXiv:2407.08608)", "FlashAttention-3 beta (2024-07)",
            "third-party transcription of the figure bar labels, not verified against the PDF; "
            + FA_SETUP, "two independent transcriptions agree for head_dim 128"))
        t += older_kernel_tables(att, gpu, [("FlashAttention (v1)", "FlashAttention-1", "FA1")])
        t += derived_triton_table(att)
        tb = [r for r in att if r["kernel"] == "FlashAttention-3 (flash_v3)" and r["tflops"]]
        def tb_point(r):
            r = dict(r)
            r["causal"] = "False"
            return attn_point(r)
        t += attn_table("tritonbench H100 FA3 fwd", "FlashAttention-3", tb, (
            tb[0]["source"], "2024 (pytorch/benchmark PR #2391)", "tritonbench flash_v3",
            "printed in the commit message test plan; B*S=16k, H*D=2048 as in the FA3 paper; "
            "causal off (tritonbench default)",
            "check only: independent re-run of FA3 on Meta CI H100 (SXM presumably)"),
            role="check", point_fn=tb_point)
    elif gpu in CUDNN_SDPA_GPUS:
        # Per shape (equal head dims; multi-head latent attention, DeepSeek-V3 and Kimi K2.6 with
        # query/key head dim 192 and value 128, priced with the features' head_dim_v; GPT-OSS's
        # sliding window, fitted apart per window): the name's tag, the benchmark's FLOP count,
        # and what the rows are.
        shapes = (
            ("full", "", "; TFLOP/s with the FlashAttention convention (causal halved, backward 2.5x "
             "forward), checked against the published times",
             "rows with equal query/value head dims and no sliding window; non-deterministic "
             "backward (Transformer Engine's default)",
             "; FP8 (E4M3) Q, K, V with per-tensor scales, the benchmark's fp8 data type"),
            ("mla", "MLA ", "; the benchmark's TFLOP/s (forward 2.s^2.(dqk+dv).h.b, backward "
             "2.s^2.(3dqk+2dv).h.b, halved when causal), checked against the published times",
             "multi-head latent attention shapes (dsv3: 128 heads, kimiK26: 64 heads; query/key "
             "head dim 192, value head dim 128); non-deterministic backward",
             "; FP8 (E4M3) Q, K, V with per-tensor scales"))
        for shape, tag, flops_note, rows_note, fp8_note in shapes:
            for dtype, direction in (("bf16", "fwd"), ("bf16", "bwd"), ("fp8", "fwd"), ("fp8", "bwd")):
                rs = rows(gpu, CUDNN_SDPA, direction, dtype, "cudnn-frontend", shape)
                name = "cudnn-frontend %s %s%s%s" % (gpu, tag, direction,
                                                     "" if dtype == "bf16" else " fp8")
                t += attn_table(name, CUDNN_SDPA, rs, sdpa_provenance(
                    rs, "; ".join(sorted({r["source"] for r in rs})), "", flops_note,
                    rows_note + (fp8_note if dtype == "fp8" else "")),
                    dtype=None if dtype == "bf16" else dtype)
        for direction in ("fwd", "bwd"):
            rs = rows(gpu, CUDNN_SDPA, direction, "bf16", "cudnn-frontend", "window")
            window = int(rs[0]["window"])
            assert all(int(r["window"]) == window for r in rs)
            t += attn_table("cudnn-frontend %s window %d %s" % (gpu, window, direction), CUDNN_SDPA,
                            rs, sdpa_provenance(
                rs, rs[0]["source"], ", gpt_oss config",
                "; the benchmark's TFLOP/s over min(position + 1, window) keys per query (forward "
                "4.pairs.d.h.b, backward 2.5x), checked against the published times",
                "GPT-OSS banded attention: causal sliding window of %d keys, head dim 64, 128 "
                "query and key/value heads (the benchmark's GPT-OSS preset; the model has 64 and 8); "
                "no attention sinks (the benchmark runs none; GPT-OSS's learned sinks are not in "
                "these times); non-deterministic backward" % window), window=window)
    return t


# ---------------------------------------------------------------------------------------------
# Memory (memory_bw.csv)

def pattern(kernel, bpe):
    k = kernel.lower()
    b = bpe.lower()
    if "store" in b and "load" in b:
        return "load_store"
    if b.startswith("1 store") or k.startswith("init"):
        return "store"
    if "load" in b or k.startswith("read"):
        return "load"
    return "load_store"


def mem_point(r, note=None):
    s = "  point { kernel: %s pattern: %s achieved_gbps: %s" % (
        q(r["kernel"].strip()), q(pattern(r["kernel"], r["bytes_per_elem_pattern"])),
        fmt(float(r["achieved_GBps"])))
    if note:
        s += " note: " + q(note)
    return s + " }"


def mem_table(name, rows, prov, role=None, point_fn=mem_point):
    fields = [("name", q(name))] + ([("role", q(role))] if role else [])
    return table("memory", fields, rows, prov, point_fn)


NORM_PROVENANCE = (
    "Liger-Kernel benchmark data, provider 'huggingface' = torch.nn.LayerNorm "
    "(benchmark/scripts/benchmark_layer_norm.py), fp32, M = 4096 rows")
NORM_METHOD = (
    "triton.testing.do_bench median time of the forward and of forward+backward; GB/s over the "
    "op's streaming traffic: 2 passes of the M x N activation forward (x in, y out), 5 forward+"
    "backward (and dy, x in, dx out), weight and bias traffic left out")


def norm_point(r, scale=1.0):
    return "  point { kernel: %s pattern: %s achieved_gbps: %s }" % (
        q("%s N=%s" % (r["kernel"], r["N"])), q(r["pattern"]), fmt(float(r["achieved_GBps"]) * scale))


def native_norm_tables(norms, gpu):
    """PyTorch's native LayerNorm (eager PyTorch code), measured on the A100-SXM4-80GB (the
    Hoppers' come from their own measured tables)."""
    def sized(g, variant):
        return [r for r in norms if r["gpu"] == g and r["variant"] == variant and int(r["N"]) >= 4096]
    if gpu == "A100-SXM4-80GB":
        rows = sized("A100", "SXM4-80GB")
        return mem_table("PyTorch native LayerNorm A100 80GB", rows, (
            rows[0]["source"], "2024-09-03", rows[0]["software"], NORM_METHOD, NORM_PROVENANCE),
            point_fn=norm_point)
    return []


# cuDNN's RMSNorm (cudnn-frontend benchmark/norms), the fused norm kernel Transformer Engine runs,
# measured on these GPUs; the HGX parts of the Blackwell dies take the Grace-Blackwell part's.
FUSED_NORM_GPUS = {"GB200-NVL-186GB": ("GB200", "NVL-186GB"), "GB300-NVL-279GB": ("GB300", "NVL-279GB"),
                   "H200-SXM-141GB": ("H200", "SXM-141GB")}


def fused_norm_table_name(gpu):
    return "cudnn-frontend RMSNorm " + gpu


def fused_norm_tables(norms, gpu):
    if gpu not in FUSED_NORM_GPUS:
        return []
    g, variant = FUSED_NORM_GPUS[gpu]
    rows = [r for r in norms if r["gpu"] == g and r["variant"] == variant
            and r["pattern"].startswith("fused_norm")]
    def point(r):
        return "  point { kernel: %s pattern: %s achieved_gbps: %s }" % (
            q("%s %sx%s" % (r["kernel"], r["M"], r["N"])), q(r["pattern"]),
            fmt(float(r["achieved_GBps"])))
    notes = ("bf16, tokens x hidden as in the name; GB/s over the benchmark's byte count "
             "(forward: x in, y out, 2 passes; backward: dy, x in, dx out, 3 passes; the weight "
             "and fp32 per-row statistics add under 0.1 %); the fused norm kernel of Transformer "
             "Engine's cuDNN path, priced for the non-eager RMSNorm/LayerNorm ops")
    if g == "H200":
        notes += ("; the source names the GPU 'NVIDIA H200' without the form factor: taken as "
                  "the SXM (the NVL has the same 4.8 TB/s HBM3e)")
    return mem_table(fused_norm_table_name(gpu), rows, (
        rows[0]["source"], rows[0]["source"].split(", ")[-1].rstrip(")"), rows[0]["software"],
        "NVIDIA's norm benchmark (benchmark/norms/benchmark_single_norm.py, all_models config): "
        "forward and backward each timed alone", notes), point_fn=point)


def memory_tables(mem, norms, gpu):
    t = []
    def rows(pred):
        return [r for r in mem if pred(r)]
    if gpu == "A100-SXM4-80GB":
        cs = rows(lambda r: r["gpu"] == "A100" and "cuda-stream" in r["source"])
        def cs_point(r):
            return mem_point(r, "stencil: reads neighbours, counted as load_store"
                             if "stencil" in r["kernel"] else None)
        t += mem_table("gpu-benches cuda-stream A100 80GB", cs, (
            "te42kyfo/gpu-benches cuda-stream/a100_80.txt (commit cdcc732)",
            "not stated by the source (commit cdcc732)", "CUDA, version not stated",
            "row at 100% occupancy (blockSize 1024) of the occupancy sweep; data set >> L2",
            "SXM vs PCIe not stated in the file (taken as SXM, 2039 GB/s spec)"), point_fn=cs_point)
        l2 = rows(lambda r: r["gpu"] == "A100" and "gpu-l2-cache" in r["source"] and "DRAM" in r["kernel"])
        t += mem_table("gpu-benches gpu-l2-cache A100 80GB DRAM plateau", l2, (
            "te42kyfo/gpu-benches gpu-l2-cache/a100_80.txt (commit 3088b33)",
            "not stated by the source (commit 3088b33)", "CUDA, version not stated",
            "read bandwidth plateau for 1-4.9 GB data sets"))
    if gpu == "H200-SXM-141GB":
        l2 = rows(lambda r: r["gpu"] == "H200" and "gpu-l2-cache" in r["source"] and "DRAM" in r["kernel"])
        t += mem_table("gpu-benches gpu-l2-cache H200 DRAM plateau", l2, (
            "te42kyfo/gpu-benches gpu-l2-cache/h200.txt (commit 3088b33)",
            "not stated by the source (commit 3088b33)", "CUDA, version not stated",
            "read bandwidth plateau for data sets >> L2"))
    short = {"A100-SXM4-80GB": ("A100", "ND_A100_v4"), "H100-SXM5-80GB": ("H100", "ND_H100_v5"),
             "H200-SXM-141GB": ("H200", "ND_H200_v5")}
    if gpu in short:
        g, vm = short[gpu]
        bs = rows(lambda r: r["gpu"] == g and r["kernel"].startswith("BabelStream"))
        t += mem_table("Azure BabelStream " + g, bs, (
            "Azure/AI-benchmarking-guide Azure_Results/%s_results.md (BabelStream via "
            "Benchmarks/HBMBandwidth.py)" % vm, "2024-09 (commit 8fd0c6e)",
            "BabelStream (CUDA), versions as in the Azure results file",
            "BabelStream best bandwidth, reported in TB/s with 2 decimals"))
    t += native_norm_tables(norms, gpu)
    t += fused_norm_tables(norms, gpu)
    if gpu == "H100-SXM5-80GB":
        sm = rows(lambda r: r["gpu"] == "H100" and r["kernel"].startswith("softmax"))
        t += mem_table("QuACK softmax H100", sm, (
            sm[0]["source"], "2025", "CuTe-DSL (QuACK) and torch.compile (Triton)",
            "DRAM throughput of a softmax kernel as quoted by a secondary summary of the blog",
            "check only: one fused kernel's implementation quality (90% vs 60% of spec), not "
            "fitted"), role="check")
    return t


# ---------------------------------------------------------------------------------------------

H100_TO_H200 = (
    "H200 SXM is the GH100 die of the H100 SXM with the same 132 SMs, clocks and tensor peaks "
    "(989 bf16 / 1979 fp8 TFLOP/s) and faster HBM3e (4.8 vs 3.35 TB/s)")


def attention_model(gpu):
    out = ["attention_model {", "  block: 128"]
    if gpu == "A100-SXM4-80GB":
        out.append('  kernel: "FlashAttention-2"')
        out.append("  direction_split {")
        out.append('    gpu: "H100-SXM5-80GB"')
        out.append('    kernel: "FlashAttention-2"')
        out.append("    reason: " + q(
            "FlashAttention-2 on A100 is published only as forward+backward; the same "
            "FlashAttention-2 CUDA kernels (Ampere mma.sync code) run on H100, where forward and "
            "backward were measured separately, so the forward share of a shape's time is taken "
            "from the H100 FlashAttention-2 fits"))
        out.append("  }")
    elif gpu == "H100-SXM5-80GB":
        out.append('  kernel: "FlashAttention-3"')
        out.append("  direction_split {")
        out.append('    gpu: "H100-SXM5-80GB"')
        out.append('    kernel: "FlashAttention-2"')
        out.append("    reason: " + q(
            "FlashAttention-1 and the Triton FlashAttention are published only as "
            "forward+backward; like FlashAttention-2 (measured per direction here) they run "
            "Ampere-style mma.sync code on Hopper, so their forward share of a shape's time is "
            "taken from the FlashAttention-2 fits"))
        out.append("  }")
    elif gpu in CUDNN_SDPA_GPUS:
        out.append("  kernel: " + q(CUDNN_SDPA))
    else:
        out.append('  kernel: "FlashAttention-2"')
    out += provenance(
        2, "FlashAttention-2 paper (arXiv:2307.08691) section 3.3: block sizes chosen among "
        "{64,128} x {64,128} by head dimension; FlashAttention-3 (arXiv:2407.08608) tiles "
        "queries in blocks of 128 rows", "2023-07 / 2024-07", "FlashAttention-2 and -3",
        "kernel design as described in the papers; 128 is the representative block size",
        "kernel: FlashAttention-3 where measured (Hopper), cuDNN's fused attention where "
        "measured (Grace-Blackwell), else FlashAttention-2")
    out.append("}")
    return out


def memory_overheads():
    """Device memory beyond the framework's allocations. Published for A100 and H100 training
    with PyTorch; the same values serve every GPU kind here."""
    out = ["memory_overheads {",
           "  cuda_context_gb: 0.5",
           "  nccl_buffers_gb_per_communicator: 0.5",
           "  allocator_fragmentation: 0.15"]
    out += provenance(
        2,
        "Fujii, Watanabe, Yokota, arXiv 2411.06465 (CUDA context 300-500 MB; NCCL buffers about "
        "0.5 GB per communicator), as summarised in ../shared/validation/README.md; Guo et al., "
        "'GMLake', ASPLOS 2024, arXiv 2401.08156 (abstract: virtual-memory stitching removes 15% "
        "fragmentation on average, up to 33%, over eight LLMs on A100-80GB)",
        "2024",
        "PyTorch caching allocator without expandable segments; NCCL 2.x",
        "published figures: the upper end of the CUDA context range; the per-communicator NCCL "
        "figure; the average fragmentation share GMLake removes, taken as the caching allocator's "
        "fragmentation",
        "Fragmentation is applied to the dynamic memory only (activations, transients): weights, "
        "gradients and optimizer states are allocated once, in flat buffers (Megatron DDP, "
        "distributed optimizer, FSDP flat parameters), and do not fragment.")
    out.append("}")
    return out


def imports(gpu):
    out = []
    def imp(src, family, relationship, dtypes=(), kernel=None, derived=False):
        out.append("imports {")
        out.append("  gpu: " + q(src))
        out.append("  family: " + q(family))
        for d in dtypes:
            out.append("  dtypes: " + q(d))
        if kernel:
            out.append("  kernel: " + q(kernel))
        out.append("  relationship: " + q(relationship))
        if derived:
            out.append("  derived: true")
        out.append("}")
    def memory_variant(src, same, name, ratio):
        # A part with another HBM on the same die: everything from `src`, memory GB/s scaled.
        imp(src, "gemm", same + "; compute-bound GEMM efficiency transfers unchanged (peak ratio "
            "1). No " + name + " GEMM measurement is in the sources.")
        imp(src, "attention", same + "; FlashAttention is compute-bound, so its TFLOP/s transfer "
            "unchanged. No " + name + " attention measurement is in the sources.")
        imp(src, "memory", same + ". Assumption: the memory system reaches the same fraction of "
            "its spec bandwidth, so GB/s scale by " + ratio + ". No " + name + " stream "
            "measurement is in the sources.")
    if gpu == "A100-SXM4-40GB":
        memory_variant("A100-SXM4-80GB", "A100-SXM4-40GB and -80GB are the same GA100 die (108 SMs, "
                       "1410 MHz boost) with identical tensor peaks; only the HBM differs (HBM2 "
                       "1555 GB/s vs HBM2e 2039 GB/s)", "A100-40GB", "1555/2039")
    if gpu == "H100-SXM5-96GB":
        same = ("H100-SXM5-96GB (HBM2e) and -80GB (HBM3) are the same GH100 die (132 SMs, 1830 MHz "
                "tensor clock) with identical tensor peaks; only the HBM differs (2410 GB/s vs "
                "3350 GB/s)")
        memory_variant("H100-SXM5-80GB", same, "H100-SXM5-96GB", "2410/3350")
        imp("H200-SXM-141GB", "gemm", same + "; like the 80GB part, it pools the H200's "
            "GEMM points (the same tensor cores, peak ratio 1), so the two H100 parts fit the same "
            "GEMM model.")
    if gpu in ("A100-SXM4-40GB", "A100-SXM4-80GB"):
        imp("H100-SXM5-80GB", "gemm", "No FP32 (SIMT) GEMM measurement of an A100 is in the "
            "published sources. Assumption: cuBLAS SGEMM reaches the same fraction of the SIMT "
            "FP32 peak on A100 as on H100 (both tile-based SIMT kernels); TFLOP/s scale by the "
            "fp32 peak ratio 19.5/67.", dtypes=["fp32"])
    if gpu == "H100-SXM5-80GB":
        imp("H200-SXM-141GB", "gemm", H100_TO_H200 + ". The GEMM points of both GPUs measure the "
            "same tensor cores (the HBM floor of the model uses each GPU's own bandwidth), so the "
            "two GPUs pool their GEMM points (peak ratio 1) and fit the same GEMM model: the "
            "Azure FP8 sweeps of the two agree within 6% from 1024^3 to 32768^3, and the tables "
            "measured on each with tools/calibrate differ by a median of 1% over 1,200 shapes (80% "
            "of them within 5%).")
    if gpu == "H200-SXM-141GB":
        imp("H100-SXM5-80GB", "gemm", H100_TO_H200 + ". The GEMM points of both GPUs measure the "
            "same tensor cores (the HBM floor of the model uses each GPU's own bandwidth), so the "
            "two GPUs pool their GEMM points (peak ratio 1) and fit the same GEMM model: the "
            "Azure FP8 sweeps of the two agree within 6% from 1024^3 to 32768^3, and the tables "
            "measured on each with tools/calibrate differ by a median of 1% over 1,200 shapes (80% "
            "of them within 5%).")
        imp("H100-SXM5-80GB", "attention", H100_TO_H200 + ". FlashAttention is compute-bound "
            "(HBM traffic grows with seq, FLOPs with seq^2), so its TFLOP/s transfer unchanged; "
            "Azure's single FlashAttention-2 points agree (H100 327.9, H200 329.3 TFLOP/s).")
    if gpu in BLACKWELL:
        blackwell_imports(gpu, out, imp)
    return out


# Blackwell GPUs have no kernel measurement in the sources: their GEMM, attention and memory
# points are derived from the nearest measured GPU (the H100 SXM and the H200 that pools its
# GEMM points), moved to the Blackwell peaks and, for GEMMs, to the published large-GEMM ceiling
# (MAMF, hardware.csv rows mamf_*): derived, not measured, and marked so by the loader.
H100_MAMF = {"bf16": (794.5, 989.0), "fp8": (1402.6, 1979.0)}
H100_MAMF_SOURCE = ("stas00/ml-engineering compute/accelerator/README.md (mamf-finder): H100 SXM "
                    "BF16 794.5 of 989, FP8 1402.6 of 1979 TFLOP/s (topologies/dgx-h100.textproto)")
# name: (hardware.csv gpu, variant, ceilings from (gpu, variant) with a note when borrowed)
BLACKWELL = {
    "B200-SXM-180GB": ("B200", "SXM-180GB", {}),
    "GB200-NVL-186GB": ("GB200", "NVL-186GB", {}),
    "B300-SXM-288GB": ("B300", "SXM-288GB", {"fp8": ("B200", "SXM-180GB",
        "no FP8 MAMF of a B300 is published: the B200's fraction of its FP8 peak is assumed "
        "(the same Blackwell tensor-core generation)")}),
    "GB300-NVL-279GB": ("GB300", "NVL-279GB", {
        "bf16": ("B300", "SXM-288GB", "no MAMF of a GB300 is published: the B300's fraction of "
                 "its BF16 peak is assumed (the same Blackwell Ultra silicon)"),
        "fp8": ("B200", "SXM-180GB", "no FP8 MAMF of a GB300 or B300 is published: the B200's "
                "fraction of its FP8 peak is assumed (the same tensor-core generation)")}),
}
HW_ROWS = []  # hardware.csv rows, set by main()


def blackwell_imports(gpu, out, imp):
    g, variant, borrowed = BLACKWELL[gpu]
    def fraction(dtype):
        src_g, src_v, note = borrowed.get(dtype, (g, variant, ""))
        mamf = hw_value(HW_ROWS, src_g, src_v, "mamf_" + dtype)
        peak = hw_value(HW_ROWS, src_g, src_v, dtype + "_tensor_peak")
        frac = float(mamf["value"]) / float(peak["value"])
        src = "%s %s MAMF %s of %s TFLOP/s (%s)" % (src_g, dtype.upper(), mamf["value"], peak["value"],
                                                  mamf["source"] if not mamf["source"].startswith("same")
                                                  else "stas00/ml-engineering compute/accelerator/README.md")
        if note:
            src += "; " + note
        return frac, src
    def gemm_import(src_gpu, relationship):
        out.append("imports {")
        out.append("  gpu: " + q(src_gpu))
        out.append('  family: "gemm"')
        out.append("  relationship: " + q(relationship))
        for dtype, mamf_dtype in (("bf16", "bf16"), ("fp16", "bf16"), ("fp8", "fp8")):
            frac, src = fraction(mamf_dtype)
            h_mamf, h_peak = H100_MAMF[mamf_dtype]
            out.append("  ceilings {")
            out.append("    dtype: " + q(dtype))
            out.append("    target_fraction: " + fmt(round(frac, 4)))
            out.append("    source_fraction: " + fmt(round(h_mamf / h_peak, 4)))
            out.append("    source: " + q(src + "; " + H100_MAMF_SOURCE +
                                        ("; fp16 runs on the bf16 tensor-core path at the same peak"
                                         if dtype == "fp16" else "")))
            out.append("  }")
        out.append("  derived: true")
        out.append("}")
    same_kernels = (gpu + " has no kernel measurement in the sources. Its cuBLAS GEMMs are taken "
                    "as the H100 SXM's efficiency curve (tile and wave quantization by shape) "
                    "moved to its own peaks and to its own published large-GEMM ceiling")
    gemm_import("H100-SXM5-80GB", same_kernels + ".")
    gemm_import("H200-SXM-141GB", same_kernels + ", pooling the H200's points as the H100 does "
                "(the same GH100 tensor cores, whose ceiling is the H100's).")
    block_scaled_gemm(gpu, out)
    measured_on = CUDNN_SDPA_TWIN.get(gpu)
    if measured_on:
        imp(measured_on, "attention", gpu + " has no attention measurement in the sources; " +
            measured_on + " (the same Blackwell die in a Grace-Blackwell board at a higher power "
            "limit) has cuDNN's. Assumption: cuDNN's fused attention reaches the same fraction of "
            "the bf16 peak on both, so TFLOP/s scale by the bf16 peak ratio.", kernel=CUDNN_SDPA,
            derived=True)
        out.append("imports {")
        out.append("  gpu: " + q(measured_on))
        out.append('  family: "memory"')
        out.append("  relationship: " + q(
            gpu + " has no norm kernel measurement in the sources; " + measured_on + " (the same "
            "Blackwell die and 8 TB/s HBM3e) has cuDNN's RMSNorm. Assumption: the kernel reaches "
            "the same fraction of the spec bandwidth on both (bandwidth ratio 1; another board and "
            "power limit, so derived)."))
        out.append("  tables: " + q(fused_norm_table_name(measured_on)))
        out.append("  derived: true")
        out.append("}")
    imp("H100-SXM5-80GB", "attention", gpu + " has no FlashAttention measurement in the sources. "
        "Assumption: its FlashAttention kernels (FlashAttention-4 for sm100) reach the same "
        "fraction of the bf16 peak, shape by shape, as FlashAttention-2/3 on the H100 SXM, so "
        "TFLOP/s scale by the bf16 peak ratio (used when a run names a FlashAttention kernel)."
        if gpu in CUDNN_SDPA_GPUS or measured_on else
        gpu + " has no attention measurement in the sources. "
        "Assumption: its FlashAttention kernels (FlashAttention-4 / cuDNN for sm100) reach the "
        "same fraction of the bf16 peak, shape by shape, as FlashAttention-3 on the H100 SXM, so "
        "TFLOP/s scale by the bf16 peak ratio.", derived=True)
    imp("H100-SXM5-80GB", "memory", gpu + " has no stream or elementwise kernel measurement in "
        "the sources" + (" (its fused norms are measured: cuDNN's RMSNorm)" if gpu in FUSED_NORM_GPUS
                         else " (its fused norms are the %s's measured cuDNN RMSNorm)" % measured_on
                         if measured_on else "") + ". Assumption: its HBM3e reaches the same fraction of the spec bandwidth as "
        "the H100 SXM's HBM3, so GB/s scale by the bandwidth ratio (PyTorch's native LayerNorm, "
        "the same ATen kernel on every architecture, with them: the H100's measured share of its "
        "spec bandwidth); the kernel launch overhead is the H100's.", derived=True)


# NVFP4 GEMMs run at the FP8 fit's efficiency at the FP4 peak, times the efficiency ratio of the
# two formats measured in one harness at one shape (hardware.csv rows harness_nvfp4_gemm and
# harness_fp8_gemm of the B200: TFLOP/s over each format's peak). The other Blackwell GPUs take
# the B200's ratio (the same fifth-generation tensor cores; for B300/GB300, whose FP4 peak is
# raised over the B200's, an assumption).
def block_scaled_gemm(gpu, out):
    def val(metric):
        return float(hw_value(HW_ROWS, "B200", "SXM-180GB", metric)["value"])
    nvfp4 = hw_value(HW_ROWS, "B200", "SXM-180GB", "harness_nvfp4_gemm")
    fp8 = hw_value(HW_ROWS, "B200", "SXM-180GB", "harness_fp8_gemm")
    ratio = (val("harness_nvfp4_gemm") / val("fp4_tensor_peak")) / (
        val("harness_fp8_gemm") / val("fp8_tensor_peak"))
    src = ("B200 NVFP4 %s of %s TFLOP/s (%s) over FP8 %s of %s TFLOP/s (%s), M 16384 N 6144 K 4096"
           % (nvfp4["value"], fmt(val("fp4_tensor_peak")), nvfp4["source"], fp8["value"],
              fmt(val("fp8_tensor_peak")), fp8["source"]))
    if gpu != "B200-SXM-180GB":
        src += "; the B200's ratio taken for the " + gpu + (
            " (same tensor cores)" if gpu == "GB200-NVL-186GB" else
            " (its FP4 peak is raised over the B200's: an assumption)")
    out.append("block_scaled_gemm {")
    out.append('  dtype: "nvfp4"')
    out.append("  ratio: " + fmt(round(ratio, 4)))
    out.append("  source: " + q(src))
    out.append("}")


GPUS = [
    # name, aliases, hardware.csv (gpu, variant), compute variant, fp16 from bf16
    ("A100-SXM4-40GB", ["a100-sxm4-40gb", "a100-40gb", "a100-sxm-40gb"], ("A100", "SXM4-40GB"), None, False),
    ("A100-SXM4-80GB", ["a100-sxm4-80gb", "a100-80gb", "a100-sxm", "a100"], ("A100", "SXM4-80GB"), "SXM4-40GB", False),
    ("H100-SXM5-80GB", ["h100-sxm5-80gb", "h100-sxm", "h100"], ("H100", "SXM5-80GB"), None, False),
    ("H200-SXM-141GB", ["h200-sxm-141gb", "h200-sxm", "h200"], ("H200", "SXM-141GB"), None, True),
    ("H100-SXM5-96GB", ["h100-sxm5-96gb", "h100-96gb", "h100-hbm2e"], ("H100", "SXM5-96GB"), "SXM5-80GB", False),
    ("B200-SXM-180GB", ["b200-sxm-180gb", "b200"], ("B200", "SXM-180GB"), None, False),
    ("GB200-NVL-186GB", ["gb200-nvl-186gb", "gb200"], ("GB200", "NVL-186GB"), None, False),
    ("B300-SXM-288GB", ["b300-sxm-288gb", "b300"], ("B300", "SXM-288GB"), None, False),
    ("GB300-NVL-279GB", ["gb300-nvl-279gb", "gb300"], ("GB300", "NVL-279GB"), None, False),
]


MEASURED_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "calibration",
                            "sources", "measured")


def measured_tables(gpu):
    """Tables of `tools/calibrate/run_all.py measure` on this GPU, kept in
    calibration/sources/measured/<gpu>/ (gemm, attention, memory .textproto), by family.

    The memory step's launch_overhead block is left out: it times eager PyTorch launches, which
    the host bounds (6.3 and 8.6 us in two runs on the same VM), not the GPU's gap between
    kernels that the block describes; the fit's fixed term stays in use.

    The attention tables (PyTorch SDPA's vendored FlashAttention-2) are kept but not folded in:
    pooled with the FlashAttention repository's points under one FlashAttention-2 model they fit
    at 6.6 % forward / 11.3 % backward and drag the repository's forward+backward points from
    2.7 % to 13.7 %; they need a kernel name of their own (see docs/compute-model.md, Calibration files)."""
    out = {}
    for family in ("gemm", "memory"):
        path = os.path.join(MEASURED_DIR, gpu, family + ".textproto")
        if not os.path.exists(path):
            continue
        text = open(path).read()
        text = re.sub(r"^launch_overhead \{.*?^\}\n", "", text, flags=re.S | re.M)
        out[family] = text.rstrip().splitlines()
    # bench_moe.py's grouped expert GEMMs (`kernel: "grouped"` tables: the grouped kernel's own
    # fit, used for MoE expert GEMMs) and token permutation and router kernels.
    path = os.path.join(MEASURED_DIR, gpu, "moe.textproto")
    if os.path.exists(path):
        text = open(path).read()
        for family in ("gemm", "memory"):
            blocks = re.findall(r"^%s \{.*?^\}\n" % family, text, flags=re.S | re.M)
            out.setdefault(family, [])
            for b in blocks:
                out[family] += b.rstrip().splitlines()
    return out


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    src, out_dir = sys.argv[1], sys.argv[2]
    hw = read(os.path.join(src, "hardware.csv"))
    extra_hw = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "calibration",
                            "sources", "hardware.csv")
    if os.path.exists(extra_hw):
        hw += read(extra_hw)
    HW_ROWS.extend(hw)
    gemm = read(os.path.join(src, "gemm.csv"))
    extra = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "calibration",
                         "sources", "gemm.csv")
    if os.path.exists(extra):
        gemm += read(extra)
    att = read(os.path.join(src, "attention.csv"))
    extra_att = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "calibration",
                             "sources", "attention.csv")
    if os.path.exists(extra_att):
        att += read(extra_att)
    mem = read(os.path.join(src, "memory_bw.csv"))
    norms = read(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "calibration",
                              "sources", "memory_kernels.csv"))
    for name, aliases, (g, variant), compute_variant, fp16_from_bf16 in GPUS:
        lines = [
            "# Calibration of the %s: datasheet and published kernel measurements." % name,
            "# Generated by tools/calibrate/import_published.py from the calibration-sources CSVs;",
            "# every table cites its source. The compute model is fitted to these points when the",
            "# file is loaded (least squares, sim/compute/fit.cpp). `trainsim kernel --gpu %s" % aliases[0],
            "# --fit-report` prints the fitted parameters and the error of every point.",
            "#",
        ]
        if name in CUDNN_SDPA_GPUS:
            lines += [
                "# MOSTLY DERIVED: of this GPU's kernels only cuDNN's fused attention and RMSNorm are",
                "# measured in the sources (NVIDIA cudnn-frontend's SDPA and norm benchmarks). The GEMM,",
                "# streaming memory and FlashAttention tables are imported from a measured GPU and moved",
                "# to this GPU's published peaks, bandwidth and large-GEMM ceiling (imports marked derived:",
                "# true; `--fit-report` names their tables 'derived from ..., not measured'). Replace them",
                "# with measurements (tools/calibrate/run_all.py on the GPU) when one is available.",
                "#",
            ]
        elif name in BLACKWELL:
            lines += [
                "# DERIVED, NOT MEASURED: no kernel of this GPU is measured in the sources. Every",
                "# kernel table below is imported from a measured GPU and moved to this GPU's",
                "# published peaks, bandwidth and large-GEMM ceiling (imports marked derived: true;",
                "# `--fit-report` names their tables 'derived from ..., not measured'). Replace them",
                "# with measurements (tools/calibrate/run_all.py on the GPU) when one is available.",
                "#",
            ]
        lines += ["# " + l if l else "#" for l in EXCLUDED.rstrip().split("\n")]
        measured = measured_tables(name)
        if measured:
            lines += ["#", "# Also the %s tables measured on this GPU by tools/calibrate/run_all.py, from"
                      % " and ".join(sorted(measured)),
                      "# calibration/sources/measured/%s/ (see measured_tables() in the generator)." % name]
        lines.append("")
        lines.append("gpu: " + q(name))
        for a in aliases:
            lines.append("aliases: " + q(a))
        lines += datasheet(hw, g, variant, compute_variant, fp16_from_bf16)
        # A GPU without tables of its own inherits the model structure with its imports.
        gt = gemm_tables(gemm, name) + measured.get("gemm", [])
        if gt:
            lines += gemm_model() + gt
        at = attention_tables(att, name) + measured.get("attention", [])
        if at:
            lines += attention_model(name) + at
        lines += memory_tables(mem, norms, name) + measured.get("memory", [])
        lines += imports(name)
        lines += memory_overheads()
        path = os.path.join(out_dir, name + ".textproto")
        with open(path, "w") as f:
            f.write("\n".join(lines) + "\n")
        print("wrote", path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
