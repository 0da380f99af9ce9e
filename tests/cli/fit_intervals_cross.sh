#!/usr/bin/env bash
# tools/calibrate/fit_intervals.py's conformal fits on synthetic scores (docs/intervals.md): the
# split factors are the scores' order statistics; the cross-conformal level covers every source's
# rows against the other sources' scores at least at the stated coverage, and it widens the
# interval when a source sits apart from the others.
# Usage: bash fit_intervals_cross.sh <trainsim binary> <source dir>
set -uo pipefail
src="$2"
PYTHONDONTWRITEBYTECODE=1 python3 - "$src/tools/calibrate" <<'PY' || exit 1
import math, random, sys
sys.path.insert(0, sys.argv[1])
import fit_intervals as F

# A row (t, t_fast, t_slow, m, source) whose normalized score is exactly `s`: the replays' range
# is +-10 % around t = 1.
def row(s, source):
    return (1.0, 1 / 1.1, 1.1, math.exp(s * math.log(1.1)), source)

rng = random.Random(7)
rows = []
for k, shift in enumerate([0.0, 0.0, 0.0, 0.0, 1.5, -1.0]):
    rows += [row(rng.gauss(shift, 1.0), "source %d" % k) for _ in range(10 + 7 * k)]
for r in rows:
    assert abs(F.score(r) - math.log(r[3]) / math.log(1.1)) < 1e-9

# level_of and quantile_at are inverse inside the scores' range.
s = F.scores(rows)
for q in (0.05, 0.3, 0.5, 0.77, 0.95):
    assert abs(F.level_of(s, F.quantile_at(s, q)) - q) < 1e-9, q

# Split: the order statistics at the two tails.
n = len(rows)
lo, hi, k_lo, k_hi = F.split_factors(rows, 0.8)
assert (k_lo, k_hi) == (math.floor((n + 1) * 0.1), math.ceil((n + 1) * 0.9))
assert lo == s[k_lo - 1] and hi == s[k_hi - 1]

# Cross: every source against the other sources' scores at the level: at least 80 % of all rows.
level, others, k = F.cross_level(rows, 0.8)
inside = 0
for source, theirs in others.items():
    a, b = F.quantile_at(theirs, (1 - level) / 2), F.quantile_at(theirs, (1 + level) / 2)
    inside += sum(1 for r in rows if r[4] == source and F.inside(r, a, b))
assert inside >= 0.8 * n, (inside, n)
# The split factors of the other sources cover fewer of the shifted sources' rows, and the
# cross-conformal interval is the wider one.
split_inside = 0
for source in others:
    a, b = F.split_factors([r for r in rows if r[4] != source], 0.8)[:2]
    split_inside += sum(1 for r in rows if r[4] == source and F.inside(r, a, b))
assert split_inside < inside, (split_inside, inside)
c_lo, c_hi, _ = F.cross_factors(rows, 0.8)
assert c_lo < lo and c_hi > hi, (c_lo, c_hi, lo, hi)
# Sources alike: the level stays near the stated coverage.
alike = [row(rng.gauss(0.0, 1.0), "source %d" % (i % 6)) for i in range(600)]
level_alike = F.cross_level(alike, 0.8)[0]
assert 0.75 < level_alike < 0.86, level_alike
print("ok: split %.3f %.3f, cross %.3f %.3f (level %.3f; sources alike %.3f)" % (lo, hi, c_lo, c_hi, level, level_alike))
PY
