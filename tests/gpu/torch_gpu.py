"""The PyTorch front end on a GPU (run by tests/gpu/run.sh under ddrun, two
ranks sharing the one GPU, UCX and staging, DREAMDDP_DEVICE=cuda):

  torch_gpu.py STRATEGY STEPS

A small CUDA model (convolution, batch norm, two linear layers) trained
through DreamDDP. Every rank also runs a single-process reference: a copy
of the model that takes every rank's batch in turn and averages their
gradients itself. Under ddp the gradients DreamDDP leaves in .grad must
equal the reference's (to float rounding: the GPU's kernels are not
bitwise reproducible across processes); under every strategy the
replicas must be bitwise equal after each layer's averaging (under a
+next strategy, whose replicas differ by the steps since each launch, the
landings are counted), and after sync_all. Prints "torch_gpu: STRATEGY: ..." on success; exits 1 with the
reason otherwise.
"""

import copy
import hashlib
import sys

import torch

import dreamddp
import dreamddp.torch as ddt


def fail(msg):
    print("torch_gpu: FAIL rank %d: %s" % (dreamddp.context().rank, msg))
    sys.exit(1)


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 8, 3)
        self.bn = torch.nn.BatchNorm2d(8)
        self.fc1 = torch.nn.Linear(8 * 6 * 6, 32)
        self.fc2 = torch.nn.Linear(32, 4)

    def forward(self, x):
        x = torch.relu(self.bn(self.conv(x)))
        return self.fc2(torch.relu(self.fc1(x.flatten(1))))


def batch(step, rank, dev, n=16):
    g = torch.Generator().manual_seed(1000 * step + rank)
    x = torch.randn(n, 1, 8, 8, generator=g)
    y = torch.randint(0, 4, (n,), generator=g)
    return x.to(dev), y.to(dev)


def digest(tensors):
    h = hashlib.sha256()
    for t in tensors:
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return torch.tensor([int.from_bytes(h.digest()[:7], "little")], dtype=torch.int64)


def same_everywhere(tensors):
    d = digest(tensors)
    return bool((ddt.all_gather(d) == d).all())


def reference_grads(ref, step, workers, dev):
    """The mean over the workers of each worker's gradient, one process."""
    total = [torch.zeros_like(p) for p in ref.parameters()]
    for r in range(workers):
        ref.zero_grad()
        x, y = batch(step, r, dev)
        torch.nn.functional.cross_entropy(ref(x), y).backward()
        for t, p in zip(total, ref.parameters()):
            t += p.grad
    return [t / workers for t in total]


def main(strategy, steps):
    dreamddp.serve_if_aggregator()  # aggregator ranks serve, then exit
    ctx = dreamddp.context()
    dev = torch.device("cuda", 0)
    torch.cuda.set_device(dev)
    torch.manual_seed(ctx.rank)  # different starts: the commit makes them equal
    net = Net().to(dev)
    ref = copy.deepcopy(net)  # before DreamDDP hooks net's parameters
    # DDP's device_ids=[local_rank]: the module must be on that GPU.
    model = ddt.DreamDDP(net, strategy=strategy, device_ids=[dev.index])
    opt = ddt.wrap_optimizer(torch.optim.SGD(model.parameters(), lr=0.05), model)
    if not same_everywhere(list(net.parameters())):
        fail("%s: replicas differ after the commit" % strategy)
    layers = {layer.name: layer for layer in model._layers}
    before = {n: 0 for n in layers}
    checks, worst = 0, 0.0
    delayed = "+next" in strategy
    for step in range(steps):
        x, y = batch(step, ctx.rank, dev)
        opt.zero_grad()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        model.finish_step()
        if strategy == "ddp":
            with torch.no_grad():  # the reference takes this step's replica
                for p, q in zip(ref.parameters(), net.parameters()):
                    p.copy_(q)
            want = reference_grads(ref, step, ctx.num_workers, dev)
            for (n, p), w in zip(net.named_parameters(), want):
                d = (p.grad - w).abs().max().item()
                worst = max(worst, d)
                if not torch.allclose(p.grad, w, rtol=1e-4, atol=1e-6):
                    fail("step %d: gradient of %s differs from the single-process "
                         "reference by %g" % (step, n, d))
        stats = model.layer_stats()
        for name, layer in layers.items():
            if stats[name]["syncs"] == before[name]:
                continue
            before[name] = stats[name]["syncs"]
            checks += 1
            if delayed:
                continue  # the replicas differ by the steps since the launch
            what = layer.grads if strategy == "ddp" else layer.params + layer.buffers
            if not same_everywhere(what):
                fail("%s: step %d: layer %s differs after its sync" % (strategy, step, name))
        opt.step()
    never = [n for n, k in before.items() if k == 0]
    if never:
        fail("%s: layers %s never synced in %d steps" % (strategy, never, steps))
    model.sync_all()
    if not same_everywhere(list(net.parameters())):
        fail("%s: replicas differ after sync_all" % strategy)
    torch.cuda.synchronize()
    extra = (", gradients equal the single-process reference (max difference %g)" % worst
             if strategy == "ddp" else "")
    print("torch_gpu: %s: %d steps on %s, replicas equal after %s "
          "(%d layer syncs checked)%s" % (strategy, steps, torch.cuda.get_device_name(dev),
                                          "sync_all" if delayed else "every averaging",
                                          checks, extra))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]))
