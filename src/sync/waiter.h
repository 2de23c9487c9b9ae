/* Internal: a blocked thread's side of a wait, shared by the single and the
 * multi-signal waits. One waiter owns one timepoint per awaited entry; each
 * firing bumps a counter in `word`, which is also the futex the thread
 * sleeps on. The top bit of `word` says a thread is (about to be) asleep, so
 * a firing issues a wake system call only when someone needs it. */
#ifndef ORDO_SYNC_WAITER_H
#define ORDO_SYNC_WAITER_H

#include <stdatomic.h>
#include <stdint.h>

#include "ordo/timepoint.h"

#define WAITER_SLEEPING 0x80000000u
#define WAITER_COUNT_MASK 0x7fffffffu

typedef struct waiter {
    _Atomic uint32_t word;
    /* 0 until decided, then ((index + 1) << 32) | status. A wait-any is
     * decided by its first firing; a wait-all only by a failure. */
    _Atomic uint64_t decided;
    ordo_timepoint_t *timepoints;
    int any;
} waiter_t;

/* The callback of every waiter's timepoints. Its last access to the waiter
 * is the counter increment; after that the waiter may return. */
void ordo__waiter_timepoint_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint);

#endif
