#!/bin/sh
# Compressed syncs with real processes through ddrun: under fp16, bf16,
# topk:0.01 and powersgd:4, for ddp, localsgd:2 and dreamddp:2, on the
# allreduce route and in a job with 2 aggregators (topk also 3, where the
# workers home no chunk), the replicas are bit-identical after every
# averaging, fp16 and bf16 within their rounding of the exact average,
# topk equal to the average of what its own model of the codec says each
# rank sent (with error feedback: sent + residual = the changes), powersgd
# exact on layers of rank 2 and, once its error feedback has drained, on
# one of full rank; the wire carries at most 0.51 of the raw bytes (topk
# 0.03, or 0.03 (1 + workers) pushed and pulled through aggregators,
# powersgd 0.12); gradients near fp16's and bf16's largest value average
# to it, finite, on every route; a bad DREAMDDP_COMPRESSION fails dd_init
# naming it.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
MP=$top_builddir/tests/mp/mp_codec
export DREAMDDP_TIMEOUT_S=30 DREAMDDP_PROFILE_STEPS=3

for c in fp16 bf16 topk:0.01 powersgd:4; do
    n=8
    [ "$c" = powersgd:4 ] && n=48 # for its residual to drain
    for s in ddp localsgd:2 dreamddp:2; do
        if DREAMDDP_COMPRESSION=$c "$DDRUN" -n 3 --timeout 120 -- "$MP" $s $n >"$TMP/out" 2>&1; then
            expect_grep "$TMP/out" "mp_codec: $c $s: $n steps bit-identical on 3 workers" "$c $s on 3 workers"
        else
            fail "$c $s on 3 workers"; cat "$TMP/out"
        fi
        aggs=2
        [ "$c" = topk:0.01 ] && aggs="2 3" # its sparse pieces: k < n and k = n
        for k in $aggs; do
            if DREAMDDP_COMPRESSION=$c DREAMDDP_NUM_AGGREGATORS=$k "$DDRUN" -n $((3 + k)) --timeout 120 -- "$MP" $s $n >"$TMP/agg" 2>&1; then
                expect_grep "$TMP/agg" "mp_codec: $c $s: $n steps bit-identical on 3 workers" "$c $s through $k aggregators"
            else
                fail "$c $s through $k aggregators"; cat "$TMP/agg"
            fi
        done
    done
done

# Gradients at 0.6 of fp16's (and bf16's) largest value on every worker
# average to that value, finite, on the allreduce route (gloo and ucx:
# each worker divides before the ring sums) and through the aggregators.
for c in fp16 bf16; do
    for route in gloo ucx agg; do
        k=0 backends=$route
        [ $route = agg ] && k=2 backends=gloo,ucx
        if DREAMDDP_COMPRESSION=$c DREAMDDP_BACKENDS=$backends DREAMDDP_NUM_AGGREGATORS=$k \
            "$DDRUN" -n $((3 + k)) --timeout 60 -- "$MP" big 1 >"$TMP/big" 2>&1; then
            expect_grep "$TMP/big" "mp_codec: $c big:" "$c near its largest value: $route"
        else
            fail "$c near its largest value: $route"; cat "$TMP/big"
        fi
    done
done

# [SYNC] lines (per layer, at debug) and the timeline name the codec and
# the wire bytes; the 10-element layer stays dense.
if DREAMDDP_LOG_LEVEL=debug DREAMDDP_LOG_SUBSYS=sched DREAMDDP_COMPRESSION=bf16 \
    DREAMDDP_TIMELINE="$TMP/tl.%r.json" "$DDRUN" -n 2 --timeout 60 -- "$MP" localsgd:2 2 >"$TMP/log" 2>&1 &&
   python3 - "$TMP/tl.0.json" <<'PY'
import json, sys
syncs = [e for e in json.load(open(sys.argv[1])) if e.get("cat") == "sync"]
assert syncs, "no syncs"
for e in syncs:
    a = e["args"]
    want = a["bytes"] // 2 if a["codec"] == "bf16" else a["bytes"]
    assert a["codec"] in ("bf16", "none") and a["wire_bytes"] == want, a
assert any(e["args"]["codec"] == "none" for e in syncs), syncs
PY
then
    expect_grep "$TMP/log" "[SYNC] layer 'layer2' synced in" "[SYNC] lines with the codec"
    expect_grep "$TMP/log" "ms as bf16 (step 1)" "[SYNC] lines name the codec"
    expect_grep "$TMP/log" "[SYNC] layer 'layer1' synced in" "the dense layer syncs"
    grep "layer 'layer1' synced in" "$TMP/log" | grep -q "as none" && pass "the 10-element layer stays dense" || fail "the 10-element layer stays dense"
else
    fail "the timeline names the codec and the wire bytes"; cat "$TMP/log"
fi

DREAMDDP_COMPRESSION=zip "$DDRUN" -n 1 -- "$MP" ddp 1 >"$TMP/bad" 2>&1
expect_grep "$TMP/bad" "invalid value DREAMDDP_COMPRESSION='zip': unknown codec, expected one of none, fp16, bf16, topk:RATIO, powersgd:RANK" "a bad DREAMDDP_COMPRESSION is named"
DREAMDDP_COMPRESSION=powersgd:0 "$DDRUN" -n 1 -- "$MP" ddp 1 >"$TMP/psgd" 2>&1
expect_grep "$TMP/psgd" "invalid value DREAMDDP_COMPRESSION='powersgd:0': invalid codec spec 'powersgd:0': powersgd takes the rank of its factors, 1 to 1024" "a bad powersgd rank is named"
finish
