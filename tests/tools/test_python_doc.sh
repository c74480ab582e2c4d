#!/bin/sh
# doc/python.md is what tools/gen-python-doc.py makes of python/dreamddp's
# docstrings now (regenerate it with `make python-doc`), and the generator
# reads the docstrings, so that a changed one changes the page.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

py=${DDTEST_PYTHON:-python3}
if ! "$py" -c 'import sys; sys.exit(sys.version_info < (3, 9))' 2>/dev/null; then
    echo "SKIP: tools/gen-python-doc.py needs Python 3.9 or later (ast.unparse); '$py' is not"
    exit 77
fi
gen=$top_srcdir/tools/gen-python-doc.py

"$py" "$gen" "$top_srcdir/python" >"$TMP/generated" || fail "tools/gen-python-doc.py failed"
if [ ! -f "$top_srcdir/doc/python.md" ]; then
    fail "doc/python.md is missing; generate it with: make python-doc"
elif cmp -s "$TMP/generated" "$top_srcdir/doc/python.md"; then
    pass "doc/python.md matches the docstrings ($(grep -c '^#\{3,4\} ' "$TMP/generated") names)"
else
    fail "doc/python.md differs from the docstrings; regenerate it with: make python-doc"
    diff "$top_srcdir/doc/python.md" "$TMP/generated"
fi

# Every public name of both modules has its heading.
for name in dreamddp.Context dreamddp.serve_if_aggregator \
    dreamddp.torch.DreamDDP dreamddp.torch.DreamDDP.sync_all \
    dreamddp.torch.wrap_optimizer dreamddp.torch.elastic.State; do
    grep -q "^#.* \`$name[(\`]" "$TMP/generated" ||
        fail "the generated page has no heading for $name"
done

# A docstring changed in a copy of the package changes the page there.
cp -R "$top_srcdir/python" "$TMP/python"
sed 's/On an aggregator rank: sums for the workers/On an aggregator rank: SUMS/' \
    "$top_srcdir/python/dreamddp/__init__.py" >"$TMP/python/dreamddp/__init__.py"
"$py" "$gen" "$TMP/python" >"$TMP/changed" || fail "tools/gen-python-doc.py failed on the copy"
if grep -q "On an aggregator rank: SUMS" "$TMP/changed"; then
    pass "a changed docstring reaches the page"
else
    fail "a changed docstring did not reach the page (the generator no longer reads Context.serve's)"
fi
finish
