#!/bin/sh
# The errors of dd_init on every rank, within the timeout: a bad DREAMDDP_* value,
# a wrong job token on one rank, an unreachable store master, and one that names no host.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
SMOKE=$top_builddir/examples/smoke

# A bad value: every rank names the variable, the value and what is accepted.
launch 3 "$TMP/bad" env DREAMDDP_TIMEOUT_S=abc "$SMOKE"
for r in 0 1 2; do
    [ "$(cat "$TMP/bad.$r.rc")" -ne 0 ] && pass "bad value fails rank $r" || fail "rank $r accepted DREAMDDP_TIMEOUT_S=abc"
    expect_grep "$TMP/bad.$r" "[rank $r] dreamddp ERROR core: invalid value DREAMDDP_TIMEOUT_S='abc': expected a duration such as 30s, 500ms, 2m" "rank $r names DREAMDDP_TIMEOUT_S"
done

# Timeouts no backend can represent: refused at dd_init, naming the variable
# (1e10 made every wait time out at once, 1e300 failed inside Gloo).
for v in 1e10 1e300 86401; do
    launch 2 "$TMP/big" env DREAMDDP_TIMEOUT_S=$v timeout 30 "$SMOKE"
    for r in 0 1; do
        [ "$(cat "$TMP/big.$r.rc")" -ne 0 ] && pass "DREAMDDP_TIMEOUT_S=$v fails rank $r" || fail "rank $r accepted DREAMDDP_TIMEOUT_S=$v"
        expect_grep "$TMP/big.$r" "invalid value DREAMDDP_TIMEOUT_S='$v': expected a duration such as 30s, 500ms, 2m, up to 86400 s" "rank $r names DREAMDDP_TIMEOUT_S=$v"
    done
done

# A wrong token on rank 2: it is refused; the others time out naming it.
start=$(date +%s)
launch 3 "$TMP/tok" env DREAMDDP_TIMEOUT_S=3 sh -c 'if [ "$DREAMDDP_RANK" = 2 ]; then export DREAMDDP_JOB_TOKEN=intruder; else export DREAMDDP_JOB_TOKEN=job; fi; exec "$0"' "$SMOKE"
elapsed=$(( $(date +%s) - start ))
for r in 0 1 2; do
    [ "$(cat "$TMP/tok.$r.rc")" -ne 0 ] && pass "wrong token fails rank $r" || fail "rank $r passed with a wrong token"
done
expect_grep "$TMP/tok.2" "refused rank 2: the job token differs from rank 0's" "rank 2 is refused"
expect_grep "$TMP/tok.0" "timed out after 3 s (DREAMDDP_TIMEOUT_S): rank 2 did not arrive" "rank 0 names rank 2"
expect_grep "$TMP/tok.1" "rank 2 did not arrive" "rank 1 names rank 2"
[ $elapsed -lt 15 ] && pass "token errors within the timeout (${elapsed}s)" || fail "token errors took ${elapsed}s"

# An unreachable master: ranks 1 and 2 of 3 start, rank 0 never does.
port=$(free_port)
start=$(date +%s)
for r in 1 2; do
    (DREAMDDP_TIMEOUT_S=2 DREAMDDP_RANK=$r DREAMDDP_WORLD_SIZE=3 DREAMDDP_MASTER_ADDR=127.0.0.1 DREAMDDP_MASTER_PORT=$port \
        "$SMOKE" >"$TMP/unr.$r" 2>&1; echo $? >"$TMP/unr.$r.rc") &
done
wait
elapsed=$(( $(date +%s) - start ))
for r in 1 2; do
    [ "$(cat "$TMP/unr.$r.rc")" -ne 0 ] && pass "unreachable master fails rank $r" || fail "rank $r passed without a master"
    expect_grep "$TMP/unr.$r" "[rank $r] dreamddp ERROR net: cannot reach the store master 127.0.0.1:$port within 2 s" "rank $r names the address"
done
[ $elapsed -lt 10 ] && pass "unreachable master reported within the timeout (${elapsed}s)" || fail "took ${elapsed}s"

# A master address that names no host: every rank fails at once (not
# after DREAMDDP_TIMEOUT_S), naming the variable it came from. Where the
# resolver cannot say (no answer, EAI_AGAIN), a retry might: not tested.
if ! python3 -c 'import socket, sys
try: socket.getaddrinfo("no-such-host.invalid", None)
except socket.gaierror as e: sys.exit(e.errno not in (socket.EAI_NONAME, socket.EAI_FAIL))
sys.exit(1)'; then
    echo "skip: this resolver does not say that no-such-host.invalid names no host"
    finish
fi
start=$(date +%s)
for r in 0 1; do
    (DREAMDDP_TIMEOUT_S=30 DREAMDDP_RANK=$r DREAMDDP_WORLD_SIZE=2 DREAMDDP_MASTER_ADDR=no-such-host.invalid \
        DREAMDDP_MASTER_PORT=$port "$SMOKE" >"$TMP/nohost.$r" 2>&1; echo $? >"$TMP/nohost.$r.rc") &
done
wait
elapsed=$(( $(date +%s) - start ))
for r in 0 1; do
    [ "$(cat "$TMP/nohost.$r.rc")" -ne 0 ] && pass "a master that names no host fails rank $r" || fail "rank $r passed with no such host"
    expect_grep "$TMP/nohost.$r" "the store's address 'no-such-host.invalid' (from DREAMDDP_MASTER_ADDR) names no host" "rank $r names DREAMDDP_MASTER_ADDR"
done
[ $elapsed -lt 10 ] && pass "no such host reported at once (${elapsed}s)" || fail "no such host took ${elapsed}s"
finish
