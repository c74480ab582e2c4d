#!/bin/sh
# The scheduler with real processes through ddrun: every strategy leaves the
# exact average in every layer it syncs and syncs every layer once per
# window; mismatched layer tables and calls out of order fail cleanly;
# tensors without gradients and layers left unmarked; bubble filling's
# trial keeps the extra syncs only where they cost no measured time.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
MP=$top_builddir/tests/mp/mp_sched
export DREAMDDP_TIMEOUT_S=30 DREAMDDP_PROFILE_STEPS=3 DREAMDDP_ADAPTIVE_INTERVAL=2

for n in 1 2 3 4; do
    for s in ddp localsgd:4 plsgd:4 dreamddp:4 adaptive; do
        if "$DDRUN" -n $n --timeout 120 -- "$MP" $s 13 >"$TMP/out" 2>&1; then
            expect_grep "$TMP/out" "mp_sched: $s: 13 steps correct on $n ranks" "$s on $n ranks"
        else
            fail "$s on $n ranks"; cat "$TMP/out"
        fi
    done
done

# Each host backend alone (DREAMDDP_BACKENDS) carries the syncs of ddp,
# localsgd and dreamddp: the quick tier's run of every route on loopback.
for b in gloo ucx; do
    if [ ! -f "$top_builddir/.libs/dd_backend_$b.so" ]; then
        echo "skipped: dd_backend_$b.so was not built (configure did not find $b)"
        continue
    fi
    for s in ddp localsgd:4 dreamddp:4; do
        if DREAMDDP_BACKENDS=$b DREAMDDP_LOG_LEVEL=info DREAMDDP_LOG_SUBSYS=backend \
            "$DDRUN" -n 2 --timeout 120 -- "$MP" $s 9 >"$TMP/be" 2>&1; then
            grep -q "backends: $b\$" "$TMP/be" && pass "$s: $b is the only backend" ||
                { fail "$s: $b is not the only backend"; cat "$TMP/be"; }
            expect_grep "$TMP/be" "mp_sched: $s: 9 steps correct on 2 ranks" "$s over $b alone on 2 ranks"
        else
            fail "$s over $b alone on 2 ranks"; cat "$TMP/be"
        fi
    done
done

# dd_allreduce and dd_broadcast called while a step's syncs are in flight
# run in their turn among them, on both routes: exact sums, exact layers.
for s in ddp dreamddp:2; do
    if "$DDRUN" -n 3 --timeout 120 -- "$MP" collective $s 6 >"$TMP/uc" 2>&1 &&
       DREAMDDP_NUM_AGGREGATORS=2 "$DDRUN" -n 5 --timeout 120 -- "$MP" collective $s 6 >>"$TMP/uc" 2>&1; then
        expect_grep "$TMP/uc" "mp_sched: $s: 6 steps correct on 3 ranks, with collectives inside every step" "$s: collectives inside an open step"
    else
        fail "$s: collectives inside an open step"; cat "$TMP/uc"
    fi
done

# Bubble filling's trial: extra syncs that slow the steps go for good,
# extras whose absence slows them come back; with checks of the times
# every 10 windows (DREAMDDP_REPLAN_WINDOWS) the trial still checks every
# window, and decides within 5 of the plan.
for m in with without; do
    if DREAMDDP_REPLAN_WINDOWS=10 "$DDRUN" -n 2 --timeout 120 -- "$MP" fill 60 $m >"$TMP/fill" 2>&1; then
        expect_grep "$TMP/fill" "mp_sched: fill $m: extras from window" "bubble filling's trial, steps slow $m the extras"
    else
        fail "bubble filling's trial, steps slow $m the extras"; cat "$TMP/fill"
    fi
done

# Small fusion and bucket limits exercise multi-layer messages.
if DREAMDDP_FUSION_BYTES=64 DREAMDDP_FIRST_BUCKET_BYTES=100 DREAMDDP_BUCKET_BYTES=20000 \
    "$DDRUN" -n 3 --timeout 120 -- "$MP" ddp 5 >"$TMP/fuse" 2>&1 &&
   DREAMDDP_FUSION_BYTES=64 "$DDRUN" -n 3 --timeout 120 -- "$MP" dreamddp:2 9 >>"$TMP/fuse" 2>&1; then
    pass "fused messages keep the averages exact"
else
    fail "fusion"; cat "$TMP/fuse"
fi

# Foreseen collectives (route/coll.c): ddp's three syncs a step (layers 4
# and 3, layer 2 in f64, layers 1 and 0) run the same from step to step, so
# from step 2 on the second and third leave beside their digests, on what
# every worker foresaw. An extra allreduce of every rank right after layer
# 2's mark in step 4 takes the place foreseen for layer 2's sync: zeros go
# in that shape, then the allreduce after its digest, every sum exact;
# steps 5 and 6 foresee from the steps 2 and 3 back, which repeat with
# those periods around step 4. Rank 1 alone making it fails every rank,
# naming what each ran. dreamddp:4 foresees from its last window from
# step 8 on: exact averages.
if DREAMDDP_LOG_LEVEL=info "$DDRUN" -n 3 --timeout 120 -- "$MP" ddp 8 >"$TMP/fs" 2>&1 &&
   DREAMDDP_LOG_LEVEL=info "$DDRUN" -n 3 --timeout 120 -- env MP_EXTRA=all:4 "$MP" ddp 8 >"$TMP/fsx" 2>&1; then
    expect_grep "$TMP/fs" "12 of them sent beside their digest on what every worker foresaw, 0 foreseen wrongly" \
        "ddp: steps 2 to 7 send two syncs each beside their digests"
    expect_grep "$TMP/fsx" "mp_sched: ddp: 8 steps correct on 3 ranks" "an extra allreduce where a sync was foreseen: exact"
    expect_grep "$TMP/fsx" "11 of them sent beside their digest on what every worker foresaw, 1 foreseen wrongly" \
        "an extra allreduce where a sync was foreseen: zeros in its place"
else
    fail "foreseen collectives"; cat "$TMP/fs" "$TMP/fsx"
fi
if DREAMDDP_LOG_LEVEL=info "$DDRUN" -n 3 --timeout 120 -- "$MP" dreamddp:4 16 >"$TMP/fsd" 2>&1 &&
   grep -qE "[1-9][0-9]* of them sent beside their digest" "$TMP/fsd"; then
    expect_grep "$TMP/fsd" "mp_sched: dreamddp:4: 16 steps correct on 3 ranks" "dreamddp:4: foreseen syncs, exact averages"
else
    fail "dreamddp:4: foreseen syncs"; cat "$TMP/fsd"
fi
launch 3 "$TMP/fs1" env DREAMDDP_STRATEGY=ddp MP_EXTRA=1:4 timeout 60 "$MP" env 8
for r in 0 1 2; do
    if [ "$(cat "$TMP/fs1.$r.rc")" = 0 ]; then
        fail "an extra allreduce of rank 1 where a sync was foreseen: rank $r exited with success"; cat "$TMP/fs1.$r"
    fi
    expect_grep "$TMP/fs1.$r" "workers out of step at their collective 13 (it left beside its digest" \
        "an extra allreduce of rank 1 where a sync was foreseen: rank $r fails"
    expect_grep "$TMP/fs1.$r" "rank 1 'step 4, allreduce of 8 f32 (sum)'" "rank $r names rank 1's allreduce"
    expect_grep "$TMP/fs1.$r" "rank 0, 2 'step 4, average of 4099 f64 gradients (layer 'layer2')'" \
        "rank $r names the others' sync"
done

# DREAMDDP_TIMELINE: one Chrome trace per rank (%r), with backward marks and syncs.
if DREAMDDP_TIMELINE="$TMP/tl.%r.json" "$DDRUN" -n 2 --timeout 60 -- "$MP" dreamddp:2 5 >"$TMP/tl" 2>&1 &&
   python3 - "$TMP/tl.0.json" "$TMP/tl.1.json" <<'PY'
import json, sys
for path in sys.argv[1:]:
    events = json.load(open(path))
    syncs = [e for e in events if e.get("cat") == "sync"]
    marks = [e for e in events if e.get("cat") == "backward"]
    assert len(marks) == 5 * 5, (path, len(marks))
    assert syncs and all(e["dur"] >= 0 for e in syncs), path
    # Each sync names its layers and when it was launched, at or before
    # its start; each mark names its step.
    assert all(e["args"]["submit"] <= e["ts"] + 0.1 and
               len(e["args"]["names"]) == e["args"]["layers"] for e in syncs), path
    assert [e["args"]["step"] for e in marks] == [k // 5 for k in range(25)], path
PY
then
    pass "DREAMDDP_TIMELINE writes a trace per rank with every backward mark and the syncs"
else
    fail "DREAMDDP_TIMELINE"; cat "$TMP/tl"
fi

# A layer split over two messages (its first tensor fills the fusion
# limit) counts one sync and its bytes once, and the layers' totals add up
# to the bytes on the wire; one [SYNC] line per layer and step at debug,
# and one per window (one per step for ddp and adaptive) that sums them.
STATS=$top_builddir/tests/mp/mp_stats
for s in ddp dreamddp:2 localsgd:2 plsgd:2 adaptive; do
    if DREAMDDP_FUSION_BYTES=4K DREAMDDP_FIRST_BUCKET_BYTES=4K DREAMDDP_BUCKET_BYTES=4K \
        DREAMDDP_LOG_LEVEL=debug DREAMDDP_LOG_SUBSYS=sched DREAMDDP_TIMELINE="$TMP/st.%r.json" \
        "$DDRUN" -n 2 --timeout 60 -- "$STATS" $s 10 >"$TMP/st" 2>&1 &&
       python3 - "$TMP/st" "$TMP/st.0.json" $s <<'PY'
import collections, json, re, sys
text = open(sys.argv[1]).read()
lines = re.findall(r"^(\d+): .*\[SYNC\] layer '(\w+)' synced in .* \(step (\d+)\)", text, re.M)
assert lines and max(collections.Counter(lines).values()) == 1, "a layer logged twice in a step"
window = int(sys.argv[3].split(":")[1]) if ":" in sys.argv[3] else 1
summary = re.findall(r"^0: .*\[SYNC\] steps? [0-9-]+: (\d+) layer syncs, (\d+) bytes, "
                     r"wire [0-9.]+ ms, exposed wait [0-9.]+ ms(?:, divergence max \S+ \(layer \w+\) mean \S+)?$",
                     text, re.M)
assert len(summary) == 10 // window, summary
assert sum(int(n) for n, _ in summary) == sum(1 for l in lines if l[0] == "0"), summary
jobs = collections.Counter((e["args"]["step"], n) for e in json.load(open(sys.argv[2]))
                           if e.get("cat") == "sync" for n in e["args"]["names"])
assert max(jobs.values()) == 2, "no layer was split over two messages"
PY
    then
        expect_grep "$TMP/st" "mp_stats: $s: 10 steps, every sync counted once" "$s: a layer split over two messages is counted once"
    else
        fail "$s: statistics of a split layer"; cat "$TMP/st"
    fi
done

# The agreement on the times runs in the background among the step's syncs
# (every window here, with every check past the drift): on both routes the
# averages stay exact, the statistics leave it out, and the plan is checked
# again after two checks.
if DREAMDDP_REPLAN_WINDOWS=1 DREAMDDP_REPLAN_DRIFT=0 DREAMDDP_LOG_LEVEL=info DREAMDDP_LOG_SUBSYS=sched \
    "$DDRUN" -n 3 --timeout 120 -- "$MP" dreamddp:2 15 >"$TMP/ag" 2>&1 &&
   DREAMDDP_REPLAN_WINDOWS=1 DREAMDDP_REPLAN_DRIFT=0 DREAMDDP_NUM_AGGREGATORS=2 \
    "$DDRUN" -n 5 --timeout 120 -- "$MP" dreamddp:2 15 >>"$TMP/ag" 2>&1 &&
   DREAMDDP_REPLAN_WINDOWS=1 DREAMDDP_REPLAN_DRIFT=0 DREAMDDP_FUSION_BYTES=4K \
    "$DDRUN" -n 2 --timeout 60 -- "$STATS" dreamddp:2 16 >>"$TMP/ag" 2>&1 &&
   grep -Eq "^0: .*(the plan stands|re-planned at step)" "$TMP/ag"; then
    expect_grep "$TMP/ag" "mp_stats: dreamddp:2: 16 steps, every sync counted once" "background agreement: exact averages, exact statistics, plans checked"
else
    fail "background agreement on the times"; cat "$TMP/ag"
fi

# dreamddp without bubble filling moves exactly the bytes of Local SGD over
# whole windows; with it, the extra bytes are those beyond them.
MLP="$top_builddir/examples/train_mlp --steps 24 --json"
if "$DDRUN" -n 2 --timeout 120 -- $MLP --strategy localsgd:4 >"$TMP/l4" 2>&1 &&
   DREAMDDP_FILL_BUBBLES=no "$DDRUN" -n 2 --timeout 120 -- $MLP --strategy dreamddp:4 >"$TMP/d4" 2>&1 &&
   "$DDRUN" -n 2 --timeout 120 -- $MLP --strategy dreamddp:4 >"$TMP/d4f" 2>&1 &&
   python3 - "$TMP/l4" "$TMP/d4" "$TMP/d4f" <<'PY'
import json, re, sys
l4, d4, d4f = (json.loads(re.search(r"^0: (\{.*\})$", open(p).read(), re.M).group(1))
               for p in sys.argv[1:])
assert d4["synced_bytes"] == l4["synced_bytes"] and d4["extra_bytes"] == 0, (l4, d4)
assert d4f["synced_bytes"] - d4f["extra_bytes"] == l4["synced_bytes"], (l4, d4f)
PY
then
    pass "dreamddp:4 without bubble filling moves the bytes of localsgd:4; with it, the extra bytes are reported"
else
    fail "bytes of dreamddp:4 against localsgd:4"; cat "$TMP/l4" "$TMP/d4" "$TMP/d4f"
fi

"$DDRUN" -n 3 --timeout 60 -- "$MP" mismatch >"$TMP/mm" 2>&1
for r in 0 1 2; do
    expect_grep "$TMP/mm" "$r: commit: ranks disagree: layer tables differ from rank 0's on rank(s) 1; the first difference is layer 3: rank 0 has 'layer3 70000:f32 as none', rank 1 has 'layer3 70001:f32 as none'" "rank $r names the mismatched layer"
done

if "$DDRUN" -n 2 --timeout 60 -- "$MP" misuse >"$TMP/misuse" 2>&1; then
    expect_grep "$TMP/misuse" "mp_sched: misuse is refused" "calls out of order are refused"
else
    fail "misuse"; cat "$TMP/misuse"
fi

# adaptive starts every layer at DREAMDDP_ADAPTIVE_KSTART (4), kept within
# KMIN..KMAX.
"$DDRUN" -n 2 -- "$MP" adaptive 3 >"$TMP/k" 2>&1
expect_grep "$TMP/k" "mp_sched: adaptive: periods start at 4" "adaptive starts at DREAMDDP_ADAPTIVE_KSTART"
DREAMDDP_ADAPTIVE_KSTART=9 DREAMDDP_ADAPTIVE_KMAX=6 "$DDRUN" -n 2 -- "$MP" adaptive 3 >"$TMP/k" 2>&1
expect_grep "$TMP/k" "mp_sched: adaptive: periods start at 6" "DREAMDDP_ADAPTIVE_KSTART above KMAX starts at KMAX"

# Tensors without gradients (grad NULL, such as batch-norm statistics):
# averaged with the parameters, rank 0's values under ddp (on both routes),
# and refused by adaptive at commit, naming the layer and tensor, when a
# layer has no gradient at all; never a crash.
for s in ddp localsgd:4 plsgd:4 dreamddp:4; do
    if "$DDRUN" -n 3 --timeout 120 -- "$MP" buffers $s 9 >"$TMP/buf" 2>&1; then
        expect_grep "$TMP/buf" "mp_sched: buffers: $s: 9 steps correct on 3 ranks" "grad NULL under $s"
    else
        fail "grad NULL under $s"; cat "$TMP/buf"
    fi
done
if "$DDRUN" -n 3 --timeout 120 -- "$MP" buffers adaptive 9 mixed >"$TMP/buf" 2>&1; then
    expect_grep "$TMP/buf" "mp_sched: buffers: adaptive: 9 steps correct on 3 ranks" "grad NULL beside gradients under adaptive"
else
    fail "grad NULL beside gradients under adaptive"; cat "$TMP/buf"
fi
"$DDRUN" -n 3 --timeout 120 -- "$MP" buffers adaptive 9 >"$TMP/buf" 2>&1
for r in 0 1 2; do
    expect_grep "$TMP/buf" "$r: mp_sched: rank $r: buffers: commit: invalid parameter: dd_model_commit: layer 'stats' tensor 0 has no gradient" "adaptive refuses a layer without gradients on rank $r"
done
if DREAMDDP_NUM_AGGREGATORS=2 "$DDRUN" -n 5 --timeout 120 -- "$MP" buffers ddp 5 >"$TMP/buf" 2>&1; then
    expect_grep "$TMP/buf" "mp_sched: buffers: ddp: 5 steps correct on 3 ranks" "ddp buffers through aggregators"
else
    fail "ddp buffers through aggregators"; cat "$TMP/buf"
fi

# Layers never marked: dd_step_end names them on every rank under every
# strategy that syncs them from the mark (not localsgd, which averages all
# in dd_step_end); dd_layer_unused (rank 1 only) and DREAMDDP_FIND_UNUSED=1
# count them as ready with zero gradients under ddp.
for s in ddp localsgd:4 plsgd:4 dreamddp:4 adaptive; do
    "$DDRUN" -n 3 --timeout 120 -- "$MP" unused $s 9 none >"$TMP/un" 2>&1
    if [ "$s" = localsgd:4 ]; then
        expect_grep "$TMP/un" "mp_sched: unused none: $s: 9 steps correct" "$s averages an unmarked layer"
    else
        # The first step that syncs layer1: ddp every step, plsgd and
        # dreamddp (profiling) by the even split, adaptive after KSTART.
        case $s in ddp) k=0 ;; adaptive) k=3 ;; *) k=1 ;; esac
        for r in 0 1 2; do
            expect_grep "$TMP/un" "$r: mp_sched: rank $r: unused none: $s step $k: call out of order: dd_step_end: step $k: layer(s) 'layer1' never marked, though $s syncs them in this step" "$s: an unmarked layer is named on rank $r"
        done
    fi
    if "$DDRUN" -n 3 --timeout 120 -- "$MP" unused $s 9 call >"$TMP/un" 2>&1 &&
       DREAMDDP_FIND_UNUSED=1 "$DDRUN" -n 3 --timeout 120 -- "$MP" unused $s 9 option >>"$TMP/un" 2>&1; then
        expect_grep "$TMP/un" "mp_sched: unused option: $s: 9 steps correct on 3 ranks" "$s: dd_layer_unused and DREAMDDP_FIND_UNUSED"
    else
        fail "$s: dd_layer_unused and DREAMDDP_FIND_UNUSED"; cat "$TMP/un"
    fi
done

DREAMDDP_STRATEGY=dreamddp "$DDRUN" -n 1 -- "$MP" ddp 1 >"$TMP/bad" 2>&1
expect_grep "$TMP/bad" "invalid value DREAMDDP_STRATEGY='dreamddp': expected ddp, localsgd:H, plsgd:H, dreamddp:H (H from 1 to 1024, each also with '+next' for delayed averaging), adaptive or adaptive:drift" "a bad DREAMDDP_STRATEGY is named"
finish
