/* Internal: a stream's host lane, the pending queue of a device backend.
 *
 * Some of a stream's operations cannot go to the device yet: a wait on a
 * signal value that no device work has been enqueued to reach (a host
 * signal, or a point nobody recorded so far), or a host task, which runs
 * on the host once the device work before it is done. Such an operation is
 * *held*: it, and every operation submitted after it, waits in the lane, in
 * order, and the lane's thread issues them to the device when they can go.
 * So the device never waits for the host (no device-side wait on a word
 * the host will write, no wait on an event nobody recorded), and a hung
 * host dependency stays visible and cancellable on the host.
 *
 * The lane does not know what an operation does. Each op's run() is called
 * on the lane's thread: it either finishes (HAL_LANE_DONE: issued, or
 * skipped) or says what it waits for (HAL_LANE_BLOCKED with a (signal,
 * value) point); the lane then sleeps until that point is reached or ends,
 * the notifier signal moves (the backend's registry of device points has a
 * new entry: a held wait may now be issued as a device wait), or the lane
 * is torn down, and runs the op again. At teardown every op still queued
 * runs once with cancelled set, so it can fail its signal points.
 *
 * Submitters take the lane's lock, and while the lane holds nothing
 * (hal_lane_holding_locked is 0) issue directly, under the lock: the lock
 * is what orders concurrent submitters to one stream. A direct issue that
 * runs user code (which may submit to the same stream) brackets it with
 * hal_lane_begin_direct_locked / ordo__hal_lane_end_direct instead and runs it
 * unlocked: meanwhile the lane counts as holding, so other submissions
 * queue behind it, and the lane's thread starts none of them.
 *
 * Locks: the lane's lock is taken before the backend's per-stream and
 * registry locks; no user code and no signal callback runs under it (ops
 * run with it released). */
#ifndef ORDO_HAL_LANE_H
#define ORDO_HAL_LANE_H

#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#include "base/parker.h"
#include "hal/hal.h"
#include "ordo/signal.h"

typedef struct hal_lane hal_lane_t;
typedef struct hal_lane_op hal_lane_op_t;

typedef enum hal_lane_step {
    HAL_LANE_DONE = 0,    /* finished: the lane frees the op */
    HAL_LANE_BLOCKED = 1, /* run again once *out_wait is reached (or ends) */
} hal_lane_step_t;

/* Kinds a stall report shows; others are HAL_LANE_OTHER. */
#define HAL_LANE_WAIT 0
#define HAL_LANE_SIGNAL 1
#define HAL_LANE_OTHER 2

struct hal_lane_op {
    hal_lane_op_t *next;
    size_t size; /* of the whole op, which the lane frees with ordo__dealloc */
    int kind;    /* HAL_LANE_WAIT, HAL_LANE_SIGNAL or HAL_LANE_OTHER */
    /* WAIT and SIGNAL: the point (retained by the op; the lane releases it
     * when the op is done); seq: its number for stall reports. */
    ordo_signal_t *signal;
    uint64_t value;
    uint64_t seq;
    hal_lane_step_t (*run)(hal_lane_op_t *op, int cancelled, ordo_signal_point_t *out_wait);
};

struct hal_lane {
    pthread_mutex_t lock;
    ordo_parker_t parker; /* the lane's thread sleeps on it, awaiting ops */
    hal_lane_op_t *head;  /* queued, not yet started */
    hal_lane_op_t *tail;
    hal_lane_op_t *current; /* the op being run */
    int in_wait;            /* current is blocked in a host wait */
    int direct;             /* a submitter issues directly, unlocked */
    int started;
    int stopping;
    uint64_t idle_count; /* bumped each time the lane empties */
    pthread_t thread;
    ordo_signal_t *cancel;   /* raised to 1 at teardown */
    ordo_signal_t *notifier; /* optional, retained */
    void (*thread_start)(void *user);
    void *user;
};

/* notifier (may be NULL): a signal whose every raise wakes a blocked op.
 * thread_start (may be NULL) runs first on the lane's thread. The thread
 * starts with the first held op. */
ordo_status_t ordo__hal_lane_init(hal_lane_t *lane, ordo_signal_t *notifier,
                                  void (*thread_start)(void *user), void *user, const char *api);

/* Tears the lane down: a blocked op is woken, an op running returns first,
 * every op left runs once with cancelled set. */
void ordo__hal_lane_fini(hal_lane_t *lane);

static inline void hal_lane_lock(hal_lane_t *lane) {
    pthread_mutex_lock(&lane->lock);
}

static inline void hal_lane_unlock(hal_lane_t *lane) {
    pthread_mutex_unlock(&lane->lock);
}

/* Under the lock: non-zero while an op is queued or running (a new op
 * must then be pushed, not issued directly). */
static inline int hal_lane_holding_locked(const hal_lane_t *lane) {
    return lane->head != NULL || lane->current != NULL || lane->direct;
}

/* Under the lock, when not holding: marks a direct issue in progress; the
 * caller then unlocks, issues, and calls ordo__hal_lane_end_direct. */
static inline void hal_lane_begin_direct_locked(hal_lane_t *lane) {
    lane->direct = 1;
}

/* Non-zero on the lane's own thread (where its ops, and user code they
 * run, execute): ordo__hal_lane_fini must not be called there. */
int ordo__hal_lane_is_current(const hal_lane_t *lane);

/* Ends a direct issue (takes the lock): queued ops may start. */
void ordo__hal_lane_end_direct(hal_lane_t *lane);

/* Under the lock: queues op (starting the thread if needed). On failure
 * (no thread) nothing is queued. */
ordo_status_t ordo__hal_lane_push_locked(hal_lane_t *lane, hal_lane_op_t *op, const char *api);

/* Takes the lock: non-zero when a held wait (queued, or the op running)
 * is on a signal that has not reached its value and has not ended, which
 * later work elsewhere may be needed to raise. Held host tasks and
 * signals, and waits already met, do not count. */
int ordo__hal_lane_waits_unmet(hal_lane_t *lane);

/* For stall reports, under no lock: copies the held waits and signals (the
 * running op first) into ops, retaining each signal; returns how many
 * there were in all. *out_in_wait: the first is a wait blocked now. */
size_t ordo__hal_lane_snapshot(hal_lane_t *lane, hal_pending_op_t *ops, size_t capacity,
                               int *out_in_wait);

#endif
