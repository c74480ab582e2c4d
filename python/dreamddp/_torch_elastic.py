"""Elastic workers for the PyTorch front end: dreamddp.torch.elastic, after
Horovod's hvd.elastic.State and hvd.elastic.run.

    state = dreamddp.torch.elastic.State(model, opt, step=0)

    @dreamddp.torch.elastic.run
    def train(state):
        for step in range(state.step, steps):
            ...
            if (step + 1) % 20 == 0:
                state.step = step + 1
                state.commit()

    train(state)

Under ddrun --elastic (DREAMDDP_ELASTIC=yes) a lost worker ends every
rank's process (the library names the rank); ddrun starts the ranks that
remain, renumbered, as the job's next generation, and run() restores the
newest commit before calling the function again: the model's and the
optimizer's state_dict, the DreamDDP step (its window position) and the
attributes given to State (the position in the data). Unlike Horovod, the
processes are new ones, as under torchrun's elastic agent: nothing is
re-formed in place. Under torchrun --max-restarts, set
DREAMDDP_ELASTIC=yes and DREAMDDP_ELASTIC_DIR to a directory that outlives
the restarts, and a restarted job resumes from the last commit there.

Without DREAMDDP_ELASTIC=yes, commit() does nothing and run() only calls
the function.
"""

import collections
import functools
import hashlib
import io
import os
import pickle
import stat
import struct
import sys
import types

import torch

from . import _lib
from ._torch_coll import allreduce, broadcast, error as _error

_MAGIC = b"DDTORCH2"
# magic, the next step, the rank that wrote it, the SHA-256 of the payload
# (a commit is a few MB taken every few hundred steps: hashlib's cost is
# small beside torch.save's)
_HEADER = struct.Struct("<8sQi32s")
_PREFIX = "torch-commit-"


def enabled():
    """Whether DREAMDDP_ELASTIC says yes (ddrun --elastic sets it)."""
    return os.environ.get("DREAMDDP_ELASTIC", "no").strip().lower() in (
        "y", "yes", "on", "1", "true")


def _directory():
    """DREAMDDP_ELASTIC_DIR, made (0700) when absent; refused when another
    user owns it or others may write in it: whoever can write there could
    plant a commit that every worker then loads."""
    d = os.environ.get("DREAMDDP_ELASTIC_DIR", "")
    if not d:
        raise _error(_lib.ERR_INVALID_CONFIG,
                     "DREAMDDP_ELASTIC=yes needs DREAMDDP_ELASTIC_DIR, a directory "
                     "for the commits (ddrun --elastic makes one)",
                     "dreamddp.torch.elastic")
    try:
        os.mkdir(d, 0o700)
    except FileExistsError:
        pass
    except OSError as e:
        raise _error(_lib.ERR_INVALID_CONFIG, "DREAMDDP_ELASTIC_DIR=%s: cannot make "
                     "it: %s" % (d, e.strerror), "dreamddp.torch.elastic") from None
    st = os.stat(d)
    why = None
    if not stat.S_ISDIR(st.st_mode):
        why = "is not a directory"
    elif st.st_uid != os.geteuid():
        why = ("is owned by uid %d, not by this job's user (uid %d): its owner "
               "could read the commits or plant one; use a directory of your own"
               % (st.st_uid, os.geteuid()))
    elif st.st_mode & (stat.S_IWGRP | stat.S_IWOTH):
        why = ("has mode %03o: other users can write in it, and so plant or "
               "replace a commit; chmod go-w it (0700 is best)"
               % (st.st_mode & 0o777))
    if why is not None:
        raise _error(_lib.ERR_INVALID_CONFIG, "DREAMDDP_ELASTIC_DIR=%s %s" % (d, why),
                     "dreamddp.torch.elastic")
    return d


def _foreign(st):
    """Why a file of the commit directory must not be read or replaced (a
    link, not a file, another user's), or None."""
    if stat.S_ISLNK(st.st_mode):
        return "it is a symbolic link"
    if not stat.S_ISREG(st.st_mode):
        return "it is not a regular file"
    if st.st_uid != os.geteuid():
        return "it is owned by uid %d, not by this job's user (uid %d)" % (
            st.st_uid, os.geteuid())
    return None


def _refuse(path, why):
    return _error(_lib.ERR_INVALID_CONFIG,
                  "elastic restore: refusing %s: %s; something other than this job "
                  "put it in DREAMDDP_ELASTIC_DIR" % (path, why),
                  "dreamddp.torch.elastic")


def _read_own(path):
    """The bytes of a commit file, opened without following a link and
    refused unless it is a plain file of this user's."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError as e:
        if e.errno == 40:  # ELOOP: a link at the name
            raise _refuse(path, "it is a symbolic link") from None
        raise
    with os.fdopen(fd, "rb") as f:
        why = _foreign(os.fstat(f.fileno()))
        if why is not None:
            raise _refuse(path, why)
        return f.read()


class _StateUnpickler(pickle.Unpickler):
    """Admits what a state_dict holds (tensors, their storages, plain
    containers and numbers) and nothing else: a commit is data, and a
    pickle that names any other callable is refused, not run."""

    _ALLOWED = {
        ("collections", "OrderedDict"): collections.OrderedDict,
        ("torch._utils", "_rebuild_tensor_v2"): None,
        ("torch._utils", "_rebuild_parameter"): None,
        ("torch._utils", "_rebuild_parameter_with_state"): None,
        ("torch._tensor", "_rebuild_from_type_v2"): None,
    }

    def find_class(self, module, name):
        if (module, name) in self._ALLOWED:
            return getattr(sys.modules[module], name)
        if module == "torch" and name.endswith("Storage"):
            return getattr(torch, name)  # torch.load maps these itself
        raise pickle.UnpicklingError(
            "a commit holds tensors and plain values only, not %s.%s" % (module, name))


_SAFE_PICKLE = types.SimpleNamespace(
    __name__="dreamddp_state_pickle", Unpickler=_StateUnpickler,
    load=lambda f, **kw: _StateUnpickler(f, **kw).load())


def _load(raw, where):
    """The state in a commit's payload, without running any code it names:
    weights_only on PyTorch 2 and later; before, an unpickler of our own
    that admits the same things (1.13's weights_only takes no floats, so no
    optimizer state, and its torch.load drops a pickle_module given without
    weights_only: the zip reader is called as torch.load would call it)."""
    try:
        if int(torch.__version__.split(".")[0]) >= 2:
            return torch.load(io.BytesIO(raw), map_location="cpu", weights_only=True)
        ser = torch.serialization
        with ser._open_zipfile_reader(io.BytesIO(raw)) as z:
            return ser._load(z, "cpu", _SAFE_PICKLE, encoding="utf-8")
    except pickle.UnpicklingError as e:
        raise _error(_lib.ERR_INVALID_CONFIG,
                     "elastic restore: refusing %s: it holds more than tensors and "
                     "plain values (%s); a commit of this job never does, so "
                     "something other than this job wrote it" % (where, e),
                     "dreamddp.torch.elastic") from None
    except RuntimeError as e:  # not a zip of torch.save's
        raise _error(_lib.ERR_INVALID_CONFIG,
                     "elastic restore: cannot read %s: %s" % (where, e),
                     "dreamddp.torch.elastic") from None


def _generation():
    return int(os.environ.get("DREAMDDP_ELASTIC_GENERATION") or 0)


def _id():
    """This worker's name in the commits: DREAMDDP_ELASTIC_ID (ddrun: the
    rank it was first started as), else its rank."""
    v = os.environ.get("DREAMDDP_ELASTIC_ID")
    return int(v) if v else _lib_rank()


def _lib_rank():
    from . import context
    return context().rank


def _check_dropped(rank):
    """A worker of an older generation than the directory's was dropped."""
    try:
        with open(os.path.join(_directory(), "generation")) as f:
            now = int(f.read().strip() or 0)
    except (OSError, ValueError):
        return
    if now > _generation():
        raise _error(_lib.ERR_CANCELED,
                     "rank %d of generation %d was dropped: the job went on without "
                     "it and is at generation %d; it leaves without committing"
                     % (rank, _generation(), now), "dreamddp.torch.elastic")


class State:
    """What a re-formed job resumes from: a DreamDDP model, its optimizer
    (or None), and keyword attributes (step=0, epoch=0, ...) read and set
    as attributes. commit() saves them; run() restores the newest commit
    on every worker before training."""

    def __init__(self, model, optimizer=None, **kwargs):
        object.__setattr__(self, "model", model)
        object.__setattr__(self, "optimizer", optimizer)
        object.__setattr__(self, "_names", list(kwargs))
        for k, v in kwargs.items():
            object.__setattr__(self, k, v)

    def __setattr__(self, name, value):
        if name not in self._names and name not in ("model", "optimizer"):
            self._names.append(name)
        object.__setattr__(self, name, value)

    def _payload(self):
        return {
            "model": self.model.state_dict(),
            "optimizer": None if self.optimizer is None else self.optimizer.state_dict(),
            "dreamddp": self.model.dreamddp_state_dict(),
            "attributes": {k: getattr(self, k) for k in self._names},
        }

    def commit(self):
        """Saves the state to DREAMDDP_ELASTIC_DIR (two files per worker and
        generation, the older one replaced atomically: a worker killed while
        writing leaves the others, and a worker killed between the others'
        commit and its own still holds the step before). Call it between
        steps, at the same step on every worker. A worker its job went on
        without (frozen, then woken) is refused, naming itself."""
        if not enabled():
            return
        _check_dropped(self.model.rank)
        buf = io.BytesIO()
        steps = int(self.model.dreamddp_state_dict()["steps"])
        torch.save(self._payload(), buf)
        payload = buf.getvalue()
        head = _HEADER.pack(_MAGIC, steps, self.model.rank,
                            hashlib.sha256(payload).digest())
        base = os.path.join(_directory(), "%sg%d-i%d." % (_PREFIX, _generation(), _id()))
        held = dict((p, st) for st, p in self._own() if p.startswith(base))
        path = min((base + "0", base + "1"), key=lambda p: held.get(p, -1))
        try:
            why = _foreign(os.lstat(path))
        except FileNotFoundError:
            why = None
        if why is not None:
            raise _refuse(path, why)
        # A new file (never one someone left at the name, never through a
        # link), renamed into place: a worker killed while writing leaves
        # the old one.
        tmp = "%s.new-%d" % (path, os.getpid())
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(head)
            f.write(payload)
        os.replace(tmp, path)

    def _own(self):
        """This worker's commits (any generation), newest first, as
        (step, path)."""
        d, held, mine = _directory(), [], "-i%d." % _id()
        for name in os.listdir(d):
            if (not name.startswith(_PREFIX) or mine not in name or
                    name.rsplit(".", 1)[-1] not in ("0", "1")):
                continue
            path = os.path.join(d, name)
            raw = _read_own(path)
            head = raw[:_HEADER.size]
            why = "it is shorter than a commit header"
            if len(head) == _HEADER.size:
                magic, step, _, digest = _HEADER.unpack(head)
                why = ("its header is not a commit's of this version" if magic != _MAGIC
                       else "its payload does not match its checksum"
                       if hashlib.sha256(raw[_HEADER.size:]).digest() != digest
                       else None)
            if why is None:
                held.append((step, path))
            else:
                print("dreamddp.torch.elastic: skipping %s: %s; an older commit is "
                      "taken if there is one" % (path, why), file=sys.stderr,
                      flush=True)
        return sorted(held, reverse=True)

    def restore(self):
        """Resumes from the commits: when every worker has its own of the
        same step (the same world started again, as torchrun's agent does),
        each loads its own, so the run goes on as it would have; otherwise
        the first worker's newest is given to every worker (a broadcast).
        Returns the step, or None when there is no commit (a fresh job).
        Collective over the workers."""
        if not enabled():
            return None
        held = self._own()
        newest, path = held[0] if held else (-1, None)
        # The newest step every worker reached, and whether each holds it.
        common = torch.tensor([newest], dtype=torch.int64)
        allreduce(common, op="min")
        mine = dict(held).get(int(common[0]))
        have = torch.tensor([1 if mine is not None else 0], dtype=torch.int64)
        allreduce(have, op="min")
        if int(common[0]) >= 0 and int(have[0]) == 1:
            raw = _read_own(mine)
            how, where = "each worker from its own commit", mine
        else:
            raw = self._from_first(path)
            if raw is None:
                return None
            how = "from the first worker's commit"
            where = path if self.model.rank == 0 else "rank 0's commit"
        magic, step, writer, _ = _HEADER.unpack(raw[:_HEADER.size])
        state = _load(raw[_HEADER.size:], where)
        self.model.load_state_dict(state["model"])
        if self.optimizer is not None and state["optimizer"] is not None:
            self.optimizer.load_state_dict(state["optimizer"])
        self.model.load_dreamddp_state_dict(state["dreamddp"])
        for k, v in state["attributes"].items():
            setattr(self, k, v)
        if self.model.rank == 0:
            print("dreamddp.torch.elastic: generation %d of %d workers resumes at "
                  "step %d, %s" % (_generation(), self.model.num_workers, step, how),
                  flush=True)
        return step

    def _from_first(self, path):
        """The first worker's newest commit, on every worker, or None."""
        data = torch.zeros(0, dtype=torch.uint8)
        n = torch.zeros(1, dtype=torch.int64)
        if self.model.rank == 0 and path is not None:
            data = torch.frombuffer(bytearray(_read_own(path)), dtype=torch.uint8)
            n[0] = data.numel()
        broadcast(n, 0)
        if int(n[0]) == 0:
            return None
        if self.model.rank != 0:
            data = torch.zeros(int(n[0]), dtype=torch.uint8)
        broadcast(data, 0)
        return data.numpy().tobytes()


def run(func):
    """Wraps func(state, *args, **kwargs): restores the newest commit into
    state (State.restore) and calls func. A lost worker makes the library
    raise DreamDDPError on every rank; the process ends and the launcher
    (ddrun --elastic) re-forms the job, whose run() resumes from the last
    commit."""

    @functools.wraps(func)
    def wrapper(state, *args, **kwargs):
        state.restore()
        return func(state, *args, **kwargs)

    return wrapper
