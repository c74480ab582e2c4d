#!/bin/sh
# ddrun's exit status on ranks that are shell scripts (no library): a
# lost aggregator is survived (the library re-homes its share).
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
