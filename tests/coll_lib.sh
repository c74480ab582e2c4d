# Helpers of the backend tests: run mp_coll through one backend over 1 to 5
# ranks, then the failure cases. Sourced after lib.sh.
MP=$top_builddir/tests/mp_coll

# coll_require NAME: skip (77) when the module was not built.
coll_require() {
    if [ ! -f "$top_builddir/.libs/dd_backend_$1.so" ]; then
        echo "SKIP: dd_backend_$1.so was not built (configure did not find $1)"
        exit 77
    fi
}

# coll_matrix NAME: every operation, dtype, reduction and size on 1 to 5
# ranks, plus one f32 sum allreduce of 16 Mi + 1 elements from 2 ranks up.
coll_matrix() {
    for n in 1 2 3 4 5; do
        large=""
        [ "$n" -ge 2 ] && large="--large 16777217"
        if DREAMDDP_BACKENDS=$1 DREAMDDP_TIMEOUT_S=30 "$DDRUN" -n $n --timeout 150 -- \
            "$MP" $large >"$TMP/$1.$n" 2>&1; then
            expect_grep "$TMP/$1.$n" "mp_coll: $1: " "$1: every collective correct on $n ranks"
        else
            fail "$1: collectives on $n ranks"; cat "$TMP/$1.$n"
        fi
    done
}

# coll_failures NAME: a rank that posts another count, dtype or op, and a
# rank that leaves mid-collective, make the others fail within the timeout.
coll_failures() {
    for kind in count dtype op; do
        if DREAMDDP_BACKENDS=$1 DREAMDDP_TIMEOUT_S=3 "$DDRUN" -n 3 --timeout 60 -- \
            "$MP" --mismatch $kind >"$TMP/$1.mm.$kind" 2>&1; then
            expect_grep "$TMP/$1.mm.$kind" "mp_coll: mismatched $kind failed after" \
                "$1: mismatched $kind fails within the timeout"
        else
            fail "$1: mismatched $kind"; cat "$TMP/$1.mm.$kind"
        fi
    done
    if DREAMDDP_BACKENDS=$1 DREAMDDP_TIMEOUT_S=3 "$DDRUN" -n 3 --timeout 60 -- \
        "$MP" --exit-mid >"$TMP/$1.exit" 2>&1; then
        expect_grep "$TMP/$1.exit" "mp_coll: lost rank noticed after" \
            "$1: a rank leaving mid-collective fails the others"
    else
        fail "$1: a rank leaving mid-collective"; cat "$TMP/$1.exit"
    fi
}
