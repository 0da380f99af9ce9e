#!/usr/bin/env python3
"""Sustained-load drift: how a large GEMM's throughput moves while the GPU stays busy.

Runs one bf16 GEMM back to back for --seconds and reports its TFLOP/s in windows of --window
seconds, with the SM clock, power draw and temperature nvidia-smi reads at each window's end.
The spread between the first (cold) windows and the sustained ones is one input of the
uncertainty trainsim attaches to its compute calibration: a published sweep measured cold and a
training run that keeps the GPU busy for hours see different clocks.

Output: CSV (window_end_s, tflops, sm_clock_mhz, power_w, temperature_c) with a commented
provenance header. Usage: bench_sustained.py [--size 8192] [--seconds 90] [--out FILE]
"""
import argparse
import subprocess
import sys
import time

import torch

import common


def smi():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=clocks.sm,power.draw,temperature.gpu",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=10)
        return [v.strip() for v in out.stdout.strip().splitlines()[0].split(",")]
    except (OSError, subprocess.SubprocessError, IndexError):
        return ["", "", ""]


def run(size, seconds, window):
    dev = torch.device("cuda")
    a = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    b = torch.randn(size, size, device=dev, dtype=torch.bfloat16)
    c = torch.empty(size, size, device=dev, dtype=torch.bfloat16)
    flop = 2.0 * size ** 3
    rows = []
    t0 = time.time()
    while time.time() - t0 < seconds:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        count = 0
        w0 = time.time()
        start.record()
        while time.time() - w0 < window:
            for _ in range(8):
                torch.matmul(a, b, out=c)
            count += 8
            torch.cuda.current_stream().synchronize()
        end.record()
        end.synchronize()
        tflops = flop * count / (start.elapsed_time(end) * 1e-3) * 1e-12
        rows.append((time.time() - t0, tflops, *smi()))
        common.log("t=%.1f s: %.1f TFLOP/s (clock, power, temp: %s)" % (rows[-1][0], tflops, ", ".join(rows[-1][2:])))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size", type=int, default=8192)
    ap.add_argument("--seconds", type=float, default=90.0)
    ap.add_argument("--window", type=float, default=2.0)
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    common.require_cuda()
    rows = run(args.size, args.seconds, args.window)
    lines = ["# sustained-load drift of a %d^3 bf16 GEMM (torch.matmul, random-normal inputs)" % args.size,
             "# source: " + common.this_source(__file__), "# date: " + common.today(),
             "# software: " + common.software(),
             "# method: back-to-back launches in windows of %.1f s, CUDA events per window; "
             "nvidia-smi clocks.sm, power.draw, temperature.gpu at each window's end" % args.window,
             "window_end_s,tflops,sm_clock_mhz,power_w,temperature_c"]
    lines += ["%.2f,%s,%s,%s,%s" % (r[0], common.fmt(r[1]), r[2], r[3], r[4]) for r in rows]
    common.write_lines(lines, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
