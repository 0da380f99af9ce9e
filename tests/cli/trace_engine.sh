#!/usr/bin/env bash
# Loads every scenario trace (tests/trace_engine/scenarios.txt) with the trace engine of Chrome
# DevTools (@paulirish/trace_engine, pinned in tests/trace_engine/package-lock.json) and checks
# the processes, threads, slices and flows it finds (tests/trace_engine/check_trace.mjs). Fails,
# never skips, when Node.js is missing.
set -euo pipefail
bin="$1"
src="$2"
dir="$src/tests/trace_engine"
"$dir/install.sh"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
traces=()
while read -r file flags; do
  [[ -z "$file" || "$file" == \#* ]] && continue
  # shellcheck disable=SC2086
  "$bin" run $flags --trace "$tmp/$file" > /dev/null 2> "$tmp/$file.err"
  traces+=("$tmp/$file")
done < "$dir/scenarios.txt"
((${#traces[@]} >= 7)) || { echo "expected 7 scenarios, found ${#traces[@]}"; exit 1; }

# The default scenario (tools/demo): 64 GPUs as TP 8 × PP 2 × DP 4, replayed as one device per
# pipeline stage: 2 processes; each with compute, TP comm, DP comm and its two pipeline streams
# (stage 0 sends activations and receives gradients, stage 1 the reverse): 10 threads. The
# global batch of 64 over DP 4 in micro-batches of 1 is m = 16 micro-batches, each crossing the
# stage boundary forward and backward: 2·(pp−1)·m = 32 pipeline arrows, all drawn by the engine.
node "$dir/check_trace.mjs" "$tmp/default.json" --processes 2 --threads 10 --flows 32
# --trace-devices 0-3,8 of a --full run writes those 5 devices.
node "$dir/check_trace.mjs" "$tmp/selected.json" --processes 5
for t in "${traces[@]}"; do
  case "$t" in */default.json | */selected.json) continue ;; esac
  node "$dir/check_trace.mjs" "$t"
done
echo "ok"
