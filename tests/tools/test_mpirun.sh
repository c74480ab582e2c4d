#!/bin/sh
# Open MPI's mpirun starts a job with no address set by hand: no -x, no
# MASTER_ADDR, no DREAMDDP_MASTER_ADDR (the acceptance of issue 16), and
# built with PMIx, rank 0's store is found through mpirun's PMIx server. Skips
# where Open MPI's mpirun is not installed (tools/install-deps --bench).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

if ! command -v mpirun >/dev/null 2>&1; then
    echo "skip: mpirun not found (Debian's openmpi-bin: tools/install-deps --bench)"
    exit 77
fi
if ! mpirun --version 2>&1 | grep -q "Open MPI"; then
    echo "skip: mpirun is not Open MPI's: $(mpirun --version 2>&1 | head -n 1)"
    exit 77
fi
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE \
    DREAMDDP_MASTER_ADDR DREAMDDP_MASTER_PORT DREAMDDP_RANK \
    DREAMDDP_WORLD_SIZE DREAMDDP_LOCAL_RANK DREAMDDP_LOCAL_SIZE \
    DREAMDDP_JOB_TOKEN
export DREAMDDP_TIMEOUT_S=60
# train_mlp does not free its model and data before it exits; under the
# sanitizer build LeakSanitizer would fail it for that, which is not what
# this test is about (the library's leaks are checked by the other tests).
ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}detect_leaks=0"
export ASAN_OPTIONS

mpirun --allow-run-as-root --oversubscribe -np 3 \
    -x DREAMDDP_LOG_LEVEL=info -x DREAMDDP_LOG_SUBSYS=boot \
    "$top_builddir/examples/train_mlp" --steps 20 >"$TMP/out" 2>&1
rc=$?
[ $rc -eq 0 ] && pass "mpirun -np 3 train_mlp exits 0" || { fail "mpirun exited $rc"; sed 's/^/    /' "$TMP/out"; }
expect_grep "$TMP/out" "done: ddp, 3 workers, 20 steps" "three workers trained under mpirun"
grep -q "open to anyone" "$TMP/out" && fail "rank 0 warns of a derived token under mpirun" || pass "mpirun's job key is the token: no warning"
# Built with PMIx, the address and the port rank 0's store got travel
# through mpirun's PMIx server; without, every rank is on one host.
if grep -q '^#define HAVE_PMIX 1' "$top_builddir/config.h"; then
    [ "$(grep -c 'store at 127.0.0.1:[0-9]*, from rank 0 through PMIx' "$TMP/out")" = 3 ] &&
        pass "every rank found the store through PMIx" ||
        { fail "the store was not found through PMIx"; sed 's/^/    /' "$TMP/out"; }
else
    expect_grep "$TMP/out" "from every rank on one host (Open MPI)" \
        "built without PMIx: the ranks are on one host"
fi
finish
