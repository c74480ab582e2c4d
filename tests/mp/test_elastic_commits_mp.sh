#!/bin/sh
# Elastic commits that cannot be damaged, shared or planted (issue 58,
# rows 1, 2 and 11): train_mlp under ddp, 3 workers, committing every 20
# steps. A job of 60 steps leaves its commits (steps 40 and 60) in a
# directory; a second job of the same token resumes from them to step 100,
# as a restarted generation does:
# - one byte of worker 1's newest slot flipped: that slot is skipped,
#   naming it, and every worker resumes at step 40, ending with the bits
#   of an uninterrupted run (today: restored silently, replicas apart);
# - that slot cut to half its size: the same (today: the job stops);
# - both of worker 1's slots damaged: the job stops naming rank 1 and a
#   slot;
# - a byte flipped and the checksum made to match: the workers' digests
#   differ under ddp, and the job stops naming worker rank 1;
# - a symbolic link, or another user's file, at a slot's name: refused,
#   naming it, and the link's target is left as it was (today: truncated
#   and written through);
# - a directory others can write in, or another user's: refused, naming it,
#   by ddrun --elastic and by the library;
# - two ddrun --elastic jobs with the same DREAMDDP_ELASTIC_DIR: the second
#   is refused naming the first's pid, the first ends with exit 0 and the
#   bits of a job that ran alone (today: the second truncates the first's
#   slots).
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/mp/elastic_lib.sh"
# No step is timed here: a generous bound keeps a loaded machine's slow
# step (rank 0 evaluates alone) from failing a sync.
export DREAMDDP_TIMEOUT_S=60

# job NAME DIR STEPS [ENV...]: train_mlp, 3 workers, its commits in DIR.
job() {
    name=$1 dir=$2 steps=$3; shift 3
    env DREAMDDP_JOB_TOKEN=commits$$ DREAMDDP_ELASTIC=yes \
        DREAMDDP_ELASTIC_DIR="$dir" "$@" timeout -s KILL 120 "$DDRUN" -n 3 -- \
        "$TRAIN" --strategy ddp --steps "$steps" --commit-every 20 \
        --data global >"$TMP/$name" 2>&1
    echo $? >"$TMP/$name.rc"
}

# damaged NAME: a directory holding the commits of steps 40 and 60.
damaged() {
    mkdir -p "$TMP/$1"
    job "$1-first" "$TMP/$1" 60
    [ "$(cat "$TMP/$1-first.rc")" = 0 ] || {
        fail "$1: the first job failed"
        cat "$TMP/$1-first"
    }
}

# The newest (step 60) of worker I's slots, in DIR: slot 0 (20, 40, 60).
newest() { ls "$1"/commit-*g0-i"$2".0; }

# flip FILE OFFSET [SUM]: XOR 1 into the byte at OFFSET (the high byte of
# a parameter: it is multiplied or divided by 4); with SUM, the header's
# checksum is made to match the damaged body.
flip() {
    python3 - "$@" <<'EOF'
import struct, sys
path, at = sys.argv[1], int(sys.argv[2])
b = bytearray(open(path, "rb").read())
b[at] ^= 1
if len(sys.argv) > 3:
    h = 0xcbf29ce484222325
    body = b[64:]
    n = len(body) // 8 * 8
    for (w,) in struct.iter_unpack("<Q", body[:n]):
        h = ((h ^ w) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    for c in body[n:]:
        h = ((h ^ c) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
    b[56:64] = struct.pack("<Q", h)
open(path, "r+b").write(b)
EOF
}

mkdir -p "$TMP/d-base"
job base "$TMP/d-base" 100
base=$(params "$TMP/base")
[ -n "$base" ] || { fail "the uninterrupted run"; cat "$TMP/base"; }

# A flipped byte and a cut slot: worker 1 takes its older slot.
damaged flip
slot=$(newest "$TMP/flip" 1)
flip "$slot" 203
job flip-again "$TMP/flip" 100
damaged cut
slot_cut=$(newest "$TMP/cut" 1)
truncate -s 600000 "$slot_cut"
job cut-again "$TMP/cut" 100
for c in flip cut; do
    out=$TMP/$c-again
    [ "$c" = flip ] && s=$slot why="its body does not match its checksum"
    [ "$c" = cut ] && s=$slot_cut why="(cut short?)"
    if [ "$(cat "$out.rc")" = 0 ]; then pass "$c: exit 0"; else fail "$c: exit $(cat "$out.rc")"; cat "$out"; fi
    expect_grep "$out" "1: [rank 1] dreamddp WARN boot: elastic restore: skipping $s: " "$c: the damaged slot is named"
    expect_grep "$out" "$why" "$c: says why"
    expect_grep "$out" "resumes at step 40, each worker from its own commit" "$c: every worker resumes at the older step"
    got=$(params "$out")
    if [ -n "$base" ] && [ "$got" = "$base" ]; then
        pass "$c: the uninterrupted run's bits ($got)"
    else
        fail "$c: parameters '$got', uninterrupted '$base'"
    fi
done

# Both of worker 1's slots damaged: nothing whole is left, and it stops.
damaged none
for f in "$TMP/none"/commit-*g0-i1.*; do flip "$f" 203; done
job none-again "$TMP/none" 100
if [ "$(cat "$TMP/none-again.rc")" != 0 ]; then pass "none whole: the job stops"; else fail "none whole: exit 0"; fi
expect_grep "$TMP/none-again" "rank 1 (worker id 1) has no whole commit left: 2 slot(s) damaged, the last $TMP/none/commit-" "none whole: names the rank and a slot"

# A damaged body that its checksum matches: the replicas' digests differ.
damaged digest
flip "$(newest "$TMP/digest" 1)" 203 sum
job digest-again "$TMP/digest" 100
if [ "$(cat "$TMP/digest-again.rc")" != 0 ]; then pass "digest: the job stops"; else fail "digest: exit 0"; fi
expect_grep "$TMP/digest-again" "the commits of step 60 differ: worker rank(s) 1 hold parameters other than rank 0's" "digest: names worker rank 1"

# Planted at a slot's name: a link (to a file that must stay as it was)
# and another user's file.
damaged link
echo precious >"$TMP/victim"
slot=$(ls "$TMP/link"/commit-*g0-i0.1)
rm "$slot" && ln -s "$TMP/victim" "$slot"
job link-again "$TMP/link" 100
if [ "$(cat "$TMP/link-again.rc")" != 0 ]; then pass "link: the job stops"; else fail "link: exit 0"; fi
expect_grep "$TMP/link-again" "refusing $slot: it is a symbolic link" "link: refused, named"
if [ "$(cat "$TMP/victim")" = precious ]; then pass "link: its target untouched"; else fail "link: its target now holds '$(head -c 40 "$TMP/victim")'"; fi
damaged owner
slot=$(ls "$TMP/owner"/commit-*g0-i2.1)
chown nobody "$slot"
job owner-again "$TMP/owner" 100
if [ "$(cat "$TMP/owner-again.rc")" != 0 ]; then pass "owner: the job stops"; else fail "owner: exit 0"; fi
expect_grep "$TMP/owner-again" "refusing $slot: it is owned by uid $(id -u nobody)" "owner: refused, named"

# Directories: open to others' writes, or another user's.
mkdir "$TMP/open" "$TMP/theirs"
chmod 0777 "$TMP/open"
chown nobody "$TMP/theirs"
for d in open theirs; do
    why="has mode 777: other users can write in it"
    [ "$d" = theirs ] && why="is owned by uid $(id -u nobody), not by this job's user"
    DREAMDDP_ELASTIC_DIR=$TMP/$d timeout -s KILL 60 "$DDRUN" --elastic -n 2 -- \
        "$TRAIN" --steps 20 >"$TMP/dir-$d" 2>&1
    rc=$?
    if [ "$rc" != 0 ]; then pass "$d dir: ddrun exits $rc"; else fail "$d dir: ddrun exit 0"; fi
    expect_grep "$TMP/dir-$d" "DREAMDDP_ELASTIC_DIR=$TMP/$d $why" "$d dir: ddrun names it"
    job "lib-$d" "$TMP/$d" 20
    if [ "$(cat "$TMP/lib-$d.rc")" != 0 ]; then pass "$d dir: the library refuses it"; else fail "$d dir: the library took it"; fi
    expect_grep "$TMP/lib-$d" "DREAMDDP_ELASTIC_DIR=$TMP/$d $why" "$d dir: the library names it"
done

# Two jobs, one directory: the second is refused, the first runs on.
mkdir -p "$TMP/d-alone" "$TMP/shared"
two() { # two NAME DIR STEPS: ddrun --elastic, 2 workers
    DREAMDDP_ELASTIC_DIR=$2 timeout -s KILL 120 "$DDRUN" --elastic -n 2 -- \
        "$TRAIN" --strategy ddp --steps "$3" --commit-every 20 --data global \
        >"$TMP/$1" 2>&1
    echo $? >"$TMP/$1.rc"
}
two alone "$TMP/d-alone" 200
two first "$TMP/shared" 200 &
first=$!
w=0
while [ "$w" -lt 2400 ] && ! grep -q "^0: *50 " "$TMP/first" 2>/dev/null; do
    sleep 0.05; w=$((w + 1))
done
two second "$TMP/shared" 40
wait $first
if [ "$(cat "$TMP/second.rc")" != 0 ]; then pass "shared: the second job exits $(cat "$TMP/second.rc")"; else fail "shared: the second job exit 0"; cat "$TMP/second"; fi
expect_grep "$TMP/second" "ddrun: DREAMDDP_ELASTIC_DIR=$TMP/shared is in use by another job (ddrun pid " "shared: the second names the first"
if [ "$(cat "$TMP/first.rc")" = 0 ]; then pass "shared: the first exits 0"; else fail "shared: the first exit $(cat "$TMP/first.rc")"; cat "$TMP/first"; fi
a=$(params "$TMP/alone") b=$(params "$TMP/first")
if [ -n "$a" ] && [ "$a" = "$b" ]; then pass "shared: the first has the bits of a job alone ($a)"; else fail "shared: parameters '$b', alone '$a'"; fi
finish
