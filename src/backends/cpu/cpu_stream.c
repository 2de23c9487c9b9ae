/* CPU streams: each stream is an in-order worker thread.
 *
 * Submission: producers serialise on the wakers' lock of the stream's parker
 * (`parker`, base/parker.h), take the
 * next node of the current slab, number it and link it at the tail; the
 * worker follows the links without any lock. Nodes fill a slab in order and
 * are run in order, so when the worker steps from one slab into the next,
 * the whole slab it left is finished: it hands the slab back to producers
 * through a stack that is only ever pushed to and emptied whole (no ABA).
 * The worker never writes to a node, so node memory only travels one way
 * between the cores.
 *
 * Idle worker: it polls briefly, then parks on the parker. The producers'
 * lock is the parker's own, so taking it is the wake-up's RMW and a
 * producer learns from its locking CAS whether the worker sleeps: it pays
 * no atomic operation beyond the lock for the wake-up (parker.h proves
 * that no node is missed).
 *
 * Progress is published on `done`, a timeline signal: after each op the
 * worker raises it to the op's number; a failure of the stream is a
 * failure of `done`, which every event and synchronize on the stream sees.
 *
 * Snapshots (stall reports): under the producers' lock no slab can be
 * recycled, so a reader may walk from the worker's head to the tail while
 * the worker keeps running; each node carries the low bits of its number.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "backends/cpu/cpu_stream.h"
#include "base/alloc.h"
#include "base/error.h"
#include "base/futex.h"
#include "base/parker.h"
#include "base/trace.h"
#include "sync/signal_access.h"

/* How long an idle worker keeps polling before it sleeps. */
#define IDLE_SPIN_NS 5000u
/* A slab is 16 KiB, aligned to its size so a node finds its slab by
 * masking: a 64-byte header and 510 nodes of 32 bytes. */
#define SLAB_BYTES 16384u
#define SLAB_NODES 510
/* The most queued nodes a stall snapshot walks under the producers' lock
 * (a few milliseconds of the producers' time): a queue longer than that
 * is seen in part (ordo/stall.h). */
#define SNAPSHOT_WALK_MAX (1u << 20)

typedef enum op_kind { OP_TASK, OP_SIGNAL, OP_WAIT, OP_RECORD } op_kind_t;

typedef struct cpu_op {
    _Atomic(struct cpu_op *) next;
    op_kind_t kind;
    /* The low 32 bits of the op's number (in the padding): a snapshot
     * rebuilds the number from `submitted` without counting nodes. */
    uint32_t seq32;
    union {
        struct {
            ordo_host_fn fn;
            void *ctx;
        } task;
        struct {
            ordo_signal_t *signal; /* retained until the op has run */
            uint64_t value;
        } point;
        struct {
            ordo_event_t *event;
            uint64_t generation;
        } record;
    } u;
} cpu_op_t;

typedef struct cpu_slab {
    _Alignas(64) struct cpu_slab *next_free; /* on a free stack */
    struct cpu_slab *next_all;               /* every slab of the stream */
    cpu_op_t nodes[SLAB_NODES];
} cpu_slab_t;

_Static_assert(sizeof(cpu_op_t) == 32, "two nodes to a cache line");
_Static_assert(sizeof(cpu_slab_t) == SLAB_BYTES, "a slab fills its alignment");

static cpu_slab_t *slab_of(const cpu_op_t *node) {
    return (cpu_slab_t *)((uintptr_t)node & ~(uintptr_t)(SLAB_BYTES - 1));
}

typedef struct cpu_stream {
    /* Producers' side; "locked": under the wakers' lock of parker. */
    ordo_parker_t parker;       /* the worker sleeps on it */
    cpu_op_t *tail;             /* locked */
    cpu_slab_t *slab;           /* locked: the slab being filled */
    size_t slab_used;           /* locked: its nodes taken */
    cpu_slab_t *spare;          /* locked: finished slabs to reuse */
    cpu_slab_t *all;            /* locked: every slab, for destroy */
    _Atomic uint64_t submitted; /* written locked */
    /* Set once the stream has failed (fail_stream: just before `done`
     * fails). Producers read this, not `done`, whose line the worker
     * writes after every op. */
    _Atomic int failed;
    /* The last node the worker ran. Only the worker writes it; it is
     * atomic so a snapshot may read it under the producers' lock, where no
     * node can be recycled. */
    _Alignas(64) _Atomic(cpu_op_t *) head;
    /* Snapshots walking the queue now. A snapshot retains the signals of
     * the nodes it finds past head, and the worker drops an op's reference
     * to its signal only after it has moved head past the node and seen
     * no snapshot, or waited one out (see ordo__cpu_stream_snapshot). */
    _Atomic uint32_t snapshots;
    _Atomic(cpu_slab_t *) returned; /* slabs the worker has finished */
    ordo_signal_t *done;
    ordo_signal_t *cancel;
    _Atomic int stopping;
    pthread_t worker;
    int priority;
    ordo_stream_t *shell;            /* the public stream: its trace track */
    uint32_t ordo__trace_generation; /* the trace its track was last named in */
} cpu_stream_t;

/* ---- submission ----------------------------------------------------- */

static uint64_t lock_acquire(cpu_stream_t *s) {
    return ordo__parker_lock(&s->parker);
}

/* Unlocks, and wakes the worker if it sleeps. */
static void lock_release(cpu_stream_t *s, uint64_t seen) {
    ordo__parker_unlock(&s->parker, seen, ORDO_PARK_ANY);
}

static cpu_op_t *node_take_locked(cpu_stream_t *s) {
    if (!s->slab || s->slab_used == SLAB_NODES) {
        if (!s->spare) {
            s->spare = atomic_exchange_explicit(&s->returned, NULL, memory_order_acquire);
        }
        cpu_slab_t *slab = s->spare;
        if (slab) {
            s->spare = slab->next_free;
        } else {
            slab = ordo__alloc(sizeof *slab, SLAB_BYTES);
            if (!slab) {
                return NULL;
            }
            slab->next_all = s->all;
            s->all = slab;
        }
        s->slab = slab;
        s->slab_used = 0;
    }
    return &s->slab->nodes[s->slab_used++];
}

/* The stream's failure status and message; ORDO_OK while healthy. */
static ordo_status_t failure_of(const cpu_stream_t *s, const char **out_message) {
    if (ORDO_LIKELY(!atomic_load_explicit(&s->failed, memory_order_relaxed))) {
        return ORDO_OK;
    }
    if (!ordo__signal_view(s->done).failed) {
        return ORDO_OK; /* failing: fail_stream has not failed `done` yet */
    }
    return ordo__signal_failure(s->done, out_message);
}

static ordo_status_t stream_failure(cpu_stream_t *s, const char *api) {
    const char *message = NULL;
    ordo_status_t failure = failure_of(s, &message);
    if (ORDO_LIKELY(failure == ORDO_OK)) {
        return ORDO_OK;
    }
    return ordo__error(failure, api, HAL_STREAM_FAILED_TEXT "%s", message);
}

/* Appends op to the stream; for a record, also publishes the event's
 * point under the lock, before the worker can reach it. */
static ordo_status_t submit(cpu_stream_t *s, const cpu_op_t *op, ordo_event_t *record,
                            const char *api) {
    uint64_t seen = lock_acquire(s);
    cpu_op_t *node = node_take_locked(s);
    if (!node) {
        lock_release(s, seen);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a stream operation");
    }
    *node = *op;
    atomic_init(&node->next, NULL);
    /* Ops are numbered in link order; the worker counts them the same
     * way, so only a snapshot needs the (truncated) number in the node. */
    uint64_t seq = atomic_load_explicit(&s->submitted, memory_order_relaxed) + 1;
    node->seq32 = (uint32_t)seq;
    atomic_store_explicit(&s->submitted, seq, memory_order_release);
    if (record) {
        record->point = seq;
    }
    atomic_store_explicit(&s->tail->next, node, memory_order_release);
    s->tail = node;
    lock_release(s, seen);
    return ORDO_OK;
}

/* ---- the worker ------------------------------------------------------- */

/* `failed` first: whoever sees `done` fail (a synchronize returning the
 * failure) must then also see the stream report it (ordo_stream_status),
 * or code that checks a stream's health after syncing with it would take a
 * failed stream for a healthy one. */
static void fail_stream(cpu_stream_t *s, ordo_status_t status, const char *what) {
    atomic_store_explicit(&s->failed, 1, memory_order_release);
    (void)ordo_signal_fail(s->done, status, what);
}

/* Records the op just run (started at `start`, in trace ticks; its signal's
 * trace id read before the op released the signal) on the stream's track,
 * naming the track first in a new trace. */
static void trace_op(cpu_stream_t *s, const cpu_op_t *op, uint64_t start, uint64_t signal_id) {
    uint32_t generation = ordo__trace_generation();
    if (s->ordo__trace_generation != generation) {
        trace_event_t track = {start,
                               (uint64_t)(int64_t)s->priority,
                               (const void *)s->shell->trace_track,
                               NULL,
                               0,
                               0,
                               TRACE_TRACK,
                               0};
        memcpy(&track.a, s->shell->device->info.name, 8); /* 16 bytes of the name */
        memcpy(&track.b, s->shell->device->info.name + 8, 8);
        /* The stream's own name, if any, in parts before the track. */
        _Static_assert(TRACE_TRACK_NAME_BYTES == ORDO_STREAM_NAME_MAX, "a track's name");
        char name[ORDO_STREAM_NAME_MAX];
        ordo__hal_stream_own_name(s->shell, name);
        for (uint64_t at = 0; name[0] && at < sizeof name; at += 16) {
            trace_event_t part = track;
            part.kind = TRACE_TRACK_NAME;
            part.dur = at;
            memcpy(&part.a, name + at, 8);
            memcpy(&part.b, name + at + 8, 8);
            (void)ordo__trace_record(&part);
        }
        /* Named once the name is really in this trace (a record made
         * while a start is half done is dropped). */
        if (ordo__trace_record(&track)) {
            s->ordo__trace_generation = generation;
        }
    }
    trace_event_t e = {
        start, trace_now() - start, (const void *)s->shell->trace_track, NULL, 0, 0, TRACE_SLICE,
        0};
    switch (op->kind) {
    case OP_TASK:
        e.name = "host task";
        break;
    case OP_SIGNAL:
        e.kind = TRACE_SIGNAL;
        e.a = signal_id;
        e.b = op->u.point.value;
        break;
    case OP_WAIT:
        e.kind = TRACE_WAIT;
        e.a = signal_id;
        e.b = op->u.point.value;
        break;
    case OP_RECORD:
        e.name = "event record";
        break;
    }
    ordo__trace_record(&e);
}

/* Runs op; returns the signal whose reference it held (a signal or wait
 * op), for the worker to release once head is past the node (NULL: none). */
static ordo_signal_t *run_op(cpu_stream_t *s, cpu_op_t *op, uint64_t seq) {
    uint64_t trace_start = trace_on() ? trace_now() : 0;
    /* The op may hold the last reference to its signal: read it first. */
    uint64_t trace_signal = trace_start && (op->kind == OP_SIGNAL || op->kind == OP_WAIT)
                                ? ordo__signal_trace_id(op->u.point.signal)
                                : 0;
    bool failed = ordo__signal_view(s->done).failed;
    ordo_signal_t *held = NULL;
    switch (op->kind) {
    case OP_TASK:
        if (!failed) {
            uint64_t messages = ordo__error_count();
            ordo_status_t st = op->u.task.fn(op->u.task.ctx);
            if (st != ORDO_OK) {
                char what[ORDO_SIGNAL_MESSAGE_MAX];
                st = ordo__hal_host_task_failure(what, sizeof what, seq, st,
                                                 ordo__error_count() != messages);
                fail_stream(s, st, what);
            }
        }
        break;
    case OP_SIGNAL:
        if (failed) {
            /* A point the stream will never reach: its waiters get the
             * stream's failure instead of hanging (unless another producer
             * has reached it already: then nobody waits for it). */
            uint64_t value = 0;
            if (ordo_signal_query(op->u.point.signal, &value) != ORDO_OK ||
                value < op->u.point.value) {
                const char *message;
                ordo_status_t failure = ordo__signal_failure(s->done, &message);
                (void)ordo_signal_fail(op->u.point.signal, failure, message);
            }
        } else {
            (void)ordo_signal_advance(op->u.point.signal, op->u.point.value);
        }
        held = op->u.point.signal;
        break;
    case OP_WAIT:
        if (!failed) {
            ordo_signal_point_t points[2] = {{op->u.point.signal, op->u.point.value},
                                             {s->cancel, 1}};
            size_t index = 0;
            ordo_status_t st = ordo_signal_wait_any(points, 2, ORDO_DEADLINE_NEVER, &index);
            if (st == ORDO_ERR_DESTROYED) {
                /* Destroyed before this wait began: reached values stay
                 * reached, anything else can never come. */
                uint64_t value = ordo__signal_reached(op->u.point.signal);
                st = value >= op->u.point.value ? ORDO_OK : ORDO_ERR_CANCELLED;
                index = 0;
            }
            if (index != 1 && st != ORDO_OK) {
                /* A failed signal's message goes on (the CUDA backend's
                 * watcher does the same), so a task's own text reaches
                 * the waiters of streams downstream of it. */
                char what[ORDO_SIGNAL_MESSAGE_MAX];
                fail_stream(s, ordo__signal_wait_ended(op->u.point.signal, what, sizeof what),
                            what);
            }
        }
        held = op->u.point.signal;
        break;
    case OP_RECORD:
        ordo__hal_event_record_reached(op->u.record.event, op->u.record.generation, !failed);
        break;
    }
    /* Publishing the point; after a failure this is a refused no-op. */
    if (trace_start) {
        trace_op(s, op, trace_start, trace_signal);
    }
    (void)ordo_signal_advance(s->done, seq);
    return held;
}

/* Only the worker writes head, so its own loads need no ordering. */
static inline cpu_op_t *worker_head(cpu_stream_t *s) {
    return atomic_load_explicit(&s->head, memory_order_relaxed);
}

static void return_slab(cpu_stream_t *s, cpu_slab_t *slab) {
    cpu_slab_t *top = atomic_load_explicit(&s->returned, memory_order_relaxed);
    do {
        slab->next_free = top;
    } while (!atomic_compare_exchange_weak_explicit(&s->returned, &top, slab, memory_order_release,
                                                    memory_order_relaxed));
}

/* Waits for work (or stopping): polls briefly, then sleeps. */
static void worker_idle(cpu_stream_t *s) {
    uint64_t until = ordo_time_now_ns() + IDLE_SPIN_NS;
    do {
        for (int i = 0; i < 16; ++i) {
            if (atomic_load_explicit(&worker_head(s)->next, memory_order_acquire) ||
                atomic_load_explicit(&s->stopping, memory_order_acquire)) {
                return;
            }
            ordo__cpu_relax();
        }
    } while (ordo_time_now_ns() < until);
    ordo_park_key_t key = ordo__parker_prepare(&s->parker);
    if (!atomic_load_explicit(&worker_head(s)->next, memory_order_acquire) &&
        !atomic_load_explicit(&s->stopping, memory_order_acquire)) {
        (void)ordo__parker_park(&s->parker, key, ORDO_PARK_ANY, ORDO_DEADLINE_NEVER);
    }
}

static void apply_priority(int priority) {
    /* Best effort: a more urgent stream runs at a lower nice value where
     * the process is allowed to set it, relative to the process's main
     * thread. Set for priority 0 too: a thread inherits its creator's
     * nice value, and a stream created from another stream's host task
     * would run at that stream's. */
    errno = 0;
    int base = getpriority(PRIO_PROCESS, (id_t)getpid());
    if (base == -1 && errno != 0) {
        base = 0;
    }
    int nice = base + priority * 5;
    (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid),
                      nice < -20  ? -20
                      : nice > 19 ? 19
                                  : nice);
}

/* The stream whose worker this thread is (NULL elsewhere). */
static _Thread_local const cpu_stream_t *tls_worker_of;

int ordo__cpu_stream_on_own_thread(const ordo_stream_t *stream) {
    return tls_worker_of == stream->impl;
}

static void *worker_main(void *arg) {
    cpu_stream_t *s = arg;
    tls_worker_of = s;
    apply_priority(s->priority);
    uint64_t seq = 0;
    for (;;) {
        cpu_op_t *next = atomic_load_explicit(&worker_head(s)->next, memory_order_acquire);
        if (!next) {
            if (atomic_load_explicit(&s->stopping, memory_order_acquire)) {
                /* Submissions before the destroy are visible now. */
                if (!atomic_load_explicit(&worker_head(s)->next, memory_order_acquire)) {
                    break;
                }
                continue;
            }
            worker_idle(s);
            continue;
        }
        ordo_signal_t *held = run_op(s, next, ++seq);
        cpu_slab_t *left = slab_of(worker_head(s));
        /* Before the slab goes back: a snapshot that finds a recycled slab
         * (through the producers' lock) also sees head past it. */
        if (held) {
            /* The snapshot's side of a store-then-load handshake (Dekker):
             * head past the node, then a look for snapshots. Either this
             * load sees a snapshot's count, and the lock is taken (and
             * given back) once that snapshot has let it go, so its retain
             * came first; or the snapshot's seq_cst load of head, after
             * its count, sees this store and never reaches the node. */
            atomic_store_explicit(&s->head, next, memory_order_seq_cst);
            if (atomic_load_explicit(&s->snapshots, memory_order_seq_cst)) {
                lock_release(s, lock_acquire(s));
            }
            ordo__signal_release_internal(held);
        } else {
            atomic_store_explicit(&s->head, next, memory_order_relaxed);
        }
        if (slab_of(next) != left) {
            return_slab(s, left); /* every node of it has run */
        }
    }
    return NULL;
}

/* ---- the backend entry points ------------------------------------------- */

static void stream_free(cpu_stream_t *s) {
    while (s->all) {
        cpu_slab_t *next = s->all->next_all;
        ordo__dealloc(s->all, sizeof *s->all, SLAB_BYTES);
        s->all = next;
    }
    if (s->done) {
        ordo__signal_release_internal(s->done);
    }
    if (s->cancel) {
        ordo__signal_release_internal(s->cancel);
    }
    ordo__dealloc(s, sizeof *s, 64);
}

ordo_status_t ordo__cpu_stream_init(ordo_stream_t *stream) {
    cpu_stream_t *s = ordo__alloc(sizeof *s, 64);
    cpu_op_t *stub = s ? node_take_locked(s) : NULL;
    if (!stub) {
        if (s) {
            stream_free(s);
        }
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_stream_create",
                           "cannot allocate a CPU stream");
    }
    atomic_init(&s->head, stub);
    s->tail = stub;
    s->priority = stream->priority;
    s->shell = stream;
    if (ordo_signal_create(0, &s->done) != ORDO_OK ||
        ordo_signal_create(0, &s->cancel) != ORDO_OK) {
        stream_free(s);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_stream_create",
                           "cannot create the stream's timelines");
    }
    char name[ORDO_SIGNAL_NAME_MAX];
    snprintf(name, sizeof name, "progress of stream %p", (void *)stream);
    ordo__signal_name_set_internal(s->done, name);
    if (pthread_create(&s->worker, NULL, worker_main, s) != 0) {
        stream_free(s);
        return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, "ordo_stream_create",
                           "cannot start the stream's worker thread");
    }
    stream->impl = s;
    return ORDO_OK;
}

void ordo__cpu_stream_fini(ordo_stream_t *stream) {
    cpu_stream_t *s = stream->impl;
    uint64_t submitted = atomic_load_explicit(&s->submitted, memory_order_acquire);
    /* Read, not queried: a query of a failed timeline records its failure
     * as the thread's message, and the destroy succeeds (ordo/status.h). */
    uint64_t reached = ordo__signal_view(s->done).value;
    if (reached < submitted) {
        /* Work not yet run is dropped; its points fail as cancelled. */
        fail_stream(s, ORDO_ERR_CANCELLED, "the stream was destroyed with work pending");
    }
    atomic_store_explicit(&s->stopping, 1, memory_order_release);
    (void)ordo_signal_advance(s->cancel, 1);
    /* Through the producers' lock, which wakes the worker if it sleeps. */
    lock_release(s, lock_acquire(s));
    pthread_join(s->worker, NULL);
    stream_free(s);
    stream->impl = NULL;
}

ordo_status_t ordo__cpu_stream_host_task(ordo_stream_t *stream, ordo_host_fn fn, void *ctx) {
    cpu_stream_t *s = stream->impl;
    ordo_status_t st = stream_failure(s, "ordo_stream_host_task");
    if (ORDO_UNLIKELY(st != ORDO_OK)) {
        return st;
    }
    cpu_op_t op = {.kind = OP_TASK, .u.task = {fn, ctx}};
    return submit(s, &op, NULL, "ordo_stream_host_task");
}

/* Enqueues a signal (kind OP_SIGNAL) or a wait (OP_WAIT); the op holds a
 * reference on signal, its own (retain) or one the caller hands over. */
static ordo_status_t enqueue_point(ordo_stream_t *stream, op_kind_t kind, ordo_signal_t *signal,
                                   uint64_t value, int retain) {
    cpu_stream_t *s = stream->impl;
    const char *api = kind == OP_SIGNAL ? "ordo_stream_signal" : "ordo_stream_wait";
    ordo_status_t st = stream_failure(s, api);
    if (st != ORDO_OK) {
        if (kind == OP_SIGNAL) {
            /* Nobody may wait for a point this stream will never reach. */
            (void)ordo_signal_fail(signal, st, ordo__signal_failure_message(s->done));
        }
        return st;
    }
    if (retain) {
        ordo__signal_retain_internal(signal);
    }
    cpu_op_t op = {.kind = kind, .u.point = {signal, value}};
    st = submit(s, &op, NULL, api);
    if (st != ORDO_OK && retain) {
        ordo__signal_release_internal(signal);
    }
    return st;
}

ordo_status_t ordo__cpu_stream_signal(ordo_stream_t *stream, ordo_signal_t *signal,
                                      uint64_t value) {
    return enqueue_point(stream, OP_SIGNAL, signal, value, 1);
}

ordo_status_t ordo__cpu_stream_wait(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value) {
    return enqueue_point(stream, OP_WAIT, signal, value, 1);
}

ordo_status_t ordo__cpu_stream_signal_adopt(ordo_stream_t *stream, ordo_signal_t *signal,
                                            uint64_t value) {
    return enqueue_point(stream, OP_SIGNAL, signal, value, 0);
}

ordo_status_t ordo__cpu_stream_wait_adopt(ordo_stream_t *stream, ordo_signal_t *signal,
                                          uint64_t value) {
    return enqueue_point(stream, OP_WAIT, signal, value, 0);
}

ordo_status_t ordo__cpu_stream_synchronize(ordo_stream_t *stream, ordo_deadline_t deadline) {
    cpu_stream_t *s = stream->impl;
    uint64_t target = atomic_load_explicit(&s->submitted, memory_order_acquire);
    ordo_status_t st = ordo_signal_wait(s->done, target, deadline);
    if (st != ORDO_OK && st != ORDO_ERR_TIMEOUT) {
        return ordo__error(st, "ordo_stream_synchronize", HAL_STREAM_FAILED_TEXT "%s",
                           ordo__signal_failure_message(s->done));
    }
    return st == ORDO_OK ? st : ordo__error_as(st, "ordo_stream_synchronize");
}

ordo_status_t ordo__cpu_stream_status(ordo_stream_t *stream) {
    return stream_failure(stream->impl, "ordo_stream_status");
}

ordo_status_t ordo__cpu_stream_failure(const ordo_stream_t *stream) {
    return failure_of(stream->impl, NULL);
}

ordo_status_t ordo__cpu_stream_event_record(ordo_event_t *event, ordo_stream_t *stream) {
    cpu_stream_t *s = stream->impl;
    ORDO_RETURN_IF_ERROR(stream_failure(s, "ordo_event_record"));
    uint64_t generation = ordo__hal_event_record_begin(event);
    cpu_op_t op = {.kind = OP_RECORD, .u.record = {event, generation}};
    ordo_status_t st = submit(s, &op, event, "ordo_event_record");
    if (st != ORDO_OK) {
        ordo__hal_event_record_abort(event, generation);
        return st;
    }
    if (event->timeline != s->done) {
        if (event->timeline) {
            ordo__signal_release_internal(event->timeline);
        }
        ordo__signal_retain_internal(s->done);
        event->timeline = s->done;
    }
    return ORDO_OK;
}

void ordo__cpu_stream_snapshot(ordo_stream_t *stream, hal_stream_snapshot_t *snapshot) {
    cpu_stream_t *s = stream->impl;
    snapshot->count = 0;
    snapshot->truncated = 0;
    snapshot->in_wait = 0;
    ordo__signal_retain_internal(s->done);
    snapshot->progress = s->done;
    /* Counted first: the worker then keeps the reference of every node it
     * has not moved head past (the handshake in worker_main). */
    atomic_fetch_add_explicit(&s->snapshots, 1, memory_order_seq_cst);
    /* The producers' lock: while it is held no slab is recycled, so the
     * walk from the worker's head to the tail reads stable nodes (the
     * worker never writes one). The worker keeps running meanwhile. */
    uint64_t seen = lock_acquire(s);
    uint64_t submitted = atomic_load_explicit(&s->submitted, memory_order_relaxed);
    cpu_op_t *node = atomic_load_explicit(&s->head, memory_order_seq_cst);
    /* Read after head: anything run since head was read is skipped by
     * number, so a stale head only lengthens the walk. */
    signal_view_t done = ordo__signal_view(s->done);
    uint64_t completed = done.value;
    /* Bounded: producers wait for the lock meanwhile, and a queue of a
     * million host tasks would hold them for milliseconds. What lies
     * beyond is reported unseen (truncated). */
    uint32_t walked = 0;
    while ((node = atomic_load_explicit(&node->next, memory_order_acquire)) != NULL) {
        if (++walked > SNAPSHOT_WALK_MAX) {
            snapshot->truncated = 1;
            break;
        }
        uint64_t seq = submitted - (uint32_t)((uint32_t)submitted - node->seq32);
        if (seq <= completed || (node->kind != OP_WAIT && node->kind != OP_SIGNAL)) {
            continue;
        }
        if (snapshot->count == snapshot->capacity) {
            snapshot->truncated = 1;
            break;
        }
        hal_pending_op_t *op = &snapshot->ops[snapshot->count++];
        op->kind = node->kind == OP_WAIT ? HAL_PENDING_WAIT : HAL_PENDING_SIGNAL;
        op->signal = node->u.point.signal;
        op->value = node->u.point.value;
        op->seq = seq;
        /* The node's own reference lasts until the worker has moved past
         * it and seen this snapshot gone; this one keeps the signal alive
         * for the snapshot's reader. */
        ordo__signal_retain_internal(op->signal);
    }
    lock_release(s, seen);
    atomic_fetch_sub_explicit(&s->snapshots, 1, memory_order_release);
    snapshot->completed = completed;
    snapshot->submitted = submitted;
    snapshot->status = done.failed ? ordo__signal_failure(s->done, NULL) : ORDO_OK;
    snapshot->in_wait = snapshot->count > 0 && snapshot->ops[0].kind == HAL_PENDING_WAIT &&
                        snapshot->ops[0].seq == completed + 1 && !done.failed;
}

void ordo__cpu_stream_progress(ordo_stream_t *stream, ordo_signal_t **out_progress,
                               const _Atomic uint64_t **out_submitted) {
    cpu_stream_t *s = stream->impl;
    *out_progress = s->done; /* raised to each op's number after it ran */
    *out_submitted = &s->submitted;
}
