#!/bin/sh
# The test suite's tiers and its self-containment. Every tests/**/test_*.sh
# is in exactly one of Makefile.am's quick_script_tests (make check) and
# long_script_tests (make check-long), and every name there is a script of
# the tree. No test reads a file outside the repository (a test that
# skipped without ../shared/profiles never ran for a user): the profiles
# the tests read are tests/fixtures/profiles, where DDTEST_PROFILES points.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"

# list NAME: the entries of Makefile.am's list NAME, one a line.
list() {
    sed -n "/^$1 = \\\\\$/,/[^\\\\]\$/p" "$top_srcdir/Makefile.am" |
        sed '1d; s/\\$//' | tr ' \t' '\n\n' | sed '/^$/d'
}
if [ -n "${DDTEST_QUICK_TESTS:-}" ]; then
    echo "$DDTEST_QUICK_TESTS" | tr ' \t' '\n\n' | sed '/^$/d' >"$TMP/quick"
    echo "$DDTEST_LONG_TESTS" | tr ' \t' '\n\n' | sed '/^$/d' >"$TMP/long"
else
    list quick_script_tests >"$TMP/quick"
    list long_script_tests >"$TMP/long"
fi
[ -s "$TMP/quick" ] || fail "Makefile.am has no quick_script_tests list"
[ -s "$TMP/long" ] || fail "Makefile.am has no long_script_tests list"

(cd "$top_srcdir" && find tests -name 'test_*.sh' | sort) >"$TMP/scripts"
sort "$TMP/quick" "$TMP/long" >"$TMP/listed"
if sort -u "$TMP/listed" | cmp -s - "$TMP/listed"; then
    pass "no test is in both tiers or twice in one"
else
    fail "tests listed twice: $(uniq -d "$TMP/listed" | tr '\n' ' ')"
fi
unlisted=$(sort -u "$TMP/listed" | comm -23 "$TMP/scripts" -)
[ -z "$unlisted" ] && pass "every tests/**/test_*.sh is in a tier" ||
    fail "in no tier (add each to quick_script_tests or long_script_tests): $(echo $unlisted)"
missing=$(sort -u "$TMP/listed" | comm -13 "$TMP/scripts" -)
[ -z "$missing" ] && pass "every listed test is a script of the tree" ||
    fail "listed but not in the tree: $(echo $missing)"

# Paths outside the repository, in the tests and in what runs them.
if (cd "$top_srcdir" && grep -rnE '\.\./shared|top_srcdir[)}]?/\.\./' \
    tests Makefile.am --exclude=test_tiers.sh) >"$TMP/outside"; then
    fail "tests read files outside the repository:"; cat "$TMP/outside"
else
    pass "no test reads a file outside the repository"
fi
profiles=${DDTEST_PROFILES:-$top_srcdir/tests/fixtures/profiles}
case $(cd "$profiles" 2>/dev/null && pwd -P)/ in
"$(cd "$top_srcdir" && pwd -P)"/*) pass "DDTEST_PROFILES is in the repository" ;;
*) fail "DDTEST_PROFILES ($profiles) is not a folder of the repository" ;;
esac
for p in gpt2-16-1gbit gpt2-16-5gbit gpt2-8-10gbit gpt2-blocks; do
    set -- "$profiles/$p"/bp_*.json
    [ -f "$1" ] && pass "profile $p carried" || fail "profile $p: no bp_*.json in $profiles/$p"
done
finish
