#!/bin/sh
# Jobs started with a launcher's variables faked and no address set by
# hand: Slurm (rank 0 on the first host of the step's node list), Open MPI
# on several hosts (mpirun's host from OMPI_MCA_orte_hnp_uri) and the errors
# when rank 0's host cannot be found, is not mpirun's, or the PMIx server
# the variables name does not answer.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
SMOKE=$top_builddir/examples/smoke
unset MASTER_ADDR MASTER_PORT RANK WORLD_SIZE DREAMDDP_MASTER_ADDR \
    DREAMDDP_MASTER_PORT DREAMDDP_RANK DREAMDDP_WORLD_SIZE DREAMDDP_JOB_TOKEN
export DREAMDDP_TIMEOUT_S=10
job=$$$(date +%s) # keeps the derived store port apart from other runs

# fake N OUTPREFIX VARS CMD...: N ranks by hand, each with VARS (evaluated
# with $r, the rank, set) exported; outputs and exit codes as launch's.
fake() {
    n=$1; out=$2; vars=$3; shift 3
    pids=""
    r=0
    while [ "$r" -lt "$n" ]; do
        (eval "export $vars"; "$@" >"$out.$r" 2>&1; echo $? >"$out.$r.rc") &
        pids="$pids $!"
        r=$((r + 1))
    done
    for p in $pids; do wait "$p"; done
}

ok_all() { # N OUTPREFIX WHAT
    r=0
    while [ "$r" -lt "$1" ]; do
        [ "$(cat "$2.$r.rc")" = 0 ] && pass "$3: rank $r" || { fail "$3: rank $r exited $(cat "$2.$r.rc")"; sed 's/^/    /' "$2.$r"; }
        r=$((r + 1))
    done
}

# Slurm: the step's node list starts with this host; the other names need
# not resolve, since only the first is used.
host=$(hostname)
getent hosts "$host" >/dev/null 2>&1 || host=localhost
fake 3 "$TMP/slurm" 'SLURM_PROCID=$r SLURM_NTASKS=3 SLURM_LOCALID=$r SLURM_JOB_ID=$job SLURM_STEP_ID=0 SLURM_STEP_NODELIST="$host,node[02-03]"' \
    env DREAMDDP_LOG_LEVEL=info DREAMDDP_LOG_SUBSYS=boot "$SMOKE"
ok_all 3 "$TMP/slurm" "Slurm variables without MASTER_ADDR"
expect_grep "$TMP/slurm.0" "store at $host:" "Slurm: the store is on the first host"
expect_grep "$TMP/slurm.0" "from the first host of SLURM_STEP_NODELIST" "Slurm: the log says where the address came from"
expect_grep "$TMP/slurm.0" "smoke: 3 ranks (3 workers) met at the barrier" "Slurm: the ranks meet"

# Open MPI on "two hosts" (each rank alone on its host, as Open MPI would
# say): the store is on mpirun's host, here this one.
ip=$(hostname -I 2>/dev/null | tr ' ' '\n' | grep -E '^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$' | grep -v '^127\.' | head -n 1)
ompi='OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_COMM_WORLD_LOCAL_SIZE=1 OMPI_MCA_orte_num_nodes=2 OMPI_MCA_ess_base_jobid=$job'
if [ -n "$ip" ]; then
    fake 2 "$TMP/ompi" "$ompi OMPI_MCA_orte_hnp_uri=\"$job.0;tcp://$ip:1;tcp6://[::1]:2\"" \
        env DREAMDDP_LOG_LEVEL=info DREAMDDP_LOG_SUBSYS=boot "$SMOKE"
    ok_all 2 "$TMP/ompi" "Open MPI on several hosts without MASTER_ADDR"
    expect_grep "$TMP/ompi.1" "store at $ip:" "Open MPI: the store is on mpirun's host"
    expect_grep "$TMP/ompi.0" "smoke: 2 ranks (2 workers) met at the barrier" "Open MPI: the ranks meet"
else
    echo "skip: no IPv4 address other than loopback for the Open MPI case"
fi

# mpirun's host is not rank 0's: rank 0 says so at once.
fake 1 "$TMP/away" "$ompi OMPI_MCA_orte_hnp_uri=\"$job.0;tcp://198.51.100.77:1\"" "$SMOKE"
[ "$(cat "$TMP/away.0.rc")" != 0 ] && pass "rank 0 away from mpirun's host fails" || fail "rank 0 away from mpirun's host passed"
expect_grep "$TMP/away.0" "rank 0 is not on mpirun's host 198.51.100.77" "rank 0 names mpirun's host"
expect_grep "$TMP/away.0" "DREAMDDP_MASTER_ADDR=HOST" "rank 0 says what to set"

# Several hosts and no contact URI: every rank says what to set.
fake 1 "$TMP/nouri" "$ompi" "$SMOKE"
[ "$(cat "$TMP/nouri.0.rc")" != 0 ] && pass "no address under Open MPI fails" || fail "no address under Open MPI passed"
expect_grep "$TMP/nouri.0" "no store address: Open MPI puts the ranks on several hosts" "the error says what the launcher lacks"
expect_grep "$TMP/nouri.0" "set DREAMDDP_MASTER_ADDR (or MASTER_ADDR) to rank 0's host" "the error names the variables"
# mpirun's per-job key (OMPI_MCA_orte_precondition_transports) is the job
# token when none is set: the ranks meet without a warning, and a process
# that knows only the job id, which used to be the token, is refused.
one='OMPI_COMM_WORLD_RANK=$r OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_RANK=$r OMPI_COMM_WORLD_LOCAL_SIZE=2 OMPI_MCA_orte_num_nodes=1 OMPI_MCA_ess_base_jobid=$job OMPI_MCA_orte_precondition_transports=5eed$job-0123456789abcdef'
fake 2 "$TMP/key" "$one" "$SMOKE"
ok_all 2 "$TMP/key" "Open MPI's job key as the token"
grep -q "open to anyone" "$TMP/key.0" && fail "rank 0 warns although mpirun gave a job key" || pass "no warning with mpirun's job key"
fake 2 "$TMP/nokey" "$one" env DREAMDDP_TIMEOUT_S=3 sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then unset OMPI_MCA_orte_precondition_transports; fi; exec "$0"' "$SMOKE"
[ "$(cat "$TMP/nokey.1.rc")" != 0 ] && pass "a process without the job key fails" || fail "a process with only the job id joined"
expect_grep "$TMP/nokey.1" "refused rank 1: the job token differs" "the store refuses a process with only the job id"

# A PMIx server that the variables name but nobody runs: built with PMIx,
# the error says which call failed and what to set, at once; without, the
# hint says PMIx would have found the address.
pmix='OMPI_COMM_WORLD_RANK=1 OMPI_COMM_WORLD_SIZE=2 OMPI_COMM_WORLD_LOCAL_SIZE=1 PMIX_NAMESPACE=$job PMIX_RANK=1 PMIX_SERVER_URI4="$job.0;tcp4://127.0.0.1:1"'
fake 1 "$TMP/deadpmix" "$pmix" timeout 20 "$SMOKE"
[ "$(cat "$TMP/deadpmix.0.rc")" = 1 ] && pass "an unreachable PMIx server fails dd_init" || fail "an unreachable PMIx server: exit $(cat "$TMP/deadpmix.0.rc")"
if grep -q '^#define HAVE_PMIX 1' "$top_builddir/config.h"; then
    expect_grep "$TMP/deadpmix.0" "PMIx_Init failed: UNREACHABLE" "the error names the PMIx call"
    expect_grep "$TMP/deadpmix.0" "set DREAMDDP_MASTER_ADDR to rank 0's host instead" "the error names the variable"
else
    expect_grep "$TMP/deadpmix.0" "built without PMIx (configure --with-pmix" "the error says PMIx is not built in"
fi
finish
