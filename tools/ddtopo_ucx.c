/*
 * ddtopo's transports section: what UCX will use on the chosen interface.
 * It starts a UCP context as the UCX module does (UCX_NET_DEVICES from the
 * topology's choice unless the user set it, the module's features) and
 * lists the transport resources UCX selected, from
 * ucp_context_print_info. Linked with UCX only when configure found it; it
 * starts no worker and opens no connection.
 */
#include "ddtopo.h"

#include "backends/netdev.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* On another machine's topology, this machine's UCX says nothing; the
 * same sentence with UCX or without, so that the report does not depend on
 * the build. */
static int ddtopo_transports_foreign(int foreign, ddtopo_transports_t *t)
{
    memset(t, 0, sizeof(*t));
    if (foreign) {
        snprintf(t->why, sizeof(t->why),
                 "not probed: the topology is another machine's (--topo or "
                 "DREAMDDP_SYSFS_ROOT)");
    }
    return foreign;
}

#ifdef HAVE_UCX
#include <ucp/api/ucp.h>

/* "#      resource 1  :  md 1  dev 1  flags -- tcp/eth0" gives "tcp/eth0". */
static void ddtopo_ucx_parse(char *text, ddtopo_transports_t *t)
{
    for (char *line = strtok(text, "\n"); line != NULL;
         line = strtok(NULL, "\n")) {
        char *dash = strstr(line, " -- ");
        if (strstr(line, "resource") == NULL || dash == NULL ||
            t->n == DDTOPO_MAX_TRANSPORTS) {
            continue;
        }
        char *end = dash + 4 + strcspn(dash + 4, " \t");
        *end = '\0';
        snprintf(t->list[t->n++], sizeof(t->list[0]), "%s", dash + 4);
    }
}

/* The context's resources, as text from ucp_context_print_info. */
static int ddtopo_ucx_resources(ucp_context_h context, ddtopo_transports_t *t)
{
    char *text = NULL;
    size_t size = 0;
    FILE *mem = open_memstream(&text, &size);

    if (mem == NULL) {
        snprintf(t->why, sizeof(t->why), "open_memstream failed");
        return -1;
    }
    ucp_context_print_info(context, mem);
    fclose(mem);
    ddtopo_ucx_parse(text, t);
    free(text);
    return 0;
}

void ddtopo_transports(int foreign, const dd_topo_choice_t *c,
                       ddtopo_transports_t *t)
{
    ucp_config_t *config;
    ucp_context_h context;
    ucp_params_t params = {.field_mask = UCP_PARAM_FIELD_FEATURES,
                           .features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP};

    if (ddtopo_transports_foreign(foreign, t)) {
        return;
    }
    snprintf(t->version, sizeof(t->version), "%s", ucp_get_version_string());
    ucs_status_t ucs = ucp_config_read(NULL, NULL, &config);
    if (ucs != UCS_OK) {
        snprintf(t->why, sizeof(t->why), "ucp_config_read failed: %s",
                 ucs_status_string(ucs));
        return;
    }
    if (dd_netdev_user_set("UCX_NET_DEVICES")) {
        snprintf(t->net_devices, sizeof(t->net_devices), "%s (the user's)",
                 getenv("UCX_NET_DEVICES"));
    } else if (c->name[0] != '\0') {
        dd_netdev_ucx(c->name, dd_topo_choice_rdma(c), c->rdma_port,
                      t->net_devices, sizeof(t->net_devices));
        ucs = ucp_config_modify(config, "NET_DEVICES", t->net_devices);
    }
    if (ucs == UCS_OK) {
        ucs = ucp_init(&params, config, &context);
    }
    ucp_config_release(config);
    if (ucs != UCS_OK) {
        snprintf(t->why, sizeof(t->why), "ucp_init failed: %s",
                 ucs_status_string(ucs));
        return;
    }
    if (ddtopo_ucx_resources(context, t) == 0) {
        t->probed = 1;
    }
    ucp_cleanup(context);
}
#else
void ddtopo_transports(int foreign, const dd_topo_choice_t *c,
                       ddtopo_transports_t *t)
{
    (void)c;
    if (ddtopo_transports_foreign(foreign, t)) {
        return;
    }
    snprintf(t->why, sizeof(t->why),
             "UCX not built in (configure found no UCX)");
}
#endif
