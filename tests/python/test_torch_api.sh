#!/bin/sh
# The PyTorch front end's edges across real ranks: unused parameters (with
# find_unused_parameters, the error naming the layer without it, and no
# hang when one rank alone leaves a layer unused), torchrun's variables
# beside torch.distributed, the digits example, library errors as
# DreamDDPError. Skips where the interpreter has no torch.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/python/torch_lib.sh"

run "find_unused_parameters=True" 2 unused
run "an unused layer without find_unused_parameters" 2 unused-error

# One worker alone leaves layers unused: it fails at once naming them, the
# others stop (ddrun fails, well before its timeout).
if "$DDRUN" -n 2 --timeout 100 -- "$DDTEST_PYTHON" "$MP" unused-uneven >"$TMP/uneven" 2>&1; then
    fail "an unused layer on one rank only: the job succeeded"; sed 's/^/    /' "$TMP/uneven"
elif grep -q "ddrun: .*timed out\|exited with status 124" "$TMP/uneven"; then
    fail "an unused layer on one rank only: the job hung"; sed 's/^/    /' "$TMP/uneven"
else
    expect_grep "$TMP/uneven" "1: dreamddp.DreamDDPError: backward: no gradient reached layer 'fc2' (fc2.weight, fc2.bias); layer 'fc1' (fc1.weight)" \
        "an unused layer on one rank only fails naming it, without a hang"
fi

# torchrun's variables by hand: torch.distributed's store on MASTER_PORT,
# dreamddp's on the next port, in the same processes.
port=$(free_port_pair)
pids=""
for r in 0 1; do
    (RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 \
     MASTER_PORT=$port TORCHELASTIC_RUN_ID=tt$port timeout 120 \
     "$DDTEST_PYTHON" "$MP" torchrun 4 >"$TMP/tr.$r" 2>&1; echo $? >"$TMP/tr.$r.rc") &
    pids="$pids $!"
done
for p in $pids; do wait "$p"; done
if [ "$(cat "$TMP/tr.0.rc")" = 0 ] && [ "$(cat "$TMP/tr.1.rc")" = 0 ]; then
    expect_grep "$TMP/tr.0" "torch.distributed on port $port beside dreamddp" "torchrun's variables"
else
    fail "torchrun's variables"; cat "$TMP/tr.0" "$TMP/tr.1"
fi

# The example, briefly, where scikit-learn is there for its data.
if "$DDTEST_PYTHON" -c 'import sklearn' 2>/dev/null; then
    if "$DDRUN" -n 2 --timeout 120 -- "$DDTEST_PYTHON" "$top_srcdir/examples/torch_digits.py" \
        --strategy dreamddp:2 --steps 30 --json >"$TMP/digits" 2>&1; then
        expect_grep "$TMP/digits" '"example": "torch_digits", "frontend": "dreamddp", "strategy": "dreamddp:2", "workers": 2' "examples/torch_digits.py"
    else
        fail "examples/torch_digits.py"; sed 's/^/    /' "$TMP/digits"
    fi
    # DreamDDP(deterministic=True): two runs, the same bits (past the
    # first plan, at step 8 of 40).
    for run in a b; do
        "$DDRUN" -n 2 --timeout 120 -- "$DDTEST_PYTHON" "$top_srcdir/examples/torch_digits.py" \
            --strategy dreamddp:4 --steps 40 --json --deterministic >"$TMP/det.$run" 2>&1 ||
            { fail "torch_digits.py --deterministic, run $run"; sed 's/^/    /' "$TMP/det.$run"; }
    done
    a=$(sed -n 's/.*"params": "\([0-9a-f]*\)".*/\1/p' "$TMP/det.a")
    b=$(sed -n 's/.*"params": "\([0-9a-f]*\)".*/\1/p' "$TMP/det.b")
    if [ -n "$a" ] && [ "$a" = "$b" ]; then
        pass "DreamDDP(deterministic=True): both runs end with parameters $a"
    else
        fail "DreamDDP(deterministic=True): parameters '$a' then '$b'"
    fi
else
    echo "skip: examples/torch_digits.py: $DDTEST_PYTHON has no scikit-learn"
fi

# One default strategy (ddp, as the README's table says), and
# DREAMDDP_STRATEGY when no strategy is passed; import touches no hook.
run "DreamDDP(model) runs ddp by default" 1 hygiene ddp
export DREAMDDP_STRATEGY=localsgd:2
run "DreamDDP(model) runs DREAMDDP_STRATEGY" 1 hygiene localsgd:2
unset DREAMDDP_STRATEGY

# An aggregator rank: the constructor raises, naming the call to make.
if "$DDRUN" -n 3 --aggregators 1 --timeout 100 -- "$DDTEST_PYTHON" "$MP" aggregator >"$TMP/agg" 2>&1; then
    expect_grep "$TMP/agg" "torch_mp: aggregator: DreamDDP: rank 2 is an aggregator" "DreamDDP on an aggregator rank raises"
    expect_grep "$TMP/agg" "torch_mp: aggregator: the workers trained through the aggregator" "serve_if_aggregator() serves"
else
    fail "aggregator"; sed 's/^/    /' "$TMP/agg"
fi

if timeout 60 "$DDTEST_PYTHON" "$MP" errors >"$TMP/err" 2>&1; then
    pass "$(grep 'torch_mp: ' "$TMP/err" | sed 's/^torch_mp: //')"
else
    fail "errors"; sed 's/^/    /' "$TMP/err"
fi
finish
