#!/bin/sh
# The README's configuration table is the one the library prints.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

"$top_builddir/tests/print_config" >"$TMP/generated" || fail "print_config failed"
sed -n '/<!-- config-table:begin -->/,/<!-- config-table:end -->/p' "$top_srcdir/README.md" |
    sed '1d;$d' >"$TMP/readme"
if [ ! -s "$TMP/readme" ]; then
    fail "README.md has no config-table section"
elif cmp -s "$TMP/generated" "$TMP/readme"; then
    pass "README configuration table matches the library ($(grep -c '^| `DREAMDDP_' "$TMP/generated") variables)"
else
    fail "README configuration table differs; regenerate it with: tests/print_config"
    diff "$TMP/readme" "$TMP/generated"
fi
finish
