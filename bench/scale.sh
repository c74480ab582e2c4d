#!/bin/sh
# bench/scale.sh: the train simulator past four hosts. At 4, 8 and 16
# workers (SIZES), on netcluster at RATE, gpt2-blocks at SCALE:
# - the TCP floor: bench/tcpfloor.c moving a ring allreduce's bytes of the
#   model among the workers with bare TCP, against 2(n-1)/n·M/B, which
#   shows whether the 2 cores carry every host's link at this rate; with
#   aggregators, their pushes and answers both all at once and paced as
#   the library paces them (tcpfloor --paced), paced also at a mean
#   layer's bytes (a burst's cost beyond its bytes);
# - PyTorch: torch_sim.py compute, ddp and localsgd:4;
# - dreamddp: train-sim none, ddp and dreamddp:4, and at 8 and 16 workers
#   ddp and dreamddp:4 with half as many aggregators on hosts of their own;
# - the collectives the runtime adds beside the syncs, timed alone: the
#   workers' agreement at its largest (an allgather of 61 doubles a worker
#   for gpt2-blocks' 15 layers: the drift monitor's 15 every window, with
#   the times' 46 every DREAMDDP_REPLAN_WINDOWS windows under dreamddp)
#   and a 64-byte allreduce (a digest's or a deadline's size, and the
#   ring's round trip, which the model takes as its --ring-latency), over
#   ddbench coll;
# - with aggregators, a 4 KB sync through them (ddbench sync): the round
#   trip's fixed cost, which the model takes as its --agg-latency; and one
#   sync of a window's share and of the whole model, the library's own
#   figures beside the paced floor's.
# Interleaved over $ROUNDS rounds, each size in its own netcluster session
# of n + n/2 hosts. FLOOR_ONLY=1 runs the TCP floors alone (to choose
# RATE); WITH_AGG=0 leaves out the runs with aggregators. Results:
# results/scale.jsonl (OUT=FILE: elsewhere); then the table.
. "$(dirname "$0")/lib.sh"
out=${OUT:-$RESULTS/scale.jsonl}
SIZES=${SIZES:-4 8 16}
SCALE=${SCALE:-0.05}
ITERS=${ITERS:-8}
WITH_AGG=${WITH_AGG:-1}
floor=${TMPDIR:-/tmp}/dd-tcpfloor.$$
trap 'rm -f "$floor"' EXIT
${CC:-cc} -O2 -pthread -o "$floor" "$here/tcpfloor.c"
# The model's bytes at SCALE: what one ddp iteration averages.
# Its layers' count, and a window's share (H = 4): what dreamddp:4 and
# plsgd:4 stream an iteration.
set -- $(python3 -c "
import json
d = json.load(open('$PROFILES/gpt2-blocks/sizes_gpt2-blocks.json'))
print(sum(int(v * $SCALE) for v in d.values()) * 4, len(d))")
bytes=$1 layers=$2 window=$(($1 / 4))

tag() { sed "s/^{/{\"workers\":$1,\"aggregators\":$2,\"scale\":$SCALE,/"; }

# tcp_floor N ROUND [K [--paced [BYTES]]]: bare TCP moving the model's
# bytes (or BYTES) as N workers and K aggregators would (tcpfloor.c; K = 0:
# a ring's bytes).
tcp_floor() {
    n=$1 r=$2 k=${3:-0} paced=${4:-} b=${5:-$bytes}
    addrs=
    i=0
    while [ $i -lt $((n + k)) ]; do
        addrs="$addrs $("$NC" addr $i)"
        i=$((i + 1))
    done
    on_hosts $((n + k)) 60 sh -c "exec \"$floor\" $paced \$RANK $n $k $b $addrs" |
        awk -v b="$b" -v p="${paced:+,\"paced\":true}" '$1 == "tcpfloor" && $5 > t { t = $5 }
            END { if (t) printf "{\"anchor\":\"tcp-floor\"%s,\"bytes\":%d,\"time_s\":%s}\n", p, b, t }' |
        tag "$n" "$k" | keep "$out" "$r"
}

size_round() {
    n=$1 r=$2
    tcp_floor "$n" "$r"
    if [ "$n" -ge 8 ] && [ "$WITH_AGG" != 0 ]; then
        tcp_floor "$n" "$r" $((n / 2))
        tcp_floor "$n" "$r" $((n / 2)) --paced
        # A mean layer's bytes: what a burst costs beyond the bytes; and
        # a window's share.
        tcp_floor "$n" "$r" $((n / 2)) --paced $((bytes / layers))
        tcp_floor "$n" "$r" $((n / 2)) --paced "$window"
    fi
    [ "${FLOOR_ONLY:-0}" = 0 ] || return 0
    for m in compute ddp localsgd:4; do
        on_hosts "$n" 300 env SCALE="$SCALE" "$TORCH_PYTHON" \
            "$ANCHORS/torch_sim.py" "$m" "$ITERS" | tag "$n" 0 | keep "$out" "$r"
    done
    entries="none@0 ddp@0 dreamddp:4@0"
    [ "$n" -lt 8 ] || [ "$WITH_AGG" = 0 ] || entries="$entries ddp@$((n / 2)) dreamddp:4@$((n / 2))"
    for e in $entries; do
        s=${e%@*} k=${e#*@}
        on_hosts $((n + k)) 300 env DREAMDDP_NUM_AGGREGATORS="$k" \
            "$DDBENCH" train-sim --profile "$PROFILES/gpt2-blocks" \
            --scale "$SCALE" --strategy "$s" --iters "$ITERS" --json |
            tag "$n" "$k" | keep "$out" "$r"
    done
    if [ "$n" -ge 8 ] && [ "$WITH_AGG" != 0 ]; then
        on_hosts $((n + n / 2)) 120 env DREAMDDP_NUM_AGGREGATORS=$((n / 2)) \
            "$DDBENCH" sync --bytes 4096 --iters 30 --json |
            tag "$n" $((n / 2)) | keep "$out" "$r"
        # The library's own one-message syncs of a window's share and of
        # the whole model, beside the paced floor's.
        for b in "$window" "$bytes"; do
            on_hosts $((n + n / 2)) 120 env DREAMDDP_NUM_AGGREGATORS=$((n / 2)) \
                "$DDBENCH" sync --bytes "$b" --iters 3 --json |
                tag "$n" $((n / 2)) | keep "$out" "$r"
        done
    fi
    for c in "allgather $((n * 61 * 8))" "allreduce 64"; do
        set -- $c
        on_hosts "$n" 120 "$DDBENCH" coll --op "$1" --bytes "$2" \
            --iters 50 --warmup 5 --json | tag "$n" 0 | keep "$out" "$r"
    done
}

# The model (ddbench scale) at every point measured: one worker a node,
# MODEL_LATENCY a step's latency, and as the NIC's rate what bare TCP
# achieved (the TCP floor: RATE less TCP's, the shaper's and the shared
# cores' cost): for the ring, moving a ring's bytes among the fewest
# workers measured (a ring has two connections a host at every size); with
# aggregators, moving their pushes and answers at that size, paced as the
# library paces them (all at once, n workers meet at an aggregator with
# more than a switch port holds, and the floor varied from 3.2 to 4.6 s
# at 16 + 8 between runs; results without a paced floor use that one;
# where the library's own one-message sync of those bytes was faster than
# the paced floor, the library's: at 16 + 8, 3.33 s against 3.50 for
# 24.9 MB once its pieces were cut as the floor's);
# for the aggregators' round trip (--agg-latency), the 4 KB sync's time
# through them at that size; where the paced floor ran at a mean layer's
# bytes too, the rate from the two sizes' difference and what a burst
# costs beyond its bytes from the smaller (--agg-burst); where it ran at a
# window's share too, the same from that size and a layer's for plsgd and
# dreamddp, whose streams are that long (--agg-window-rate,
# --agg-window-burst); and for the ring's
# (--ring-latency), the 64-byte allreduce's among the workers. MODEL_ONLY=1
# redoes this alone on the results there are.
model() {
    sed -i '/"model":true/d' "$out"
    for n in $SIZES; do
        for k in 0 $((n / 2)); do
            [ "$k" = 0 ] || { [ "$n" -ge 8 ] && [ "$WITH_AGG" != 0 ]; } || continue
            rate=$(python3 - "$out" "$n" "$k" "$window" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
n, k = int(sys.argv[2]), int(sys.argv[3])
full = max(r["bytes"] for r in rows if r.get("anchor") == "tcp-floor")
floors = [r for r in rows if r.get("anchor") == "tcp-floor"
          and r.get("paced", False) == (k > 0) and r["bytes"] == full]
if k > 0 and not any(r["aggregators"] == k and r["workers"] == n for r in floors):
    # Results from before tcpfloor --paced: the floor sent all at once.
    print("scale.sh: no paced floor at %d + %d; the model takes the one "
          "sent all at once" % (n, k), file=sys.stderr)
    floors = [r for r in rows if r.get("anchor") == "tcp-floor"
              and r["bytes"] == full]
fn = min(r["workers"] for r in floors if r["aggregators"] == 0) if k == 0 else n
t = statistics.median(r["time_s"] for r in floors
                      if r["workers"] == fn and r["aggregators"] == k)
def lib_at(size):
    # The library's own one-message sync of about size bytes (ddbench
    # sync takes whole f32 elements).
    ts = [r["time_s"] for r in rows if r.get("route") == "aggregate"
          and abs(r.get("bytes", 0) - size) < 4 and r["workers"] == n
          and r["aggregators"] == k]
    return statistics.median(ts) if ts else None
def fastest(size, floor):
    # Bare TCP paced, or the library's own sync where it moved the bytes
    # faster: the floor is what the links were seen to carry.
    lib = lib_at(size) if k > 0 else None
    return floor if lib is None or floor is None else min(floor, lib)
t = fastest(full, t)
share = 1.0 if k >= fn else 2 * fn * (fn - 1) / (fn * fn + k * fn - 2 * k)
inter = share * full / t
burst = None
window = None
def paced_at(size):
    ts = [r["time_s"] for r in rows if r.get("anchor") == "tcp-floor"
          and r.get("paced") and r["bytes"] == size and r["workers"] == n
          and r["aggregators"] == k]
    return statistics.median(ts) if ts else None
def fit(b, tl, big, tb):
    # Two sizes: the rate from the difference, and what a burst costs
    # beyond its bytes from the smaller one.
    per_byte = (tb - tl) / (big - b)
    return share / per_byte, max(0.0, tl - b * per_byte)
sizes = sorted({r["bytes"] for r in rows if r.get("anchor") == "tcp-floor"
                and r.get("paced") and r["bytes"] < full
                and r["workers"] == n and r["aggregators"] == k})
if k > 0 and sizes:
    b = sizes[0]
    tl = paced_at(b)
    if t > tl:
        inter, burst = fit(b, tl, full, t)
    w = int(sys.argv[4])
    tw = fastest(w, paced_at(w)) if w in sizes and w > b else None
    if tw is not None and tw > tl:
        window = fit(b, tl, w, tw)
lat = [r["time_s"] for r in rows if r.get("route") == "aggregate"
       and r.get("bytes") == 4096 and r["workers"] == n and r["aggregators"] == k]
ring = [r["time_s"] for r in rows if r.get("op") == "allreduce"
        and r.get("bytes") == 64 and r["workers"] == n and r["aggregators"] == 0]
print("--inter %r --intra %r" % (inter, inter) +
      (" --agg-latency %g" % statistics.median(lat) if lat else "") +
      (" --agg-burst %g" % burst if burst is not None else "") +
      (" --agg-window-rate %r --agg-window-burst %g" % window
       if window is not None else "") +
      (" --ring-latency %g" % statistics.median(ring) if ring else ""))
PY
)
            "$DDBENCH" scale "$PROFILES/gpt2-blocks" --gpus "$n" --per-node 1 \
                $rate \
                --inter-latency "${MODEL_LATENCY:-50e-6}" \
                --aggregators $((k > 0 ? k : 1)) --scale "$SCALE" --json |
                sed "s/^{/{\"model\":true,\"workers\":$n,\"measured_aggregators\":$k,/" >>"$out"
        done
    done
}

if [ "${MODEL_ONLY:-0}" = 0 ]; then
    max=0
    for n in $SIZES; do [ "$n" -le "$max" ] || max=$n; done
    start_results "$out" $((max + max / 2))
    r=1
    while [ $r -le "$ROUNDS" ]; do
        for n in $SIZES; do
            echo "bench: round $r of $ROUNDS, $n workers" >&2
            cluster $((n + n / 2)) size_round "$n" "$r"
        done
        r=$((r + 1))
    done
fi
[ "${FLOOR_ONLY:-0}" != 0 ] || model
python3 "$here/report.py" scale "$out"
