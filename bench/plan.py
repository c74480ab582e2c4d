#!/usr/bin/env python3
"""bench/plan.py: the planner against the DreamDDP paper's schedules.

For every profile under PROFILES that ships the paper artifact's schedule,
`ddbench plan DIR --H <artifact's H> --json` is handed to the reference cost
model (`schedsim.py DIR SCHEDULE`), which models FLSGD, uniform PLSGD, the
artifact's schedule and ours on the same footing. gpt2-blocks has sizes but
no communication times: they are derived at the rate of a ring allreduce
among 4 hosts at 1 Gbit/s, for the full model and for scale 0.25 (the train
simulator's), and the same cost model is applied through schedsim's own
functions (there is no artifact schedule to compare with).
Writes results/plan.jsonl, then prints the table (report.py plan).
No network, no lock: this is pure modeling.
"""
import glob, json, os, shutil, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
top = os.path.dirname(here)
shared = os.environ.get("DDTEST_SHARED", os.path.join(top, "..", "shared"))
anchors = os.environ.get("ANCHORS", os.path.join(shared, "anchors"))
fixtures = os.path.join(top, "tests", "fixtures")
# The published profiles; the repository carries them in tests/fixtures.
profiles = os.environ.get("PROFILES") or next(
    d for d in (os.path.join(shared, "profiles"), os.path.join(fixtures, "profiles"))
    if os.path.isdir(d) or d.startswith(fixtures))
ddbench = os.environ.get("DDBENCH", os.path.join(os.environ.get("BUILDDIR", top), "tools", "ddbench"))
results = os.environ.get("RESULTS", os.path.join(here, "results"))
# schedsim.py, the reference cost model: the repository carries a copy.
if not os.path.isfile(os.path.join(anchors, "schedsim.py")):
    anchors = fixtures
sys.path.insert(0, anchors)
import schedsim  # noqa: E402  (the reference cost model)

RING_4_1GBIT = 125e6 * 4 / (2 * 3)  # bytes of model averaged per second


def plan(profile_dir, H, bps=None):
    cmd = [ddbench, "plan", profile_dir, "--H", str(H), "--json"]
    if bps:
        cmd += ["--bytes-per-second", repr(bps)]
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def with_artifact(d):
    """The paper's profiles: the schedsim.py command line, as a user runs it."""
    H = json.load(open(os.path.join(d, "dreamddp_scheduling.json")))["H"]
    ours = plan(d, H)
    with tempfile.NamedTemporaryFile("w", suffix=".json") as f:
        json.dump(ours, f)
        f.flush()
        out = subprocess.run([sys.executable, os.path.join(anchors, "schedsim.py"), d, f.name],
                             check=True, capture_output=True, text=True).stdout
    res = json.loads(out)
    res["ddbench_modeled"] = ours["modeled"]
    return res


def derived(d, H, bps, label):
    """A profile with sizes only: comm = bytes / rate, then schedsim's model."""
    tmp = tempfile.mkdtemp()
    try:
        shutil.copy(glob.glob(os.path.join(d, "bp_*.json"))[0], tmp)
        sizes = json.load(open(glob.glob(os.path.join(d, "sizes_*.json"))[0]))
        json.dump({k: 4 * n / bps for k, n in sizes.items()}, open(os.path.join(tmp, "comm_derived.json"), "w"))
        ours = plan(d, H, bps)
        layers, bpb, comm, bp_sum = schedsim.load(tmp)
    finally:
        shutil.rmtree(tmp)
    per = -(-len(layers) // H)
    uniform = {l: min(i // per, H - 1) for i, l in enumerate(layers)}
    return {"profile": label, "H": H, "layers": len(layers), "bp_sum": bp_sum,
            "comm_sum": sum(comm), "bytes_per_second": bps,
            "flsgd": bp_sum + sum(comm) / H,
            "plsgd_uniform": schedsim.window_time(layers, bpb, comm, bp_sum, uniform, H),
            "candidate": schedsim.window_time(layers, bpb, comm, bp_sum, ours["schedule"], H),
            "ddbench_modeled": ours["modeled"]}


def main():
    os.makedirs(results, exist_ok=True)
    out = os.path.join(results, "plan.jsonl")
    rows = []
    for d in sorted(glob.glob(os.path.join(profiles, "*", ""))):
        d = d.rstrip("/")
        if os.path.exists(os.path.join(d, "dreamddp_scheduling.json")):
            rows.append(with_artifact(d))
        elif glob.glob(os.path.join(d, "sizes_*.json")):
            name = os.path.basename(d)
            rows.append(derived(d, 4, RING_4_1GBIT, name))
            rows.append(derived(d, 4, RING_4_1GBIT / 0.25, name + " (scale 0.25)"))
    with open(out, "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    subprocess.run([sys.executable, os.path.join(here, "report.py"), "plan", out], check=True)


if __name__ == "__main__":
    main()
