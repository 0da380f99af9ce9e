#!/usr/bin/env bash
# Replay semantics of imported Chakra traces, on small traces written here in protobuf text format
# and encoded with protoc and sim/schema/chakra.proto: nodes run in the order ASTRA-sim would start
# them (no deadlock from a static order), nodes without time pass their dependencies on, recorded
# durations are kept unless --recost, collectives are costed by the network model, and traces that
# cannot run (mismatched groups, unmatched sends, circular waits) exit 2 naming the node.
# Usage: bash chakra_replay.sh <trainsim binary> <source dir>
set -uo pipefail
bin="$1"
src="$2"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v protoc > /dev/null || fail "protoc (protobuf-compiler, needed to build trainsim) is not on PATH"
value() { grep -m1 "\"$1\":" "$2" | sed -E 's/.*: *"?([^",]*)"?,?$/\1/'; }
between() { awk -v v="$1" -v lo="$2" -v hi="$3" 'BEGIN { exit !(v >= lo && v <= hi) }'; }

varint() {
  local n=$1
  while [ "$n" -ge 128 ]; do
    printf "\\$(printf '%03o' $(((n & 127) | 128)))"
    n=$((n >> 7))
  done
  printf "\\$(printf '%03o' "$n")"
}
# msg <message type> <text format>: one length-delimited message on stdout.
msg() {
  local f="$tmp/msg.bin"
  printf '%s' "$2" | protoc -I "$src" --encode="trainsim.chakra.$1" "$src/sim/schema/chakra.proto" > "$f" \
    || fail "protoc cannot encode: $2"
  varint "$(stat -c %s "$f")"
  cat "$f"
}
# rank <file> <node>...: GlobalMetadata, then the nodes.
rank() {
  local file="$1"
  shift
  { msg GlobalMetadata 'version: "0.0.4"'; for n in "$@"; do msg Node "$n"; done; } > "$file"
}
import() {  # import <prefix> [flags]: JSON report in $tmp/out.json, stderr in $tmp/err, status in $rc
  local prefix="$1"
  shift
  "$bin" chakra import --prefix "$prefix" --cluster dgx-h100 --format json "$@" > "$tmp/out.json" 2> "$tmp/err"
  rc=$?
}
comp() { echo "id: $1 name: \"$2\" type: COMP_NODE duration_micros: $3 ${4:-}"; }
send() { echo "id: $1 name: \"send\" type: COMM_SEND_NODE ${4:-} attr { name: \"comm_dst\" int32_val: $2 } attr { name: \"comm_tag\" int32_val: $3 } attr { name: \"comm_size\" int64_val: 1024 }"; }
recv() { echo "id: $1 name: \"recv\" type: COMM_RECV_NODE ${4:-} attr { name: \"comm_src\" int32_val: $2 } attr { name: \"comm_tag\" int32_val: $3 } attr { name: \"comm_size\" int64_val: 1024 }"; }
allreduce() { echo "id: $1 name: \"ar\" type: COMM_COLL_NODE ${3:-} attr { name: \"comm_type\" int64_val: 0 } attr { name: \"comm_size\" int64_val: $2 }"; }

# 1. Each rank computes a (needs the peer's message) and b (feeds its own send). By node id, a
#    comes first; run in that fixed order both ranks would wait for each other. Started as
#    ASTRA-sim starts ready nodes, b runs first: b (10 µs), the 1 KiB message, then a (10 µs).
mkdir -p "$tmp/swap"
for r in 0 1; do
  p=$((1 - r))
  rank "$tmp/swap/t.$r.et" "$(comp 1 a 10 'data_deps: 3')" "$(comp 2 b 10)" "$(recv 3 $p $((10 + p)))" \
    "$(send 4 $p $((10 + r)) 'data_deps: 2')"
done
import "$tmp/swap/t"
[ "$rc" -eq 0 ] || fail "crossed pipeline: exit $rc: $(cat "$tmp/err")"
between "$(value iteration_time_s "$tmp/out.json")" 20e-6 30e-6 \
  || fail "crossed pipeline: $(value iteration_time_s "$tmp/out.json") s, expected 20 µs plus one small message"

# 2. Nodes without time (metadata, memory) pass their dependencies on: 10 + 10 µs in sequence,
#    and a control dependency orders like a data dependency.
mkdir -p "$tmp/meta"
rank "$tmp/meta/t.0.et" "$(comp 1 x 10)" 'id: 2 name: "m" type: METADATA_NODE data_deps: 1' \
  "$(comp 3 y 10 'data_deps: 2')" 'id: 4 name: "ld" type: MEM_LOAD_NODE' "$(comp 5 z 5 'ctrl_deps: 3 ctrl_deps: 4')"
import "$tmp/meta/t"
[ "$rc" -eq 0 ] || fail "metadata node: exit $rc: $(cat "$tmp/err")"
between "$(value iteration_time_s "$tmp/out.json")" 24.999e-6 25.001e-6 \
  || fail "metadata node: $(value iteration_time_s "$tmp/out.json") s, expected 25 µs"

# 3. Recorded durations are kept unless --recost; then FLOPs are costed on the GPU.
mkdir -p "$tmp/cost"
rank "$tmp/cost/t.0.et" "$(comp 1 mm 1000 'attr { name: "num_ops" int64_val: 1000000000000 } attr { name: "tensor_size" uint64_val: 1000000 } attr { name: "op_type" string_val: "M" }')"
import "$tmp/cost/t"
between "$(value iteration_time_s "$tmp/out.json")" 0.999e-3 1.001e-3 || fail "recorded 1 ms not kept"
import "$tmp/cost/t" --recost
# 1 TFLOP of matrix multiply on an H100 (989 TFLOP/s dense bf16 peak): between 1.0 and 2.5 ms.
between "$(value iteration_time_s "$tmp/out.json")" 1.0e-3 2.5e-3 \
  || fail "recost: $(value iteration_time_s "$tmp/out.json") s for 1 TFLOP on an H100"

# 4. A lone all-reduce of 1 GB over all ranks (no pg_name) takes what the network model gives for
#    it: the same time as `trainsim collective`.
mkdir -p "$tmp/ar"
for r in 0 1 2 3 4 5 6 7; do rank "$tmp/ar/t.$r.et" "$(allreduce 1 1000000000)"; done
import "$tmp/ar/t"
[ "$rc" -eq 0 ] || fail "all-reduce: exit $rc: $(cat "$tmp/err")"
t_ar="$(value iteration_time_s "$tmp/out.json")"
"$bin" collective --cluster dgx-h100 --gpus 8 --op all_reduce --bytes 1GB --format json > "$tmp/coll.json" \
  || fail "trainsim collective"
t_coll="$(value time_s "$tmp/coll.json")"
awk -v a="$t_ar" -v b="$t_coll" 'BEGIN { d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.01 * b) }' \
  || fail "all-reduce replayed in $t_ar s, trainsim collective says $t_coll s"

# 5. Traces that cannot run.
mkdir -p "$tmp/dead"
for r in 0 1; do
  p=$((1 - r))
  rank "$tmp/dead/t.$r.et" "$(recv 1 $p 5)" "$(send 2 $p 5 'data_deps: 1')"
done
import "$tmp/dead/t"
[ "$rc" -eq 2 ] || fail "circular wait: exit $rc"
grep -qF "cannot run to completion" "$tmp/err" || fail "circular wait: $(cat "$tmp/err")"
grep -qF "t.0.et: byte " "$tmp/err" || fail "circular wait does not name a node: $(cat "$tmp/err")"

mkdir -p "$tmp/count"
rank "$tmp/count/t.0.et" "$(allreduce 1 64)" "$(allreduce 2 64 'data_deps: 1')"
rank "$tmp/count/t.1.et" "$(allreduce 1 64)"
import "$tmp/count/t"
[ "$rc" -eq 2 ] || fail "collective count: exit $rc"
grep -qF "rank 0 issues 2" "$tmp/err" || fail "collective count: $(cat "$tmp/err")"

mkdir -p "$tmp/size"
rank "$tmp/size/t.0.et" "$(allreduce 1 64)"
rank "$tmp/size/t.1.et" "$(allreduce 1 128)"
import "$tmp/size/t"
[ "$rc" -eq 2 ] || fail "collective size: exit $rc"
grep -qF "128 bytes on this rank but all_reduce of 64 bytes on rank 0" "$tmp/err" \
  || fail "collective size: $(cat "$tmp/err")"

mkdir -p "$tmp/unmatched"
rank "$tmp/unmatched/t.0.et" "$(send 1 1 7)"
rank "$tmp/unmatched/t.1.et" "$(recv 1 0 8)"
import "$tmp/unmatched/t"
[ "$rc" -eq 2 ] || fail "unmatched send: exit $rc"
grep -qF "has no matching receive" "$tmp/err" || fail "unmatched send: $(cat "$tmp/err")"
echo ok
