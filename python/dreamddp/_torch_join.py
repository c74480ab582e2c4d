"""Uneven inputs: the protocol behind DreamDDP.join(), with the meaning of
PyTorch DDP's Join (torch.distributed.algorithms.join).

Every forward of a worker still training, inside join(), makes one small
allreduce: a one-hot of its rank and whether its step syncs (gradients
enabled, outside no_sync). A worker that ran out of batches leaves the
with block and answers each round with zeros; while some worker still
trains, it shadows that round: the buffers' broadcast where DDP's rule
asks for one, from the highest rank still training (DDP's authoritative
rank), and, when the round's step syncs, a step of its own that takes
part in every sync with zero gradients (ddp) or with its replica as it
stands, no update of its own (the averaging strategies). Once a round
counts no worker training, every worker has joined: the last to join
(the highest rank among them) gives the others its model, as DDP's join
does; under the averaging strategies every replica takes the average
(dd_sync_all), which lands delayed averages first.
"""

import torch

from . import _lib
from ._torch_coll import allreduce, error


class JoinState:
    """One join() block of one model."""

    def __init__(self, model, divide_by_initial_world_size, throw):
        self.model = model
        self.divide = divide_by_initial_world_size
        self.throw = throw
        self.world = model.num_workers
        self.me = model._worker_index
        self.active = self.world
        self.authoritative = 0

    def _round(self, training, sync):
        v = torch.zeros(self.world + 1, dtype=torch.int32)
        v[self.me] = 1 if training else 0
        v[self.world] = 1 if sync else 0
        allreduce(v, "sum")
        ranks = [w for w in range(self.world) if v[w] > 0]
        self.active = len(ranks)
        self.authoritative = ranks[-1] if ranks else 0
        return bool(v[self.world] > 0)

    def _check_throw(self):
        if self.throw and self.active < self.world:
            raise error(
                _lib.ERR_STATE,
                "join(throw_on_early_termination=True): %d of %d workers "
                "ran out of inputs" % (self.world - self.active, self.world),
                "join",
            )

    def notify(self, sync):
        """A forward of a worker still training."""
        self._round(True, sync)
        self._check_throw()

    def scale(self):
        """The factor on ddp's averaged gradients: DDP divides by the
        workers still training when divide_by_initial_world_size is
        False."""
        return 1.0 if self.divide else self.world / self.active

    def shadow(self):
        """The end of the with block: shadows the others' rounds until
        every worker has joined, then makes the replicas equal."""
        last = True
        while True:
            sync = self._round(False, False)
            if self.active == 0:
                break
            last = False
            self._check_throw()
            self.model._join_shadow(sync, self.authoritative)
        v = torch.zeros(self.world, dtype=torch.int32)
        v[self.me] = 1 if last else 0
        allreduce(v, "sum")
        root = max(w for w in range(self.world) if v[w] > 0)
        self.model._join_final(root)
