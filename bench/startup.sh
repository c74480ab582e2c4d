#!/bin/sh
# bench/startup.sh: the time from launch to the first step at 16, 64 and 128
# ranks on this host's loopback, beside PyTorch's setup at the same sizes.
#
# dreamddp: `ddrun -n N -- ddbench train-sim` (gpt2-blocks at scale 0.001,
# 0.5 MB, no compute), from the launcher's start to the moment the last
# rank returns from dd_model_commit, ready for its first step (dd_init: the
# store's connections, roles, topology, backends; then the layer-table and
# settings agreement and the parameter broadcast of dd_model_commit), with
# rank 0's open descriptors and resident memory at its first step (rank 0
# hosts the store).
# Each launch is preceded by an untimed one of the same size.
# PyTorch: bench/startup_torch.py on N processes, from the moment every one
# has imported torch to DistributedDataParallel's constructor returning
# (TCPStore, init_process_group with gloo, the parameters' broadcast);
# the slowest rank's. Its imports are left out (minutes at 128 ranks on 2
# cores), ddrun's process start is not.
# Writes $RESULTS/startup.jsonl; SIZES and ROUNDS as the environment says.
. "$(dirname "$0")/lib.sh"
SIZES=${SIZES:-16 64 128}
ROUNDS=${ROUNDS:-2}
DDRUN=${DDRUN:-$builddir/tools/ddrun}
out=$RESULTS/startup.jsonl
start_results "$out" 1

now() { date +%s.%N; }

one_dd() {
    n=$1 r=$2
    # Untimed first: a launch of the same size, so that the measured one
    # finds the host as it is between jobs, as PyTorch's side finds it
    # with torch imported before its clock starts. After 128 of its
    # processes the page cache held 1 GB of 24, and the next launch of
    # 128 ranks took 6.97 s, then 4.47 and 4.57 s one after the other; a
    # launch of 2 ranks first did not help (6.8 s).
    timeout -k 5 300 "$DDRUN" -n "$n" -- "$DDBENCH" train-sim \
        --profile "$PROFILES/gpt2-blocks" --strategy ddp --scale 0.001 \
        --time-scale 0 --iters 1 --warmup 0 >/dev/null 2>&1
    t0=$(now)
    timeout -k 5 300 "$DDRUN" -n "$n" -- "$DDBENCH" train-sim \
        --profile "$PROFILES/gpt2-blocks" --strategy ddp --scale 0.001 \
        --time-scale 0 --iters 1 --warmup 0 --json 2>/dev/null |
        python3 -c '
import json, sys
t0, n = float(sys.argv[1]), int(sys.argv[2])
for line in sys.stdin:
    if "{" in line:
        d = json.loads(line[line.index("{"):])
        print(json.dumps({"system": "dreamddp", "ranks": n,
                          "first_step_s": round(d["ready_at"] - t0, 3),
                          "store_rank_fds": d["fds_at_first_step"],
                          "store_rank_rss_kb": d["rss_kb_at_first_step"]}))
' "$t0" "$n" | keep "$out" "$r"
}

one_torch() {
    n=$1 r=$2
    port=$((port + 1))
    # Every rank must have imported torch by GO: about 1.2 s a rank here.
    go=$(python3 -c "import time; print(time.time() + max(20, 1.3 * $n))")
    dir=$(mktemp -d)
    i=0
    while [ $i -lt "$n" ]; do
        timeout -k 5 600 "$TORCH_PYTHON" "$here/startup_torch.py" $i "$n" \
            "$go" $port >"$dir/$i" 2>"$dir/err.$i" &
        i=$((i + 1))
    done
    wait
    cat "$dir"/[0-9]* | python3 -c '
import json, sys
n = int(sys.argv[1])
rows = [json.loads(l) for l in sys.stdin if l.startswith("{")]
if len(rows) < n:
    sys.exit("bench: only %d of %d torch ranks reported" % (len(rows), n))
print(json.dumps({"system": "torch", "ranks": n,
                  "first_step_s": max(x["ready_s"] for x in rows),
                  "late_s": max(x["late_s"] for x in rows)}))
' "$n" | keep "$out" "$r" || cat "$dir"/err.* | tail -5 >&2
    rm -rf "$dir"
}

round() {
    for n in $SIZES; do
        one_dd "$n" "$1"
        one_torch "$n" "$1"
    done
}

# No emulated hosts, but the lock all the same: another benchmark's load
# would be in these figures.
(
    flock 9
    rounds round
) 9>"$LOCK"
python3 "$here/report.py" startup "$out"
