#!/usr/bin/env python3
"""Compute calibration/intervals/intervals.textproto: the input uncertainties of prediction intervals and
their conformal factors (docs/intervals.md).

Usage: fit_intervals.py TRAINSIM NETWORK_ACCURACY_TEST [--coverage 0.8] [--threads 2] [--split | --grouped]
       fit_intervals.py TRAINSIM --factors-only [--coverage 0.8] [--threads 2] [--split | --grouped]
(--factors-only keeps the file's input uncertainties and refits only the conformal factors: the
replays' ranges do not depend on the factors.)

TRAINSIM is build/tools/trainsim/trainsim, NETWORK_ACCURACY_TEST build/tools/bench_network/
test_network_accuracy (it prints the collective model against every measured NCCL point).

1. Input uncertainty, each the 80th percentile of the absolute relative error (a share of the time):
   - kernels, per GPU with a calibration file and per class (GEMM, attention, memory-bound): the
     fitted model's error on its non-check measured points (`trainsim kernel --gpu G --fit-report
     --format json`); the default entry (GPUs without their own) is the largest of the GPUs';
   - collectives: the calibrated network model against calibration/network/measured_allreduce.csv
     (all sizes);
   - host dispatch (eager frameworks' host time per operation): the error of the host dispatch
     fit on its fitting half, vTrain's hidden-1024 rows of tests/validation/vtrain-single-node.csv
     (tools/calibrate/fit_host_dispatch.py), intervals off;
   - clock: half the 10-90 % range of the sustained-load GEMM rate after the first (warm-up)
     window over its median (calibration/sources/measured/*/sustained.csv), the largest GPU's.
2. The file is written with identity conformal factors (lower -1, upper 1: the interval is the
   replays' range), and `trainsim validate --runs tests/validation/public-runs.csv` gives every
   public row its predicted time t, the replays' range [t_fast, t_slow] and its measured time m.
3. Conformal factors on the normalized scores (Lei et al. 2018): score = ln(m/t) / ln(t_slow/t)
   when m >= t, else ln(m/t) / ln(t/t_fast); the interval is the set of times whose score lies in
   [lower, upper]. By default, cross-conformal over the public sources (a new source is what the
   intervals must cover, and the public rows of one source are not exchangeable with another's):
   every row's out-of-source score v = |2 F(s) - 1|, F(s) its level among the scores of the other
   sources' rows (mid-rank, linear in between); the level c' = the ceil((n+1) c)-th smallest v, so
   that each source's rows against the other sources' scores at levels (1 -+ c')/2 are covered at
   least at c in the pool; lower and upper = the scores of all rows at levels (1 -+ c')/2 (Vovk
   2015, "Cross-conformal predictors"; the leave-one-group-out form of Barber, Candes, Ramdas &
   Tibshirani 2021, "Predictive inference with the jackknife+"). The fit is also repeated without
   each source and scored on it (nested leave-one-source-out), which estimates what a new source
   sees from the public set alone. `--split` fits plain split-conformal factors instead: lower =
   the floor((n+1)(1-c)/2)-th smallest score, upper = the ceil((n+1)(1+c)/2)-th (each tail
   (1-c)/2; exchangeable with the public rows only). `--grouped` fits source-grouped factors: each
   row weighs 1/(rows of its source), so every public source counts once, and the factors are the
   weighted (1-c)/2 and (1+c)/2 quantiles (Dunn, Wasserman & Ramdas 2022, "Distribution-free
   prediction sets for two-layer hierarchical models", JASA: pooled CDFs for a new group; with six
   sources their finite-sample correction would make the interval infinite, so the plain weighted
   quantile is used). Every fit prints the split factors' leave-one-source-out coverage (each
   source's rows against the factors fitted on the other sources; docs/intervals.md).
"""
import argparse
import csv
import datetime
import glob
import json
import math
import os
import re
import subprocess
import sys
import tempfile

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
OUT = os.path.join(ROOT, "calibration", "intervals", "intervals.textproto")
PUBLIC = "tests/validation/public-runs.csv"


def q80(values):
    v = sorted(abs(x) for x in values)
    if not v:
        raise SystemExit("no values")
    # numpy's default (linear interpolation between order statistics)
    pos = 0.8 * (len(v) - 1)
    lo = int(math.floor(pos))
    hi = min(lo + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (pos - lo)


def kernel_uncertainty(trainsim):
    out = []
    for path in sorted(glob.glob(os.path.join(ROOT, "calibration", "*.textproto"))):
        gpu = os.path.basename(path)[: -len(".textproto")]
        run = subprocess.run([trainsim, "kernel", "--gpu", gpu, "--fit-report", "--format", "json"],
                             capture_output=True, text=True)
        if run.returncode != 0:
            print("skipped %s: %s" % (gpu, run.stderr.strip()[:200]), file=sys.stderr)
            continue
        points = [p for p in json.loads(run.stdout)["points"] if not p.get("check")]
        entry = {"gpu": gpu}
        for cls in ("gemm", "attention", "memory"):
            errs = [p["fitted_error"] for p in points if p["family"].startswith(cls)]
            entry[cls] = round(q80(errs), 4) if errs else None
            entry[cls + "_n"] = len(errs)
        if any(entry[c] is None for c in ("gemm", "attention", "memory")):
            print("skipped %s: a kernel class without points" % gpu, file=sys.stderr)
            continue
        out.append(entry)
    return out


def collective_uncertainty(test_binary):
    run = subprocess.run([test_binary, "calibrated model reproduces measured NCCL collectives"],
                         capture_output=True, text=True, cwd=ROOT)
    errs = [float(m.group(1)) / 100 for m in re.finditer(r"\s([+-]\d+\.\d)%\n", run.stdout)]
    if len(errs) < 100:
        raise SystemExit("expected the accuracy test's per-point table, got %d points" % len(errs))
    return round(q80(errs), 4), len(errs)


def clock_uncertainty():
    spreads = []
    for path in sorted(glob.glob(os.path.join(ROOT, "calibration", "sources", "measured", "*", "sustained.csv"))):
        with open(path) as f:
            rows = list(csv.DictReader(line for line in f if not line.startswith("#")))
        rates = sorted(float(r["tflops"]) for r in rows[1:])  # the first window is the warm-up
        n = len(rates)
        pct = lambda q: rates[int(round(q * (n - 1)))]
        median = pct(0.5)
        spreads.append(((pct(0.9) - pct(0.1)) / 2 / median, os.path.relpath(path, ROOT)))
    return max(spreads)


def host_dispatch_uncertainty(trainsim, threads):
    src = os.path.join(ROOT, "tests", "validation", "vtrain-single-node.csv")
    with open(src, newline="") as f:
        reader = csv.DictReader(f)
        rows = [r for r in reader if r["hidden"] == "1024"]
        fields = reader.fieldnames
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "hidden1024.csv")
        with open(path, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=fields)
            w.writeheader()
            w.writerows(rows)
        run = subprocess.run([trainsim, "validate", "--runs", path, "--format", "json", "--no-intervals",
                              "--threads", str(threads)], capture_output=True, text=True, check=True)
    errs = [r["error"] for r in json.loads(run.stdout)["rows"] if r["error"] is not None]
    return round(q80(errs), 4), len(errs)


def write(kernels, collectives, host, clock, conformal):
    def entry(k, name):
        return ("%s {\n%s  gemm: %s\n  attention: %s\n  memory: %s\n"
                "  source: \"80th percentile of |fitted error| over the non-check points of "
                "`trainsim kernel --gpu %s --fit-report` (%d GEMM, %d attention, %d memory)\"\n}\n" % (
                    name, '  gpu: "%s"\n' % k["gpu"] if name == "kernels" else "", k["gemm"], k["attention"],
                    k["memory"], k["gpu"], k["gemm_n"], k["attention_n"], k["memory_n"]))
    worst = {c: max(k[c] for k in kernels) for c in ("gemm", "attention", "memory")}
    worst.update({c + "_n": 0 for c in ("gemm", "attention", "memory")})
    lines = ["# Prediction intervals (docs/intervals.md; schema sim/schema/intervals.proto).",
             "# Generated by tools/calibrate/fit_intervals.py; do not edit by hand.", ""]
    text = "\n".join(lines)
    for k in kernels:
        text += entry(k, "kernels")
    worst["gpu"] = "the largest of the GPUs above"
    text += ("default_kernels {\n  gemm: %s\n  attention: %s\n  memory: %s\n"
             "  source: \"the largest of the kernels entries above, per class\"\n}\n" % (
                 worst["gemm"], worst["attention"], worst["memory"]))
    text += "clock: %s\nclock_source: \"%s\"\n" % clock
    text += "collectives: %s\ncollectives_source: \"%s\"\n" % collectives
    text += "host_dispatch: %s\nhost_dispatch_source: \"%s\"\n" % host
    text += "conformal {\n"
    for key in ("lower", "upper", "coverage", "rows"):
        text += "  %s: %s\n" % (key, conformal[key])
    for key in ("fitted_on", "method", "date"):
        text += "  %s: \"%s\"\n" % (key, conformal[key])
    text += "}\n"
    with open(OUT, "w") as f:
        f.write(text)


def public_rows(trainsim, threads):
    run = subprocess.run([trainsim, "validate", "--runs", os.path.join(ROOT, PUBLIC), "--format", "json",
                          "--threads", str(threads)], capture_output=True, text=True, check=True)
    rows = []
    for r in json.loads(run.stdout)["rows"]:
        if r.get("input_interval") is None or r["metric"] is None:
            continue
        lo, hi = r["input_interval"]
        p, m = r["predicted"], r["measured"]
        if r["metric"] == "iteration_time":
            t, fast, slow, meas = p, lo, hi, m
        else:  # rates: time ∝ 1 / rate
            t, fast, slow, meas = 1 / p, 1 / hi, 1 / lo, 1 / m
        rows.append((t, fast, slow, meas, r["source"]))
    return rows


def score(row):
    t, fast, slow, m = row[:4]
    r = math.log(m / t)
    w = math.log(slow / t) if r >= 0 else math.log(t / fast)
    return r / max(w, 1e-9)


def scores(rows):
    return sorted(score(r) for r in rows)


def grouped_factors(rows, coverage):
    """Quantiles of the scores with every source weighing one (each row 1/rows of its source)."""
    count = {}
    for r in rows:
        count[r[4]] = count.get(r[4], 0) + 1
    weighted = sorted((score(r), 1.0 / count[r[4]]) for r in rows)
    total = float(len(count))
    tail = (1 - coverage) / 2

    def quantile(q):
        acc = 0.0
        for s, w in weighted:
            acc += w
            if acc >= q * total - 1e-12:
                return s
        return weighted[-1][0]

    return quantile(tail), quantile(1 - tail), len(count)


def inside(row, lower, upper):
    s = score(row)
    return lower <= s <= upper


def split_factors(rows, coverage):
    s = scores(rows)
    n = len(s)
    tail = (1 - coverage) / 2
    k_lo = max(1, int(math.floor((n + 1) * tail)))
    k_hi = min(n, int(math.ceil((n + 1) * (1 - tail))))
    return s[k_lo - 1], s[k_hi - 1], k_lo, k_hi


def fold_factors(rows, coverage):
    """Split-conformal factors of every source's complement: {source: (lower, upper)}."""
    return {src: split_factors([r for r in rows if r[4] != src], coverage)[:2]
            for src in sorted(set(r[4] for r in rows))}


def level_of(sorted_scores, s):
    """Where score s falls among sorted scores, as a level in [0, 1]: the i-th smallest (from 0)
    sits at (i + 0.5) / n (mid-rank), linear in between, 0 below the smallest, 1 above the
    largest. The inverse of quantile_at inside the scores' range."""
    v, n = sorted_scores, len(sorted_scores)
    if s < v[0]:
        return 0.0
    if s > v[-1]:
        return 1.0
    i = max(k for k in range(n) if v[k] <= s)
    if i == n - 1 or v[i + 1] == v[i]:
        return (i + 0.5) / n
    return (i + 0.5 + (s - v[i]) / (v[i + 1] - v[i])) / n


def quantile_at(sorted_scores, q):
    """The score at level q (mid-rank positions, linear in between, the extremes beyond)."""
    v, n = sorted_scores, len(sorted_scores)
    pos = q * n - 0.5
    if pos <= 0:
        return v[0]
    if pos >= n - 1:
        return v[-1]
    i = int(math.floor(pos))
    return v[i] + (v[i + 1] - v[i]) * (pos - i)


def cross_level(rows, coverage):
    """Cross-conformal over sources (Vovk 2015, "Cross-conformal predictors": every row scored
    against folds not fitted on it, the scores pooled; here the folds are the public sources, as
    in the leave-one-group-out form of the jackknife+, Barber, Candes, Ramdas & Tibshirani 2021).
    A row's out-of-source nonconformity score is how central an interval of the other sources'
    scores must be to hold it: v = |2 F(s) - 1|, F = level_of among the other sources' scores
    (v <= c exactly when the other sources' scores at levels (1 - c)/2 and (1 + c)/2 hold s).
    The level is the split order statistic of the pooled v at `coverage` (the ceil((n+1) c)-th
    smallest), so that every source's rows, against the other sources' scores at that level, are
    covered at least at `coverage` in the pool. Returns the level, the per-source score lists and
    the order statistic's rank."""
    others = {src: sorted(score(r) for r in rows if r[4] != src) for src in set(r[4] for r in rows)}
    v = sorted(abs(2 * level_of(others[r[4]], score(r)) - 1) for r in rows)
    n = len(v)
    k = min(n, int(math.ceil((n + 1) * coverage)))
    return v[k - 1], others, k


def cross_factors(rows, coverage):
    """The scores of all rows at the central level of cross_level."""
    level = cross_level(rows, coverage)[0]
    s = scores(rows)
    return quantile_at(s, (1 - level) / 2), quantile_at(s, (1 + level) / 2), level


def leave_one_source_out(rows, fit, label):
    """Each source's rows against the factors `fit` gives the other sources' rows."""
    n = len(rows)
    loso = {}
    for src in sorted(set(r[4] for r in rows)):
        lo, hi = fit([r for r in rows if r[4] != src])
        own = [r for r in rows if r[4] == src]
        loso[src] = sum(1 for r in own if inside(r, lo, hi)), len(own)
        print("%s: leave out %-40s %3d of %3d inside (%5.1f %%), factors %.4f %.4f" % (
            label, src[:40], loso[src][0], len(own), 100.0 * loso[src][0] / len(own), lo, hi))
    hit = sum(v[0] for v in loso.values())
    per_source = sum(v[0] / v[1] for v in loso.values()) / len(loso)
    print("%s: leave-one-source-out coverage %d of %d rows (%.1f %%), %.1f %% averaged over %d sources" % (
        label, hit, n, 100.0 * hit / n, 100.0 * per_source, len(loso)))
    return hit, per_source, len(loso)


def fit_factors(rows, a):
    n = len(rows)
    covered = sum(1 for t, fast, slow, m, _ in rows if fast <= m <= slow)
    split = lambda rs: split_factors(rs, a.coverage)[:2]
    grouped = lambda rs: grouped_factors(rs, a.coverage)[:2]
    cross = lambda rs: cross_factors(rs, a.coverage)[:2]
    split_loso = leave_one_source_out(rows, split, "split")
    if a.grouped:
        hit, per_source, sources = leave_one_source_out(rows, grouped, "grouped")
        lower, upper, sources = grouped_factors(rows, a.coverage)
        method = ("tools/calibrate/fit_intervals.py --grouped: normalized scores of the public rows, each "
                  "weighing 1/(rows of its source), so each of the %d sources counts once; lower and upper = "
                  "the weighted %g and %g quantiles (leave-one-source-out coverage %d of %d rows, %.1f %% "
                  "averaged over sources; replays' range alone covered %d of %d)" % (
                      sources, (1 - a.coverage) / 2, (1 + a.coverage) / 2, hit, n, 100.0 * per_source,
                      covered, n))
    elif a.split:
        lower, upper, k_lo, k_hi = split_factors(rows, a.coverage)
        method = ("tools/calibrate/fit_intervals.py --split: normalized scores of the public rows; lower = score "
                  "%d of %d, upper = score %d (replays' range alone covered %d of %d)" % (
                      k_lo, n, k_hi, covered, n))
    else:
        lower, upper, level = cross_factors(rows, a.coverage)
        _, others, k = cross_level(rows, a.coverage)
        inner = 0
        for src in sorted(others):
            fold = (quantile_at(others[src], (1 - level) / 2), quantile_at(others[src], (1 + level) / 2))
            own = [r for r in rows if r[4] == src]
            inner += sum(1 for r in own if inside(r, *fold))
            print("cross: the other sources' scores at the level, for %-40s %.4f %.4f" % (
                src[:40], fold[0], fold[1]))
        print("cross: level %.4f covers %d of %d rows out of source (%.1f %%)" % (
            level, inner, n, 100.0 * inner / n))
        nested = leave_one_source_out(rows, cross, "cross, nested")
        method = ("tools/calibrate/fit_intervals.py (cross-conformal over the %d public sources): each row's "
                  "out-of-source score v = |2 F(s) - 1|, F its level among the normalized scores of the other "
                  "sources' rows; level = v %d of %d = %.4f; lower and upper = the scores of all rows at levels "
                  "(1 -+ level)/2. Each source against the other sources' scores at that level: %d of %d rows "
                  "inside (split factors: %d); nested (the whole fit repeated without each source): %d of %d, "
                  "%.1f %% averaged over sources (split: %d, %.1f %%); the replays' range alone covered %d of %d"
                  % (len(others), k, n, level, inner, n, split_loso[0], nested[0], n, 100.0 * nested[1],
                     split_loso[0], 100.0 * split_loso[1], covered, n))
    return {"lower": round(lower, 4), "upper": round(upper, 4), "coverage": a.coverage, "rows": n,
            "fitted_on": PUBLIC, "method": method, "date": datetime.date.today().isoformat()}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("trainsim")
    ap.add_argument("network_accuracy_test", nargs="?")
    ap.add_argument("--factors-only", action="store_true",
                    help="keep the file's input uncertainties, refit only the conformal factors")
    ap.add_argument("--coverage", type=float, default=0.8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--grouped", action="store_true",
                    help="source-grouped factors (every public source weighs one) instead of cross-conformal")
    ap.add_argument("--split", action="store_true",
                    help="plain split-conformal factors of the public rows instead of cross-conformal")
    a = ap.parse_args()
    if a.grouped and a.split:
        ap.error("--grouped and --split exclude each other")
    if not a.factors_only and not a.network_accuracy_test:
        ap.error("NETWORK_ACCURACY_TEST is required unless --factors-only")
    if a.factors_only:
        rows = public_rows(a.trainsim, a.threads)
        conformal = fit_factors(rows, a)
        with open(OUT) as f:
            text = f.read()
        block = "conformal {\n"
        for key in ("lower", "upper", "coverage", "rows"):
            block += "  %s: %s\n" % (key, conformal[key])
        for key in ("fitted_on", "method", "date"):
            block += "  %s: \"%s\"\n" % (key, conformal[key])
        block += "}\n"
        text = re.sub(r"conformal \{\n.*?\n\}\n", lambda _: block, text, flags=re.S)
        with open(OUT, "w") as f:
            f.write(text)
        print("rows %d, lower %.4f, upper %.4f -> %s" % (
            conformal["rows"], conformal["lower"], conformal["upper"], os.path.relpath(OUT, ROOT)))
        return
    kernels = kernel_uncertainty(a.trainsim)
    coll, coll_n = collective_uncertainty(a.network_accuracy_test)
    collectives = (coll, "80th percentile of |model/measured - 1| of the calibrated network model over the %d "
                         "measured NCCL points of calibration/network/measured_allreduce.csv "
                         "(test_network_accuracy)" % coll_n)
    h, h_n = host_dispatch_uncertainty(a.trainsim, a.threads)
    host = (h, "80th percentile of |predicted/measured - 1| over the %d rows of the host dispatch fit's fitting half "
               "(vTrain hidden-1024 rows of tests/validation/vtrain-single-node.csv, tools/calibrate/"
               "fit_host_dispatch.py)" % h_n)
    spread, path = clock_uncertainty()
    clock = (round(spread, 4), "half the 10-90 %% range of the sustained 8192^3 bf16 GEMM rate after the "
                               "warm-up window, over its median (%s; the largest of the measured GPUs)" % path)
    identity = {"lower": -1, "upper": 1, "coverage": a.coverage, "rows": 1, "fitted_on": "none (identity)",
                "method": "identity: the replays' range", "date": "-"}
    write(kernels, collectives, host, clock, identity)
    rows = public_rows(a.trainsim, a.threads)
    conformal = fit_factors(rows, a)
    n = conformal["rows"]
    covered = sum(1 for t, fast, slow, m, _ in rows if fast <= m <= slow)
    write(kernels, collectives, host, clock, conformal)
    print("rows %d, input-range coverage %.1f %%, lower %.4f, upper %.4f -> %s" % (
        n, 100.0 * covered / n, conformal["lower"], conformal["upper"], os.path.relpath(OUT, ROOT)))


if __name__ == "__main__":
    main()
