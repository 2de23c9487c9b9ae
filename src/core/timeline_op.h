/* Internal: signals and waits the core enqueues on a timeline of its own
 * (a tracker's per-stream timelines, a graph's lane timelines), straight
 * on the backend.
 *
 * The public ordo_stream_signal / ordo_stream_wait would re-check what the
 * owner knows: the stream was checked when it was first used (and must
 * outlive the owner), the timeline is the owner's and lives as long as it,
 * and its values stay far below ORDO_SIGNAL_VALUE_MAX. They would also
 * load the timeline's state and count a reference on it, a line the stream
 * workers write (it would travel between the cores for every op): where
 * the backend can, the op adopts one of the references the owner took in
 * a batch. The backend still refuses a failed stream (a signal then fails
 * the timeline). */
#ifndef ORDO_CORE_TIMELINE_OP_H
#define ORDO_CORE_TIMELINE_OP_H

#include <stdint.h>

#include "base/error.h"
#include "base/trace.h"
#include "hal/hal.h"
#include "sync/signal_access.h"

/* References on a timeline taken at once for ops to adopt. */
#define TIMELINE_REF_BATCH 256u

/* Enqueues a signal (wait == 0) of timeline to value, or a wait for it, on
 * stream; *spare_refs counts the references the owner holds for ops to
 * adopt. */
static inline ordo_status_t timeline_op(ordo_stream_t *stream, ordo_signal_t *timeline,
                                        uint32_t *spare_refs, uint64_t value, int wait) {
    const hal_backend_t *backend = stream->device->backend;
    /* Each adopting entry is optional on its own. */
    ordo_status_t (*adopt)(ordo_stream_t *, ordo_signal_t *, uint64_t) =
        wait ? backend->wait_adopt : backend->signal_adopt;
    if (!adopt) {
        return wait ? backend->wait(stream, timeline, value)
                    : backend->signal(stream, timeline, value);
    }
    if (ORDO_UNLIKELY(*spare_refs == 0)) {
        ordo__signal_retain_many(timeline, TIMELINE_REF_BATCH);
        *spare_refs = TIMELINE_REF_BATCH;
    }
    ordo_status_t st = adopt(stream, timeline, value);
    if (st == ORDO_OK) {
        --*spare_refs; /* the op's now */
    }
    return st;
}

/* Tells the trace that the core made stream wait for timeline's value (a
 * tracker's inserted wait, a graph replay's recorded one): the export draws
 * it as a flow arrow (ordo/trace.h). */
static inline void timeline_trace_wait(const ordo_stream_t *stream, const ordo_signal_t *timeline,
                                       uint64_t value) {
    if (trace_on()) {
        trace_event_t e = {trace_now(),
                           0,
                           (const void *)stream->trace_track,
                           NULL,
                           ordo__signal_trace_id(timeline),
                           value,
                           TRACE_WAIT_EMITTED,
                           0};
        ordo__trace_record(&e);
    }
}

/* Drops the owner's references on timeline: the spare ones, then its own. */
static inline void timeline_drop(ordo_signal_t *timeline, uint32_t spare_refs) {
    for (uint32_t r = 0; r < spare_refs; ++r) {
        ordo__signal_release_internal(timeline);
    }
    (void)ordo_signal_release(timeline);
}

#endif
