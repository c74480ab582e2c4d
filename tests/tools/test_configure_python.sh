#!/bin/sh
# Which Python configure takes for the package and the tests, and that it
# says why: PYTHON; the active virtual environment (VIRTUAL_ENV) or conda
# environment (CONDA_PREFIX); the first python3 on PATH that imports torch,
# past one that does not; a PYTHON that is no interpreter is an error naming
# PYTHON. Runs configure from make distdir's copy (the tree may be
# configured in place), with a cache for the other checks. Long: five
# configure runs.
. "${top_srcdir:-$(dirname "$0")/../..}/tests/lib.sh"
py=${DDTEST_PYTHON:-/usr/bin/python3}
"$py" -c 'import torch' 2>/dev/null || { echo "SKIP: $py cannot import torch"; exit 77; }
[ -f "$top_builddir/Makefile" ] || { echo "SKIP: no configured build tree at $top_builddir"; exit 77; }
make -s -C "$top_builddir" distdir distdir="$TMP/src" >"$TMP/distdir" 2>&1 || { cat "$TMP/distdir"; fail "make distdir"; finish; }

# Interpreters: an environment whose python3 is $py (it imports torch), and
# a python3 that cannot import torch ($py without its site directories).
mkdir -p "$TMP/env/bin" "$TMP/notorch"
ln -s "$py" "$TMP/env/bin/python3"
printf '#!/bin/sh\nexec %s -S "$@"\n' "$py" >"$TMP/notorch/python3"
chmod +x "$TMP/notorch/python3"
"$TMP/notorch/python3" -c 'import torch' 2>/dev/null && { echo "SKIP: $py -S still imports torch"; exit 77; }

# took SETTINGS...: the interpreter configure took, and why.
took() {
    rm -rf "$TMP/b" && mkdir "$TMP/b"
    # The cache keeps PYTHON (a precious variable): none where it is set.
    cache=$TMP/cache
    case "$*" in *PYTHON=*) cache=/dev/null ;; esac
    (cd "$TMP/b" && env -u VIRTUAL_ENV -u CONDA_PREFIX -u PYTHON "$@" "$TMP/src/configure" --cache-file="$cache" \
        --without-ucx --without-gloo --without-nccl --without-cuda --without-hwloc --without-pmix >"$TMP/log" 2>&1)
    echo "rc=$? $(sed -n 's/^checking for the Python of the dreamddp package\.\.\. //p' "$TMP/log")"
}

for case in \
    "VIRTUAL_ENV=$TMP/env|rc=0 $TMP/env/bin/python3 (torch: yes): the active virtual environment (VIRTUAL_ENV)" \
    "CONDA_PREFIX=$TMP/env|rc=0 $TMP/env/bin/python3 (torch: yes): the active conda environment (CONDA_PREFIX)" \
    "PYTHON=$py VIRTUAL_ENV=$TMP/env|rc=0 $py (torch: yes): PYTHON is set" \
    "PATH=$TMP/notorch:$TMP/env/bin:$PATH|rc=0 $TMP/env/bin/python3 (torch: yes): the first python3 on PATH that imports torch"; do
    settings=${case%%|*}
    want=${case#*|}
    # shellcheck disable=SC2086
    got=$(took $settings)
    [ "$got" = "$want" ] && pass "$settings: $got" || { fail "$settings: '$got', expected '$want'"; tail -n 5 "$TMP/log"; }
done
got=$(took PYTHON="$TMP/nowhere")
if [ "${got%% *}" != rc=0 ] && grep -q "error: PYTHON=$TMP/nowhere is not a Python 3.7 or later interpreter" "$TMP/log"; then
    pass "PYTHON=$TMP/nowhere is an error naming PYTHON"
else
    fail "PYTHON=$TMP/nowhere: $got"; tail -n 5 "$TMP/log"
fi
finish
