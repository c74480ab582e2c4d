# Helpers of the PyTorch front end's tests (test_torch.sh,
# test_torch_api.sh). Sourced after tests/lib.sh: skips (77) where the
# interpreter has no torch or the library cannot be loaded into it, points
# PYTHONPATH at this tree's package and DREAMDDP_LIBRARY at this build's
# library, and gives run().
: "${DDTEST_PYTHON:=/usr/bin/python3}"
if ! "$DDTEST_PYTHON" -c 'import torch' >"$TMP/import" 2>&1; then
    echo "SKIP: $DDTEST_PYTHON cannot import torch: $(tail -n 1 "$TMP/import")"
    exit 77
fi
PYTHONPATH="$top_srcdir/python${PYTHONPATH:+:$PYTHONPATH}"
: "${DREAMDDP_LIBRARY:=$top_builddir/.libs/libdreamddp.so.1}"
if ldd "$DREAMDDP_LIBRARY" 2>/dev/null | grep -q 'lib[atl]san'; then
    # The interpreter would have to preload the sanitizer runtime, and its
    # own leaks would then fail the run.
    echo "SKIP: $DREAMDDP_LIBRARY is built with sanitizers; Python cannot load it"
    exit 77
fi
export PYTHONPATH DREAMDDP_LIBRARY
export DREAMDDP_TIMEOUT_S=30 DREAMDDP_PROFILE_STEPS=3 DREAMDDP_ADAPTIVE_INTERVAL=2
# One thread a rank: the ranks share the machine's cores.
export OMP_NUM_THREADS=1
MP="$top_srcdir/tests/python/torch_mp.py"

# run NAME N ARGS...: N ranks of torch_mp.py ARGS under ddrun; every rank
# must print its success line.
run() {
    name=$1; n=$2; shift 2
    if "$DDRUN" -n "$n" --timeout 120 -- "$DDTEST_PYTHON" "$MP" "$@" >"$TMP/out" 2>&1 &&
       [ "$(grep -c '^[0-9]*: torch_mp: [^F]' "$TMP/out")" -eq "$n" ]; then
        pass "$name: $(grep -m1 'torch_mp: ' "$TMP/out" | sed 's/^[0-9]*: torch_mp: //')"
    else
        fail "$name"; sed 's/^/    /' "$TMP/out"
    fi
}

