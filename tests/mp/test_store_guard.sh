#!/bin/sh
# The store against outsiders, with real ranks: a token file must be private,
# a derived token is announced as open on rank 0 only, a wrong token is
# refused, and rank 0 exits at once after the last rank although an outsider
# holds an idle connection to the store.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
SMOKE=$top_builddir/examples/smoke
MLP=$top_builddir/examples/train_mlp
export DREAMDDP_TIMEOUT_S=20

# A token file others can read: every rank refuses it, naming the variable.
printf 'secret-of-this-job\n' >"$TMP/token"
chmod 644 "$TMP/token"
launch 2 "$TMP/open" env DREAMDDP_JOB_TOKEN_FILE="$TMP/token" timeout 30 "$SMOKE"
for r in 0 1; do
    [ "$(cat "$TMP/open.$r.rc")" -ne 0 ] && pass "token file 0644 fails rank $r" || fail "rank $r took a 0644 token file"
    expect_grep "$TMP/open.$r" "DREAMDDP_JOB_TOKEN_FILE='$TMP/token' has mode 0644" "rank $r names the variable and the mode"
done

# Mode 0600: the job runs, and no rank warns that the store is open.
chmod 600 "$TMP/token"
launch 2 "$TMP/priv" env DREAMDDP_JOB_TOKEN_FILE="$TMP/token" timeout 30 "$SMOKE"
for r in 0 1; do
    [ "$(cat "$TMP/priv.$r.rc")" -eq 0 ] && pass "token file 0600 works on rank $r" || { fail "rank $r with a 0600 token file"; cat "$TMP/priv.$r"; }
    grep -q "open to anyone" "$TMP/priv.$r" && fail "rank $r warns with a token file" || pass "rank $r does not warn with a token file"
done

# A missing file and both variables at once are errors naming them.
launch 1 "$TMP/missing" env DREAMDDP_JOB_TOKEN_FILE="$TMP/nothing" timeout 30 "$SMOKE"
expect_grep "$TMP/missing.0" "DREAMDDP_JOB_TOKEN_FILE='$TMP/nothing': cannot open it" "a missing token file is named"
launch 1 "$TMP/both" env DREAMDDP_JOB_TOKEN_FILE="$TMP/token" DREAMDDP_JOB_TOKEN=x timeout 30 "$SMOKE"
expect_grep "$TMP/both.0" "both DREAMDDP_JOB_TOKEN and DREAMDDP_JOB_TOKEN_FILE are set" "both variables are an error"

# One rank's file holds another token: it is refused.
printf 'not-the-job\n' >"$TMP/other"
chmod 600 "$TMP/other"
launch 2 "$TMP/wrong" env DREAMDDP_TIMEOUT_S=3 sh -c 'if [ "$DREAMDDP_RANK" = 1 ]; then export DREAMDDP_JOB_TOKEN_FILE="$1"; else export DREAMDDP_JOB_TOKEN_FILE="$2"; fi; exec timeout 30 "$0"' "$SMOKE" "$TMP/other" "$TMP/token"
[ "$(cat "$TMP/wrong.1.rc")" -ne 0 ] && pass "a wrong token fails rank 1" || fail "rank 1 joined with another token"
expect_grep "$TMP/wrong.1" "refused rank 1: the job token differs" "rank 1 is refused"

# No token at all: rank 0 says once that the store is open; rank 1 does not.
launch 2 "$TMP/derived" env -u DREAMDDP_JOB_TOKEN timeout 30 "$SMOKE"
n=$(grep -c "open to anyone who can reach the port" "$TMP/derived.0")
[ "$n" -eq 1 ] && pass "rank 0 warns once about a derived token" || { fail "rank 0 warned $n times"; cat "$TMP/derived.0"; }
grep -q "open to anyone" "$TMP/derived.1" && fail "rank 1 warns too" || pass "only rank 0 warns"

# An outsider connects to the store and stays idle: rank 0 exits right
# after the last rank (it waited the whole timeout before).
port=$(free_port)
python3 -c '
import socket, sys, time
end = time.time() + 60
while time.time() < end:
    try:
        s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), 0.5)
        break
    except OSError:
        time.sleep(0.02)
open(sys.argv[2], "w").write("connected\n")
time.sleep(60)
' "$port" "$TMP/outsider" &
outsider=$!
ranks=""
for r in 0 1; do
    (DREAMDDP_RANK=$r DREAMDDP_WORLD_SIZE=2 DREAMDDP_MASTER_ADDR=127.0.0.1 DREAMDDP_MASTER_PORT=$port \
        DREAMDDP_JOB_TOKEN=idle-outsider-test timeout 60 "$MLP" --steps 30 >"$TMP/idle.$r" 2>&1
     echo $? >"$TMP/idle.$r.rc"; date +%s.%N >"$TMP/idle.$r.end") &
    ranks="$ranks $!"
done
for p in $ranks; do wait "$p"; done
kill "$outsider" 2>/dev/null
wait "$outsider" 2>/dev/null
[ -f "$TMP/outsider" ] && pass "the outsider was connected during the job" || fail "the outsider never connected"
for r in 0 1; do
    [ "$(cat "$TMP/idle.$r.rc")" -eq 0 ] && pass "rank $r succeeds with an outsider connected" || { fail "rank $r failed"; cat "$TMP/idle.$r"; }
done
lag=$(python3 -c 'import sys; print("%.3f" % (float(open(sys.argv[1]).read()) - float(open(sys.argv[2]).read())))' "$TMP/idle.0.end" "$TMP/idle.1.end")
echo "# rank 0 exited ${lag} s after rank 1 with an idle outsider connected"
python3 -c 'import sys; sys.exit(0 if float(sys.argv[1]) < 1.0 else 1)' "$lag" && pass "rank 0 exits within 1 s of rank 1 (${lag} s)" || fail "rank 0 exited ${lag} s after rank 1"
finish
