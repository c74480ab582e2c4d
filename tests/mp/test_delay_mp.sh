#!/bin/sh
# Delayed averaging ("+next") with real processes through ddrun: a replica
# that took local steps while its sync was in flight ends equal to the
# reference, average(x at launch) + (x now - x at launch), on both routes,
# with and without forward marks, dense and through a codec, whole layers
# and layers in parts, host and device layers; dd_sync_all leaves the
# replicas bit-identical; a sync that misses its deadline is waited for
# there, never skipped, while dd_step_end does not wait for it.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
MP=$top_builddir/tests/mp/mp_delay
export DREAMDDP_TIMEOUT_S=30 DREAMDDP_PROFILE_STEPS=2

run_case() { # WHAT N STRATEGY STEPS MARKS [VAR=VALUE...]
    what=$1 n=$2 s=$3 steps=$4 marks=$5
    shift 5
    if env "$@" timeout 150 "$DDRUN" -n "$n" --timeout 120 -- "$MP" "$s" "$steps" "$marks" >"$TMP/out" 2>&1; then
        expect_grep "$TMP/out" "mp_delay: $s $marks: $steps steps equal to the reference on" "$what"
    else
        fail "$what"; cat "$TMP/out"
    fi
}

for s in plsgd:1+next dreamddp:1+next localsgd:1+next plsgd:2+next dreamddp:4+next; do
    run_case "$s, forward marks, 2 ranks" 2 $s 9 marks
    run_case "$s, no marks, 2 ranks" 2 $s 9 nomarks
done
# The syncs leaving after each layer's backward (DREAMDDP_NEXT_LAUNCH=
# backward) instead of at dd_step_begin or at the forward mark.
for s in plsgd:1+next dreamddp:4+next; do
    run_case "$s, syncs after backward, forward marks" 2 $s 9 marks DREAMDDP_NEXT_LAUNCH=backward
    run_case "$s, syncs after backward, no marks" 2 $s 9 nomarks DREAMDDP_NEXT_LAUNCH=backward
done
run_case "dreamddp:2+next on 4 ranks" 4 dreamddp:2+next 7 marks
run_case "localsgd:2+next on 1 rank" 1 localsgd:2+next 5 nomarks
run_case "plsgd:1+next through 1 aggregator" 3 plsgd:1+next 6 marks DREAMDDP_NUM_AGGREGATORS=1
run_case "dreamddp:2+next through 2 aggregators" 4 dreamddp:2+next 7 nomarks DREAMDDP_NUM_AGGREGATORS=2
run_case "plsgd:1+next with fp16" 2 plsgd:1+next 6 marks DREAMDDP_COMPRESSION=fp16
run_case "dreamddp:2+next with fp16 through an aggregator" 3 dreamddp:2+next 6 nomarks \
    DREAMDDP_COMPRESSION=fp16 DREAMDDP_NUM_AGGREGATORS=1
run_case "dreamddp:2+next, small fusion limit" 2 dreamddp:2+next 7 marks DREAMDDP_FUSION_BYTES=64

# Layers in parts (DREAMDDP_LAYER_SPLIT): layer1 (280 kB) syncs as 5
# parts, each landing on its own and every element as the reference says.
split_case() { # WHAT N STRATEGY STEPS MARKS [VAR=VALUE...]
    what=$1
    run_case "$@" DREAMDDP_LAYER_SPLIT=64K
    expect_grep "$TMP/out" "mp_delay: layer1 in 5 parts, layer1#0 first" "$what: cut in 5 parts"
}
split_case "dreamddp:4+next in parts, forward marks" 2 dreamddp:4+next 9 marks
split_case "dreamddp:4+next in parts, no marks" 2 dreamddp:4+next 9 nomarks
split_case "plsgd:2+next in parts on 4 ranks" 4 plsgd:2+next 7 nomarks
split_case "dreamddp:2+next in parts with fp16 through 2 aggregators" 4 dreamddp:2+next 7 marks \
    DREAMDDP_COMPRESSION=fp16 DREAMDDP_NUM_AGGREGATORS=2

# Device layers (the fake device): layers 1 and 2 in its memory, their
# copies at the launch and their landings queued on the application's
# stream behind a long "kernel", their optimizer's step queued there
# without a wait; staged in chunks of 16 KiB, three in flight.
device_case() { # WHAT N STRATEGY STEPS MARKS stream|plain [VAR=VALUE...]
    what=$1 mode=$6
    n=$2 s=$3 steps=$4 marks=$5
    shift 6
    run_case "$what" $n $s $steps $marks DREAMDDP_DEVICE=fake MP_DELAY_DEVICE=$mode \
        DREAMDDP_STAGING_BYTES=16K DREAMDDP_STAGING_SLOTS=3 "$@"
    if [ "$mode" = stream ]; then
        expect_grep "$TMP/out" "layers 1 and 2 on the device's stream" "$what: on the device's stream"
    else
        expect_grep "$TMP/out" "layers 1 and 2 on the device, final when marked" "$what: final when marked"
    fi
}
# Under plsgd:1+next each device layer lands and launches in every step.
device_case "plsgd:1+next, device layers, forward marks" 2 plsgd:1+next 7 marks stream
device_case "plsgd:1+next, device layers, no marks" 2 plsgd:1+next 7 nomarks stream
device_case "dreamddp:2+next, device layers on 3 ranks" 3 dreamddp:2+next 9 marks stream
device_case "dreamddp:2+next, device layers through 2 aggregators" 4 dreamddp:2+next 7 nomarks stream \
    DREAMDDP_NUM_AGGREGATORS=2
device_case "dreamddp:2+next, device layers final when marked" 2 dreamddp:2+next 9 marks plain
device_case "plsgd:1+next, device layers final when marked, no marks" 2 plsgd:1+next 7 nomarks plain
if DREAMDDP_DEVICE=fake MP_DELAY_DEVICE=stream DREAMDDP_ROUTE=hierarchical timeout 60 "$DDRUN" -n 2 --timeout 30 -- "$MP" dreamddp:2+next 1 marks >"$TMP/hier" 2>&1; then
    fail "device layers under +next over the hierarchical route accepted"
else
    expect_grep "$TMP/hier" "layer 'layer1' tensor 0 is in device memory, and dreamddp:2+next does not average device layers over DREAMDDP_ROUTE=hierarchical" "device layers under +next over the hierarchical route are refused, named"
fi

# A late peer: rank 1 launches layer 0's sync 1.5 s late in step 0, its
# step starting late, or, with the syncs leaving after backward, its
# backward; with the syncs leaving at dd_step_begin (early, the default),
# a slow backward delays nothing.
slow_case() { # WHAT MARKS [VAR=VALUE...]
    what=$1 marks=$2
    shift 2
    if env MP_DELAY_SLOW=1.5 "$@" timeout 150 "$DDRUN" -n 2 --timeout 120 -- "$MP" plsgd:1+next 4 $marks >"$TMP/slow" 2>&1 &&
       grep -q "mp_delay: plsgd:1+next $marks: 4 steps equal to the reference" "$TMP/slow"; then
        pass "$what ($marks): $(grep 'step end' "$TMP/slow")"
    else
        fail "$what ($marks)"; cat "$TMP/slow"
    fi
}
for marks in marks nomarks; do
    slow_case "a sync launched late is waited for at its deadline" $marks MP_DELAY_SLOW_AT=begin
    slow_case "a sync launched late after backward is waited for at its deadline" $marks \
        DREAMDDP_NEXT_LAUNCH=backward
    slow_case "a slow backward does not delay a sync that left at dd_step_begin" $marks
done

# train_mlp with and without its forward marks: the same bytes move (no
# bubble filling, whose extras follow the measured times), but without
# marks each average lands at the layer's next backward, after the next
# forward has read the weights, so the losses differ.
MLP="$top_builddir/examples/train_mlp --strategy dreamddp:2+next --steps 24 --json"
if DREAMDDP_FILL_BUBBLES=no "$DDRUN" -n 2 --timeout 120 -- $MLP >"$TMP/mlpm" 2>&1 &&
   DREAMDDP_FILL_BUBBLES=no "$DDRUN" -n 2 --timeout 120 -- $MLP --no-forward-marks >"$TMP/mlpn" 2>&1 &&
   python3 - "$TMP/mlpm" "$TMP/mlpn" <<'PY'
import json, re, sys
m, n = (json.loads(re.search(r"^0: (\{.*\})$", open(p).read(), re.M).group(1))
        for p in sys.argv[1:])
assert m["forward_marks"] is True and n["forward_marks"] is False, (m, n)
assert m["synced_bytes"] == n["synced_bytes"] > 0, (m, n)
assert m["extra_bytes"] == n["extra_bytes"] == 0, (m, n)
assert m["final_loss"] != n["final_loss"], (m, n)
PY
then
    pass "train_mlp --no-forward-marks: the same bytes, the averages land later"
else
    fail "train_mlp with and without forward marks"; cat "$TMP/mlpm" "$TMP/mlpn"
fi

# The option's errors: a bad spec names what is accepted; an integer
# layer is refused at commit, naming it.
if DREAMDDP_STRATEGY=dreamddp:4+later timeout 60 "$DDRUN" -n 1 --timeout 30 -- "$MP" dreamddp:4 1 marks >"$TMP/bad" 2>&1; then
    fail "DREAMDDP_STRATEGY=dreamddp:4+later accepted"
else
    expect_grep "$TMP/bad" "invalid value DREAMDDP_STRATEGY='dreamddp:4+later': expected ddp, localsgd:H, plsgd:H, dreamddp:H (H from 1 to 1024, each also with '+next'" "a bad +next spec names the variable and what is accepted"
fi
if MP_DELAY_I32=1 timeout 60 "$DDRUN" -n 2 --timeout 30 -- "$MP" dreamddp:2+next 1 marks >"$TMP/i32" 2>&1; then
    expect_grep "$TMP/i32" "mp_delay: commit refused: dd_model_commit: layer 'counts' tensor 0 is host i32; dreamddp:2+next averages f32 and f64 tensors only, on the host or a device" "an int32 layer is refused under +next, named"
else
    fail "an int32 layer under +next"; cat "$TMP/i32"
fi
if timeout 60 "$DDRUN" -n 1 --timeout 30 -- "$MP" ddp+next 1 marks >"$TMP/bad2" 2>&1; then
    fail "ddp+next accepted"
else
    expect_grep "$TMP/bad2" "dd_strategy_set: invalid strategy 'ddp+next'" "ddp+next is refused"
fi

finish
