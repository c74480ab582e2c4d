#!/bin/sh
# The PyTorch front end (python/dreamddp) across real ranks: replicas
# bitwise equal after every averaging under every strategy, gradients under
# ddp equal to PyTorch's DDP on the same batches, unused parameters, torchrun's
# variables beside torch.distributed, library errors as DreamDDPError.
# Skips where the interpreter has no torch.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
: "${DD_PYTHON:=/usr/bin/python3}"
if ! "$DD_PYTHON" -c 'import torch' >"$TMP/import" 2>&1; then
    echo "SKIP: $DD_PYTHON cannot import torch: $(tail -n 1 "$TMP/import")"
    exit 77
fi
PYTHONPATH="$top_srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
: "${DREAMDDP_LIBRARY:=$top_builddir/.libs/libdreamddp.so.0}"
if ldd "$DREAMDDP_LIBRARY" 2>/dev/null | grep -q 'lib[atl]san'; then
    # The interpreter would have to preload the sanitizer runtime, and its
    # own leaks would then fail the run.
    echo "SKIP: $DREAMDDP_LIBRARY is built with sanitizers; Python cannot load it"
    exit 77
fi
export PYTHONPATH DREAMDDP_LIBRARY
export DREAMDDP_TIMEOUT_S=30 DREAMDDP_PROFILE_STEPS=3 DREAMDDP_ADAPTIVE_INTERVAL=2
MP="$top_srcdir/tests/torch_mp.py"

# run NAME N ARGS...: N ranks of torch_mp.py ARGS under ddrun; every rank
# must print its success line.
run() {
    name=$1; n=$2; shift 2
    if "$DDRUN" -n "$n" --timeout 120 -- "$DD_PYTHON" "$MP" "$@" >"$TMP/out" 2>&1 &&
       [ "$(grep -c '^[0-9]*: torch_mp: [^F]' "$TMP/out")" -eq "$n" ]; then
        pass "$name: $(grep -m1 'torch_mp: ' "$TMP/out" | sed 's/^[0-9]*: torch_mp: //')"
    else
        fail "$name"; sed 's/^/    /' "$TMP/out"
    fi
}

for s in ddp localsgd:2 plsgd:2 dreamddp:2 adaptive; do
    run "$s on 2 ranks" 2 equal $s 10
done
run "dreamddp:2 on 3 ranks" 3 equal dreamddp:2 8
run "ddp against PyTorch DDP, 2 ranks" 2 vs-ddp 5 exact
run "ddp against PyTorch DDP, 3 ranks" 3 vs-ddp 4
run "find_unused_parameters=True" 2 unused
run "an unused layer without find_unused_parameters" 2 unused-error

# torchrun's variables by hand: torch.distributed's store on MASTER_PORT,
# dreamddp's on the next port, in the same processes.
port=$(free_port)
pids=""
for r in 0 1; do
    (RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
     MASTER_PORT=$port TORCHELASTIC_RUN_ID=tt$port timeout 120 \
     "$DD_PYTHON" "$MP" torchrun 4 >"$TMP/tr.$r" 2>&1; echo $? >"$TMP/tr.$r.rc") &
    pids="$pids $!"
done
for p in $pids; do wait "$p"; done
if [ "$(cat "$TMP/tr.0.rc")" = 0 ] && [ "$(cat "$TMP/tr.1.rc")" = 0 ]; then
    expect_grep "$TMP/tr.0" "torch.distributed on port $port beside dreamddp" "torchrun's variables"
else
    fail "torchrun's variables"; cat "$TMP/tr.0" "$TMP/tr.1"
fi

if timeout 60 "$DD_PYTHON" "$MP" errors >"$TMP/err" 2>&1; then
    pass "$(grep 'torch_mp: ' "$TMP/err" | sed 's/^torch_mp: //')"
else
    fail "errors"; sed 's/^/    /' "$TMP/err"
fi
finish
