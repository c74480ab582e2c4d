#!/bin/sh
# bench/elastic.sh: a lost worker under ddrun --elastic, on this machine.
# train_mlp --steps 300 --commit-every 20 --data global on 4 workers, with
# DREAMDDP_DETERMINISTIC=yes, uninterrupted and with rank 2 killed (kill -9)
# once rank 0 has printed step 100: with --max-restarts 0 (3 workers
# finish) and 1 (rank 2 started again), for each seed of SEEDS (the
# restart for the first seed only). Per run: the held-out accuracy,
# the workers at the end, the step the job resumed from, the seconds from
# the fault to the new generation's rank 0 resuming from the commits, and
# the run's seconds. ddrun starts its ranks on one host, so this runs on
# loopback, not on the emulated cluster (under its lock all the same: the
# machine's cores are the benchmark's). Results in results/elastic.jsonl.
#   ROUNDS=1 SEEDS="1 2" STRATEGIES="ddp dreamddp:4" sh bench/elastic.sh
. "$(dirname "$0")/lib.sh"
DDRUN=${DDRUN:-$builddir/tools/ddrun}
MLP=${MLP:-$builddir/examples/train_mlp}
STRATEGIES=${STRATEGIES:-ddp localsgd:4 dreamddp:4 dreamddp:4+next}
SEEDS=${SEEDS:-1 2 3}
out=$RESULTS/elastic.jsonl
export DREAMDDP_DETERMINISTIC=yes DREAMDDP_TIMEOUT_S=5

now() { date +%s.%N; }

# one STRATEGY CASE SEED: CASE is none, kill (no restart) or rejoin.
one() {
    s=$1 case=$2 seed=$3
    log=$(mktemp)
    restarts=0
    [ "$case" = rejoin ] && restarts=1
    t0=$(now)
    timeout -s KILL 300 "$DDRUN" --elastic -n 4 --max-restarts $restarts -- \
        "$MLP" --strategy "$s" --steps 300 --commit-every 20 --data global \
        --seed "$seed" \
        >"$log" 2>&1 &
    job=$!
    fault=0 resumed_at=0
    if [ "$case" != none ]; then
        w=0
        until grep -q '^0:    100 ' "$log" 2>/dev/null || [ $w -gt 6000 ]; do
            sleep 0.01; w=$((w + 1))
        done
        for p in $(pgrep -P "$(pgrep -P $job)"); do
            if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
                grep -qx 'DREAMDDP_RANK=2'; then
                fault=$(now)
                kill -9 "$p"
            fi
        done
        w=0
        until grep -q '^0: .*elastic: generation 1 of' "$log" 2>/dev/null || [ $w -gt 6000 ]; do
            sleep 0.01; w=$((w + 1))
        done
        resumed_at=$(now)
    fi
    wait $job || true
    t1=$(now)
    acc=$(sed -n 's/^0: done: .*held-out accuracy \([0-9.]*\),.*/\1/p' "$log")
    workers=$(sed -n 's/^0: done: [^,]*, \([0-9]*\) workers,.*/\1/p' "$log")
    step=$(sed -n 's/^0: .*elastic: generation 1 of [0-9]* workers resumes at step \([0-9]*\),.*/\1/p' "$log")
    recovered=null
    [ "$fault" = 0 ] || recovered=$(echo "$resumed_at $fault" | awk '{printf "%.3f", $1 - $2}')
    params=$(sed -n 's/^0: done: .*, parameters \([0-9a-f]*\)$/\1/p' "$log")
    printf '{"strategy":"%s","case":"%s","seed":%s,"accuracy":%s,"params":"%s","workers":%s,"resumed_step":%s,"fault_to_restored_s":%s,"run_s":%s}\n' \
        "$s" "$case" "$seed" "${acc:-null}" "$params" "${workers:-null}" "${step:-null}" \
        "$recovered" "$(echo "$t1 $t0" | awk '{printf "%.2f", $1 - $2}')"
    rm -f "$log"
}

round() {
    first=${SEEDS%% *}
    for s in $STRATEGIES; do
        for seed in $SEEDS; do
            for c in none kill rejoin; do
                [ "$c" = rejoin ] && [ "$seed" != "$first" ] && continue
                one "$s" "$c" "$seed" | keep "$out" "$1"
            done
        done
    done
}

# The lock alone: no emulated hosts are needed.
locked() { (flock 9; "$@") 9>"$LOCK"; }

start_results "$out" 1
r=1
while [ $r -le "$ROUNDS" ]; do
    echo "bench: round $r of $ROUNDS" >&2
    locked round $r
    r=$((r + 1))
done
