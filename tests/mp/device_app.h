/*
 * A test program's own handle on the device module the library loads:
 * DREAMDDP_DEVICE's (fake unless it says cuda), from DREAMDDP_BACKEND_PATH,
 * so that the program and the library share streams and buffers.
 */
#ifndef DD_TESTS_DEVICE_APP_H
#define DD_TESTS_DEVICE_APP_H

#include <dreamddp/device.h>

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void device_app_log(void *arg, int level, const char *msg)
{
    if (level == 0) {
        fprintf(stderr, "%s: device: %s\n", (const char *)arg, msg);
    }
}

static dd_status_t device_app_error(void *arg, dd_status_t s, const char *msg)
{
    device_app_log(arg, 0, msg);
    return s;
}

/* The module's table and an instance of it (*dev_p) for program prog
 * (its name prefixes the module's errors); NULL with the reason in why. */
static const dd_device_ops_t *
device_app_open(const char *prog, dd_device_t **dev_p, char *why, size_t size)
{
    static dd_device_services_t svc = {.abi_version = DD_DEVICE_ABI_VERSION,
                                       .log = device_app_log,
                                       .error = device_app_error};
    char path[4096];
    const char *dir = getenv("DREAMDDP_BACKEND_PATH");
    const char *kind = getenv("DREAMDDP_DEVICE");

    svc.arg = (void *)prog;
    snprintf(path, sizeof(path), "%s/dd_device_%s.so", dir ? dir : ".",
             kind != NULL && strcmp(kind, "cuda") == 0 ? "cuda" : "fake");
    void *dl = dlopen(path, RTLD_NOW);
    if (dl == NULL) {
        snprintf(why, size, "dlopen %.300s: %.200s", path, dlerror());
        return NULL;
    }
    dd_device_entry_fn_t entry;
    *(void **)&entry = dlsym(dl, DD_DEVICE_ENTRY);
    if (entry == NULL) {
        snprintf(why, size, "no %s in %.400s", DD_DEVICE_ENTRY, path);
        return NULL;
    }
    const dd_device_ops_t *ops = entry();
    if (ops->init(&svc, dev_p) != DD_OK) {
        snprintf(why, size, "%.400s: init failed", path);
        return NULL;
    }
    return ops;
}

#endif
