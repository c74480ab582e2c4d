#!/bin/sh
# A PyTorch user's ordinary loops through the front end, beside PyTorch's
# DDP (gloo) on the same batches and seeds (tests/python/torch_patterns.py): under
# ddp the parameters and buffers equal DDP's, bitwise (on 3 workers within
# 1e-6: the average of three is not exact); under dreamddp:2 and
# dreamddp:2+next the replicas are bitwise equal after sync_all. Clipping
# and a scaler's skipped steps after backward, schedulers after the wrap,
# accumulation, rank-dependent branches, an unused head under AdamW, tied
# weights, batch norm and evaluation, batch-norm buffers reassigned by
# swa_utils.update_bn, an unused head under zero_grad()'s default, a
# checkpoint saved on 2 workers and resumed on 3, uneven inputs with join()
# and without; and the misuses (a forward through model.module, a second
# DreamDDP, a model or an averaged buffer changed after the wrap, sync_all
# against a step, a worker leaving early), each an error naming it within
# 5 s. Skips where the interpreter has no torch.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/python/torch_lib.sh"
PATTERNS="$top_srcdir/tests/python/torch_patterns.py"
export PATTERNS_DIR="$TMP" PYTHONPATH="$top_srcdir/tests/python:$PYTHONPATH"

# pattern NAME N CASE STRATEGY: rank 0 prints the case's line, every rank
# exits 0.
pattern() {
    name=$1; n=$2; shift 2
    if "$DDRUN" -n "$n" --timeout 120 -- "$DDTEST_PYTHON" "$PATTERNS" "$@" >"$TMP/out" 2>&1 &&
       grep -q '^0: torch_patterns: [^F]' "$TMP/out"; then
        pass "$name: $(grep -m1 '^0: torch_patterns: ' "$TMP/out" | sed 's/^0: torch_patterns: //')"
    else
        fail "$name"; sed 's/^/    /' "$TMP/out"
    fi
}

for strategy in ddp dreamddp:2 dreamddp:2+next; do
    for case in clip scaler scheduler accumulate branches adamw tied batchnorm join; do
        pattern "$case, $strategy" 2 "$case" "$strategy"
    done
    pattern "checkpoint saved on 2 workers, $strategy" 2 save "$strategy"
    pattern "checkpoint resumed on 3 workers, $strategy" 3 resume "$strategy"
    pattern "uneven inputs without join(), $strategy" 2 uneven "$strategy"
done
# Resumed on as many workers at its window position, plsgd (whose plan
# comes from the sizes) is the uninterrupted run, bit for bit.
pattern "checkpoint saved, plsgd:2" 2 save plsgd:2
pattern "checkpoint resumed on 2 workers, plsgd:2" 2 resume plsgd:2
pattern "join(divide_by_initial_world_size=False), ddp" 2 join-divide ddp
pattern "join() with batch norm, ddp" 2 join-bn ddp
pattern "join() on 3 workers with batch norm, ddp" 3 join-bn ddp
for strategy in ddp dreamddp:2; do
    for case in module twice changed early-sync-all; do
        pattern "misuse: $case, $strategy" 2 "$case" "$strategy"
    done
done
# A head no worker uses keeps .grad None under zero_grad()'s default and
# AdamW's weight decay, as under DDP.
pattern "unused head under zero_grad()'s default, ddp" 2 unused-zeroed ddp
# Buffers that swa_utils.update_bn reassigns after the wrap stay synced
# (DDP re-reads them before every broadcast).
for strategy in ddp localsgd:2; do
    pattern "buffers reassigned by update_bn, $strategy" 2 reassigned "$strategy"
done
pattern "buffers reassigned by update_bn, broadcast_buffers=False, ddp" 2 reassigned-local ddp
finish
