#!/bin/sh
# examples/torch_gpt.py, a small byte-level GPT, on 2 ranks with a tiny
# model: under dreamddp:2 the held-out loss falls and the replicas are
# bitwise equal after sync_all (--check-replicas); under PyTorch's DDP
# (gloo) the loss falls; under ddp the loss falls and its last held-out
# loss is DDP's within 1e-5. Skips where the interpreter has no torch or
# there are no standard library sources to train on.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/python/torch_lib.sh"
GPT="$top_srcdir/examples/torch_gpt.py"
if ! "$DDTEST_PYTHON" -c 'import glob, sys; sys.exit(not glob.glob("/usr/lib/python3.*/**/*.py", recursive=True))'; then
    echo "SKIP: no Python sources under /usr/lib/python3.*/ to train on"
    exit 77
fi
TINY="--layers 1 --width 32 --heads 2 --context 32 --batch 4 --iters 12 --eval-every 6 --val-batches 2"

# gpt NAME ARGS...: 2 ranks of torch_gpt.py with the tiny model; rank 0's
# JSON lines go in $TMP/NAME.json.
gpt() {
    name=$1; shift
    # The gloo group of a baseline binds the port after ddrun's, which a
    # test running beside this one may hold: a bind that fails is retried.
    for try in 1 2 3; do
        # shellcheck disable=SC2086 # TINY is a list of flags
        if "$DDRUN" -n 2 --timeout 60 -- "$DDTEST_PYTHON" "$GPT" $TINY "$@" >"$TMP/$name.out" 2>&1; then
            sed -n 's/^0: {/{/p' "$TMP/$name.out" >"$TMP/$name.json"
            return 0
        fi
        # PyTorch's gloo teardown has hung once in a while after the run's
        # last line (2 ranks on 2 cores): that run is tried again too.
        grep -q "Address already in use\|ddrun: timed out" "$TMP/$name.out" || break
        echo "$name: port taken or teardown hung, try $try"
    done
    fail "$name: torch_gpt.py $*"; sed 's/^/    /' "$TMP/$name.out"
    return 1
}

# field NAME EXPR: EXPR of the run's JSON lines, in Python: evals (the
# evaluation lines, in order) and events (the other lines by event).
field() {
    "$DDTEST_PYTHON" - "$TMP/$1.json" "$2" <<'EOF'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
evals = [l for l in lines if l["event"] == "eval"]
events = {l["event"]: l for l in lines if l["event"] != "eval"}
print(eval(sys.argv[2]))
EOF
}

# falls NAME: the held-out loss after the last iteration is below
# iteration 0's.
falls() {
    if [ "$(field "$1" 'evals[0]["iter"] == 0 and evals[-1]["val_loss"] < evals[0]["val_loss"]')" = True ]; then
        pass "$1: held-out loss falls, $(field "$1" '"%.4f -> %.4f" % (evals[0]["val_loss"], evals[-1]["val_loss"])')"
    else
        fail "$1: held-out loss does not fall:"; sed 's/^/    /' "$TMP/$1.json"
    fi
}

if gpt dreamddp --strategy dreamddp:2 --check-replicas; then
    falls dreamddp
    if [ "$(field dreamddp 'events["replicas"]["equal"]')" = True ]; then
        pass "dreamddp: replicas bitwise equal after sync_all"
    else
        fail "dreamddp: replicas differ after sync_all:"; sed 's/^/    /' "$TMP/dreamddp.json"
    fi
fi
gpt torch-ddp --baseline torch-ddp && falls torch-ddp
if gpt ddp --strategy ddp && [ -s "$TMP/torch-ddp.json" ]; then
    falls ddp
    ddp=$(field ddp 'evals[-1]["val_loss"]')
    torch=$(field torch-ddp 'evals[-1]["val_loss"]')
    if "$DDTEST_PYTHON" -c "import sys; sys.exit(abs($ddp - $torch) > 1e-5)"; then
        pass "ddp: last held-out loss $ddp, DDP's $torch"
    else
        fail "ddp: last held-out loss $ddp, DDP's $torch: more than 1e-5 apart"
    fi
fi
finish
