/*
 * The device loader (see loader.h). It must not link a device library, and
 * modules reach the core only through dd_device_services_t.
 */
#include "device/loader.h"
#include "core/log.h"
#include "core/moddir.h"

#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define DD_DEVICE_PREFIX "dd_device_"

static void dd_device_svc_log(void *arg, int level, const char *message)
{
    dd_device_module_t *m = arg;

    if (level < DD_LOG_ERROR || level > DD_LOG_TRACE) {
        level = DD_LOG_ERROR;
    }
    dd_log((dd_log_level_t)level, DD_SUBSYS_BACKEND, "device %s: %s", m->name,
           message);
}

static dd_status_t dd_device_svc_error(void *arg, dd_status_t status,
                                       const char *message)
{
    dd_device_module_t *m = arg;

    return dd_error(status, DD_SUBSYS_BACKEND, "device %s: %s", m->name,
                    message);
}

/* The first dd_device_<name>.so in DREAMDDP_BACKEND_PATH, the install
 * directory or beside this library; 0 when there is none. */
static int dd_device_find(const char *name, const char *path, char *out,
                          size_t size)
{
    char beside[DD_MODDIR_MAX][PATH_MAX];
    struct stat st;

    for (const char *p = path; p != NULL && *p != '\0';) {
        size_t len = strcspn(p, ":");
        if (len > 0 && len < PATH_MAX) {
            snprintf(out, size, "%.*s/%s%s.so", (int)len, p, DD_DEVICE_PREFIX,
                     name);
            if (stat(out, &st) == 0) {
                return 1;
            }
        }
        p += len + (p[len] == ':');
    }
    snprintf(out, size, "%s/%s%s.so", DD_PKGLIBDIR, DD_DEVICE_PREFIX, name);
    if (stat(out, &st) == 0) {
        return 1;
    }
    int n = dd_moddir_beside(beside);
    for (int i = 0; i < n; i++) {
        int w = snprintf(out, size, "%s/%s%s.so", beside[i], DD_DEVICE_PREFIX,
                         name);
        if (w > 0 && (size_t)w < size && stat(out, &st) == 0) {
            return 1;
        }
    }
    return 0;
}

/* Opens the module and asks whether it runs here; why says why not. */
static dd_status_t dd_device_open(dd_device_module_t *m, const char *path,
                                  char *why, size_t size)
{
    if (!dd_device_find(m->name, path, m->path, sizeof(m->path))) {
        snprintf(why, size,
                 "no module %s%s.so in DREAMDDP_BACKEND_PATH (%s), %s or "
                 "beside the library",
                 DD_DEVICE_PREFIX, m->name, path ? path : "unset",
                 DD_PKGLIBDIR);
        return DD_ERR_NOT_FOUND;
    }
    m->dl = dlopen(m->path, RTLD_NOW | RTLD_LOCAL);
    if (m->dl == NULL) {
        snprintf(why, size, "%s", dlerror());
        return DD_ERR_NOT_FOUND;
    }
    dd_device_entry_fn_t entry;
    *(void **)&entry = dlsym(m->dl, DD_DEVICE_ENTRY);
    m->ops = entry != NULL ? entry() : NULL;
    dd_status_t status = DD_ERR_UNSUPPORTED;
    if (m->ops == NULL) {
        snprintf(why, size, "%s exports no %s()", m->path, DD_DEVICE_ENTRY);
    } else if (m->ops->abi_version != DD_DEVICE_ABI_VERSION) {
        snprintf(why, size, "%s has device ABI version %u, this library %u",
                 m->path, m->ops->abi_version, DD_DEVICE_ABI_VERSION);
    } else if (strcmp(m->ops->name, m->name) != 0) {
        snprintf(why, size, "%s calls itself %s", m->path, m->ops->name);
    } else if ((status = m->ops->query(why, size)) == DD_OK) {
        return DD_OK;
    }
    dlclose(m->dl);
    m->dl = NULL;
    m->ops = NULL;
    return status;
}

dd_status_t dd_device_load(const dd_device_opts_t *opts, const char *path,
                           int log_level, dd_device_module_t **module_p,
                           char *why, size_t size)
{
    int kind = opts->kind;

    *module_p = NULL;
    snprintf(why, size, "DREAMDDP_DEVICE=none");
    if (kind == DD_DEVICE_NONE) {
        return DD_OK;
    }
    dd_device_module_t *m = calloc(1, sizeof(*m));
    if (m == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_BACKEND,
                        "no memory for the device module");
    }
    snprintf(m->name, sizeof(m->name), "%s",
             kind == DD_DEVICE_FAKE ? "fake" : "cuda");
    dd_status_t status = dd_device_open(m, path, why, size);
    if (status != DD_OK) {
        free(m);
        if (kind == DD_DEVICE_AUTO) {
            dd_log_info(DD_SUBSYS_BACKEND, "no device module: %s", why);
            return DD_OK;
        }
        return dd_error(status, DD_SUBSYS_BACKEND,
                        "DREAMDDP_DEVICE=%s: device module %s is unavailable: "
                        "%s",
                        dd_device_kind_names[kind], dd_device_kind_names[kind],
                        why);
    }
    m->services = (dd_device_services_t){.abi_version = DD_DEVICE_ABI_VERSION,
                                         .log_level = log_level,
                                         .arg = m,
                                         .log = dd_device_svc_log,
                                         .error = dd_device_svc_error};
    status = m->ops->init(&m->services, &m->instance);
    if (status != DD_OK) {
        dlclose(m->dl);
        free(m);
        return status;
    }
    dd_log_info(DD_SUBSYS_BACKEND, "device module %s loaded from %s", m->name,
                m->path);
    snprintf(why, size, "module %s", m->path);
    *module_p = m;
    return DD_OK;
}

void dd_device_unload(dd_device_module_t *m)
{
    if (m == NULL) {
        return;
    }
    m->ops->finalize(m->instance);
    /* Stream threads of the fake module may outlive a careless caller's
     * objects; keeping the code mapped is harmless. */
    free(m);
}
