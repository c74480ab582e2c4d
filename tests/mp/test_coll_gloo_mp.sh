#!/bin/sh
# The Gloo module through ddrun on loopback: every operation, dtype,
# reduction and size on 1 to 5 ranks, and the failure cases.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/mp/coll_lib.sh"
coll_require gloo
coll_matrix gloo
coll_failures gloo
finish
