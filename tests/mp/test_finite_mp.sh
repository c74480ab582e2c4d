#!/bin/sh
# DREAMDDP_CHECK_FINITE: an average that holds NaN or Inf is said on every
# worker, once, naming the step, the layers and the worker whose values
# were not finite (mp_sched nan: worker rank 2 sends a NaN at step 2; at
# step 4 every worker sends 3e38, finite, whose f32 sum would overflow:
# each worker divides before the sum, so the average is 3e38); under
# =error dd_step_end fails with DD_ERR_NUMERIC on every worker; under =no
# nothing is said. Through the workers' allreduce and through an
# aggregator.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
MP=$top_builddir/tests/mp/mp_sched
export DREAMDDP_TIMEOUT_S=20

NAN="holds NaN or Inf: the values of worker rank 2 were not finite"

# warn is the default.
"$DDRUN" -n 4 --timeout 60 -- "$MP" nan ddp >"$TMP/warn" 2>&1
for r in 0 1 2 3; do
    n=$(grep -c "^$r: .*WARN sched: step 2: the average of layers 'layer4', 'layer3' $NAN" "$TMP/warn")
    [ "$n" = 1 ] && pass "warn: rank $r says it once" || { fail "warn: rank $r said it $n times"; cat "$TMP/warn"; }
    expect_grep "$TMP/warn" "mp_sched: rank $r: nan: step 4: layer 4 holds 3e+38" "warn: rank $r averages 3e38 to itself"
    expect_grep "$TMP/warn" "mp_sched: rank $r: nan: step 5: DD_OK" "warn: rank $r trains on"
done
if grep -q "step 4: the average" "$TMP/warn"; then
    fail "warn: a finite average was said"; cat "$TMP/warn"
else
    pass "warn: nothing is said of 3e38"
fi

DREAMDDP_CHECK_FINITE=error "$DDRUN" -n 4 --timeout 60 -- "$MP" nan ddp >"$TMP/error" 2>&1
for r in 0 1 2 3; do
    expect_grep "$TMP/error" "mp_sched: rank $r: nan: step 2: DD_ERR_NUMERIC: step 2: the average of layers 'layer4', 'layer3' $NAN (DREAMDDP_CHECK_FINITE=error)" "error: rank $r fails step 2"
done

DREAMDDP_CHECK_FINITE=no "$DDRUN" -n 4 --timeout 60 -- "$MP" nan ddp >"$TMP/no" 2>&1
if grep -q "holds NaN" "$TMP/no"; then
    fail "no: something was said"; cat "$TMP/no"
else
    pass "no: nothing is said"
fi

# fp16 on the workers' allreduce: what leaves is read as encoded, and the
# sum of the divided encodings is known from the flags beside the digest.
DREAMDDP_COMPRESSION=fp16 DREAMDDP_CHECK_FINITE=warn "$DDRUN" -n 4 --timeout 60 -- "$MP" nan ddp >"$TMP/fp16" 2>&1
for r in 0 1 2 3; do
    expect_grep "$TMP/fp16" "$r: [rank $r] dreamddp WARN sched: step 2: the average of layer 'layer3' $NAN" "fp16: rank $r says it"
done

# Through an aggregator (its accumulator is wider: only the NaN).
DREAMDDP_CHECK_FINITE=warn "$DDRUN" -n 5 --aggregators 1 --timeout 60 -- "$MP" nan ddp >"$TMP/agg" 2>&1
for r in 0 1 2 3; do
    expect_grep "$TMP/agg" "$r: [rank $r] dreamddp WARN sched: step 2: the average of layers 'layer4', 'layer3' $NAN" "aggregator: rank $r says it"
done
# The aggregators' client reads what it copies anyway (the copy kept for
# survival, the average landing); with DREAMDDP_AGG_LOSS=stop it keeps no
# copy and reads each chunk as it leaves; fp16's encodings the same way.
for v in "DREAMDDP_AGG_LOSS=stop" "DREAMDDP_COMPRESSION=fp16"; do
    env $v "$DDRUN" -n 5 --aggregators 1 --timeout 60 -- "$MP" nan ddp >"$TMP/agg2" 2>&1
    for r in 0 1 2 3; do
        if grep -q "^$r: \[rank $r\] dreamddp WARN sched: step 2: the average of .* $NAN" "$TMP/agg2"; then
            pass "aggregator, $v: rank $r names worker rank 2"
        else
            fail "aggregator, $v: rank $r"; cat "$TMP/agg2"
        fi
    done
done
finish
