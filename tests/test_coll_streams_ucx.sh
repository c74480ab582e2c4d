#!/bin/sh
# The UCX module with 1 to 4 streams (it keeps one endpoint per peer, so
# nothing is cut): every collective stays exact on 2, 3 and 5
# ranks, and the ranks agree on one count.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/coll_lib.sh"
coll_require ucx
coll_streams ucx
finish
