#!/usr/bin/env bash
# run --train-days/--train-tokens: the time_to_train JSON object and text section, stragglers, the
# price table, bad flags (exit 2); plan --csv rows and tools/plot plan.
set -euo pipefail
bin="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
flags=(run --model llama3-8b --cluster dgx-h100 --gpus 8 --tp 2 --global-batch 16 --seq 2048)

# Without a goal the report has no time_to_train object.
"$bin" "${flags[@]}" --format json > "$tmp/plain.json"
"$bin" "${flags[@]}" --train-days 10 --format json > "$tmp/days.json"
"$bin" "${flags[@]}" --train-tokens 1e11 --straggler gpu_cv=0,slow_gpu=50 --format json > "$tmp/tokens.json"
"$bin" "${flags[@]}" --train-tokens 1e11 --straggler gpu_cv=0 --checkpoint-mode sync --price 2 \
  --format json > "$tmp/sync.json"
python3 - "$tmp" <<'PY'
import json, sys
d = sys.argv[1]
plain = json.load(open(f"{d}/plain.json"))
assert "time_to_train" not in plain
days = json.load(open(f"{d}/days.json"))
t = days["time_to_train"]
for k in ("expected_interruptions", "goodput", "checkpoint_interval_s", "wall_days", "energy_mwh", "cost_usd"):
    assert k in t and t[k] is not None, k
assert t["goal"] == "days" and t["feasible"]
assert abs(t["wall_days"] - 10) < 1e-9, t["wall_days"]
assert 0.9 < t["goodput"] <= 1
# Interruptions: the per-day rate over the 10 days; the components add up to it.
assert abs(t["expected_interruptions"] - 10 * t["interruptions_per_day"]) < 1e-9
assert abs(sum(c["expected"] for c in t["interruptions_by_component"]) - t["expected_interruptions"]) < 1e-9
# Tokens = steps x global batch x seq; the useful days hold that many steps.
assert t["tokens"] == t["steps"] * 16 * 2048
assert t["steps"] * t["step_time_s"] <= t["useful_days"] * 86400 + 1e-6
# The dgx-h100 row of calibration/prices.csv: 4.916 $ per GPU-hour over 8 GPUs x 10 days.
assert t["usd_per_gpu_hour"] == 4.916
assert abs(t["cost_usd"] - 4.916 * 8 * 240) < 1e-6 * t["cost_usd"]
# The plain iteration is unchanged by the time to train.
assert days["iteration_time_s"] == plain["iteration_time_s"]

tok = json.load(open(f"{d}/tokens.json"))["time_to_train"]
assert tok["goal"] == "tokens"
assert tok["steps"] == -(-100000000000 // (16 * 2048))
# One GPU at half speed: compute and bubble take twice as long, exposed communication does not.
tb = plain["time_breakdown"]
comm = sum(tb[k] for k in ("exposed_tp_comm_s", "exposed_cp_comm_s", "exposed_pp_comm_s", "exposed_dp_comm_s"))
assert tok["straggler"]["gpu_factor"] == 2
assert abs(tok["step_time_s"] - (comm + 2 * (plain["iteration_time_s"] - comm))) < 1e-6
sync = json.load(open(f"{d}/sync.json"))["time_to_train"]
assert sync["checkpoint"]["mode"] == "sync" and sync["usd_per_gpu_hour"] == 2
assert sync["checkpoint"]["blocking_s"] == sync["checkpoint"]["write_s"]
PY

# A plan that does not fit is not trained: the object says why, its figures are null.
"$bin" run --model llama3-70b --cluster dgx-h100 --gpus 8 --tp 8 --global-batch 16 --seq 4096 \
  --train-days 3 --format json > "$tmp/oom.json"
python3 - "$tmp/oom.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["status"] == "oom"
t = j["time_to_train"]
assert t["feasible"] is False and "not simulated" in t["reason"], t
assert t["wall_days"] is None and t["goodput"] is None and t["cost_usd"] is None
PY

# The text report has the section.
"$bin" "${flags[@]}" --train-days 10 > "$tmp/days.txt"
grep -q "^time to train (10 days of wall time)" "$tmp/days.txt"
grep -q "goodput" "$tmp/days.txt"
grep -q "expected interruptions" "$tmp/days.txt"

# Bad input: exit 2, naming the flag.
expect2() {
  local want="$1"; shift
  set +e
  "$bin" "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  set -e
  if [ "$rc" -ne 2 ] || ! grep -q -- "$want" "$tmp/err"; then
    echo "expected exit 2 mentioning '$want' from: $*" >&2; cat "$tmp/err" >&2; exit 1
  fi
}
expect2 "--straggler" "${flags[@]}" --train-days 1 --straggler speed=3
expect2 "--straggler" "${flags[@]}" --train-days 1 --straggler slow_gpu=0
expect2 "--train-days" "${flags[@]}" --checkpoint-gbps 100
expect2 "--train-days" "${flags[@]}" --train-days 1 --train-tokens 1e9
expect2 "--checkpoint-mode" "${flags[@]}" --train-days 1 --checkpoint-mode lazy
expect2 "--pue" "${flags[@]}" --train-days 1 --pue 0.8
expect2 "--train-days" "${flags[@]}" --train-days -3
printf 'pue: 0.5\n' > "$tmp/bad.textproto"
expect2 "bad.textproto" "${flags[@]}" --train-days 1 --train-calibration "$tmp/bad.textproto"

# plan --csv: one row per kind and size tried, the chosen one marked; --all-sizes goes on past it.
"$bin" plan --model llama3-8b --tokens 5e9 --days 1 --gpus 8,16,32 --gpus-from h100 --seq 2048 \
  --global-batch 64 --tp 1,2 --pp 1 --micro-batch 1 --schedule 1f1b --threads 2 --all-sizes \
  --csv "$tmp/plan.csv" --json "$tmp/plan.json" > "$tmp/plan.out"
grep -q "goodput" "$tmp/plan.out"
python3 - "$tmp" <<'PY'
import csv, json, sys
d = sys.argv[1]
rows = list(csv.DictReader(open(f"{d}/plan.csv", newline="")))
assert [int(r["num_gpus"]) for r in rows] == [8, 16, 32], rows
chosen = [r for r in rows if r["chosen"] == "true"]
assert len(chosen) == 1
j = json.load(open(f"{d}/plan.json"))["choices"][0]
assert int(chosen[0]["num_gpus"]) == j["num_gpus"]
assert abs(float(chosen[0]["wall_days"]) - j["training_days"]) < 1e-5 * j["training_days"]
for r in rows:
    if not r["wall_days"]:
        continue
    wall, ideal = float(r["wall_days"]), float(r["ideal_days"])
    assert wall >= ideal, r  # interruptions and stragglers only add time
    assert 0 < float(r["goodput"]) <= 1
    assert abs(float(r["gpu_hours"]) - int(r["num_gpus"]) * wall * 24) < 1e-4 * float(r["gpu_hours"])
    assert abs(float(r["cost_usd"]) - float(r["gpu_hours"]) * float(r["usd_per_gpu_hour"])) < 1e-4 * float(r["cost_usd"])
    assert float(r["energy_mwh"]) > 0
PY
if python3 -c "import matplotlib" 2> /dev/null; then
  "$src/tools/plot" plan "$tmp/plan.csv" --out "$tmp/plan.png" 2> /dev/null
  python3 -c "import sys; d=open(sys.argv[1],'rb').read(); assert d[:8]==b'\x89PNG\r\n\x1a\n' and len(d) > 5000" "$tmp/plan.png"
fi
echo ok
