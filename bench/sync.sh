#!/bin/sh
# bench/sync.sh: aggregation against the push/pull limit. On 8 emulated
# hosts at 1 Gbit/s, 4 workers sync 100 MB with 0, 1, 2 and 4 CPU
# aggregators (ddbench sync), beside PyTorch's gloo allreduce among 4
# hosts, interleaved over $ROUNDS rounds; then the table against the ring
# limit, the push/pull limit and BytePS's modeled optimum.
# Results: results/sync.jsonl.
. "$(dirname "$0")/lib.sh"
out=$RESULTS/sync.jsonl
bytes=${BYTES:-100000000}

if ! "$DDBENCH" sync --help >/dev/null 2>&1; then
    echo "bench/sync.sh: $DDBENCH has no 'sync' command yet (issue 5)" >&2
    exit 77
fi

round() {
    for k in 0 1 2 4; do
        on_hosts $((4 + k)) 150 env DD_NUM_AGGREGATORS=$k "$DDBENCH" sync \
            --bytes "$bytes" --iters 5 --json | keep "$out" "$1"
    done
    on_hosts 4 150 "$TORCH_PYTHON" "$ANCHORS/torch_allreduce.py" \
        $((bytes / 4)) 5 |
        sed -n 's/^torch-gloo .*bytes=\([0-9]*\) world=\([0-9]*\) median_s=\([0-9.]*\).*/{"anchor":"torch-gloo","bytes":\1,"world":\2,"time_s":\3}/p' |
        keep "$out" "$1"
}

start_results "$out" 8
rounds cluster 8 round
python3 "$here/report.py" sync "$out"
