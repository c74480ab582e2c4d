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
from ._torch_coll import broadcast, error as _error

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
        """Saves the state to DREAMDDP_ELASTIC_DIR (a file per worker,
        replaced atomically: a worker killed while writing leaves the last
        one). Call it between steps, at the same step on every worker."""
        if not enabled():
            return
        buf = io.BytesIO()
        steps = int(self.model.dreamddp_state_dict()["steps"])
        buf.write(_HEADER.pack(_MAGIC, steps, self.model.rank))
        torch.save(self._payload(), buf)
        path = os.path.join(_directory(), "%s%d" % (_PREFIX, self.model.rank))
        with open(path + ".tmp", "wb") as f:
            f.write(buf.getvalue())
        os.replace(path + ".tmp", path)

    def _newest(self):
        """The newest commit in the directory (the highest step), or None."""
        d, best = _directory(), None
        for name in os.listdir(d):
            if not name.startswith(_PREFIX) or name.endswith(".tmp"):
                continue
            path = os.path.join(d, name)
            with open(path, "rb") as f:
                head = f.read(_HEADER.size)
            if len(head) < _HEADER.size:
                continue
            magic, step, _ = _HEADER.unpack(head)
            if magic == _MAGIC and (best is None or step > best[0]):
                best = (step, path)
        return best

    def restore(self):
        """Loads the newest commit on the first worker and gives it to every
        worker (a broadcast); returns its step, or None when there is none
        (a fresh job). Collective over the workers."""
        if not enabled():
            return None
        data = torch.zeros(0, dtype=torch.uint8)
        n = torch.zeros(1, dtype=torch.int64)
        if self.model.rank == 0:
            best = self._newest()
            if best is not None:
                with open(best[1], "rb") as f:
                    raw = f.read()
                data = torch.frombuffer(bytearray(raw), dtype=torch.uint8)
                n[0] = data.numel()
        broadcast(n, 0)
        if int(n[0]) == 0:
            return None
        if self.model.rank != 0:
            data = torch.zeros(int(n[0]), dtype=torch.uint8)
        broadcast(data, 0)
        raw = data.numpy().tobytes()
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
            print("dreamddp.torch.elastic: generation %s of %d workers resumes at "
                  "step %d (committed by rank %d)"
                  % (os.environ.get("DREAMDDP_ELASTIC_GENERATION", "0"),
                     self.model.num_workers, step, writer), flush=True)
        return step


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
