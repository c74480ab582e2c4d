#!/bin/sh
# bench/plots.sh: the plots BENCHMARKS.md shows, drawn with gnuplot from the
# committed results (results/train_sim.jsonl, results/timeline_dreamddp4.json,
# results/time_to_loss.jsonl): time per iteration by strategy, the held-out
# loss of examples/torch_gpt.py against time, and the per-layer syncs of one dreamddp:4
# window, across every rank when the trace is a merged one (ddbench timeline
# merge: one block of rows per rank, on one clock). The SVGs are build outputs (not committed): rerun this after the
# benchmarks. Needs gnuplot (tools/install-deps --bench).
set -eu
here=$(cd "$(dirname "$0")" && pwd)
results=${RESULTS:-$here/results}
plots=${PLOTS:-$here/plots}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$plots"

python3 "$here/report.py" train-dat "$results/train_sim.jsonl" >"$tmp/iter.dat"
gnuplot <<GP
set terminal svg size 800,420 font "sans,11"
set output "$plots/iteration_time.svg"
set title "gpt2-blocks (scale 0.25), 4 hosts at 1 Gbit/s: time per iteration"
set ylabel "seconds per iteration (median)"
set style data histograms
set style histogram rowstacked
set style fill solid 0.8 border -1
set boxwidth 0.7
set xtics rotate by -30 nomirror
set key top right
set grid ytics
plot "$tmp/iter.dat" using 3:xtic(1) title "compute (no sync)" lc rgb "#8fb3d9", \
     "" using 4 title "exposed communication" lc rgb "#d9534f"
GP
echo "bench/plots.sh: wrote $plots/iteration_time.svg"

if [ -e "$results/time_to_loss.jsonl" ]; then
    python3 "$here/report.py" ttl-dat "$results/time_to_loss.jsonl" >"$tmp/ttl.dat"
    runs=$(grep -c '^"' "$tmp/ttl.dat")
    rate=$(python3 -c 'import json, sys
print(json.loads(open(sys.argv[1]).readline())["meta"]["rate"])' "$results/time_to_loss.jsonl")
    gnuplot <<GP
set terminal svg size 800,480 font "sans,11" noenhanced
set output "$plots/time_to_loss.svg"
set title "examples/torch_gpt.py, 4 workers at $rate: held-out loss against training time (last round)"
set xlabel "training time (s, evaluations excluded)"
set ylabel "held-out loss (rank 0's replica)"
set key top right
set grid
plot for [i=0:$((runs - 1))] "$tmp/ttl.dat" index i using 1:2 with linespoints \
    pt 7 ps 0.4 title columnheader(1)
GP
    echo "bench/plots.sh: wrote $plots/time_to_loss.svg"
fi

if [ ! -e "$results/timeline_dreamddp4.json" ]; then
    echo "bench/plots.sh: no $results/timeline_dreamddp4.json (bench/train_sim.sh" \
        "writes it in its last round); skipping the timeline"
    exit 0
fi
python3 "$here/report.py" timeline-dat "$results/timeline_dreamddp4.json" 4 \
    >"$tmp/timeline.dat"
ranks=$(python3 -c 'import json, sys
print(len({e["pid"] for e in json.load(open(sys.argv[1])) if "pid" in e}))' \
    "$results/timeline_dreamddp4.json")
if [ "$ranks" -gt 1 ]; then
    who="$ranks ranks on one clock"
    height=$((240 + 240 * ranks))
else
    who="rank 0"
    height=480
fi
gnuplot <<GP
set terminal svg size 900,$height font "sans,11" noenhanced
set output "$plots/timeline_dreamddp4.svg"
set title "dreamddp:4, $who, last window of the run: backward ends (dots) and syncs (bars)"
set xlabel "seconds from the start of the window"
set ylabel "layer (backward order, top first)"
set yrange [-1:*] reverse
set key outside bottom center horizontal
set grid xtics
set palette defined (0 "#1b9e77", 1 "#d95f02", 2 "#7570b3", 3 "#e7298a")
set cbrange [0:3]
unset colorbox
plot "$tmp/timeline.dat" index 1 using 1:2:(\$1):(\$1+\$3):(\$2-0.3):(\$2+0.3):(int(\$4)%4) \
         with boxxyerrorbars fs solid 0.7 lc palette title "sync (colour: step of the window)", \
     "" index 0 using 1:2 with points pt 7 ps 0.6 lc rgb "black" title "layer backward done", \
     "" index 2 using (0):1:ytic(2) with points ps 0 notitle # layer names
GP
echo "bench/plots.sh: wrote $plots/timeline_dreamddp4.svg"
