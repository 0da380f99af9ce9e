#!/usr/bin/env bash
# --tp-comm-overlap: sequence parallelism's all-gathers and reduce-scatters pipelined with their
# GEMMs hide behind them; one chunk of each (1/tp of it) stays exposed. Needs sequence parallelism.
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
run=(run --model llama3-70b --cluster dgx-h100 --gpus 16 --tp 8 --pp 2 --seq 8192 --global-batch 8
     --micro-batch 1 --zero 1 --sequence-parallel --format json)
"$bin" "${run[@]}" > "$tmp/plain.json"
"$bin" "${run[@]}" --tp-comm-overlap > "$tmp/overlap.json"
python3 - "$tmp/plain.json" "$tmp/overlap.json" <<'PY'
import json, sys
plain, over = (json.load(open(p)) for p in sys.argv[1:])
assert over["plan"]["tp_comm_overlap"] is True and plain["plan"]["tp_comm_overlap"] is False
tp_plain = plain["time_breakdown"]["exposed_tp_comm_s"]
tp_over = over["time_breakdown"]["exposed_tp_comm_s"]
# Most of the TP traffic hides behind the GEMMs, but not all of it: one chunk in eight is exposed.
assert tp_over < 0.5 * tp_plain, (tp_plain, tp_over)
assert tp_over >= tp_plain / 8 * 0.99, (tp_plain, tp_over)
assert over["iteration_time_s"] < plain["iteration_time_s"]
# Compute is unchanged: only communication is hidden.
for k in ("forward_s", "backward_s"):
    assert abs(over["time_breakdown"][k] - plain["time_breakdown"][k]) <= 1e-9 + 1e-6 * plain["time_breakdown"][k], k
PY
# Without sequence parallelism there is nothing to pipeline: exit 2 naming the flag.
set +e
"$bin" run --model llama3-70b --cluster dgx-h100 --gpus 16 --tp 8 --pp 2 --seq 8192 --global-batch 8 \
  --tp-comm-overlap > /dev/null 2> "$tmp/err"
rc=$?
set -e
test "$rc" -eq 2
grep -q -- "--tp-comm-overlap" "$tmp/err"
grep -q "sequence-parallel" "$tmp/err"
echo ok
