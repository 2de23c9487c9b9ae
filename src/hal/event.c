/* Events: pooled per device; a recorded event is a point (timeline,
 * value) in its stream's order. */
#include "base/error.h"
#include "base/futex.h"
#include "hal/hal.h"
#include "sync/signal_access.h"

ordo_status_t ordo__hal_event_check(const ordo_event_t *event, const char *api) {
    if (!event) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "event is NULL");
    }
    if (event->magic != ORDO_EVENT_MAGIC ||
        atomic_load_explicit(&event->in_pool, memory_order_relaxed)) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api,
                           "%p is not a live event (destroyed, or not an event)",
                           (const void *)event);
    }
    return ORDO_OK;
}

ordo_status_t ordo_event_create(ordo_device_t *device, ordo_event_kind_t kind,
                                ordo_event_t **out_event) {
    if (out_event) {
        *out_event = NULL;
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, __func__));
    if (!out_event) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_event is NULL");
    }
    if (kind != ORDO_EVENT_PLAIN && kind != ORDO_EVENT_TIMING) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "event kind %d is not a kind",
                           (int)kind);
    }
    if (kind == ORDO_EVENT_TIMING && !device->info.timing_events) {
        return ordo__error(ORDO_ERR_UNSUPPORTED, __func__, "%s has no timing events",
                           device->info.name);
    }
    void *object;
    int pooled;
    ORDO_RETURN_IF_ERROR(ordo__event_pool_acquire(device->event_pools[kind], &object, &pooled));
    ordo_event_t *event = object;
    atomic_store_explicit(&event->in_pool, 0, memory_order_relaxed);
    event->pooled = pooled;
    event->timeline = NULL;
    event->point = 0;
    atomic_store_explicit(&event->reached_ns, 0, memory_order_relaxed);
    event->stamped_generation = event->generation; /* nothing stamped in this life */
    atomic_store_explicit(&event->pending_records, 0, memory_order_relaxed);
    *out_event = event;
    return ORDO_OK;
}

static void stamp_lock(ordo_event_t *event) {
    while (atomic_exchange_explicit(&event->stamp_lock, 1, memory_order_acquire)) {
        ordo__cpu_relax();
    }
}

static void stamp_unlock(ordo_event_t *event) {
    atomic_store_explicit(&event->stamp_lock, 0, memory_order_release);
}

/* Back to the pool: the destroy and every pending record are done. On
 * the thread that passed the last record (a stream's worker, a driver
 * thread: shared), to the pool's depot rather than that thread's cache. */
static void event_finish_destroy(ordo_event_t *event, int shared) {
    if (event->timeline) {
        ordo__signal_release_internal(event->timeline);
        event->timeline = NULL;
    }
    event_pool_t *pool = event->device->event_pools[event->kind];
    if (shared) {
        (void)ordo__event_pool_release_shared(pool, event, event->pooled);
    } else {
        (void)ordo__event_pool_release(pool, event, event->pooled);
    }
}

uint64_t ordo__hal_event_record_begin(ordo_event_t *event) {
    atomic_fetch_add_explicit(&event->pending_records, 1, memory_order_relaxed);
    stamp_lock(event);
    uint64_t generation = ++event->generation;
    stamp_unlock(event);
    return generation;
}

void ordo__hal_event_record_abort(ordo_event_t *event, uint64_t generation) {
    stamp_lock(event);
    if (event->generation == generation) {
        --event->generation; /* an earlier pending record may stamp again */
    }
    stamp_unlock(event);
    atomic_fetch_sub_explicit(&event->pending_records, 1, memory_order_release);
}

void ordo__hal_event_record_reached(ordo_event_t *event, uint64_t generation, int stamp) {
    if (stamp && event->kind == ORDO_EVENT_TIMING) {
        uint64_t now = ordo_time_now_ns();
        stamp_lock(event);
        if (generation >= event->stamped_generation) {
            atomic_store_explicit(&event->reached_ns, now, memory_order_release);
            event->stamped_generation = generation;
        }
        stamp_unlock(event);
    }
    uint32_t old = atomic_fetch_sub_explicit(&event->pending_records, 1, memory_order_acq_rel);
    if (old == (EVENT_DESTROY_REQUESTED | 1u)) {
        event_finish_destroy(event, 1); /* destroyed while this record was pending */
    }
}

int ordo__hal_event_lock_if_current(ordo_event_t *event, uint64_t generation) {
    stamp_lock(event);
    if (event->generation == generation) {
        return 1;
    }
    stamp_unlock(event);
    return 0;
}

void ordo__hal_event_unlock(ordo_event_t *event) {
    stamp_unlock(event);
}

/* Whether event's stamp is its newest record's (the record the event
 * stands for): the stamp of a record its stream did not really reach (it
 * had failed) is missing. */
static int stamped_current(ordo_event_t *event) {
    stamp_lock(event);
    int current = event->stamped_generation == event->generation;
    stamp_unlock(event);
    return current;
}

ordo_status_t ordo_event_destroy(ordo_event_t *event) {
    ORDO_RETURN_IF_ERROR(ordo__hal_event_check(event, __func__));
    /* From here on the handle is refused; the event itself returns to its
     * pool now, or when its stream passes its last pending record. */
    atomic_store_explicit(&event->in_pool, 1, memory_order_relaxed);
    uint32_t old = atomic_fetch_or_explicit(&event->pending_records, EVENT_DESTROY_REQUESTED,
                                            memory_order_acq_rel);
    if (old == 0) {
        event_finish_destroy(event, 0);
    }
    return ORDO_OK;
}

ordo_status_t ordo_event_record(ordo_event_t *event, ordo_stream_t *stream) {
    ordo_status_t st = ordo__hal_event_check(event, __func__);
    if (st == ORDO_OK) {
        st = ordo__hal_stream_check(stream, __func__);
    }
    if (st != ORDO_OK) {
        return st;
    }
    if (stream->device != event->device) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "event of %s recorded on a stream of %s", event->device->info.name,
                           stream->device->info.name);
    }
    return stream->device->backend->event_record(event, stream);
}

ordo_status_t ordo__hal_event_check_recorded(const ordo_event_t *event, const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__hal_event_check(event, api));
    if (!event->timeline) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "event %p was never recorded: it names no point to wait for",
                           (const void *)event);
    }
    return ORDO_OK;
}

ordo_status_t ordo_event_query(ordo_event_t *event, bool *out_complete) {
    if (out_complete) {
        *out_complete = 0;
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_event_check_recorded(event, __func__));
    if (!out_complete) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_complete is NULL");
    }
    /* Reached is complete, even on a timeline that failed later: read
     * first, since a query of a failed timeline records its failure as the
     * thread's message. */
    if (ordo__signal_view(event->timeline).value >= event->point) {
        *out_complete = 1;
        return ORDO_OK;
    }
    uint64_t value = 0;
    ordo_status_t st = ordo_signal_query(event->timeline, &value);
    *out_complete = value >= event->point;
    if (*out_complete || st == ORDO_OK) {
        return ORDO_OK;
    }
    /* The recording stream failed before the point: named for this call. */
    return ordo__error_as(st, __func__);
}

ordo_status_t ordo_event_synchronize(ordo_event_t *event, ordo_deadline_t deadline) {
    ORDO_RETURN_IF_ERROR(ordo__hal_event_check_recorded(event, __func__));
    ordo_status_t st = ordo_signal_wait(event->timeline, event->point, deadline);
    return st == ORDO_OK ? st : ordo__error_as(st, __func__);
}

ordo_status_t ordo_stream_wait_event(ordo_stream_t *stream, ordo_event_t *event) {
    ordo_status_t st = ordo__hal_stream_check(stream, __func__);
    if (st == ORDO_OK) {
        st = ordo__hal_event_check_recorded(event, __func__);
    }
    if (st != ORDO_OK) {
        return st;
    }
    st = stream->device->backend->wait(stream, event->timeline, event->point);
    return st == ORDO_OK ? st : ordo__error_as(st, __func__); /* the backend's wait is ours */
}

ordo_status_t ordo_event_elapsed_ns(ordo_event_t *start, ordo_event_t *end, int64_t *out_ns) {
    if (out_ns) {
        *out_ns = 0;
    }
    ordo_status_t st = ordo__hal_event_check_recorded(start, __func__);
    if (st == ORDO_OK) {
        st = ordo__hal_event_check_recorded(end, __func__);
    }
    if (st != ORDO_OK) {
        return st;
    }
    if (!out_ns) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_ns is NULL");
    }
    if (start->kind != ORDO_EVENT_TIMING || end->kind != ORDO_EVENT_TIMING) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "both events must be timing events");
    }
    bool complete;
    if ((st = ordo_event_query(start, &complete)) != ORDO_OK || !complete ||
        (st = ordo_event_query(end, &complete)) != ORDO_OK || !complete) {
        return st != ORDO_OK ? ordo__error_as(st, __func__)
                             : ordo__error(ORDO_ERR_BUSY, __func__,
                                           "an event's point has not been reached yet");
    }
    if (start->device->backend->event_elapsed_ns) {
        if (start->device != end->device) {
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                               "the events belong to different devices (%s, %s)",
                               start->device->info.name, end->device->info.name);
        }
        return start->device->backend->event_elapsed_ns(start, end, out_ns);
    }
    if (!stamped_current(start) || !stamped_current(end)) {
        return ordo__error(ORDO_ERR_UNAVAILABLE, __func__,
                           "an event's newest record has no time (its stream did not run it)");
    }
    uint64_t a = atomic_load_explicit(&start->reached_ns, memory_order_acquire);
    uint64_t b = atomic_load_explicit(&end->reached_ns, memory_order_acquire);
    *out_ns = (int64_t)(b - a);
    return ORDO_OK;
}
