#!/bin/sh
# Runs the tests that need a GPU, from a configured and built tree:
#   tests/gpu/run.sh [BUILD_DIR]
# It builds the test programs, then runs the NCCL module's test (world size
# 1 up to the number of GPUs, at most 4) and prints its log.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:-$here}" && pwd)
make -C "$build" -j"$(nproc)" all tests/mp_coll tests/mp_nccl >/dev/null
export top_srcdir="$here" top_builddir="$build" DDRUN="$build/tools/ddrun"
export DREAMDDP_BACKEND_PATH="$build/.libs"
nvidia-smi -L || true
sh "$here/tests/test_coll_nccl.sh"
