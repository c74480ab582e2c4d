#!/bin/sh
# Settings that shape the syncs are agreed at dd_model_commit: when one rank
# differs, every rank fails the commit with the same message naming the
# variable, the values and the ranks, and no rank trains. Ranks out of step
# later fail their next collective, never summing it. Ranks are started
# by hand (launch), so each may have its own environment.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
MP=$top_builddir/tests/mp/mp_sched
export DREAMDDP_TIMEOUT_S=20 DREAMDDP_PROFILE_STEPS=3

# mismatch WHAT ODD_RANK ODD_SETTING EXPECTED [SHARED_SETTING...]: four
# ranks share SHARED_SETTING, ODD_RANK has ODD_SETTING on top.
mismatch() {
    what=$1; odd=$2; setting=$3; expected=$4; shift 4
    launch 4 "$TMP/mm" env "$@" ODD="$odd" SETTING="$setting" \
        timeout 60 sh -c 'if [ "$DREAMDDP_RANK" = "$ODD" ]; then export "$SETTING"; fi
                          exec "$0" env 8' "$MP"
    for r in 0 1 2 3; do
        if [ "$(cat "$TMP/mm.$r.rc")" = 0 ]; then
            fail "$what: rank $r exited with success"; cat "$TMP/mm.$r"
        fi
        expect_grep "$TMP/mm.$r" "$expected" "$what: rank $r names it"
        if grep -q "steps correct" "$TMP/mm.$r"; then
            fail "$what: rank $r trained"
        fi
    done
}

mismatch "window" 3 DREAMDDP_STRATEGY=localsgd:2 \
    "DREAMDDP_STRATEGY differs: rank 0..2 'localsgd:4', rank 3 'localsgd:2'" \
    DREAMDDP_STRATEGY=localsgd:4
mismatch "ddp against localsgd:1" 0 DREAMDDP_STRATEGY=ddp \
    "DREAMDDP_STRATEGY differs: rank 0 'ddp', rank 1..3 'localsgd:1'" \
    DREAMDDP_STRATEGY=localsgd:1
mismatch "ddp against dreamddp" 2 DREAMDDP_STRATEGY=ddp \
    "DREAMDDP_STRATEGY differs: rank 0, 1, 3 'dreamddp:4', rank 2 'ddp'" \
    DREAMDDP_STRATEGY=dreamddp:4
mismatch "fusion" 2 DREAMDDP_FUSION_BYTES=64 \
    "DREAMDDP_FUSION_BYTES differs: rank 0, 1, 3 '1048576', rank 2 '64'" \
    DREAMDDP_STRATEGY=dreamddp:2
mismatch "buckets" 1 DREAMDDP_BUCKET_BYTES=1M \
    "DREAMDDP_BUCKET_BYTES differs: rank 0, 2, 3 '26214400', rank 1 '1048576'" \
    DREAMDDP_STRATEGY=ddp
mismatch "first bucket" 3 DREAMDDP_FIRST_BUCKET_BYTES=4K \
    "DREAMDDP_FIRST_BUCKET_BYTES differs: rank 0..2 '1048576', rank 3 '4096'" \
    DREAMDDP_STRATEGY=ddp
mismatch "profile steps" 3 DREAMDDP_PROFILE_STEPS=7 \
    "DREAMDDP_PROFILE_STEPS differs: rank 0..2 '3', rank 3 '7'" \
    DREAMDDP_STRATEGY=dreamddp:4
mismatch "compression" 0 DREAMDDP_COMPRESSION=fp16 \
    "DREAMDDP_COMPRESSION differs: rank 0 'fp16', rank 1..3 'none'" \
    DREAMDDP_STRATEGY=localsgd:2
# auto resolves under the strategy: under +next, parts of the model over
# 2H, at least 4 MiB.
mismatch "layer parts under +next" 1 DREAMDDP_LAYER_SPLIT=64K \
    "DREAMDDP_LAYER_SPLIT differs: rank 0, 2, 3 '4194304', rank 1 '65536'" \
    DREAMDDP_STRATEGY=dreamddp:4+next
mismatch "route" 1 DREAMDDP_ROUTE=allreduce \
    "DREAMDDP_ROUTE differs: rank 0, 2, 3 'auto', rank 1 'allreduce'" \
    DREAMDDP_STRATEGY=ddp

# The mismatch is the job's fault: an aggregator (rank 4) stops naming it
# too, and when rank 0, which hosts the store, exits on the error without
# dd_finalize, the others still name the mismatch (not a lost rank 0).
for quit in none 0; do
    launch 5 "$TMP/mq" env DREAMDDP_NUM_AGGREGATORS=1 MP_EXIT_RANK=$quit DREAMDDP_STRATEGY=localsgd:4 \
        timeout 60 sh -c 'if [ "$DREAMDDP_RANK" = 1 ]; then export DREAMDDP_STRATEGY=localsgd:2; fi
                          exec "$0" env 8' "$MP"
    for r in 0 1 2 3 4; do
        [ "$r" = "$quit" ] && continue
        if [ "$(cat "$TMP/mq.$r.rc")" = 0 ]; then
            fail "mismatch, rank $quit quits: rank $r exited with success"; cat "$TMP/mq.$r"
        fi
        expect_grep "$TMP/mq.$r" "DREAMDDP_STRATEGY differs: rank 0, 2, 3 'localsgd:4', rank 1 'localsgd:2'" \
            "mismatch, rank $quit quits: rank $r names it"
    done
done

# Ranks out of step: one rank makes an extra call after step 1. Its
# collective meets the others' next sync; the digest before every
# collective fails it on every rank, naming what each rank was running.
# out_of_step WHAT SPEC STRATEGY EXPECTED...
out_of_step() {
    what=$1; spec=$2; strategy=$3; shift 3
    launch 4 "$TMP/os" env DREAMDDP_STRATEGY=$strategy MP_OUT_OF_STEP=$spec \
        timeout 60 "$MP" env 8
    for r in 0 1 2 3; do
        if [ "$(cat "$TMP/os.$r.rc")" = 0 ]; then
            fail "$what: rank $r exited with success"; cat "$TMP/os.$r"
        fi
        expect_grep "$TMP/os.$r" "workers out of step at their collective" "$what: rank $r fails"
        for e in "$@"; do
            expect_grep "$TMP/os.$r" "$e" "$what: rank $r names it"
        done
    done
}
out_of_step "an extra allreduce" 2:allreduce ddp \
    "rank 2 'step 2, allreduce of 8 f32 (sum)'" \
    "rank 0, 1, 3 'step 2, average of "
out_of_step "an extra sync_all" 1:sync_all localsgd:4 \
    "rank 0, 2, 3 'step 3, average of " \
    "rank 1 'step 2, average of "

# A sync_all against a ddp step of the same layers: the digest says what
# each averages, so the parameters are never summed with gradients.
out_of_step "a sync_all against a ddp step" 1:sync_all ddp \
    "rank 1 'step 2, average of 70033 f32 parameters (dd_sync_all) (layers 'layer4', 'layer3')'" \
    "rank 0, 2, 3 'step 2, average of 70033 f32 gradients (layers 'layer4', 'layer3')'"

# The same through an aggregator: the headers carry the message's digest,
# and a home sums no chunk whose pushes differ in it.
launch 4 "$TMP/ag" env DREAMDDP_STRATEGY=ddp DREAMDDP_NUM_AGGREGATORS=1 \
    MP_OUT_OF_STEP=1:sync_all timeout 60 "$MP" env 8
for r in 0 1 2 3; do
    if [ "$(cat "$TMP/ag.$r.rc")" = 0 ]; then
        fail "a sync_all against a ddp step, aggregators: rank $r exited with success"
        cat "$TMP/ag.$r"
    fi
    # The aggregator (rank 3) may first hear it from a worker that gave
    # up, in a header's 160 bytes.
    if [ "$r" = 3 ]; then
        expect_grep "$TMP/ag.$r" "elements) where rank" \
            "a sync_all against a ddp step, aggregators: rank $r names it"
    else
        expect_grep "$TMP/ag.$r" "pushed another chunk or another kind of sync (never summed)" \
            "a sync_all against a ddp step, aggregators: rank $r names it"
    fi
    if grep -q "is not the average" "$TMP/ag.$r"; then
        fail "a sync_all against a ddp step, aggregators: rank $r summed them"
    fi
done

# A worker that stops one step early and finalizes: the others, waiting
# in the step it never runs, stop within a few watch periods (not at
# DREAMDDP_TIMEOUT_S, 20 s here), every rank naming it.
for strategy in ddp localsgd:4; do
    t0=$(date +%s.%N)
    launch 4 "$TMP/le" env DREAMDDP_STRATEGY=$strategy MP_LEAVE_EARLY=2 \
        timeout 60 "$MP" env 8
    dt=$(echo "$(date +%s.%N) - $t0" | bc)
    echo "uneven: $strategy: every rank exited $dt s after the launch"
    for r in 0 1 2 3; do
        if [ "$(cat "$TMP/le.$r.rc")" = 0 ]; then
            fail "uneven $strategy: rank $r exited with success"; cat "$TMP/le.$r"
        fi
        expect_grep "$TMP/le.$r" "job aborted: uneven steps: rank 2 left the job (dd_finalize) after 7 steps" \
            "uneven $strategy: rank $r names the worker that left"
    done
    if [ "$(echo "$dt < 12" | bc)" != 1 ]; then
        fail "uneven $strategy: $dt s, near DREAMDDP_TIMEOUT_S (20 s)"
    fi
done

# The same settings on every rank still train, through the same path.
launch 4 "$TMP/ok" env DREAMDDP_STRATEGY=localsgd:4 timeout 60 "$MP" env 8
expect_grep "$TMP/ok.0" "mp_sched: localsgd:4: 8 steps correct on 4 ranks" "equal settings train"
finish
