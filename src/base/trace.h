/* Internal: trace recording hooks (ordo/trace.h). Each hook site checks
 * trace_on() first: one relaxed load while tracing is off. */
#ifndef ORDO_BASE_TRACE_H
#define ORDO_BASE_TRACE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ordo/status.h"
#include "ordo/time.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#endif

typedef enum trace_kind {
    TRACE_SLICE = 1, /* a piece of work on track: ts, dur, name */
    /* a: a signal's trace_id (unique, where addresses are reused) */
    TRACE_WAIT,         /* a stream's wait on (a: signal, b: value): ts, dur */
    TRACE_SIGNAL,       /* a stream reached (a: signal, b: value): ts, dur */
    TRACE_WAIT_EMITTED, /* a tracker made track wait for (a: signal, b: value) */
    TRACE_TRACK,        /* names a stream's track: a, b: device name, dur: priority */
    TRACE_THREAD_BEGIN, /* the program's own slice on its thread: name */
    TRACE_THREAD_END,
    TRACE_INSTANT, /* name */
    TRACE_COUNTER, /* name, a: owner (0: none), b: value */
    /* 16 bytes (a, b) of the name of a stream's track at offset dur,
     * recorded right before its TRACE_TRACK, on the stream's timeline: the
     * export finds them just before it (same time, recording order). */
    TRACE_TRACK_NAME,
} trace_kind_t;

/* A stream track's name, terminator included (ORDO_STREAM_NAME_MAX). */
#define TRACE_TRACK_NAME_BYTES 48u

/* Event times are trace ticks (trace_now), converted to nanoseconds at
 * export against CLOCK_MONOTONIC readings taken at start and stop. */
typedef struct trace_event {
    uint64_t ts;
    uint64_t dur;
    const void *track;
    const char *name;
    uint64_t a;
    uint64_t b;
    uint32_t kind;
    uint32_t tid; /* the recording thread */
} trace_event_t;

extern _Atomic uint32_t ordo__trace_enabled;

static inline int trace_on(void) {
    return __builtin_expect(atomic_load_explicit(&ordo__trace_enabled, memory_order_relaxed) != 0,
                            0);
}

/* The time stamp of an event: the invariant TSC where there is one (about
 * half the cost of a vDSO clock read), else CLOCK_MONOTONIC nanoseconds. */
static inline uint64_t trace_now(void) {
#if defined(__x86_64__) || defined(__i386__)
    return __rdtsc();
#else
    return ordo_time_now_ns();
#endif
}

/* Appends one event (call only when trace_on()). */
/* Non-zero when recorded (tracing was on and the trace not full). */
int ordo__trace_record(const trace_event_t *event);

/* The trace's generation: bumped by every start, so a stream can tell
 * whether it has named its track in the current trace yet. */
uint32_t ordo__trace_generation(void);

/* How many thread records exist (threads that recorded and are alive, or
 * exited since and not yet replaced). */
size_t ordo__trace_thread_records(void);

/* Writes events (count, gathered from every thread; sorted here in place)
 * to path as Chrome trace-event JSON; origin_ticks is the trace's start and
 * ns_per_tick the counter's rate over it. *out_flows: the flow arrows
 * written. (base/trace_export.c) */
ordo_status_t ordo__trace_write_json(const char *path, trace_event_t *events, size_t count,
                                     uint64_t origin_ticks, double ns_per_tick,
                                     uint64_t *out_flows);

/* Tests only: the export's allocations at these sites fail as out of
 * memory until cleared (0). */
enum {
    TRACE_EXPORT_ALLOC_SLICES = 1,       /* the table of threads with open slices */
    TRACE_EXPORT_ALLOC_SLICE_DEPTHS = 2, /* its second block, after the first grew */
    TRACE_EXPORT_ALLOC_FLOWS = 4,        /* the indexes the flow arrows are found by */
};
void ordo__trace_export_fail_allocs(unsigned sites);

#endif
