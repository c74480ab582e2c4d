#!/bin/sh
# bench/drift_cost.sh: what the divergence monitor costs. ddbench train-sim
# on gpt2-blocks (scale 0.25), 4 emulated hosts at 1 Gbit/s, each strategy
# with DREAMDDP_DRIFT=yes and =no in turn, interleaved over $ROUNDS rounds;
# then the ratio on ÷ off per strategy (issue 20 allows 1.02). STRATEGIES
# chooses the runs. Results: results/drift_cost.jsonl.
. "$(dirname "$0")/lib.sh"
out=$RESULTS/drift_cost.jsonl
iters=${ITERS:-8}
strategies=${STRATEGIES:-localsgd:4 dreamddp:4}

round() {
    for s in $strategies; do
        for d in yes no; do
            on_hosts 4 150 env DREAMDDP_DRIFT=$d "$DDBENCH" train-sim \
                --profile "$PROFILES/gpt2-blocks" --scale 0.25 --strategy "$s" \
                --iters "$iters" --json |
                sed -n "s/^{/{\"drift\":\"$d\",/p" | keep "$out" "$1"
        done
    done
}

start_results "$out" 4
rounds cluster 4 round
python3 "$here/report.py" drift_cost "$out"
