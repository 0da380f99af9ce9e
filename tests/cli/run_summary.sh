#!/usr/bin/env bash
# Run summaries: the JSON report's HFU counts recompute (hardware FLOPs = model FLOPs plus the
# forward work replayed), the most exposed communication ops are listed most exposed first, the
# CSV is one header and one row of the same width, and the text report aligns its units.
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
flags=(--model llama3-8b --cluster dgx-h100 --gpus 16 --tp 4 --pp 2 --dp 2 --seq 4096 --global-batch 16)
for rc in none selective full; do
  "$bin" run "${flags[@]}" --recompute "$rc" --format json > "$tmp/$rc.json"
  "$bin" run "${flags[@]}" --recompute "$rc" --format csv > "$tmp/$rc.csv"
done
"$bin" run "${flags[@]}" --recompute full > "$tmp/full.txt"
python3 - "$tmp" <<'PY'
import csv, json, sys
d = sys.argv[1]
runs = {rc: json.load(open(f"{d}/{rc}.json")) for rc in ("none", "selective", "full")}
for rc, r in runs.items():
    for k in ("hardware_flops_per_iteration", "hardware_tflops_per_gpu", "hfu", "exposed_comm_rank",
              "peak_memory_at"):
        assert r[k] is not None and r[k] != "", (rc, k, r[k])
    model, hw = r["model_flops_per_iteration"], r["hardware_flops_per_iteration"]
    # HFU = hardware FLOPs / iteration time / GPUs / peak, with the same peak as MFU.
    peak = r["tflops_per_gpu"] / r["mfu"]
    hfu = hw / r["iteration_time_s"] / r["num_gpus"] * 1e-12 / peak
    assert abs(hfu - r["hfu"]) < 1e-9, (hfu, r["hfu"])
    assert abs(r["hardware_tflops_per_gpu"] - hfu * peak) < 1e-6 * peak
    # Exposed communication: most exposed first, each at most as long as it ran.
    ex = r["exposed_comm"]
    assert ex, rc
    assert all(a["exposed_s"] >= b["exposed_s"] for a, b in zip(ex, ex[1:])), ex
    assert all(0 < e["exposed_s"] <= e["time_s"] + 1e-12 and e["count"] > 0 for e in ex), ex
none, sel, full = (runs[k]["hardware_flops_per_iteration"] for k in ("none", "selective", "full"))
model = runs["none"]["model_flops_per_iteration"]
assert all(runs[k]["model_flops_per_iteration"] == model for k in runs)
# Without recompute the GPUs run about the model FLOPs: the model count leaves out only the
# optimizer and the elementwise work (a few percent), and counts causal attention as the kernels do.
assert model <= none <= 1.05 * model, none / model
# Selective recompute replays the attention core, full recompute the whole forward pass (a third
# of forward + backward): 6N -> 8N.
assert none < sel < full, (none, sel, full)
assert 1.25 < full / none < 1.40, full / none
assert runs["full"]["hfu"] > runs["full"]["mfu"] * 1.25
for rc in runs:
    rows = list(csv.reader(open(f"{d}/{rc}.csv")))
    assert len(rows) == 2 and len(rows[0]) == len(rows[1]), rows
    row = dict(zip(rows[0], rows[1]))
    assert abs(float(row["hfu"]) - runs[rc]["hfu"]) < 1e-6, row["hfu"]
    assert row["top_exposed_comm"] == runs[rc]["exposed_comm"][0]["name"], row
text = open(f"{d}/full.txt").read()
for needle in ("HFU", "hardware FLOPs per GPU", "most exposed communication", "peak reached during"):
    assert needle in text, needle
# Units sit in one column in the performance table (the prediction intervals follow the units of
# the iteration time and the throughput, docs/intervals.md).
perf = text.split("performance\n")[1].split("\n\n")[0].splitlines()
ends = {len(line.split("  interval ")[0].rstrip()) for line in perf}
assert len(ends) == 1, perf
assert sum("  interval " in line for line in perf) == 2, perf
PY
echo "ok"
