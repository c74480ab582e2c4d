#!/bin/sh
# ddbench timeline merge: the per-rank DREAMDDP_TIMELINE traces of a 4-rank
# dreamddp:4 run of train_mlp become one Chrome trace with a track per rank
# on rank 0's clock: each step's first sync ends within 20 ms on every
# rank, although the ranks started at different times and each rank's wall
# clock is skewed by a different 300 ms (DREAMDDP_TEST_CLOCK_SKEW_US), which
# the offsets agreed at dd_model_commit undo. A trace a full disk cut short
# is removed with a warning naming it; log lines lost are counted once.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
DDBENCH=$top_builddir/tools/ddbench
case $("$DDBENCH" timeline merge /dev/null 2>&1) in
*"built without json-c"*) echo "SKIP: ddbench was built without json-c"; exit 77 ;;
esac

if DREAMDDP_TIMELINE="$TMP/t.%r.json" "$DDRUN" -n 4 --timeout 120 -- sh -c \
        'DREAMDDP_TEST_CLOCK_SKEW_US=$((DREAMDDP_RANK * 300000 - 500000)) exec "$0" "$@"' \
        "$top_builddir/examples/train_mlp" --strategy dreamddp:4 --steps 12 >"$TMP/run" 2>&1 &&
   "$DDBENCH" timeline merge "$TMP"/t.0.json "$TMP"/t.1.json "$TMP"/t.2.json "$TMP"/t.3.json \
        >"$TMP/merged.json" 2>"$TMP/merge.err" &&
   python3 - "$TMP/merged.json" "$TMP"/t.?.json <<'PY'
import json, statistics, sys
events = json.load(open(sys.argv[1]))
tracks = {e["pid"] for e in events if e.get("ph") == "M" and e["name"] == "process_name"}
assert tracks == {0, 1, 2, 3}, tracks
meta = [json.load(open(p))[0]["args"] for p in sys.argv[2:]]
starts = [m["t0_realtime_us"] for m in meta]
# Rank r's clock runs r * 300 ms ahead of rank 0's: the agreed offset says
# so, within its uncertainty (and that within a few ms).
for r, m in enumerate(meta):
    err = abs(m["clock_offset_us"] + r * 300000)
    assert m["clock_uncertainty_us"] < 5e3, (r, m)
    assert err <= m["clock_uncertainty_us"] + 1e3, (r, m)
assert max(starts) - min(starts) > 800e3, starts  # the skew is in the files
# Each rank's first sync of each step: the same collective on every rank.
first = {}
for e in sorted((e for e in events if e.get("cat") == "sync"), key=lambda e: e["ts"]):
    first.setdefault((e["pid"], e["args"]["step"]), e)
steps = sorted({s for (_, s) in first})
spreads = []
for s in steps:
    jobs = [first.get((r, s)) for r in range(4)]
    if None in jobs:
        continue
    assert len({tuple(j["args"]["names"]) for j in jobs}) == 1, (s, jobs)
    ends = [j["ts"] + j["dur"] for j in jobs]
    spreads.append(max(ends) - min(ends))
assert len(spreads) >= 8, spreads
median = statistics.median(spreads)
print("ranks started %.1f ms apart on their skewed clocks; first sync ends "
      "%.2f ms apart on rank 0's (median of %d steps); offsets within %s us"
      % ((max(starts) - min(starts)) / 1e3, median / 1e3, len(spreads),
         [round(m["clock_uncertainty_us"]) for m in meta]))
# A merge that misplaced a rank would put it 300 ms off; the spread itself
# is the completions' own skew and the engines' wakeups: medians of 2.6 to
# 3.7 ms on an idle 2-core host, 5.0 ms in the ASan build during make check
# -j2, 4.8 to 6.8 ms in the release build beside a running CI.
assert median < 20e3, spreads
PY
then
    pass "4 skewed clocks put on rank 0's: each step's first sync ends within 20 ms across ranks"
else
    fail "timeline merge"; cat "$TMP/run" "$TMP/merge.err"
fi

# Errors name the file: a rank twice, a file that is no trace.
"$DDBENCH" timeline merge "$TMP/t.0.json" "$TMP/t.0.json" >/dev/null 2>"$TMP/err"
expect_grep "$TMP/err" "both hold rank 0" "a rank given twice is refused"
echo '{}' >"$TMP/obj.json"
"$DDBENCH" timeline merge "$TMP/obj.json" >/dev/null 2>"$TMP/err"
expect_grep "$TMP/err" "is not a Chrome trace" "a file that is no trace is refused"

# A full disk (here the file size limit, ulimit -f 1: 512 bytes): the
# trace that could not be written whole is removed, not left as JSON that
# does not parse, and the warning names its path and the error. (gloo:
# UCX's shared memory files count against the limit too.)
(trap '' XFSZ; ulimit -f 1; DREAMDDP_BACKENDS=gloo DREAMDDP_TIMELINE="$TMP/full.json" exec \
    "$top_builddir/examples/train_mlp" --strategy localsgd:2 --steps 20) 2>&1 | cat >"$TMP/full"
expect_grep "$TMP/full" "the DREAMDDP_TIMELINE trace of rank 0 could not be written whole to $TMP/full.json (File too large): removed" "a trace cut short is named and removed"
[ ! -e "$TMP/full.json" ] && pass "no broken trace is left" || fail "a broken trace was left: $(head -c 200 "$TMP/full.json")"

# A log that cannot be written (DREAMDDP_LOG_FILE=/dev/full): the lines
# lost are counted and said once on standard error, at dd_finalize.
DREAMDDP_LOG_FILE=/dev/full DREAMDDP_LOG_LEVEL=info \
    "$top_builddir/examples/train_mlp" --strategy localsgd:2 --steps 4 >"$TMP/nolog.out" 2>"$TMP/nolog"
expect_grep "$TMP/nolog" "log lines could not be written to /dev/full (No space left on device)" "lost log lines are counted and named"
n=$(grep -c "could not be written to /dev/full" "$TMP/nolog")
[ "$n" -eq 1 ] && pass "lost log lines are said once" || fail "lost log lines were said $n times"
finish
