#!/usr/bin/env bash
# Prediction intervals (docs/intervals.md): run's JSON and text carry them, --no-interval drops
# them; validate's rows and summary report them and their coverage; sweep ranks by their
# midpoint or low end; a bad --rank-by exits 2.
# Usage: bash intervals.sh <trainsim binary> <source dir>
set -uo pipefail
bin="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
plan=(--model llama3-8b --cluster dgx-h100 --gpus 16 --tp 2 --pp 2 --global-batch 32 --seq 4096)

"$bin" run "${plan[@]}" --format json > "$tmp/run.json" || fail "run --format json exited $?"
"$bin" run "${plan[@]}" --format json --no-interval > "$tmp/plain.json" || fail "run --no-interval exited $?"
python3 - "$tmp/run.json" "$tmp/plain.json" <<'PY' || exit 1
import json, sys
r = json.load(open(sys.argv[1]))
p = json.load(open(sys.argv[2]))
t, tok = r["iteration_time_s"], r["tokens_per_s"]
lo, hi = r["iteration_time_interval_s"]
assert 0 < lo < t < hi, (lo, t, hi)
tlo, thi = r["tokens_per_s_interval"]
# tokens/s = tokens / time: the throughput's ends are the time's, swapped.
assert abs(tlo * hi - tok * t) < 1e-6 * tok * t and abs(thi * lo - tok * t) < 1e-6 * tok * t, (tlo, thi)
assert p["iteration_time_interval_s"] is None and p["tokens_per_s_interval"] is None
# The intervals' replays leave the prediction itself unchanged.
assert p["iteration_time_s"] == t, (p["iteration_time_s"], t)
PY
"$bin" run "${plan[@]}" > "$tmp/run.txt" || fail "run exited $?"
grep -Eq "^  iteration time .* s  interval [0-9.]+ - [0-9.]+$" "$tmp/run.txt" || fail "text lacks the time interval"
grep -Eq "^  throughput .* tokens/s  interval [0-9]+ - [0-9]+$" "$tmp/run.txt" || fail "text lacks the throughput interval"
"$bin" run "${plan[@]}" --no-interval | grep -q interval && fail "--no-interval still prints an interval"

# validate: rows with intervals in the metric's unit, coverage in the summary.
runs="$src/tests/validation/heldout-style-5.csv"
"$bin" validate --runs "$src/tests/validation/public-runs.csv" --held-out "$runs" --format json --threads 2 \
  --out "$tmp/rows.csv" > "$tmp/val.json" || fail "validate exited $?"
python3 - "$tmp/val.json" "$tmp/rows.csv" <<'PY' || exit 1
import csv, json, sys
d = json.load(open(sys.argv[1]))
rows = [r for r in d["rows"] if r["interval"] is not None]
assert len(rows) > 150, len(rows)
for r in rows:
    lo, hi = r["interval"]
    ilo, ihi = r["input_interval"]
    # The conformal factors widen the inputs' range on the slow side (trainsim is optimistic).
    assert 0 < lo <= hi and ilo <= r["predicted"] <= ihi, r
cov = d["summary"]["interval_coverage"]
for s in ("all", "public", "held-out"):
    c = cov[s]
    assert 0 <= c["coverage"] <= 1 and c["median_relative_width"] > 0, (s, c)
inside = sum(1 for r in rows if r["interval"][0] <= r["measured"] <= r["interval"][1])
assert inside == round(cov["all"]["coverage"] * cov["all"]["n"]), (inside, cov["all"])
# Fitted on the public rows to 80 % (order statistics of 152 scores: at least 80 %).
assert cov["public"]["coverage"] >= 0.8, cov["public"]
assert d["summary"]["input_interval_coverage"]["public"]["coverage"] < cov["public"]["coverage"]
out = list(csv.DictReader(open(sys.argv[2], newline="")))
with_iv = [r for r in out if r["interval_low"]]
assert len(with_iv) == len(rows), (len(with_iv), len(rows))
PY
"$bin" validate --runs "$runs" > "$tmp/val.txt" || fail "validate (text) exited $?"
grep -q "^Prediction intervals" "$tmp/val.txt" || fail "text summary lacks the coverage"
grep -q "calibrated: all" "$tmp/val.txt" || fail "text summary lacks the calibrated coverage"
"$bin" validate --runs "$runs" --no-intervals > "$tmp/plain.txt" || fail "validate --no-intervals exited $?"
grep -q "interval" "$tmp/plain.txt" && fail "--no-intervals still reports intervals"

# sweep --rank-by: the best plans by the low end of their interval, with the intervals.
sweep=(sweep --model llama3-8b --cluster dgx-h100 --gpus 16 --global-batch 32 --seq 4096 --tp 1,2,4 --pp 1,2 --top 3)
"$bin" "${sweep[@]}" --rank-by low > "$tmp/sweep.txt" || fail "sweep --rank-by low exited $?"
grep -q "by the low end of the tokens/s interval, among the best 9" "$tmp/sweep.txt" || fail "no ranking line: $(cat "$tmp/sweep.txt")"
[ "$(grep -c '^  [0-9]: [0-9]* - [0-9]* (plan [0-9]*)$' "$tmp/sweep.txt")" -eq 3 ] || fail "no interval lines: $(cat "$tmp/sweep.txt")"
"$bin" "${sweep[@]}" --rank-by mid --format json > "$tmp/sweep.json" || fail "sweep --rank-by mid exited $?"
python3 - "$tmp/sweep.json" <<'PY' || exit 1
import json, sys
d = json.load(open(sys.argv[1]))
assert d["rank_by"] == "mid"
mids = [sum(r["tokens_per_s_interval"]) / 2 for r in d["top"]]
assert len(mids) == 3 and mids == sorted(mids, reverse=True), mids
PY
"$bin" "${sweep[@]}" > "$tmp/point.txt" || fail "sweep exited $?"
grep -q interval "$tmp/point.txt" && fail "the default ranking prints intervals"
"$bin" "${sweep[@]}" --rank-by best > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] || fail "--rank-by best did not exit 2"
grep -q -- "--rank-by" "$tmp/err" || fail "error does not name --rank-by: $(cat "$tmp/err")"
echo "ok"
