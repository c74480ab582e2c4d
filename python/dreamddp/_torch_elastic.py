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

import functools
import io
import os
import struct

import torch

from . import _lib
from ._torch_coll import allreduce, broadcast, error as _error

_MAGIC = b"DDTORCH1"
_HEADER = struct.Struct("<8sQi")  # magic, the next step, the rank that wrote it
_PREFIX = "torch-commit-"


def enabled():
    """Whether DREAMDDP_ELASTIC says yes (ddrun --elastic sets it)."""
    return os.environ.get("DREAMDDP_ELASTIC", "no").strip().lower() in (
        "y", "yes", "on", "1", "true")


def _directory():
    d = os.environ.get("DREAMDDP_ELASTIC_DIR", "")
    if not d:
        raise _error(_lib.ERR_INVALID_CONFIG,
                     "DREAMDDP_ELASTIC=yes needs DREAMDDP_ELASTIC_DIR, a directory "
                     "for the commits (ddrun --elastic makes one)",
                     "dreamddp.torch.elastic")
    return d


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
        buf.write(_HEADER.pack(_MAGIC, steps, self.model.rank))
        torch.save(self._payload(), buf)
        base = os.path.join(_directory(), "%sg%d-i%d." % (_PREFIX, _generation(), _id()))
        held = dict((p, st) for st, p in self._own() if p.startswith(base))
        path = min((base + "0", base + "1"), key=lambda p: held.get(p, -1))
        with open(path + ".tmp", "wb") as f:
            f.write(buf.getvalue())
        os.replace(path + ".tmp", path)

    def _own(self):
        """This worker's commits (any generation), newest first, as
        (step, path)."""
        d, held, mine = _directory(), [], "-i%d." % _id()
        for name in os.listdir(d):
            if (not name.startswith(_PREFIX) or mine not in name or
                    name.rsplit(".", 1)[-1] not in ("0", "1")):
                continue
            path = os.path.join(d, name)
            with open(path, "rb") as f:
                head = f.read(_HEADER.size)
            if len(head) == _HEADER.size:
                magic, step, _ = _HEADER.unpack(head)
                if magic == _MAGIC:
                    held.append((step, path))
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
            with open(mine, "rb") as f:
                raw = f.read()
            how = "each worker from its own commit"
        else:
            raw = self._from_first(path)
            if raw is None:
                return None
            how = "from the first worker's commit"
        magic, step, writer = _HEADER.unpack(raw[:_HEADER.size])
        try:
            state = torch.load(io.BytesIO(raw[_HEADER.size:]), map_location="cpu",
                               weights_only=False)
        except TypeError:  # PyTorch < 1.13.1 has no weights_only
            state = torch.load(io.BytesIO(raw[_HEADER.size:]), map_location="cpu")
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
            with open(path, "rb") as f:
                data = torch.frombuffer(bytearray(f.read()), dtype=torch.uint8)
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
