#!/bin/sh
# doc/config.md's configuration table is the one the library prints.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

"$top_builddir/tests/tools/print_config" >"$TMP/generated" || fail "print_config failed"
sed -n '/<!-- config-table:begin -->/,/<!-- config-table:end -->/p' "$top_srcdir/doc/config.md" |
    sed '1d;$d' >"$TMP/doc"
if [ ! -s "$TMP/doc" ]; then
    fail "doc/config.md has no config-table section"
elif cmp -s "$TMP/generated" "$TMP/doc"; then
    pass "doc/config.md configuration table matches the library ($(grep -c '^| `DREAMDDP_' "$TMP/generated") variables)"
else
    fail "doc/config.md configuration table differs; regenerate it with: tests/tools/print_config"
    diff "$TMP/doc" "$TMP/generated"
fi
finish
