#!/bin/sh
# Elastic workers (ddrun --elastic) under ddp and localsgd:4: train_mlp,
# 4 workers, 300 steps (150 under the sanitizers), committing every 20;
# rank 2 is lost after step 100 (50) and the job is re-formed from the
# last commits (elastic_lib.sh):
# - kill -9: the survivors, each from its own commit, finish with 3;
# - kill -9 with --max-restarts 1: rank 2 is started again and the job
#   finishes with 4 and the uninterrupted run's bits (the same examples,
#   DREAMDDP_DETERMINISTIC, the ranks in their first order, each worker
#   from its own commit).
# Each resumes at the last commit before the fault. Where the world
# changed, the accuracy must end within 0.03 of the uninterrupted run's:
# this model's held-out accuracy at step 300 spreads by 0.04 over seeds,
# and bench/elastic.sh measures the differences over seeds against the
# 0.01 asked.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/mp/elastic_lib.sh"
strategy ddp
strategy localsgd:4
finish
