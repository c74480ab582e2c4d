#!/bin/sh
# Unknown DREAMDDP_* names in the environment: dd_init warns about them on
# rank 0 with the nearest known name, and goes on. DD_* names (an older
# release's, and Datadog's) are neither read nor warned about.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
SMOKE=$top_builddir/examples/smoke
WARNING="[rank 0] dreamddp WARN core: DREAMDDP_STRATGY is not a dreamddp variable; did you mean DREAMDDP_STRATEGY?"

# A misspelled name: a warning on stderr that names the right one.
env DREAMDDP_STRATGY=ddp "$SMOKE" >"$TMP/typo.out" 2>"$TMP/typo.err"
rc=$?
[ $rc -eq 0 ] && pass "a misspelled name does not fail dd_init" || fail "smoke exited $rc with DREAMDDP_STRATGY=ddp"
expect_grep "$TMP/typo.err" "$WARNING" "the warning suggests DREAMDDP_STRATEGY"
[ "$(grep -c 'DREAMDDP_STRATGY' "$TMP/typo.err")" -eq 1 ] && pass "warned once" || fail "not warned exactly once"

# DD_* names have no effect: Datadog's DD_LOG_LEVEL=warning used to fail
# dd_init, and DD_STRATEGY=bogus is not read.
env DD_LOG_LEVEL=warning DD_STRATEGY=bogus "$SMOKE" >"$TMP/dd.out" 2>"$TMP/dd.err"
rc=$?
[ $rc -eq 0 ] && pass "DD_LOG_LEVEL=warning DD_STRATEGY=bogus do not fail dd_init" || { fail "smoke exited $rc with DD_* set"; sed 's/^/    /' "$TMP/dd.err"; }
if grep -qE 'DD_LOG_LEVEL|DD_STRATEGY' "$TMP/dd.err"; then
    fail "stderr mentions a DD_* variable:"; sed 's/^/    /' "$TMP/dd.err"
else
    pass "no word about DD_* variables"
fi

# Two ranks: only rank 0 warns.
launch 2 "$TMP/two" env DREAMDDP_STRATGY=ddp "$SMOKE"
for r in 0 1; do
    [ "$(cat "$TMP/two.$r.rc")" -eq 0 ] && pass "rank $r of 2 succeeds" || fail "rank $r of 2 exited $(cat "$TMP/two.$r.rc")"
done
expect_grep "$TMP/two.0" "$WARNING" "rank 0 of 2 warns"
if grep -q 'DREAMDDP_STRATGY' "$TMP/two.1"; then
    fail "rank 1 warned too:"; sed 's/^/    /' "$TMP/two.1"
else
    pass "rank 1 stays quiet"
fi
finish
