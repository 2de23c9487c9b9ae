/* CUDA streams: a non-blocking CUstream, a timeline of points in the
 * device's completion watcher, and a host lane for what cannot go to the
 * device yet (see cuda_internal.h and docs/CUDA.md).
 *
 * Every operation that the stream's progress must reach gets a number
 * (`reserved`, under the lane's lock, in submission order): a signal, an
 * event record, a synchronize, and a host task (two: the point before it
 * and the task itself). A *point* is a pooled CUDA event recorded on the
 * stream plus a watch in the timeline: when the watcher sees the event
 * complete, the point's signal is raised and the progress signal moves to
 * its number. Points are registered by (signal, value) and by (progress,
 * number) in the watcher's registry, so another stream of the device that
 * waits for such a value waits for the event on the device.
 *
 * A wait whose value no registered point reaches, and every host task, is
 * held in the lane with all that follows; the lane issues them in order
 * once they can go. Direct issue (under the lane's lock) happens only
 * while the lane holds nothing, so points are issued in number order. */
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "base/alloc.h"
#include "base/error.h"
#include "sync/signal_access.h"

/* ---- failure -------------------------------------------------------------- */

/* The stream's failure as an error of api, or ORDO_OK. */
static ordo_status_t stream_failure(cuda_stream_t *s, const char *api) {
    ordo_status_t st = ORDO_OK;
    const char *message = NULL;
    if (ORDO_LIKELY(!ordo__hal_timeline_failed(&s->timeline, &st, &message))) {
        return ORDO_OK;
    }
    return ordo__error(st, api, HAL_STREAM_FAILED_TEXT "%s", message);
}

/* A signal point the stream will never reach fails at once (unless the
 * value was reached by someone else). */
static void fail_point(ordo_signal_t *signal, uint64_t value, ordo_status_t status,
                       const char *message) {
    if (ordo__signal_reached(signal) < value) {
        (void)ordo_signal_fail(signal, status, message);
    }
}

/* ---- points ---------------------------------------------------------------- */

/* Records the point numbered seq on the stream (with its signal and event
 * record, if any) and hands it to the watcher. Under the lane's lock or on
 * the lane's thread. */
static ordo_status_t issue_point(cuda_stream_t *s, uint64_t seq, ordo_signal_t *signal,
                                 uint64_t value, ordo_event_t *event, uint64_t generation,
                                 const char *api) {
    cuda_device_t *d = s->dev;
    hal_watch_t *w = ordo__hal_timeline_watch_alloc(&s->timeline);
    if (!w) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a stream point");
    }
    void *point = NULL;
    ordo_status_t st = ordo__event_pool_take(d->points, &point);
    if (st != ORDO_OK) {
        ordo__hal_timeline_watch_free(&s->timeline, w);
        return st;
    }
    CUresult r = CUDA_SUCCESS;
    const char *what = "cuEventRecord";
    if (event && event->impl && ordo__hal_event_lock_if_current(event, generation)) {
        /* The timing event itself, unless it was recorded again since
         * this record was held back: its object stands for the newest. */
        r = d->cu->EventRecord((CUevent)event->impl, s->cu);
        ordo__hal_event_unlock(event);
    }
    if (r == CUDA_SUCCESS) {
        r = d->cu->EventRecord((CUevent)point, s->cu);
    }
    if (r == CUDA_SUCCESS && d->observe_memops) {
        what = "cuStreamWriteValue64";
        r = d->cu->StreamWriteValue64(s->cu, s->word_device, seq, CU_STREAM_WRITE_VALUE_DEFAULT);
        if (r == CUDA_SUCCESS) {
            s->word_last = seq;
        }
    }
    if (r != CUDA_SUCCESS) {
        ordo__event_pool_give(d->points, point);
        ordo__hal_timeline_watch_free(&s->timeline, w);
        return ordo__cuda_error(r, api, what);
    }
    w->point = point;
    w->seq = seq;
    if (signal) {
        ordo__signal_retain_internal(signal);
        w->signal = signal;
        w->value = value;
    }
    w->event = event;
    w->generation = generation;
    ordo__hal_timeline_push(&s->timeline, w);
    s->chain = 0;
    return ORDO_OK;
}

/* The watcher's side: is the point reached? */
static ordo_status_t point_query(void *user, hal_timeline_t *t, const hal_watch_t *w, char *msg,
                                 size_t capacity) {
    cuda_device_t *d = user;
    cuda_stream_t *s = t->user;
    if (d->observe_memops) {
        if (atomic_load_explicit(s->word, memory_order_acquire) >= w->seq) {
            return ORDO_OK;
        }
        /* The word says nothing of device errors: ask the event now and
         * then. */
        if ((++s->polls & 255u) != 0) {
            return ORDO_ERR_BUSY;
        }
    }
    /* Completions run users' callbacks on this thread, and one may have
     * made another context current (or none): bind the device's again. */
    if (ordo__cuda_enter(d, "the CUDA completion thread") != ORDO_OK) {
        snprintf(msg, capacity, "the device failed: %s", ordo_error_message());
        return ORDO_ERR_DEVICE;
    }
    /* Relaxed for the query: another thread's capture neither refuses it
     * nor is broken by it (cuda_internal.h). */
    CUstreamCaptureMode mode = ordo__cuda_relax_captures_for_now(d);
    CUresult r = d->cu->EventQuery((CUevent)w->point);
    ordo__cuda_restore_captures(d, mode);
    if (r == CUDA_SUCCESS) {
        return ORDO_OK;
    }
    if (r == CUDA_ERROR_NOT_READY) {
        return ORDO_ERR_BUSY;
    }
    char detail[128];
    ordo__cuda_describe(r, detail, sizeof detail);
    snprintf(msg, capacity, "the device failed: cuEventQuery: %s", detail);
    ordo_status_t st = ordo__cuda_status_of(r);
    return st == ORDO_ERR_BUSY || st == ORDO_OK ? ORDO_ERR_DEVICE : st;
}

static void point_release(void *user, void *point, int reached) {
    /* A point dropped at a stream's destroy may still be pending on the
     * device: re-recording a CUDA event later is allowed (it then stands
     * for the new record; waits enqueued on the old one keep it). */
    (void)reached;
    cuda_device_t *d = user;
    ordo__event_pool_give(d->points, point);
}

static void watcher_thread_start(void *user) {
    (void)ordo__cuda_enter(user, "the CUDA completion thread");
}

/* A waiting thread's pass (watcher.h): the device's context current for
 * its queries, the thread's own restored after. */
static int help_begin(void *user) {
    cuda_device_t *d = user;
    return d->cu->CtxPushCurrent(d->ctx) == CUDA_SUCCESS;
}

static void help_end(void *user) {
    cuda_device_t *d = user;
    CUcontext popped = NULL;
    (void)d->cu->CtxPopCurrent(&popped);
}

const hal_watcher_ops_t ordo__cuda_watcher_ops = {
    .query = point_query,
    .release = point_release,
    .thread_start = watcher_thread_start,
    .in_order = 1, /* a stream's events complete in its order */
    .help_begin = help_begin,
    .help_end = help_end,
};

/* ---- device-side waits ----------------------------------------------------- */

typedef struct wait_use {
    cuda_stream_t *s;
    CUresult result;
    ordo_signal_t *after; /* retained: the producing stream's progress */
    uint64_t after_value;
} wait_use_t;

/* Under the registry lock: the point stays valid during the call. */
static void wait_on_point(void *ctx, const hal_watch_t *w) {
    wait_use_t *u = ctx;
    u->result = u->s->dev->cu->StreamWaitEvent(u->s->cu, (CUevent)w->point, 0);
    u->after = w->timeline->progress;
    ordo__signal_retain_internal(u->after);
    u->after_value = w->seq;
}

/* Issues the wait on the device if it can: nothing if the value is
 * reached; a failure in order if the signal has ended short of it; an
 * event wait if a registered point reaches it. *out_hold: it cannot go yet
 * (the caller holds it on the host). Under the lane's lock or on the lane. */
static ordo_status_t wait_try(cuda_stream_t *s, ordo_signal_t *signal, uint64_t value,
                              int *out_hold, const char *api) {
    *out_hold = 0;
    signal_view_t view = ordo__signal_view(signal);
    if (view.value >= value) {
        return ORDO_OK;
    }
    /* Either way a check follows the wait in the timeline: it fails the
     * stream, in order, if the signal ends before the value. */
    hal_watch_t *check = ordo__hal_timeline_watch_alloc(&s->timeline);
    if (!check) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a stream wait");
    }
    if (!view.ended) {
        wait_use_t use = {s, CUDA_SUCCESS, NULL, 0};
        if (!ordo__hal_watcher_find(&s->dev->watcher, signal, value, wait_on_point, &use)) {
            ordo__hal_timeline_watch_free(&s->timeline, check);
            *out_hold = 1;
            return ORDO_OK;
        }
        if (use.result != CUDA_SUCCESS) {
            ordo__signal_release_internal(use.after);
            ordo__hal_timeline_watch_free(&s->timeline, check);
            return ordo__cuda_error(use.result, api, "cuStreamWaitEvent");
        }
        check->after = use.after;
        check->after_value = use.after_value;
    }
    ordo__signal_retain_internal(signal);
    check->check = signal;
    check->check_value = value;
    ordo__hal_timeline_push(&s->timeline, check);
    /* A host task after this must wait for the check's verdict. */
    s->chain = 0;
    return ORDO_OK;
}

/* ---- held operations -------------------------------------------------------- */

typedef enum held_kind {
    HELD_SIGNAL,
    HELD_WAIT,
    HELD_TASK,
    HELD_RECORD,
    HELD_SYNC,
    HELD_ENQUEUE,
} held_kind_t;

typedef struct held_op {
    hal_lane_op_t base; /* first */
    cuda_stream_t *s;
    held_kind_t kind;
    int stage;
    uint64_t seq;  /* the op's point (a task: the point before it) */
    uint64_t need; /* a task: the progress it waits for */
    ordo_event_t *event;
    uint64_t generation;
    ordo_host_fn fn;
    ordo_cuda_enqueue_fn enqueue;
    void *ctx;
    int always; /* an enqueue that runs even on a failed or destroyed stream */
} held_op_t;

static const char *held_api(held_kind_t kind) {
    switch (kind) {
    case HELD_SIGNAL:
        return "ordo_stream_signal";
    case HELD_WAIT:
        return "ordo_stream_wait";
    case HELD_TASK:
        return "ordo_stream_host_task";
    case HELD_RECORD:
        return "ordo_event_record";
    case HELD_SYNC:
        return "ordo_stream_synchronize";
    case HELD_ENQUEUE:
        return "ordo_cuda_stream_enqueue";
    }
    return "ordo_stream";
}

/* A device error while issuing: the stream fails now, with the error's
 * message (points issued before are reported failed too: the device is
 * broken). */
static void lane_fail(cuda_stream_t *s, ordo_status_t st) {
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    snprintf(message, sizeof message, "%s", ordo_error_message());
    ordo__hal_timeline_fail(&s->timeline, st, message);
}

/* After a direct issue failed (outside the lane's lock): a device error
 * (sticky in CUDA) leaves the stream unusable, so it fails now and later
 * submissions get the failure at once; other errors (out of memory) only
 * refuse the one submission, as on the CPU backend. */
static void issue_failed(cuda_stream_t *s, ordo_status_t st) {
    if (st == ORDO_ERR_DEVICE) {
        lane_fail(s, st);
    }
}

static hal_lane_step_t held_task(held_op_t *op, int cancelled, ordo_signal_point_t *out_wait) {
    cuda_stream_t *s = op->s;
    if (cancelled || ordo__hal_timeline_failed(&s->timeline, NULL, NULL)) {
        return HAL_LANE_DONE;
    }
    if (op->stage == 0) {
        op->stage = 1;
        if (s->chain && s->chain_idle == s->lane.idle_count) {
            /* The previous op was a host task and nothing reached the
             * device since: its end is this task's start. */
            op->need = op->seq - 1;
        } else {
            ordo_status_t st = issue_point(s, op->seq, NULL, 0, NULL, 0, "ordo_stream_host_task");
            if (st != ORDO_OK) {
                lane_fail(s, st);
                return HAL_LANE_DONE;
            }
            op->need = op->seq;
        }
    }
    uint64_t reached = ordo__signal_reached(s->timeline.progress);
    if (reached < op->need) {
        *out_wait = (ordo_signal_point_t){s->timeline.progress, op->need};
        return HAL_LANE_BLOCKED;
    }
    uint64_t messages = ordo__error_count();
    ordo_status_t st = op->fn(op->ctx);
    if (st != ORDO_OK) {
        char what[ORDO_SIGNAL_MESSAGE_MAX];
        st = ordo__hal_host_task_failure(what, sizeof what, op->seq + 1, st,
                                         ordo__error_count() != messages);
        ordo__hal_timeline_fail(&s->timeline, st, what);
        return HAL_LANE_DONE;
    }
    /* Nothing after the task has been issued: the progress is the lane's
     * to move. */
    (void)ordo_signal_advance(s->timeline.progress, op->seq + 1);
    s->chain = 1;
    s->chain_idle = s->lane.idle_count;
    return HAL_LANE_DONE;
}

static hal_lane_step_t held_run(hal_lane_op_t *base, int cancelled, ordo_signal_point_t *out_wait) {
    held_op_t *op = (held_op_t *)base;
    cuda_stream_t *s = op->s;
    const char *api = held_api(op->kind);
    /* The op before may have been a host task or an enqueued function
     * that left another context current (or none) on this thread: every
     * op starts with the device's context bound again, or fails the
     * stream if it cannot be. */
    ordo_status_t entered = ordo__cuda_enter(s->dev, api);
    if (entered != ORDO_OK) {
        lane_fail(s, entered);
    }
    ordo_status_t failure = ORDO_OK;
    const char *message = NULL;
    int failed = ordo__hal_timeline_failed(&s->timeline, &failure, &message);
    ordo_status_t st = ORDO_OK;
    switch (op->kind) {
    case HELD_TASK:
        return held_task(op, cancelled, out_wait);
    case HELD_SIGNAL:
        if (cancelled) {
            fail_point(base->signal, base->value, ORDO_ERR_CANCELLED,
                       "the stream was destroyed with work pending");
        } else if (failed) {
            fail_point(base->signal, base->value, failure, message);
        } else if ((st = issue_point(s, op->seq, base->signal, base->value, NULL, 0, api)) !=
                   ORDO_OK) {
            lane_fail(s, st);
            fail_point(base->signal, base->value, st, "the stream failed to issue the point");
        }
        return HAL_LANE_DONE;
    case HELD_RECORD:
        if (cancelled || failed ||
            (st = issue_point(s, op->seq, NULL, 0, op->event, op->generation, api)) != ORDO_OK) {
            if (st != ORDO_OK) {
                lane_fail(s, st);
            }
            ordo__hal_event_record_reached(op->event, op->generation, 0);
        }
        return HAL_LANE_DONE;
    case HELD_SYNC:
        if (!cancelled && !failed &&
            (st = issue_point(s, op->seq, NULL, 0, NULL, 0, api)) != ORDO_OK) {
            lane_fail(s, st);
        }
        return HAL_LANE_DONE;
    case HELD_WAIT: {
        if (cancelled || failed) {
            return HAL_LANE_DONE;
        }
        int hold = 0;
        if ((st = wait_try(s, base->signal, base->value, &hold, api)) != ORDO_OK) {
            lane_fail(s, st);
            return HAL_LANE_DONE;
        }
        if (hold) {
            *out_wait = (ordo_signal_point_t){base->signal, base->value};
            return HAL_LANE_BLOCKED;
        }
        return HAL_LANE_DONE;
    }
    case HELD_ENQUEUE:
        if (op->always || (!cancelled && !failed)) {
            s->chain = 0;
            if ((st = op->enqueue(op->ctx, s->cu)) != ORDO_OK) {
                char what[ORDO_SIGNAL_MESSAGE_MAX];
                snprintf(what, sizeof what, "an enqueued function returned %s",
                         ordo_status_name(st));
                (void)ordo__hal_timeline_push_failure(
                    &s->timeline, ordo_status_is_error(st) ? st : ORDO_ERR_ABORTED, what);
            }
        }
        return HAL_LANE_DONE;
    }
    return HAL_LANE_DONE;
}

static held_op_t *held_make(cuda_stream_t *s, held_kind_t kind, int lane_kind, const char *api) {
    held_op_t *op = ordo__alloc(sizeof *op, 0);
    if (!op) {
        (void)ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a held stream operation");
        return NULL;
    }
    op->base.size = sizeof *op;
    op->base.kind = lane_kind;
    op->base.run = held_run;
    op->s = s;
    op->kind = kind;
    return op;
}

/* Queues op on the lane (lock held); frees it if that fails. */
static ordo_status_t held_push(cuda_stream_t *s, held_op_t *op, const char *api) {
    ordo_status_t st = ordo__hal_lane_push_locked(&s->lane, &op->base, api);
    if (st != ORDO_OK) {
        if (op->base.signal) {
            ordo__signal_release_internal(op->base.signal);
        }
        ordo__dealloc(op, sizeof *op, 0);
    }
    return st;
}

/* A held point on signal (a signal or a wait): the op holds a reference on
 * the signal until it has run. */
static ordo_status_t held_point(cuda_stream_t *s, held_kind_t kind, ordo_signal_t *signal,
                                uint64_t value, uint64_t seq, const char *api) {
    held_op_t *op = held_make(s, kind, kind == HELD_SIGNAL ? HAL_LANE_SIGNAL : HAL_LANE_WAIT, api);
    if (!op) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    ordo__signal_retain_internal(signal);
    op->base.signal = signal;
    op->base.value = value;
    op->base.seq = seq;
    op->seq = kind == HELD_SIGNAL ? seq : 0;
    return held_push(s, op, api);
}

/* ---- the backend entry points ----------------------------------------------- */

/* The prologue of a call that issues work: the stream has not failed, and
 * the device's context is current on the calling thread. */
static ordo_status_t stream_enter(cuda_stream_t *s, const char *api) {
    ordo_status_t st = stream_failure(s, api);
    return st == ORDO_OK ? ordo__cuda_enter(s->dev, api) : st;
}

static void lane_thread_start(void *user) {
    (void)ordo__cuda_enter(user, "the CUDA host lane");
}

ordo_status_t ordo__cuda_stream_init(ordo_stream_t *stream) {
    static const char api[] = "ordo_stream_create";
    cuda_device_t *d = stream->device->impl;
    ordo_status_t st = ordo__cuda_enter(d, api);
    if (st != ORDO_OK) {
        return st;
    }
    cuda_stream_t *s = ordo__alloc(sizeof *s, 64);
    if (!s) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a CUDA stream");
    }
    s->shell = stream;
    s->dev = d;
    CUresult r = d->cu->StreamCreateWithPriority(&s->cu, CU_STREAM_NON_BLOCKING, stream->priority);
    if (r != CUDA_SUCCESS) {
        ordo__dealloc(s, sizeof *s, 64);
        return ordo__cuda_error(r, api, "cuStreamCreateWithPriority");
    }
    if (d->observe_memops) {
        void *word = NULL;
        r = d->cu->MemHostAlloc(&word, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP);
        if (r == CUDA_SUCCESS) {
            s->word = word;
            atomic_init(s->word, 0);
            r = d->cu->MemHostGetDevicePointer(&s->word_device, word, 0);
        }
        if (r != CUDA_SUCCESS) {
            st = ordo__cuda_error(r, api, "cannot map the stream's progress word");
            goto fail;
        }
    }
    char name[ORDO_SIGNAL_NAME_MAX];
    snprintf(name, sizeof name, "progress of stream %p", (void *)stream);
    if ((st = ordo__hal_timeline_init(&s->timeline, &d->watcher, s, name, api)) != ORDO_OK) {
        goto fail;
    }
    s->timeline_ready = 1;
    if ((st = ordo__hal_lane_init(&s->lane, d->watcher.registered, lane_thread_start, d, api)) !=
        ORDO_OK) {
        goto fail;
    }
    s->lane_ready = 1;
    stream->impl = s;
    return ORDO_OK;
fail:
    if (s->timeline_ready) {
        ordo__hal_timeline_fini(&s->timeline, ORDO_DEADLINE_NOW, 0, ORDO_ERR_CANCELLED, "");
    }
    if (s->word) {
        (void)d->cu->MemFreeHost((void *)s->word);
    }
    (void)d->cu->StreamDestroy(s->cu);
    ordo__dealloc(s, sizeof *s, 64);
    return st;
}

/* The stream's host lane runs its host tasks; the device's completion
 * thread runs signal callbacks and is waited for by ordo__hal_timeline_fini. */
int ordo__cuda_stream_on_own_thread(const ordo_stream_t *stream) {
    const cuda_stream_t *s = stream->impl;
    return ordo__hal_lane_is_current(&s->lane) || ordo__hal_watcher_is_current(&s->dev->watcher);
}

/* The progress word goes back once the device has made its last write
 * to it. Work still pending on the destroyed stream (past the drain, or
 * after a failure the host saw first) may write it later: a free now would
 * let the device write through a freed mapping, so the word is kept until
 * the device is released. */
static void word_release(cuda_device_t *d, cuda_stream_t *s) {
    if (atomic_load_explicit(s->word, memory_order_acquire) >= s->word_last) {
        (void)d->cu->MemFreeHost((void *)s->word);
        return;
    }
    cuda_orphan_word_t *orphan = ordo__alloc(sizeof *orphan, 0);
    if (!orphan) {
        return; /* leaked rather than freed under the device */
    }
    orphan->word = (void *)s->word;
    pthread_mutex_lock(&d->aligned_lock);
    orphan->next = d->orphans;
    d->orphans = orphan;
    pthread_mutex_unlock(&d->aligned_lock);
}

void ordo__cuda_stream_fini(ordo_stream_t *stream) {
    static const char why[] = "the stream was destroyed with work pending";
    cuda_stream_t *s = stream->impl;
    cuda_device_t *d = s->dev;
    (void)ordo__cuda_enter(d, "ordo_stream_destroy");
    /* Held work is dropped (its signal points fail as cancelled); a host
     * task already running returns first. */
    ordo__hal_lane_fini(&s->lane);
    /* What reached the device runs there regardless: give it a moment to
     * be reported reached, then call the rest cancelled. */
    ordo__hal_timeline_fini(&s->timeline, ordo_deadline_after_ms(CUDA_DESTROY_DRAIN_MS),
                            s->reserved, ORDO_ERR_CANCELLED, why);
    /* Returns at once; the driver frees the stream when its work is done. */
    (void)d->cu->StreamDestroy(s->cu);
    if (s->word) {
        word_release(d, s);
    }
    ordo__dealloc(s, sizeof *s, 64);
    stream->impl = NULL;
}

ordo_status_t ordo__cuda_stream_host_task(ordo_stream_t *stream, ordo_host_fn fn, void *ctx) {
    static const char api[] = "ordo_stream_host_task";
    if (ORDO_UNLIKELY(ordo__cuda_capturing)) {
        return ordo__cuda_capture_refuse(api);
    }
    cuda_stream_t *s = stream->impl;
    ordo_status_t st = stream_failure(s, api);
    if (ORDO_UNLIKELY(st != ORDO_OK)) {
        return st;
    }
    held_op_t *op = held_make(s, HELD_TASK, HAL_LANE_OTHER, api);
    if (!op) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    op->fn = fn;
    op->ctx = ctx;
    hal_lane_lock(&s->lane);
    op->seq = s->reserved + 1;
    op->base.seq = op->seq;
    st = held_push(s, op, api);
    if (st == ORDO_OK) {
        s->reserved += 2;
    }
    hal_lane_unlock(&s->lane);
    return st;
}

ordo_status_t ordo__cuda_stream_signal(ordo_stream_t *stream, ordo_signal_t *signal,
                                       uint64_t value) {
    static const char api[] = "ordo_stream_signal";
    if (ORDO_UNLIKELY(ordo__cuda_capturing)) {
        return ordo__cuda_capture_refuse(api);
    }
    cuda_stream_t *s = stream->impl;
    ordo_status_t st = stream_enter(s, api);
    if (st != ORDO_OK) {
        /* Nobody may wait for a point this stream will never reach. */
        const char *message = NULL;
        ordo_status_t failure = st;
        (void)ordo__hal_timeline_failed(&s->timeline, &failure, &message);
        fail_point(signal, value, failure, message ? message : ordo_error_message());
        return st;
    }
    hal_lane_lock(&s->lane);
    uint64_t seq = s->reserved + 1;
    if (!hal_lane_holding_locked(&s->lane)) {
        st = issue_point(s, seq, signal, value, NULL, 0, api);
    } else {
        st = held_point(s, HELD_SIGNAL, signal, value, seq, api);
    }
    if (st == ORDO_OK) {
        s->reserved = seq;
    }
    hal_lane_unlock(&s->lane);
    if (st == ORDO_ERR_DEVICE) {
        issue_failed(s, st);
        fail_point(signal, value, st, ordo__signal_failure_message(s->timeline.progress));
    }
    return st;
}

ordo_status_t ordo__cuda_stream_wait(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value) {
    static const char api[] = "ordo_stream_wait";
    if (ORDO_UNLIKELY(ordo__cuda_capturing)) {
        return ordo__cuda_capture_refuse(api);
    }
    cuda_stream_t *s = stream->impl;
    ordo_status_t st = stream_enter(s, api);
    if (st != ORDO_OK) {
        return st;
    }
    hal_lane_lock(&s->lane);
    int hold = 1;
    if (!hal_lane_holding_locked(&s->lane)) {
        st = wait_try(s, signal, value, &hold, api);
    }
    if (st == ORDO_OK && hold) {
        /* Waits have no point; for stall reports the stream has run
         * everything before it when its progress is at seq - 1. */
        st = held_point(s, HELD_WAIT, signal, value, s->reserved + 1, api);
    }
    hal_lane_unlock(&s->lane);
    issue_failed(s, st);
    return st;
}

ordo_status_t ordo__cuda_stream_synchronize(ordo_stream_t *stream, ordo_deadline_t deadline) {
    static const char api[] = "ordo_stream_synchronize";
    if (ORDO_UNLIKELY(ordo__cuda_capturing)) {
        return ordo__cuda_capture_refuse(api);
    }
    cuda_stream_t *s = stream->impl;
    ordo_status_t st = stream_enter(s, api);
    if (st != ORDO_OK) {
        return st;
    }
    /* A point after everything submitted so far, raw device work included. */
    hal_lane_lock(&s->lane);
    uint64_t seq = s->reserved + 1;
    if (!hal_lane_holding_locked(&s->lane)) {
        st = issue_point(s, seq, NULL, 0, NULL, 0, api);
    } else {
        held_op_t *op = held_make(s, HELD_SYNC, HAL_LANE_OTHER, api);
        if (!op) {
            st = ORDO_ERR_OUT_OF_MEMORY;
        } else {
            op->seq = seq;
            op->base.seq = seq;
            st = held_push(s, op, api);
        }
    }
    if (st == ORDO_OK) {
        s->reserved = seq;
    }
    hal_lane_unlock(&s->lane);
    if (st != ORDO_OK) {
        issue_failed(s, st);
        return st;
    }
    st = ordo_signal_wait(s->timeline.progress, seq, deadline);
    if (st != ORDO_OK && st != ORDO_ERR_TIMEOUT) {
        return ordo__error(st, api, HAL_STREAM_FAILED_TEXT "%s",
                           ordo__signal_failure_message(s->timeline.progress));
    }
    return st == ORDO_OK ? st : ordo__error_as(st, api);
}

ordo_status_t ordo__cuda_stream_status(ordo_stream_t *stream) {
    return stream_failure(stream->impl, "ordo_stream_status");
}

ordo_status_t ordo__cuda_stream_failure(const ordo_stream_t *stream) {
    const cuda_stream_t *s = stream->impl;
    ordo_status_t st = ORDO_OK;
    return ordo__hal_timeline_failed(&s->timeline, &st, NULL) ? st : ORDO_OK;
}

ordo_status_t ordo__cuda_stream_event_record(ordo_event_t *event, ordo_stream_t *stream) {
    static const char api[] = "ordo_event_record";
    if (ORDO_UNLIKELY(ordo__cuda_capturing)) {
        return ordo__cuda_capture_refuse(api);
    }
    cuda_stream_t *s = stream->impl;
    ordo_status_t st = stream_enter(s, api);
    if (st != ORDO_OK) {
        return st;
    }
    uint64_t generation = ordo__hal_event_record_begin(event);
    hal_lane_lock(&s->lane);
    uint64_t seq = s->reserved + 1;
    uint64_t old_point = event->point;
    /* The point is published before the watcher can complete it. */
    event->point = seq;
    if (!hal_lane_holding_locked(&s->lane)) {
        st = issue_point(s, seq, NULL, 0, event, generation, api);
    } else {
        held_op_t *op = held_make(s, HELD_RECORD, HAL_LANE_OTHER, api);
        if (!op) {
            st = ORDO_ERR_OUT_OF_MEMORY;
        } else {
            op->seq = seq;
            op->base.seq = seq;
            op->event = event;
            op->generation = generation;
            st = held_push(s, op, api);
        }
    }
    if (st == ORDO_OK) {
        s->reserved = seq;
        if (event->timeline != s->timeline.progress) {
            if (event->timeline) {
                ordo__signal_release_internal(event->timeline);
            }
            ordo__signal_retain_internal(s->timeline.progress);
            event->timeline = s->timeline.progress;
        }
    } else {
        event->point = old_point;
    }
    hal_lane_unlock(&s->lane);
    if (st != ORDO_OK) {
        ordo__hal_event_record_abort(event, generation);
        issue_failed(s, st);
    }
    return st;
}

/* reserved: a held op allocated ahead (ordo__cuda_stream_reserve), taken
 * in every case, for an always enqueue that must not fail for memory. */
static ordo_status_t enqueue(cuda_stream_t *s, ordo_cuda_enqueue_fn fn, void *ctx, int always,
                             held_op_t *reserved, const char *api) {
    if (ORDO_UNLIKELY(ordo__cuda_capturing) && !reserved) {
        /* A launch function being captured: its stream's work goes to the
         * capture, any other stream's is refused (cuda_graph.c). */
        CUstream capture = ordo__cuda_capture_stream(s);
        if (!capture || always) { /* always: a free, which must run once */
            return ordo__cuda_capture_refuse(api);
        }
        ordo_status_t st = fn(ctx, capture);
        if (st != ORDO_OK) {
            return ordo__error(ordo_status_is_error(st) ? st : ORDO_ERR_ABORTED, api,
                               "the enqueued function returned %s", ordo_status_name(st));
        }
        return ORDO_OK;
    }
    ordo_status_t st = always ? ORDO_OK : stream_failure(s, api);
    if (st == ORDO_OK) {
        /* With a reservation, a held enqueue needs no context here (the
         * lane makes it current): only the direct path does, below. */
        st = reserved ? ORDO_OK : ordo__cuda_enter(s->dev, api);
    }
    if (st != ORDO_OK) {
        return st;
    }
    hal_lane_lock(&s->lane);
    if (hal_lane_holding_locked(&s->lane)) {
        held_op_t *op = reserved ? reserved : held_make(s, HELD_ENQUEUE, HAL_LANE_OTHER, api);
        st = op ? ORDO_OK : ORDO_ERR_OUT_OF_MEMORY;
        if (op) {
            op->enqueue = fn;
            op->ctx = ctx;
            op->always = always;
            st = held_push(s, op, api); /* fails only if the lane's thread cannot start */
        }
        hal_lane_unlock(&s->lane);
        return st;
    }
    if (reserved) {
        ordo__dealloc(reserved, sizeof *reserved, 0);
        if ((st = ordo__cuda_enter(s->dev, api)) != ORDO_OK) {
            hal_lane_unlock(&s->lane);
            return st; /* nothing held: fn had nothing to follow */
        }
    }
    /* User code runs unlocked; meanwhile other submissions queue behind
     * it on the lane. */
    hal_lane_begin_direct_locked(&s->lane);
    s->chain = 0;
    hal_lane_unlock(&s->lane);
    st = fn(ctx, s->cu);
    if (st != ORDO_OK) {
        char what[ORDO_SIGNAL_MESSAGE_MAX];
        snprintf(what, sizeof what, "an enqueued function returned %s", ordo_status_name(st));
        (void)ordo__hal_timeline_push_failure(
            &s->timeline, ordo_status_is_error(st) ? st : ORDO_ERR_ABORTED, what);
    }
    ordo__hal_lane_end_direct(&s->lane);
    if (st != ORDO_OK) {
        return ordo__error(ordo_status_is_error(st) ? st : ORDO_ERR_ABORTED, api,
                           "the enqueued function returned %s", ordo_status_name(st));
    }
    return ORDO_OK;
}

ordo_status_t ordo__cuda_stream_enqueue(cuda_stream_t *s, ordo_cuda_enqueue_fn fn, void *ctx,
                                        const char *api) {
    return enqueue(s, fn, ctx, 0, NULL, api);
}

ordo_status_t ordo__cuda_stream_enqueue_always(cuda_stream_t *s, ordo_cuda_enqueue_fn fn, void *ctx,
                                               const char *api) {
    return enqueue(s, fn, ctx, 1, NULL, api);
}

ordo_status_t ordo__cuda_stream_run_if_idle(cuda_stream_t *s, ordo_cuda_enqueue_fn fn, void *ctx,
                                            int *out_ran) {
    *out_ran = 0;
    hal_lane_lock(&s->lane);
    if (hal_lane_holding_locked(&s->lane)) {
        hal_lane_unlock(&s->lane);
        return ORDO_OK;
    }
    hal_lane_begin_direct_locked(&s->lane);
    hal_lane_unlock(&s->lane);
    ordo_status_t st = fn(ctx, s->cu);
    ordo__hal_lane_end_direct(&s->lane);
    *out_ran = 1;
    return st;
}

int ordo__cuda_stream_holding(ordo_stream_t *stream) {
    cuda_stream_t *s = stream->impl;
    hal_lane_lock(&s->lane);
    int holding = hal_lane_holding_locked(&s->lane);
    hal_lane_unlock(&s->lane);
    return holding;
}

int ordo__cuda_stream_waits_unmet(ordo_stream_t *stream) {
    cuda_stream_t *s = stream->impl;
    return ordo__hal_lane_waits_unmet(&s->lane);
}

void *ordo__cuda_stream_reserve(cuda_stream_t *s, const char *api) {
    return held_make(s, HELD_ENQUEUE, HAL_LANE_OTHER, api);
}

void ordo__cuda_stream_unreserve(void *reserved) {
    held_op_t *op = reserved;
    ordo__dealloc(op, sizeof *op, 0);
}

ordo_status_t ordo__cuda_stream_enqueue_reserved(cuda_stream_t *s, void *reserved,
                                                 ordo_cuda_enqueue_fn fn, void *ctx,
                                                 const char *api) {
    return enqueue(s, fn, ctx, 1, reserved, api);
}

void ordo__cuda_stream_snapshot(ordo_stream_t *stream, hal_stream_snapshot_t *snapshot) {
    cuda_stream_t *s = stream->impl;
    snapshot->count = 0;
    snapshot->truncated = 0;
    snapshot->in_wait = 0;
    ordo__signal_retain_internal(s->timeline.progress);
    snapshot->progress = s->timeline.progress;
    /* Issued points first (they precede everything held), then the held
     * waits and signals in order. */
    size_t issued = ordo__hal_timeline_snapshot(&s->timeline, snapshot->ops, snapshot->capacity);
    size_t first = issued < snapshot->capacity ? issued : snapshot->capacity;
    int in_wait = 0;
    size_t held = ordo__hal_lane_snapshot(&s->lane, snapshot->ops + first,
                                          snapshot->capacity - first, &in_wait);
    size_t second = held < snapshot->capacity - first ? held : snapshot->capacity - first;
    snapshot->count = first + second;
    snapshot->truncated = issued + held > snapshot->capacity;
    hal_lane_lock(&s->lane);
    snapshot->submitted = s->reserved;
    hal_lane_unlock(&s->lane);
    signal_view_t progress = ordo__signal_view(s->timeline.progress);
    snapshot->completed = progress.value;
    snapshot->status = progress.failed ? ordo__signal_failure(s->timeline.progress, NULL) : ORDO_OK;
    /* Blocked: nothing issued is pending, and the lane waits on the host. */
    snapshot->in_wait = in_wait && issued == 0 && !progress.failed;
}
