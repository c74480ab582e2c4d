/*
 * A fake environment for tests: a NULL-terminated list of "NAME=value"
 * strings read through dd_getenv_fn_t.
 */
#ifndef DD_TESTS_FAKE_ENV_H
#define DD_TESTS_FAKE_ENV_H

#include <string.h>

static inline const char *fake_getenv(void *arg, const char *name)
{
    const char *const *vars = arg;
    size_t len = strlen(name);
    for (; vars != NULL && *vars != NULL; vars++) {
        if (strncmp(*vars, name, len) == 0 && (*vars)[len] == '=') {
            return *vars + len + 1;
        }
    }
    return NULL;
}

#endif
