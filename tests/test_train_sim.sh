#!/bin/sh
# The train simulator end to end through ddrun: with --check every strategy
# leaves the exact average in every layer after each window, with the
# workers' allreduce and through aggregators; ddbench sync checks its
# average too. On ../shared/profiles/gpt2-blocks (when present) it runs
# issue 4's acceptance command as written.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
DDBENCH=$top_builddir/tools/ddbench
SMALL=$top_srcdir/tests/fixtures/profile-small
export DREAMDDP_TIMEOUT_S=30
if "$DDBENCH" plan "$SMALL" 2>&1 | grep -q "built without json-c"; then
    echo "SKIP: ddbench was built without json-c and cannot read profiles"
    exit 77
fi

# train N K PROFILE SCALE STRATEGY WHAT: N ranks, K of them aggregators.
train() {
    if "$DDRUN" -n "$1" --aggregators "$2" --timeout 120 -- "$DDBENCH" \
        train-sim --profile "$3" --scale "$4" --time-scale 0.1 \
        --strategy "$5" --iters 12 --check --json >"$TMP/out" 2>&1; then
        expect_grep "$TMP/out" '"correct":true' "$6"
    else
        fail "$6"; cat "$TMP/out"
    fi
}

for s in ddp localsgd:4 plsgd:4 dreamddp:4 adaptive; do
    train 3 0 "$SMALL" 1 $s "train-sim $s on 3 workers"
done
for s in ddp dreamddp:4 localsgd:4; do
    train 5 2 "$SMALL" 1 $s "train-sim $s on 3 workers + 2 aggregators"
done
if [ -f "${DDTEST_PROFILES:-/nonexistent}/gpt2-blocks/bp_gpt2-blocks.json" ]; then
    for s in dreamddp:4 ddp; do
        train 4 0 "$DDTEST_PROFILES/gpt2-blocks" 0.01 $s "acceptance: gpt2-blocks $s"
    done
else
    echo "skipped: the gpt2-blocks profile (set DDTEST_PROFILES)"
fi

for k in 0 2; do
    if "$DDRUN" -n $((3 + k)) --aggregators $k --timeout 60 -- "$DDBENCH" \
        sync --bytes 3000001 --iters 2 --json >"$TMP/sync" 2>&1; then
        expect_grep "$TMP/sync" '"correct":true' "ddbench sync, $k aggregators"
    else
        fail "ddbench sync, $k aggregators"; cat "$TMP/sync"
    fi
done
finish
