#!/usr/bin/env bash
# Bad flags exit 2 with a message naming the flag; nothing is written.
set -uo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # expect <code> <pattern> <args...>
  local code="$1" pattern="$2"; shift 2
  "$bin" "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "exit $rc (want $code) for: $* : $(cat "$tmp/err")"
  grep -q -- "$pattern" "$tmp/err" || fail "stderr lacks '$pattern' for: $* : $(cat "$tmp/err")"
}
base=(run --model llama3-70b --cluster dgx-h100 --gpus 64 --global-batch 64 --seq 8192)
expect 2 "--tp" "${base[@]}" --tp 7 --pp 1
expect 2 "--tp" "${base[@]}" --tp abc
expect 2 "--schedule" "${base[@]}" --tp 8 --schedule zigzag
expect 2 "--grad-reduce" "${base[@]}" --tp 8 --grad-reduce fp16
expect 2 "--frobnicate" "${base[@]}" --frobnicate 3
expect 2 "--host-dispatch-us" "${base[@]}" --tp 8 --host-dispatch-us -5
expect 2 "--host-dispatch-us" "${base[@]}" --tp 8 --host-dispatch-us nan
expect 2 "--host-dispatch-us" validate --runs "$(dirname "$0")/../validation/public-runs.csv" --host-dispatch-us 2e6
expect 2 "--global-batch" "${base[@]}" --tp 8 --pp 2 --dp 4 --micro-batch 3
expect 2 "--gpus-per-domain.*multiple of 4" run --model llama3-8b --cluster gb200-nvl72 --gpus 8 \
  --global-batch 8 --gpus-per-domain 70
expect 2 "--gpus-per-domain.*\[1, 8\]" "${base[@]}" --tp 8 --gpus-per-domain 16
sweep=(sweep --model llama3-8b --cluster dgx-h100 --gpus 16 --global-batch 32 --tp 1 --pp 1 --zero 3)
expect 2 "--zero-shard-group" "${sweep[@]}" --zero-shard-group 8,-2
expect 2 "--zero-shard-group" "${sweep[@]}" --zero-shard-group eight
expect 2 "model" run --model no-such-model --cluster dgx-h100 --gpus 8 --global-batch 8
expect 2 "unknown command" frobnicate
# Several problems at once.
"$bin" "${base[@]}" --tp 7 --schedule zigzag > /dev/null 2> "$tmp/err"
[ "$(grep -c '^error:' "$tmp/err")" -ge 2 ] || fail "expected every problem reported: $(cat "$tmp/err")"
# A failed run writes no trace.
"$bin" "${base[@]}" --tp 7 --trace "$tmp/t.json" > /dev/null 2>&1
[ ! -e "$tmp/t.json" ] || fail "trace written for a bad run"
echo ok
