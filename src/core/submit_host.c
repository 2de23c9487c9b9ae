/* ordo_submit_host: a submission whose work is one host task, over
 * ordo_submit with a launch function that enqueues the task. Kept apart
 * from tracker.c: it uses only the public submission path. */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "ordo/tracker.h"

#define API "ordo_submit_host"

typedef struct host_launch {
    ordo_host_fn fn;
    void *ctx;
    /* Set when enqueueing the task failed, with that call's message: the
     * launch wrapper in ordo_submit overwrites the thread's. */
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

/* Raises message again for ordo_submit_host: without the name of the call
 * that raised it when that call is one ordo_submit_host stands for
 * (ordo_submit, or the task's ordo_stream_host_task); other calls (a wait
 * the tracker enqueued on a failed stream) keep their names, wrapped. */
static ordo_status_t renamed(ordo_status_t st, const char *message) {
    static const char *const own[] = {"ordo_submit: ", "ordo_stream_host_task: "};
    for (size_t i = 0; i < sizeof own / sizeof own[0]; ++i) {
        size_t n = strlen(own[i]);
        if (strncmp(message, own[i], n) == 0) {
            return ordo_error(st, API, "%s", message + n);
        }
    }
    return ordo_error(st, API, "%s", message);
}

ordo_status_t ordo_submit_host(ordo_tracker_t *tracker, ordo_stream_t *stream,
                               const ordo_access_t *accesses, size_t count, ordo_host_fn fn,
                               void *ctx) {
    if (ORDO_UNLIKELY(!fn)) {
        return ordo_error(ORDO_ERR_INVALID_ARGUMENT, API, "fn is NULL");
    }
    host_launch_t launch;
    launch.fn = fn;
    launch.ctx = ctx;
    launch.failed = 0;
    ordo_status_t st = ordo_submit(tracker, stream, accesses, count, launch_host, &launch);
    if (ORDO_LIKELY(st == ORDO_OK)) {
        return ORDO_OK;
    }
    return renamed(st, launch.failed ? launch.message : ordo_error_message());
}
