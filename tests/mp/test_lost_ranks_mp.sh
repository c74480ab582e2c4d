#!/bin/sh
# A rank whose loss the store has seen is never waited for, rank 0 (the
# store's host) included (issue 58, row 4). Two losses in a row, each a
# kill -9, with DREAMDDP_TIMEOUT_S=30:
# - two-workers: workers 2 and 3 of 4 at once (ddp);
# - agg-then-worker: aggregator 4 of a 4 + 2 job (survived, the default
#   DREAMDDP_AGG_LOSS=survive), then, once the workers went on without
#   it, worker 2.
# - frozen-aggregator: aggregator 5 of a 4 + 2 job frozen (SIGSTOP) and
#   never woken; the job drops it and finishes (ddbench train-sim
#   --check): rank 0's store used to wait for its open connection, the
#   whole timeout, before it stopped.
# The store names the first loss in the job's reason; rank 0 used to wait
# for the second lost rank to read it, for the whole timeout, while the
# others had left 0.4 s after the fault. Every survivor must exit non-zero
# naming a lost rank, rank 0 no later than 3 s after the last of the
# others (the target is 1 s; 3 s is slack for a loaded 2-core machine,
# and a tenth of the 30 s rank 0 used to take). Ranks are started by hand,
# so that nothing but the library stops them.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
MP=$top_builddir/tests/mp/mp_sched
export DREAMDDP_TIMEOUT_S=30 DREAMDDP_LOG_LEVEL=info DREAMDDP_LOG_SUBSYS=sched,agg
export DREAMDDP_LINE_BUFFERED=yes DREAMDDP_AGG_LOST_AFTER_S=1

now() { date +%s.%N; }

# start CASE N AGGREGATORS STRATEGY: starts the ranks; each one's output in
# $TMP/CASE.R, its pid in .pid, its exit code in .rc, its end time in .end.
start() {
    out=$TMP/$1; n=$2; k=$3
    port=$(free_port)
    r=0
    while [ "$r" -lt "$n" ]; do
        (DREAMDDP_RANK=$r DREAMDDP_WORLD_SIZE=$n DREAMDDP_MASTER_ADDR=127.0.0.1 \
         DREAMDDP_MASTER_PORT=$port DREAMDDP_NUM_AGGREGATORS=$k \
         DREAMDDP_STRATEGY=$4 timeout -s KILL 120 \
         sh -c 'echo $$ >"$0.pid"; exec "$1" env 100000000' "$out.$r" "$MP" \
         >"$out.$r" 2>&1; echo $? >"$out.$r.rc"; now >"$out.$r.t"; mv "$out.$r.t" "$out.$r.end") &
        r=$((r + 1))
    done
    w=0
    while [ "$w" -lt 600 ] && [ "$(cat "$out".[0-9] 2>/dev/null | grep -c 'committed')" -lt $((n - k)) ]; do
        sleep 0.1; w=$((w + 1))
    done
    sleep 1
}

# stop CASE RANK...: kill -9 of the ranks' processes, in one call (a
# survivor reacts to the first loss within milliseconds).
stop() {
    what=$1; shift
    pids=""
    for r in "$@"; do
        pid=$(cat "$TMP/$what.$r.pid" 2>/dev/null)
        [ -n "$pid" ] && pids="$pids $pid" || fail "$what: rank $r is not running"
    done
    kill -s KILL $pids
}

# rank0_gap CASE RANKS...: rank 0 must end within 3 s of the last of the
# other ranks named.
rank0_gap() {
    what=$1; shift
    last=0
    for r in "$@"; do
        end=$(cat "$TMP/$what.$r.end" 2>/dev/null || echo 0)
        [ "$(echo "$end > $last" | bc)" = 1 ] && last=$end
    done
    if [ ! -f "$TMP/$what.0.end" ]; then
        fail "$what: rank 0 did not end"; return
    fi
    gap=$(echo "$(cat "$TMP/$what.0.end") - $last" | bc)
    if [ "$(echo "$gap < 3" | bc)" = 1 ]; then
        pass "$what: rank 0 left $gap s after the last of the others"
    else
        fail "$what: rank 0 left $gap s after the last of the others (more than 3 s)"
        cat "$TMP/$what.0"
    fi
}

# check CASE N T0 SURVIVORS...: every survivor exited non-zero, naming a
# lost rank; rank 0 within 3 s of the last other survivor.
check() {
    what=$1; n=$2; t0=$3; shift 3
    out=$TMP/$what
    for r in "$@"; do
        w=0
        while [ ! -f "$out.$r.end" ] && [ "$w" -lt 1200 ]; do sleep 0.05; w=$((w + 1)); done
        if [ ! -f "$out.$r.end" ]; then
            fail "$what: rank $r still runs 60 s after the fault"; continue
        fi
        end=$(cat "$out.$r.end")
        echo "lost: $what: rank $r exited $(cat "$out.$r.rc") after $(echo "$end - $t0" | bc) s:" \
            "$(grep -m1 'job aborted' "$out.$r" | sed 's/.*job aborted/job aborted/')"
        [ "$(cat "$out.$r.rc")" != 0 ] || fail "$what: rank $r exited with success"
        expect_grep "$out.$r" "was lost" "$what: rank $r names a lost rank"
    done
    shift
    rank0_gap "$what" "$@"
    wait
}

start two-workers 4 0 ddp
t0=$(now)
stop two-workers 2 3
check two-workers 4 "$t0" 0 1

start agg-then-worker 6 2 ddp
stop agg-then-worker 4
w=0
while [ "$w" -lt 1000 ] && ! grep -q "go on without" "$TMP/agg-then-worker.0" 2>/dev/null; do
    sleep 0.01; w=$((w + 1))
done
expect_grep "$TMP/agg-then-worker.0" "aggregator rank 4 was lost" "agg-then-worker: the workers went on without aggregator 4"
sleep 1
t0=$(now)
stop agg-then-worker 2
check agg-then-worker 6 "$t0" 0 1 3 5

PROFILE=${DDTEST_PROFILES:-$top_srcdir/tests/fixtures/profiles}/gpt2-blocks
if [ ! -d "$PROFILE" ]; then
    fail "frozen-aggregator: no gpt2-blocks profile at $PROFILE (the repository carries it in tests/fixtures/profiles)"
    finish
fi
out=$TMP/frozen-aggregator
port=$(free_port)
for r in 0 1 2 3 4 5; do
    cmd="$top_builddir/tools/ddbench train-sim --profile $PROFILE --strategy ddp --iters 20 --scale 0.05 --check"
    [ "$r" -ge 4 ] && cmd="env DREAMDDP_LOG_LEVEL=info DREAMDDP_LOG_SUBSYS=agg $top_builddir/tools/ddagg"
    (DREAMDDP_RANK=$r DREAMDDP_WORLD_SIZE=6 DREAMDDP_NUM_AGGREGATORS=2 \
     DREAMDDP_MASTER_ADDR=127.0.0.1 DREAMDDP_MASTER_PORT=$port \
     timeout -s KILL 150 sh -c 'echo $$ >"$0.pid"; exec $1' "$out.$r" "$cmd" \
     >"$out.$r" 2>&1; echo $? >"$out.$r.rc"; now >"$out.$r.t"; mv "$out.$r.t" "$out.$r.end") &
done
w=0
while [ "$w" -lt 600 ] && ! grep -q "serving" "$out.4" "$out.5" 2>/dev/null; do
    sleep 0.05; w=$((w + 1))
done
sleep 2
kill -s STOP "$(cat "$out.5.pid")"
for r in 0 1 2 3; do
    w=0
    while [ ! -f "$out.$r.end" ] && [ "$w" -lt 2400 ]; do sleep 0.05; w=$((w + 1)); done
    rc=$(cat "$out.$r.rc" 2>/dev/null)
    [ "$rc" = 0 ] && pass "frozen-aggregator: worker $r finished" ||
        { fail "frozen-aggregator: worker $r exited '$rc'"; cat "$out.$r"; }
done
expect_grep "$out.0" "check: correct" "frozen-aggregator: the averages"
expect_grep "$out.0" "aggregator rank 5 was lost" "frozen-aggregator: the workers went on without aggregator 5"
rank0_gap frozen-aggregator 1 2 3 4
kill -s KILL "$(cat "$out.5.pid")"
kill -s CONT "$(cat "$out.5.pid")" 2>/dev/null
wait
finish
