#!/bin/sh
# Under ddrun every rank sees what torchrun --standalone sets (RANK,
# LOCAL_RANK, WORLD_SIZE, LOCAL_WORLD_SIZE, GROUP_RANK, ROLE_RANK,
# MASTER_ADDR, MASTER_PORT), over an outer launcher's values; aggregator
# ranks are in the world; the library's store takes MASTER_PORT+1, as under
# torchrun, so both stores bind: a C rank's dd_init on MASTER_PORT+1 while
# something else holds MASTER_PORT. And -e is --elastic, as documented.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"

RANK=9 WORLD_SIZE=12 LOCAL_RANK=3 MASTER_PORT=1 TORCHELASTIC_RUN_ID=outer \
    "$DDRUN" -n 3 --aggregators 1 -- sh -c 'echo "$RANK $WORLD_SIZE $LOCAL_RANK $LOCAL_WORLD_SIZE $GROUP_RANK $ROLE_RANK $MASTER_ADDR $MASTER_PORT $DREAMDDP_MASTER_PORT ${TORCHELASTIC_RUN_ID:-none}"' \
    >"$TMP/out" 2>&1 || fail "ddrun exited $?"
for r in 0 1 2; do
    if grep -Eq "^$r: $r 3 $r 3 0 $r 127\.0\.0\.1 [0-9]+ [0-9]+ none\$" "$TMP/out"; then
        pass "rank $r sees torchrun's variables (aggregators in the world)"
    else
        fail "rank $r's variables:"; sed 's/^/    /' "$TMP/out"
    fi
done
ports=$(sed -n 's/.* \([0-9]*\) \([0-9]*\) none$/\1 \2/p' "$TMP/out" | sort -u)
set -- $ports
if [ "$#" -eq 2 ] && [ "$2" -eq $(($1 + 1)) ]; then
    pass "one MASTER_PORT for all ranks, the library's store on the next port"
else
    fail "ports: '$ports'"
fi

# Both stores at once: a listener holds MASTER_PORT (as torch's store does)
# while two C ranks meet on the library's store and allreduce.
"$DDRUN" -n 2 -- sh -c '
    if [ "$RANK" = 0 ]; then
        python3 -c "import socket,sys,time
s=socket.socket(socket.AF_INET6); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((\"::\", int(sys.argv[1]))); s.listen(); print(\"holding\", sys.argv[1], flush=True); time.sleep(3)" "$MASTER_PORT" </dev/null 2>&1 &
        sleep 0.5
    fi
    '"$top_builddir"'/examples/smoke' >"$TMP/both" 2>&1 || fail "smoke beside a listener on MASTER_PORT exited $?"
expect_grep "$TMP/both" "0: holding " "a listener held MASTER_PORT"
expect_grep "$TMP/both" "0: smoke: 2 ranks (2 workers) met at the barrier" \
    "the library's store met beside it"

"$DDRUN" -e -n 2 -- sh -c 'echo "elastic=$DREAMDDP_ELASTIC"' >"$TMP/e" 2>&1 ||
    fail "ddrun -e exited $?"
expect_grep "$TMP/e" "1: elastic=yes" "-e is --elastic"
[ "$failures" -eq 0 ] || exit 1
