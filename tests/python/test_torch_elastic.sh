#!/bin/sh
# dreamddp.torch.elastic under ddrun --elastic: examples/torch_digits.py,
# 4 workers, 300 steps, a commit every 20 (State.commit). Rank 2 is killed
# once the commits have passed step 100: the job is re-formed
# (State.restore: the model's, the optimizer's and DreamDDP's state, and
# the step) with 3 workers under ddp, localsgd:4 and dreamddp:4, and with
# 4 under dreamddp:4+next (--max-restarts 1: rank 2 is started again);
# each finishes within 0.01 of the uninterrupted run's held-out accuracy.
# Then a restart as torchrun --max_restarts makes one, with
# DREAMDDP_ELASTIC=yes and a commit directory of the test's: rank 1 killed
# past step 100, both workers started again; each resumes from its own
# commit, and the run ends with the uninterrupted run's bits. Skips where the
# interpreter has no torch.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/python/torch_lib.sh"
DIGITS=$top_srcdir/examples/torch_digits.py
export DREAMDDP_TIMEOUT_S=5

accuracy() { sed -n 's/^0: torch_digits: .*held-out accuracy \([0-9.]*\),.*/\1/p' "$1"; }

# The step of a commit file (after its 8-byte magic).
# The newest step of a worker's two commit files PREFIX.0 and PREFIX.1.
# resumed_past FILE GEN N WHAT: the run in FILE resumed as generation GEN
# of N workers from a commit at step 100 or later (the kill waits for one)
# and before the end (300): the step varies with how soon the kill lands.
resumed_past() {
    at=$(sed -n "s/.*dreamddp.torch.elastic: generation $2 of $3 workers resumes at step \([0-9]*\).*/\1/p" "$1" | head -n 1)
    if [ -n "$at" ] && [ "$at" -ge 100 ] && [ "$at" -lt 300 ]; then
        pass "$4 (step $at)"
    else
        fail "$4: no resume from step 100 to 299 in $1:"
        sed 's/^/    /' "$1"
    fi
}

commit_step() {
    best=0
    for f in "$1.0" "$1.1"; do
        step=$(od -An -t u8 -j 8 -N 8 "$f" 2>/dev/null | tr -d ' ')
        [ "${step:-0}" -gt "$best" ] && best=$step
    done
    echo "$best"
}

for s in ddp localsgd:4 dreamddp:4 dreamddp:4+next; do
    n=3 restarts=0
    [ "$s" = dreamddp:4+next ] && n=4 restarts=1
    "$DDRUN" --elastic -n 4 --timeout 300 -- "$DDTEST_PYTHON" "$DIGITS" \
        --strategy "$s" --deterministic >"$TMP/base" 2>&1
    base=$(accuracy "$TMP/base")
    if [ -z "$base" ]; then
        fail "$s: the uninterrupted run"; cat "$TMP/base"; continue
    fi
    dir=$TMP/commits-$s
    mkdir -p "$dir"
    DREAMDDP_ELASTIC_DIR=$dir "$DDRUN" --elastic -n 4 --max-restarts $restarts \
        --timeout 300 -- "$DDTEST_PYTHON" "$DIGITS" --strategy "$s" \
        --deterministic >"$TMP/kill" 2>&1 &
    job=$!
    w=0
    while [ "$w" -lt 2400 ] && [ "$(commit_step "$dir/torch-commit-g0-i0")" -lt 100 ] 2>/dev/null; do
        sleep 0.05; w=$((w + 1))
    done
    victim=""
    for p in $(pgrep -P $job); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
            grep -qx 'DREAMDDP_RANK=2'; then victim=$p; fi
    done
    [ -n "$victim" ] && kill -9 "$victim"
    wait $job
    rc=$?
    if [ "$rc" != 0 ] || [ -z "$victim" ]; then
        fail "$s: ddrun exited $rc (rank 2: '$victim')"; cat "$TMP/kill"; continue
    fi
    expect_grep "$TMP/kill" "ddrun: generation 1: $n ranks ($n workers, 0 aggregators)" "$s: re-formed with $n workers"
    resumed_past "$TMP/kill" 1 "$n" "$s: resumed from a commit"
    expect_grep "$TMP/kill" "0: torch_digits: $s, $n workers, 300 steps" "$s: finished with $n workers"
    acc=$(accuracy "$TMP/kill")
    if [ -n "$acc" ] && awk -v a="$acc" -v b="$base" \
        'BEGIN { d = a - b; exit !(d <= 0.01 && d >= -0.01) }'; then
        pass "$s: accuracy $acc, uninterrupted $base"
    else
        fail "$s: accuracy '$acc', uninterrupted $base"; cat "$TMP/kill"
    fi
done

# torchrun --max_restarts: its agent starts every worker again, with the
# same variables. Debian's torchrun (PyTorch 1.13 on this Python) cannot
# start workers at all, so its part is played here: two ranks with
# torchrun's variables, rank 1 killed past step 100 (rank 0 then stops,
# naming it), both started again as the agent would; they resume from
# the commits in DREAMDDP_ELASTIC_DIR.
# torchrun_job NAME PORT [ENV...]: the two ranks, in the background.
torchrun_job() {
    name=$1 port=$2; shift 2
    for r in 0 1; do
        (env "$@" RANK=$r WORLD_SIZE=2 LOCAL_RANK=$r LOCAL_WORLD_SIZE=2 \
         MASTER_ADDR=127.0.0.1 MASTER_PORT=$port TORCHELASTIC_RUN_ID=el$port \
         timeout -s KILL 200 "$DDTEST_PYTHON" "$DIGITS" --strategy dreamddp:4 \
         --deterministic >"$TMP/$name.$r" 2>&1; echo $? >"$TMP/$name.$r.rc") &
    done
}
torchrun_job tr-base "$(free_port_pair)"
wait
base=$(sed -n 's/^torch_digits: .*held-out accuracy \([0-9.]*\),.*/\1/p' "$TMP/tr-base.0")
dir=$TMP/commits-torchrun
mkdir -p "$dir"
torchrun_job tr-kill "$(free_port_pair)" DREAMDDP_ELASTIC=yes \
    DREAMDDP_ELASTIC_DIR="$dir" DDTEST_MARK=$$ TORCHELASTIC_RESTART_COUNT=0
w=0
while [ "$w" -lt 2400 ] && [ "$(commit_step "$dir/torch-commit-g0-i0")" -lt 100 ] 2>/dev/null; do
    sleep 0.05; w=$((w + 1))
done
victim=""
for e in /proc/[0-9]*/environ; do
    if tr '\0' '\n' <"$e" 2>/dev/null | grep -qx "DDTEST_MARK=$$" &&
        tr '\0' '\n' <"$e" 2>/dev/null | grep -qx 'RANK=1' &&
        tr '\0' '\n' <"$e" 2>/dev/null | grep -qx 'TORCHELASTIC_RESTART_COUNT=0'; then
        p=${e#/proc/}; p=${p%/environ}
        # The interpreter, not the timeout or the subshell around it.
        grep -q python "/proc/$p/cmdline" 2>/dev/null && victim=$p
    fi
done
[ -n "$victim" ] && kill -9 "$victim"
wait
torchrun_job tr-again "$(free_port_pair)" DREAMDDP_ELASTIC=yes \
    DREAMDDP_ELASTIC_DIR="$dir" TORCHELASTIC_RESTART_COUNT=1
wait
digest() { sed -n 's/^torch_digits: .*, parameters \([0-9a-f]*\)$/\1/p' "$1"; }
a=$(digest "$TMP/tr-base.0") b=$(digest "$TMP/tr-again.0")
if [ -n "$victim" ] && [ -n "$a" ] && [ "$(cat "$TMP/tr-again.0.rc")" = 0 ] &&
    [ "$(cat "$TMP/tr-kill.0.rc")" != 0 ]; then
    resumed_past "$TMP/tr-again.0" 0 2 "torchrun's restart: resumed past step 100"
    expect_grep "$TMP/tr-again.0" ", each worker from its own commit" "torchrun's restart: each worker from its own commit"
    if [ "$a" = "$b" ]; then
        pass "torchrun's restart: the uninterrupted run's bits ($a)"
    else
        fail "torchrun's restart: parameters '$b', uninterrupted '$a'"
    fi
else
    fail "torchrun's restart: rank 1 '$victim', uninterrupted '$a'"
    cat "$TMP"/tr-*
fi
finish
