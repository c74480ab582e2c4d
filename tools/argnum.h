/*
 * Numbers in command-line options, read strictly: the whole argument, a
 * plain decimal (no blanks, plus sign, hexadecimal, inf or nan), in range
 * and finite. atoi and atof took "99999999999999" as a wrapped int and
 * "nan" or "1e400" as numbers. Header-only and free of the library, so that
 * ddrun (which links nothing of it), ddbench and the examples (which see
 * only the public API) share it. Messages name the option and the value.
 */
#ifndef DD_TOOLS_ARGNUM_H
#define DD_TOOLS_ARGNUM_H

#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Whether s starts like a plain decimal: an optional minus sign, then a
 * digit (or '.' and a digit where fractions are allowed). */
static inline int dd_arg_plain(const char *s, int fraction)
{
    if (s[0] == '-') {
        s++;
    }
    if (!((s[0] >= '0' && s[0] <= '9') ||
          (fraction && s[0] == '.' && s[1] >= '0' && s[1] <= '9'))) {
        return 0;
    }
    return strpbrk(s, "xXpP") == NULL;
}

/* 0 with *value_p when s is a whole integer in [min, max]; else -1. */
static inline int dd_arg_parse_long(const char *s, long min, long max,
                                    long *value_p)
{
    char *end;

    if (!dd_arg_plain(s, 0)) {
        return -1;
    }
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno != 0 || *end != '\0' || v < min || v > max) {
        return -1;
    }
    *value_p = v;
    return 0;
}

/* 0 with *value_p when s is a whole finite number in [min, max]. */
static inline int dd_arg_parse_double(const char *s, double min, double max,
                                      double *value_p)
{
    char *end;

    if (!dd_arg_plain(s, 1)) {
        return -1;
    }
    errno = 0;
    double v = strtod(s, &end);
    if (errno != 0 || *end != '\0' || !isfinite(v) || v < min || v > max) {
        return -1;
    }
    *value_p = v;
    return 0;
}

/* Parses option opt's value s, or says what it takes on stderr; -1 then. */
static inline int dd_arg_long(const char *prog, const char *opt, const char *s,
                              long min, long max, long *value_p)
{
    if (dd_arg_parse_long(s, min, max, value_p) == 0) {
        return 0;
    }
    fprintf(stderr, "%s: %s takes an integer from %ld to %ld, not '%s'\n", prog,
            opt, min, max, s);
    return -1;
}

static inline int dd_arg_int(const char *prog, const char *opt, const char *s,
                             int min, int max, int *value_p)
{
    long v;
    if (dd_arg_long(prog, opt, s, min, max, &v) != 0) {
        return -1;
    }
    *value_p = (int)v;
    return 0;
}

static inline int dd_arg_double(const char *prog, const char *opt,
                                const char *s, double min, double max,
                                double *value_p)
{
    if (dd_arg_parse_double(s, min, max, value_p) == 0) {
        return 0;
    }
    fprintf(stderr, "%s: %s takes a number from %g to %g, not '%s'\n", prog,
            opt, min, max, s);
    return -1;
}

#endif
