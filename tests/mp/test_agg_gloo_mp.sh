#!/bin/sh
# Aggregation with Gloo as the only backend, so that its send and recv carry
# every push and pull: 2 and 3 workers with 1 and 2 aggregators, over 1, 2
# and 4 streams, sum small layers and one of 8 MB, cut into pieces, exactly
# (f32); pieces of 2 MiB and more, whose tags spread them over the
# streams' contexts, too; every strategy runs over them; and homes that
# wait, idle, longer than DREAMDDP_TIMEOUT_S for the next push still sum it.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/mp/coll_lib.sh"
coll_require gloo
AGG=$top_builddir/tests/mp/mp_agg
SCHED=$top_builddir/tests/mp/mp_sched
DREAMDDP_BACKENDS=gloo DREAMDDP_TIMEOUT_S=10 DREAMDDP_PROFILE_STEPS=3
export DREAMDDP_BACKENDS DREAMDDP_TIMEOUT_S DREAMDDP_PROFILE_STEPS
sizes="1 7 1023 1024 1025 10243"

# agg_check WHAT WORKERS AGGREGATORS MP_AGG_ARGS...: the averages are exact.
agg_check() {
    what=$1; w=$2; k=$3; shift 3
    if timeout 150 "$DDRUN" -n $((w + k)) --aggregators $k --timeout 120 -- \
        "$AGG" check "$@" >"$TMP/out" 2>&1; then
        expect_grep "$TMP/out" "mp_agg: f32 averages exact on $w workers" "$what"
    else
        fail "$what"; sed 's/^/    /' "$TMP/out" | tail -20
    fi
}

for s in 1 2 4; do
    for w in 2 3; do
        for k in 1 2; do
            DREAMDDP_NUM_STREAMS=$s agg_check \
                "$s stream(s), $w workers + $k aggregator(s)" $w $k \
                f32 $sizes 2000003
        done
    done
done

# Gloo carried them, over the streams asked for.
if DREAMDDP_NUM_STREAMS=2 DREAMDDP_LOG_LEVEL=debug DREAMDDP_LOG_SUBSYS=agg,backend \
    timeout 150 "$DDRUN" -n 3 --aggregators 1 --timeout 120 -- \
    "$AGG" check f32 $sizes >"$TMP/log" 2>&1; then
    expect_grep "$TMP/log" "DEBUG agg: aggregation over gloo" "the pushes go over gloo"
    expect_grep "$TMP/log" "INFO backend: 2 streams per peer" "the backends were told 2 streams"
else
    fail "2 streams, logged"; sed 's/^/    /' "$TMP/log" | tail -20
fi

# Chunks of 4096 bytes: thousands of pieces, each a few messages.
DREAMDDP_CHUNK_BYTES=4096 agg_check "4096-byte chunks, 3 workers + 2 aggregators" \
    3 2 f32 $sizes

# 2 workers and 2 aggregators: 32 pieces (16 per home) of a 64 MiB layer,
# 2 MiB and 4 bytes each, within DREAMDDP_CHUNK_BYTES=4M.
for s in 1 2 4; do
    DREAMDDP_NUM_STREAMS=$s DREAMDDP_CHUNK_BYTES=4M agg_check \
        "$s stream(s), pieces of 2 MiB" 2 2 f32 7 16777217
done

# The homes keep the next pushes' receives posted while the workers pause
# for longer than the timeout: Gloo must not time them out (which would
# close every connection of its context).
MP_AGG_PAUSE_S=3 DREAMDDP_TIMEOUT_S=2 agg_check \
    "homes idle for longer than DREAMDDP_TIMEOUT_S" 2 2 f32 $sizes

for st in ddp dreamddp:2; do
    if DREAMDDP_CHUNK_BYTES=4096 timeout 150 "$DDRUN" -n 5 --aggregators 2 \
        --timeout 120 -- "$SCHED" $st 7 >"$TMP/sched" 2>&1; then
        expect_grep "$TMP/sched" "mp_sched: $st: 7 steps correct on 3 ranks" \
            "$st through 2 aggregators over gloo"
    else
        fail "$st through aggregators over gloo"; sed 's/^/    /' "$TMP/sched" | tail -20
    fi
done
finish
