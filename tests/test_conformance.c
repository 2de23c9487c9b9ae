/* The device conformance suite: written once against the HAL, run for
 * every backend compiled in and available here. Each backend may list
 * tests it skips, with the reason (the CPU backend skips nothing). Also
 * the bad input of events, streams and stream pools, and the streams other
 * objects hold, on cpu:0 (tests/refusal.h). */
#include <limits.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>

#include "hal/hal.h"
#include "ordo/stream_pool.h"
#include "stream_probe.h"
#include "test_rescue.h"
#include "refusal.h"
#include "test_util.h"

static char device_name[ORDO_DEVICE_NAME_MAX];
static ordo_device_t *device;

/* Tests a backend cannot honour are listed, with the reason, in
 * tests/conformance_skips.h (the CPU backend skips nothing). */
#define SKIP_IF_LISTED()                                                                           \
    do {                                                                                           \
        if (test_listed_skip(device_name, __FILE__, __func__)) {                                   \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

static ordo_stream_t *stream_make(void) {
    ordo_stream_t *stream = NULL;
    assert_ok(ordo_stream_create(device, 0, &stream));
    return stream;
}

/* ---- host tasks used by the tests ------------------------------------- */

typedef struct log {
    _Atomic uint64_t count;
    uint64_t order[4096];
} log_t;

typedef struct log_entry {
    log_t *log;
    uint64_t index;
} log_entry_t;

static ordo_status_t log_task(void *ctx) {
    log_entry_t *e = ctx;
    uint64_t at = atomic_fetch_add(&e->log->count, 1);
    e->log->order[at] = e->index;
    return ORDO_OK;
}

static ordo_status_t fail_task(void *ctx) {
    (void)ctx;
    return ORDO_ERR_ABORTED;
}

typedef struct gate {
    _Atomic int open;
    _Atomic int entered;
} gate_t;

/* Holds its stream until the gate opens (bounded by the test deadline). */
static ordo_status_t gate_task(void *ctx) {
    gate_t *g = ctx;
    atomic_store(&g->entered, 1);
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&g->open) && ordo_time_now_ns() < deadline) {
        test_sleep_ms(1);
    }
    return atomic_load(&g->open) ? ORDO_OK : ORDO_ERR_TIMEOUT;
}

static ordo_status_t sleep_20ms_task(void *ctx) {
    (void)ctx;
    test_sleep_ms(20);
    return ORDO_OK;
}

static ordo_status_t set_flag_task(void *ctx) {
    atomic_store((_Atomic int *)ctx, 1);
    return ORDO_OK;
}

typedef struct copy {
    _Atomic int *from;
    _Atomic int *to;
} copy_t;

static ordo_status_t copy_task(void *ctx) {
    copy_t *c = ctx;
    atomic_store(c->to, atomic_load(c->from));
    return ORDO_OK;
}

/* ---- streams ------------------------------------------------------------ */

static void in_order_execution(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    log_t *log = calloc(1, sizeof *log);
    log_entry_t *entries = calloc(4096, sizeof *entries);
    for (uint64_t i = 0; i < 4096; ++i) {
        entries[i] = (log_entry_t){log, i};
        assert_ok(ordo_stream_host_task(stream, log_task, &entries[i]));
    }
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_int_equal(atomic_load(&log->count), 4096);
    for (uint64_t i = 0; i < 4096; ++i) {
        assert_int_equal(log->order[i], i);
    }
    assert_ok(ordo_stream_destroy(stream));
    free(entries);
    free(log);
}

static void stream_wait_orders_across_streams(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *a = stream_make();
    ordo_stream_t *b = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    _Atomic int produced = 0;
    _Atomic int seen = -1;
    _Atomic int one = 1;
    copy_t produce = {&one, &produced};
    copy_t consume = {&produced, &seen};
    /* B is told to wait first; A's work is slow. */
    assert_ok(ordo_stream_wait(b, s, 1));
    assert_ok(ordo_stream_host_task(b, copy_task, &consume));
    assert_ok(ordo_stream_host_task(a, sleep_20ms_task, NULL));
    assert_ok(ordo_stream_host_task(a, copy_task, &produce));
    assert_ok(ordo_stream_signal(a, s, 1));
    assert_ok(ordo_stream_synchronize(b, test_deadline()));
    assert_int_equal(atomic_load(&seen), 1);
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
    assert_ok(ordo_signal_destroy(s));
}

static void host_signal_wait_inside_stream(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    _Atomic int flag = 0;
    assert_ok(ordo_stream_wait(stream, s, 5));
    assert_ok(ordo_stream_host_task(stream, set_flag_task, (void *)&flag));
    assert_status(ordo_stream_synchronize(stream, ordo_deadline_after_ms(20)), ORDO_ERR_TIMEOUT);
    assert_int_equal(atomic_load(&flag), 0);
    assert_ok(ordo_signal_advance(s, 5));
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_int_equal(atomic_load(&flag), 1);
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(s));
}

static void failing_task_fails_the_stream(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *before = test_signal_make(0);
    ordo_signal_t *after = test_signal_make(0);
    ordo_event_t *passed = NULL;
    assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &passed));
    _Atomic int ran = 0;
    /* The gate holds the stream until everything is submitted, so no
     * submission meets the failure early. */
    gate_t gate = {0, 0};
    assert_ok(ordo_stream_host_task(stream, gate_task, &gate));
    assert_ok(ordo_stream_signal(stream, before, 1));
    assert_ok(ordo_event_record(passed, stream));
    assert_ok(ordo_stream_host_task(stream, fail_task, NULL));
    assert_ok(ordo_stream_host_task(stream, set_flag_task, (void *)&ran));
    assert_ok(ordo_stream_signal(stream, after, 1));
    atomic_store(&gate.open, 1);
    assert_status(ordo_stream_synchronize(stream, test_deadline()), ORDO_ERR_ABORTED);
    /* The point before the failure was reached; the one after fails. */
    assert_ok(ordo_signal_wait(before, 1, test_deadline()));
    assert_status(ordo_signal_wait(after, 1, test_deadline()), ORDO_ERR_ABORTED);
    assert_int_equal(atomic_load(&ran), 0);
    assert_status(ordo_stream_status(stream), ORDO_ERR_ABORTED);
    bool healthy = 1;
    /* A call that succeeds leaves the thread's message alone, though the
     * stream it reports on has failed (ordo/status.h). */
    (void)ordo_fail(ORDO_ERR_ABORTED, "the caller's own message");
    assert_ok(ordo_stream_is_healthy(stream, &healthy));
    assert_int_equal(healthy, 0);
    assert_string_equal(ordo_error_message(), "the caller's own message");
    /* The event recorded before the failure is complete. */
    bool complete = 0;
    assert_ok(ordo_event_query(passed, &complete));
    assert_true(complete);
    assert_string_equal(ordo_error_message(), "the caller's own message");
    assert_ok(ordo_event_destroy(passed));
    /* Submitting to a failed stream returns its failure; a signal point
     * submitted now fails at once. */
    assert_status(ordo_stream_host_task(stream, set_flag_task, (void *)&ran), ORDO_ERR_ABORTED);
    ordo_signal_t *later = test_signal_make(0);
    assert_status(ordo_stream_signal(stream, later, 1), ORDO_ERR_ABORTED);
    assert_status(ordo_signal_wait(later, 1, ORDO_DEADLINE_NOW), ORDO_ERR_ABORTED);
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(before));
    assert_ok(ordo_signal_destroy(after));
    assert_ok(ordo_signal_destroy(later));
}

static ordo_status_t fail_with_message_task(void *ctx) {
    return ordo_fail(ORDO_ERR_ABORTED, "decoder: bad frame %d", *(const int *)ctx);
}

/* Succeeds after an ordo call on its thread failed: the thread's message
 * is then an old one, which a later failing task must not take as its own. */
static ordo_status_t stale_message_task(void *ctx) {
    (void)ctx;
    (void)ordo_stream_host_task(NULL, fail_task, NULL);
    return ORDO_OK;
}

/* A task that fails with ordo_fail gives the stream's failure its text, so
 * a waiter on a signal after it (here on another stream, through a device
 * wait) gets it; a task that leaves no message keeps the plain text. */
static void failing_task_message_reaches_waiters(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    ordo_stream_t *other = stream_make();
    ordo_signal_t *after = test_signal_make(0);
    ordo_signal_t *relayed = test_signal_make(0);
    ordo_signal_t *plain = test_signal_make(0);
    int frame = 7;
    /* Held until all is submitted, so no submission meets the failure. */
    gate_t gate = {0, 0};
    assert_ok(ordo_stream_host_task(stream, gate_task, &gate));
    assert_ok(ordo_stream_host_task(stream, fail_with_message_task, &frame));
    assert_ok(ordo_stream_signal(stream, after, 1));
    assert_ok(ordo_stream_wait(other, after, 1));
    assert_ok(ordo_stream_signal(other, relayed, 1));
    atomic_store(&gate.open, 1);
    assert_status(ordo_signal_wait(relayed, 1, test_deadline()), ORDO_ERR_ABORTED);
    assert_non_null(strstr(ordo_error_message(), "decoder: bad frame 7"));
    assert_status(ordo_signal_wait(after, 1, test_deadline()), ORDO_ERR_ABORTED);
    assert_non_null(strstr(ordo_error_message(), "decoder: bad frame 7"));
    ordo_status_t failure = ORDO_OK;
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    assert_ok(ordo_signal_failure(after, &failure, message, sizeof message));
    assert_int_equal(failure, ORDO_ERR_ABORTED);
    assert_non_null(strstr(message, "returned ORDO_ERR_ABORTED: decoder: bad frame 7"));
    assert_status(ordo_stream_synchronize(stream, test_deadline()), ORDO_ERR_ABORTED);
    assert_non_null(strstr(ordo_error_message(), "decoder: bad frame 7"));
    assert_ok(ordo_stream_destroy(stream));

    /* No message of its own: the plain text, not the thread's older one. */
    stream = stream_make();
    gate_t second = {0, 0};
    assert_ok(ordo_stream_host_task(stream, gate_task, &second));
    assert_ok(ordo_stream_host_task(stream, stale_message_task, NULL));
    assert_ok(ordo_stream_host_task(stream, fail_task, NULL));
    assert_ok(ordo_stream_signal(stream, plain, 1));
    atomic_store(&second.open, 1);
    assert_status(ordo_signal_wait(plain, 1, test_deadline()), ORDO_ERR_ABORTED);
    assert_ok(ordo_signal_failure(plain, &failure, message, sizeof message));
    const char *tail = "returned ORDO_ERR_ABORTED";
    assert_true(strlen(message) > strlen(tail));
    assert_string_equal(message + strlen(message) - strlen(tail), tail);
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_stream_destroy(other));
    assert_ok(ordo_signal_destroy(after));
    assert_ok(ordo_signal_destroy(relayed));
    assert_ok(ordo_signal_destroy(plain));
}

/* Returns a value that is no ordo status, after failing an ordo call if
 * ctx is set (its message is then the task's text). */
static ordo_status_t foreign_value_task(void *ctx) {
    if (ctx) {
        (void)ordo_fail(ORDO_ERR_INTERNAL, "decoder: lost");
    }
    return (ordo_status_t)12345;
}

/* A host task that returns a value that is no ordo status fails its stream
 * with ORDO_ERR_ABORTED, and the message gives the value. */
static void a_task_returning_no_status_aborts_its_stream(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    for (int with_text = 0; with_text < 2; ++with_text) {
        ordo_stream_t *stream = stream_make();
        ordo_signal_t *after = test_signal_make(0);
        /* Held until the signal behind the task is queued: on a stream
         * that has failed it would be refused. */
        ordo_signal_t *gate = test_signal_make(0);
        assert_ok(ordo_stream_wait(stream, gate, 1));
        assert_ok(ordo_stream_host_task(stream, foreign_value_task, with_text ? &with_text : NULL));
        assert_ok(ordo_stream_signal(stream, after, 1));
        assert_ok(ordo_signal_advance(gate, 1));
        assert_status(ordo_stream_synchronize(stream, test_deadline()), ORDO_ERR_ABORTED);
        /* The signal behind the task fails a little later on a device's
         * stream (its watcher passes the failure on). */
        assert_status(ordo_signal_wait(after, 1, test_deadline()), ORDO_ERR_ABORTED);
        ordo_status_t failure = ORDO_OK;
        char message[ORDO_SIGNAL_MESSAGE_MAX];
        assert_ok(ordo_signal_failure(after, &failure, message, sizeof message));
        assert_int_equal(failure, ORDO_ERR_ABORTED);
        const char *expected = with_text ? "returned 12345, not an ordo status (ORDO_ERR_ABORTED): "
                                           "decoder: lost"
                                         : "returned 12345, not an ordo status (ORDO_ERR_ABORTED)";
        const char *at = strstr(message, "host task ");
        if (!at || strcmp(strchr(at + strlen("host task "), ' ') + 1, expected) != 0) {
            fail_msg("failure message \"%s\", not \"host task N %s\"", message, expected);
        }
        assert_ok(ordo_stream_destroy(stream));
        assert_ok(ordo_signal_destroy(after));
        assert_ok(ordo_signal_destroy(gate));
    }
}

/* A failure passed along a pipeline of streams keeps its own words: each
 * stream that failed by waiting reads one wait prefix before the failing
 * task's text (not before the previous stream's, which cut the text short
 * after two or three hops). */
static void a_failure_keeps_its_text_along_a_pipeline(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    enum { N = 5 };
    ordo_stream_t *s[N];
    ordo_signal_t *out[N];
    for (int i = 0; i < N; ++i) {
        s[i] = stream_make();
        out[i] = test_signal_make(0);
    }
    int frame = 7;
    gate_t gate = {0, 0}; /* every wait queued before the failure */
    assert_ok(ordo_stream_host_task(s[0], gate_task, &gate));
    assert_ok(ordo_stream_host_task(s[0], fail_with_message_task, &frame));
    assert_ok(ordo_stream_signal(s[0], out[0], 1));
    for (int i = 1; i < N; ++i) {
        assert_ok(ordo_stream_wait(s[i], out[i - 1], 1));
        assert_ok(ordo_stream_signal(s[i], out[i], 1));
    }
    atomic_store(&gate.open, 1);
    for (int i = 0; i < N; ++i) {
        assert_status(ordo_stream_synchronize(s[i], test_deadline()), ORDO_ERR_ABORTED);
        const char *message = ordo_error_message();
        if (!strstr(message, "decoder: bad frame 7")) {
            fail_msg("stream %d lost the failure's text: %s", i, message);
        }
        const char *wait = strstr(message, "waited-on signal");
        if (i == 0 ? wait != NULL : !wait || strstr(wait + 1, "waited-on signal")) {
            fail_msg("stream %d: not one wait prefix: %s", i, message);
        }
    }
    for (int i = 0; i < N; ++i) {
        assert_ok(ordo_stream_destroy(s[i]));
        assert_ok(ordo_signal_destroy(out[i]));
    }
}

static void failure_propagates_to_other_streams(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *a = stream_make();
    ordo_stream_t *b = stream_make();
    ordo_stream_t *c = stream_make();
    ordo_signal_t *ab = test_signal_make(0);
    ordo_signal_t *bc = test_signal_make(0);
    ordo_signal_t *end = test_signal_make(0);
    assert_ok(ordo_stream_wait(c, bc, 1));
    assert_ok(ordo_stream_signal(c, end, 1));
    assert_ok(ordo_stream_wait(b, ab, 1));
    assert_ok(ordo_stream_signal(b, bc, 1));
    gate_t gate = {0, 0};
    assert_ok(ordo_stream_host_task(a, gate_task, &gate));
    assert_ok(ordo_stream_host_task(a, fail_task, NULL));
    assert_ok(ordo_stream_signal(a, ab, 1));
    atomic_store(&gate.open, 1);
    /* Nothing hangs: the failure reaches the end of the chain. */
    assert_status(ordo_signal_wait(end, 1, test_deadline()), ORDO_ERR_ABORTED);
    assert_status(ordo_stream_synchronize(c, test_deadline()), ORDO_ERR_ABORTED);
    assert_status(ordo_stream_status(b), ORDO_ERR_ABORTED);
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
    assert_ok(ordo_stream_destroy(c));
    assert_ok(ordo_signal_destroy(ab));
    assert_ok(ordo_signal_destroy(bc));
    assert_ok(ordo_signal_destroy(end));
}

static void host_failure_fails_a_waiting_stream(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    assert_ok(ordo_stream_wait(stream, s, 1));
    assert_ok(ordo_signal_fail(s, ORDO_ERR_DEVICE, "upstream broke"));
    assert_status(ordo_stream_synchronize(stream, test_deadline()), ORDO_ERR_DEVICE);
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(s));
}

/* A stream failed by its wait passes the waited-on signal's failure on,
 * message included, even with ORDO_ERR_CANCELLED (which a destroy also
 * gives): the signal it would have signalled next says what happened. */
static void cancelled_failure_reaches_a_waiting_stream_with_its_message(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    ordo_signal_t *after = test_signal_make(0);
    assert_ok(ordo_stream_wait(stream, s, 1));
    assert_ok(ordo_stream_signal(stream, after, 1));
    assert_ok(ordo_signal_fail(s, ORDO_ERR_CANCELLED, "decoder crashed"));
    assert_status(ordo_stream_synchronize(stream, test_deadline()), ORDO_ERR_CANCELLED);
    assert_status(ordo_signal_wait(after, 1, test_deadline()), ORDO_ERR_CANCELLED);
    ordo_status_t failure;
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    assert_ok(ordo_signal_failure(after, &failure, message, sizeof message));
    assert_int_equal(failure, ORDO_ERR_CANCELLED);
    if (!strstr(message, "waited-on signal failed") || !strstr(message, "decoder crashed")) {
        fail_msg("the stream's failure says \"%s\"", message);
    }
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(s));
    assert_ok(ordo_signal_destroy(after));
}

/* ---- events ------------------------------------------------------------- */

static void event_record_query_synchronize(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    ordo_event_t *event;
    assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &event));
    gate_t gate = {0, 0};
    assert_ok(ordo_stream_host_task(stream, gate_task, &gate));
    assert_ok(ordo_event_record(event, stream));
    bool complete = 1;
    assert_ok(ordo_event_query(event, &complete));
    assert_int_equal(complete, 0);
    assert_status(ordo_event_synchronize(event, ordo_deadline_after_ms(10)), ORDO_ERR_TIMEOUT);
    atomic_store(&gate.open, 1);
    assert_ok(ordo_event_synchronize(event, test_deadline()));
    assert_ok(ordo_event_query(event, &complete));
    assert_int_equal(complete, 1);
    /* Re-recording moves the event to a new point. */
    atomic_store(&gate.open, 0);
    assert_ok(ordo_stream_host_task(stream, gate_task, &gate));
    assert_ok(ordo_event_record(event, stream));
    assert_ok(ordo_event_query(event, &complete));
    assert_int_equal(complete, 0);
    atomic_store(&gate.open, 1);
    assert_ok(ordo_event_synchronize(event, test_deadline()));
    assert_ok(ordo_event_destroy(event));
    assert_ok(ordo_stream_destroy(stream));
}

static void stream_waits_on_an_event(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *a = stream_make();
    ordo_stream_t *b = stream_make();
    ordo_event_t *event;
    assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &event));
    _Atomic int produced = 0;
    _Atomic int seen = -1;
    _Atomic int one = 1;
    copy_t produce = {&one, &produced};
    copy_t consume = {&produced, &seen};
    assert_ok(ordo_stream_host_task(a, sleep_20ms_task, NULL));
    assert_ok(ordo_stream_host_task(a, copy_task, &produce));
    assert_ok(ordo_event_record(event, a));
    assert_ok(ordo_stream_wait_event(b, event));
    assert_ok(ordo_stream_host_task(b, copy_task, &consume));
    assert_ok(ordo_stream_synchronize(b, test_deadline()));
    assert_int_equal(atomic_load(&seen), 1);
    assert_ok(ordo_event_destroy(event));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
}

static void timing_events_measure_elapsed_time(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    ordo_event_t *start;
    ordo_event_t *end;
    assert_ok(ordo_event_create(device, ORDO_EVENT_TIMING, &start));
    assert_ok(ordo_event_create(device, ORDO_EVENT_TIMING, &end));
    assert_ok(ordo_event_record(start, stream));
    assert_ok(ordo_stream_host_task(stream, sleep_20ms_task, NULL));
    assert_ok(ordo_event_record(end, stream));
    assert_ok(ordo_event_synchronize(end, test_deadline()));
    int64_t ns = 0;
    assert_ok(ordo_event_elapsed_ns(start, end, &ns));
    assert_true(ns >= 20000000);
    assert_true(ns < (int64_t)TEST_WAIT_MS * 1000000);
    /* Plain events carry no time. */
    ordo_event_t *plain;
    assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &plain));
    assert_ok(ordo_event_record(plain, stream));
    assert_ok(ordo_event_synchronize(plain, test_deadline()));
    assert_status(ordo_event_elapsed_ns(start, plain, &ns), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_event_destroy(plain));
    assert_ok(ordo_event_destroy(start));
    assert_ok(ordo_event_destroy(end));
    assert_ok(ordo_stream_destroy(stream));
}

/* A record of a timing event held back on one stream (behind a wait) and
 * issued after the event was recorded again on another stream does not
 * move the event: its time stays the newer record's. */
static void a_late_older_record_does_not_move_a_timing_event(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *held = stream_make(), *other = stream_make();
    ordo_signal_t *gate = test_signal_make(0);
    ordo_event_t *start, *end;
    assert_ok(ordo_event_create(device, ORDO_EVENT_TIMING, &start));
    assert_ok(ordo_event_create(device, ORDO_EVENT_TIMING, &end));
    assert_ok(ordo_stream_wait(held, gate, 1));
    assert_ok(ordo_event_record(end, held)); /* the older record, held back */
    assert_ok(ordo_event_record(start, other));
    assert_ok(ordo_event_record(end, other)); /* end now stands for this one */
    assert_ok(ordo_event_synchronize(end, test_deadline()));
    int64_t before = 0, after = 0;
    assert_ok(ordo_event_elapsed_ns(start, end, &before));
    sleep_20ms_task(NULL);
    sleep_20ms_task(NULL);
    assert_ok(ordo_signal_advance(gate, 1)); /* the held record is issued now */
    assert_ok(ordo_stream_synchronize(held, test_deadline()));
    assert_ok(ordo_event_elapsed_ns(start, end, &after));
    assert_true(after - before < 20000000 && before - after < 20000000);
    assert_ok(ordo_event_destroy(start));
    assert_ok(ordo_event_destroy(end));
    assert_ok(ordo_stream_destroy(held));
    assert_ok(ordo_stream_destroy(other));
    assert_ok(ordo_signal_destroy(gate));
}

/* A newer record refused after an older one was passed keeps the older
 * one's stamp: the event stands for it again (hal.h, generation). */
static void a_refused_record_keeps_the_older_stamp(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_event_t *event;
    assert_ok(ordo_event_create(device, ORDO_EVENT_TIMING, &event));
    uint64_t older = ordo__hal_event_record_begin(event);
    uint64_t newer = ordo__hal_event_record_begin(event);
    ordo__hal_event_record_reached(event, older, 1); /* passed meanwhile */
    ordo__hal_event_record_abort(event, newer);      /* the newer one refused */
    assert_true(atomic_load(&event->reached_ns) != 0);
    assert_int_equal(event->stamped_generation, event->generation);
    /* And an older record passed after a newer one does not stamp. */
    older = ordo__hal_event_record_begin(event);
    newer = ordo__hal_event_record_begin(event);
    ordo__hal_event_record_reached(event, newer, 1);
    uint64_t stamp = atomic_load(&event->reached_ns);
    ordo__hal_event_record_reached(event, older, 1);
    assert_int_equal(atomic_load(&event->reached_ns), stamp);
    assert_int_equal(event->stamped_generation, newer);
    assert_ok(ordo_event_destroy(event));
}

static void unrecorded_events_are_refused(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    ordo_event_t *event;
    assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &event));
    bool complete;
    assert_status(ordo_event_query(event, &complete), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_event_synchronize(event, ORDO_DEADLINE_NOW), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stream_wait_event(stream, event), ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "never recorded"));
    assert_ok(ordo_event_destroy(event));
    assert_ok(ordo_stream_destroy(stream));
}

static void event_pool_reuses_events(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_event_pool_stats_t before;
    ordo_event_pool_stats_t after;
    assert_ok(ordo_device_event_pool_stats(device, ORDO_EVENT_PLAIN, &before));
    ordo_event_t *events[16];
    for (int round = 0; round < 100; ++round) {
        for (int i = 0; i < 16; ++i) {
            assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &events[i]));
        }
        for (int i = 0; i < 16; ++i) {
            assert_ok(ordo_event_destroy(events[i]));
        }
    }
    assert_ok(ordo_device_event_pool_stats(device, ORDO_EVENT_PLAIN, &after));
    assert_int_equal(after.in_use, before.in_use);
    assert_true(after.created_total - before.created_total <= 16);
    assert_true(after.high_water >= 16);
    /* A destroyed event is refused, not corrupted. */
    assert_status(ordo_event_destroy(events[0]), ORDO_ERR_INVALID_HANDLE);
}

/* ---- concurrency and lifetime ------------------------------------------- */

#define SUBMITTERS 4

typedef struct submitter {
    ordo_stream_t *stream;
    uint64_t tasks;
    uint64_t next_expected; /* touched only by the stream's tasks */
    _Atomic uint64_t out_of_order;
    _Atomic int errors;
} submitter_t;

typedef struct ordered_ctx {
    submitter_t *sub;
    uint64_t index;
} ordered_ctx_t;

/* Tasks of one submitter must run in that submitter's order. */
static ordo_status_t ordered_task(void *ctx) {
    ordered_ctx_t *c = ctx;
    if (c->index != c->sub->next_expected) {
        atomic_fetch_add(&c->sub->out_of_order, 1);
    }
    c->sub->next_expected = c->index + 1;
    return ORDO_OK;
}

static void *submit_many(void *arg) {
    submitter_t *sub = arg;
    ordered_ctx_t *ctxs = calloc(sub->tasks, sizeof *ctxs);
    for (uint64_t i = 0; i < sub->tasks; ++i) {
        ctxs[i] = (ordered_ctx_t){sub, i};
        if (ordo_stream_host_task(sub->stream, ordered_task, &ctxs[i]) != ORDO_OK) {
            atomic_fetch_add(&sub->errors, 1);
        }
    }
    if (ordo_stream_synchronize(sub->stream, test_deadline()) != ORDO_OK) {
        atomic_fetch_add(&sub->errors, 1);
    }
    free(ctxs);
    return NULL;
}

static void concurrent_submission(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    submitter_t subs[SUBMITTERS];
    pthread_t threads[SUBMITTERS];
    for (int i = 0; i < SUBMITTERS; ++i) {
        memset(&subs[i], 0, sizeof subs[i]);
        subs[i].stream = stream;
        subs[i].tasks = test_scaled(20000);
        threads[i] = test_thread_start(submit_many, &subs[i]);
    }
    for (int i = 0; i < SUBMITTERS; ++i) {
        pthread_join(threads[i], NULL);
    }
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    for (int i = 0; i < SUBMITTERS; ++i) {
        assert_int_equal(atomic_load(&subs[i].errors), 0);
        assert_int_equal(atomic_load(&subs[i].out_of_order), 0);
        assert_int_equal(subs[i].next_expected, subs[i].tasks);
    }
    assert_ok(ordo_stream_destroy(stream));
}

/* Holds its stream until that stream's destroy has begun (bounded by the
 * test deadline): the destroy then drops what is queued behind it. */
typedef struct destroy_gate {
    ordo_stream_t *stream;
    _Atomic int entered;
    _Atomic int saw_destroy;
} destroy_gate_t;

static ordo_status_t until_destroyed_task(void *ctx) {
    destroy_gate_t *g = ctx;
    atomic_store(&g->entered, 1);
    atomic_store(&g->saw_destroy, test_stream_await_destroy(g->stream));
    return ORDO_OK;
}

static void destroy_with_work_pending(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    destroy_gate_t gate = {stream, 0, 0};
    _Atomic int ran = 0;
    assert_ok(ordo_stream_host_task(stream, until_destroyed_task, &gate));
    assert_ok(ordo_stream_host_task(stream, set_flag_task, (void *)&ran));
    assert_ok(ordo_stream_signal(stream, s, 1));
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&gate.entered)) {
        assert_true(ordo_time_now_ns() < deadline);
    }
    /* The running task finishes once the destroy has begun; what was
     * queued behind it is dropped. */
    assert_ok(ordo_stream_destroy(stream));
    assert_true(atomic_load(&gate.saw_destroy));
    assert_int_equal(atomic_load(&ran), 0);
    assert_status(ordo_signal_wait(s, 1, test_deadline()), ORDO_ERR_CANCELLED);
    assert_ok(ordo_signal_destroy(s));
}

static void destroy_while_waiting_on_a_signal(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *never = test_signal_make(0);
    ordo_signal_t *after = test_signal_make(0);
    assert_ok(ordo_stream_wait(stream, never, 1));
    assert_ok(ordo_stream_signal(stream, after, 1));
    test_sleep_ms(5);
    /* The destroy cancels the wait: it does not wait for `never`. */
    test_rescue_t rescue;
    test_rescue_begin(&rescue, never, 1);
    assert_ok(ordo_stream_destroy(stream));
    assert_false(test_rescue_end(&rescue));
    assert_status(ordo_signal_wait(after, 1, test_deadline()), ORDO_ERR_CANCELLED);
    assert_ok(ordo_signal_destroy(never));
    assert_ok(ordo_signal_destroy(after));
}

static void destroy_right_after_submission(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    /* Every point submitted before a destroy ends reached or failed:
     * never pending, whatever the worker was doing when destroy came. */
    for (int round = 0; round < (int)test_scaled(400); ++round) {
        ordo_stream_t *stream = stream_make();
        ordo_signal_t *s = test_signal_make(0);
        ordo_event_t *event;
        assert_ok(ordo_event_create(device, ORDO_EVENT_TIMING, &event));
        assert_ok(ordo_event_record(event, stream));
        assert_ok(ordo_stream_signal(stream, s, 1));
        assert_ok(ordo_event_destroy(event)); /* its record may be pending */
        assert_ok(ordo_stream_destroy(stream));
        ordo_status_t st = ordo_signal_wait(s, 1, test_deadline());
        assert_true(st == ORDO_OK || st == ORDO_ERR_CANCELLED);
        assert_ok(ordo_signal_destroy(s));
    }
    ordo_event_pool_stats_t stats;
    assert_ok(ordo_device_event_pool_stats(device, ORDO_EVENT_TIMING, &stats));
    assert_int_equal(stats.in_use, 0);
}

static void wait_on_a_signal_destroyed_before_the_stream_reaches_it(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    ordo_signal_t *never = test_signal_make(0);
    ordo_signal_t *reached = test_signal_make(5);
    _Atomic int ran = 0;
    gate_t gate = {0, 0};
    assert_ok(ordo_stream_host_task(stream, gate_task, &gate));
    assert_ok(ordo_stream_wait(stream, reached, 5));
    assert_ok(ordo_stream_wait(stream, never, 1));
    assert_ok(ordo_stream_host_task(stream, set_flag_task, (void *)&ran));
    assert_ok(ordo_signal_destroy(reached)); /* reached first: stays reached */
    assert_ok(ordo_signal_destroy(never));   /* the stream holds it alive */
    atomic_store(&gate.open, 1);
    assert_status(ordo_stream_synchronize(stream, test_deadline()), ORDO_ERR_CANCELLED);
    assert_int_equal(atomic_load(&ran), 0);
    assert_ok(ordo_stream_destroy(stream));
}

static void event_destroyed_with_a_pending_record(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_event_pool_stats_t before;
    ordo_event_pool_stats_t after;
    assert_ok(ordo_device_event_pool_stats(device, ORDO_EVENT_PLAIN, &before));
    ordo_stream_t *stream = stream_make();
    gate_t gate = {0, 0};
    ordo_event_t *event;
    assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &event));
    assert_ok(ordo_stream_host_task(stream, gate_task, &gate));
    assert_ok(ordo_event_record(event, stream));
    assert_ok(ordo_event_destroy(event));
    assert_status(ordo_event_destroy(event), ORDO_ERR_INVALID_HANDLE);
    assert_ok(ordo_device_event_pool_stats(device, ORDO_EVENT_PLAIN, &after));
    assert_int_equal(after.in_use, before.in_use + 1); /* back when reached */
    atomic_store(&gate.open, 1);
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_ok(ordo_device_event_pool_stats(device, ORDO_EVENT_PLAIN, &after));
    assert_int_equal(after.in_use, before.in_use);
    assert_ok(ordo_stream_destroy(stream));
}

/* Events destroyed behind their records come back to the pool on the
 * stream's thread; they went into that thread's cache, which only it would
 * take from (a worker never creates events), so every later create made a
 * new event while the pool's sat there. */
static void events_destroyed_behind_their_records_are_reused(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    enum { STREAMS = 4, PER_STREAM = 4, ROUNDS = 20 };
    ordo_stream_t *streams[STREAMS];
    for (int i = 0; i < STREAMS; ++i) {
        streams[i] = stream_make();
    }
    ordo_event_pool_stats_t before;
    ordo_event_pool_stats_t after;
    assert_ok(ordo_device_event_pool_stats(device, ORDO_EVENT_PLAIN, &before));
    for (int round = 0; round < ROUNDS; ++round) {
        gate_t gates[STREAMS];
        for (int i = 0; i < STREAMS; ++i) {
            gates[i] = (gate_t){0, 0};
            assert_ok(ordo_stream_host_task(streams[i], gate_task, &gates[i]));
            for (int k = 0; k < PER_STREAM; ++k) {
                ordo_event_t *event;
                assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &event));
                assert_ok(ordo_event_record(event, streams[i]));
                assert_ok(ordo_event_destroy(event)); /* back when the record is passed */
            }
        }
        for (int i = 0; i < STREAMS; ++i) {
            atomic_store(&gates[i].open, 1);
            assert_ok(ordo_stream_synchronize(streams[i], test_deadline()));
        }
    }
    assert_ok(ordo_device_event_pool_stats(device, ORDO_EVENT_PLAIN, &after));
    assert_int_equal(after.in_use, before.in_use);
    /* 320 creates; one round's worth of events (and a batch) suffices. */
    uint64_t made = after.created_total - before.created_total;
    if (made > 2 * STREAMS * PER_STREAM + 64) {
        fail_msg("%llu events made for %d creates of at most %d at once", (unsigned long long)made,
                 STREAMS * PER_STREAM * ROUNDS, STREAMS * PER_STREAM);
    }
    for (int i = 0; i < STREAMS; ++i) {
        assert_ok(ordo_stream_destroy(streams[i]));
    }
}

/* ---- bad input ---------------------------------------------------------- */

static ordo_status_t noop_task(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

/* What a host task or a callback on a stream's own thread got when it
 * tried to destroy that stream (or its pool). */
typedef struct self_destroy {
    ordo_stream_t *stream;
    ordo_stream_pool_t *pool;
    _Atomic ordo_status_t status;
    _Atomic int ran;
} self_destroy_t;

static ordo_status_t self_destroy_task(void *ctx) {
    self_destroy_t *d = ctx;
    ordo_status_t st = d->pool ? ordo_stream_pool_destroy(d->pool) : ordo_stream_destroy(d->stream);
    atomic_store(&d->status, st);
    atomic_store(&d->ran, 1);
    return ORDO_OK;
}

static void self_destroy_callback(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status, (void)timepoint;
    (void)self_destroy_task(ctx);
}

/* A stream's own thread cannot synchronize it (the work before the call
 * includes the very task): refused, where it used to wait until its
 * deadline, or for ever. */
static ordo_status_t self_synchronize_task(void *ctx) {
    self_destroy_t *d = ctx;
    atomic_store(&d->status, ordo_stream_synchronize(d->stream, ORDO_DEADLINE_NEVER));
    atomic_store(&d->ran, 1);
    return ORDO_OK;
}

static void synchronize_from_the_streams_own_thread_is_refused(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_stream_t *stream = stream_make();
    self_destroy_t d = {stream, NULL, ORDO_OK, 0};
    assert_ok(ordo_stream_host_task(stream, self_synchronize_task, &d));
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_true(atomic_load(&d.ran));
    assert_int_equal(atomic_load(&d.status), ORDO_ERR_BUSY);
    assert_ok(ordo_stream_status(stream));
    assert_ok(ordo_stream_destroy(stream));
}

/* A stream's own thread cannot destroy it (the destroy would wait for that
 * thread): refused, and the stream goes on working. */
static void destroy_from_the_streams_own_thread_is_refused(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    /* From a host task. */
    ordo_stream_t *stream = stream_make();
    self_destroy_t d = {stream, NULL, ORDO_OK, 0};
    assert_ok(ordo_stream_host_task(stream, self_destroy_task, &d));
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_true(atomic_load(&d.ran));
    assert_int_equal(atomic_load(&d.status), ORDO_ERR_BUSY);
    assert_ok(ordo_stream_status(stream));

    /* From a callback of a signal the stream raises. */
    ordo_signal_t *s = test_signal_make(0);
    ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
    self_destroy_t c = {stream, NULL, ORDO_OK, 0};
    assert_ok(ordo_timepoint_arm(&tp, s, 1, self_destroy_callback, &c));
    assert_ok(ordo_stream_signal(stream, s, 1));
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&c.ran) && ordo_time_now_ns() < deadline) {
        sched_yield();
    }
    assert_true(atomic_load(&c.ran));
    assert_int_equal(atomic_load(&c.status), ORDO_ERR_BUSY);
    assert_ok(ordo_stream_host_task(stream, noop_task, NULL));
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    assert_ok(ordo_stream_destroy(stream));
    assert_ok(ordo_signal_destroy(s));

    /* A pool destroyed from a host task on one of its streams: refused as
     * a whole, every stream still usable. */
    const ordo_stream_pool_config_t config = {2, 0, 1, 0, 0};
    ordo_stream_pool_t *pool;
    assert_ok(ordo_stream_pool_create(device, &config, &pool));
    ordo_stream_t *member;
    assert_ok(ordo_stream_pool_next(pool, ORDO_WORKLOAD_TRANSFER, &member));
    self_destroy_t p = {member, pool, ORDO_OK, 0};
    assert_ok(ordo_stream_host_task(member, self_destroy_task, &p));
    assert_ok(ordo_stream_synchronize(member, test_deadline()));
    assert_int_equal(atomic_load(&p.status), ORDO_ERR_BUSY);
    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_stream_pool_next(pool, ORDO_WORKLOAD_ANY, &member));
        assert_ok(ordo_stream_host_task(member, noop_task, NULL));
        assert_ok(ordo_stream_synchronize(member, test_deadline()));
    }
    assert_ok(ordo_stream_pool_destroy(pool));
}

static void bad_input_is_refused(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_device_info_t info;
    assert_ok(ordo_device_info(device, &info));
    ordo_stream_t *stream = NULL;
    assert_status(ordo_stream_create(NULL, 0, &stream), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_stream_create(device, 0, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stream_create(device, info.priority_least + 1, &stream),
                  ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_stream_create(device, info.priority_greatest - 1, &stream),
                  ORDO_ERR_OUT_OF_RANGE);
    assert_null(stream);
    stream = stream_make();
    ordo_signal_t *s = test_signal_make(0);
    assert_status(ordo_stream_host_task(NULL, noop_task, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_stream_host_task(stream, NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stream_signal(stream, NULL, 1), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_stream_signal(stream, s, ORDO_SIGNAL_VALUE_MAX + 1), ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_stream_wait(stream, NULL, 1), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_stream_wait(NULL, s, 1), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_stream_synchronize(NULL, ORDO_DEADLINE_NOW), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_stream_status(NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_stream_is_healthy(stream, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stream_priority(stream, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stream_device(stream, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stream_destroy(NULL), ORDO_ERR_INVALID_HANDLE);
    /* A destroyed signal is refused by stream signal and wait. */
    assert_ok(ordo_signal_retain(s));
    assert_ok(ordo_signal_destroy(s));
    assert_status(ordo_stream_signal(stream, s, 1), ORDO_ERR_DESTROYED);
    assert_status(ordo_stream_wait(stream, s, 1), ORDO_ERR_DESTROYED);
    assert_ok(ordo_signal_release(s));

    ordo_event_t *event = NULL;
    assert_status(ordo_event_create(NULL, ORDO_EVENT_PLAIN, &event), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_event_create(device, (ordo_event_kind_t)7, &event),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_event_create(device, ORDO_EVENT_PLAIN, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_event_create(device, ORDO_EVENT_PLAIN, &event));
    assert_status(ordo_event_record(NULL, stream), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_event_record(event, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_ok(ordo_event_record(event, stream));
    assert_status(ordo_event_query(event, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_event_elapsed_ns(event, event, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stream_wait_event(NULL, event), ORDO_ERR_INVALID_HANDLE);
    assert_ok(ordo_stream_synchronize(stream, test_deadline()));
    /* An event of another device runtime cannot be recorded here. */
    ordo_device_t *owned;
    assert_ok(ordo_device_create_owned(device_name, NULL, &owned));
    ordo_stream_t *foreign;
    assert_ok(ordo_stream_create(owned, 0, &foreign));
    assert_status(ordo_event_record(event, foreign), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_stream_destroy(foreign));
    assert_ok(ordo_device_release(owned));
    assert_ok(ordo_event_destroy(event));
    assert_ok(ordo_stream_destroy(stream));
}

static void priorities_within_range(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_device_info_t info;
    assert_ok(ordo_device_info(device, &info));
    assert_true(info.priority_greatest <= info.priority_least);
    for (int p = info.priority_greatest; p <= info.priority_least; ++p) {
        ordo_stream_t *stream;
        assert_ok(ordo_stream_create(device, p, &stream));
        int got;
        assert_ok(ordo_stream_priority(stream, &got));
        assert_int_equal(got, p);
        assert_ok(ordo_stream_host_task(stream, noop_task, NULL));
        assert_ok(ordo_stream_synchronize(stream, test_deadline()));
        assert_ok(ordo_stream_destroy(stream));
    }
}

static void stream_pool_honours_classes_and_priorities(void **state) {
    (void)state;
    SKIP_IF_LISTED();
    ordo_device_info_t info;
    assert_ok(ordo_device_info(device, &info));
    ordo_stream_pool_config_t config = {3, info.priority_greatest, 2, info.priority_least, 0};
    const ordo_stream_pool_config_t shared_config = {2, 0, 0, 0, 0};
    ordo_stream_pool_t *pool;
    assert_ok(ordo_stream_pool_create(device, &config, &pool));
    size_t n;
    assert_ok(ordo_stream_pool_size(pool, ORDO_WORKLOAD_ANY, &n));
    assert_int_equal(n, 5);
    ordo_stream_t *seen[3] = {NULL, NULL, NULL};
    for (int i = 0; i < 6; ++i) {
        ordo_stream_t *s;
        int priority;
        assert_ok(ordo_stream_pool_next(pool, ORDO_WORKLOAD_COMPUTE, &s));
        assert_ok(ordo_stream_priority(s, &priority));
        assert_int_equal(priority, info.priority_greatest);
        if (i < 3) {
            seen[i] = s;
        } else {
            assert_ptr_equal(s, seen[i - 3]); /* round-robin */
        }
        assert_ok(ordo_stream_pool_next(pool, ORDO_WORKLOAD_TRANSFER, &s));
        assert_ok(ordo_stream_priority(s, &priority));
        assert_int_equal(priority, info.priority_least);
        assert_ok(ordo_stream_host_task(s, noop_task, NULL));
    }
    assert_ptr_not_equal(seen[0], seen[1]);
    assert_ptr_not_equal(seen[1], seen[2]);
    ordo_stream_t *s = NULL;
    assert_status(ordo_stream_pool_next(pool, (ordo_workload_t)9, &s), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stream_pool_next(NULL, ORDO_WORKLOAD_ANY, &s), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_stream_pool_next(pool, ORDO_WORKLOAD_ANY, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stream_pool_size(pool, ORDO_WORKLOAD_ANY, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stream_pool_size(NULL, ORDO_WORKLOAD_ANY, &n), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_stream_pool_destroy(NULL), ORDO_ERR_INVALID_HANDLE);
    assert_ok(ordo_stream_pool_destroy(pool));

    ordo_stream_pool_config_t bad = {0, 0, 1, 0, 0};
    assert_status(ordo_stream_pool_create(device, &bad, &pool), ORDO_ERR_INVALID_ARGUMENT);
    bad = (ordo_stream_pool_config_t){SIZE_MAX, 0, 2, 0, 0}; /* would wrap a sum */
    assert_status(ordo_stream_pool_create(device, &bad, &pool), ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_stream_pool_create(NULL, &shared_config, &pool), ORDO_ERR_INVALID_HANDLE);
    bad = (ordo_stream_pool_config_t){1, info.priority_greatest - 1, 0, 0, 0};
    assert_status(ordo_stream_pool_create(device, &bad, &pool), ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_stream_pool_create(device, &shared_config, NULL), ORDO_ERR_INVALID_ARGUMENT);
    /* No config: the defaults, one compute stream. */
    assert_ok(ordo_stream_pool_create(device, NULL, &pool));
    size_t count = 0;
    assert_ok(ordo_stream_pool_size(pool, ORDO_WORKLOAD_COMPUTE, &count));
    assert_int_equal(count, 1);
    assert_ok(ordo_stream_pool_destroy(pool));
    /* Without transfer streams, transfers share the compute streams. */
    assert_ok(ordo_stream_pool_create(device, &shared_config, &pool));
    assert_ok(ordo_stream_pool_size(pool, ORDO_WORKLOAD_TRANSFER, &n));
    assert_int_equal(n, 2);
    assert_ok(ordo_stream_pool_destroy(pool));
}

/* ---- bad input: event.h (tests/refusal.h) */

static void event_entry_points_refuse_bad_input(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(device_name);
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    ordo_event_t *e = (ordo_event_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, e, ordo_event_create, NULL, ORDO_EVENT_PLAIN, &e);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, e, ordo_event_create, AS(ordo_device_t, f.s[0]),
                   ORDO_EVENT_PLAIN, &e);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, e, ordo_event_create, f.device, (ordo_event_kind_t)2,
                   &e);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, e, ordo_event_create, f.device, (ordo_event_kind_t)-1,
                   &e);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_event_create, f.device, ORDO_EVENT_PLAIN, NULL);

    ordo_event_t *plain = NULL, *timing = NULL, *foreign = NULL;
    assert_ok(ordo_event_create(f.device, ORDO_EVENT_PLAIN, &plain));
    assert_ok(ordo_event_create(f.device, ORDO_EVENT_TIMING, &timing));
    assert_ok(ordo_event_create(f.other, ORDO_EVENT_PLAIN, &foreign));

    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_event_destroy, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_event_destroy, AS(ordo_event_t, f.s[0]));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_event_destroy, GARBAGE(ordo_event_t));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_event_record, NULL, f.s[0]);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_event_record, plain, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_event_record, AS(ordo_event_t, f.s[0]), f.s[0]);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_event_record, plain, AS(ordo_stream_t, plain));
    /* The stream must be of the event's device. */
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_event_record, plain, f.foreign);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_event_record, foreign, f.s[0]);

    /* Never recorded: refused, never treated as complete. */
    bool complete = 5;
    int64_t ns = 5;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, complete, ordo_event_query, plain, &complete);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_event_synchronize, plain, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_stream_wait_event, f.s[0], plain);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, ns, ordo_event_elapsed_ns, timing, timing, &ns);

    assert_ok(ordo_event_record(plain, f.s[0]));
    assert_ok(ordo_event_record(timing, f.s[0]));
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, complete, ordo_event_query, NULL, &complete);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, complete, ordo_event_query, AS(ordo_event_t, f.signal),
                   &complete);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_event_query, plain, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_event_synchronize, NULL, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_event_synchronize, AS(ordo_event_t, f.s[0]),
            ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_wait_event, NULL, plain);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_wait_event, f.s[1], NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_wait_event, AS(ordo_stream_t, plain), plain);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_wait_event, f.s[1], AS(ordo_event_t, f.s[0]));
    assert_ok(ordo_event_synchronize(timing, test_deadline()));
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, ns, ordo_event_elapsed_ns, NULL, timing, &ns);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, ns, ordo_event_elapsed_ns, timing, NULL, &ns);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, ns, ordo_event_elapsed_ns, timing,
                   AS(ordo_event_t, f.s[0]), &ns);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_event_elapsed_ns, timing, timing, NULL);
    /* Both must be timing events. */
    ns = 5;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, ns, ordo_event_elapsed_ns, plain, timing, &ns);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, ns, ordo_event_elapsed_ns, timing, plain, &ns);

    assert_ok(ordo_event_destroy(plain));
    assert_ok(ordo_event_destroy(timing));
    assert_ok(ordo_event_destroy(foreign));
    refusal_fixture_free(&f);
}

/* docs/ERRORS.md, "Objects owned by other objects": a use that is defined
 * stays defined (tests/refusal.h). */
static void destroyed_event_handle_is_refused(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(device_name);
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    /* An event goes back to the device's pool once; the handle then ends. */
    ordo_event_t *event = NULL;
    assert_ok(ordo_event_create(f.device, ORDO_EVENT_PLAIN, &event));
    assert_ok(ordo_event_destroy(event));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_event_destroy, event);
    refusal_fixture_free(&f);
}

/* ---- bad input: stream.h, stream_pool.h (tests/refusal.h) */

static void stream_entry_points_refuse_bad_input(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(device_name);
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    ordo_device_info_t info;
    assert_ok(ordo_device_info(f.device, &info));
    ordo_stream_t *s = (ordo_stream_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, s, ordo_stream_create, NULL, 0, &s);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, s, ordo_stream_create, AS(ordo_device_t, f.s[0]), 0,
                   &s);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_stream_create, f.device, 0, NULL);
    const int bad_priorities[] = {info.priority_least + 1, info.priority_greatest - 1, INT_MIN,
                                  INT_MAX};
    for (size_t i = 0; i < 4; ++i) {
        s = (ordo_stream_t *)1;
        REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, s, ordo_stream_create, f.device, bad_priorities[i],
                       &s);
    }

    ordo_stream_t *wrong = AS(ordo_stream_t, f.signal);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_destroy, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_destroy, wrong);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_host_task, wrong, noop_task, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_stream_host_task, f.s[0], NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_signal, wrong, f.signal, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_signal, f.s[0], NULL, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_signal, f.s[0], AS(ordo_signal_t, f.s[1]), 1);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_stream_signal, f.s[0], f.signal, ORDO_SIGNAL_VALUE_MAX + 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_wait, wrong, f.signal, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_wait, f.s[0], NULL, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_wait, f.s[0], AS(ordo_signal_t, f.s[1]), 1);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_stream_wait, f.s[0], f.signal, ORDO_SIGNAL_VALUE_MAX + 1);
    ordo_signal_t *dead = test_signal_make(0);
    assert_ok(ordo_signal_retain(dead));
    assert_ok(ordo_signal_destroy(dead));
    REFUSED(ORDO_ERR_DESTROYED, ordo_stream_signal, f.s[0], dead, 1);
    assert_ok(ordo_signal_release(dead));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_synchronize, NULL, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_synchronize, wrong, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_status, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_status, wrong);
    bool flag;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, flag, ordo_stream_is_healthy, wrong, &flag);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_stream_is_healthy, f.s[0], NULL);
    int priority;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, priority, ordo_stream_priority, NULL, &priority);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, priority, ordo_stream_priority, wrong, &priority);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_stream_priority, f.s[0], NULL);
    ordo_device_t *d;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, d, ordo_stream_device, NULL, &d);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, d, ordo_stream_device, wrong, &d);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_stream_device, f.s[0], NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_set_name, NULL, "x");
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_set_name, wrong, "x");
    char name[ORDO_STREAM_NAME_MAX];
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_name, NULL, name, sizeof name);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_name, wrong, name, sizeof name);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_stream_name, f.s[0], NULL, sizeof name);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_stream_name, f.s[0], name, 0);
    /* Nothing refused above was enqueued. */
    assert_ok(ordo_stream_synchronize(f.s[0], test_deadline()));
    assert_ok(ordo_stream_status(f.s[0]));

    /* Pools. */
    ordo_stream_pool_t *pool = (ordo_stream_pool_t *)1;
    ordo_stream_pool_config_t config = {2, info.priority_least, 1, info.priority_greatest, 0};
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, pool, ordo_stream_pool_create, NULL, &config, &pool);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, pool, ordo_stream_pool_create,
                   AS(ordo_device_t, f.s[0]), &config, &pool);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_stream_pool_create, f.device, &config, NULL);
    ordo_stream_pool_config_t none = {0, 0, 0, 0, 0};
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, pool, ordo_stream_pool_create, f.device, &none,
                   &pool);
    ordo_stream_pool_config_t transfer_only = {0, 0, 1, 0,
                                               0}; /* transfers share compute, not back */
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, pool, ordo_stream_pool_create, f.device,
                   &transfer_only, &pool);
    ordo_stream_pool_config_t too_many = {1000, 0, 25, 0, 0};
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, pool, ordo_stream_pool_create, f.device, &too_many,
                   &pool);
    /* Counts whose sum wraps around are refused too. */
    ordo_stream_pool_config_t wraps = {SIZE_MAX, 0, 2, 0, 0};
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, pool, ordo_stream_pool_create, f.device, &wraps, &pool);
    ordo_stream_pool_config_t wraps2 = {2, 0, SIZE_MAX, 0, 0};
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, pool, ordo_stream_pool_create, f.device, &wraps2, &pool);
    ordo_stream_pool_config_t bad_priority = {1, info.priority_least + 1, 0, 0, 0};
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, pool, ordo_stream_pool_create, f.device, &bad_priority,
                   &pool);
    ordo_stream_pool_config_t bad_transfer = {1, 0, 1, INT_MIN, 0};
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, pool, ordo_stream_pool_create, f.device, &bad_transfer,
                   &pool);

    assert_ok(ordo_stream_pool_create(f.device, &config, &pool));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_pool_destroy, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_stream_pool_destroy, AS(ordo_stream_pool_t, f.s[0]));
    ordo_stream_t *next = (ordo_stream_t *)1;
    size_t count = 9;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, next, ordo_stream_pool_next, NULL, ORDO_WORKLOAD_ANY,
                   &next);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, next, ordo_stream_pool_next,
                   AS(ordo_stream_pool_t, f.signal), ORDO_WORKLOAD_ANY, &next);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, next, ordo_stream_pool_next, pool, (ordo_workload_t)3,
                   &next);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, next, ordo_stream_pool_next, pool,
                   (ordo_workload_t)-1, &next);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_stream_pool_next, pool, ORDO_WORKLOAD_ANY, NULL);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, count, ordo_stream_pool_size, NULL, ORDO_WORKLOAD_ANY,
                   &count);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, count, ordo_stream_pool_size, pool,
                   (ordo_workload_t)3, &count);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_stream_pool_size, pool, ORDO_WORKLOAD_ANY, NULL);
    assert_ok(ordo_stream_pool_destroy(pool));
    refusal_fixture_free(&f);
}

/* Objects owned by other objects (docs/ERRORS.md; tests/refusal.h). */

static void stream_pool_streams_are_the_pools(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(device_name);
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    ordo_stream_pool_config_t config = {2, 0, 1, 0, 0};
    ordo_stream_pool_t *pool = NULL;
    assert_ok(ordo_stream_pool_create(f.device, &config, &pool));
    const ordo_workload_t workloads[] = {ORDO_WORKLOAD_COMPUTE, ORDO_WORKLOAD_TRANSFER};
    for (size_t i = 0; i < 2; ++i) {
        ordo_stream_t *s = NULL;
        assert_ok(ordo_stream_pool_next(pool, workloads[i], &s));
        REFUSED(ORDO_ERR_BUSY, ordo_stream_destroy, s);
        check_owner_named("ordo_stream_pool_destroy");
        /* Still the pool's and still working. */
        assert_ok(ordo_stream_host_task(s, noop_task, NULL));
        assert_ok(ordo_stream_synchronize(s, test_deadline()));
    }
    assert_ok(ordo_stream_pool_destroy(pool));
    refusal_fixture_free(&f);
}

static ordo_status_t tracker_launch(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    return ordo_stream_host_task(stream, noop_task, NULL);
}

static void streams_in_use_refuse_destroy(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(device_name);
    refusal_fixture_t f;
    refusal_fixture_make(&f);
    ordo_stream_t *s = NULL;
    assert_ok(ordo_stream_create(f.device, 0, &s));

    /* A tracker keeps the streams it ordered in its table. */
    ordo_tracker_t *tracker = NULL;
    ordo_buffer_t *buffer = NULL;
    assert_ok(ordo_tracker_create(f.device, &tracker));
    assert_ok(ordo_buffer_create(tracker, &buffer));
    ordo_access_t write[1] = {{buffer, ORDO_ACCESS_WRITE}};
    ordo_access_t read[1] = {{buffer, ORDO_ACCESS_READ}};
    assert_ok(ordo_tracker_submit(tracker, s, write, 1, tracker_launch, NULL));
    REFUSED(ORDO_ERR_BUSY, ordo_stream_destroy, s);
    check_owner_named("by 1 tracker(s),");
    /* The tracker still orders work after s's (it records s's point). */
    assert_ok(ordo_tracker_submit(tracker, f.s[0], read, 1, tracker_launch, NULL));
    assert_ok(ordo_stream_synchronize(f.s[0], test_deadline()));

    /* A pool over the tracker: its frees are ordered by the streams too. */
    ordo_mem_resource_t *direct = NULL, *pool = NULL;
    assert_ok(ordo_mem_direct_create(f.device, &direct));
    assert_ok(ordo_mem_pool_create(tracker, direct, NULL, &pool));
    ordo_block_t *block = NULL;
    assert_ok(ordo_mem_allocate(pool, 64, 0, f.s[1], 0, &block, NULL));
    assert_ok(ordo_mem_deallocate(pool, block, f.s[1]));
    REFUSED(ORDO_ERR_BUSY, ordo_stream_destroy, f.s[1]);
    memory_still_works(pool, f.s[0]); /* reads f.s[1]'s state */

    /* A coordinator keeps the streams its ops ran on, and its pool. */
    ordo_stream_pool_config_t pool_config = {1, 0, 0, 0, 0};
    ordo_stream_pool_t *streams = NULL;
    assert_ok(ordo_stream_pool_create(f.device, &pool_config, &streams));
    ordo_coord_config_t coord_config = {streams, 0};
    ordo_coord_t *coord = NULL;
    assert_ok(ordo_coord_create(f.device, &coord_config, &coord));
    ordo_op_desc_t desc = {
        ORDO_OP_KERNEL, ORDO_OP_PRIORITY_NORMAL, s, ORDO_WORKLOAD_ANY, NULL, 0, "on s", NULL, NULL};
    ordo_op_id_t op = 0;
    assert_ok(ordo_coord_register(coord, &desc, &op));
    assert_ok(ordo_coord_begin(coord, op));
    assert_ok(ordo_coord_complete(coord, op));
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    REFUSED(ORDO_ERR_BUSY, ordo_stream_pool_destroy, streams);
    check_owner_named("coordinator");
    desc.stream = NULL; /* from the pool */
    assert_ok(ordo_coord_register(coord, &desc, &op));
    assert_ok(ordo_coord_begin(coord, op));
    assert_ok(ordo_coord_complete(coord, op));
    assert_ok(ordo_coord_drain(coord, test_deadline()));

    /* Each holder gone, the streams go. */
    REFUSED(ORDO_ERR_BUSY, ordo_tracker_destroy, tracker); /* the pool's still */
    assert_ok(ordo_mem_reap_pending(pool, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(pool));
    assert_ok(ordo_mem_resource_destroy(direct));
    assert_ok(ordo_buffer_release(buffer, NULL, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    REFUSED(ORDO_ERR_BUSY, ordo_stream_destroy, s); /* both still hold it */
    check_owner_named("1 tracker(s) and 1 coordinator(s)");
    assert_ok(ordo_tracker_destroy(tracker));
    REFUSED(ORDO_ERR_BUSY, ordo_stream_destroy, s); /* the coordinator alone */
    check_owner_named("by 1 coordinator(s),");
    assert_ok(ordo_coord_destroy(coord));
    assert_ok(ordo_stream_pool_destroy(streams));
    assert_ok(ordo_stream_destroy(s));
    refusal_fixture_free(&f);
}

static int suite_setup(void **state) {
    (void)state;
    return ordo_device_open(device_name, &device) == ORDO_OK ? 0 : -1;
}

static int suite_teardown(void **state) {
    (void)state;
    return ordo_device_release(device) == ORDO_OK ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(in_order_execution),
        cmocka_unit_test(stream_wait_orders_across_streams),
        cmocka_unit_test(host_signal_wait_inside_stream),
        cmocka_unit_test(failing_task_fails_the_stream),
        cmocka_unit_test(failing_task_message_reaches_waiters),
        cmocka_unit_test(a_task_returning_no_status_aborts_its_stream),
        cmocka_unit_test(failure_propagates_to_other_streams),
        cmocka_unit_test(a_failure_keeps_its_text_along_a_pipeline),
        cmocka_unit_test(host_failure_fails_a_waiting_stream),
        cmocka_unit_test(cancelled_failure_reaches_a_waiting_stream_with_its_message),
        cmocka_unit_test(event_record_query_synchronize),
        cmocka_unit_test(stream_waits_on_an_event),
        cmocka_unit_test(timing_events_measure_elapsed_time),
        cmocka_unit_test(a_late_older_record_does_not_move_a_timing_event),
        cmocka_unit_test(a_refused_record_keeps_the_older_stamp),
        cmocka_unit_test(unrecorded_events_are_refused),
        cmocka_unit_test(event_pool_reuses_events),
        cmocka_unit_test(concurrent_submission),
        cmocka_unit_test(destroy_with_work_pending),
        cmocka_unit_test(destroy_while_waiting_on_a_signal),
        cmocka_unit_test(destroy_right_after_submission),
        cmocka_unit_test(wait_on_a_signal_destroyed_before_the_stream_reaches_it),
        cmocka_unit_test(event_destroyed_with_a_pending_record),
        cmocka_unit_test(events_destroyed_behind_their_records_are_reused),
        cmocka_unit_test(destroy_from_the_streams_own_thread_is_refused),
        cmocka_unit_test(synchronize_from_the_streams_own_thread_is_refused),
        cmocka_unit_test(bad_input_is_refused),
        cmocka_unit_test(priorities_within_range),
        cmocka_unit_test(stream_pool_honours_classes_and_priorities),
        cmocka_unit_test(event_entry_points_refuse_bad_input),
        cmocka_unit_test(destroyed_event_handle_is_refused),
        cmocka_unit_test(stream_entry_points_refuse_bad_input),
        cmocka_unit_test(stream_pool_streams_are_the_pools),
        cmocka_unit_test(streams_in_use_refuse_destroy),
    };
    ordo_device_info_t infos[16];
    size_t count = 0;
    if (ordo_device_list(infos, 16, &count) != ORDO_OK) {
        return 1;
    }
    int failures = 0;
    for (size_t i = 0; i < count && i < 16; ++i) {
        memcpy(device_name, infos[i].name, sizeof device_name);
        print_message("conformance hal on %s\n", device_name);
        failures += cmocka_run_group_tests_name(device_name, tests, suite_setup, suite_teardown);
    }
    const char *names[8];
    size_t backends = 0;
    ordo_backend_list(names, 8, &backends);
    for (size_t b = 0; b < backends && b < 8; ++b) {
        bool available;
        char reason[160];
        ordo_backend_available(names[b], &available, reason, sizeof reason);
        if (!available) {
            print_message("backend %s skipped: %s\n", names[b], reason);
        }
    }
    return failures;
}
