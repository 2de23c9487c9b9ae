/* Trackers that hold their device and own streams: ordo_tracker_open,
 * ordo_tracker_stream_create, ordo_tracker_close, and the teardown they
 * share with ordo_tracker_destroy. */
#include "base/alloc.h"
#include "base/error.h"
#include "core/graph_internal.h"
#include "core/timeline_op.h"
#include "core/tracker_internal.h"
#include "hal/hal.h"
#include "sync/signal_access.h"

ordo_status_t ordo_tracker_open(const char *device_name, ordo_tracker_t **out_tracker) {
    if (out_tracker) {
        *out_tracker = NULL;
    }
    if (!out_tracker) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_tracker is NULL");
    }
    ordo_device_t *device;
    ordo_status_t st = ordo_device_open(device_name, &device);
    if (st != ORDO_OK) {
        return ordo__error_as(st, __func__); /* the open's status and message */
    }
    st = ordo_tracker_create(device, out_tracker);
    if (st != ORDO_OK) {
        st = ordo__error_as(st, __func__);
    }
    /* The tracker took a reference of its own: the open's goes, so the
     * tracker's is the only one this call leaves (none if it failed). */
    (void)ordo_device_release(device);
    return st;
}

ordo_status_t ordo_tracker_stream_create(ordo_tracker_t *tracker, int priority,
                                         ordo_stream_t **out_stream) {
    if (out_stream) {
        *out_stream = NULL;
    }
    ORDO_RETURN_IF_ERROR(ordo__tracker_check(tracker, __func__));
    if (!out_stream) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_stream is NULL");
    }
    ordo_stream_t *stream;
    ordo_status_t st = ordo_stream_create(tracker->device, priority, &stream);
    if (st != ORDO_OK) {
        return ordo__error_as(st, __func__);
    }
    /* Created outside the lock (a stream's creation takes the device's
     * locks); the list is only appended to under it. */
    (void)ordo_tracker_lock(tracker);
    /* The tracker must be able to order it: a place is kept for it among
     * the streams it orders (ordo__tracker_stream_attach). The owned ones
     * it orders already are among stream_count. */
    const uint32_t ordered = tracker->stream_count, unordered = tracker->owned_unordered;
    int full = ordered + unordered == ORDO_TRACKER_MAX_STREAMS;
    if (!full) {
        stream->owner = tracker;
        stream->owner_kind = HAL_STREAM_OWNER_TRACKER;
        tracker->owned[tracker->owned_count++] = stream;
        tracker->owned_unordered++;
    }
    (void)ordo_tracker_unlock(tracker);
    if (full) {
        (void)ordo_stream_destroy(stream);
        return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, __func__,
                           "the tracker orders %u streams and owns %u more it has not ordered "
                           "yet: at most %u in all (it could not order another)",
                           ordered, unordered, ORDO_TRACKER_MAX_STREAMS);
    }
    *out_stream = stream;
    return ORDO_OK;
}

ordo_status_t ordo__tracker_teardown_check(const ordo_tracker_t *tracker, int pending_ok,
                                           const char *api) {
    /* The submission or replay around it uses the tracker once it returns. */
    if (tracker_launching(tracker)) {
        ORDO_RETURN_IF_ERROR(ordo__tracker_refuse_in_launch(tracker, api));
    }
    uint32_t pools = atomic_load(&tracker->pools);
    if (pools) {
        return ordo__error(ORDO_ERR_BUSY, api,
                           "%u memory pool(s) still use the tracker: destroy them first", pools);
    }
    uint32_t graphs = atomic_load_explicit(&tracker->graphs, memory_order_relaxed);
    if (graphs) {
        return ordo__error(ORDO_ERR_BUSY, api,
                           "%u graph(s) recorded on the tracker are still live: destroy them "
                           "first (ordo_graph_destroy)",
                           graphs);
    }
    uint64_t live = atomic_load(&tracker->buffers_live);
    uint64_t pending = pending_ok ? 0 : atomic_load(&tracker->reclamations_pending);
    if (live && pending_ok) {
        return ordo__error(ORDO_ERR_BUSY, api,
                           "%llu buffer(s) still live: release them first (ordo_buffer_release)",
                           (unsigned long long)live);
    }
    if (live || pending) {
        return ordo__error(ORDO_ERR_BUSY, api,
                           "%llu buffer(s) still live and %llu reclamation(s) pending "
                           "(release them, then ordo_tracker_drain)",
                           (unsigned long long)live, (unsigned long long)pending);
    }
    /* All or nothing: a stream the tracker owns that cannot be destroyed
     * keeps the whole tracker. Its own table's use of the stream goes
     * first, so only the others count. */
    for (uint32_t i = 0; i < tracker->owned_count; ++i) {
        uint32_t index;
        uint32_t ours = tracker_stream_find(tracker, tracker->owned[i], &index) ? 1u : 0u;
        ORDO_RETURN_IF_ERROR(ordo__hal_stream_check_destroy_by(tracker->owned[i], ours, api));
    }
    return ORDO_OK;
}

void ordo__tracker_streams_release(ordo_tracker_t *tracker) {
    for (uint32_t i = 0; i < tracker->stream_count; ++i) {
        timeline_drop(tracker->streams[i]->timeline, tracker->streams[i]->spare_refs);
        ordo__hal_stream_unuse(tracker->streams[i]->stream, HAL_STREAM_TRACKER);
        ordo__dealloc(tracker->streams[i], sizeof *tracker->streams[i], 64);
    }
    tracker->stream_count = 0;
}

ordo_status_t ordo__tracker_teardown(ordo_tracker_t *tracker, const char *api) {
    ordo__reclaimer_stop(&tracker->reclaimer);
    ordo__tracker_streams_release(tracker);
    /* Then the streams it owned, as ordo_stream_destroy does (checked by
     * ordo__tracker_teardown_check: none is refused), each dropping its
     * own reference on the device. The tracker is marked dead first and
     * freed only once they are gone (a destroy waits for a host task
     * running on the stream); its device reference goes last. */
    tracker->magic = ORDO_HAL_DEAD;
    ordo_status_t st = ORDO_OK;
    for (uint32_t i = 0; i < tracker->owned_count; ++i) {
        ordo_status_t s = ordo__hal_stream_destroy(tracker->owned[i], api);
        if (st == ORDO_OK) {
            st = s;
        }
    }
    ordo_device_t *device = tracker->device;
    ordo__dealloc(tracker, sizeof *tracker, 64);
    ordo_status_t released = ordo_device_release(device);
    return st != ORDO_OK ? st : released;
}

ordo_status_t ordo_tracker_close(ordo_tracker_t *tracker, ordo_deadline_t deadline) {
    ORDO_RETURN_IF_ERROR(ordo__tracker_check(tracker, __func__));
    if (ORDO_UNLIKELY(tracker_recording(tracker))) {
        ORDO_RETURN_IF_ERROR(ordo__graph_refuse(tracker, __func__, ordo__graph_host_wait_refused));
    }
    /* What waiting cannot change is refused before any wait. */
    ORDO_RETURN_IF_ERROR(ordo__tracker_teardown_check(tracker, 1, __func__));
    for (uint32_t i = 0; i < tracker->stream_count; ++i) {
        ordo_stream_t *stream = tracker->streams[i]->stream;
        if (ordo__hal_stream_on_own_thread(stream)) {
            char name[ORDO_STREAM_NAME_MAX];
            (void)ordo_stream_name(stream, name, sizeof name);
            return ordo__error(ORDO_ERR_BUSY, __func__,
                               "called on a thread of stream %s (from a host task or a callback "
                               "it ran), whose work the close waits for: call %s from another "
                               "thread",
                               name, __func__);
        }
    }
    ordo_status_t st = ordo_tracker_synchronize(tracker, deadline);
    if (st != ORDO_OK) {
        return ordo__error_as(st, __func__); /* nothing torn down */
    }
    ORDO_RETURN_IF_ERROR(ordo__tracker_teardown_check(tracker, 0, __func__));
    return ordo__tracker_teardown(tracker, __func__);
}
