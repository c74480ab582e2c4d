#!/bin/sh
# dreamddp.torch.elastic's commits cannot be planted (issue 58, row 11):
# examples/torch_digits.py, 2 workers, DREAMDDP_ELASTIC=yes with a commit
# directory of the test's.
# - A job of 60 steps, then one of 100 from the same directory: each worker
#   resumes at step 60 from its own commit (model, optimizer and DreamDDP
#   state through the loader that admits tensors and plain values only).
# - A pickle whose __reduce__ would create a marker file, planted as worker
#   0's commit (in this version's format, and in the one before): refused,
#   naming the file, and the marker does not exist (today: it runs).
# - A symbolic link at a commit's name, and a directory others can write
#   in: refused, naming them.
# Skips where the interpreter has no torch.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
. "$top_srcdir/tests/python/torch_lib.sh"
DIGITS=$top_srcdir/examples/torch_digits.py
export DREAMDDP_TIMEOUT_S=10

# digits NAME DIR STEPS: 2 workers, their commits in DIR.
digits() {
    DREAMDDP_ELASTIC=yes DREAMDDP_ELASTIC_DIR=$2 "$DDRUN" -n 2 --timeout 200 -- \
        "$DDTEST_PYTHON" "$DIGITS" --strategy ddp --deterministic \
        --steps "$3" >"$TMP/$1" 2>&1
    echo $? >"$TMP/$1.rc"
}

mkdir "$TMP/d-ok"
digits first "$TMP/d-ok" 60
digits again "$TMP/d-ok" 100
if [ "$(cat "$TMP/again.rc")" = 0 ]; then pass "resume: exit 0"; else fail "resume: exit $(cat "$TMP/again.rc")"; cat "$TMP/again"; fi
expect_grep "$TMP/again" "generation 0 of 2 workers resumes at step 60, each worker from its own commit" "resume: each worker from its own commit"
expect_grep "$TMP/again" "0: torch_digits: ddp, 2 workers, 100 steps" "resume: finished"

# The planted pickle: step 120 in this version's format (.1), step 100 in
# the one before (.0), so that today's code takes one too.
mkdir "$TMP/d-planted"
marker=$TMP/planted-ran
"$DDTEST_PYTHON" - "$TMP/d-planted" "$marker" <<'EOF'
import hashlib, io, os, struct, sys, torch
d, marker = sys.argv[1], sys.argv[2]
class Payload:
    def __reduce__(self):
        return (os.system, ("touch %s" % marker,))
buf = io.BytesIO()
torch.save({"model": Payload(), "optimizer": None, "dreamddp": None,
            "attributes": {}}, buf)
raw = buf.getvalue()
with open(os.path.join(d, "torch-commit-g0-i0.0"), "wb") as f:
    f.write(struct.pack("<8sQi", b"DDTORCH1", 100, 0) + raw)
with open(os.path.join(d, "torch-commit-g0-i0.1"), "wb") as f:
    f.write(struct.pack("<8sQi32s", b"DDTORCH2", 120, 0,
                        hashlib.sha256(raw).digest()) + raw)
EOF
digits planted "$TMP/d-planted" 140
if [ "$(cat "$TMP/planted.rc")" != 0 ]; then pass "planted: the job stops"; else fail "planted: exit 0"; fi
expect_grep "$TMP/planted" "elastic restore: refusing $TMP/d-planted/torch-commit-g0-i0.1: it holds more than tensors and plain values" "planted: refused, named"
if [ -e "$marker" ]; then fail "planted: its payload ran ($marker exists)"; else pass "planted: its payload did not run"; fi

# A link at a commit's name; a directory others can write in.
mkdir "$TMP/d-link"
cp "$TMP/d-ok/torch-commit-g0-i1.0" "$TMP/victim"
ln -s "$TMP/victim" "$TMP/d-link/torch-commit-g0-i1.0"
digits link "$TMP/d-link" 40
if [ "$(cat "$TMP/link.rc")" != 0 ]; then pass "link: the job stops"; else fail "link: exit 0"; fi
expect_grep "$TMP/link" "refusing $TMP/d-link/torch-commit-g0-i1.0: it is a symbolic link" "link: refused, named"
mkdir -m 0777 "$TMP/d-open"
digits open "$TMP/d-open" 40
if [ "$(cat "$TMP/open.rc")" != 0 ]; then pass "open dir: the job stops"; else fail "open dir: exit 0"; fi
expect_grep "$TMP/open" "DREAMDDP_ELASTIC_DIR=$TMP/d-open has mode 777: other users can write in it" "open dir: refused, named"
finish
