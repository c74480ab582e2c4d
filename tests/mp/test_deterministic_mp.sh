#!/bin/sh
# DREAMDDP_DETERMINISTIC=yes: two runs of train_mlp with the same seed end
# with the same bits (the parameters' checksum) under dreamddp:4,
# dreamddp:4+next, with fp16, and with 2 aggregators. DREAMDDP_PLAN_SAVE
# and DREAMDDP_PLAN: a run that loads the plan a measured run saved syncs
# the same layers at the same steps (their timelines compared from the
# plan's first window on), as does the train simulator a plan `ddbench
# plan --save` wrote; a plan for another world size is refused, naming the
# difference.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
MLP=$top_builddir/examples/train_mlp
PY=${DDTEST_PYTHON:-python3}
export DREAMDDP_TIMEOUT_S=60

# params NAME: the checksum the run printed.
params() { sed -n 's/^0: done: .*, parameters \([0-9a-f]*\)$/\1/p' "$TMP/$1"; }

# twice NAME AGGREGATORS ARGS...: two deterministic runs, compared.
twice() {
    name=$1; k=$2; shift 2
    for run in a b; do
        DREAMDDP_DETERMINISTIC=yes "$DDRUN" -n $((4 + k)) --aggregators "$k" \
            --timeout 120 -- "$MLP" --steps 60 --seed 1 "$@" >"$TMP/$name.$run" 2>&1 ||
            { fail "$name: run $run failed"; cat "$TMP/$name.$run"; return; }
    done
    a=$(params "$name.a"); b=$(params "$name.b")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then
        pass "$name: both runs end with parameters $a"
    else
        fail "$name: parameters '$a' then '$b'"; cat "$TMP/$name.a" "$TMP/$name.b"
    fi
    expect_grep "$TMP/$name.a" "(deterministic, from the layers' sizes and the fixed rate model)" \
        "$name: the plan line says where the plan came from"
}

export DREAMDDP_LOG_LEVEL=info DREAMDDP_LOG_SUBSYS=sched
twice dreamddp4 0 --strategy dreamddp:4
twice next 0 --strategy dreamddp:4+next
twice fp16 0 --strategy dreamddp:4 --compression fp16
twice aggregators 2 --strategy dreamddp:4
unset DREAMDDP_LOG_LEVEL DREAMDDP_LOG_SUBSYS

# A measured plan, saved, then loaded: the same layers sync at the same
# steps (fused alike or not: the loading run fuses by the fixed model).
# Without bubble filling, whose trial changes the syncs of the measured run
# from window to window.
export DREAMDDP_FILL_BUBBLES=no
"$DDRUN" -n 4 --timeout 120 -- env DREAMDDP_PLAN_SAVE="$TMP/plan" \
    DREAMDDP_TIMELINE="$TMP/saved.%r.json" "$MLP" --strategy dreamddp:4 \
    --steps 40 --seed 1 >"$TMP/save" 2>&1 || { fail "saving run"; cat "$TMP/save"; }
"$DDRUN" -n 4 --timeout 120 -- env DREAMDDP_PLAN="$TMP/plan" \
    DREAMDDP_TIMELINE="$TMP/loaded.%r.json" DREAMDDP_LOG_LEVEL=info \
    DREAMDDP_LOG_SUBSYS=sched "$MLP" --strategy dreamddp:4 --steps 40 \
    --seed 1 >"$TMP/load" 2>&1 || { fail "loading run"; cat "$TMP/load"; }
expect_grep "$TMP/plan" "dreamddp-plan 1" "the plan is saved"
expect_grep "$TMP/load" "(not deterministic, from DREAMDDP_PLAN)" "the loading run says so"
# The syncs from step 8 on (the first plan's first window; the saved run
# planned at step 8 too, after DREAMDDP_PROFILE_STEPS).
syncs() {
    "$PY" -c '
import json, sys
events = json.load(open(sys.argv[1]))
events = events["traceEvents"] if isinstance(events, dict) else events
rows = sorted((e["args"]["step"], name) for e in events
              if e.get("cat") == "sync" and e["args"]["step"] >= 8
              for name in e["args"]["names"])
print(len(rows)); print(rows)' "$1"
}
syncs "$TMP/saved.0.json" >"$TMP/saved.syncs"
syncs "$TMP/loaded.0.json" >"$TMP/loaded.syncs"
if [ -s "$TMP/saved.syncs" ] && cmp -s "$TMP/saved.syncs" "$TMP/loaded.syncs"; then
    pass "the loaded plan syncs the same layers at the same steps ($(head -1 "$TMP/saved.syncs") syncs)"
else
    fail "the syncs differ"; head -c 600 "$TMP/saved.syncs"; head -c 600 "$TMP/loaded.syncs"
fi

# ddbench plan --save: a plan for the train simulator on the same profile.
SMALL=$top_srcdir/tests/fixtures/profile-small
BENCH=$top_builddir/tools/ddbench
if "$BENCH" plan "$SMALL" --H 4 --bytes-per-second 1e8 --workers 2 \
    --save "$TMP/small.plan" >"$TMP/planned" 2>&1; then
    DREAMDDP_PLAN="$TMP/small.plan" DREAMDDP_LOG_LEVEL=info DREAMDDP_LOG_SUBSYS=sched \
        "$DDRUN" -n 2 --timeout 120 -- "$BENCH" train-sim --profile "$SMALL" \
        --strategy dreamddp:4 --iters 16 >"$TMP/simplan" 2>&1 ||
        { fail "train-sim with ddbench plan's plan"; cat "$TMP/simplan"; }
    expect_grep "$TMP/simplan" "(not deterministic, from DREAMDDP_PLAN)" "ddbench plan --save: train-sim takes its plan"
elif grep -q "json-c" "$TMP/planned"; then
    echo "skip: ddbench plan --save: built without json-c"
else
    fail "ddbench plan --save"; cat "$TMP/planned"
fi

# A plan for 4 workers in a job of 2.
"$DDRUN" -n 2 --timeout 120 -- env DREAMDDP_PLAN="$TMP/plan" "$MLP" \
    --strategy dreamddp:4 --steps 20 --seed 1 >"$TMP/other" 2>&1 &&
    fail "a plan for another world size was taken"
expect_grep "$TMP/other" "DREAMDDP_PLAN=$TMP/plan: the plan is for 4 workers, this job has 2" \
    "a plan for another world size is refused, naming the difference"
finish
