"""The PyTorch front end across real ranks (run by tests/python/test_torch.sh).

  torch_mp.py equal STRATEGY STEPS   replicas bitwise equal after every
                                     averaging, and after sync_all
  torch_mp.py vs-ddp STEPS [exact]   gradients under ddp equal PyTorch's DDP
                                     (gloo) on the same batches (bitwise)
  torch_mp.py unused                 find_unused_parameters=True
  torch_mp.py unused-error           without it: the error naming the layer
  torch_mp.py unused-uneven          one rank alone leaves a layer unused:
                                     an error, not a hang
  torch_mp.py torchrun STEPS         torchrun's variables, torch.distributed
                                     in the same job
  torch_mp.py powersgd STRATEGY STEPS  compression="powersgd:4": replicas
                                     bitwise equal after every averaging,
                                     the wide linear layer factored by its
                                     shape (wire bytes)
  torch_mp.py errors                 library errors as DreamDDPError
  torch_mp.py hygiene STRATEGY       import leaves sys.excepthook alone;
                                     DreamDDP(model) runs STRATEGY
  torch_mp.py aggregator             DreamDDP raises on an aggregator rank,
                                     serve_if_aggregator() serves

Each prints one line starting with "torch_mp: " on success, and exits 1
with the reason otherwise.
"""

import hashlib
import os
import socket
import sys

import torch

import dreamddp
import dreamddp.torch as ddt


def fail(msg):
    print("torch_mp: FAIL rank %d: %s" % (dreamddp.context().rank, msg))
    sys.exit(1)


class Net(torch.nn.Module):
    """Convolution, batch norm (buffers), two linear layers."""

    def __init__(self, unused=False, hidden=16):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.fc1 = torch.nn.Linear(4 * 6 * 6, hidden)
        self.fc2 = torch.nn.Linear(hidden, 3)
        self.spare = torch.nn.Linear(16, 3) if unused else None

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def batch(step, rank, n=8):
    g = torch.Generator().manual_seed(1000 * step + rank)
    return torch.randn(n, 1, 8, 8, generator=g), torch.randint(0, 3, (n,), generator=g)


def digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().contiguous().numpy().tobytes())
    return torch.tensor([int.from_bytes(h.digest()[:7], "little")], dtype=torch.int64)


def same_everywhere(tensors):
    return bool((ddt.all_gather(digest(tensors)) == digest(tensors)).all())


def cmd_equal(strategy, steps):
    rank = dreamddp.context().rank
    torch.manual_seed(rank)  # different starts: the commit makes them equal
    net = Net()
    model = ddt.DreamDDP(net, strategy=strategy)
    opt = ddt.wrap_optimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model)
    layers = {layer.name: layer for layer in model._layers}
    if not same_everywhere([p for p in net.parameters()]):
        fail("%s: replicas differ after the commit" % strategy)
    before = {n: 0 for n in layers}
    checks = 0
    for step in range(steps):
        x, y = batch(step, rank)
        opt.zero_grad(set_to_none=(step % 2 == 0))
        torch.nn.functional.cross_entropy(model(x), y).backward()
        model.finish_step()
        stats = model.layer_stats()
        for name, layer in layers.items():
            if stats[name]["syncs"] == before[name]:
                continue
            before[name] = stats[name]["syncs"]
            if strategy == "ddp" and stats[name]["divergence"] != 0:
                fail("%s: step %d: layer %s reports divergence %g" % (strategy, step, name, stats[name]["divergence"]))
            what = layer.grads if strategy == "ddp" else layer.params + layer.buffers
            if not same_everywhere(what):
                fail("%s: step %d: layer %s differs after its sync" % (strategy, step, name))
            checks += 1
        opt.step()
    never = [n for n, k in before.items() if k == 0]
    if never:
        fail("%s: layers %s never synced in %d steps" % (strategy, never, steps))
    model.sync_all()
    if not same_everywhere(list(net.parameters())):
        fail("%s: replicas differ after sync_all" % strategy)
    print("torch_mp: %s: %d steps, replicas equal after every averaging (%d layer syncs checked)"
          % (strategy, steps, checks))


def cmd_powersgd(strategy, steps):
    """fc1's weight (64 x 144) is the one layer of 4096 elements or more:
    powersgd:4 sends it as (64 + 144) x 4 factors only if the front end
    passed its shape; every other layer stays dense."""
    rank = dreamddp.context().rank
    torch.manual_seed(rank)
    net = Net(hidden=64)
    model = ddt.DreamDDP(net, strategy=strategy, compression="powersgd:4")
    opt = ddt.wrap_optimizer(torch.optim.SGD(model.parameters(), lr=0.05), model)
    layers = {layer.name: layer for layer in model._layers}
    before = {n: 0 for n in layers}
    raw = wire = checks = 0
    for step in range(steps):
        x, y = batch(step, rank)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        st = model.finish_step()
        raw += st["bytes_synced"]
        wire += st["wire_bytes"]
        stats = model.layer_stats()
        for name, layer in layers.items():
            if stats[name]["syncs"] == before[name]:
                continue
            before[name] = stats[name]["syncs"]
            what = layer.grads if strategy == "ddp" else layer.params + layer.buffers
            if not same_everywhere(what):
                fail("powersgd %s: step %d: layer %s differs after its sync"
                     % (strategy, step, name))
            checks += 1
        opt.step()
    # Dense, fc1 would be 9280 of the 9563 floats; factored, 832 + 64.
    if not 0 < wire < 0.2 * raw:
        fail("powersgd %s: %d wire bytes for %d raw: fc1 was not factored"
             % (strategy, wire, raw))
    print("torch_mp: powersgd %s: %d steps, replicas equal after every "
          "averaging (%d layer syncs checked), %.3f of the raw bytes on the wire"
          % (strategy, steps, checks, wire / raw))


def cmd_delayed(strategy, steps):
    """A +next strategy: each layer with parameters is marked before its
    forward (the front end's pre-hooks) in training, and none in an
    evaluation (which one rank may run alone); every layer's average lands
    once per window; after sync_all the replicas are bitwise equal."""
    rank = dreamddp.context().rank
    torch.manual_seed(rank)
    net = Net()
    model = ddt.DreamDDP(net, strategy=strategy)
    opt = ddt.wrap_optimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model)
    ctx = model._ctx
    marks = []
    real = ctx.layer_forward
    ctx.layer_forward = lambda handle: (marks.append(handle), real(handle))[1]
    with_params = [layer for layer in model._layers if layer.params]
    window = int(strategy.split(":")[1].split("+")[0])
    for step in range(steps):
        x, y = batch(step, rank)
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        if not torch.isfinite(loss):
            fail("%s: step %d: loss %s" % (strategy, step, loss.item()))
    want = steps * len(with_params)
    if len(marks) != want:
        fail("%s: %d forward marks in %d steps, expected %d (one per layer "
             "with parameters and step)" % (strategy, len(marks), steps, want))
    order = [layer.handle.value for layer in with_params]
    if [h.value for h in marks[: len(order)]] != order:
        fail("%s: the forward marks are not in forward order" % strategy)
    stats = model.layer_stats(parts=True)
    low = [n for n, st in stats.items() if st["syncs"] < (steps - 1) // window]
    if low:
        fail("%s: layers %s landed fewer than once per window" % (strategy, low))
    with torch.no_grad():
        model.eval()
        model(batch(steps, rank)[0])  # what is in flight stays there
        model.train()
    if len(marks) != want:
        fail("%s: evaluation's forward made %d marks: an evaluation, which "
             "one rank may run alone, must land nothing" % (strategy, len(marks) - want))
    model.sync_all()
    if not same_everywhere(list(net.parameters()) + list(net.buffers())):
        fail("%s: replicas differ after sync_all" % strategy)
    cut = check_parts(model, stats)
    print("torch_mp: %s: %d forward marks, replicas equal after sync_all%s"
          % (strategy, len(marks), cut))


def check_parts(model, stats):
    """With DREAMDDP_LAYER_SPLIT set, fc1 (2320 elements) is cut: its parts
    tile its elements in order, are named fc1#i and have statistics of
    their own, whose bytes sum to the layer's."""
    limit = os.environ.get("DREAMDDP_LAYER_SPLIT")
    parts = model.layer_parts()
    for layer in model._layers:
        got = parts[layer.name]
        numel = sum(t.numel() for t in layer.params + layer.buffers)
        if [off for _, off, _ in got] != [
            sum(c for _, _, c in got[:i]) for i in range(len(got))
        ] or sum(c for _, _, c in got) != numel:
            fail("%s: parts %s do not tile its %d elements" % (layer.name, got, numel))
        if len(got) > 1:
            names = ["%s#%d" % (layer.name, i) for i in range(len(got))]
            if [n for n, _, _ in got] != names or any(n not in stats for n in names):
                fail("%s: parts %s, statistics of %s" % (layer.name, got, sorted(stats)))
            total = sum(stats[n]["bytes"] for n in names)
            if total != stats[layer.name]["bytes"]:
                fail("%s: parts synced %d bytes, the layer %d"
                     % (layer.name, total, stats[layer.name]["bytes"]))
    fc1 = len(parts[[l.name for l in model._layers if "fc1" in l.name][0]])
    if limit is not None and fc1 < 2:
        fail("DREAMDDP_LAYER_SPLIT=%s left fc1 whole" % limit)
    if limit is None and fc1 != 1:
        fail("fc1 cut into %d parts without DREAMDDP_LAYER_SPLIT" % fc1)
    return ", fc1 in %d parts" % fc1 if fc1 > 1 else ""


def free_port_everywhere():
    """A port rank 0 found free, told to every rank through dreamddp."""
    port = torch.zeros(1, dtype=torch.int64)
    if dreamddp.context().rank == 0:
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port[0] = s.getsockname()[1]
        s.close()
    return int(ddt.broadcast(port)[0])


def cmd_vs_ddp(steps, exact):
    import torch.distributed as dist

    ctx = dreamddp.context()
    port = free_port_everywhere()
    dist.init_process_group("gloo", init_method="tcp://127.0.0.1:%d" % port,
                            rank=ctx.rank, world_size=ctx.num_workers)
    torch.manual_seed(7)
    ours, theirs = Net(), Net()
    theirs.load_state_dict(ours.state_dict())
    model = ddt.DreamDDP(ours, strategy="ddp")
    ref = torch.nn.parallel.DistributedDataParallel(theirs)
    opts = [ddt.wrap_optimizer(torch.optim.SGD(model.parameters(), lr=0.05), model),
            torch.optim.SGD(ref.parameters(), lr=0.05)]
    worst = 0.0
    for step in range(steps):
        x, y = batch(step, ctx.rank)
        for m, opt in zip((model, ref), opts):
            opt.zero_grad()
            torch.nn.functional.cross_entropy(m(x), y).backward()
        model.finish_step()
        for (n, a), b in zip(ours.named_parameters(), theirs.parameters()):
            d = (a.grad - b.grad).abs().max().item()
            worst = max(worst, d)
            if (not torch.equal(a.grad, b.grad) if exact else
                    not torch.allclose(a.grad, b.grad, rtol=1e-6, atol=1e-7)):
                fail("step %d: gradient of %s differs from DDP's by %g" % (step, n, d))
        for opt in opts:
            opt.step()
    dist.destroy_process_group()
    print("torch_mp: ddp: %d steps, gradients %s PyTorch DDP's (max difference %g)"
          % (steps, "bitwise equal to" if exact else "equal", worst))


def cmd_unused():
    rank = dreamddp.context().rank
    torch.manual_seed(rank)
    net = Net(unused=True)
    model = ddt.DreamDDP(net, strategy="ddp", find_unused_parameters=True)
    opt = ddt.wrap_optimizer(torch.optim.SGD(model.parameters(), lr=0.05), model)
    for step in range(4):
        x, y = batch(step, rank)
        opt.zero_grad(set_to_none=True)
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    if not same_everywhere(list(net.parameters())):
        fail("unused: replicas differ with find_unused_parameters=True")
    # No worker used it and zero_grad set it to None: it stays None, as
    # under DDP (an optimizer then leaves it alone).
    if net.spare.weight.grad is not None:
        fail("unused: the unused layer's gradient is %s, not None"
             % net.spare.weight.grad.abs().sum().item())
    print("torch_mp: unused: find_unused_parameters=True trains, replicas equal")


def cmd_unused_error():
    rank = dreamddp.context().rank
    net = Net(unused=True)
    model = ddt.DreamDDP(net, strategy="ddp")
    x, y = batch(0, rank)
    try:
        torch.nn.functional.cross_entropy(model(x), y).backward()
    except dreamddp.DreamDDPError as e:
        if "spare" not in str(e) or "find_unused_parameters" not in str(e):
            fail("unused: the error does not name the layer: %s" % e)
        print("torch_mp: unused: without find_unused_parameters: %s" % e)
        return
    fail("unused: no error without find_unused_parameters")


def cmd_unused_uneven():
    """Only the last rank leaves layers unused: it fails naming them, at
    once, and the others see it lost instead of waiting for its syncs."""
    ctx = dreamddp.context()
    net = Net()
    model = ddt.DreamDDP(net, strategy="ddp")
    x, y = batch(0, ctx.rank)
    out = model(x)
    if ctx.rank == ctx.num_workers - 1:
        out = out.detach() + net.fc1.bias.sum()  # only fc1.bias gets a gradient
    torch.nn.functional.cross_entropy(out, y).backward()
    fail("unused-uneven: backward returned")


def cmd_torchrun(steps):
    import torch.distributed as dist

    dist.init_process_group("gloo")  # env://, on MASTER_PORT
    ctx = dreamddp.context()  # its store on MASTER_PORT + 1
    if ctx.rank != dist.get_rank() or ctx.num_workers != dist.get_world_size():
        fail("torchrun: rank %d of %d, torch.distributed says %d of %d"
             % (ctx.rank, ctx.num_workers, dist.get_rank(), dist.get_world_size()))
    torch.manual_seed(ctx.rank)
    net = Net()
    model = ddt.DreamDDP(net, strategy="localsgd:2")
    opt = ddt.wrap_optimizer(torch.optim.SGD(model.parameters(), lr=0.05), model)
    for step in range(steps):
        x, y = batch(step, ctx.rank)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    model.sync_all()
    w = net.fc1.weight.detach().clone()
    dist.all_reduce(w)
    if not torch.allclose(w / dist.get_world_size(), net.fc1.weight):
        fail("torchrun: torch.distributed sees different replicas")
    dist.destroy_process_group()
    print("torch_mp: torchrun: %d ranks, torch.distributed on port %s beside dreamddp"
          % (ctx.num_workers, os.environ["MASTER_PORT"]))


def expect_error(fn, status_name, needle):
    try:
        fn()
    except dreamddp.DreamDDPError as e:
        if e.status_name != status_name or needle not in str(e):
            fail("expected %s with '%s', got: %s" % (status_name, needle, e))
        return str(e)
    fail("expected %s with '%s', got no error" % (status_name, needle))


def cmd_errors():
    msg = expect_error(lambda: ddt.DreamDDP(Net(), strategy="dreamddp:x"),
                       "DD_ERR_INVALID_PARAM", "dreamddp:x")
    expect_error(lambda: ddt.DreamDDP(Net(), compression="zip"),
                 "DD_ERR_INVALID_PARAM", "invalid spec 'zip'")
    expect_error(lambda: ddt.DreamDDP(Net().to(torch.float64).to("meta")),
                 "DD_ERR_UNSUPPORTED", "meta")
    expect_error(lambda: ddt.allreduce(torch.zeros(2), op="median"),
                 "DD_ERR_INVALID_PARAM", "median")
    print("torch_mp: errors: DreamDDPError carries the library's message: %s" % msg)


def cmd_hygiene(expected):
    """import dreamddp left the interpreter's hooks alone; DreamDDP(model)
    without a strategy runs DREAMDDP_STRATEGY, else ddp."""
    if sys.excepthook is not sys.__excepthook__:
        fail("hygiene: importing dreamddp replaced sys.excepthook")
    model = ddt.DreamDDP(Net())
    if model.strategy != expected:
        fail("hygiene: DreamDDP(model) runs %s, expected %s" % (model.strategy, expected))
    print("torch_mp: hygiene: sys.excepthook untouched, DreamDDP(model) runs %s" % model.strategy)


def cmd_aggregator():
    """On an aggregator rank the constructor raises, naming the call to
    make; serve_if_aggregator() then serves the workers' steps."""
    ctx = dreamddp.context()
    if ctx.is_aggregator:
        try:
            ddt.DreamDDP(Net(), strategy="ddp")
        except dreamddp.DreamDDPError as e:
            if "serve_if_aggregator()" not in str(e):
                fail("aggregator: the error does not name serve_if_aggregator: %s" % e)
            print("torch_mp: aggregator: %s" % e)
            sys.stdout.flush()
            dreamddp.serve_if_aggregator()
        fail("aggregator: DreamDDP was built on an aggregator rank")
    torch.manual_seed(ctx.rank)
    net = Net()
    model = ddt.DreamDDP(net, strategy="ddp")
    opt = torch.optim.SGD(model.parameters(), lr=0.05)
    for step in range(3):
        x, y = batch(step, ctx.rank)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        opt.step()
    if not same_everywhere(list(net.parameters())):
        fail("aggregator: replicas differ")
    print("torch_mp: aggregator: the workers trained through the aggregator")


def main(argv):
    cmd = argv[1]
    if cmd == "equal":
        cmd_equal(argv[2], int(argv[3]))
    elif cmd == "vs-ddp":
        cmd_vs_ddp(int(argv[2]), len(argv) > 3 and argv[3] == "exact")
    elif cmd == "unused":
        cmd_unused()
    elif cmd == "unused-error":
        cmd_unused_error()
    elif cmd == "unused-uneven":
        cmd_unused_uneven()
    elif cmd == "torchrun":
        cmd_torchrun(int(argv[2]))
    elif cmd == "powersgd":
        cmd_powersgd(argv[2], int(argv[3]))
    elif cmd == "errors":
        cmd_errors()
    elif cmd == "hygiene":
        cmd_hygiene(argv[2])
    elif cmd == "aggregator":
        cmd_aggregator()
    elif cmd == "delayed":
        cmd_delayed(argv[2], int(argv[3]))
    else:
        fail("unknown command %s" % cmd)


if __name__ == "__main__":
    main(sys.argv)
