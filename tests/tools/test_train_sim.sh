#!/bin/sh
# The train simulator end to end through ddrun: with --check every strategy
# leaves the exact average in every layer after each window, with the
# workers' allreduce and through aggregators; ddbench sync checks its
# average too. On the gpt2-blocks profile (tests/fixtures/profiles) it runs
# issue 4's acceptance command as written.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
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
# Delayed averaging with emulated forward (--forward): the deadline marks
# come before each layer's forward; every layer lands once per window and
# dd_sync_all leaves the replicas bit-identical (--check); the modeled
# time follows the deadline model.
for s in dreamddp:4+next localsgd:4+next plsgd:2+next; do
    if "$DDRUN" -n 3 --timeout 120 -- "$DDBENCH" train-sim --profile "$SMALL" \
        --time-scale 0.1 --forward 0.5 --strategy $s --iters 12 --check --json \
        >"$TMP/fw" 2>&1; then
        expect_grep "$TMP/fw" '"correct":true' "train-sim $s --forward 0.5"
    else
        fail "train-sim $s --forward 0.5"; cat "$TMP/fw"
    fi
done
if "$DDRUN" -n 3 --timeout 120 -- "$DDBENCH" train-sim --profile "$SMALL" \
    --time-scale 0.1 --forward 0.5 --deadline backward --strategy dreamddp:4+next \
    --iters 12 --check --json >"$TMP/fwb" 2>&1; then
    expect_grep "$TMP/fwb" '"deadline":"backward",' "train-sim --deadline backward says so"
    expect_grep "$TMP/fwb" '"correct":true' "train-sim dreamddp:4+next --deadline backward (no forward marks)"
else
    fail "train-sim dreamddp:4+next --deadline backward"; cat "$TMP/fwb"
fi

# --step-work (a training loop's zero_grad, accumulation and SGD step) runs
# beside the syncs and says so; it changes the layers, so --check refuses it.
for s in none dreamddp:4; do
    if "$DDRUN" -n 2 --timeout 120 -- "$DDBENCH" train-sim --profile "$SMALL" \
        --time-scale 0.1 --strategy $s --iters 8 --step-work --json \
        >"$TMP/sw" 2>&1; then
        expect_grep "$TMP/sw" '"step_work":true' "train-sim $s --step-work says so"
    else
        fail "train-sim $s --step-work"; cat "$TMP/sw"
    fi
done
if "$DDBENCH" train-sim --profile "$SMALL" --strategy none --check --step-work \
    >"$TMP/swc" 2>&1; then
    fail "train-sim --check --step-work is refused"
else
    expect_grep "$TMP/swc" "not with --check" "train-sim --check --step-work is refused with the usage"
fi

# ddbench plan shows both models: the same-iteration one, and the deadline
# model with its own schedule, from sync times derived from the sizes.
if "$DDBENCH" plan "$SMALL" --H 2 --forward 0.5 --bandwidth 1e9 --workers 4 \
    --aggregators 2 --compression fp16 >"$TMP/pl" 2>&1 &&
   "$DDBENCH" plan "$SMALL" --H 2 --forward 0.5 --deadline backward --bandwidth 1e9 --json >"$TMP/plj" 2>&1 &&
   python3 - "$TMP/plj" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
nx = d["next"]
assert nx["forward"] == 0.5 and nx["deadline"] == "backward", nx
assert set(nx["schedule"]) == set(d["schedule"]), nx
m = nx["modeled"]
# The deadline model hides at least what the same-iteration one does, and
# its own plan is no worse than the same-iteration plan under it.
assert m["dreamddp"] <= m["dreamddp_same_plan"] + 1e-9, m
assert m["compute"] <= m["dreamddp"] + 1e-9, m
assert d["modeled"]["dreamddp"] >= m["dreamddp"] - 1e-9, (d["modeled"], m)
PY
then
    expect_grep "$TMP/pl" "# deadline model (+next: a sync lands by the layer's next forward; forward 0.5 x backward; launches early)" "ddbench plan prints the deadline model"
    expect_grep "$TMP/pl" "dreamddp+next exposed / flsgd exposed" "ddbench plan compares exposed communication"
else
    fail "ddbench plan with the deadline model"; cat "$TMP/pl" "$TMP/plj"
fi
# --streams N: the deadline model with N channels sharing the NIC
# (tests/unit/sched/test_channels has its figures): one stream is the model without
# the flag, N > 1 says so in the header and the JSON, and the
# same-iteration figures do not move (the NIC stays busy while a sync
# waits).
if "$DDBENCH" plan "$SMALL" --H 2 --forward 0.1 --bytes-per-second 1e7 --json >"$TMP/s0" 2>&1 &&
   "$DDBENCH" plan "$SMALL" --H 2 --forward 0.1 --bytes-per-second 1e7 --streams 1 --json >"$TMP/s1" 2>&1 &&
   "$DDBENCH" plan "$SMALL" --H 2 --forward 0.1 --bytes-per-second 1e7 --streams 3 --json >"$TMP/s3" 2>&1 &&
   "$DDBENCH" plan "$SMALL" --H 2 --forward 0.1 --bytes-per-second 1e7 --streams 3 >"$TMP/s3t" 2>&1 &&
   python3 - "$TMP/s0" "$TMP/s1" "$TMP/s3" <<'PY'
import json, sys
d0, d1, d3 = (json.load(open(f)) for f in sys.argv[1:])
assert d0 == d1 and d0["next"]["streams"] == 1, (d0, d1)
assert d3["next"]["streams"] == 3, d3
assert d3["modeled"] == d0["modeled"], (d3["modeled"], d0["modeled"])
PY
then
    expect_grep "$TMP/s3t" "forward 0.1 x backward; 3 channels sharing the NIC; launches early)" "ddbench plan --streams 3 models 3 channels"
else
    fail "ddbench plan --streams"; cat "$TMP/s0" "$TMP/s3"
fi
# --launch: the deadline model's launches, early (the runtime's default,
# DREAMDDP_NEXT_LAUNCH) or after backward; the same-iteration figures do
# not move; anything else is refused, naming what is accepted.
if "$DDBENCH" plan "$SMALL" --H 2 --forward 0.5 --bytes-per-second 1e7 --json >"$TMP/le" 2>&1 &&
   "$DDBENCH" plan "$SMALL" --H 2 --forward 0.5 --bytes-per-second 1e7 --launch backward --json >"$TMP/lb" 2>&1 &&
   "$DDBENCH" plan "$SMALL" --H 2 --forward 0.5 --bytes-per-second 1e7 --launch backward >"$TMP/lbt" 2>&1 &&
   python3 - "$TMP/le" "$TMP/lb" <<'PY'
import json, sys
e, b = (json.load(open(f)) for f in sys.argv[1:])
assert e["next"]["launch"] == "early" and b["next"]["launch"] == "backward", (e, b)
assert e["modeled"] == b["modeled"], (e["modeled"], b["modeled"])
PY
then
    expect_grep "$TMP/lbt" "forward 0.5 x backward; launches after backward)" "ddbench plan --launch backward models launches after backward"
else
    fail "ddbench plan --launch"; cat "$TMP/le" "$TMP/lb"
fi
if "$DDBENCH" plan "$SMALL" --launch soon >"$TMP/lbad" 2>&1; then
    fail "ddbench plan --launch soon accepted"
else
    expect_grep "$TMP/lbad" "ddbench plan: --launch 'soon': expected early or backward" "ddbench plan refuses a bad --launch"
fi
BLOCKS=${DDTEST_PROFILES:-$top_srcdir/tests/fixtures/profiles}/gpt2-blocks
if [ -f "$BLOCKS/bp_gpt2-blocks.json" ]; then
    for s in dreamddp:4 ddp; do
        train 4 0 "$BLOCKS" 0.01 $s "acceptance: gpt2-blocks $s"
    done
else
    fail "no gpt2-blocks profile at $BLOCKS (the repository carries it in tests/fixtures/profiles)"
fi

# A profile with frozen modules (backward times, no comm times, as in a
# LoRA fine-tune): ddbench plan prints a schedule of the other layers and
# modeled times that schedsim.py, given that schedule, agrees with; the
# train simulator runs it with the frozen modules' backward slept in place.
FROZEN=$top_srcdir/tests/fixtures/profile-frozen
if "$DDBENCH" plan "$FROZEN" --H 4 >"$TMP/fz" 2>&1; then
    expect_grep "$TMP/fz" "# dreamddp schedule, H = 4, 4 layers (backward order)" "ddbench plan: a frozen-layer profile's schedule"
    expect_grep "$TMP/fz" "# 6 frozen modules (no comm time): 17.000 ms of backward per iteration" "ddbench plan: the frozen modules' backward time"
    expect_grep "$TMP/fz" "dreamddp     0.020150" "ddbench plan: the frozen-layer profile's modeled time"
else
    fail "ddbench plan on a frozen-layer profile"; cat "$TMP/fz"
fi
SCHEDSIM=$top_srcdir/tests/fixtures/schedsim.py
if command -v python3 >/dev/null 2>&1; then
    mkdir "$TMP/fzp" && cp "$FROZEN"/*.json "$TMP/fzp/" &&
        "$DDBENCH" plan "$FROZEN" --H 4 --json >"$TMP/fzp/dreamddp_scheduling.json"
    if python3 - "$SCHEDSIM" "$TMP/fzp" <<'PY'
import json, subprocess, sys
ours = json.load(open(sys.argv[2] + "/dreamddp_scheduling.json"))["modeled"]
ref = json.loads(subprocess.check_output([sys.executable] + sys.argv[1:]))
for a, b in (("flsgd", "flsgd"), ("dreamddp", "artifact_dreamddp")):
    assert abs(ours[a] - ref[b]) < 1e-6, (a, ours[a], ref[b])
PY
    then
        pass "ddbench plan and schedsim.py agree on the frozen-layer profile"
    else
        fail "ddbench plan and schedsim.py disagree on the frozen-layer profile"
    fi
else
    echo "skipped: no python3 to run schedsim.py"
fi
for s in ddp dreamddp:4; do
    train 3 0 "$FROZEN" 1 $s "train-sim $s on a frozen-layer profile"
done

for k in 0 2; do
    if "$DDRUN" -n $((3 + k)) --aggregators $k --timeout 60 -- "$DDBENCH" \
        sync --bytes 3000001 --iters 2 --json >"$TMP/sync" 2>&1; then
        expect_grep "$TMP/sync" '"correct":true' "ddbench sync, $k aggregators"
    else
        fail "ddbench sync, $k aggregators"; cat "$TMP/sync"
    fi
done
finish
