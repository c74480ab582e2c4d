#!/bin/sh
# ddbench codec: every built-in codec runs on a small layer and reports the
# ratio its wire must have; bad options and specs fail with a reason.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

BENCH="$top_builddir/tools/ddbench"

# run SPEC RATIO [OPTIONS...]: the JSON line must carry "ratio":RATIO.
run() {
    spec=$1; ratio=$2; shift 2
    if "$BENCH" codec --codec "$spec" --bytes 64K --iters 1 --json "$@" \
        >"$TMP/out" 2>&1; then
        expect_grep "$TMP/out" "\"ratio\":$ratio" "$spec: ratio $ratio"
    else
        fail "ddbench codec --codec $spec failed:"
        sed 's/^/    /' "$TMP/out"
    fi
}

run none 1.000000
run fp16 0.500000
run bf16 0.500000
run fp16 0.250000 --dtype f64
run topk:0.01 0.020142 # 164 of 16384 values and indices, an 8-byte header
run powersgd:4 0.062500 # (128 + 128) x 4 of 128 x 128
run powersgd:4 1.000000 --rows 1 --cols 16384
expect_grep "$TMP/out" '"rounds_GBps":' "powersgd reports its rounds"

if "$BENCH" codec --codec topk:2 --bytes 64K >"$TMP/bad" 2>&1; then
    fail "topk:2 accepted"
else
    expect_grep "$TMP/bad" "invalid codec spec 'topk:2'" "topk:2 refused"
fi
if "$BENCH" codec --codec fp16 --bytes 64K --rows 3 --cols 5 >"$TMP/bad" 2>&1
then
    fail "a shape that is not the layer accepted"
else
    expect_grep "$TMP/bad" "is not the 16384 elements" "a bad shape refused"
fi
finish
