#!/bin/sh
# ddrun: starts N ranks with prefixed output, fails when a rank fails, and
# refuses bad usage.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

"$DDRUN" -n 3 -- sh -c 'echo "hello from $DREAMDDP_RANK of $DREAMDDP_WORLD_SIZE port $DREAMDDP_MASTER_PORT"' >"$TMP/out" 2>&1
rc=$?
[ $rc -eq 0 ] && pass "three ranks exit 0" || fail "three ranks exited $rc"
for r in 0 1 2; do
    expect_grep "$TMP/out" "$r: hello from $r of 3" "rank $r output is prefixed"
done
[ "$(grep -c hello "$TMP/out")" -eq 3 ] && pass "exactly three ranks ran" || fail "not three ranks"
ports=$(sed -n 's/.*port \([0-9]*\)$/\1/p' "$TMP/out" | sort -u | wc -l)
[ "$ports" -eq 1 ] && pass "all ranks share one store port" || fail "ranks got $ports ports"

"$DDRUN" -n 3 -- sh -c 'if [ "$DREAMDDP_RANK" = 1 ]; then exit 7; fi; sleep 30' >"$TMP/fail" 2>&1
rc=$?
[ $rc -eq 7 ] && pass "a failing rank's status is ddrun's" || fail "ddrun exited $rc, expected 7"
expect_grep "$TMP/fail" "rank 1 exited with status 7; stopping the others" "ddrun names the failing rank"

start=$(date +%s)
"$DDRUN" -n 2 --timeout 1 -- sleep 30 >"$TMP/timeout" 2>&1
rc=$?
elapsed=$(( $(date +%s) - start ))
[ $rc -eq 124 ] && pass "--timeout exits 124" || fail "--timeout exited $rc"
[ $elapsed -lt 10 ] && pass "--timeout stops the ranks promptly" || fail "--timeout took ${elapsed}s"

"$DDRUN" -n 0 -- true >"$TMP/zero" 2>&1
rc=$?
[ $rc -eq 2 ] && pass "-n 0 is a usage error" || fail "-n 0 exited $rc"
expect_grep "$TMP/zero" "-n needs a number of ranks from 1, not '0'" "-n 0 says why"

"$DDRUN" -n 2 >"$TMP/nocmd" 2>&1
[ $? -eq 2 ] && pass "a missing command is a usage error" || fail "missing command accepted"
expect_grep "$TMP/nocmd" "no command to run" "a missing command says why"

"$DDRUN" --bogus -n 2 -- true >"$TMP/badopt" 2>&1
[ $? -eq 2 ] && pass "a bad option is a usage error" || fail "bad option accepted"
expect_grep "$TMP/badopt" "usage: ddrun" "a bad option prints the usage"

"$DDRUN" -n 2 --aggregators 2 -- true >"$TMP/agg" 2>&1
[ $? -eq 2 ] && pass "--aggregators N is refused" || fail "--aggregators N accepted"

"$DDRUN" -n 3 --aggregators 1 -- sh -c 'echo "aggs=$DREAMDDP_NUM_AGGREGATORS"' >"$TMP/agg1" 2>&1
expect_grep "$TMP/agg1" "2: aggs=1" "--aggregators sets DREAMDDP_NUM_AGGREGATORS"

"$DDRUN" -n 1 -- /nonexistent/program >"$TMP/noexec" 2>&1
[ $? -eq 127 ] && pass "an unrunnable command exits 127" || fail "unrunnable command"
expect_grep "$TMP/noexec" "cannot run /nonexistent/program" "an unrunnable command says why"

printf 'partial' >"$TMP/partial.txt"
"$DDRUN" -n 1 -- cat "$TMP/partial.txt" >"$TMP/partial" 2>&1
expect_grep "$TMP/partial" "0: partial" "a last line without newline is printed"
# --elastic: the variables, the private directory removed at the end, and
# the bounds of --min; a rank that fails while none was lost ends the job.
"$DDRUN" --elastic -n 2 -- sh -c 'echo "el=$DREAMDDP_ELASTIC gen=$DREAMDDP_ELASTIC_GENERATION min=$DREAMDDP_ELASTIC_MIN dir=$DREAMDDP_ELASTIC_DIR"; cat "$DREAMDDP_ELASTIC_DIR/generation"' >"$TMP/el" 2>&1
expect_grep "$TMP/el" "1: el=yes gen=0 min=1 dir=" "--elastic sets the elastic variables"
expect_grep "$TMP/el" "1: 0" "--elastic writes the generation"
edir=$(sed -n 's/^0: .* dir=//p' "$TMP/el")
[ -n "$edir" ] && [ ! -e "$edir" ] && pass "--elastic removes its directory" || fail "--elastic left '$edir'"
"$DDRUN" --elastic --min 3 -n 2 -- true >"$TMP/elmin" 2>&1
[ $? -eq 2 ] && pass "--min above the workers is refused" || fail "--min 3 of 2 accepted"
expect_grep "$TMP/elmin" "--min 3 is more workers than the 2 the job starts with" "--min says why"
"$DDRUN" --elastic -n 2 -- sh -c 'exit $((DREAMDDP_RANK + 3))' >"$TMP/elfail" 2>&1
rc=$?
[ $rc -eq 4 ] || [ $rc -eq 3 ] && pass "--elastic: a failure without a lost rank ends the job ($rc)" || fail "--elastic: exit $rc"
expect_grep "$TMP/elfail" "a rank failed and none was lost: the job stops" "--elastic: says why it stops"

# kill -9 of ddrun: its ranks die with it (they trained on, orphaned).
"$DDRUN" -n 3 -- sh -c 'echo "pid $$"; exec sleep 60' >"$TMP/orphans" 2>&1 &
ddrun_pid=$!
for i in $(seq 50); do
    [ "$(grep -c '^[0-9]: pid ' "$TMP/orphans")" -eq 3 ] && break
    sleep 0.1
done
ranks=$(sed -n 's/^[0-9]: pid //p' "$TMP/orphans")
[ "$(echo $ranks | wc -w)" -eq 3 ] && pass "three ranks started" || fail "ranks did not start: $(cat "$TMP/orphans")"
kill -9 "$ddrun_pid"
wait "$ddrun_pid" 2>/dev/null
sleep 2
alive=""
for p in $ranks; do
    kill -0 "$p" 2>/dev/null && alive="$alive $p"
done
[ -z "$alive" ] && pass "no rank runs 2 s after kill -9 of ddrun" || { fail "ranks$alive outlived ddrun"; kill $alive 2>/dev/null; }
finish
