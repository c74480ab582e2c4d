#!/bin/sh
# bench/gpt_overhead.sh: the PyTorch front end's own cost on
# examples/torch_gpt.py's default model, on one rank of this machine
# (loopback, no emulated hosts): the plain PyTorch loop (--baseline plain)
# against the same loop through dreamddp.torch.DreamDDP under localsgd:1024
# (every hook runs, every layer is marked, nothing is synced within the
# run), interleaved A B A B over $ROUNDS rounds. Prints each pair's steady
# s/iter and the median overhead in percent.
#
#   ITERS   iterations per run (default 40; the first 2 are not timed)
# Results: results/gpt_overhead.jsonl (or $OUT).
RATE=loopback # start_results records it: no emulated links here
. "$(dirname "$0")/lib.sh"
out=${OUT:-$RESULTS/gpt_overhead.jsonl}
iters=${ITERS:-40}
GPT=$top/examples/torch_gpt.py
PYTHONPATH=$top/python${PYTHONPATH:+:$PYTHONPATH}
DREAMDDP_LIBRARY=${DREAMDDP_LIBRARY:-$builddir/.libs/libdreamddp.so.1}
export PYTHONPATH DREAMDDP_LIBRARY

start_results "$out" 1
r=1
while [ $r -le "$ROUNDS" ]; do
    for mode in plain front-end; do
        if [ $mode = plain ]; then set -- --baseline plain; else set -- --strategy localsgd:1024; fi
        "$TORCH_PYTHON" "$GPT" --iters "$iters" --eval-every "$iters" --val-batches 1 "$@" |
            sed -n "s|^{\"event\": \"done\"|{\"round\":$r,\"run\":\"$mode\",\"event\": \"done\"|p" |
            tee -a "$out"
    done
    r=$((r + 1))
done
python3 - "$out" <<'EOF'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"run"' in l]
by = {}
for r in rows:
    by.setdefault(r["round"], {})[r["run"]] = r["s_per_iter"]
pct = [100 * (v["front-end"] / v["plain"] - 1) for v in by.values() if len(v) == 2]
for k, v in sorted(by.items()):
    print("round %d: plain %.4f s/iter, front end %.4f s/iter" % (k, v.get("plain", 0), v.get("front-end", 0)))
print("front end's overhead on one rank: median %+.2f %% of an iteration (rounds: %s)"
      % (statistics.median(pct), ", ".join("%+.2f" % p for p in pct)))
EOF
