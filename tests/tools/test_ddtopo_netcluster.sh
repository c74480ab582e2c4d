#!/bin/sh
# ddtopo probe on two emulated hosts (netcluster), each with a second link:
# eth0 shaped to 100 Mbit/s, eth1 (added here with `ip link`) to 1 Gbit/s.
# Both are Ethernet of the same reported speed, so the topology's choice is
# eth0 (by name); the measurement must see eth1 faster and pick it.
# Needs root and /work/shared/tools/netcluster (or $NETCLUSTER). It tears
# down every netcluster host, so it runs only when DDTEST_NETCLUSTER=1 says
# nobody else is using netcluster on this machine.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
NC=${NETCLUSTER:-/work/shared/tools/netcluster}
DDTOPO=$top_builddir/tools/ddtopo

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root to create network namespaces"; exit 77
fi
if [ ! -x "$NC" ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    echo "SKIP: netcluster ($NC), ip or tc unavailable"; exit 77
fi
if [ "${DDTEST_NETCLUSTER:-}" != 1 ]; then
    echo "SKIP: set DDTEST_NETCLUSTER=1 to let this test take over netcluster"
    exit 77
fi

cleanup() {
    ip link del ddbr1 2>/dev/null
    "$NC" down >/dev/null 2>&1
    rm -rf "$TMP"
}
trap cleanup EXIT
"$NC" up 2 --rate 100mbit >"$TMP/up" 2>&1 || { cat "$TMP/up"; fail "netcluster up"; finish; }
# The second link: a bridge ddbr1 with one veth per host, named eth1 inside.
ip link add ddbr1 type bridge && ip link set ddbr1 up || fail "bridge ddbr1"
for i in 0 1; do
    ip link add ddw$i type veth peer name eth1 netns ddh$i &&
    ip link set ddw$i master ddbr1 && ip link set ddw$i up &&
    "$NC" exec $i ip addr add 198.18.1.$((10 + i))/24 dev eth1 &&
    "$NC" exec $i ip link set eth1 up &&
    "$NC" exec $i tc qdisc add dev eth1 root tbf rate 1gbit burst 256kb latency 50ms &&
    tc qdisc add dev ddw$i root tbf rate 1gbit burst 256kb latency 50ms ||
        fail "second link of host $i"
done

master=$("$NC" addr 0)
port=$(free_port)
for i in 0 1; do
    "$NC" exec $i env DREAMDDP_RANK=$i DREAMDDP_WORLD_SIZE=2 DREAMDDP_MASTER_ADDR="$master" \
        DREAMDDP_MASTER_PORT=$port DREAMDDP_JOB_TOKEN=ddtopo-nc DREAMDDP_TIMEOUT_S=60 \
        "$DDTOPO" probe --bytes 4M >"$TMP/out.$i" 2>&1 &
done
wait
sed 's/^/rank 0: /' "$TMP/out.0"
sed 's/^/rank 1: /' "$TMP/out.1"
expect_grep "$TMP/out.0" "chosen from the topology: eth0" "the topology alone picks eth0"
expect_grep "$TMP/out.0" "would choose from the measurement: eth1" "the measurement picks eth1"
bw() { awk -v ifn="$1" '$1 == ifn && $2 == 1 { print int($5) }' "$TMP/out.0"; }
slow=$(bw eth0); fast=$(bw eth1)
if [ -n "$slow" ] && [ -n "$fast" ] && [ "$fast" -gt $((2 * slow)) ]; then
    pass "eth1 ($fast MB/s) measured faster than eth0 ($slow MB/s)"
else
    fail "bandwidths eth0 '$slow', eth1 '$fast'"
fi
finish
