#!/bin/sh
# Numeric options of the tools and examples are read strictly: the whole
# argument, in range, finite. Each bad value fails at once, naming the
# option and the value (atoi and atof took them: --steps 99999999999999 ran
# 276,447,231 steps, --time-scale 1e400 spun forever).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
B=$top_builddir

# bad "WHAT THE MESSAGE SAYS" CMD...: CMD exits non-zero within 10 s and
# prints the message.
bad() {
    want=$1; shift
    timeout 10 "$@" >"$TMP/out" 2>&1
    rc=$?
    if [ $rc -eq 0 ] || [ $rc -eq 124 ]; then
        fail "$* was accepted (exit $rc)"
    else
        expect_grep "$TMP/out" "$want" "$(echo "$*" | sed "s|$B/||") is refused"
    fi
}

bad "train_mlp: --steps takes an integer from 1 to 2147483647, not '99999999999999'" \
    "$B/examples/train_mlp" --steps 99999999999999
bad "train_mlp: --lr takes a number from 1e-12 to 1000, not 'nan'" "$B/examples/train_mlp" --lr nan
bad "train_mlp: --lr takes a number from 1e-12 to 1000, not '1e400'" "$B/examples/train_mlp" --lr 1e400
bad "train_mlp: --batch takes an integer from 1 to 1048576, not ' 4'" "$B/examples/train_mlp" --batch " 4"
bad "train_mlp: --seed takes an integer from 0 to 4294967295, not '-1'" "$B/examples/train_mlp" --seed -1
bad "ddbench coll: invalid value '1e400' for --bytes" "$B/tools/ddbench" coll --op allreduce --bytes 1e400
bad "ddbench coll: invalid value '0x10' for --bytes" "$B/tools/ddbench" coll --op allreduce --bytes 0x10
bad "ddbench coll: invalid value '99999999999' for --iters" "$B/tools/ddbench" coll --op allreduce --bytes 4K --iters 99999999999
bad "ddbench coll: --bytes 0: expected at least one f32 element and a multiple of its 4 bytes" "$B/tools/ddbench" coll --op allreduce --bytes 0
bad "ddbench coll: --bytes 3: expected at least one f32 element and a multiple of its 4 bytes" "$B/tools/ddbench" coll --op allreduce --bytes 3 --dtype f32
bad "ddtopo: --local-rank 5 with --local-size 2: the local rank must be below the number of ranks on the host" "$B/tools/ddtopo" --local-rank 5 --local-size 2
bad "ddbench codec: bad --bytes '1e400'" "$B/tools/ddbench" codec --codec fp16 --bytes 1e400
bad "ddbench codec: --iters takes an integer from 1 to 2147483647, not '1e3'" "$B/tools/ddbench" codec --codec fp16 --bytes 4K --iters 1e3
bad "ddbench codec: --rows takes an integer from 1 to 1099511627776, not '-1'" "$B/tools/ddbench" codec --codec fp16 --bytes 4K --rows -1
bad "ddbench train-sim: --time-scale takes a number from 0 to 1000, not '1e400'" "$B/tools/ddbench" train-sim --time-scale 1e400
bad "ddbench train-sim: --iters takes an integer from 1 to 100000000, not '99999999999999'" "$B/tools/ddbench" train-sim --iters 99999999999999
bad "ddbench train-sim: --bytes-per-second takes a number from 0 to 1e+15, not 'inf'" "$B/tools/ddbench" train-sim --bytes-per-second inf
bad "ddbench plan: --H takes an integer from 1 to 1024, not '+4'" "$B/tools/ddbench" plan --H +4 x
bad "ddbench plan: --bytes-per-second takes a number from 0 to 1e+15, not 'nan'" "$B/tools/ddbench" plan --bytes-per-second nan x
bad "ddbench plan: --forward takes a number from 0 to 1000, not '-0.5'" "$B/tools/ddbench" plan --forward -0.5 x
bad "ddbench plan: --deadline takes forward or backward, not 'end'" "$B/tools/ddbench" plan --deadline end x
bad "ddbench plan: --compression takes none, fp16 or bf16, not 'topk:0.1'" "$B/tools/ddbench" plan --compression topk:0.1 x
bad "ddbench train-sim: --forward takes a number from 0 to 1000, not 'nan'" "$B/tools/ddbench" train-sim --forward nan
bad "ddbench train-sim: --deadline takes forward or backward, not 'fwd'" "$B/tools/ddbench" train-sim --deadline fwd
bad "ddbench sync: --link-gbps takes a number from 0 to 1e+06, not '1e400'" "$B/tools/ddbench" sync --bytes 4K --link-gbps 1e400
bad "ddbench coll: --streams takes an integer from 1 to 8, not '9'" "$B/tools/ddbench" coll --op allreduce --bytes 4K --streams 9
bad "ddbench sync: --streams takes an integer from 1 to 8, not '0'" "$B/tools/ddbench" sync --bytes 4K --streams 0
bad "ddbench plan: --streams takes an integer from 1 to 8, not '9'" "$B/tools/ddbench" plan --streams 9 x
bad "ddbench train-sim: --streams takes an integer from 1 to 8, not '0'" "$B/tools/ddbench" train-sim --profile x --strategy ddp --streams 0
bad "ddrun: -n needs a number of ranks from 1, not '+2'" "$B/tools/ddrun" -n +2 -- true
bad "ddrun: --timeout needs seconds from 1, not ' 5'" "$B/tools/ddrun" -n 1 --timeout " 5" -- true
finish
