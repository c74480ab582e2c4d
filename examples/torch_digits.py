#!/usr/bin/python3
"""A small convolutional net trained from scratch on scikit-learn's digits
(1,797 8x8 images, 10 classes; Debian's python3-sklearn ships them), each
worker on its own shard of the training set, through dreamddp's PyTorch
front end or, with --baseline torch-ddp, through PyTorch's own
DistributedDataParallel (gloo). Prints the held-out accuracy at the end.

    ddrun -n 4 -- python3 examples/torch_digits.py --strategy dreamddp:4
    ddrun -n 4 -- python3 examples/torch_digits.py --baseline torch-ddp

From a source tree: PYTHONPATH=python (and DREAMDDP_LIBRARY=BUILD/.libs
when the build tree is elsewhere). Under torchrun it reads RANK and
WORLD_SIZE, and the baseline MASTER_ADDR and MASTER_PORT, which ddrun sets
too (without them: DREAMDDP_MASTER_ADDR and the port after
DREAMDDP_MASTER_PORT).
"""

import argparse
import hashlib
import json
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
from sklearn.datasets import load_digits


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 16, 3, padding=1)
        self.conv2 = nn.Conv2d(16, 32, 3, padding=1)
        self.fc1 = nn.Linear(32 * 4 * 4, 64)
        self.fc2 = nn.Linear(64, 10)

    def forward(self, x):
        x = F.relu(self.conv1(x))
        x = F.max_pool2d(F.relu(self.conv2(x)), 2)
        return self.fc2(F.relu(self.fc1(x.flatten(1))))


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--strategy", default="dreamddp:4",
                   help="ddp, localsgd:H, plsgd:H, dreamddp:H or adaptive")
    p.add_argument("--baseline", choices=["torch-ddp"],
                   help="train with torch.nn.parallel.DistributedDataParallel")
    p.add_argument("--steps", type=int, default=300)
    p.add_argument("--batch", type=int, default=32, help="per worker")
    p.add_argument("--lr", type=float, default=0.05)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="one JSON line")
    p.add_argument("--deterministic", action="store_true",
                   help="DreamDDP(deterministic=True): the same bits run after run")
    p.add_argument("--commit-every", type=int, default=20, metavar="K",
                   help="under ddrun --elastic, commit the state every K steps "
                        "(dreamddp.torch.elastic); a re-formed job resumes there")
    return p.parse_args()


def data(seed):
    """The training and held-out sets; the split is the same for every
    seed, so that every run is scored on the same images."""
    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    y = torch.tensor(d.target, dtype=torch.int64)
    order = torch.tensor(np.random.RandomState(0).permutation(len(y)))
    n_test = len(y) // 5
    test, train = order[:n_test], order[n_test:]
    return (x[train], y[train]), (x[test], y[test])


def batches(x, y, rank, workers, batch, seed):
    """This worker's shard, reshuffled every epoch, forever."""
    shard = torch.arange(rank, len(y), workers)
    g = torch.Generator().manual_seed(seed * 1000 + rank)
    while True:
        perm = shard[torch.randperm(len(shard), generator=g)]
        for i in range(0, len(perm) - batch + 1, batch):
            idx = perm[i:i + batch]
            yield x[idx], y[idx]


def env_int(*names):
    for n in names:
        if os.environ.get(n):
            return int(os.environ[n])
    return None


def setup_torch_ddp(net):
    import torch.distributed as dist

    rank = env_int("RANK", "DREAMDDP_RANK") or 0
    world = env_int("WORLD_SIZE", "DREAMDDP_WORLD_SIZE") or 1
    if not os.environ.get("MASTER_PORT"):
        # Under ddrun: its own port, the one after dreamddp's.
        base = env_int("DREAMDDP_MASTER_PORT")
        os.environ["MASTER_ADDR"] = os.environ.get("DREAMDDP_MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(base + 1 if base else 29500)
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    model = nn.parallel.DistributedDataParallel(net)

    def close():
        dist.barrier()  # no rank tears the group down under another
        dist.destroy_process_group()

    return model, rank, world, torch.optim.SGD, lambda m: None, close


def setup_dreamddp(net, strategy, deterministic):
    import dreamddp
    import dreamddp.torch

    dreamddp.serve_if_aggregator()  # aggregator ranks serve, then exit
    model = dreamddp.torch.DreamDDP(net, strategy=strategy,
                                    deterministic=deterministic or None)
    return (model, model.rank, model.num_workers, torch.optim.SGD,
            lambda m: m.sync_all(), lambda: None)


def main():
    o = parse()
    torch.manual_seed(o.seed)
    torch.set_num_threads(1)
    net = Net()
    if o.baseline:
        model, rank, workers, make_opt, before_eval, done = setup_torch_ddp(net)
    else:
        model, rank, workers, make_opt, before_eval, done = setup_dreamddp(
            net, o.strategy, o.deterministic)
    (xtr, ytr), (xte, yte) = data(o.seed)
    opt = make_opt(model.parameters(), lr=o.lr, momentum=0.9)
    start, batch, seed = 0, o.batch, o.seed
    if not o.baseline:
        import dreamddp.torch
        # Under ddrun --elastic: the newest commit, if the job was re-formed;
        # the global batch stays that of the first generation's workers.
        state = dreamddp.torch.elastic.State(model, opt, step=0, first_workers=workers)
        if state.restore() is not None:
            start = state.step
            if workers != state.first_workers:
                # Another world: shards of its own, the same global batch.
                seed = o.seed + 7919 * start
                batch = -(-o.batch * state.first_workers // workers)
    it = batches(xtr, ytr, rank, workers, batch, seed)
    if start and seed == o.seed:
        for _ in range(start):  # the same world: where the data was
            next(it)
    t0 = time.perf_counter()
    for step in range(start, o.steps):
        x, y = next(it)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if not o.baseline and (step + 1) % o.commit_every == 0:
            state.step = step + 1
            state.commit()
    ms = (time.perf_counter() - t0) * 1e3 / max(o.steps - start, 1)
    before_eval(model)  # dreamddp: average the replicas (sync_all)
    with torch.no_grad():
        out = net(xte)
        acc = (out.argmax(1) == yte).float().mean().item()
        test_loss = F.cross_entropy(out, yte).item()
    # The parameters' bits, hashed: the same in two deterministic runs.
    digest = hashlib.sha256(b"".join(
        p.detach().numpy().tobytes() for p in net.parameters())).hexdigest()[:16]
    done()
    name = "torch-ddp" if o.baseline else o.strategy
    if rank == 0:
        if o.json:
            print(json.dumps({"example": "torch_digits", "frontend": "torch" if o.baseline else "dreamddp",
                              "strategy": name, "workers": workers, "steps": o.steps,
                              "seed": o.seed, "accuracy": round(acc, 4),
                              "test_loss": round(test_loss, 4), "ms_per_step": round(ms, 3),
                              "params": digest}))
        else:
            print("torch_digits: %s, %d workers, %d steps, seed %d: held-out accuracy %.4f, "
                  "loss %.4f, %.2f ms/step, parameters %s"
                  % (name, workers, o.steps, o.seed, acc, test_loss, ms, digest))
    return 0


if __name__ == "__main__":
    sys.exit(main())
