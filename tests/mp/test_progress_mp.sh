#!/bin/sh
# Under ddrun a rank's progress lines reach ddrun's output while the rank
# runs (ddrun sets DREAMDDP_LINE_BUFFERED, dd_init makes stdout
# line-buffered), not when it exits; DREAMDDP_LINE_BUFFERED=no keeps the
# pipe's full buffering, which shows the check is about the setting.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
PROG=$top_builddir/tests/mp/mp_progress

# watch OUT: waits up to 3 s for rank 0's first line while ddrun runs;
# prints "seen" or "unseen" and whether ddrun was still running then.
watch() {
    i=0
    while [ $i -lt 30 ]; do
        if grep -q "0: progress: rank 0 started" "$1"; then
            break
        fi
        sleep 0.1
        i=$((i + 1))
    done
    if grep -q "0: progress: rank 0 started" "$1"; then seen=seen; else seen=unseen; fi
    if kill -0 "$2" 2>/dev/null; then running=running; else running=exited; fi
    echo "$seen $running"
}

"$DDRUN" -n 2 -- "$PROG" 5 >"$TMP/lb" 2>&1 &
pid=$!
state=$(watch "$TMP/lb" $pid)
wait $pid
rc=$?
[ "$state" = "seen running" ] && pass "rank 0's progress line arrives while it runs" || { fail "progress line: $state"; sed 's/^/    /' "$TMP/lb"; }
grep -q "0: progress: rank 0 done" "$TMP/lb" && [ $rc -eq 0 ] && pass "the job ends normally" || fail "ddrun exited $rc"

DREAMDDP_LINE_BUFFERED=no "$DDRUN" -n 2 -- "$PROG" 5 >"$TMP/fb" 2>&1 &
pid=$!
state=$(watch "$TMP/fb" $pid)
wait $pid
[ "$state" = "unseen running" ] && pass "DREAMDDP_LINE_BUFFERED=no leaves the pipe fully buffered" || fail "with DREAMDDP_LINE_BUFFERED=no: $state"
expect_grep "$TMP/fb" "0: progress: rank 0 started" "fully buffered lines still arrive at exit"
finish
