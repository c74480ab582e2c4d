/*
 * Which message a job is, as the routes tell the workers and name it in
 * their errors: the digest of what it averages and every layer in it, and
 * its first layer's name.
 */
#include "sched/route/route.h"

const char *dd_route_layer_name(const dd_route_env_t *env, size_t i)
{
    return env->names != NULL && i < env->n_names ? env->names[i] : "?";
}

const char *dd_route_job_layer(const dd_route_env_t *env,
                               const dd_sync_job_t *job)
{
    return job->n_layers > 0 ? dd_route_layer_name(env, job->layers[0]) : "?";
}

uint64_t dd_route_fnv(uint64_t h, const void *data, size_t len)
{
    for (const unsigned char *p = data; len-- > 0; p++) {
        h = (h ^ *p) * 0x100000001b3ull;
    }
    return h;
}

uint64_t dd_route_job_digest(uint64_t h, const dd_sync_job_t *job)
{
    uint64_t kind = (uint64_t)job->kind;

    h = dd_route_fnv(h, &kind, sizeof(kind));
    for (size_t k = 0; k < job->n_layers; k++) {
        uint64_t v[2] = {job->layers[k], job->layer_bytes[k]};
        h = dd_route_fnv(h, v, sizeof(v));
    }
    return h;
}

size_t dd_route_coll_bytes(const dd_sched_coll_t *c, int n_workers)
{
    size_t bytes = c->args.count * dd_dtype_size(c->args.dtype);

    if (c->coll == DD_COLL_REDUCE_SCATTER || c->coll == DD_COLL_ALLGATHER) {
        bytes *= (size_t)n_workers;
    }
    return bytes;
}
