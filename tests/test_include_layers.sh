#!/bin/sh
# The layers of src/ call only downwards, as DESIGN.md draws them: nothing
# below src/api includes a header of src/sched or src/api; src/topo probes
# and chooses and never talks to the store (no src/boot header) nor sets
# another library's variables; src/core includes nothing above it. Read
# from the #include lines. And no code names a DD_* variable any more.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
cd "$top_srcdir/src" || exit 1

# Prints "file: header" for every quoted include of a file under $1 whose
# header starts with one of the prefixes that follow.
includes_of() {
    dir=$1
    shift
    for f in $(find "$dir" -name '*.c' -o -name '*.h' -o -name '*.cc' | sort); do
        sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
            while read -r h; do
                for p in "$@"; do
                    case $h in "$p"/*) echo "$f: $h" ;; esac
                done
            done
    done
}

check() {
    what=$1
    shift
    bad=$(includes_of "$@")
    if [ -z "$bad" ]; then
        pass "$what"
    else
        fail "$what:"
        echo "$bad"
    fi
}

# Prints "file: header" for every quoted include of a file under $1 whose
# header starts with none of the prefixes that follow.
includes_outside() {
    dir=$1
    shift
    for f in $(find "$dir" -name '*.c' -o -name '*.h' | sort); do
        sed -n 's/^[[:space:]]*#[[:space:]]*include[[:space:]]*"\([^"]*\)".*/\1/p' "$f" |
            while read -r h; do
                ok=no
                for p in "$@"; do
                    case $h in "$p"/*) ok=yes ;; esac
                done
                [ $ok = yes ] || echo "$f: $h"
            done
    done
}

# check_only WHAT DIR ALLOWED...: DIR includes only those folders.
check_only() {
    what=$1
    shift
    bad=$(includes_outside "$@")
    if [ -z "$bad" ]; then
        pass "$what"
    else
        fail "$what:"
        echo "$bad"
    fi
}

# src/sched in four parts: the planner is pure (core alone), the engine
# runs jobs (core alone), the routes reach the wire (the layers below the
# scheduler, and the engine's jobs), and the runtime at src/sched uses them
# all; none of the three below the runtime includes it.
check_only "src/sched/plan includes only core and itself" sched/plan core sched/plan
check_only "src/sched/engine includes only core and itself" sched/engine core sched/engine
check_only "src/sched/route includes the layers below and the engine, never the runtime" \
    sched/route core boot backends device compress agg sched/engine sched/route

for d in backends topo core compress agg device; do
    [ -d "$d" ] || continue
    check "src/$d includes nothing of src/sched or src/api" "$d" sched api
done
check "src/topo includes no src/boot header" topo boot
check "src/core includes nothing above it" core boot topo backends device \
    compress agg sched api
check "src/boot includes only src/core" boot topo backends device compress \
    agg sched api
if grep -nE '\<(setenv|putenv|unsetenv)\>' topo/*.c topo/*.h >"$TMP/setenv"; then
    fail "src/topo sets environment variables:"
    sed 's/^/    /' "$TMP/setenv"
else
    pass "src/topo sets no environment variable"
fi

# Strings that start with DD_ are status names (dd_status_string), never
# variables: those are DREAMDDP_*.
cd "$top_srcdir" || exit 1
if grep -rnoE '"DD_[A-Z0-9_]*' src tools include examples |
    grep -vE '"DD_(OK|INPROGRESS|ERR_[A-Z_]*|STATUS_UNKNOWN)$' >"$TMP/dd"; then
    fail "code names DD_* variables:"
    sed 's/^/    /' "$TMP/dd"
else
    pass "no code names a DD_* variable"
fi
finish
