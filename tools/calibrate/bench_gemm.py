#!/usr/bin/env python3
"""GEMM microbenchmark: achieved TFLOP/s of C[M,N] = A[M,K] B[K,N] on the current GPU.

Shapes: a square sweep 256..16384 (wave and tile quantization, small-size falloff), the exact
forward, data-gradient and weight-gradient GEMMs of the zoo models (gpt3-175b, llama2-7b/13b/70b,
llama3-8b/70b/405b) under TP 1/2/4/8/16 (zoo_shapes.py), and batched GEMMs (torch.bmm).
Dtypes: bf16 and fp16 (torch.matmul, FP32 accumulation), fp8 e4m3 with per-tensor scales
(torch._scaled_mm, bf16 output, as Transformer Engine runs FP8 GEMMs; Hopper and newer only),
fp32 with TF32 disabled (SIMT SGEMM).

Writes `gemm { ... }` tables of the calibration format (one per dtype and set) to --out, or
prints them. Usage: bench_gemm.py [--quick] [--dtypes bf16,fp16,fp8,fp32] [--out FILE]
"""
import argparse
import sys

import torch

import common
import zoo_shapes

SQUARES = [256, 512, 768, 1024, 1536, 2048, 3072, 4096, 6144, 8192, 12288, 16384]
QUICK_SQUARES = [512, 1024, 2048, 4096, 8192]
# Batched products as attention-free models and MoE experts run them: (batch, M, N, K).
BATCHED = [(2, 4096, 4096, 4096), (4, 2048, 4096, 4096), (8, 1024, 4096, 4096), (16, 512, 4096, 4096),
           (4, 8192, 4096, 7168), (8, 4096, 7168, 2048), (32, 512, 1024, 1024), (64, 256, 2048, 2048)]


def fp8_supported():
    major, minor = torch.cuda.get_device_capability(0)
    return (major, minor) >= (8, 9) and hasattr(torch, "float8_e4m3fn") and hasattr(torch, "_scaled_mm")


def make_gemm(dtype, m, n, k, batch=1):
    """A closure that launches the GEMM once, on fresh random-normal operands."""
    dev = torch.device("cuda")
    if dtype == "fp8":
        if batch != 1:
            return None  # torch._scaled_mm has no batched form
        a = torch.randn(m, k, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
        # _scaled_mm wants the second operand column-major: the transpose of a row-major (N, K).
        b = torch.randn(n, k, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn).t()
        one = torch.ones((), device=dev, dtype=torch.float32)

        def run():
            r = torch._scaled_mm(a, b, scale_a=one, scale_b=one, out_dtype=torch.bfloat16)
            return r[0] if isinstance(r, tuple) else r  # torch < 2.4 returns (out, amax)
        return run
    tdt = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}[dtype]
    if batch == 1:
        a = torch.randn(m, k, device=dev, dtype=tdt)
        b = torch.randn(k, n, device=dev, dtype=tdt)
        c = torch.empty(m, n, device=dev, dtype=tdt)
        return lambda: torch.matmul(a, b, out=c)
    a = torch.randn(batch, m, k, device=dev, dtype=tdt)
    b = torch.randn(batch, k, n, device=dev, dtype=tdt)
    c = torch.empty(batch, m, n, device=dev, dtype=tdt)
    return lambda: torch.bmm(a, b, out=c)


def fits_in_memory(dtype, m, n, k, batch=1):
    elem = {"bf16": 2, "fp16": 2, "fp8": 1, "fp32": 4}[dtype]
    need = batch * (m * k * elem + k * n * elem + m * n * max(elem, 2))
    free, _ = torch.cuda.mem_get_info()
    return need < 0.8 * free


def measure(dtype, m, n, k, batch=1):
    """Achieved TFLOP/s, or None when the shape cannot run here."""
    if dtype == "fp8" and (m % 16 or n % 16 or k % 16):
        return None  # FP8 tensor-core GEMMs need dimensions that are multiples of 16
    if not fits_in_memory(dtype, m, n, k, batch):
        return None
    fn = make_gemm(dtype, m, n, k, batch)
    if fn is None:
        return None
    try:
        seconds = common.time_kernel(fn, graph=True)
    finally:
        del fn
        common.free_memory()
    return 2.0 * m * n * k * batch / seconds * 1e-12


def point(m, n, k, dtype, tflops, batch=1, note=None):
    s = "  point { m: %d n: %d k: %d" % (m, n, k)
    if batch != 1:
        s += " batch: %d" % batch
    s += " dtype: %s tflops: %s" % (common.quote(dtype), common.fmt(tflops))
    if note:
        s += " note: " + common.quote(note)
    return s + " }"


def table(name, points, method, notes=None):
    out = ["gemm {", "  name: " + common.quote(name)]
    out += common.provenance(2, common.this_source(__file__), method, notes)
    out += points
    out.append("}")
    return out


def run(dtypes, quick=False):
    lines = []
    if "fp32" in dtypes:
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 means SIMT SGEMM here
    if "fp8" in dtypes and not fp8_supported():
        common.log("fp8: not supported on", common.gpu_name(), "- skipped")
        dtypes = [d for d in dtypes if d != "fp8"]
    method = (common.TIMING_METHOD + common.GRAPH_METHOD
              + "; torch.matmul/bmm (cuBLAS) or torch._scaled_mm (fp8, unit scales)")
    squares = QUICK_SQUARES if quick else SQUARES
    for dtype in dtypes:
        pts = []
        for s in squares:
            t = measure(dtype, s, s, s)
            if t is not None:
                common.log("gemm square %s %d: %.1f TFLOP/s" % (dtype, s, t))
                pts.append(point(s, s, s, dtype, t))
        if pts:
            lines += table("square sweep %s" % dtype, pts, method)
    zoo = zoo_shapes.gemm_shapes(tps=[1, 8] if quick else None, micro_batches=(1,) if quick else (1, 2))
    for dtype in [d for d in dtypes if d in ("bf16", "fp8")]:
        pts = []
        for (m, n, k), uses in sorted(zoo.items()):
            t = measure(dtype, m, n, k)
            if t is not None:
                common.log("gemm zoo %s %dx%dx%d: %.1f TFLOP/s (%s)" % (dtype, m, n, k, t, uses[0]))
                pts.append(point(m, n, k, dtype, t, note="; ".join(uses[:3]) + (" ..." if len(uses) > 3 else "")))
        if pts:
            lines += table("zoo model shapes %s (TP %s)" % (dtype, "/".join(str(t) for t in zoo_shapes.TP_DEGREES)), pts, method,
                           "forward, data-gradient and weight-gradient GEMMs of one layer and the LM head")
    for dtype in [d for d in dtypes if d in ("bf16", "fp16")]:
        pts = []
        for batch, m, n, k in (BATCHED[:3] if quick else BATCHED):
            t = measure(dtype, m, n, k, batch)
            if t is not None:
                common.log("gemm batched %s %dx%dx%dx%d: %.1f TFLOP/s" % (dtype, batch, m, n, k, t))
                pts.append(point(m, n, k, dtype, t, batch=batch))
        if pts:
            lines += table("batched %s (torch.bmm)" % dtype, pts, method)
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dtypes", default="bf16,fp16,fp8,fp32")
    ap.add_argument("--quick", action="store_true", help="fewer shapes (a smoke run)")
    ap.add_argument("--out", help="write the tables here (default: stdout)")
    args = ap.parse_args(argv)
    common.require_cuda()
    lines = run([d for d in args.dtypes.split(",") if d], args.quick)
    common.write_lines(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
