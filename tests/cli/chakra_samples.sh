#!/usr/bin/env bash
# The Chakra traces of ASTRA-sim's symbolic tensor graph generator (traces/chakra) import and
# simulate; malformed input exits 2 naming the file, the byte offset or the flag.
# Usage: bash chakra_samples.sh <trainsim binary> <source dir>
set -uo pipefail
bin="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
value() { grep -m1 "\"$1\":" "$2" | sed -E 's/.*: *"?([^",]*)"?,?$/\1/'; }
expect() {  # expect <code> <fixed string the stderr must contain> <args...>
  local code="$1" pattern="$2"; shift 2
  "$bin" "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "exit $rc (want $code) for: $* : $(cat "$tmp/err")"
  grep -qF -- "$pattern" "$tmp/err" || fail "stderr lacks '$pattern' for: $* : $(cat "$tmp/err")"
}
sample="$src/traces/chakra/llama-dp2-tp2-pp2"

"$bin" chakra import --prefix "$sample/workload" --cluster dgx-h100 --format json --trace "$tmp/t.json.gz" \
  > "$tmp/h100.json" 2> "$tmp/err" || fail "import: $(cat "$tmp/err")"
[ "$(value status "$tmp/h100.json")" = ok ] || fail "status $(value status "$tmp/h100.json")"
[ "$(value num_gpus "$tmp/h100.json")" = 8 ] || fail "8 ranks expected"
t="$(value iteration_time_s "$tmp/h100.json")"
# ASTRA-sim's analytical backend (roofline of 700 TFLOP/s and 3350 GB/s, 400 GB/s links) puts the
# iteration at 49.97 ms (traces/chakra/README.md); calibrated H100 kernels and NVSwitch must land
# within a factor of two of it.
awk -v t="$t" 'BEGIN { exit !(t > 0.025 && t < 0.100) }' || fail "iteration time $t s far from ASTRA-sim's 0.050 s"
# As in ASTRA-sim (49.97 ms vs 40.13 ms), the first pipeline stage (ranks 0-3) finishes last.
ends=($(grep '"end_time_s"' "$tmp/h100.json" | sed -E 's/.*: *([0-9.e+-]+).*/\1/'))
[ "${#ends[@]}" -eq 8 ] || fail "expected 8 device end times"
for r in 0 1 2 3; do
  for s in 4 5 6 7; do
    awk -v a="${ends[$r]}" -v b="${ends[$s]}" 'BEGIN { exit !(a > b) }' || fail "rank $r ends before rank $s"
  done
done
[ -s "$tmp/t.json.gz" ] || fail "no Chrome trace"
gzip -dc "$tmp/t.json.gz" > "$tmp/t.json" || fail "Chrome trace is not gzip"
grep -q '"traceEvents"' "$tmp/t.json" || fail "Chrome trace is not a trace"

# The same trace is slower on A100s: compute nodes carry FLOPs and bytes, costed per GPU.
"$bin" chakra import --prefix "$sample/workload" --cluster dgx-a100 --format json > "$tmp/a100.json" \
  || fail "import on dgx-a100"
awk -v a="$(value iteration_time_s "$tmp/a100.json")" -v h="$t" 'BEGIN { exit !(a > 1.5 * h) }' \
  || fail "A100 not slower than H100"
"$bin" chakra import --prefix "$sample/workload" --cluster dgx-h100 > "$tmp/out.txt" || fail "text report"
grep -q "rank end times" "$tmp/out.txt" || fail "text report lacks the rank end times"

# Malformed inputs.
mkdir -p "$tmp/cut"
cp "$sample"/workload.* "$tmp/cut/"
chmod u+w "$tmp/cut"/*
head -c 50000 "$sample/workload.3.et" > "$tmp/cut/workload.3.et"
expect 2 "workload.3.et: byte " chakra import --prefix "$tmp/cut/workload" --cluster dgx-h100
expect 2 "truncated" chakra import --prefix "$tmp/cut/workload" --cluster dgx-h100
cp "$sample/workload.3.et" "$tmp/cut/"
rm "$tmp/cut/workload.json"
expect 2 "process group" chakra import --prefix "$tmp/cut/workload" --cluster dgx-h100
"$bin" chakra import --prefix "$tmp/cut/workload" --cluster dgx-h100 --comm-groups "$sample/workload.json" \
  > /dev/null 2> "$tmp/err" || fail "--comm-groups not used: $(cat "$tmp/err")"
rm "$tmp/cut/workload.5.et"
expect 2 "workload.5.et" chakra import --prefix "$tmp/cut/workload" --cluster dgx-h100 --comm-groups "$sample/workload.json"
expect 2 "--gpus" chakra import --prefix "$sample/workload" --cluster dgx-h100 --gpus 16
expect 2 "--prefix" chakra import --prefix "$tmp/none/workload" --cluster dgx-h100
expect 2 "unknown subcommand" chakra frobnicate
echo ok
