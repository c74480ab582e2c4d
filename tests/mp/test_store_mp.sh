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

# One rank of a host reads hwloc; the others read what it published.
if "$top_builddir/tools/ddtopo" 2>&1 | grep -q "^topology: hwloc"; then
    if DREAMDDP_LOG_LEVEL=info "$DDRUN" -n 4 --timeout 60 -- "$MP" \
        >"$TMP/topo" 2>&1; then
        probed=$(grep -c "topology from hwloc and sysfs (this machine)" "$TMP/topo")
        shared=$(grep -c "topology from hwloc (read by another rank on this host)" "$TMP/topo")
        if [ "$probed" -eq 1 ] && [ "$shared" -eq 3 ]; then
            pass "4 ranks: 1 probes hwloc, 3 read its topology"
        else
            fail "hwloc probed by $probed ranks, read by $shared"
            grep "topology from" "$TMP/topo"
        fi
    else
        fail "4 ranks sharing the topology"; cat "$TMP/topo"
    fi
else
    echo "skip: this build has no hwloc (the topology is not shared)"
fi

mkdir "$TMP/shared"
if DREAMDDP_STORE=file:$TMP/shared "$DDRUN" -n 3 --timeout 60 -- "$MP" >"$TMP/file" 2>&1; then
    expect_grep "$TMP/file" "mp_store: 3 ranks agreed on 20 rounds" "file store, 3 ranks"
else
    fail "file store, 3 ranks"; cat "$TMP/file"
fi
finish
