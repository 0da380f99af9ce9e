#!/usr/bin/env bash
# trainsim validate: the public set in text, JSON and CSV; rows it cannot simulate are listed with
# a reason; a missing column, a malformed row or a missing file exits 2 naming it.
# Usage: bash validate_cli.sh <trainsim binary> <source dir>
set -uo pipefail
bin="$1"
src="$2"
runs="$src/tests/validation/public-runs.csv"
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

# JSON report and CSV file on the public set.
"$bin" validate --runs "$runs" --format json --out "$tmp/rows.csv" --threads 2 > "$tmp/report.json" \
  || fail "validate --format json exited $?"
python3 - "$runs" "$tmp/report.json" "$tmp/rows.csv" <<'PY' || exit 1
import csv, json, sys
runs = list(csv.DictReader(open(sys.argv[1], newline="")))
report = json.load(open(sys.argv[2]))
rows = report["rows"]
s = report["summary"]
assert len(rows) == len(runs), (len(rows), len(runs))
for k in ["n", "skipped", "median_abs_error", "p90_abs_error", "by_source", "by_gpu", "by_parallelism", "memory"]:
    assert k in s, k
compared = [r for r in rows if r["status"] == "compared"]
skipped = [r for r in rows if r["status"] == "skipped"]
assert len(compared) + len(skipped) == len(rows)
assert s["skipped"] == len(skipped), (s["skipped"], len(skipped))
assert all(r["reason"] for r in skipped), "a skipped row without reason"
with_metric = [r for r in compared if r["metric"] is not None]
assert s["n"] == len(with_metric), (s["n"], len(with_metric))
for r in with_metric:
    assert r["metric"] in ["iteration_time_s", "tokens_per_s", "tokens_per_s_per_gpu", "tflops_per_gpu",
                           "mfu_pct", "hfu_pct"], r["metric"]
    assert r["predicted"] > 0 and r["measured"] > 0, r
# The metric order: iteration time first, then tokens/s, then TFLOP/s, then MFU.
by_id = {r["run_id"]: r for r in rows}
for run in runs:
    r = by_id[run["run_id"]]
    if r["status"] != "compared" or r["metric"] is None:
        continue
    if run["iter_time_s"]:
        assert r["metric"] == "iteration_time_s", (run["run_id"], r["metric"])
    elif run["tokens_per_s"]:
        assert r["metric"] == "tokens_per_s", (run["run_id"], r["metric"])
    elif run["tflops_per_gpu"]:
        assert r["metric"] == "tflops_per_gpu", (run["run_id"], r["metric"])
errors = sorted(abs(r["error"]) for r in with_metric)
assert abs(s["median_abs_error"] - (errors[(len(errors) - 1) // 2] + errors[len(errors) // 2]) / 2) < 1e-9
out = list(csv.DictReader(open(sys.argv[3], newline="")))
assert len(out) == len(runs)
assert [r["run_id"] for r in out] == [r["run_id"] for r in runs]
PY

# Text report: the summary and every skipped row with its reason.
"$bin" validate --runs "$runs" > "$tmp/report.txt" || fail "validate (text) exited $?"
grep -q "^Throughput error" "$tmp/report.txt" || fail "text report lacks the summary"
grep -q "^Skipped: " "$tmp/report.txt" || fail "text report lacks the skipped list"

# A row that cannot be simulated is listed with its reason, not dropped.
head -1 "$runs" > "$tmp/odd.csv"
sed -n '2p' "$runs" >> "$tmp/odd.csv"
sed -n '2p' "$runs" | sed 's/A100-SXM4-80GB/MI250X/' | sed 's/^1,/900,/' >> "$tmp/odd.csv"
"$bin" validate --runs "$tmp/odd.csv" > "$tmp/odd.txt" || fail "validate exited $?"
grep -q "run 900 (line 3): no cluster model for GPU 'MI250X'" "$tmp/odd.txt" || fail "skipped row not listed: $(cat "$tmp/odd.txt")"

# Bad input: exit 2 naming the column, the row or the file.
head -1 "$runs" | sed 's/,hfu_pct//' > "$tmp/missing.csv"
expect 2 "hfu_pct: required column is missing" validate --runs "$tmp/missing.csv"
python3 - "$runs" "$tmp/badnum.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1], newline="")))
rows[2][rows[0].index("tp")] = "two"
csv.writer(open(sys.argv[2], "w", newline="")).writerows(rows[:3])
PY
expect 2 "badnum.csv:3: tp: run_id 2: 'two' is not an integer" validate --runs "$tmp/badnum.csv"
printf 'run_id,source\n1,"unterminated\n' > "$tmp/quote.csv"
expect 2 "quote.csv:2" validate --runs "$tmp/quote.csv"
expect 2 "cannot open" validate --runs "$tmp/none.csv"
expect 2 "--runs" validate
expect 2 "--format" validate --runs "$runs" --format xml
echo "ok"
