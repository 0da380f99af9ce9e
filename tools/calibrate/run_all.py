#!/usr/bin/env python3
"""Calibrate trainsim's compute model on the GPU this runs on, in two steps.

Step 1, on the GPU (about 15-30 minutes; --quick for a smoke run):
    tools/calibrate/run_all.py measure --out-dir calib-out
  runs bench_gemm.py, bench_attention.py and bench_memory.py and leaves their tables in
  calib-out/{gemm,attention,memory}.textproto.

Step 2, anywhere:
    tools/calibrate/run_all.py assemble --in-dir calib-out --gpu B200-SXM-180GB --alias b200 \\
        --datasheet-from calibration/B200-SXM-180GB.datasheet.textproto      (or the --peak-* flags)
    trainsim kernel --gpu b200 --fit-report
  writes calibration/<gpu>.textproto (datasheet, model structure and the measured tables, each
  with provenance); trainsim fits the model to it when it loads the file, and --fit-report
  prints the fitted parameters with the fitted and held-out error of every point.

Without a subcommand, both steps run (measure then assemble) and need the assemble flags.
Datasheet peaks cannot be measured: give them with --peak-bf16-tflops ... --datasheet-source,
or copy the `datasheet { }` block of an existing file with --datasheet-from (the SM count and
memory size are read from the device when measuring and checked against it).
"""
import argparse
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.abspath(os.path.join(HERE, "..", ".."))

# CTA tile shapes of the GEMM library (NVIDIA/cutlass python/cutlass_library/generator.py,
# GenerateSM80_TensorOp_16816 tile_descriptions); the same list as the published calibrations.
DEFAULT_TILES = [(256, 128), (128, 256), (256, 64), (64, 256), (128, 128), (128, 64), (64, 128), (64, 64)]


def q(s):
    return '"' + str(s).replace("\\", "\\\\").replace('"', '\\"') + '"'


def block(text, name):
    """The `name { ... }` block at the top level of a text-format file, or None."""
    m = re.search(r"^%s\s*\{" % re.escape(name), text, re.M)
    if m is None:
        return None
    depth, i = 0, m.end() - 1
    in_str = False
    while i < len(text):
        ch = text[i]
        if in_str:
            if ch == "\\":
                i += 1
            elif ch == '"':
                in_str = False
        elif ch == '"':
            in_str = True
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return text[m.start():i + 1]
        i += 1
    raise ValueError("unbalanced braces in the %s block" % name)


def measure(args):
    sys.path.insert(0, HERE)
    import bench_attention
    import bench_gemm
    import bench_memory
    import common
    import torch

    common.require_cuda()
    os.makedirs(args.out_dir, exist_ok=True)
    props = torch.cuda.get_device_properties(0)
    with open(os.path.join(args.out_dir, "device.txt"), "w") as f:
        f.write("name: %s\nnum_sms: %d\nmemory_gb: %.3f\nsoftware: %s\n" % (
            props.name, props.multi_processor_count, props.total_memory / 1e9, common.software()))
    steps = [("memory", lambda: bench_memory.run(args.quick)),
             ("gemm", lambda: bench_gemm.run(args.dtypes.split(","), args.quick)),
             ("attention", lambda: bench_attention.run(None, args.quick)[0])]
    for name, fn in steps:
        if args.only and name not in args.only.split(","):
            continue
        common.log("== %s" % name)
        lines = fn()
        with open(os.path.join(args.out_dir, name + ".textproto"), "w") as f:
            f.write("\n".join(lines) + "\n")
    return 0


def read_device(in_dir):
    info = {}
    path = os.path.join(in_dir, "device.txt")
    if os.path.exists(path):
        for line in open(path):
            k, _, v = line.partition(":")
            info[k.strip()] = v.strip()
    return info


def datasheet_block(args, device):
    if args.datasheet_from:
        text = open(args.datasheet_from).read()
        ds = block(text, "datasheet")
        if ds is None:
            raise SystemExit("%s has no datasheet block" % args.datasheet_from)
        sms = re.search(r"num_sms:\s*(\d+)", ds)
        if sms and "num_sms" in device and int(sms.group(1)) != int(device["num_sms"]):
            raise SystemExit("the datasheet says %s SMs, the measured device has %s" % (sms.group(1), device["num_sms"]))
        return ds.splitlines(), block(text, "gemm_model")
    need = ["peak_bf16_tflops", "peak_fp16_tflops", "peak_fp8_tflops", "peak_tf32_tflops", "peak_fp32_tflops",
            "memory_bandwidth_gbps", "datasheet_source"]
    missing = [n for n in need if getattr(args, n) is None]
    if missing:
        raise SystemExit("assemble needs --datasheet-from or: " + ", ".join("--" + m.replace("_", "-") for m in missing))
    memory_gb = args.memory_gb or (float(device["memory_gb"]) if "memory_gb" in device else None)
    num_sms = args.num_sms or (int(device["num_sms"]) if "num_sms" in device else None)
    if memory_gb is None or num_sms is None:
        raise SystemExit("give --memory-gb and --num-sms (no device.txt from the measure step)")
    lines = ["datasheet {"]
    for n in need[:5]:
        lines.append("  %s: %s" % (n, getattr(args, n)))
    lines += ["  memory_gb: %s" % memory_gb, "  memory_bandwidth_gbps: %s" % args.memory_bandwidth_gbps,
              "  num_sms: %d" % num_sms, "  provenance {", "    source: " + q(args.datasheet_source),
              "    date: " + q(args.datasheet_date or "not stated"), '    software: "not applicable (datasheet)"',
              '    method: "vendor datasheet peaks (dense); SM count and memory from the device properties"',
              "  }", "}"]
    return lines, None


def default_gemm_model():
    lines = ["gemm_model {"]
    lines += ["  tile { m: %d n: %d }" % t for t in DEFAULT_TILES]
    lines += ["  provenance {",
              '    source: "NVIDIA/cutlass python/cutlass_library/generator.py, GenerateSM80_TensorOp_16816 '
              'tile_descriptions"',
              '    date: "CUTLASS 3.x generator (2024)"', '    software: "CUTLASS library generator"',
              '    method: "threadblock (CTA) tile shapes; the model takes the tile with the shortest predicted time"',
              "  }", "}"]
    return lines


def attention_kernel(attention_text):
    kernels = re.findall(r'^\s*kernel:\s*"([^"]+)"', attention_text, re.M)
    for preferred in ("FlashAttention-3", "FlashAttention-2"):
        if preferred in kernels:
            return preferred
    return kernels[0] if kernels else None


def assemble(args):
    device = read_device(args.in_dir)
    parts = {}
    for name in ("memory", "gemm", "attention"):
        path = os.path.join(args.in_dir, name + ".textproto")
        parts[name] = open(path).read() if os.path.exists(path) else ""
    ds, gemm_model = datasheet_block(args, device)
    # The launch overhead block comes with the memory tables; it is a top-level message.
    lines = ["# Calibration of the %s measured with tools/calibrate/run_all.py." % args.gpu,
             "# trainsim fits the compute model to these points when it loads the file;",
             "# `trainsim kernel --gpu %s --fit-report` prints the fit and its errors." % args.gpu, "",
             "gpu: " + q(args.gpu)]
    lines += ["aliases: " + q(a) for a in (args.alias or [])]
    lines += ds
    lines += gemm_model.splitlines() if gemm_model else default_gemm_model()
    lines += parts["gemm"].rstrip().splitlines()
    kernel = attention_kernel(parts["attention"])
    if kernel:
        lines += ["attention_model {", "  block: 128", "  kernel: " + q(kernel), "  provenance {",
                  '    source: "FlashAttention-2 paper (arXiv:2307.08691) section 3.3; FlashAttention-3 '
                  '(arXiv:2407.08608)"',
                  '    date: "2023-07 / 2024-07"', '    software: "FlashAttention-2 and -3"',
                  '    method: "query/key block of 128 rows as in the papers; kernel: the fastest measured"',
                  "  }", "}"]
        lines += parts["attention"].rstrip().splitlines()
    lines += parts["memory"].rstrip().splitlines()
    out = args.out or os.path.join(ROOT, "calibration", args.gpu + ".textproto")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", out)
    print("next: trainsim kernel --gpu %s --fit-report" % out)
    return 0


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", nargs="?", choices=["measure", "assemble"], help="default: both")
    ap.add_argument("--out-dir", default="calib-out", help="measure: where the tables go")
    ap.add_argument("--in-dir", help="assemble: the measure step's folder (default: --out-dir)")
    ap.add_argument("--quick", action="store_true", help="measure: fewer shapes (a smoke run)")
    ap.add_argument("--only", help="measure: comma-separated subset of memory,gemm,attention")
    ap.add_argument("--dtypes", default="bf16,fp16,fp8,fp32", help="measure: GEMM dtypes")
    ap.add_argument("--gpu", help="assemble: GPU kind, e.g. H100-SXM5-80GB (the topologies' gpu name)")
    ap.add_argument("--alias", action="append", help="assemble: a --gpu alias (repeatable)")
    ap.add_argument("--out", help="assemble: output file (default: calibration/<gpu>.textproto)")
    ap.add_argument("--datasheet-from", help="assemble: copy datasheet and gemm_model from this file")
    for n in ("peak-bf16-tflops", "peak-fp16-tflops", "peak-fp8-tflops", "peak-tf32-tflops", "peak-fp32-tflops",
              "memory-bandwidth-gbps", "memory-gb"):
        ap.add_argument("--" + n, type=float)
    ap.add_argument("--num-sms", type=int)
    ap.add_argument("--datasheet-source", help="where the peaks come from (datasheet, URL)")
    ap.add_argument("--datasheet-date")
    args = ap.parse_args(argv)
    args.in_dir = args.in_dir or args.out_dir
    if args.step in (None, "assemble") and not args.gpu:
        ap.error("assemble needs --gpu")
    if args.step in (None, "measure"):
        measure(args)
    if args.step in (None, "assemble"):
        assemble(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
