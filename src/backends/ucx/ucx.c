/*
 * The UCX backend module: one UCP context and worker per dd context, worker
 * addresses exchanged through the store, tagged non-blocking send and recv,
 * and the shared point-to-point collectives on top. Host memory always;
 * CUDA memory for send and recv where UCX reports it can move it. The
 * network devices are the user's (UCX_NET_DEVICES), else the topology's
 * interface (its RDMA device and port on InfiniBand and RoCE), given to UCX
 * through ucp_config_modify, else UCX's own choice. It must not call the
 * core or set UCX's variables: everything comes through the services
 * struct.
 *
 * services->streams (N) endpoints go to each peer, all on the one worker
 * (each its own connection where the transport connects, as TCP does), and
 * a message takes endpoint (tag mod N): the shared collectives number the
 * 1 MiB chunks of a large message one after another, so consecutive chunks
 * go out over different connections, while the messages of one (peer, tag)
 * stay on one endpoint, in order. The receiver matches tags on the worker,
 * whichever endpoint they came by.
 */
#include <dreamddp/backend.h>

#include "backends/coll/coll.h"
#include "backends/netdev.h"
#include "core/reduce.h"
#include "core/time.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <ucp/api/ucp.h>
#include <unistd.h>

/* A message's UCP tag: the caller's tag above the sender's rank, since UCP
 * matches tags, not senders. */
#define DD_UCX_RANK_BITS 16

/* The longest a waiting rank sleeps on the worker's event fd. Not every
 * transport signals every event (with shared memory, a rank that slept
 * the full 100 ms was seen missing messages that had arrived), so the
 * sleep is short: a rank that waits for a peer costs a wakeup a
 * millisecond, not a core. */
#define DD_UCX_IDLE_MAX_S 0.001

/* The longest a cancel waits for a receive UCP had already matched. */
#define DD_UCX_CANCEL_WAIT_S 1.0

typedef struct {
    dd_backend_t *backend;
    int rank;
} dd_ucx_peer_t;

struct dd_backend {
    const dd_backend_services_t *svc;
    ucp_context_h context;
    ucp_worker_h worker;
    int efd;
    int n_eps;     /* endpoints per peer: services->streams */
    ucp_ep_h *eps; /* peer r's endpoint e at [r * n_eps + e] */
    dd_ucx_peer_t *peers;
    ucs_status_t *ep_status; /* UCS_OK until the peer failed */
    int cuda;                /* UCX moves CUDA memory */
    uint32_t coll_seq;
    dd_coll_comm_t comm;
};

struct dd_backend_request {
    dd_coll_req_t *coll; /* a collective, or NULL for a message */
    void *ucp;           /* UCP's request, NULL once released */
    int done;
    int is_send;
    int peer;
    size_t expect; /* bytes */
    size_t length; /* bytes received */
    ucs_status_t ucs;
};

static const dd_backend_ops_t dd_ucx_ops;

static dd_status_t dd_ucx_status(ucs_status_t ucs)
{
    switch (ucs) {
    case UCS_OK:
        return DD_OK;
    case UCS_ERR_MESSAGE_TRUNCATED:
        return DD_ERR_MISMATCH;
    case UCS_ERR_CANCELED:
        return DD_ERR_CANCELED;
    case UCS_ERR_NO_MEMORY:
        return DD_ERR_NO_MEMORY;
    case UCS_ERR_TIMED_OUT:
        return DD_ERR_TIMED_OUT;
    case UCS_ERR_ENDPOINT_TIMEOUT:
    case UCS_ERR_CONNECTION_RESET:
    case UCS_ERR_UNREACHABLE:
    case UCS_ERR_REJECTED:
    case UCS_ERR_IO_ERROR:
        return DD_ERR_PEER_LOST;
    default:
        return DD_ERR_BACKEND;
    }
}

static void dd_ucx_ep_error(void *arg, ucp_ep_h ep, ucs_status_t status)
{
    dd_ucx_peer_t *peer = arg;
    dd_backend_t *b = peer->backend;

    b->ep_status[peer->rank] = status;
    dd_coll_log(b->svc, DD_BACKEND_LOG_INFO, "connection to rank %d failed: %s",
                peer->rank, ucs_status_string(status));
}

/* Completion of a message. */
static void dd_ucx_complete(dd_backend_request_t *req, ucs_status_t status,
                            size_t length)
{
    req->done = 1;
    req->ucs = status;
    req->length = length;
}

static void dd_ucx_send_cb(void *request, ucs_status_t status, void *user_data)
{
    dd_backend_request_t *req = user_data;
    (void)request;
    dd_ucx_complete(req, status, req->expect);
}

static void dd_ucx_recv_cb(void *request, ucs_status_t status,
                           const ucp_tag_recv_info_t *info, void *user_data)
{
    (void)request;
    dd_ucx_complete(user_data, status, status == UCS_OK ? info->length : 0);
}

static dd_status_t dd_ucx_query(char *why, size_t size)
{
    unsigned major, minor, release;

    ucp_get_version(&major, &minor, &release);
    if (major < 1 || (major == 1 && minor < 10)) {
        snprintf(why, size, "UCX %u.%u.%u is older than 1.10", major, minor,
                 release);
        return DD_ERR_UNSUPPORTED;
    }
    return DD_OK;
}

/* The topology's device, as UCX_NET_DEVICES would give it, unless the
 * user set that variable (ucp_config_read has read it then). */
static ucs_status_t dd_ucx_net_devices(const dd_backend_services_t *svc,
                                       ucp_config_t *config)
{
    char value[DD_NETDEV_VALUE_MAX];

    if (svc->ifname == NULL) {
        return UCS_OK;
    }
    if (dd_netdev_user_set("UCX_NET_DEVICES")) {
        dd_coll_log(svc, DD_BACKEND_LOG_DEBUG,
                    "UCX_NET_DEVICES=%s kept as the user set it",
                    getenv("UCX_NET_DEVICES"));
        return UCS_OK;
    }
    dd_netdev_ucx(svc->ifname, svc->rdma, svc->rdma_port, value, sizeof(value));
    dd_coll_log(svc, DD_BACKEND_LOG_DEBUG, "network devices %s", value);
    return ucp_config_modify(config, "NET_DEVICES", value);
}

static dd_status_t dd_ucx_create_context(dd_backend_t *b)
{
    const dd_backend_services_t *svc = b->svc;
    ucp_config_t *config;
    ucp_params_t params;
    ucs_status_t ucs;

    ucs = ucp_config_read(NULL, NULL, &config);
    if (ucs != UCS_OK) {
        return dd_coll_error(svc, DD_ERR_BACKEND,
                             "cannot read the UCX configuration: %s",
                             ucs_status_string(ucs));
    }
    ucs = dd_ucx_net_devices(svc, config);
    if (ucs != UCS_OK) {
        ucp_config_release(config);
        return dd_coll_error(svc, DD_ERR_BACKEND,
                             "cannot give UCX the network device: %s",
                             ucs_status_string(ucs));
    }
    /* Over TCP, a rendezvous needs the receiver to progress before any
     * data moves, and a receiver busy in backward or summing does not: so
     * on an interface without RDMA, messages go eagerly (bench/NOTES.md
     * has the figures). UCX_RNDV_THRESH, when set, wins. */
    if (getenv("UCX_RNDV_THRESH") == NULL && svc->ifname != NULL &&
        svc->rdma == NULL) {
        ucp_config_modify(config, "RNDV_THRESH", "inf");
    }
    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_PARAM_FIELD_FEATURES | UCP_PARAM_FIELD_NAME;
    params.features = UCP_FEATURE_TAG | UCP_FEATURE_WAKEUP;
    params.name = "dreamddp";
    ucs = ucp_init(&params, config, &b->context);
    ucp_config_release(config);
    if (ucs != UCS_OK) {
        return dd_coll_error(svc, DD_ERR_BACKEND,
                             "ucp_init failed: %s (check UCX_TLS and "
                             "UCX_NET_DEVICES)",
                             ucs_status_string(ucs));
    }
    ucp_context_attr_t attr;
    attr.field_mask = UCP_ATTR_FIELD_MEMORY_TYPES;
    if (ucp_context_query(b->context, &attr) == UCS_OK) {
        b->cuda = !!(attr.memory_types & UCS_BIT(UCS_MEMORY_TYPE_CUDA));
    }
    return DD_OK;
}

static dd_status_t dd_ucx_create_worker(dd_backend_t *b)
{
    ucp_worker_params_t params;
    ucs_status_t ucs;

    memset(&params, 0, sizeof(params));
    params.field_mask = UCP_WORKER_PARAM_FIELD_THREAD_MODE;
    params.thread_mode = UCS_THREAD_MODE_SINGLE;
    ucs = ucp_worker_create(b->context, &params, &b->worker);
    if (ucs == UCS_OK) {
        ucs = ucp_worker_get_efd(b->worker, &b->efd);
        if (ucs != UCS_OK) {
            ucp_worker_destroy(b->worker);
        }
    }
    if (ucs != UCS_OK) {
        return dd_coll_error(b->svc, DD_ERR_BACKEND,
                             "cannot create a UCP worker: %s",
                             ucs_status_string(ucs));
    }
    return DD_OK;
}

/* Publishes this worker's address and connects to every peer's. */
static dd_status_t dd_ucx_connect(dd_backend_t *b)
{
    const dd_backend_services_t *svc = b->svc;
    ucp_address_t *addr;
    size_t len;
    char key[32];
    dd_status_t status;

    ucs_status_t ucs = ucp_worker_get_address(b->worker, &addr, &len);
    if (ucs != UCS_OK) {
        return dd_coll_error(svc, DD_ERR_BACKEND,
                             "cannot get the worker's address: %s",
                             ucs_status_string(ucs));
    }
    snprintf(key, sizeof(key), "addr/%d", svc->rank);
    status = svc->store_set(svc->arg, key, addr, len);
    ucp_worker_release_address(b->worker, addr);
    for (int r = 0; status == DD_OK && r < svc->world_size; r++) {
        void *peer_addr;
        size_t peer_len;
        ucp_ep_params_t params;
        if (r == svc->rank) {
            continue;
        }
        snprintf(key, sizeof(key), "addr/%d", r);
        status = svc->store_get(svc->arg, key, &peer_addr, &peer_len);
        if (status != DD_OK) {
            break;
        }
        b->peers[r].backend = b;
        b->peers[r].rank = r;
        memset(&params, 0, sizeof(params));
        params.field_mask = UCP_EP_PARAM_FIELD_REMOTE_ADDRESS |
                            UCP_EP_PARAM_FIELD_ERR_HANDLING_MODE |
                            UCP_EP_PARAM_FIELD_ERR_HANDLER;
        params.address = peer_addr;
        params.err_mode = UCP_ERR_HANDLING_MODE_PEER;
        params.err_handler.cb = dd_ucx_ep_error;
        params.err_handler.arg = &b->peers[r];
        for (int e = 0; ucs == UCS_OK && e < b->n_eps; e++) {
            ucs = ucp_ep_create(b->worker, &params,
                                &b->eps[(size_t)r * b->n_eps + e]);
        }
        free(peer_addr);
        if (ucs != UCS_OK) {
            status = dd_coll_error(svc, DD_ERR_UNREACHABLE,
                                   "cannot reach rank %d: %s", r,
                                   ucs_status_string(ucs));
        }
    }
    return status;
}

/*
 * Completes every endpoint's wire-up now, while every rank is in init and
 * progresses its worker: UCX 1.13 aborts (a wireup_ep assertion) when a
 * peer fails in the middle of a lazy wire-up, so no connection is left to
 * be set up during a collective.
 */
static dd_status_t dd_ucx_wireup_wait(dd_backend_t *b, double deadline);

static dd_status_t dd_ucx_wireup(dd_backend_t *b)
{
    const dd_backend_services_t *svc = b->svc;
    double deadline = dd_time_now() + svc->timeout_s;
    ucp_request_param_t param;

    memset(&param, 0, sizeof(param));
    for (int i = 0; i < svc->world_size * b->n_eps; i++) {
        int r = i / b->n_eps;
        if (b->eps[i] == NULL) {
            continue;
        }
        void *req = ucp_ep_flush_nbx(b->eps[i], &param);
        if (UCS_PTR_IS_ERR(req)) {
            return dd_coll_error(svc, DD_ERR_UNREACHABLE,
                                 "cannot connect to rank %d: %s", r,
                                 ucs_status_string(UCS_PTR_STATUS(req)));
        }
        ucs_status_t ucs = UCS_OK;
        while (req != NULL &&
               (ucs = ucp_request_check_status(req)) == UCS_INPROGRESS &&
               dd_time_now() < deadline) {
            ucp_worker_progress(b->worker);
        }
        if (req != NULL) {
            ucp_request_free(req);
        }
        if (ucs == UCS_INPROGRESS) {
            return dd_coll_error(svc, DD_ERR_TIMED_OUT,
                                 "connecting to rank %d took over %.0f s "
                                 "(DREAMDDP_TIMEOUT_S)",
                                 r, svc->timeout_s);
        }
        if (ucs != UCS_OK) {
            return dd_coll_error(svc, DD_ERR_UNREACHABLE,
                                 "cannot connect to rank %d: %s", r,
                                 ucs_status_string(ucs));
        }
    }
    return dd_ucx_wireup_wait(b, deadline);
}

/* A peer's wire-up needs this worker's progress: keep progressing until
 * every rank has finished its own. */
static dd_status_t dd_ucx_wireup_wait(dd_backend_t *b, double deadline)
{
    const dd_backend_services_t *svc = b->svc;
    int world = svc->world_size;
    char key[32], **keys = calloc((size_t)world, sizeof(char *));
    dd_status_t status = keys ? DD_OK : DD_ERR_NO_MEMORY;

    for (int r = 0; status == DD_OK && r < world; r++) {
        snprintf(key, sizeof(key), "wired/%d", r);
        keys[r] = strdup(key);
        status = keys[r] ? DD_OK : DD_ERR_NO_MEMORY;
    }
    if (status != DD_OK) {
        status = dd_coll_error(
            svc, status, "no memory for the wire-up keys of %d ranks", world);
    } else {
        status = svc->store_set(svc->arg, keys[svc->rank], "1", 1);
    }
    while (status == DD_OK) {
        ucp_worker_progress(b->worker);
        status =
            svc->store_wait(svc->arg, (const char *const *)keys, world, 0.0);
        if (status != DD_ERR_TIMED_OUT) {
            break;
        }
        if (dd_time_now() > deadline) {
            status = dd_coll_error(svc, DD_ERR_TIMED_OUT,
                                   "not every rank connected within %.0f s "
                                   "(DREAMDDP_TIMEOUT_S)",
                                   svc->timeout_s);
            break;
        }
        status = DD_OK;
        ucp_worker_progress(b->worker);
        usleep(500);
    }
    for (int r = 0; keys != NULL && r < world; r++) {
        free(keys[r]);
    }
    free(keys);
    return status;
}

/* Closes every endpoint, dropping what is still queued: the ranks have met
 * before finalize, so nothing a peer waits for is still in flight. */
static void dd_ucx_disconnect(dd_backend_t *b)
{
    ucp_request_param_t param;
    double deadline = dd_time_now() + 2.0;

    memset(&param, 0, sizeof(param));
    param.op_attr_mask = UCP_OP_ATTR_FIELD_FLAGS;
    param.flags = UCP_EP_CLOSE_FLAG_FORCE;
    for (int i = 0; i < b->svc->world_size * b->n_eps; i++) {
        if (b->eps[i] == NULL) {
            continue;
        }
        void *req = ucp_ep_close_nbx(b->eps[i], &param);
        while (req != NULL && !UCS_PTR_IS_ERR(req) &&
               ucp_request_check_status(req) == UCS_INPROGRESS &&
               dd_time_now() < deadline) {
            ucp_worker_progress(b->worker);
        }
        if (req != NULL && !UCS_PTR_IS_ERR(req)) {
            ucp_request_free(req);
        }
        b->eps[i] = NULL;
    }
}

static void dd_ucx_free(dd_backend_t *b)
{
    if (b->worker != NULL) {
        dd_ucx_disconnect(b);
        ucp_worker_destroy(b->worker);
    }
    if (b->context != NULL) {
        ucp_cleanup(b->context);
    }
    free(b->eps);
    free(b->peers);
    free(b->ep_status);
    free(b);
}

/* Waits for the worker's event fd, at most until deadline; returns at once
 * while there is work to do. */
static void dd_ucx_idle(dd_backend_t *b, double deadline)
{
    if (ucp_worker_progress(b->worker) != 0) {
        return;
    }
    if (ucp_worker_arm(b->worker) == UCS_ERR_BUSY) {
        return;
    }
    double left = deadline - dd_time_now();
    struct pollfd pfd = {.fd = b->efd, .events = POLLIN};
    if (left > DD_UCX_IDLE_MAX_S) {
        left = DD_UCX_IDLE_MAX_S;
    }
    if (left > 0) {
        poll(&pfd, 1, (int)(left * 1e3) + 1);
    }
}

static void dd_ucx_idle_for(dd_backend_t *b, double timeout_s)
{
    dd_ucx_idle(b, dd_time_now() + timeout_s);
}

static dd_status_t dd_ucx_init(const dd_backend_services_t *svc,
                               dd_backend_t **backend_p)
{
    int world = svc->world_size;
    dd_status_t status;

    if (world > DD_BACKEND_MAX_WORLD) {
        return dd_coll_error(svc, DD_ERR_UNSUPPORTED,
                             "world size %d is above %d", world,
                             DD_BACKEND_MAX_WORLD);
    }
    dd_backend_t *b = calloc(1, sizeof(*b));
    if (b == NULL) {
        return dd_coll_error(svc, DD_ERR_NO_MEMORY, "no memory");
    }
    b->svc = svc;
    b->n_eps = svc->streams > 0 ? svc->streams : 1;
    b->eps = calloc((size_t)world * (size_t)b->n_eps, sizeof(*b->eps));
    b->peers = calloc((size_t)world, sizeof(*b->peers));
    b->ep_status = calloc((size_t)world, sizeof(*b->ep_status));
    if (b->eps == NULL || b->peers == NULL || b->ep_status == NULL) {
        status = dd_coll_error(svc, DD_ERR_NO_MEMORY, "no memory");
        goto err_free;
    }
    if ((status = dd_ucx_create_context(b)) != DD_OK ||
        (status = dd_ucx_create_worker(b)) != DD_OK ||
        (status = dd_ucx_connect(b)) != DD_OK ||
        (status = dd_ucx_wireup(b)) != DD_OK) {
        goto err_free;
    }
    b->comm.ops = &dd_ucx_ops;
    b->comm.backend = b;
    b->comm.services = svc;
    b->comm.rank = svc->rank;
    b->comm.world = world;
    b->comm.chunk_bytes = DD_COLL_CHUNK_BYTES;
    dd_coll_log(svc, DD_BACKEND_LOG_DEBUG,
                "UCP worker ready, %d peers, %d endpoint%s each, CUDA memory "
                "%s",
                world - 1, b->n_eps, b->n_eps == 1 ? "" : "s",
                b->cuda ? "yes" : "no");
    *backend_p = b;
    return DD_OK;

err_free:
    dd_ucx_free(b);
    return status;
}

static void dd_ucx_finalize(dd_backend_t *b)
{
    dd_ucx_free(b);
}

static int dd_ucx_score(dd_backend_t *b, dd_backend_op_t op,
                        dd_mem_type_t mem_type, size_t bytes)
{
    int p2p = op == DD_BACKEND_OP_SEND || op == DD_BACKEND_OP_RECV;

    if (mem_type == DD_MEM_HOST) {
        return p2p ? 80 : 40;
    }
    /* The shared collectives reduce on the CPU, so CUDA memory only moves
     * point to point, and only where UCX can reach it. */
    return mem_type == DD_MEM_CUDA && p2p && b->cuda ? 60 : 0;
}

static dd_status_t dd_ucx_check_peer(dd_backend_t *b,
                                     const dd_backend_args_t *args,
                                     const char *what)
{
    const dd_backend_services_t *svc = b->svc;

    if (args->peer < 0 || args->peer >= svc->world_size ||
        args->peer == svc->rank) {
        return dd_coll_error(svc, DD_ERR_INVALID_PARAM,
                             "%s: peer %d is not another rank of 0..%d", what,
                             args->peer, svc->world_size - 1);
    }
    if (args->tag >> DD_BACKEND_TAG_BITS) {
        return dd_coll_error(
            svc, DD_ERR_INVALID_PARAM, "%s: tag %#llx has more than %d bits",
            what, (unsigned long long)args->tag, DD_BACKEND_TAG_BITS);
    }
    if (args->mem_type == DD_MEM_CUDA && !b->cuda) {
        return dd_coll_error(svc, DD_ERR_UNSUPPORTED,
                             "%s: this UCX cannot move CUDA memory", what);
    }
    if (b->ep_status[args->peer] != UCS_OK) {
        return dd_coll_error(svc, DD_ERR_PEER_LOST, "%s: rank %d is gone (%s)",
                             what, args->peer,
                             ucs_status_string(b->ep_status[args->peer]));
    }
    return DD_OK;
}

static void dd_ucx_param(ucp_request_param_t *param, dd_backend_request_t *req,
                         const dd_backend_args_t *args)
{
    memset(param, 0, sizeof(*param));
    param->op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK |
                          UCP_OP_ATTR_FIELD_USER_DATA |
                          UCP_OP_ATTR_FIELD_MEMORY_TYPE;
    param->user_data = req;
    param->memory_type = args->mem_type == DD_MEM_CUDA ? UCS_MEMORY_TYPE_CUDA
                                                       : UCS_MEMORY_TYPE_HOST;
}

/* Stores the outcome of posting: a request in flight, done, or an error. */
static dd_status_t dd_ucx_posted(dd_backend_t *b, dd_backend_request_t *req,
                                 ucs_status_ptr_t ptr, const char *what,
                                 dd_backend_request_t **req_p)
{
    if (UCS_PTR_IS_ERR(ptr)) {
        ucs_status_t ucs = UCS_PTR_STATUS(ptr);
        int peer = req->peer;
        free(req);
        return dd_coll_error(b->svc, dd_ucx_status(ucs),
                             "%s rank %d failed: %s", what, peer,
                             ucs_status_string(ucs));
    }
    if (ptr == NULL) {
        req->done = 1;
        req->ucs = UCS_OK;
        req->length = req->expect;
    } else {
        req->ucp = ptr;
    }
    *req_p = req;
    return DD_OK;
}

static dd_status_t dd_ucx_send(dd_backend_t *b, const dd_backend_args_t *args,
                               dd_backend_request_t **req_p)
{
    ucp_request_param_t param;
    dd_status_t status = dd_ucx_check_peer(b, args, "send");

    if (status != DD_OK) {
        return status;
    }
    dd_backend_request_t *req = calloc(1, sizeof(*req));
    if (req == NULL) {
        return dd_coll_error(b->svc, DD_ERR_NO_MEMORY, "send: no memory");
    }
    req->is_send = 1;
    req->peer = args->peer;
    req->expect = args->count * dd_coll_dtype_size(args->dtype);
    dd_ucx_param(&param, req, args);
    param.cb.send = dd_ucx_send_cb;
    ucp_tag_t tag = (args->tag << DD_UCX_RANK_BITS) | (ucp_tag_t)b->svc->rank;
    ucp_ep_h ep = b->eps[(size_t)args->peer * b->n_eps +
                         (size_t)(args->tag % (uint64_t)b->n_eps)];
    ucs_status_ptr_t ptr =
        ucp_tag_send_nbx(ep, args->sendbuf, req->expect, tag, &param);
    return dd_ucx_posted(b, req, ptr, "send to", req_p);
}

static dd_status_t dd_ucx_recv(dd_backend_t *b, const dd_backend_args_t *args,
                               dd_backend_request_t **req_p)
{
    ucp_request_param_t param;
    dd_status_t status = dd_ucx_check_peer(b, args, "recv");

    if (status != DD_OK) {
        return status;
    }
    dd_backend_request_t *req = calloc(1, sizeof(*req));
    if (req == NULL) {
        return dd_coll_error(b->svc, DD_ERR_NO_MEMORY, "recv: no memory");
    }
    req->peer = args->peer;
    req->expect = args->count * dd_coll_dtype_size(args->dtype);
    dd_ucx_param(&param, req, args);
    param.cb.recv = dd_ucx_recv_cb;
    ucp_tag_t tag = (args->tag << DD_UCX_RANK_BITS) | (ucp_tag_t)args->peer;
    ucs_status_ptr_t ptr = ucp_tag_recv_nbx(
        b->worker, args->recvbuf, req->expect, tag, ~(ucp_tag_t)0, &param);
    return dd_ucx_posted(b, req, ptr, "receive from", req_p);
}

static dd_status_t dd_ucx_coll(dd_backend_t *b, dd_coll_t coll,
                               const dd_backend_args_t *args,
                               dd_backend_request_t **req_p)
{
    if (args->mem_type != DD_MEM_HOST) {
        return dd_coll_error(b->svc, DD_ERR_UNSUPPORTED,
                             "%s: UCX runs collectives on host memory only",
                             dd_coll_kind_name(coll));
    }
    dd_backend_request_t *req = calloc(1, sizeof(*req));
    if (req == NULL) {
        return dd_coll_error(b->svc, DD_ERR_NO_MEMORY, "%s: no memory",
                             dd_coll_kind_name(coll));
    }
    dd_status_t status =
        dd_coll_start(&b->comm, coll, args, b->coll_seq++, &req->coll);
    if (status != DD_OK) {
        free(req);
        return status;
    }
    *req_p = req;
    return DD_OK;
}

static dd_status_t dd_ucx_allreduce(dd_backend_t *b,
                                    const dd_backend_args_t *args,
                                    dd_backend_request_t **req_p)
{
    return dd_ucx_coll(b, DD_COLL_ALLREDUCE, args, req_p);
}

static dd_status_t dd_ucx_broadcast(dd_backend_t *b,
                                    const dd_backend_args_t *args,
                                    dd_backend_request_t **req_p)
{
    return dd_ucx_coll(b, DD_COLL_BROADCAST, args, req_p);
}

static dd_status_t dd_ucx_reduce_scatter(dd_backend_t *b,
                                         const dd_backend_args_t *args,
                                         dd_backend_request_t **req_p)
{
    return dd_ucx_coll(b, DD_COLL_REDUCE_SCATTER, args, req_p);
}

static dd_status_t dd_ucx_allgather(dd_backend_t *b,
                                    const dd_backend_args_t *args,
                                    dd_backend_request_t **req_p)
{
    return dd_ucx_coll(b, DD_COLL_ALLGATHER, args, req_p);
}

/* The final status of a finished message; releases it. */
static dd_status_t dd_ucx_finish(dd_backend_t *b, dd_backend_request_t *req)
{
    const char *dir = req->is_send ? "send to" : "receive from";
    dd_status_t status = DD_OK;

    if (req->ucs != UCS_OK) {
        status = dd_coll_error(
            b->svc, dd_ucx_status(req->ucs), "%s rank %d (%zu bytes): %s%s",
            dir, req->peer, req->expect, ucs_status_string(req->ucs),
            req->ucs == UCS_ERR_MESSAGE_TRUNCATED
                ? "; the peer sent more: do the ranks agree on the count?"
                : "");
    } else if (req->length != req->expect) {
        status = dd_coll_error(b->svc, DD_ERR_MISMATCH,
                               "receive from rank %d: got %zu bytes, expected "
                               "%zu; do the ranks agree on the count?",
                               req->peer, req->length, req->expect);
    }
    if (req->ucp != NULL) {
        ucp_request_free(req->ucp);
    }
    free(req);
    return status;
}

static dd_status_t dd_ucx_test(dd_backend_t *b, dd_backend_request_t *req)
{
    if (req->coll != NULL) {
        dd_status_t status = dd_coll_test(req->coll);
        if (status != DD_INPROGRESS) {
            free(req);
        }
        return status;
    }
    if (!req->done) {
        ucp_worker_progress(b->worker);
    }
    return req->done ? dd_ucx_finish(b, req) : DD_INPROGRESS;
}

/* test without ucp_worker_progress (whose TCP transport makes an epoll_wait
 * call each time), for callers that progress once a pass: the shared
 * collectives among them. A collective's request is tested as test() does,
 * progressing once for all its messages. */
static dd_status_t dd_ucx_check(dd_backend_t *b, dd_backend_request_t *req)
{
    if (req->coll != NULL) {
        return dd_ucx_test(b, req);
    }
    return req->done ? dd_ucx_finish(b, req) : DD_INPROGRESS;
}

static dd_status_t dd_ucx_wait(dd_backend_t *b, dd_backend_request_t *req,
                               double timeout_s)
{
    double deadline = dd_time_now() + timeout_s;

    if (req->coll != NULL) {
        dd_status_t status = dd_coll_wait(req->coll, timeout_s);
        if (status != DD_INPROGRESS) {
            free(req);
        }
        return status;
    }
    while (!req->done) {
        if (dd_time_now() >= deadline) {
            dd_coll_error(b->svc, DD_ERR_TIMED_OUT,
                          "%s rank %d (%zu bytes) timed out after "
                          "%.1f s",
                          req->is_send ? "send to" : "receive from", req->peer,
                          req->expect, timeout_s);
            return DD_INPROGRESS;
        }
        dd_ucx_idle(b, deadline);
    }
    return dd_ucx_finish(b, req);
}

static void dd_ucx_cancel(dd_backend_t *b, dd_backend_request_t *req)
{
    if (req->coll != NULL) {
        dd_coll_cancel(req->coll);
        free(req);
        return;
    }
    if (req->done || req->ucp == NULL) {
        if (req->ucp != NULL) {
            ucp_request_free(req->ucp);
        }
        free(req);
        return;
    }
    ucp_request_cancel(b->worker, req->ucp);
    /* A receive UCP has matched is not canceled: its data still lands
     * (a rendezvous in progress completes; a put writes from the peer's
     * side). It is waited for, a live peer's soon and a lost one's at its
     * endpoint's error, so the caller may reuse or free the buffer; only
     * past DD_UCX_CANCEL_WAIT_S is it left to land. */
    double deadline = dd_time_now() + (req->is_send ? 0 : DD_UCX_CANCEL_WAIT_S);
    do {
        dd_ucx_idle(b, deadline);
    } while (!req->done && dd_time_now() < deadline);
    /* Ended or not, UCP's request is released: one still going on (a
     * send, or a receive past the bound) goes on with no callback, so its
     * wrapper is freed here, not leaked when the peer never answers. */
    ucp_request_free(req->ucp);
    free(req);
}

static void dd_ucx_progress(dd_backend_t *b)
{
    ucp_worker_progress(b->worker);
}

static const dd_backend_ops_t dd_ucx_ops = {
    .abi_version = DD_BACKEND_ABI_VERSION,
    .name = "ucx",
    .mem_types = DD_BACKEND_MEM(DD_MEM_HOST) | DD_BACKEND_MEM(DD_MEM_CUDA),
    .caps = 0,
    .query = dd_ucx_query,
    .init = dd_ucx_init,
    .finalize = dd_ucx_finalize,
    .score = dd_ucx_score,
    .allreduce = dd_ucx_allreduce,
    .broadcast = dd_ucx_broadcast,
    .reduce_scatter = dd_ucx_reduce_scatter,
    .allgather = dd_ucx_allgather,
    .send = dd_ucx_send,
    .recv = dd_ucx_recv,
    .test = dd_ucx_test,
    .wait = dd_ucx_wait,
    .cancel = dd_ucx_cancel,
    .progress = dd_ucx_progress,
    .check = dd_ucx_check,
    .idle = dd_ucx_idle_for,
};

DD_API const dd_backend_ops_t *dd_backend_ops_get(void)
{
    return &dd_ucx_ops;
}
