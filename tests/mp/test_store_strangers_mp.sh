#!/bin/sh
# The store under strangers (issue 58, row 9), with real ranks: a late rank
# joins although a stranger holds 120 connections to rank 0's store that
# never log in (and reopens those the store closes), and 500 wrong-token
# logins write a bounded number of lines at rank 0, which still counts them
# all.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
MLP=$top_builddir/examples/train_mlp
export DREAMDDP_TIMEOUT_S=20

# start_rank R PORT OUT TOKEN: one rank of a 2-rank job, in the background.
start_rank() {
    (DREAMDDP_RANK=$1 DREAMDDP_WORLD_SIZE=2 DREAMDDP_MASTER_ADDR=127.0.0.1 \
        DREAMDDP_MASTER_PORT=$2 DREAMDDP_JOB_TOKEN=$4 \
        timeout 90 "$MLP" --steps 20 >"$3" 2>&1
     echo $? >"$3.rc") &
}

# The stranger: opens 120 connections to the store as soon as it listens,
# says nothing on them, and every 0.2 s reopens those the store closed, so
# that 120 stay open however the store treats them. It writes how many it
# holds to READY once the first 120 are open.
stranger() {
    python3 -c '
import socket, sys, time
port, ready = int(sys.argv[1]), sys.argv[2]
socks, opened, t_end = [], 0, time.time() + 80
def connect():
    s = socket.create_connection(("127.0.0.1", port), 0.5)
    s.setblocking(False)
    return s
while time.time() < t_end:
    try:
        socks.append(connect())
        break
    except OSError:
        time.sleep(0.02)
announced = False
while time.time() < t_end:
    alive = []
    for s in socks:
        try:
            if s.recv(1) == b"":
                s.close()
                continue
        except BlockingIOError:
            pass
        except OSError:
            s.close()
            continue
        alive.append(s)
    socks = alive
    while len(socks) < 120:
        try:
            socks.append(connect())
            opened += 1
        except OSError:
            break
    if not announced and len(socks) >= 120:
        time.sleep(1.0)  # let the store take them all in
        open(ready, "w").write("%d\n" % len(socks))
        announced = True
    time.sleep(0.2)
' "$1" "$2" &
}

wait_file() {
    i=0
    while [ ! -s "$1" ] && [ "$i" -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
    [ -s "$1" ]
}

# 1. A late rank joins despite 120 idle strangers.
port=$(free_port)
s0=$(date +%s.%N)
start_rank 0 "$port" "$TMP/idle.0" strangers-test
rank0=$!
stranger "$port" "$TMP/held"
strange=$!
if wait_file "$TMP/held"; then
    pass "the stranger holds $(cat "$TMP/held") connections to the store"
else
    fail "the stranger never held 120 connections"
fi
t0=$(date +%s.%N)
start_rank 1 "$port" "$TMP/idle.1" strangers-test
rank1=$!
wait "$rank1"
t1=$(date +%s.%N)
wait "$rank0"
s1=$(date +%s.%N)
kill "$strange" 2>/dev/null
wait "$strange" 2>/dev/null
for r in 0 1; do
    if [ "$(cat "$TMP/idle.$r.rc")" -eq 0 ]; then
        pass "rank $r finished with 120 strangers connected"
    else
        fail "rank $r failed with 120 strangers connected (exit $(cat "$TMP/idle.$r.rc"))"
        sed 's/^/    /' "$TMP/idle.$r"
    fi
done
echo "# the late rank ran for $(python3 -c "print('%.2f' % ($t1 - $t0))") s"
# What the strangers cost rank 0's log: at most 6 lines (5 and a count)
# per 10 s window of rank 0's run, however many connections they made
# (thousands; more under a sanitizer build, whose job runs longer), and
# one window more for slack.
lines=$(grep -c "logged in\|log in" "$TMP/idle.0")
most=$(python3 -c "import math; print(6 * (math.ceil(($s1 - $s0) / 10) + 1))")
grep "logged in\|log in" "$TMP/idle.0" | head -20 | sed 's/^/#   /'
[ "$lines" -le "$most" ] && pass "the strangers: $lines lines at rank 0 (at most $most)" || fail "the strangers wrote $lines lines at rank 0 (more than $most)"

# 2. 500 wrong-token logins while rank 0 waits for rank 1: each is refused,
# rank 0 logs a bounded number of lines about them, and its lines account
# for all 500 (the first few one by one, then counts).
port=$(free_port)
start_rank 0 "$port" "$TMP/bad.0" bad-logins-test
rank0=$!
python3 -c '
import hashlib, hmac, socket, struct, sys, time
port, n = int(sys.argv[1]), int(sys.argv[2])
def frame(body):
    return struct.pack("<I", len(body)) + body
def reply(s):
    head = b""
    while len(head) < 4:
        got = s.recv(4 - len(head))
        if not got:
            return None
        head += got
    (n,) = struct.unpack("<I", head)
    body = b""
    while len(body) < n:
        got = s.recv(n - len(body))
        if not got:
            return None
        body += got
    return body
t_end = time.time() + 60
refused = 0
for i in range(n):
    while True:
        try:
            s = socket.create_connection(("127.0.0.1", port), 2)
            break
        except OSError:
            if time.time() > t_end:
                sys.exit("the store never listened")
            time.sleep(0.02)
    s.settimeout(10)
    # HELLO: magic "DDST", version 3, rank 1, world 2; then a wrong proof.
    s.sendall(frame(struct.pack("<BIHii", 1, 0x44445354, 3, 1, 2)))
    hello = reply(s)
    if hello is None or hello[0] != 0:
        sys.exit("login %d: the HELLO was not answered with a challenge" % i)
    s.sendall(frame(b"\x07" + struct.pack("<I", 32) + bytes(32)))
    r = reply(s)
    if r is not None and r[0] == 2:  # DD_STORE_REPLY_REFUSED
        refused += 1
    s.close()
print(refused)
' "$port" 500 >"$TMP/refused" 2>&1
[ "$(cat "$TMP/refused")" = 500 ] && pass "500 wrong-token logins were refused" || fail "wrong-token logins refused: $(cat "$TMP/refused")"
start_rank 1 "$port" "$TMP/bad.1" bad-logins-test
rank1=$!
wait "$rank1"
wait "$rank0"
for r in 0 1; do
    [ "$(cat "$TMP/bad.$r.rc")" -eq 0 ] && pass "rank $r finished after 500 bad logins" || { fail "rank $r failed after 500 bad logins"; sed 's/^/    /' "$TMP/bad.$r"; }
done
lines=$(grep -c "wrong job token" "$TMP/bad.0")
echo "# rank 0 wrote $lines lines about the wrong-token logins:"
grep "wrong job token" "$TMP/bad.0" | head -20 | sed 's/^/#   /'
[ "$lines" -ge 1 ] && [ "$lines" -lt 20 ] && pass "500 bad logins: $lines lines at rank 0 (fewer than 20)" || fail "500 bad logins wrote $lines lines at rank 0"
# Each line names one refusal, or counts several ("N more ...").
counted=$(grep "wrong job token" "$TMP/bad.0" | python3 -c '
import re, sys
total = 0
for line in sys.stdin:
    m = re.search(r"(\d+) more", line)
    total += int(m.group(1)) if m else 1
print(total)
')
[ "$counted" = 500 ] && pass "rank 0's lines account for all 500 refusals" || fail "rank 0's lines account for $counted refusals, not 500"
finish
