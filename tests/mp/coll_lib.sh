# Helpers of the backend tests: run mp_coll through one backend over 1 to 5
# ranks, then the failure cases. Sourced after lib.sh.
MP=$top_builddir/tests/mp/mp_coll

# coll_require NAME: skip (77) when the module was not built.
coll_require() {
    if [ ! -f "$top_builddir/.libs/dd_backend_$1.so" ]; then
        echo "SKIP: dd_backend_$1.so was not built (configure did not find $1)"
        exit 77
    fi
}

# coll_matrix NAME: every operation, dtype, reduction and size on 1 to 5
# ranks, plus one f32 sum allreduce of 16 Mi + 1 elements from 2 ranks up,
# then small sizes on 8 ranks.
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
    # 8 ranks, small: a power of two past 4, where an allgather of up to
    # 64 KiB takes log2 8 rounds of recursive doubling.
    if DREAMDDP_BACKENDS=$1 DREAMDDP_TIMEOUT_S=30 "$DDRUN" -n 8 --timeout 150 -- \
        "$MP" --sizes 1,61,1000 --dtypes f64,f16 --ops sum,avg >"$TMP/$1.8" 2>&1; then
        expect_grep "$TMP/$1.8" "mp_coll: $1: " "$1: small collectives correct on 8 ranks"
    else
        fail "$1: small collectives on 8 ranks"; cat "$TMP/$1.8"
    fi
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

# coll_streams NAME: every collective (allreduce in and out of place,
# reduce-scatter, allgather, broadcast; f32 and f16, sum and avg) with
# DREAMDDP_NUM_STREAMS of 1 to 4 on 2, 3 and 5 ranks: 7 elements (whole, on
# one stream) and 1048583 (4 MiB of f32, cut across up to 4 streams by a
# backend that cuts; an odd count, so the slices differ in length). The info
# log must show the count every rank agreed on.
coll_streams() {
    for case in 1:2 2:2 4:2 3:3 1:5 2:5 4:5; do
        s=${case%:*} n=${case#*:}
        word=streams; [ "$s" -eq 1 ] && word=stream
        out=$TMP/$1.streams.$s.$n
        if DREAMDDP_BACKENDS=$1 DREAMDDP_NUM_STREAMS=$s DREAMDDP_TIMEOUT_S=30 \
            DREAMDDP_LOG_LEVEL=info DREAMDDP_LOG_SUBSYS=backend \
            "$DDRUN" -n $n --timeout 150 -- "$MP" --sizes 7,1048583 \
            --dtypes f32,f16 --ops sum,avg >"$out" 2>&1; then
            expect_grep "$out" "mp_coll: $1: 24 collectives correct on $n ranks" \
                "$1: every collective exact with $s $word on $n ranks"
            expect_grep "$out" "INFO backend: $s $word per peer" \
                "$1: the backends were told $s $word on $n ranks"
        else
            fail "$1: collectives with $s $word on $n ranks"; cat "$out"
        fi
    done
    # Ranks that ask for different counts use the least: here 2.
    out=$TMP/$1.streams.mixed
    if DREAMDDP_BACKENDS=$1 DREAMDDP_TIMEOUT_S=30 DREAMDDP_LOG_LEVEL=info \
        DREAMDDP_LOG_SUBSYS=backend "$DDRUN" -n 3 --timeout 150 -- sh -c \
        'DREAMDDP_NUM_STREAMS=$((4 - DREAMDDP_RANK)) exec "$0" "$@"' "$MP" \
        --sizes 1048583 --dtypes f32 --ops sum >"$out" 2>&1; then
        expect_grep "$out" "mp_coll: $1: 4 collectives correct on 3 ranks" \
            "$1: exact when the ranks ask for 4, 3 and 2 streams"
        [ "$(grep -c 'INFO backend: 2 streams per peer' "$out")" -eq 3 ] &&
            pass "$1: every rank uses the least count asked for (2)" ||
            fail "$1: every rank uses the least count asked for (2)"
    else
        fail "$1: ranks asking for different stream counts"; cat "$out"
    fi
    # A count out of range names the variable and what it accepts.
    out=$TMP/$1.streams.bad
    if DREAMDDP_BACKENDS=$1 DREAMDDP_NUM_STREAMS=9 "$DDRUN" -n 1 --timeout 60 -- \
        "$MP" --sizes 7 >"$out" 2>&1; then
        fail "$1: DREAMDDP_NUM_STREAMS=9 was accepted"
    else
        expect_grep "$out" "invalid value DREAMDDP_NUM_STREAMS='9': expected an integer from 1 to 8" \
            "$1: DREAMDDP_NUM_STREAMS=9 names the variable and the range"
    fi
}

# coll_engine_streams NAME [agg]: the engine's channels. ddbench train-sim
# --check through the engine with every layer its own job (64 KiB buckets
# and fusion), so that jobs of different sizes share the channels and
# finish out of order: every synced layer must hold the exact average
# after each step, ddp and dreamddp:2 with 1 to 4 streams on 2, 3 and 5
# workers; with agg, also through 1 to 3 aggregators on 3 to 5 ranks. The
# info log says how many channels the engine ran.
coll_engine_streams() {
    DDBENCH=$top_builddir/tools/ddbench
    if "$DDBENCH" plan "$top_srcdir/tests/fixtures/profile-small" 2>&1 |
        grep -q "built without json-c"; then
        echo "# engine channels not tested: ddbench was built without json-c"
        return 0
    fi
    cases="1:2:0 2:2:0 4:2:0 3:3:0 2:5:0 4:5:0"
    [ "$2" = agg ] && cases="$cases 1:3:1 2:4:2 4:5:2 3:5:3"
    for case in $cases; do
        s=${case%%:*} rest=${case#*:}; n=${rest%:*} k=${rest#*:}
        word=channels; [ "$s" -eq 1 ] && word=channel
        strategies="ddp dreamddp:2"; [ "$k" -gt 0 ] && strategies=ddp
        for strat in $strategies; do
            out=$TMP/$1.engine.$s.$n.$k.$strat
            if DREAMDDP_BACKENDS=$1 DREAMDDP_TIMEOUT_S=30 \
                DREAMDDP_BUCKET_BYTES=64K DREAMDDP_FIRST_BUCKET_BYTES=64K \
                DREAMDDP_FUSION_BYTES=64K DREAMDDP_LOG_LEVEL=info \
                DREAMDDP_LOG_SUBSYS=sched "$DDRUN" -n $n --aggregators $k \
                --timeout 150 -- "$DDBENCH" train-sim --profile \
                "$top_srcdir/tests/fixtures/profile-small" --time-scale 0.1 \
                --strategy $strat --iters 8 --check --streams $s --json \
                >"$out" 2>&1; then
                expect_grep "$out" "\"streams\":$s," \
                    "$1: $strat ran with DREAMDDP_NUM_STREAMS=$s, $n ranks, $k aggregator(s)"
                expect_grep "$out" '"correct":true' \
                    "$1: $strat exact through the engine with $s $word, $n ranks, $k aggregator(s)"
                [ "$(grep -c "INFO sched: progress engine: $s $word\$" "$out")" -eq $((n - k)) ] &&
                    pass "$1: $strat: every worker's engine ran $s $word ($n ranks, $k aggregator(s))" ||
                    { fail "$1: $strat: every worker's engine ran $s $word ($n ranks, $k aggregator(s))"; cat "$out"; }
            else
                fail "$1: $strat through the engine with $s $word, $n ranks, $k aggregators"; cat "$out"
            fi
        done
    done
}
