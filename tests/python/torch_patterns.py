"""A PyTorch user's ordinary loops through the front end, each beside
PyTorch's DistributedDataParallel (gloo) on the same batches and seeds
(run by tests/python/test_torch_patterns.sh under ddrun).

    torch_patterns.py CASE STRATEGY

Under ddp the loop runs twice in the same processes, through DreamDDP and
through DDP, from the same weights; the parameters (and buffers, and what
the case watches) must be bitwise equal to DDP's, unless the case says
why not. Under the averaging strategies (dreamddp:2, dreamddp:2+next) the
loop runs through DreamDDP alone, and after sync_all every replica must be
bitwise equal, parameters and buffers. Each prints one line starting with
"torch_patterns: " on success and exits 1 with the reason otherwise.

The misuse cases (module, twice, changed, early-sync-all, uneven) expect
an error naming the mistake within 5 s of it, measured here.
"""

import hashlib
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

import dreamddp
import dreamddp.torch as ddt
from torch_mp import free_port_everywhere

STEPS = 6


def fail(msg):
    print("torch_patterns: FAIL rank %d: %s" % (dreamddp.context().rank, msg))
    sys.stdout.flush()
    os._exit(1)


def say(msg):
    if dreamddp.context().rank == 0:
        print("torch_patterns: %s" % msg)


# ---- models and data ----------------------------------------------------


class ConvNet(nn.Module):
    """Convolution, batch norm (buffers), two linear layers."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc1 = nn.Linear(4 * 6 * 6, 16)
        self.fc2 = nn.Linear(16, 3)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(12, 16)
        self.fc2 = nn.Linear(16, 16)
        self.fc3 = nn.Linear(16, 3)

    def forward(self, x):
        return self.fc3(torch.relu(self.fc2(torch.relu(self.fc1(x)))))


class Branchy(nn.Module):
    """Two branches, one taken per step (chosen by the caller), and a head
    that no forward ever uses."""

    def __init__(self):
        super().__init__()
        self.inp = nn.Linear(12, 16)
        self.left = nn.Linear(16, 16)
        self.right = nn.Linear(16, 16)
        self.head = nn.Linear(16, 3)
        self.never = nn.Linear(16, 3)

    def forward(self, x, branch=0):
        h = torch.relu(self.inp(x))
        h = torch.relu(self.left(h) if branch == 0 else self.right(h))
        return self.head(h)


class Tied(nn.Module):
    """An embedding shared with the output head."""

    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(40, 16)
        self.mid = nn.Linear(16, 16)
        self.out = nn.Linear(16, 40, bias=False)
        self.out.weight = self.emb.weight

    def forward(self, tokens):
        return self.out(torch.tanh(self.mid(self.emb(tokens))))


def images(step, rank, n=8):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


def vectors(step, rank, n=8):
    g = torch.Generator().manual_seed(2000 * step + rank)
    return torch.randn(n, 12, generator=g), torch.randint(0, 3, (n,), generator=g)


def tokens(step, rank, n=8):
    g = torch.Generator().manual_seed(3000 * step + rank)
    x = torch.randint(0, 40, (n,), generator=g)
    return x, (x * 7 + 3) % 40


# ---- the two sides --------------------------------------------------------


def worker():
    return dreamddp.context().worker_ranks.index(dreamddp.context().rank)


_dist = None


def dist():
    """torch.distributed over gloo beside dreamddp, on a port rank 0
    found free and told every rank through dreamddp."""
    global _dist
    if _dist is None:
        import torch.distributed as d

        port = free_port_everywhere()
        d.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                             rank=worker(), world_size=dreamddp.context().num_workers)
        _dist = d
    return _dist


def twins(make, seed=7):
    """Two copies of a model from the same seed on every rank."""
    torch.manual_seed(seed)
    a = make()
    b = make()
    b.load_state_dict(a.state_dict())
    return a, b


def ours(net, strategy, **kw):
    return ddt.DreamDDP(net, strategy=strategy, **kw)


def theirs(net, **kw):
    dist()
    return torch.nn.parallel.DistributedDataParallel(net, **kw)


def states(net):
    return list(net.state_dict().items())


def same_as(a, b, what, exact=True, tol=0.0):
    """Parameters and buffers of a equal b's (bitwise, or within tol);
    returns the largest difference."""
    worst = 0.0
    for (n, x), (_, y) in zip(states(a), states(b)):
        d = (x.double() - y.double()).abs().max().item() if x.numel() else 0.0
        worst = max(worst, d)
        if (exact and not torch.equal(x, y)) or d > tol:
            fail("%s: %s differs from DDP's by %g" % (what, n, d))
    return worst


def digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return torch.tensor([int.from_bytes(h.digest()[:7], "little")], dtype=torch.int64)


def replicas_equal(net, what):
    model_state = [t for _, t in states(net)]
    mine = digest(model_state)
    if not bool((ddt.all_gather(mine) == mine).all()):
        fail("%s: the replicas differ after sync_all" % what)


def finish(strategy, model, net, ref_net=None, ref=None, what="", exact=True, tol=0.0):
    """The case's verdict: DDP's values under ddp, equal replicas after
    sync_all otherwise."""
    if strategy == "ddp":
        worst = same_as(net, ref_net, what, exact, tol)
        return ("parameters and buffers %s DDP's after %d steps"
                % ("bitwise equal to" if exact else "within %g of (max %g)" % (tol, worst), STEPS))
    model.sync_all()
    replicas_equal(net, what)
    return "replicas bitwise equal after sync_all"


def sgd(model, **kw):
    return torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9, **kw)


def both(strategy, make, loop, **kw):
    """Runs loop(model, opt, side) through DreamDDP and, under ddp,
    through DDP; returns (model, net, ref, ref_net)."""
    net, ref_net = twins(make)
    model = ours(net, strategy, **{k: v for k, v in kw.items() if k != "opt"})
    opt = (kw.get("opt") or sgd)(model)
    loop(model, opt, "ours")
    ref = None
    if strategy == "ddp":
        ref = theirs(ref_net, **{k: v for k, v in kw.items() if k != "opt"})
        loop(ref, (kw.get("opt") or sgd)(ref), "ddp")
    return model, net, ref, ref_net


# ---- the cases ------------------------------------------------------------


def case_clip(strategy):
    """clip_grad_norm_ right after backward sees the averaged gradients."""
    norms = {"ours": [], "ddp": []}

    def loop(model, opt, side):
        for step in range(STEPS):
            x, y = images(step, worker())
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            norms[side].append(nn.utils.clip_grad_norm_(model.parameters(), 0.5))
            opt.step()

    model, net, ref, ref_net = both(strategy, ConvNet, loop)
    if strategy == "ddp" and not all(torch.equal(a, b) for a, b in zip(norms["ours"], norms["ddp"])):
        fail("clip: norms %s, DDP's %s" % (norms["ours"], norms["ddp"]))
    return "clip_grad_norm_ after backward: %s" % finish(strategy, model, net, ref_net, ref, "clip")


class Scaler:
    """torch.cuda.amp.GradScaler's arithmetic on the CPU (scale, unscale,
    skip the step on a non-finite gradient, back off or grow the scale),
    for PyTorch builds whose GradScaler needs CUDA."""

    def __init__(self, scale=2.0 ** 8, growth_interval=2):
        self.scale_ = scale
        self.growth_interval = growth_interval
        self.good = 0
        self.found_inf = False

    def scale(self, loss):
        return loss * self.scale_

    def unscale_(self, opt):
        inv = 1.0 / self.scale_
        self.found_inf = False
        for group in opt.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    p.grad.mul_(inv)
                    self.found_inf |= not bool(torch.isfinite(p.grad).all())

    def step(self, opt):
        if not self.found_inf:
            opt.step()
        return not self.found_inf

    def update(self):
        if self.found_inf:
            self.scale_ *= 0.5
            self.good = 0
        else:
            self.good += 1
            if self.good == self.growth_interval:
                self.scale_ *= 2.0
                self.good = 0


def case_scaler(strategy):
    """Mixed precision (autocast to bfloat16 on the CPU) and a gradient
    scaler that skips the step whose gradients are not finite: worker 1's
    batch holds an inf at step 2. Under ddp every worker sees the same
    averaged gradients, so every worker skips the same steps (DDP's)."""
    skips = {"ours": [], "ddp": []}

    def loop(model, opt, side):
        scaler = Scaler()
        for step in range(STEPS):
            x, y = vectors(step, worker())
            if step == 2 and worker() == 1:
                x[0, 0] = float("inf")
            opt.zero_grad()
            with torch.autocast("cpu", dtype=torch.bfloat16):
                loss = F.cross_entropy(model(x).float(), y)
            scaler.scale(loss).backward()
            scaler.unscale_(opt)
            skips[side].append(int(not scaler.step(opt)))
            scaler.update()

    model, net, ref, ref_net = both(strategy, Mlp, loop)
    mine = torch.tensor(skips["ours"], dtype=torch.int64)
    every = ddt.all_gather(mine)
    if strategy == "ddp":
        if skips["ours"] != skips["ddp"] or not bool((every == mine).all()):
            fail("scaler: skipped %s on the workers, DDP %s" % (every.tolist(), skips["ddp"]))
        if sum(skips["ours"]) != 1:
            fail("scaler: skipped %s, expected step 2 alone" % skips["ours"])
    for p in net.parameters():
        if not bool(torch.isfinite(p).all()):
            fail("scaler: a parameter is not finite")
    return "bfloat16 autocast, inf at step 2 on worker 1, skips %s: %s" % (
        skips["ours"], finish(strategy, model, net, ref_net, ref, "scaler"))


def case_scheduler(strategy):
    """LR schedulers built after the optimizer is wrapped (StepLR) or with
    a plain optimizer (LambdaLR), stepped every iteration."""

    def loop(model, opt, side):
        if side == "ours":
            opt = ddt.wrap_optimizer(opt, model)
        steplr = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
        lam = torch.optim.lr_scheduler.LambdaLR(opt, lambda k: 1.0 / (1 + k))
        for step in range(STEPS):
            x, y = images(step, worker())
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
            steplr.step()
            lam.step()
        loop.lr[side] = opt.param_groups[0]["lr"]

    loop.lr = {}
    model, net, ref, ref_net = both(strategy, ConvNet, loop)
    if strategy == "ddp" and loop.lr["ours"] != loop.lr["ddp"]:
        fail("scheduler: lr %g, DDP's %g" % (loop.lr["ours"], loop.lr["ddp"]))
    return "StepLR and LambdaLR after wrap_optimizer, lr %g: %s" % (
        loop.lr["ours"], finish(strategy, model, net, ref_net, ref, "scheduler"))


def case_accumulate(strategy):
    """Two micro-batches per optimizer step: the first under no_sync(),
    the second syncs; then two backward passes per step without no_sync
    (each syncs, as under DDP)."""

    def loop(model, opt, side):
        for step in range(STEPS):
            opt.zero_grad()
            if step % 2 == 0:
                x, y = images(2 * step, worker())
                with model.no_sync():
                    F.cross_entropy(model(x), y).backward()
                x, y = images(2 * step + 1, worker())
                F.cross_entropy(model(x), y).backward()
            else:
                for k in range(2):
                    x, y = images(2 * step + k, worker())
                    F.cross_entropy(model(x), y).backward()
            opt.step()

    model, net, ref, ref_net = both(strategy, ConvNet, loop)
    return "no_sync() then a synced backward, and two synced backwards a step: %s" % (
        finish(strategy, model, net, ref_net, ref, "accumulate"))


def case_branches(strategy):
    """Each worker takes another branch in each step
    (find_unused_parameters=True), and a head no forward ever uses."""

    def loop(model, opt, side):
        for step in range(STEPS):
            x, y = vectors(step, worker())
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x, branch=(step + worker()) % 2), y).backward()
            opt.step()

    model, net, ref, ref_net = both(strategy, Branchy, loop, find_unused_parameters=True)
    for name in ("never.weight", "never.bias"):
        if dict(net.named_parameters())[name].grad is not None:
            fail("branches: %s has a gradient; DDP leaves None" % name)
    return "rank-dependent branches: %s" % finish(strategy, model, net, ref_net, ref, "branches")


def case_adamw(strategy):
    """A head no forward uses, under AdamW with zero_grad(set_to_none=True):
    its gradient stays None, so AdamW leaves it where it was (DDP too)."""
    start = {}

    def loop(model, opt, side):
        mod = model.module
        start[side] = mod.never.weight.detach().clone()
        for step in range(STEPS):
            x, y = vectors(step, worker())
            opt.zero_grad(set_to_none=True)
            F.cross_entropy(model(x), y).backward()
            opt.step()

    adamw = lambda m: torch.optim.AdamW(m.parameters(), lr=0.01)  # noqa: E731
    model, net, ref, ref_net = both(strategy, Branchy, loop,
                                    find_unused_parameters=True, opt=adamw)
    if not torch.equal(net.never.weight, start["ours"]):
        fail("adamw: the unused head moved by %g" % (net.never.weight - start["ours"]).abs().max())
    return "an unused head under AdamW stays still: %s" % finish(
        strategy, model, net, ref_net, ref, "adamw")


def case_unused_zeroed(strategy):
    """Rank-dependent branches and a head no forward ever uses, under AdamW
    with weight decay and zero_grad()'s default (set_to_none=False on
    PyTorch 1.13, True on 2.x) and set_to_none=False by turns: the head's
    .grad stays None on every step, so AdamW's weight decay never moves it,
    as under DDP, whose reducer leaves a globally unused gradient alone."""
    start, grads = {}, {"ours": set(), "ddp": set()}

    def loop(model, opt, side):
        mod = model.module
        start[side] = [p.detach().clone() for p in mod.never.parameters()]
        for step in range(STEPS):
            x, y = vectors(step, worker())
            if step % 2:
                opt.zero_grad(set_to_none=False)
            else:
                opt.zero_grad()
            F.cross_entropy(model(x, branch=(step + worker()) % 2), y).backward()
            grads[side] |= {n for n, p in mod.never.named_parameters()
                            if p.grad is not None}
            opt.step()

    adamw = lambda m: torch.optim.AdamW(m.parameters(), lr=0.01,  # noqa: E731
                                        weight_decay=0.1)
    model, net, ref, ref_net = both(strategy, Branchy, loop,
                                    find_unused_parameters=True, opt=adamw)
    if grads["ours"]:
        fail("unused-zeroed: never.%s got a .grad (DDP's: %s)" % (
            ", never.".join(sorted(grads["ours"])), sorted(grads["ddp"]) or "None"))
    for p, p0 in zip(net.never.parameters(), start["ours"]):
        if not torch.equal(p, p0):
            fail("unused-zeroed: the unused head moved by %g" % (p - p0).abs().max())
    return "an unused head keeps .grad None and stays still under AdamW " \
        "(weight decay 0.1) with zero_grad()'s default: %s" % finish(
            strategy, model, net, ref_net, ref, "unused-zeroed")


def _bn_stats(net):
    return torch.cat([net.bn.running_mean, net.bn.running_var,
                      net.bn.num_batches_tracked.double().reshape(1)])


def case_reassigned(strategy, broadcast_buffers=True):
    """torch.optim.swa_utils.update_bn after the wrap, on each worker's own
    batches: it gives the batch norm new running_mean and running_var
    tensors (module.running_mean = torch.zeros_like(...)). Training goes on;
    the new buffers must be synced as the old ones were: DDP's broadcast
    re-reads the module's buffers every time (ddp: bitwise DDP's, on every
    worker, after an evaluation's forward), and the averaging strategies
    average the new ones (equal replicas after sync_all). With
    broadcast_buffers=False, DDP syncs no buffer: each worker keeps its
    own statistics, bitwise DDP's."""
    from torch.optim.swa_utils import update_bn

    outs = {}

    def loop(model, opt, side):
        for step in range(STEPS):
            if step == 2:
                update_bn([images(50 + k, worker())[0] for k in range(2)], model)
            x, y = images(step, worker())
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        if side == "ours" and strategy != "ddp":
            model.sync_all()
        elif side == "ours":
            model.sync_buffers()  # DDP's evaluation forward broadcasts them
        model.eval()
        with torch.no_grad():
            outs[side] = model(images(99, 0)[0])
        model.train()

    model, net, ref, ref_net = both(strategy, ConvNet, loop,
                                    broadcast_buffers=broadcast_buffers)
    mine = _bn_stats(net)
    every = ddt.all_gather(mine)
    if broadcast_buffers and not bool((every == mine).all()):
        fail("reassigned: the workers' batch-norm statistics differ by %g"
             % (every - mine).abs().max())
    if not broadcast_buffers and bool((every == mine).all()):
        fail("reassigned: broadcast_buffers=False, yet the workers' "
             "batch-norm statistics are equal")
    if broadcast_buffers and not bool((ddt.all_gather(outs["ours"]) == outs["ours"]).all()):
        fail("reassigned: the workers' evaluations differ")
    if strategy == "ddp" and not torch.equal(mine, _bn_stats(ref_net)):
        fail("reassigned: batch-norm statistics differ from DDP's by %g"
             % (mine - _bn_stats(ref_net)).abs().max())
    return "update_bn's new batch-norm buffers %s: %s" % (
        "synced" if broadcast_buffers else "each worker's own (broadcast_buffers=False)",
        finish(strategy, model, net, ref_net, ref, "reassigned"))


def case_reassigned_local(strategy):
    return case_reassigned(strategy, broadcast_buffers=False)


def case_tied(strategy):
    """An embedding whose weight is also the output head's."""

    def loop(model, opt, side):
        for step in range(STEPS):
            x, y = tokens(step, worker())
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()

    model, net, ref, ref_net = both(strategy, Tied, loop)
    if net.out.weight is not net.emb.weight:
        fail("tied: the weights are no longer one tensor")
    return "tied weights: %s" % finish(strategy, model, net, ref_net, ref, "tied")


def case_batchnorm(strategy):
    """Batch-norm statistics in training, then evaluation under no_grad:
    every worker's outputs equal (ddp: sync_buffers() gives every worker
    rank 0's buffers, as DDP's broadcast in the evaluation's forward does)."""
    outs = {}

    def loop(model, opt, side):
        for step in range(STEPS):
            x, y = images(step, worker())
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        if side == "ours" and strategy != "ddp":
            model.sync_all()
        elif side == "ours":
            model.sync_buffers()  # DDP's evaluation forward broadcasts them
        model.eval()
        with torch.no_grad():
            outs[side] = model(images(99, 0)[0])
        model.train()

    model, net, ref, ref_net = both(strategy, ConvNet, loop)
    mine = outs["ours"]
    if not bool((ddt.all_gather(mine) == mine).all()):
        fail("batchnorm: the workers' evaluations differ")
    if strategy == "ddp" and not torch.equal(outs["ours"], outs["ddp"]):
        fail("batchnorm: evaluation differs from DDP's by %g" % (outs["ours"] - outs["ddp"]).abs().max())
    return "evaluation under no_grad equal on every worker: %s" % finish(
        strategy, model, net, ref_net, ref, "batchnorm")


# ---- checkpoints ------------------------------------------------------------


def _ckpt_path():
    return os.path.join(os.environ["PATTERNS_DIR"], "checkpoint.pt")


SAVE_STEPS = 5  # odd, so that a 2-step window is cut in the middle


def case_save(strategy):
    """Trains SAVE_STEPS steps on 2 workers and saves a checkpoint after
    sync_all, as the README says: the model, the optimizer, and dreamddp's
    state (the window position); DDP's beside it."""

    def loop(model, opt, side):
        for step in range(SAVE_STEPS):
            x, y = images(step, worker())
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        loop.opt[side] = opt

    loop.opt = {}
    model, net, ref, ref_net = both(strategy, ConvNet, loop)
    model.sync_all()
    if dreamddp.context().rank == 0:
        ckpt = {"model": net.state_dict(), "opt": loop.opt["ours"].state_dict(),
                "dreamddp": model.dreamddp_state_dict()}
        if ref is not None:
            ckpt["ddp_model"] = ref_net.state_dict()
            ckpt["ddp_opt"] = loop.opt["ddp"].state_dict()
        torch.save(ckpt, _ckpt_path())
    # Each worker's own optimizer state too: under the averaging
    # strategies it differs from worker to worker, and a resumed run on as
    # many workers takes each its own to continue bit for bit.
    torch.save(loop.opt["ours"].state_dict(), _ckpt_path() + ".opt.%d" % worker())
    # The run goes on, uninterrupted, for what a resumed run on as many
    # workers must reproduce where the plan comes from the sizes.
    _resumed_steps(model, loop.opt["ours"])
    torch.save(net.state_dict(), _ckpt_path() + ".continued.%d" % worker())
    return "saved after %d steps on %d workers" % (SAVE_STEPS, dreamddp.context().num_workers)


def _resumed_steps(model, opt, seen=None):
    for step in range(SAVE_STEPS, SAVE_STEPS + STEPS):
        x, y = images(step, worker())
        opt.zero_grad()
        F.cross_entropy(model(x), y).backward()
        if seen is not None and isinstance(model, ddt.DreamDDP):
            seen.append(model.last_stats["step"])
        opt.step()


def case_resume(strategy):
    """Resumes case_save's checkpoint on another number of workers: rank 0
    loads it, broadcast_parameters and broadcast_optimizer_state give it
    to the others (Horovod's way); load_dreamddp_state_dict continues the
    window. DDP's side loads it on every rank, as DDP scripts do."""
    rank = dreamddp.context().rank
    # Rank 0 reads the checkpoint; DDP's side reads it everywhere.
    ckpt = torch.load(_ckpt_path())
    mine = ckpt if rank == 0 else None
    torch.manual_seed(100 + rank)  # every worker starts elsewhere
    net = ConvNet()
    if rank == 0:
        net.load_state_dict(ckpt["model"])
    model = ours(net, strategy)
    ddt.broadcast_parameters(net.state_dict(), root=0)
    opt = sgd(model)
    if rank == 0:
        opt.load_state_dict(ckpt["opt"])
    ddt.broadcast_optimizer_state(opt, root=0)
    exact = strategy.startswith("plsgd") and dreamddp.context().num_workers == 2
    if exact:
        opt.load_state_dict(torch.load(_ckpt_path() + ".opt.%d" % worker()))
    model.load_dreamddp_state_dict(mine["dreamddp"] if mine else None)
    replicas_equal(net, "resume (before training)")
    steps_seen = []

    def loop(model, opt):
        _resumed_steps(model, opt, steps_seen)

    loop(model, opt)
    same_run = ""
    if exact:
        # plsgd's plan comes from the sizes: resumed at its window
        # position, with each worker's own optimizer state, the run is the
        # uninterrupted one, bit for bit.
        continued = torch.load(_ckpt_path() + ".continued.%d" % worker())
        for name, t in net.state_dict().items():
            if not torch.equal(t, continued[name]):
                fail("resume: %s differs from the uninterrupted run's by %g"
                     % (name, (t.double() - continued[name].double()).abs().max()))
        same_run = ", bitwise the uninterrupted run's"
    if steps_seen[0] != SAVE_STEPS:
        fail("resume: the first step is numbered %d, expected %d" % (steps_seen[0], SAVE_STEPS))
    if strategy == "ddp":
        ref_net = ConvNet()
        ref_net.load_state_dict(ckpt["ddp_model"])
        ref = theirs(ref_net)
        ref_opt = sgd(ref)
        ref_opt.load_state_dict(ckpt["ddp_opt"])
        loop(ref, ref_opt)
        # On 3 workers the average of three gradients is not exact, and
        # the library's ring sums them in another order than PyTorch's
        # gloo allreduce: the last bits differ (2.2e-8 seen).
        verdict = finish(strategy, model, net, ref_net, ref, "resume",
                         exact=False, tol=1e-6)
    else:
        verdict = finish(strategy, model, net, what="resume")
    return "saved on 2 workers, resumed on %d from step %d%s: %s" % (
        dreamddp.context().num_workers, steps_seen[0], same_run, verdict)


# ---- uneven inputs ------------------------------------------------------------


def case_join(strategy, divide=True, make=Mlp, data=vectors):
    """Worker w has STEPS - 2 + 2w batches; the loop runs inside join()
    (DDP's too). Under ddp the joined worker takes part with zero
    gradients, and the last to join gives its model to the others."""
    batches = STEPS - 2 + 2 * worker()

    def loop(model, opt, side):
        with model.join(divide_by_initial_world_size=divide):
            for step in range(batches):
                x, y = data(step, worker())
                opt.zero_grad()
                F.cross_entropy(model(x), y).backward()
                opt.step()

    model, net, ref, ref_net = both(strategy, make, loop)
    replicas_equal(net, "join")
    counts = ddt.all_gather(torch.tensor([batches])).tolist()
    # On 3 workers the average of three is not exact and the sums' order
    # is not PyTorch gloo's (see case_resume).
    exact = dreamddp.context().num_workers == 2
    return "join() with %s batches%s: %s" % (
        counts, "" if divide else ", divide_by_initial_world_size=False",
        finish(strategy, model, net, ref_net, ref, "join", exact=exact,
               tol=0.0 if exact else 1e-6))


def case_join_divide(strategy):
    """join(divide_by_initial_world_size=False): the average is divided by
    the workers still training. With 2 workers dreamddp's average times
    2 is DDP's sum divided by 1, exactly."""
    return case_join(strategy, divide=False)


def case_join_bn(strategy):
    """join() with batch norm: the buffers come from the highest worker
    still training (DDP's authoritative rank) once worker 0 has joined."""
    return case_join(strategy, make=ConvNet, data=images)


def _elapsed(since_file):
    for _ in range(100):
        try:
            with open(since_file) as f:
                return time.time() - float(f.read())
        except (OSError, ValueError):
            time.sleep(0.05)
    return float("nan")


def case_uneven(strategy):
    """Without join(): worker 1 runs one step fewer, then leaves (its exit
    handler would finalize; here it finalizes itself). Worker 0, in the
    step worker 1 never runs (or its sync_all after), must fail within 5 s
    naming worker 1, not at DREAMDDP_TIMEOUT_S."""
    mark = os.path.join(os.environ["PATTERNS_DIR"], "left")
    torch.manual_seed(7)
    net = Mlp()
    model = ours(net, strategy)
    opt = sgd(model)
    me = worker()
    steps = STEPS - me
    try:
        for step in range(steps):
            x, y = vectors(step, me)
            opt.zero_grad()
            F.cross_entropy(model(x), y).backward()
            opt.step()
        if me == 1:
            with open(mark + ".tmp", "w") as f:
                f.write(repr(time.time()))
            os.rename(mark + ".tmp", mark)
            dreamddp.finalize()
            fail("uneven: worker 1's finalize returned success")
        model.sync_all()
    except dreamddp.DreamDDPError as e:
        dt = _elapsed(mark)
        if "uneven steps: rank 1 left the job" not in str(e):
            fail("uneven: the error does not name rank 1 leaving: %s" % e)
        if not dt < 5:
            fail("uneven: noticed %.1f s after rank 1 left" % dt)
        if me == 0:
            print("torch_patterns: uneven: %s: noticed %.2f s after rank 1 left: %s"
                  % (strategy, dt, e))
        os._exit(0)
    fail("uneven: %d steps and sync_all succeeded" % steps)


# ---- misuse ---------------------------------------------------------------------


def expect_error(what, fn, *needles):
    t0 = time.monotonic()
    try:
        fn()
    except dreamddp.DreamDDPError as e:
        dt = time.monotonic() - t0
        for n in needles:
            if n not in str(e):
                fail("%s: the error does not say '%s': %s" % (what, n, e))
        if dt >= 5:
            fail("%s: the error came %.1f s after the mistake" % (what, dt))
        return "%s: %s after %.2f s" % (what, e, dt)
    fail("%s: no error" % what)


def _step(model, opt, step):
    x, y = images(step, worker())
    opt.zero_grad()
    F.cross_entropy(model(x), y).backward()
    opt.step()


def case_module(strategy):
    """A forward through model.module while training: the step never
    opens, so the backward fails at its first gradient, on every worker."""
    net = ConvNet()
    model = ours(net, strategy)
    opt = sgd(model)
    _step(model, opt, 0)

    def wrong():
        x, y = images(1, worker())
        F.cross_entropy(model.module(x), y).backward()

    line = expect_error("forward through model.module", wrong, "model.module(x)",
                        "outside a step")
    return line


def case_twice(strategy):
    """A second DreamDDP in the process."""
    net = ConvNet()
    ours(net, strategy)
    return expect_error("a second DreamDDP", lambda: ours(Mlp(), strategy),
                        "already wraps a model", "one model per process")


def case_changed(strategy):
    """Parameters replaced, frozen or added after the wrap: the next
    forward fails naming the parameter; once undone, training goes on."""
    net = ConvNet()
    model = ours(net, strategy)
    opt = sgd(model)
    _step(model, opt, 0)
    lines = []
    fc2 = net.fc2
    net.fc2 = nn.Linear(16, 3)
    lines.append(expect_error("a replaced layer", lambda: _step(model, opt, 1),
                              "parameter 'fc2.weight' was replaced"))
    net.fc2 = fc2
    net.fc1.weight.requires_grad_(False)
    lines.append(expect_error("a frozen parameter", lambda: _step(model, opt, 1),
                              "parameter 'fc1.weight' has requires_grad=False"))
    net.fc1.weight.requires_grad_(True)
    net.extra = nn.Linear(2, 2)
    lines.append(expect_error("an added layer", lambda: _step(model, opt, 1),
                              "parameter 'extra.weight' was added"))
    del net.extra
    if strategy != "ddp":
        # The strategy averages the batch norm's statistics in the memory
        # registered at the wrap: a new tensor takes its place only with
        # its shape, dtype and device.
        mean = net.bn.running_mean
        net.bn.running_mean = torch.zeros(5)
        lines.append(expect_error("a resized buffer", lambda: _step(model, opt, 1),
                                  "buffer 'bn.running_mean' was replaced by a [5]"))
        net.bn.running_mean = None
        lines.append(expect_error("a removed buffer", lambda: _step(model, opt, 1),
                                  "buffer 'bn.running_mean' was removed"))
        net.bn.running_mean = mean
    _step(model, opt, 1)
    model.sync_all()
    replicas_equal(net, "changed")
    return "; ".join(l.split(":")[0] for l in lines) + " named at the next forward; " + lines[0]


def case_early_sync_all(strategy):
    """Worker 0 calls sync_all() where worker 1 runs a step: both fail at
    once, naming what each ran; nothing is summed."""
    torch.manual_seed(7)
    net = ConvNet()
    model = ours(net, strategy)
    opt = sgd(model)
    for step in range(3):
        _step(model, opt, step)
    if worker() == 0:
        line = expect_error("sync_all against a step", model.sync_all,
                            "workers out of step", "dd_sync_all")
    else:
        def steps():
            for step in range(3, 3 + 2 * STEPS):
                _step(model, opt, step)
        line = expect_error("a step against sync_all", steps,
                            "workers out of step", "dd_sync_all")
    return line


def main(argv):
    dreamddp.serve_if_aggregator()
    case, strategy = argv[1], argv[2]
    fn = globals().get("case_" + case.replace("-", "_"))
    if fn is None:
        fail("unknown case %s" % case)
    line = fn(strategy)
    say("%s: %s: %s" % (case, strategy, line))
    if _dist is not None:
        _dist.destroy_process_group()


if __name__ == "__main__":
    main(sys.argv)
