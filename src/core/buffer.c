/* Buffers: access histories, release and deferred reclamation. */
#include "base/alloc.h"
#include "base/error.h"
#include "core/frontier.h"
#include "core/graph_internal.h"
#include "core/tracker_internal.h"
#include "sync/signal_access.h"

ordo_status_t ordo_buffer_create(ordo_tracker_t *tracker, ordo_buffer_t **out_buffer) {
    if (out_buffer) {
        *out_buffer = NULL;
    }
    ORDO_RETURN_IF_ERROR(ordo__tracker_check(tracker, __func__));
    if (!out_buffer) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_buffer is NULL");
    }
    ordo_buffer_t *b = ordo__alloc(sizeof *b, 0);
    if (!b) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a buffer");
    }
    b->magic = ORDO_BUFFER_MAGIC;
    b->tracker = tracker;
    atomic_store_explicit(&tracker->buffers_live,
                          atomic_load_explicit(&tracker->buffers_live, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    *out_buffer = b;
    return ORDO_OK;
}

void ordo__buffer_reclaim_now(ordo_tracker_t *tracker, ordo_buffer_t *b) {
    if (b->reclaim) {
        b->reclaim(b->reclaim_ctx);
    }
    if (b->more_last_points) {
        ordo__dealloc(b->more_last_points, ORDO_TRACKER_MAX_STREAMS * sizeof *b->more_last_points,
                      0);
    }
    if (b->timepoints) {
        ordo__dealloc(b->timepoints, b->timepoint_count * sizeof *b->timepoints, 0);
    }
    b->magic = ORDO_BUFFER_DEAD;
    ordo__dealloc(b, sizeof *b, 0);
    atomic_fetch_add_explicit(&tracker->reclamations_done, 1, memory_order_release);
}

/* A use of a released buffer completed (or its stream failed, so it never
 * will run). The last one hands the buffer to the reclaimer thread: the
 * callback runs on whatever thread reached the point, often a stream's
 * worker, where user code must not run. */
static void use_completed(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status;
    (void)timepoint;
    ordo_buffer_t *b = ctx;
    if (atomic_fetch_sub_explicit(&b->uses_pending, 1, memory_order_acq_rel) == 1) {
        ordo__reclaimer_push(b->tracker, b);
    }
}

ordo_status_t ordo_buffer_release(ordo_buffer_t *b, ordo_reclaim_fn reclaim, void *ctx) {
    if (!b || (b->magic != ORDO_BUFFER_MAGIC && b->magic != ORDO_BUFFER_PREPARED)) {
        return ordo__error(b && b->magic == ORDO_BUFFER_RELEASED ? ORDO_ERR_DESTROYED
                                                                 : ORDO_ERR_INVALID_HANDLE,
                           __func__, "%p is not a live buffer%s", (void *)b,
                           b && b->magic == ORDO_BUFFER_RELEASED ? " (released already)" : "");
    }
    if (b->pool_owned) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "buffer %p belongs to a memory pool's block: deallocate the block "
                           "instead",
                           (void *)b);
    }
    if (b->magic == ORDO_BUFFER_PREPARED) {
        /* Freed now, it would be read by the finish still to come. */
        return ordo__buffer_refuse_prepared(b, __func__);
    }
    ordo_tracker_t *tracker = b->tracker;
    if (ORDO_UNLIKELY(tracker_recording(tracker))) {
        ORDO_RETURN_IF_ERROR(ordo__graph_refuse(
            tracker, __func__,
            "a buffer cannot be released while its tracker records (a replay could not "
            "release it again)"));
    }
    if (b->graph_binds) {
        return ordo__error(ORDO_ERR_BUSY, __func__,
                           "buffer %p is bound to %u graph(s), whose replays use it: rebind "
                           "them to another buffer (ordo_graph_rebind) or destroy them first",
                           (void *)b, b->graph_binds);
    }
    if (tracker_launching(tracker)) {
        /* The open submission may name it: released now, it could be freed
         * before the finish records its use. */
        return ordo__error(ORDO_ERR_BUSY, __func__,
                           "buffer %p: called inside a launch function of ordo_tracker_submit "
                           "or ordo_graph_replay on its tracker, whose submission may name it: "
                           "release it after the submission",
                           (void *)b);
    }
    buffer_use_t pending[ORDO_TRACKER_MAX_STREAMS];
    uint32_t uses = 0;
    ORDO_RETURN_IF_ERROR(ordo__buffer_uses_running(b, pending, &uses, __func__));
    ordo_timepoint_t *timepoints = NULL;
    if (uses) {
        timepoints = ordo__alloc(uses * sizeof *timepoints, 0);
        if (!timepoints) {
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__,
                               "cannot allocate the buffer's release");
        }
    }
    b->magic = ORDO_BUFFER_RELEASED;
    b->reclaim = reclaim;
    b->reclaim_ctx = ctx;
    b->timepoints = timepoints;
    b->timepoint_count = uses;
    atomic_store_explicit(&tracker->buffers_live,
                          atomic_load_explicit(&tracker->buffers_live, memory_order_relaxed) - 1,
                          memory_order_relaxed);

    /* One guard count keeps the buffer ours while the timepoints are armed. */
    atomic_store_explicit(&b->uses_pending, 1 + uses, memory_order_relaxed);
    atomic_fetch_add_explicit(&tracker->reclamations_pending, 1, memory_order_relaxed);
    for (uint32_t i = 0; i < uses; ++i) {
        ordo_signal_t *timeline = frontier_timeline(tracker, pending[i].stream);
        /* Timelines live as long as the tracker, which cannot be destroyed
         * with reclamations pending, so arming cannot fail; if it ever did,
         * keeping the buffer (a leak) is safer than freeing it early. */
        (void)ordo_timepoint_arm(&timepoints[i], timeline, pending[i].point, use_completed, b);
    }
    if (atomic_fetch_sub_explicit(&b->uses_pending, 1, memory_order_acq_rel) == 1) {
        /* Nothing still running: reclaim here, at once. */
        ordo__buffer_reclaim_now(tracker, b);
        ordo__reclaimer_finished(tracker);
    }
    return ORDO_OK;
}

ordo_status_t ordo__buffer_uses_running(const ordo_buffer_t *b, buffer_use_t *out,
                                        uint32_t *out_count, const char *api) {
    ordo_tracker_t *tracker = b->tracker;
    /* Every stream's last use: a later use on another stream implies an
     * earlier one only if that stream really waited, and a failed stream
     * never does. Uses already complete need no timepoint: those a record
     * covers that was reached, and those the stream's progress shows have
     * run (most points are never recorded). */
    uint32_t uses = 0;
    for (uint64_t mask = b->use_mask; mask; mask &= mask - 1) {
        uint32_t s = (uint32_t)__builtin_ctzll(mask);
        uint64_t point = buffer_last_point(b, s);
        /* Read without ordo_signal_query, whose refusal of a failed
         * timeline would replace the thread's message (a call that
         * succeeds leaves it alone). */
        uint64_t reached = ordo__signal_reached(frontier_timeline(tracker, s));
        if (reached < point && !ordo__tracker_point_ran(tracker, s, point)) {
            out[uses++] = (buffer_use_t){s, point};
        }
    }
    /* Recorded before anything else changes. A record on a stream that
     * failed meanwhile is refused by the stream, which writes the thread's
     * message though the record goes on: put back unless this fails. */
    ordo__kept_message_t kept;
    ordo__message_keep(&kept);
    for (uint32_t i = 0; i < uses; ++i) {
        const tracker_record_t *record;
        ordo_status_t st =
            ordo__tracker_record_covering(tracker, out[i].stream, out[i].point, &record);
        if (st != ORDO_OK) {
            return ordo__error(st, api, "cannot record a use of the buffer: %s",
                               ordo_error_message());
        }
    }
    ordo__message_restore(&kept);
    *out_count = uses;
    return ORDO_OK;
}

ordo_signal_t *ordo__buffer_use_timeline(const ordo_buffer_t *b, uint32_t stream) {
    return frontier_timeline(b->tracker, stream);
}
