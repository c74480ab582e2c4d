/*
 * The process's doorbell. A backend whose operations complete on threads
 * of its own (Gloo) rings it at each completion, as do a job handed to the
 * progress engine and an abort raised; the engine, while every job it has
 * in flight is on such a backend, waits for a ring instead of napping on a
 * timer. 128 ranks on 2 cores: each engine's naps of 1 ms while a
 * collective waited for the slowest rank woke the host 128,000 times a
 * second, and the slowest rank ran later for it. Every ring wakes every
 * waiter of the process: a ring that was not for it costs a waiter one
 * look at its jobs.
 */
#ifndef DD_CORE_BELL_H
#define DD_CORE_BELL_H

#include <stdint.h>

/* The rings so far: read before looking at what a ring would change. */
uint64_t dd_bell_count(void);

void dd_bell_ring(void);

/* Waits until the count has passed seen, or timeout_s. Returns whether it
 * rang. */
int dd_bell_wait(uint64_t seen, double timeout_s);

#endif
