#!/usr/bin/env bash
# Bad input of every subcommand and every file format (docs/hardening.md "Bad input"): malformed, truncated,
# binary, huge, negative, NaN/inf and contradictory values exit 2 with a message naming the
# file:line and field or the flag; no crash, no hang, no output file left behind.
# Usage: bash bad_input.sh <trainsim binary> <source dir>
set -uo pipefail
bin="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
# expect <code> <fixed string the stderr must contain> <args...>; 60 s without an answer is a hang.
expect() {
  local code="$1" pattern="$2"; shift 2
  timeout 60 "$bin" "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "exit $rc (want $code) for: $* : $(head -c 2000 "$tmp/err")"
  grep -qF -- "$pattern" "$tmp/err" || fail "stderr lacks '$pattern' for: $* : $(head -c 2000 "$tmp/err")"
}
run=(run --cluster dgx-h100 --gpus 8 --global-batch 8 --seq 2048)

# --- Flags of run (the same rules serve inspect, sweep, chakra export) ---------------------------
base=(--model llama3-8b --cluster dgx-h100 --global-batch 8 --seq 2048)
expect 2 "--gpus: must be between 1 and 2^30" run "${base[@]}" --gpus 1000000000000000000
expect 2 "--gpus" run "${base[@]}" --gpus 99999999999999999999999
expect 2 "--tp: must be > 0" run "${base[@]}" --gpus 8 --tp -8
expect 2 "--micro-batch: must be > 0" run "${base[@]}" --gpus 8 --micro-batch -1
expect 2 "--seq: must be <= 16777216" run --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --seq 99999999999999
expect 2 "--global-batch: must be <= 1073741824" run --model llama3-8b --cluster dgx-h100 --gpus 8 --seq 2048 --global-batch 9223372036854775800
expect 2 "--micro-batch: micro_batch·seq" run --model llama3-8b --cluster dgx-h100 --gpus 8 --seq 16777216 --global-batch 64 --micro-batch 64 --dp 1 --pp 8
expect 2 "--fit: must be in (0, 1]" run "${base[@]}" --gpus 8 --fit nan
expect 2 "--fit: must be in (0, 1]" run "${base[@]}" --gpus 8 --fit inf
expect 2 "--fit" run "${base[@]}" --gpus 8 --fit -0.5
expect 2 "--vpp: must be > 0" run "${base[@]}" --gpus 8 --vpp 0
expect 2 "--zero: must be 0, 1, 2 or 3" run "${base[@]}" --gpus 8 --zero 9
expect 2 "--pp-layers" run "${base[@]}" --gpus 8 --pp 2 --dp 4 --pp-layers 16,x
expect 2 "--pp-layers" run "${base[@]}" --gpus 8 --pp 2 --dp 4 --pp-layers 20,20
expect 2 "--gpus" run "${base[@]}" --gpus 8 --tp 2 --pp 2 --dp 4
expect 2 "--format" run "${base[@]}" --gpus 8 --format xml
expect 2 "--gpus" inspect "${base[@]}" --gpus 0
expect 2 "--tp" inspect "${base[@]}" --gpus 8 --tp 3
# A trace that cannot be written is exit 2 naming the flag, and leaves nothing behind.
expect 2 "--trace" run "${base[@]}" --gpus 8 --zero 3 --trace "$tmp/no-such-dir/t.json"
[ ! -e "$tmp/no-such-dir" ] || fail "trace folder created"

# --- Model files: textproto and JSON -----------------------------------------------------------
model="$src/models/llama3-8b.textproto"
set_field() { sed "s/^$1: .*/$1: $2/" "$model" > "$tmp/$3"; }
set_field num_layers 1000000000 layers.textproto
expect 2 "layers.textproto:9: num_layers: must be <= 65536" "${run[@]}" --model "$tmp/layers.textproto"
set_field hidden 1000000000 hidden.textproto
expect 2 "hidden.textproto:10: hidden: must be <= 262144" "${run[@]}" --model "$tmp/hidden.textproto"
set_field ffn_hidden 9223372036854775807 ffn.textproto
expect 2 "ffn.textproto:13: ffn_hidden: must be <=" "${run[@]}" --model "$tmp/ffn.textproto"
set_field vocab 99999999999999999999 vocab.textproto
expect 2 "vocab.textproto:14" "${run[@]}" --model "$tmp/vocab.textproto"
set_field hidden nan nan.textproto
expect 2 "nan.textproto:10" "${run[@]}" --model "$tmp/nan.textproto"
set_field hidden -inf inf.textproto
expect 2 "inf.textproto:10" "${run[@]}" --model "$tmp/inf.textproto"
set_field num_heads -32 heads.textproto
expect 2 "heads.textproto:11: num_heads: must be > 0" "${run[@]}" --model "$tmp/heads.textproto"
# Contradictory: KV heads that do not divide the heads.
set_field num_kv_heads 7 kv.textproto
expect 2 "kv.textproto:12: num_kv_heads: must divide num_heads" "${run[@]}" --model "$tmp/kv.textproto"
# Truncated in the middle of a line, binary garbage, empty, deeply nested.
head -c 500 "$model" > "$tmp/trunc.textproto"
expect 2 "trunc.textproto" "${run[@]}" --model "$tmp/trunc.textproto"
head -c 4096 /dev/urandom > "$tmp/garbage.textproto"
expect 2 "garbage.textproto" "${run[@]}" --model "$tmp/garbage.textproto"
printf '\x00\x01\xff\xfe\n' > "$tmp/binary.textproto"
expect 2 "binary.textproto:1" "${run[@]}" --model "$tmp/binary.textproto"
: > "$tmp/empty.textproto"
expect 2 "empty.textproto: name: required value is missing" "${run[@]}" --model "$tmp/empty.textproto"
python3 -c "print('a {' * 100000)" > "$tmp/deep.textproto"
expect 2 "deep.textproto:1: nested more than 64 levels deep" "${run[@]}" --model "$tmp/deep.textproto"
truncate -s 65M "$tmp/big.textproto"
expect 2 "big.textproto: file of 68157440 bytes is too large" "${run[@]}" --model "$tmp/big.textproto"
printf 'name: "x"\nhidden: 4096\n' > "$tmp/dup.textproto"; printf 'hidden: 8192\n' >> "$tmp/dup.textproto"
expect 2 "dup.textproto:3" "${run[@]}" --model "$tmp/dup.textproto"
# JSON.
python3 -c "print('[' * 100000)" > "$tmp/deep.json"
expect 2 "deep.json:1: nested more than 64 levels deep" "${run[@]}" --model "$tmp/deep.json"
echo '[1, 2]' > "$tmp/array.json"
expect 2 "array.json:1: expected a JSON object" "${run[@]}" --model "$tmp/array.json"
echo '{"name": "x", "num_layers": 1e400}' > "$tmp/overflow.json"
expect 2 "overflow.json:1: JSON syntax error" "${run[@]}" --model "$tmp/overflow.json"
echo '{"name": "x", "num_layers": NaN}' > "$tmp/nan.json"
expect 2 "nan.json:1: JSON syntax error" "${run[@]}" --model "$tmp/nan.json"
printf '{"name": "x",\n "num_layers": "many"}\n' > "$tmp/type.json"
expect 2 "type.json" "${run[@]}" --model "$tmp/type.json"
printf '{"name": "x", "num_layers": 4' > "$tmp/trunc.json"
expect 2 "trunc.json:1: JSON syntax error" "${run[@]}" --model "$tmp/trunc.json"
head -c 4096 /dev/urandom > "$tmp/garbage.json"
expect 2 "garbage.json" "${run[@]}" --model "$tmp/garbage.json"
# Not a regular file; a file of an unknown type.
expect 2 "--model: no such file" "${run[@]}" --model /dev/zero
expect 2 "--model: no such file" "${run[@]}" --model "$tmp"
expect 2 "unknown file type" "${run[@]}" --model /etc/hostname

# --- Cluster files -----------------------------------------------------------------------------
cluster="$src/topologies/dgx-h100.textproto"
sed 's/peak_bf16_tflops: 989/peak_bf16_tflops: inf/' "$cluster" > "$tmp/inf-cluster.textproto"
expect 2 "gpu.peak_bf16_tflops" run --model llama3-8b --cluster "$tmp/inf-cluster.textproto" --gpus 8 --global-batch 8
sed 's/gpus_per_node: 8/gpus_per_node: -8/' "$cluster" > "$tmp/neg-cluster.textproto"
expect 2 "node.gpus_per_node: must be > 0" run --model llama3-8b --cluster "$tmp/neg-cluster.textproto" --gpus 8 --global-batch 8
sed 's/matmul_efficiency: .*/matmul_efficiency: 1.5/' "$cluster" > "$tmp/eff-cluster.textproto"
expect 2 "gpu.matmul_efficiency: must be in (0, 1]" run --model llama3-8b --cluster "$tmp/eff-cluster.textproto" --gpus 8 --global-batch 8
sed 's/tiers: .*/tiers: 1000000/' "$cluster" > "$tmp/tiers-cluster.textproto"
expect 2 "fabric.tiers: must be 1, 2 or 3" run --model llama3-8b --cluster "$tmp/tiers-cluster.textproto" --gpus 8 --global-batch 8
sed 's/nics_per_node: .*/nics_per_node: 1000000000/' "$cluster" > "$tmp/nics-cluster.textproto"
expect 2 "node.nics_per_node: must be <= 4096" run --model llama3-8b --cluster "$tmp/nics-cluster.textproto" --gpus 8 --global-batch 8
sed 's/nic_bandwidth_gbits: .*/nic_bandwidth_gbits: 1e-300/' "$cluster" > "$tmp/slow-cluster.textproto"
expect 2 "node.nic_bandwidth_gbits: must be >= 0.001" run --model llama3-8b --cluster "$tmp/slow-cluster.textproto" --gpus 64 --global-batch 64
# A valid but absurdly slow NVLink (1 MB/s) under TP 8 with 256k-token sequences makes the
# iteration outlast the simulated clock (int64 ps): an input error, not an internal one.
sed 's/nvlink_bandwidth_gbps: .*/nvlink_bandwidth_gbps: 0.001/' "$cluster" > "$tmp/crawl-cluster.textproto"
expect 2 "beyond the range of the simulated clock" run --model llama3-70b --cluster "$tmp/crawl-cluster.textproto" \
  --gpus 64 --tp 8 --pp 8 --global-batch 64 --zero 1 --seq 262144
head -c 700 "$cluster" > "$tmp/trunc-cluster.textproto"
expect 2 "trunc-cluster.textproto" run --model llama3-8b --cluster "$tmp/trunc-cluster.textproto" --gpus 8 --global-batch 8

# --- Scenario files (trainsim run --scenario is load_scenario; covered by config unit tests) ----

# --- Calibration tables (kernel --gpu FILE, collective --calibration FILE) ---------------------
calib="$src/calibration/H100-SXM5-80GB.textproto"
sed '0,/peak_bf16_tflops: 989/s//peak_bf16_tflops: -989/' "$calib" > "$tmp/neg-calib.textproto"
line="$(grep -n 'peak_bf16_tflops' "$tmp/neg-calib.textproto" | head -1 | cut -d: -f1)"
expect 2 "neg-calib.textproto:$line: datasheet.peak_bf16_tflops: must be > 0" kernel --gpu "$tmp/neg-calib.textproto" --op memory --bytes 1GiB
head -c 3000 "$calib" > "$tmp/trunc-calib.textproto"
expect 2 "trunc-calib.textproto" kernel --gpu "$tmp/trunc-calib.textproto" --op memory --bytes 1GiB
head -c 4096 /dev/urandom > "$tmp/garbage-net.textproto"
expect 2 "garbage-net.textproto" collective --cluster dgx-h100 --gpus 8 --op all_reduce --bytes 1GiB \
  --calibration "$tmp/garbage-net.textproto"

# --- kernel and collective flags ---------------------------------------------------------------
expect 2 "--m: must be > 0" kernel --gpu h100 --op gemm --m -1 --n 8 --k 8
expect 2 "--m: must be <= 16777216" kernel --gpu h100 --op gemm --m 1000000000000000000 --n 8 --k 8
expect 2 "--batch: must be <=" kernel --gpu h100 --op attention --batch 1000000000 --heads 32 --seq 4096 --head-dim 128
expect 2 "--kv-heads: must divide --heads" kernel --gpu h100 --op attention --batch 1 --heads 32 --kv-heads 7 --seq 4096 --head-dim 128
expect 2 "--bytes: must be > 0" kernel --gpu h100 --op memory --bytes nan
expect 2 "--bytes: must be at most 1 PiB" kernel --gpu h100 --op memory --bytes 1e300
expect 2 "--gpu" kernel --gpu no-such-gpu --op memory --bytes 1GiB
expect 2 "--bytes: must be > 0" collective --cluster dgx-h100 --gpus 8 --op all_reduce --bytes -1
expect 2 "--bytes: must be > 0" collective --cluster dgx-h100 --gpus 8 --op all_reduce --bytes inf
expect 2 "--bytes: must be at most 1 PiB" collective --cluster dgx-h100 --gpus 8 --op all_reduce --bytes 1e30
expect 2 "--groups" collective --cluster dgx-h100 --gpus 1000000000000000000 --op all_reduce --bytes 1GiB
expect 2 "--groups: must be >= 1" collective --cluster dgx-h100 --gpus 8 --groups -1 --op all_reduce --bytes 1GiB
expect 2 "--op" collective --cluster dgx-h100 --gpus 8 --op all_reduce_scatter --bytes 1GiB

# --- plan ----------------------------------------------------------------------------------------
expect 2 "--tokens: expected a positive finite number" plan --model llama3-8b --tokens nan --days 1
expect 2 "--days: expected a positive finite number" plan --model llama3-8b --tokens 1e12 --days inf
expect 2 "--days" plan --model llama3-8b --tokens 1e12 --days 0
expect 2 "--budget" plan --model llama3-8b --tokens 1e12 --days 1 --budget -5
expect 2 "--gpus-from: unknown GPU kind" plan --model llama3-8b --tokens 1e12 --days 1 --gpus-from foo
expect 2 "--placement: expected segment or fill" plan --model llama3-8b --tokens 1e12 --days 1 --placement spread
expect 2 "--gpus" plan --model llama3-8b --tokens 1e12 --days 1 --gpus 256,-1
head -c 2000 /dev/urandom > "$tmp/prices.csv"
expect 2 "prices.csv" plan --model llama3-8b --tokens 1e12 --days 1 --prices "$tmp/prices.csv"
expect 2 "--json" plan --model llama3-8b --tokens 1e12 --days 1 --gpus 256 --gpus-from h100 \
  --json "$tmp/no-such-dir/plan.json"

# --- validate: published-runs CSV --------------------------------------------------------------
runs="$src/tests/validation/public-runs.csv"
head -c 1500 "$runs" > "$tmp/trunc-runs.csv"
expect 2 "trunc-runs.csv:" validate --runs "$tmp/trunc-runs.csv"
printf 'a,b\n"unterminated,1\n' > "$tmp/quote.csv"
expect 2 "quote.csv:2" validate --runs "$tmp/quote.csv"
: > "$tmp/empty.csv"
expect 2 "empty.csv: empty file" validate --runs "$tmp/empty.csv"
head -c 4096 /dev/urandom > "$tmp/garbage.csv"
expect 2 "garbage.csv" validate --runs "$tmp/garbage.csv"
python3 - "$runs" "$tmp/huge-runs.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
h = rows[0]
out = [h, rows[1][:]]
out[1][h.index("n_layers")] = "1000000000"
out[1][h.index("n_gpus")] = "1e18"
csv.writer(open(sys.argv[2], "w", newline="")).writerows(out)
PY
expect 2 "huge-runs.csv:2" validate --runs "$tmp/huge-runs.csv"
expect 2 "none.csv: cannot open the file" validate --runs "$tmp/none.csv"
expect 2 "--threads: must be >= 1" validate --runs "$runs" --threads 0

# --- sweep and merge -----------------------------------------------------------------------------
sw=(sweep --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --seq 2048)
expect 2 "--tp: 'x' in '1,x' is not an integer" "${sw[@]}" --tp 1,x
expect 2 "--shard" "${sw[@]}" --shard 3/2
expect 2 "--threads" "${sw[@]}" --threads -1
expect 2 "--gpus" sweep --model llama3-8b --cluster dgx-h100 --gpus 1000000000000000000 --global-batch 8
expect 2 "--seq" "${sw[@]}" --seq 0
head -c 3000 /dev/urandom > "$tmp/garbage-shard.csv"
expect 2 "garbage-shard.csv" merge "$tmp/garbage-shard.csv"
expect 2 "no such file" merge "$tmp/none.csv"
"$bin" "${sw[@]}" --tp 1,2 --out "$tmp/ok.csv" > /dev/null || fail "sweep failed"
sed '2s/^[0-9]*,/x1,/' "$tmp/ok.csv" > "$tmp/cut.csv"
expect 2 "cut.csv:2" merge "$tmp/cut.csv" --out "$tmp/merged.csv"
[ ! -e "$tmp/merged.csv" ] || fail "merge left an output file after an error"
ls "$tmp" | grep -q '\.tmp' && fail "temporary file left behind: $(ls "$tmp")"

# --- Chakra ET import ----------------------------------------------------------------------------
expect 2 "--prefix: no Chakra trace files" chakra import --prefix "$tmp/none" --cluster dgx-h100
head -c 5000 /dev/urandom > "$tmp/garbage.0.et"
expect 2 "garbage.0.et" chakra import --prefix "$tmp/garbage" --cluster dgx-h100
sample="$src/traces/chakra/llama-dp2-tp2-pp2/workload"
if [ -e "$sample.0.et" ]; then
  for r in 0 1 2 3 4 5 6 7; do cp "$sample.$r.et" "$tmp/cut.$r.et"; done
  cp "$sample.json" "$tmp/cut.json"
  head -c "$(($(wc -c < "$sample.0.et") / 2))" "$sample.0.et" > "$tmp/cut.0.et"
  expect 2 "cut.0.et" chakra import --prefix "$tmp/cut" --cluster dgx-h100
  cp "$sample.0.et" "$tmp/cut.0.et"
  echo '{"not a group": [0, 99]}' > "$tmp/cut.json"
  expect 2 "cut.json" chakra import --prefix "$tmp/cut" --cluster dgx-h100
fi
expect 2 "unknown subcommand" chakra frob
expect 2 "no-such-dir/x.0.et" chakra export --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --zero 3 \
  --prefix "$tmp/no-such-dir/x"
ls "$tmp" | grep -q '\.tmp' && fail "temporary file left behind: $(ls "$tmp")"
echo ok
