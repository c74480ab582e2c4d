"""The PyTorch front end's CUDA path, on the fake device (run by
tests/python/test_torch_device.sh with DREAMDDP_DEVICE=fake).

No GPU here: the model's parameters, gradients and buffers are moved into
the fake device's memory (host memory the fake module knows as device
memory, which torch computes on as CPU tensors), and the test replaces
dreamddp.torch's two seams, _placement (which says where a tensor lives)
and _ready_stream (which stream a gradient is final on), so that the front
end takes them for CUDA tensors on device 1 with their gradients final on
a stream of the fake device. The library then stages them as it would a
GPU's.

  torch_device.py equal STRATEGY STEPS   the right mem_type, device and
                                         stream reach the library; replicas
                                         bitwise equal after every averaging
  torch_device.py next STRATEGY STEPS    a +next strategy: device layers'
                                         forward marks reach the library
                                         with their stream
                                         (dd_layer_forward_stream); replicas
                                         bitwise equal after sync_all
  torch_device.py errors                 a layer on two devices, a model on
                                         two GPUs
  torch_device.py nomodule               a CUDA layer without a device
                                         module: the library's error
"""

import ctypes
import os
import sys

import torch

import dreamddp
import dreamddp._lib as lib
import dreamddp.torch as ddt

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from torch_mp import Net, batch, fail, same_everywhere  # noqa: E402

DEVICE = 1  # not the default ordinal: the test sees it passed through

_LOG = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)
_ERR = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_int, ctypes.c_char_p)


class _Services(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_uint32), ("log_level", ctypes.c_int),
                ("arg", ctypes.c_void_p), ("log", _LOG), ("error", _ERR)]


_OPS = ["query", "init", "finalize", "device_count", "device_info",
        "stream_create", "stream_destroy", "event_create", "event_destroy",
        "event_record", "event_query", "event_synchronize", "host_alloc",
        "host_free", "mem_alloc", "mem_free", "memcpy_async", "ipc_get",
        "ipc_open", "ipc_close"]


class _Ops(ctypes.Structure):
    _fields_ = [("abi_version", ctypes.c_uint32), ("name", ctypes.c_char_p)] + [
        (n, ctypes.c_void_p) for n in _OPS]


class FakeDevice:
    """The fake module, dlopen'd from where the library loads it: the same
    instance of its table of allocations."""

    def __init__(self):
        path = os.path.join(os.environ["DREAMDDP_BACKEND_PATH"], "dd_device_fake.so")
        so = ctypes.CDLL(path)
        so.dd_device_ops_get.restype = ctypes.POINTER(_Ops)
        self.ops = so.dd_device_ops_get().contents
        self._log = _LOG(lambda a, level, m: None)
        self._err = _ERR(lambda a, status, m: fail("fake device: %s" % m.decode()) or status)
        self.svc = _Services(0, 0, None, self._log, self._err)
        self.svc.abi_version = self.ops.abi_version
        self.dev = ctypes.c_void_p()
        self._call("init", [ctypes.POINTER(_Services), ctypes.POINTER(ctypes.c_void_p)],
                   ctypes.byref(self.svc), ctypes.byref(self.dev))
        self.allocs = []

    def _call(self, name, argtypes, *args):
        fn = ctypes.CFUNCTYPE(ctypes.c_int, *argtypes)(getattr(self.ops, name))
        status = fn(*args)
        if status != 0:
            fail("fake device %s: status %d" % (name, status))

    def stream(self):
        s = ctypes.c_void_p()
        self._call("stream_create", [ctypes.c_void_p, ctypes.c_int,
                                     ctypes.POINTER(ctypes.c_void_p)],
                   self.dev, DEVICE, ctypes.byref(s))
        return s.value

    def wait(self, stream):
        """Waits for the work queued on stream so far."""
        ev = ctypes.c_void_p()
        self._call("event_create", [ctypes.c_void_p, ctypes.c_int,
                                    ctypes.POINTER(ctypes.c_void_p)],
                   self.dev, DEVICE, ctypes.byref(ev))
        self._call("event_record", [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p],
                   self.dev, ev, stream)
        self._call("event_synchronize", [ctypes.c_void_p, ctypes.c_void_p], self.dev, ev)
        fn = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p)(self.ops.event_destroy)
        fn(self.dev, ev)

    def tensor_like(self, t):
        """A tensor over new fake-device memory, holding t's values."""
        ptr = ctypes.c_void_p()
        nbytes = t.numel() * t.element_size()
        self._call("mem_alloc", [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t,
                                 ctypes.POINTER(ctypes.c_void_p)],
                   self.dev, DEVICE, nbytes, ctypes.byref(ptr))
        self.allocs.append((ptr.value, nbytes))
        raw = (ctypes.c_char * nbytes).from_address(ptr.value)
        out = torch.frombuffer(raw, dtype=t.dtype).view(t.shape)
        with torch.no_grad():
            out.copy_(t)
        return out

    def holds(self, t):
        p = t.data_ptr()
        return any(a <= p < a + n for a, n in self.allocs)


def to_fake(module, fake, skip=()):
    """Moves module's parameters (with preallocated gradients) and buffers
    into fake device memory, except those of the submodules in skip."""
    for mname, mod in module.named_modules():
        if mname in skip:
            continue
        for name, p in list(mod.named_parameters(recurse=False)):
            p.data = fake.tensor_like(p.data)
            p.grad = fake.tensor_like(torch.zeros_like(p))
        for name, b in list(mod.named_buffers(recurse=False)):
            mod._buffers[name] = fake.tensor_like(b)


def install_seams(fake, stream, placements=None):
    """Tensors in fake memory count as CUDA tensors on DEVICE (or as
    placements says), their gradients final on stream."""
    def placement(t):
        if placements is not None and t.data_ptr() in placements:
            return placements[t.data_ptr()]
        if fake.holds(t):
            return lib.MEM_CUDA, DEVICE
        return (lib.MEM_HOST, 0) if t.device.type == "cpu" else None

    ddt._placement = placement
    ddt._ready_stream = lambda p: stream if fake.holds(p) else fail(
        "_ready_stream asked for a host tensor")


def record_calls(ctx):
    calls = {"register": {}, "ready": [], "ready_stream": []}
    reg, ready, ready_stream = ctx.layer_register, ctx.layer_ready, ctx.layer_ready_stream

    def on_register(name, tensors):
        calls["register"][name] = list(tensors)
        h = reg(name, tensors)
        calls.setdefault("names", {})[h.value] = name
        return h

    def on_ready(h):
        calls["ready"].append(calls["names"][h.value])
        ready(h)

    def on_ready_stream(h, s):
        calls["ready_stream"].append((calls["names"][h.value], s))
        ready_stream(h, s)

    ctx.layer_register, ctx.layer_ready, ctx.layer_ready_stream = on_register, on_ready, on_ready_stream
    return calls


def cmd_equal(strategy, steps):
    ctx = dreamddp.context()
    fake = FakeDevice()
    stream = fake.stream()
    torch.manual_seed(ctx.rank)  # different starts: the commit makes them equal
    net = Net()
    to_fake(net, fake, skip=("fc2",))  # fc2 stays a host layer: mixed is allowed
    install_seams(fake, stream)
    calls = record_calls(ctx)
    model = ddt.DreamDDP(net, strategy=strategy)
    opt = ddt.wrap_optimizer(torch.optim.SGD(model.parameters(), lr=0.05, momentum=0.9), model)
    device_layers = [n for n in model.layer_names() if n != "fc2"]
    for name, tensors in calls["register"].items():
        want = (lib.MEM_HOST, 0) if name == "fc2" else (lib.MEM_CUDA, DEVICE)
        got = {tuple(t[4:6]) for t in tensors}
        if got != {want}:
            fail("layer %s registered as (mem_type, device) %s, expected %s" % (name, got, want))
    if not same_everywhere(list(net.parameters())):
        fail("%s: replicas differ after the commit" % strategy)
    layers = {layer.name: layer for layer in model._layers}
    before = {n: 0 for n in layers}
    checks = 0
    for step in range(steps):
        x, y = batch(step, ctx.rank)
        opt.zero_grad(set_to_none=(step % 2 == 0))
        calls["ready"].clear()
        calls["ready_stream"].clear()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        model.finish_step()
        if sorted(calls["ready_stream"]) != sorted((n, stream) for n in device_layers):
            fail("step %d: dd_layer_ready_stream got %s, expected the layers %s on stream %#x"
                 % (step, calls["ready_stream"], device_layers, stream))
        if calls["ready"] != ["fc2"]:
            fail("step %d: dd_layer_ready got %s, expected fc2 alone" % (step, calls["ready"]))
        stats = model.layer_stats()
        for name, layer in layers.items():
            if stats[name]["syncs"] == before[name]:
                continue
            before[name] = stats[name]["syncs"]
            what = layer.grads if strategy == "ddp" else layer.params + layer.buffers
            if not same_everywhere(what):
                fail("%s: step %d: layer %s differs after its sync" % (strategy, step, name))
            checks += 1
        opt.step()
    for name, layer in layers.items():
        if name != "fc2" and not all(fake.holds(t) for t in layer.params + layer.grads):
            fail("layer %s left the device memory it was registered with" % name)
    never = [n for n, k in before.items() if k == 0]
    if never:
        fail("%s: layers %s never synced in %d steps" % (strategy, never, steps))
    model.sync_all()
    if not same_everywhere(list(net.parameters())):
        fail("%s: replicas differ after sync_all" % strategy)
    print("torch_mp: device %s: %d steps, CUDA layers on device %d marked on their stream, "
          "replicas equal after every averaging (%d layer syncs checked)"
          % (strategy, steps, DEVICE, checks))


def cmd_next(strategy, steps):
    """Delayed averaging of device layers. torch computes on the fake
    device's memory as on the CPU, outside the stream's order, so the test
    waits for the stream after each mark, as a GPU's kernels queued after
    the library's copy and sum would."""
    ctx = dreamddp.context()
    fake = FakeDevice()
    stream = fake.stream()
    torch.manual_seed(ctx.rank)
    net = Net()
    to_fake(net, fake, skip=("fc2",))
    install_seams(fake, stream)
    calls = record_calls(ctx)
    marks = {"stream": [], "host": []}
    fwd, fwd_stream, ready_stream = ctx.layer_forward, ctx.layer_forward_stream, ctx.layer_ready_stream

    def on_forward(h):
        marks["host"].append(calls["names"][h.value])
        fwd(h)

    def on_forward_stream(h, s):
        marks["stream"].append((calls["names"][h.value], s))
        fwd_stream(h, s)
        fake.wait(s)

    def on_ready_stream(h, s):
        ready_stream(h, s)
        fake.wait(s)

    ctx.layer_forward, ctx.layer_forward_stream, ctx.layer_ready_stream = (
        on_forward, on_forward_stream, on_ready_stream)
    model = ddt.DreamDDP(net, strategy=strategy)
    opt = ddt.wrap_optimizer(torch.optim.SGD(model.parameters(), lr=0.05), model)
    device_layers = [n for n in model.layer_names() if n != "fc2"]
    landed = 0
    for step in range(steps):
        x, y = batch(step, ctx.rank)
        opt.zero_grad()
        marks["stream"].clear()
        marks["host"].clear()
        torch.nn.functional.cross_entropy(model(x), y).backward()
        stats = model.finish_step()
        if sorted(marks["stream"]) != sorted((n, stream) for n in device_layers):
            fail("step %d: dd_layer_forward_stream got %s, expected the layers %s on stream %#x"
                 % (step, marks["stream"], device_layers, stream))
        if marks["host"] != ["fc2"]:
            fail("step %d: dd_layer_forward got %s, expected fc2 alone" % (step, marks["host"]))
        landed += stats["layers_synced"]
        opt.step()
    if landed == 0:
        fail("%s: no delayed average landed in %d steps" % (strategy, steps))
    for name, layer in {layer.name: layer for layer in model._layers}.items():
        if name != "fc2" and not all(fake.holds(t) for t in layer.params + layer.grads):
            fail("layer %s left the device memory it was registered with" % name)
    model.sync_all()
    if not same_everywhere(list(net.parameters())):
        fail("%s: replicas differ after sync_all" % strategy)
    print("torch_mp: device %s: %d steps, CUDA layers' forward marked on their stream, "
          "%d averages landed, replicas equal after sync_all" % (strategy, steps, landed))


def expect_error(fn, status_name, needle):
    try:
        fn()
    except dreamddp.DreamDDPError as e:
        if e.status_name != status_name or needle not in str(e):
            fail("expected %s with '%s', got: %s" % (status_name, needle, e))
        return str(e)
    fail("expected %s with '%s', got no error" % (status_name, needle))


def cmd_errors():
    fake = FakeDevice()
    install_seams(fake, fake.stream())
    net = Net()
    to_fake(net, fake)
    # fc1.bias on "cuda:0" while the rest is on cuda:1: one layer, two devices.
    ddt._placement = (lambda inner: lambda t: (lib.MEM_CUDA, 0)
                      if t is net.fc1.bias else inner(t))(ddt._placement)
    expect_error(lambda: ddt.DreamDDP(net, strategy="ddp"), "DD_ERR_UNSUPPORTED",
                 "layer 'fc1' holds tensors on cuda:0 and cuda:1")
    ddt._placement = (lambda inner: lambda t: (lib.MEM_CUDA, 0)
                      if t is net.fc1.bias or t is net.fc1.weight else inner(t))(ddt._placement)
    msg = expect_error(lambda: ddt.DreamDDP(net, strategy="ddp"), "DD_ERR_UNSUPPORTED",
                       "the model is on cuda:0 and cuda:1: dreamddp syncs one GPU per process")
    print("torch_mp: device errors: %s" % msg)


def cmd_nomodule():
    fake = FakeDevice()
    install_seams(fake, fake.stream())
    net = Net()
    to_fake(net, fake)
    msg = expect_error(lambda: ddt.DreamDDP(net, strategy="ddp"), "DD_ERR_UNSUPPORTED",
                       "dd_layer_register: layer 'conv' tensor 0 is in CUDA memory, "
                       "but no device module is loaded")
    print("torch_mp: device nomodule: %s" % msg)


def main(argv):
    dreamddp.serve_if_aggregator()  # aggregator ranks serve, then exit
    if argv[1] == "equal":
        cmd_equal(argv[2], int(argv[3]))
    elif argv[1] == "next":
        cmd_next(argv[2], int(argv[3]))
    elif argv[1] == "errors":
        cmd_errors()
    elif argv[1] == "nomodule":
        cmd_nomodule()
    else:
        fail("unknown command %s" % argv[1])


if __name__ == "__main__":
    main(sys.argv)
