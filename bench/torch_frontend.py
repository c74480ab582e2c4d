#!/usr/bin/python3
"""The PyTorch front end on the anchors' gpt2-blocks model: the very Model
of ../shared/anchors/torch_sim.py (its layers, parameter sizes and per-layer
backward sleeps, read from that file, not copied), wrapped in
dreamddp.torch.DreamDDP, timed as torch_sim.py times its runs.

usage: torch_frontend.py MODE ITERS
  MODE: compute (the same model and loop without dreamddp) | a dreamddp
        strategy (ddp, localsgd:4, dreamddp:4, ...)
SCALE and FORWARD as for torch_sim.py. Ranks from torchrun's variables (or
ddrun's); dreamddp's store takes MASTER_PORT + 1. Rank 0 prints one JSON
line: anchor "frontend-MODE", mean_iter_s, and mean exposed wait (dd_step_end's
wait_s) per iteration.

The timed iterations follow the same warm-up as ddbench train-sim's: the
profiling steps (DREAMDDP_PROFILE_STEPS, 5 by default) rounded up to whole
windows, plus one window for the first plan (and two more under delayed
averaging, "+next"), so that the front end and train-sim time the same
planned steps. The compute mode warms up one step.
"""

import os
import json
import re
import sys
import time

ANCHORS = os.environ.get(
    "ANCHORS",
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared", "anchors"),
)


def load_torch_sim():
    """torch_sim.py's definitions, without running its main()."""
    path = os.path.join(ANCHORS, "torch_sim.py")
    src = open(path).read()
    body, tail = src.rstrip().rsplit("\n", 1)
    if tail.strip() != "main()":
        sys.exit("torch_frontend: %s no longer ends with main(); update the loader" % path)
    ns = {"__file__": path, "__name__": "torch_sim"}
    exec(compile(body, path, "exec"), ns)
    return ns


def warmup(strategy):
    """ddbench train-sim's warm-up for a strategy such as 'dreamddp:4'."""
    m = re.match(r"[a-z_]+:([0-9]+)", strategy)
    h = int(m.group(1)) if m else 1
    profile = int(os.environ.get("DREAMDDP_PROFILE_STEPS", "5"))
    windows = (profile + h - 1) // h + 1
    if "+next" in strategy:
        windows += 2  # delayed averaging: the backlog's steady state, as train-sim
    return windows * h


def main():
    mode, iters = sys.argv[1], int(sys.argv[2])
    sim = load_torch_sim()
    torch = sim["torch"]
    scale = float(os.environ.get("SCALE", "1.0"))
    model = sim["Model"](scale)
    barrier, wait = None, []
    if mode == "compute":
        env = lambda *names: next((int(os.environ[n]) for n in names if os.environ.get(n)), None)  # noqa: E731
        rank = env("RANK", "DREAMDDP_RANK") or 0
        world = env("WORLD_SIZE", "DREAMDDP_WORLD_SIZE") or 1
        opt = torch.optim.SGD(model.parameters(), lr=0.0)
        finish = lambda: None  # noqa: E731
    else:
        import dreamddp
        import dreamddp.torch

        ddp = dreamddp.torch.DreamDDP(model, strategy=mode)
        rank, world = ddp.rank, ddp.num_workers
        barrier = dreamddp.context().barrier
        opt = dreamddp.torch.wrap_optimizer(torch.optim.SGD(ddp.parameters(), lr=0.0), ddp)
        model = ddp
        finish = lambda: wait.append(ddp.last_stats["wait_s"])  # noqa: E731
    x = torch.ones(4, requires_grad=True)
    times = []
    warm = 1 if mode == "compute" else warmup(dreamddp.context().strategy)
    for it in range(warm + iters):
        if barrier:
            barrier()
        t0 = time.perf_counter()
        opt.zero_grad()
        model(x).backward()
        opt.step()
        if it >= warm:
            times.append(time.perf_counter() - t0)
            finish()
    if rank == 0:
        out = {"anchor": "frontend-" + mode, "world": world, "scale": scale,
               "forward": sim["FORWARD"], "iters": iters, "warmup": warm,
               "mean_iter_s": sum(times) / len(times)}
        if wait:
            out["mean_wait_s"] = sum(wait) / len(wait)
        print(json.dumps(out))


main()
