"""make installcheck's PyTorch loop: run as two ranks by the installed ddrun,
from a directory outside the source tree, with the installed package only.
Each rank trains the same model on its own batches under strategy ddp and
prints where the package came from and a digest of its parameters; the
caller checks that both ranks end with the same parameters and that they
moved."""

import sys

import torch

import dreamddp
import dreamddp.torch

torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.Tanh(), torch.nn.Linear(16, 1))
start = [p.detach().clone() for p in model.parameters()]
ddp = dreamddp.torch.DreamDDP(model, strategy="ddp")
rank, size = dreamddp.context().rank, dreamddp.context().world_size
opt = torch.optim.SGD(ddp.parameters(), lr=0.1)
gen = torch.Generator().manual_seed(100 + rank)  # each rank its own batches
for _ in range(5):
    x = torch.randn(4, 8, generator=gen)
    opt.zero_grad()
    torch.nn.functional.mse_loss(ddp(x), x.sum(1, keepdim=True)).backward()
    opt.step()
moved = sum(float((p.detach() - s).abs().sum()) for p, s in zip(model.parameters(), start))
digest = ",".join(float(p.detach().double().sum()).hex() for p in model.parameters())
print("installcheck_torch: rank %d of %d: package %s" % (rank, size, dreamddp.__file__))
print("installcheck_torch: rank %d of %d: moved %s params %s" % (rank, size, moved > 0, digest))
sys.stdout.flush()
