/* ordo_tracker_submit_host: a submission whose work is one host task, over
 * ordo_tracker_submit with a launch function that enqueues the task. Kept apart
 * from tracker.c: it uses the public submission path. */
#include <stdio.h>

#include "base/error.h"
#include "core/graph_internal.h"
#include "core/tracker_internal.h"

#define API "ordo_tracker_submit_host"

typedef struct host_launch {
    ordo_host_fn fn;
    void *ctx;
    /* Set when enqueueing the task failed, with that call's message: the
     * launch wrapper in ordo_tracker_submit overwrites the thread's. */
    int failed;
    char message[512]; /* the size of the thread's message */
} host_launch_t;

static ordo_status_t launch_host(void *arg, ordo_stream_t *stream) {
    host_launch_t *launch = arg;
    ordo_status_t st = ordo_stream_host_task(stream, launch->fn, launch->ctx);
    if (ORDO_UNLIKELY(st != ORDO_OK)) {
        launch->failed = 1;
        snprintf(launch->message, sizeof launch->message, "%s", ordo_error_message());
    }
    return st;
}

ordo_status_t ordo_tracker_submit_host(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                       const ordo_access_t *accesses, size_t count, ordo_host_fn fn,
                                       void *ctx) {
    if (ORDO_UNLIKELY(!fn)) {
        ordo_status_t st = ordo__tracker_submit_refusal(tracker, stream, accesses, count, API);
        return st != ORDO_OK ? st : ordo__error(ORDO_ERR_INVALID_ARGUMENT, API, "fn is NULL");
    }
    if (ORDO_UNLIKELY(tracker && tracker->magic == ORDO_TRACKER_MAGIC &&
                      tracker_recording(tracker))) {
        /* Recorded as the task itself, not as this launch function (whose
         * context lives on this stack). */
        return ordo__graph_capture_host(tracker, stream, accesses, count, fn, ctx);
    }
    host_launch_t launch;
    launch.fn = fn;
    launch.ctx = ctx;
    launch.failed = 0;
    ordo_status_t st = ordo_tracker_submit(tracker, stream, accesses, count, launch_host, &launch);
    if (ORDO_LIKELY(st == ORDO_OK)) {
        return ORDO_OK;
    }
    if (launch.failed) {
        /* The task's enqueue failed: its message, not ordo_tracker_submit's wrap. */
        (void)ordo__error(st, NULL, "%s", launch.message);
    }
    return ordo__error_as(st, API); /* named for this call, not the calls it made */
}
