#!/bin/sh
# dreamddp.__version__ is the library's version (config/version.sh, as
# configure reads it), and python -m dreamddp.report prints what a bug
# report needs: the package's and the library's versions and whether they
# match, the library's path, every backend module built here (loading or
# not, with why), the interface ddtopo chooses, Python, PyTorch, CUDA,
# NCCL and the DREAMDDP_* variables set. Then the library's search: with
# neither DREAMDDP_LIBRARY, _config.py nor a build tree, pkg-config's libdir
# finds it; when nothing does, the ImportError says what was tried and how
# to fix it. Needs a Python, not torch.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
: "${DDTEST_PYTHON:=/usr/bin/python3}"
if ldd "$top_builddir/.libs/libdreamddp.so.1" 2>/dev/null | grep -q 'lib[atl]san'; then
    # Python would have to preload the sanitizer runtime (as torch_lib.sh).
    echo "SKIP: this build's libdreamddp is built with sanitizers; Python cannot load it"
    exit 77
fi

version=$(cd "$top_srcdir" && sh config/version.sh) || fail "config/version.sh failed"
lib="$top_builddir/.libs/libdreamddp.so.1"
out=$(PYTHONPATH="$top_srcdir/python" DREAMDDP_LIBRARY=$lib "$DDTEST_PYTHON" -c 'import dreamddp; print(dreamddp.__version__)' 2>&1)
[ "$out" = "$version" ] && pass "dreamddp.__version__ is $version" ||
    fail "dreamddp.__version__ is '$out', configure's version is '$version' (python/dreamddp/_version.py)"

(cd "$TMP" && PYTHONPATH="$top_srcdir/python" DREAMDDP_LIBRARY=$lib DREAMDDP_LOG_LEVEL=warn \
    "$DDTEST_PYTHON" -m dreamddp.report) >"$TMP/report" 2>&1
rc=$?
[ $rc -eq 0 ] && pass "python -m dreamddp.report exits 0" || fail "python -m dreamddp.report exited $rc"
field() { sed -n "s/^$1   *//p" "$TMP/report"; }
case $(field "dreamddp package") in "$version ($top_srcdir/python/dreamddp)") pass "package version and place" ;;
    *) fail "dreamddp package line: '$(field "dreamddp package")'" ;; esac
[ "$(field "dreamddp library")" = "$version" ] && pass "library version $version" || fail "dreamddp library line: '$(field "dreamddp library")'"
[ "$(field "versions match")" = yes ] && pass "versions match" || fail "versions match line: '$(field "versions match")'"
case $(field "library path") in "$(cd "$top_builddir/.libs" && pwd)/libdreamddp.so"*"(found by DREAMDDP_LIBRARY)") pass "library path" ;;
    *) fail "library path line: '$(field "library path")'" ;; esac
for m in "$top_builddir"/.libs/dd_backend_*.so; do
    [ -f "$m" ] || continue
    name=${m##*/dd_backend_}; name=${name%.so}
    grep -Eq "^backend module +$name: (loads|does not load: .+) \(.*/dd_backend_$name\.so\)\$" "$TMP/report" &&
        pass "backend module $name listed" || fail "backend module $name is not listed"
done
if grep -q '^backend module  *gloo:' "$TMP/report"; then
    grep -q '^backend module  *gloo: loads' "$TMP/report" && pass "gloo loads" || fail "gloo does not load: $(grep gloo "$TMP/report")"
fi
chosen=$(DREAMDDP_BACKEND_PATH= "$top_builddir/tools/ddtopo" --json | "$DDTEST_PYTHON" -c 'import json, sys; print((json.load(sys.stdin)["chosen"] or {}).get("name"))')
case $(field "network interface") in "$chosen ("*) pass "network interface $chosen, as ddtopo chooses" ;;
    *) fail "network interface line: '$(field "network interface")', ddtopo chooses $chosen" ;; esac
for key in Python PyTorch "CUDA available" "PyTorch NCCL"; do
    [ -n "$(field "$key")" ] && pass "$key: $(field "$key")" || fail "no $key line"
done
grep -q '^variable  *DREAMDDP_LOG_LEVEL=warn$' "$TMP/report" && pass "DREAMDDP_LOG_LEVEL listed" || fail "DREAMDDP_LOG_LEVEL not listed"
[ $failures -eq 0 ] || sed 's/^/    /' "$TMP/report"

# pkg-config's libdir, from a copy of the package with no _config.py and no
# build tree above it.
mkdir -p "$TMP/py" "$TMP/pc"
cp -r "$top_srcdir/python/dreamddp" "$TMP/py/"
rm -f "$TMP/py/dreamddp/_config.py"
printf 'libdir=%s\nName: dreamddp\nDescription: test\nVersion: %s\n' \
    "$(cd "$top_builddir/.libs" && pwd)" "$version" >"$TMP/pc/dreamddp.pc"
if command -v pkg-config >/dev/null 2>&1; then
    out=$(cd "$TMP" && env -u DREAMDDP_LIBRARY PYTHONPATH="$TMP/py" PKG_CONFIG_PATH="$TMP/pc" \
        "$DDTEST_PYTHON" -m dreamddp.report 2>&1 | sed -n 's/^library path  *//p')
    case $out in *"(found by pkg-config's libdir)") pass "found by pkg-config: $out" ;;
        *) fail "with only pkg-config to find it: library path '$out'" ;; esac
else
    echo "pkg-config absent: its step not tried"
fi
out=$(cd "$TMP" && env -u DREAMDDP_LIBRARY PYTHONPATH="$TMP/py" PKG_CONFIG_PATH="$TMP/none" PKG_CONFIG_LIBDIR="$TMP/none" \
    LD_LIBRARY_PATH="$TMP/none" "$DDTEST_PYTHON" -c '
import dreamddp
try:
    dreamddp.version()
except ImportError as e:
    print("ImportError:", e)' 2>&1)
case $out in
"") echo "a libdreamddp is installed system-wide: the not-found case is not tried" ;;
"ImportError: libdreamddp not found. Tried: "*"pip install ."*"set DREAMDDP_LIBRARY"*) pass "not found: an ImportError saying what was tried and how to fix it" ;;
*) fail "library nowhere: '$out'" ;;
esac
out=$(cd "$TMP" && PYTHONPATH="$top_srcdir/python" DREAMDDP_LIBRARY="$TMP/nowhere.so" "$DDTEST_PYTHON" -m dreamddp.report 2>&1)
rc=$?
[ $rc -eq 1 ] && printf '%s\n' "$out" | grep -q "NOT LOADED: libdreamddp not found. Tried: $TMP/nowhere.so (DREAMDDP_LIBRARY)" &&
    pass "report on a missing library exits 1 saying what was tried" || fail "report on a missing library exited $rc: $out"
finish
