/* libFuzzer target: streams, events, event pools, stream pools, stall
 * reports and traces.
 *
 * Each input makes an owned cpu device whose event pools take their
 * policy from the input (refused policies included), three streams (some
 * held at the start behind a gate signal, so work stays pending), and
 * optionally a stream pool and a trace. It then runs a bounded program:
 * host tasks (some failing their stream), stream signals and waits on two
 * signals, events of both kinds created, recorded, re-recorded, queried,
 * synchronized with past or short deadlines, waited on by streams,
 * measured and destroyed (also with their record still pending, and never
 * recorded: refused), event pool statistics and trims, stream pool hand-
 * outs, stream names, priorities and status, stall reports as entries and
 * as text cut to any capacity, trace slices, instants and counters, NULL
 * and foreign handles. The model predicts each status; every failed call
 * must name itself and empty its outputs; a cut stall report must say so
 * (ORDO_ERR_OUT_OF_RANGE with the full length, as docs/ERRORS.md says).
 * The input ends with everything destroyed (streams possibly with work
 * still pending behind a gate) and ordo's host blocks back to their count.
 *
 * Defects it found, fixed since, and checked on every input:
 * ordo_stream_synchronize, ordo_event_synchronize, ordo_event_query,
 * ordo_event_elapsed_ns and ordo_stream_wait_event named the internal call
 * that failed (ordo_signal_wait, ordo_signal_query, ordo_stream_wait);
 * ordo_stall_report_format returned ORDO_OK when it cut the text. New
 * known defects go behind fuzz_known_defect() (fuzz_common.h) until
 * fixed. */
#include "fuzz_common.h"

#define STREAMS 3
#define EVENTS 4
#define MAX_OPS 64

typedef struct mevent {
    ordo_event_t *event;
    ordo_event_kind_t kind;
    int stream; /* recorded on, or -1 */
} mevent_t;

static ordo_device_t *device, *foreign_device;
static ordo_stream_t *streams[STREAMS], *foreign_stream;
static ordo_signal_t *gates[STREAMS];
static ordo_signal_t *sigs[2];
static int failed[STREAMS]; /* a failing task was queued on it */
static int failed_any;
static mevent_t events[EVENTS];
static ordo_stream_pool_t *spool;
static size_t spool_compute, spool_transfer;
static int tracing, slice_depth;

/* A status a call on stream s may return besides its own: the stream's
 * failure (ABORTED, from a task of its own or passed on by a wait, or
 * CANCELLED). */
static int failure_ok(ordo_status_t st) {
    return failed_any && (st == ORDO_ERR_ABORTED || st == ORDO_ERR_CANCELLED);
}

static void op_stream_work(fuzz_input_t *in) {
    uint8_t b = fuzz_u8(in);
    int s = fuzz_u8(in) % STREAMS;
    ordo_status_t st;
    switch (b % 5) {
    case 0:
        st = FUZZ_CALL(ordo_stream_host_task, streams[s], fuzz_noop_task, NULL);
        break;
    case 1:
        st = FUZZ_CALL(ordo_stream_host_task, streams[s], fuzz_failing_task, NULL);
        failed[s] = failed_any = 1;
        break;
    case 2:
        st = FUZZ_CALL(ordo_stream_signal, streams[s], sigs[(b >> 3) & 1], fuzz_value(in) & 7);
        break;
    case 3:
        st = FUZZ_CALL(ordo_stream_wait, streams[s], sigs[(b >> 3) & 1], fuzz_value(in) & 7);
        break;
    default:
        st = FUZZ_CALL(ordo_stream_synchronize, streams[s], fuzz_deadline(in));
        FUZZ_CHECK(st == ORDO_OK || st == ORDO_ERR_TIMEOUT || failure_ok(st),
                   "ordo_stream_synchronize returned %s", ordo_status_name(st));
        return;
    }
    FUZZ_CHECK(st == ORDO_OK || failure_ok(st), "stream work returned %s", ordo_status_name(st));
}

static void op_signal(fuzz_input_t *in) {
    uint8_t b = fuzz_u8(in);
    if (b & 1) {
        int s = (b >> 1) % STREAMS;
        if (gates[s]) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_signal_advance, gates[s], 1), ORDO_OK,
                        "ordo_signal_advance");
        }
        return;
    }
    ordo_status_t st = FUZZ_CALL(ordo_signal_advance, sigs[(b >> 1) & 1], fuzz_value(in) & 7);
    FUZZ_CHECK(st == ORDO_OK || failure_ok(st), "ordo_signal_advance returned %s",
               ordo_status_name(st));
}

static void op_event(fuzz_input_t *in) {
    uint8_t b = fuzz_u8(in);
    mevent_t *e = &events[(b >> 4) % EVENTS];
    int s = fuzz_u8(in) % STREAMS;
    ordo_status_t st;
    if (!e->event) {
        ordo_event_kind_t kind = (ordo_event_kind_t)(b & 1);
        ordo_event_t *event;
        fuzz_sentinel(event);
        st = FUZZ_CALL(ordo_event_create, device, kind, &event);
        FUZZ_EXPECT(st, ORDO_OK, "ordo_event_create");
        *e = (mevent_t){event, kind, -1};
        return;
    }
    int recorded = e->stream >= 0;
    switch (b % 8) {
    case 0:
        FUZZ_EXPECT(FUZZ_CALL(ordo_event_destroy, e->event), ORDO_OK, "ordo_event_destroy");
        e->event = NULL;
        return;
    case 1:
    case 2:
        st = FUZZ_CALL(ordo_event_record, e->event, streams[s]);
        FUZZ_CHECK(st == ORDO_OK || failure_ok(st), "ordo_event_record returned %s",
                   ordo_status_name(st));
        if (st == ORDO_OK) {
            e->stream = s;
        }
        return;
    case 3: {
        bool complete;
        fuzz_sentinel(complete);
        st = FUZZ_CALL(ordo_event_query, e->event, &complete);
        FUZZ_CHECK(recorded ? st == ORDO_OK || failure_ok(st) : st == ORDO_ERR_INVALID_ARGUMENT,
                   "ordo_event_query returned %s", ordo_status_name(st));
        FUZZ_CHECK(complete == 0 || complete == 1, "ordo_event_query: complete is %d", complete);
        FUZZ_CHECK(st == ORDO_OK || complete == 0, "a failed ordo_event_query said complete");
        return;
    }
    case 4:
        st = FUZZ_CALL(ordo_event_synchronize, e->event, fuzz_deadline(in));
        FUZZ_CHECK(recorded ? st == ORDO_OK || st == ORDO_ERR_TIMEOUT || failure_ok(st)
                            : st == ORDO_ERR_INVALID_ARGUMENT,
                   "ordo_event_synchronize returned %s", ordo_status_name(st));
        return;
    case 5:
        st = FUZZ_CALL(ordo_stream_wait_event, streams[s], e->event);
        FUZZ_CHECK(recorded ? st == ORDO_OK || failure_ok(st) : st == ORDO_ERR_INVALID_ARGUMENT,
                   "ordo_stream_wait_event returned %s", ordo_status_name(st));
        return;
    case 6: {
        mevent_t *f = &events[fuzz_u8(in) % EVENTS];
        if (!f->event) {
            return;
        }
        int64_t ns;
        fuzz_sentinel(ns);
        st = FUZZ_CALL(ordo_event_elapsed_ns, e->event, f->event, &ns);
        int ok;
        if (!recorded || f->stream < 0 || e->kind != ORDO_EVENT_TIMING ||
            f->kind != ORDO_EVENT_TIMING) {
            ok = st == ORDO_ERR_INVALID_ARGUMENT;
        } else {
            ok = st == ORDO_OK || st == ORDO_ERR_BUSY || failure_ok(st);
        }
        FUZZ_CHECK(ok, "ordo_event_elapsed_ns returned %s", ordo_status_name(st));
        FUZZ_EMPTY_ON_FAILURE(st, ns, "ordo_event_elapsed_ns");
        return;
    }
    default: {
        ordo_event_pool_stats_t stats;
        ordo_event_kind_t kind = (ordo_event_kind_t)(b & 1);
        FUZZ_EXPECT(FUZZ_CALL(ordo_device_event_pool_stats, device, kind, &stats), ORDO_OK,
                    "ordo_device_event_pool_stats");
        size_t live = 0;
        for (int i = 0; i < EVENTS; ++i) {
            live += events[i].event && events[i].kind == kind;
        }
        FUZZ_CHECK(stats.in_use >= live && stats.acquires >= stats.releases,
                   "event pool: %zu in use with %zu events live", stats.in_use, live);
        FUZZ_CHECK(stats.high_water >= stats.in_use, "event pool: high water %zu below %zu",
                   stats.high_water, stats.in_use);
        if (b & 2) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_device_event_pool_trim, device, fuzz_u8(in) % 4), ORDO_OK,
                        "ordo_device_event_pool_trim");
        }
        return;
    }
    }
}

static void op_stall(fuzz_input_t *in) {
    uint8_t b = fuzz_u8(in);
    if (b & 1) {
        ordo_stall_entry_t entries[STREAMS + 2];
        size_t capacity = fuzz_u8(in) % (STREAMS + 2), count;
        fuzz_sentinel(count);
        ordo_status_t st =
            FUZZ_CALL(ordo_stall_report, device, capacity ? entries : NULL, capacity, &count);
        FUZZ_EXPECT(st, ORDO_OK, "ordo_stall_report");
        FUZZ_CHECK(count <= STREAMS + 1, "%zu blocked streams of %d", count, STREAMS);
        for (size_t i = 0; i < count && i < capacity; ++i) {
            int ours = 0;
            for (int s = 0; s < STREAMS; ++s) {
                ours |= entries[i].stream == streams[s];
            }
            FUZZ_CHECK(ours || spool, "a stall entry names a stream that is not the device's");
            FUZZ_CHECK(entries[i].reach <= ORDO_STALL_UNKNOWN, "stall reach %d",
                       (int)entries[i].reach);
        }
        return;
    }
    char text[2048];
    size_t capacity = b & 2 ? sizeof text : fuzz_u8(in) % 200;
    size_t len;
    fuzz_sentinel(len);
    fuzz_prime_message();
    ordo_status_t st = ordo_stall_report_format(device, capacity ? text : NULL, capacity, &len);
    if (st != ORDO_OK && st != ORDO_ERR_OUT_OF_RANGE) {
        FUZZ_FAIL("ordo_stall_report_format returned %s", ordo_status_name(st));
    }
    /* Capacity 0 is a sizing query: ORDO_OK, as ordo_metrics_format. */
    int cut = capacity && len + 1 > capacity;
    if (cut) {
        FUZZ_EXPECT(st, ORDO_ERR_OUT_OF_RANGE, "ordo_stall_report_format of a cut text");
        fuzz_check_named(__FILE__, __LINE__, st, "ordo_stall_report_format");
    }
    if (!cut) {
        FUZZ_EXPECT(st, ORDO_OK, "ordo_stall_report_format of a whole text");
    }
    if (capacity) {
        size_t shown = strnlen(text, capacity);
        FUZZ_CHECK(shown < capacity, "ordo_stall_report_format left the text unterminated");
        FUZZ_CHECK(shown == (cut ? capacity - 1 : len),
                   "ordo_stall_report_format wrote %zu bytes of %zu into %zu", shown, len,
                   capacity);
    }
}

static void op_names(fuzz_input_t *in) {
    uint8_t b = fuzz_u8(in);
    int s = (b >> 2) % STREAMS;
    switch (b & 3) {
    case 0: {
        char buf[80];
        FUZZ_EXPECT(FUZZ_CALL(ordo_stream_set_name, streams[s],
                              b & 16 ? NULL : fuzz_text(in, buf, sizeof buf)),
                    ORDO_OK, "ordo_stream_set_name");
        break;
    }
    case 1: {
        char out[64];
        size_t capacity = fuzz_u8(in) % sizeof out;
        ordo_status_t st = FUZZ_CALL(ordo_stream_name, streams[s], out, capacity);
        FUZZ_EXPECT(st, capacity ? ORDO_OK : ORDO_ERR_INVALID_ARGUMENT, "ordo_stream_name");
        if (st == ORDO_OK) {
            FUZZ_CHECK(strnlen(out, capacity) < capacity, "ordo_stream_name: unterminated");
        }
        break;
    }
    case 2: {
        bool healthy;
        int priority;
        ordo_device_t *dev;
        ordo_status_t st = ordo_stream_status(streams[s]);
        FUZZ_CHECK(st == ORDO_OK || failure_ok(st), "ordo_stream_status: %s", ordo_status_name(st));
        FUZZ_EXPECT(FUZZ_CALL(ordo_stream_is_healthy, streams[s], &healthy), ORDO_OK,
                    "ordo_stream_is_healthy");
        FUZZ_EXPECT(FUZZ_CALL(ordo_stream_priority, streams[s], &priority), ORDO_OK,
                    "ordo_stream_priority");
        FUZZ_EXPECT(FUZZ_CALL(ordo_stream_device, streams[s], &dev), ORDO_OK, "ordo_stream_device");
        FUZZ_CHECK(dev == device && priority == 0, "a stream's device or priority changed");
        break;
    }
    default: {
        /* NULL and foreign handles, refused outputs. */
        ordo_stream_t *bad = b & 4 ? NULL : FUZZ_GARBAGE(ordo_stream_t);
        bool healthy;
        fuzz_sentinel(healthy);
        ordo_status_t st = FUZZ_CALL(ordo_stream_is_healthy, bad, &healthy);
        FUZZ_EXPECT(st, ORDO_ERR_INVALID_HANDLE, "ordo_stream_is_healthy");
        FUZZ_EMPTY_ON_FAILURE(st, healthy, "ordo_stream_is_healthy");
        FUZZ_EXPECT(FUZZ_CALL(ordo_stream_host_task, bad, fuzz_noop_task, NULL),
                    ORDO_ERR_INVALID_HANDLE, "ordo_stream_host_task");
        ordo_stream_t *created;
        fuzz_sentinel(created);
        st = FUZZ_CALL(ordo_stream_create, device, 1000 + fuzz_u8(in), &created);
        FUZZ_CHECK(st == ORDO_ERR_OUT_OF_RANGE || st == ORDO_ERR_INVALID_ARGUMENT,
                   "ordo_stream_create with priority out of range returned %s",
                   ordo_status_name(st));
        FUZZ_EMPTY_ON_FAILURE(st, created, "ordo_stream_create");
        for (int i = 0; i < EVENTS; ++i) {
            if (events[i].event) {
                FUZZ_EXPECT(FUZZ_CALL(ordo_event_record, events[i].event, foreign_stream),
                            ORDO_ERR_INVALID_ARGUMENT, "ordo_event_record");
                break;
            }
        }
        ordo_event_t *event;
        fuzz_sentinel(event);
        st = FUZZ_CALL(ordo_event_create, device, (ordo_event_kind_t)7, &event);
        FUZZ_EXPECT(st, ORDO_ERR_INVALID_ARGUMENT, "ordo_event_create");
        FUZZ_EMPTY_ON_FAILURE(st, event, "ordo_event_create");
        break;
    }
    }
}

static void op_pool_and_trace(fuzz_input_t *in) {
    uint8_t b = fuzz_u8(in);
    if (b & 1) {
        if (!spool) {
            return;
        }
        ordo_workload_t w = (ordo_workload_t)((b >> 1) % 3);
        ordo_stream_t *s;
        fuzz_sentinel(s);
        FUZZ_EXPECT(FUZZ_CALL(ordo_stream_pool_next, spool, w, &s), ORDO_OK,
                    "ordo_stream_pool_next");
        size_t n;
        FUZZ_EXPECT(FUZZ_CALL(ordo_stream_pool_size, spool, w, &n), ORDO_OK,
                    "ordo_stream_pool_size");
        size_t want = w == ORDO_WORKLOAD_ANY       ? spool_compute + spool_transfer
                      : w == ORDO_WORKLOAD_COMPUTE ? spool_compute
                                                   : spool_transfer;
        FUZZ_CHECK(n == want ||
                       (w == ORDO_WORKLOAD_TRANSFER && !spool_transfer && n == spool_compute),
                   "the pool serves workload %d with %zu streams", (int)w, n);
        ordo_status_t st =
            FUZZ_CALL(ordo_stream_host_task, s, b & 8 ? fuzz_failing_task : fuzz_noop_task, NULL);
        FUZZ_CHECK(st == ORDO_OK || st == ORDO_ERR_ABORTED, "a pool stream's task: %s",
                   ordo_status_name(st));
        return;
    }
    switch ((b >> 1) % 4) {
    case 0: {
        ordo_status_t st = FUZZ_CALL(ordo_trace_instant, "fuzz instant");
        FUZZ_EXPECT(st, ORDO_OK, "ordo_trace_instant");
        break;
    }
    case 1:
        FUZZ_EXPECT(FUZZ_CALL(ordo_trace_counter, "fuzz counter", (int64_t)fuzz_u16(in)), ORDO_OK,
                    "ordo_trace_counter");
        break;
    case 2:
        if (slice_depth < 8) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_trace_slice_begin, "fuzz slice"), ORDO_OK,
                        "ordo_trace_slice_begin");
            ++slice_depth;
        }
        break;
    default:
        if (slice_depth) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_trace_slice_end), ORDO_OK, "ordo_trace_slice_end");
            --slice_depth;
        }
        if (tracing) {
            ordo_trace_config_t config = {4096, 0};
            FUZZ_EXPECT(FUZZ_CALL(ordo_trace_start, &config), ORDO_ERR_BUSY, "ordo_trace_start");
        }
        break;
    }
}

/* ------------------------------------------------------------ the input */

static void setup(void) {
    if (!foreign_device) {
        FUZZ_EXPECT(ordo_device_create_owned("cpu", NULL, &foreign_device), ORDO_OK,
                    "ordo_device_create_owned");
        FUZZ_EXPECT(ordo_stream_create(foreign_device, 0, &foreign_stream), ORDO_OK,
                    "ordo_stream_create");
    }
}

/* An owned device with the input's event pool policy; refused policies
 * are checked and replaced by the defaults. */
static void make_device(fuzz_input_t *in) {
    ordo_device_config_t config;
    FUZZ_EXPECT(FUZZ_CALL(ordo_device_config_default, &config), ORDO_OK,
                "ordo_device_config_default");
    uint8_t b = fuzz_u8(in);
    config.plain_events.initial = b % 4;
    config.plain_events.growth = 1 + (b >> 2) % 3;
    config.plain_events.maximum = (b >> 4) % 6;
    config.timing_events = config.plain_events;
    ordo_status_t want = ORDO_OK;
    if ((b & 0xc0) == 0xc0) {
        config.timing_events.growth = 0;
        want = ORDO_ERR_INVALID_ARGUMENT;
    } else if ((b & 0xc0) == 0x80) {
        config.plain_events.initial = ((size_t)1 << 24) + 1;
        want = ORDO_ERR_OUT_OF_RANGE;
    }
    int contradicts =
        config.plain_events.maximum && config.plain_events.initial > config.plain_events.maximum;
    fuzz_sentinel(device);
    ordo_status_t st = FUZZ_CALL(ordo_device_create_owned, "cpu", &config, &device);
    if (contradicts && (want == ORDO_OK || st == ORDO_ERR_INVALID_ARGUMENT)) {
        want = ORDO_ERR_INVALID_ARGUMENT; /* initial above maximum */
    }
    FUZZ_EXPECT(st, want, "ordo_device_create_owned");
    FUZZ_EMPTY_ON_FAILURE(st, device, "ordo_device_create_owned");
    if (st != ORDO_OK) {
        FUZZ_EXPECT(FUZZ_CALL(ordo_device_create_owned, "cpu", NULL, &device), ORDO_OK,
                    "ordo_device_create_owned");
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    fuzz_harness = "fuzz_streams";
    setup();
    size_t before = fuzz_live_blocks();
    fuzz_input_t in = {data, size, 0};
    memset(events, 0, sizeof events);
    memset(failed, 0, sizeof failed);
    failed_any = slice_depth = 0;
    make_device(&in);
    uint8_t config = fuzz_u8(&in);
    for (int s = 0; s < STREAMS; ++s) {
        FUZZ_EXPECT(ordo_stream_create(device, 0, &streams[s]), ORDO_OK, "ordo_stream_create");
        gates[s] = NULL;
        if (config & (1u << s)) {
            FUZZ_EXPECT(ordo_signal_create(0, &gates[s]), ORDO_OK, "ordo_signal_create");
            FUZZ_EXPECT(ordo_signal_set_name(gates[s], "gate"), ORDO_OK, "ordo_signal_set_name");
            FUZZ_EXPECT(ordo_stream_wait(streams[s], gates[s], 1), ORDO_OK, "ordo_stream_wait");
        }
    }
    for (int i = 0; i < 2; ++i) {
        FUZZ_EXPECT(ordo_signal_create(0, &sigs[i]), ORDO_OK, "ordo_signal_create");
    }
    spool = NULL;
    if (config & 8) {
        spool_compute = 1 + (config >> 4) % 2;
        spool_transfer = (config >> 5) % 2;
        ordo_stream_pool_config_t pc = {spool_compute, 0, spool_transfer, 0, 0};
        FUZZ_EXPECT(FUZZ_CALL(ordo_stream_pool_create, device, &pc, &spool), ORDO_OK,
                    "ordo_stream_pool_create");
    }
    tracing = (config & 0xc0) == 0xc0;
    if (tracing) {
        ordo_trace_config_t tc = {4096, 0};
        FUZZ_EXPECT(FUZZ_CALL(ordo_trace_start, &tc), ORDO_OK, "ordo_trace_start");
    }
    for (int n = 0; n < MAX_OPS && fuzz_more(&in); ++n) {
        switch (fuzz_u8(&in) % 7) {
        case 0:
        case 1:
            op_stream_work(&in);
            break;
        case 2:
            op_signal(&in);
            break;
        case 3:
            op_event(&in);
            break;
        case 4:
            op_stall(&in);
            break;
        case 5:
            op_names(&in);
            break;
        default:
            op_pool_and_trace(&in);
            break;
        }
    }
    /* Teardown. Gates open unless the input says to destroy streams with
     * their work still pending. */
    int keep_pending = fuzz_u8(&in) & 1;
    for (int s = 0; s < STREAMS; ++s) {
        if (gates[s] && !keep_pending) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_signal_advance, gates[s], 1), ORDO_OK,
                        "ordo_signal_advance");
        }
    }
    for (int i = 0; i < EVENTS; ++i) {
        if (events[i].event) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_event_destroy, events[i].event), ORDO_OK,
                        "ordo_event_destroy");
        }
    }
    while (slice_depth) {
        FUZZ_EXPECT(FUZZ_CALL(ordo_trace_slice_end), ORDO_OK, "ordo_trace_slice_end");
        --slice_depth;
    }
    if (spool) {
        FUZZ_EXPECT(FUZZ_CALL(ordo_stream_pool_destroy, spool), ORDO_OK,
                    "ordo_stream_pool_destroy");
    }
    for (int s = 0; s < STREAMS; ++s) {
        FUZZ_EXPECT(FUZZ_CALL(ordo_stream_destroy, streams[s]), ORDO_OK, "ordo_stream_destroy");
    }
    for (int s = 0; s < STREAMS; ++s) {
        if (gates[s]) {
            FUZZ_EXPECT(FUZZ_CALL(ordo_signal_destroy, gates[s]), ORDO_OK, "ordo_signal_destroy");
        }
    }
    for (int i = 0; i < 2; ++i) {
        FUZZ_EXPECT(FUZZ_CALL(ordo_signal_destroy, sigs[i]), ORDO_OK, "ordo_signal_destroy");
    }
    if (tracing) {
        ordo_trace_stats_t stats;
        FUZZ_EXPECT(FUZZ_CALL(ordo_trace_stop, "/dev/null", &stats), ORDO_OK, "ordo_trace_stop");
    } else {
        ordo_trace_stats_t stats;
        fuzz_sentinel(stats);
        ordo_status_t st = FUZZ_CALL(ordo_trace_stop, NULL, &stats);
        FUZZ_EXPECT(st, ORDO_ERR_INVALID_ARGUMENT, "ordo_trace_stop when tracing is off");
        FUZZ_EMPTY_ON_FAILURE(st, stats, "ordo_trace_stop");
    }
    FUZZ_EXPECT(FUZZ_CALL(ordo_device_release, device), ORDO_OK, "ordo_device_release");
    FUZZ_CHECK_BASELINE(before);
    return 0;
}
