#!/usr/bin/env python3
"""How much of the sync traffic overlaps backward, from DREAMDDP_TIMELINE
traces (one per rank):

    bench/overlap.py [--min PCT] TRACE.json...

A sync job counts when it holds a layer other than the last one in backward
(the layer of the step's last backward mark): those are the jobs that can
start before backward ends. For each trace it prints how many of them were
handed to the engine (args.submit), went on the wire (args.launch: the
engine started them, beside the job ahead when the pipe overlaps two) and
had the channel to themselves (the X event's ts, the planner's FIFO
channel) before their step's last backward mark, and the same over all
traces. With --min PCT it exits 1 when the share on the wire (ts in traces
without args.launch) over all traces is below PCT.

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
    n = {"total": 0, "submit": 0, "launch": 0, "ts": 0}
    for s in syncs:
        step = s.get("args", {}).get("step")
        if step not in per:
            continue
        end, last_layer = per[step]
        names, fused = job_layers(s)
        if not fused and all(x == last_layer for x in names):
            continue
        n["total"] += 1
        n["ts"] += s["ts"] < end
        args = s.get("args", {})
        for k in ("submit", "launch"):
            # Older traces lack them: counted as at ts.
            n[k] += args.get(k, s["ts"]) < end
    return n


def main(argv):
    minimum = None
    if len(argv) > 2 and argv[1] == "--min":
        minimum = float(argv[2])
        argv = argv[2:]
    paths = argv[1:]
    if not paths:
        sys.exit(__doc__)
    tot = {"total": 0, "submit": 0, "launch": 0, "ts": 0}
    for path in paths:
        n = count(path)
        for k in tot:
            tot[k] += n[k]
        print(f"{path}: {n['total']} jobs with a layer other than the last; before "
              f"backward ends: submitted {n['submit']}, on the wire {n['launch']}, "
              f"channel to themselves {n['ts']}")
    T = tot["total"]
    pct = lambda k: 100.0 * tot[k] / T if T else 0.0  # noqa: E731
    print(f"all: {tot['launch']} of {T} on the wire before their step's backward ended "
          f"({pct('launch'):.1f} %; submitted {pct('submit'):.1f} %, channel to "
          f"themselves {pct('ts'):.1f} %)")
    if minimum is not None and pct("launch") < minimum:
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
