#!/bin/sh
# The Gloo module with 1 to 4 streams: a collective of 2 MiB and more is cut
# across the streams' contexts; every collective stays exact on 2, 3 and 5
# ranks, and the ranks agree on one count.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/mp/coll_lib.sh"
coll_require gloo
coll_streams gloo
# The engine's channels among the workers (the aggregators' route is
# tested over UCX, in test_coll_streams_ucx.sh).
coll_engine_streams gloo
# ddbench's --streams sets the count for its run (over a user's
# DREAMDDP_NUM_STREAMS) and reports the count the backends were told.
DDBENCH=$top_builddir/tools/ddbench
if DREAMDDP_NUM_STREAMS=1 DREAMDDP_BACKENDS=gloo "$DDRUN" -n 2 --timeout 60 -- \
    "$DDBENCH" coll --op allreduce --bytes 8M --iters 2 --streams 3 --json \
    >"$TMP/bench" 2>&1; then
    expect_grep "$TMP/bench" '"world":2,"streams":3,' "ddbench coll --streams 3 runs with 3 streams"
    expect_grep "$TMP/bench" '"correct":true' "ddbench coll --streams 3 is correct"
else
    fail "ddbench coll --streams 3"; cat "$TMP/bench"
fi
if DREAMDDP_BACKENDS=gloo "$DDRUN" -n 2 --timeout 60 -- "$DDBENCH" sync \
    --bytes 8M --iters 2 --streams 2 --json >"$TMP/sync" 2>&1; then
    expect_grep "$TMP/sync" '"aggregators":0,"streams":2,' "ddbench sync --streams 2 runs with 2 streams"
    expect_grep "$TMP/sync" '"correct":true' "ddbench sync --streams 2 is correct"
else
    fail "ddbench sync --streams 2"; cat "$TMP/sync"
fi
# The failure cases with 2 streams: a mismatch, and a rank leaving in the
# middle of a 16 MB allreduce (cut across both streams), fail the others
# within the timeout.
DREAMDDP_NUM_STREAMS=2; export DREAMDDP_NUM_STREAMS
coll_failures gloo
finish
