"""Shared pieces of the calibration microbenchmarks: timing, provenance, text-format output.

Timing: CUDA events around a batch of back-to-back launches of the kernel (as the published
sources measure: mamf-finder, Azure's cuBLASLt harness), after a warm-up, repeated; the median
of the per-launch times is reported. Inputs are random normal, never zeros: zero or integer
inputs let the clocks stay higher and overstate throughput by 10-15% (Horace He, "Strangely,
Matrix Multiplications on GPUs Run Faster When Given Predictable Data!").

Output: tables in the calibration file format (sim/schema/calibration.proto), one `point` per
measurement, each table with its provenance (source, date, software, method).
"""
import datetime
import os
import platform
import statistics
import subprocess
import sys

import torch


def quote(s):
    """A text-format string literal."""
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"').replace("\n", " ") + '"'


def fmt(x):
    """A number as the calibration files write it: up to 6 decimals, no trailing zeros."""
    s = ("%.6f" % x).rstrip("0").rstrip(".")
    return s if s else "0"


def require_cuda():
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device: these microbenchmarks must run on the GPU to calibrate")
    return torch.device("cuda")


def gpu_name():
    return torch.cuda.get_device_name(0)


def driver_version():
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,clocks.max.sm,power.limit",
                              "--format=csv,noheader"], capture_output=True, text=True, timeout=20)
        return out.stdout.strip().splitlines()[0] if out.returncode == 0 and out.stdout else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def software():
    """Library and driver versions, for the provenance of every table."""
    parts = ["torch " + torch.__version__, "CUDA " + str(torch.version.cuda)]
    if torch.backends.cudnn.is_available():
        parts.append("cuDNN " + str(torch.backends.cudnn.version()))
    parts.append("driver/max SM clock/power limit " + driver_version())
    parts.append("python " + platform.python_version())
    return ", ".join(parts)


def today():
    return datetime.date.today().isoformat()


def provenance(indent, source, method, notes=None):
    pad = " " * indent
    out = [pad + "provenance {",
           pad + "  source: " + quote(source),
           pad + "  date: " + quote(today()),
           pad + "  software: " + quote(software()),
           pad + "  method: " + quote(method)]
    if notes:
        out.append(pad + "  notes: " + quote(notes))
    out.append(pad + "}")
    return out


def this_source(script):
    host = platform.node() or "unknown host"
    return "trainsim tools/calibrate/%s on %s (%s)" % (os.path.basename(script), gpu_name(), host)


GRAPH_BELOW_SECONDS = 100e-6


def graph_of(fn, launches):
    """A CUDA graph replaying `launches` launches of `fn`, or None where `fn` cannot be captured."""
    try:
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            fn()  # a warm-up on a side stream, as torch.cuda.graph's documentation asks
        torch.cuda.current_stream().wait_stream(side)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            for _ in range(launches):
                fn()
        torch.cuda.synchronize()
        return g
    except Exception as e:  # noqa: BLE001 - any capture failure falls back to eager timing
        log("  (CUDA graph capture failed, timed eagerly: %s)" % str(e).splitlines()[0][:120])
        torch.cuda.synchronize()
        return None


def time_kernel(fn, warmup=10, repeats=15, min_batch_seconds=2e-3, max_batch=1000, graph=False):
    """Median seconds per launch of `fn` (which enqueues GPU work and returns).

    Each repetition times a batch of back-to-back launches between two CUDA events; the batch
    size is chosen after the warm-up so that a batch lasts at least `min_batch_seconds`, which
    keeps the event overhead out of short kernels. With `graph`, a kernel shorter than
    GRAPH_BELOW_SECONDS is timed as one CUDA graph replaying the batch, so that the host's launch
    cost (several microseconds per eager PyTorch call, more than a small GEMM takes on a Hopper)
    is not counted as kernel time: the simulator adds launch and dispatch costs separately.
    """
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    start = torch.cuda.Event(enable_timing=True)
    end = torch.cuda.Event(enable_timing=True)
    start.record()
    fn()
    end.record()
    end.synchronize()
    one = max(start.elapsed_time(end) * 1e-3, 1e-7)
    batch = int(min(max_batch, max(1, min_batch_seconds / one)))
    g = graph_of(fn, batch) if graph and one < GRAPH_BELOW_SECONDS else None
    if g is not None:
        g.replay()
        times = []
        for _ in range(repeats):
            start = torch.cuda.Event(enable_timing=True)
            end = torch.cuda.Event(enable_timing=True)
            start.record()
            g.replay()
            end.record()
            end.synchronize()
            times.append(start.elapsed_time(end) * 1e-3 / batch)
        del g
        return statistics.median(times)
    times = []
    for _ in range(repeats):
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(batch):
            fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e-3 / batch)
    return statistics.median(times)


TIMING_METHOD = ("CUDA events around a batch of back-to-back launches (batch >= 2 ms), after 10 "
                 "warm-up launches; median of 15 batches; random-normal inputs")
GRAPH_METHOD = ("; kernels under %d us timed as one CUDA graph of the batch (no host launch cost)"
                % round(GRAPH_BELOW_SECONDS * 1e6))


def free_memory():
    torch.cuda.synchronize()
    torch.cuda.empty_cache()


def write_lines(lines, path=None):
    """The tables, one line each, to `path` or (without one) standard output."""
    text = "\n".join(lines) + "\n"
    if path:
        with open(path, "w") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


def log(*args):
    print(*args, flush=True)
