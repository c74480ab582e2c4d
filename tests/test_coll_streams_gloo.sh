#!/bin/sh
# The Gloo module with 1 to 4 streams: a collective of 2 MiB and more is cut
# across the streams' contexts; every collective stays exact on 2, 3 and 5
# ranks, and the ranks agree on one count.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
. "$top_srcdir/tests/coll_lib.sh"
coll_require gloo
coll_streams gloo
finish
