#!/usr/bin/env python3
"""How much of the sync traffic overlaps backward, from DREAMDDP_TIMELINE
traces (one per rank):

    bench/overlap.py [--min PCT] TRACE.json...

A sync job counts when it holds a layer other than the last one in backward
(the layer of the step's last backward mark): those are the jobs that can
start before backward ends. For each trace it prints how many of them
started (engine start, the X event's ts) and how many were launched (handed
to the engine, args.submit, when the trace has it) before their step's last
backward mark, and the same over all traces. With --min PCT it exits 1 when
the started share over all traces is below PCT.

Marks carry their step in args.step; in older traces, without it, the marks
are taken to come in whole steps of every layer, in order. Syncs of a step
without marks (dd_sync_all after the last step) are left out.
"""
import json, sys


def layer_of(mark):
    return mark["name"].split(" ", 1)[1]


def steps_of(marks):
    """{step: (last mark's ts, last mark's layer)}."""
    names = []
    for e in marks:
        if layer_of(e) in names:
            break
        names.append(layer_of(e))
    per = {}
    for k, e in enumerate(marks):
        step = e.get("args", {}).get("step", k // max(len(names), 1))
        last = per.get(step)
        if last is None or e["ts"] >= last[0]:
            per[step] = (e["ts"], layer_of(e))
    return per


def job_layers(sync):
    names = sync.get("args", {}).get("names")
    if names is not None:
        return names, False
    # Older traces name the first layer and mark fused jobs with '+'.
    name = sync["name"].split(" ", 1)[1]
    return [name.rstrip("+")], name.endswith("+")


def count(path):
    events = [e for e in json.load(open(path)) if e.get("ph") in ("i", "X")]
    marks = [e for e in events if e.get("cat") == "backward"]
    syncs = [e for e in events if e.get("cat") == "sync"]
    per = steps_of(marks)
    total = started = launched = has_submit = 0
    for s in syncs:
        step = s.get("args", {}).get("step")
        if step not in per:
            continue
        end, last_layer = per[step]
        names, fused = job_layers(s)
        if not fused and all(n == last_layer for n in names):
            continue
        total += 1
        started += s["ts"] < end
        if "submit" in s.get("args", {}):
            has_submit += 1
            launched += s["args"]["submit"] < end
    return total, started, launched if has_submit == total else None


def main(argv):
    minimum = None
    if len(argv) > 2 and argv[1] == "--min":
        minimum = float(argv[2])
        argv = argv[2:]
    paths = argv[1:]
    if not paths:
        sys.exit(__doc__)
    T = S = 0
    L = 0
    all_launch = True
    for path in paths:
        total, started, launched = count(path)
        T, S = T + total, S + started
        if launched is None:
            all_launch = False
        else:
            L += launched
        lt = "" if launched is None else f", launched before: {launched}"
        print(f"{path}: {total} jobs with a layer other than the last; "
              f"started before backward ends: {started}{lt}")
    pct = 100.0 * S / T if T else 0.0
    lt = f", launched {100.0 * L / T:.1f} %" if all_launch and T else ""
    print(f"all: {S} of {T} started before their step's backward ended "
          f"({pct:.1f} %{lt})")
    if minimum is not None and pct < minimum:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
