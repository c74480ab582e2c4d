#!/bin/sh
# make installcheck: what was installed (under DESTDIR when staged) works on
# its own. A program built with the installed header and pkg-config file
# runs as one rank, then as two ranks through the installed ddrun with the
# installed backend modules (the .pc's pkglibdir); the installed tools
# answer --version; man finds every page. The Python package, when
# configure found a Python: every module of the source directory is
# installed, `import dreamddp.torch` works from outside the source tree, and
# (where that Python has torch) a two-rank PyTorch loop runs through the
# installed ddrun with the installed package, library and modules only.
# Run by installcheck-local with DESTDIR, prefix, bindir, libdir, mandir,
# CC, PKG_CONFIG, PACKAGE_VERSION, PYTHON, ddpythondir and dd_have_python in
# the environment, and the source directory as $1.
set -u
srcdir=$1
stage=${DESTDIR:-}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dd-installcheck.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
failures=0
fail() { echo "installcheck: FAIL: $*"; failures=$((failures + 1)); }
pass() { echo "installcheck: ok: $*"; }

PKG_CONFIG_PATH="$stage$libdir/pkgconfig"
export PKG_CONFIG_PATH
pc() { "$PKG_CONFIG" --define-variable=prefix="$stage$prefix" "$@" dreamddp; }
[ "$(pc --modversion)" = "$PACKAGE_VERSION" ] && pass "pkg-config --modversion is $PACKAGE_VERSION" || fail "pkg-config --modversion: $(pc --modversion 2>&1)"
modules=$(pc --variable=pkglibdir)
if ls "$modules"/dd_backend_*.so >/dev/null 2>&1; then
    pass "backend modules in the .pc's pkglibdir"
    have_modules=1
else
    echo "installcheck: skip: no dd_backend_*.so in $modules (configure found no backend), so no two-rank job"
    have_modules=0
fi

# shellcheck disable=SC2046
if $CC -std=c99 -Wall -Werror -o "$tmp/installcheck" "$srcdir/tests/tools/installcheck.c" $(pc --cflags --libs); then
    pass "built against the installed header and dreamddp.pc"
else
    fail "cannot build against the installed header and dreamddp.pc"
    exit 1
fi

# The staged library and modules, not the build tree's.
LD_LIBRARY_PATH="$stage$libdir"
DREAMDDP_BACKEND_PATH=$modules
export LD_LIBRARY_PATH DREAMDDP_BACKEND_PATH
unset DREAMDDP_RANK DREAMDDP_WORLD_SIZE DREAMDDP_MASTER_ADDR DREAMDDP_MASTER_PORT \
    RANK WORLD_SIZE MASTER_ADDR MASTER_PORT
"$tmp/installcheck" >"$tmp/one" 2>&1 && pass "one rank: $(cat "$tmp/one")" || { fail "one rank:"; cat "$tmp/one"; }

if [ $have_modules = 1 ]; then
    "$stage$bindir/ddrun" -n 2 --timeout 120 -- "$tmp/installcheck" >"$tmp/two" 2>&1
    rc=$?
    backend=$(sed -n 's/^0: installcheck: rank 0 of 2: allreduce through backend \(.*\)$/\1/p' "$tmp/two")
    if [ $rc -eq 0 ] && grep -q "^1: installcheck: rank 1 of 2: allreduce" "$tmp/two" &&
        [ -n "$backend" ] && [ -f "$modules/dd_backend_$backend.so" ]; then
        pass "two ranks through the installed ddrun, allreduce through the installed $backend module"
    else
        fail "two ranks through the installed ddrun exited $rc:"
        sed 's/^/    /' "$tmp/two"
    fi
fi

# The Python package, from the installed prefix only: run from $tmp, with
# no path into the build or source tree. PYTHONPATH names the installed
# site directory (not on sys.path for every prefix); under a DESTDIR the
# installed _config.py names the final libdir, so DREAMDDP_LIBRARY names
# the staged library.
if [ "${dd_have_python:-no}" = yes ]; then
    pydir="$stage$ddpythondir/dreamddp"
    for f in "$srcdir"/python/dreamddp/*.py; do
        [ -f "$pydir/${f##*/}" ] || fail "python/dreamddp/${f##*/} is not installed in $pydir (dd_python_files in Makefile.am)"
    done
    [ -f "$pydir/_config.py" ] || fail "$pydir/_config.py (written by make install) is absent"
    PYTHONPATH="$stage$ddpythondir"
    export PYTHONPATH
    if [ -n "$stage" ]; then DREAMDDP_LIBRARY="$stage$libdir/libdreamddp.so.1"; export DREAMDDP_LIBRARY; else unset DREAMDDP_LIBRARY; fi
    unset DREAMDDP_RANK DREAMDDP_WORLD_SIZE
    if out=$(cd "$tmp" && "$PYTHON" -c 'import dreamddp, dreamddp.torch; print(dreamddp.__file__, dreamddp.version())' 2>&1); then
        case $out in
        "$pydir/__init__.py $PACKAGE_VERSION") pass "import dreamddp.torch from $pydir, library $PACKAGE_VERSION" ;;
        *) fail "import dreamddp.torch took another package or library: $out (expected $pydir/__init__.py $PACKAGE_VERSION)" ;;
        esac
    elif printf '%s\n' "$out" | grep -q "No module named 'torch'"; then
        "$PYTHON" -c 'import dreamddp' && pass "import dreamddp (no torch in $PYTHON: dreamddp.torch not tried)" || fail "import dreamddp"
    else
        fail "import dreamddp.torch from the installed package: $out"
    fi
    if ! "$PYTHON" -c 'import torch' >/dev/null 2>&1; then
        echo "installcheck: skip: $PYTHON has no torch, so no PyTorch loop"
    elif [ $have_modules = 1 ]; then
        cp "$srcdir/tests/tools/installcheck_torch.py" "$tmp/loop.py"
        (cd "$tmp" && "$stage$bindir/ddrun" -n 2 --timeout 120 -- "$PYTHON" loop.py) >"$tmp/torch" 2>&1
        rc=$?
        p0=$(sed -n 's/^0: installcheck_torch: rank 0 of 2: moved True params //p' "$tmp/torch")
        p1=$(sed -n 's/^1: installcheck_torch: rank 1 of 2: moved True params //p' "$tmp/torch")
        n=$(grep -c "^[01]: installcheck_torch: rank [01] of 2: package $pydir/__init__.py\$" "$tmp/torch")
        if [ $rc -eq 0 ] && [ -n "$p0" ] && [ "$p0" = "$p1" ] && [ "$n" = 2 ]; then
            pass "two-rank PyTorch loop through the installed ddrun: both ranks' parameters moved and agree"
        else
            fail "two-rank PyTorch loop through the installed ddrun exited $rc (parameters '$p0' and '$p1', $n ranks on $pydir):"
            sed 's/^/    /' "$tmp/torch"
        fi
    fi
    unset PYTHONPATH DREAMDDP_LIBRARY
fi

for tool in ddrun ddtopo ddagg ddbench; do
    out=$("$stage$bindir/$tool" --version 2>&1)
    [ "$out" = "$tool (dreamddp) $PACKAGE_VERSION" ] && pass "installed $out" || fail "installed $tool --version: '$out'"
done

for page in ddrun.1 ddtopo.1 ddagg.1 ddbench.1 libdreamddp.3; do
    sec=${page##*.}
    file="$stage$mandir/man$sec/$page"
    if [ ! -f "$file" ]; then
        fail "$file is not installed"
    elif ! command -v man >/dev/null 2>&1; then
        pass "$file installed (no man to look it up)"
    elif [ "$(man -M "$stage$mandir" -w "$sec" "${page%.*}" 2>/dev/null)" = "$file" ]; then
        pass "man -M $stage$mandir $sec ${page%.*} finds $file"
    else
        fail "man -M $stage$mandir -w $sec ${page%.*}: $(man -M "$stage$mandir" -w "$sec" "${page%.*}" 2>&1)"
    fi
done

[ $failures -eq 0 ] || { echo "installcheck: $failures check(s) failed"; exit 1; }
echo "installcheck: OK"
