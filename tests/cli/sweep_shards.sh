#!/usr/bin/env bash
# trainsim sweep: the CSV is the same for any thread count; two shards (by --shard and by the
# Slurm job-array variables) merged equal the unsharded sweep byte for byte.
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
unset SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_STEP
sweep=(sweep --model llama3-8b --cluster dgx-h100 --gpus 16 --global-batch 32 --seq 2048
       --tp 1,2,4,8 --pp 1,2,4 --micro-batch 1,2 --zero 0,1 --recompute none,full)
"$bin" "${sweep[@]}" --threads 2 --out "$tmp/full.csv" > "$tmp/full.out"
grep -q "top 10 by tokens/s" "$tmp/full.out"
grep -q "invalid plans by rule" "$tmp/full.out"
rows=$(($(wc -l < "$tmp/full.csv") - 1))
test "$rows" -gt 50
"$bin" "${sweep[@]}" --threads 1 --out "$tmp/one.csv" > /dev/null
cmp "$tmp/full.csv" "$tmp/one.csv"
"$bin" "${sweep[@]}" --shard 0/2 --out "$tmp/s0.csv" > /dev/null
"$bin" "${sweep[@]}" --shard 1/2 --out "$tmp/s1.csv" > /dev/null
test $(($(wc -l < "$tmp/s0.csv") + $(wc -l < "$tmp/s1.csv") - 2)) -eq "$rows"
"$bin" merge "$tmp/s1.csv" "$tmp/s0.csv" --out "$tmp/merged.csv" --top 3 > "$tmp/merge.out"
cmp "$tmp/full.csv" "$tmp/merged.csv"
grep -q "top 3 by tokens/s" "$tmp/merge.out"
# The ranked tables agree.
# (Column widths follow the longest value of each table, so blanks are squeezed.)
diff <(grep -A4 "^top" "$tmp/full.out" | head -5 | tr -s ' ') \
     <(grep -A4 "^top" "$tmp/merge.out" | sed 's/top 3/top 10/' | tr -s ' ')
# A Slurm job array (sbatch --array=0-1) shards by itself.
for i in 0 1; do
  SLURM_ARRAY_TASK_ID=$i SLURM_ARRAY_TASK_COUNT=2 SLURM_ARRAY_TASK_MIN=0 \
    "$bin" "${sweep[@]}" --out "$tmp/slurm$i.csv" > "$tmp/slurm$i.out"
  grep -q "^shard $i/2" "$tmp/slurm$i.out"
done
cmp "$tmp/s0.csv" "$tmp/slurm0.csv"
cmp "$tmp/s1.csv" "$tmp/slurm1.csv"
# Merging files of different sweeps fails with exit 2.
"$bin" sweep --model llama3-8b --cluster dgx-h100 --gpus 16 --global-batch 64 --seq 2048 \
  --tp 1,2,4,8 --pp 1,2,4 --micro-batch 1,2 --zero 0,1 --recompute none,full --out "$tmp/other.csv" > /dev/null
set +e
"$bin" merge "$tmp/full.csv" "$tmp/other.csv" > /dev/null 2> "$tmp/err"
rc=$?
set -e
test "$rc" -eq 2
grep -q "different sweeps" "$tmp/err"
echo ok
