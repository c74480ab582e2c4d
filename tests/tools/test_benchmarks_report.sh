#!/bin/sh
# BENCHMARKS.md is a report: at most 200 lines, every table after a Run line
# with its command, machine, date and commit, every results file it names
# committed; and the docs' links into Markdown files (README.md,
# BENCHMARKS.md, bench/NOTES.md, doc/*.md) reach a file and a heading, so
# that a figure moved to bench/NOTES.md is still found from where it was
# cited. The checks are tests/tools/check_benchmarks.py's.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
: "${DDTEST_PYTHON:=/usr/bin/python3}"
for f in BENCHMARKS.md bench/NOTES.md bench/results; do
    if [ ! -e "$top_srcdir/$f" ]; then
        echo "SKIP: $f is not in this tree (a make dist tarball ships no benchmark report)"
        exit 77
    fi
done
if ! "$DDTEST_PYTHON" -c 'import sys' 2>/dev/null; then
    echo "SKIP: no Python at DDTEST_PYTHON=$DDTEST_PYTHON"
    exit 77
fi

if "$DDTEST_PYTHON" "$top_srcdir/tests/tools/check_benchmarks.py" "$top_srcdir" >"$TMP/out" 2>&1; then
    pass "$(cat "$TMP/out")"
else
    fail "BENCHMARKS.md or the docs' links:"
    sed 's/^/    /' "$TMP/out"
fi

# The checker finds what it is meant to: a copy of the tree with a Run line
# stripped of its commit, a results file that is not there and a link to a
# heading that is not there.
mkdir -p "$TMP/tree/bench" "$TMP/tree/doc" "$TMP/tree/tests/fixtures/profiles"
cp "$top_srcdir/tests/README.md" "$TMP/tree/tests/README.md"
cp "$top_srcdir/tests/fixtures/profiles/README.md" "$TMP/tree/tests/fixtures/profiles/README.md"
cp -R "$top_srcdir/bench/results" "$TMP/tree/bench/results"
cp "$top_srcdir/bench/NOTES.md" "$TMP/tree/bench/NOTES.md"
cp "$top_srcdir/README.md" "$TMP/tree/README.md"
cp "$top_srcdir"/doc/*.md "$TMP/tree/doc/"
sed '0,/^\*\*Run:\*\*/s/recorded in `[0-9a-f]*`/recorded/; s#results/coll\.jsonl#results/no_such.jsonl#' \
    "$top_srcdir/BENCHMARKS.md" >"$TMP/tree/BENCHMARKS.md"
echo 'See [nowhere](../BENCHMARKS.md#no-such-heading).' >>"$TMP/tree/doc/routes.md"
"$DDTEST_PYTHON" "$top_srcdir/tests/tools/check_benchmarks.py" "$TMP/tree" >"$TMP/bad" 2>&1
rc=$?
[ "$rc" = 1 ] && pass "a broken tree fails the check" || fail "a broken tree gave exit $rc, not 1"
expect_grep "$TMP/bad" "the Run line has no commit" "a Run line without a commit is found"
expect_grep "$TMP/bad" "names results/no_such.jsonl, which is not in bench/results" "a missing results file is found"
expect_grep "$TMP/bad" "no such heading in BENCHMARKS.md" "a link to a missing heading is found"
[ "$(grep -c '^FAIL' "$TMP/bad")" = 3 ] && pass "nothing else is found in the copy" ||
    fail "the copy gave other findings: $(cat "$TMP/bad")"
finish
