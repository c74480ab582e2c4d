# Helpers for the script tests. Sourced; expects top_builddir and DDRUN from
# the test harness (Makefile.am), and falls back to this tree when run alone.
# The tree is the nearest folder above the script that holds configure.ac.
if [ -z "${top_srcdir:-}" ]; then
    top_srcdir=$(cd "$(dirname "$0")" && pwd)
    while [ "$top_srcdir" != / ] && [ ! -f "$top_srcdir/configure.ac" ]; do
        top_srcdir=$(dirname "$top_srcdir")
    done
fi
: "${top_builddir:=$top_srcdir}"
: "${DDRUN:=$top_builddir/tools/ddrun}"
TMP=$(mktemp -d "${TMPDIR:-/tmp}/dd-test.XXXXXX")
trap 'rm -rf "$TMP"' EXIT
failures=0

fail() {
    echo "FAIL: $*"
    failures=$((failures + 1))
}

pass() {
    echo "ok: $*"
}

# expect_grep FILE PATTERN WHAT: FILE must contain the fixed string PATTERN.
expect_grep() {
    if grep -qF -- "$2" "$1"; then
        pass "$3"
    else
        fail "$3: '$2' not in $1:"
        sed 's/^/    /' "$1"
    fi
}

# launch N OUTPREFIX CMD...: starts N ranks by hand (not through ddrun, so a
# failing rank does not stop the others), each with DREAMDDP_RANK and its output in
# OUTPREFIX.R, and waits for all; their exit codes go in OUTPREFIX.R.rc.
launch() {
    n=$1; out=$2; shift 2
    port=$(free_port)
    pids=""
    r=0
    while [ "$r" -lt "$n" ]; do
        (DREAMDDP_RANK=$r DREAMDDP_WORLD_SIZE=$n DREAMDDP_MASTER_ADDR=127.0.0.1 \
         DREAMDDP_MASTER_PORT=$port "$@" >"$out.$r" 2>&1; echo $? >"$out.$r.rc") &
        pids="$pids $!"
        r=$((r + 1))
    done
    for p in $pids; do wait "$p"; done
}

free_port() {
    python3 -c 'import socket; s=socket.socket(); s.bind(("",0)); print(s.getsockname()[1])'
}

# free_port_pair: a port P such that P and P + 1 are both free now (a
# torchrun job's MASTER_PORT, beside which dreamddp's store takes P + 1).
free_port_pair() {
    python3 -c '
import socket
for _ in range(100):
    a = socket.socket(); a.bind(("", 0)); p = a.getsockname()[1]
    b = socket.socket()
    try:
        b.bind(("", p + 1))
    except OSError:
        continue
    print(p)
    break
'
}

finish() {
    if [ "$failures" -ne 0 ]; then
        echo "$failures check(s) failed"
        exit 1
    fi
    exit 0
}
