#!/usr/bin/env bash
# trainsim sweep: the default pruned search prints the same best plans as --exhaustive (and as
# the table of a sweep written to a file), simulates fewer plans, and says what it pruned.
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
unset SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_STEP
sweep=(sweep --model llama3-8b --cluster dgx-h100 --gpus 16 --global-batch 32 --seq 2048
       --micro-batch 1,2,4 --schedule 1f1b,interleaved,zb-h1 --recompute none,full)
"$bin" "${sweep[@]}" --threads 2 --top 5 > "$tmp/pruned.out"
"$bin" "${sweep[@]}" --threads 1 --top 5 > "$tmp/pruned1.out"
"$bin" "${sweep[@]}" --threads 2 --top 5 --exhaustive > "$tmp/all.out"
"$bin" "${sweep[@]}" --threads 2 --top 5 --out "$tmp/all.csv" > "$tmp/file.out"
grep -q "^pruned search for the best 5 " "$tmp/pruned.out"
grep -q "pruned by their bound" "$tmp/pruned.out"
# The same output for any thread count.
cmp "$tmp/pruned.out" "$tmp/pruned1.out"
# --out is exhaustive: one row per valid plan.
valid=$(sed -n 's/^plans: [0-9]* combinations, \([0-9]*\) valid.*/\1/p' "$tmp/all.out")
test $(($(wc -l < "$tmp/all.csv") - 1)) -eq "$valid"
grep -q "^shard 0/1: $valid plans" "$tmp/all.out"
# Same table; fewer plans simulated.
diff <(sed -n '/^top 5/,$p' "$tmp/pruned.out") <(sed -n '/^top 5/,$p' "$tmp/all.out")
diff <(sed -n '/^top 5/,$p' "$tmp/pruned.out") <(sed -n '/^top 5/,$p' "$tmp/file.out")
simulated=$(sed -n 's/.*, \([0-9]*\) simulated now:.*/\1/p' "$tmp/pruned.out")
test "$simulated" -gt 0
test "$simulated" -lt "$valid"
# JSON says which search ran and what it pruned.
"$bin" "${sweep[@]}" --threads 2 --top 5 --format json > "$tmp/pruned.json"
grep -q '"search": "pruned"' "$tmp/pruned.json"
grep -q '"pruned_by_bound": ' "$tmp/pruned.json"
"$bin" "${sweep[@]}" --threads 2 --top 0 --format json > "$tmp/all.json"
grep -q '"search": "exhaustive"' "$tmp/all.json"
echo ok
