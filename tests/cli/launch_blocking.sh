#!/usr/bin/env bash
# --launch-blocking (CUDA_LAUNCH_BLOCKING=1): the host time per operation adds to every kernel
# instead of overlapping the long ones, so the step gets longer; with no host time (0 µs, CUDA
# graphs) it changes nothing. The JSON plan says so only when it is set.
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
run=(run --model llama3-8b --cluster dgx-a100 --gpus 8 --tp 8 --global-batch 4 --micro-batch 1
     --no-interval --format json)
"$bin" "${run[@]}" > "$tmp/plain.json"
"$bin" "${run[@]}" --launch-blocking > "$tmp/blocking.json"
"$bin" "${run[@]}" --host-dispatch-us 0 > "$tmp/plain0.json"
"$bin" "${run[@]}" --host-dispatch-us 0 --launch-blocking > "$tmp/blocking0.json"
python3 - "$tmp"/plain.json "$tmp"/blocking.json "$tmp"/plain0.json "$tmp"/blocking0.json <<'PY'
import json, sys
plain, blocking, plain0, blocking0 = (json.load(open(p)) for p in sys.argv[1:])
assert "launch_blocking" not in plain["plan"], plain["plan"]
assert blocking["plan"]["launch_blocking"] is True
# Each of the step's operations gains up to 70 µs: the step is longer, the forward too.
assert blocking["iteration_time_s"] > plain["iteration_time_s"]
assert blocking["time_breakdown"]["forward_s"] > plain["time_breakdown"]["forward_s"]
assert blocking0["iteration_time_s"] == plain0["iteration_time_s"], (plain0, blocking0)
PY
"$bin" run --model llama3-8b --cluster dgx-a100 --gpus 8 --tp 8 --global-batch 4 --no-interval \
  --launch-blocking | grep -q "launch blocking"
echo ok
