#!/bin/sh
# Builds this tree and packs what tests/gpu/run.sh needs into gpu-pack/ at
# the repository root (ignored by git), for a lent GPU machine that has
# CUDA, NCCL and PyTorch but no UCX, Gloo or hwloc and can install nothing:
#   tests/gpu/pack.sh [BUILD_DIR]      (default: $TMPDIR/dd-gpu-pack-build)
# then carry gpu-pack with the working tree and run there, from the root:
#   tests/gpu/run.sh gpu-pack
# The pack mirrors a build tree: .libs/ (libdreamddp and its modules),
# tools/ and tests/ (the programs, real ELF files, not libtool wrappers),
# lib/ (every shared library ldd names except glibc's and NVIDIA's:
# libcuda, libcudart, libnccl stay the machine's), lib/ucx/ (UCX's
# transport modules, found through UCX_MODULE_DIR), lib/hwloc/ (hwloc's
# PCI plugin, through HWLOC_PLUGINS_PATH), lib/fallback/
# (libstdc++ and libgcc_s, used only where the machine's are too old) and
# PACKED (what was packed, from which commit). It must stay under 64 MiB.
set -eu
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-${TMPDIR:-/tmp}/dd-gpu-pack-build}
pack=$here/gpu-pack
limit=$((64 * 1024 * 1024))

mkdir -p "$build"
build=$(cd "$build" && pwd)
if [ ! -f "$build/Makefile" ]; then
    [ -x "$here/configure" ] || (cd "$here" && ./autogen.sh >/dev/null)
    (cd "$build" && "$here/configure" -q)
fi
make -C "$build" -j2 all tests/mp/mp_device tests/mp/mp_coll tests/mp/mp_delay >"$build/pack-make.log" 2>&1 || {
    echo "pack: build failed (see $build/pack-make.log)" >&2
    exit 1
}
make -C "$build" tests/mp/mp_nccl >>"$build/pack-make.log" 2>&1 || true

is_elf() { [ "$(head -c 4 "$1" 2>/dev/null | tail -c 3)" = ELF ]; }

# real PROGRAM: the ELF file of a program libtool may have wrapped.
real() {
    for c in "$(dirname "$1")/.libs/$(basename "$1")" \
        "$(dirname "$1")/.libs/lt-$(basename "$1")" "$1"; do
        if [ -f "$c" ] && is_elf "$c"; then
            echo "$c"
            return 0
        fi
    done
    return 1
}

rm -rf "$pack"
mkdir -p "$pack/.libs" "$pack/tools" "$pack/tests/mp" "$pack/lib/ucx" "$pack/lib/fallback"
cp -L "$build/.libs/libdreamddp.so.1" "$pack/.libs/"
for m in "$build"/.libs/dd_backend_*.so "$build"/.libs/dd_device_*.so; do
    cp -L "$m" "$pack/.libs/"
done
for p in tools/ddrun tools/ddtopo tools/ddagg tools/ddbench tests/mp/mp_device tests/mp/mp_delay \
    tests/mp/mp_coll tests/mp/mp_nccl; do
    if [ -e "$build/$p" ]; then
        r=$(real "$build/$p") || { echo "pack: no ELF file for $p" >&2; exit 1; }
        cp "$r" "$pack/$p"
    fi
done

# The libraries ldd names for FILE that the GPU machine lacks (or may).
system_lib() {
    case $1 in
    linux-vdso* | ld-linux* | libc.so* | libm.so* | libdl.so* | libpthread.so* | \
        librt.so* | libutil.so* | libresolv.so*) return 0 ;;
    libcuda.so* | libcudart.so* | libnccl.so* | libnvidia-*) return 0 ;;
    esac
    return 1
}
deps() {
    LD_LIBRARY_PATH="$pack/.libs:$pack/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" \
        ldd "$1" 2>/dev/null | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
}
take() {
    deps "$1" | while read -r name path; do
        system_lib "$name" && continue
        case $path in "$pack"/*) continue ;; esac
        case $name in
        libstdc++.so* | libgcc_s.so*) dst=$pack/lib/fallback ;;
        *) dst=$pack/lib ;;
        esac
        [ -e "$dst/$name" ] || cp -L "$path" "$dst/$name"
    done
}
for f in "$pack"/.libs/* "$pack"/tools/* "$pack"/tests/*; do
    take "$f"
done

# UCX's transport modules sit beside libucs, in ucx/.
ucs=$(ldd "$build/.libs/dd_backend_ucx.so" 2>/dev/null | awk '$1 ~ /^libucs\.so/ {print $3}')
if [ -n "$ucs" ]; then
    for m in "$(dirname "$ucs")"/ucx/lib*.so; do
        [ -e "$m" ] || continue
        so=$(basename "$m")
        # UCX opens lib<framework>_<name> with libucs's own suffix (.so.0).
        [ -e "$pack/lib/ucx/$so.0" ] || cp -L "$m" "$pack/lib/ucx/$so.0"
        take "$m"
    done
fi

# hwloc finds PCI devices (NICs, GPUs) through its pci plugin, which it
# dlopens from its own directory: pack that one (HWLOC_PLUGINS_PATH), not
# the GL, OpenCL or libxml ones and their large dependencies.
hwloc=$(ldd "$build/.libs/libdreamddp.so.1" 2>/dev/null | awk '$1 ~ /^libhwloc\.so/ {print $3}')
if [ -n "$hwloc" ] && [ -e "$(dirname "$hwloc")/hwloc/hwloc_pci.so" ]; then
    mkdir -p "$pack/lib/hwloc"
    cp -L "$(dirname "$hwloc")/hwloc/hwloc_pci.so" "$pack/lib/hwloc/"
    take "$pack/lib/hwloc/hwloc_pci.so"
fi

{
    echo "packed by tests/gpu/pack.sh on $(date -u +%Y-%m-%dT%H:%MZ)"
    echo "commit $(git -C "$here" rev-parse HEAD 2>/dev/null || echo unknown)$(git -C "$here" diff --quiet 2>/dev/null || echo ' (with uncommitted changes)')"
    echo "build $build"
} >"$pack/PACKED"
size=$(du -sb "$pack" | cut -f1)
echo "pack: $pack: $(find "$pack" -type f | wc -l) files, $((size / 1024)) KiB"
if [ "$size" -ge "$limit" ]; then
    echo "pack: $((size / 1024 / 1024)) MiB is over the 64 MiB a device run carries" >&2
    exit 1
fi
