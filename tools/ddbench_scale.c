/*
 * ddbench scale PROFILE_DIR [--gpus LIST] [--per-node G] [--inter RATE]
 * [--intra RATE] [--aggregators LIST] [--agg-latency S] [--agg-burst S]
 * [--agg-window-rate RATE] [--agg-window-burst S] [--ring-latency S] [--H N]
 * [--json]:
 * a model of the job at 8 to 1,024 GPUs, from the planner's own cost model.
 *
 * For each world size N (G GPUs a node, nodes = N / G), each route gives
 * a layer of M bytes a sync time:
 *   ring          one ring over every rank: 2(N-1) steps of latency a and
 *                 2(N-1)/N M through the slowest link (a node's NIC, or
 *                 the intra-node one when the job fits a node); with one
 *                 rank a node and --ring-latency S (a small allreduce's
 *                 time among them), S as for the aggregators below in
 *                 place of the steps;
 *   hierarchical  within each node 2(G-1)/G M at the intra-node rate
 *                 (the leaders' sums and their broadcast back), then a
 *                 ring among the nodes' leaders: 2(nodes-1) steps and
 *                 2(nodes-1)/nodes M through the NIC (--ring-latency
 *                 S in place of the steps, as for the ring);
 *   aggregators   the same within each node, then the nodes' pushes and
 *                 pulls through k CPU aggregators sharing the sum with the
 *                 nodes, BytePS's optimum 2n(n-1) M / ((n^2 + kn - 2k) B)
 *                 for n nodes (M / B once k >= n), and a round trip's
 *                 fixed cost: 2 steps of latency, or what of a measured
 *                 --agg-latency S the sync's bytes do not hide: S is a
 *                 small sync's time through the aggregators alone (the
 *                 push, the wait for the slowest worker's chunk, the sum
 *                 and the pull, which a loaded host stretches), and the
 *                 engine keeps DD_ENGINE_DEPTH syncs in flight, so one's
 *                 round trip overlaps the others' bytes: a sync whose
 *                 bytes take T holds the wire for the larger of T and
 *                 (S + T) / DD_ENGINE_DEPTH (S / DD_ENGINE_DEPTH beside
 *                 its bytes took every sync's round trip as exposed: at
 *                 16 + 8 and 100 Mbit/s the library's timeline had
 *                 dreamddp:4's 1.4 MB syncs back to back on its two
 *                 channels, 10.7 MB/s with no 16 ms a sync); nothing
 *                 overlaps the rest of the last one's, so an iteration
 *                 that syncs ends S - S / DD_ENGINE_DEPTH after its last
 *                 sync leaves the wire, at the earliest;
 *                 and --agg-burst S once an iteration, after that: what
 *                 a stream of pushes costs beyond its bytes, the homes
 *                 idle until every worker's first piece is in and the
 *                 workers idle while the last answers drain (bare TCP's,
 *                 from bench/tcpfloor.c --paced at two sizes; a 4 KB
 *                 sync moves too little to show it);
 *                 for plsgd and dreamddp, which sync one window's share of
 *                 the bytes an iteration, --agg-window-rate RATE and
 *                 --agg-window-burst S in place of the NIC's rate and
 *                 --agg-burst where given: the rate through the
 *                 aggregators depends on how long a stream runs (bare TCP
 *                 paced alike at 100 Mbit/s, the bytes beyond a layer's:
 *                 at 16 + 8 a window's share 8 % faster than a whole
 *                 model's, at 8 + 4 6 % slower), so a window's stream
 *                 takes its own, measured at its bytes.
 * Those times, as each layer's comm time beside the profile's backward
 * times, go through the planner's cost model (plan.h: ddp as S-SGD over
 * the library's buckets, layers in backward order up to
 * DREAMDDP_FIRST_BUCKET_BYTES, then DREAMDDP_BUCKET_BYTES, as PyTorch
 * DDP's, each one sync launched once its last layer's backward is done
 * (gpt2-blocks at scale 0.05: 1.4 MB, then the other 23.5 MB), full Local SGD,
 * uniform partial Local SGD and the dreamddp plan, each per iteration;
 * dd_plan_cost_landing for the last sync's landing). For each
 * strategy it picks the route, and for aggregators the fewest of the
 * counts tried that come within 5 % of the best of them, and says why.
 *
 * Left out: compute's own scaling (the profile's backward times hold at
 * every size), the library's CPU work (summation, copies, the codecs),
 * congestion beyond the NIC (a non-blocking fabric is assumed), stragglers,
 * and streams (one connection a peer).
 */
#include "core/config.h"
#include "core/json_write.h"
#include "ddbench.h"
#include "profile_read.h"
#include "sched/engine/engine.h"
#include "sched/plan/plan.h"
#include "sched/sched_config.h"

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DDBENCH_SCALE_MAX_SIZES 32

typedef enum {
    DDBENCH_ROUTE_RING,
    DDBENCH_ROUTE_HIER,
    DDBENCH_ROUTE_AGG,
    DDBENCH_ROUTES
} ddbench_route_t;

static const char *const ddbench_route_names[DDBENCH_ROUTES] = {
    "ring", "hierarchical", "aggregators"};

typedef enum {
    DDBENCH_DDP,
    DDBENCH_LOCALSGD,
    DDBENCH_PLSGD,
    DDBENCH_DREAMDDP,
    DDBENCH_STRATEGIES
} ddbench_strategy_t;

typedef struct {
    long gpus[DDBENCH_SCALE_MAX_SIZES];
    int n_gpus;
    long per_node;
    double inter, intra;             /* bytes per second */
    double inter_lat_s, intra_lat_s; /* a step's latency */
    double agg_lat_s;       /* a small sync's time through them; < 0: none */
    double agg_burst_s;     /* a stream's fill and drain through them */
    double agg_win;         /* bytes/s for a window's stream; <= 0: inter */
    double agg_win_burst_s; /* its burst; < 0: agg_burst_s */
    double ring_lat_s;      /* a small allreduce among the nodes; < 0: none */
    long aggs[DDBENCH_SCALE_MAX_SIZES];
    int n_aggs; /* 0: the nodes' count over 8, 4, 2 and 1 */
    long h;
    double scale, time_scale;
    size_t first_bucket, bucket; /* ddp's, as the library takes them */
    int json;
} ddbench_scale_opts_t;

typedef struct {
    double iter_s[DDBENCH_ROUTES][DDBENCH_STRATEGIES];
    long k[DDBENCH_STRATEGIES]; /* aggregators picked, per strategy */
    double compute_s;
} ddbench_scale_row_t;

static void ddbench_scale_usage(FILE *out)
{
    fprintf(
        out,
        "usage: ddbench scale PROFILE_DIR [--gpus LIST] [--per-node G]\n"
        "         [--inter RATE] [--intra RATE] [--aggregators LIST]\n"
        "         [--agg-latency S] [--agg-burst S] [--agg-window-rate RATE]\n"
        "         [--agg-window-burst S] [--ring-latency S] [--H N]\n"
        "         [--scale X] [--time-scale T] [--json]\n"
        "  --gpus LIST         world sizes (default 8,64,256,1024)\n"
        "  --per-node G        GPUs a node (default 8)\n"
        "  --inter RATE        a node's NIC: 100gbit, 400gbit, 250mbit "
        "or bytes/s\n"
        "                      (default 100gbit)\n"
        "  --intra RATE        within a node (default 2400gbit: NVLink)\n"
        "  --inter-latency S   a step across nodes (default 20e-6)\n"
        "  --intra-latency S   a step within a node (default 5e-6)\n"
        "  --agg-latency S     a small sync's time through the "
        "aggregators; a sync whose\n"
        "                      bytes take T holds the wire for the "
        "larger of T and\n"
        "                      (S + T) / %d, the engine keeping %d in "
        "flight (default:\n"
        "                      two steps across nodes)\n"
        "  --agg-burst S       what a stream of syncs through the "
        "aggregators costs\n"
        "                      beyond its bytes (the first answers' wait "
        "and the last\n"
        "                      ones' drain), once an iteration (default 0)\n"
        "  --agg-window-rate RATE  the NIC's rate through the "
        "aggregators for plsgd\n"
        "                      and dreamddp, whose streams are a window's "
        "share of the\n"
        "                      bytes (default: --inter)\n"
        "  --agg-window-burst S    --agg-burst for those streams "
        "(default: --agg-burst)\n"
        "  --ring-latency S    a small allreduce's time among the nodes "
        "(one rank a\n"
        "                      node), for the ring among them the same "
        "way (default:\n"
        "                      2(nodes-1) steps across nodes)\n"
        "  --aggregators LIST  counts to try (default: the nodes' count "
        "/ 8, / 4,\n"
        "                      / 2 and itself)\n"
        "  --H N               the window of localsgd, plsgd and "
        "dreamddp (default 4)\n"
        "  --scale X           layer sizes times X (default 1)\n"
        "  --time-scale T      backward times times T (default 1)\n"
        "  --json              one JSON line per world size\n",
        DD_ENGINE_DEPTH, DD_ENGINE_DEPTH);
}

/* "100gbit", "250mbit", "1.5gbit" or bytes per second. */
static int ddbench_scale_rate(const char *opt, const char *s, double *rate)
{
    char *end;
    double v = strtod(s, &end);
    double mul = 1;

    if (end != s && strcmp(end, "gbit") == 0) {
        mul = 1e9 / 8;
    } else if (end != s && strcmp(end, "mbit") == 0) {
        mul = 1e6 / 8;
    } else if (end == s || *end != '\0') {
        v = -1;
    }
    if (!(v > 0) || !isfinite(v * mul)) {
        fprintf(stderr,
                "ddbench scale: %s takes a rate such as 100gbit, 250mbit or "
                "bytes per second, not '%s'\n",
                opt, s);
        return -1;
    }
    *rate = v * mul;
    return 0;
}

/* "8,64,256" into out (at most DDBENCH_SCALE_MAX_SIZES values). */
static int ddbench_scale_list(const char *opt, const char *s, long min,
                              long *out, int *n)
{
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", s);
    *n = 0;
    for (char *save = NULL, *t = strtok_r(buf, ",", &save); t != NULL;
         t = strtok_r(NULL, ",", &save)) {
        if (*n == DDBENCH_SCALE_MAX_SIZES ||
            dd_arg_long("ddbench scale", opt, t, min, 1L << 20, &out[*n])) {
            if (*n == DDBENCH_SCALE_MAX_SIZES) {
                fprintf(stderr, "ddbench scale: %s takes at most %d values\n",
                        opt, DDBENCH_SCALE_MAX_SIZES);
            }
            return -1;
        }
        (*n)++;
    }
    if (*n == 0) {
        fprintf(stderr, "ddbench scale: %s is empty\n", opt);
        return -1;
    }
    return 0;
}

/* Within a node: the leaders' sums and their broadcast back. */
static double ddbench_scale_intra(const ddbench_scale_opts_t *o, double g,
                                  double m)
{
    return g > 1 ? 2 * (g - 1) * o->intra_lat_s + 2 * (g - 1) / g * m / o->intra
                 : 0;
}

/* What a sync among the nodes costs beside its bytes (bytes_s on the
 * wire): steps of latency, or of a measured small sync's time S what its
 * bytes do not hide, DD_ENGINE_DEPTH syncs in flight holding the wire for
 * the larger of bytes_s and (S + bytes_s) / DD_ENGINE_DEPTH each. */
static double ddbench_scale_fixed(double measured_s, double steps,
                                  double step_s, double bytes_s)
{
    if (measured_s < 0) {
        return steps * step_s;
    }
    double hold = (measured_s + bytes_s) / DD_ENGINE_DEPTH - bytes_s;
    return hold > 0 ? hold : 0;
}

/* How long after such a sync leaves the wire its result lands: the rest
 * of a measured S (the latency steps are otherwise the whole of it). */
static double ddbench_scale_land_of(double measured_s)
{
    return measured_s >= 0 ? measured_s - measured_s / DD_ENGINE_DEPTH : 0;
}

static double ddbench_scale_agg_fixed(const ddbench_scale_opts_t *o,
                                      double bytes_s)
{
    return ddbench_scale_fixed(o->agg_lat_s, 2, o->inter_lat_s, bytes_s);
}

/* The landing of a route's syncs among n_gpus: a measured time's rest
 * where the route takes it (0 within one node, and for a ring through
 * more than one rank a node, which pays its steps), and the aggregators'
 * burst. */
static double ddbench_scale_land(const ddbench_scale_opts_t *o,
                                 ddbench_route_t route, long n_gpus)
{
    long g = n_gpus < o->per_node ? n_gpus : o->per_node;
    long nodes = (n_gpus + g - 1) / g;

    if (nodes <= 1 || (route == DDBENCH_ROUTE_RING && g > 1)) {
        return 0;
    }
    if (route == DDBENCH_ROUTE_AGG) {
        return ddbench_scale_land_of(o->agg_lat_s) + o->agg_burst_s;
    }
    return ddbench_scale_land_of(o->ring_lat_s);
}

/* One sync of m bytes over route among n_gpus (k aggregators). */
static double ddbench_scale_sync(const ddbench_scale_opts_t *o,
                                 ddbench_route_t route, long n_gpus, long k,
                                 double m)
{
    double g = (double)(n_gpus < o->per_node ? n_gpus : o->per_node);
    double nodes = ceil((double)n_gpus / g), n = (double)n_gpus;

    if (nodes <= 1) {
        /* One node: every route is the ring within it. */
        return 2 * (n - 1) * o->intra_lat_s + 2 * (n - 1) / n * m / o->intra;
    }
    switch (route) {
    case DDBENCH_ROUTE_RING: {
        double b = o->inter < o->intra ? o->inter : o->intra;
        double steps = 2 * (n - 1);
        double bytes_s = 2 * (n - 1) / n * m / b;
        double fixed = g > 1 ? steps * o->inter_lat_s
                             : ddbench_scale_fixed(o->ring_lat_s, steps,
                                                   o->inter_lat_s, bytes_s);
        return fixed + bytes_s;
    }
    case DDBENCH_ROUTE_HIER: {
        double bytes_s = 2 * (nodes - 1) / nodes * m / o->inter;
        return ddbench_scale_intra(o, g, m) +
               ddbench_scale_fixed(o->ring_lat_s, 2 * (nodes - 1),
                                   o->inter_lat_s, bytes_s) +
               bytes_s;
    }
    default: {
        double bytes_s = ddbench_byteps_share(nodes, (double)k) * m / o->inter;
        return ddbench_scale_intra(o, g, m) +
               ddbench_scale_agg_fixed(o, bytes_s) + bytes_s;
    }
    }
}

/* The layer-by-layer strategies' seconds per iteration (Local SGD, plsgd
 * and dreamddp; ddp's, over buckets, is ddbench_scale_ddp's) with comm as
 * the layers' sync times and each iteration's last sync landing land_s
 * after it leaves the wire: the planner's cost model, as ddbench plan
 * runs it. The
 * dreamddp plan is the planner's, made without land_s as the library
 * makes it; full Local SGD syncs once a window, so lands once. */
static dd_status_t ddbench_scale_strategies(const dd_profile_t *p,
                                            const double *bp, double *comm,
                                            unsigned h, double land_s,
                                            double *out)
{
    dd_plan_input_t in = {p->num_layers, bp, comm};
    dd_plan_cost_t cost;
    dd_plan_t *plan = NULL;
    dd_status_t status;

    if ((status = ddbench_plan_cost(&in, dd_plan_plsgd, h, land_s,
                                    &out[DDBENCH_PLSGD])) != DD_OK ||
        (status = dd_plan_flsgd_cost(&in, h, &cost)) != DD_OK) {
        return status;
    }
    out[DDBENCH_LOCALSGD] = cost.iter_s + land_s / h;
    if ((status = dd_plan_dreamddp(&in, h, NULL, &plan)) != DD_OK ||
        (status = dd_plan_cost_landing(&in, plan, land_s, &cost)) != DD_OK) {
        dd_plan_free(plan);
        return status;
    }
    out[DDBENCH_DREAMDDP] = cost.iter_s;
    dd_plan_free(plan);
    for (int s = DDBENCH_LOCALSGD; s < DDBENCH_STRATEGIES; s++) {
        out[s] += p->frozen_bp_s;
    }
    return DD_OK;
}

/* ddp's seconds per iteration over route into out: the library's ddp sends
 * buckets as PyTorch DDP does, layers in backward order up to
 * DREAMDDP_FIRST_BUCKET_BYTES, then DREAMDDP_BUCKET_BYTES, each leaving once
 * it holds that many bytes or backward ends; so a bucket is one sync, of
 * its layers' bytes, launched after its last layer's backward. */
static dd_status_t ddbench_scale_ddp(const dd_profile_t *p,
                                     const ddbench_scale_opts_t *o,
                                     ddbench_route_t route, long n_gpus, long k,
                                     const double *bp, double land_s,
                                     double *out)
{
    size_t n = p->num_layers, nb = 0;
    double *b_bp = calloc(n, sizeof(double));
    double *b_comm = calloc(n, sizeof(double));
    double bytes = 0, t = 0;
    dd_status_t status = DD_ERR_NO_MEMORY;

    if (b_bp != NULL && b_comm != NULL) {
        for (size_t l = n; l-- > 0;) {
            bytes += (double)p->num_params[l] * 4 * o->scale;
            t += bp[l];
            if (bytes >= (double)(nb == 0 ? o->first_bucket : o->bucket) ||
                l == 0) {
                b_bp[nb] = t;
                b_comm[nb] = ddbench_scale_sync(o, route, n_gpus, k, bytes);
                nb++;
                bytes = t = 0;
            }
        }
        /* The planner's order: the last bucket of backward first. */
        for (size_t i = 0; i < nb / 2; i++) {
            double x = b_bp[i], y = b_comm[i];
            b_bp[i] = b_bp[nb - 1 - i];
            b_comm[i] = b_comm[nb - 1 - i];
            b_bp[nb - 1 - i] = x;
            b_comm[nb - 1 - i] = y;
        }
        dd_plan_input_t in = {nb, b_bp, b_comm};
        status = ddbench_plan_cost(&in, dd_plan_ssgd, 1, land_s, out);
        *out += p->frozen_bp_s;
    }
    free(b_bp);
    free(b_comm);
    return status;
}

/* Every layer's sync time over route into comm. */
static void ddbench_scale_comm(const dd_profile_t *p,
                               const ddbench_scale_opts_t *o,
                               ddbench_route_t route, long n_gpus, long k,
                               double *comm)
{
    for (size_t l = 0; l < p->num_layers; l++) {
        double m = (double)p->num_params[l] * 4 * o->scale;
        comm[l] = ddbench_scale_sync(o, route, n_gpus, k, m);
    }
}

/* The aggregators' options for a stream of one window's share. */
static ddbench_scale_opts_t
ddbench_scale_window_opts(const ddbench_scale_opts_t *o)
{
    ddbench_scale_opts_t w = *o;
    w.inter = o->agg_win > 0 ? o->agg_win : o->inter;
    w.agg_burst_s =
        o->agg_win_burst_s >= 0 ? o->agg_win_burst_s : o->agg_burst_s;
    return w;
}

/* plsgd's and dreamddp's figures through k aggregators at the window's
 * rate and burst (--agg-window-rate, --agg-window-burst) into t. */
static dd_status_t ddbench_scale_window(const dd_profile_t *p,
                                        const ddbench_scale_opts_t *o,
                                        long n_gpus, long k, const double *bp,
                                        double *comm, double *t)
{
    ddbench_scale_opts_t w = ddbench_scale_window_opts(o);
    double tw[DDBENCH_STRATEGIES];

    ddbench_scale_comm(p, &w, DDBENCH_ROUTE_AGG, n_gpus, k, comm);
    dd_status_t status = ddbench_scale_strategies(
        p, bp, comm, (unsigned)o->h,
        ddbench_scale_land(&w, DDBENCH_ROUTE_AGG, n_gpus), tw);
    if (status == DD_OK) {
        t[DDBENCH_PLSGD] = tw[DDBENCH_PLSGD];
        t[DDBENCH_DREAMDDP] = tw[DDBENCH_DREAMDDP];
    }
    return status;
}

/* One world size: every route's figures, the aggregators' best count per
 * strategy among those tried. */
static dd_status_t ddbench_scale_row(const dd_profile_t *p,
                                     const ddbench_scale_opts_t *o, long n_gpus,
                                     double *bp, double *comm,
                                     ddbench_scale_row_t *row)
{
    long g = n_gpus < o->per_node ? n_gpus : o->per_node;
    long nodes = (n_gpus + g - 1) / g;
    long ks[DDBENCH_SCALE_MAX_SIZES];
    int n_ks = 0;
    dd_status_t status;

    row->compute_s = p->frozen_bp_s;
    for (size_t l = 0; l < p->num_layers; l++) {
        row->compute_s += bp[l];
    }
    if (o->n_aggs > 0) {
        memcpy(ks, o->aggs, sizeof(long) * (size_t)o->n_aggs);
        n_ks = o->n_aggs;
    } else {
        for (long d = 8; d >= 1; d /= 2) {
            long k = nodes / d > 0 ? nodes / d : 1;
            if (n_ks == 0 || ks[n_ks - 1] != k) {
                ks[n_ks++] = k;
            }
        }
    }
    for (int r = 0; r < DDBENCH_ROUTES; r++) {
        double best[DDBENCH_STRATEGIES], t[DDBENCH_STRATEGIES];
        double per_k[DDBENCH_SCALE_MAX_SIZES][DDBENCH_STRATEGIES];
        int tries = r == DDBENCH_ROUTE_AGG ? n_ks : 1;
        for (int i = 0; i < tries; i++) {
            ddbench_scale_comm(p, o, (ddbench_route_t)r, n_gpus, ks[i], comm);
            double land = ddbench_scale_land(o, (ddbench_route_t)r, n_gpus);
            status =
                ddbench_scale_strategies(p, bp, comm, (unsigned)o->h, land, t);
            if (status == DD_OK) {
                status = ddbench_scale_ddp(p, o, (ddbench_route_t)r, n_gpus,
                                           ks[i], bp, land, &t[DDBENCH_DDP]);
            }
            if (status == DD_OK && r == DDBENCH_ROUTE_AGG &&
                (o->agg_win > 0 || o->agg_win_burst_s >= 0)) {
                status = ddbench_scale_window(p, o, n_gpus, ks[i], bp, comm, t);
            }
            if (status != DD_OK) {
                return status;
            }
            memcpy(per_k[i], t, sizeof(t));
        }
        for (int s = 0; s < DDBENCH_STRATEGIES; s++) {
            best[s] = per_k[0][s];
            for (int i = 1; i < tries; i++) {
                best[s] = per_k[i][s] < best[s] ? per_k[i][s] : best[s];
            }
            row->iter_s[r][s] = best[s];
            if (r != DDBENCH_ROUTE_AGG) {
                continue;
            }
            /* The fewest machines within 5 % of the best count tried. */
            for (int i = 0; i < tries; i++) {
                if (per_k[i][s] <= 1.05 * best[s]) {
                    row->iter_s[r][s] = per_k[i][s];
                    row->k[s] = ks[i];
                    break;
                }
            }
        }
    }
    return DD_OK;
}

static const char *ddbench_scale_strategy_name(int s, long h, char *buf,
                                               size_t size)
{
    static const char *const base[DDBENCH_STRATEGIES] = {"ddp", "localsgd",
                                                         "plsgd", "dreamddp"};
    if (s == DDBENCH_DDP) {
        snprintf(buf, size, "ddp");
    } else {
        snprintf(buf, size, "%s:%ld", base[s], h);
    }
    return buf;
}

/* The route a strategy would take, and why, in one sentence. */
static int ddbench_scale_pick(const ddbench_scale_row_t *row, int s)
{
    int best = DDBENCH_ROUTE_RING;
    for (int r = 1; r < DDBENCH_ROUTES; r++) {
        if (row->iter_s[r][s] < 0.99 * row->iter_s[best][s]) {
            best = r;
        }
    }
    return best;
}

static void ddbench_scale_why(const ddbench_scale_opts_t *o, long n_gpus,
                              const ddbench_scale_row_t *row, int s, char *buf,
                              size_t size)
{
    long g = n_gpus < o->per_node ? n_gpus : o->per_node;
    long nodes = (n_gpus + g - 1) / g;
    int r = ddbench_scale_pick(row, s);
    double ring = row->iter_s[DDBENCH_ROUTE_RING][s];

    if (nodes <= 1) {
        snprintf(buf, size,
                 "one node: every route is the ring over the intra-node "
                 "links");
    } else if (r == DDBENCH_ROUTE_RING) {
        snprintf(buf, size,
                 "the ring moves 2(N-1)/N of the bytes through each NIC, "
                 "as the others do, and its latency (%ld steps) costs no "
                 "more than their intra-node stage",
                 2 * (n_gpus - 1));
    } else if (r == DDBENCH_ROUTE_HIER) {
        snprintf(buf, size,
                 "%.2fx the ring's time: the ring among %ld nodes takes "
                 "%ld steps of latency instead of %ld, for the same bytes "
                 "through each NIC",
                 row->iter_s[r][s] / ring, nodes, 2 * (nodes - 1),
                 2 * (n_gpus - 1));
    } else {
        snprintf(buf, size,
                 "%.2fx the ring's time: with %ld aggregator%s (the fewest "
                 "tried within 5 %% of the best) each NIC moves %.2f of the "
                 "bytes each way instead of 2(n-1)/n = %.2f",
                 row->iter_s[r][s] / ring, row->k[s], row->k[s] == 1 ? "" : "s",
                 ddbench_byteps_share((double)nodes, (double)row->k[s]),
                 ddbench_byteps_share((double)nodes, 0));
    }
}

static void ddbench_scale_print(const ddbench_scale_opts_t *o, long n_gpus,
                                const ddbench_scale_row_t *row)
{
    long g = n_gpus < o->per_node ? n_gpus : o->per_node;
    char name[32], why[256];

    printf("%ld GPUs (%ld node%s of %ld), compute %.4f s/iter:\n", n_gpus,
           (n_gpus + g - 1) / g, (n_gpus + g - 1) / g == 1 ? "" : "s", g,
           row->compute_s);
    printf("  %-12s %-14s %-14s %-14s %-14s\n", "s/iter", "ddp", "localsgd",
           "plsgd", "dreamddp");
    for (int r = 0; r < DDBENCH_ROUTES; r++) {
        printf("  %-12s", ddbench_route_names[r]);
        for (int s = 0; s < DDBENCH_STRATEGIES; s++) {
            char cell[32];
            if (r == DDBENCH_ROUTE_AGG) {
                snprintf(cell, sizeof(cell), "%.4f (k=%ld)", row->iter_s[r][s],
                         row->k[s]);
            } else {
                snprintf(cell, sizeof(cell), "%.4f", row->iter_s[r][s]);
            }
            printf(" %-14s", cell);
        }
        printf("\n");
    }
    for (int s = 0; s < DDBENCH_STRATEGIES; s++) {
        int r = ddbench_scale_pick(row, s);
        ddbench_scale_why(o, n_gpus, row, s, why, sizeof(why));
        printf("  %s picks %s",
               ddbench_scale_strategy_name(s, o->h, name, sizeof(name)),
               ddbench_route_names[r]);
        if (r == DDBENCH_ROUTE_AGG) {
            printf(" with %ld aggregator%s", row->k[s],
                   row->k[s] == 1 ? "" : "s");
        }
        printf(": %s\n", why);
    }
}

static void ddbench_scale_json(const ddbench_scale_opts_t *o, long n_gpus,
                               const ddbench_scale_row_t *row)
{
    dd_json_writer_t w;
    long g = n_gpus < o->per_node ? n_gpus : o->per_node;
    char name[32];

    dd_json_writer_init(&w, stdout, 0);
    dd_json_object_begin(&w, DD_JSON_COMPACT);
    dd_json_key(&w, "gpus");
    dd_json_int(&w, n_gpus);
    dd_json_key(&w, "per_node");
    dd_json_int(&w, g);
    dd_json_key(&w, "inter_Bps");
    dd_json_double(&w, o->inter);
    dd_json_key(&w, "intra_Bps");
    dd_json_double(&w, o->intra);
    dd_json_key(&w, "agg_fixed_s");
    dd_json_double(&w, ddbench_scale_agg_fixed(o, 0));
    dd_json_key(&w, "agg_land_s");
    dd_json_double(&w, ddbench_scale_land(o, DDBENCH_ROUTE_AGG, n_gpus));
    ddbench_scale_opts_t win = ddbench_scale_window_opts(o);
    dd_json_key(&w, "agg_window_Bps");
    dd_json_double(&w, win.inter);
    dd_json_key(&w, "agg_window_land_s");
    dd_json_double(&w, ddbench_scale_land(&win, DDBENCH_ROUTE_AGG, n_gpus));
    dd_json_key(&w, "ring_lat_s");
    dd_json_double(&w, o->ring_lat_s >= 0 ? o->ring_lat_s : 0);
    dd_json_key(&w, "scale");
    dd_json_double(&w, o->scale);
    dd_json_key(&w, "compute_s");
    dd_json_fixed(&w, row->compute_s, 6);
    for (int r = 0; r < DDBENCH_ROUTES; r++) {
        dd_json_key(&w, ddbench_route_names[r]);
        dd_json_object_begin(&w, DD_JSON_COMPACT);
        for (int s = 0; s < DDBENCH_STRATEGIES; s++) {
            dd_json_key(
                &w, ddbench_scale_strategy_name(s, o->h, name, sizeof(name)));
            dd_json_fixed(&w, row->iter_s[r][s], 6);
        }
        if (r == DDBENCH_ROUTE_AGG) {
            dd_json_key(&w, "k");
            dd_json_object_begin(&w, DD_JSON_COMPACT);
            for (int s = 0; s < DDBENCH_STRATEGIES; s++) {
                dd_json_key(&w, ddbench_scale_strategy_name(s, o->h, name,
                                                            sizeof(name)));
                dd_json_int(&w, row->k[s]);
            }
            dd_json_object_end(&w);
        }
        dd_json_object_end(&w);
    }
    dd_json_key(&w, "pick");
    dd_json_object_begin(&w, DD_JSON_COMPACT);
    for (int s = 0; s < DDBENCH_STRATEGIES; s++) {
        dd_json_key(&w,
                    ddbench_scale_strategy_name(s, o->h, name, sizeof(name)));
        dd_json_string(&w, ddbench_route_names[ddbench_scale_pick(row, s)]);
    }
    dd_json_object_end(&w);
    dd_json_object_end(&w);
    putchar('\n');
}

int ddbench_scale_main(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"gpus", required_argument, 0, 'g'},
        {"per-node", required_argument, 0, 'p'},
        {"inter", required_argument, 0, 'i'},
        {"intra", required_argument, 0, 'I'},
        {"inter-latency", required_argument, 0, 'l'},
        {"intra-latency", required_argument, 0, 'L'},
        {"agg-latency", required_argument, 0, 'a'},
        {"agg-burst", required_argument, 0, 'b'},
        {"agg-window-rate", required_argument, 0, 'w'},
        {"agg-window-burst", required_argument, 0, 'W'},
        {"ring-latency", required_argument, 0, 'r'},
        {"aggregators", required_argument, 0, 'k'},
        {"H", required_argument, 0, 'H'},
        {"scale", required_argument, 0, 's'},
        {"time-scale", required_argument, 0, 't'},
        {"json", no_argument, 0, 'j'},
        {"help", no_argument, 0, 'h'},
        {0, 0, 0, 0}};
    ddbench_scale_opts_t o = {.gpus = {8, 64, 256, 1024},
                              .n_gpus = 4,
                              .per_node = 8,
                              .inter = 100e9 / 8,
                              .intra = 2400e9 / 8,
                              .inter_lat_s = 20e-6,
                              .intra_lat_s = 5e-6,
                              .agg_lat_s = -1,
                              .agg_win_burst_s = -1,
                              .ring_lat_s = -1,
                              .h = 4,
                              .scale = 1,
                              .time_scale = 1};
    const char *P = "ddbench scale";
    int c, bad = 0;

    optind = 1;
    while (!bad && (c = getopt_long(argc, argv, "", longopts, NULL)) != -1) {
        switch (c) {
        case 'g':
            bad = ddbench_scale_list("--gpus", optarg, 1, o.gpus, &o.n_gpus);
            break;
        case 'p':
            bad = dd_arg_long(P, "--per-node", optarg, 1, 1024, &o.per_node);
            break;
        case 'i':
            bad = ddbench_scale_rate("--inter", optarg, &o.inter);
            break;
        case 'I':
            bad = ddbench_scale_rate("--intra", optarg, &o.intra);
            break;
        case 'l':
            bad = dd_arg_double(P, "--inter-latency", optarg, 0, 1,
                                &o.inter_lat_s);
            break;
        case 'L':
            bad = dd_arg_double(P, "--intra-latency", optarg, 0, 1,
                                &o.intra_lat_s);
            break;
        case 'a':
            bad =
                dd_arg_double(P, "--agg-latency", optarg, 0, 10, &o.agg_lat_s);
            break;
        case 'b':
            bad =
                dd_arg_double(P, "--agg-burst", optarg, 0, 10, &o.agg_burst_s);
            break;
        case 'w':
            bad = ddbench_scale_rate("--agg-window-rate", optarg, &o.agg_win);
            break;
        case 'W':
            bad = dd_arg_double(P, "--agg-window-burst", optarg, 0, 10,
                                &o.agg_win_burst_s);
            break;
        case 'r':
            bad = dd_arg_double(P, "--ring-latency", optarg, 0, 10,
                                &o.ring_lat_s);
            break;
        case 'k':
            bad = ddbench_scale_list("--aggregators", optarg, 1, o.aggs,
                                     &o.n_aggs);
            break;
        case 'H':
            bad = dd_arg_long(P, "--H", optarg, 1, 1024, &o.h);
            break;
        case 's':
            bad = dd_arg_double(P, "--scale", optarg, 1e-9, 1e3, &o.scale);
            break;
        case 't':
            bad =
                dd_arg_double(P, "--time-scale", optarg, 0, 1e3, &o.time_scale);
            break;
        case 'j':
            o.json = 1;
            break;
        case 'h':
            ddbench_scale_usage(stdout);
            return 0;
        default:
            bad = 1;
        }
    }
    if (bad || optind != argc - 1) {
        ddbench_scale_usage(stderr);
        return 2;
    }
    /* ddp's buckets: DREAMDDP_FIRST_BUCKET_BYTES and DREAMDDP_BUCKET_BYTES,
     * as the library would read them here. */
    dd_sched_opts_t sched;
    if (dd_config_load(&dd_sched_config_table, &sched, dd_config_getenv,
                       NULL) != DD_OK) {
        fprintf(stderr, "ddbench scale: %s\n", dd_last_error());
        return 2;
    }
    o.first_bucket = sched.first_bucket_bytes;
    o.bucket = sched.bucket_bytes;
    dd_config_release(&dd_sched_config_table, &sched);
    dd_profile_t *p;
    if (dd_profile_read(argv[optind], &p) != DD_OK) {
        fprintf(stderr, "ddbench scale: %s\n", dd_last_error());
        return 1;
    }
    if (p->num_params == NULL) {
        fprintf(stderr,
                "ddbench scale: %s has no sizes_*.json: the model needs "
                "each layer's size\n",
                argv[optind]);
        dd_profile_free(p);
        return 1;
    }
    double *bp = calloc(p->num_layers, sizeof(double));
    double *comm = calloc(p->num_layers, sizeof(double));
    int rc = bp != NULL && comm != NULL ? 0 : 1;
    for (size_t l = 0; rc == 0 && l < p->num_layers; l++) {
        bp[l] = p->bp_s[l] * o.time_scale;
    }
    p->frozen_bp_s *= o.time_scale;
    for (int i = 0; rc == 0 && i < o.n_gpus; i++) {
        ddbench_scale_row_t row = {0};
        if (o.gpus[i] < 2) {
            fprintf(stderr, "ddbench scale: --gpus takes sizes of 2 or "
                            "more\n");
            rc = 2;
        } else if (ddbench_scale_row(p, &o, o.gpus[i], bp, comm, &row) !=
                   DD_OK) {
            fprintf(stderr, "ddbench scale: %s\n", dd_last_error());
            rc = 1;
        } else if (o.json) {
            ddbench_scale_json(&o, o.gpus[i], &row);
        } else {
            ddbench_scale_print(&o, o.gpus[i], &row);
        }
    }
    free(bp);
    free(comm);
    dd_profile_free(p);
    return rc;
}
