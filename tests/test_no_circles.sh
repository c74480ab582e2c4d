#!/bin/sh
# No circle among the files of src/ and tools/: no two files that use each
# other, directly or through others. File A uses file B where A's object
# needs a symbol (a function or a variable) that B's object alone defines,
# as the linker sees it (nm on the objects the build made), so a call
# through a shared header counts and a name in a comment does not. A
# symbol that several files define (each backend module's entry point,
# say) ties no two of them.
. "${top_srcdir:-$(dirname "$0")/..}/tests/lib.sh"
cd "$top_builddir" || exit 1

if ! command -v nm >/dev/null 2>&1; then
    echo "SKIP: no nm to read the objects' symbols"
    exit 77
fi
# Every object of a source of src/ or tools/, named by its source: the
# folder (without libtool's .libs) and the file (without a target's prefix,
# libdd_internal_la-elastic.o is src/api/elastic).
find src tools -name '*.o' 2>/dev/null | sort >"$TMP/objects"
if [ ! -s "$TMP/objects" ]; then
    echo "SKIP: no objects under $top_builddir/src or tools: build first"
    exit 77
fi
while read -r o; do
    dir=$(dirname "$o" | sed 's|/\.libs$||')
    base=$(basename "$o" .o | sed 's/^.*-//')
    # An object left from a source since moved or removed is not read.
    [ -f "$top_srcdir/$dir/$base.c" ] || [ -f "$top_srcdir/$dir/$base.cc" ] ||
        continue
    nm "$o" 2>/dev/null | awk -v f="$dir/$base" '
        NF == 2 && $1 == "U" { print f, "U", $2 }
        NF == 3 && $2 ~ /^[TDBRCGS]$/ { print f, "D", $3 }'
done <"$TMP/objects" | sort -u >"$TMP/symbols"

# The circles: each group of files that reach each other, one a line.
awk '
    $2 == "D" { if (!(($3, $1) in seen)) { seen[$3, $1] = 1; ndef[$3]++ }
                def[$3] = $1; files[$1] = 1 }
    $2 == "U" { need[++nneed] = $1 " " $3; files[$1] = 1 }
    END {
        n = 0
        for (f in files) { id[f] = ++n; name[n] = f }
        for (i = 1; i <= nneed; i++) {
            split(need[i], p, " ")
            s = p[2]
            if (ndef[s] == 1 && def[s] != p[1]) {
                r[id[p[1]], id[def[s]]] = 1
            }
        }
        for (k = 1; k <= n; k++)
            for (i = 1; i <= n; i++)
                if ((i, k) in r)
                    for (j = 1; j <= n; j++)
                        if ((k, j) in r) r[i, j] = 1
        for (i = 1; i <= n; i++) {
            if (done[i]) continue
            line = ""
            for (j = 1; j <= n; j++)
                if (j != i && ((i, j) in r) && ((j, i) in r)) {
                    done[j] = 1
                    line = line " " name[j]
                }
            if (line != "") print name[i] line
        }
    }' "$TMP/symbols" >"$TMP/circles"

files=$(cut -d' ' -f1 "$TMP/symbols" | sort -u | wc -l)
if [ "$files" -lt 50 ]; then
    fail "only $files files of src/ and tools/ read: the build is incomplete"
elif [ -s "$TMP/circles" ]; then
    fail "$(wc -l <"$TMP/circles") circle(s) among the $files files of src/ and tools/:"
    sed 's/^/    /' "$TMP/circles"
else
    pass "no circle among the $files files of src/ and tools/"
fi
finish
