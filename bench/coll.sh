#!/bin/sh
# bench/coll.sh: allreduce of 100 MB among 4 emulated hosts at 1 Gbit/s
# through dreamddp's UCX and Gloo modules and through PyTorch's gloo (the
# anchor), interleaved over $ROUNDS rounds; then the table of medians and
# ratios against PyTorch and the ring limit. STREAMS lists stream counts
# (DREAMDDP_NUM_STREAMS, ddbench's --streams) to run each module with
# (default 1); RATE=none leaves the links unshaped. Results:
# results/coll.jsonl.
. "$(dirname "$0")/lib.sh"
out=$RESULTS/coll.jsonl
bytes=${BYTES:-100000000}
streams=${STREAMS:-1}

round() {
    for b in ucx gloo; do
        for n in $streams; do
            on_hosts 4 150 "$DDBENCH" coll --op allreduce --backend $b \
                --streams "$n" --bytes "$bytes" --iters 5 --json |
                keep "$out" "$1"
        done
    done
    # torch_allreduce.py prints a line of text; make it a JSON line.
    on_hosts 4 150 "$TORCH_PYTHON" "$ANCHORS/torch_allreduce.py" \
        $((bytes / 4)) 5 |
        sed -n 's/^torch-gloo .*bytes=\([0-9]*\) world=\([0-9]*\) median_s=\([0-9.]*\).*/{"anchor":"torch-gloo","bytes":\1,"world":\2,"time_s":\3}/p' |
        keep "$out" "$1"
}

start_results "$out" 4
rounds cluster 4 round
python3 "$here/report.py" coll "$out"
