#!/usr/bin/env python3
"""Memory-bound microbenchmark: achieved HBM bandwidth of streaming and training kernels, and the
per-kernel launch overhead, on the current GPU.

Streaming kernels (the fit table; data sets of 4 GiB, far beyond L2): copy, scale and add/triad
read and write HBM (load_store, what training's elementwise kernels do); a sum reads only; a fill
writes only. PyTorch's native LayerNorm, forward and forward+backward (fitted: the rate of the
LayerNorms of eager frameworks, patterns norm_forward and norm_forward_backward). Training
kernels (a check table, not fitted): RMSNorm, LayerNorm, SwiGLU, GELU,
softmax, residual add, rotary embedding, cross-entropy, fused AdamW step and dropout as PyTorch
runs them eagerly. Their bandwidth is the algorithmic bytes (what a fused kernel must read and
write, as the simulator counts them) over the measured time, so a multi-kernel eager op shows
below the streaming rate.

Launch overhead: back-to-back launches of a one-element kernel; the median time per launch.

Usage: bench_memory.py [--quick] [--out FILE]
"""
import argparse
import sys

import torch
import torch.nn.functional as F

import common

GIB = 1024 ** 3


def gbps(nbytes, seconds):
    return nbytes / seconds * 1e-9


def streaming(total_bytes):
    """(kernel, pattern, GB/s) of STREAM-like kernels over bf16 vectors of total_bytes each."""
    dev = torch.device("cuda")
    n = total_bytes // 2
    x = torch.randn(n, device=dev, dtype=torch.bfloat16)
    y = torch.randn(n, device=dev, dtype=torch.bfloat16)
    z = torch.empty_like(x)
    e = 2
    cases = [
        ("copy z = x", "load_store", lambda: z.copy_(x), 2 * n * e),
        ("scale z = 3 x", "load_store", lambda: torch.mul(x, 3.0, out=z), 2 * n * e),
        ("add z = x + y", "load_store", lambda: torch.add(x, y, out=z), 3 * n * e),
        ("triad z = x + 3 y", "load_store", lambda: torch.add(x, y, alpha=3.0, out=z), 3 * n * e),
        ("read sum(x)", "load", lambda: x.sum(), n * e),
        ("write z = 0", "store", lambda: z.zero_(), n * e),
    ]
    out = []
    for name, pattern, fn, nbytes in cases:
        t = common.time_kernel(fn)
        out.append((name, pattern, gbps(nbytes, t)))
        common.log("memory %s: %.1f GB/s" % (name, out[-1][2]))
    del x, y, z
    common.free_memory()
    return out


def rotary(x, cos, sin):
    """x[..., d] rotated by the half-split rotary embedding (GPT-NeoX/Llama layout)."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat((x1 * cos - x2 * sin, x2 * cos + x1 * sin), dim=-1)


def training_kernels(tokens, hidden, ffn, vocab):
    """(kernel, pattern, GB/s) of eager PyTorch training ops at one layer's sizes (bf16)."""
    dev = torch.device("cuda")
    bf = torch.bfloat16
    e = 2
    x = torch.randn(tokens, hidden, device=dev, dtype=bf)
    res = torch.randn_like(x)
    w = torch.ones(hidden, device=dev, dtype=bf)
    b = torch.zeros(hidden, device=dev, dtype=bf)
    gate = torch.randn(tokens, ffn, device=dev, dtype=bf)
    up = torch.randn(tokens, ffn, device=dev, dtype=bf)
    heads, d = hidden // 128, 128
    q = torch.randn(tokens, heads, d, device=dev, dtype=bf)
    ang = torch.randn(tokens, 1, d // 2, device=dev, dtype=torch.float32)
    cos, sin = ang.cos().to(bf), ang.sin().to(bf)
    scores = torch.randn(tokens // 8, 8 * hidden, device=dev, dtype=bf)  # rows of 8*hidden
    logits = torch.randn(tokens, vocab, device=dev, dtype=bf)
    target = torch.randint(0, vocab, (tokens,), device=dev)
    n = tokens * hidden
    rms = getattr(F, "rms_norm", None)
    cases = [
        ("RMSNorm fwd", "load_store",
         (lambda: rms(x, (hidden,), w)) if rms else (lambda: x * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + 1e-6).to(bf) * w),
         2 * n * e),
        ("LayerNorm fwd", "load_store", lambda: F.layer_norm(x, (hidden,), w, b), 2 * n * e),
        ("SwiGLU silu(gate) * up", "load_store", lambda: F.silu(gate) * up, 3 * tokens * ffn * e),
        ("GELU (tanh)", "load_store", lambda: F.gelu(gate, approximate="tanh"), 2 * tokens * ffn * e),
        ("softmax rows of 8h", "load_store", lambda: torch.softmax(scores, dim=-1), 2 * n * e),
        ("residual add", "load_store", lambda: x + res, 3 * n * e),
        ("rotary embedding", "load_store", lambda: rotary(q, cos, sin), 2 * n * e),
        ("cross-entropy fwd", "load", lambda: F.cross_entropy(logits, target), tokens * vocab * e),
        ("dropout p=0.1", "load_store", lambda: F.dropout(x, p=0.1, training=True), 2 * n * e + n),
    ]
    out = []
    for name, pattern, fn, nbytes in cases:
        try:
            t = common.time_kernel(fn)
        except RuntimeError as err:
            common.log("memory", name, "skipped:", str(err)[:120])
            continue
        out.append((name, pattern, gbps(nbytes, t)))
        common.log("memory %s: %.1f GB/s" % (name, out[-1][2]))
    del x, res, gate, up, q, scores, logits
    common.free_memory()
    # Fused AdamW over fp32 master weights: reads p, g, m, v and writes p, m, v (28 bytes/param).
    params = 256 * 1024 * 1024
    p = torch.nn.Parameter(torch.randn(params, device=dev, dtype=torch.float32))
    p.grad = torch.randn_like(p)
    try:
        opt = torch.optim.AdamW([p], lr=1e-4, fused=True)
        label = "AdamW step (fused)"
    except (RuntimeError, TypeError):
        opt = torch.optim.AdamW([p], lr=1e-4, foreach=True)
        label = "AdamW step (foreach)"
    t = common.time_kernel(opt.step, warmup=3, repeats=7)
    out.append((label, "load_store", gbps(28 * params, t)))
    common.log("memory %s: %.1f GB/s" % (label, out[-1][2]))
    del p, opt
    common.free_memory()
    return out


def launch_overhead():
    """(eager, CUDA graph) seconds per launch of a one-element kernel, back to back."""
    dev = torch.device("cuda")
    x = torch.zeros(1, device=dev)
    eager = common.time_kernel(lambda: x.add_(1.0), warmup=100, repeats=25, min_batch_seconds=5e-3)
    graph_time = None
    try:
        reps = 200
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            for _ in range(3):
                x.add_(1.0)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(reps):
                x.add_(1.0)
        graph_time = common.time_kernel(g.replay, warmup=5, repeats=15) / reps
    except RuntimeError as err:
        common.log("launch overhead: CUDA graph capture failed:", str(err)[:120])
    return eager, graph_time


def native_layernorm(tokens, hiddens):
    """(kernel, pattern, GB/s) of PyTorch's native LayerNorm (bf16), forward and forward+backward
    (torch.autograd.grad, so no gradient accumulates), over the op's streaming traffic: 2 passes of
    the tokens x hidden activation forward, 5 forward+backward (pattern norm_forward[_backward])."""
    dev = torch.device("cuda")
    bf = torch.bfloat16
    out = []
    for hidden in hiddens:
        x = torch.randn(tokens, hidden, device=dev, dtype=bf, requires_grad=True)
        w = torch.ones(hidden, device=dev, dtype=bf, requires_grad=True)
        b = torch.zeros(hidden, device=dev, dtype=bf, requires_grad=True)
        dy = torch.randn(tokens, hidden, device=dev, dtype=bf)
        n = tokens * hidden * 2

        def fwd():
            with torch.no_grad():
                return F.layer_norm(x, (hidden,), w, b)

        def fwd_bwd():
            return torch.autograd.grad(F.layer_norm(x, (hidden,), w, b), (x, w, b), dy)

        for name, pattern, fn, nbytes in (
                ("torch LayerNorm forward, hidden %d" % hidden, "norm_forward", fwd, 2 * n),
                ("torch LayerNorm forward+backward, hidden %d" % hidden, "norm_forward_backward",
                 fwd_bwd, 5 * n)):
            out.append((name, pattern, gbps(nbytes, common.time_kernel(fn))))
            common.log("memory %s: %.1f GB/s" % (name, out[-1][2]))
        del x, w, b, dy
        common.free_memory()
    return out


def table(name, rows, method, role=None, notes=None):
    out = ["memory {", "  name: " + common.quote(name)]
    if role:
        out.append("  role: " + common.quote(role))
    out += common.provenance(2, common.this_source(__file__), method, notes)
    for kernel, pattern, bw in rows:
        out.append("  point { kernel: %s pattern: %s achieved_gbps: %s }" % (
            common.quote(kernel), common.quote(pattern), common.fmt(bw)))
    out.append("}")
    return out


def run(quick=False):
    lines = []
    size = (1 if quick else 4) * GIB
    lines += table("streaming kernels on " + common.gpu_name(), streaming(size),
                   common.TIMING_METHOD + "; bf16 vectors of %d GiB each (>> L2)" % (size // GIB))
    # One Llama-2-7B layer at 8192 tokens (hidden 4096, FFN 11008, vocabulary 32000).
    tokens = 2048 if quick else 8192
    lines += table("native LayerNorm (PyTorch) on " + common.gpu_name(),
                   native_layernorm(tokens, (4096, 8192)),
                   common.TIMING_METHOD + "; GB/s over the op's streaming traffic: 2 passes of the "
                   "activation forward, 5 forward+backward")
    lines += table("training kernels (eager PyTorch) on " + common.gpu_name(),
                   training_kernels(tokens, 4096, 11008, 32000),
                   common.TIMING_METHOD + "; achieved = algorithmic bytes (fused-kernel reads + "
                   "writes) / time", role="check",
                   notes="Llama-2-7B layer sizes, %d tokens; multi-kernel eager ops count their "
                         "launches in the time" % tokens)
    eager, graph = launch_overhead()
    common.log("launch overhead: eager %.2f us, CUDA graph %s" % (
        eager * 1e6, "%.2f us" % (graph * 1e6) if graph else "n/a"))
    lines += ["launch_overhead {", "  overhead_us: " + common.fmt(eager * 1e6)]
    lines += common.provenance(
        2, common.this_source(__file__),
        "back-to-back launches of a one-element add_ from eager PyTorch; " + common.TIMING_METHOD,
        "per launch inside a CUDA graph: %s" % ("%.3f us" % (graph * 1e6) if graph else "not measured"))
    lines.append("}")
    return lines


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    common.require_cuda()
    common.write_lines(run(args.quick), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
