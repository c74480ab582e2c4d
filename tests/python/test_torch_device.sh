#!/bin/sh
# The PyTorch front end's CUDA path without a GPU: torch_device.py puts a
# model in the fake device's memory and has dreamddp.torch take it for
# CUDA tensors (through its _placement and _ready_stream seams), so that
# the layers register as DD_MEM_CUDA on their device, are marked with
# dd_layer_ready_stream on their stream, and are staged by the library:
# replicas bitwise equal after every averaging, among the workers and
# through two aggregators; under +next their forward marks carry their
# stream and the replicas are bitwise equal after sync_all; a layer on two
# devices, a model on two GPUs and a CUDA layer without a device module
# are errors. Skips
# where the interpreter has no torch.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/python/torch_lib.sh"
MP="$top_srcdir/tests/python/torch_device.py"
export DREAMDDP_DEVICE=fake DREAMDDP_STAGING_BYTES=4K DREAMDDP_STAGING_SLOTS=2

# The front end takes one of two paths by strategy: gradients with
# buffers broadcast (ddp, adaptive) or parameters with buffers averaged
# (localsgd, plsgd, dreamddp); the library's device paths under every
# strategy are test_device.sh's. One of each, to stay within the harness's
# time on a loaded machine.
run "device layers, ddp, 2 ranks" 2 equal ddp 4
run "device layers, dreamddp:2, 3 ranks" 3 equal dreamddp:2 4
# Two of four ranks aggregate (they print nothing): two success lines.
if DREAMDDP_NUM_AGGREGATORS=2 "$DDRUN" -n 4 --timeout 120 -- "$DDTEST_PYTHON" "$MP" equal ddp 4 \
    >"$TMP/agg" 2>&1 && [ "$(grep -c '^[0-9]*: torch_mp: device ddp: ' "$TMP/agg")" -eq 2 ]; then
    pass "device layers, ddp, 2 workers + 2 aggregators"
else
    fail "device layers, ddp, 2 workers + 2 aggregators"; sed 's/^/    /' "$TMP/agg"
fi
run "device layers, dreamddp:2+next, 2 ranks" 2 next dreamddp:2+next 5
run "device placement errors" 1 errors
DREAMDDP_DEVICE=none run "a CUDA layer without a device module" 1 nomodule
finish
