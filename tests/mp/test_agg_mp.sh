#!/bin/sh
# Aggregation with real processes through ddrun: 1 to 4 workers with 1 to 4
# aggregators sum layers of 1, 7, chunk - 1, chunk, chunk + 1 and several
# chunks, in f32 (exactly), f16 and bf16; every strategy runs over them;
# an aggregator or a worker that leaves, and a malformed or duplicated
# message, fail the others within the timeout, naming the rank, and leave
# their buffers untouched.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
AGG=$top_builddir/tests/mp/mp_agg
SCHED=$top_builddir/tests/mp/mp_sched
export DREAMDDP_TIMEOUT_S=10 DREAMDDP_CHUNK_BYTES=4096 DREAMDDP_PROFILE_STEPS=3
sizes="1 7 1023 1024 1025 10243"

for w in 1 2 3 4; do
    for k in 1 2 3 4; do
        if "$DDRUN" -n $((w + k)) --aggregators $k --timeout 60 -- \
            "$AGG" check f32 $sizes >"$TMP/out" 2>&1; then
            expect_grep "$TMP/out" "mp_agg: f32 averages exact on $w workers" "f32, $w workers + $k aggregators"
        else
            fail "f32, $w workers + $k aggregators"; cat "$TMP/out"
        fi
    done
done
for dt in f16 bf16; do
    if "$DDRUN" -n 6 --aggregators 2 --timeout 60 -- "$AGG" check $dt $sizes >"$TMP/out" 2>&1; then
        expect_grep "$TMP/out" "mp_agg: $dt averages exact on 4 workers" "$dt, 4 workers + 2 aggregators"
    else
        fail "$dt"; cat "$TMP/out"
    fi
done

# With 2 streams (the workers' Gloo instance opens two contexts and cuts
# its large collectives across them) the route stays exact.
if DREAMDDP_NUM_STREAMS=2 DREAMDDP_CHUNK_BYTES=1M DREAMDDP_LOG_LEVEL=info \
    DREAMDDP_LOG_SUBSYS=backend "$DDRUN" -n 5 --aggregators 2 --timeout 60 -- \
    "$AGG" check f32 $sizes 2000003 >"$TMP/out" 2>&1; then
    expect_grep "$TMP/out" "mp_agg: f32 averages exact on 3 workers" "2 streams, 3 workers + 2 aggregators"
    expect_grep "$TMP/out" "INFO backend: 2 streams per peer" "the backends were told 2 streams"
else
    fail "2 streams, 3 workers + 2 aggregators"; cat "$TMP/out"
fi

# Under DREAMDDP_CHUNK_BYTES a message is cut finer, so that n workers' pieces
# meeting at a home hold 512 KiB, at most 64 KiB each (3 workers: 64 KiB):
# 20000 elements are a piece of 16384 and one of 3616, 300001 and 2000003
# 19 and 123 pieces, the last one short.
if DREAMDDP_CHUNK_BYTES=1M "$DDRUN" -n 5 --aggregators 2 --timeout 60 -- \
    "$AGG" check f32 20000 300001 2000003 >"$TMP/out" 2>&1; then
    expect_grep "$TMP/out" "mp_agg: f32 averages exact on 3 workers" "small messages spread over every home"
else
    fail "small messages spread over every home"; cat "$TMP/out"
fi

for s in ddp localsgd:2 plsgd:2 dreamddp:2 adaptive; do
    if "$DDRUN" -n 5 --aggregators 2 --timeout 90 -- "$SCHED" $s 7 >"$TMP/out" 2>&1; then
        expect_grep "$TMP/out" "mp_sched: $s: 7 steps correct on 3 ranks" "$s through 2 aggregators"
    else
        fail "$s through aggregators"; cat "$TMP/out"
    fi
done

# One input, one answer: near f32's largest value on every worker (3e38,
# whose sum overflows f32), the aggregators' average is finite and exact
# to 1e-6, as the allreduce route's is (each worker scales by 1/4 there,
# each home here), under ddp (gradients) and localsgd:2 (parameters).
for s in ddp localsgd:2; do
    for route in "5 --aggregators 2" "3"; do
        if "$DDRUN" -n $route --timeout 60 -- "$AGG" huge $s >"$TMP/out" 2>&1; then
            expect_grep "$TMP/out" "mp_agg: $s: huge values average finite on 3 workers" "3e38 averages finite: $s, ddrun -n $route"
        else
            fail "3e38 averages finite: $s, ddrun -n $route"; cat "$TMP/out"
        fi
    done
done

# A RESET that no recovery round recorded (worker rank 1, after the first
# sync, numbering from 2^30) is refused naming the sender, and every later
# push is still summed: the check's averages stay exact.
if MP_AGG_FORGE_RESET=1 "$DDRUN" -n 5 --aggregators 2 --timeout 60 -- \
    "$AGG" check f32 $sizes >"$TMP/out" 2>&1; then
    expect_grep "$TMP/out" "mp_agg: f32 averages exact on 3 workers" "a forged RESET: the averages stay exact"
    for r in 3 4; do
        expect_grep "$TMP/out" "home rank $r: refused a RESET from worker rank 1" "a forged RESET: aggregator $r names the sender"
    done
else
    fail "a forged RESET"; cat "$TMP/out"
fi

# DREAMDDP_ROUTE=allreduce: the workers' own collectives, with aggregators idle
# until every worker says goodbye at dd_finalize.
if DREAMDDP_ROUTE=allreduce "$DDRUN" -n 5 --aggregators 2 --timeout 60 -- "$SCHED" dreamddp:2 7 >"$TMP/out" 2>&1; then
    expect_grep "$TMP/out" "mp_sched: dreamddp:2: 7 steps correct on 3 ranks" "DREAMDDP_ROUTE=allreduce beside aggregators"
else
    fail "DREAMDDP_ROUTE=allreduce beside aggregators"; cat "$TMP/out"
fi

# Faults: 3 workers (ranks 0-2) and 2 aggregators (ranks 3, 4).
fault() { # MODE PATTERN WHAT
    start=$(date +%s)
    "$DDRUN" -n 5 --aggregators 2 --timeout 60 -- sh -c "$AGG $1; exit 0" >"$TMP/$1" 2>&1
    elapsed=$(( $(date +%s) - start ))
    for r in 0 2; do
        expect_grep "$TMP/$1" "$r: mp_agg: rank $r:" "$3: worker $r reports"
        grep "^$r: mp_agg: rank $r:" "$TMP/$1" | grep -q "buffer untouched" &&
            pass "$3: worker $r wrote nothing" || fail "$3: worker $r buffer"
    done
    expect_grep "$TMP/$1" "$2" "$3: the rank at fault is named"
    [ $elapsed -lt 40 ] && pass "$3: within the timeout (${elapsed}s)" || fail "$3 took ${elapsed}s"
}
fault malformed "rejected a malformed message from rank 1" "a malformed message"
fault duplicate "rejected a duplicate of chunk 0 of layer 'layer0' (step 0) from rank 1: never summed twice" "a duplicated message"
# A malformed answer that one worker alone receives (from worker-home rank
# 1): that worker fails naming the home, and publishes it as the job's
# fault, so the workers whose own averages landed fail too (dd_sync_all
# ends together), naming rank 1, not the worker that noticed.
DREAMDDP_CHUNK_BYTES=1M "$DDRUN" -n 4 --aggregators 1 --timeout 60 -- sh -c "$AGG bad-result; exit 0" >"$TMP/badres" 2>&1
for r in 0 1 2 3; do
    # Worker 0 saw it (its own message); the others have the job's.
    fault="job aborted: .*"
    [ "$r" = 0 ] && fault=""
    if grep -E "^$r: mp_agg: (rank|aggregator) $r:" "$TMP/badres" | grep -v ": success after" |
        grep -q "$fault.*through home rank 1: not an aggregation header"; then
        pass "a malformed answer: rank $r fails with the job's fault, naming home rank 1"
    else
        fail "a malformed answer: rank $r"; cat "$TMP/badres"
    fi
done
# A worker that leaves without dd_finalize is named by the store's server,
# on every rank, as soon as its connection closes.
fault worker-exit "job aborted: rank 1 was lost: its connection to the store on rank 0 closed before its dd_finalize" "a worker that leaves"

start=$(date +%s)
"$DDRUN" -n 5 --aggregators 2 --timeout 60 -- sh -c "$AGG agg-exit; exit 0" >"$TMP/aggexit" 2>&1
elapsed=$(( $(date +%s) - start ))
# Whether the store, UCX or the wait notices first (at commit, or in the
# first step's syncs: ddp measures no network at commit), the message
# names an aggregator.
for r in 0 1 2; do
    if grep -E "^$r: mp_agg: rank $r: (dd_model_commit: measuring the network failed: .*rank(\(s\))? [34]|(peer lost after [0-9.]+ s, buffer untouched: )?job aborted: rank [34] was lost)" "$TMP/aggexit" >/dev/null; then
        pass "an aggregator that leaves: worker $r names it"
    else
        fail "an aggregator that leaves: worker $r"; cat "$TMP/aggexit"
    fi
done
[ $elapsed -lt 40 ] && pass "an aggregator that leaves: within the timeout (${elapsed}s)" || fail "aggregator exit took ${elapsed}s"
finish
