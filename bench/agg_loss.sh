#!/bin/sh
# bench/agg_loss.sh: a lost aggregator, survived, on the emulated cluster.
# train_mlp --strategy dreamddp:4 --steps 300 on 4 workers + 2 aggregators
# (6 hosts), uninterrupted and with, at step 100: one aggregator killed
# (kill -9), both killed, one aggregator's link cut for 20 s (netcluster
# cut, then mend). Per run: the held-out accuracy, the run's seconds, and
# the seconds from the fault to the workers going on (rank 0's "go on
# without" line). And what surviving costs when nothing fails (the copy of
# every message pushed): ddbench train-sim on the gpt2-blocks profile
# (scale 0.25) under DREAMDDP_AGG_LOSS=survive and =stop, interleaved
# (cases cost-STRATEGY). Results in results/agg_loss.jsonl.
#   ROUNDS=1 CASES="none kill-one cost-ddp" sh bench/agg_loss.sh
. "$(dirname "$0")/lib.sh"
MLP=${MLP:-$builddir/examples/train_mlp}
STRATEGY=${STRATEGY:-dreamddp:4}
CASES=${CASES:-none kill-one kill-both cut-one cost-ddp cost-dreamddp:4}
# Deterministic runs (DREAMDDP_DETERMINISTIC): the uninterrupted run's bits
# are the same every time, so a fault's effect is the difference alone.
DET=${DET:-yes}
out=$RESULTS/agg_loss.jsonl

now() { date +%s.%N; }

# one CASE ROUND: the six ranks, each in its host, and the fault.
one() {
    case=$1
    dir=$(mktemp -d)
    port=$((port + 1))
    master=$("$NC" addr 0)
    t0=$(now)
    for i in 0 1 2 3 4 5; do
        "$NC" exec $i env RANK=$i WORLD_SIZE=6 MASTER_ADDR="$master" \
            MASTER_PORT=$port DREAMDDP_NUM_AGGREGATORS=2 \
            DREAMDDP_LINE_BUFFERED=yes DREAMDDP_DETERMINISTIC="$DET" \
            sh -c 'echo $$ >"$0.pid"; exec "$@"' "$dir/$i" \
            "$MLP" --strategy "$STRATEGY" --steps 300 --seed 1 \
            >"$dir/out.$i" 2>&1 &
    done
    fault=0
    if [ "$case" != none ]; then
        w=0
        until grep -q '^ *100 ' "$dir/out.0" 2>/dev/null || [ $w -gt 3000 ]; do
            sleep 0.02; w=$((w + 1))
        done
        fault=$(now)
        case $case in
        kill-one) kill -9 "$(cat "$dir/4.pid")" ;;
        kill-both) kill -9 "$(cat "$dir/4.pid")" "$(cat "$dir/5.pid")" ;;
        cut-one) "$NC" cut 4 ;;
        esac
        w=0
        until grep -q 'go on without' "$dir/out.0" 2>/dev/null || [ $w -gt 6000 ]; do
            sleep 0.01; w=$((w + 1))
        done
        went_on=$(now)
        if [ "$case" = cut-one ]; then
            # Mended 20 s after the cut: the aggregator finds itself dropped.
            sleep "$(echo "20 - ($went_on - $fault)" | bc)"
            "$NC" mend 4
        fi
    fi
    wait
    t1=$(now)
    acc=$(sed -n 's/.*held-out accuracy \([0-9.]*\),.*/\1/p' "$dir/out.0")
    params=$(sed -n 's/.*, parameters \([0-9a-f]*\)$/\1/p' "$dir/out.0")
    recovered=null
    [ "$fault" = 0 ] || recovered=$(echo "$went_on $fault" | awk '{printf "%.3f", $1 - $2}')
    rcs=$(for i in 0 1 2 3 4 5; do
        if grep -q "train_mlp: rank $i:" "$dir/out.$i"; then echo 1; else echo 0; fi
    done | paste -sd, -)
    printf '{"case":"%s","strategy":"%s","deterministic":"%s","accuracy":%s,"params":"%s","run_s":%s,"fault_to_go_on_s":%s,"rank_failed":[%s]}\n' \
        "$case" "$STRATEGY" "$DET" "${acc:-null}" "$params" "$(echo "$t1 $t0" | awk '{printf "%.2f", $1 - $2}')" \
        "$recovered" "$rcs"
    grep -h "go on without\|declared lost" "$dir"/out.* | sed 's/^/    /' >&2 || true
    rm -rf "$dir"
}

# cost STRATEGY: train-sim under survive, then stop, on the 6 hosts.
cost() {
    for mode in survive stop; do
        port=$((port + 1))
        MASTER_PORT=$port DREAMDDP_NUM_AGGREGATORS=2 DREAMDDP_AGG_LOSS=$mode \
            timeout -k 5 200 "$ANCHORS/run_on_cluster.sh" 6 "$DDBENCH" \
            train-sim --profile "$PROFILES/gpt2-blocks" --scale 0.25 \
            --strategy "$1" --iters 30 --json 2>/dev/null |
            sed -n "s/^{/{\"case\":\"cost\",\"agg_loss\":\"$mode\",/p"
    done
}

round() {
    for c in $CASES; do
        case $c in
        cost-*) cost "${c#cost-}" | keep "$out" "$1" ;;
        *) one "$c" | keep "$out" "$1" ;;
        esac
    done
}

start_results "$out" 6
rounds cluster 6 round
