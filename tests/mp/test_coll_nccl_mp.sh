#!/bin/sh
# The NCCL module on CUDA memory through ddrun, one rank per GPU (at most
# 4). Skips (77) where the module was not built or there is no GPU; where
# NCCL cannot run, checks that the registry says why.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/mp/coll_lib.sh"
coll_require nccl
MPN=$top_builddir/tests/mp/mp_nccl
gpus=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')
if [ "${gpus:-0}" -eq 0 ]; then
    # No GPU: the module must say so at info level, and the rest still works.
    if DREAMDDP_LOG_LEVEL=info DREAMDDP_TIMEOUT_S=20 "$DDRUN" -n 1 --timeout 60 -- \
        "$MP" --sizes 7 >"$TMP/nogpu" 2>&1; then
        expect_grep "$TMP/nogpu" "backend nccl is unavailable: " \
            "nccl: says why it is unavailable without a GPU"
        # Without NVIDIA's driver the module is not even loaded.
        if [ ! -e /dev/nvidiactl ] && [ ! -e /proc/driver/nvidia/version ]; then
            expect_grep "$TMP/nogpu" "backend nccl is unavailable: no NVIDIA driver (no /dev/nvidiactl)" \
                "nccl: not loaded without NVIDIA's driver"
        fi
    else
        fail "nccl: the other backends without a GPU"; cat "$TMP/nogpu"
    fi
    [ "$failures" -ne 0 ] && finish
    echo "SKIP: no GPU on this machine (nvidia-smi lists none); run tests/gpu/run.sh where one is"
    exit 77
fi
[ "$gpus" -gt 4 ] && gpus=4
for n in $(seq 1 "$gpus"); do
    if DREAMDDP_BACKENDS=nccl DREAMDDP_TIMEOUT_S=60 "$DDRUN" -n "$n" --timeout 170 -- \
        "$MPN" >"$TMP/nccl.$n" 2>&1; then
        expect_grep "$TMP/nccl.$n" "mp_nccl: nccl: " "nccl: collectives correct on $n ranks"
    else
        fail "nccl: collectives on $n ranks"; cat "$TMP/nccl.$n"
    fi
done
finish
