/* What the planner's tests share: a cost comparison that forgives
 * rounding, and the seeded generator (splitmix64) their random profiles
 * come from, so that every run of a test sees the same cases. */
#ifndef DD_TESTS_PLAN_RANDOM_H
#define DD_TESTS_PLAN_RANDOM_H

#include <math.h>
#include <stdint.h>

static inline int same_cost(double a, double b)
{
    return fabs(a - b) <= 1e-9 * (1.0 + fabs(b));
}

static inline uint64_t next_random(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* Uniform in [0, 1). */
static inline double unit_random(uint64_t *state)
{
    return (double)(next_random(state) >> 11) / 9007199254740992.0;
}

/* Uniform in [lo, hi). */
static inline double uniform(uint64_t *state, double lo, double hi)
{
    return lo + (hi - lo) * unit_random(state);
}

#endif
