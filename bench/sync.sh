#!/bin/sh
# bench/sync.sh: aggregation against the push/pull limit. On 8 emulated
# hosts at 1 Gbit/s, 4 workers sync 100 MB with 0, 1, 2 and 4 CPU
# aggregators (ddbench sync), beside PyTorch's gloo allreduce among 4
# hosts and the kernel's TCP moving the same bytes with nothing else
# (bench/tcpfloor.c); then the train simulator's dreamddp:4 on gpt2-blocks
# with 4 aggregators and with none. Interleaved over $ROUNDS rounds; then
# the tables against the ring limit, the push/pull limit and BytePS's
# modeled optimum. Results: results/sync.jsonl.
# AGGREGATORS lists the aggregator counts (default 0 1 2 4); STREAMS lists
# stream counts to run each with (ddbench sync --streams; default: none
# given, the topology's choice); FLOOR=0 and TRAIN=0 leave out the TCP
# floor and the train simulator.
. "$(dirname "$0")/lib.sh"
out=$RESULTS/sync.jsonl
bytes=${BYTES:-100000000}
aggregators=${AGGREGATORS:-0 1 2 4}
streams=${STREAMS:-topology}
floor=${TMPDIR:-/tmp}/dd-tcpfloor.$$
trap 'rm -f "$floor"' EXIT

if ! "$DDBENCH" sync --help >/dev/null 2>&1; then
    echo "bench/sync.sh: $DDBENCH has no 'sync' command yet (issue 5)" >&2
    exit 77
fi
${CC:-cc} -O2 -pthread -o "$floor" "$here/tcpfloor.c"

# tcp_floor K ROUND: the slowest rank's seconds moving one sync's bytes
# among 4 workers and K aggregators with bare TCP (K = 0: the ring's bytes,
# 2(n-1)/n·M each way per worker).
tcp_floor() {
    addrs=
    i=0
    while [ $i -lt $((4 + $1)) ]; do
        addrs="$addrs $("$NC" addr $i)"
        i=$((i + 1))
    done
    on_hosts $((4 + $1)) 60 sh -c "exec \"$floor\" \$RANK 4 $1 $bytes $addrs" |
        awk -v k="$1" -v b="$bytes" '$1 == "tcpfloor" && $5 > t { t = $5 }
            END { if (t) printf "{\"anchor\":\"tcp-floor\",\"workers\":4,\"aggregators\":%d,\"bytes\":%d,\"time_s\":%s}\n", k, b, t }' |
        keep "$out" "$2"
}

# train K STRATEGY ROUND: the train simulator with K aggregators.
train() {
    on_hosts $((4 + $1)) 200 env DREAMDDP_NUM_AGGREGATORS=$1 "$DDBENCH" train-sim \
        --profile "$PROFILES/gpt2-blocks" --scale 0.25 --strategy "$2" \
        --iters 8 --json | sed "s/^{/{\"train\":true,\"aggregators\":$1,/" |
        keep "$out" "$3"
}

round() {
    for k in $aggregators; do
        for n in $streams; do
            st=
            [ "$n" = topology ] || st="--streams $n"
            on_hosts $((4 + k)) 150 env DREAMDDP_NUM_AGGREGATORS=$k \
                "$DDBENCH" sync --bytes "$bytes" --iters 5 $st --json |
                keep "$out" "$1"
        done
    done
    on_hosts 4 150 "$TORCH_PYTHON" "$ANCHORS/torch_allreduce.py" \
        $((bytes / 4)) 5 |
        sed -n 's/^torch-gloo .*bytes=\([0-9]*\) world=\([0-9]*\) median_s=\([0-9.]*\).*/{"anchor":"torch-gloo","bytes":\1,"world":\2,"time_s":\3}/p' |
        keep "$out" "$1"
    for k in $aggregators; do
        [ "${FLOOR:-1}" = 0 ] || tcp_floor $k "$1"
    done
    if [ "${TRAIN:-1}" != 0 ]; then
        train 0 none "$1"
        train 0 dreamddp:4 "$1"
        train 4 dreamddp:4 "$1"
    fi
}

start_results "$out" 8
rounds cluster 8 round
python3 "$here/report.py" sync "$out"
