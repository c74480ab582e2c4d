#!/bin/sh
# The checks that need a GPU, in one run of at most 8 minutes (each check
# has its own timeout), from a configured and built tree or from the pack
# that tests/gpu/pack.sh made:
#   tests/gpu/run.sh [BUILD_DIR]
# On the lent GPU machine (no UCX, Gloo or hwloc there, nothing to build
# with): run tests/gpu/pack.sh here, carry gpu-pack with the working tree,
# and run there, from the repository root, the one command
#   tests/gpu/run.sh gpu-pack
# (a pack sets its own LD_LIBRARY_PATH, UCX_MODULE_DIR and
# HWLOC_PLUGINS_PATH; its PACKED file says from which commit it was built).
# It prints one line per check (ok:, FAIL: or SKIP:, with its figures) and
# exits 0 when all pass, 1 when one fails, 77 with the reason where no GPU
# is visible. The programs are plain C: device memory comes from the cuda
# device module (dd_device_cuda.so, which dlopens the CUDA runtime), and
# only mp_nccl, built where configure found NCCL, links CUDA.
#   1. the cuda module's query and devices, as dd_init sees them (ddtopo)
#   2. staging bandwidth: a staged step of a 100 MiB device layer against a
#      plain pinned copy of the same bytes there and back (>= 0.8x)
#   3. 2 workers on one GPU + 2 aggregators average a 100 MiB layer
#      bit-exactly (UCX, staging)
#   3b. the hierarchical route: 2 workers on one GPU sum through CUDA IPC,
#      the leader through 2 aggregators, the average back through IPC
#      (ddp and dreamddp:2 on the test's layers, and the 100 MiB layer),
#      and without aggregators (IPC alone, one host)
#   4. device layers under every strategy, 2 workers on one GPU (UCX)
#   5. a device layer passed to NCCL as it is (one rank)
#   6. NCCL's collectives on a communicator of one rank (mp_nccl)
#   6b. the cuda module's device sum (reduce_async, the PTX kernels) of
#      every dtype, exact, and its speed on 100 MiB
#   6c. delayed averaging (+next) of device layers, 2 workers on one GPU:
#      replicas equal to the reference after every step (mp_delay)
#   7. the PyTorch front end on CUDA tensors (tests/gpu/torch_gpu.py), 2
#      ranks on one GPU (UCX, staging) under ddp, dreamddp:4 and
#      dreamddp:2+next: replicas equal after every averaging (after
#      sync_all under +next), ddp's gradients equal to a single-process
#      reference; skipped without torch or torch.cuda
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$here}" && pwd)
if [ -f "$build/PACKED" ]; then
    # A pack: nothing to build; its libraries before the machine's, and
    # libstdc++ from it only where the machine's is too old for Gloo's.
    lib=$build/.libs:$build/lib
    if LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        ldd "$build/.libs/dd_backend_gloo.so" 2>&1 | grep -q 'GLIBCXX.*not found'; then
        lib=$lib:$build/lib/fallback
    fi
    export LD_LIBRARY_PATH="$lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    export UCX_MODULE_DIR="$build/lib/ucx" HWLOC_PLUGINS_PATH="$build/lib/hwloc"
    missing=$(for f in "$build"/.libs/*.so "$build"/tools/* "$build"/tests/mp/*; do
        ldd "$f" 2>&1 | grep 'not found' | sed "s|^|$(basename "$f"): |"
    done | grep -v 'dd_backend_nccl\|dd_device_cuda\|mp_nccl' | sort -u | head -5)
    if [ -n "$missing" ]; then
        echo "FAIL: the pack cannot load here: $(echo "$missing" | tr '\n' ' ')"
        exit 1
    fi
    echo "ok: pack: $(sed -n 2p "$build/PACKED")"
elif ! make -C "$build" -j"$(nproc)" all tests/mp/mp_coll tests/mp/mp_device tests/mp/mp_delay \
    >"${TMPDIR:-/tmp}/dd-gpu-build.log" 2>&1; then
    echo "FAIL: build (see ${TMPDIR:-/tmp}/dd-gpu-build.log)"
    exit 1
fi
have_nccl=0
[ -f "$build/PACKED" ] || make -C "$build" tests/mp/mp_nccl >/dev/null 2>&1
[ -x "$build/tests/mp/mp_nccl" ] && have_nccl=1
export top_srcdir="$here" top_builddir="$build" DDRUN="$build/tools/ddrun"
# mp_device checks the divergence each parameter sync measured, which the
# monitor does only when on (off by default since the train simulator's
# figures).
export DREAMDDP_BACKEND_PATH="$build/.libs" DREAMDDP_TIMEOUT_S=120 DREAMDDP_DRIFT=yes
unset DREAMDDP_BACKENDS DREAMDDP_NUM_AGGREGATORS DREAMDDP_ROUTE
MP=$build/tests/mp/mp_device
out=$(mktemp -d "${TMPDIR:-/tmp}/dd-gpu.XXXXXX")
trap 'rm -rf "$out"' EXIT
failures=0

# check NAME SECONDS EXPECTED CMD...: runs CMD with a timeout; ok when it
# exits 0 and prints EXPECTED, with the line that holds it.
check() {
    name=$1 secs=$2 want=$3
    shift 3
    if timeout -k 5 "$secs" "$@" >"$out/log" 2>&1 && grep -qF -- "$want" "$out/log"; then
        echo "ok: $name: $(grep -F -- "$want" "$out/log" | head -1 | sed 's/^[0-9]*: //')"
    else
        echo "FAIL: $name (exit $?): $(tail -3 "$out/log" | tr '\n' ' ')"
        failures=$((failures + 1))
    fi
}

# 1. The module's query, through the loader dd_init uses.
DREAMDDP_DEVICE=cuda timeout 60 "$build/tools/ddtopo" >"$out/topo" 2>&1
devices=$(sed -n '/^devices/,/^$/p' "$out/topo" | sed '/^$/d' | tr '\n' ' ')
if ! grep -q '^devices (DREAMDDP_DEVICE=cuda, loaded as dd_init does): cuda:' "$out/topo"; then
    echo "SKIP: no GPU visible: ${devices:-ddtopo failed: $(tail -1 "$out/topo")}"
    exit 77
fi
echo "ok: cuda module query: $devices"
export DREAMDDP_DEVICE=cuda

# 2. Staging bandwidth, one worker.
check "staging bandwidth vs plain pinned cudaMemcpy" 90 "mp_device: bandwidth:" \
    env DREAMDDP_BACKENDS=ucx "$DDRUN" -n 1 --timeout 80 -- "$MP" bandwidth

# 3. 100 MiB through two aggregators, two workers sharing the GPU.
check "2 workers on one GPU + 2 aggregators, 100 MiB layer, bit-exact" 180 \
    "mp_device: ddp: 2 steps bit-exact on 2 workers" \
    env DREAMDDP_BACKENDS=ucx DREAMDDP_NUM_AGGREGATORS=2 \
    "$DDRUN" -n 4 --timeout 170 -- "$MP" big 2

# 3b. The hierarchical route: the two workers share the host (and the
# GPU), so they sum through CUDA IPC and rank 0 alone pushes to the
# aggregators.
for s in ddp dreamddp:2; do
    check "hierarchical: 2 workers on one GPU through CUDA IPC + 2 aggregators, $s" 40 \
        "mp_device: $s: 4 steps bit-exact on 2 workers" \
        env DREAMDDP_BACKENDS=ucx DREAMDDP_NUM_AGGREGATORS=2 DREAMDDP_ROUTE=hierarchical \
        DREAMDDP_STAGING_BYTES=64K "$DDRUN" -n 4 --timeout 35 -- "$MP" $s 4
done
check "hierarchical without aggregators: 2 workers on one GPU through CUDA IPC alone, dreamddp:2" 40 \
    "mp_device: dreamddp:2: 4 steps bit-exact on 2 workers" \
    env DREAMDDP_BACKENDS=ucx DREAMDDP_ROUTE=hierarchical DREAMDDP_STAGING_BYTES=64K \
    "$DDRUN" -n 2 --timeout 35 -- "$MP" dreamddp:2 4
check "hierarchical: 2 workers on one GPU + 2 aggregators, 100 MiB layer, bit-exact" 120 \
    "mp_device: ddp: 2 steps bit-exact on 2 workers" \
    env DREAMDDP_BACKENDS=ucx DREAMDDP_NUM_AGGREGATORS=2 DREAMDDP_ROUTE=hierarchical \
    "$DDRUN" -n 4 --timeout 110 -- "$MP" big 2

# 4. Every strategy on device layers, with readiness on the stream.
for s in ddp localsgd:2 plsgd:2 dreamddp:2 adaptive; do
    check "device layers, $s, 2 workers on one GPU" 40 \
        "mp_device: $s: 4 steps bit-exact on 2 workers" \
        env DREAMDDP_BACKENDS=ucx DREAMDDP_STAGING_BYTES=64K \
        "$DDRUN" -n 2 --timeout 35 -- "$MP" $s 4
done

# 5 and 6. NCCL: device buffers as they are, and its own collectives.
if [ $have_nccl = 1 ]; then
    check "device layers through NCCL without staging, one rank" 40 \
        "mp_device: ddp: 4 steps bit-exact on 1 workers" \
        env DREAMDDP_BACKENDS=nccl,ucx "$DDRUN" -n 1 --timeout 35 -- "$MP" ddp 4
    check "NCCL one-rank allreduce (mp_nccl)" 60 "mp_nccl: nccl: " \
        env DREAMDDP_BACKENDS=nccl "$DDRUN" -n 1 --timeout 55 -- "$build/tests/mp/mp_nccl"
else
    echo "SKIP: NCCL: configure did not find it (no tests/mp/mp_nccl)"
fi

# 6b. The device sum's kernels, loaded through the driver.
check "device sum (reduce_async) of every dtype, 100 MiB speed" 60 \
    "mp_device: sum: every dtype exact" \
    "$DDRUN" -n 1 --timeout 55 -- "$MP" sum

# 6c. Delayed averaging of device layers: copies and sums on the
# application's stream, the difference taken on the host.
for marks in marks nomarks; do
    check "+next on device layers ($marks), 2 ranks on one GPU" 60 \
        "mp_delay: plsgd:1+next $marks: 7 steps equal to the reference on 2 ranks" \
        env MP_DELAY_DEVICE=stream DREAMDDP_PROFILE_STEPS=2 DREAMDDP_BACKENDS=ucx \
        "$DDRUN" -n 2 --timeout 55 -- "$build/tests/mp/mp_delay" plsgd:1+next 7 $marks
done

# 7. The PyTorch front end on CUDA tensors, two ranks sharing the GPU.
py=${DDTEST_PYTHON:-python3}
if ! why=$("$py" -c 'import torch; print(torch.__version__) if torch.cuda.is_available() else print("torch.cuda sees no GPU") or exit(1)' 2>&1); then
    echo "SKIP: PyTorch on the GPU: $py: $(echo "$why" | tail -1)"
else
    for s in ddp dreamddp:4 dreamddp:2+next; do
        check "PyTorch $why, CUDA tensors, $s, 2 ranks on one GPU" 90 \
            "torch_gpu: $s: " \
            env PYTHONPATH="$here/python${PYTHONPATH:+:$PYTHONPATH}" \
            DREAMDDP_LIBRARY="$build/.libs/libdreamddp.so.1" \
            DREAMDDP_BACKENDS=ucx DREAMDDP_STAGING_BYTES=64K OMP_NUM_THREADS=1 \
            "$DDRUN" -n 2 --timeout 80 -- "$py" "$here/tests/gpu/torch_gpu.py" $s 8
    done
fi

[ "$failures" -eq 0 ] || { echo "$failures check(s) failed"; exit 1; }
echo "all GPU checks passed"
