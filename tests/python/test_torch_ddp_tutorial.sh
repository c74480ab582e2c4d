#!/bin/sh
# PyTorch's DDP tutorial script (examples/torch_ddp_tutorial.py:
# init_process_group("gloo"), LOCAL_RANK from the environment,
# DistributedSampler, a metric all_reduce and barrier) with its DDP(...) line
# changed to DreamDDP(...), torch.distributed kept: under ddp its final
# parameters equal PyTorch DDP's on the same batches, bit for bit, on 2
# workers, launched by ddrun, "as torchrun would launch it", and with an
# aggregator rank in the world (ddrun -n 3 --aggregators 1).
#
# torchrun itself is not run: Debian's torchrun cannot start workers on
# this Python, so a shell loop sets, for each process, what torchrun sets
# (RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT,
# TORCHELASTIC_RUN_ID, GROUP_RANK, ROLE_RANK), with no DREAMDDP_* variable.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/python/torch_lib.sh"
unset DREAMDDP_STRATEGY
SCRIPT=$top_srcdir/examples/torch_ddp_tutorial.py

# ddrun_run NAME N ARGS...: N processes under ddrun; rank 0's parameters in
# $TMP/NAME.pt.
ddrun_run() {
    name=$1; n=$2; shift 2
    if "$DDRUN" -n "$n" --timeout 120 "$@" -- "$DDTEST_PYTHON" "$SCRIPT" \
        --out "$TMP/$name.pt" $extra >"$TMP/$name.out" 2>&1 &&
        [ -f "$TMP/$name.pt" ]; then
        pass "$name ran: $(grep -m1 'epoch 1' "$TMP/$name.out" | sed 's/^0: //')"
    else
        fail "$name"; sed 's/^/    /' "$TMP/$name.out"
    fi
}

# torchrun_run NAME N ARGS...: N processes with torchrun's variables.
torchrun_run() {
    name=$1; n=$2; shift 2
    port=$(free_port_pair)
    pids=""
    r=0
    while [ "$r" -lt "$n" ]; do
        env -u DREAMDDP_RANK -u DREAMDDP_WORLD_SIZE -u DREAMDDP_MASTER_PORT \
            RANK=$r LOCAL_RANK=$r GROUP_RANK=0 ROLE_RANK=$r WORLD_SIZE=$n \
            LOCAL_WORLD_SIZE=$n MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
            TORCHELASTIC_RUN_ID=tutorial-$port \
            timeout 120 "$DDTEST_PYTHON" "$SCRIPT" --out "$TMP/$name.pt" "$@" \
            >"$TMP/$name.$r.out" 2>&1 &
        pids="$pids $!"
        r=$((r + 1))
    done
    rc=0
    for p in $pids; do wait "$p" || rc=1; done
    if [ "$rc" -eq 0 ] && [ -f "$TMP/$name.pt" ]; then
        pass "$name ran: $(grep -m1 'epoch 1' "$TMP/$name.0.out")"
    else
        fail "$name"; for f in "$TMP/$name".*.out; do sed 's/^/    /' "$f"; done
    fi
}

# same A B: rank 0's parameters of runs A and B are bitwise equal.
same() {
    if "$DDTEST_PYTHON" -c '
import sys, torch
a, b = torch.load(sys.argv[1]), torch.load(sys.argv[2])
diff = max((a[k] - b[k]).abs().max().item() for k in a)
print("max difference %g" % diff)
sys.exit(0 if a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a) else 1)
' "$TMP/$1.pt" "$TMP/$2.pt" >"$TMP/cmp" 2>&1; then
        pass "$2's parameters equal $1's bitwise"
    else
        fail "$2's parameters differ from $1's: $(cat "$TMP/cmp")"
    fi
}

extra="--baseline torch-ddp"
ddrun_run ddp-ddrun 2
extra="--strategy ddp"
ddrun_run dreamddp-ddrun 2
ddrun_run dreamddp-agg 3 --aggregators 1
torchrun_run dreamddp-torchrun 2 --strategy ddp
for run in dreamddp-ddrun dreamddp-agg dreamddp-torchrun; do
    [ -f "$TMP/$run.pt" ] && [ -f "$TMP/ddp-ddrun.pt" ] && same ddp-ddrun "$run"
done
finish
