#!/bin/sh
# ddrun's exit status, with and without --elastic, on ranks that are
# shell scripts (no library): a lost worker is never exit 0 unless the job
# finished with the workers it was asked to keep; a lost aggregator is
# survived (the library re-homes its share), under plain ddrun too; a
# worker that is slow to stop is not dropped as frozen, a stopped one is.
# Each job runs under a hard timeout; the elapsed-time bounds are generous
# multiples of the target (a loaded 2-core machine).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
# The ranks here link no library; the bound ddrun grants a rank that is
# slow but not stopped comes from this variable, as for real ranks.
export DREAMDDP_TIMEOUT_S=60

# job NAME ARGS...: runs ddrun ARGS under a 90 s kill; the status goes in
# $TMP/NAME.rc, the output in $TMP/NAME, the seconds in $TMP/NAME.s.
job() {
    name=$1; shift
    t0=$(date +%s)
    timeout -s KILL 90 "$DDRUN" "$@" >"$TMP/$name" 2>&1
    echo $? >"$TMP/$name.rc"
    echo $(( $(date +%s) - t0 )) >"$TMP/$name.s"
}

# expect_rc NAME RC WHAT
expect_rc() {
    rc=$(cat "$TMP/$1.rc")
    if [ "$rc" = "$2" ]; then
        pass "$3: exit $rc"
    else
        fail "$3: exit $rc, expected $2"
        sed 's/^/    /' "$TMP/$1"
    fi
}

# expect_no NAME PATTERN WHAT: the output must not contain PATTERN.
expect_no() {
    if grep -qF -- "$2" "$TMP/$1"; then
        fail "$3: '$2' in the output:"
        sed 's/^/    /' "$TMP/$1"
    else
        pass "$3"
    fi
}

# Without --elastic: a killed worker's signal is ddrun's status.
job plain-kill -n 2 -- sh -c 'if [ "$DREAMDDP_RANK" = 1 ]; then kill -9 $$; fi; sleep 30'
expect_rc plain-kill 137 "plain: a killed worker"

# --elastic: every rank killed, no restarts: nobody is left (137, as
# without --elastic), never 0.
job el-all0 --elastic -n 2 --max-restarts 0 -- sh -c 'kill -9 $$'
expect_rc el-all0 137 "--elastic --max-restarts 0: every rank killed"
expect_grep "$TMP/el-all0" "0 workers left, fewer than --min 1: the job stops" "every rank killed: says why it stops"

# Every rank killed in every generation: the restarts run out (2, then 1,
# then none: 3 in all), then the job stops with the signal's status.
job el-all --elastic -n 2 -- sh -c 'kill -9 $$'
expect_rc el-all 137 "--elastic: every rank killed in every generation"
expect_grep "$TMP/el-all" "generation 2: 1 ranks" "every rank killed: started again while restarts were left"

# A worker killed while the other finished (exit 0): the job did not
# finish with its workers, and is not run again for it.
job el-late --elastic -n 2 -- sh -c 'if [ "$DREAMDDP_RANK" = 1 ]; then kill -9 $$; fi; sleep 1'
expect_rc el-late 137 "--elastic: a worker killed while the other exits 0"
expect_grep "$TMP/el-late" "ddrun: rank 1 (generation 0) was lost and the other workers finished: the job ends with its status 137" "a late loss: says so"
expect_no el-late "generation 1" "a late loss: no re-formation of a finished job"

# A lost aggregator alone: the workers finished, the job did.
job el-agg --elastic -n 3 --aggregators 1 -- sh -c 'if [ "$DREAMDDP_RANK" = 2 ]; then kill -9 $$; fi; sleep 1'
expect_rc el-agg 0 "--elastic: an aggregator killed, the workers finish"
expect_no el-agg "generation 1" "an aggregator killed: no re-formation"

# An aggregator that leaves with a failure (a woken one leaves "canceled")
# while the workers go on: not a failure of the job, and the workers are
# not dropped as frozen once the grace after it ran out (5 s).
job el-aggfail --elastic -n 3 --aggregators 1 -- sh -c 'if [ "$DREAMDDP_RANK" = 2 ]; then exit 3; fi; sleep 7; echo "rank $DREAMDDP_RANK finished"'
expect_rc el-aggfail 0 "--elastic: an aggregator exits 3, the workers finish"
expect_grep "$TMP/el-aggfail" "0: rank 0 finished" "an aggregator failed: worker 0 finished"
expect_grep "$TMP/el-aggfail" "1: rank 1 finished" "an aggregator failed: worker 1 finished"
expect_no el-aggfail "dropped" "an aggregator failed: no worker dropped"

# Two workers killed at once; worker 1 stops at once, worker 0 (which
# hosts the store and waits longer: not frozen, not stopped) 8 s later.
# With --min 2 the two healthy workers go on as generation 1, rank 0 the
# one first started as rank 0.
job el-slow0 --elastic -n 4 --min 2 --max-restarts 0 -- sh -c '
    if [ "$DREAMDDP_ELASTIC_GENERATION" != 0 ]; then
        echo "generation $DREAMDDP_ELASTIC_GENERATION: first started as $DREAMDDP_ELASTIC_ID"; exit 0
    fi
    case $DREAMDDP_RANK in 2|3) kill -9 $$ ;; 1) sleep 1; exit 1 ;; esac
    sleep 8; exit 1'
expect_rc el-slow0 0 "--elastic --min 2: two workers killed, a slow healthy rank 0"
expect_grep "$TMP/el-slow0" "ddrun: generation 1: 2 ranks (2 workers, 0 aggregators)" "a slow rank 0: two workers go on"
expect_grep "$TMP/el-slow0" "0: generation 1: first started as 0" "a slow rank 0 is kept as rank 0"
expect_grep "$TMP/el-slow0" "ddrun: rank 0 (generation 0) is still running, not stopped" "a slow rank 0: ddrun says it waits"
expect_no el-slow0 "dropped" "a slow rank 0 is not dropped"

# A stopped (frozen) rank is still dropped once the grace runs out, without
# waiting for DREAMDDP_TIMEOUT_S (60 s here): target 6 s, bound 30 s.
job el-frozen --elastic -n 3 --max-restarts 0 -- sh -c '
    if [ "$DREAMDDP_ELASTIC_GENERATION" != 0 ]; then exit 0; fi
    if [ "$DREAMDDP_RANK" = 2 ]; then kill -STOP $$; fi
    sleep 1; exit 1'
expect_rc el-frozen 0 "--elastic: a frozen rank dropped, the others go on"
expect_grep "$TMP/el-frozen" "ddrun: rank 2 (generation 0, pid" "a frozen rank: named"
expect_grep "$TMP/el-frozen" "did not stop with the others: dropped from the job" "a frozen rank: dropped"
s=$(cat "$TMP/el-frozen.s")
[ "$s" -lt 30 ] && pass "a frozen rank dropped in ${s} s (< 30)" || fail "a frozen rank took ${s} s"

# The rest of the table, with --elastic as without: --timeout 124, and
# SIGTERM to ddrun 128 + 15.
job el-timeout --elastic -n 2 --timeout 1 -- sleep 30
expect_rc el-timeout 124 "--elastic --timeout"
for e in "" --elastic; do
    timeout -s KILL 60 "$DDRUN" $e -n 2 -- sleep 30 >"$TMP/sigterm" 2>&1 &
    pid=$!
    w=0
    while [ "$w" -lt 100 ] && [ "$(pgrep -P $pid | wc -l)" -lt 1 ]; do sleep 0.05; w=$((w + 1)); done
    ddrun=$(pgrep -P $pid)
    sleep 0.5
    kill -TERM "$ddrun"
    wait $pid
    echo $? >"$TMP/sigterm.rc"
    expect_rc sigterm 143 "SIGTERM to ddrun ${e:-(plain)}"
done

# Without --elastic, an aggregator killed: the workers go on to their end
# and the job exits 0, saying the aggregator was lost.
job plain-agg -n 3 --aggregators 1 -- sh -c 'if [ "$DREAMDDP_RANK" = 2 ]; then kill -9 $$; fi; sleep 1; echo "rank $DREAMDDP_RANK finished"'
expect_rc plain-agg 0 "plain: an aggregator killed, the workers finish"
expect_grep "$TMP/plain-agg" "ddrun: aggregator rank 2 was lost (status 137): the workers go on without it" "plain: the lost aggregator is named"
expect_grep "$TMP/plain-agg" "0: rank 0 finished" "plain: worker 0 ran to its end"
expect_grep "$TMP/plain-agg" "1: rank 1 finished" "plain: worker 1 ran to its end"

# ... and a worker failing after it still fails the job with its status.
job plain-agg-fail -n 3 --aggregators 1 -- sh -c 'case $DREAMDDP_RANK in 2) kill -9 $$ ;; 1) sleep 1; exit 5 ;; esac; sleep 30'
expect_rc plain-agg-fail 5 "plain: an aggregator lost, then a worker fails"
expect_grep "$TMP/plain-agg-fail" "rank 1 exited with status 5; stopping the others" "plain: the failing worker is named"

# Under DREAMDDP_AGG_LOSS=stop the library stops the job for an aggregator,
# and so does ddrun, with its status.
DREAMDDP_AGG_LOSS=stop job plain-agg-stop -n 3 --aggregators 1 -- sh -c 'if [ "$DREAMDDP_RANK" = 2 ]; then kill -9 $$; fi; sleep 30'
expect_rc plain-agg-stop 137 "plain, DREAMDDP_AGG_LOSS=stop: an aggregator killed"

# An aggregator frozen, the workers done: ddrun stops it after the grace
# and exits 0 (target 6 s, bound 30 s; before, it waited for ever).
job plain-agg-frozen -n 3 --aggregators 1 -- sh -c 'if [ "$DREAMDDP_RANK" = 2 ]; then kill -STOP $$; fi; sleep 1'
expect_rc plain-agg-frozen 0 "plain: an aggregator frozen, the workers finish"
expect_grep "$TMP/plain-agg-frozen" "ddrun: aggregator rank 2 still runs 5 s after every worker exited: stopping it" "plain: the frozen aggregator is stopped, named"
s=$(cat "$TMP/plain-agg-frozen.s")
[ "$s" -lt 30 ] && pass "plain: done in ${s} s (< 30)" || fail "plain: a frozen aggregator held the job ${s} s"
finish
