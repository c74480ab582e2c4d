#!/usr/bin/env python3
"""bench/startup_torch.py RANK N GO PORT: one rank of PyTorch's setup, timed.

Imports torch, waits for the wall-clock time GO (chosen by bench/startup.sh
so that every rank has imported by then: 128 imports of torch take minutes
on 2 cores, and that is not the setup being compared), then does what a
DDP job does before its first step: a TCPStore on rank 0, init_process_group
with gloo over it, and DistributedDataParallel's constructor (which checks
the parameters' shapes across ranks and broadcasts rank 0's). Prints one
JSON line: the seconds from GO to the model being ready.
"""
import datetime, json, sys, time

import torch
import torch.distributed as dist

rank, n, go, port = int(sys.argv[1]), int(sys.argv[2]), float(sys.argv[3]), int(sys.argv[4])
late = time.time() - go
time.sleep(max(0.0, go - time.time()))
store = dist.TCPStore("127.0.0.1", port, n, rank == 0, timeout=datetime.timedelta(seconds=600))
dist.init_process_group("gloo", store=store, rank=rank, world_size=n)
# About the size of gpt2-blocks at scale 0.001 (0.5 MB), which ddbench runs.
model = torch.nn.Sequential(torch.nn.Linear(352, 352), torch.nn.Linear(352, 8))
ddp = torch.nn.parallel.DistributedDataParallel(model)
ready = time.time()
print(json.dumps({"rank": rank, "ranks": n, "ready_s": round(ready - go, 3),
                  "late_s": round(max(0.0, late), 3)}), flush=True)
dist.barrier()
dist.destroy_process_group()
