/* Test-only: reads a signal's internal reference count and state word, so
 * a test can tell that a wait on another thread is asleep (a sleeping wait
 * holds a reference, and has a timepoint armed) before it destroys or
 * fails the signal, instead of sleeping and hoping. */
#ifndef ORDO_TEST_SIGNAL_PROBE_H
#define ORDO_TEST_SIGNAL_PROBE_H

#include <sched.h>

#include "sync/signal_internal.h"
#include "test_util.h"

/* Waits (bounded by the test deadline) until the signal holds refs
 * references; returns non-zero if it did. */
static inline int test_signal_refs_reach(ordo_signal_t *signal, uint32_t refs) {
    const ordo_deadline_t deadline = test_deadline();
    while (atomic_load_explicit(&signal->refs, memory_order_acquire) < refs) {
        if (ordo_time_now_ns() >= deadline) {
            return 0;
        }
        sched_yield();
    }
    return 1;
}

/* Waits (bounded by the test deadline) until a timepoint is armed on the
 * signal, as a blocking wait arms one before it sleeps; returns non-zero
 * if one was. */
static inline int test_signal_armed(ordo_signal_t *signal) {
    const ordo_deadline_t deadline = test_deadline();
    while (!(atomic_load_explicit(&signal->state, memory_order_acquire) & SIGNAL_WAITERS)) {
        if (ordo_time_now_ns() >= deadline) {
            return 0;
        }
        sched_yield();
    }
    return 1;
}

#endif
