# Helpers of the elastic tests (test_elastic_*.sh): train_mlp under
# ddrun --elastic, 4 workers, committing every 20 steps, --data global
# (a step's examples are the same however many workers share them) and
# DREAMDDP_DETERMINISTIC=yes. Sourced after tests/lib.sh.
export DREAMDDP_TIMEOUT_S=5 DREAMDDP_LINE_BUFFERED=yes DREAMDDP_DETERMINISTIC=yes
TRAIN=$top_builddir/examples/train_mlp
# The fault after step FAULT (rank 0 prints every 50 steps), commits every
# 20. Under the sanitizers (a run 6 times slower) the runs are 100 steps,
# too few for the accuracy to settle: there the bits and the steps are
# checked, the accuracy only in the release build.
STEPS=300 FAULT=100 SHORT=
if [ -n "${DDTEST_ELASTIC_SHORT:-}" ] ||
    ldd "$top_builddir/.libs/libdreamddp.so.1" 2>/dev/null | grep -q 'lib[atl]san'; then
    STEPS=100 FAULT=50 SHORT=yes
    # Rank 0 alone evaluates and prints on its log lines, before the next
    # sync: with 3 sanitized ranks on 2 cores it once came 5 s late to the
    # last step's (CI, kill-ddp), and the others timed out.
    export DREAMDDP_TIMEOUT_S=10
fi
RESUME=$((FAULT / 20 * 20)) # the last commit before the fault

# The final accuracy on rank 0's "done:" line.
accuracy() { sed -n 's/^0: done: .*held-out accuracy \([0-9.]*\),.*/\1/p' "$1"; }

# run NAME SIGNAL STRATEGY [DDRUN ARGS]: the job, with SIGNAL sent to rank
# 2 once rank 0 has printed step FAULT (none: no fault).
run() {
    name=$1; sig=$2; strategy=$3; shift 3
    out=$TMP/$name
    timeout -s KILL 240 "$DDRUN" --elastic -n 4 "$@" -- "$TRAIN" \
        --strategy "$strategy" --steps $STEPS --commit-every 20 --data global \
        >"$out" 2>&1 &
    job=$!
    [ "$sig" = none ] && { wait $job; echo $? >"$out.rc"; return; }
    w=0
    while [ "$w" -lt 2400 ] && ! grep -q "^0: *$FAULT " "$out" 2>/dev/null; do
        sleep 0.05; w=$((w + 1))
    done
    # ddrun is timeout's child; the ranks are ddrun's children.
    ddrun=$(pgrep -P $job)
    victim=""
    for p in $(pgrep -P "$ddrun"); do
        if tr '\0' '\n' <"/proc/$p/environ" 2>/dev/null |
            grep -qx 'DREAMDDP_RANK=2'; then victim=$p; fi
    done
    if [ -z "$victim" ]; then
        fail "$name: rank 2 not found"
    else
        kill -s "$sig" "$victim"
    fi
    if [ "$sig" = STOP ]; then
        # Woken once the job went on without it.
        w=0
        while [ "$w" -lt 600 ] && ! grep -q "generation 1:" "$out"; do
            sleep 0.05; w=$((w + 1))
        done
        kill -s CONT "$victim"
    fi
    wait $job
    echo $? >"$out.rc"
}

# check NAME BASELINE WORKERS: the job ended well with WORKERS workers.
check() {
    out=$TMP/$1
    rc=$(cat "$out.rc")
    if [ "$rc" != 0 ]; then
        fail "$1: ddrun exited $rc"; cat "$out"; return
    fi
    expect_grep "$out" "ddrun: generation 1: " "$1: the job was re-formed"
    expect_grep "$out" "0: done: " "$1: finished"
    expect_grep "$out" ", $3 workers, $STEPS steps" "$1: finished with $3 workers"
    resumed=$(sed -n 's/^0: .*elastic: generation 1 of [0-9]* workers resumes at step \([0-9]*\),.*/\1/p' "$out")
    if [ -n "$resumed" ] && [ "$resumed" -ge $((FAULT - 20)) ] &&
        [ "$resumed" -le "$FAULT" ]; then
        pass "$1: resumed at step $resumed"
    else
        fail "$1: resumed at step '$resumed', expected $((FAULT - 20)) to $FAULT"
    fi
    for r in $(seq 0 $(($3 - 1))); do
        expect_grep "$out" "$r: [rank $r] dreamddp WARN boot: elastic: generation 1 of $3 workers resumes at step $resumed" "$1: rank $r resumes"
    done
    acc=$(accuracy "$out")
    [ -n "$SHORT" ] && return
    if [ -n "$acc" ] && awk -v a="$acc" -v b="$2" \
        'BEGIN { d = a - b; exit !(d <= 0.03 && d >= -0.03) }'; then
        pass "$1: accuracy $acc, uninterrupted $2"
    else
        fail "$1: accuracy '$acc', uninterrupted $2"
    fi
}


# params FILE: the parameters' checksum on rank 0's "done:" line.
params() { sed -n 's/^0: done: .*, parameters \([0-9a-f]*\)$/\1/p' "$1"; }

# strategy S: the uninterrupted run, a kill (3 workers finish, unless S
# is a +next strategy), rank 2 started again (4 finish, with the
# uninterrupted run's bits but under +next, whose averages in flight at a
# commit are not in it), and with STOP=yes a frozen rank 2.
strategy() {
    s=$1
    run "base-$s" none "$s"
    base=$(accuracy "$TMP/base-$s")
    if [ "$(cat "$TMP/base-$s.rc")" != 0 ] || [ -z "$base" ]; then
        fail "$s: the uninterrupted run failed"; cat "$TMP/base-$s"; return
    fi
    expect_grep "$TMP/base-$s" ", 4 workers, $STEPS steps" "$s: uninterrupted"
    if [ "$s" != dreamddp:4+next ]; then
        run "kill-$s" KILL "$s" --max-restarts 0
        check "kill-$s" "$base" 3
        expect_grep "$TMP/kill-$s" "ddrun: rank 2 (generation 0) was lost: killed by signal 9" "$s: ddrun names the lost rank"
    fi
    run "rejoin-$s" KILL "$s" --max-restarts 1
    check "rejoin-$s" "$base" 4
    expect_grep "$TMP/rejoin-$s" "ddrun: rank 2 (first started as rank 2) is started again" "$s: rank 2 started again"
    expect_grep "$TMP/rejoin-$s" "resumes at step $RESUME, each worker from its own commit" "$s: each worker from its own commit, the restarted one too"
    if [ "$s" != dreamddp:4+next ]; then
        # Not +next: the averages in flight at a commit are not in it.
        a=$(params "$TMP/base-$s") b=$(params "$TMP/rejoin-$s")
        if [ -n "$a" ] && [ "$a" = "$b" ]; then
            pass "$s, rank 2 started again: the uninterrupted run's bits ($a)"
        else
            fail "$s, rank 2 started again: parameters '$b', uninterrupted '$a'"
        fi
    fi
    if [ "$s" = dreamddp:4 ]; then
        expect_grep "$TMP/kill-$s" "resumes at step $RESUME, each worker from its own commit" "dreamddp:4: each survivor from its own commit"
        run "stop-$s" STOP "$s" --max-restarts 0
        check "stop-$s" "$base" 3
        expect_grep "$TMP/stop-$s" "did not stop with the others: dropped from the job" "frozen: dropped"
        expect_grep "$TMP/stop-$s" "2: train_mlp: rank 2: rank 2 of generation 0 was dropped: the job went on without it and is at generation 1" "frozen: refused once woken, naming itself"
    fi
}
