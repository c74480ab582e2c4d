#!/bin/sh
# The divergence monitor with real processes through ddrun: exact figures
# for replicas set to known values (a layer split over an f32 and an f64
# message) on the allreduce route and through an aggregator; the agreed
# maximum is the largest of the workers' own figures for localsgd, plsgd,
# dreamddp and adaptive, dense and under fp16; exactly 0 under ddp; the
# [SYNC] line, the timeline's counter tracks and the warning; and
# adaptive:drift's periods follow the divergence, the same on every
# worker, with the replicas equal after every average.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
MP=$top_builddir/tests/mp/mp_drift
export DREAMDDP_DRIFT=yes DREAMDDP_TIMEOUT_S=30 DREAMDDP_PROFILE_STEPS=3

for n in 3 4; do
    if DREAMDDP_FUSION_BYTES=64 "$DDRUN" -n $n --timeout 60 -- "$MP" known >"$TMP/k" 2>&1; then
        expect_grep "$TMP/k" "over $n workers, exact" "known values on $n workers: exact divergence, maximum and mean"
    else
        fail "known values on $n workers"; cat "$TMP/k"
    fi
done
if DREAMDDP_NUM_AGGREGATORS=1 "$DDRUN" -n 4 --timeout 60 -- "$MP" known >"$TMP/ka" 2>&1; then
    expect_grep "$TMP/ka" "over 3 workers, exact" "known values through an aggregator: exact"
else
    fail "known values through an aggregator"; cat "$TMP/ka"
fi

for s in localsgd:2 plsgd:2 dreamddp:2 adaptive adaptive:drift; do
    if DREAMDDP_ADAPTIVE_INTERVAL=2 "$DDRUN" -n 3 --timeout 60 -- "$MP" cross $s 16 >"$TMP/c" 2>&1; then
        expect_grep "$TMP/c" "mp_drift: cross: $s:" "$s: the agreed maximum is the largest of the workers' figures"
    else
        fail "$s: agreed maximum"; cat "$TMP/c"
    fi
done
if DREAMDDP_COMPRESSION=fp16 DREAMDDP_NUM_AGGREGATORS=1 "$DDRUN" -n 4 --timeout 60 -- "$MP" cross localsgd:2 12 >"$TMP/cf" 2>&1; then
    expect_grep "$TMP/cf" "mp_drift: cross: localsgd:2:" "fp16 through an aggregator: the agreed maximum is the largest"
else
    fail "fp16 through an aggregator: agreed maximum"; cat "$TMP/cf"
fi

if "$DDRUN" -n 2 --timeout 60 -- "$MP" ddp 6 >"$TMP/d" 2>&1; then
    expect_grep "$TMP/d" "mp_drift: ddp: 6 steps, divergence exactly 0 after every sync" "ddp: divergence exactly 0"
else
    fail "ddp: divergence 0"; cat "$TMP/d"
fi

# At info, the window's [SYNC] line carries the agreed figures; the
# timeline has a counter track per layer; past DREAMDDP_DRIFT_WARN the first
# worker warns, naming the layer and the figures; DREAMDDP_DRIFT=no
# measures nothing.
if DREAMDDP_LOG_LEVEL=info DREAMDDP_LOG_SUBSYS=sched DREAMDDP_DRIFT_WARN=0.1 \
    DREAMDDP_TIMELINE="$TMP/tl.%r.json" "$DDRUN" -n 4 --timeout 60 -- "$MP" known >"$TMP/i" 2>&1 &&
   python3 - "$TMP/tl.0.json" <<'PY'
import json, sys
ev = [e for e in json.load(open(sys.argv[1])) if e.get("ph") == "C"]
names = {e["name"] for e in ev}
assert names == {"divergence mixed", "divergence big"}, names
last = [e for e in ev if e["name"] == "divergence mixed"][-1]["args"]
assert abs(last["local"] - 0.6) < 1e-12 and abs(last["max"] - 0.6) < 1e-12, last
assert abs(last["mean"] - 0.4) < 1e-12, last
PY
then
    expect_grep "$TMP/i" "[SYNC] step 3: 2 layer syncs" "[SYNC] line at info"
    expect_grep "$TMP/i" ", divergence max 0.6 (layer mixed) mean 0.4" "[SYNC] line carries the agreed divergence"
    expect_grep "$TMP/i" "layer 'mixed': divergence across workers 0.6 (mean 0.4) at step 2 is above DREAMDDP_DRIFT_WARN=0.1" "a warning names the layer and the figures"
    expect_grep "$TMP/i" "layer 'big': divergence across workers 0.6 (mean 0.4) at step 2 is above DREAMDDP_DRIFT_WARN=0.1" "the sampled layer's warning has the same figures"
    if [ "$(grep -c 'is above DREAMDDP_DRIFT_WARN' "$TMP/i")" = 2 ]; then
        pass "one warning per layer, from the first worker, for the layer's quiet windows"
    else
        fail "warnings"; grep WARN "$TMP/i"
    fi
else
    fail "[SYNC] line, timeline counters, warning"; cat "$TMP/i"
fi
if DREAMDDP_DRIFT=no "$DDRUN" -n 2 --timeout 60 -- "$MP" known >"$TMP/off" 2>&1; then
    fail "DREAMDDP_DRIFT=no still measured"; cat "$TMP/off"
else
    expect_grep "$TMP/off" "divergence 0, not" "DREAMDDP_DRIFT=no measures nothing"
fi

if DREAMDDP_ADAPTIVE_INTERVAL=2 DREAMDDP_ADAPTIVE_KSTART=4 DREAMDDP_ADAPTIVE_KMIN=1 \
    DREAMDDP_ADAPTIVE_KMAX=6 DREAMDDP_DRIFT_TARGET=0.02 \
    "$DDRUN" -n 2 --timeout 120 -- "$MP" adaptive >"$TMP/a" 2>&1; then
    expect_grep "$TMP/a" "mp_drift: adaptive:drift: periods 1 pushed apart, 6 left alone, replicas equal after every average" "adaptive:drift: periods follow the divergence"
else
    fail "adaptive:drift"; cat "$TMP/a"
fi

[ "$failures" -eq 0 ]
