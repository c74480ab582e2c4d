#!/bin/sh
# bench/accuracy.sh: examples/train_mlp's held-out accuracy for each
# strategy, codec and seed, on this machine's loopback (accuracy depends on
# the arithmetic, not on the network, so no emulated hosts are needed; it
# runs beside other work). Results: results/accuracy.jsonl (or $OUT), then
# the table of means and spreads over the seeds.
#
#   STRATEGIES  strategies (default: ddp localsgd:4 localsgd:16 plsgd:4
#               dreamddp:4 adaptive dreamddp:4+agg2); S+aggK runs S with K
#               aggregators beside the 4 workers; dreamddp:4+next is
#               delayed averaging (dreamddp:4+next+agg2 with aggregators)
#   CODECS      --compression values (default: none)
#   DATA        iid and/or noniid (default: noniid)
#   STEPS       step counts, each a run of its own (default: 300 1000)
#   SEEDS       (default: 1 2 3)
#   WORKERS     (default: 4)
#   EXTRA       more train_mlp arguments, such as --lr 0.05
#   APPEND=1    add to the results instead of starting them afresh (to
#               rerun what failed)
. "$(dirname "$0")/lib.sh"
out=${OUT:-$RESULTS/accuracy.jsonl}
strategies=${STRATEGIES:-ddp localsgd:4 localsgd:16 plsgd:4 dreamddp:4 adaptive dreamddp:4+agg2}
codecs=${CODECS:-none}
datas=${DATA:-noniid}
steps_list=${STEPS:-300 1000}
seeds=${SEEDS:-1 2 3}
workers=${WORKERS:-4}
DDRUN=${DDRUN:-$builddir/tools/ddrun}
TRAIN_MLP=${TRAIN_MLP:-$builddir/examples/train_mlp}

[ "${APPEND:-0}" = 1 ] && [ -s "$out" ] || start_results "$out" 1
log=$(mktemp "${TMPDIR:-/tmp}/dd-accuracy.XXXXXX")
trap 'rm -f "$log"' EXIT
for data in $datas; do
    for steps in $steps_list; do
        for s in $strategies; do
            strategy=${s%+agg*}
            aggs=0
            [ "$strategy" = "$s" ] || aggs=${s##*+agg}
            for c in $codecs; do
                for seed in $seeds; do
                    "$DDRUN" -n $((workers + aggs)) --aggregators "$aggs" \
                        --timeout 900 -- "$TRAIN_MLP" --strategy "$strategy" \
                        --data "$data" --steps "$steps" --seed "$seed" \
                        --compression "$c" --json ${EXTRA:-} >"$log" 2>&1 &&
                        rc=0 || rc=$?
                    line=$(sed -n "s/^0: {/{\"seed\":$seed,/p" "$log")
                    if [ $rc = 0 ] && [ -n "$line" ]; then
                        printf '%s\n' "$line" | tee -a "$out"
                    else
                        echo "bench: $s $c $data $steps steps seed $seed failed (exit $rc):" >&2
                        tail -n 5 "$log" | sed 's/^/    /' >&2
                    fi
                done
            done
        done
    done
done
python3 "$here/report.py" accuracy "$out"
