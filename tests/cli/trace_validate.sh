#!/usr/bin/env bash
# The structural validator (tools/trace_check.py) passes on every scenario trace
# (tests/trace_engine/scenarios.txt) and fails, naming the problem, on deliberately broken ones;
# --trace-devices selects devices, its errors are exit 2, and the size report goes to stderr.
set -euo pipefail
bin="$1"
src="$2"
check="$src/tools/trace_check.py"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
traces=()
while read -r file flags; do
  [[ -z "$file" || "$file" == \#* ]] && continue
  # shellcheck disable=SC2086
  "$bin" run $flags --trace "$tmp/$file" > /dev/null 2> "$tmp/$file.err"
  grep -q "^trace $tmp/$file: .* slices, .* flows" "$tmp/$file.err" || { cat "$tmp/$file.err"; exit 1; }
  traces+=("$tmp/$file")
done < "$src/tests/trace_engine/scenarios.txt"
python3 "$check" "${traces[@]}"

# --trace-devices: which devices are written, and bad selections.
python3 - "$tmp/selected.json" <<'PY'
import json, sys
t = json.load(open(sys.argv[1]))
pids = sorted({e["pid"] for e in t["traceEvents"]})
assert pids == [0, 1, 2, 3, 8], pids
assert t["otherData"]["written_devices"] == 5 and t["otherData"]["simulated_devices"] == 16, t["otherData"]
PY
flags=(--model llama3-8b --cluster dgx-h100 --gpus 16 --tp 2 --pp 2 --seq 4096 --global-batch 32)
for bad in "16" "3-1" "x" "0-3,99"; do
  set +e
  "$bin" run "${flags[@]}" --trace "$tmp/bad.json" --trace-devices "$bad" > /dev/null 2> "$tmp/err"
  rc=$?
  set -e
  [ "$rc" -eq 2 ] || { echo "--trace-devices $bad: exit $rc, expected 2"; exit 1; }
  grep -q -- "--trace-devices" "$tmp/err" || { cat "$tmp/err"; exit 1; }
done
set +e
"$bin" run "${flags[@]}" --trace-devices 0 > /dev/null 2> "$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "needs --trace" "$tmp/err" || { echo "rc $rc"; cat "$tmp/err"; exit 1; }
# Symmetric mode simulates ranks 0 and 8 (one per stage): rank 1 selects nothing.
set +e
"$bin" run "${flags[@]}" --trace "$tmp/bad.json" --trace-devices 1 > /dev/null 2> "$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] && grep -q "selects none of the simulated ranks (0,8)" "$tmp/err" || { echo "rc $rc"; cat "$tmp/err"; exit 1; }
[ ! -e "$tmp/bad.json" ] || { echo "a failed trace left a file"; exit 1; }

# Broken traces: each mutation of a valid trace must fail with its problem named.
python3 - "$tmp/zero3-gpipe.json" "$tmp" <<'PY'
import copy, json, sys
base = json.load(open(sys.argv[1]))
out = sys.argv[2]
ev = base["traceEvents"]
def first(pred):
    return next(i for i, e in enumerate(ev) if pred(e))
def mutate(name, fn):
    t = copy.deepcopy(base)
    fn(t, t["traceEvents"])
    json.dump(t, open(f"{out}/broken-{name}.json", "w"))
def negative_dur(t, e):
    e[first(lambda x: x["ph"] == "X")]["dur"] = -1.0
def seconds(t, e):  # timestamps in seconds instead of µs
    for x in e:
        if "ts" in x: x["ts"] = x["ts"] / 1e6
        if "dur" in x: x["dur"] = x["dur"] / 1e6
def overlap(t, e):  # a slice starting inside the previous one on its thread and ending after it
    xs = sorted((x for x in e if x["ph"] == "X" and x["pid"] == e[first(lambda y: y["ph"] == "X")]["pid"]
                 and x["tid"] == 0 and x["dur"] > 0), key=lambda x: x["ts"])
    a, b = xs[10], xs[11]
    b["ts"] = a["ts"] + a["dur"] / 2
    b["dur"] = a["dur"]
def no_flow_start(t, e):
    del e[first(lambda x: x["ph"] == "s")]
def unbound_flow(t, e):
    e[first(lambda x: x["ph"] == "s")]["ts"] += 0.5
def no_thread_name(t, e):
    del e[first(lambda x: x["ph"] == "M" and x["name"] == "thread_name")]
def no_counter(t, e):
    pid = e[first(lambda x: x["ph"] == "C")]["pid"]
    t["traceEvents"] = [x for x in e if not (x["ph"] == "C" and x["pid"] == pid)]
def bad_device_name(t, e):
    e[first(lambda x: x["ph"] == "M" and x["name"] == "process_name")]["args"]["name"] = "GPU 0"
def no_metadata(t, e):
    del t["otherData"]
def bad_phase(t, e):
    e[first(lambda x: x["ph"] == "X")]["ph"] = "Q"
for name, fn in list(globals().items()):
    if callable(fn) and name not in ("first", "mutate") and not name.startswith("_"):
        if fn.__module__ == "__main__":
            mutate(name, fn)
with open(f"{out}/broken-truncated.json", "w") as f:
    f.write(json.dumps(base)[:5000])
PY
expect_failure() {  # file, text the validator must print
  set +e
  python3 "$check" "$tmp/broken-$1.json" > "$tmp/out" 2>&1
  local rc=$?
  set -e
  if [ "$rc" -ne 1 ] || ! grep -q -- "$2" "$tmp/out"; then
    echo "broken-$1: exit $rc, expected 1 with '$2'"; cat "$tmp/out"; exit 1
  fi
}
expect_failure negative_dur "dur missing or negative"
expect_failure seconds "the last slice ends at"
expect_failure overlap "without nesting"
expect_failure no_flow_start "expected one start, steps, one finish"
expect_failure unbound_flow "binds to no slice"
expect_failure no_thread_name "is not a stream"
expect_failure no_counter "no memory counter"
expect_failure bad_device_name "is not 'node N"
expect_failure no_metadata "no otherData"
expect_failure bad_phase "unknown phase"
expect_failure truncated "cannot read"
echo "ok"
