#!/usr/bin/env bash
# Mixture-of-experts runs: every zoo MoE model runs with expert parallelism, the dispatch and
# combine all-to-alls show on their own trace thread and in exposed_ep_comm_s, routing load slows
# the step, a hierarchical dispatcher cuts the network traffic (also as a sweep setting), the 1F1B
# all-to-all overlap hides EP comm, and bad MoE flags exit 2 naming the flag.
set -uo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
expect() {  # expect <code> <pattern> <args...>
  local code="$1" pattern="$2"; shift 2
  "$bin" "$@" > "$tmp/out" 2> "$tmp/err"
  local rc=$?
  [ "$rc" -eq "$code" ] || fail "exit $rc (want $code) for: $* : $(cat "$tmp/err")"
  grep -q -- "$pattern" "$tmp/err" || fail "stderr lacks '$pattern' for: $* : $(cat "$tmp/err")"
}
json() { python3 -c "import json,sys; d=json.load(open('$1')); print($2)"; }

# Every MoE model of the zoo runs (256 GPUs; pipeline splits that fit each model's layers).
while read -r m flags; do
  # shellcheck disable=SC2086
  "$bin" run --model "$m" --cluster dgx-h100 --gpus 256 --tp 1 --global-batch 256 --seq 2048 --zero 1 \
    --format json $flags > "$tmp/$m.json" 2> "$tmp/err" || fail "$m: $(cat "$tmp/err")"
  [ "$(json "$tmp/$m.json" "d['iteration_time_s'] > 0")" = True ] || fail "$m: no iteration time"
  [ "$(json "$tmp/$m.json" "d['time_breakdown']['exposed_ep_comm_s'] > 0")" = True ] || fail "$m: no EP comm"
done <<'MODELS'
mixtral-8x7b --pp 8 --ep 8
mixtral-8x22b --pp 8 --ep 8
qwen3-30b-a3b --pp 8 --ep 8
qwen3-235b-a22b --pp 2 --ep 32
gpt-oss-120b --pp 4 --ep 8
deepseek-v3 --pp 8 --pp-layers 7,8,8,8,8,8,8,6 --ep 32
kimi-k2 --pp 8 --pp-layers 7,8,8,8,8,8,8,6 --ep 32
MODELS

base=(run --model qwen3-30b-a3b --cluster dgx-h100 --gpus 16 --tp 1 --pp 1 --global-batch 32 --seq 2048 --zero 1)
# The all-to-alls run on the EP stream of the trace, as all_to_all tasks.
"$bin" "${base[@]}" --ep 16 --trace "$tmp/t.json" > /dev/null || fail "trace run"
grep -q '"EP comm (dispatch/combine)"' "$tmp/t.json" || fail "no EP thread in the trace"
grep -q 'all_to_all' "$tmp/t.json" || fail "no all-to-all in the trace"
# Without EP no all-to-all runs; dropless routing at an imbalance is slower than balanced.
"$bin" "${base[@]}" --ep 1 --format json > "$tmp/ep1.json" || fail "ep 1"
[ "$(json "$tmp/ep1.json" "d['time_breakdown']['exposed_ep_comm_s']")" = 0.0 ] || fail "EP comm without EP"
"$bin" "${base[@]}" --ep 16 --format json > "$tmp/bal.json" || fail "balanced"
"$bin" "${base[@]}" --ep 16 --routing dropless --moe-imbalance 1.5 --format json > "$tmp/drop.json" || fail "dropless"
"$bin" "${base[@]}" --ep 16 --routing capacity:1.2 --moe-imbalance 1.5 --format json > "$tmp/cap.json" || fail "capacity"
b=$(json "$tmp/bal.json" "d['iteration_time_s']")
d=$(json "$tmp/drop.json" "d['iteration_time_s']")
c=$(json "$tmp/cap.json" "d['iteration_time_s']")
python3 -c "import sys; sys.exit(0 if $b < $c < $d else 1)" || fail "balanced $b < capacity $c < dropless $d"

# A hierarchical dispatcher (DeepEP/HybridEP) sends a token once per node: across two nodes the
# EP comm shrinks and the step is faster than with NCCL's all-to-all; the two move the same
# bytes, and HybridEP, whose kernels permute the tokens, is the faster; a dense model refuses it.
"$bin" "${base[@]}" --ep 16 --moe-dispatcher deepep --format json > "$tmp/deepep.json" || fail "deepep"
"$bin" "${base[@]}" --ep 16 --moe-dispatcher hybridep --format json > "$tmp/hybridep.json" || fail "hybridep"
python3 -c "import json,sys
a=json.load(open('$tmp/bal.json')); e=json.load(open('$tmp/deepep.json')); h=json.load(open('$tmp/hybridep.json'))
ok = e['iteration_time_s'] < a['iteration_time_s'] and e['time_breakdown']['exposed_ep_comm_s'] < a['time_breakdown']['exposed_ep_comm_s']
same_comm = h['time_breakdown']['exposed_ep_comm_s'] <= e['time_breakdown']['exposed_ep_comm_s']
sys.exit(0 if ok and same_comm and h['iteration_time_s'] < e['iteration_time_s'] else 1)" || fail "deepep not faster than alltoall, or hybridep not faster than deepep"
expect 2 "--moe-dispatcher" "${base[@]}" --ep 16 --moe-dispatcher nccl
expect 2 "--moe-dispatcher" run --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --moe-dispatcher deepep

# The 1F1B all-to-all overlap (--moe-a2a-overlap): each forward beside another micro-batch's
# backward, interleaved at the all-to-alls, hides EP comm and never slows the step; without
# pipelining and interleaved. Refused without EP, on a dense model, with full recompute and with
# 1F1B over several stages (Megatron-Core's asserts).
"$bin" "${base[@]}" --ep 16 --moe-a2a-overlap --format json > "$tmp/a2a.json" || fail "a2a overlap"
vpp=(run --model qwen3-30b-a3b --cluster dgx-h100 --gpus 16 --tp 1 --pp 2 --vpp 2 --schedule interleaved
     --global-batch 32 --seq 2048 --zero 1 --ep 8 --format json)
"$bin" "${vpp[@]}" > "$tmp/vpp.json" || fail "interleaved"
"$bin" "${vpp[@]}" --moe-a2a-overlap > "$tmp/vpp_a2a.json" || fail "interleaved a2a overlap"
python3 -c "import json,sys
for off, on in (('$tmp/bal.json', '$tmp/a2a.json'), ('$tmp/vpp.json', '$tmp/vpp_a2a.json')):
    a=json.load(open(off)); b=json.load(open(on))
    ea=a['time_breakdown']['exposed_ep_comm_s']; eb=b['time_breakdown']['exposed_ep_comm_s']
    print(off.split('/')[-1], a['iteration_time_s'], '->', b['iteration_time_s'], 'EP', ea, '->', eb)
    if not (eb < 0.8 * ea and b['iteration_time_s'] <= a['iteration_time_s']): sys.exit(1)" > "$tmp/cmp" ||
  fail "a2a overlap did not hide EP comm: $(cat "$tmp/cmp")"
expect 2 "--moe-a2a-overlap" "${base[@]}" --ep 1 --moe-a2a-overlap
expect 2 "--moe-a2a-overlap" "${base[@]}" --ep 16 --recompute full --moe-a2a-overlap
expect 2 "--moe-a2a-overlap" run --model qwen3-30b-a3b --cluster dgx-h100 --gpus 16 --pp 2 --ep 8 --global-batch 32 --moe-a2a-overlap
expect 2 "--moe-a2a-overlap" run --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --moe-a2a-overlap
expect 2 "--moe-a2a-overlap" sweep --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --moe-a2a-overlap

# A sweep takes the dispatcher and the routing as base settings: with DeepEP the plans with expert
# parallelism run faster than with NCCL's all-to-all and those without it alike; a resume with
# another dispatcher, and a dense model given one, exit 2 naming the flag.
sweep=(sweep --model qwen3-30b-a3b --cluster dgx-h100 --gpus 16 --global-batch 32 --seq 2048 --tp 1 --pp 1
       --cp 1 --micro-batch 1 --zero 1 --ep 1,8,16 --exhaustive)
"$bin" "${sweep[@]}" --out "$tmp/s-a2a.csv" > /dev/null 2> "$tmp/err" || fail "sweep: $(cat "$tmp/err")"
"$bin" "${sweep[@]}" --moe-dispatcher deepep --out "$tmp/s-deepep.csv" > /dev/null 2> "$tmp/err" ||
  fail "sweep deepep: $(cat "$tmp/err")"
grep -q '^moe_dispatcher=deepep$' "$tmp/s-deepep.csv.settings" || fail "sweep settings lack the dispatcher"
python3 -c "import csv,sys
a={r['ep']: float(r['iteration_time_s']) for r in csv.DictReader(open('$tmp/s-a2a.csv'))}
d={r['ep']: float(r['iteration_time_s']) for r in csv.DictReader(open('$tmp/s-deepep.csv'))}
sys.exit(0 if a['1'] == d['1'] and d['8'] < a['8'] and d['16'] < a['16'] else 1)" ||
  fail "sweep with --moe-dispatcher deepep: $(cat "$tmp/s-a2a.csv" "$tmp/s-deepep.csv")"
expect 2 "--moe-dispatcher" "${sweep[@]}" --moe-dispatcher hybridep --out "$tmp/s-deepep.csv"
# Without --ep a sweep of an MoE model tries every expert-parallel degree its ranks allow (16
# ranks, 128 experts: 1 to 16), and plan names the degree of the plan it picks.
"$bin" sweep --model qwen3-30b-a3b --cluster dgx-h100 --gpus 16 --global-batch 32 --seq 2048 --tp 1 --pp 1 \
  --cp 1 --micro-batch 1 --zero 1 --recompute none --exhaustive --out "$tmp/s-ep.csv" > /dev/null 2> "$tmp/err" ||
  fail "sweep without --ep: $(cat "$tmp/err")"
[ "$(python3 -c "import csv; print(sorted(int(r['ep']) for r in csv.DictReader(open('$tmp/s-ep.csv'))))")" = "[1, 2, 4, 8, 16]" ] ||
  fail "sweep without --ep did not try every degree: $(cat "$tmp/s-ep.csv")"
"$bin" plan --model qwen3-30b-a3b --tokens 1e10 --days 30 --gpus 16 --gpus-from h100 --tp 1 --pp 1 \
  --micro-batch 1 > "$tmp/plan.txt" 2> "$tmp/err" || fail "plan of an MoE model: $(cat "$tmp/err")"
grep -q "zero1 .*ep[0-9]" "$tmp/plan.txt" || fail "plan names no expert-parallel degree: $(cat "$tmp/plan.txt")"
expect 2 "--moe-dispatcher" sweep --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --moe-dispatcher deepep
expect 2 "--routing" sweep --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --routing dropless
expect 2 "--moe-dispatcher" plan --model llama3-8b --tokens 1e12 --days 30 --gpus 64 --gpus-from h100 --moe-dispatcher deepep

# Bad input names the flag or field.
expect 2 "--ep" "${base[@]}" --ep 3
expect 2 "--ep" "${base[@]}" --ep 256
expect 2 "--ep" run --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --ep 2
expect 2 "--routing" run --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --routing dropless
expect 2 "--routing" "${base[@]}" --routing capacity:x
expect 2 "--routing" "${base[@]}" --routing capacity:0.5
expect 2 "--moe-imbalance" "${base[@]}" --routing dropless --moe-imbalance 0.5
expect 2 "--etp" "${base[@]}" --etp 5
expect 2 "--sequence-parallel" run --model qwen3-30b-a3b --cluster dgx-h100 --gpus 16 --tp 2 --global-batch 32
# Recompute modules: an unknown one, moe_act on a dense model, mla_up_proj without MLA, and a
# recompute mode other than selective beside them exit 2 naming --recompute-modules; the recipe
# modules lower the peak of an MoE run.
expect 2 "--recompute-modules" "${base[@]}" --ep 16 --recompute-modules layernorm,attn
expect 2 "--recompute-modules" run --model llama3-8b --cluster dgx-h100 --gpus 8 --global-batch 8 --recompute-modules moe_act
expect 2 "--recompute-modules" "${base[@]}" --ep 16 --recompute-modules mla_up_proj
expect 2 "--recompute-modules" "${base[@]}" --ep 16 --recompute full --recompute-modules moe_act
"$bin" "${base[@]}" --ep 16 --recompute-modules layernorm,moe_act --format json > "$tmp/mods.json" || fail "modules"
[ "$(python3 -c "import json; a=json.load(open('$tmp/bal.json')); b=json.load(open('$tmp/mods.json')); print(b['peak_memory_bytes'] < a['peak_memory_bytes'] and b['plan']['recompute_modules'] == 'layernorm,moe_act')")" = True ] ||
  fail "module recompute did not lower the peak"
"$bin" "${base[@]}" --ep 16 --recompute-modules layernorm,moe_act > "$tmp/mods.txt" || fail "modules text"
grep -q "recompute selective (modules layernorm,moe_act)" "$tmp/mods.txt" || fail "the plan line names no recompute modules: $(sed -n 3,4p "$tmp/mods.txt")"
# ep·etp must divide the stage's ranks (tp·cp·dp = 8 here).
expect 2 "--ep" run --model qwen3-30b-a3b --cluster dgx-h100 --gpus 16 --pp 2 --ep 16 --global-batch 32
printf 'name: "bad"\nnum_layers: 2\nhidden: 64\nnum_heads: 4\nffn_hidden: 128\nvocab: 100\nmax_seq_len: 64\nnorm: "rmsnorm"\nactivation: "swiglu"\nposition: "rope"\ntied_embeddings: false\nlinear_bias: false\nmoe {\n  num_experts: 8\n  top_k: 2\n  expert_ffn_hidden: 32\n  router_score: "softmax"\n  expert_groups: 3\n  group_limit: 1\n}\n' > "$tmp/groups.textproto"
expect 2 "moe.expert_groups" inspect --model "$tmp/groups.textproto" --cluster dgx-h100 --gpus 8 --global-batch 8
printf 'name: "bad"\nnum_layers: 2\nhidden: 64\nnum_heads: 4\nffn_hidden: 128\nvocab: 100\nmax_seq_len: 64\nnorm: "rmsnorm"\nactivation: "swiglu"\nposition: "rope"\ntied_embeddings: false\nlinear_bias: false\nmoe {\n  num_experts: 4\n  top_k: 5\n  expert_ffn_hidden: 32\n  router_score: "softmax"\n}\n' > "$tmp/bad.textproto"
expect 2 "moe.top_k" inspect --model "$tmp/bad.textproto" --cluster dgx-h100 --gpus 8 --global-batch 8
# The MoE validation rows all map to scenarios (zoo architecture, EP from the row) and report.
src="${2:-$(dirname "$0")/../..}"
"$bin" validate --runs "$src/tests/validation/moe-public.csv" > "$tmp/val.txt" 2> "$tmp/err" || fail "validate: $(cat "$tmp/err")"
grep -q "Skipped: 0 of 13 rows" "$tmp/val.txt" || fail "MoE validation rows skipped: $(cat "$tmp/val.txt")"
echo ok
