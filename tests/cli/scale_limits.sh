#!/usr/bin/env bash
# Scale limits: a 100,000-GPU cluster and a 1M-token context simulate without overflow. The
# results are checked for consistency that an overflow of bytes, FLOPs or time would break:
# finite positive times, the time breakdown summing to the iteration time, tokens/s × time =
# tokens per iteration, peak memory between the static footprint and the GPU's capacity.
# Usage: bash scale_limits.sh <trainsim binary> <source dir>
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

check() {  # check <json file> <gpus> <tokens per iteration>
  python3 - "$@" <<'PY'
import json, math, sys
r = json.load(open(sys.argv[1]))
gpus, tokens = int(sys.argv[2]), float(sys.argv[3])
def fail(msg):
    sys.exit(f"FAIL {sys.argv[1]}: {msg}")
if r["status"] != "ok": fail(f"status {r['status']}: {r.get('reason')}")
if r["num_gpus"] != gpus: fail(f"num_gpus {r['num_gpus']}")
t = r["iteration_time_s"]
if not (math.isfinite(t) and 0 < t < 1e5): fail(f"iteration time {t}")
if abs(r["tokens_per_s"] * t / tokens - 1) > 1e-9: fail("tokens/s x time != tokens per iteration")
parts = sum(v for v in r["time_breakdown"].values())
if abs(parts / t - 1) > 1e-6: fail(f"time breakdown sums to {parts}, iteration {t}")
peak, cap = r["peak_memory_bytes"], r["memory_capacity_bytes"]
static = sum(r["memory_breakdown"][k] for k in ("weights_bytes", "gradients_bytes", "optimizer_states_bytes"))
if not (0 < static <= peak <= cap): fail(f"peak {peak}, static {static}, capacity {cap}")
if not (math.isfinite(r["model_flops_per_iteration"]) and r["model_flops_per_iteration"] > 6 * r["parameters"] * tokens):
    fail("model FLOPs below 6 x parameters x tokens")
if not (0 < r["mfu"] < 1): fail(f"mfu {r['mfu']}")
PY
}

# 100,000 H100s (12,500 DGX nodes, three-tier fabric): Llama-3 70B, TP 8 × PP 4 × DP 3125.
"$bin" run --model llama3-70b --cluster dgx-h100 --gpus 100000 --tp 8 --pp 4 --dp 3125 --seq 8192 \
  --global-batch 6250 --zero 1 --sequence-parallel --format json > "$tmp/100k.json"
check "$tmp/100k.json" 100000 $((6250 * 8192))

# A 1,048,576-token context: Llama-3 8B with CP 8 (ring and all-gather KV) × TP 8.
for algo in ring allgather; do
  "$bin" run --model llama3-8b --cluster dgx-h100 --gpus 64 --tp 8 --cp 8 --seq 1048576 \
    --global-batch 1 --zero 1 --sequence-parallel --recompute full --cp-algo "$algo" \
    --format json > "$tmp/1m-$algo.json"
  check "$tmp/1m-$algo.json" 64 1048576
done
# The largest accepted sizes still give a result or a clean input error, never a crash.
set +e
"$bin" run --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --seq 16777216 --zero 3 \
  --format json > "$tmp/max.json" 2> "$tmp/max.err"
rc=$?
set -e
[ "$rc" -eq 0 ] || [ "$rc" -eq 2 ] || { echo "FAIL: exit $rc at --seq 2^24: $(cat "$tmp/max.err")"; exit 1; }
echo ok
