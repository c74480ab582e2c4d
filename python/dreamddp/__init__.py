"""dreamddp: keeps the replicas of a data-parallel training job in sync.

The PyTorch front end is dreamddp.torch (DreamDDP). This module holds what
does not need torch: the process's context (one per process, started on
first use and finalized at exit), the job's geometry, serve_if_aggregator
for the aggregator ranks, and DreamDDPError, which every failed library
call raises with the library's message. Importing it changes no state of
the interpreter's; it registers an exit handler that leaves the job.
"""

import atexit
import ctypes
import os
import sys

from . import _lib
from ._lib import DreamDDPError, STATUS, STATUS_NAMES

__all__ = [
    "DreamDDPError",
    "STATUS",
    "STATUS_NAMES",
    "Context",
    "context",
    "finalize",
    "serve_if_aggregator",
    "version",
]


def version():
    """The library's version string ("0.1.0")."""
    return _lib.lib().dd_version_string().decode()


class Context:
    """A dreamddp context: dd_init's handle and the calls made on it."""

    def __init__(self):
        lib = _lib.lib()
        handle = ctypes.c_void_p()
        # DREAMDDP_LIBRARY is this package's, not the library's: hidden
        # from dd_init, which warns about DREAMDDP_* names it does not know.
        hidden = os.environ.pop(_lib.LIBRARY_VARIABLE, None)
        try:
            status = lib.dd_init(None, ctypes.byref(handle))
        finally:
            if hidden is not None:
                os.environ[_lib.LIBRARY_VARIABLE] = hidden
        _lib.check(status, "dd_init")
        self._lib = lib
        self.handle = handle
        self.committed = False

    def _call(self, name, *args):
        _lib.check(getattr(self._lib, name)(self.handle, *args), name)

    @property
    def rank(self):
        return self._lib.dd_rank(self.handle)

    @property
    def world_size(self):
        return self._lib.dd_world_size(self.handle)

    @property
    def local_rank(self):
        return self._lib.dd_local_rank(self.handle)

    @property
    def num_workers(self):
        return self._lib.dd_num_workers(self.handle)

    @property
    def worker_ranks(self):
        """The job ranks of the workers, in order (a worker's index in
        the collectives is its place here)."""
        return [
            r
            for r in range(self.world_size)
            if self._lib.dd_rank_role(self.handle, r) == _lib.ROLE_WORKER
        ]

    @property
    def is_aggregator(self):
        return self._lib.dd_role(self.handle) == _lib.ROLE_AGGREGATOR

    def barrier(self):
        self._call("dd_barrier")

    def serve(self):
        """On an aggregator rank: sums for the workers until they finish."""
        self._call("dd_aggregator_serve")

    def strategy_set(self, strategy):
        self._call("dd_strategy_set", strategy.encode())

    def compression_set(self, spec):
        """The codec of the syncs ("none", "fp16", "bf16", "topk:RATIO",
        "powersgd:RANK")."""
        self._call("dd_compression_set", spec.encode())

    def deterministic_set(self, on=True):
        """Reproducible runs (DREAMDDP_DETERMINISTIC): plans from the
        layers' sizes, never from a clock."""
        self._call("dd_deterministic_set", 1 if on else 0)

    def bucket_bytes_set(self, nbytes):
        """ddp's gradient bucket size in bytes, before the commit
        (dd_bucket_bytes_set, over DREAMDDP_BUCKET_BYTES)."""
        if not _lib.has("dd_bucket_bytes_set"):
            raise DreamDDPError(
                "this libdreamddp cannot set the bucket size from the "
                "program (no dd_bucket_bytes_set); set DREAMDDP_BUCKET_BYTES "
                "or install a newer one",
                _lib.ERR_UNSUPPORTED,
                "dd_bucket_bytes_set",
            )
        self._call("dd_bucket_bytes_set", nbytes)

    def layer_set_compression(self, layer, spec):
        self._call("dd_layer_set_compression", layer, spec.encode())

    @property
    def strategy(self):
        return self._lib.dd_strategy_name(self.handle).decode()

    def layer_register(self, name, tensors):
        """tensors: (param_ptr, grad_ptr or None, count, dtype, mem_type,
        device, rows, cols), as dd_tensor_t's fields; those left out are 0
        (device 0; 0 x 0: a vector, which powersgd does not factor)."""
        fields = _lib.TENSOR_FIELD_DEVICE | _lib.TENSOR_FIELD_SHAPE
        arr = (_lib.dd_tensor_t * len(tensors))(
            *[_lib.dd_tensor_t(*(tuple(t) + (0,) * (8 - len(t)) + (fields,)))
              for t in tensors]
        )
        layer = ctypes.c_void_p()
        self._call(
            "dd_layer_register_sized",
            name.encode(),
            arr,
            len(tensors),
            ctypes.sizeof(_lib.dd_tensor_t),
            ctypes.byref(layer),
        )
        return layer

    def commit(self):
        self._call("dd_model_commit")
        self.committed = True

    def step_begin(self):
        self._call("dd_step_begin")

    def _mark(self, layer, what, old, with_stream=False, stream=None):
        """dd_layer_mark, or the call old of a library that predates it."""
        if not _lib.has("dd_layer_mark"):
            args = (stream or None,) if with_stream else ()
            self._call(old, layer, *args)
            return
        p = _lib.dd_mark_params_t(
            field_mask=_lib.MARK_FIELD_STREAM if with_stream else 0,
            what=what, stream=stream or None)
        self._call("dd_layer_mark", layer, ctypes.byref(p))

    def layer_ready(self, layer):
        self._mark(layer, _lib.MARK_READY, "dd_layer_ready")

    def layer_ready_stream(self, layer, stream):
        """stream: the device stream (a cudaStream_t as an integer; 0 or
        None is the default stream) on which the layer becomes final."""
        self._mark(layer, _lib.MARK_READY, "dd_layer_ready_stream", True, stream)

    def layer_unused(self, layer):
        self._mark(layer, _lib.MARK_UNUSED, "dd_layer_unused")

    def layer_forward(self, layer):
        """The layer's forward is about to read its parameters: under a
        +next strategy, its delayed average lands here (dd_layer_forward)."""
        self._mark(layer, _lib.MARK_FORWARD, "dd_layer_forward")

    def layer_forward_stream(self, layer, stream):
        """layer_forward for a device layer whose forward runs on stream (a
        cudaStream_t as an integer; 0 or None is the default stream): its
        delayed average lands there, as a device sum queued on the stream
        (dd_layer_forward_stream). A library without it, which refuses
        device layers under +next, gets dd_layer_forward."""
        if _lib.has("dd_layer_forward_stream"):
            self._mark(layer, _lib.MARK_FORWARD, "dd_layer_forward_stream",
                       True, stream)
        else:
            self._call("dd_layer_forward", layer)

    def step_end(self):
        """Ends the step; returns its statistics as a dict."""
        st = _lib.dd_step_stats_t(field_mask=_lib.STEP_STATS_ALL)
        self._call("dd_step_end", ctypes.byref(st))
        return {f: getattr(st, f) for f, _ in st._fields_[1:]}

    def sync_all(self):
        self._call("dd_sync_all")

    def step_set(self, step):
        """The number of the next step (dd_step_set): a resumed run's
        window position."""
        if not _lib.has("dd_step_set"):
            raise DreamDDPError(
                "this libdreamddp cannot resume a window position "
                "(no dd_step_set); install a newer one",
                _lib.ERR_UNSUPPORTED,
                "dd_step_set",
            )
        self._call("dd_step_set", step)

    def layer_stats(self, layer):
        st = _lib.dd_layer_stats_t(field_mask=_lib.LAYER_STATS_ALL)
        self._call("dd_layer_stats", layer, ctypes.byref(st))
        return {f: getattr(st, f) for f, _ in st._fields_[1:]}

    def layer_parts(self, layer):
        """[(handle, name, first element, elements)] of each part of a
        layer (dd_layer_part), in forward order: dd_model_commit cuts a
        layer larger than DREAMDDP_LAYER_SPLIT. A layer that was not cut,
        or a library that predates parts, gives one part, the layer itself,
        whose elements are then None where the library cannot say."""
        if not _lib.has("dd_layer_part"):
            return [(layer, self._name(layer), 0, None)]
        out = []
        n = self._lib.dd_layer_num_parts(self.handle, layer)
        for i in range(n):
            part = ctypes.c_void_p()
            offset, count = ctypes.c_size_t(), ctypes.c_size_t()
            self._call(
                "dd_layer_part",
                layer,
                i,
                ctypes.byref(part),
                ctypes.byref(offset),
                ctypes.byref(count),
            )
            out.append((part, self._name(part), offset.value, count.value))
        return out

    @staticmethod
    def _name(layer):
        name = _lib.lib().dd_layer_name(layer)
        return name.decode() if name is not None else None

    def allreduce(self, ptr, count, dtype, op="sum"):
        if op not in _lib.REDUCE_OPS:
            raise DreamDDPError(
                "unknown reduction '%s': expected one of %s"
                % (op, ", ".join(_lib.REDUCE_OPS)),
                _lib.ERR_INVALID_PARAM,
                "dd_allreduce",
            )
        self._call(
            "dd_allreduce",
            ptr,
            ptr,
            count,
            dtype,
            _lib.REDUCE_OPS[op],
            _lib.MEM_HOST,
        )

    def broadcast(self, ptr, count, dtype, root=0):
        self._call("dd_broadcast", ptr, count, dtype, root, _lib.MEM_HOST)

    def allgather(self, send_ptr, recv_ptr, count, dtype):
        self._call(
            "dd_allgather", send_ptr, recv_ptr, count, dtype, _lib.MEM_HOST
        )

    def finalize(self):
        if self.handle is not None:
            handle, self.handle = self.handle, None
            _lib.check(self._lib.dd_finalize(handle), "dd_finalize")


_context = None


def context():
    """This process's context, started (dd_init) on first use."""
    global _context
    if _context is None:
        _context = Context()
    return _context


def finalize():
    """Leaves the job (dd_finalize). Runs at exit by itself; call it to
    leave earlier. A no-op without a context."""
    global _context
    ctx, _context = _context, None
    if ctx is not None:
        ctx.finalize()


def _died():
    """Whether the interpreter is exiting on an uncaught exception: it set
    sys.last_value (sys.last_exc from 3.12) when it printed it, before the
    exit handlers run. No hook of the interpreter's is replaced."""
    return getattr(sys, "last_exc", None) is not None or \
        getattr(sys, "last_value", None) is not None


def _at_exit():
    # After an uncaught exception the other ranks would wait for this one
    # in dd_finalize until DREAMDDP_TIMEOUT_S: leave without it, they see
    # the peer lost.
    if _died():
        return
    try:
        finalize()
    except DreamDDPError as e:
        print("dreamddp: %s" % e, file=sys.stderr)


atexit.register(_at_exit)


def serve_if_aggregator():
    """On an aggregator rank (DREAMDDP_NUM_AGGREGATORS, DREAMDDP_ROLE):
    serves the workers until they finish, leaves the job and exits the
    process with status 0. On a worker: returns at once."""
    ctx = context()
    if not ctx.is_aggregator:
        return
    ctx.serve()
    finalize()
    sys.exit(0)
