/* A stream's host lane: held operations issued in order once they can go
 * (see lane.h). */
#include "hal/lane.h"

#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "sync/signal_access.h"

static void op_free(hal_lane_op_t *op) {
    if (op->signal) {
        ordo__signal_release_internal(op->signal);
    }
    ordo__dealloc(op, op->size, 0);
}

/* Runs op to the end: while it is blocked, sleeps on its point, the
 * notifier and the lane's cancel signal. */
static void op_run(hal_lane_t *lane, hal_lane_op_t *op, int cancelled) {
    for (;;) {
        ordo_signal_point_t wait = {NULL, 0};
        /* The notifier is read before the op looks: a registration after
         * this read wakes the wait below. */
        uint64_t seen = 0;
        if (lane->notifier) {
            seen = ordo__signal_reached(lane->notifier);
        }
        if (op->run(op, cancelled, &wait) == HAL_LANE_DONE) {
            return;
        }
        ordo_signal_point_t points[3] = {{lane->cancel, 1}, wait, {lane->notifier, seen + 1}};
        size_t count = lane->notifier && seen < ORDO_SIGNAL_VALUE_MAX ? 3 : 2;
        pthread_mutex_lock(&lane->lock);
        lane->in_wait = 1;
        pthread_mutex_unlock(&lane->lock);
        size_t index = 0;
        (void)ordo_signal_wait_any(points, count, ORDO_DEADLINE_NEVER, &index);
        pthread_mutex_lock(&lane->lock);
        lane->in_wait = 0;
        pthread_mutex_unlock(&lane->lock);
        /* Whatever woke it (reached, failed, destroyed, notified), the op
         * looks again; only teardown changes how. */
        if (ordo__signal_reached(lane->cancel) >= 1) {
            cancelled = 1;
        }
    }
}

/* The lane whose thread this is (NULL elsewhere). */
static _Thread_local const hal_lane_t *tls_lane;

int ordo__hal_lane_is_current(const hal_lane_t *lane) {
    return tls_lane == lane;
}

static void *lane_main(void *arg) {
    hal_lane_t *lane = arg;
    tls_lane = lane;
    if (lane->thread_start) {
        lane->thread_start(lane->user);
    }
    pthread_mutex_lock(&lane->lock);
    for (;;) {
        while ((!lane->head || lane->direct) && !lane->stopping) {
            /* Read under the lock, so before any change it misses: its
             * maker unparks after that change. */
            ordo_park_key_t key = ordo__parker_prepare(&lane->parker);
            pthread_mutex_unlock(&lane->lock);
            (void)ordo__parker_park(&lane->parker, key, ORDO_PARK_ANY, ORDO_DEADLINE_NEVER);
            pthread_mutex_lock(&lane->lock);
        }
        hal_lane_op_t *op = lane->head;
        if (!op) {
            break; /* stopping, and nothing left */
        }
        lane->head = op->next;
        if (!lane->head) {
            lane->tail = NULL;
        }
        lane->current = op;
        int cancelled = lane->stopping;
        pthread_mutex_unlock(&lane->lock);
        op_run(lane, op, cancelled);
        pthread_mutex_lock(&lane->lock);
        lane->current = NULL;
        if (!lane->head) {
            ++lane->idle_count;
        }
        pthread_mutex_unlock(&lane->lock);
        /* Released outside the lock: the last reference may run
         * callbacks. */
        op_free(op);
        pthread_mutex_lock(&lane->lock);
    }
    pthread_mutex_unlock(&lane->lock);
    return NULL;
}

ordo_status_t ordo__hal_lane_init(hal_lane_t *lane, ordo_signal_t *notifier,
                                  void (*thread_start)(void *user), void *user, const char *api) {
    memset(lane, 0, sizeof *lane);
    if (ordo_signal_create(0, &lane->cancel) != ORDO_OK) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot create the lane's signal");
    }
    pthread_mutex_init(&lane->lock, NULL);
    ordo__parker_init(&lane->parker);
    if (notifier) {
        ordo__signal_retain_internal(notifier);
    }
    lane->notifier = notifier;
    lane->thread_start = thread_start;
    lane->user = user;
    return ORDO_OK;
}

ordo_status_t ordo__hal_lane_push_locked(hal_lane_t *lane, hal_lane_op_t *op, const char *api) {
    if (!lane->started) {
        if (pthread_create(&lane->thread, NULL, lane_main, lane) != 0) {
            return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, api,
                               "cannot start the stream's host lane thread");
        }
        lane->started = 1;
    }
    op->next = NULL;
    if (lane->tail) {
        lane->tail->next = op;
    } else {
        lane->head = op;
    }
    lane->tail = op;
    ordo__parker_unpark(&lane->parker, ORDO_PARK_ANY, 1);
    return ORDO_OK;
}

void ordo__hal_lane_end_direct(hal_lane_t *lane) {
    pthread_mutex_lock(&lane->lock);
    lane->direct = 0;
    if (!lane->head) {
        ++lane->idle_count;
    }
    ordo__parker_unpark(&lane->parker, ORDO_PARK_ANY, 1);
    pthread_mutex_unlock(&lane->lock);
}

void ordo__hal_lane_fini(hal_lane_t *lane) {
    pthread_mutex_lock(&lane->lock);
    lane->stopping = 1;
    ordo__parker_unpark(&lane->parker, ORDO_PARK_ANY, 1);
    int started = lane->started;
    pthread_mutex_unlock(&lane->lock);
    (void)ordo_signal_advance(lane->cancel, 1);
    if (started) {
        /* The thread runs every op left, cancelled, before it ends. */
        pthread_join(lane->thread, NULL);
    }
    pthread_mutex_destroy(&lane->lock);
    ordo__signal_release_internal(lane->cancel);
    if (lane->notifier) {
        ordo__signal_release_internal(lane->notifier);
    }
}

static int snapshot_kind(const hal_lane_op_t *op, hal_pending_kind_t *out_kind) {
    if (op->kind == HAL_LANE_WAIT) {
        *out_kind = HAL_PENDING_WAIT;
        return 1;
    }
    if (op->kind == HAL_LANE_SIGNAL) {
        *out_kind = HAL_PENDING_SIGNAL;
        return 1;
    }
    return 0;
}

int ordo__hal_lane_waits_unmet(hal_lane_t *lane) {
    int unmet = 0;
    pthread_mutex_lock(&lane->lock);
    const hal_lane_op_t *op = lane->current ? lane->current : lane->head;
    while (op && !unmet) {
        if (op->kind == HAL_LANE_WAIT) {
            signal_view_t view = ordo__signal_view(op->signal);
            unmet = !view.ended && view.value < op->value;
        }
        op = op == lane->current ? lane->head : op->next;
    }
    pthread_mutex_unlock(&lane->lock);
    return unmet;
}

size_t ordo__hal_lane_snapshot(hal_lane_t *lane, hal_pending_op_t *ops, size_t capacity,
                               int *out_in_wait) {
    size_t n = 0;
    *out_in_wait = 0;
    pthread_mutex_lock(&lane->lock);
    const hal_lane_op_t *op = lane->current ? lane->current : lane->head;
    int first = 1;
    while (op) {
        hal_pending_kind_t kind;
        if (snapshot_kind(op, &kind)) {
            if (n < capacity) {
                ops[n].kind = kind;
                ops[n].signal = op->signal;
                ops[n].value = op->value;
                ops[n].seq = op->seq;
                ordo__signal_retain_internal(op->signal);
            }
            if (n == 0 && first && op == lane->current && kind == HAL_PENDING_WAIT) {
                *out_in_wait = lane->in_wait;
            }
            ++n;
        }
        first = 0;
        op = op == lane->current ? lane->head : op->next;
    }
    pthread_mutex_unlock(&lane->lock);
    return n;
}
