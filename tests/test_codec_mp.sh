#!/bin/sh
# Compressed syncs with real processes through ddrun: under fp16, bf16 and
# topk:0.01, for ddp, localsgd:2 and dreamddp:2, on the allreduce route and
# in a job with 2 aggregators, the replicas are bit-identical after every
# averaging, fp16 and bf16 within their rounding of the exact average, and
# the wire carries at most 0.51 of the raw bytes (topk 0.03); a bad
# DREAMDDP_COMPRESSION fails dd_init naming it, and powersgd is refused.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
MP=$top_builddir/tests/mp_codec
export DREAMDDP_TIMEOUT_S=30 DREAMDDP_PROFILE_STEPS=3

for c in fp16 bf16 topk:0.01; do
    for s in ddp localsgd:2 dreamddp:2; do
        if DREAMDDP_COMPRESSION=$c "$DDRUN" -n 3 --timeout 120 -- "$MP" $s 8 >"$TMP/out" 2>&1; then
            expect_grep "$TMP/out" "mp_codec: $c $s: 8 steps bit-identical on 3 workers" "$c $s on 3 workers"
        else
            fail "$c $s on 3 workers"; cat "$TMP/out"
        fi
        if DREAMDDP_COMPRESSION=$c DREAMDDP_NUM_AGGREGATORS=2 "$DDRUN" -n 5 --timeout 120 -- "$MP" $s 8 >"$TMP/agg" 2>&1; then
            expect_grep "$TMP/agg" "mp_codec: $c $s: 8 steps bit-identical on 3 workers" "$c $s through 2 aggregators"
        else
            fail "$c $s through 2 aggregators"; cat "$TMP/agg"
        fi
    done
done

DREAMDDP_COMPRESSION=zip "$DDRUN" -n 1 -- "$MP" ddp 1 >"$TMP/bad" 2>&1
expect_grep "$TMP/bad" "invalid value DREAMDDP_COMPRESSION='zip': unknown codec, expected one of none, fp16, bf16, topk:RATIO" "a bad DREAMDDP_COMPRESSION is named"
DREAMDDP_COMPRESSION=powersgd:4 "$DDRUN" -n 1 -- "$MP" ddp 1 >"$TMP/psgd" 2>&1
expect_grep "$TMP/psgd" "invalid value DREAMDDP_COMPRESSION='powersgd:4': powersgd is not yet wired into the syncs" "powersgd is refused with a clear error"
finish
