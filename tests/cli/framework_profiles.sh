#!/usr/bin/env bash
# --framework NAME for run, sweep and plan: the profile's settings apply where no flag is given,
# explicit flags override them, and run prints the settings in effect with their origins.
# Usage: bash framework_profiles.sh <trainsim binary> <source dir>
set -uo pipefail
bin="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
base=(--model llama3-8b --cluster dgx-h100 --gpus 16 --tp 2 --global-batch 64 --seq 4096)

# Every shipped profile runs.
for f in "$src"/frameworks/*.textproto; do
  name="$(basename "$f" .textproto)"
  "$bin" run "${base[@]}" --framework "$name" > "$tmp/$name.txt" || fail "run --framework $name exited $?"
  grep -q "^settings in effect (framework $name, " "$tmp/$name.txt" || fail "$name: no settings section"
done

# torchtitan: its values and sources where no flag is given; an explicit flag wins.
"$bin" run "${base[@]}" --framework torchtitan --elementwise fused --format json > "$tmp/tt.json" \
  || fail "run --framework torchtitan --format json exited $?"
python3 - "$tmp/tt.json" <<'PY' || exit 1
import json, sys
j = json.load(open(sys.argv[1]))
assert j["framework"] == "torchtitan"
s = {x["name"]: x for x in j["settings"]}
assert s["zero"]["value"] == "3" and s["zero"]["origin"] == "framework torchtitan", s["zero"]
assert "data_parallel_shard_degree" in s["zero"]["source"]
assert s["attention"]["value"] == "FlashAttention-2"
assert s["cross-entropy"]["value"] == "fp32-unfused"
assert s["sequence-parallel"]["value"] == "on"
assert s["elementwise"] == {"name": "elementwise", "value": "fused", "origin": "flag --elementwise", "source": ""}, s["elementwise"]
assert s["grad-bucket-params"]["origin"] == "default"
assert j["plan"]["zero_stage"] == 3 and j["plan"]["sequence_parallel"] is True
assert j["plan"]["attention"] == "FlashAttention-2" and j["plan"]["elementwise"] == "fused"
PY

# The profile's values equal the same flags given by hand (same simulation).
"$bin" run "${base[@]}" --framework torchtitan --format csv > "$tmp/a.csv" || fail "csv run exited $?"
"$bin" run "${base[@]}" --zero 3 --sequence-parallel --attention-kernel FlashAttention-2 --cross-entropy fp32-unfused \
  --elementwise eager --no-fp8-weight-cache --format csv > "$tmp/b.csv" || fail "hand-written run exited $?"
cmp -s "$tmp/a.csv" "$tmp/b.csv" || fail "torchtitan profile differs from its flags: $(diff "$tmp/a.csv" "$tmp/b.csv")"

# Megatron-LM at tp 1: sequence parallelism and TP overlap need tp > 1; --sequence-parallel=off wins.
"$bin" run --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 64 --seq 4096 --framework megatron-lm \
  > "$tmp/m1.txt" || fail "megatron-lm at tp 1 exited $?"
grep -q "^  tp-comm-overlap .* off .*framework megatron-lm (needs tp > 1" "$tmp/m1.txt" || fail "tp 1 overlap: $(grep tp-comm "$tmp/m1.txt")"
"$bin" run "${base[@]}" --framework mcore --sequence-parallel=off > "$tmp/m2.txt" || fail "--sequence-parallel=off exited $?"
grep -q "^  sequence-parallel .* off .*flag --sequence-parallel" "$tmp/m2.txt" || fail "sp override: $(grep sequence-par "$tmp/m2.txt")"

# Without --framework the report has no settings section.
"$bin" run "${base[@]}" > "$tmp/plain.txt" || fail "plain run exited $?"
grep -q "settings in effect" "$tmp/plain.txt" && fail "a run without --framework prints settings"

# Sweep: the profile's ZeRO stage and recompute modes are the axes.
"$bin" sweep --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 32 --seq 2048 --tp 1,2 --pp 1 \
  --micro-batch 1 --framework torchtitan --out "$tmp/sweep.csv" > /dev/null 2>&1 || fail "sweep --framework exited $?"
python3 - "$tmp/sweep.csv" <<'PY' || exit 1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
assert rows, "no sweep rows"
assert {r["zero"] for r in rows} == {"3"}, {r["zero"] for r in rows}
assert {r["recompute"] for r in rows} == {"none", "selective-op", "full"}, {r["recompute"] for r in rows}
assert {r["attention"] for r in rows} == {"FlashAttention-2"}
assert {r["elementwise"] for r in rows} == {"eager"}
PY
# An explicit axis wins over the profile.
"$bin" sweep --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 32 --seq 2048 --tp 1 --pp 1 \
  --micro-batch 1 --framework torchtitan --zero 1 --recompute full --out "$tmp/sweep2.csv" > /dev/null 2>&1 \
  || fail "sweep --framework --zero exited $?"
python3 -c "
import csv, sys
rows = list(csv.DictReader(open('$tmp/sweep2.csv', newline='')))
assert {r['zero'] for r in rows} == {'1'} and {r['recompute'] for r in rows} == {'full'}, rows
" || fail "sweep axes did not override the profile"

# Plan takes it too.
"$bin" plan --model llama3-8b --tokens 1e10 --days 10 --gpus-from h100 --gpus 8,16 --framework composer --threads 2 \
  > "$tmp/plan.txt" 2>&1 || fail "plan --framework exited $?: $(tail -3 "$tmp/plan.txt")"
grep -q "zero3" "$tmp/plan.txt" || fail "plan did not take composer's ZeRO-3: $(grep -i 'plan' "$tmp/plan.txt" | head -3)"

# DeepSpeed's pipeline engine refuses ZeRO-2 and ZeRO-3: run says so naming --zero, a sweep
# rejects those plans with pp > 1 and keeps them without a pipeline.
"$bin" run --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 32 --seq 2048 --pp 2 --zero 3 \
  --framework deepspeed > "$tmp/out" 2> "$tmp/err"
[ $? -eq 2 ] || fail "deepspeed with ZeRO-3 and pp 2 did not exit 2"
[ -s "$tmp/out" ] && fail "a refused run wrote a report"
grep -q -- "--zero: framework deepspeed runs ZeRO stages up to 1 only with pipeline parallelism" "$tmp/err" || fail "$(cat "$tmp/err")"
"$bin" run --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 32 --seq 2048 --pp 2 --zero 1 \
  --framework deepspeed > /dev/null 2>&1 || fail "deepspeed with ZeRO-1 and pp 2 exited $?"
"$bin" sweep --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 32 --seq 2048 --tp 1 --pp 1,2 \
  --micro-batch 1 --zero 0,1,2,3 --framework deepspeed --exhaustive --out "$tmp/ds.csv" > "$tmp/ds.txt" 2>&1 \
  || fail "sweep --framework deepspeed exited $?"
grep -q -- "--zero: the framework runs higher ZeRO stages without pipeline parallelism only" "$tmp/ds.txt" \
  || fail "the sweep names no rule for ZeRO-2/3 in a pipeline: $(head -8 "$tmp/ds.txt")"
python3 - "$tmp/ds.csv" <<'PY' || exit 1
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1], newline="")))
pairs = {(r["pp"], r["zero"]) for r in rows}
assert ("1", "3") in pairs and ("2", "1") in pairs, pairs
assert not any(pp != "1" and int(z) >= 2 for pp, z in pairs), pairs
PY

# Bad input: an unknown name lists the known ones; a bad switch value names its flag.
"$bin" run "${base[@]}" --framework maxtext > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] || fail "unknown framework did not exit 2"
grep -q -- "--framework: unknown framework 'maxtext' (known: accelerate, colossal-ai, composer, deepspeed" "$tmp/err" || fail "$(cat "$tmp/err")"
"$bin" run "${base[@]}" --sequence-parallel=maybe > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] || fail "--sequence-parallel=maybe did not exit 2"
grep -q -- "--sequence-parallel" "$tmp/err" || fail "$(cat "$tmp/err")"
exit 0
