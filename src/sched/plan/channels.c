/*
 * The N-channel network model (plan.h): N channels share the NIC, each
 * carrying its syncs one after another; the k channels with a sync on the
 * wire each get 1/k of the NIC's rate, so a sync's time (comm_s, at the
 * whole rate) stretches while others run beside it. Syncs start in launch
 * order, as the engine starts them, each on the channel that
 * dd_plan_assign_next gives it. Pure, as plan.c: no I/O, no clocks, no
 * globals; it simulates exactly from one event (a launch, a landing) to
 * the next.
 */
#include "sched/plan/plan.h"

#include <math.h>
#include <stdlib.h>

typedef struct {
    double left; /* seconds of the whole NIC's rate still to go */
    double *out; /* where its landing time goes */
    unsigned chan;
    int on_wire;
} dd_plan_net_job_t;

struct dd_plan_net {
    dd_plan_assign_t assign;
    double now;
    dd_plan_net_job_t *job; /* launched, not landed, in launch order */
    size_t n, cap;
    int busy[DD_PLAN_MAX_CHANNELS];
};

void dd_plan_assign_init(dd_plan_assign_t *a, unsigned channels)
{
    *a = (dd_plan_assign_t){.channels = channels < 1 ? 1 : channels};
    if (a->channels > DD_PLAN_MAX_CHANNELS) {
        a->channels = DD_PLAN_MAX_CHANNELS;
    }
}

unsigned dd_plan_assign_next(dd_plan_assign_t *a, uint64_t step, double work)
{
    unsigned best = 0;

    if (!a->started || step != a->step) {
        for (unsigned c = 0; c < DD_PLAN_MAX_CHANNELS; c++) {
            a->load[c] = 0.0;
        }
        a->started = 1;
        a->step = step;
    }
    for (unsigned c = 1; c < a->channels; c++) {
        if (a->load[c] < a->load[best]) {
            best = c;
        }
    }
    a->load[best] += work;
    return best;
}

dd_status_t dd_plan_net_create(unsigned channels, size_t capacity,
                               dd_plan_net_t **net_p)
{
    if (channels < 1 || channels > DD_PLAN_MAX_CHANNELS || net_p == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    dd_plan_net_t *net = calloc(1, sizeof(*net));
    if (net == NULL) {
        return DD_ERR_NO_MEMORY;
    }
    net->cap = capacity > 0 ? capacity : 1;
    net->job = malloc(net->cap * sizeof(*net->job));
    if (net->job == NULL) {
        free(net);
        return DD_ERR_NO_MEMORY;
    }
    dd_plan_assign_init(&net->assign, channels);
    *net_p = net;
    return DD_OK;
}

void dd_plan_net_reset(dd_plan_net_t *net)
{
    unsigned channels = net->assign.channels;

    net->n = 0;
    net->now = 0.0;
    for (unsigned c = 0; c < DD_PLAN_MAX_CHANNELS; c++) {
        net->busy[c] = 0;
    }
    dd_plan_assign_init(&net->assign, channels);
}

void dd_plan_net_free(dd_plan_net_t *net)
{
    if (net != NULL) {
        free(net->job);
        free(net);
    }
}

/* Puts on the wire, in launch order, every sync whose channel is free; one
 * whose channel is busy holds back those launched after it. */
static void dd_plan_net_start(dd_plan_net_t *net)
{
    for (size_t j = 0; j < net->n; j++) {
        dd_plan_net_job_t *x = &net->job[j];
        if (x->on_wire) {
            continue;
        }
        if (net->busy[x->chan]) {
            break;
        }
        x->on_wire = 1;
        net->busy[x->chan] = 1;
    }
}

/* Moves the network to the next landing or to until, whichever comes
 * first. */
static void dd_plan_net_step(dd_plan_net_t *net, double until)
{
    size_t k = 0;
    double least = INFINITY;

    for (size_t j = 0; j < net->n; j++) {
        if (net->job[j].on_wire) {
            k++;
            least = net->job[j].left < least ? net->job[j].left : least;
        }
    }
    if (k == 0) {
        net->now = until > net->now ? until : net->now;
        return;
    }
    double dt = least * (double)k;
    if (net->now + dt > until) {
        double done = (until - net->now) / (double)k;
        for (size_t j = 0; j < net->n; j++) {
            net->job[j].left -= net->job[j].on_wire ? done : 0.0;
        }
        net->now = until;
        return;
    }
    net->now += dt;
    size_t kept = 0;
    for (size_t j = 0; j < net->n; j++) {
        dd_plan_net_job_t x = net->job[j];
        if (x.on_wire && x.left <= least * (1.0 + 1e-12)) {
            *x.out = net->now;
            net->busy[x.chan] = 0;
            continue;
        }
        x.left -= x.on_wire ? least : 0.0;
        net->job[kept++] = x;
    }
    net->n = kept;
    dd_plan_net_start(net);
}

static void dd_plan_net_advance(dd_plan_net_t *net, double t)
{
    while (net->now < t && net->n > 0) {
        dd_plan_net_step(net, t);
    }
    net->now = t > net->now ? t : net->now;
}

dd_status_t dd_plan_net_launch(dd_plan_net_t *net, double t, uint64_t step,
                               double work, double *land_p)
{
    if (net->n == net->cap) {
        size_t cap = 2 * net->cap;
        dd_plan_net_job_t *job = realloc(net->job, cap * sizeof(*job));
        if (job == NULL) {
            return DD_ERR_NO_MEMORY;
        }
        net->job = job;
        net->cap = cap;
    }
    dd_plan_net_advance(net, t);
    unsigned chan = dd_plan_assign_next(&net->assign, step, work);
    *land_p = -2.0; /* in flight */
    net->job[net->n++] =
        (dd_plan_net_job_t){.left = work, .out = land_p, .chan = chan};
    dd_plan_net_start(net);
    return DD_OK;
}

double dd_plan_net_wait(dd_plan_net_t *net, const double *land, double t)
{
    dd_plan_net_advance(net, t);
    while (*land < 0.0 && net->n > 0) {
        dd_plan_net_step(net, INFINITY);
    }
    return *land;
}

double dd_plan_net_idle(dd_plan_net_t *net, double t)
{
    dd_plan_net_advance(net, t);
    while (net->n > 0) {
        dd_plan_net_step(net, INFINITY);
    }
    return net->now;
}

dd_status_t dd_plan_channels_finish(const double *release_s,
                                    const double *comm_s, const uint64_t *step,
                                    size_t n, unsigned channels,
                                    double *finish_s)
{
    dd_plan_net_t *net = NULL;

    if (release_s == NULL || comm_s == NULL || finish_s == NULL) {
        return DD_ERR_INVALID_PARAM;
    }
    for (size_t j = 0; j < n; j++) {
        if (!isfinite(release_s[j]) || release_s[j] < 0 ||
            !isfinite(comm_s[j]) || comm_s[j] < 0 ||
            (j > 0 && release_s[j] < release_s[j - 1])) {
            return DD_ERR_INVALID_PARAM;
        }
    }
    dd_status_t status = dd_plan_net_create(channels, n, &net);
    for (size_t j = 0; status == DD_OK && j < n; j++) {
        status = dd_plan_net_launch(net, release_s[j], step ? step[j] : 0,
                                    comm_s[j], &finish_s[j]);
    }
    if (status == DD_OK) {
        dd_plan_net_idle(net, 0.0);
    }
    dd_plan_net_free(net);
    return status;
}
