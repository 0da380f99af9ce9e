#!/usr/bin/env bash
# --nic-sharing (docs/network-model.md, "Collectives of different kinds sharing a NIC"): a plan
# on one node crosses no NIC and its output is byte-identical; across nodes, the pipeline's
# transfers sharing NICs with the data-parallel reduction only lengthen the step; validate wants
# --no-intervals with it (exit 2 naming the flag).
# Usage: bash nic_sharing.sh <trainsim binary> <source dir>
set -uo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
one=(run --model llama3-8b --cluster dgx-h100 --gpus 8 --tp 2 --pp 2 --global-batch 32 --seq 4096
     --no-interval --format json)
"$bin" "${one[@]}" > "$tmp/one.json" || fail "run exited $?"
"$bin" "${one[@]}" --nic-sharing > "$tmp/one-shared.json" || fail "run --nic-sharing exited $?"
cmp -s "$tmp/one.json" "$tmp/one-shared.json" || fail "one node: --nic-sharing changed the output"

many=(run --model llama3-8b --cluster dgx-a100 --gpus 32 --tp 8 --pp 2 --global-batch 64 --seq 4096
      --no-interval --format json)
"$bin" "${many[@]}" > "$tmp/many.json" || fail "run exited $?"
"$bin" "${many[@]}" --nic-sharing > "$tmp/many-shared.json" || fail "run --nic-sharing exited $?"
python3 - "$tmp/many.json" "$tmp/many-shared.json" <<'PY' || exit 1
import json, sys
plain, shared = (json.load(open(p)) for p in sys.argv[1:])
t0, t1 = plain["iteration_time_s"], shared["iteration_time_s"]
# Sharing only lengthens network tasks: the step and its exposed pipeline and data-parallel
# communication grow, compute stays as it was.
assert t1 > t0, (t0, t1)
b0, b1 = plain["time_breakdown"], shared["time_breakdown"]
exposed = lambda b: b["exposed_pp_comm_s"] + b["exposed_dp_comm_s"]
assert exposed(b1) > exposed(b0), (b0, b1)
assert b1["forward_s"] == b0["forward_s"] and b1["backward_s"] == b0["backward_s"], (b0, b1)
print("step %.4f -> %.4f s" % (t0, t1))
PY

"$bin" validate --runs "$2/tests/validation/blackwell-public.csv" --nic-sharing > "$tmp/v.txt" 2> "$tmp/v.err"
rc=$?
[ "$rc" -eq 2 ] || fail "validate --nic-sharing without --no-intervals exited $rc, expected 2"
grep -q -- "--nic-sharing" "$tmp/v.err" || fail "the error does not name --nic-sharing: $(cat "$tmp/v.err")"
echo ok
