/*
 * The directories beside the library's code where its modules are looked
 * for after DREAMDDP_BACKEND_PATH and the install directory (see moddir.h).
 * Installed, the first is the library's own directory; in a build tree the
 * shared library sits in .libs beside the modules, but a program linked with
 * the archive (tools/ddbench) sits one level below the tree's top, whose
 * libdreamddp.la marks it as a libtool build tree. No other place is
 * guessed: an installed program never looks into a build tree.
 */
#include "core/moddir.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int dd_moddir_beside(char dirs[DD_MODDIR_MAX][PATH_MAX])
{
    Dl_info info;
    char marker[PATH_MAX + 32];
    struct stat st;
    int n = 0;

    if (!dladdr((void *)dd_moddir_beside, &info) || info.dli_fname == NULL) {
        return 0;
    }
    snprintf(dirs[0], PATH_MAX, "%s", info.dli_fname);
    char *slash = strrchr(dirs[0], '/');
    if (slash == NULL) {
        /* The main program, started by a bare name found through PATH. */
        ssize_t len = readlink("/proc/self/exe", dirs[0], PATH_MAX - 1);
        if (len <= 0) {
            return 0;
        }
        dirs[0][len] = '\0';
        slash = strrchr(dirs[0], '/');
        if (slash == NULL) {
            return 0;
        }
    }
    *slash = '\0';
    n = 1;
    size_t len = strlen(dirs[0]);
    if (len >= 6 && strcmp(dirs[0] + len - 6, "/.libs") == 0) {
        return n; /* the shared library of a build tree: modules beside it */
    }
    snprintf(marker, sizeof(marker), "%.*s/../libdreamddp.la", PATH_MAX - 32,
             dirs[0]);
    if (stat(marker, &st) == 0 && S_ISREG(st.st_mode)) {
        snprintf(dirs[1], PATH_MAX, "%.*s/../.libs", PATH_MAX - 10, dirs[0]);
        n = 2;
    }
    return n;
}
