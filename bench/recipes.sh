#!/bin/sh
# bench/recipes.sh: runs doc/running.md's multi-machine recipes on two
# emulated hosts (netcluster, 1 Gbit/s), two processes a host, with the
# PyTorch DDP tutorial script (examples/torch_ddp_tutorial.py, strategy ddp)
# and the C example (examples/train_mlp). The launchers themselves are not
# run, since this machine has none that can start workers on two hosts:
# Debian's torchrun cannot start workers on this Python, Open MPI's mpirun
# and Slurm are not installed. Each process gets what the launcher would
# give it (torchrun's RANK, LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE,
# GROUP_RANK, MASTER_ADDR, MASTER_PORT, TORCHELASTIC_RUN_ID; Slurm's
# SLURM_PROCID, SLURM_NTASKS, SLURM_LOCALID, SLURM_JOB_ID, SLURM_NODEID;
# Open MPI's OMPI_COMM_WORLD_*), and runs the very command line the recipe
# gives the launcher. Needs root; prints one line a recipe and exits 1 when
# one fails.
. "$(dirname "$0")/lib.sh"
PY=$TORCH_PYTHON
TUTORIAL=$top/examples/torch_ddp_tutorial.py
MLP=$builddir/examples/train_mlp
export PYTHONPATH=$top/python DREAMDDP_LIBRARY=$builddir/.libs/libdreamddp.so.1
export OMP_NUM_THREADS=1 GLOO_SOCKET_IFNAME=eth0
unset DREAMDDP_BACKEND_PATH # the build tree's tools and library find their modules
NPROC=2

# procs NAME LAUNCHER-ENV-FN CMD: NPROC processes on each of the 2 hosts,
# each with the variables the function prints for (host, local); the
# rank-0 output in $out/NAME.log.
procs() {
    name=$1 envfn=$2
    shift 2
    pids=""
    for h in 0 1; do
        l=0
        while [ $l -lt $NPROC ]; do
            # shellcheck disable=SC2046
            env $($envfn $h $l) timeout -k 5 120 "$NC" exec $h "$@" \
                >"$out/$name.$h.$l.log" 2>&1 &
            pids="$pids $!"
            l=$((l + 1))
        done
    done
    rc=0
    for p in $pids; do wait "$p" || rc=1; done
    result=$(grep -h 'epoch 1:\|^done:' "$out/$name".0.0.log | tail -n 1)
    if [ $rc -eq 0 ]; then
        echo "recipe $name: ok: $result"
    else
        echo "recipe $name: FAILED"
        tail -n 5 "$out/$name".*.log
        failed=1
    fi
}

torchrun_env() {
    echo RANK=$(($1 * NPROC + $2)) LOCAL_RANK=$2 GROUP_RANK=$1 \
        WORLD_SIZE=$((2 * NPROC)) LOCAL_WORLD_SIZE=$NPROC \
        MASTER_ADDR=$master MASTER_PORT=$port TORCHELASTIC_RUN_ID=recipe$port
}

slurm_env() {
    echo SLURM_PROCID=$(($1 * NPROC + $2)) SLURM_LOCALID=$2 SLURM_NODEID=$1 \
        SLURM_NTASKS=$((2 * NPROC)) SLURM_NTASKS_PER_NODE=$NPROC \
        SLURM_JOB_ID=4242 MASTER_ADDR=$master MASTER_PORT=$port
}

ompi_env() {
    echo OMPI_COMM_WORLD_RANK=$(($1 * NPROC + $2)) OMPI_COMM_WORLD_LOCAL_RANK=$2 \
        OMPI_COMM_WORLD_SIZE=$((2 * NPROC)) OMPI_COMM_WORLD_LOCAL_SIZE=$NPROC \
        OMPI_COMM_WORLD_NODE_RANK=$1 MASTER_ADDR=$master MASTER_PORT=$port
}

# The CPU aggregators on host 1, the workers on host 0: torchrun
# --node-rank 1 on the CPU node, DREAMDDP_NUM_AGGREGATORS on every node.
agg_env() {
    echo $(torchrun_env "$1" "$2") DREAMDDP_NUM_AGGREGATORS=$NPROC
}

recipes() {
    master=$("$NC" addr 0)
    failed=0
    port=29710
    procs torchrun torchrun_env "$PY" "$TUTORIAL" --strategy ddp
    port=29720
    # The line the sbatch script gives srun (doc/running.md).
    procs slurm slurm_env sh -c 'RANK=$SLURM_PROCID LOCAL_RANK=$SLURM_LOCALID WORLD_SIZE=$SLURM_NTASKS LOCAL_WORLD_SIZE=$SLURM_NTASKS_PER_NODE exec "$0" "$@"' \
        "$PY" "$TUTORIAL" --strategy ddp
    port=29730
    # The line mpirun runs on every host (doc/running.md).
    procs mpirun ompi_env sh -c 'RANK=$OMPI_COMM_WORLD_RANK LOCAL_RANK=$OMPI_COMM_WORLD_LOCAL_RANK WORLD_SIZE=$OMPI_COMM_WORLD_SIZE LOCAL_WORLD_SIZE=$OMPI_COMM_WORLD_LOCAL_SIZE exec "$0" "$@"' \
        "$PY" "$TUTORIAL" --strategy ddp
    port=29740
    procs mpirun-c ompi_env "$MLP" --strategy dreamddp:4 --steps 60
    port=29750
    procs workers-and-aggregators agg_env "$PY" "$TUTORIAL" --strategy ddp
    port=29760
    procs workers-and-aggregators-c agg_env "$MLP" --strategy dreamddp:4 --steps 60
    return $failed
}

out=$(mktemp -d "${TMPDIR:-/tmp}/dd-recipes.XXXXXX")
echo "recipes: logs in $out"
mkdir -p "$RESULTS"
{
    echo "# bench/recipes.sh, $(date -u +%Y-%m-%dT%H:%MZ), 2 emulated hosts at $RATE, $(getconf _NPROCESSORS_ONLN) cores"
    cluster 2 recipes
} 2>&1 | tee "$RESULTS/recipes.txt"
grep -q FAILED "$RESULTS/recipes.txt" && exit 1
exit 0
