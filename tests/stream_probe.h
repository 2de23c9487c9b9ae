/* Test-only: tells whether a stream's destroy has begun, so a host task of
 * that stream can hold it until the destroy has reached the point where
 * the work queued behind the task is dropped, instead of a thread opening
 * the task's gate after a sleep and hoping the destroy got there first.
 *
 * Backends:
 * - cpu: ordo__cpu_stream_fini fails the stream as cancelled (fail_stream) when
 *   work is pending, before it stops and joins the worker; the worker checks
 *   the failure before each op, so an op after the running task is skipped
 *   once the failure shows. Work is pending whenever the caller is a task
 *   of the stream, so this reads ordo_stream_status.
 * - cuda: ordo__hal_lane_fini sets the lane's `stopping` under the lane's lock
 *   before it joins the lane's thread; the lane starts every op after the
 *   one running with `cancelled` set once it sees it.
 *
 * Both backends join the thread that runs the stream's tasks before the
 * stream is freed, so a task may poll its own stream while it is being
 * destroyed. */
#ifndef ORDO_TEST_STREAM_PROBE_H
#define ORDO_TEST_STREAM_PROBE_H

#include "hal/hal.h"
#include "test_util.h"
#ifdef ORDO_HAVE_CUDA_H
#include "backends/cuda/cuda_internal.h"
#endif

/* Non-zero once the destroy of stream has begun; for a backend the probe
 * does not know, -1. Call it from a task running on stream (or otherwise
 * while the stream's memory is sure to be live). */
static inline int test_stream_destroy_begun(ordo_stream_t *stream) {
    /* By entry point, not by table: a test may run a copy of a table. */
    const hal_backend_t *backend = stream->device->backend;
    if (backend->stream_fini == ordo__hal_cpu_backend.stream_fini) {
        return ordo_stream_status(stream) == ORDO_ERR_CANCELLED;
    }
#ifdef ORDO_HAVE_CUDA_H
    if (backend->stream_fini == ordo__cuda_stream_fini) {
        cuda_stream_t *s = stream->impl;
        hal_lane_lock(&s->lane);
        int stopping = s->lane.stopping;
        hal_lane_unlock(&s->lane);
        return stopping;
    }
#endif
    return -1;
}

/* Waits, bounded by the test deadline, until the destroy of stream has
 * begun; returns non-zero if it saw it. Meant for a task running on
 * stream: it returns without failing the test (cmocka's asserts belong to
 * the test's thread), and the test checks the result. */
static inline int test_stream_await_destroy(ordo_stream_t *stream) {
    const ordo_deadline_t deadline = test_deadline();
    for (;;) {
        int begun = test_stream_destroy_begun(stream);
        if (begun != 0) {
            return begun > 0;
        }
        if (ordo_time_now_ns() >= deadline) {
            return 0;
        }
        test_sleep_ms(1);
    }
}

#endif
