/*
 * The job's watch: how a lost or frozen peer stops every rank within one
 * DREAMDDP_TIMEOUT_S, with one message naming it.
 *
 * - A thread per rank beats a heartbeat counter in the store (dd/hb/RANK)
 *   and looks for the job's abort key (DD_STORE_ABORT_KEY) every period
 *   (a twelfth of the timeout, 20 ms to 0.5 s, longer past 32 ranks:
 *   dd_watch_period; two small requests). When the key appears, it
 *   raises the reason in the rank's dd_abort_t, which every wait of the
 *   library checks: the progress engine, the aggregators' loops, the
 *   store's waits. A store that stops answering is rank 0 lost, since
 *   rank 0 hosts it.
 * - The store's server publishes the key itself when a rank's connection
 *   closes before its goodbye (a killed process): no collective needs to
 *   be waiting on that rank for the others to learn it.
 * - A rank whose own sync fails (a backend error or timeout: a frozen
 *   peer keeps its connections open) takes a census before reporting: the
 *   ranks whose heartbeat did not move over 2 periods are the ones that
 *   stopped. The first rank to claim the abort publishes its finding;
 *   every rank then reports that one message.
 *
 * It must not touch the backends: a rank that aborts leaves their
 * operations in flight, and dd_finalize leaves them to the exit.
 */
#include "api/watch.h"
#include "api/context.h"
#include "boot/generation.h"
#include "core/log.h"
#include "core/status.h"
#include "core/time.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct dd_watch {
    dd_context_h ctx;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    int stopping;
    int acked;    /* dd/abort/seen/RANK is set */
    int lingered; /* rank 0 waited for the others to read the reason */
    double period_s;
    /* The longest time between this rank's beats lately (it decays by a
     * tenth a beat), and the figure of it the store holds (dd/hbgap/RANK,
     * in ms; 0: none yet). The watch thread's alone. */
    double last_beat_t, gap_s;
    int64_t gap_ms_published;
    /* The calls every worker makes in the same order (dd_watch_call_begin),
     * made so far; the one in progress (its index + 1, 0: none), since
     * when, and what it is. Under lock. */
    uint64_t calls, waiting;
    double wait_since;
    char wait_what[96];
    /* Per rank, the calls it made before it left (dd/left/RANK); -1 while
     * it has not. The watch thread's alone. */
    int64_t *left_calls;
    /* DREAMDDP_AGG_LOSS=survive, on a worker: each aggregator's last
     * heartbeat count and when it last moved. The watch thread's alone. */
    int64_t *agg_hb;
    double *agg_hb_at;
};

#define DD_WATCH_LEFT_KEY "dd/left"

/* The beats a second the store (rank 0) serves at most, whatever the
 * world's size: past 32 ranks, every rank beats less often than every 0.5
 * s. At 0.5 s rank 0 spent 2.4 ms of CPU a second more than the others
 * at 16 ranks and 31 to 34 at 128; at 128, 18 to 20 with 1.25 s (the
 * default, DREAMDDP_AGG_LOSS=survive's bound) and 11 to 14 with 2 s
 * (ddbench train-sim none on loopback, bench/NOTES.md). */
#define DD_WATCH_BEATS_PER_S 64.0

double dd_watch_period(double timeout_s, int world_size, double lost_after_s)
{
    double most = timeout_s / 12;
    double p = most < 0.02 ? 0.02 : most > 0.5 ? 0.5 : most;
    /* Never past a twelfth of the timeout, which bounds how late a rank
     * learns of an abort and how long a census takes, nor past a quarter
     * of the stillness that loses an aggregator: a worker sees its beats
     * move at least every 2 periods. */
    if (lost_after_s > 0 && lost_after_s / 4 < most) {
        most = lost_after_s / 4;
    }
    double load = world_size / DD_WATCH_BEATS_PER_S;
    double q = load < most ? load : most;
    return q > p ? q : p;
}

double dd_watch_ctx_period(dd_context_h ctx)
{
    const dd_sched_opts_t *o = &ctx->sched_opts;

    return dd_watch_period(
        ctx->core.timeout_s, ctx->env.world_size,
        o->agg_loss == DD_AGG_LOSS_SURVIVE ? o->agg_lost_after_s : 0);
}

/* The store no longer answers: rank 0, which hosts it, is gone or frozen
 * (a file store has no host, so this is only the TCP store's). */
static void dd_watch_store_lost(dd_context_h ctx, dd_status_t status)
{
    char why[512];

    /* One message on every rank, whether it saw a timeout or a close. */
    (void)status;
    snprintf(why, sizeof(why),
             "rank 0 was lost: the store it hosts (%s) does not answer",
             ctx->store->where);
    dd_abort_raise(&ctx->abort, why);
}

/* Says in the store that this rank has the reason, so that rank 0 need not
 * keep the store for it (dd_watch_linger). */
static void dd_watch_ack(dd_context_h ctx)
{
    char key[64];

    if (__atomic_exchange_n(&ctx->watch->acked, 1, __ATOMIC_ACQ_REL) == 0) {
        snprintf(key, sizeof(key), "dd/abort/seen/%d", ctx->env.rank);
        dd_store_set(ctx->store, key, "1", 1);
    }
}

/* Raises the reason published in the store; -1 when there is none. */
static int dd_watch_adopt(dd_context_h ctx)
{
    void *value;
    size_t len;

    if (dd_store_get_within(ctx->store, DD_STORE_ABORT_KEY, 1.0, &value,
                            &len) != DD_OK) {
        return -1;
    }
    char why[sizeof(ctx->abort.why)];
    snprintf(why, sizeof(why), "%.*s", (int)len, (char *)value);
    free(value);
    dd_log_debug(DD_SUBSYS_CORE, "watch: the job is aborted: %s", why);
    dd_abort_raise(&ctx->abort, why);
    dd_watch_ack(ctx);
    return 0;
}

static void dd_watch_publish(dd_context_h ctx, const char *why);

/* Reads the ranks that left since the last look into w->left_calls;
 * returns the first (lowest) that left before making call `index`, or -1,
 * with its steps in *steps_p. */
static int dd_watch_left_before(dd_context_h ctx, uint64_t index,
                                int64_t *calls_p, int64_t *steps_p)
{
    dd_watch_t *w = ctx->watch;
    int64_t n = 0;

    if (dd_store_add(ctx->store, DD_WATCH_LEFT_KEY, 0, &n) != DD_OK || n == 0) {
        return -1;
    }
    for (int r = 0; r < ctx->env.world_size; r++) {
        char key[64];
        void *v = NULL;
        size_t len = 0;
        int exists = 0;
        long long calls = -1, steps = -1;
        if (r == ctx->env.rank || ctx->roles[r] != DD_ROLE_WORKER) {
            continue;
        }
        snprintf(key, sizeof(key), DD_WATCH_LEFT_KEY "/%d", r);
        if (w->left_calls[r] < 0 &&
            dd_store_check(ctx->store, key, &exists) == DD_OK && exists &&
            dd_store_get_within(ctx->store, key, 1.0, &v, &len) == DD_OK) {
            char text[64];
            snprintf(text, sizeof(text), "%.*s", (int)len, (char *)v);
            free(v);
            if (sscanf(text, "%lld %lld", &calls, &steps) == 2) {
                w->left_calls[r] = calls;
                w->left_calls[ctx->env.world_size + r] = steps;
            }
        }
        if (w->left_calls[r] >= 0 && (uint64_t)w->left_calls[r] <= index) {
            *calls_p = w->left_calls[r];
            *steps_p = w->left_calls[ctx->env.world_size + r];
            return r;
        }
    }
    return -1;
}

/* A call of this worker's has waited over a period: if a worker left the
 * job before making it, it never will, and the job stops now with both
 * named, not at DREAMDDP_TIMEOUT_S. */
static void dd_watch_uneven(dd_context_h ctx)
{
    dd_watch_t *w = ctx->watch;
    char what[sizeof(w->wait_what)], why[512];
    int64_t calls = 0, steps = 0;

    pthread_mutex_lock(&w->lock);
    uint64_t waiting = w->waiting;
    double since = w->wait_since;
    snprintf(what, sizeof(what), "%s", w->wait_what);
    pthread_mutex_unlock(&w->lock);
    if (waiting == 0 || dd_time_now() - since < w->period_s) {
        return;
    }
    int r = dd_watch_left_before(ctx, waiting - 1, &calls, &steps);
    if (r < 0) {
        return;
    }
    snprintf(why, sizeof(why),
             "uneven steps: rank %d left the job (dd_finalize) after %lld "
             "steps and %lld collective calls, while rank %d waits in its "
             "call %llu (%s): the workers ran different numbers of steps; "
             "give every worker the same number of batches, or train "
             "inside model.join() (the PyTorch front end)",
             r, (long long)steps, (long long)calls, ctx->env.rank,
             (unsigned long long)waiting, what);
    dd_watch_publish(ctx, why);
}

/*
 * DREAMDDP_AGG_LOSS=survive: the count of aggregators declared lost, for
 * the aggregation client (dd_agg_env_t::downs); and on a worker, an
 * aggregator whose heartbeat stood still for DREAMDDP_AGG_LOST_AFTER_S
 * (frozen, or its link down) is declared lost. A killed one the store's
 * host declares at once.
 */
static void dd_watch_aggregators(dd_context_h ctx)
{
    dd_watch_t *w = ctx->watch;
    dd_agg_env_t *env = &ctx->agg_env;
    int64_t downs = 0;
    char key[64];

    if (!__atomic_load_n(&ctx->agg_env_ready, __ATOMIC_ACQUIRE) ||
        !env->survive ||
        dd_store_add(ctx->store, DD_STORE_LOSTS_KEY, 0, &downs) != DD_OK) {
        return;
    }
    __atomic_store_n(&env->downs, downs, __ATOMIC_RELEASE);
    if (ctx->role != DD_ROLE_WORKER || w->agg_hb == NULL) {
        return;
    }
    double now = dd_time_now();
    for (int r = 0; r < ctx->env.world_size; r++) {
        int64_t hb = 0;
        int bye = 0;
        if (ctx->job.roles[r] != DD_ROLE_AGGREGATOR || w->agg_hb_at[r] < 0) {
            continue;
        }
        snprintf(key, sizeof(key), "dd/hb/%d", r);
        if (dd_store_add(ctx->store, key, 0, &hb) != DD_OK) {
            return;
        }
        if (hb != w->agg_hb[r] || w->agg_hb_at[r] == 0) {
            w->agg_hb[r] = hb;
            w->agg_hb_at[r] = now;
            continue;
        }
        if (now - w->agg_hb_at[r] < env->lost_after_s) {
            continue;
        }
        snprintf(key, sizeof(key), DD_STORE_BYE_KEY "%d", r);
        if (dd_store_check(ctx->store, key, &bye) == DD_OK && !bye) {
            char why[256];
            snprintf(why, sizeof(why),
                     "aggregator rank %d was lost: no heartbeat for %.1f s "
                     "(DREAMDDP_AGG_LOST_AFTER_S: frozen, or its link is "
                     "down), as worker rank %d saw",
                     r, now - w->agg_hb_at[r], ctx->env.rank);
            dd_agg_declare_lost(ctx->store, r, why);
        }
        w->agg_hb_at[r] = -1; /* lost or gone: not looked at again */
    }
}

/* How late this rank's beats come: the longest time between two lately,
 * published when it moved by a quarter (a census gives a rank that beat
 * late that much longer before it calls it frozen). */
static dd_status_t dd_watch_gap(dd_context_h ctx)
{
    dd_watch_t *w = ctx->watch;
    double now = dd_time_now();
    char key[64];

    if (w->last_beat_t > 0) {
        double gap = now - w->last_beat_t;
        w->gap_s = gap > 0.9 * w->gap_s ? gap : 0.9 * w->gap_s;
    }
    w->last_beat_t = now;
    int64_t ms = (int64_t)(w->gap_s * 1e3);
    if (w->gap_s < 2 * w->period_s && w->gap_ms_published == 0) {
        return DD_OK; /* on time: the census's own allowance covers it */
    }
    if (ms * 4 < w->gap_ms_published * 5 && ms * 4 > w->gap_ms_published * 3) {
        return DD_OK;
    }
    snprintf(key, sizeof(key), "dd/hbgap/%d", ctx->env.rank);
    dd_status_t status =
        dd_store_add(ctx->store, key, ms - w->gap_ms_published, NULL);
    if (status == DD_OK) {
        w->gap_ms_published = ms;
    }
    return status;
}

/* One beat: the heartbeat, then the abort key. */
static int dd_watch_beat(dd_context_h ctx)
{
    char key[64];
    int exists = 0;

    snprintf(key, sizeof(key), "dd/hb/%d", ctx->env.rank);
    dd_status_t status = dd_store_add(ctx->store, key, 1, NULL);
    if (status == DD_OK) {
        status = dd_watch_gap(ctx);
    }
    if (status == DD_OK) {
        status = dd_store_check(ctx->store, DD_STORE_ABORT_KEY, &exists);
    }
    if (status != DD_OK) {
        dd_log_debug(DD_SUBSYS_CORE, "watch: the store failed: %s",
                     dd_status_string(status));
        if (ctx->server == NULL && strncmp(ctx->store->where, "tcp:", 4) == 0) {
            dd_watch_store_lost(ctx, status);
        }
        return -1;
    }
    if (exists) {
        dd_watch_adopt(ctx);
    } else {
        dd_watch_uneven(ctx);
        dd_watch_aggregators(ctx);
    }
    return 0;
}

static void dd_watch_deadline(struct timespec *ts, double s)
{
    clock_gettime(CLOCK_MONOTONIC, ts);
    ts->tv_sec += (time_t)s;
    ts->tv_nsec += (long)((s - (double)(time_t)s) * 1e9);
    if (ts->tv_nsec >= 1000000000L) {
        ts->tv_sec++;
        ts->tv_nsec -= 1000000000L;
    }
}

static void *dd_watch_main(void *arg)
{
    dd_watch_t *w = arg;
    struct timespec ts;

    pthread_mutex_lock(&w->lock);
    while (!w->stopping) {
        dd_watch_deadline(&ts, w->period_s);
        pthread_cond_timedwait(&w->cond, &w->lock, &ts);
        if (w->stopping) {
            break;
        }
        pthread_mutex_unlock(&w->lock);
        int gone =
            dd_watch_beat(w->ctx) != 0 || dd_abort_raised(&w->ctx->abort);
        pthread_mutex_lock(&w->lock);
        if (gone) {
            break; /* nothing more to learn; the waits know */
        }
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

dd_status_t dd_watch_start(dd_context_h ctx)
{
    dd_watch_t *w = calloc(1, sizeof(*w));
    pthread_condattr_t attr;

    if (w == NULL) {
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_CORE,
                        "no memory for the watch");
    }
    w->ctx = ctx;
    w->period_s = dd_watch_ctx_period(ctx);
    w->left_calls = malloc(2 * (size_t)ctx->env.world_size * sizeof(int64_t));
    if (w->left_calls == NULL) {
        free(w);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_CORE,
                        "no memory for the watch");
    }
    for (int r = 0; r < 2 * ctx->env.world_size; r++) {
        w->left_calls[r] = -1;
    }
    w->agg_hb = calloc((size_t)ctx->env.world_size, sizeof(int64_t));
    w->agg_hb_at = calloc((size_t)ctx->env.world_size, sizeof(double));
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&w->cond, &attr);
    pthread_condattr_destroy(&attr);
    ctx->store->abort = &ctx->abort;
    if (pthread_create(&w->thread, NULL, dd_watch_main, w) != 0) {
        pthread_cond_destroy(&w->cond);
        pthread_mutex_destroy(&w->lock);
        free(w->left_calls);
        free(w->agg_hb);
        free(w->agg_hb_at);
        free(w);
        return dd_error(DD_ERR_NO_MEMORY, DD_SUBSYS_CORE,
                        "cannot start the watch thread");
    }
    ctx->watch = w;
    return DD_OK;
}

void dd_watch_stop(dd_context_h ctx)
{
    dd_watch_t *w = ctx->watch;

    if (w == NULL) {
        return;
    }
    pthread_mutex_lock(&w->lock);
    w->stopping = 1;
    pthread_cond_broadcast(&w->cond);
    pthread_mutex_unlock(&w->lock);
    pthread_join(w->thread, NULL);
    pthread_cond_destroy(&w->cond);
    pthread_mutex_destroy(&w->lock);
    free(w->left_calls);
    free(w->agg_hb);
    free(w->agg_hb_at);
    free(w);
    ctx->watch = NULL;
}

void dd_watch_call_begin(dd_context_h ctx, const char *what)
{
    dd_watch_t *w = ctx != NULL ? ctx->watch : NULL;

    if (w == NULL || ctx->role != DD_ROLE_WORKER) {
        return;
    }
    pthread_mutex_lock(&w->lock);
    w->waiting = ++w->calls;
    w->wait_since = dd_time_now();
    snprintf(w->wait_what, sizeof(w->wait_what), "%s", what);
    pthread_mutex_unlock(&w->lock);
}

dd_status_t dd_watch_call_end(dd_context_h ctx, dd_status_t status)
{
    dd_watch_t *w = ctx != NULL ? ctx->watch : NULL;

    if (w != NULL) {
        pthread_mutex_lock(&w->lock);
        w->waiting = 0;
        pthread_mutex_unlock(&w->lock);
    }
    return dd_watch_dropped(ctx, dd_watch_fault(ctx, status));
}

dd_status_t dd_watch_dropped(dd_context_h ctx, dd_status_t status)
{
    if (status == DD_OK || ctx == NULL || ctx->elastic == NULL) {
        return status;
    }
    dd_status_t dropped = dd_boot_generation_check(&ctx->boot, ctx->env.rank);
    return dropped != DD_OK ? dropped : status;
}

void dd_watch_left(dd_context_h ctx, uint64_t steps)
{
    dd_watch_t *w = ctx->watch;
    char key[64], value[64];

    if (w == NULL || ctx->role != DD_ROLE_WORKER ||
        dd_abort_raised(&ctx->abort)) {
        return;
    }
    pthread_mutex_lock(&w->lock);
    uint64_t calls = w->calls;
    pthread_mutex_unlock(&w->lock);
    snprintf(key, sizeof(key), DD_WATCH_LEFT_KEY "/%d", ctx->env.rank);
    int n = snprintf(value, sizeof(value), "%llu %llu",
                     (unsigned long long)calls, (unsigned long long)steps);
    if (dd_store_set(ctx->store, key, value, (size_t)n) == DD_OK) {
        dd_store_add(ctx->store, DD_WATCH_LEFT_KEY, 1, NULL);
    }
}

void dd_watch_leave(dd_context_h ctx)
{
    char key[64];

    if (ctx->store == NULL) {
        return;
    }
    snprintf(key, sizeof(key), DD_STORE_BYE_KEY "%d", ctx->env.rank);
    dd_store_set(ctx->store, key, "1", 1);
}

/* Whether status says a peer may be gone (rather than a bad argument,
 * which this rank alone made). */
static int dd_watch_is_fault(dd_status_t status)
{
    switch (status) {
    case DD_ERR_TIMED_OUT:
    case DD_ERR_UNREACHABLE:
    case DD_ERR_IO:
    case DD_ERR_PEER_LOST:
    case DD_ERR_BACKEND:
    case DD_ERR_CANCELED:
        return 1;
    default:
        return 0;
    }
}

/* Every rank's heartbeat count into hb; -1 where it cannot be read. */
static dd_status_t dd_watch_read_beats(dd_context_h ctx, int64_t *hb)
{
    char key[64];

    for (int r = 0; r < ctx->env.world_size; r++) {
        snprintf(key, sizeof(key), "dd/hb/%d", r);
        dd_status_t status = dd_store_add(ctx->store, key, 0, &hb[r]);
        if (status != DD_OK) {
            return status;
        }
    }
    return DD_OK;
}

/* Sleeps s seconds, or less once the job is aborted. */
static void dd_watch_nap(dd_context_h ctx, double s)
{
    double end = dd_time_now() + s;
    while (!dd_abort_raised(&ctx->abort) && dd_time_now() < end) {
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

/* The ranks whose heartbeat stood still, as "rank 3" or "ranks 3, 5",
 * into out ("" when every rank beats), and for how long (*still_s).
 * Still means over 2 periods, or over twice the longest gap between its
 * beats the rank published lately (a loaded host's ranks beat late: 128
 * ranks starting on 2 cores were called frozen after 1 s), plus a period;
 * at most the timeout. */
static dd_status_t dd_watch_census(dd_context_h ctx, char *out, size_t size,
                                   double *still_s)
{
    int world = ctx->env.world_size, n = 0;
    double period = dd_watch_ctx_period(ctx);
    int64_t *before = calloc((size_t)world * 3, sizeof(int64_t));
    int64_t *after = before + world, *gap_ms = before + 2 * world;
    char key[64];
    dd_status_t status = before != NULL ? DD_OK : DD_ERR_NO_MEMORY;

    out[0] = '\0';
    if (status == DD_OK) {
        status = dd_watch_read_beats(ctx, before);
    }
    double t0 = dd_time_now(), wait = 2 * period;
    if (status == DD_OK) {
        dd_watch_nap(ctx, wait);
        status = dd_watch_read_beats(ctx, after);
    }
    /* The still ones' allowances: the longest sets the census's length. */
    for (int r = 0; status == DD_OK && r < world; r++) {
        gap_ms[r] = 0;
        if (r == ctx->env.rank || after[r] != before[r]) {
            continue;
        }
        snprintf(key, sizeof(key), "dd/hbgap/%d", r);
        status = dd_store_add(ctx->store, key, 0, &gap_ms[r]);
        double allow = 2 * (double)gap_ms[r] / 1e3 + period;
        if (status == DD_OK && allow > wait) {
            wait = allow;
        }
    }
    if (wait > ctx->core.timeout_s) {
        wait = ctx->core.timeout_s;
    }
    while (status == DD_OK && dd_time_now() - t0 < wait &&
           !dd_abort_raised(&ctx->abort)) {
        int still = 0;
        dd_watch_nap(ctx, period);
        for (int r = 0; status == DD_OK && r < world; r++) {
            double allow = 2 * (double)gap_ms[r] / 1e3 + period;
            if (r == ctx->env.rank || after[r] != before[r] ||
                dd_time_now() - t0 >= (allow > 2 * period ? allow : 0)) {
                continue;
            }
            snprintf(key, sizeof(key), "dd/hb/%d", r);
            status = dd_store_add(ctx->store, key, 0, &after[r]);
            still += after[r] == before[r];
        }
        if (still == 0) {
            break; /* every late one beat, or its allowance ran out */
        }
    }
    *still_s = dd_time_now() - t0;
    for (int r = 0; status == DD_OK && r < world; r++) {
        char bye[64];
        int left = 0;
        if (r == ctx->env.rank || after[r] != before[r]) {
            continue;
        }
        snprintf(bye, sizeof(bye), DD_STORE_BYE_KEY "%d", r);
        if (dd_store_check(ctx->store, bye, &left) == DD_OK && left) {
            continue; /* it finished: its watch stopped on purpose */
        }
        size_t o = strlen(out);
        snprintf(out + o, size - o, "%s%d", n++ ? ", " : "", r);
    }
    if (n > 1) {
        char ranks[256];
        snprintf(ranks, sizeof(ranks), "ranks %s", out);
        snprintf(out, size, "%s", ranks);
    } else if (n == 1) {
        char ranks[256];
        snprintf(ranks, sizeof(ranks), "rank %s", out);
        snprintf(out, size, "%s", ranks);
    }
    free(before);
    return status;
}

/* Publishes why as the job's abort unless another rank did first; raises
 * whichever won. */
static void dd_watch_publish(dd_context_h ctx, const char *why)
{
    int64_t claims = 0;
    int exists = 0;

    if (dd_store_check(ctx->store, DD_STORE_ABORT_KEY, &exists) == DD_OK &&
        !exists &&
        dd_store_add(ctx->store, "dd/abort/claim", 1, &claims) == DD_OK &&
        claims == 1) {
        dd_store_set(ctx->store, DD_STORE_ABORT_KEY, why, strlen(why));
        dd_abort_raise(&ctx->abort, why);
        dd_watch_ack(ctx);
        return;
    }
    /* Another rank's finding, which it publishes right after its claim. */
    void *value;
    size_t len;
    if (!dd_abort_raised(&ctx->abort) &&
        dd_store_get_within(ctx->store, DD_STORE_ABORT_KEY,
                            4 * dd_watch_ctx_period(ctx), &value,
                            &len) == DD_OK) {
        char text[sizeof(ctx->abort.why)];
        snprintf(text, sizeof(text), "%.*s", (int)len, (char *)value);
        free(value);
        dd_abort_raise(&ctx->abort, text);
    }
    dd_abort_raise(&ctx->abort, why);
    dd_watch_ack(ctx);
}

/* The job's reason as this thread's error; rank 0 first keeps its store
 * until the others have read it, since an application may well exit on
 * the error without dd_finalize. */
static dd_status_t dd_watch_reason(dd_context_h ctx)
{
    if (ctx->server != NULL) {
        dd_watch_linger(ctx);
    }
    return dd_abort_error(&ctx->abort, DD_SUBSYS_CORE);
}

/* A published error returns as what it is, with the job's message, or this
 * rank's own when that is the job's. */
static dd_status_t dd_watch_as_published(dd_context_h ctx, dd_status_t status,
                                         const char *seen)
{
    int own;
    pthread_mutex_lock(&ctx->abort.lock);
    own = strcmp(ctx->abort.why, seen) == 0;
    pthread_mutex_unlock(&ctx->abort.lock);
    if (own) {
        dd_last_error_set(seen);
    }
    return status;
}

dd_status_t dd_watch_fault(dd_context_h ctx, dd_status_t status)
{
    char seen[512], silent[256], why[sizeof(ctx->abort.why)];

    if (status == DD_OK || ctx == NULL || ctx->watch == NULL) {
        return status;
    }
    /* Ranks that disagree, or a malformed message (its text names the
     * sender): the job's fault. (A commit every rank refuses alike, such
     * as a layer a strategy cannot average, is not: each says it.) */
    int disagree = status == DD_ERR_MISMATCH || status == DD_ERR_MESSAGE;
    snprintf(seen, sizeof(seen), "%s", dd_last_error());
    if (dd_abort_raised(&ctx->abort)) {
        dd_status_t reason = dd_watch_reason(ctx);
        return disagree ? dd_watch_as_published(ctx, status, seen) : reason;
    }
    /* The store may know already (a killed rank): its reason is the cause
     * of whatever error a backend made of it ("not supported", ...). */
    int exists = 0;
    if (dd_store_check(ctx->store, DD_STORE_ABORT_KEY, &exists) == DD_OK &&
        exists && dd_watch_adopt(ctx) == 0) {
        dd_status_t reason = dd_watch_reason(ctx);
        return disagree ? dd_watch_as_published(ctx, status, seen) : reason;
    }
    if (disagree) {
        /* Published as it is, so that every rank (the aggregators too, and
         * the workers whose own call succeeded) reports this, not a lost
         * rank 0 or success. */
        dd_watch_publish(ctx, seen);
        dd_watch_reason(ctx);
        return dd_watch_as_published(ctx, status, seen);
    }
    if (!dd_watch_is_fault(status)) {
        dd_last_error_set(seen);
        return status;
    }
    double still_s = 0;
    dd_status_t census = dd_watch_census(ctx, silent, sizeof(silent), &still_s);
    if (dd_abort_raised(&ctx->abort)) {
        return dd_watch_reason(ctx);
    }
    if (census != DD_OK) {
        dd_watch_store_lost(ctx, census);
        return dd_watch_reason(ctx);
    }
    if (silent[0] != '\0') {
        snprintf(why, sizeof(why),
                 "%s stopped answering (no heartbeat for %.1f s: frozen or "
                 "stopped); rank %d saw: %s",
                 silent, still_s, ctx->env.rank, seen);
    } else {
        snprintf(why, sizeof(why),
                 "rank %d failed (every rank still answers): %s", ctx->env.rank,
                 seen);
    }
    dd_watch_publish(ctx, why);
    return dd_watch_reason(ctx);
}

/* Marks the ranks a reason names as lost or stopped: it starts "rank N"
 * or "ranks N, M" (the forms this file and the store's server write). */
static void dd_watch_named(const char *why, int world, char *named)
{
    const char *p = strncmp(why, "ranks ", 6) == 0  ? why + 6
                    : strncmp(why, "rank ", 5) == 0 ? why + 5
                                                    : NULL;
    while (p != NULL && *p >= '0' && *p <= '9') {
        long r = strtol(p, (char **)&p, 10);
        if (r >= 0 && r < world) {
            named[r] = 1;
        }
        p = strncmp(p, ", ", 2) == 0 ? p + 2 : NULL;
    }
}

void dd_watch_linger(dd_context_h ctx)
{
    if (ctx->watch == NULL || ctx->watch->lingered) {
        return;
    }
    ctx->watch->lingered = 1;
    int world = ctx->env.world_size;
    double period = dd_watch_ctx_period(ctx);
    double deadline = dd_time_now() + ctx->core.timeout_s;
    char *named = calloc((size_t)world, 1);

    if (named == NULL) {
        return;
    }
    pthread_mutex_lock(&ctx->abort.lock);
    dd_watch_named(ctx->abort.why, world, named);
    pthread_mutex_unlock(&ctx->abort.lock);
    /* Every other rank alive reads the reason within a period of its
     * publication (its watch polls that often), says so (dd/abort/seen)
     * and leaves. The ranks the reason names are not waited for, nor
     * those the store has seen lost since (a second rank killed with the
     * first, an aggregator dropped before), which never will read it. */
    for (int r = 0; r < world && dd_time_now() < deadline; r++) {
        char seen[64], bye[64];
        int has_seen = 0, left = 0, lost = 0;
        snprintf(seen, sizeof(seen), "dd/abort/seen/%d", r);
        snprintf(bye, sizeof(bye), DD_STORE_BYE_KEY "%d", r);
        while (r != ctx->env.rank && !named[r] && dd_time_now() < deadline) {
            if (dd_store_check(ctx->store, seen, &has_seen) != DD_OK ||
                dd_store_check(ctx->store, bye, &left) != DD_OK ||
                dd_store_rank_lost(ctx->store, r, &lost) != DD_OK) {
                r = world;
                break;
            }
            if (has_seen || left || lost) {
                dd_log_debug(DD_SUBSYS_CORE, "watch: rank %d %s", r,
                             has_seen ? "has the reason"
                             : left   ? "left"
                                      : "was lost");
                break;
            }
            struct timespec ts = {0, (long)(period / 8 * 1e9)};
            nanosleep(&ts, NULL);
        }
    }
    dd_log_debug(DD_SUBSYS_CORE, "watch: the others have the reason");
    free(named);
}
