#!/bin/sh
# tests/python/torch_community_gpt.py, a GPT training script written the way
# the community writes one for DDP (RANK decides whether it is distributed,
# init_process_group, accumulation through require_backward_grad_sync,
# evaluation on rank 0 only, clipping, GradScaler, a cosine schedule,
# checkpoints through model.module), moved to dreamddp by its two DDP
# lines (--wrap dreamddp), on 2 workers:
#   - PyTorch's DDP (gloo) runs it with torchrun's variables: the yardstick;
#   - under ddp, launched by ddrun and with torchrun's variables, it is
#     distributed, its losses equal DDP's at every evaluation and its final
#     parameters DDP's, bit for bit (accumulation of 2 micro-steps a rank),
#     and every layer synced once per optimizer step, not once per
#     micro-step; rank 0's checkpoint holds the bare model's state;
#   - under localsgd:2, dreamddp:2, dreamddp:2+next and dreamddp:4+next
#     (ddrun), dreamddp:4+next with torchrun's variables, and dreamddp:2
#     with 1 aggregator (ddrun -n 3 --aggregators 1): it runs to the end
#     with finite losses and equal replicas after sync_all.
# torchrun itself is emulated (RANK, LOCAL_RANK, WORLD_SIZE,
# LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT set for each process): Debian's
# torchrun cannot start workers on this interpreter.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/python/torch_lib.sh"
GPT="$top_srcdir/tests/python/torch_community_gpt.py"
STEPS=9  # optimizer steps of the script's defaults (--max-iters 8)

# torchrun NAME ARGS...: 2 processes of the script with torchrun's
# variables; rank R's output in $TMP/NAME.R, its exit status in
# $TMP/NAME.R.rc. A gloo store whose port another test took meanwhile is
# tried again, and so is a run killed at the bound after both ranks printed
# their last line (PyTorch's gloo teardown has hung once in a while).
torchrun() {
    name=$1; shift
    for try in 1 2 3; do
        port=$(free_port_pair)
        for r in 0 1; do
            (RANK=$r LOCAL_RANK=$r WORLD_SIZE=2 LOCAL_WORLD_SIZE=2 \
             MASTER_ADDR=127.0.0.1 MASTER_PORT=$port \
             timeout -s KILL 90 "$DDTEST_PYTHON" "$GPT" "$@" \
             >"$TMP/$name.$r" 2>&1; echo $? >"$TMP/$name.$r.rc") &
        done
        wait
        if grep -q "Address already in use" "$TMP/$name.0" "$TMP/$name.1"; then
            echo "$name: port taken, try $try"
        elif cat "$TMP/$name.0.rc" "$TMP/$name.1.rc" | grep -qx 137 &&
             grep -q '^{"event": "end"' "$TMP/$name.0" &&
             grep -q '^{"event": "end"' "$TMP/$name.1"; then
            echo "$name: teardown hung after the last line, try $try"
        else
            break
        fi
    done
    for r in 0 1; do
        sed -n 's/^{/{/p' "$TMP/$name.$r" >"$TMP/$name.$r.json"
    done
    [ "$(cat "$TMP/$name.0.rc")" = 0 ] && [ "$(cat "$TMP/$name.1.rc")" = 0 ] && return 0
    fail "$name: exit status $(cat "$TMP/$name.0.rc"), $(cat "$TMP/$name.1.rc")"
    sed 's/^/    /' "$TMP/$name.0" "$TMP/$name.1"
    return 1
}

# ddrun NAME N AGGREGATORS ARGS...: N ranks of the script under ddrun;
# rank R's JSON lines in $TMP/NAME.R.json. A run that timed out after both
# workers printed their last line (gloo's teardown) is tried again.
ddrun() {
    name=$1 n=$2 aggs=$3; shift 3
    for try in 1 2 3; do
        if "$DDRUN" -n "$n" --aggregators "$aggs" --timeout 90 -- \
            "$DDTEST_PYTHON" "$GPT" "$@" >"$TMP/$name.out" 2>&1; then
            rc=0
        else
            rc=$?
        fi
        grep -q "ddrun: timed out" "$TMP/$name.out" &&
            [ "$(grep -c '^[01]: {"event": "end"' "$TMP/$name.out")" = 2 ] || break
        echo "$name: teardown hung after the last line, try $try"
    done
    r=0
    while [ "$r" -lt "$n" ]; do
        sed -n "s/^$r: {/{/p" "$TMP/$name.out" >"$TMP/$name.$r.json"
        r=$((r + 1))
    done
    [ "$rc" = 0 ] && return 0
    fail "$name: ddrun exited $rc"; sed 's/^/    /' "$TMP/$name.out"
    return 1
}

# check NAME EXPR WHAT: EXPR, in Python, of the run's JSON lines must be
# true: evals (rank 0's evaluations, in order), end0 and end1 (each
# worker's last line), base and base_end (DDP's evaluations and rank 0's last
# line, where that run is done).
check() {
    if out=$("$DDTEST_PYTHON" - "$TMP" "$1" "$2" <<'EOF'
import json, math, os, sys
tmp, name, expr = sys.argv[1:]
def lines(run, r):
    path = os.path.join(tmp, "%s.%d.json" % (run, r))
    return [json.loads(l) for l in open(path)] if os.path.exists(path) else []
evals = [l for l in lines(name, 0) if l["event"] == "eval"]
end0 = ([l for l in lines(name, 0) if l["event"] == "end"] or [None])[-1]
end1 = ([l for l in lines(name, 1) if l["event"] == "end"] or [None])[-1]
base = [l for l in lines("torch-ddp", 0) if l["event"] == "eval"]
base_end = ([l for l in lines("torch-ddp", 0) if l["event"] == "end"] or [None])[-1]
finite = lambda ev: bool(ev) and all(math.isfinite(e["train"]) and
                                     math.isfinite(e["val"]) for e in ev)
try:
    ok = eval("(%s\n)" % expr)
except Exception as e:
    ok = False
    print("%s: %s" % (type(e).__name__, e))
if not ok:
    print("evals:", evals); print("end0:", end0); print("end1:", end1)
sys.exit(not ok)
EOF
    ); then
        pass "$1: $3"
    else
        fail "$1: $3"; echo "$out" | sed 's/^/    /'
    fi
}

# The yardstick: PyTorch's DDP on the same script.
if torchrun torch-ddp --wrap ddp; then
    check torch-ddp 'end0["distributed"] and len(evals) == 5 and finite(evals)' \
        "PyTorch DDP: 5 evaluations, losses finite"
fi

# ddp: the losses of DDP at every evaluation; a sync per optimizer step.
ddp_checks() {
    check "$1" 'end0["distributed"] and end0["world_size"] == 2 and end1 is not None' \
        "distributed: RANK and WORLD_SIZE seen on both workers"
    check "$1" 'len(evals) == len(base) == 5 and all(
            e["iter"] == b["iter"] and e[k] == b[k]
            for e, b in zip(evals, base) for k in ("train", "val"))' \
        "losses equal DDP's at every evaluation, bit for bit"
    check "$1" 'end0["steps"] == '$STEPS' and end0["micro_steps"] == 2 * '$STEPS' and
            set(end0["syncs"].values()) == {'$STEPS'} and end0["syncs"] == end1["syncs"]' \
        "every layer synced once per optimizer step ($STEPS), not per micro-step ($((2 * STEPS)))"
    check "$1" 'end0["parameters"] == end1["parameters"] == base_end["parameters"]' \
        "replicas equal, and equal to DDP's bit for bit"
}
DREAMDDP_STRATEGY=ddp ddrun ddrun-ddp 2 0 --wrap dreamddp --out-dir "$TMP/ckpt" &&
    ddp_checks ddrun-ddp
if "$DDTEST_PYTHON" -c '
import sys, torch
sd = torch.load(sys.argv[1])["model"]
sys.exit(not sd or any(k.startswith("module.") for k in sd))' "$TMP/ckpt/ckpt.pt" 2>"$TMP/ckpt.err"; then
    pass "ddrun-ddp: rank 0 saved the bare model's state (model.module)"
else
    fail "ddrun-ddp: no checkpoint of the bare model in $TMP/ckpt/ckpt.pt"; sed 's/^/    /' "$TMP/ckpt.err"
fi
DREAMDDP_STRATEGY=ddp torchrun torchrun-ddp --wrap dreamddp && ddp_checks torchrun-ddp

# The other strategies run to the end.
runs_through() {
    check "$1" 'end0["distributed"] and end0["strategy"] == "'"$2"'" and
            len(evals) == 5 and finite(evals) and end1 is not None and
            end0["parameters"] == end1["parameters"]' \
        "runs to the end, finite losses, replicas equal after sync_all"
}
for s in localsgd:2 dreamddp:2 dreamddp:2+next dreamddp:4+next; do
    DREAMDDP_STRATEGY=$s ddrun "ddrun-$s" 2 0 --wrap dreamddp && runs_through "ddrun-$s" "$s"
done
# A window of H counts optimizer steps: 9 steps close 4 windows of 2.
check ddrun-localsgd:2 'set(end0["syncs"].values()) == {'$((STEPS / 2))'}' \
    "every layer averaged once per window of 2 optimizer steps ($((STEPS / 2)) in $STEPS)"
DREAMDDP_STRATEGY=dreamddp:4+next torchrun torchrun-dreamddp:4+next --wrap dreamddp &&
    runs_through torchrun-dreamddp:4+next dreamddp:4+next
DREAMDDP_STRATEGY=dreamddp:2 ddrun agg-dreamddp:2 3 1 --wrap dreamddp &&
    runs_through agg-dreamddp:2 dreamddp:2

# The losses at the last evaluation and the final parameters' digest, for
# the record (DDP's first).
for f in "$TMP/torch-ddp.0.json" "$TMP"/[a-su-z]*.0.json "$TMP"/torchrun-*.0.json; do
    n=$(basename "$f" .0.json)
    printf '%s: last evaluation ' "$n"
    "$DDTEST_PYTHON" -c '
import json, sys
e = [json.loads(l) for l in open(sys.argv[1])]
e = [l for l in e if l["event"] == "eval"]
d = [l for l in map(json.loads, open(sys.argv[1])) if l["event"] == "end"]
print("iter %d, train %.4f, val %.4f" % (e[-1]["iter"], e[-1]["train"], e[-1]["val"]) if e else "none",
      "; parameters", d[-1]["parameters"] if d else "none")' "$f"
done
finish
