#!/bin/sh
# doc/running.md's multi-machine recipes on two emulated hosts
# (bench/recipes.sh: torchrun's, Slurm's and Open MPI's variables, each
# recipe's own command line, and workers on one host with CPU aggregators on
# the other): every recipe runs, the three launchers' runs of the tutorial
# script reach the same loss, and the run with aggregators the loss of two
# workers. Needs root and netcluster; it takes netcluster's lock, brings
# hosts up and down, so it runs only when DDTEST_NETCLUSTER=1 says so.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
NC=${NETCLUSTER:-/work/shared/tools/netcluster}
: "${DDTEST_PYTHON:=/usr/bin/python3}"

if [ "$(id -u)" != 0 ]; then
    echo "SKIP: needs root to create network namespaces"; exit 77
fi
if [ ! -x "$NC" ] || ! command -v ip >/dev/null || ! command -v tc >/dev/null; then
    echo "SKIP: netcluster ($NC), ip or tc unavailable"; exit 77
fi
if [ "${DDTEST_NETCLUSTER:-}" != 1 ]; then
    echo "SKIP: set DDTEST_NETCLUSTER=1 to let this test use netcluster"
    exit 77
fi
if [ ! -f "$top_srcdir/bench/recipes.sh" ]; then
    echo "SKIP: no bench/recipes.sh (a release tarball ships no bench/)"; exit 77
fi
if ! "$DDTEST_PYTHON" -c 'import torch' >/dev/null 2>&1; then
    echo "SKIP: $DDTEST_PYTHON cannot import torch"; exit 77
fi

NETCLUSTER=$NC BUILDDIR=$top_builddir RESULTS=$TMP TORCH_PYTHON=$DDTEST_PYTHON \
    timeout 400 sh "$top_srcdir/bench/recipes.sh" >"$TMP/out" 2>&1 ||
    fail "bench/recipes.sh exited $?"
for r in torchrun slurm mpirun mpirun-c workers-and-aggregators \
    workers-and-aggregators-c; do
    expect_grep "$TMP/out" "recipe $r: ok: " "recipe $r ran"
done
loss() { sed -n "s/^recipe $1: ok: epoch 1: loss \([0-9.]*\) .*/\1/p" "$TMP/out"; }
t=$(loss torchrun)
if [ -n "$t" ] && [ "$t" = "$(loss slurm)" ] && [ "$t" = "$(loss mpirun)" ]; then
    pass "torchrun's, Slurm's and Open MPI's runs reach one loss, $t"
else
    fail "losses differ: torchrun '$t', slurm '$(loss slurm)', mpirun '$(loss mpirun)'"
fi
# 2 workers and 2 aggregators against 2 workers alone, on one host.
PYTHONPATH="$top_srcdir/python" DREAMDDP_LIBRARY="$top_builddir/.libs/libdreamddp.so.1" \
    OMP_NUM_THREADS=1 "$DDRUN" -n 2 --timeout 120 -- "$DDTEST_PYTHON" \
    "$top_srcdir/examples/torch_ddp_tutorial.py" --strategy ddp >"$TMP/two" 2>&1 ||
    fail "ddrun -n 2 exited $?"
two=$(sed -n 's/^0: epoch 1: loss \([0-9.]*\) .*/\1/p' "$TMP/two")
if [ -n "$two" ] && [ "$two" = "$(loss workers-and-aggregators)" ]; then
    pass "workers and aggregators on two hosts reach ddrun -n 2's loss, $two"
else
    fail "with aggregators '$(loss workers-and-aggregators)', ddrun -n 2 '$two'"
fi
finish
