#!/bin/sh
# The UCX module through ddrun on loopback: every operation, dtype,
# reduction and size on 1 to 5 ranks, and the failure cases.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/mp/coll_lib.sh"
coll_require ucx
coll_matrix ucx
coll_failures ucx
finish
