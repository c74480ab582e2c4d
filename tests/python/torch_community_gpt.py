"""A GPT training script written the way the community writes one for
PyTorch DDP (the layout of nanoGPT's train.py, compact and CPU-sized): it
decides from RANK whether it is distributed, calls init_process_group,
accumulates gradients through model.require_backward_grad_sync, evaluates
on rank 0 only through the wrapped model, clips, keeps a GradScaler
(disabled on CPU), sets a cosine learning rate by hand, saves checkpoints
of model.module on rank 0 and ends with destroy_process_group().

Its two DDP lines are the import of DDP and model = DDP(...): --wrap ddp
takes PyTorch's, --wrap dreamddp takes dreamddp's (DREAMDDP_STRATEGY picks
the strategy); nothing else differs, but for the two lines a job with
aggregator ranks adds after init_process_group (they serve there, and the
workers take their shard from their index among the workers). The data is a character stream made
from a seed, so every run sees the same batches.

Rank 0 prints a JSON line for each evaluation ("event": "eval"); every
rank prints one at the end ("event": "end") with what the tests read: the
library's syncs per layer (dreamddp only, read before sync_all), and a
digest of the parameters (after sync_all under dreamddp).
"""
import argparse
import hashlib
import json
import math
import os
import time
from contextlib import nullcontext

import torch
import torch.nn as nn
from torch.nn import functional as F
from torch.distributed import init_process_group, destroy_process_group

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("--wrap", choices=("ddp", "dreamddp"), required=True,
                    help="whose DDP wraps the model: PyTorch's or dreamddp's")
parser.add_argument("--max-iters", type=int, default=8)
parser.add_argument("--eval-interval", type=int, default=2)
parser.add_argument("--grad-accum", type=int, default=4,
                    help="micro-steps per optimizer step, over all ranks")
parser.add_argument("--out-dir", default=None,
                    help="where rank 0 saves ckpt.pt (none without)")
args = parser.parse_args()

# ---- the two DDP lines -------------------------------------------------------
if args.wrap == "ddp":
    from torch.nn.parallel import DistributedDataParallel as DDP
else:
    import dreamddp.torch
    from dreamddp.torch import DreamDDP as DDP

# ---- config ------------------------------------------------------------------
out_dir = args.out_dir
eval_interval = args.eval_interval
eval_iters = 2
always_save_checkpoint = True
gradient_accumulation_steps = args.grad_accum
batch_size = 4
block_size = 16
n_layer, n_head, n_embd, dropout, bias = 2, 2, 32, 0.0, False
vocab_size = 32
learning_rate = 3e-3
max_iters = args.max_iters
weight_decay = 1e-1
beta1, beta2 = 0.9, 0.95
grad_clip = 1.0
decay_lr = True
warmup_iters = 2
lr_decay_iters = max_iters
min_lr = 3e-4
backend = "gloo"
device = "cuda" if torch.cuda.is_available() else "cpu"
dtype = ("bfloat16" if torch.cuda.is_available() and torch.cuda.is_bf16_supported()
         else "float16" if torch.cuda.is_available() else "float32")

# ---- distributed set-up --------------------------------------------------------
ddp = int(os.environ.get("RANK", -1)) != -1
if ddp:
    init_process_group(backend=backend)
    ddp_rank = int(os.environ["RANK"])
    ddp_local_rank = int(os.environ["LOCAL_RANK"])
    ddp_world_size = int(os.environ["WORLD_SIZE"])
    if args.wrap == "dreamddp" and os.environ.get("DREAMDDP_NUM_AGGREGATORS"):
        # With aggregator ranks: they serve here, then exit; the data shard
        # is the worker's index among the workers.
        dreamddp.serve_if_aggregator()
        ddp_rank, ddp_world_size = dreamddp.torch.worker_rank(), dreamddp.torch.num_workers()
    if device == "cuda":
        device = f"cuda:{ddp_local_rank}"
        torch.cuda.set_device(device)
    master_process = ddp_rank == 0
    seed_offset = ddp_rank
    assert gradient_accumulation_steps % ddp_world_size == 0
    gradient_accumulation_steps //= ddp_world_size
else:
    master_process = True
    seed_offset = 0
    ddp_world_size = 1
tokens_per_iter = gradient_accumulation_steps * ddp_world_size * batch_size * block_size
if master_process and out_dir:
    os.makedirs(out_dir, exist_ok=True)
torch.manual_seed(1337 + seed_offset)
device_type = "cuda" if "cuda" in device else "cpu"
ptdtype = {"float32": torch.float32, "bfloat16": torch.bfloat16,
           "float16": torch.float16}[dtype]
ctx = (nullcontext() if device_type == "cpu"
       else torch.amp.autocast(device_type=device_type, dtype=ptdtype))

# ---- data: a character stream from a seed --------------------------------------
# A noisy periodic text: each character follows from the one before with
# probability 0.9, so there is something to learn.
def make_data(n, seed):
    g = torch.Generator().manual_seed(seed)
    steps = torch.randint(1, 4, (vocab_size,), generator=g)
    out = torch.empty(n, dtype=torch.long)
    c = 0
    noise = torch.rand(n, generator=g)
    jump = torch.randint(0, vocab_size, (n,), generator=g)
    for i in range(n):
        c = int(jump[i]) if noise[i] < 0.1 else (c + int(steps[c])) % vocab_size
        out[i] = c
    return out


train_data = make_data(20000, 42)
val_data = make_data(2000, 43)


def get_batch(split):
    data = train_data if split == "train" else val_data
    ix = torch.randint(len(data) - block_size, (batch_size,))
    x = torch.stack([data[i:i + block_size] for i in ix])
    y = torch.stack([data[i + 1:i + 1 + block_size] for i in ix])
    return x.to(device), y.to(device)


# ---- the model -------------------------------------------------------------------
class LayerNorm(nn.Module):
    def __init__(self, ndim, bias):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(ndim))
        self.bias = nn.Parameter(torch.zeros(ndim)) if bias else None

    def forward(self, x):
        return F.layer_norm(x, self.weight.shape, self.weight, self.bias, 1e-5)


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(n_embd, 3 * n_embd, bias=bias)
        self.c_proj = nn.Linear(n_embd, n_embd, bias=bias)
        self.resid_dropout = nn.Dropout(dropout)
        self.flash = hasattr(F, "scaled_dot_product_attention")

    def forward(self, x):
        B, T, C = x.size()
        q, k, v = self.c_attn(x).split(n_embd, dim=2)
        q = q.view(B, T, n_head, C // n_head).transpose(1, 2)
        k = k.view(B, T, n_head, C // n_head).transpose(1, 2)
        v = v.view(B, T, n_head, C // n_head).transpose(1, 2)
        if self.flash:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
            mask = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
            att = F.softmax(att.masked_fill(~mask, float("-inf")), dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.resid_dropout(self.c_proj(y))


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd, bias=bias)
        self.c_proj = nn.Linear(4 * n_embd, n_embd, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x):
        return self.dropout(self.c_proj(F.gelu(self.c_fc(x))))


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = LayerNorm(n_embd, bias)
        self.attn = CausalSelfAttention()
        self.ln_2 = LayerNorm(n_embd, bias)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.transformer = nn.ModuleDict(dict(
            wte=nn.Embedding(vocab_size, n_embd),
            wpe=nn.Embedding(block_size, n_embd),
            drop=nn.Dropout(dropout),
            h=nn.ModuleList([Block() for _ in range(n_layer)]),
            ln_f=LayerNorm(n_embd, bias),
        ))
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.transformer.wte.weight = self.lm_head.weight  # weight tying
        self.apply(self._init_weights)
        for pn, p in self.named_parameters():
            if pn.endswith("c_proj.weight"):
                torch.nn.init.normal_(p, mean=0.0, std=0.02 / math.sqrt(2 * n_layer))

    def _init_weights(self, module):
        if isinstance(module, (nn.Linear, nn.Embedding)):
            torch.nn.init.normal_(module.weight, mean=0.0, std=0.02)
        if isinstance(module, nn.Linear) and module.bias is not None:
            torch.nn.init.zeros_(module.bias)

    def forward(self, idx, targets=None):
        t = idx.size(1)
        pos = torch.arange(0, t, dtype=torch.long, device=idx.device)
        x = self.transformer.drop(self.transformer.wte(idx) + self.transformer.wpe(pos))
        for block in self.transformer.h:
            x = block(x)
        x = self.transformer.ln_f(x)
        logits = self.lm_head(x)
        loss = None
        if targets is not None:
            loss = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1))
        return logits, loss

    def configure_optimizers(self, weight_decay, learning_rate, betas):
        params = [p for p in self.parameters() if p.requires_grad]
        decay = [p for p in params if p.dim() >= 2]
        nodecay = [p for p in params if p.dim() < 2]
        groups = [{"params": decay, "weight_decay": weight_decay},
                  {"params": nodecay, "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=learning_rate, betas=betas)


iter_num = 0
best_val_loss = 1e9
model = GPT()
model.to(device)
scaler = torch.cuda.amp.GradScaler(enabled=(dtype == "float16"))
optimizer = model.configure_optimizers(weight_decay, learning_rate, (beta1, beta2))
if ddp:
    model = DDP(model, **({"device_ids": [ddp_local_rank]} if device_type == "cuda" else {}))


@torch.no_grad()
def estimate_loss():
    out = {}
    model.eval()
    for split in ["train", "val"]:
        losses = torch.zeros(eval_iters)
        for k in range(eval_iters):
            X, Y = get_batch(split)
            with ctx:
                logits, loss = model(X, Y)
            losses[k] = loss.item()
        out[split] = losses.mean().item()
    model.train()
    return out


def get_lr(it):
    if it < warmup_iters:
        return learning_rate * (it + 1) / (warmup_iters + 1)
    if it > lr_decay_iters:
        return min_lr
    decay_ratio = (it - warmup_iters) / (lr_decay_iters - warmup_iters)
    coeff = 0.5 * (1.0 + math.cos(math.pi * decay_ratio))
    return min_lr + coeff * (learning_rate - min_lr)


# ---- training loop ---------------------------------------------------------------
X, Y = get_batch("train")
t0 = time.time()
raw_model = model.module if ddp else model
while True:
    lr = get_lr(iter_num) if decay_lr else learning_rate
    for param_group in optimizer.param_groups:
        param_group["lr"] = lr

    if iter_num % eval_interval == 0 and master_process:
        losses = estimate_loss()
        print(json.dumps({"event": "eval", "iter": iter_num, "train": losses["train"],
                          "val": losses["val"], "lr": lr}), flush=True)
        if losses["val"] < best_val_loss or always_save_checkpoint:
            best_val_loss = losses["val"]
            if iter_num > 0 and out_dir:
                checkpoint = {"model": raw_model.state_dict(),
                              "optimizer": optimizer.state_dict(),
                              "iter_num": iter_num, "best_val_loss": best_val_loss}
                torch.save(checkpoint, os.path.join(out_dir, "ckpt.pt"))

    for micro_step in range(gradient_accumulation_steps):
        if ddp:
            model.require_backward_grad_sync = (micro_step == gradient_accumulation_steps - 1)
        with ctx:
            logits, loss = model(X, Y)
            loss = loss / gradient_accumulation_steps
        X, Y = get_batch("train")
        scaler.scale(loss).backward()
    if grad_clip != 0.0:
        scaler.unscale_(optimizer)
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    scaler.step(optimizer)
    scaler.update()
    optimizer.zero_grad(set_to_none=True)

    iter_num += 1
    if iter_num > max_iters:
        break

# ---- what the tests read ----------------------------------------------------------
end = {"event": "end", "rank": ddp_rank if ddp else None, "distributed": ddp,
       "world_size": ddp_world_size, "steps": iter_num,
       "micro_steps": iter_num * gradient_accumulation_steps,
       "seconds": round(time.time() - t0, 3)}
if ddp and hasattr(model, "layer_stats"):
    end["strategy"] = model.strategy
    end["syncs"] = {name: int(s["syncs"]) for name, s in model.layer_stats().items()}
    model.sync_all()
digest = hashlib.sha256()
for p in raw_model.parameters():
    digest.update(p.detach().cpu().contiguous().numpy().tobytes())
end["parameters"] = digest.hexdigest()[:16]
print(json.dumps(end), flush=True)

if ddp:
    destroy_process_group()
