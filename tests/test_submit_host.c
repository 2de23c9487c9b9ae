/* ordo_tracker_submit_host, ordo_tracker_synchronize and ordo_fail: ordering of
 * host tasks across streams, bad input, failures with their messages,
 * deadlines, teardown, and synchronize while another thread submits. */
#include <stdatomic.h>
#include <string.h>

#include "ordo/buffer.h"
#include "ordo/tracker.h"
#include "test_util.h"

static ordo_device_t *device;

/* The message of the last failed call names api first. */
#define assert_names(api)                                                                          \
    do {                                                                                           \
        if (strncmp(ordo_error_message(), api ": ", strlen(api ": ")) != 0) {                      \
            fail_msg("message \"%s\" does not name %s", ordo_error_message(), api);                \
        }                                                                                          \
    } while (0)

static ordo_status_t noop(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

/* ---- ordering ------------------------------------------------------------- */

#define SLOTS 2

typedef struct pipe {
    uint64_t slot[SLOTS]; /* written by the producer, read by the consumer */
    _Atomic uint64_t consumed;
    _Atomic uint64_t wrong; /* reads that saw another round's value */
} pipe_t;

typedef struct round {
    pipe_t *pipe;
    uint64_t value;
} round_t;

static ordo_status_t produce(void *ctx) {
    const round_t *r = ctx;
    r->pipe->slot[r->value % SLOTS] = r->value;
    return ORDO_OK;
}

static ordo_status_t consume(void *ctx) {
    const round_t *r = ctx;
    if (r->pipe->slot[r->value % SLOTS] != r->value) {
        atomic_fetch_add(&r->pipe->wrong, 1);
    }
    atomic_fetch_add(&r->pipe->consumed, 1);
    return ORDO_OK;
}

/* A consumer on another stream sees each value its producer wrote, and
 * the producer's next write of a slot waits for the read before it; the
 * only ordering is the declared accesses. */
static void consumer_sees_producer_data(void **state) {
    (void)state;
    const uint64_t rounds = test_scaled(20000);
    ordo_tracker_t *tracker;
    ordo_stream_t *a, *b;
    ordo_buffer_t *buf[SLOTS];
    assert_ok(ordo_tracker_create(device, &tracker));
    assert_ok(ordo_stream_create(device, 0, &a));
    assert_ok(ordo_stream_create(device, 0, &b));
    for (int s = 0; s < SLOTS; ++s) {
        assert_ok(ordo_buffer_create(tracker, &buf[s]));
    }
    pipe_t *pipe = calloc(1, sizeof *pipe);
    round_t *round = calloc(rounds, sizeof *round); /* contexts live until synchronize */
    for (uint64_t r = 0; r < rounds; ++r) {
        round[r] = (round_t){pipe, r + 1};
        ordo_access_t write = {buf[(r + 1) % SLOTS], ORDO_ACCESS_WRITE};
        ordo_access_t read = {buf[(r + 1) % SLOTS], ORDO_ACCESS_READ};
        assert_ok(ordo_tracker_submit_host(tracker, a, &write, 1, produce, &round[r]));
        assert_ok(ordo_tracker_submit_host(tracker, b, &read, 1, consume, &round[r]));
    }
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(atomic_load(&pipe->consumed), rounds);
    assert_int_equal(atomic_load(&pipe->wrong), 0);
    ordo_tracker_metrics_t m;
    assert_ok(ordo_tracker_metrics(tracker, &m));
    assert_int_equal(m.submissions, 2 * rounds);
    assert_true(m.waits_emitted > 0);
    /* The teardown order: a release may record its buffer's last use on
     * the stream, so the synchronize that lets destroy succeed comes after
     * the releases. */
    for (int s = 0; s < SLOTS; ++s) {
        assert_ok(ordo_buffer_release(buf[s], NULL, NULL));
    }
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(a));
    assert_ok(ordo_stream_destroy(b));
    free(round);
    free(pipe);
}

/* ---- bad input -------------------------------------------------------------- */

static ordo_status_t fail_plain(void *ctx) {
    (void)ctx;
    return ORDO_ERR_ABORTED;
}

static ordo_status_t launch_noop(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, noop, ctx);
}

static void bad_input_names_submit_host(void **state) {
    (void)state;
    ordo_tracker_t *tracker, *other;
    ordo_stream_t *s;
    ordo_buffer_t *b, *foreign;
    assert_ok(ordo_tracker_create(device, &tracker));
    assert_ok(ordo_tracker_create(device, &other));
    assert_ok(ordo_stream_create(device, 0, &s));
    assert_ok(ordo_buffer_create(tracker, &b));
    assert_ok(ordo_buffer_create(other, &foreign));
    ordo_access_t ok = {b, ORDO_ACCESS_READ};

    assert_status(ordo_tracker_submit_host(tracker, s, &ok, 1, NULL, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_names("ordo_tracker_submit_host");
    assert_non_null(strstr(ordo_error_message(), "fn is NULL"));
    assert_status(ordo_tracker_submit_host(NULL, s, &ok, 1, noop, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_names("ordo_tracker_submit_host");
    /* Several faults: the handle answers first (docs/ERRORS.md), for the
     * general form too; a refused call attaches no stream. */
    assert_status(ordo_tracker_submit_host(NULL, s, &ok, 1, NULL, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_names("ordo_tracker_submit_host");
    assert_status(ordo_tracker_submit(NULL, s, &ok, 1, NULL, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_names("ordo_tracker_submit");
    assert_status(ordo_tracker_submit(tracker, NULL, &ok, 1, NULL, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_tracker_submit(tracker, s, NULL, 1, NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "accesses is NULL"));
    ordo_stream_t *unattached;
    assert_ok(ordo_stream_create(device, 0, &unattached));
    assert_status(ordo_tracker_submit(tracker, unattached, &ok, 1, NULL, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "launch is NULL"));
    assert_ok(ordo_stream_destroy(unattached)); /* not in the tracker's table */
    uint64_t garbage[64] = {0};
    assert_status(ordo_tracker_submit_host((ordo_tracker_t *)garbage, s, &ok, 1, noop, NULL),
                  ORDO_ERR_INVALID_HANDLE);
    assert_names("ordo_tracker_submit_host");
    assert_status(ordo_tracker_submit_host(tracker, NULL, &ok, 1, noop, NULL),
                  ORDO_ERR_INVALID_HANDLE);
    assert_names("ordo_tracker_submit_host");
    assert_status(ordo_tracker_submit_host(tracker, (ordo_stream_t *)garbage, &ok, 1, noop, NULL),
                  ORDO_ERR_INVALID_HANDLE);
    assert_names("ordo_tracker_submit_host");
    assert_status(ordo_tracker_submit_host(tracker, s, NULL, 1, noop, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_names("ordo_tracker_submit_host");
    assert_status(
        ordo_tracker_submit_host(tracker, s, &ok, ORDO_TRACKER_MAX_ACCESSES + 1, noop, NULL),
        ORDO_ERR_OUT_OF_RANGE);
    assert_names("ordo_tracker_submit_host");
    ordo_access_t bad_mode = {b, (ordo_access_mode_t)7};
    assert_status(ordo_tracker_submit_host(tracker, s, &bad_mode, 1, noop, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_names("ordo_tracker_submit_host");
    ordo_access_t null_buffer = {NULL, ORDO_ACCESS_READ};
    assert_status(ordo_tracker_submit_host(tracker, s, &null_buffer, 1, noop, NULL),
                  ORDO_ERR_INVALID_HANDLE);
    assert_names("ordo_tracker_submit_host");
    ordo_access_t wrong = {foreign, ORDO_ACCESS_READ};
    assert_status(ordo_tracker_submit_host(tracker, s, &wrong, 1, noop, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_names("ordo_tracker_submit_host");
    /* Zero accesses are allowed: ordered by the stream alone. */
    assert_ok(ordo_tracker_submit_host(tracker, s, NULL, 0, noop, NULL));

    /* A failed stream: its failure, named for this call, nothing recorded. */
    ordo_access_t w = {b, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit_host(tracker, s, &w, 1, fail_plain, NULL));
    assert_status(ordo_stream_synchronize(s, test_deadline()), ORDO_ERR_ABORTED);
    ordo_tracker_metrics_t before, after;
    assert_ok(ordo_tracker_metrics(tracker, &before));
    assert_status(ordo_tracker_submit_host(tracker, s, &w, 1, noop, NULL), ORDO_ERR_ABORTED);
    assert_names("ordo_tracker_submit_host");
    assert_non_null(strstr(ordo_error_message(), "the stream has failed: host task"));
    assert_null(strstr(ordo_error_message(), "launch function"));
    assert_ok(ordo_tracker_metrics(tracker, &after));
    assert_int_equal(after.submissions, before.submissions);
    /* The same when the submission needs a wait on another stream first:
     * the message names the call made, not the wait ordo enqueued. */
    ordo_stream_t *writer;
    ordo_buffer_t *across;
    assert_ok(ordo_stream_create(device, 0, &writer));
    assert_ok(ordo_buffer_create(tracker, &across));
    ordo_access_t write_across = {across, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit_host(tracker, writer, &write_across, 1, noop, NULL));
    assert_status(ordo_tracker_submit_host(tracker, s, &write_across, 1, noop, NULL),
                  ORDO_ERR_ABORTED);
    assert_names("ordo_tracker_submit_host");
    assert_null(strstr(ordo_error_message(), "ordo_stream_wait"));
    assert_status(ordo_tracker_submit(tracker, s, &write_across, 1, launch_noop, NULL),
                  ORDO_ERR_ABORTED);
    assert_names("ordo_tracker_submit");
    assert_null(strstr(ordo_error_message(), "ordo_stream_wait"));
    assert_status(ordo_tracker_prepare(tracker, s, &write_across, 1), ORDO_ERR_ABORTED);
    assert_names("ordo_tracker_prepare");
    assert_null(strstr(ordo_error_message(), "ordo_stream_wait"));
    assert_ok(ordo_buffer_release(across, NULL, NULL));

    assert_status(ordo_tracker_synchronize(NULL, test_deadline()), ORDO_ERR_INVALID_HANDLE);
    assert_names("ordo_tracker_synchronize");

    assert_ok(ordo_buffer_release(b, NULL, NULL));
    assert_ok(ordo_buffer_release(foreign, NULL, NULL));
    assert_status(ordo_tracker_synchronize(tracker, test_deadline()), ORDO_ERR_ABORTED);
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_tracker_destroy(other));
    assert_ok(ordo_stream_destroy(s));
    assert_ok(ordo_stream_destroy(writer));
}

/* ---- failures and their messages ------------------------------------------ */

static ordo_status_t fail_with_message(void *ctx) {
    return ordo_fail(ORDO_ERR_ABORTED, "decoder: bad frame %d", *(const int *)ctx);
}

/* A task that fails with ordo_fail: synchronize returns the failure with
 * its text and the stream's name; the healthy stream's work still ran;
 * a signal after the task fails with the text. */
static void synchronize_returns_the_failure(void **state) {
    (void)state;
    ordo_tracker_t *tracker;
    ordo_stream_t *good, *bad;
    ordo_buffer_t *b;
    ordo_signal_t *after = test_signal_make(0);
    assert_ok(ordo_tracker_create(device, &tracker));
    assert_ok(ordo_stream_create(device, 0, &good));
    assert_ok(ordo_stream_create(device, 0, &bad));
    assert_ok(ordo_stream_set_name(bad, "decoder"));
    assert_ok(ordo_buffer_create(tracker, &b));
    /* Held until all is submitted, so no submission meets the failure. */
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_stream_wait(bad, gate, 1));
    ordo_access_t r = {b, ORDO_ACCESS_READ};
    int frame = 7;
    assert_ok(ordo_tracker_submit_host(tracker, good, &r, 1, noop, NULL));
    assert_ok(ordo_tracker_submit_host(tracker, bad, &r, 1, fail_with_message, &frame));
    assert_ok(ordo_stream_signal(bad, after, 1));
    assert_ok(ordo_buffer_release(b, NULL, NULL));
    assert_ok(ordo_signal_advance(gate, 1));

    assert_status(ordo_signal_wait(after, 1, test_deadline()), ORDO_ERR_ABORTED);
    assert_non_null(strstr(ordo_error_message(), "decoder: bad frame 7"));
    assert_status(ordo_tracker_synchronize(tracker, test_deadline()), ORDO_ERR_ABORTED);
    assert_names("ordo_tracker_synchronize");
    assert_non_null(strstr(ordo_error_message(), "stream decoder:"));
    assert_non_null(strstr(ordo_error_message(), "decoder: bad frame 7"));
    assert_ok(ordo_stream_status(good));
    /* The failed use counts as complete: the tracker can go. */
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(good));
    assert_ok(ordo_stream_destroy(bad));
    assert_ok(ordo_signal_destroy(after));
    assert_ok(ordo_signal_destroy(gate));
}

static void fail_sets_the_message(void **state) {
    (void)state;
    assert_int_equal(ordo_fail(ORDO_ERR_TIMEOUT, "late by %d ms", 5), ORDO_ERR_TIMEOUT);
    assert_string_equal(ordo_error_message(), "late by 5 ms");
    assert_int_equal(ordo_fail((ordo_status_t)12345, NULL), 12345);
    assert_string_equal(ordo_error_message(), "");
    /* Wrapping the thread's own message is safe. */
    (void)ordo_fail(ORDO_ERR_ABORTED, "inner");
    (void)ordo_fail(ORDO_ERR_ABORTED, "outer: %s", ordo_error_message());
    assert_string_equal(ordo_error_message(), "outer: inner");
}

/* ---- deadlines and teardown ---------------------------------------------- */

static void reclaimed(void *ctx) {
    atomic_fetch_add((_Atomic int *)ctx, 1);
}

static ordo_status_t count_task(void *ctx) {
    atomic_fetch_add((_Atomic uint64_t *)ctx, 1);
    return ORDO_OK;
}

/* A stream held on a signal: synchronize times out, destroy is refused;
 * once released, synchronize waits for the work and the reclamation, and
 * destroy succeeds at once. */
static void synchronize_times_out_then_tears_down(void **state) {
    (void)state;
    ordo_tracker_t *tracker;
    ordo_stream_t *held, *free_stream;
    ordo_buffer_t *b;
    assert_ok(ordo_tracker_create(device, &tracker));
    assert_ok(ordo_stream_create(device, 0, &held));
    assert_ok(ordo_stream_create(device, 0, &free_stream));
    assert_ok(ordo_buffer_create(tracker, &b));
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_stream_wait(held, gate, 1));
    _Atomic uint64_t ran = 0;
    _Atomic int reclaims = 0;
    ordo_access_t w = {b, ORDO_ACCESS_WRITE};
    ordo_access_t r = {b, ORDO_ACCESS_READ};
    assert_ok(ordo_tracker_submit_host(tracker, held, &w, 1, count_task, (void *)&ran));
    assert_ok(ordo_tracker_submit_host(tracker, free_stream, &r, 1, count_task, (void *)&ran));
    assert_ok(ordo_buffer_release(b, reclaimed, (void *)&reclaims));

    assert_status(ordo_tracker_synchronize(tracker, ordo_deadline_after_ms(50)), ORDO_ERR_TIMEOUT);
    assert_names("ordo_tracker_synchronize");
    assert_non_null(strstr(ordo_error_message(), "work pending at the deadline"));
    assert_int_equal(atomic_load(&ran), 0); /* the read waits for the held write */
    assert_status(ordo_tracker_destroy(tracker), ORDO_ERR_BUSY);

    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_tracker_synchronize(tracker, test_deadline()));
    assert_int_equal(atomic_load(&ran), 2);
    assert_int_equal(atomic_load(&reclaims), 1);
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_stream_destroy(held));
    assert_ok(ordo_stream_destroy(free_stream));
    assert_ok(ordo_signal_destroy(gate));
}

/* ---- synchronize while another thread submits ----------------------------- */

typedef struct submitter {
    ordo_tracker_t *tracker;
    ordo_stream_t *streams[2];
    ordo_buffer_t *buffer;
    uint64_t count;
    _Atomic uint64_t submitted; /* submissions that have returned */
    _Atomic uint64_t ran;
    _Atomic int failed;
} submitter_t;

static void *submit_loop(void *arg) {
    submitter_t *s = arg;
    for (uint64_t i = 0; i < s->count; ++i) {
        ordo_access_t access = {s->buffer, i % 3 ? ORDO_ACCESS_READ : ORDO_ACCESS_WRITE};
        ordo_status_t st = ordo_tracker_lock(s->tracker);
        if (st == ORDO_OK) {
            st = ordo_tracker_submit_host(s->tracker, s->streams[i % 2], &access, 1, count_task,
                                          (void *)&s->ran);
            (void)ordo_tracker_unlock(s->tracker);
        }
        if (st != ORDO_OK) {
            atomic_store(&s->failed, 1);
            break;
        }
        atomic_fetch_add(&s->submitted, 1);
    }
    return NULL;
}

/* Each synchronize covers what was submitted before it: every task whose
 * submission had returned has run when it returns. */
static void synchronize_while_another_thread_submits(void **state) {
    (void)state;
    submitter_t s = {.count = test_scaled(20000)};
    assert_ok(ordo_tracker_create(device, &s.tracker));
    assert_ok(ordo_stream_create(device, 0, &s.streams[0]));
    assert_ok(ordo_stream_create(device, 0, &s.streams[1]));
    assert_ok(ordo_buffer_create(s.tracker, &s.buffer));
    pthread_t thread = test_thread_start(submit_loop, &s);
    ordo_deadline_t deadline = test_deadline();
    uint64_t checks = 0;
    for (;;) {
        uint64_t before = atomic_load(&s.submitted);
        assert_ok(ordo_tracker_synchronize(s.tracker, deadline));
        assert_true(atomic_load(&s.ran) >= before);
        ++checks;
        if (before == s.count || atomic_load(&s.failed)) {
            break;
        }
        assert_true(ordo_time_now_ns() < deadline);
    }
    pthread_join(thread, NULL);
    assert_int_equal(atomic_load(&s.failed), 0);
    assert_int_equal(atomic_load(&s.ran), s.count);
    assert_true(checks >= 1);
    assert_ok(ordo_buffer_release(s.buffer, NULL, NULL));
    assert_ok(ordo_tracker_synchronize(s.tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(s.tracker));
    assert_ok(ordo_stream_destroy(s.streams[0]));
    assert_ok(ordo_stream_destroy(s.streams[1]));
}

static int setup(void **state) {
    (void)state;
    return ordo_device_open(test_device_name(), &device) == ORDO_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return ordo_device_release(device) == ORDO_OK ? 0 : -1;
}

int main(void) {
    test_conformance_begin("host-submission");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(consumer_sees_producer_data),
        cmocka_unit_test(bad_input_names_submit_host),
        cmocka_unit_test(synchronize_returns_the_failure),
        cmocka_unit_test(fail_sets_the_message),
        cmocka_unit_test(synchronize_times_out_then_tears_down),
        cmocka_unit_test(synchronize_while_another_thread_submits),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
