#!/bin/sh
# demo.sh: what `make demo` runs. Trains examples/train_mlp through ddrun on
# this machine under several strategies and prints their results side by
# side. It reads only the --json line that rank 0 prints last; it must stay
# quick (under three minutes on two cores), so it adds no runs beyond these.
#
#   sh examples/demo.sh [BUILDDIR]     (DREAMDDP_BACKEND_PATH from `make demo`)
set -u

builddir=${1:-.}
ddrun=$builddir/tools/ddrun
example=$builddir/examples/train_mlp
steps=${DEMO_STEPS:-300}
logs=$(mktemp -d "${TMPDIR:-/tmp}/dd-demo.XXXXXX")
results=$logs/results
: >"$results"
failed=0

# field NAME JSON: the value of NAME in a flat JSON object.
field() {
    printf '%s\n' "$2" | sed -n "s/.*\"$1\":\"\{0,1\}\([^\",}]*\).*/\1/p"
}

# run WORKERS AGGREGATORS STRATEGY [CODEC]: one training job; appends a
# table row.
run() {
    w=$1 k=$2 s=$3 c=${4:-none}
    log=$logs/$(echo "$s-$w-$k-$c" | tr ':' '_').log
    printf 'demo: %-11s %-9s %d workers + %d aggregators ... ' "$s" "$c" "$w" "$k"
    "$ddrun" -n $((w + k)) --aggregators "$k" --timeout 150 -- \
        "$example" --strategy "$s" --compression "$c" --steps "$steps" \
        --json >"$log" 2>&1
    rc=$?
    line=$(sed -n 's/^0: \({.*}\)$/\1/p' "$log" | tail -n 1)
    if [ $rc -eq 0 ] && [ -n "$line" ]; then
        echo ok
        printf '%s\n' "$line" >>"$results"
        printf '| %-11s | %-9s | %7s | %11s | %8s | %10s | %7s | %9s | %7s |\n' \
            "$(field strategy "$line")" "$c" "$(field workers "$line")" "$k" \
            "$(field accuracy "$line")" "$(field final_loss "$line")" \
            "$(awk -v s="$(field mean_step_s "$line")" \
                'BEGIN { printf "%.1f", s * 1e3 }')" \
            "$(awk -v b="$(field synced_bytes "$line")" \
                'BEGIN { printf "%.1f", b / 1e6 }')" \
            "$(awk -v b="$(field wire_bytes "$line")" \
                'BEGIN { printf "%.1f", b / 1e6 }')" >>"$logs/table"
    else
        echo "FAILED (exit $rc, log: $log)"
        tail -n 5 "$log" | sed 's/^/    /'
        printf '| %-11s | %-9s | %7s | %11s | %-55s |\n' "$s" "$c" "$w" "$k" \
            "FAILED, see $log" >>"$logs/table"
        failed=1
    fi
}

start=$(date +%s)
: >"$logs/table"
run 4 0 ddp
run 4 0 localsgd:4
run 4 0 dreamddp:4
run 4 2 dreamddp:4
run 4 0 dreamddp:4 fp16

echo
echo "train_mlp, $steps steps of batch 32 per worker, held-out accuracy after a final average:"
echo
echo '| strategy    | codec     | workers | aggregators | accuracy | final loss | ms/step | MB synced | MB wire |'
echo '|-------------|-----------|---------|-------------|----------|------------|---------|-----------|---------|'
cat "$logs/table"
echo
echo "(MB synced: per worker, whole run, before the codec; MB wire: what the codec sent. Raw JSON lines: $results;" \
    "$(($(date +%s) - start)) s in all.)"
exit $failed
