/*
 * The DreamDDP planner: per-layer backward and communication times in, a
 * schedule of layer syncs over a window of H iterations out. It is pure: no
 * I/O, no clocks, no logging, no globals, so the same profile always gives
 * the same schedule on every rank.
 *
 * Cost model (the one of ../shared/anchors/schedsim.py, matched exactly):
 * one FIFO channel; backward runs in reverse forward order; in an iteration
 * the layers it syncs are launched in backward order, each as soon as its
 * backward has ended and the previous sync has left the channel. The
 * iteration's exposed wait is how far the last sync runs past the end of
 * backward. An iteration costs the whole backward time plus that wait (the
 * model has no forward time), and a window the sum of its H iterations.
 */
#ifndef DD_SCHED_PLAN_H
#define DD_SCHED_PLAN_H

#include <dreamddp.h>

#include <stddef.h>
#include <stdint.h>

/** A profile as the planner sees it. Layers are in forward order. */
typedef struct {
    size_t num_layers;    /**< n >= 1 */
    const double *bp_s;   /**< [n] backward time of each layer, seconds */
    const double *comm_s; /**< [n] time to sync each layer, seconds */
} dd_plan_input_t;

/**
 * A schedule over a window of H iterations. Every layer has one primary
 * slot (the iteration of the window where it is synced for sure) and may be
 * synced in further iterations (extra syncs from bubble filling). sync holds
 * all of them, primary ones included, so the runtime needs only one lookup:
 * layer l syncs in step s when sync[(s % H) * n + l] is nonzero.
 */
typedef struct {
    size_t num_layers;   /**< n */
    unsigned window;     /**< H >= 1 */
    unsigned *slot;      /**< [n] primary slot of each layer, 0..H-1 */
    unsigned char *sync; /**< [H * n] 1 where a layer syncs in an iteration */
} dd_plan_t;

/** Modeled time of a schedule. */
typedef struct {
    double window_s;  /**< the H iterations of the window together */
    double iter_s;    /**< mean per iteration, as schedsim.py prints it */
    double exposed_s; /**< sum over the window of the exposed waits */
} dd_plan_cost_t;

/** Bits of dd_plan_params_t::field_mask. */
enum {
    DD_PLAN_FIELD_SEARCH_ROUNDS = 1u << 0,
    DD_PLAN_FIELD_EXACT_NODES = 1u << 1,
    DD_PLAN_FIELD_SEED = 1u << 2,
    DD_PLAN_FIELD_FILL_BUBBLES = 1u << 3,
    DD_PLAN_FIELD_SEARCH_WORK = 1u << 4
};

/** Search effort of dd_plan_dreamddp. Fields not in field_mask take their
 *  defaults (those of dd_plan_params_default). */
typedef struct {
    uint64_t field_mask;
    unsigned search_rounds; /**< perturbation rounds of the local search */
    uint64_t exact_nodes;   /**< node budget of the exact search */
    uint64_t seed;          /**< of the local search's perturbations */
    int fill_bubbles;       /**< nonzero: add extra syncs that cost nothing */
    uint64_t search_work;   /**< cap on the local search's layer visits, so
                                 that planning time stays bounded for big
                                 models (deterministic, unlike a clock) */
} dd_plan_params_t;

/** Fills params_p with the defaults and sets every field_mask bit. */
void dd_plan_params_default(dd_plan_params_t *params_p);

/**
 * Allocates a schedule of num_layers layers over window iterations, with
 * every layer in slot 0 and no extra syncs.
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM for zero layers or window, or sizes
 *         whose product overflows; DD_ERR_NO_MEMORY.
 */
dd_status_t dd_plan_alloc(size_t num_layers, unsigned window,
                          dd_plan_t **plan_p);

/** Frees a schedule. NULL is allowed. */
void dd_plan_free(dd_plan_t *plan);

/** Whether layer syncs in iteration iter (0..H-1) of the window. */
static inline int dd_plan_syncs(const dd_plan_t *plan, unsigned iter,
                                size_t layer)
{
    return plan->sync[(size_t)iter * plan->num_layers + layer] != 0;
}

/**
 * Moves layer to primary slot and drops its extra syncs.
 *
 * @return DD_OK, or DD_ERR_INVALID_PARAM for a layer or slot out of range.
 */
dd_status_t dd_plan_set_slot(dd_plan_t *plan, size_t layer, unsigned slot);

/**
 * Adds an extra sync of layer in iteration iter (nothing when it already
 * syncs there).
 *
 * @return DD_OK, or DD_ERR_INVALID_PARAM for a layer or iter out of range.
 */
dd_status_t dd_plan_add_sync(dd_plan_t *plan, size_t layer, unsigned iter);

/** Number of syncs beyond the one primary sync per layer. */
size_t dd_plan_num_extra(const dd_plan_t *plan);

/**
 * Modeled time of any schedule (every sync in plan->sync counts).
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM when input is malformed (no layers,
 *         a time that is negative or not finite), has another layer count
 *         than plan, or plan does not sync some layer in its primary slot.
 */
dd_status_t dd_plan_cost(const dd_plan_input_t *input, const dd_plan_t *plan,
                         dd_plan_cost_t *cost_p);

/**
 * dd_plan_cost where a sync's result lands land_s after the sync leaves the
 * channel: a route whose round trip is longer than the time a sync holds
 * the wire (syncs in flight overlap their round trips), so an iteration
 * that syncs anything ends land_s after its channel frees, at the
 * earliest. The searches plan without it (land_s 0, as dd_plan_cost).
 *
 * @return as dd_plan_cost; DD_ERR_INVALID_PARAM also for a land_s that is
 *         negative or not finite.
 */
dd_status_t dd_plan_cost_landing(const dd_plan_input_t *input,
                                 const dd_plan_t *plan, double land_s,
                                 dd_plan_cost_t *cost_p);

/**
 * The DreamDDP paper's formulation: each iteration syncs one contiguous
 * block of the backward order, iteration 0 the block that starts with the
 * last layer. Exact dynamic program over block boundaries, O(H n^2): the
 * schedule is optimal among all contiguous-block schedules.
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM for malformed input or window 0;
 *         DD_ERR_NO_MEMORY.
 */
dd_status_t dd_plan_contiguous(const dd_plan_input_t *input, unsigned window,
                               dd_plan_t **plan_p);

/**
 * The planner. Starts from the contiguous optimum (dd_plan_contiguous);
 * a branch-and-bound search over all assignments of layers to iterations
 * improves on it within params->exact_nodes nodes (when it completes, which
 * it does for small profiles and for many real ones, the schedule is
 * optimal under the cost model); if it did not complete, an iterated local
 * search (single-layer moves, pairwise swaps, random kicks) improves further
 * within params->search_rounds and params->search_work. Then, when asked,
 * bubble filling. Never worse than dd_plan_contiguous; deterministic for
 * given input and params. Time: O(H n^2) for the DP plus the two budgets
 * (about 0.1 s for n = 125, H = 10 with the defaults). Above
 * DD_PLAN_EXACT_LAYERS layers it plans groups of consecutive layers
 * (dd_plan_groups), each layer syncing where its group does.
 *
 * @param params  search effort, or NULL for the defaults.
 * @return as dd_plan_contiguous.
 */
/** The most layers the planners plan one by one. */
#define DD_PLAN_EXACT_LAYERS 1000

/**
 * The number of units dd_plan_dreamddp and dd_plan_dreamddp_delayed plan
 * input in: its layers, or above DD_PLAN_EXACT_LAYERS the groups of
 * consecutive layers they plan instead (at most about
 * DD_PLAN_EXACT_LAYERS, each about an equal share of the model's time and
 * of its layer count; a layer that is a big share of the time is a group
 * of its own).
 */
size_t dd_plan_groups(const dd_plan_input_t *input);

dd_status_t dd_plan_dreamddp(const dd_plan_input_t *input, unsigned window,
                             const dd_plan_params_t *params,
                             dd_plan_t **plan_p);

/**
 * Bubble filling: keeps the primary slots and adds extra syncs of layers in
 * iterations where they add no modeled time at all (that iteration's wait
 * is unchanged), greedily, iteration by iteration, layers in backward order.
 *
 * @param added_p  number of syncs added; may be NULL.
 * @return as dd_plan_cost; plan is unchanged on error.
 */
dd_status_t dd_plan_fill_bubbles(const dd_plan_input_t *input, dd_plan_t *plan,
                                 size_t *added_p);

/**
 * Fusion as the runtime runs it. A layer's sync leaves when its backward
 * ends, alone, unless the model has the channel still busy with earlier
 * syncs when the next layer that syncs in the iteration is ready: then
 * waiting for that layer costs nothing, and the two travel as one message.
 * hold[h * n + i] is set to 1 when, in iteration h, layer i syncs and its
 * message stays open for the next layer that syncs in h (backward order),
 * else 0. A message joins a layer only while the channel stays busy past
 * that layer's backward end from before the message's first layer: so every
 * fused message starts when the cost model starts its first layer, and
 * dd_plan_cost, dd_plan_fill_bubbles and the search model the fused runtime
 * exactly (the latency the fused message saves only helps).
 *
 * @param hold  [plan->window * n] out.
 * @return as dd_plan_cost; hold is unchanged on error.
 */
dd_status_t dd_plan_fusion(const dd_plan_input_t *input, const dd_plan_t *plan,
                           unsigned char *hold);

/**
 * Full Local SGD: every layer in the last iteration of the window.
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM; DD_ERR_NO_MEMORY.
 */
dd_status_t dd_plan_flsgd(size_t num_layers, unsigned window,
                          dd_plan_t **plan_p);

/**
 * What schedsim.py reports for full Local SGD: the whole backward each
 * iteration plus all communication once per window with nothing hiding it,
 * because Local SGD averages after the optimizer step. dd_plan_cost of the
 * dd_plan_flsgd schedule is lower: it lets the syncs overlap backward.
 *
 * @return DD_OK, or DD_ERR_INVALID_PARAM for malformed input or window 0.
 */
dd_status_t dd_plan_flsgd_cost(const dd_plan_input_t *input, unsigned window,
                               dd_plan_cost_t *cost_p);

/**
 * Uniform partial Local SGD as schedsim.py defines it: backward-order layer
 * k goes to iteration min(k / ceil(n / H), H - 1).
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM; DD_ERR_NO_MEMORY.
 */
dd_status_t dd_plan_plsgd(size_t num_layers, unsigned window,
                          dd_plan_t **plan_p);

/**
 * Synchronous SGD (wait-free backpropagation): every layer in every
 * iteration; primary slot 0, the others extra. Its dd_plan_cost().iter_s is
 * the modeled time per iteration.
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM; DD_ERR_NO_MEMORY.
 */
dd_status_t dd_plan_ssgd(size_t num_layers, unsigned window,
                         dd_plan_t **plan_p);

/*
 * The deadline model (deadline.c), for delayed averaging: each iteration
 * is a forward pass (layers in forward order, fp_s each) and a backward
 * pass; a sync launched after a layer's backward (or, for Local SGD, once
 * backward is over) occupies the FIFO channel until it ends, across the
 * iteration boundary if need be, and compute waits for it only at the
 * layer's deadline. The window's cost is that of the steady state: the
 * window is run twice before the one measured, so that what is in flight
 * at its end carries over to the next. With DD_PLAN_DEADLINE_STEP_END it
 * is dd_plan_cost's model plus the forward time.
 */

/** Where compute waits for a layer's sync in flight. */
typedef enum {
    DD_PLAN_DEADLINE_STEP_END = 0, /**< the end of the same iteration */
    DD_PLAN_DEADLINE_FORWARD,      /**< the layer's next forward (a mark) */
    DD_PLAN_DEADLINE_BACKWARD      /**< the end of its next backward */
} dd_plan_deadline_t;

/** The deadline model's inputs beside dd_plan_input_t. */
typedef struct {
    const double *fp_s; /**< [n] forward time of each layer; NULL: none */
    dd_plan_deadline_t deadline;
    int launch_at_end; /**< syncs launch once backward ends (Local SGD) */
    /** [n] compute a sync of the layer costs the replica where it
     *  launches (the copy of its parameters) and where it lands (the
     *  correction), at its deadline; NULL: none. */
    const double *launch_s, *land_s;
    /** Channels sharing the NIC (the stream count; dd_plan_net_t): 0 or 1
     *  is the one FIFO channel above. */
    unsigned channels;
    /** A layer's sync launches as soon as its parameters are the step's:
     *  at the iteration's start when none of its syncs is in flight, else
     *  right after that one lands (its forward mark, or its backward),
     *  layers in the order of their deadlines; 0: after its backward. */
    int launch_early;
} dd_plan_delay_t;

/**
 * Modeled time of a schedule under the deadline model. exposed_s is the
 * sum of the waits at the deadlines over the window.
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM as dd_plan_cost, or for a negative
 *         or non-finite forward time or an unknown deadline.
 */
dd_status_t dd_plan_cost_delayed(const dd_plan_input_t *input,
                                 const dd_plan_t *plan,
                                 const dd_plan_delay_t *delay,
                                 dd_plan_cost_t *cost_p);

/**
 * The planner under the deadline model: the best of the same-iteration
 * plan (dd_plan_dreamddp without bubble filling), the contiguous blocks
 * and the uniform split under that model, improved by single-layer moves
 * while params->search_work allows, then bubble filling (extra syncs that
 * leave the window's time unchanged) when params asks. Deterministic.
 *
 * @return as dd_plan_dreamddp.
 */
dd_status_t dd_plan_dreamddp_delayed(const dd_plan_input_t *input,
                                     unsigned window,
                                     const dd_plan_params_t *params,
                                     const dd_plan_delay_t *delay,
                                     dd_plan_t **plan_p);

/**
 * Bubble filling under the deadline model: extra syncs, iteration by
 * iteration and layers in backward order, that leave the window's modeled
 * time unchanged.
 *
 * @return as dd_plan_cost_delayed; plan is unchanged on error.
 */
dd_status_t dd_plan_fill_bubbles_delayed(const dd_plan_input_t *input,
                                         const dd_plan_delay_t *delay,
                                         dd_plan_t *plan);

/*
 * The N-channel model (channels.c), for a job that runs N streams: the
 * engine runs N channels, and they share the NIC. Each channel carries its
 * syncs one after another; while k channels have a sync on the wire, each
 * gets 1/k of the NIC's rate, so a sync's comm_s (measured at the whole
 * rate) stretches while others run beside it. Syncs start in launch order
 * (a sync whose channel is busy holds back those launched after it, as in
 * the engine, which starts them in the order every rank agrees on), each
 * on the channel dd_plan_assign_next gives it. Whenever some sync is
 * waiting the NIC is busy, so the last landing of a burst, and with it
 * dd_plan_cost's exposed wait at the step's end, is the one FIFO channel's
 * whatever N: what N changes is when each sync lands, which the deadline
 * model (and the engine's waiters) see: a small sync launched after a
 * large one lands before it instead of after.
 */

/** Most channels: the backends' most streams (DD_BACKEND_MAX_STREAMS). */
#define DD_PLAN_MAX_CHANNELS 8

/**
 * The channel rule, the same in the model and in the engine: a sync goes
 * to the channel given the least work (seconds in the model, bytes in the
 * engine) in the sync's step so far, the lowest index on a tie. It depends
 * only on the steps and sizes in launch order, which every rank knows
 * alike, never on timing.
 */
typedef struct {
    unsigned channels;
    int started;
    uint64_t step;
    double load[DD_PLAN_MAX_CHANNELS];
} dd_plan_assign_t;

/** Starts the rule over channels (clamped to 1..DD_PLAN_MAX_CHANNELS). */
void dd_plan_assign_init(dd_plan_assign_t *a, unsigned channels);

/** The channel of the next sync, of step and work. */
unsigned dd_plan_assign_next(dd_plan_assign_t *a, uint64_t step, double work);

/** The state of the N-channel network, simulated event by event. */
typedef struct dd_plan_net dd_plan_net_t;

/**
 * A network of channels (1..DD_PLAN_MAX_CHANNELS), room for capacity syncs
 * in flight (it grows as needed), at time 0, idle.
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM; DD_ERR_NO_MEMORY.
 */
dd_status_t dd_plan_net_create(unsigned channels, size_t capacity,
                               dd_plan_net_t **net_p);

/** Back to time 0, idle, forgetting every sync in flight. */
void dd_plan_net_reset(dd_plan_net_t *net);

/** Frees it. NULL is allowed. */
void dd_plan_net_free(dd_plan_net_t *net);

/**
 * Launches a sync of work seconds (at the whole rate) at t (no earlier
 * than the last call's time); *land_p reads -2 until it lands, then its
 * landing time. land_p must stay valid until then.
 *
 * @return DD_OK, or DD_ERR_NO_MEMORY (nothing launched).
 */
dd_status_t dd_plan_net_launch(dd_plan_net_t *net, double t, uint64_t step,
                               double work, double *land_p);

/** When the sync of land lands, from t on, launching nothing more before
 *  then (compute waits for it); a sync landed by t returns its time. */
double dd_plan_net_wait(dd_plan_net_t *net, const double *land, double t);

/** When every sync launched has landed, from t on (at least t). */
double dd_plan_net_idle(dd_plan_net_t *net, double t);

/**
 * Landing times of n syncs launched at release_s (nondecreasing), of
 * comm_s each, in steps step (NULL: all in one), on channels channels.
 * With one channel: finish[j] = max(release[j], finish[j - 1]) +
 * comm[j], the FIFO channel of plan.h.
 *
 * @return DD_OK; DD_ERR_INVALID_PARAM for a NULL array, a negative or
 *         non-finite time, releases out of order or channels out of
 *         range; DD_ERR_NO_MEMORY.
 */
dd_status_t dd_plan_channels_finish(const double *release_s,
                                    const double *comm_s, const uint64_t *step,
                                    size_t n, unsigned channels,
                                    double *finish_s);

#endif
