#!/usr/bin/env bash
# Bad input files and plans exit 2 with messages naming file:line and field, or the flag;
# every problem of a file is reported at once.
# Usage: bash config_errors.sh <trainsim binary> <source dir>
set -uo pipefail
bin="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# expect <code> <fixed string the stderr must contain> <args...>
expect() {
  local code="$1" pattern="$2"; shift 2
  "$bin" "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "exit $rc (want $code) for: $* : $(cat "$tmp/err")"
  grep -qF -- "$pattern" "$tmp/err" || fail "stderr lacks '$pattern' for: $* : $(cat "$tmp/err")"
}

# A model file with two bad values (lines 3 and 9) and an unknown field (line 12).
cat > "$tmp/bad-model.textproto" <<'MODEL'
name: "bad"
num_layers: 4
hidden: -256
num_heads: 8
ffn_hidden: 1024
vocab: 1000
max_seq_len: 512
norm: "rmsnorm"
activation: "relu"
position: "rope"
tied_embeddings: false
linear_bia: false
MODEL
run=(run --cluster dgx-h100 --gpus 8 --global-batch 8 --seq 512)
expect 2 "$tmp/bad-model.textproto:3: hidden: must be > 0" "${run[@]}" --model "$tmp/bad-model.textproto"
grep -qF -- "$tmp/bad-model.textproto:9: activation: unknown value 'relu'" "$tmp/err" \
  || fail "second problem of the file not reported: $(cat "$tmp/err")"
grep -qF -- "$tmp/bad-model.textproto:12: linear_bia: unknown field" "$tmp/err" \
  || fail "unknown field not reported with its line: $(cat "$tmp/err")"

# A syntax error names the file and line.
printf 'name: "x"\nnum_layers: 4\nhidden {\n' > "$tmp/syntax.textproto"
expect 2 "$tmp/syntax.textproto:3" "${run[@]}" --model "$tmp/syntax.textproto"

# A broken cluster file: field path of the nested value.
sed 's/nvlink_bandwidth_gbps: 450/nvlink_bandwidth_gbps: 0/' "$src/topologies/dgx-h100.textproto" \
  > "$tmp/bad-cluster.textproto"
line="$(grep -n 'nvlink_bandwidth_gbps' "$tmp/bad-cluster.textproto" | cut -d: -f1)"
expect 2 "$tmp/bad-cluster.textproto:$line: node.nvlink_bandwidth_gbps: must be > 0" \
  run --model llama3-8b --cluster "$tmp/bad-cluster.textproto" --gpus 8 --global-batch 8

# Plan rules name the flag: --tp not dividing llama3-70b's 64 heads.
plan=(run --model llama3-70b --cluster dgx-h100 --global-batch 64 --seq 8192)
expect 2 "--tp: must divide the number of attention heads" "${plan[@]}" --gpus 24 --tp 3 --pp 8 --dp 1
# tp·pp·dp·cp ≠ GPUs, fp8 on A100, --pp not dividing the layers: all reported together.
expect 2 "--gpus" "${plan[@]}" --gpus 64 --tp 8 --pp 4 --dp 4
"$bin" run --model llama3-70b --cluster dgx-a100 --global-batch 64 --seq 8192 --gpus 24 --tp 8 \
  --pp 3 --dp 1 --dtype fp8 > /dev/null 2> "$tmp/err"
rc=$?
[ "$rc" -eq 2 ] || fail "exit $rc (want 2) for fp8 on A100 with pp 3"
grep -qF -- "--dtype" "$tmp/err" || fail "fp8 on A100 not reported: $(cat "$tmp/err")"
grep -qF -- "--pp" "$tmp/err" || fail "pp not dividing 80 layers not reported: $(cat "$tmp/err")"

# Unknown zoo name lists the zoo.
expect 2 "llama3-405b" run --model llama9 --cluster dgx-h100 --gpus 8 --global-batch 8
echo ok
