#!/bin/sh
# The hierarchical route (DREAMDDP_ROUTE=hierarchical) on the fake device:
# 4 workers as 2 emulated hosts of 2 (DREAMDDP_HOST_ID, set by mp_device
# from MP_DEVICE_RANKS_PER_HOST) and 2 aggregators average device layers
# bit-exactly under ddp, localsgd:2 and dreamddp:2 (the hosts sum through
# IPC, the leaders through the aggregators, the average comes back through
# IPC; host layers go by the workers' allreduce); each worker maps its
# host's buffers once, not per step; uneven hosts with the leaders as homes
# too; without aggregators, the leaders' allreduce; host layers by the
# workers' allreduce; a bad value, ranks that disagree on the route, and a
# local peer that hangs or dies are errors naming what is at fault.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
MP=$top_builddir/tests/mp/mp_device
export DREAMDDP_DRIFT=yes DREAMDDP_TIMEOUT_S=30 DREAMDDP_PROFILE_STEPS=3
export DREAMDDP_DEVICE=fake DREAMDDP_STAGING_BYTES=16K DREAMDDP_STAGING_SLOTS=3
export DREAMDDP_ROUTE=hierarchical MP_DEVICE_RANKS_PER_HOST=2

for s in ddp localsgd:2 dreamddp:2; do
    if DREAMDDP_NUM_AGGREGATORS=2 DREAMDDP_LOG_LEVEL=info "$DDRUN" -n 6 --timeout 120 -- "$MP" $s 6 >"$TMP/out" 2>&1; then
        expect_grep "$TMP/out" "mp_device: $s: 6 steps bit-exact on 4 workers" "$s: 2 hosts of 2 workers and 2 aggregators, hierarchical"
        expect_grep "$TMP/out" "route hierarchical" "$s: the route in force is hierarchical"
        expect_grep "$TMP/out" "aggregator rank 4 serving 2 workers" "$s: the aggregators hear from the 2 leaders alone"
    else
        fail "$s: 2 hosts of 2 workers and 2 aggregators, hierarchical"; cat "$TMP/out"
    fi
done

# The IPC handles go through the store once, at commit: over 6 steps each
# worker maps one buffer (the leader its peer's, the peer its leader's).
if DREAMDDP_NUM_AGGREGATORS=2 DREAMDDP_LOG_LEVEL=debug "$DDRUN" -n 6 --timeout 120 -- "$MP" ddp 6 >"$TMP/ipc" 2>&1 &&
   grep -qF "mp_device: ddp: 6 steps bit-exact on 4 workers" "$TMP/ipc"; then
    n=$(grep -c "device fake: ipc_open" "$TMP/ipc")
    if [ "$n" -eq 4 ]; then
        pass "IPC handles are opened once per worker (4 over 6 steps)"
    else
        fail "IPC handles: $n ipc_open calls over 6 steps, expected 4"
        grep "ipc_open" "$TMP/ipc"
    fi
    for r in 0 1 2 3; do
        expect_grep "$TMP/ipc" "$r: [rank $r] dreamddp INFO sched: hierarchical route: local rank $((r % 2)) of 2 workers on this host (leader rank $((r - r % 2)))" "rank $r's host group"
    done
else
    fail "hierarchical ddp with debug logs"; cat "$TMP/ipc"
fi

# Uneven hosts (2 + 1 workers) and one aggregator: the leaders are homes
# for half the bytes, and their host sums meet the lone worker's.
if DREAMDDP_NUM_AGGREGATORS=1 "$DDRUN" -n 4 --timeout 120 -- "$MP" dreamddp:2 6 >"$TMP/uneven" 2>&1; then
    expect_grep "$TMP/uneven" "mp_device: dreamddp:2: 6 steps bit-exact on 3 workers" "hosts of 2 and 1 workers, one aggregator"
else
    fail "hosts of 2 and 1 workers, one aggregator"; cat "$TMP/uneven"
fi

# Without aggregators the leaders' sums meet in an allreduce of their own
# (2 hosts of 2; and 3 hosts of 2, 2 and 1).
for s in ddp localsgd:2 dreamddp:2; do
    if DREAMDDP_LOG_LEVEL=info "$DDRUN" -n 4 --timeout 120 -- "$MP" $s 6 >"$TMP/lead" 2>&1; then
        expect_grep "$TMP/lead" "mp_device: $s: 6 steps bit-exact on 4 workers" "$s: 2 hosts of 2 workers, no aggregators: the leaders' allreduce"
        expect_grep "$TMP/lead" "the hosts' sums through the leaders' allreduce" "$s: the leaders' allreduce is the one in force"
    else
        fail "$s: 2 hosts of 2 workers, no aggregators"; cat "$TMP/lead"
    fi
done
if "$DDRUN" -n 5 --timeout 120 -- "$MP" localsgd:2 6 >"$TMP/lead3" 2>&1; then
    expect_grep "$TMP/lead3" "mp_device: localsgd:2: 6 steps bit-exact on 5 workers" "3 hosts of 2, 2 and 1 workers, no aggregators"
else
    fail "3 hosts of 2, 2 and 1 workers, no aggregators"; cat "$TMP/lead3"
fi

# Host layers (and a job without a device module) go by the workers'
# allreduce, as a log line says, and stay exact.
if DREAMDDP_DEVICE=none DREAMDDP_NUM_AGGREGATORS=2 DREAMDDP_LOG_LEVEL=info \
    "$DDRUN" -n 6 --timeout 120 -- "$top_builddir/tests/mp/mp_sched" dreamddp:2 6 >"$TMP/host" 2>&1; then
    expect_grep "$TMP/host" "mp_sched: dreamddp:2: 6 steps correct on 4 ranks" "host layers under hierarchical: exact"
    expect_grep "$TMP/host" "DREAMDDP_ROUTE=hierarchical: 5 layers in host memory (first 'layer0') travel by the workers' allreduce" "host layers under hierarchical: the log line says where they go"
else
    fail "host layers under hierarchical"; cat "$TMP/host"
fi

# A bad value is named with what is accepted.
DREAMDDP_ROUTE=hier "$DDRUN" -n 1 --timeout 60 -- "$MP" ddp 1 >"$TMP/bad" 2>&1
expect_grep "$TMP/bad" "invalid value DREAMDDP_ROUTE='hier': expected one of auto, allreduce, aggregate, hierarchical" "a bad DREAMDDP_ROUTE is named, with hierarchical among the accepted values"

# Every rank, aggregators too, must agree on it.
MP_DEVICE_RANK0_ROUTE=aggregate DREAMDDP_NUM_AGGREGATORS=2 "$DDRUN" -n 6 --timeout 60 -- "$MP" ddp 2 >"$TMP/disagree" 2>&1
expect_grep "$TMP/disagree" "ranks disagree on DREAMDDP_ROUTE=hierarchical: rank 0 has another route" "ranks that disagree on the route are named"

# A local peer that hangs in backward: its leader names it and the layer.
MP_DEVICE_ALL_ON_DEVICE=1 MP_DEVICE_DIE_RANK=3 MP_DEVICE_STALL_S=15 DREAMDDP_TIMEOUT_S=6 DREAMDDP_DRIFT=no \
    DREAMDDP_NUM_AGGREGATORS=2 timeout 60 "$DDRUN" -n 6 --timeout 50 -- "$MP" ddp 6 >"$TMP/stall" 2>&1
expect_grep "$TMP/stall" "rank 2: local peer rank 3: no readiness of layer 'dev2' at step 2 within 5 s" "a hanging local peer is named with its layer"

# A local peer that dies: its leader names it (its pid from the host's
# flags) and the layer it waited for, and every rank fails, none hangs.
# Started by hand: ddrun would stop the others at the first exit. The
# store's watch may name the lost rank first on a loaded machine; either
# way rank 3 is named.
MP_DEVICE_ALL_ON_DEVICE=1 MP_DEVICE_DIE_RANK=3 DREAMDDP_TIMEOUT_S=20 DREAMDDP_DRIFT=no \
    DREAMDDP_NUM_AGGREGATORS=2 launch 6 "$TMP/die" timeout 60 "$MP" ddp 6
if grep -qE "local peer rank 3 \(pid [0-9]+\) died while waiting for its readiness of layer 'dev[0-9]' at step 2" "$TMP/die.2"; then
    pass "a local peer that dies is named by its leader, with the layer"
elif grep -qF "rank 3 was lost" "$TMP/die.2"; then
    pass "a local peer that dies is named (by the store's watch)"
else
    fail "a local peer that dies is not named"; cat "$TMP/die.2"
fi
for r in 0 1 2 4 5; do
    [ "$(cat "$TMP/die.$r.rc")" != 0 ] && [ "$(cat "$TMP/die.$r.rc")" != 124 ] ||
        fail "rank $r did not fail by itself once rank 3 died (exit $(cat "$TMP/die.$r.rc"))"
done
finish
