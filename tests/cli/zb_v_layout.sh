#!/usr/bin/env bash
# --schedule zb-v and --pp-layout end to end: ZB-V runs the issue's example faster than 1F1B with
# the same work and names its weight-gradient blocks and V transfers in the trace; a sweep takes
# it as an axis; a layout equal to the even split gives 1F1B's output byte for byte, an
# embedding-only first stage runs, a scenario file takes pp_layout, and bad layouts exit 2
# naming the flag and the position.
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
run=(run --model llama3-70b --cluster dgx-h100 --gpus 64 --tp 8 --pp 8 --global-batch 16 --format json)
for s in 1f1b zb-v; do "$bin" "${run[@]}" --schedule "$s" > "$tmp/$s.json"; done
python3 - "$tmp" <<'PY'
import json, sys
r = {s: json.load(open(f"{sys.argv[1]}/{s}.json")) for s in ("1f1b", "zb-v")}
assert r["zb-v"]["status"] == "ok" and r["zb-v"]["plan"]["schedule"] == "zb-v"
assert r["zb-v"]["iteration_time_s"] < 0.97 * r["1f1b"]["iteration_time_s"], r["zb-v"]["iteration_time_s"]
assert r["zb-v"]["model_flops_per_iteration"] == r["1f1b"]["model_flops_per_iteration"]
PY
small=(run --model llama3-8b --cluster dgx-h100 --gpus 8 --tp 2 --pp 4 --global-batch 8)
"$bin" "${small[@]}" --schedule zb-v --trace "$tmp/zbv.json" > /dev/null
grep -q '"pass":"wgrad"' "$tmp/zbv.json"
grep -q 'PP recv from next (V activations)' "$tmp/zbv.json"
"$bin" sweep --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --tp 2 --pp 4 \
  --micro-batch 1 --schedule 1f1b,zb-v --out "$tmp/sweep.csv" > /dev/null 2>&1
grep -q ",zb-v," "$tmp/sweep.csv"
# A layout that spells the even split changes nothing but the plan's description, which names it.
"$bin" "${small[@]}" > "$tmp/even.txt"
"$bin" "${small[@]}" --pp-layout 'Et*8|(t*8|)*2t*8L' > "$tmp/layout.txt"
grep -q "layout Et\*8|(t\*8|)\*2t\*8L" "$tmp/layout.txt"
cmp <(grep -v "^  *1f1b, " "$tmp/even.txt") <(grep -v "^  *1f1b, " "$tmp/layout.txt")
# The embedding alone on the first stage; a V layout of 2·pp stages.
"$bin" "${small[@]}" --pp-layout 'E|t*12|t*10|t*10L' > /dev/null
"$bin" "${small[@]}" --schedule zb-v --pp-layout 'E|(t*4|)*5t*8|t*4L' > /dev/null
bad() {  # layout, text expected in the message
  set +e
  "$bin" "${small[@]}" --pp-layout "$1" > /dev/null 2> "$tmp/err"
  local rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "expected exit 2 for '$1', got $rc"; exit 1; }
  grep -q -- "--pp-layout" "$tmp/err" || { cat "$tmp/err"; exit 1; }
  grep -q -- "$2" "$tmp/err" || { cat "$tmp/err"; exit 1; }
}
bad 'Et*8|t*8|x|t*8L' "position 10"
bad 'Et*8|(t*8|t*8|t*8L' "position 6"
bad 'Et*8|t*8|t*8L' "lists 3 stages"
bad 'Et*8|t*8|t*8|t*7L' "has 31 't' layers"
echo ok
