"""The PyTorch front end: DreamDDP wraps a module as
torch.nn.parallel.DistributedDataParallel does, and the library keeps the
replicas in sync by the chosen strategy.

    model = dreamddp.torch.DreamDDP(model, strategy="dreamddp:4")
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    for x, y in data:           # the loop of a DDP script, unchanged:
        opt.zero_grad()         # forward opens the library's step,
        loss_fn(model(x), y).backward()  # backward closes it
        opt.step()

How it maps onto the library:
  - Layers, in the module's order (named_modules): every module with
    parameters of its own is one layer (layers="module"), or every
    parameter is (layers="parameter"), or the caller's groups (a list of
    lists of parameters). Each registers its parameters' and gradients'
    memory; the gradient's memory is allocated at construction and becomes
    .grad at a step's start (zero_grad(set_to_none=True) is undone at the
    next forward, and a gradient that autograd put in a new tensor is
    copied back); a .grad that no worker's backward reached in a step
    goes back to what it was, None included, as under DDP.
  - Readiness: a hook on each parameter's gradient accumulator
    (register_post_accumulate_grad_hook where PyTorch has it, >= 2.1; the
    AccumulateGrad node's hook before); a layer is ready (dd_layer_ready)
    when all of its parameters' gradients are final.
  - The step: forward opens it (dd_step_begin) when gradients are enabled
    and no_sync() is not in force; the first gradient hook of the backward
    queues an autograd final callback, as DDP's reducer does, which closes
    it (dd_step_end): when loss.backward() returns, the step's averages
    have landed (a "+next" strategy leaves its syncs in flight).
  - Marks in a fixed order: with find_unused_parameters=True or inside
    join(), layers are marked in backward order (the reverse of the
    registration order) whatever the order their gradients came in, and
    the parameters a forward's outputs do not reach (a walk of the
    autograd graph, as DDP's) count as final at once; so every worker
    fuses the same layers into one message, whatever branch it took.
  - Buffers: under the model-averaging strategies (localsgd, plsgd,
    dreamddp) floating-point buffers are averaged with their module's
    layer; the others, and every buffer under ddp and adaptive, are
    broadcast from rank 0 at the start of a training forward that follows
    a synced one, as DDP's broadcast_buffers does; an evaluation forward
    (no_grad or eval()) broadcasts nothing, so that one rank may run it
    alone (sync_buffers() first gives every worker rank 0's buffers).
  - Delayed averaging (a "+next" strategy, "dreamddp:4+next"): a forward
    pre-hook on the module that owns each layer's parameters marks the
    layer (dd_layer_forward) before its forward reads them, in a training
    forward: the layer's average from the last step lands there. A forward
    that opens no step (no_grad, eval(), accumulation) marks nothing: the
    averages stay in flight, so that a rank may evaluate alone.
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
import logging
import os
import types

import torch
from torch.autograd import Variable

from . import _lib
from . import context as _context
from ._lib import DreamDDPError
from ._torch_coll import (
    BUFFER_DTYPES as _BUFFER_DTYPES,
    PARAM_DTYPES as _PARAM_DTYPES,
    all_gather,
    allreduce,
    broadcast,
    broadcast_flat as _broadcast_flat,
    broadcast_optimizer_state,
    broadcast_parameters,
    check_tensor as _check_tensor,
    dtype_code as _dtype_code,
    error as _error,
    placement as _placement,
)
from ._torch_join import JoinState as _JoinState
from . import _torch_ddp
from ._torch_ddp import num_workers, worker_rank
from . import _torch_elastic as elastic

__all__ = [
    "DreamDDP",
    "wrap_optimizer",
    "worker_rank",
    "num_workers",
    "allreduce",
    "broadcast",
    "all_gather",
    "broadcast_parameters",
    "broadcast_optimizer_state",
    "elastic",
]

_log = logging.getLogger("dreamddp")

# Strategies that sync gradients or read them (adaptive's signal): their
# layers hold no tensor without a gradient.
_GRAD_STRATEGIES = ("ddp", "adaptive")
_BUFFER_LAYER = "dreamddp.buffers"
_STATE_FORMAT = 1


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


def _output_tensors(out):
    """The tensors in a forward's output (nested tuples, lists, dicts and
    objects with tensor attributes, as DDP's _find_tensors)."""
    if torch.is_tensor(out):
        return [out]
    if isinstance(out, (list, tuple)):
        return [t for o in out for t in _output_tensors(o)]
    if isinstance(out, dict):
        return [t for o in out.values() for t in _output_tensors(o)]
    if hasattr(out, "__dict__") and not isinstance(out, type):
        return [t for o in vars(out).values() for t in _output_tensors(o)]
    return []


def _adopt_grad(p, g):
    """Makes g, the memory the library holds, p's .grad again: zeros where
    p.grad was None (zero_grad(set_to_none=True)), its values where
    autograd or the application put it in a new tensor."""
    if p.grad is not None and p.grad.data_ptr() == g.data_ptr():
        return
    with torch.no_grad():
        if p.grad is None:
            g.zero_()
        else:
            g.copy_(p.grad)
    p.grad = g


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
        self.on_device = False  # a CUDA layer: marked on a stream
        self.was_none = [False] * len(params)
        self.reset()

    def reset(self):
        self.seen = [False] * len(self.params)
        # Gradients still to come this step (the used ones, once the
        # graph was walked).
        self.pending = len(self.params)
        self.reached = [True] * len(self.params)
        self.marked = False
        self.streams = []  # this step's streams of its gradients


# The model this process wraps: the library syncs one.
_wrapped = None


class DreamDDP(torch.nn.Module):
    """Wraps module for data-parallel training through dreamddp, as
    torch.nn.parallel.DistributedDataParallel does.

    strategy: "ddp", "localsgd:H", "plsgd:H", "dreamddp:H" (the last three
        also with "+next"), "adaptive" or "adaptive:drift"; None (the
        default) takes DREAMDDP_STRATEGY, else the library's default, ddp.
    compression: the codec of the syncs ("fp16", "bf16", "topk:RATIO",
        "powersgd:RANK"); None takes DREAMDDP_COMPRESSION. Parameters go
        with their shape as a matrix (first dimension by the rest), which
        powersgd factors; layers under 4096 elements stay dense.
    layers: "module", "parameter", or a list of lists of parameters.
    find_unused_parameters: as DDP's: parameters that a step's forward did
        not reach, or that got no gradient, take part with the gradient
        they hold (zeros after zero_grad); one no worker used keeps the
        .grad it had (None after zero_grad(set_to_none=True)), as under
        DDP. Without it, such a step fails with a DreamDDPError naming the
        layer.
    broadcast_buffers: as DDP's: the buffers the strategy does not average
        come from rank 0 at the start of a training forward that follows a
        synced one; an evaluation forward (no_grad or eval()) broadcasts
        nothing (call sync_buffers() before an evaluation on every worker).
    deterministic: True makes the run reproducible (DREAMDDP_DETERMINISTIC):
        what syncs when follows from the model and the settings, never
        from a clock, so that two runs with the same seeds end with the
        same bits; None (the default) takes DREAMDDP_DETERMINISTIC.

    DistributedDataParallel's other arguments (device_ids, output_device,
    dim, process_group, bucket_cap_mb, gradient_as_bucket_view,
    static_graph, check_reduction, and the newer init_sync,
    mixed_precision, device_mesh, ...) are taken by keyword, so that a DDP
    script changes its DDP(...) line alone: device_ids=[local_rank] checks
    that the module is on that GPU and moves a forward's inputs there;
    bucket_cap_mb sets ddp's bucket size; the hints that change nothing here
    are accepted; the rest are refused naming what replaces them (see
    dreamddp._torch_ddp).

    As DDP's: require_backward_grad_sync = False makes a forward and its
    backward accumulate gradients locally, syncing nothing and counting no
    step of the strategy's window (no_sync() sets it and restores it); a
    forward that opens no training step (under torch.no_grad(), or in eval()
    mode) runs no collective of the strategy, so that one rank may evaluate
    alone. A "+next" strategy's pending averages stay in flight through such
    a forward (it reads the replica as it stands) and land at the next
    training forward; sync_all() lands them on every worker. An eval()-mode
    forward whose backward does reach the parameters (training with frozen
    batch norm) syncs as usual, its step opened by the first gradient.

    On an aggregator rank (DREAMDDP_NUM_AGGREGATORS) there is no replica:
    call dreamddp.serve_if_aggregator() at the top of the script; the
    constructor raises there.
    """

    def __init__(
        self,
        module,
        strategy=None,
        compression=None,
        layers="module",
        find_unused_parameters=False,
        broadcast_buffers=True,
        deterministic=None,
        *,
        device_ids=None,
        output_device=None,
        dim=0,
        process_group=None,
        bucket_cap_mb=None,
        gradient_as_bucket_view=False,
        static_graph=False,
        check_reduction=False,
        **newer_ddp_args,
    ):
        super().__init__()
        global _wrapped
        ctx = _context()
        self._refuse_aggregator(ctx)
        _torch_ddp.check_strategy_arg(strategy)
        _torch_ddp.check_hints(static_graph, gradient_as_bucket_view,
                               check_reduction, dim, newer_ddp_args)
        self.device = _torch_ddp.check_device(module, device_ids, output_device)
        self.device_ids = None if self.device is None else [self.device.index]
        self.output_device = self.device_ids[0] if self.device_ids else None
        self.dim = dim
        _torch_ddp.check_process_group(process_group, ctx)
        if _wrapped is not None or ctx.committed:
            raise _error(
                _lib.ERR_STATE,
                "a DreamDDP already wraps a model in this process (%s); "
                "dreamddp syncs one model per process: wrap one module "
                "that holds every trained part, once"
                % (_wrapped or "a committed layer table"),
                "DreamDDP",
            )
        self.module = module
        self.find_unused_parameters = find_unused_parameters
        self.broadcast_buffers = broadcast_buffers
        groups, frozen = self._groups(layers)
        buffers = list(self.module.named_buffers())
        for name, b in buffers:
            _check_tensor(b, "buffer '%s'" % name, _BUFFER_DTYPES)
        self._ctx = ctx
        source = self._set_strategy(ctx, strategy)
        if compression is not None:
            ctx.compression_set(compression)
        if deterministic is not None:
            ctx.deterministic_set(deterministic)
        _torch_ddp.set_bucket(ctx, bucket_cap_mb)
        self.strategy = ctx.strategy
        averaged = self._averaged_buffers(buffers)
        self._layers = self._make_layers(groups, averaged, layers == "module")
        self._averaged = averaged
        self._bcast = [
            b for _, b in buffers if not any(b is a for a in averaged.values())
        ]
        self._buffer_slots = self._find_buffer_slots()
        self._check_unique_names()
        _check_devices(self._layers)
        self._worker_ranks = ctx.worker_ranks
        self._worker_index = self._worker_ranks.index(ctx.rank)
        # Everything rank 0 has that the table does not carry; collectives
        # before the commit run directly.
        for t in frozen + self._bcast:
            broadcast(t)
        for layer in self._layers:
            layer.handle = ctx.layer_register(layer.name, self._tensors(layer))
        ctx.commit()
        _wrapped = "%s, strategy %s" % (type(module).__name__, self.strategy)
        if ctx.rank == 0:
            _log.info("dreamddp: strategy %s (%s), %d layers, %d workers",
                      self.strategy, source, len(self._layers),
                      ctx.num_workers)
        self._grad_accs = []
        self._hooks = []
        self._slot = {}
        for layer in self._layers:
            for i, p in enumerate(layer.params):
                self._hook(layer, i, p)
                self._slot[id(p)] = (layer, i)
        if self.strategy.endswith("+next"):
            self._hook_forwards()
        # Backward order: the order marks go in when they must be the same
        # on every worker.
        self._order = list(reversed(self._layers))
        self._signature = self._model_signature()
        self._step_open = False
        # DDP's flag: False makes forward and backward accumulate locally.
        self.require_backward_grad_sync = True
        self._lazy_step = False  # an eval()-mode forward with gradients
        self._accumulating = False
        self._callback_queued = False
        self._next = 0
        self._buffers_due = True  # DDP's require_forward_param_sync
        self._join = None
        self._kept = {}
        self._steps = 0
        self.last_stats = None

    # ---- construction ----------------------------------------------------

    @staticmethod
    def _refuse_aggregator(ctx):
        if ctx.is_aggregator:
            raise _error(
                _lib.ERR_STATE,
                "rank %d is an aggregator (DREAMDDP_NUM_AGGREGATORS): it "
                "holds no replica; call dreamddp.serve_if_aggregator() at "
                "the top of the script, before the model is built"
                % ctx.rank,
                "DreamDDP",
            )

    @staticmethod
    def _set_strategy(ctx, strategy):
        """Sets the strategy; returns where the one in force came from."""
        if strategy is not None:
            ctx.strategy_set(strategy)
            return "the strategy argument"
        if os.environ.get("DREAMDDP_STRATEGY"):
            return "DREAMDDP_STRATEGY"
        return "the default"

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
                # A .grad that is None stays None until a gradient reaches
                # it (the step adopts g then), as under DDP: zero_grad()
                # with set_to_none=False, PyTorch 1.13's default, leaves it
                # None, and an optimizer skips the parameter.
                if p.grad is not None:
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
        if not self._step_open:
            # A forward that opened no step (no_grad, eval(), accumulation):
            # its mark would land and launch on this rank alone; the average
            # stays in flight for the next training forward.
            return
        if layer.on_device:
            # The average lands as a device sum on the stream the forward's
            # kernels are about to be queued on.
            self._ctx.layer_forward_stream(
                layer.handle, _ready_stream((layer.params + layer.buffers)[0]))
        else:
            self._ctx.layer_forward(layer.handle)

    # ---- the model as registered -------------------------------------------

    def _model_signature(self):
        """What a forward compares the module against: every parameter, its
        shape, dtype and requires_grad, by name."""
        return [
            (n, p, tuple(p.shape), p.dtype, p.requires_grad)
            for n, p in self.module.named_parameters()
        ]

    def _check_model(self):
        """A change to the parameters since the wrap (one added, removed,
        replaced, resized, or with requires_grad flipped) fails the forward
        naming it: the library would not sync it, or sync stale memory."""
        now = self._model_signature()
        if len(now) == len(self._signature) and all(
            a[0] == b[0] and a[1] is b[1] and a[2:] == b[2:]
            for a, b in zip(now, self._signature)
        ):
            return
        before = {s[0]: s for s in self._signature}
        after = {s[0]: s for s in now}
        what = None
        for name, s in after.items():
            old = before.get(name)
            if old is None:
                what = "parameter '%s' was added" % name
            elif old[1] is not s[1]:
                what = "parameter '%s' was replaced by another tensor" % name
            elif old[2] != s[2] or old[3] != s[3]:
                what = "parameter '%s' changed from %s %s to %s %s" % (
                    name, list(old[2]), old[3], list(s[2]), s[3])
            elif old[4] != s[4]:
                what = "parameter '%s' has requires_grad=%s, %s at the wrap" % (
                    name, s[4], old[4])
            if what:
                break
        if what is None:
            gone = [n for n in before if n not in after]
            what = ("parameter '%s' was removed" % gone[0] if gone else
                    "the parameters are in another order")
        raise _error(
            _lib.ERR_STATE,
            "the model changed after DreamDDP wrapped it: %s; dreamddp "
            "registered its parameters once, at the wrap: make such changes "
            "before wrapping" % what,
            "forward",
        )

    def _check_memory(self):
        """At a step's start: the registered memory is still the
        parameters', and every .grad is the registered gradient (undoing
        zero_grad(set_to_none=True), which was_none remembers)."""
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
            for i, (p, g) in enumerate(zip(layer.params, layer.grads)):
                layer.was_none[i] = p.grad is None
                _adopt_grad(p, g)

    def _check_buffers(self):
        """Before a broadcast or an average of buffers: the module's buffers
        as they are now, as DDP re-reads them before every broadcast. A
        buffer reassigned since the last look (what swa_utils.update_bn
        does to batch norm's running statistics) is otherwise never synced
        again. The look compares each owner's buffer entries with the
        tensors seen last, a tenth of a named_buffers walk (120 us against
        2 ms for 100 batch norms); the rest runs only on a change."""
        sizes, slots = self._buffer_slots
        if all(d.get(k) is b for d, k, b in slots) and all(
            len(d) == n for d, n in sizes
        ):
            return
        now = list(self.module.named_buffers())
        names = {n for n, _ in now}
        for name, b in now:
            if name in self._averaged:
                self._adopt_buffer(name, b)
            else:
                _check_tensor(b, "buffer '%s'" % name, _BUFFER_DTYPES)
        gone = [n for n in self._averaged if n not in names]
        if gone:
            raise _error(
                _lib.ERR_STATE,
                "buffer '%s' was removed after DreamDDP wrapped the model: "
                "%s averages it with the parameters; give the module a "
                "buffer of the same shape and dtype instead" % (gone[0], self.strategy),
                "forward",
            )
        self._bcast = [
            b for n, b in self.module.named_buffers() if n not in self._averaged
        ]
        self._buffer_slots = self._find_buffer_slots()

    def _find_buffer_slots(self):
        """Each module's buffer table with its size, and each entry (table,
        key, tensor): what _check_buffers compares. A module added after
        the wrap is not in it; one with parameters fails _check_model."""
        tables = [mod._buffers for mod in self.module.modules()]
        return ([(d, len(d)) for d in tables],
                [(d, k, b) for d in tables for k, b in d.items()])

    def _adopt_buffer(self, name, b):
        """Makes the registered tensor of an averaged buffer the module's
        again, with the values of b, the tensor that replaced it: the
        library averages the memory registered at the wrap, as it keeps a
        parameter's .grad (_adopt_grad)."""
        kept = self._averaged[name]
        if b is kept:
            return
        if b.shape != kept.shape or b.dtype != kept.dtype or b.device != kept.device:
            raise _error(
                _lib.ERR_STATE,
                "buffer '%s' was replaced by a %s %s tensor on %s; %s "
                "averages the %s %s one on %s registered at the wrap: give "
                "it a tensor of that shape, dtype and device"
                % (name, list(b.shape), b.dtype, b.device, self.strategy,
                   list(kept.shape), kept.dtype, kept.device),
                "forward",
            )
        with torch.no_grad():
            kept.copy_(b)
        owner, _, leaf = name.rpartition(".")
        setattr(self.module.get_submodule(owner), leaf, kept)

    # ---- the step -----------------------------------------------------------

    def _root(self):
        """The rank buffers come from: rank 0, or inside join() the highest
        worker still training (DDP's authoritative rank)."""
        w = self._join.authoritative if self._join is not None else 0
        return self._worker_ranks[w]

    def forward(self, *args, **kwargs):
        self._check_model()
        self._check_buffers()
        grad = torch.is_grad_enabled()
        sync = grad and self.require_backward_grad_sync
        # A forward that may train: gradients on, in train() mode (inside
        # join() in either mode, as the joined workers shadow it). Any other
        # (evaluation under no_grad or in eval(), which one rank may run
        # alone) runs no collective: no buffer broadcast, no step, no mark.
        trains = grad and (
            (self.training and self.module.training) or self._join is not None)
        if self._join is not None and trains:
            self._join.notify(sync)
        if trains and self._buffers_due and self.broadcast_buffers and self._bcast:
            _broadcast_flat(self._bcast, self._root())
        if self.device is not None:
            args = _torch_ddp.to_device(args, self.device)
            kwargs = _torch_ddp.to_device(kwargs, self.device)
        # In eval() mode with gradients the step opens at the first
        # gradient, if a backward follows (training with frozen batch norm).
        self._lazy_step = sync and not trains and not self._step_open
        if sync and trains:
            self._open_step()
        elif grad and not sync:
            self._accumulating = True  # require_backward_grad_sync False
        out = self.module(*args, **kwargs)
        if trains:
            # DDP's require_forward_param_sync: buffers come from rank 0 at
            # the first training forward after a synced one.
            self._buffers_due = sync
        if sync and trains and self.find_unused_parameters:
            self._walk(out)
        return out

    def sync_buffers(self):
        """Gives every worker rank 0's buffers that the strategy does not
        average (all of them under ddp), now: before an evaluation that
        every worker runs, where DDP's forward would broadcast them. A
        forward that opens no step (no_grad, eval()) broadcasts nothing, so
        that one rank may evaluate alone; the next training forward does.
        Outside a step; every worker calls it."""
        self._check_buffers()
        if self.broadcast_buffers and self._bcast:
            _broadcast_flat(self._bcast, self._root())

    def _in_order(self):
        return self.find_unused_parameters or self._join is not None

    def _open_step(self):
        """Opens a step (dd_step_begin). A second forward before the
        step's backward stays in the same step."""
        if self._step_open:
            if any(layer.marked or any(layer.seen) for layer in self._layers):
                raise _error(
                    _lib.ERR_STATE,
                    "the previous step did not close: its backward failed "
                    "(see the error it raised) or did not reach the "
                    "parameters; the replicas may differ",
                    "forward",
                )
            return
        self._check_memory()
        for layer in self._layers:
            layer.reset()
            if self.find_unused_parameters:
                layer.reached = [False] * len(layer.params)
                layer.pending = 0
        self._ctx.step_begin()
        self._step_open = True
        self._accumulating = False
        self._callback_queued = False
        self._next = 0

    def _walk(self, out):
        """The parameters this forward's outputs reach through the autograd
        graph (DDP's search for unused parameters): those it does not reach
        get no gradient, so they count as final at once."""
        seen, todo = set(), [t.grad_fn for t in _output_tensors(out)
                             if t.grad_fn is not None]
        while todo:
            fn = todo.pop()
            if fn is None or fn in seen:
                continue
            seen.add(fn)
            var = getattr(fn, "variable", None)
            if var is not None:
                slot = self._slot.get(id(var))
                if slot is not None and not slot[0].reached[slot[1]]:
                    slot[0].reached[slot[1]] = True
                    slot[0].pending += 1
            todo.extend(f for f, _ in fn.next_functions if f is not None)

    def _on_grad(self, layer, i):
        p, g = layer.params[i], layer.grads[i]
        _adopt_grad(p, g)
        if not self._step_open and self._lazy_step:
            # The backward of an eval()-mode forward: the step opens now.
            self._lazy_step = False
            self._buffers_due = True
            self._open_step()
        if not self._step_open:
            if self._accumulating:
                return  # no_sync: the next step syncs what accumulates
            raise _error(
                _lib.ERR_STATE,
                "parameter '%s' got a gradient outside a step: the forward "
                "that made it did not go through DreamDDP (model.module(x) "
                "instead of model(x)?), or a second backward ran over a graph "
                "whose step had closed; call model(x), and accumulate under "
                "model.no_sync()" % layer.param_names[i],
                "backward",
            )
        if not self._callback_queued:
            self._callback_queued = True
            Variable._execution_engine.queue_callback(self._backward_done)
        if layer.seen[i]:
            raise _error(
                _lib.ERR_STATE,
                "parameter '%s' got a second gradient in one step: run the "
                "other backward passes of the step under no_sync()"
                % layer.param_names[i],
                "backward",
            )
        layer.seen[i] = True
        if layer.on_device:
            layer.streams.append(_ready_stream(p))
        if not layer.reached[i]:
            if layer.marked:
                raise _error(
                    _lib.ERR_STATE,
                    "parameter '%s' got a gradient after its layer was "
                    "synced as unused: the walk of the forward's autograd "
                    "graph did not reach it (torch.utils.checkpoint with "
                    "use_reentrant=True hides the parameters inside)"
                    % layer.param_names[i],
                    "backward",
                )
            return  # its layer waits for an earlier one: still in time
        layer.pending -= 1
        if self._in_order():
            self._release()
        elif layer.pending == 0:
            self._mark(layer)

    def _release(self):
        """Marks the layers whose gradients are final, in backward order,
        up to the first that still waits."""
        while self._next < len(self._order):
            layer = self._order[self._next]
            if layer.params and layer.pending > 0:
                return
            self._next += 1
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

    def _backward_done(self):
        """Autograd's final callback of a backward that reached the
        parameters: closes the step, so that backward() returns with its
        averages landed."""
        self._finish()

    def _finish(self):
        """Marks what is left and closes the step (dd_step_end): layers of
        buffers alone, and with find_unused_parameters the parameters that
        got no gradient, which take part with the .grad they hold."""
        if not self.find_unused_parameters:
            unused = [
                "layer '%s' (%s)" % (layer.name, ", ".join(
                    n for n, s in zip(layer.param_names, layer.seen) if not s))
                for layer in self._order
                if not layer.marked and not all(layer.seen)
            ]
            if unused:
                # Raised before dd_step_end: a worker whose peers did use
                # the layer would wait there for syncs that never match.
                # The step stays open; the job cannot go on.
                raise _error(
                    _lib.ERR_STATE,
                    "no gradient reached %s in this step; pass "
                    "find_unused_parameters=True if parameters may go unused"
                    % "; ".join(unused),
                    "backward",
                )
        for layer in self._order:
            if not layer.marked:
                self._keep_unused(layer)
                layer.pending = 0
                if not self._in_order():
                    self._mark(layer)
        if self._in_order():
            self._release()
        self._close_step()

    def _keep_unused(self, layer):
        """Remembers the .grad of the parameters that got no gradient, to
        give it back where no worker used them (DDP leaves such a .grad
        alone)."""
        for i, (p, g) in enumerate(zip(layer.params, layer.grads)):
            if not layer.seen[i] and not layer.was_none[i]:
                self._kept[id(p)] = g.clone()

    def _close_step(self):
        self._step_open = False
        self._steps += 1
        self.last_stats = self._ctx.step_end()
        if self.find_unused_parameters or self._join is not None:
            self._restore_unused()
        if self._join is not None and self.strategy == "ddp":
            k = self._join.scale()
            if k != 1.0:
                with torch.no_grad():
                    for layer in self._layers:
                        for g in layer.grads:
                            g.mul_(k)
        return self.last_stats

    def _restore_unused(self):
        """Under ddp, the workers agree which parameters none of them used
        (an allreduce of each one's use, as DDP's); elsewhere a worker's
        own say is enough. Those keep the .grad they had."""
        layers = [layer for layer in self._layers if layer.params]
        used = torch.tensor(
            [int(s) for layer in layers for s in layer.seen], dtype=torch.int32)
        if self.strategy == "ddp" and self.find_unused_parameters:
            allreduce(used, "sum")
        k = 0
        with torch.no_grad():
            for layer in layers:
                for i, (p, g) in enumerate(zip(layer.params, layer.grads)):
                    if used[k] == 0:
                        if layer.was_none[i]:
                            p.grad = None
                        elif id(p) in self._kept:
                            g.copy_(self._kept[id(p)])
                    k += 1
        self._kept = {}

    def finish_step(self):
        """Closes a step that backward did not close (one whose backward
        reached no parameter); a no-op otherwise. Backward closes the step
        by itself, so a loop need not call it. Returns the statistics of
        the last step closed (a dict), or None before the first."""
        if self._step_open:
            self._finish()
        return self.last_stats

    @contextlib.contextmanager
    def no_sync(self):
        """Forward and backward inside accumulate gradients locally, as
        DDP's no_sync(): it sets require_backward_grad_sync to False and
        restores it; the step's last backward runs outside."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old

    def sync_all(self):
        """Averages every layer's parameters now (dd_sync_all), whatever the
        strategy, and gives every worker rank 0's buffers that the strategy
        does not average: every replica is then the same, parameters and
        buffers. Before a checkpoint or an evaluation; outside a step."""
        if self._step_open:
            raise _error(
                _lib.ERR_STATE,
                "sync_all: a step is open: a forward with gradients enabled "
                "opened it and no backward closed it; run evaluation under "
                "torch.no_grad(), or finish_step() first",
                "sync_all",
            )
        self._check_buffers()
        self._ctx.sync_all()
        if self._bcast:
            _broadcast_flat(self._bcast, self._root())

    # ---- uneven inputs --------------------------------------------------------

    @contextlib.contextmanager
    def join(self, divide_by_initial_world_size=True, enable=True,
             throw_on_early_termination=False):
        """Training with uneven inputs, as DDP's join(): a worker that ran
        out of batches leaves the with block and takes part in the others'
        syncs with zero gradients (ddp; the average is divided by every
        worker, or with divide_by_initial_world_size=False by those still
        training) or with its replica as it stands, no update of its own
        (the averaging strategies), until every worker has left it. Then
        the replicas are made equal: the last worker to leave gives its
        model to the others (ddp, as DDP), or every replica takes the
        average (the averaging strategies). With
        throw_on_early_termination=True, every worker raises once one runs
        out instead."""
        if not enable:
            yield
            return
        if self._join is not None:
            raise _error(_lib.ERR_STATE, "join() inside join()", "join")
        if not divide_by_initial_world_size and self.strategy != "ddp":
            raise _error(
                _lib.ERR_INVALID_PARAM,
                "join(divide_by_initial_world_size=False) divides averaged "
                "gradients, under ddp; under %s a worker that joined stays "
                "in the average with its replica, no update of its own"
                % self.strategy,
                "join",
            )
        self._join = _JoinState(self, divide_by_initial_world_size,
                                throw_on_early_termination)
        try:
            yield
            self._join.shadow()
        finally:
            self._join = None

    def _join_shadow(self, sync, root):
        """One round of the others' training on a worker that joined."""
        self._check_buffers()
        if self._buffers_due and self.broadcast_buffers and self._bcast:
            _broadcast_flat(self._bcast, self._worker_ranks[root])
        self._buffers_due = sync
        if not sync:
            return
        self._open_step()
        if self.strategy.endswith("+next"):
            for layer in self._layers:
                if layer.params:
                    self._on_forward(layer, None, None)
        with torch.no_grad():
            for layer in self._layers:
                layer.pending = 0
                if self.strategy == "ddp":
                    for g in layer.grads:
                        g.zero_()
        self._release()
        self._close_step()

    def _join_final(self, root):
        if self.strategy == "ddp":
            states = [p for p in self.module.parameters()] + list(self.module.buffers())
            _broadcast_flat(states, self._worker_ranks[root])
        else:
            self._check_buffers()
            self._ctx.sync_all()
            if self._bcast:
                _broadcast_flat(self._bcast, self._worker_ranks[root])

    # ---- checkpoints ---------------------------------------------------------

    def dreamddp_state_dict(self):
        """What a resumed run needs of dreamddp, beside the model's and the
        optimizer's state: the steps run (the window position). The plan
        and the codecs' residuals are rebuilt: a resumed dreamddp:H profiles
        again, and compression starts with empty residuals."""
        return {
            "format": _STATE_FORMAT,
            "strategy": self.strategy,
            "workers": self.num_workers,
            "steps": self._steps,
        }

    def load_dreamddp_state_dict(self, state, root=0):
        """Takes up where the checkpoint's run stopped: the next step is
        its window position (dd_step_set). Call it on every worker before
        the first step; root's state counts (the others may pass None, as
        when only root read the checkpoint). The strategy must be the
        checkpoint's; the world size may differ."""
        if self._steps or self._step_open:
            raise _error(_lib.ERR_STATE,
                         "load_dreamddp_state_dict: call it before the first step",
                         "load_dreamddp_state_dict")
        steps = torch.zeros(1, dtype=torch.int64)
        if self.rank == root:
            self._check_state(state)
            steps[0] = int(state["steps"])
        broadcast(steps, root)
        self._ctx.step_set(int(steps[0]))
        self._steps = int(steps[0])

    def _check_state(self, state):
        if not isinstance(state, dict) or state.get("format") != _STATE_FORMAT:
            raise _error(_lib.ERR_INVALID_PARAM,
                         "not a dreamddp state (dreamddp_state_dict())",
                         "load_dreamddp_state_dict")
        if state["strategy"] != self.strategy:
            raise _error(
                _lib.ERR_INVALID_PARAM,
                "the checkpoint's strategy is %s, this run's %s"
                % (state["strategy"], self.strategy),
                "load_dreamddp_state_dict",
            )

    # ---- statistics -----------------------------------------------------------

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
    """Kept for loops written before backward closed the step: makes
    optimizer.step() call model.finish_step() first, a no-op once backward
    closed it. Returns the optimizer. The step stays a method of the
    optimizer, so that learning-rate schedulers built after it count its
    calls; one built before keeps counting them: the wrapper calls the
    scheduler's counting wrapper and carries its marks (_with_counter,
    _wrapped_by_lr_sched), so that PyTorch does not warn that
    optimizer.step() was overridden after the scheduler's initialization."""
    if getattr(optimizer.step, "_dreamddp_wrapped", False):
        return optimizer
    step = optimizer.step

    def wrapped(self, *args, **kwargs):
        model.finish_step()
        return step(*args, **kwargs)

    # The marks a scheduler put on the step it wrapped, whatever PyTorch
    # names them.
    for key, value in getattr(getattr(step, "__func__", step), "__dict__", {}).items():
        setattr(wrapped, key, value)
    wrapped._dreamddp_wrapped = True
    optimizer.step = types.MethodType(wrapped, optimizer)
    return optimizer
