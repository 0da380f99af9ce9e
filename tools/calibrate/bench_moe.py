#!/usr/bin/env python3
"""Mixture-of-experts microbenchmark: grouped expert GEMMs and token permutation on the current GPU.

Grouped GEMMs (torch._grouped_mm, bf16, FP32 accumulation; the CUTLASS grouped kernel PyTorch
ships for Hopper and newer) at the expert shapes of the MoE models trainsim's zoo describes, with
G equal groups (local experts of one expert-parallel rank) of M tokens each:
  forward   Y_g[M, N] = X_g[M, K] W_g[K, N]     (2-D x 3-D with group offsets)
  dgrad     dX_g[M, K] = dY_g[M, N] W_g^T[N, K] (2-D x 3-D)
  wgrad     dW_g[K, N] = X_g^T[K, M] dY_g[M, N] (2-D x 2-D, offsets along the contraction)
for the expert MLP's up (gate+up fused, N = 2 x expert FFN width, K = hidden) and down
(N = hidden, K = expert FFN width) projections. TFLOP/s = 2 M N K G / time. Written as `gemm`
tables with `batch: G` and `kernel: "grouped"`: equal groups do the work of G independent
products, and the simulator fits the grouped kernel apart from the dense GEMMs (its own a, b, c
and HBM floor) for the MoE expert GEMMs.

Expert shapes (Hugging Face config.json of each model): DeepSeek-V3 and Kimi-K2 hidden 7168,
moe_intermediate_size 2048; Qwen3-235B-A22B 4096 / 1536; Qwen3-30B-A3B 2048 / 768; GPT-OSS-120B
2880 / 2880; Mixtral-8x7B 4096 / 14336; Mixtral-8x22B 6144 / 16384.

Token permutation (memory-bound, bf16 rows of `hidden`): dispatch gather (index_select of T x
top-k rows), combine (index_add_ of the weighted expert outputs back to T rows) and the router
(fp32 logits [T, E], softmax + top-k). Written as a `memory` table with the patterns moe_gather,
moe_combine and moe_router, GB/s over the algorithmic bytes: the rates at which the simulator
prices eager (unfused) permutation.

Usage: bench_moe.py [--quick] [--budget-s 240] [--out FILE]
"""
import argparse
import sys
import time

import torch

import common

# (label, hidden, expert FFN width, routed experts, top-k); sources in the module docstring.
MODELS = [("deepseek-v3/kimi-k2", 7168, 2048, 256, 8), ("qwen3-235b-a22b", 4096, 1536, 128, 8),
          ("qwen3-30b-a3b", 2048, 768, 128, 8), ("gpt-oss-120b", 2880, 2880, 128, 4),
          ("mixtral-8x7b", 4096, 14336, 8, 2), ("mixtral-8x22b", 6144, 16384, 8, 2)]
GROUPS = [1, 4, 16]
TOKENS_PER_GROUP = [128, 512, 2048, 8192]
QUICK_GROUPS = [4]
QUICK_TOKENS = [512, 4096]
MAX_ROWS = 65536  # G x M: one rank's dispatched tokens at micro-batch 1, seq 4096, top-8, EP 2


def offsets(groups, rows):
    return torch.arange(1, groups + 1, device="cuda", dtype=torch.int32) * rows


def make_grouped(kind, g, m, n, k, contiguous=False):
    """A closure launching one grouped GEMM of G groups (`contiguous`: the wgrad operands copied
    row-major, for a kernel that rejects the transposed views)."""
    dev, dt = torch.device("cuda"), torch.bfloat16
    offs = offsets(g, m)
    if kind in ("fwd", "dgrad"):
        rows, inner, cols = (m, k, n) if kind == "fwd" else (m, n, k)
        a = torch.randn(g * rows, inner, device=dev, dtype=dt)
        # The kernel wants the 3-D operand "column-major" per group: the transpose of (G, cols, inner).
        b = torch.randn(g, cols, inner, device=dev, dtype=dt).transpose(-2, -1)
        return lambda: torch._grouped_mm(a, b, offs=offs, out_dtype=dt)
    # wgrad: A = X^T (K, G*M) as the transpose of a row-major (G*M, K); B = dY (G*M, N).
    a = torch.randn(g * m, k, device=dev, dtype=dt).t()
    b = torch.randn(n, g * m, device=dev, dtype=dt).t()
    if contiguous:
        a, b = a.contiguous(), b.contiguous()
    return lambda: torch._grouped_mm(a, b, offs=offs, out_dtype=dt)


def make_grouped_fp8(g, m, n, k):
    """Forward grouped GEMM in FP8 e4m3 with row-wise scales (torch._scaled_grouped_mm), as
    per-token/per-channel scaled FP8 expert GEMMs run; bf16 output."""
    dev = torch.device("cuda")
    a = torch.randn(g * m, k, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn)
    b = torch.randn(g, n, k, device=dev, dtype=torch.bfloat16).to(torch.float8_e4m3fn).transpose(-2, -1)
    sa = torch.ones(g * m, device=dev, dtype=torch.float32)
    sb = torch.ones(g, n, device=dev, dtype=torch.float32)
    offs = offsets(g, m)
    return lambda: torch._scaled_grouped_mm(a, b, sa, sb, offs=offs, out_dtype=torch.bfloat16)


def measure_fp8(g, m, n, k):
    try:
        fn = make_grouped_fp8(g, m, n, k)
        fn()
        return 2.0 * g * m * n * k / common.time_kernel(fn, graph=True) * 1e-12
    except (RuntimeError, TypeError, AttributeError) as e:
        common.log("  grouped fp8 G%d %dx%dx%d failed: %s" % (g, m, n, k, str(e).splitlines()[0][:160]))
        return None
    finally:
        fn = None
        common.free_memory()


def fp8_points(quick, deadline):
    """Forward FP8 grouped GEMMs at the same shapes (skipped where the kernel is missing)."""
    pts = []
    for label, hidden, ffn, experts, topk in MODELS:
        for proj, n, k in (("up", 2 * ffn, hidden), ("down", hidden, ffn)):
            for g in (QUICK_GROUPS if quick else GROUPS):
                for m in (QUICK_TOKENS if quick else TOKENS_PER_GROUP):
                    if g > experts or g * m > MAX_ROWS or time.time() > deadline:
                        continue
                    t = measure_fp8(g, m, n, k)
                    if t is None:
                        return pts  # the first failure says the kernel is not there
                    common.log("grouped fp8 fwd G%d %dx%dx%d: %.1f TFLOP/s (%s %s)" % (g, m, n, k, t, label, proj))
                    pts.append("  point { m: %d n: %d k: %d batch: %d dtype: \"fp8\" tflops: %s note: %s }" % (
                        m, n, k, g, common.fmt(t), common.quote("%s expert %s fwd" % (label, proj))))
    return pts


def measure_grouped(kind, g, m, n, k):
    need = 2 * g * (m * k + k * n + m * n)
    free, _ = torch.cuda.mem_get_info()
    if need > 0.8 * free:
        return None
    seconds = None
    for contiguous in ((False, True) if kind == "wgrad" else (False,)):
        try:
            fn = make_grouped(kind, g, m, n, k, contiguous)
            fn()
            seconds = common.time_kernel(fn, graph=True)
            break
        except (RuntimeError, TypeError) as e:
            common.log("  grouped %s G%d %dx%dx%d%s failed: %s" % (
                kind, g, m, n, k, " (row-major)" if contiguous else "", str(e).splitlines()[0][:120]))
        finally:
            fn = None
            common.free_memory()
    if seconds is None:
        return None
    return 2.0 * g * m * n * k / seconds * 1e-12


def grouped_points(quick, deadline):
    pts = []
    seen = set()
    for label, hidden, ffn, experts, topk in MODELS:
        for proj, n, k in (("up", 2 * ffn, hidden), ("down", hidden, ffn)):
            for g in (QUICK_GROUPS if quick else GROUPS):
                if g > experts:
                    continue
                for m in (QUICK_TOKENS if quick else TOKENS_PER_GROUP):
                    if g * m > MAX_ROWS:
                        continue
                    for kind in ("fwd", "dgrad", "wgrad"):
                        if time.time() > deadline:
                            common.log("grouped GEMMs: time budget spent, stopping")
                            return pts
                        # (m, n, k) of the product as the calibration format writes it.
                        shape = {"fwd": (m, n, k), "dgrad": (m, k, n), "wgrad": (k, n, m)}[kind]
                        if (shape, g) in seen:
                            continue
                        seen.add((shape, g))
                        t = measure_grouped(kind, g, m, n, k)
                        if t is None:
                            continue
                        common.log("grouped %s G%d %s: %.1f TFLOP/s (%s %s)" % (
                            kind, g, "x".join(map(str, shape)), t, label, proj))
                        s = "  point { m: %d n: %d k: %d batch: %d dtype: \"bf16\" tflops: %s note: %s }" % (
                            shape + (g, common.fmt(t), common.quote("%s expert %s %s" % (label, proj, kind))))
                        pts.append(s)
    return pts


def permutation_points(quick):
    """Dispatch gather, combine scatter-add and router of one micro-batch's tokens."""
    dev, dt = torch.device("cuda"), torch.bfloat16
    pts = []
    for tokens in ([4096] if quick else [4096, 16384]):
        for label, hidden, _, experts, topk in MODELS[:4]:
            x = torch.randn(tokens, hidden, device=dev, dtype=dt)
            idx = torch.randint(0, tokens, (tokens * topk,), device=dev)
            moved = tokens * topk * hidden * 2
            gather = common.time_kernel(lambda: torch.index_select(x, 0, idx), graph=True)
            # each source row is read once from HBM (its top-k copies hit L2), each copy written once
            pts.append((label, "dispatch gather (index_select) %d tokens top-%d" % (tokens, topk),
                        "moe_gather", (moved + moved // topk) / gather))
            y = torch.randn(tokens * topk, hidden, device=dev, dtype=dt)
            w = torch.rand(tokens * topk, 1, device=dev, dtype=dt)
            out = torch.zeros(tokens, hidden, device=dev, dtype=dt)
            combine = common.time_kernel(lambda: out.index_add_(0, idx, y * w), graph=True)
            # reads y and w-scaled copy (write + read), read-modify-write of the output rows
            pts.append((label, "combine (weighted index_add_) %d tokens top-%d" % (tokens, topk),
                        "moe_combine", (3 * moved + 2 * moved) / combine))
            logits = torch.randn(tokens, experts, device=dev, dtype=torch.float32)
            router = common.time_kernel(lambda: torch.topk(torch.softmax(logits, -1), topk, -1), graph=True)
            pts.append((label, "router softmax+top-%d %d tokens %d experts" % (topk, tokens, experts),
                        "moe_router", 3 * tokens * experts * 4 / router))
            del x, idx, y, w, out, logits
            common.free_memory()
    return pts


def run(quick=False, budget_s=240.0, fp8=True):
    lines = []
    deadline = time.time() + budget_s
    method = (common.TIMING_METHOD + common.GRAPH_METHOD
              + "; torch._grouped_mm (bf16 out), G equal groups, offsets int32")
    pts = grouped_points(quick, deadline)
    if pts:
        lines += ["gemm {", "  name: " + common.quote("grouped expert GEMMs bf16 (torch._grouped_mm)"),
                  "  kernel: \"grouped\""]
        lines += common.provenance(2, common.this_source(__file__), method,
                                   "batch = experts per rank (equal groups); m, n, k of one group's product")
        lines += pts + ["}"]
    if fp8:
        pts = fp8_points(quick, deadline + budget_s / 2)
        if pts:
            lines += ["gemm {", "  name: " + common.quote("grouped expert GEMMs fp8 (torch._scaled_grouped_mm)"),
                      "  kernel: \"grouped\""]
            lines += common.provenance(2, common.this_source(__file__), method.replace(
                "torch._grouped_mm (bf16 out)", "torch._scaled_grouped_mm (e4m3, row-wise unit scales, bf16 out)"),
                "forward only; batch = experts per rank (equal groups)")
            lines += pts + ["}"]
    perm = permutation_points(quick)
    if perm:
        lines += ["memory {", "  name: " + common.quote("MoE token permutation and router (eager PyTorch)")]
        lines += common.provenance(2, common.this_source(__file__), common.TIMING_METHOD + common.GRAPH_METHOD,
                                   "GB/s over algorithmic bytes (the gather counts each source row once: its "
                                   "top-k copies hit L2); the combine counts the weighting multiply's write and read")
        for label, kernel, pattern, bps in perm:
            common.log("moe %s %s: %.0f GB/s" % (label, kernel, bps * 1e-9))
            lines.append("  point { kernel: %s pattern: %s achieved_gbps: %s note: %s }" % (
                common.quote(kernel), common.quote(pattern), common.fmt(bps * 1e-9), common.quote(label)))
        lines.append("}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="fewer shapes (a smoke run)")
    ap.add_argument("--budget-s", type=float, default=240.0, help="stop adding grouped GEMMs after this")
    ap.add_argument("--out", help="write the tables here (default: stdout)")
    args = ap.parse_args(argv)
    common.require_cuda()
    if not hasattr(torch, "_grouped_mm"):
        raise SystemExit("this torch has no torch._grouped_mm (needs torch >= 2.8)")
    common.write_lines(run(args.quick, args.budget_s), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
