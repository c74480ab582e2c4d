#!/usr/bin/python3
"""PyTorch's own DDP tutorial script (init_process_group, LOCAL_RANK from
the environment, DistributedSampler, DDP(model), a metric all_reduce and a
barrier), with its DDP(...) line changed to dreamddp.torch.DreamDDP(...):
torch.distributed stays in the script for the sampler and the metrics, and
dreamddp syncs the model. --baseline torch-ddp runs the unchanged line.

    ddrun -n 2 -- python3 examples/torch_ddp_tutorial.py
    ddrun -n 2 -- python3 examples/torch_ddp_tutorial.py --baseline torch-ddp
    torchrun --nproc-per-node 2 examples/torch_ddp_tutorial.py
    ddrun -n 3 --aggregators 1 -- python3 examples/torch_ddp_tutorial.py

Every launcher's world holds every process, aggregators too: every process
joins init_process_group and the worker group, then aggregators serve
(dreamddp.serve_if_aggregator) and the workers shard the data by their
place among the workers. With --out FILE rank 0 saves the final parameters.
From a source tree: PYTHONPATH=python (and DREAMDDP_LIBRARY=BUILD/.libs
when the build tree is elsewhere).
"""

import argparse
import os

import torch
import torch.distributed as dist
import torch.nn as nn
import torch.optim as optim
from torch.nn.parallel import DistributedDataParallel as DDP
from torch.utils.data import DataLoader, TensorDataset
from torch.utils.data.distributed import DistributedSampler


class ToyModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.net1 = nn.Linear(10, 10)
        self.relu = nn.ReLU()
        self.net2 = nn.Linear(10, 5)

    def forward(self, x):
        return self.net2(self.relu(self.net1(x)))


def parse():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--baseline", choices=["torch-ddp"],
                   help="wrap with torch.nn.parallel.DistributedDataParallel")
    p.add_argument("--strategy", default=None,
                   help="dreamddp's strategy (default: DREAMDDP_STRATEGY, else ddp)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--batch", type=int, default=16, help="per worker")
    p.add_argument("--out", help="rank 0 saves the final parameters here")
    return p.parse_args()


def main():
    args = parse()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    dist.init_process_group("gloo")  # env://: MASTER_ADDR, MASTER_PORT
    rank = dist.get_rank()
    local_rank = int(os.environ["LOCAL_RANK"])
    cuda = torch.cuda.is_available()
    device = torch.device("cuda", local_rank) if cuda else torch.device("cpu")

    # The data shard: a worker's place among the workers, and a group of
    # the workers for the metrics (all processes must create it).
    workers = list(range(dist.get_world_size()))
    if args.baseline is None:
        import dreamddp
        import dreamddp.torch

        workers = dreamddp.context().worker_ranks
    group = dist.new_group(workers)
    if args.baseline is None:
        dreamddp.serve_if_aggregator()  # aggregators serve here, then exit
    shard, num_shards = workers.index(rank), len(workers)

    g = torch.Generator().manual_seed(1)
    data = TensorDataset(torch.randn(512, 10, generator=g),
                         torch.randn(512, 5, generator=g))
    sampler = DistributedSampler(data, num_replicas=num_shards, rank=shard,
                                 shuffle=True, seed=2)
    loader = DataLoader(data, batch_size=args.batch, sampler=sampler)

    model = ToyModel().to(device)
    if args.baseline == "torch-ddp":
        ddp_model = DDP(model, device_ids=[local_rank]) if cuda else DDP(model)
    else:
        ddp_model = (dreamddp.torch.DreamDDP(model, device_ids=[local_rank],
                                             strategy=args.strategy)
                     if cuda else
                     dreamddp.torch.DreamDDP(model, strategy=args.strategy))
    loss_fn = nn.MSELoss()
    optimizer = optim.SGD(ddp_model.parameters(), lr=0.01)

    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        total = torch.zeros(2)
        for x, y in loader:
            x, y = x.to(device), y.to(device)
            optimizer.zero_grad()
            loss = loss_fn(ddp_model(x), y)
            loss.backward()
            optimizer.step()
            total += torch.tensor([loss.item() * len(x), len(x)])
        dist.all_reduce(total, group=group)  # the metric, over the workers
        if shard == 0:
            print("epoch %d: loss %.6f over %d samples"
                  % (epoch, total[0] / total[1], int(total[1])), flush=True)
    if args.baseline is None:
        ddp_model.sync_all()  # every worker's replica equal, for the save
    dist.barrier(group=group)
    if shard == 0 and args.out:
        torch.save({k: v.cpu() for k, v in model.state_dict().items()}, args.out)
    print("rank %d: done (%s, worker %d of %d)"
          % (rank, args.baseline or "dreamddp", shard, num_shards), flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
