#!/bin/sh
# pip, as a PyTorch user installs: (1) a venv over the Python that has
# torch, pip install --no-build-isolation of this source (from the copy
# make distdir writes, as a make dist tarball unpacks), which builds the
# library, its modules and the tools with this project's build; then, from
# another directory and with no variable pointing into the build tree,
# import dreamddp.torch, the report, and a two-rank run of
# examples/torch_gpt.py through the venv's ddrun. (2) pip install ./python,
# the package alone, beside a make install (staged under a DESTDIR, found
# by pkg-config with the DESTDIR as its sysroot), and a two-rank run of
# the example through the installed ddrun. Long: the pip build compiles
# the whole library.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
py=${DDTEST_PYTHON:-/usr/bin/python3}
"$py" -c 'import torch' 2>/dev/null || { echo "SKIP: $py cannot import torch"; exit 77; }
"$py" -m venv --help >/dev/null 2>&1 || { echo "SKIP: $py has no venv module (python3-venv)"; exit 77; }
"$py" -m pip --version >/dev/null 2>&1 || { echo "SKIP: $py has no pip (python3-pip)"; exit 77; }
"$py" -c 'import setuptools' 2>/dev/null || { echo "SKIP: $py has no setuptools (python3-setuptools)"; exit 77; }
[ -f "$top_builddir/Makefile" ] || { echo "SKIP: no configured build tree at $top_builddir"; exit 77; }
if ldd "$top_builddir/.libs/libdreamddp.so.1" 2>/dev/null | grep -q 'lib[atl]san'; then
    # Python would have to preload the sanitizer runtime (as torch_lib.sh).
    echo "SKIP: this build's libdreamddp is built with sanitizers; Python cannot load it"
    exit 77
fi

# Build options: a bad name or value stops setup.py before it builds,
# naming the variable and what it accepts.
for bad in DREAMDDP_WITHOUT_UCX=maybe DREAMDDP_WITH_NCCL=relative/dir DREAMDDP_WITH_FOO=1 \
    "DREAMDDP_WITH_GLOO=1 DREAMDDP_WITHOUT_GLOO=1"; do
    # shellcheck disable=SC2086
    out=$(cd "$TMP" && env $bad "$py" "$top_srcdir/setup.py" --version 2>&1)
    rc=$?
    if [ $rc -ne 0 ] && printf '%s' "$out" | tail -n 1 | grep -q "^${bad%%=*}.*accepted"; then
        pass "$bad refused: $(printf '%s' "$out" | tail -n 1)"
    else
        fail "$bad: setup.py exited $rc: $out"
    fi
done

unset DREAMDDP_BACKEND_PATH PYTHONPATH DREAMDDP_LIBRARY LD_LIBRARY_PATH DREAMDDP_RANK DREAMDDP_WORLD_SIZE
export OMP_NUM_THREADS=1
gpt_args="--iters 6 --eval-every 3 --layers 1 --width 32 --heads 2 --context 16 --batch 2 --val-batches 1"
mkdir -p "$TMP/elsewhere"
cp "$top_srcdir/examples/torch_gpt.py" "$TMP/elsewhere/"

# gpt WHAT DDRUN PYTHON: two ranks of the example from $TMP/elsewhere.
gpt() {
    (cd "$TMP/elsewhere" && "$2" -n 2 --timeout 120 -- "$3" torch_gpt.py $gpt_args) >"$TMP/gpt" 2>&1
    rc=$?
    if [ $rc -eq 0 ] && grep -q '^0: {"event": "done", "mode": "ddp", "world": 2, "iters": 6' "$TMP/gpt"; then
        pass "$1: two ranks of examples/torch_gpt.py"
    else
        fail "$1: two ranks of examples/torch_gpt.py exited $rc:"
        tail -n 20 "$TMP/gpt" | sed 's/^/    /'
    fi
}

# (1) pip install . into a venv.
make -s -C "$top_builddir" distdir distdir="$TMP/src" >"$TMP/distdir" 2>&1 || { cat "$TMP/distdir"; fail "make distdir"; finish; }
"$py" -m venv --system-site-packages "$TMP/v" || { fail "python3 -m venv"; finish; }
start=$(date +%s)
# Without NCCL and CUDA (nvcc's kernels are the slowest part), which also
# shows the options reaching configure.
DREAMDDP_WITHOUT_NCCL=1 DREAMDDP_WITH_CUDA=no MAKEFLAGS=-j2 \
    "$TMP/v/bin/pip" install -v --no-build-isolation --no-cache-dir "$TMP/src" >"$TMP/pip" 2>&1
rc=$?
echo "pip install --no-build-isolation took $(($(date +%s) - start)) s"
if [ $rc -eq 0 ]; then
    pass "pip install --no-build-isolation (source of make distdir)"
else
    fail "pip install exited $rc:"
    tail -n 30 "$TMP/pip" | sed 's/^/    /'
    finish
fi
grep -q -- "--without-nccl --without-cuda" "$TMP/pip" &&
    pass "DREAMDDP_WITHOUT_NCCL=1 DREAMDDP_WITH_CUDA=no: configure ran with --without-nccl --without-cuda" ||
    fail "the build options did not reach configure: $(grep 'dreamddp build: .*configure' "$TMP/pip")"
site=$("$TMP/v/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
out=$(cd "$TMP/elsewhere" && "$TMP/v/bin/python" -c 'import dreamddp, dreamddp.torch; print(dreamddp.__file__, dreamddp.version())' 2>&1)
[ "$out" = "$site/dreamddp/__init__.py $(cd "$top_srcdir" && sh config/version.sh)" ] &&
    pass "import dreamddp.torch from the venv: $out" || fail "import dreamddp.torch from the venv: $out"
(cd "$TMP/elsewhere" && "$TMP/v/bin/python" -m dreamddp.report) >"$TMP/report" 2>&1
expect_grep "$TMP/report" "library path           $site/dreamddp/_native/lib/libdreamddp.so.1 (found by the installed libdir)" "the report: the package's own library"
expect_grep "$TMP/report" "versions match         yes" "the report: versions match"
if [ -f "$top_builddir/.libs/dd_backend_gloo.so" ]; then
    expect_grep "$TMP/report" "gloo: loads ($site/dreamddp/_native/lib/dd_backend_gloo.so)" "the report: the package's gloo module loads"
fi
ls "$site"/dreamddp/_native/lib/dd_backend_nccl.so >/dev/null 2>&1 && fail "an NCCL module was built with DREAMDDP_WITHOUT_NCCL=1"
for tool in ddrun ddtopo ddagg ddbench; do
    out=$("$TMP/v/bin/$tool" --version 2>&1)
    [ "$out" = "$tool (dreamddp) $(cd "$top_srcdir" && sh config/version.sh)" ] && pass "venv's $out" || fail "venv's $tool --version: $out"
done
gpt "pip install ., the venv's ddrun" "$TMP/v/bin/ddrun" "$TMP/v/bin/python"

# (2) make install (staged), then pip install ./python.
stage="$TMP/stage"
make -s -C "$top_builddir" install DESTDIR="$stage" >"$TMP/install" 2>&1 || { tail "$TMP/install"; fail "make install DESTDIR"; finish; }
pc=$(find "$stage" -name dreamddp.pc | head -n 1)
export PKG_CONFIG_PATH="${pc%/*}" PKG_CONFIG_SYSROOT_DIR="$stage"
libdir=$(pkg-config --variable=libdir dreamddp 2>/dev/null)
if [ ! -f "$libdir/libdreamddp.so.1" ]; then
    echo "pkg-config does not apply PKG_CONFIG_SYSROOT_DIR to --variable (pkgconf does): pip install ./python not tried"
else
    "$py" -m venv --system-site-packages "$TMP/w" || fail "python3 -m venv"
    "$TMP/w/bin/pip" install --no-build-isolation --no-cache-dir "$TMP/src/python" >"$TMP/pip2" 2>&1 &&
        pass "pip install ./python" || { fail "pip install ./python:"; tail -n 20 "$TMP/pip2" | sed 's/^/    /'; }
    out=$(cd "$TMP/elsewhere" && "$TMP/w/bin/python" -m dreamddp.report 2>&1 | sed -n 's/^library path  *//p')
    case $out in "$libdir/libdreamddp.so"*"(found by pkg-config's libdir)") pass "pip install ./python finds the installed library by pkg-config: $out" ;;
        *) fail "pip install ./python: library path '$out'" ;; esac
    # Staged: the library's compiled-in module directory is the final one.
    DREAMDDP_BACKEND_PATH=$(pkg-config --variable=pkglibdir dreamddp)
    LD_LIBRARY_PATH=$libdir
    export DREAMDDP_BACKEND_PATH LD_LIBRARY_PATH
    gpt "pip install ./python beside make install, the installed ddrun" "$(dirname "$libdir")/bin/ddrun" "$TMP/w/bin/python"
fi
finish
