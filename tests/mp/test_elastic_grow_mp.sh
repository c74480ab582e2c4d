#!/bin/sh
# Elastic commits beyond a lost rank: a fifth worker without a commit takes
# the others' (their bits under ddp, their average under dreamddp:4); and
# ddrun --elastic --min: a job that would go on with fewer workers stops,
# saying so.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/mp/elastic_lib.sh"
# A worker without a commit (a fifth, new one) takes the others': under
# ddp the bits they share, under dreamddp:4 their replicas' average. The
# two runs are one job (one token): another job's commits are not taken.
for s in ddp dreamddp:4; do
    dir=$TMP/grow-$s
    mkdir -p "$dir"
    DREAMDDP_JOB_TOKEN=grow$$ DREAMDDP_ELASTIC=yes DREAMDDP_ELASTIC_DIR=$dir "$DDRUN" -n 4 -- "$TRAIN" \
        --strategy "$s" --steps 40 --commit-every 20 --data global >"$TMP/grow0-$s" 2>&1
    DREAMDDP_JOB_TOKEN=grow$$ DREAMDDP_ELASTIC=yes DREAMDDP_ELASTIC_DIR=$dir "$DDRUN" -n 5 -- "$TRAIN" \
        --strategy "$s" --steps 60 --commit-every 20 --data global >"$TMP/grow1-$s" 2>&1
    how="the average of 4 worker(s)' commits"
    [ "$s" = ddp ] && how="the same bits in 4 worker(s)' commits"
    expect_grep "$TMP/grow1-$s" "4: [rank 4] dreamddp WARN boot: elastic: generation 0 of 5 workers resumes at step 40, $how (this worker's: none)" "$s: a new worker takes $how"
    expect_grep "$TMP/grow1-$s" "0: done: $s, 5 workers, 60 steps" "$s: 5 workers go on from step 40"
done

# --min: 2 workers, one lost, no restarts: the job stops.
timeout -s KILL 120 "$DDRUN" --elastic -n 2 --min 2 --max-restarts 0 -- \
    sh -c 'if [ "$DREAMDDP_RANK" = 1 ]; then sleep 1; kill -9 $$; fi; exec "$0" --steps 100000' "$TRAIN" \
    >"$TMP/min" 2>&1
rc=$?
if [ "$rc" != 0 ]; then pass "--min: ddrun exited $rc"; else fail "--min: ddrun exited 0"; fi
expect_grep "$TMP/min" "ddrun: 1 worker left, fewer than --min 2: the job stops" "--min: says why it stops"
finish
