/* Trace recording into per-thread chunks (ordo/trace.h); the Chrome
 * trace-event JSON export is base/trace_export.c.
 *
 * Stop versus a recorder on another thread: the recorder marks its thread
 * busy, then checks that tracing is on; stop turns tracing off, then waits
 * until no thread is busy. Either the recorder sees tracing off, or stop
 * sees it busy and waits for it — provided the recorder's store and load
 * are not reordered. Rather than pay a full fence on every record, the
 * two sides use an asymmetric fence (base/asym_fence.h): stop pays for
 * both. Thread records are never freed (reused by later traces, and by
 * later threads once theirs has exited), so a recorder never touches
 * freed memory.
 *
 * Chunks come from one region that start maps for the whole trace and
 * touches up to TRACE_PREFAULT_BYTES: a recorder that takes a chunk does
 * not fault its memory in, which on a virtual machine costs about as much
 * as the recording itself. Stop unmaps the region. */
#include "base/trace.h"

#include <errno.h>
#include <locale.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "base/alloc.h"
#include "base/asym_fence.h"
#include "base/error.h"
#include "base/futex.h"
#include "ordo/time.h"
#include "ordo/trace.h"

#define TRACE_CHUNK_EVENTS 4096u
#define TRACE_DEFAULT_MAX ((uint64_t)4 << 20)
/* The part of the region touched at start (the rest faults in as used). */
#define TRACE_PREFAULT_BYTES ((size_t)64 << 20)
#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
#define TRACE_MAX_DEPTH 64

typedef struct trace_chunk {
    struct trace_chunk *next;
    uint32_t used;
    trace_event_t events[TRACE_CHUNK_EVENTS];
} trace_chunk_t;

typedef struct trace_thread {
    struct trace_thread *next;
    _Atomic uint32_t busy;
    uint32_t tid;
    trace_chunk_t *head, *tail;
    uint64_t dropped;
    /* Open program slices in trace depth_generation; only the owning
     * thread touches these two. */
    uint32_t depth;
    uint32_t depth_generation;
    /* Its thread has exited: the next new thread takes it over, events
     * and all (under threads_lock). */
    uint32_t vacant;
} trace_thread_t;

_Atomic uint32_t ordo__trace_enabled;

static pthread_mutex_t threads_lock = PTHREAD_MUTEX_INITIALIZER;
/* Serializes ordo_trace_start and ordo_trace_stop (taken before
 * threads_lock). */
static pthread_mutex_t control_lock = PTHREAD_MUTEX_INITIALIZER;
static trace_thread_t *threads;
/* The trace's chunks: region_chunks of them from region, handed out in
 * order by chunks_taken. */
static char *region;
static uint64_t region_chunks;
static _Atomic uint64_t chunks_taken;
/* Clock readings at start and stop map ticks to nanoseconds. */
static uint64_t origin_ticks, origin_ns;
static double ns_per_tick = 1.0;
/* Shortest span to calibrate ticks against the clock over. */
#define TRACE_CALIBRATION_NS 5000000ull
static _Atomic uint32_t generation;
static _Thread_local trace_thread_t *this_thread __attribute__((tls_model("initial-exec")));

uint32_t ordo__trace_generation(void) {
    return atomic_load_explicit(&generation, memory_order_relaxed);
}

/* A thread's record outlives it (its events stay in the trace), but is
 * handed to the next thread that records, so a program that makes threads
 * all the time does not grow the list without bound. */
static pthread_key_t exit_key;
static int exit_key_made;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;

static void thread_exit(void *arg) {
    trace_thread_t *t = arg;
    this_thread = NULL; /* a later destructor that records takes a record anew */
    pthread_mutex_lock(&threads_lock);
    t->vacant = 1;
    pthread_mutex_unlock(&threads_lock);
}

static void exit_key_make(void) {
    exit_key_made = pthread_key_create(&exit_key, thread_exit) == 0;
}

static __attribute__((noinline)) trace_thread_t *thread_record_new(void) {
    uint32_t tid = (uint32_t)syscall(SYS_gettid);
    pthread_once(&exit_key_once, exit_key_make);
    pthread_mutex_lock(&threads_lock);
    trace_thread_t *t = threads;
    while (t && !t->vacant) {
        t = t->next;
    }
    if (t) {
        /* Its events (and chunk) stay; their tid is in each. */
        t->vacant = 0;
        t->tid = tid;
        t->depth = 0;
        t->depth_generation = 0; /* no trace: reset at the first mark */
    }
    pthread_mutex_unlock(&threads_lock);
    if (!t) {
        t = calloc(1, sizeof *t);
        if (!t) {
            return NULL;
        }
        t->tid = tid;
        pthread_mutex_lock(&threads_lock);
        t->next = threads;
        threads = t;
        pthread_mutex_unlock(&threads_lock);
    }
    if (exit_key_made) {
        (void)pthread_setspecific(exit_key, t);
    }
    return this_thread = t;
}

size_t ordo__trace_thread_records(void) {
    size_t n = 0;
    pthread_mutex_lock(&threads_lock);
    for (const trace_thread_t *t = threads; t; t = t->next) {
        ++n;
    }
    pthread_mutex_unlock(&threads_lock);
    return n;
}

static inline trace_thread_t *thread_record(void) {
    trace_thread_t *t = this_thread;
    return __builtin_expect(t != NULL, 1) ? t : thread_record_new();
}

/* A fresh chunk, or NULL when the trace is full. */
static __attribute__((noinline)) trace_chunk_t *chunk_new(trace_thread_t *t) {
    uint64_t taken = atomic_fetch_add_explicit(&chunks_taken, 1, memory_order_relaxed);
    if (taken >= region_chunks) {
        return NULL;
    }
    trace_chunk_t *chunk = (trace_chunk_t *)(region + taken * sizeof(trace_chunk_t));
    chunk->next = NULL;
    chunk->used = 0;
    if (t->tail) {
        t->tail->next = chunk;
    } else {
        t->head = chunk;
    }
    t->tail = chunk;
    return chunk;
}

/* A chunk with room, or NULL when the trace is full. */
static inline trace_chunk_t *chunk_with_room(trace_thread_t *t) {
    trace_chunk_t *tail = t->tail;
    if (__builtin_expect(tail && tail->used < TRACE_CHUNK_EVENTS, 1)) {
        return tail;
    }
    return chunk_new(t);
}

/* Marks t busy and gives the slot for its next event, or NULL (t no
 * longer busy) when tracing is off or the trace is full. */
static inline trace_event_t *slot_begin(trace_thread_t *t) {
    atomic_store_explicit(&t->busy, 1, memory_order_relaxed);
    ordo__asym_hot(); /* stop's ordo__asym_rare fences us */
    if (atomic_load_explicit(&ordo__trace_enabled, memory_order_acquire)) {
        trace_chunk_t *chunk = chunk_with_room(t);
        if (chunk) {
            return &chunk->events[chunk->used++];
        }
        ++t->dropped;
    }
    atomic_store_explicit(&t->busy, 0, memory_order_release);
    return NULL;
}

static inline void slot_end(trace_thread_t *t) {
    atomic_store_explicit(&t->busy, 0, memory_order_release);
}

int ordo__trace_record(const trace_event_t *event) {
    trace_thread_t *t = thread_record();
    trace_event_t *e = t ? slot_begin(t) : NULL;
    if (e) {
        *e = *event;
        e->tid = t->tid;
        slot_end(t);
    }
    return e != NULL;
}

/* Touches the first bytes of a fresh region, in one call where the kernel
 * has one. */
static int region_prefault(void *start, size_t bytes) {
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    bytes = (bytes + page - 1) & ~(page - 1);
    if (madvise(start, bytes, MADV_POPULATE_WRITE) == 0) {
        return 0;
    }
    if (errno != EINVAL) {
        return errno; /* out of memory (or a signal): an error, not a touch that could kill */
    }
    for (size_t at = 0; at < bytes; at += page) { /* a kernel without the advice */
        ((volatile char *)start)[at] = 0;
    }
    return 0;
}

/* A child forked during a trace goes on alone: the other threads are gone.
 * The locks are held across the fork, so the child finds them free. A
 * thread that was recording at the fork never finishes: the child clears
 * its busy flag (or a stop would wait for it forever) and leaves its events
 * out (its last one may be half written, its chunk list half linked). */
static void fork_prepare(void) {
    pthread_mutex_lock(&control_lock);
    pthread_mutex_lock(&threads_lock);
}

static void fork_parent(void) {
    pthread_mutex_unlock(&threads_lock);
    pthread_mutex_unlock(&control_lock);
}

static void fork_child(void) {
    for (trace_thread_t *t = threads; t; t = t->next) {
        if (t != this_thread) {
            t->vacant = 1; /* its thread is not in the child */
        }
        if (atomic_load_explicit(&t->busy, memory_order_relaxed)) {
            atomic_store_explicit(&t->busy, 0, memory_order_relaxed);
            t->head = t->tail = NULL;
        }
    }
    pthread_mutex_unlock(&threads_lock);
    pthread_mutex_unlock(&control_lock);
}

static pthread_once_t fork_handlers_once = PTHREAD_ONCE_INIT;

static void fork_handlers_install(void) {
    (void)pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static ordo_status_t trace_start_locked(const ordo_trace_config_t *config) {
    if (atomic_load(&ordo__trace_enabled)) {
        return ordo__error(ORDO_ERR_BUSY, "ordo_trace_start", "tracing is on already");
    }
    if (config && config->flags) {
        return ordo__flags_check(config->flags, 0, "ordo_trace_start");
    }
    uint64_t max_events = config && config->max_events ? config->max_events : TRACE_DEFAULT_MAX;
    uint64_t chunks = max_events / TRACE_CHUNK_EVENTS + (max_events % TRACE_CHUNK_EVENTS != 0);
    if (chunks > SIZE_MAX / sizeof(trace_chunk_t)) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, "ordo_trace_start", "max_events %llu is too many",
                           (unsigned long long)max_events);
    }
    size_t bytes = (size_t)chunks * sizeof(trace_chunk_t);
    void *mapped = mmap(NULL, bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (mapped == MAP_FAILED) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_trace_start",
                           "cannot map %zu bytes for %llu events: %s", bytes,
                           (unsigned long long)max_events, strerror(errno));
    }
    size_t prefault = bytes < TRACE_PREFAULT_BYTES ? bytes : TRACE_PREFAULT_BYTES;
    int failed = region_prefault(mapped, prefault);
    if (failed) {
        munmap(mapped, bytes);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_trace_start",
                           "cannot touch the first %zu bytes of the room for %llu events: %s",
                           prefault, (unsigned long long)max_events, strerror(failed));
    }
    (void)ordo__asym_init();
    region = mapped;
    region_chunks = chunks;
    atomic_store(&chunks_taken, 0);
    origin_ns = ordo_time_now_ns();
    origin_ticks = trace_now();
    atomic_fetch_add(&generation, 1);
    atomic_store(&ordo__trace_enabled, 1);
    return ORDO_OK;
}

ordo_status_t ordo_trace_config_default(ordo_trace_config_t *out_config) {
    if (!out_config) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_config is NULL");
    }
    *out_config = (ordo_trace_config_t){.max_events = TRACE_DEFAULT_MAX};
    return ORDO_OK;
}

ordo_status_t ordo_trace_start(const ordo_trace_config_t *config) {
    /* Before any trace can be on: a fork during one finds them. */
    pthread_once(&fork_handlers_once, fork_handlers_install);
    pthread_mutex_lock(&control_lock);
    ordo_status_t st = trace_start_locked(config);
    pthread_mutex_unlock(&control_lock);
    return st;
}

ordo_status_t ordo_trace_is_on(bool *out_on) {
    if (!out_on) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_on is NULL");
    }
    *out_on = (int)atomic_load(&ordo__trace_enabled);
    return ORDO_OK;
}

static ordo_status_t record_mark(trace_kind_t kind, const char *name, int64_t value,
                                 const char *api) {
    if (kind != TRACE_THREAD_END && !name) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "name is NULL");
    }
    if (!trace_on()) {
        return ORDO_OK;
    }
    trace_thread_t *t = thread_record();
    if (!t) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a thread's trace");
    }
    uint32_t current = atomic_load_explicit(&generation, memory_order_relaxed);
    if (t->depth_generation != current) {
        t->depth_generation = current; /* a new trace: nothing open in it */
        t->depth = 0;
    }
    if (kind == TRACE_THREAD_BEGIN) {
        ++t->depth;
    } else if (kind == TRACE_THREAD_END) {
        if (!t->depth) {
            return ORDO_OK; /* its begin came before this trace started */
        }
        --t->depth;
    }
    trace_event_t *e = slot_begin(t);
    if (e) {
        *e = (trace_event_t){trace_now(), 0, t, name, 0, (uint64_t)value, kind, t->tid};
        slot_end(t);
    }
    return ORDO_OK;
}

ordo_status_t ordo_trace_slice_begin(const char *name) {
    return record_mark(TRACE_THREAD_BEGIN, name, 0, __func__);
}

ordo_status_t ordo_trace_slice_end(void) {
    return record_mark(TRACE_THREAD_END, NULL, 0, __func__);
}

ordo_status_t ordo_trace_instant(const char *name) {
    return record_mark(TRACE_INSTANT, name, 0, __func__);
}

ordo_status_t ordo_trace_counter(const char *name, int64_t value) {
    return record_mark(TRACE_COUNTER, name, value, __func__);
}

/* Ticks per nanosecond over the whole trace (at least a few ms of it). */
static void calibrate(void) {
    uint64_t now_ns = ordo_time_now_ns();
    while (now_ns - origin_ns < TRACE_CALIBRATION_NS) {
        uint64_t left = origin_ns + TRACE_CALIBRATION_NS - now_ns;
        struct timespec pause = {0, (long)left};
        nanosleep(&pause, NULL);
        now_ns = ordo_time_now_ns();
    }
    uint64_t ticks = trace_now();
    ns_per_tick =
        ticks > origin_ticks ? (double)(now_ns - origin_ns) / (double)(ticks - origin_ticks) : 1.0;
}

static ordo_status_t trace_stop_locked(const char *path, ordo_trace_stats_t *out_stats) {
    if (!atomic_exchange(&ordo__trace_enabled, 0)) {
        if (out_stats) {
            memset(out_stats, 0, sizeof *out_stats);
        }
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, "ordo_trace_stop", "tracing is not on");
    }
    ordo__asym_rare();
    pthread_mutex_lock(&threads_lock);
    size_t count = 0;
    uint64_t dropped = 0;
    for (trace_thread_t *t = threads; t; t = t->next) {
        while (atomic_load(&t->busy)) {
            ordo__cpu_relax();
        }
        for (trace_chunk_t *c = t->head; c; c = c->next) {
            count += c->used;
        }
        dropped += t->dropped;
    }
    trace_event_t *events = path ? malloc((count ? count : 1) * sizeof *events) : NULL;
    size_t n = 0;
    for (trace_thread_t *t = threads; t; t = t->next) {
        /* Per track: a stream's slices are stamped with their start when
         * they end, after any marks the work made on this thread. */
        uint64_t last_stream = 0, last_own = 0;
        for (const trace_chunk_t *c = t->head; c; c = c->next) {
            for (uint32_t i = 0; events && i < c->used; ++i) {
                trace_event_t *e = &events[n++];
                *e = c->events[i];
                /* A duration, except a track's (its dur is the priority). */
                int timed =
                    e->kind == TRACE_SLICE || e->kind == TRACE_WAIT || e->kind == TRACE_SIGNAL;
                if (timed && (int64_t)e->dur < 0) {
                    /* Timed across CPUs whose counters differ by a hair:
                     * the end read before the start. */
                    e->dur = 0;
                }
                int on_stream = timed || e->kind == TRACE_TRACK || e->kind == TRACE_TRACK_NAME;
                if (on_stream && e->ts < origin_ticks) {
                    /* Work that began before this trace: only its part
                     * inside the trace. */
                    if (timed) {
                        uint64_t end = e->ts + e->dur;
                        e->dur = end > origin_ticks ? end - origin_ticks : 0;
                    }
                    e->ts = origin_ticks;
                }
                uint64_t *last = on_stream ? &last_stream : &last_own;
                if (e->ts < *last) {
                    /* See by_time. The end stays where it was, so slices
                     * of one track still nest or follow each other. */
                    uint64_t raised = *last - e->ts;
                    if (timed) {
                        e->dur = e->dur > raised ? e->dur - raised : 0;
                    }
                    e->ts = *last;
                }
                *last = e->ts;
            }
        }
        t->head = t->tail = NULL;
        t->dropped = 0;
    }
    munmap(region, (size_t)region_chunks * sizeof(trace_chunk_t));
    region = NULL;
    region_chunks = 0;
    pthread_mutex_unlock(&threads_lock);
    ordo_status_t st = ORDO_OK;
    uint64_t flows = 0;
    if (path) {
        calibrate();
    }
    if (path && !events) {
        st = ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_trace_stop", "cannot gather %zu events",
                         count);
    } else if (path) {
        /* JSON numbers have a decimal point whatever locale the program
         * set (printf takes LC_NUMERIC's separator): this thread writes
         * in the C locale. */
        locale_t c_numeric = newlocale(LC_NUMERIC_MASK, "C", (locale_t)0);
        if (!c_numeric) {
            st = ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_trace_stop",
                             "cannot make the C locale to write %s", path);
        } else {
            locale_t previous = uselocale(c_numeric);
            st = ordo__trace_write_json(path, events, n, origin_ticks, ns_per_tick, &flows);
            uselocale(previous);
            freelocale(c_numeric);
        }
    }
    free(events);
    if (out_stats) {
        *out_stats = (ordo_trace_stats_t){count, dropped, flows};
    }
    return st;
}

ordo_status_t ordo_trace_stop(const char *path, ordo_trace_stats_t *out_stats) {
    pthread_mutex_lock(&control_lock);
    ordo_status_t st = trace_stop_locked(path, out_stats);
    pthread_mutex_unlock(&control_lock);
    return st;
}
