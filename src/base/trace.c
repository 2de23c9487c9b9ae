/* Trace recording into per-thread chunks, and the Chrome trace-event JSON
 * export (ordo/trace.h).
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
#include <stdarg.h>
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

ordo_status_t ordo_trace_start(const ordo_trace_config_t *config) {
    /* Before any trace can be on: a fork during one finds them. */
    pthread_once(&fork_handlers_once, fork_handlers_install);
    pthread_mutex_lock(&control_lock);
    ordo_status_t st = trace_start_locked(config);
    pthread_mutex_unlock(&control_lock);
    return st;
}

ordo_status_t ordo_trace_is_on(int *out_on) {
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

/* --- Export --- */

typedef struct export_state {
    trace_event_t *events;
    size_t count;
    /* Stream tracks numbered in order of first appearance. */
    const void **tracks;
    size_t track_count;
    FILE *out;
    int first;
    uint64_t flows;
    /* Program threads that made slices, and how many each has open. */
    uint32_t *open_tids;
    uint32_t *open_depth;
    size_t open_count, open_capacity;
} export_state_t;

/* Counts a program thread's open slices. Zero for an end with nothing open,
 * and for a begin that cannot be counted (out of memory): neither is
 * written, so every thread's slices balance. */
static int open_slices_add(export_state_t *x, uint32_t tid, int delta) {
    size_t i = 0;
    while (i < x->open_count && x->open_tids[i] != tid) {
        ++i;
    }
    if (i == x->open_count) {
        if (delta < 0) {
            return 0;
        }
        if (x->open_count == x->open_capacity) {
            size_t capacity = x->open_capacity ? 2 * x->open_capacity : 64;
            uint32_t *tids = realloc(x->open_tids, capacity * sizeof *tids);
            if (!tids) {
                return 0;
            }
            x->open_tids = tids;
            uint32_t *depth = realloc(x->open_depth, capacity * sizeof *depth);
            if (!depth) {
                return 0;
            }
            x->open_depth = depth;
            x->open_capacity = capacity;
        }
        x->open_tids[x->open_count++] = tid;
        x->open_depth[i] = 0;
    }
    if (delta < 0 && !x->open_depth[i]) {
        return 0;
    }
    x->open_depth[i] = (uint32_t)((int)x->open_depth[i] + delta);
    return 1;
}

/* Export order: by time, and in recording order at equal times. Each
 * thread's events on each of its tracks (its stream's, its own) were made
 * non-decreasing in time when gathered, so every track keeps its recording
 * order (a thread that moved between CPUs whose
 * time stamp counters differ slightly cannot appear to go back). */
typedef struct sort_key {
    uint64_t ts;
    size_t index;
} sort_key_t;

static int by_time(const void *x, const void *y) {
    const sort_key_t *a = x, *b = y;
    if (a->ts != b->ts) {
        return a->ts < b->ts ? -1 : 1;
    }
    return a->index < b->index ? -1 : a->index > b->index;
}

/* Signal points and waits sorted by (signal, value) for the flow join. */
static int by_point(const void *x, const void *y) {
    const trace_event_t *a = *(trace_event_t *const *)x, *b = *(trace_event_t *const *)y;
    if (a->a != b->a) {
        return a->a < b->a ? -1 : 1;
    }
    if (a->b != b->b) {
        return a->b < b->b ? -1 : 1;
    }
    return a->track == b->track ? 0 : (uintptr_t)a->track < (uintptr_t)b->track ? -1 : 1;
}

static size_t track_number(export_state_t *x, const void *track) {
    for (size_t i = 0; i < x->track_count; ++i) {
        if (x->tracks[i] == track) {
            return i + 1;
        }
    }
    x->tracks[x->track_count++] = track;
    return x->track_count;
}

/* The length of the UTF-8 sequence at c (RFC 3629: shortest form, no
 * surrogates, at most U+10FFFF), or 0 when it is not one. c is
 * NUL-terminated, so a sequence cut short ends at a byte that is no
 * continuation. */
static size_t utf8_length(const unsigned char *c) {
    size_t n = c[0] < 0x80                    ? 1
               : c[0] >= 0xc2 && c[0] <= 0xdf ? 2
               : c[0] >= 0xe0 && c[0] <= 0xef ? 3
               : c[0] >= 0xf0 && c[0] <= 0xf4 ? 4
                                              : 0;
    for (size_t i = 1; i < n; ++i) {
        if ((c[i] & 0xc0) != 0x80) {
            return 0;
        }
    }
    if (n > 1 && ((c[0] == 0xe0 && c[1] < 0xa0) || (c[0] == 0xed && c[1] > 0x9f) ||
                  (c[0] == 0xf0 && c[1] < 0x90) || (c[0] == 0xf4 && c[1] > 0x8f))) {
        return 0;
    }
    return n;
}

/* name as the inside of a JSON string: quotes,
 * backslashes and control characters escaped, bytes that are not UTF-8
 * written as U+FFFD, cut at a whole character to fit buf. */
static const char *json_text(const char *name, char *buf, size_t capacity) {
    size_t n = 0;
    for (const unsigned char *c = (const unsigned char *)name; *c;) {
        size_t in = utf8_length(c);
        char escaped[8];
        const char *out = (const char *)c;
        size_t out_length = in;
        if (!in) {
            out = "\\ufffd";
            out_length = 6;
            in = 1;
        } else if (*c == '"' || *c == '\\') {
            escaped[0] = '\\';
            escaped[1] = (char)*c;
            out = escaped;
            out_length = 2;
        } else if (*c < 0x20) {
            snprintf(escaped, sizeof escaped, "\\u%04x", *c);
            out = escaped;
            out_length = 6;
        }
        if (n + out_length >= capacity) {
            break;
        }
        memcpy(buf + n, out, out_length);
        n += out_length;
        c += in;
    }
    buf[n] = '\0';
    return buf;
}

/* Microseconds since the start of the trace (ticks may precede it by a
 * hair on another CPU: clamped). */
static double micros(uint64_t ticks) {
    return ticks <= origin_ticks ? 0.0 : (double)(ticks - origin_ticks) * ns_per_tick / 1000.0;
}

static double duration_micros(uint64_t ticks) {
    return (double)ticks * ns_per_tick / 1000.0;
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

static void emit(export_state_t *x, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void emit(export_state_t *x, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    fputs(x->first ? "\n" : ",\n", x->out);
    x->first = 0;
    vfprintf(x->out, fmt, args);
    va_end(args);
}

/* Stream tracks are threads 1..n of process 1; the program's threads are
 * their own thread ids in process 2. */
static void write_event(export_state_t *x, const trace_event_t *e) {
    size_t track = e->kind <= TRACE_TRACK ? track_number(x, e->track) : 0;
    char name[256];
    if (e->name) {
        json_text(e->name, name, sizeof name);
    }
    switch ((trace_kind_t)e->kind) {
    case TRACE_SLICE:
        emit(x, "{\"ph\":\"X\",\"pid\":1,\"tid\":%zu,\"ts\":%.3f,\"dur\":%.3f,\"name\":\"%s\"}",
             track, micros(e->ts), duration_micros(e->dur), name);
        break;
    case TRACE_WAIT:
        emit(x,
             "{\"ph\":\"X\",\"pid\":1,\"tid\":%zu,\"ts\":%.3f,\"dur\":%.3f,\"name\":\"wait\","
             "\"args\":{\"signal\":%llu,\"value\":%llu}}",
             track, micros(e->ts), duration_micros(e->dur), (unsigned long long)e->a,
             (unsigned long long)e->b);
        break;
    case TRACE_SIGNAL:
        emit(x,
             "{\"ph\":\"X\",\"pid\":1,\"tid\":%zu,\"ts\":%.3f,\"dur\":%.3f,\"name\":\"signal\","
             "\"args\":{\"signal\":%llu,\"value\":%llu}}",
             track, micros(e->ts), duration_micros(e->dur), (unsigned long long)e->a,
             (unsigned long long)e->b);
        emit(x,
             "{\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":%zu,\"ts\":%.3f,\"name\":\"reached "
             "%llu\",\"args\":{\"signal\":%llu}}",
             track, micros(e->ts), (unsigned long long)e->b, (unsigned long long)e->a);
        break;
    case TRACE_TRACK: {
        char raw[17], device[16 * 6 + 1];
        memcpy(raw, &e->a, 8);
        memcpy(raw + 8, &e->b, 8);
        raw[16] = '\0';
        json_text(raw, device, sizeof device);
        emit(x,
             "{\"ph\":\"M\",\"pid\":1,\"tid\":%zu,\"name\":\"thread_name\",\"args\":{\"name\":"
             "\"stream %zu (%s, priority %lld)\"}}",
             track, track, device, (long long)(int64_t)e->dur);
        break;
    }
    case TRACE_THREAD_BEGIN:
        if (!open_slices_add(x, e->tid, 1)) {
            break;
        }
        emit(x, "{\"ph\":\"B\",\"pid\":2,\"tid\":%u,\"ts\":%.3f,\"name\":\"%s\"}", e->tid,
             micros(e->ts), name);
        break;
    case TRACE_THREAD_END:
        if (!open_slices_add(x, e->tid, -1)) {
            break; /* its begin was not recorded */
        }
        emit(x, "{\"ph\":\"E\",\"pid\":2,\"tid\":%u,\"ts\":%.3f}", e->tid, micros(e->ts));
        break;
    case TRACE_INSTANT:
        emit(x, "{\"ph\":\"i\",\"s\":\"t\",\"pid\":2,\"tid\":%u,\"ts\":%.3f,\"name\":\"%s\"}",
             e->tid, micros(e->ts), name);
        break;
    case TRACE_COUNTER:
        if (e->a) {
            emit(x,
                 "{\"ph\":\"C\",\"pid\":1,\"ts\":%.3f,\"name\":\"%s 0x%llx\",\"args\":{\"value\":"
                 "%lld}}",
                 micros(e->ts), name, (unsigned long long)e->a, (long long)(int64_t)e->b);
        } else {
            emit(x,
                 "{\"ph\":\"C\",\"pid\":1,\"ts\":%.3f,\"name\":\"%s\",\"args\":{\"value\":%lld}}",
                 micros(e->ts), name, (long long)(int64_t)e->b);
        }
        break;
    case TRACE_WAIT_EMITTED:
        break; /* written as flows */
    }
}

/* A flow arrow per tracker-inserted wait whose both ends were recorded: from
 * the origin stream's signal slice to the end of the waiting stream's wait. */
static void write_flows(export_state_t *x) {
    trace_event_t **signals = malloc(x->count * sizeof *signals);
    trace_event_t **waits = malloc(x->count * sizeof *waits);
    size_t ns = 0, nw = 0;
    if (!signals || !waits) {
        free(signals);
        free(waits);
        return;
    }
    for (size_t i = 0; i < x->count; ++i) {
        if (x->events[i].kind == TRACE_SIGNAL) {
            signals[ns++] = &x->events[i];
        } else if (x->events[i].kind == TRACE_WAIT) {
            waits[nw++] = &x->events[i];
        }
    }
    qsort(signals, ns, sizeof *signals, by_point);
    qsort(waits, nw, sizeof *waits, by_point);
    for (size_t i = 0; i < x->count; ++i) {
        const trace_event_t *e = &x->events[i];
        if (e->kind != TRACE_WAIT_EMITTED) {
            continue;
        }
        trace_event_t key = *e, *keyp = &key;
        key.track = NULL;
        /* The signal: any track; the wait: on the waiting stream's track. */
        trace_event_t **lo = signals, **hi = signals + ns;
        while (lo < hi) {
            trace_event_t **mid = lo + (hi - lo) / 2;
            if ((*mid)->a < e->a || ((*mid)->a == e->a && (*mid)->b < e->b)) {
                lo = mid + 1;
            } else {
                hi = mid;
            }
        }
        if (lo == signals + ns || (*lo)->a != e->a || (*lo)->b != e->b) {
            continue;
        }
        const trace_event_t *signal = *lo;
        key.track = e->track;
        trace_event_t **found = bsearch(&keyp, waits, nw, sizeof *waits, by_point);
        if (!found) {
            continue;
        }
        const trace_event_t *wait = *found;
        uint64_t id = ++x->flows;
        emit(x,
             "{\"ph\":\"s\",\"id\":%llu,\"pid\":1,\"tid\":%zu,\"ts\":%.3f,\"name\":\"inserted "
             "wait\",\"cat\":\"ordo\"}",
             (unsigned long long)id, track_number(x, signal->track), micros(signal->ts));
        emit(x,
             "{\"ph\":\"f\",\"bp\":\"e\",\"id\":%llu,\"pid\":1,\"tid\":%zu,\"ts\":%.3f,"
             "\"name\":\"inserted wait\",\"cat\":\"ordo\"}",
             (unsigned long long)id, track_number(x, wait->track),
             micros(wait->ts + (wait->dur ? wait->dur - 1 : 0)));
    }
    free(signals);
    free(waits);
}

static ordo_status_t write_trace(const char *path, trace_event_t *events, size_t count,
                                 uint64_t *out_flows) {
    FILE *out = fopen(path, "w");
    if (!out) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, "ordo_trace_stop", "cannot open %s: %s", path,
                           strerror(errno));
    }
    export_state_t x;
    memset(&x, 0, sizeof x);
    x.events = events;
    x.count = count;
    x.tracks = calloc(count + 1, sizeof(void *));
    x.out = out;
    x.first = 1;
    if (!x.tracks) {
        fclose(out);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_trace_stop", "cannot export the trace");
    }
    sort_key_t *keys = malloc((count ? count : 1) * sizeof *keys);
    trace_event_t *sorted = malloc((count ? count : 1) * sizeof *sorted);
    if (!keys || !sorted) {
        free(keys);
        free(sorted);
        free(x.tracks);
        fclose(out);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_trace_stop", "cannot export the trace");
    }
    for (size_t i = 0; i < count; ++i) {
        keys[i] = (sort_key_t){events[i].ts, i};
    }
    qsort(keys, count, sizeof *keys, by_time);
    for (size_t i = 0; i < count; ++i) {
        sorted[i] = events[keys[i].index];
    }
    memcpy(events, sorted, count * sizeof *events);
    free(keys);
    free(sorted);
    fputs("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[", out);
    emit(&x, "{\"ph\":\"M\",\"pid\":1,\"name\":\"process_name\",\"args\":{\"name\":\"ordo "
             "streams\"}}");
    emit(&x, "{\"ph\":\"M\",\"pid\":2,\"name\":\"process_name\",\"args\":{\"name\":\"program "
             "threads\"}}");
    for (size_t i = 0; i < count; ++i) {
        write_event(&x, &events[i]);
    }
    /* Slices still open when tracing stopped end with the trace. */
    uint64_t end = count ? events[count - 1].ts : origin_ticks;
    for (size_t i = 0; i < x.open_count; ++i) {
        for (uint32_t d = 0; d < x.open_depth[i]; ++d) {
            emit(&x, "{\"ph\":\"E\",\"pid\":2,\"tid\":%u,\"ts\":%.3f}", x.open_tids[i],
                 micros(end));
        }
    }
    write_flows(&x);
    fputs("\n]}\n", out);
    free(x.tracks);
    free(x.open_tids);
    free(x.open_depth);
    *out_flows = x.flows;
    /* A write that failed midway (a full disk) leaves the error flag even
     * where the final flush succeeds. */
    int failed = ferror(out);
    errno = 0;
    failed |= fclose(out) != 0;
    if (failed) {
        return ordo__error(ORDO_ERR_INTERNAL, "ordo_trace_stop", "cannot write %s: %s", path,
                           strerror(errno ? errno : EIO));
    }
    return ORDO_OK;
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
                if ((int64_t)e->dur < 0) {
                    /* Timed across CPUs whose counters differ by a hair:
                     * the end read before the start. */
                    e->dur = 0;
                }
                int on_stream = e->kind == TRACE_SLICE || e->kind == TRACE_WAIT ||
                                e->kind == TRACE_SIGNAL || e->kind == TRACE_TRACK;
                if (on_stream && e->ts < origin_ticks) {
                    /* Work that began before this trace: only its part
                     * inside the trace. */
                    uint64_t end = e->ts + e->dur;
                    e->dur = end > origin_ticks ? end - origin_ticks : 0;
                    e->ts = origin_ticks;
                }
                uint64_t *last = on_stream ? &last_stream : &last_own;
                if (e->ts < *last) {
                    e->ts = *last; /* see by_time */
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
            st = write_trace(path, events, n, &flows);
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
