#!/bin/sh
# make installcheck: what was installed (under DESTDIR when staged) works on
# its own. A program built with the installed header and pkg-config file
# runs as one rank, then as two ranks through the installed ddrun with the
# installed backend modules (the .pc's pkglibdir); the installed tools
# answer --version; man finds every page. Run by installcheck-local with
# DESTDIR, prefix, bindir, libdir, mandir, CC, PKG_CONFIG and
# PACKAGE_VERSION in the environment, and the source directory as $1.
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
