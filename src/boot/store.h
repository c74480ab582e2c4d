/*
 * The rendezvous key-value store: a TCP store hosted by rank 0, or a file
 * store on a shared directory. Every wait is bounded by the store's timeout.
 * Barrier and allgather are built on set/wait/get and name the ranks that
 * are missing when they time out.
 */
#ifndef DD_BOOT_STORE_H
#define DD_BOOT_STORE_H

#include "core/abort.h"

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

typedef struct dd_store dd_store_t;

/* One implementation's operations. Values are opaque bytes. */
typedef struct {
    dd_status_t (*set)(dd_store_t *store, const char *key, const void *value,
                       size_t len);
    /* Waits up to timeout_s for the key; the value is malloc'ed. */
    dd_status_t (*get)(dd_store_t *store, const char *key, double timeout_s,
                       void **value_p, size_t *len_p);
    /* Waits up to timeout_s until every key exists; on DD_ERR_TIMED_OUT,
     * present[i] (if given) says which keys exist. */
    dd_status_t (*wait)(dd_store_t *store, const char *const *keys, int n,
                        double timeout_s, int *present);
    dd_status_t (*add)(dd_store_t *store, const char *key, int64_t delta,
                       int64_t *value_p);
    dd_status_t (*del)(dd_store_t *store, const char *key, int *deleted_p);
    void (*close)(dd_store_t *store);
    /* The server's wall clock in microseconds; NULL where no server
     * answers (the file store). */
    dd_status_t (*clock)(dd_store_t *store, double *us_p);
} dd_store_ops_t;

struct dd_store {
    const dd_store_ops_t *ops;
    int rank;
    int world_size;
    double timeout_s;
    char where[300];      /* "tcp://10.0.0.1:29500", for messages */
    unsigned barrier_gen; /* barriers and allgathers done so far */
    char last_key[512];   /* this rank's key of the last one */
    char last_all[512];   /* rank 0: the last allgather's gathered key */
    /* The job's fate, set by src/api once it watches: a wait ends with
     * its reason as soon as it is raised. NULL: not watched. */
    dd_abort_t *abort;
};

/**
 * The store's login secret: a value derived from the job token (SHA-256
 * under the label "dreamddp store login") that no other value of the job
 * reveals. It never travels: a rank proves it holds it by an HMAC of a
 * challenge the store sends (store_tcp.c).
 */
uint64_t dd_store_token_hash(const char *token);

/**
 * The job's tag in messages that travel in clear (the aggregators'
 * headers: dd_job_t::token_hash): derived under its own label, so that
 * reading it yields neither the token nor the store's login.
 */
uint64_t dd_store_token_tag(const char *token);

/**
 * The job token's value for the names of local objects others may list
 * (the file store's directory): derived under another label, so that a
 * name never yields the login.
 */
uint64_t dd_store_token_name(const char *token);

/**
 * The atomic add of both stores: old (len bytes, NULL when the key is
 * new) must be a whole decimal int64, and old + delta must not overflow;
 * else DD_ERR_INVALID_PARAM with why naming the key and the values.
 */
dd_status_t dd_store_add_value(const char *key, const void *old, size_t len,
                               int64_t delta, int64_t *value_p, char *why,
                               size_t size);

/**
 * Connects to the TCP store at addr:port, retrying until timeout_s, and
 * presents the token hash with this rank and world size. DD_ERR_UNREACHABLE
 * names the address; DD_ERR_REFUSED and DD_ERR_MISMATCH carry the server's
 * reason.
 */
dd_status_t dd_store_tcp_connect(const char *addr, int port,
                                 uint64_t token_hash, int rank, int world_size,
                                 double timeout_s, dd_store_t **store_p);

/** Opens the file store under dir, in a namespace given by the token's
 * name value (dd_store_token_name). */
dd_status_t dd_store_file_open(const char *dir, uint64_t token_name, int rank,
                               int world_size, double timeout_s,
                               dd_store_t **store_p);

/*
 * The calls. Each implementation serializes its requests, so the watcher
 * thread (src/api/watch.c) and the application thread share one
 * connection; a wait is cut into slices of at most DD_STORE_SLICE_S, so
 * that the watcher's requests go between two, and the job's abort is
 * checked between two.
 */
#define DD_STORE_SLICE_S 0.25

dd_status_t dd_store_set(dd_store_t *s, const char *key, const void *value,
                         size_t len);
dd_status_t dd_store_get(dd_store_t *s, const char *key, void **value_p,
                         size_t *len_p);
/** dd_store_get with its own bound (at most the store's timeout). */
dd_status_t dd_store_get_within(dd_store_t *s, const char *key,
                                double timeout_s, void **value_p,
                                size_t *len_p);
dd_status_t dd_store_wait(dd_store_t *s, const char *const *keys, int n,
                          int *present);
dd_status_t dd_store_add(dd_store_t *s, const char *key, int64_t delta,
                         int64_t *value_p);
dd_status_t dd_store_delete(dd_store_t *s, const char *key, int *deleted_p);

/**
 * The store's server's wall clock (rank 0's, where it hosts the server),
 * in microseconds, read when the request arrives: what a rank's clock is
 * compared with. DD_ERR_UNSUPPORTED for a store without a server.
 */
dd_status_t dd_store_clock(dd_store_t *s, double *us_p);

/** Whether key exists now (no waiting). */
dd_status_t dd_store_check(dd_store_t *s, const char *key, int *exists_p);

/** Whether the store has seen rank lost, into *lost_p: its connection
 * closed before its goodbye (DD_STORE_GONE_KEY), or it was declared lost
 * (DD_STORE_LOST_KEY, an expendable aggregator, perhaps frozen). */
dd_status_t dd_store_rank_lost(dd_store_t *s, int rank, int *lost_p);

void dd_store_close(dd_store_t *s);

/**
 * Waits until every rank has entered the barrier of this name. On timeout
 * the error names the ranks that did not arrive.
 */
dd_status_t dd_store_barrier(dd_store_t *s, const char *name);

/**
 * Every rank contributes len bytes; all (world_size * len bytes, rank order)
 * receives everyone's. A rank that contributed another length is a
 * DD_ERR_MISMATCH naming it.
 */
dd_status_t dd_store_allgather(dd_store_t *s, const char *name,
                               const void *mine, size_t len, void *all);

/* The job's abort: its value is the first reason a rank or the store saw
 * to stop the job (src/api/watch.c). A rank sets its goodbye key (prefix,
 * then the rank) before it leaves in dd_finalize; the TCP store's server
 * takes a connection that closes without one for a lost rank. */
#define DD_STORE_ABORT_KEY "dd/abort"
#define DD_STORE_BYE_KEY "dd/bye/"

/* Set by the TCP store's server for every rank whose connection closed
 * before its goodbye, even after the job's abort names another: the first
 * loss is the reason, but no rank may wait for a later one either. */
#define DD_STORE_GONE_KEY "dd/gone/"

/* A rank lost without stopping the job (an expendable aggregator, under
 * DREAMDDP_AGG_LOSS=survive): DD_STORE_LOST_KEY "RANK" is set (its "/why"
 * says why) and DD_STORE_LOSTS_KEY counts them; DD_STORE_EXPENDABLE_KEY
 * "RANK" says that the store's server declares RANK lost when its
 * connection closes, and barriers do not wait for a lost rank. */
#define DD_STORE_LOST_KEY "dd/agg/down/"
#define DD_STORE_LOSTS_KEY "dd/agg/downs"
#define DD_STORE_EXPENDABLE_KEY "dd/agg/expendable/"

/* The TCP store's server, hosted by rank 0. */
typedef struct dd_store_server dd_store_server_t;

/** Where and for whom the TCP store's server listens. */
typedef struct {
    /** Address to listen on: rank 0's address as the other ranks know it
     *  (a loopback address keeps the store to this host); NULL or "": every
     *  interface. A host name that resolves to a loopback address here is
     *  taken as every interface, since other hosts resolve it elsewhere,
     *  unless one_host says every rank is on this host. */
    const char *addr;
    int one_host; /**< every rank is on this host: names may mean loopback */
    int port;     /**< 0: any free port */
    uint64_t token_hash;
    int world_size;
    /** A client that has not logged in by then is dropped; <= 0:
     *  DD_STORE_LOGIN_S. */
    double login_s;
    /** Added to the wall clock it answers with (rank 0's
     *  DREAMDDP_TEST_CLOCK_SKEW_US). */
    double clock_skew_us;
} dd_store_server_params_t;

/* Limits on clients that have not logged in: what keeps an outsider from
 * holding the store's memory or connections. A rank logs in within a few
 * milliseconds of connecting, so the login deadline is short: a stranger's
 * idle connection holds its place for seconds, not the job's timeout. */
#define DD_STORE_MAX_LOGIN_FRAME 4096 /* bytes of a frame before login */
/* Waiting to log in: this many from one address, world_size + this many in
 * all. */
#define DD_STORE_MAX_PENDING 64
#define DD_STORE_LOGIN_S 5.0 /* the login deadline (or the timeout) */

/**
 * Listens and serves on its own thread. Only clients presenting token_hash
 * and world_size are accepted; before that, a client may send one frame of
 * at most DD_STORE_MAX_LOGIN_FRAME bytes and must log in within login_s. At
 * most DD_STORE_MAX_PENDING clients from one address, and world_size +
 * DD_STORE_MAX_PENDING in all, may wait to log in: beyond that a newcomer
 * takes the place of the oldest (an idle one first), so connections that
 * never log in cannot keep a rank out.
 */
dd_status_t dd_store_server_start(const dd_store_server_params_t *params,
                                  dd_store_server_t **server_p);

/** The port the server listens on. */
int dd_store_server_port(const dd_store_server_t *server);

/**
 * Waits up to timeout_s until every rank but the caller has disconnected,
 * then stops the server and frees it. Clients that never logged in are not
 * waited for.
 */
void dd_store_server_stop(dd_store_server_t *server, double timeout_s);

#endif
