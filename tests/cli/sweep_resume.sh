#!/usr/bin/env bash
# trainsim sweep --out: a sweep killed midway (SIGKILL, and a torn last line) and run again ends
# with the same file as an uninterrupted one; a finished file is left as it is.
set -euo pipefail
bin="$1"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
unset SLURM_ARRAY_TASK_ID SLURM_ARRAY_TASK_COUNT SLURM_ARRAY_TASK_MIN SLURM_ARRAY_TASK_STEP
sweep=(sweep --model llama3-8b --cluster dgx-h100 --gpus 16 --global-batch 32 --seq 2048
       --tp 1,2,4,8 --pp 1,2,4 --micro-batch 1,2,4 --zero 0,1 --threads 2)
"$bin" "${sweep[@]}" --out "$tmp/full.csv" > /dev/null
rows=$(($(wc -l < "$tmp/full.csv") - 1))

# Stopped after a third of the rows, the last line torn, resumed.
"$bin" "${sweep[@]}" --out "$tmp/stopped.csv" --stop-after $((rows / 3)) > /dev/null
test "$(wc -l < "$tmp/stopped.csv")" -eq $((rows / 3 + 1))
truncate -s -25 "$tmp/stopped.csv"
"$bin" "${sweep[@]}" --out "$tmp/stopped.csv" > "$tmp/resume.out"
grep -q "$((rows / 3 - 1)) already in" "$tmp/resume.out"
cmp "$tmp/full.csv" "$tmp/stopped.csv"

# Killed for real while writing: the sweep runs in the background until some rows are written.
"$bin" "${sweep[@]}" --threads 1 --out "$tmp/killed.csv" > /dev/null 2>&1 &
pid=$!
for _ in $(seq 1 400); do
  if [ -f "$tmp/killed.csv" ] && [ "$(wc -l < "$tmp/killed.csv")" -gt 20 ]; then break; fi
  sleep 0.01
done
kill -9 "$pid" 2> /dev/null || true
wait "$pid" 2> /dev/null || true
"$bin" "${sweep[@]}" --out "$tmp/killed.csv" > /dev/null
cmp "$tmp/full.csv" "$tmp/killed.csv"

# Nothing left to do: no row simulated, the file unchanged.
"$bin" "${sweep[@]}" --out "$tmp/killed.csv" > "$tmp/again.out"
grep -q "$rows already in" "$tmp/again.out"
grep -q " 0 simulated now" "$tmp/again.out"
cmp "$tmp/full.csv" "$tmp/killed.csv"

# Another sweep refuses the file (exit 2, naming the row).
set +e
"$bin" sweep --model llama3-8b --cluster dgx-h100 --gpus 16 --global-batch 64 --seq 2048 \
  --tp 1,2,4,8 --pp 1,2,4 --out "$tmp/full.csv" > /dev/null 2> "$tmp/err"
rc=$?
set -e
test "$rc" -eq 2
grep -q "full.csv:2" "$tmp/err"

# Base settings that are no column of the CSV are kept beside it (full.csv.settings): resuming
# with another value is refused (exit 2, naming the flag), the file left as it was.
test -f "$tmp/full.csv.settings"
grep -q "^launch_blocking=false$" "$tmp/full.csv.settings"
cp "$tmp/full.csv" "$tmp/before.csv"
"$bin" "${sweep[@]}" --out "$tmp/stopped2.csv" --stop-after $((rows / 3)) > /dev/null
cp "$tmp/stopped2.csv" "$tmp/stopped2.before"
for extra in "--launch-blocking" "--framework torchtitan" "--grad-bucket-params 1000"; do
  set +e
  # shellcheck disable=SC2086
  "$bin" "${sweep[@]}" $extra --out "$tmp/stopped2.csv" > /dev/null 2> "$tmp/err"
  rc=$?
  set -e
  test "$rc" -eq 2
  flag="${extra%% *}"
  grep -q -- "$flag" "$tmp/err"
  grep -q "stopped2.csv.settings" "$tmp/err"
  cmp "$tmp/stopped2.before" "$tmp/stopped2.csv"
done
# The same settings resume it to the uninterrupted file.
"$bin" "${sweep[@]}" --out "$tmp/stopped2.csv" > /dev/null
cmp "$tmp/full.csv" "$tmp/stopped2.csv"
# A file without settings (written before they were kept) resumes unchecked.
rm "$tmp/full.csv.settings"
"$bin" "${sweep[@]}" --launch-blocking --out "$tmp/full.csv" > "$tmp/again.out"
grep -q " 0 simulated now" "$tmp/again.out"
cmp "$tmp/before.csv" "$tmp/full.csv"
echo ok
