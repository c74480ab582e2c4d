"""The PyTorch front end: DreamDDP wraps a module as
torch.nn.parallel.DistributedDataParallel does, and the library keeps the
replicas in sync by the chosen strategy.

    model = dreamddp.torch.DreamDDP(model, strategy="dreamddp:4")
    opt = dreamddp.torch.wrap_optimizer(torch.optim.SGD(model.parameters(),
                                                        lr=0.1), model)
    for x, y in data:           # unchanged: zero_grad, forward, backward,
        opt.zero_grad()         # step; forward opens the library's step,
        loss_fn(model(x), y).backward()  # the wrapped step() closes it
        opt.step()              # (dd_step_end) before the update

How it maps onto the library:
  - Layers, in the module's order (named_modules): every module with
    parameters of its own is one layer (layers="module"), or every
    parameter is (layers="parameter"), or the caller's groups (a list of
    lists of parameters). Each registers its parameters' and gradients'
    memory; .grad is allocated at construction and kept in place
    (zero_grad(set_to_none=True) is undone at the next forward, and a
    gradient that autograd put in a new tensor is copied back).
  - Readiness: a hook on each parameter's gradient accumulator
    (register_post_accumulate_grad_hook where PyTorch has it, >= 2.1; the
    AccumulateGrad node's hook before); a layer is ready (dd_layer_ready)
    when all of its parameters' gradients are final.
  - The step: forward opens it (dd_step_begin) when gradients are enabled
    and no_sync() is not in force; finish_step() closes it (dd_step_end),
    and must run before optimizer.step(): wrap_optimizer does that.
  - Buffers: under the model-averaging strategies (localsgd, plsgd,
    dreamddp) floating-point buffers are averaged with their module's
    layer; the others, and every buffer under ddp and adaptive, are
    broadcast from rank 0 at the start of each step, as DDP does.
  - Delayed averaging (a "+next" strategy, "dreamddp:4+next"): a forward
    pre-hook on the module that owns each layer's parameters marks the
    layer (dd_layer_forward) before its forward reads them, in training and
    in evaluation alike: the layer's average from the last step lands there.
    A CUDA layer is marked with dd_layer_forward_stream on the current
    stream, so that the average lands as a device sum queued before the
    forward's kernels, and its copy at the launch is queued on the stream
    of its dd_layer_ready_stream: neither waits for the GPU.
  - Frozen parameters (requires_grad=False) are broadcast from rank 0 once,
    at construction, and not synced after.
  - CUDA tensors: a layer on a GPU registers as DD_MEM_CUDA on its device
    and is marked with dd_layer_ready_stream on the stream its gradients
    became final on, so nothing waits for the GPU on the way; the library
    needs its cuda device module (its error names the layer otherwise).
    CPU and CUDA layers may be mixed; a layer's tensors share one device,
    and a process syncs one GPU. _placement and _ready_stream are the two
    places that read where a tensor lives and which stream it is final on.
"""

import contextlib
import functools

import torch

from . import _lib
from . import context as _context
from . import serve_if_aggregator
from ._lib import DreamDDPError

__all__ = [
    "DreamDDP",
    "wrap_optimizer",
    "allreduce",
    "broadcast",
    "all_gather",
]

_PARAM_DTYPES = {
    torch.float32: _lib.DTYPE_F32,
    torch.float64: _lib.DTYPE_F64,
    torch.float16: _lib.DTYPE_F16,
    torch.bfloat16: _lib.DTYPE_BF16,
}
_BUFFER_DTYPES = {
    **_PARAM_DTYPES,
    torch.int32: _lib.DTYPE_I32,
    torch.int64: _lib.DTYPE_I64,
    torch.uint8: _lib.DTYPE_U8,
    torch.int8: _lib.DTYPE_U8,
    torch.bool: _lib.DTYPE_U8,
}
# Strategies that sync gradients or read them (adaptive's signal): their
# layers hold no tensor without a gradient.
_GRAD_STRATEGIES = ("ddp", "adaptive")
_BUFFER_LAYER = "dreamddp.buffers"


def _error(status, message, call=None):
    return DreamDDPError(message, status, call)


def _placement(t):
    """(mem_type, device ordinal) of tensor t's memory, as dd_tensor_t
    takes them, or None for memory dreamddp does not take."""
    if t.device.type == "cpu":
        return _lib.MEM_HOST, 0
    if t.device.type == "cuda":
        index = t.device.index
        return _lib.MEM_CUDA, torch.cuda.current_device() if index is None else index
    return None


def _ready_stream(p):
    """The CUDA stream on which p's gradient is final, as the integer
    (cudaStream_t) that dd_layer_ready_stream takes: the current stream of
    p's device on the thread that runs its gradient accumulator (autograd
    runs it on the stream of the forward op that used p). Called from a
    forward pre-hook, the stream the forward is about to run on
    (dd_layer_forward_stream)."""
    return torch.cuda.current_stream(p.device).cuda_stream


def _join_streams(handles, device):
    """Makes the last of the streams (cudaStream_t integers) wait for the
    work queued so far on the others."""
    last = torch.cuda.ExternalStream(handles[-1], device=device)
    for h in set(handles[:-1]) - {handles[-1]}:
        last.wait_stream(torch.cuda.ExternalStream(h, device=device))


def _check_tensor(t, what, dtypes):
    if _placement(t) is None:
        raise _error(
            _lib.ERR_UNSUPPORTED,
            "%s is on device '%s': dreamddp takes CPU and CUDA tensors"
            % (what, t.device.type),
        )
    if t.dtype not in dtypes:
        raise _error(
            _lib.ERR_UNSUPPORTED,
            "%s has dtype %s: expected one of %s"
            % (what, t.dtype, ", ".join(str(d) for d in dtypes)),
        )
    if t.is_sparse or not t.is_contiguous():
        raise _error(
            _lib.ERR_INVALID_PARAM,
            "%s is not a dense contiguous tensor" % what,
        )


def _matrix_shape(t):
    """(rows, cols) of a parameter as the matrix PowerSGD factors, as
    PyTorch's PowerSGD hook views it: the first dimension by the rest (a
    Linear weight (out, in); a convolution's (out, in * kh * kw)); (0, 0)
    for a vector or a scalar."""
    if t.dim() < 2 or t.numel() == 0:
        return (0, 0)
    rows = t.shape[0]
    return (rows, t.numel() // rows if rows else 0)


def _check_devices(layers):
    """One device a layer, and at most one GPU a process (the library
    stages one device's layers)."""
    gpus = set()
    for layer in layers:
        places = {_placement(t) for t in layer.params + layer.buffers}
        if len(places) > 1:
            raise _error(
                _lib.ERR_UNSUPPORTED,
                "layer '%s' holds tensors on %s: the tensors of a layer "
                "must be on one device" % (layer.name, _place_names(places)),
            )
        gpus |= {p for p in places if p[0] == _lib.MEM_CUDA}
    if len(gpus) > 1:
        raise _error(
            _lib.ERR_UNSUPPORTED,
            "the model is on %s: dreamddp syncs one GPU per process (one "
            "rank per GPU)" % _place_names(gpus),
        )


def _place_names(places):
    return " and ".join(
        sorted("cuda:%d" % d if m == _lib.MEM_CUDA else "cpu" for m, d in places)
    )


def _dtype_code(t):
    return _BUFFER_DTYPES[t.dtype]


class _Layer:
    """One registered layer: its parameters, their gradients (the tensors
    whose memory the library holds), and this step's readiness."""

    def __init__(self, name, params, param_names, buffers):
        self.name = name
        self.params = params
        self.param_names = param_names
        self.grads = []
        self.buffers = buffers
        self.handle = None
        self.seen = [False] * len(params)
        self.pending = len(params)
        self.marked = False
        self.on_device = False  # a CUDA layer: marked on a stream
        self.streams = []  # this step's streams of its gradients

    def reset(self):
        self.seen = [False] * len(self.params)
        self.pending = len(self.params)
        self.marked = False
        self.streams = []


class DreamDDP(torch.nn.Module):
    """Wraps module for data-parallel training through dreamddp.

    strategy: "ddp", "localsgd:H", "plsgd:H", "dreamddp:H", "adaptive" or
        "adaptive:drift"; None takes DREAMDDP_STRATEGY.
    compression: the codec of the syncs ("fp16", "bf16", "topk:RATIO",
        "powersgd:RANK"); None takes DREAMDDP_COMPRESSION. Parameters go
        with their shape as a matrix (first dimension by the rest), which
        powersgd factors; layers under 4096 elements stay dense.
    layers: "module", "parameter", or a list of lists of parameters.
    find_unused_parameters: as DDP's: a layer whose parameters got no
        gradient in a step counts as ready with zero gradients. Without it,
        such a step fails with a DreamDDPError naming the layer.

    On an aggregator rank (DREAMDDP_NUM_AGGREGATORS), the constructor
    serves the workers and then exits the process with status 0.
    """

    def __init__(
        self,
        module,
        strategy="dreamddp:4",
        compression=None,
        layers="module",
        find_unused_parameters=False,
    ):
        super().__init__()
        self.module = module
        self.find_unused_parameters = find_unused_parameters
        groups, frozen = self._groups(layers)
        buffers = list(self.module.named_buffers())
        for name, b in buffers:
            _check_tensor(b, "buffer '%s'" % name, _BUFFER_DTYPES)
        ctx = _context()
        serve_if_aggregator()  # returns on a worker
        self._ctx = ctx
        if strategy is not None:
            ctx.strategy_set(strategy)
        if compression is not None:
            ctx.compression_set(compression)
        self.strategy = ctx.strategy
        averaged = self._averaged_buffers(buffers)
        self._layers = self._make_layers(groups, averaged, layers == "module")
        self._bcast = [
            b for _, b in buffers if not any(b is a for a in averaged.values())
        ]
        self._check_unique_names()
        _check_devices(self._layers)
        # Everything rank 0 has that the table does not carry; collectives
        # before the commit run directly.
        for t in frozen + self._bcast:
            broadcast(t)
        for layer in self._layers:
            layer.handle = ctx.layer_register(layer.name, self._tensors(layer))
        ctx.commit()
        self._grad_accs = []
        self._hooks = []
        for layer in self._layers:
            for i, p in enumerate(layer.params):
                self._hook(layer, i, p)
        if self.strategy.endswith("+next"):
            self._hook_forwards()
        self._flat_bcast = self._flatten_plan(self._bcast)
        self._step_open = False
        self._no_sync = False
        self.last_stats = None

    # ---- construction ----------------------------------------------------

    def _groups(self, layers):
        """[(name, [(param_name, param)])] in module order, and the frozen
        parameters."""
        named = list(self.module.named_parameters())
        name_of = {id(p): n for n, p in named}
        for n, p in named:
            _check_tensor(p, "parameter '%s'" % n, _PARAM_DTYPES)
        frozen = [p for _, p in named if not p.requires_grad]
        trained = [(n, p) for n, p in named if p.requires_grad]
        if layers == "parameter":
            return [(n, [(n, p)]) for n, p in trained], frozen
        if layers == "module":
            groups, seen = [], set()
            for mname, mod in self.module.named_modules():
                own = []
                for pname, p in mod.named_parameters(recurse=False):
                    if p.requires_grad and id(p) not in seen:
                        seen.add(id(p))
                        own.append((name_of[id(p)], p))
                if own:
                    groups.append((mname or "root", own))
            return groups, frozen
        if isinstance(layers, (list, tuple)):
            return self._user_groups(layers, name_of, trained), frozen
        raise _error(
            _lib.ERR_INVALID_PARAM,
            "layers=%r: expected 'module', 'parameter' or a list of lists "
            "of parameters" % (layers,),
        )

    @staticmethod
    def _user_groups(layers, name_of, trained):
        groups, seen = [], set()
        for k, group in enumerate(layers):
            own = []
            for p in group:
                if id(p) not in name_of:
                    raise _error(
                        _lib.ERR_INVALID_PARAM,
                        "layers: group %d holds a tensor that is not a "
                        "parameter of the module" % k,
                    )
                if id(p) in seen:
                    raise _error(
                        _lib.ERR_INVALID_PARAM,
                        "layers: parameter '%s' is in two groups"
                        % name_of[id(p)],
                    )
                seen.add(id(p))
                if p.requires_grad:
                    own.append((name_of[id(p)], p))
            if own:
                groups.append((own[0][0], own))
        left = [n for n, p in trained if id(p) not in seen]
        if left:
            raise _error(
                _lib.ERR_INVALID_PARAM,
                "layers: parameters %s are in no group: every trained "
                "parameter must be in one" % ", ".join(left),
            )
        return groups

    def _averaged_buffers(self, buffers):
        """Buffers averaged with the parameters (name -> tensor)."""
        if self.strategy.split(":")[0] in _GRAD_STRATEGIES:
            return {}
        return {n: b for n, b in buffers if b.dtype in _PARAM_DTYPES}

    def _make_layers(self, groups, averaged, by_module):
        """The layers; with by_module, a module's averaged buffers join its
        layer, and the others go in one last layer of their own."""
        layers = []
        left = dict(averaged)
        for name, params in groups:
            bufs = []
            for bname in list(left) if by_module else []:
                owner = bname.rpartition(".")[0] or "root"
                if owner == name:
                    bufs.append(left.pop(bname))
            layers.append(
                _Layer(name, [p for _, p in params], [n for n, _ in params], bufs)
            )
        if left:
            layers.append(_Layer(_BUFFER_LAYER, [], [], list(left.values())))
        return layers

    def _check_unique_names(self):
        names = [layer.name for layer in self._layers]
        for layer in self._layers:
            if names.count(layer.name) > 1:
                raise _error(
                    _lib.ERR_INVALID_PARAM,
                    "two layers are named '%s'" % layer.name,
                )

    def _tensors(self, layer):
        """The layer's dd_tensor_t fields: (param, grad or None, count,
        dtype, mem_type, device, rows, cols); parameters go with their shape
        as a matrix, for powersgd."""
        out = []
        for p in layer.params:
            g = p.grad
            if (
                g is None
                or g.dtype != p.dtype
                or g.shape != p.shape
                or not g.is_contiguous()
                or g.device != p.device
            ):
                g = torch.zeros_like(p, memory_format=torch.contiguous_format)
                p.grad = g
            layer.grads.append(g)
            out.append(
                (p.data_ptr(), g.data_ptr(), p.numel(), _dtype_code(p))
                + _placement(p)
                + _matrix_shape(p)
            )
        for b in layer.buffers:
            out.append((b.data_ptr(), None, b.numel(), _dtype_code(b))
                       + _placement(b))
        layer.on_device = any(t[4] == _lib.MEM_CUDA for t in out)
        layer.ptrs = [p.data_ptr() for p in layer.params] + [
            b.data_ptr() for b in layer.buffers
        ]
        return out

    def _hook(self, layer, i, p):
        def ready(*unused):
            self._on_grad(layer, i)

        if hasattr(p, "register_post_accumulate_grad_hook"):
            self._hooks.append(p.register_post_accumulate_grad_hook(ready))
            return
        with torch.enable_grad():
            acc = p.expand_as(p).grad_fn.next_functions[0][0]
        self._hooks.append(acc.register_hook(ready))
        self._grad_accs.append(acc)  # the parameter holds it only weakly

    def _hook_forwards(self):
        """A forward pre-hook per layer, on the deepest module that holds
        all of its parameters: the deadline of its delayed average."""
        owner_of = {}
        for mname, mod in self.module.named_modules():
            for pname, _ in mod.named_parameters(recurse=False):
                owner_of[(mname + "." if mname else "") + pname] = mname
        modules = dict(self.module.named_modules())
        for layer in self._layers:
            if not layer.params:
                continue  # buffers alone: their next backward mark
            owners = [owner_of[n].split(".") if owner_of[n] else []
                      for n in layer.param_names]
            common = owners[0]
            for o in owners[1:]:
                k = 0
                while k < min(len(common), len(o)) and common[k] == o[k]:
                    k += 1
                common = common[:k]
            mod = modules[".".join(common)]
            self._hooks.append(mod.register_forward_pre_hook(
                functools.partial(self._on_forward, layer)))

    def _on_forward(self, layer, module, inputs):
        if layer.on_device:
            # The average lands as a device sum on the stream the forward's
            # kernels are about to be queued on.
            self._ctx.layer_forward_stream(
                layer.handle, _ready_stream((layer.params + layer.buffers)[0]))
        else:
            self._ctx.layer_forward(layer.handle)

    @staticmethod
    def _flatten_plan(tensors):
        """Buffers to broadcast, one flat tensor per dtype and device."""
        by_kind = {}
        for t in tensors:
            by_kind.setdefault((t.dtype, t.device), []).append(t)
        return [
            (ts, torch.empty(sum(t.numel() for t in ts), dtype=d, device=dev))
            for (d, dev), ts in by_kind.items()
        ]

    # ---- the step ---------------------------------------------------------

    def _on_grad(self, layer, i):
        p, g = layer.params[i], layer.grads[i]
        if p.grad is None or p.grad.data_ptr() != g.data_ptr():
            # Autograd put the gradient in a new tensor (the old one was
            # set to None): copy it into the memory the library holds.
            with torch.no_grad():
                if p.grad is None:
                    g.zero_()
                else:
                    g.copy_(p.grad)
            p.grad = g
        if not self._step_open:
            return
        if layer.seen[i]:
            raise _error(
                _lib.ERR_STATE,
                "parameter '%s' got a second gradient in one step: run the "
                "other backward passes of the step under no_sync()"
                % layer.param_names[i],
                "backward",
            )
        layer.seen[i] = True
        layer.pending -= 1
        if layer.on_device:
            layer.streams.append(_ready_stream(p))
        if layer.pending == 0:
            self._mark(layer)

    def _mark(self, layer):
        """dd_layer_ready, or for a CUDA layer dd_layer_ready_stream on
        the stream its last gradient became final on, made to wait for the
        others' streams first."""
        layer.marked = True
        if not layer.on_device:
            self._ctx.layer_ready(layer.handle)
            return
        streams = layer.streams
        if not streams:  # no gradient this step: what ran here is final
            streams = [_ready_stream((layer.params + layer.buffers)[0])]
        if len(set(streams)) > 1:
            _join_streams(streams, (layer.params + layer.buffers)[0].device)
        self._ctx.layer_ready_stream(layer.handle, streams[-1])

    def _check_memory(self):
        for layer in self._layers:
            now = [p.data_ptr() for p in layer.params] + [
                b.data_ptr() for b in layer.buffers
            ]
            if now != layer.ptrs:
                raise _error(
                    _lib.ERR_STATE,
                    "layer '%s': a parameter or buffer moved to new memory "
                    "since DreamDDP registered it (.data or the module was "
                    "reassigned); update tensors in place" % layer.name,
                    "forward",
                )
            for p, g in zip(layer.params, layer.grads):
                if p.grad is None or p.grad.data_ptr() != g.data_ptr():
                    with torch.no_grad():
                        if p.grad is None:
                            g.zero_()
                        else:
                            g.copy_(p.grad)
                    p.grad = g

    def step_begin(self):
        """Opens a step (dd_step_begin); forward calls it. A second forward
        before the step's backward stays in the same step."""
        if self._step_open:
            if any(layer.marked or any(layer.seen) for layer in self._layers):
                raise _error(
                    _lib.ERR_STATE,
                    "the previous step is still open: call finish_step() "
                    "(or the step() of wrap_optimizer's optimizer) after "
                    "backward, before the next forward",
                    "forward",
                )
            return
        self._check_memory()
        for layer in self._layers:
            layer.reset()
        self._ctx.step_begin()
        self._step_open = True
        for tensors, flat in self._flat_bcast:
            with torch.no_grad():
                torch.cat([t.reshape(-1) for t in tensors], out=flat)
                broadcast(flat)
                off = 0
                for t in tensors:
                    t.copy_(flat[off : off + t.numel()].view_as(t))
                    off += t.numel()

    def forward(self, *args, **kwargs):
        if torch.is_grad_enabled() and not self._no_sync:
            self.step_begin()
        return self.module(*args, **kwargs)

    @contextlib.contextmanager
    def no_sync(self):
        """Forward and backward inside accumulate gradients locally, as
        DDP's no_sync(); the step's last backward runs outside."""
        old, self._no_sync = self._no_sync, True
        try:
            yield
        finally:
            self._no_sync = old

    def _unmarked(self):
        """Layers not marked this step, in backward order, with the names of
        their parameters that got no gradient."""
        out = []
        for layer in reversed(self._layers):
            if not layer.marked:
                missing = [
                    n for n, s in zip(layer.param_names, layer.seen) if not s
                ]
                out.append((layer, missing))
        return out

    def _mark_unused(self, layer, missing):
        with torch.no_grad():
            for n, p, g in zip(layer.param_names, layer.params, layer.grads):
                if n in missing:
                    g.zero_()
                    p.grad = g
        whole = len(missing) == len(layer.params)
        if layer.on_device:
            # dd_layer_unused zeroes host gradients only: these were zeroed
            # above, on the current stream, which the mark waits for.
            layer.streams.append(_ready_stream(layer.params[0]))
            self._mark(layer)
        elif whole and _lib.has("dd_layer_unused"):
            layer.marked = True
            self._ctx.layer_unused(layer.handle)
        else:
            self._mark(layer)

    def finish_step(self):
        """Closes the step (dd_step_end): this step's averages land in place.
        Call it after backward and before optimizer.step() (wrap_optimizer
        does). Returns the step's statistics (a dict), or None when no step
        was open."""
        if not self._step_open:
            return None
        unused = []
        for layer, missing in self._unmarked():
            if not layer.params:
                self._mark(layer)  # buffers only: final since forward
            elif self.find_unused_parameters:
                self._mark_unused(layer, missing)
            else:
                unused.append("layer '%s' (%s)" % (layer.name, ", ".join(missing)))
        if unused:
            # Raised before dd_step_end: a worker whose peers did use the
            # layer would wait there for syncs that never match. The step
            # stays open; the job cannot go on.
            raise _error(
                _lib.ERR_STATE,
                "no gradient reached %s in this step; pass "
                "find_unused_parameters=True if parameters may go unused"
                % "; ".join(unused),
                "finish_step",
            )
        self._step_open = False
        self.last_stats = self._ctx.step_end()
        return self.last_stats

    def sync_all(self):
        """Averages every layer's parameters now (dd_sync_all), whatever the
        strategy: before a checkpoint or an evaluation. Outside a step."""
        if self._step_open:
            raise _error(
                _lib.ERR_STATE,
                "sync_all: a step is open; call finish_step() first",
                "sync_all",
            )
        self._ctx.sync_all()

    def layer_names(self):
        return [layer.name for layer in self._layers]

    def layer_stats(self, parts=False):
        """{layer name: dd_layer_stats()} for every layer; with parts=True,
        also each part of a layer the library cut (layer_parts), under the
        part's name, NAME#i."""
        out = {}
        for layer in self._layers:
            out[layer.name] = self._ctx.layer_stats(layer.handle)
            cut = self._ctx.layer_parts(layer.handle) if parts else []
            if len(cut) < 2:
                continue
            for handle, name, _, _ in cut:
                out[name] = self._ctx.layer_stats(handle)
        return out

    def layer_parts(self):
        """{layer name: [(part name, first element, elements)]}: how
        dd_model_commit cut each layer (DREAMDDP_LAYER_SPLIT, under a +next
        strategy by default), counting the elements of the layer's
        parameters and buffers one after the other; a layer that was not
        cut has one part, itself."""
        out = {}
        for layer in self._layers:
            cut = self._ctx.layer_parts(layer.handle)
            out[layer.name] = [(name, off, n) for _, name, off, n in cut]
        return out

    @property
    def rank(self):
        return self._ctx.rank

    @property
    def num_workers(self):
        return self._ctx.num_workers


def wrap_optimizer(optimizer, model):
    """Makes optimizer.step() call model.finish_step() first; returns the
    optimizer."""
    step = optimizer.step

    @functools.wraps(step)
    def wrapped(*args, **kwargs):
        model.finish_step()
        return step(*args, **kwargs)

    optimizer.step = wrapped
    return optimizer


# ---- collectives over the workers, in place ------------------------------
#
# A CUDA tensor goes through a host copy: these calls are for setup,
# checkpoints and small buffers, not the layers' syncs, and the copy
# orders them after the work queued on the tensor's stream.


def _coll_host(t, call):
    """A host tensor holding t's values (t itself on the CPU)."""
    _check_tensor(t, "the tensor of %s" % call, _BUFFER_DTYPES)
    return t if _placement(t)[0] == _lib.MEM_HOST else t.cpu()


def _coll_back(t, host):
    if host is not t:
        with torch.no_grad():
            t.copy_(host)
    return t


def allreduce(tensor, op="avg"):
    """Reduces tensor across the workers in place ("sum", "avg", "max",
    "min"); returns it."""
    host = _coll_host(tensor, "allreduce")
    _context().allreduce(host.data_ptr(), host.numel(), _dtype_code(host), op)
    return _coll_back(tensor, host)


def broadcast(tensor, root=0):
    """Copies root's tensor into every worker's, in place; returns it."""
    host = _coll_host(tensor, "broadcast")
    _context().broadcast(host.data_ptr(), host.numel(), _dtype_code(host), root)
    return _coll_back(tensor, host)


def all_gather(tensor):
    """A new tensor of shape (workers, *tensor.shape), on tensor's device:
    every worker's."""
    host = _coll_host(tensor, "all_gather")
    ctx = _context()
    out = torch.empty((ctx.num_workers,) + tuple(host.shape), dtype=host.dtype)
    ctx.allgather(host.data_ptr(), out.data_ptr(), host.numel(), _dtype_code(host))
    return out if host is tensor else out.to(tensor.device)
