"""DistributedDataParallel's constructor and idioms through DreamDDP (run
by tests/python/test_torch_ddp_idioms.sh under ddrun on 2 ranks).

    torch_ddp_idioms.py idioms STRATEGY
    torch_ddp_idioms.py bucket none|MIB
    torch_ddp_idioms.py shard -    (3 ranks, DREAMDDP_NUM_AGGREGATORS=1)

idioms: DDP's constructor arguments are each accepted or refused with a
ValueError or NotImplementedError naming what replaces them (never a
TypeError); then a nanoGPT-style loop: gradient accumulation through
model.require_backward_grad_sync = False on the micro-steps, evaluation on
rank 0 alone (under no_grad, in eval() mode) before the first step and
between steps, a StepLR built before wrap_optimizer with warnings as
errors. Every optimizer step is one step of the library (the micro-steps
outside the sync count none and sync nothing). Under ddp the loop runs
again through PyTorch's DDP (gloo) on the same batches: parameters, buffers,
rank 0's evaluation losses and the learning rate must be bitwise equal;
under the other strategies the replicas must be bitwise equal after
sync_all.

bucket: a two-step ddp run with bucket_cap_mb (or without); prints the
number of gradient messages of a step from the timeline
(DREAMDDP_TIMELINE must be set).

Rank 0 prints one line starting with "torch_ddp_idioms: " on success;
a failure prints FAIL and exits 1.
"""

import os
import sys
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F

import dreamddp
import dreamddp.torch as ddt
from torch_patterns import ConvNet, images, twins, dist, same_as, replicas_equal

STEPS = 4
MICRO = 3


def fail(msg):
    print("torch_ddp_idioms: FAIL rank %d: %s" % (dreamddp.context().rank, msg))
    sys.stdout.flush()
    os._exit(1)


def refusals():
    """Each refused argument raises the error it should, naming what
    replaces it; returns how many were checked."""
    import torch.distributed as d

    net = nn.Linear(4, 2)
    sub = d.new_group([0])
    cases = [
        (dict(device_ids=[0]), ValueError, "device_ids=None"),
        (dict(device_ids=[0, 1]), ValueError, "device_ids=[local_rank]"),
        (dict(output_device=1), ValueError, "output_device"),
        (dict(process_group=sub), NotImplementedError, "process_group=None"),
        (dict(bucket_cap_mb=0), ValueError, "bucket_cap_mb"),
        (dict(init_sync=False), ValueError, "init_sync=True"),
        (dict(mixed_precision=object()), NotImplementedError, "torch.autocast"),
        (dict(device_mesh=object()), NotImplementedError, "ddrun -n"),
        (dict(static_graph="yes"), ValueError, "True or False"),
    ]
    try:
        ddt.DreamDDP(net, [0])  # DDP(model, [local_rank]) moved as is
    except ValueError as e:
        if "device_ids=[local_rank]" not in str(e):
            fail("DreamDDP(net, [0]): %s" % e)
    except Exception as e:  # noqa: BLE001: the wrong kind
        fail("DreamDDP(net, [0]): %s: %s, expected a ValueError" % (type(e).__name__, e))
    else:
        fail("DreamDDP(net, [0]) was accepted")
    for kw, kind, needle in cases:
        try:
            ddt.DreamDDP(net, strategy="ddp", **kw)
        except TypeError as e:
            fail("%s: a TypeError: %s" % (kw, e))
        except kind as e:
            if needle not in str(e):
                fail("%s: %s does not say %r" % (kw, e, needle))
            continue
        except Exception as e:  # noqa: BLE001: the wrong kind
            fail("%s: %s: %s, expected %s" % (kw, type(e).__name__, e, kind.__name__))
        fail("%s: accepted" % kw)
    return len(cases) + 1


def loop(model, opt, sched, side, evals):
    """nanoGPT's loop: accumulation through require_backward_grad_sync,
    evaluation on rank 0 alone before each optimizer step (and at the
    end)."""
    rank = dist().get_rank()
    for step in range(STEPS + 1):
        if rank == 0:
            model.eval()
            with torch.no_grad():
                x, y = images(500 + step, 0)
                evals.append(F.cross_entropy(model(x), y))
            model.train()
        if step == STEPS:
            break
        for micro in range(MICRO):
            model.require_backward_grad_sync = micro == MICRO - 1
            x, y = images(MICRO * step + micro, rank)
            (F.cross_entropy(model(x), y) / MICRO).backward()
        opt.step()
        sched.step()
        opt.zero_grad(set_to_none=True)
    return opt.param_groups[0]["lr"]


def case_idioms(strategy):
    dist()
    checked = refusals() if strategy == "ddp" else 0
    net, ref_net = twins(ConvNet)
    model = ddt.DreamDDP(
        net, strategy=strategy, device_ids=None, output_device=None, dim=0,
        process_group=dist().group.WORLD, bucket_cap_mb=25,
        gradient_as_bucket_view=True, static_graph=True, check_reduction=False,
        init_sync=True, mixed_precision=None)
    opt = torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9)
    sched = torch.optim.lr_scheduler.StepLR(opt, step_size=2, gamma=0.5)
    ddt.wrap_optimizer(opt, model)  # after the scheduler: no warning
    evals = []
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        lr = loop(model, opt, sched, "ours", evals)
    if lr != 0.05 * 0.5 ** (STEPS // 2):
        fail("the schedule did not advance: lr %g after %d steps" % (lr, STEPS))
    # Every optimizer step is one step of the library, every layer synced
    # (ddp) or windowed by optimizer steps: the micro-steps sent nothing.
    steps = model.last_stats["step"] + 1
    if steps != STEPS:
        fail("the library counted %d steps for %d optimizer steps of %d "
             "micro-steps" % (steps, STEPS, MICRO))
    syncs = {n: s["syncs"] for n, s in model.layer_stats().items()}
    if strategy == "ddp" and set(syncs.values()) != {STEPS}:
        fail("layer syncs %s, expected %d each (one per optimizer step)" % (syncs, STEPS))
    if strategy == "ddp":
        # DDP's own forward would broadcast the batch-norm buffers at rank
        # 0's lone evaluation and put gloo out of step (PyTorch 1.13 aborts
        # on the next message): its buffers stay local, and rank 0's, which
        # ours give the others, are compared.
        ref = torch.nn.parallel.DistributedDataParallel(ref_net, broadcast_buffers=False)
        ref_opt = torch.optim.SGD(ref.parameters(), lr=0.05, momentum=0.9)
        ref_sched = torch.optim.lr_scheduler.StepLR(ref_opt, step_size=2, gamma=0.5)
        ref_evals = []
        ref_lr = loop(ref, ref_opt, ref_sched, "ddp", ref_evals)
        if dist().get_rank() == 0:
            same_as(net, ref_net, "idioms")
        else:
            for (n, x), (_, y) in zip(net.named_parameters(), ref_net.named_parameters()):
                if not torch.equal(x, y):
                    fail("idioms: parameter %s differs from DDP's" % n)
        if ref_lr != lr:
            fail("lr %g, DDP's %g" % (lr, ref_lr))
        if not all(torch.equal(a, b) for a, b in zip(evals, ref_evals)):
            fail("rank 0's evaluation losses %s, DDP's %s"
                 % ([float(e) for e in evals], [float(e) for e in ref_evals]))
        # Training in eval() mode (frozen batch norm): the step opens at the
        # first gradient and syncs, as DDP's.
        model.eval()
        opt.zero_grad()
        x, y = images(99, dist().get_rank())
        F.cross_entropy(model(x), y).backward()
        model.train()
        grads = ddt.all_gather(torch.cat([p.grad.flatten() for p in net.parameters()]))
        if model.last_stats["step"] != STEPS or not torch.equal(grads[0], grads[1]):
            fail("a backward in eval() mode did not sync: step %d, gradients %s"
                 % (model.last_stats["step"], "equal" if torch.equal(grads[0], grads[1]) else "differ"))
        verdict = ("rank 0's parameters, buffers, %d evaluation losses and lr, "
                   "and rank 1's parameters bitwise equal to DDP's; a backward in eval() "
                   "mode synced; %d refusals named" % (len(evals), checked))
    else:
        model.sync_all()
        replicas_equal(net, "idioms")
        verdict = "replicas bitwise equal after sync_all"
    return ("%d steps of %d micro-steps (require_backward_grad_sync), rank 0 "
            "evaluating alone %d times: %d library steps, syncs %s; %s"
            % (STEPS, MICRO, STEPS + 1, steps, sorted(set(syncs.values())), verdict))


def main(argv):
    dreamddp.serve_if_aggregator()
    case, arg = argv[1], argv[2]
    if case == "bucket":
        torch.manual_seed(0)
        net = nn.Sequential(nn.Linear(512, 512), nn.ReLU(), nn.Linear(512, 512),
                            nn.ReLU(), nn.Linear(512, 3))
        kw = {} if arg == "none" else {"bucket_cap_mb": float(arg)}
        model = ddt.DreamDDP(net, strategy="ddp", **kw)
        for _ in range(2):
            F.cross_entropy(model(torch.randn(4, 512)),
                            torch.zeros(4, dtype=torch.long)).backward()
        try:
            model._ctx.bucket_bytes_set(1 << 20)
        except dreamddp.DreamDDPError as e:
            if "already committed" not in str(e):
                fail("dd_bucket_bytes_set after the commit: %s" % e)
        else:
            fail("dd_bucket_bytes_set after the commit was accepted")
        if model.rank == 0:
            print("torch_ddp_idioms: bucket %s: ok, refused after the commit" % arg)
        return
    if case == "shard":
        # With an aggregator rank among 3, the 2 workers' shards are 0 and 1.
        ctx = dreamddp.context()
        mine = torch.tensor([ddt.worker_rank(), ddt.num_workers()])
        every = ddt.all_gather(mine)
        if sorted(every[:, 0].tolist()) != [0, 1] or set(every[:, 1].tolist()) != {2}:
            fail("worker_rank(), num_workers() on the workers: %s (world %d)"
                 % (every.tolist(), ctx.world_size))
        if ctx.rank == 0:
            print("torch_ddp_idioms: shard: worker_rank() %s, num_workers() 2 of "
                  "world %d" % (sorted(every[:, 0].tolist()), ctx.world_size))
        return
    line = case_idioms(arg)
    if dreamddp.context().rank == 0:
        print("torch_ddp_idioms: %s: %s: %s" % (case, arg, line))
    dist().destroy_process_group()


if __name__ == "__main__":
    main(sys.argv)
