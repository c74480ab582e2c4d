/*
 * The aggregators' route as a pipe of the engine: a job's buffer averaged
 * through the homes (agg/client.c), its headers carrying the message's
 * digest so that a home sums no two different messages.
 */
#include "sched/route/agg.h"

void dd_route_agg_id(const dd_sync_job_t *job, dd_agg_id_t *id)
{
    id->step = job->step;
    id->layer = job->n_layers ? (uint32_t)job->layers[0] : 0;
    id->what = dd_route_job_digest(0xcbf29ce484222325ull, job);
}

static dd_status_t dd_route_agg_start(void *arg, dd_sync_job_t *job, void *buf,
                                      size_t count, void **handle_p)
{
    dd_route_agg_t *r = arg;
    dd_agg_id_t id;

    dd_route_agg_id(job, &id);
    return dd_agg_msg_start(r->agg, &id, buf, count, job->dtype, job->mem_type,
                            job->check_finite ? &job->input_bad : NULL,
                            job->check_finite ? &job->result_bad : NULL,
                            handle_p);
}

static dd_status_t dd_route_agg_test(void *arg, void *handle, int *busy_p)
{
    dd_route_agg_t *r = arg;

    return dd_agg_test_msg(r->agg, handle, busy_p);
}

dd_status_t dd_route_agg_open(dd_route_agg_t *r, const dd_agg_env_t *env)
{
    /* Their client takes two messages at once. */
    r->pipe = (dd_sync_pipe_t){.start = dd_route_agg_start,
                               .test = dd_route_agg_test,
                               .depth = DD_ENGINE_DEPTH,
                               .arg = r,
                               .checks_finite = 1};
    return dd_agg_create(env, &r->agg);
}

void dd_route_agg_close(dd_route_agg_t *r)
{
    if (r->agg != NULL) {
        dd_agg_destroy(r->agg);
        r->agg = NULL;
    }
}
