#!/bin/sh
# DistributedDataParallel's constructor and idioms through DreamDDP, on 2
# ranks (tests/python/torch_ddp_idioms.py): DDP's arguments accepted or
# refused naming what replaces them, never a TypeError; bucket_cap_mb sets
# ddp's buckets (more gradient messages a step with a smaller cap, from the
# timeline); gradient accumulation through require_backward_grad_sync
# counts one library step and one sync a layer per optimizer step;
# evaluation on rank 0 alone, before the first step and between steps,
# disturbs no strategy, dreamddp:2+next included; worker_rank() and
# num_workers() give the data shard beside an aggregator rank; a scheduler built before
# wrap_optimizer raises no warning and keeps its schedule. Under ddp the
# parameters, buffers and rank 0's evaluation losses equal PyTorch DDP's
# (gloo) on the same batches, bitwise. Skips where the interpreter has no
# torch.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/python/torch_lib.sh"
IDIOMS="$top_srcdir/tests/python/torch_ddp_idioms.py"
export PYTHONPATH="$top_srcdir/tests/python:$PYTHONPATH"

# idioms NAME ARGS...: rank 0 prints its line, every rank exits 0.
idioms() {
    name=$1; shift
    if "$DDRUN" -n 2 --timeout 120 -- "$DDTEST_PYTHON" "$IDIOMS" "$@" >"$TMP/out" 2>&1 &&
       grep -q '^0: torch_ddp_idioms: [^F]' "$TMP/out"; then
        pass "$name: $(grep -m1 '^0: torch_ddp_idioms: ' "$TMP/out" | sed 's/^0: torch_ddp_idioms: //')"
    else
        fail "$name"; sed 's/^/    /' "$TMP/out"
    fi
}

for strategy in ddp localsgd:2 dreamddp:2 dreamddp:2+next adaptive; do
    idioms "DDP's arguments and idioms, rank 0 evaluating alone, $strategy" idioms "$strategy"
done

# With an aggregator rank, the data shard is the worker's index.
if "$DDRUN" -n 3 --timeout 120 -- env DREAMDDP_NUM_AGGREGATORS=1 "$DDTEST_PYTHON" "$IDIOMS" shard - >"$TMP/out" 2>&1 &&
   grep -q '^0: torch_ddp_idioms: shard' "$TMP/out"; then
    pass "$(grep -m1 '^0: torch_ddp_idioms: ' "$TMP/out" | sed 's/^0: torch_ddp_idioms: //')"
else
    fail "worker_rank() and num_workers() with an aggregator rank"; sed 's/^/    /' "$TMP/out"
fi

# The gradient messages of the second step, from rank 0's timeline.
messages() {
    "$DDTEST_PYTHON" -c '
import json, sys
d = json.load(open(sys.argv[1]))
ev = d["traceEvents"] if isinstance(d, dict) else d
print(sum(1 for e in ev if e.get("name", "").startswith("sync")
          and e.get("args", {}).get("step") == 1))' "$1"
}
for cap in none 0.25; do
    DREAMDDP_TIMELINE="$TMP/tl.$cap.%r.json" idioms "bucket_cap_mb=$cap" bucket "$cap"
done
if [ -f "$TMP/tl.none.0.json" ] && [ -f "$TMP/tl.0.25.0.json" ]; then
    a=$(messages "$TMP/tl.none.0.json"); b=$(messages "$TMP/tl.0.25.0.json")
    if [ "$b" -gt "$a" ]; then
        pass "bucket_cap_mb=0.25 splits a step's 2 MiB of gradients into $b messages, $a without"
    else
        fail "bucket_cap_mb=0.25: $b gradient messages a step, $a without"
    fi
else
    fail "bucket_cap_mb: no timeline written"
fi
finish
