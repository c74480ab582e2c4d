#!/bin/sh
# Every module of the Python package (python/dreamddp/*.py in the source
# directory) is in Makefile.am's dd_python_files, the list that make install
# installs and make dist ships: a module left out installs a package whose
# imports fail (import dreamddp.torch needs every module torch.py imports).
# Reads the directory, not git, so it runs from a make dist tarball too; the
# generated Makefile is checked as well, when there is one.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

# The words of a make variable's assignment (with its continuation lines).
make_list() {
    awk -v name="$2" '
        !go && $1 == name && ($2 == "=" || $2 == ":=") { go = 1; sub(/^[^=]*=/, "") }
        go { cont = sub(/\\$/, ""); print; if (!cont) exit }' "$1" | tr -s ' \t' '\n\n' | sed '/^$/d'
}

make_list "$top_srcdir/Makefile.am" dd_python_files >"$TMP/listed"
[ -s "$TMP/listed" ] && pass "Makefile.am lists $(wc -l <"$TMP/listed") python files" ||
    fail "no dd_python_files in $top_srcdir/Makefile.am"
n=0
for f in "$top_srcdir"/python/dreamddp/*.py; do
    rel=python/dreamddp/${f##*/}
    n=$((n + 1))
    grep -qxF "$rel" "$TMP/listed" && pass "$rel is in dd_python_files" ||
        fail "$rel is not in Makefile.am's dd_python_files: make install and make dist would leave it out"
done
[ $n -gt 0 ] || fail "no python/dreamddp/*.py under $top_srcdir"
while read -r rel; do
    [ -f "$top_srcdir/$rel" ] || fail "dd_python_files lists $rel, which is not in $top_srcdir"
done <"$TMP/listed"
if [ -f "$top_builddir/Makefile" ]; then
    make_list "$top_builddir/Makefile" dd_python_files >"$TMP/made"
    cmp -s "$TMP/listed" "$TMP/made" && pass "the generated Makefile has the same list" ||
        fail "$top_builddir/Makefile's dd_python_files differs from Makefile.am's (rerun autogen.sh/configure)"
fi
finish
