#!/bin/sh
# Elastic workers under dreamddp:4 and dreamddp:4+next, as
# test_elastic_mp.sh: under dreamddp:4 a kill (3 workers finish), rank 2
# started again (4 finish, with the uninterrupted run's bits), and a
# SIGSTOP: the frozen rank is dropped, and refused naming itself once
# woken, while the survivors finish with 3; under dreamddp:4+next rank 2
# started again (its averages in flight at a commit are not in it: no
# bitwise check).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/mp/elastic_lib.sh"
strategy dreamddp:4
strategy dreamddp:4+next
finish
