#!/bin/sh
# src/topo probes and chooses, and nothing more (STYLE.md, "Layers talk
# through what they are handed"): its files include only src/core and
# src/topo headers (never the store of src/boot, nor a layer above), and
# none sets an environment variable: backends hear of the choice through
# their services struct.
. "$(dirname "$0")/lib.sh"
cd "$top_srcdir" || exit 99

if grep -n '#include "' src/topo/*.c src/topo/*.h |
    grep -v '#include "\(core\|topo\)/' >"$TMP/includes"; then
    fail "src/topo includes headers of other layers:"
    sed 's/^/    /' "$TMP/includes"
else
    pass "src/topo includes only src/core and src/topo headers"
fi
if grep -nE '\<(setenv|putenv|unsetenv)\>' src/topo/*.c src/topo/*.h \
    >"$TMP/setenv"; then
    fail "src/topo sets environment variables:"
    sed 's/^/    /' "$TMP/setenv"
else
    pass "src/topo sets no environment variable"
fi
finish
