#!/bin/sh
# Every tool answers --version with the library's version (the one
# include/dreamddp/version.h writes), and every man page carries it.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

version=$(cd "$top_srcdir" && sh config/version.sh) || fail "config/version.sh failed"
for tool in ddrun ddtopo ddagg ddbench; do
    out=$("$top_builddir/tools/$tool" --version 2>&1)
    rc=$?
    [ $rc -eq 0 ] && [ "$out" = "$tool (dreamddp) $version" ] &&
        pass "$tool --version: $out" || fail "$tool --version exited $rc: '$out', expected '$tool (dreamddp) $version'"
    out=$("$top_builddir/tools/$tool" -V 2>&1)
    [ "$out" = "$tool (dreamddp) $version" ] && pass "$tool -V" || fail "$tool -V: '$out'"
done
for page in doc/ddrun.1 doc/ddtopo.1 doc/ddagg.1 doc/ddbench.1 doc/libdreamddp.3; do
    # The title line, not the first: a page with tables starts with tbl's
    # preprocessor line ('\" t), as ddrun(1) does for its exit codes.
    th=$(grep -m 1 '^\.TH ' "$top_builddir/$page" 2>&1)
    if printf '%s\n' "$th" | grep -qF "\"dreamddp $version\""; then
        pass "$page has the version"
    else
        fail "$page: no .TH line with \"dreamddp $version\": '$th'"
    fi
done
finish
