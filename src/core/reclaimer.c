/* The reclaimer: one thread per tracker that runs reclaim callbacks of
 * released buffers once their last use has completed. It sleeps on the
 * parker `wake` while its queue is empty; drains sleep on the parker
 * `idle` while reclamations are pending (base/parker.h). */
#include <limits.h>
#include <stddef.h>

#include "base/error.h"
#include "core/graph_internal.h"
#include "core/tracker_internal.h"

static void *reclaimer_main(void *arg) {
    ordo_tracker_t *tracker = arg;
    reclaimer_t *r = &tracker->reclaimer;
    for (;;) {
        ordo_park_key_t key = ordo__parker_prepare(&r->wake);
        pthread_mutex_lock(&r->lock);
        ordo_buffer_t *batch = r->queue;
        r->queue = NULL;
        int stop = r->stop;
        pthread_mutex_unlock(&r->lock);
        if (!batch) {
            if (stop) {
                break;
            }
            (void)ordo__parker_park(&r->wake, key, ORDO_PARK_ANY, ORDO_DEADLINE_NEVER);
            continue;
        }
        /* User callbacks run outside every ordo lock. */
        uint64_t done = 0;
        while (batch) {
            ordo_buffer_t *next = batch->next_reclaim;
            ordo__buffer_reclaim_now(tracker, batch);
            ++done;
            batch = next;
        }
        /* Under the lock, as in ordo__reclaimer_finished: no drain sees the
         * count reach 0 before the drains are unparked. */
        pthread_mutex_lock(&r->lock);
        atomic_fetch_sub_explicit(&tracker->reclamations_pending, done, memory_order_release);
        ordo__parker_unpark(&r->idle, ORDO_PARK_ANY, INT_MAX);
        pthread_mutex_unlock(&r->lock);
    }
    return NULL;
}

ordo_status_t ordo__reclaimer_start(reclaimer_t *r) {
    ordo_tracker_t *tracker = (ordo_tracker_t *)((char *)r - offsetof(ordo_tracker_t, reclaimer));
    if (pthread_mutex_init(&r->lock, NULL) != 0) {
        return ORDO_ERR_RESOURCE_EXHAUSTED;
    }
    ordo__parker_init(&r->wake);
    ordo__parker_init(&r->idle);
    if (pthread_create(&r->thread, NULL, reclaimer_main, tracker) != 0) {
        pthread_mutex_destroy(&r->lock);
        return ORDO_ERR_RESOURCE_EXHAUSTED;
    }
    return ORDO_OK;
}

void ordo__reclaimer_stop(reclaimer_t *r) {
    pthread_mutex_lock(&r->lock);
    r->stop = 1;
    pthread_mutex_unlock(&r->lock);
    ordo__parker_unpark(&r->wake, ORDO_PARK_ANY, 1);
    pthread_join(r->thread, NULL);
    pthread_mutex_destroy(&r->lock);
}

void ordo__reclaimer_push(ordo_tracker_t *tracker, ordo_buffer_t *b) {
    reclaimer_t *r = &tracker->reclaimer;
    pthread_mutex_lock(&r->lock);
    b->next_reclaim = r->queue;
    r->queue = b;
    /* Under the lock: once it is released the reclaimer may take b, and a
     * drain may then see nothing pending and let its caller destroy the
     * tracker, parker and all, while this thread is still to wake it. */
    ordo__parker_unpark(&r->wake, ORDO_PARK_ANY, 1);
    pthread_mutex_unlock(&r->lock);
}

/* Under the lock: a drain reads the count under it too, so it cannot see
 * the count reach 0 (and let its caller destroy the tracker) before the
 * drains are unparked. */
void ordo__reclaimer_finished(ordo_tracker_t *tracker) {
    reclaimer_t *r = &tracker->reclaimer;
    pthread_mutex_lock(&r->lock);
    atomic_fetch_sub_explicit(&tracker->reclamations_pending, 1, memory_order_release);
    ordo__parker_unpark(&r->idle, ORDO_PARK_ANY, INT_MAX);
    pthread_mutex_unlock(&r->lock);
}

ordo_status_t ordo_tracker_drain(ordo_tracker_t *tracker, ordo_deadline_t deadline) {
    ORDO_RETURN_IF_ERROR(ordo__tracker_check(tracker, __func__));
    if (ORDO_UNLIKELY(tracker_recording(tracker))) {
        ORDO_RETURN_IF_ERROR(ordo__graph_refuse(tracker, __func__, ordo__graph_host_wait_refused));
    }
    reclaimer_t *r = &tracker->reclaimer;
    for (;;) {
        ordo_park_key_t key = ordo__parker_prepare(&r->idle);
        pthread_mutex_lock(&r->lock);
        uint64_t pending =
            atomic_load_explicit(&tracker->reclamations_pending, memory_order_acquire);
        pthread_mutex_unlock(&r->lock);
        if (pending == 0) {
            return ORDO_OK;
        }
        if (deadline != ORDO_DEADLINE_NEVER && ordo_time_now_ns() >= deadline) {
            return ordo__error(ORDO_ERR_TIMEOUT, __func__,
                               "deadline passed with %llu reclamation(s) pending",
                               (unsigned long long)pending);
        }
        (void)ordo__parker_park(&r->idle, key, ORDO_PARK_ANY, deadline);
    }
}
