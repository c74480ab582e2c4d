"""The ctypes binding of libdreamddp: finds the library, declares the calls
of <dreamddp.h> that the package uses, and turns a failed status into a
DreamDDPError carrying dd_last_error()'s message.

ctypes, not a C extension: the binding is pure Python, so it never needs to
be rebuilt for another PyTorch or Python version. Nothing here imports torch.

Where the library is looked for, first found wins:
  1. DREAMDDP_LIBRARY: the path of libdreamddp.so (or of the directory that
     holds it). Read by this package only, never by the C library.
  2. The libdir that `make install` wrote into _config.py.
  3. The build tree's .libs, when the package is used from a source tree
     that was built in place (PYTHONPATH=$srcdir/python).
  4. The system's search (ctypes.util.find_library, LD_LIBRARY_PATH).
"""

import ctypes
import ctypes.util
import os

# The statuses this package raises before it can ask the library for
# names (dd_status_t values, as in dreamddp.h).
ERR_INVALID_PARAM = -2
ERR_INVALID_CONFIG = -3
ERR_NOT_FOUND = -8
ERR_MISMATCH = -9
ERR_UNSUPPORTED = -11
ERR_STATE = -13
ERR_CANCELED = -16
ERR_INTERNAL = -17

# value -> name, read from the loaded library (dd_status_name) by lib().
STATUS_NAMES = {}
STATUS = {}

# dd_dtype_t, dd_reduce_op_t, dd_mem_type_t, dd_role_t.
DTYPE_F32, DTYPE_F64, DTYPE_F16, DTYPE_BF16 = 0, 1, 2, 3
DTYPE_I32, DTYPE_I64, DTYPE_U8 = 4, 5, 6
REDUCE_OPS = {"sum": 0, "avg": 1, "max": 2, "min": 3}
MEM_HOST, MEM_CUDA = 0, 1
ROLE_WORKER, ROLE_AGGREGATOR = 0, 1

# dd_step_stats_t and dd_layer_stats_t field bits.
STEP_STATS_ALL = 0x1FF
LAYER_STATS_ALL = 0x3FF

LIBRARY_VARIABLE = "DREAMDDP_LIBRARY"
SONAME = "libdreamddp.so.1"


class DreamDDPError(RuntimeError):
    """An error of the dreamddp library (or of this package's use of it).

    status is the dd_status_t value, status_name its name
    (as dreamddp.h spells it), message the library's dd_last_error() text,
    naming the rank, layer, variable or value at fault.
    """

    def __init__(self, message, status=ERR_INTERNAL, call=None):
        self.status = status
        self.status_name = STATUS_NAMES.get(status, "status %d" % status)
        self.message = message
        self.call = call
        where = "%s: " % call if call and not message.startswith(call) else ""
        super().__init__("%s%s (%s)" % (where, message, self.status_name))


DreamDDPError.__module__ = "dreamddp"  # where users import it from


class dd_tensor_t(ctypes.Structure):
    _fields_ = [
        ("param", ctypes.c_void_p),
        ("grad", ctypes.c_void_p),
        ("count", ctypes.c_size_t),
        ("dtype", ctypes.c_int),
        ("mem_type", ctypes.c_int),
        ("device", ctypes.c_int),
        # The shape as a matrix for powersgd; 0 x 0: a vector.
        ("rows", ctypes.c_size_t),
        ("cols", ctypes.c_size_t),
        # Which optional fields are set (TENSOR_FIELD_*); a library older
        # than the mask reads the layout up to cols.
        ("field_mask", ctypes.c_uint64),
    ]


TENSOR_FIELD_DEVICE, TENSOR_FIELD_SHAPE = 1 << 0, 1 << 1

# dd_mark_t, and dd_mark_params_t's field bits.
MARK_READY, MARK_FORWARD, MARK_UNUSED = 0, 1, 2
MARK_FIELD_STREAM = 1 << 0


class dd_mark_params_t(ctypes.Structure):
    _fields_ = [
        ("field_mask", ctypes.c_uint64),
        ("what", ctypes.c_int),
        ("stream", ctypes.c_void_p),
    ]


class dd_step_stats_t(ctypes.Structure):
    _fields_ = [
        ("field_mask", ctypes.c_uint64),
        ("step", ctypes.c_uint64),
        ("layers_synced", ctypes.c_int),
        ("bytes_synced", ctypes.c_size_t),
        ("wire_s", ctypes.c_double),
        ("wait_s", ctypes.c_double),
        ("replanned", ctypes.c_int),
        ("extra_bytes", ctypes.c_size_t),
        ("staging_s", ctypes.c_double),
        ("wire_bytes", ctypes.c_size_t),
    ]


class dd_layer_stats_t(ctypes.Structure):
    _fields_ = [
        ("field_mask", ctypes.c_uint64),
        ("syncs", ctypes.c_uint64),
        ("bytes", ctypes.c_uint64),
        ("wire_s", ctypes.c_double),
        ("bp_s", ctypes.c_double),
        ("period", ctypes.c_int),
        ("extra_syncs", ctypes.c_uint64),
        ("divergence", ctypes.c_double),
        ("divergence_max", ctypes.c_double),
        ("divergence_mean", ctypes.c_double),
        ("divergence_agreed", ctypes.c_uint64),
    ]


_c = ctypes
_P = ctypes.c_void_p
_SZ = ctypes.c_size_t
_I = ctypes.c_int
_S = ctypes.c_char_p
# name: (restype, argtypes); dd_status_t functions return c_int.
_SIGNATURES = {
    "dd_status_string": (_S, [_I]),
    "dd_status_name": (_S, [_I]),
    "dd_last_error": (_S, []),
    "dd_version_string": (_S, []),
    "dd_init": (_I, [_P, _c.POINTER(_P)]),
    "dd_finalize": (_I, [_P]),
    "dd_rank": (_I, [_P]),
    "dd_world_size": (_I, [_P]),
    "dd_local_rank": (_I, [_P]),
    "dd_local_size": (_I, [_P]),
    "dd_role": (_I, [_P]),
    "dd_rank_role": (_I, [_P, _I]),
    "dd_num_workers": (_I, [_P]),
    "dd_barrier": (_I, [_P]),
    "dd_allreduce": (_I, [_P, _P, _P, _SZ, _I, _I, _I]),
    "dd_broadcast": (_I, [_P, _P, _SZ, _I, _I, _I]),
    "dd_allgather": (_I, [_P, _P, _P, _SZ, _I, _I]),
    # dd_layer_register is the header's macro over this, with the struct's
    # size: the ctypes mirror passes its own.
    "dd_layer_register_sized": (
        _I,
        [_P, _S, _c.POINTER(dd_tensor_t), _SZ, _SZ, _c.POINTER(_P)],
    ),
    "dd_strategy_set": (_I, [_P, _S]),
    "dd_compression_set": (_I, [_P, _S]),
    "dd_deterministic_set": (_I, [_P, ctypes.c_int]),
    "dd_layer_set_compression": (_I, [_P, _P, _S]),
    "dd_strategy_name": (_S, [_P]),
    "dd_model_commit": (_I, [_P]),
    "dd_step_begin": (_I, [_P]),
    "dd_layer_ready": (_I, [_P, _P]),
    "dd_layer_ready_stream": (_I, [_P, _P, _P]),
    "dd_step_end": (_I, [_P, _c.POINTER(dd_step_stats_t)]),
    "dd_sync_all": (_I, [_P]),
    "dd_layer_stats": (_I, [_P, _P, _c.POINTER(dd_layer_stats_t)]),
    "dd_layer_name": (_S, [_P]),
    "dd_num_layers": (_SZ, [_P]),
    "dd_layer_at": (_P, [_P, _SZ]),
    "dd_aggregator_serve": (_I, [_P]),
}
# Calls that a newer library has and an older one may lack.
_OPTIONAL = {
    "dd_layer_unused": (_I, [_P, _P]),
    "dd_layer_forward": (_I, [_P, _P]),
    "dd_layer_forward_stream": (_I, [_P, _P, _P]),
    "dd_step_set": (_I, [_P, _c.c_uint64]),
    "dd_bucket_bytes_set": (_I, [_P, _SZ]),
    "dd_layer_mark": (_I, [_P, _P, _c.POINTER(dd_mark_params_t)]),
    "dd_layer_num_parts": (_SZ, [_P, _P]),
    "dd_layer_part": (
        _I,
        [_P, _P, _SZ, _c.POINTER(_P), _c.POINTER(_SZ), _c.POINTER(_SZ)],
    ),
}


def _candidates():
    """Where to look for the library, in order, as (path, why) pairs."""
    env = os.environ.get(LIBRARY_VARIABLE, "")
    if env:
        if os.path.isdir(env):
            env = os.path.join(env, SONAME)
        # An explicit choice: nothing else is tried.
        return [(env, LIBRARY_VARIABLE)]
    out = []
    try:
        from . import _config  # written by make install

        out.append((os.path.join(_config.LIBDIR, SONAME), "the installed libdir"))
    except ImportError:
        pass
    here = os.path.dirname(os.path.abspath(__file__))
    out.append(
        (os.path.join(here, "..", "..", ".libs", SONAME), "the build tree")
    )
    found = ctypes.util.find_library("dreamddp")
    out.append((found or SONAME, "the system's library path"))
    return out


_lib = None


def lib():
    """The loaded library (loaded on first use)."""
    global _lib
    if _lib is not None:
        return _lib
    tried = []
    handle = None
    for path, why in _candidates():
        explicit = why == LIBRARY_VARIABLE
        if not explicit and os.sep in path and not os.path.exists(path):
            tried.append("%s (%s): absent" % (path, why))
            continue
        try:
            handle = ctypes.CDLL(path)
            break
        except OSError as e:
            tried.append("%s (%s): %s" % (path, why, e))
    if handle is None:
        raise DreamDDPError(
            "libdreamddp not found; set %s to its path. Tried: %s"
            % (LIBRARY_VARIABLE, "; ".join(tried)),
            ERR_NOT_FOUND,
        )
    for name, (res, args) in _SIGNATURES.items():
        fn = getattr(handle, name)
        fn.restype, fn.argtypes = res, args
    for name, (res, args) in _OPTIONAL.items():
        if hasattr(handle, name):
            fn = getattr(handle, name)
            fn.restype, fn.argtypes = res, args
    _read_status_names(handle)
    _lib = handle
    return _lib


def _read_status_names(handle):
    """Fills STATUS_NAMES and STATUS from the library's own list."""
    for value in range(1, -256, -1):
        name = handle.dd_status_name(value)
        name = name.decode() if isinstance(name, bytes) else name
        if name != "DD_STATUS_UNKNOWN":
            STATUS_NAMES[value] = name
            STATUS[name] = value


def has(name):
    """Whether the loaded library exports the function name."""
    return hasattr(lib(), name)


def last_error():
    msg = lib().dd_last_error()
    return msg.decode("utf-8", "replace") if msg else ""


def check(status, call):
    """Raises DreamDDPError unless status is DD_OK. Must run on the thread
    that made the call: dd_last_error() is per thread."""
    if status == 0:
        return
    msg = last_error()
    if not msg:
        msg = lib().dd_status_string(status).decode()
    raise DreamDDPError(msg, status, call)
