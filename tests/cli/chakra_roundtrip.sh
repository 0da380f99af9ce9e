#!/usr/bin/env bash
# Chakra round trip: `trainsim chakra export` writes every rank of a run, `trainsim chakra import`
# replays the files on the same cluster; the iteration time must match `run --full` within 1%
# (with recorded durations and with --recost), and so must the peak memory.
# Usage: bash chakra_roundtrip.sh <trainsim binary> <source dir>
set -uo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# First value of a top-level JSON key in a report.
value() { grep -m1 "\"$1\":" "$2" | sed -E 's/.*: *"?([^",]*)"?,?$/\1/'; }
# within <a> <b> <relative tolerance>
within() { awk -v a="$1" -v b="$2" -v t="$3" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= t * b) }'; }

check() {  # check <name> <run flags...>
  local name="$1"; shift
  local dir="$tmp/$name"
  mkdir -p "$dir"
  "$bin" run "$@" --full --format json > "$dir/run.json" 2> "$dir/err" || fail "$name: run: $(cat "$dir/err")"
  [ "$(value status "$dir/run.json")" = ok ] || fail "$name: run status $(value status "$dir/run.json")"
  "$bin" chakra export "$@" --prefix "$dir/w" --format json > "$dir/export.json" 2> "$dir/err" \
    || fail "$name: export: $(cat "$dir/err")"
  local gpus
  gpus="$(value num_gpus "$dir/run.json")"
  for ((r = 0; r < gpus; r++)); do [ -s "$dir/w.$r.et" ] || fail "$name: no file for rank $r"; done
  [ ! -e "$dir/w.$gpus.et" ] || fail "$name: more files than ranks"
  [ -s "$dir/w.json" ] || fail "$name: no process group file"
  local cluster
  cluster="$(value cluster "$dir/run.json")"
  "$bin" chakra import --prefix "$dir/w" --cluster "$cluster" --format json > "$dir/import.json" 2> "$dir/err" \
    || fail "$name: import: $(cat "$dir/err")"
  "$bin" chakra import --prefix "$dir/w" --cluster "$cluster" --recost --format json > "$dir/recost.json" 2> "$dir/err" \
    || fail "$name: import --recost: $(cat "$dir/err")"
  local t_run t_imp t_rec
  t_run="$(value iteration_time_s "$dir/run.json")"
  t_imp="$(value iteration_time_s "$dir/import.json")"
  t_rec="$(value iteration_time_s "$dir/recost.json")"
  within "$t_imp" "$t_run" 0.01 || fail "$name: import $t_imp s vs run $t_run s"
  within "$t_rec" "$t_run" 0.01 || fail "$name: import --recost $t_rec s vs run $t_run s"
  within "$(value peak_memory_bytes "$dir/import.json")" "$(value peak_memory_bytes "$dir/run.json")" 0.01 \
    || fail "$name: peak memory differs"
  within "$(value mfu "$dir/import.json")" "$(value mfu "$dir/run.json")" 0.01 || fail "$name: MFU differs"
  echo "$name: run $t_run s, import $t_imp s, recost $t_rec s"
}

base=(--model llama3-8b --cluster dgx-h100 --gpus 8 --seq 4096 --global-batch 16)
check tp-pp-dp "${base[@]}" --tp 2 --pp 2 --dp 2 --zero 1 --sequence-parallel
check ring-cp "${base[@]}" --tp 2 --cp 2 --pp 2 --cp-algo ring
check interleaved "${base[@]}" --tp 2 --pp 4 --vpp 2 --schedule interleaved --zero 1
check zero3-a100 --model llama3-8b --cluster dgx-a100 --gpus 16 --seq 2048 --global-batch 32 --tp 4 --dp 4 --zero 3
# Latent attention (MLA): queries and keys at head_dim + rope_head_dim, values at head_dim; the
# files carry both dimensions.
printf 'name: "mla-small"\nnum_layers: 4\nhidden: 1024\nnum_heads: 8\nnum_kv_heads: 8\nhead_dim: 128\nffn_hidden: 2816\nvocab: 32000\nmax_seq_len: 4096\nnorm: "rmsnorm"\nactivation: "swiglu"\nposition: "rope"\ntied_embeddings: false\nlinear_bias: false\nmla {\n  q_lora_rank: 384\n  kv_lora_rank: 256\n  rope_head_dim: 64\n}\n' > "$tmp/mla.textproto"
check mla --model "$tmp/mla.textproto" --cluster dgx-h100 --gpus 4 --seq 4096 --global-batch 8 --tp 2 --dp 2 --zero 1 --sequence-parallel
grep -q "attention bf16 0 [0-9]* [0-9]* [0-9]* [0-9]* [0-9]* 192 1 0 128" "$tmp/mla/w.0.et" \
  || fail "mla: the exported attention has no value head dimension"

# Recost on another GPU: the same files replayed on A100s take longer than on H100s.
dir="$tmp/tp-pp-dp"
"$bin" chakra import --prefix "$dir/w" --cluster dgx-a100 --recost --format json > "$dir/a100.json" \
  || fail "import on dgx-a100"
awk -v a="$(value iteration_time_s "$dir/a100.json")" -v h="$(value iteration_time_s "$dir/import.json")" \
  'BEGIN { exit !(a > 1.5 * h) }' || fail "recost on A100 is not slower than H100"
# Without --recost the recorded (H100) compute durations are kept: faster than the A100 recost.
"$bin" chakra import --prefix "$dir/w" --cluster dgx-a100 --format json > "$dir/a100-recorded.json" \
  || fail "import on dgx-a100 without recost"
awk -v r="$(value iteration_time_s "$dir/a100-recorded.json")" -v a="$(value iteration_time_s "$dir/a100.json")" \
  'BEGIN { exit !(r < a) }' || fail "recorded durations are not used without --recost"

# Text report and Chrome trace, as for run.
"$bin" chakra import --prefix "$dir/w" --cluster dgx-h100 --trace "$dir/t.json" > "$dir/import.txt" \
  || fail "import with --trace"
grep -q "iteration time" "$dir/import.txt" || fail "text report lacks the iteration time"
grep -q '"traceEvents"' "$dir/t.json" || fail "Chrome trace not written"
echo ok
