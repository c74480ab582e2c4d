"""Tensors through the library's collectives: what dreamddp.torch takes
(dtypes, devices), the public allreduce, broadcast and all_gather over the
workers, and Horovod's broadcast_parameters and broadcast_optimizer_state
for starting and resuming. Re-exported by dreamddp.torch; nothing here
knows a wrapped model.

A CUDA tensor goes through a host copy: these calls are for setup,
checkpoints and small buffers, not the layers' syncs, and the copy orders
them after the work queued on the tensor's stream.
"""

import io

import torch

from . import _lib
from . import context as _context
from ._lib import DreamDDPError

PARAM_DTYPES = {
    torch.float32: _lib.DTYPE_F32,
    torch.float64: _lib.DTYPE_F64,
    torch.float16: _lib.DTYPE_F16,
    torch.bfloat16: _lib.DTYPE_BF16,
}
BUFFER_DTYPES = {
    **PARAM_DTYPES,
    torch.int32: _lib.DTYPE_I32,
    torch.int64: _lib.DTYPE_I64,
    torch.uint8: _lib.DTYPE_U8,
    torch.int8: _lib.DTYPE_U8,
    torch.bool: _lib.DTYPE_U8,
}


def error(status, message, call=None):
    return DreamDDPError(message, status, call)


def placement(t):
    """(mem_type, device ordinal) of tensor t's memory, as dd_tensor_t
    takes them, or None for memory dreamddp does not take."""
    if t.device.type == "cpu":
        return _lib.MEM_HOST, 0
    if t.device.type == "cuda":
        index = t.device.index
        return _lib.MEM_CUDA, torch.cuda.current_device() if index is None else index
    return None


def check_tensor(t, what, dtypes):
    if placement(t) is None:
        raise error(
            _lib.ERR_UNSUPPORTED,
            "%s is on device '%s': dreamddp takes CPU and CUDA tensors"
            % (what, t.device.type),
        )
    if t.dtype not in dtypes:
        raise error(
            _lib.ERR_UNSUPPORTED,
            "%s has dtype %s: expected one of %s"
            % (what, t.dtype, ", ".join(str(d) for d in dtypes)),
        )
    if t.is_sparse or not t.is_contiguous():
        raise error(
            _lib.ERR_INVALID_PARAM,
            "%s is not a dense contiguous tensor" % what,
        )


def dtype_code(t):
    return BUFFER_DTYPES[t.dtype]


def _coll_host(t, call):
    """A host tensor holding t's values (t itself on the CPU)."""
    check_tensor(t, "the tensor of %s" % call, BUFFER_DTYPES)
    return t if placement(t)[0] == _lib.MEM_HOST else t.cpu()


def _coll_back(t, host):
    if host is not t:
        with torch.no_grad():
            t.copy_(host)
    return t


def allreduce(tensor, op="avg"):
    """Reduces tensor across the workers in place ("sum", "avg", "max",
    "min"); returns it."""
    host = _coll_host(tensor, "allreduce")
    _context().allreduce(host.data_ptr(), host.numel(), dtype_code(host), op)
    return _coll_back(tensor, host)


def broadcast(tensor, root=0):
    """Copies root's tensor into every worker's, in place; returns it."""
    host = _coll_host(tensor, "broadcast")
    _context().broadcast(host.data_ptr(), host.numel(), dtype_code(host), root)
    return _coll_back(tensor, host)


def all_gather(tensor):
    """A new tensor of shape (workers, *tensor.shape), on tensor's device:
    every worker's."""
    host = _coll_host(tensor, "all_gather")
    ctx = _context()
    out = torch.empty((ctx.num_workers,) + tuple(host.shape), dtype=host.dtype)
    ctx.allgather(host.data_ptr(), out.data_ptr(), host.numel(), dtype_code(host))
    return out if host is tensor else out.to(tensor.device)


def broadcast_flat(tensors, root=0):
    """Broadcasts tensors from root in place, one message per dtype and
    device (a flat copy of each kind)."""
    by_kind = {}
    for t in tensors:
        by_kind.setdefault((t.dtype, t.device), []).append(t)
    with torch.no_grad():
        for ts in by_kind.values():
            flat = torch.cat([t.detach().reshape(-1) for t in ts])
            broadcast(flat, root)
            off = 0
            for t in ts:
                t.copy_(flat[off : off + t.numel()].view_as(t))
                off += t.numel()


def _named_tensors(params):
    """(name, tensor) pairs of params: a state_dict or any mapping, pairs
    (model.named_parameters()), or tensors (named by position)."""
    if hasattr(params, "items"):
        items = list(params.items())
    else:
        items = list(params)
        if items and not isinstance(items[0], tuple):
            items = [(str(i), t) for i, t in enumerate(items)]
    for name, t in items:
        if not torch.is_tensor(t):
            raise error(
                _lib.ERR_INVALID_PARAM,
                "broadcast_parameters: '%s' is a %s, not a tensor"
                % (name, type(t).__name__),
                "broadcast_parameters",
            )
    # Horovod's order: by name, the same on every worker.
    return sorted(items, key=lambda item: item[0])


def broadcast_parameters(params, root=0):
    """Copies root's values into every worker's tensors, in place, as
    Horovod's broadcast_parameters does: params is a model's state_dict(),
    its named_parameters(), or a list of tensors. Every worker passes the
    same names and shapes; a difference is an error naming the tensor."""
    items = _named_tensors(params)
    shapes = "\n".join("%s %s %s" % (n, tuple(t.shape), t.dtype) for n, t in items)
    _agree_text(shapes, "broadcast_parameters", "the tensors (name shape dtype)")
    broadcast_flat([t for _, t in items], root)


def _bytes_tensor(data):
    return torch.frombuffer(bytearray(data), dtype=torch.uint8) if data else \
        torch.zeros(0, dtype=torch.uint8)


def _agree_text(text, call, what):
    """Fails on every worker, naming the first line that differs from the
    first worker's, unless every worker has the same text."""
    data = _bytes_tensor(text.encode())
    n = torch.tensor([data.numel()], dtype=torch.int64)
    gathered = all_gather(n)
    longest = int(gathered.max())
    padded = torch.zeros(longest, dtype=torch.uint8)
    padded[: data.numel()] = data
    every = all_gather(padded)
    texts = [
        every[w, : int(gathered[w])].numpy().tobytes().decode()
        for w in range(every.shape[0])
    ]
    for w, other in enumerate(texts):
        if other == texts[0]:
            continue
        a, b = texts[0].split("\n"), other.split("\n")
        k = next((i for i in range(min(len(a), len(b))) if a[i] != b[i]), min(len(a), len(b)))
        first = a[k] if k < len(a) else "(nothing)"
        theirs = b[k] if k < len(b) else "(nothing)"
        raise error(
            _lib.ERR_MISMATCH,
            "%s: %s differ: worker 0 has '%s', worker %d has '%s'"
            % (call, what, first, w, theirs),
            call,
        )


def broadcast_optimizer_state(optimizer, root=0):
    """Gives every worker root's optimizer state (its state_dict: the
    per-parameter state, and each group's hyperparameters such as lr), as
    Horovod's broadcast_optimizer_state does. The optimizers must hold the
    same parameters in the same groups on every worker."""
    ctx = _context()
    if ctx.rank == root:
        buf = io.BytesIO()
        torch.save(optimizer.state_dict(), buf)
        data = _bytes_tensor(buf.getvalue())
        n = torch.tensor([data.numel()], dtype=torch.int64)
    else:
        n = torch.zeros(1, dtype=torch.int64)
    broadcast(n, root)
    if ctx.rank != root:
        data = torch.zeros(int(n[0]), dtype=torch.uint8)
    broadcast(data, root)
    if ctx.rank != root:
        state = torch.load(io.BytesIO(data.numpy().tobytes()), map_location="cpu")
        optimizer.load_state_dict(state)
