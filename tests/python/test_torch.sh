#!/bin/sh
# The PyTorch front end (python/dreamddp) across real ranks: replicas
# bitwise equal after every averaging under every strategy, and gradients
# under ddp equal to PyTorch's DDP on the same batches; under a +next
# strategy, forward marks and equal replicas after sync_all, and a layer cut
# into parts (DREAMDDP_LAYER_SPLIT) listed part by part. Skips where the
# interpreter has no torch.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/python/torch_lib.sh"

for s in ddp localsgd:2 plsgd:2 adaptive; do
    run "$s on 2 ranks" 2 equal $s 8
done
run "dreamddp:2 on 3 ranks" 3 equal dreamddp:2 8
run "ddp against PyTorch DDP, 2 ranks" 2 vs-ddp 5 exact
# Delayed averaging: the forward pre-hooks mark each layer, and sync_all
# leaves the replicas bitwise equal.
run "dreamddp:2+next on 2 ranks" 2 delayed dreamddp:2+next 8
run "localsgd:2+next on 2 ranks" 2 delayed localsgd:2+next 6
# Layers in parts: fc1 cut at 4 KiB, its parts listed and counted apart.
export DREAMDDP_LAYER_SPLIT=4K
run "dreamddp:2+next, fc1 in parts, 2 ranks" 2 delayed dreamddp:2+next 8
unset DREAMDDP_LAYER_SPLIT
finish
