# bench/lib.sh: what the benchmark scripts share: paths, one netcluster
# session per round (taken under a lock so that other users of the shared
# emulated network are not torn down, and always brought down again), runs
# on the emulated hosts under a time limit, and the JSON-lines results.
# Sourced, not run. Every path can be overridden from the environment.
set -eu
here=$(cd "$(dirname "$0")" && pwd)
top=$(cd "$here/.." && pwd)
builddir=${BUILDDIR:-$top}
shared=${DDTEST_SHARED:-$top/../shared}
NC=${NETCLUSTER:-$shared/tools/netcluster}
ANCHORS=${ANCHORS:-$shared/anchors}
PROFILES=${PROFILES:-$shared/profiles}
# The published profiles: the repository carries them in tests/fixtures.
[ -d "$PROFILES" ] || PROFILES=$top/tests/fixtures/profiles
DDBENCH=${DDBENCH:-$builddir/tools/ddbench}
RESULTS=${RESULTS:-$here/results}
LOCK=${NETCLUSTER_LOCK:-/tmp/netcluster.lock}
ROUNDS=${ROUNDS:-3}
RATE=${RATE:-1gbit}
# Debian's python3-torch lives in Debian's python, not in a virtualenv's.
TORCH_PYTHON=${TORCH_PYTHON:-/usr/bin/python3}
DREAMDDP_BACKEND_PATH=${DREAMDDP_BACKEND_PATH:-$builddir/.libs}
DREAMDDP_TIMEOUT_S=${DREAMDDP_TIMEOUT_S:-60}
export DREAMDDP_BACKEND_PATH DREAMDDP_TIMEOUT_S
port=29600

# start_results FILE HOSTS: empties FILE and writes the run's facts first.
start_results() {
    mkdir -p "$(dirname "$1")"
    printf '{"meta":{"date":"%s","hosts":%d,"rate":"%s","cores":%d,"rounds":%d,"host":"%s"}}\n' \
        "$(date -u +%Y-%m-%dT%H:%MZ)" "$2" "$RATE" "$(nproc)" "$ROUNDS" \
        "$(uname -sm)" >"$1"
}

# cluster N CMD...: runs CMD with N emulated hosts up, holding the lock;
# the hosts come down however CMD ends.
cluster() {
    n=$1
    shift
    (
        flock 9
        trap '"$NC" down' EXIT
        # Hosts a killed run left behind, or links the kernel is still
        # removing after the last 'down', make 'up' fail ("File exists"):
        # under the lock they are nobody's, so clear them and try again.
        tries=0
        until "$NC" up "$n" --rate "$RATE" >&2; do
            tries=$((tries + 1))
            [ $tries -lt 3 ] || exit 1
            "$NC" down >/dev/null 2>&1 || true
            sleep 2
        done
        "$@"
    ) 9>"$LOCK"
}

# on_hosts N LIMIT CMD...: CMD on each of the first N hosts with
# torchrun-style variables; timeout stops every rank after LIMIT seconds.
on_hosts() {
    n=$1 limit=$2
    shift 2
    port=$((port + 1))
    MASTER_PORT=$port timeout -k 5 "$limit" \
        "$ANCHORS/run_on_cluster.sh" "$n" "$@" 2>&1 ||
        echo "bench: '$*' failed or timed out on $n hosts" >&2
}

# keep FILE ROUND: appends stdin's JSON lines to FILE tagged with the round,
# and shows them.
keep() {
    sed -n "s/^{/{\"round\":$2,/p" | tee -a "$1"
}

# rounds CMD...: CMD 1, CMD 2, ... CMD $ROUNDS, each in its own short
# netcluster session, so that runs interleave and other users get turns.
rounds() {
    r=1
    while [ $r -le "$ROUNDS" ]; do
        echo "bench: round $r of $ROUNDS" >&2
        "$@" $r
        r=$((r + 1))
    done
}
