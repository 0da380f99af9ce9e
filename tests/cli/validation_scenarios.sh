#!/usr/bin/env bash
# Every validation file but the generated vTrain grid has its rows' proposed scenarios checked in
# (FILE.scenarios.textproto, `trainsim validate --emit-scenarios`), and the reading rules still
# propose exactly those: a change of any row's settings or rules shows as a diff here. After a
# deliberate change, regenerate the files with the command below and review the diff.
# Usage: bash validation_scenarios.sh <trainsim binary> <source dir>
set -uo pipefail
bin="$1"
src="$2"
dir="$src/tests/validation"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

n=0
for csv in "$dir"/*.csv; do
  name="$(basename "$csv" .csv)"
  case "$name" in held-out | vtrain-single-node) continue ;; esac
  want="$dir/$name.scenarios.textproto"
  [ -f "$want" ] || fail "$name.csv has no $name.scenarios.textproto (trainsim validate --runs $name.csv --emit-scenarios ...)"
  "$bin" validate --runs "$csv" --emit-scenarios "$tmp/$name.textproto" > "$tmp/out" 2> "$tmp/err" ||
    fail "--emit-scenarios on $name.csv exited $?: $(cat "$tmp/err")"
  [ -s "$tmp/out" ] && fail "--emit-scenarios printed a report: $(head -3 "$tmp/out")"
  diff -u "$want" "$tmp/$name.textproto" > "$tmp/diff" ||
    fail "the reading of $name.csv changed; review and regenerate with: trainsim validate --runs tests/validation/$name.csv --emit-scenarios tests/validation/$name.scenarios.textproto
$(head -40 "$tmp/diff")"
  rows="$(grep -c '^row {' "$want")"
  [ "$rows" -gt 0 ] || fail "$name.scenarios.textproto has no rows"
  n=$((n + 1))
done
[ "$n" -ge 9 ] || fail "only $n validation files checked"

# A row's override shows in its scenario (the MsT rows of the public set).
grep -q '^  override: ' "$dir/public-runs.scenarios.textproto" || fail "no override listed in public-runs"
# Bad output path: exit 2 naming the flag, nothing written.
"$bin" validate --runs "$dir/moe-public.csv" --emit-scenarios "$tmp/no/such/dir/x.textproto" > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] || fail "--emit-scenarios to a missing folder did not exit 2"
grep -q -- "--emit-scenarios" "$tmp/err" || fail "the error does not name --emit-scenarios: $(cat "$tmp/err")"
echo "ok: $n files"
