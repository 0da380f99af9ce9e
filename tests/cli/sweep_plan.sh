#!/usr/bin/env bash
# trainsim plan: a comparison table per GPU kind and fabric, the JSON document, price overrides
# and bad input.
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
# A small problem: Llama 3 8B on 5e9 tokens within 1 day, clusters of 8 to 64 GPUs, two fabrics.
plan=(plan --model llama3-8b --tokens 5e9 --days 1 --gpus 8,16,32,64 --gpus-from h100,h200
      --oversubscription 1,2 --seq 2048 --global-batch 64 --tp 1,2,8 --pp 1,2 --micro-batch 1
      --schedule 1f1b --recompute selective --threads 2)
"$bin" "${plan[@]}" --budget 1e6 --json "$tmp/plan.json" > "$tmp/plan.out"
grep -q "h100 (H100-SXM5-80GB)" "$tmp/plan.out"
grep -q "h200 (H200-SXM-141GB)" "$tmp/plan.out"
grep -q "2:1" "$tmp/plan.out"
grep -q "override with --price" "$tmp/plan.out"
python3 - "$tmp/plan.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["model"] == "llama3-8b" and j["tokens"] == 5e9 and j["days"] == 1, j
c = j["choices"]
assert len(c) == 4, len(c)  # 2 kinds x 2 fabrics
for x in c:
    assert x["found"], x
    assert x["training_days"] <= 1
    assert abs(x["gpu_hours"] - x["num_gpus"] * x["training_days"] * 24) < 1e-6 * x["gpu_hours"]
    assert abs(x["cost_usd"] - x["gpu_hours"] * x["usd_per_gpu_hour"]) < 1e-6 * x["cost_usd"]
    assert x["within_budget"] is True
    assert 0 < x["mfu"] < 1
    # Smaller sizes that were tried did not meet the deadline.
    for t in x["sizes_tried"][:-1]:
        assert t["outcome"] != "meets the deadline", t
PY
# --price overrides the table; --format json prints the same document.
"$bin" "${plan[@]}" --price h100=1.5 --format json > "$tmp/over.json"
python3 - "$tmp/over.json" <<'PY'
import json, sys
for x in json.load(open(sys.argv[1]))["choices"]:
    if x["kind"] == "h100":
        assert x["usd_per_gpu_hour"] == 1.5, x
PY
# A batch range: each size's batch is one of the 2^k and 3·2^k sequences in it, reported in the
# table, the JSON of the choice and of each size tried, with the critical-batch-size caveat.
"$bin" plan --model llama3-8b --tokens 5e9 --days 1 --gpus 8,16,24,32 --gpus-from h100 --seq 2048 \
  --batch-tokens 64Ki-256Ki --tp 8 --pp 1,3 --micro-batch 1 --schedule 1f1b --recompute selective \
  --threads 2 --json "$tmp/range.json" > "$tmp/range.out"
grep -q "McCandlish" "$tmp/range.out"
grep -q "32 48 64 96 128 sequences" "$tmp/range.out"
python3 - "$tmp/range.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
assert j["global_batch"] is None and j["batch_choices"] == [32, 48, 64, 96, 128], j
for x in j["choices"]:
    assert x["found"], x
    assert x["global_batch"] in j["batch_choices"] and x["batch_tokens"] == x["global_batch"] * 2048, x
    for t in x["sizes_tried"]:
        assert t["outcome"], t
        if "training_days" in t:
            assert t["global_batch"] in j["batch_choices"], t
    # 24 GPUs: tp 8 and pp 3 (32 layers do not split evenly in 3) is a plan of its own.
    sizes = {t["num_gpus"]: t for t in x["sizes_tried"]}
    if 24 in sizes and "training_days" in sizes[24]:
        assert sizes[24]["plans_simulated"] > 0
PY
# A GPU without tensor cores for the dtype is said to be so, not "no candidate size": in the
# table, the sizes tried, the JSON and the CSV; the default sizes start at one node (8 GPUs).
"$bin" plan --model llama3-8b --tokens 1e10 --days 10 --gpus-from a100,h100 --dtype fp8 --seq 2048 \
  --global-batch 64 --tp 1 --pp 1 --micro-batch 1 --recompute none --threads 2 --json "$tmp/fp8.json" \
  --csv "$tmp/fp8.csv" > "$tmp/fp8.out"
grep -q "fp8 needs FP8 tensor cores, which A100-SXM4-40GB does not have" "$tmp/fp8.out" || { cat "$tmp/fp8.out"; exit 1; }
grep -q "none: fp8 needs FP8 tensor cores" "$tmp/fp8.out"
grep -q '^"a100",.*,"skipped: fp8 needs FP8 tensor cores, which A100-SXM4-40GB does not have (peak_fp8_tflops is 0)",false,0' "$tmp/fp8.csv"
python3 - "$tmp/fp8.json" <<'PY'
import json, sys
c = {x["kind"]: x for x in json.load(open(sys.argv[1]))["choices"]}
assert not c["a100"]["found"] and "needs FP8 tensor cores" in c["a100"]["unsupported"], c["a100"]
assert c["a100"]["sizes_tried"] == [], c["a100"]
assert c["h100"]["found"] and c["h100"]["num_gpus"] == 8, c["h100"]
assert "unsupported" not in c["h100"]
PY
# sweep says so once, before enumerating, naming --dtype (exit 2, no rows written).
set +e
"$bin" sweep --model llama3-8b --cluster dgx-a100 --gpus 8 --global-batch 8 --dtype fp8 \
  --out "$tmp/none.csv" > "$tmp/out" 2> "$tmp/err"
rc=$?
set -e
[ "$rc" -eq 2 ] || { echo "sweep --dtype fp8 on A100 exited $rc"; exit 1; }
grep -q -- "--dtype: fp8 needs FP8 tensor cores, which A100-SXM4-80GB does not have" "$tmp/err"
[ ! -e "$tmp/none.csv" ] || { echo "a refused sweep wrote its CSV"; exit 1; }
# A sweep with balanced pipeline splits ends its rows with the layers per stage.
"$bin" sweep --model llama3-8b --cluster dgx-h100 --gpus 24 --global-batch 6 --seq 2048 --tp 8 --pp 3 \
  --micro-batch 1 --schedule 1f1b --zero 1 --recompute none --sequence-parallel on --pp-split balanced \
  --threads 1 --out "$tmp/split.csv" > "$tmp/split.out"
head -n 1 "$tmp/split.csv" | grep -q ",reason,pp_layers$"
tail -n 1 "$tmp/split.csv" | grep -Eq ',"[0-9]+,[0-9]+,[0-9]+"$'
# Bad input: exit 2 naming the flag.
set +e
"$bin" plan --model llama3-8b --tokens 5e9 --days 1 --gpus-from tpu > /dev/null 2> "$tmp/err"
rc=$?
set -e
test "$rc" -eq 2
grep -q -- "--gpus-from" "$tmp/err"
set +e
"$bin" plan --model llama3-8b --tokens lots --days 1 > /dev/null 2> "$tmp/err"
rc=$?
set -e
test "$rc" -eq 2
grep -q -- "--tokens" "$tmp/err"
for bad in "16Mi-4Mi" "4Mi-lots" "5M-6M"; do
  set +e
  "$bin" plan --model llama3-8b --tokens 5e9 --days 1 --seq 2048 --batch-tokens "$bad" > /dev/null 2> "$tmp/err"
  rc=$?
  set -e
  test "$rc" -eq 2
  grep -q -- "--batch-tokens" "$tmp/err"
done
set +e
"$bin" plan --model llama3-8b --tokens 5e9 --days 1 --global-batch 64 --batch-tokens 4Mi-8Mi > /dev/null 2> "$tmp/err"
rc=$?
set -e
test "$rc" -eq 2
grep -q -- "--global-batch" "$tmp/err"
set +e
"$bin" sweep --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --pp-split uneven > /dev/null 2> "$tmp/err"
rc=$?
set -e
test "$rc" -eq 2
grep -q -- "--pp-split" "$tmp/err"
echo ok
