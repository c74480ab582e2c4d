#!/bin/sh
# bench/time_to_loss.sh: examples/torch_gpt.py, a small byte-level GPT with
# real compute, trained to a target held-out loss on the emulated cluster:
# PyTorch's DDP and PostLocalSGD H=4 beside dreamddp's ddp, localsgd:4,
# dreamddp:4 and dreamddp:4+next (also with fp16, and with fp16 and 2
# aggregator hosts), interleaved over $ROUNDS rounds. Each round runs
# PyTorch DDP first for $ITERS iterations: the held-out loss it reaches
# there is the round's target. Every other run goes on until it reaches the
# target past $ITERS iterations and $BUDGET seconds (so that the loss after
# the same samples and after the budget are both measured), or until
# $CAP x DDP's time. Then the table (bench/report.py ttl) and, with
# gnuplot, the plot of held-out loss against time (bench/plots.sh).
#
#   RATE        link rate (default 20mbit: one PyTorch DDP iteration of the
#               default model spends about 1.5x its compute communicating on
#               2 cores; see BENCHMARKS.md)
#   ITERS       iterations that set the target (default 60)
#   BUDGET      seconds of training after which every run's loss is read
#               (default 90)
#   CAP         a run stops at this many times DDP's time (default 1.5)
#   EVAL_EVERY  iterations between evaluations (default 5)
#   RUNS        which runs (default: all eight, names as in the table)
#   GPT_ARGS    more torch_gpt.py flags (default: none, the default model)
# Results: results/time_to_loss.jsonl (or $OUT).
RATE=${RATE:-20mbit}
. "$(dirname "$0")/lib.sh"
out=${OUT:-$RESULTS/time_to_loss.jsonl}
iters=${ITERS:-60}
budget=${BUDGET:-90}
cap=${CAP:-1.5}
every=${EVAL_EVERY:-5}
runs=${RUNS:-torch-ddp torch-localsgd:4 ddp localsgd:4 dreamddp:4 dreamddp:4+next dreamddp:4+next/fp16 dreamddp:4+next/fp16@2}
GPT=$top/examples/torch_gpt.py
PYTHONPATH=$top/python${PYTHONPATH:+:$PYTHONPATH}
DREAMDDP_LIBRARY=${DREAMDDP_LIBRARY:-$builddir/.libs/libdreamddp.so.1}
export PYTHONPATH DREAMDDP_LIBRARY
log=$(mktemp "${TMPDIR:-/tmp}/dd-ttl.XXXXXX")
trap 'rm -f "$log"' EXIT

# gpt NAME ROUND HOSTS ARGS...: one run on HOSTS hosts (4 workers, the
# rest aggregators); its JSON lines go to the results tagged with the run's
# name and the round.
gpt() {
    name=$1 rnd=$2 hosts=$3
    shift 3
    # shellcheck disable=SC2086 # GPT_ARGS is a list of flags
    on_hosts "$hosts" 900 env DREAMDDP_NUM_AGGREGATORS=$((hosts - 4)) \
        "$TORCH_PYTHON" "$GPT" --eval-every "$every" \
        --val-batches 4 ${GPT_ARGS:-} "$@" >"$log"
    sed -n "s|^{|{\"run\":\"$name\",|p" "$log" | keep "$out" "$rnd" |
        grep '"done"' >&2 || { echo "bench: $name failed:" >&2; tail -n 5 "$log" >&2; }
}

# last FIELD: FIELD of the last torch-ddp line of this round's log.
last() {
    sed -n 's/^{/{/p' "$log" | python3 -c "
import json, sys
rows = [json.loads(l) for l in sys.stdin]
print([r for r in rows if r['event'] == '$2'][-1]['$1'])"
}

round() {
    gpt torch-ddp "$1" 4 --baseline torch-ddp --iters "$iters"
    target=$(last val_loss eval)
    limit=$(python3 -c "print(round($cap * $(last time_s "done"), 1))")
    echo "bench: round $1: target $target (PyTorch DDP after $iters iterations), cap ${limit}s" >&2
    stop="--iters $((iters * 4)) --stop-loss $target --min-iters $iters --min-time $budget --time-budget $limit"
    for run in $runs; do
        s=${run%%/*} hosts=4 extra=""
        case $run in
        torch-ddp) continue ;;
        torch-localsgd:*) extra="--baseline $run" ;;
        */fp16@2) extra="--strategy $s --compression fp16" hosts=6 ;;
        */fp16) extra="--strategy $s --compression fp16" ;;
        *) extra="--strategy $s" ;;
        esac
        # shellcheck disable=SC2086 # flag lists
        gpt "$run" "$1" "$hosts" $extra $stop
    done
}

start_results "$out" 6
python3 - "$out" "$iters" "$budget" <<'EOF'
import json, sys
path, iters, budget = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
lines = open(path).read().splitlines()
meta = json.loads(lines[0])
meta["meta"].update(target_iters=iters, budget_s=budget,
                    model="the default model (4 layers, width 128, context 64, batch 8 per worker)")
open(path, "w").write(json.dumps(meta) + "\n")
EOF
rounds cluster 6 round
python3 "$here/report.py" ttl "$out"
