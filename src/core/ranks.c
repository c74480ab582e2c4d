/*
 * Messages that name ranks by what each holds: "rank 0..2 'a', rank 3
 * 'b'", the form every disagreement between workers is reported in.
 */
#include "core/ranks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Appends ranks a..b as "a", "a, b" or "a..b". */
static void dd_ranks_append(char *out, size_t size, int a, int b)
{
    size_t o = strlen(out);
    const char *sep = o && out[o - 1] != ' ' ? ", " : "";

    if (a == b) {
        snprintf(out + o, size - o, "%s%d", sep, a);
    } else {
        snprintf(out + o, size - o, "%s%d%s%d", sep, a,
                 b == a + 1 ? ", " : "..", b);
    }
}

void dd_ranks_by_value(const char *const *values, int world, char *msg,
                       size_t size)
{
    char *done = calloc((size_t)world, 1);

    for (int r = 0; done != NULL && r < world; r++) {
        if (values[r] == NULL || values[r][0] == '\0' || done[r]) {
            continue;
        }
        size_t o = strlen(msg);
        snprintf(msg + o, size - o, "%s rank ",
                 o == 0 || msg[o - 1] == ':' ? "" : ",");
        /* Runs of consecutive workers holding this value. */
        for (int a = r; a < world; a++) {
            if (values[a] == NULL || strcmp(values[a], values[r]) != 0) {
                continue;
            }
            int b = a;
            while (b + 1 < world && values[b + 1] != NULL &&
                   strcmp(values[b + 1], values[r]) == 0) {
                b++;
            }
            for (int k = a; k <= b; k++) {
                done[k] = 1;
            }
            dd_ranks_append(msg, size, a, b);
            a = b;
        }
        o = strlen(msg);
        snprintf(msg + o, size - o, " '%s'", values[r]);
    }
    free(done);
}
