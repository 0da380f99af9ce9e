#!/usr/bin/env python3
"""Structural validator of trainsim's Chrome traces (Trace Event Format).

    tools/trace_check.py TRACE.json[.gz] [...]

Checks, per file (exit 0 when every file passes, 1 otherwise, with the problems listed):
  - a JSON object with a `traceEvents` list and `otherData` holding the run's metadata
    (scenario, status, iteration_time_s, end_us, ...);
  - every event has a known phase (X complete, M metadata, C counter, s/t/f flow), an integer
    pid and a name; complete events have a thread, a category, ts >= 0 and dur >= 0 (µs);
  - timestamps are microseconds: the last slice ends at otherData.end_us, which is the
    iteration time (seconds) times 1e6;
  - slices on one thread nest properly: a slice either ends before the next one starts or
    contains it entirely;
  - every process with events is named "node N · gpu G · tpT [cpC] ppP dpD" and has a memory
    counter; every thread with slices is named after a known stream;
  - every flow (cat, name, id) has one start, then steps, then one finish, in time order; its
    start and steps bind to a slice on the same pid, tid and ts with the same category (how
    Chrome binds them) and its finish to the slice enclosing it ("bp": "e").
Numbers are parsed as decimals, so nesting is checked at the picosecond resolution written.
"""
import decimal
import gzip
import json
import re
import sys
from collections import defaultdict

STREAMS = {"compute", "TP comm", "CP comm", "DP comm", "PP recv from prev", "PP send to next",
           "PP recv from next", "PP send to prev"}
DEVICE_NAME = re.compile(r"^node \d+ · gpu \d+ · tp\d+( cp\d+)? pp\d+ dp\d+$")
METADATA_KEYS = ("scenario", "status", "iteration_time_s", "simulated_devices", "written_devices", "end_us")
MAX_REPORTED = 20


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt", encoding="utf-8") as f:
        return json.load(f, parse_float=decimal.Decimal)


def is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def is_num(v):
    return is_int(v) or isinstance(v, decimal.Decimal)


def check(trace):
    """Returns (problems, counts) for a loaded trace."""
    problems = []

    def bad(msg):
        problems.append(msg)

    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["not a JSON object with a traceEvents list"], {}
    other = trace.get("otherData")
    if not isinstance(other, dict):
        bad("no otherData object (run metadata)")
        other = {}
    for key in METADATA_KEYS:
        if key not in other:
            bad(f"otherData lacks '{key}'")

    process_names, thread_names = {}, {}
    slices = defaultdict(list)  # (pid, tid) -> [(ts, end, name, cat)]
    counters = defaultdict(int)  # pid -> samples
    flow_events = defaultdict(list)  # (cat, name, id) -> [event]
    pids_used = set()
    for i, e in enumerate(trace["traceEvents"]):
        where = f"event {i}"
        if not isinstance(e, dict):
            bad(f"{where}: not an object")
            continue
        ph = e.get("ph")
        if not is_int(e.get("pid")):
            bad(f"{where} ({ph}): pid missing or not an integer")
            continue
        if not isinstance(e.get("name"), str) or not e["name"]:
            bad(f"{where} ({ph}): name missing")
        pid = e["pid"]
        if ph == "M":
            args = e.get("args", {})
            if e.get("name") == "process_name":
                process_names[pid] = args.get("name")
            elif e.get("name") == "thread_name":
                if not is_int(e.get("tid")):
                    bad(f"{where}: thread_name without an integer tid")
                thread_names[(pid, e.get("tid"))] = args.get("name")
            elif e.get("name") not in ("process_sort_index", "thread_sort_index", "process_labels"):
                bad(f"{where}: unknown metadata event '{e.get('name')}'")
            continue
        pids_used.add(pid)
        ts = e.get("ts")
        if not is_num(ts) or ts < 0:
            bad(f"{where} ({ph} '{e.get('name')}'): ts missing or negative: {ts}")
            continue
        if ph == "X":
            dur = e.get("dur")
            if not is_num(dur) or dur < 0:
                bad(f"{where} '{e.get('name')}': dur missing or negative: {dur}")
                continue
            if not is_int(e.get("tid")):
                bad(f"{where} '{e.get('name')}': tid missing")
                continue
            if not isinstance(e.get("cat"), str):
                bad(f"{where} '{e.get('name')}': cat missing")
            if not isinstance(e.get("args"), dict):
                bad(f"{where} '{e.get('name')}': args missing")
            slices[(pid, e["tid"])].append((ts, ts + dur, e.get("name"), e.get("cat")))
        elif ph == "C":
            args = e.get("args")
            if not isinstance(args, dict) or not args or not all(is_num(v) for v in args.values()):
                bad(f"{where}: counter '{e.get('name')}' without numeric args")
            counters[pid] += 1
        elif ph in ("s", "t", "f"):
            if "id" not in e or not is_int(e.get("tid")):
                bad(f"{where}: flow event '{e.get('name')}' without id or tid")
                continue
            flow_events[(e.get("cat"), e.get("name"), e["id"])].append(e)
        else:
            bad(f"{where}: unknown phase {ph!r}")

    # Names and counters.
    for pid in sorted(pids_used):
        name = process_names.get(pid)
        if name is None:
            bad(f"process {pid}: no process_name")
        elif not isinstance(name, str) or not DEVICE_NAME.match(name):
            bad(f"process {pid}: name {name!r} is not 'node N · gpu G · tpT ppP dpD'")
        if counters[pid] == 0:
            bad(f"process {pid}: no memory counter")
    for key in sorted(slices):
        name = thread_names.get(key)
        if name not in STREAMS:
            bad(f"thread {key}: name {name!r} is not a stream ({', '.join(sorted(STREAMS))})")

    # Units: the last slice ends at end_us = iteration time in µs, less the compute the iteration
    # loses to communication running beside it (comm_contention_s), which the slices leave out.
    last_end = max((s[1] for items in slices.values() for s in items), default=decimal.Decimal(0))
    end_us = other.get("end_us")
    if is_num(end_us) and slices and last_end != end_us:
        bad(f"the last slice ends at {last_end} µs, otherData.end_us is {end_us}")
    try:
        iteration_us = decimal.Decimal(str(other.get("iteration_time_s"))) * 1000000
        contention_us = decimal.Decimal(str(other.get("comm_contention_s", "0"))) * 1000000
        if is_num(end_us) and abs(iteration_us - contention_us - end_us) > 2:
            bad(f"otherData.end_us {end_us} is not iteration_time_s {other.get('iteration_time_s')} "
                f"less comm_contention_s {other.get('comm_contention_s', '0')} in µs")
    except decimal.InvalidOperation:
        bad(f"otherData.iteration_time_s {other.get('iteration_time_s')!r} or comm_contention_s is not a number")

    # Nesting per thread: sort by start, longest first; a stack of open slices.
    for key, items in slices.items():
        items.sort(key=lambda s: (s[0], -s[1]))
        stack = []
        for start, end, name, _ in items:
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                bad(f"thread {key}: '{name}' [{start}, {end}] overlaps '{stack[-1][2]}' "
                    f"[{stack[-1][0]}, {stack[-1][1]}] without nesting")
            stack.append((start, end, name))

    # Flows: order of phases and binding to slices.
    starts = {(pid, tid, s[0], s[3]) for (pid, tid), items in slices.items() for s in items}
    for key, events in flow_events.items():
        phases = "".join(e["ph"] for e in events)
        if not re.fullmatch(r"st*f", phases):
            bad(f"flow {key}: phases {phases!r}, expected one start, steps, one finish")
            continue
        times = [e["ts"] for e in events]
        if times != sorted(times):
            bad(f"flow {key}: events out of time order")
        for e in events:
            pid, tid, ts = e["pid"], e["tid"], e["ts"]
            if e["ph"] == "f" and e.get("bp") == "e":
                ok = any(s <= ts <= end for s, end, _, cat in slices.get((pid, tid), ()) if cat == e.get("cat"))
            else:
                ok = (pid, tid, ts, e.get("cat")) in starts
            if not ok:
                bad(f"flow {key}: {e['ph']} at pid {pid} tid {tid} ts {ts} binds to no slice")

    counts = {
        "events": len(trace["traceEvents"]),
        "processes": len(pids_used),
        "threads": len(slices),
        "slices": sum(len(v) for v in slices.values()),
        "flows": len(flow_events),
        "counters": sum(counters.values()),
    }
    return problems, counts


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    failed = False
    for path in argv[1:]:
        try:
            problems, counts = check(load(path))
        except (OSError, ValueError, EOFError) as err:
            problems, counts = [f"cannot read: {err}"], {}
        if problems:
            failed = True
            print(f"{path}: {len(problems)} problem(s)")
            for p in problems[:MAX_REPORTED]:
                print(f"  {p}")
            if len(problems) > MAX_REPORTED:
                print(f"  ... {len(problems) - MAX_REPORTED} more")
        else:
            print(f"{path}: ok, " + ", ".join(f"{v} {k}" for k, v in counts.items()))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
