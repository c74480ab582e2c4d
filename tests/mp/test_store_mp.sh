#!/bin/sh
# The store with real processes through ddrun: 1 to 5 ranks, with and without
# aggregators, over TCP and over the file store.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
MP=$top_builddir/tests/mp/mp_store

for n in 1 2 3 5; do
    if "$DDRUN" -n $n --timeout 60 -- "$MP" >"$TMP/tcp$n" 2>&1; then
        expect_grep "$TMP/tcp$n" "mp_store: $n ranks agreed on 20 rounds" "tcp store, $n ranks"
    else
        fail "tcp store, $n ranks"; cat "$TMP/tcp$n"
    fi
done

if "$DDRUN" -n 4 --aggregators 2 --timeout 60 -- "$MP" 2 >"$TMP/agg" 2>&1; then
    pass "4 ranks with 2 aggregators agree on roles"
else
    fail "roles with aggregators"; cat "$TMP/agg"
fi

mkdir "$TMP/shared"
if DREAMDDP_STORE=file:$TMP/shared "$DDRUN" -n 3 --timeout 60 -- "$MP" >"$TMP/file" 2>&1; then
    expect_grep "$TMP/file" "mp_store: 3 ranks agreed on 20 rounds" "file store, 3 ranks"
else
    fail "file store, 3 ranks"; cat "$TMP/file"
fi
finish
