/* The reclaimer: one thread per tracker that runs reclaim callbacks of
 * released buffers once their last use has completed. */
#include <stddef.h>
#include <time.h>

#include "base/error.h"
#include "core/tracker_internal.h"

static void *reclaimer_main(void *arg) {
    ordo_tracker_t *tracker = arg;
    reclaimer_t *r = &tracker->reclaimer;
    pthread_mutex_lock(&r->lock);
    for (;;) {
        while (!r->queue && !r->stop) {
            pthread_cond_wait(&r->wake, &r->lock);
        }
        if (!r->queue) {
            break;
        }
        ordo_buffer_t *batch = r->queue;
        r->queue = NULL;
        pthread_mutex_unlock(&r->lock);
        /* User callbacks run outside every ordo lock. */
        while (batch) {
            ordo_buffer_t *next = batch->next_reclaim;
            ordo__buffer_reclaim_now(tracker, batch);
            atomic_fetch_sub_explicit(&tracker->reclamations_pending, 1, memory_order_release);
            batch = next;
        }
        pthread_mutex_lock(&r->lock);
        pthread_cond_broadcast(&r->idle);
    }
    pthread_mutex_unlock(&r->lock);
    return NULL;
}

ordo_status_t ordo__reclaimer_start(reclaimer_t *r) {
    ordo_tracker_t *tracker = (ordo_tracker_t *)((char *)r - offsetof(ordo_tracker_t, reclaimer));
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    int made = 0;
    made += pthread_mutex_init(&r->lock, NULL) == 0;
    made += made == 1 && pthread_cond_init(&r->wake, NULL) == 0;
    made += made == 2 && pthread_cond_init(&r->idle, &attr) == 0;
    pthread_condattr_destroy(&attr);
    if (made != 3) {
        if (made >= 2) {
            pthread_cond_destroy(&r->wake);
        }
        if (made >= 1) {
            pthread_mutex_destroy(&r->lock);
        }
        return ORDO_ERR_RESOURCE_EXHAUSTED;
    }
    if (pthread_create(&r->thread, NULL, reclaimer_main, tracker) != 0) {
        pthread_cond_destroy(&r->idle);
        pthread_cond_destroy(&r->wake);
        pthread_mutex_destroy(&r->lock);
        return ORDO_ERR_RESOURCE_EXHAUSTED;
    }
    return ORDO_OK;
}

void ordo__reclaimer_stop(reclaimer_t *r) {
    pthread_mutex_lock(&r->lock);
    r->stop = 1;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
    pthread_join(r->thread, NULL);
    pthread_cond_destroy(&r->idle);
    pthread_cond_destroy(&r->wake);
    pthread_mutex_destroy(&r->lock);
}

void ordo__reclaimer_push(ordo_tracker_t *tracker, ordo_buffer_t *b) {
    reclaimer_t *r = &tracker->reclaimer;
    pthread_mutex_lock(&r->lock);
    b->next_reclaim = r->queue;
    r->queue = b;
    pthread_cond_signal(&r->wake);
    pthread_mutex_unlock(&r->lock);
}

void ordo__reclaimer_finished(ordo_tracker_t *tracker) {
    reclaimer_t *r = &tracker->reclaimer;
    pthread_mutex_lock(&r->lock);
    atomic_fetch_sub_explicit(&tracker->reclamations_pending, 1, memory_order_release);
    pthread_cond_broadcast(&r->idle);
    pthread_mutex_unlock(&r->lock);
}

ordo_status_t ordo_tracker_drain(ordo_tracker_t *tracker, ordo_deadline_t deadline) {
    ordo_status_t st = ordo__tracker_check(tracker, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    reclaimer_t *r = &tracker->reclaimer;
    pthread_mutex_lock(&r->lock);
    while (atomic_load_explicit(&tracker->reclamations_pending, memory_order_acquire) != 0) {
        if (deadline == ORDO_DEADLINE_NEVER) {
            pthread_cond_wait(&r->idle, &r->lock);
            continue;
        }
        if (ordo_time_now_ns() >= deadline) {
            pthread_mutex_unlock(&r->lock);
            return ordo__error(ORDO_ERR_TIMEOUT, __func__,
                               "deadline passed with %llu reclamation(s) pending",
                               (unsigned long long)atomic_load(&tracker->reclamations_pending));
        }
        struct timespec ts = {(time_t)(deadline / 1000000000u), (long)(deadline % 1000000000u)};
        pthread_cond_timedwait(&r->idle, &r->lock, &ts);
    }
    pthread_mutex_unlock(&r->lock);
    return ORDO_OK;
}
