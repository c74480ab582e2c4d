#!/bin/sh
# A census does not call a rank frozen because the host starves it of CPU.
# Of four ranks training, ranks 1 and 2 get 0.15 s of every 3.15 s (SIGSTOP
# and SIGCONT from here: their heartbeats come 3 s apart, where a period is
# 0.33 s), and then rank 3 freezes for good (SIGSTOP). Every rank must stop
# naming rank 3 alone. The sync that times out started while ranks 1 and 2
# ran, so the census 4 s later falls while they are stopped: one that waited
# its fixed 2 periods (0.67 s) named them beside rank 3; it now gives each
# rank twice the longest gap between its beats it published lately (at
# most the timeout).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
MP=$top_builddir/tests/mp/mp_sched
T=4
export DREAMDDP_TIMEOUT_S=$T DREAMDDP_LOG_LEVEL=info DREAMDDP_LOG_SUBSYS=sched

now() { date +%s.%N; }
out=$TMP/census
port=$(free_port)
n=4
r=0
while [ "$r" -lt "$n" ]; do
    (DREAMDDP_RANK=$r DREAMDDP_WORLD_SIZE=$n DREAMDDP_MASTER_ADDR=127.0.0.1 \
     DREAMDDP_MASTER_PORT=$port DREAMDDP_STRATEGY=ddp timeout -s KILL 120 \
     sh -c 'echo $$ >"$0.pid"; exec "$1" env 100000000' "$out.$r" "$MP" \
     >"$out.$r" 2>&1; echo $? >"$out.$r.rc"; touch "$out.$r.end") &
    r=$((r + 1))
done
w=0
while [ "$w" -lt 600 ] && [ "$(cat "$out".[0-9] 2>/dev/null | grep -c 'committed')" -lt $n ]; do
    sleep 0.1; w=$((w + 1))
done
p1=$(cat "$out.1.pid") p2=$(cat "$out.2.pid") p3=$(cat "$out.3.pid")
# The starvation, until rank 0 has ended.
(
    while [ ! -f "$out.0.end" ]; do
        kill -s STOP "$p1" "$p2" 2>/dev/null
        sleep 3
        kill -s CONT "$p1" "$p2" 2>/dev/null
        sleep 0.15
    done
) &
starver=$!
# Three rounds of it, so that the starved ranks' beats have come late.
sleep 6.5
t0=$(now)
kill -s STOP "$p3"
w=0
while [ ! -f "$out.0.end" ] && [ "$w" -lt 600 ]; do sleep 0.1; w=$((w + 1)); done
wait $starver
kill -s CONT "$p1" "$p2" 2>/dev/null
for r in 1 2; do
    w=0
    while [ ! -f "$out.$r.end" ] && [ "$w" -lt 300 ]; do sleep 0.1; w=$((w + 1)); done
done
kill -s KILL "$p3" 2>/dev/null
kill -s CONT "$p3" 2>/dev/null
for r in 0 1 2; do
    if [ ! -f "$out.$r.end" ]; then
        fail "rank $r still runs"
        continue
    fi
    msg=$(grep -m1 "job aborted" "$out.$r" | sed 's/.*job aborted/job aborted/')
    echo "census: rank $r exited $(cat "$out.$r.rc"): $msg"
    [ "$(cat "$out.$r.rc")" != 0 ] || fail "rank $r exited with success"
    expect_grep "$out.$r" "job aborted: rank 3 stopped answering" \
        "rank $r names rank 3 alone, not a starved rank"
done
echo "census: rank 0 ended $(echo "$(now) - $t0" | bc) s after rank 3 froze (or later)"
wait
finish
