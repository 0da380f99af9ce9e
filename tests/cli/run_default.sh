#!/usr/bin/env bash
# The default scenario runs, prints the documented JSON keys and writes a loadable trace.
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
"$bin" run --model llama3-70b --cluster dgx-h100 --gpus 64 --tp 8 --pp 2 --dp 4 --seq 8192 \
  --global-batch 64 --micro-batch 1 --zero 1 --sequence-parallel --format json \
  --trace "$tmp/trace.json" > "$tmp/out.json"
python3 - "$tmp/out.json" "$tmp/trace.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
for k in ["status", "iteration_time_s", "tokens_per_s", "tflops_per_gpu", "mfu",
          "peak_memory_bytes", "memory_breakdown", "time_breakdown"]:
    assert k in r, k
assert r["status"] == "ok", r
assert r["iteration_time_s"] > 0 and 0 < r["mfu"] < 1, r
assert abs(r["tokens_per_s"] - 64 * 8192 / r["iteration_time_s"]) < 1e-6 * r["tokens_per_s"]
parts = sum(r["time_breakdown"].values())
assert abs(parts - r["iteration_time_s"]) < 1e-9 + 1e-6 * r["iteration_time_s"], (parts, r["iteration_time_s"])
t = json.load(open(sys.argv[2]))
names = [e for e in t["traceEvents"] if e["ph"] == "M" and e["name"] == "process_name"]
assert len(names) == 2, len(names)  # one simulated device per pipeline stage
assert any(e["ph"] == "X" for e in t["traceEvents"])
PY
# gzip traces
"$bin" run --model llama3-70b --cluster dgx-h100 --gpus 64 --tp 8 --pp 2 --global-batch 64 \
  --seq 8192 --trace "$tmp/trace.json.gz" > /dev/null
python3 -c "import gzip, json, sys; json.load(gzip.open(sys.argv[1]))" "$tmp/trace.json.gz"
# Same inputs, same bytes.
"$bin" run --model llama3-70b --cluster dgx-h100 --gpus 64 --tp 8 --pp 2 --global-batch 64 \
  --seq 8192 --format json --trace "$tmp/again.json" > "$tmp/again.out"
"$bin" run --model llama3-70b --cluster dgx-h100 --gpus 64 --tp 8 --pp 2 --global-batch 64 \
  --seq 8192 --format json --trace "$tmp/again2.json" > "$tmp/again2.out"
cmp "$tmp/again.out" "$tmp/again2.out"
cmp "$tmp/again.json" "$tmp/again2.json"
echo "ok"
