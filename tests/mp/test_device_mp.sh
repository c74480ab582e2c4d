#!/bin/sh
# Device layers on the fake device (DREAMDDP_DEVICE=fake), with real
# processes through ddrun: readiness events that complete late, staging
# through pinned chunks (more chunks than DREAMDDP_STAGING_SLOTS) and the
# averages copied back give bit-exact averages under every strategy,
# among the workers and through two aggregators; a missed wait shows; a
# CUDA layer without a device module is an error naming it.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
MP=$top_builddir/tests/mp/mp_device
export DREAMDDP_DRIFT=yes DREAMDDP_TIMEOUT_S=30 DREAMDDP_PROFILE_STEPS=3 DREAMDDP_ADAPTIVE_INTERVAL=2
export DREAMDDP_DEVICE=fake DREAMDDP_STAGING_BYTES=16K DREAMDDP_STAGING_SLOTS=3

for s in ddp localsgd:2 plsgd:2 dreamddp:2 adaptive; do
    if "$DDRUN" -n 2 --timeout 120 -- "$MP" $s 6 >"$TMP/out" 2>&1; then
        expect_grep "$TMP/out" "mp_device: $s: 6 steps bit-exact on 2 workers" "$s: device layers among 2 workers"
    else
        fail "$s: device layers among 2 workers"; cat "$TMP/out"
    fi
    if DREAMDDP_NUM_AGGREGATORS=2 "$DDRUN" -n 4 --timeout 120 -- "$MP" $s 6 >"$TMP/agg" 2>&1; then
        expect_grep "$TMP/agg" "mp_device: $s: 6 steps bit-exact on 2 workers" "$s: device layers through 2 aggregators"
    else
        fail "$s: device layers through 2 aggregators"; cat "$TMP/agg"
    fi
done

# Three workers: a quotient that is not exact, rounded once.
if "$DDRUN" -n 3 --timeout 120 -- "$MP" dreamddp:2 4 >"$TMP/three" 2>&1; then
    expect_grep "$TMP/three" "mp_device: dreamddp:2: 4 steps bit-exact on 3 workers" "device layers among 3 workers"
else
    fail "device layers among 3 workers"; cat "$TMP/three"
fi

# Layers on device 1: the commit's broadcast and the syncs stage on the
# layers' device (the commit once staged on device 0, and the first sync
# then failed).
if MP_DEVICE_ORDINAL=1 "$DDRUN" -n 2 --timeout 120 -- "$MP" ddp 3 >"$TMP/dev1" 2>&1; then
    expect_grep "$TMP/dev1" "mp_device: ddp: 3 steps bit-exact on 2 workers" "device layers on device 1"
else
    fail "device layers on device 1"; cat "$TMP/dev1"
fi

# The check above can see a sync that does not wait for the stream.
if "$DDRUN" -n 2 --timeout 120 -- "$MP" nowait 3 >"$TMP/nowait" 2>&1; then
    expect_grep "$TMP/nowait" "mp_device: without the readiness event, stale data shows" "a sync that ignores the stream reads stale data"
else
    fail "nowait"; cat "$TMP/nowait"
fi

# The device sum (reduce_async) of every dtype.
if "$DDRUN" -n 1 --timeout 60 -- "$MP" sum >"$TMP/sum" 2>&1; then
    expect_grep "$TMP/sum" "mp_device: sum: every dtype exact" "the fake device's sum of every dtype"
else
    fail "the fake device's sum"; cat "$TMP/sum"
fi

DREAMDDP_DEVICE=none "$DDRUN" -n 1 -- "$MP" nomodule >"$TMP/none" 2>&1
expect_grep "$TMP/none" "dd_layer_register: layer 'conv1.weight' tensor 0 is in CUDA memory, but no device module is loaded (DREAMDDP_DEVICE=none" "a CUDA layer without a device module is an error naming it"

DREAMDDP_DEVICE=gpu "$DDRUN" -n 1 -- "$MP" nomodule >"$TMP/bad" 2>&1
expect_grep "$TMP/bad" "DREAMDDP_DEVICE" "a bad DREAMDDP_DEVICE is named"
finish
