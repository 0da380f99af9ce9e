#!/usr/bin/env bash
# The held-out validation files are frozen: each file listed in tests/validation/held-out.csv has
# the checksum recorded there, and `trainsim validate --held-out` reports them apart from --runs.
# Usage: bash heldout_frozen.sh <trainsim binary> <source dir>
set -uo pipefail
bin="$1"
src="$2"
dir="$src/tests/validation"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
fail() { echo "FAIL: $*"; exit 1; }

n=0
while IFS=, read -r file sha rest; do
  [ "$file" = file ] && continue
  [ -f "$dir/$file" ] || fail "held-out file $file is missing"
  got="$(sha256sum "$dir/$file" | cut -d' ' -f1)"
  [ "$got" = "$sha" ] || fail "$file changed (sha256 $got, frozen $sha): the held-out set is frozen; add new rows in a new file"
  n=$((n + 1))
done < "$dir/held-out.csv"
[ "$n" -ge 6 ] || fail "held-out.csv lists $n files"
# Every heldout-style file is in the list (a new one is added to it with its measured errors).
for f in "$dir"/heldout-style*.csv; do
  grep -q "^$(basename "$f")," "$dir/held-out.csv" || fail "$(basename "$f") is not listed in held-out.csv"
done

# No per-row override may be added to a frozen file.
for f in "$dir"/heldout-style*.overrides.textproto; do
  [ -e "$f" ] && fail "$(basename "$f"): the held-out files are frozen, no per-row override may be added"
done

# Public and held-out rows reported apart, in text and JSON.
# (heldout-style-6.csv given as --runs stands for a public file: the flag decides the set.)
"$bin" validate --runs "$dir/heldout-style-6.csv" --held-out "$dir/heldout-style-2.csv" \
  --threads 2 --format json > "$tmp/both.json" || fail "validate --held-out exited $?"
python3 - "$tmp/both.json" <<'PY' || exit 1
import json, sys
s = json.load(open(sys.argv[1]))["summary"]
assert set(s["by_set"]) == {"public", "held-out"}, s["by_set"].keys()
assert s["by_set"]["public"]["n"] == 14, s["by_set"]["public"]
assert s["by_set"]["held-out"]["n"] == 16, s["by_set"]["held-out"]
assert s["by_set"]["public"]["n"] + s["by_set"]["held-out"]["n"] == s["n"]
PY
"$bin" validate --held-out "$dir/heldout-style-2.csv" --threads 2 > "$tmp/held.txt" || fail "validate --held-out (text) exited $?"
grep -q "^  set: held-out  *16 " "$tmp/held.txt" || fail "text report lacks the held-out line: $(grep set: "$tmp/held.txt")"
"$bin" validate --runs "$dir/heldout-style-2.csv" --threads 2 > "$tmp/pub.txt" || fail "validate --runs exited $?"
grep -q "set: " "$tmp/pub.txt" && fail "a report without held-out rows prints set lines"
# No file at all is bad input.
"$bin" validate --format json > /dev/null 2> "$tmp/err"
[ $? -eq 2 ] || fail "validate without files did not exit 2"
grep -q -- "--runs" "$tmp/err" || fail "error lacks --runs: $(cat "$tmp/err")"
exit 0
