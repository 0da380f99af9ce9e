#!/usr/bin/env bash
# The attention implementation of a run: a named calibrated kernel (--attention-kernel) or the
# unfused core (--unfused-attention); their costs order as the kernels' measured speeds, and bad
# choices are input errors naming the flag.
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
iter() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['iteration_time_s'])" "$1"; }
attn() { python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['plan']['attention'])" "$1"; }
# Long sequences on one H100 node: FlashAttention-2 is slower than the default FlashAttention-3.
long=(run --model llama3-8b --cluster dgx-h100 --gpus 8 --tp 8 --seq 32768 --global-batch 1 --format json)
"$bin" "${long[@]}" > "$tmp/fa3.json"
"$bin" "${long[@]}" --attention-kernel FlashAttention-2 > "$tmp/fa2.json"
test "$(attn "$tmp/fa3.json")" = flash
test "$(attn "$tmp/fa2.json")" = FlashAttention-2
python3 -c "import sys; a,b=map(float,sys.argv[1:]); assert b > 1.1*a, (a,b)" "$(iter "$tmp/fa3.json")" "$(iter "$tmp/fa2.json")"
# On A100, FlashAttention-1 and the Triton kernel are slower than FlashAttention-2 (the default),
# and the unfused core is slower still at this length.
a100=(run --model llama2-13b --cluster dgx-a100 --gpus 8 --tp 8 --seq 4096 --global-batch 1 --format json)
"$bin" "${a100[@]}" > "$tmp/a_fa2.json"
"$bin" "${a100[@]}" --attention-kernel FlashAttention-1 > "$tmp/a_fa1.json"
"$bin" "${a100[@]}" --attention-kernel FlashAttention-Triton > "$tmp/a_tri.json"
"$bin" "${a100[@]}" --unfused-attention > "$tmp/a_unf.json"
test "$(attn "$tmp/a_unf.json")" = unfused
python3 - "$(iter "$tmp/a_fa2.json")" "$(iter "$tmp/a_fa1.json")" "$(iter "$tmp/a_tri.json")" "$(iter "$tmp/a_unf.json")" <<'PY'
import sys
fa2, fa1, tri, unf = map(float, sys.argv[1:])
assert fa1 > fa2 and tri > fa2, (fa2, fa1, tri)
assert unf > fa2, (fa2, unf)
PY
# Unfused attention keeps the a·s² scores: more activation memory than flash attention.
python3 - "$tmp/a_fa2.json" "$tmp/a_unf.json" <<'PY'
import json, sys
f, u = (json.load(open(p))["memory_breakdown"]["activations_bytes"] for p in sys.argv[1:])
assert u > f, (f, u)
PY
# Bad choices: exit 2, naming the flag.
expect_error() {
  local flag="$1"; shift
  set +e
  "$bin" "$@" > /dev/null 2> "$tmp/err"
  local rc=$?
  set -e
  test "$rc" -eq 2 || { echo "exit $rc for $*"; cat "$tmp/err"; exit 1; }
  grep -q -- "$flag" "$tmp/err" || { cat "$tmp/err"; exit 1; }
}
expect_error "--attention-kernel" "${long[@]}" --attention-kernel FlashAttention-9
grep -q "known: FlashAttention-2, FlashAttention-3" "$tmp/err"
expect_error "--attention-kernel" "${long[@]}" --attention-kernel FlashAttention-2 --unfused-attention
expect_error "--unfused-attention" run --model llama3-8b --cluster dgx-h100 --gpus 8 --tp 4 --cp 2 \
  --seq 8192 --global-batch 1 --unfused-attention
expect_error "--attention-kernel" sweep --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 \
  --tp 8 --attention-kernel nope
# FP8 attention (--fp8-attention) on GB200, whose cuDNN attention has measured FP8 points: the
# attention runs faster than in bf16, the plan says so, and GPUs or recipes that cannot run it are
# input errors naming the flag.
gb=(run --model llama3-8b --cluster gb200-nvl72 --gpus 8 --seq 8192 --global-batch 16 --micro-batch 2
    --zero 1 --format json)
"$bin" "${gb[@]}" --dtype nvfp4 > "$tmp/gb_bf16.json"
"$bin" "${gb[@]}" --dtype nvfp4 --fp8-attention > "$tmp/gb_fp8.json"
python3 - "$tmp/gb_bf16.json" "$tmp/gb_fp8.json" <<'PY'
import json, sys
b, f = (json.load(open(p)) for p in sys.argv[1:])
assert f["plan"].get("fp8_attention") is True and "fp8_attention" not in b["plan"], (b["plan"], f["plan"])
assert f["iteration_time_s"] < 0.99 * b["iteration_time_s"], (b["iteration_time_s"], f["iteration_time_s"])
PY
expect_error "--fp8-attention" "${gb[@]}" --fp8-attention
expect_error "--fp8-attention" run --model llama3-8b --cluster dgx-h100 --gpus 8 --tp 8 --seq 8192 \
  --global-batch 16 --dtype fp8 --fp8-attention
grep -q "no FP8 attention is calibrated for H100" "$tmp/err"
echo ok
