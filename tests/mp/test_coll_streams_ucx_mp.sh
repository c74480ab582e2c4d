#!/bin/sh
# The UCX module with 1 to 4 streams: as many endpoints per peer, a large
# message's 1 MiB chunks spread across them by tag; every collective stays
# exact on 2, 3 and 5 ranks, and the ranks agree on one count.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/mp/coll_lib.sh"
coll_require ucx
coll_streams ucx
coll_engine_streams ucx agg
if DREAMDDP_BACKENDS=ucx DREAMDDP_NUM_STREAMS=3 DREAMDDP_TIMEOUT_S=30 \
    DREAMDDP_LOG_LEVEL=debug DREAMDDP_LOG_SUBSYS=backend "$DDRUN" -n 2 \
    --timeout 60 -- "$MP" --sizes 1048583 --dtypes f32 --ops sum >"$TMP/eps" 2>&1; then
    [ "$(grep -c 'UCP worker ready, 1 peers, 3 endpoints each' "$TMP/eps")" -eq 2 ] &&
        pass "ucx: 3 streams open 3 endpoints to each peer" ||
        { fail "ucx: 3 streams open 3 endpoints to each peer"; cat "$TMP/eps"; }
else
    fail "ucx: 3 streams on 2 ranks"; cat "$TMP/eps"
fi
# The failure cases with 2 streams: a mismatch, and a rank leaving in the
# middle of a 16 MB allreduce (cut across both streams), fail the others
# within the timeout.
DREAMDDP_NUM_STREAMS=2; export DREAMDDP_NUM_STREAMS
coll_failures ucx
finish
