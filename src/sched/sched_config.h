/*
 * The scheduler's DREAMDDP_* variables.
 */
#ifndef DD_SCHED_SCHED_CONFIG_H
#define DD_SCHED_SCHED_CONFIG_H

#include "core/config.h"

typedef struct {
    char *strategy;      /* "ddp", "localsgd:H", ... */
    size_t bucket_bytes; /* ddp buckets after the first */
    size_t first_bucket_bytes;
    size_t fusion_bytes; /* parameter syncs fused up to this */
    int profile_steps;
    double replan_drift;  /* relative drift that triggers a re-plan */
    int fill_bubbles;     /* dreamddp: extra syncs where the model hides them */
    int replan_windows;   /* windows between checks of the times */
    char *timeline;       /* Chrome-trace file, %r = rank; NULL: none */
    double clock_skew_us; /* tests: added to this rank's wall clock */
    int adaptive_kmin;
    int adaptive_kmax;
    int adaptive_kstart;
    double adaptive_high;
    double adaptive_low;
    int adaptive_interval;
    int route;          /* dd_route_t */
    size_t chunk_bytes; /* aggregation chunks */
    int agg_loss;       /* dd_agg_loss_t */
    int check_finite;   /* dd_check_finite_t */
    int deterministic;  /* DREAMDDP_DETERMINISTIC */
    char *plan;         /* DREAMDDP_PLAN: NULL, or the file */
    char *plan_save;    /* DREAMDDP_PLAN_SAVE */
    double agg_lost_after_s;
    int find_unused;     /* unmarked layers count as unused at step end */
    char *compression;   /* codec spec of the layers the default rule picks */
    int drift;           /* measure the divergence at parameter syncs */
    int drift_windows;   /* rises in a row that warn */
    double drift_warn;   /* agreed maximum that warns; 0: none */
    double drift_target; /* adaptive:drift's target divergence */
    char *layer_split;   /* auto, no, or the largest part (split.c) */
    int next_launch;     /* dd_next_launch_t */
} dd_sched_opts_t;

/* Under delayed averaging: when a layer's sync leaves (runtime.c). */
typedef enum {
    DD_NEXT_LAUNCH_EARLY = 0, /* once its parameters are the step's */
    DD_NEXT_LAUNCH_BACKWARD   /* after its backward (dd_layer_ready) */
} dd_next_launch_t;

extern const char *const dd_next_launch_names[];

typedef enum {
    DD_ROUTE_AUTO = 0,    /* aggregate when the job has aggregators */
    DD_ROUTE_ALLREDUCE,   /* the backend's allreduce among workers */
    DD_ROUTE_AGGREGATE,   /* chunks summed by homes (BytePS) */
    DD_ROUTE_HIERARCHICAL /* device layers summed per host over IPC, the
                             hosts' sums through the homes (hier.c) */
} dd_route_t;

extern const char *const dd_route_names[];

typedef enum { DD_AGG_LOSS_SURVIVE = 0, DD_AGG_LOSS_STOP } dd_agg_loss_t;

typedef enum {
    DD_CHECK_FINITE_WARN = 0,
    DD_CHECK_FINITE_ERROR,
    DD_CHECK_FINITE_NO
} dd_check_finite_t;

extern const char *const dd_check_finite_names[];

extern const char *const dd_agg_loss_names[];

extern const dd_config_table_t dd_sched_config_table;

#endif
