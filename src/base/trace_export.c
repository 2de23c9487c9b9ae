/* The Chrome trace-event JSON export of a stopped trace (ordo_trace_stop
 * writes it; the recorder is base/trace.c): events sorted by time, stream
 * slices on one track per stream, the program's threads on their own, and
 * flow arrows from each signal to the waits it released. */
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/trace.h"

typedef struct export_state {
    uint64_t origin_ticks; /* the trace's start */
    double ns_per_tick;
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
    /* What running out of memory left out: the export still writes the
     * rest, then reports ORDO_ERR_OUT_OF_MEMORY. */
    uint64_t slices_dropped;
    int flows_dropped;
    /* The name of the stream track about to be named (TRACE_TRACK_NAME). */
    const void *name_track;
    char name[TRACE_TRACK_NAME_BYTES];
} export_state_t;

static _Atomic unsigned failing_allocs;

void ordo__trace_export_fail_allocs(unsigned sites) {
    atomic_store_explicit(&failing_allocs, sites, memory_order_relaxed);
}

static void *export_realloc(void *block, size_t size, unsigned site) {
    if (atomic_load_explicit(&failing_allocs, memory_order_relaxed) & site) {
        return NULL;
    }
    return realloc(block, size);
}

/* Counts a program thread's open slices. Zero for an end with nothing open,
 * and for a begin that cannot be counted (out of memory, counted in
 * slices_dropped): neither is written, so every thread's slices balance. */
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
            /* Each block is kept as soon as it grew: the table stays at the
             * smaller capacity of the two, and both are freed at the end. */
            uint32_t *tids =
                export_realloc(x->open_tids, capacity * sizeof *tids, TRACE_EXPORT_ALLOC_SLICES);
            if (!tids) {
                ++x->slices_dropped;
                return 0;
            }
            x->open_tids = tids;
            uint32_t *depth = export_realloc(x->open_depth, capacity * sizeof *depth,
                                             TRACE_EXPORT_ALLOC_SLICE_DEPTHS);
            if (!depth) {
                ++x->slices_dropped;
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
static double micros_of(const export_state_t *x, uint64_t ticks) {
    return ticks <= x->origin_ticks ? 0.0
                                    : (double)(ticks - x->origin_ticks) * x->ns_per_tick / 1000.0;
}

static double duration_micros_of(const export_state_t *x, uint64_t ticks) {
    return (double)ticks * x->ns_per_tick / 1000.0;
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
             track, micros_of(x, e->ts), duration_micros_of(x, e->dur), name);
        break;
    case TRACE_WAIT:
        emit(x,
             "{\"ph\":\"X\",\"pid\":1,\"tid\":%zu,\"ts\":%.3f,\"dur\":%.3f,\"name\":\"wait\","
             "\"args\":{\"signal\":%llu,\"value\":%llu}}",
             track, micros_of(x, e->ts), duration_micros_of(x, e->dur), (unsigned long long)e->a,
             (unsigned long long)e->b);
        break;
    case TRACE_SIGNAL:
        emit(x,
             "{\"ph\":\"X\",\"pid\":1,\"tid\":%zu,\"ts\":%.3f,\"dur\":%.3f,\"name\":\"signal\","
             "\"args\":{\"signal\":%llu,\"value\":%llu}}",
             track, micros_of(x, e->ts), duration_micros_of(x, e->dur), (unsigned long long)e->a,
             (unsigned long long)e->b);
        emit(x,
             "{\"ph\":\"i\",\"s\":\"t\",\"pid\":1,\"tid\":%zu,\"ts\":%.3f,\"name\":\"reached "
             "%llu\",\"args\":{\"signal\":%llu}}",
             track, micros_of(x, e->ts), (unsigned long long)e->b, (unsigned long long)e->a);
        break;
    case TRACE_TRACK_NAME:
        if (x->name_track != e->track) {
            x->name_track = e->track;
            memset(x->name, 0, sizeof x->name);
        }
        if (e->dur <= sizeof x->name - 16) {
            memcpy(x->name + e->dur, &e->a, 8);
            memcpy(x->name + e->dur + 8, &e->b, 8);
        }
        break;
    case TRACE_TRACK: {
        char raw[17], device[16 * 6 + 1], own[TRACE_TRACK_NAME_BYTES * 6 + 1];
        memcpy(raw, &e->a, 8);
        memcpy(raw + 8, &e->b, 8);
        raw[16] = '\0';
        json_text(raw, device, sizeof device);
        /* "NAME (stream N, ...)" for a named stream, "stream N (...)" else. */
        char head[sizeof own + 32];
        if (x->name_track == e->track && x->name[0]) {
            x->name[sizeof x->name - 1] = '\0';
            snprintf(head, sizeof head, "%s (stream %zu, ", json_text(x->name, own, sizeof own),
                     track);
        } else {
            snprintf(head, sizeof head, "stream %zu (", track);
        }
        x->name_track = NULL;
        emit(x,
             "{\"ph\":\"M\",\"pid\":1,\"tid\":%zu,\"name\":\"thread_name\",\"args\":{\"name\":"
             "\"%s%s, priority %lld)\"}}",
             track, head, device, (long long)(int64_t)e->dur);
        break;
    }
    case TRACE_THREAD_BEGIN:
        if (!open_slices_add(x, e->tid, 1)) {
            break;
        }
        emit(x, "{\"ph\":\"B\",\"pid\":2,\"tid\":%u,\"ts\":%.3f,\"name\":\"%s\"}", e->tid,
             micros_of(x, e->ts), name);
        break;
    case TRACE_THREAD_END:
        if (!open_slices_add(x, e->tid, -1)) {
            break; /* its begin was not recorded */
        }
        emit(x, "{\"ph\":\"E\",\"pid\":2,\"tid\":%u,\"ts\":%.3f}", e->tid, micros_of(x, e->ts));
        break;
    case TRACE_INSTANT:
        emit(x, "{\"ph\":\"i\",\"s\":\"t\",\"pid\":2,\"tid\":%u,\"ts\":%.3f,\"name\":\"%s\"}",
             e->tid, micros_of(x, e->ts), name);
        break;
    case TRACE_COUNTER:
        if (e->a) {
            emit(x,
                 "{\"ph\":\"C\",\"pid\":1,\"ts\":%.3f,\"name\":\"%s 0x%llx\",\"args\":{\"value\":"
                 "%lld}}",
                 micros_of(x, e->ts), name, (unsigned long long)e->a, (long long)(int64_t)e->b);
        } else {
            emit(x,
                 "{\"ph\":\"C\",\"pid\":1,\"ts\":%.3f,\"name\":\"%s\",\"args\":{\"value\":%lld}}",
                 micros_of(x, e->ts), name, (long long)(int64_t)e->b);
        }
        break;
    case TRACE_WAIT_EMITTED:
        break; /* written as flows */
    }
}

/* A flow arrow per tracker-inserted wait whose both ends were recorded: from
 * the origin stream's signal slice to the end of the waiting stream's wait. */
static void write_flows(export_state_t *x) {
    trace_event_t **signals =
        export_realloc(NULL, (x->count ? x->count : 1) * sizeof *signals, TRACE_EXPORT_ALLOC_FLOWS);
    trace_event_t **waits =
        export_realloc(NULL, (x->count ? x->count : 1) * sizeof *waits, TRACE_EXPORT_ALLOC_FLOWS);
    size_t ns = 0, nw = 0;
    if (!signals || !waits) {
        free(signals);
        free(waits);
        x->flows_dropped = 1;
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
             (unsigned long long)id, track_number(x, signal->track), micros_of(x, signal->ts));
        emit(x,
             "{\"ph\":\"f\",\"bp\":\"e\",\"id\":%llu,\"pid\":1,\"tid\":%zu,\"ts\":%.3f,"
             "\"name\":\"inserted wait\",\"cat\":\"ordo\"}",
             (unsigned long long)id, track_number(x, wait->track),
             micros_of(x, wait->ts + (wait->dur ? wait->dur - 1 : 0)));
    }
    free(signals);
    free(waits);
}

ordo_status_t ordo__trace_write_json(const char *path, trace_event_t *events, size_t count,
                                     uint64_t origin_ticks, double ns_per_tick,
                                     uint64_t *out_flows) {
    FILE *out = fopen(path, "w");
    if (!out) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, "ordo_trace_stop", "cannot open %s: %s", path,
                           strerror(errno));
    }
    export_state_t x;
    memset(&x, 0, sizeof x);
    x.origin_ticks = origin_ticks;
    x.ns_per_tick = ns_per_tick;
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
    uint64_t end = count ? events[count - 1].ts : x.origin_ticks;
    for (size_t i = 0; i < x.open_count; ++i) {
        for (uint32_t d = 0; d < x.open_depth[i]; ++d) {
            emit(&x, "{\"ph\":\"E\",\"pid\":2,\"tid\":%u,\"ts\":%.3f}", x.open_tids[i],
                 micros_of(&x, end));
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
    if (x.slices_dropped || x.flows_dropped) {
        char slices[64] = "";
        if (x.slices_dropped) {
            snprintf(slices, sizeof slices, "%llu slice(s) of program threads",
                     (unsigned long long)x.slices_dropped);
        }
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_trace_stop",
                           "out of memory exporting %s: left out %s%s%s", path, slices,
                           x.slices_dropped && x.flows_dropped ? " and " : "",
                           x.flows_dropped ? "every flow arrow (inserted waits)" : "");
    }
    return ORDO_OK;
}
