#!/bin/sh
# The tools of a build tree find that tree's modules with
# DREAMDDP_BACKEND_PATH unset: ddtopo (linked with the library's archive, so
# the code that looks for modules sits in tools/, not beside them in .libs)
# lists the backends and loads the fake device from the tree's .libs, and
# ddbench coll runs an allreduce through gloo on 2 ranks.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
unset DREAMDDP_BACKEND_PATH DREAMDDP_BACKENDS DREAMDDP_LOG_LEVEL
libs=$(cd "$top_builddir/.libs" 2>/dev/null && pwd) || libs=""
if [ -z "$libs" ] || [ ! -f "$libs/dd_backend_gloo.so" ] ||
    [ ! -f "$libs/dd_device_fake.so" ]; then
    echo "SKIP: no gloo backend or fake device module in the build tree's .libs"
    exit 77
fi
tools=$(cd "$top_builddir/tools" && pwd)

# From another directory, by its full name and by a bare name through PATH.
(cd "$TMP" && DREAMDDP_DEVICE=fake "$tools/ddtopo") >"$TMP/topo" 2>&1 ||
    fail "ddtopo exited $?"
expect_grep "$TMP/topo" "gloo  available: $tools/../.libs/dd_backend_gloo.so" \
    "ddtopo by its path loads gloo from the build tree"
expect_grep "$TMP/topo" "fake: module $tools/../.libs/dd_device_fake.so" \
    "ddtopo by its path loads the fake device from the build tree"
(cd "$TMP" && PATH="$tools:$PATH" ddtopo) >"$TMP/topo2" 2>&1 ||
    fail "ddtopo through PATH exited $?"
expect_grep "$TMP/topo2" "gloo  available: $tools/../.libs/dd_backend_gloo.so" \
    "ddtopo through PATH loads gloo from the build tree"

(cd "$TMP" && timeout 60 "$DDRUN" -n 2 "$tools/ddbench" coll --op allreduce \
    --backend gloo --bytes 64K --iters 2) >"$TMP/coll" 2>&1 ||
    fail "ddbench coll exited $?"
if grep -Eq '^0: +65536 +16384 +f32 .* yes$' "$TMP/coll"; then
    pass "ddbench coll allreduces through the build tree's gloo"
else
    fail "ddbench coll did not allreduce:"
    sed 's/^/    /' "$TMP/coll"
fi
[ "$failures" -eq 0 ] || exit 1
