#!/bin/sh
# bench/torch_frontend.sh: the PyTorch front end (python/dreamddp) on the
# anchors' gpt2-blocks model (scale 0.25; bench/torch_frontend.py runs
# torch_sim.py's own Model) under ddp, localsgd:4 and dreamddp:4, beside
# torch_sim.py (compute, ddp, localsgd:4) and ddbench train-sim (none and the
# same strategies, each also with --step-work: the training loop's own memory
# work, which every PyTorch run does), on the same 4 emulated hosts at
# 1 Gbit/s, interleaved
# over $ROUNDS rounds; then the tables. Acceptance (issue 14): the front
# end's s/iter within 1.05x of train-sim's for the same strategy, and
# dreamddp:4 through it exposing at most 0.70x PyTorch Local SGD's
# communication. Results: results/torch_frontend.jsonl.
. "$(dirname "$0")/lib.sh"
out=$RESULTS/torch_frontend.jsonl
iters=${ITERS:-8}
strategies=${STRATEGIES:-ddp localsgd:4 dreamddp:4}
anchors=${ANCHOR_MODES:-compute ddp localsgd:4}
# The package from this tree, over this build's library.
PYTHONPATH=$top/python${PYTHONPATH:+:$PYTHONPATH}
DREAMDDP_LIBRARY=${DREAMDDP_LIBRARY:-$builddir/.libs/libdreamddp.so.1}
export PYTHONPATH DREAMDDP_LIBRARY

round() {
    for m in $anchors; do
        on_hosts 4 150 env SCALE=0.25 "$TORCH_PYTHON" \
            "$ANCHORS/torch_sim.py" "$m" "$iters" | keep "$out" "$1"
    done
    for s in compute $strategies; do
        on_hosts 4 150 env SCALE=0.25 ANCHORS="$ANCHORS" "$TORCH_PYTHON" \
            "$here/torch_frontend.py" "$s" "$iters" | keep "$out" "$1"
    done
    for s in none $strategies; do
        for work in "" --step-work; do
            on_hosts 4 150 "$DDBENCH" train-sim \
                --profile "$PROFILES/gpt2-blocks" --scale 0.25 --strategy "$s" \
                --iters "$iters" $work --json | keep "$out" "$1"
        done
    done
}

start_results "$out" 4
rounds cluster 4 round
python3 "$here/report.py" train "$out"
python3 "$here/report.py" frontend "$out"
