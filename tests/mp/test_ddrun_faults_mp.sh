#!/bin/sh
# Faults that the library survives must not cost the job under ddrun
# (issue 58): train_mlp, deterministic.
# - An aggregator killed under plain `ddrun -n 6 --aggregators 2`: the
#   workers run to their end, ddrun exits 0 and the parameters are the
#   uninterrupted run's bits (a home sums in worker order whoever it is).
# - Two of 4 workers killed at once under `ddrun --elastic --min 2
#   --max-restarts 0`: rank 0, which hosts the store, may take up to
#   DREAMDDP_TIMEOUT_S to notice; it is healthy (not stopped) and is kept,
#   so the two healthy workers go on as generation 1 to the last step.
# - An aggregator killed, then a worker, under `ddrun --elastic -n 6
#   --aggregators 2 --min 3 --max-restarts 0`: the three healthy workers
#   and the aggregator left go on as generation 1.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
export DREAMDDP_LINE_BUFFERED=yes DREAMDDP_DETERMINISTIC=yes
TRAIN=$top_builddir/examples/train_mlp

# pid_of DDRUN_PID RANK: the process of RANK among ddrun's children.
pid_of() {
    for p in $(pgrep -P "$1"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null | grep -qx "DREAMDDP_RANK=$2"; then
            echo "$p"
        fi
    done
}

# wait_for FILE PATTERN: until FILE holds a line matching PATTERN (60 s).
wait_for() {
    w=0
    while [ "$w" -lt 1200 ] && ! grep -q "$2" "$1" 2>/dev/null; do
        sleep 0.05; w=$((w + 1))
    done
}

# params FILE: the parameters' checksum on rank 0's "done:" line.
params() { sed -n 's/^0: done: .*, parameters \([0-9a-f]*\)$/\1/p' "$1"; }

# An aggregator killed under plain ddrun, and the same job uninterrupted.
agg() {
    out=$TMP/agg-$1
    timeout -s KILL 240 "$DDRUN" -n 6 --aggregators 2 -- "$TRAIN" \
        --strategy dreamddp:4 --steps 200 --seed 1 >"$out" 2>&1 &
    job=$!
    if [ "$1" = kill ]; then
        wait_for "$out" '^0: *50 '
        ddrun=$(pgrep -P $job)
        victim=$(pid_of "$ddrun" 4)
        [ -n "$victim" ] && kill -9 "$victim" || fail "aggregator rank 4 not found"
    fi
    wait $job
    echo $? >"$out.rc"
}
agg whole
agg kill
rc=$(cat "$TMP/agg-kill.rc")
[ "$rc" = 0 ] && pass "plain ddrun, an aggregator killed: exit 0" ||
    { fail "plain ddrun, an aggregator killed: exit $rc"; cat "$TMP/agg-kill"; }
expect_grep "$TMP/agg-kill" "ddrun: aggregator rank 4 was lost (status 137): the workers go on without it" "ddrun names the lost aggregator"
expect_grep "$TMP/agg-kill" "aggregator rank 4 was lost" "the workers re-homed its share"
expect_grep "$TMP/agg-kill" "0: done: dreamddp:4, 4 workers, 200 steps" "the workers ran to their end"
a=$(params "$TMP/agg-whole") b=$(params "$TMP/agg-kill")
if [ -n "$a" ] && [ "$a" = "$b" ]; then
    pass "an aggregator killed: the uninterrupted run's parameters ($a)"
else
    fail "an aggregator killed: parameters '$b', uninterrupted '$a'"
fi

# Two workers killed at once, --min 2. DREAMDDP_TIMEOUT_S=10 is longer
# than ddrun's 5 s grace, so a rank 0 that waits for it still runs then.
out=$TMP/two
DREAMDDP_TIMEOUT_S=10 timeout -s KILL 240 "$DDRUN" --elastic -n 4 --min 2 --max-restarts 0 -- \
    "$TRAIN" --strategy ddp --steps 150 --commit-every 20 --data global >"$out" 2>&1 &
job=$!
wait_for "$out" '^0: *50 '
ddrun=$(pgrep -P $job)
v2=$(pid_of "$ddrun" 2) v3=$(pid_of "$ddrun" 3)
if [ -n "$v2" ] && [ -n "$v3" ]; then kill -9 "$v2" "$v3"; else fail "ranks 2 and 3 not found"; fi
wait $job
rc=$?
[ "$rc" = 0 ] && pass "two workers killed, --min 2: exit 0" || { fail "two workers killed, --min 2: exit $rc"; cat "$out"; }
expect_grep "$out" "ddrun: generation 1: 2 ranks (2 workers, 0 aggregators)" "the two healthy workers go on"
expect_grep "$out" "0: done: ddp, 2 workers, 150 steps" "they finish"
if grep -q "dropped from the job" "$out"; then
    fail "a healthy rank was dropped:"; grep "dropped" "$out"
else
    pass "no healthy rank dropped as frozen"
fi

# An aggregator killed, then (once the workers went on without it) a worker.
out=$TMP/agg-worker
DREAMDDP_TIMEOUT_S=10 timeout -s KILL 240 "$DDRUN" --elastic -n 6 --aggregators 2 --min 3 --max-restarts 0 -- \
    "$TRAIN" --strategy ddp --steps 150 --commit-every 20 --data global >"$out" 2>&1 &
job=$!
wait_for "$out" '^0: *50 '
ddrun=$(pgrep -P $job)
v4=$(pid_of "$ddrun" 4) v2=$(pid_of "$ddrun" 2)
[ -n "$v4" ] && kill -9 "$v4" || fail "aggregator rank 4 not found"
wait_for "$out" "^0: .*aggregator rank 4 was lost"
[ -n "$v2" ] && kill -9 "$v2" || fail "worker rank 2 not found"
wait $job
rc=$?
[ "$rc" = 0 ] && pass "an aggregator, then a worker killed, --min 3: exit 0" ||
    { fail "an aggregator, then a worker killed, --min 3: exit $rc"; cat "$out"; }
expect_grep "$out" "ddrun: generation 1: 4 ranks (3 workers, 1 aggregators)" "three healthy workers and an aggregator go on"
expect_grep "$out" "0: done: ddp, 3 workers, 150 steps" "they finish"
if grep -q "dropped from the job" "$out"; then
    fail "a healthy rank was dropped after an aggregator's loss:"; grep "dropped" "$out"
else
    pass "no healthy rank dropped after an aggregator's loss"
fi
finish
