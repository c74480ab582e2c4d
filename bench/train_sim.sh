#!/bin/sh
# bench/train_sim.sh: the train simulator on gpt2-blocks (scale 0.25) for
# every strategy, beside PyTorch's DDP and Local SGD (torch_sim.py) on the
# same 4 emulated hosts at 1 Gbit/s, interleaved over $ROUNDS rounds; then
# the table. The last round's dreamddp:4 run also writes rank 0's
# DREAMDDP_TIMELINE (results/timeline_dreamddp4.json) for bench/plots.sh.
# STRATEGIES and ANCHOR_MODES choose the runs; a strategy S/C runs S with
# --compression C (ddp/fp16 beside the anchor ddp-fp16, say).
# FORWARD=F emulates forward as F x each layer's backward on both sides
# (torch_sim.py's FORWARD, train-sim's --forward; default 0); a strategy
# with +next (dreamddp:4+next) marks each layer's forward as its deadline,
# or with DEADLINE=backward makes no marks (the deadline is the layer's
# next backward: the embedding's sync then hides behind a whole
# iteration).
# An entry S[/C][@K][%backward][%work] runs with K aggregators on hosts of
# their own (the cluster then has 4 + the largest K hosts), %backward makes
# that entry mark no forward whatever DEADLINE says, and %work runs it with
# --step-work (the training loop's own memory work, which torch_sim.py's
# loop does: zero_grad, gradient accumulation, the SGD step), so that its
# compute is PyTorch's; none%work is then its compute-only run. %sN runs it
# with N streams (--streams N: connections per peer and engine channels).
# %whole runs it with DREAMDDP_LAYER_SPLIT=no: no layer synced in parts;
# %fill with DREAMDDP_FILL_BUBBLES=yes, %nofill with no (default: unset).
# %bwlaunch runs a +next entry with DREAMDDP_NEXT_LAUNCH=backward: each
# sync leaves from its layer's dd_layer_ready instead of as early as the
# parameters allow. %nofinite runs it with DREAMDDP_CHECK_FINITE=no (by
# default warn, the library's default, looks at what is sent and what
# lands); %det with DREAMDDP_DETERMINISTIC=yes; %elastic with
# DREAMDDP_ELASTIC=yes and
# --commit-every 4 (each worker commits its layers every window, to a
# directory under /tmp, removed after).
# Results: results/train_sim.jsonl.
. "$(dirname "$0")/lib.sh"
out=$RESULTS/train_sim.jsonl
iters=${ITERS:-8}
strategies=${STRATEGIES:-none ddp localsgd:4 plsgd:4 dreamddp:4 adaptive}
anchors=${ANCHOR_MODES:-compute ddp localsgd:4}
forward=${FORWARD:-0}
deadline=${DEADLINE:-forward}

round() {
    for m in $anchors; do
        on_hosts 4 150 env SCALE=0.25 FORWARD="$forward" "$TORCH_PYTHON" \
            "$ANCHORS/torch_sim.py" "$m" "$iters" | keep "$out" "$1"
    done
    for entry in $strategies; do
        d=$deadline
        work=
        streams=
        split=auto
        fill=
        launch=early
        finite=warn
        det=no
        elastic=no
        every=4
        while :; do
            case $entry in
            *%elastic)
                elastic=yes
                entry=${entry%\%elastic}
                ;;
            *%elastic[0-9]*)
                elastic=yes
                every=${entry##*%elastic}
                entry=${entry%\%elastic*}
                ;;
            *%det)
                det=yes
                entry=${entry%\%det}
                ;;
            *%nofinite)
                finite=no
                entry=${entry%\%nofinite}
                ;;
            *%bwlaunch)
                launch=backward
                entry=${entry%\%bwlaunch}
                ;;
            *%nofill)
                fill=no
                entry=${entry%\%nofill}
                ;;
            *%fill)
                fill=yes
                entry=${entry%\%fill}
                ;;
            *%whole)
                split=no
                entry=${entry%\%whole}
                ;;
            *%backward)
                d=backward
                entry=${entry%\%backward}
                ;;
            *%work)
                work=--step-work
                entry=${entry%\%work}
                ;;
            *%s[1-8])
                streams="--streams ${entry##*%s}"
                entry=${entry%\%s[1-8]}
                ;;
            *) break ;;
            esac
        done
        k=0
        case $entry in *@*)
            k=${entry##*@}
            entry=${entry%@*}
            ;;
        esac
        # S/C: strategy S with --compression C.
        s=${entry%%/*}
        codec=
        # With a codec, layers are matrices of 768 columns, as torch_sim.py
        # shapes them (what powersgd factors).
        [ "$s" = "$entry" ] || codec="--compression ${entry#*/} --cols 768"
        timeline=
        if [ "$s" = dreamddp:4 ] && [ "$1" = "$ROUNDS" ]; then
            timeline=$RESULTS/timeline_dreamddp4.%r.json
        fi
        edir=
        [ "$elastic" = yes ] && edir=$(mktemp -d /dev/shm/dd-elastic.XXXXXX)
        on_hosts $((4 + k)) 150 env DREAMDDP_TIMELINE="$timeline" \
            DREAMDDP_ELASTIC=$elastic ${edir:+DREAMDDP_ELASTIC_DIR=$edir} \
            DREAMDDP_NUM_AGGREGATORS=$k DREAMDDP_LAYER_SPLIT=$split \
            DREAMDDP_NEXT_LAUNCH=$launch DREAMDDP_CHECK_FINITE=$finite \
            DREAMDDP_DETERMINISTIC=$det \
            ${fill:+DREAMDDP_FILL_BUBBLES=$fill} \
            "$DDBENCH" train-sim \
            --profile "$PROFILES/gpt2-blocks" --scale 0.25 --strategy "$s" \
            --forward "$forward" --deadline "$d" $work $streams \
            ${edir:+--commit-every $every} \
            $codec --iters "$iters" --json |
            sed "s/^{/{\"aggregators\":$k,\"elastic\":\"$elastic\",\"commit_every\":$every,\"check_finite\":\"$finite\",\"deterministic\":\"$det\",\"deadline\":\"$d\",\"next_launch\":\"$launch\",\"layer_split\":\"$split\",\"fill_bubbles\":\"${fill:-default}\",${streams:+\"streams_asked\":${streams#--streams },}/" |
            keep "$out" "$1"
        [ -z "$edir" ] || rm -rf "$edir"
    done
}

hosts=4
for entry in $strategies; do
    entry=${entry%%\%*}
    case $entry in
    *@*)
        k=${entry##*@}
        [ $((4 + k)) -le $hosts ] || hosts=$((4 + k))
        ;;
    esac
done
start_results "$out" $hosts
rounds cluster $hosts round
# The ranks' timelines, merged onto one clock, for the plot of one window
# across ranks.
if "$DDBENCH" timeline merge "$RESULTS"/timeline_dreamddp4.*.json \
    >"$RESULTS/timeline_dreamddp4.json.tmp"; then
    mv "$RESULTS/timeline_dreamddp4.json.tmp" "$RESULTS/timeline_dreamddp4.json"
    rm -f "$RESULTS"/timeline_dreamddp4.*.json
else
    rm -f "$RESULTS/timeline_dreamddp4.json.tmp"
fi
python3 "$here/report.py" train "$out"
