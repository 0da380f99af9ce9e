#!/usr/bin/env python3
"""Fused-attention microbenchmark: forward and backward FlashAttention TFLOP/s on the current GPU.

Kernels: FlashAttention-3 (flash_attn_interface, Hopper) and FlashAttention-2 (flash_attn) when
installed, else PyTorch's scaled_dot_product_attention restricted to its flash backend.
Shapes: the FlashAttention papers' sweep (batch x seq = 16k tokens, hidden 2048, head_dim
64/128/256, seq 512..16k, causal and not) and the zoo models' attention on one TP rank (GQA
included). Forward and backward are timed separately; backward is torch.autograd.grad of a
retained forward output. TFLOP/s use the FlashAttention convention the calibration files expect:
forward 4*seq^2*head_dim*heads*batch, halved when causal; backward 2.5x that.

Usage: bench_attention.py [--quick] [--kernels FlashAttention-3,FlashAttention-2] [--out FILE]
"""
import argparse
import sys

import torch

import common
import zoo_shapes

PAPER_SEQS = [512, 1024, 2048, 4096, 8192, 16384]
PAPER_HEAD_DIMS = [64, 128, 256]


def available_kernels():
    """name -> (fn(q, k, v, causal) -> out, layout) with layout 'bshd' or 'bhsd'."""
    kernels = {}
    try:
        import flash_attn_interface  # FlashAttention-3 (hopper/ of the flash-attention repo)

        def fa3(q, k, v, causal):
            out = flash_attn_interface.flash_attn_func(q, k, v, causal=causal)
            return out[0] if isinstance(out, tuple) else out
        kernels["FlashAttention-3"] = (fa3, "bshd")
    except ImportError:
        pass
    try:
        from flash_attn import flash_attn_func  # FlashAttention-2

        kernels["FlashAttention-2"] = (lambda q, k, v, causal: flash_attn_func(q, k, v, causal=causal), "bshd")
    except ImportError:
        pass
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel

        sdpa_gqa = "enable_gqa" in (torch.nn.functional.scaled_dot_product_attention.__doc__ or "")

        def sdpa(q, k, v, causal):
            gqa = {}
            if k.shape[1] != q.shape[1]:
                if not sdpa_gqa:
                    # Expanding K/V here would time two copies (and a reduction in the
                    # backward) with the kernel: skip GQA shapes on a torch without enable_gqa.
                    raise ValueError("GQA needs torch >= 2.5 (scaled_dot_product_attention enable_gqa)")
                gqa["enable_gqa"] = True
            with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                return torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal, **gqa)
        kernels["torch-sdpa-flash"] = (sdpa, "bhsd")
    except ImportError:
        pass
    return kernels


def fa_flops(batch, heads, seq, head_dim, causal, backward):
    f = 4.0 * seq * seq * head_dim * heads * batch
    if causal:
        f *= 0.5
    return f * (2.5 if backward else 1.0)


def measure(kernel, batch, heads, kv_heads, seq, head_dim, causal):
    """(fwd TFLOP/s, bwd TFLOP/s), None where the shape does not run."""
    fn, layout = kernel
    dev = torch.device("cuda")

    def tensor(h):
        shape = (batch, seq, h, head_dim) if layout == "bshd" else (batch, h, seq, head_dim)
        return torch.randn(shape, device=dev, dtype=torch.bfloat16, requires_grad=True)
    try:
        q, k, v = tensor(heads), tensor(kv_heads), tensor(kv_heads)
        with torch.no_grad():
            t_fwd = common.time_kernel(lambda: fn(q, k, v, causal), graph=True)
        out = fn(q, k, v, causal)
        dout = torch.randn_like(out)
        t_bwd = common.time_kernel(lambda: torch.autograd.grad(out, (q, k, v), dout, retain_graph=True))
    except (RuntimeError, ValueError) as e:  # unsupported head_dim, out of memory, ...
        common.log("attention: skipped", batch, heads, kv_heads, seq, head_dim, causal, "-", str(e)[:120])
        return None
    finally:
        common.free_memory()
    return (fa_flops(batch, heads, seq, head_dim, causal, False) / t_fwd * 1e-12,
            fa_flops(batch, heads, seq, head_dim, causal, True) / t_bwd * 1e-12)


def point(direction, causal, head_dim, seq, batch, heads, kv_heads, tflops, note=None):
    s = "  point { direction: %s causal: %s head_dim: %d seq: %d batch: %d heads: %d" % (
        common.quote(direction), "true" if causal else "false", head_dim, seq, batch, heads)
    if kv_heads != heads:
        s += " kv_heads: %d" % kv_heads
    s += " tflops: %s" % common.fmt(tflops)
    if note:
        s += " note: " + common.quote(note)
    return s + " }"


def run(kernel_names=None, quick=False):
    kernels = available_kernels()
    # By default the flash-attention kernels; PyTorch's SDPA only where neither is installed.
    default = [n for n in ("FlashAttention-3", "FlashAttention-2") if n in kernels] or ["torch-sdpa-flash"]
    names = [n for n in (kernel_names or default) if n in kernels]
    if not names:
        raise SystemExit("no fused attention kernel available (install flash-attn, or torch >= 2.3)")
    lines = []
    method = (common.TIMING_METHOD + "; forward under no_grad" + common.GRAPH_METHOD + "; backward = torch.autograd.grad of a "
              "retained forward output; bf16; FlashAttention FLOP convention")
    seqs = [512, 2048, 8192] if quick else PAPER_SEQS
    for name in names:
        pts = []
        for head_dim in PAPER_HEAD_DIMS:
            heads = 2048 // head_dim
            for causal in (False, True):
                for seq in seqs:
                    batch = 16384 // seq
                    r = measure(kernels[name], batch, heads, heads, seq, head_dim, causal)
                    if r is None:
                        continue
                    common.log("%s d=%d causal=%s seq=%d: fwd %.1f bwd %.1f TFLOP/s" % (name, head_dim, causal, seq, *r))
                    pts.append(point("fwd", causal, head_dim, seq, batch, heads, heads, r[0]))
                    pts.append(point("bwd", causal, head_dim, seq, batch, heads, heads, r[1]))
        for (batch, heads, kv, seq, head_dim), uses in sorted(zoo_shapes.attention_shapes(
                tps=[1, 8] if quick else None).items()):
            r = measure(kernels[name], batch, heads, kv, seq, head_dim, True)
            if r is None:
                continue
            note = "; ".join(uses[:3]) + (" ..." if len(uses) > 3 else "")
            common.log("%s zoo %s: fwd %.1f bwd %.1f TFLOP/s" % (name, note, *r))
            pts.append(point("fwd", True, head_dim, seq, batch, heads, kv, r[0], note))
            pts.append(point("bwd", True, head_dim, seq, batch, heads, kv, r[1], note))
        if pts:
            lines += ["attention {", "  name: " + common.quote(name + " on " + common.gpu_name()),
                      "  kernel: " + common.quote(name)]
            lines += common.provenance(2, common.this_source(__file__), method,
                                       "FlashAttention paper sweep (16k tokens, hidden 2048) and zoo shapes")
            lines += pts
            lines.append("}")
    return lines, names


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kernels", help="comma-separated; default: every available kernel")
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    common.require_cuda()
    lines, _ = run(args.kernels.split(",") if args.kernels else None, args.quick)
    common.write_lines(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
