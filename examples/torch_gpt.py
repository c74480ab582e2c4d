#!/usr/bin/python3
"""A small byte-level GPT trained from scratch on the Python standard
library's sources, through dreamddp's PyTorch front end or, for
comparison, through PyTorch's own DistributedDataParallel, PyTorch's
post-local SGD, or no wrapper at all. Prints one JSON line per evaluation
of the held-out loss, so that runs can be compared loss against time.

    ddrun -n 4 -- python3 examples/torch_gpt.py                      # ddp
    ddrun -n 4 -- python3 examples/torch_gpt.py --strategy dreamddp:4 --check-replicas
    ddrun -n 6 --aggregators 2 -- python3 examples/torch_gpt.py --strategy ddp
    ddrun -n 4 -- python3 examples/torch_gpt.py --baseline torch-ddp
    ddrun -n 4 -- python3 examples/torch_gpt.py --baseline torch-localsgd:4
    python3 examples/torch_gpt.py --baseline plain    # one rank, no wrapper

From a source tree: PYTHONPATH=python (and DREAMDDP_LIBRARY=BUILD/.libs
when the build tree is elsewhere). The baselines use torch.distributed over
gloo at MASTER_ADDR and MASTER_PORT, which ddrun and torchrun set (without
them: the port after DREAMDDP_MASTER_PORT).

The model: token and position embeddings, --layers pre-LayerNorm blocks
(causal self-attention written out with nn.Linear, a 4x MLP with GELU,
residuals), a final LayerNorm, and an output head tied to the token
embedding; 256 tokens, one per byte. No dropout: every mode computes the
same function, so that --strategy ddp matches --baseline torch-ddp. The
default (4 layers, width 128, context 64, batch 8: 834,304 parameters)
takes about 1.1 s an iteration on 4 ranks sharing 2 cores.

The data: every .py file under /usr/lib/python3.<minor>/ (the standard
library Debian ships; not dist-packages), in sorted order; every tenth
file (index % 10 == 9) is held out. Each part is the files' bytes joined
by a newline. The global batch of iteration i is world x --batch random
windows of --context + 1 bytes of the training part, drawn from a
generator seeded by (--seed, i); rank r takes windows [r*batch, (r+1)*batch).
So every mode and every strategy sees the same batches. The held-out set is
--val-batches x --batch windows of the held-out part, drawn once from a
fixed generator (the same for every seed).

Every rank evaluates its own replica, as it stands (no sync_all first),
at iteration 0, every --eval-every iterations and after the last one.
Rank 0 prints JSON lines on standard output:

    {"event": "data", "train_files", "train_bytes", "val_files", "val_bytes",
     "glob", "args" (every flag's value)}
    {"event": "eval", "mode", "world", "iter", "samples", "time_s",
     "train_loss", "val_loss"}
    {"event": "replicas", "equal", "max_diff"}       with --check-replicas
    {"event": "done", "mode", "world", "iters", "params", "s_per_iter", "time_s"}

time_s is the training wall-clock time since the first iteration, without
the evaluations; samples counts the global samples seen (iter x world x
batch); train_loss is the mean of rank 0's training losses since the
previous evaluation (null at iteration 0); s_per_iter is the mean time of
an iteration without the first two. --time-budget is checked at each
evaluation (rank 0's clock decides for all). --check-replicas calls
sync_all() at the end and exits 1 unless every rank's parameters are
bitwise equal.
"""

import argparse
import glob
import json
import math
import os
import sys
import time
import types

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

DATA_GLOB = "/usr/lib/python3.*/**/*.py"
VOCAB = 256
VAL_SEED = 12345  # the held-out windows: the same whatever --seed


# ---- the model ---------------------------------------------------------------


class CausalSelfAttention(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(width, 3 * width)
        self.proj = nn.Linear(width, width)

    def forward(self, x):
        b, t, c = x.shape
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2)
                   for z in self.qkv(x).split(c, dim=2))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(c // self.heads))
        # Built per call rather than kept as a buffer: a buffer would be
        # broadcast from rank 0 at every forward (broadcast_buffers).
        future = torch.ones(t, t, dtype=torch.bool, device=x.device).triu(1)
        att = att.masked_fill(future, float("-inf")).softmax(dim=-1)
        return self.proj((att @ v).transpose(1, 2).reshape(b, t, c))


class Block(nn.Module):
    def __init__(self, width, heads):
        super().__init__()
        self.ln1 = nn.LayerNorm(width)
        self.attn = CausalSelfAttention(width, heads)
        self.ln2 = nn.LayerNorm(width)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(),
                                 nn.Linear(4 * width, width))

    def forward(self, x):
        x = x + self.attn(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class GPT(nn.Module):
    def __init__(self, layers, width, heads, context):
        super().__init__()
        self.tok = nn.Embedding(VOCAB, width)
        self.pos = nn.Embedding(context, width)
        self.blocks = nn.ModuleList(Block(width, heads) for _ in range(layers))
        self.ln = nn.LayerNorm(width)
        self._init(layers)

    def _init(self, layers):
        """GPT-2's: N(0, 0.02), zero biases, and the projections into the
        residual stream scaled down by the depth."""
        for name, p in self.named_parameters():
            if name.endswith("bias"):
                nn.init.zeros_(p)
            elif p.dim() == 2:
                std = 0.02
                if name.endswith("attn.proj.weight") or name.endswith("mlp.2.weight"):
                    std /= math.sqrt(2 * layers)
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx):
        t = idx.shape[1]
        x = self.tok(idx) + self.pos(torch.arange(t, device=idx.device))
        for block in self.blocks:
            x = block(x)
        # The head is the token embedding itself: one parameter, synced once.
        return F.linear(self.ln(x), self.tok.weight)


def lm_loss(model, x, y):
    return F.cross_entropy(model(x).reshape(-1, VOCAB), y.reshape(-1))


# ---- the data ----------------------------------------------------------------


def load_corpus():
    """{"train": bytes tensor, "val": ...} and the counts of each part."""
    files = sorted(glob.glob(DATA_GLOB, recursive=True))
    if not files:
        sys.exit("torch_gpt: no Python sources match %s" % DATA_GLOB)
    parts = {"train": [], "val": []}
    for i, path in enumerate(files):
        with open(path, "rb") as f:
            parts["val" if i % 10 == 9 else "train"].append(f.read())
    data, info = {}, {}
    for name, texts in parts.items():
        data[name] = torch.frombuffer(bytearray(b"\n".join(texts)), dtype=torch.uint8)
        info[name + "_files"] = len(texts)
        info[name + "_bytes"] = len(data[name])
    return data, info


def windows(data, starts, context):
    """Inputs and next-byte targets of the windows at starts."""
    idx = torch.from_numpy(starts).reshape(-1, 1) + torch.arange(context + 1)
    w = data[idx].long()
    return w[:, :-1], w[:, 1:]


def train_batch(data, o, i, rank, world):
    """This rank's share of iteration i's global batch: the same global
    batch in every mode, whoever draws it."""
    rng = np.random.default_rng([o.seed, i])
    starts = rng.integers(0, len(data) - o.context, size=world * o.batch)
    return windows(data, starts[rank * o.batch:(rank + 1) * o.batch], o.context)


def val_set(data, o):
    rng = np.random.default_rng(VAL_SEED)
    starts = rng.integers(0, len(data) - o.context, size=(o.val_batches, o.batch))
    return [windows(data, s, o.context) for s in starts]


# ---- the modes: what wraps the model, and how the ranks talk ---------------


def env_int(*names):
    for n in names:
        if os.environ.get(n):
            return int(os.environ[n])
    return None


def setup_dreamddp(net, o):
    import dreamddp
    import dreamddp.torch as ddt

    model = ddt.DreamDDP(net, strategy=o.strategy, compression=o.compression)
    ctx = dreamddp.context()
    return types.SimpleNamespace(
        model=model, rank=ctx.worker_ranks.index(ctx.rank), world=model.num_workers,
        mode=model.strategy, optimizer=lambda opt: opt,
        broadcast=lambda t: ddt.broadcast(t, root=ctx.worker_ranks[0]),
        gather=ddt.all_gather, sync=model.sync_all, close=lambda: None)


def init_torch_distributed():
    import torch.distributed as dist

    rank = env_int("RANK", "DREAMDDP_RANK") or 0
    world = env_int("WORLD_SIZE", "DREAMDDP_WORLD_SIZE") or 1
    if not os.environ.get("MASTER_PORT"):
        # Under ddrun: a port of its own, the one after dreamddp's.
        base = env_int("DREAMDDP_MASTER_PORT")
        os.environ["MASTER_ADDR"] = os.environ.get("DREAMDDP_MASTER_ADDR", "127.0.0.1")
        os.environ["MASTER_PORT"] = str(base + 1 if base else 29500)
    dist.init_process_group("gloo", init_method="env://", rank=rank, world_size=world)
    return dist, rank, world


def torch_comm(dist, rank, world):
    def gather(t):
        out = [torch.empty_like(t) for _ in range(world)]
        dist.all_gather(out, t)
        return torch.stack(out)

    def broadcast(t):
        dist.broadcast(t, 0)
        return t

    def close():
        # Every rank past its last collective before any tears down: a
        # rank that destroys the group while another still finishes one
        # can leave that one waiting (seen once in 2 ranks on 2 cores).
        dist.barrier()
        dist.destroy_process_group()

    return dict(rank=rank, world=world, close=close,
                broadcast=broadcast, gather=gather)


def setup_torch_ddp(net, o):
    dist, rank, world = init_torch_distributed()
    return types.SimpleNamespace(
        model=nn.parallel.DistributedDataParallel(net), mode="torch-ddp",
        optimizer=lambda opt: opt, sync=lambda: None, **torch_comm(dist, rank, world))


def setup_torch_localsgd(net, o, period):
    """PyTorch's post-local SGD as its PostLocalSGDOptimizer docstring sets
    it up: DDP allreduces gradients for the first --localsgd-warmup
    iterations, then only within a subgroup; the optimizer averages the
    parameters every `period` steps after its warmup."""
    import torch.distributed.algorithms.model_averaging.averagers as averagers
    from torch.distributed.algorithms.ddp_comm_hooks.post_localSGD_hook import (
        PostLocalSGDState, post_localSGD_hook)
    from torch.distributed.algorithms.model_averaging.utils import average_parameters
    from torch.distributed.optim import PostLocalSGDOptimizer

    dist, rank, world = init_torch_distributed()
    # subgroup=None groups the ranks by CUDA device count, and
    # dist.new_subgroups refuses to run without CUDA (torch 1.13): the
    # subgroups are made here, one rank each, so that the local phase is
    # local. Every rank creates every group, as new_group requires.
    subgroup = [dist.new_group(ranks=[r]) for r in range(world)][rank]
    model = nn.parallel.DistributedDataParallel(net)
    state = PostLocalSGDState(process_group=None, subgroup=subgroup,
                              start_localSGD_iter=o.localsgd_warmup)
    model.register_comm_hook(state, post_localSGD_hook)

    def optimizer(opt):
        averager = averagers.PeriodicModelAverager(period=period,
                                                   warmup_steps=o.localsgd_warmup)
        return PostLocalSGDOptimizer(optim=opt, averager=averager)

    return types.SimpleNamespace(
        model=model, mode="torch-localsgd:%d" % period, optimizer=optimizer,
        sync=lambda: average_parameters(iter(list(net.parameters())), None),
        **torch_comm(dist, rank, world))


def setup_plain(net, o):
    world = env_int("WORLD_SIZE", "DREAMDDP_WORLD_SIZE") or 1
    if world != 1:
        sys.exit("torch_gpt: --baseline plain runs on one rank (world size %d)" % world)
    return types.SimpleNamespace(
        model=net, rank=0, world=1, mode="plain", optimizer=lambda opt: opt,
        broadcast=lambda t: t, gather=lambda t: t.unsqueeze(0),
        sync=lambda: None, close=lambda: None)


def setup(net, o):
    if o.baseline is None:
        return setup_dreamddp(net, o)
    if o.baseline == "torch-ddp":
        return setup_torch_ddp(net, o)
    if o.baseline == "plain":
        return setup_plain(net, o)
    return setup_torch_localsgd(net, o, int(o.baseline.split(":")[1]))


def make_optimizer(run, o):
    params = run.model.parameters()
    if o.optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=o.lr, momentum=0.9)
    else:
        opt = torch.optim.AdamW(params, lr=o.lr, weight_decay=o.weight_decay)
    return run.optimizer(opt)


# ---- training ------------------------------------------------------------------


def lr_at(o, i):
    return o.lr * min(1.0, (i + 1) / o.warmup_iters) if o.warmup_iters else o.lr


def train_step(run, opt, x, y, lr):
    for g in opt.param_groups:
        g["lr"] = lr
    opt.zero_grad(set_to_none=True)
    loss = lm_loss(run.model, x, y)
    loss.backward()
    opt.step()
    return loss.item()


def evaluate(model, val):
    """The mean loss of this rank's replica on the held-out set."""
    model.eval()
    with torch.no_grad():
        total = sum(lm_loss(model, x, y).item() for x, y in val)
    model.train()
    return total / len(val)


def emit(run, **fields):
    if run.rank == 0:
        print(json.dumps(fields), flush=True)


class Clock:
    """Training time: wall clock since the first iteration, less the
    evaluations."""

    def __init__(self):
        self.start = None
        self.paused = 0.0
        self.steps = []

    def train_time(self):
        return 0.0 if self.start is None else time.perf_counter() - self.start - self.paused


def log_eval(run, o, val, it, clock, losses):
    """Evaluates, prints rank 0's line, and says whether to stop: the time
    budget is spent, or --stop-loss is reached past --min-iters and
    --min-time (rank 0's clock and loss decide for every rank)."""
    t0 = time.perf_counter()
    elapsed = clock.train_time()
    val_loss = evaluate(run.model, val)
    emit(run, event="eval", mode=run.mode, world=run.world, iter=it,
         samples=it * run.world * o.batch, time_s=round(elapsed, 4),
         train_loss=(sum(losses) / len(losses)) if losses else None, val_loss=val_loss)
    reached = (o.stop_loss is not None and val_loss <= o.stop_loss
               and it >= o.min_iters and elapsed >= o.min_time)
    over = torch.tensor([int(reached or (o.time_budget is not None and elapsed > o.time_budget))])
    over = run.broadcast(over)
    if clock.start is not None:
        clock.paused += time.perf_counter() - t0
    return bool(over.item())


def train(run, o, data, val):
    """Trains for --iters iterations or until the time budget is spent;
    returns the iterations run and the clock."""
    opt = make_optimizer(run, o)
    clock = Clock()
    losses = []
    log_eval(run, o, val, 0, clock, losses)
    for it in range(1, o.iters + 1):
        t0 = time.perf_counter()
        if clock.start is None:
            clock.start = t0
        x, y = train_batch(data, o, it - 1, run.rank, run.world)
        losses.append(train_step(run, opt, x, y, lr_at(o, it - 1)))
        clock.steps.append(time.perf_counter() - t0)
        if it % o.eval_every == 0 or it == o.iters:
            over = log_eval(run, o, val, it, clock, losses)
            losses = []
            if over:
                break
    return it, clock


def check_replicas(run, net):
    """sync_all (or the baseline's average), then every rank's parameters
    gathered and compared bit for bit with rank 0's."""
    run.sync()
    flat = torch.cat([p.detach().reshape(-1) for p in net.parameters()])
    every = run.gather(flat)
    equal = all(torch.equal(every[0], every[r]) for r in range(len(every)))
    diff = (every - every[0]).abs().max().item()
    emit(run, event="replicas", mode=run.mode, world=run.world, equal=equal, max_diff=diff)
    return equal


# ---- the command line ------------------------------------------------------------


def parse(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--strategy", default="ddp",
                   help="dreamddp's: ddp, localsgd:H, plsgd:H, dreamddp:H (also +next), adaptive")
    p.add_argument("--compression", help="dreamddp's codec: fp16, bf16, topk:RATIO, powersgd:RANK")
    p.add_argument("--baseline",
                   help="instead of dreamddp: torch-ddp, torch-localsgd:H, or plain (one rank)")
    p.add_argument("--localsgd-warmup", type=int, default=0,
                   help="torch-localsgd: iterations of plain DDP first")
    p.add_argument("--check-replicas", action="store_true",
                   help="at the end: sync_all, then every rank's parameters bitwise equal or exit 1")
    p.add_argument("--iters", type=int, default=200)
    p.add_argument("--eval-every", type=int, default=20)
    p.add_argument("--val-batches", type=int, default=8, help="held-out batches")
    p.add_argument("--time-budget", type=float, help="stop after this much training time (s)")
    p.add_argument("--stop-loss", type=float,
                   help="stop at the first evaluation with a held-out loss this low,"
                   " past --min-iters and --min-time")
    p.add_argument("--min-iters", type=int, default=0, help="with --stop-loss")
    p.add_argument("--min-time", type=float, default=0.0, help="with --stop-loss (s)")
    p.add_argument("--layers", type=int, default=4)
    p.add_argument("--width", type=int, default=128)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--context", type=int, default=64)
    p.add_argument("--batch", type=int, default=8, help="per worker")
    p.add_argument("--optimizer", choices=["adamw", "sgd"], default="adamw")
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--weight-decay", type=float, default=0.01, help="adamw")
    p.add_argument("--warmup-iters", type=int, default=0, help="linear lr warmup")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--threads", type=int, default=1, help="torch.set_num_threads")
    o = p.parse_args(argv)
    b = o.baseline
    if b is not None and b not in ("torch-ddp", "plain") and not (
            b.startswith("torch-localsgd:") and b.split(":")[1].isdigit()
            and int(b.split(":")[1]) >= 1):
        p.error("--baseline: torch-ddp, torch-localsgd:H (H >= 1) or plain, not '%s'" % b)
    if b is not None and o.compression:
        p.error("--compression is dreamddp's; the baselines send full precision")
    if o.width % o.heads:
        p.error("--width must be a multiple of --heads")
    if min(o.iters, o.eval_every, o.val_batches, o.batch, o.context) < 1:
        p.error("--iters, --eval-every, --val-batches, --batch and --context must be positive")
    return o


def main():
    o = parse()
    if o.baseline is None:
        import dreamddp

        dreamddp.serve_if_aggregator()  # aggregator ranks serve, then exit
    torch.set_num_threads(o.threads)
    torch.manual_seed(o.seed)  # the same initial model on every rank
    net = GPT(o.layers, o.width, o.heads, o.context)
    run = setup(net, o)
    data, info = load_corpus()
    emit(run, event="data", glob=DATA_GLOB, **info, args=vars(o))
    val = val_set(data["val"], o)
    iters, clock = train(run, o, data["train"], val)
    train_time = clock.train_time()
    equal = check_replicas(run, net) if o.check_replicas else True
    steady = clock.steps[2:] or clock.steps
    emit(run, event="done", mode=run.mode, world=run.world, iters=iters,
         params=sum(p.numel() for p in net.parameters()),
         s_per_iter=sum(steady) / max(len(steady), 1), time_s=round(train_time, 4))
    run.close()
    return 0 if equal else 1


if __name__ == "__main__":
    sys.exit(main())
