#!/usr/bin/env bash
# Determinism (DESIGN.md): the same inputs give byte-identical JSON, CSV, Chrome traces (plain and
# gzip), Chakra ET files, sweep CSVs for any thread count and validation CSVs for any thread count.
# Usage: bash determinism.sh <trainsim binary> <source dir>
set -euo pipefail
bin="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
same() { cmp "$1" "$2" || fail "$1 and $2 differ"; }

sc=(--model llama3-8b --cluster dgx-h100 --gpus 16 --tp 2 --pp 2 --dp 4 --global-batch 32
    --micro-batch 1 --seq 2048 --zero 1 --sequence-parallel --recompute selective)
for i in 1 2; do
  "$bin" run "${sc[@]}" --format json --trace "$tmp/trace$i.json" > "$tmp/run$i.json"
  "$bin" run "${sc[@]}" --format csv --trace "$tmp/trace$i.json.gz" > "$tmp/run$i.csv"
  "$bin" run "${sc[@]}" --full --format json > "$tmp/full$i.json"
  "$bin" inspect "${sc[@]}" --format json > "$tmp/inspect$i.json"
  "$bin" chakra export "${sc[@]}" --prefix "$tmp/et$i" > /dev/null
  "$bin" collective --cluster dgx-h100 --gpus 8 --groups 4 --layout strided --op all_reduce \
    --bytes 1GiB --format json > "$tmp/coll$i.json"
done
grep -q '"status": "ok"' "$tmp/run1.json" || fail "scenario not ok: $(head -5 "$tmp/run1.json")"
test -s "$tmp/trace1.json"
for f in run.json run.csv trace.json trace.json.gz full.json inspect.json coll.json; do
  same "$tmp/${f/./1.}" "$tmp/${f/./2.}"
done
n=0
for f in "$tmp"/et1.*; do
  same "$f" "${f/et1./et2.}"
  n=$((n + 1))
done
[ "$n" -ge 3 ] || fail "chakra export wrote $n files"

# A sweep gives the same CSV with 1 and 2 threads (rows are written in plan order).
sw=(sweep --model llama3-8b --cluster dgx-h100 --gpus 16 --global-batch 32 --seq 2048
    --tp 1,2,4,8 --pp 1,2 --micro-batch 1,2 --zero 1,3)
"$bin" "${sw[@]}" --threads 1 --out "$tmp/sweep1.csv" > /dev/null
"$bin" "${sw[@]}" --threads 2 --out "$tmp/sweep2.csv" > /dev/null
same "$tmp/sweep1.csv" "$tmp/sweep2.csv"
[ "$(wc -l < "$tmp/sweep1.csv")" -gt 20 ] || fail "sweep too small"

# Validation rows simulated concurrently give the same CSV and JSON.
head -n 7 "$src/tests/validation/public-runs.csv" > "$tmp/runs.csv"
"$bin" validate --runs "$tmp/runs.csv" --threads 1 --out "$tmp/val1.csv" --format json > "$tmp/val1.json"
"$bin" validate --runs "$tmp/runs.csv" --threads 2 --out "$tmp/val2.csv" --format json > "$tmp/val2.json"
same "$tmp/val1.csv" "$tmp/val2.csv"
same "$tmp/val1.json" "$tmp/val2.json"
echo ok
