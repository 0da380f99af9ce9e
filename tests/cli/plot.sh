#!/usr/bin/env bash
# tools/plot draws PNG and SVG charts from trainsim's JSON, CSV, sweep CSV and trace; the sweep's
# Pareto front is exactly the set of plans no other fitting plan dominates; bad input is exit 2.
set -euo pipefail
bin="$1"
src="$2"
plot="$src/tools/plot"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
flags=(--model llama3-8b --cluster dgx-h100 --gpus 8 --tp 2 --pp 2 --seq 4096 --global-batch 16)
"$bin" run "${flags[@]}" --format json --trace "$tmp/trace.json.gz" > "$tmp/run.json" 2> /dev/null
"$bin" run "${flags[@]}" --recompute full --format csv > "$tmp/run.csv"
"$bin" sweep --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 16 --seq 4096 --tp 1,2,4 \
  --pp 1,2 --micro-batch 1,2 --schedule 1f1b --zero 0,1 --out "$tmp/sweep.csv" > /dev/null 2>&1
"$plot" breakdown "$tmp/run.json" "$tmp/run.csv" "$tmp/sweep.csv" --top 3 --out "$tmp/b.png" --out "$tmp/b.svg"
"$plot" memory "$tmp/trace.json.gz" --out "$tmp/m.png"
"$plot" timeline "$tmp/trace.json.gz" --start-ms 0 --end-ms 50 --out "$tmp/t.png" --out "$tmp/t.svg"
"$plot" sweep "$tmp/sweep.csv" --print-front --out "$tmp/s.png" --out "$tmp/s.svg" > "$tmp/front.txt"
cp "$tmp/s.svg" "$tmp/s1.svg"
"$plot" sweep "$tmp/sweep.csv" --out "$tmp/s.svg" > /dev/null
cmp "$tmp/s.svg" "$tmp/s1.svg"  # same inputs, same bytes
python3 - "$tmp" <<'PY'
import csv, sys
import xml.etree.ElementTree as ET
d = sys.argv[1]
for name in ("b", "m", "t", "s"):
    data = open(f"{d}/{name}.png", "rb").read()
    assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 5000, name
for name in ("b", "t", "s"):
    root = ET.parse(f"{d}/{name}.svg").getroot()
    assert root.tag.endswith("svg"), root.tag
# The front from the CSV: a fitting plan is on it when no other fitting plan has at most its
# memory and more throughput, or less memory and at least its throughput.
rows = [r for r in csv.DictReader(open(f"{d}/sweep.csv")) if r["status"] == "ok"]
pts = {r["plan_id"]: (int(r["peak_memory_bytes"]), float(r["tokens_per_s"])) for r in rows}
def dominated(p):
    m, t = pts[p]
    return any((m2 <= m and t2 > t) or (m2 < m and t2 >= t) for q, (m2, t2) in pts.items() if q != p)
expected = {p for p in pts if not dominated(p)}
# Plans with equal memory and throughput are the same point: the tool keeps one of them.
front = [line.split(",")[0] for line in open(f"{d}/front.txt") if not line.startswith("wrote")]
assert len(pts) > 10 and front, (len(pts), front)
assert set(front) <= expected, set(front) - expected
assert {pts[p] for p in front} == {pts[p] for p in expected}
PY
for bad in "sweep $tmp/run.json --out $tmp/x.png" "breakdown $tmp/run.json --out $tmp/x.pdf" \
           "memory $tmp/run.json --out $tmp/x.png" "timeline $tmp/missing.json --out $tmp/x.png"; do
  set +e
  # shellcheck disable=SC2086
  "$plot" $bad > /dev/null 2> "$tmp/err"
  rc=$?
  set -e
  [ "$rc" -eq 2 ] && grep -q "error" "$tmp/err" || { echo "tools/plot $bad: exit $rc"; cat "$tmp/err"; exit 1; }
done
echo "ok"
