/* Timeline signal semantics: values, failures, deadlines, lifetime, bad
 * input. */
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "signal_probe.h"
#include "sync/wait_tuning.h"
#include "refusal.h"
#include "test_util.h"

static void create_query_destroy(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(42);
    uint64_t value = 0;
    assert_ok(ordo_signal_query(s, &value));
    assert_int_equal(value, 42);
    assert_ok(ordo_signal_destroy(s));
    assert_status(ordo_signal_create(ORDO_SIGNAL_VALUE_MAX + 1, &s), ORDO_ERR_OUT_OF_RANGE);
    assert_null(s);
    s = test_signal_make(ORDO_SIGNAL_VALUE_MAX);
    assert_ok(ordo_signal_wait(s, ORDO_SIGNAL_VALUE_MAX, ORDO_DEADLINE_NOW));
    assert_ok(ordo_signal_destroy(s));
}

static void wait_on_reached_value_returns_at_once(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(5);
    assert_ok(ordo_signal_wait(s, 0, ORDO_DEADLINE_NOW));
    assert_ok(ordo_signal_wait(s, 5, ORDO_DEADLINE_NOW));
    assert_status(ordo_signal_wait(s, 6, ORDO_DEADLINE_NOW), ORDO_ERR_TIMEOUT);
    assert_ok(ordo_signal_destroy(s));
}

static void signal_lower_or_equal_is_a_noop(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(10);
    assert_ok(ordo_signal_advance(s, 3));
    assert_ok(ordo_signal_advance(s, 10));
    uint64_t value;
    assert_ok(ordo_signal_query(s, &value));
    assert_int_equal(value, 10);
    assert_ok(ordo_signal_advance(s, 11));
    assert_ok(ordo_signal_query(s, &value));
    assert_int_equal(value, 11);
    assert_ok(ordo_signal_destroy(s));
}

typedef struct delayed {
    ordo_signal_t *signal;
    uint64_t value;
    unsigned delay_ms;
    int fail; /* fail instead of signalling */
} delayed_t;

static void *act_later(void *arg) {
    delayed_t *d = arg;
    test_sleep_ms(d->delay_ms);
    if (d->fail) {
        (void)ordo_signal_fail(d->signal, ORDO_ERR_DEVICE, "kernel faulted");
    } else {
        (void)ordo_signal_advance(d->signal, d->value);
    }
    return NULL;
}

static void wait_then_signal_wakes_the_waiter(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    delayed_t d = {s, 3, 20, 0};
    pthread_t t = test_thread_start(act_later, &d);
    assert_ok(ordo_signal_wait(s, 3, test_deadline()));
    pthread_join(t, NULL);
    assert_ok(ordo_signal_destroy(s));
}

static void fail_then_wait_returns_the_failure(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(4);
    assert_ok(ordo_signal_fail(s, ORDO_ERR_DEVICE, "device lost"));
    assert_status(ordo_signal_wait(s, 5, test_deadline()), ORDO_ERR_DEVICE);
    /* The message says what failed, with the failure's own message. */
    assert_string_equal(ordo_error_message(),
                        "ordo_signal_wait: the signal failed before reaching value 5: device lost");
    ordo_signal_t *healthy = test_signal_make(1);
    ordo_signal_point_t points[2] = {{healthy, 1}, {s, 6}};
    assert_status(ordo_signal_wait_all(points, 2, test_deadline()), ORDO_ERR_DEVICE);
    assert_non_null(strstr(ordo_error_message(),
                           "entry 1 (value 6): its signal failed before reaching it: device lost"));
    assert_ok(ordo_signal_release(healthy));
    /* Reached before the failure: still reached. */
    assert_ok(ordo_signal_wait(s, 4, ORDO_DEADLINE_NOW));
    uint64_t value = 0;
    assert_status(ordo_signal_query(s, &value), ORDO_ERR_DEVICE);
    assert_int_equal(value, 4);
    assert_non_null(strstr(ordo_error_message(), "device lost"));
    /* A failed signal does not move, and says why. */
    assert_status(ordo_signal_advance(s, 9), ORDO_ERR_DEVICE);
    assert_status(ordo_signal_query(s, &value), ORDO_ERR_DEVICE);
    assert_int_equal(value, 4);
    assert_ok(ordo_signal_destroy(s));
}

static void wait_then_fail_wakes_with_the_failure(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    delayed_t d = {s, 0, 20, 1};
    pthread_t t = test_thread_start(act_later, &d);
    uint64_t start = ordo_time_now_ns();
    assert_status(ordo_signal_wait(s, 1, test_deadline()), ORDO_ERR_DEVICE);
    assert_true(ordo_time_now_ns() - start < (uint64_t)TEST_WAIT_MS * 1000000u / 2);
    pthread_join(t, NULL);
    assert_ok(ordo_signal_destroy(s));
}

static void double_failure_keeps_the_first(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    assert_ok(ordo_signal_fail(s, ORDO_ERR_ABORTED, "first"));
    assert_ok(ordo_signal_fail(s, ORDO_ERR_DEVICE, "second"));
    ordo_status_t failure;
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    assert_ok(ordo_signal_failure(s, &failure, message, sizeof message));
    assert_int_equal(failure, ORDO_ERR_ABORTED);
    assert_string_equal(message, "first");
    /* Truncation keeps the terminator. */
    char tiny[4];
    assert_ok(ordo_signal_failure(s, &failure, tiny, sizeof tiny));
    assert_string_equal(tiny, "fir");
    assert_ok(ordo_signal_destroy(s));
}

static void failure_of_a_healthy_signal_reads_ok(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    ordo_status_t failure = ORDO_ERR_INTERNAL;
    char message[8] = "x";
    assert_ok(ordo_signal_failure(s, &failure, message, sizeof message));
    assert_int_equal(failure, ORDO_OK);
    assert_string_equal(message, "");
    assert_ok(ordo_signal_failure(s, &failure, NULL, 0));
    assert_status(ordo_signal_failure(s, NULL, NULL, 0), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_signal_failure(s, &failure, message, 0), ORDO_ERR_INVALID_ARGUMENT);
    /* Long messages are truncated, not overflowed. */
    char longer[ORDO_SIGNAL_MESSAGE_MAX * 2];
    memset(longer, 'm', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_ok(ordo_signal_fail(s, ORDO_ERR_ABORTED, longer));
    char got[ORDO_SIGNAL_MESSAGE_MAX * 2];
    assert_ok(ordo_signal_failure(s, &failure, got, sizeof got));
    assert_int_equal(strlen(got), ORDO_SIGNAL_MESSAGE_MAX - 1);
    assert_ok(ordo_signal_destroy(s));
}

static void a_formatted_failure_reads_its_text(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    assert_ok(ordo_signal_failf(s, ORDO_ERR_ABORTED, "frame %d of %s: bad header", 7, "cam0"));
    ordo_status_t failure = ORDO_OK;
    char got[ORDO_SIGNAL_MESSAGE_MAX];
    assert_ok(ordo_signal_failure(s, &failure, got, sizeof got));
    assert_int_equal(failure, ORDO_ERR_ABORTED);
    assert_string_equal(got, "frame 7 of cam0: bad header");
    assert_status(ordo_signal_wait(s, 1, test_deadline()), ORDO_ERR_ABORTED);
    /* The first failure stays, as with ordo_signal_fail. */
    assert_ok(ordo_signal_failf(s, ORDO_ERR_DEVICE, "later %d", 2));
    assert_ok(ordo_signal_failure(s, &failure, got, sizeof got));
    assert_int_equal(failure, ORDO_ERR_ABORTED);
    assert_string_equal(got, "frame 7 of cam0: bad header");
    assert_ok(ordo_signal_destroy(s));

    /* A long text is cut to the message size; NULL gives none. */
    s = test_signal_make(0);
    char longer[ORDO_SIGNAL_MESSAGE_MAX * 2];
    memset(longer, 'm', sizeof longer - 1);
    longer[sizeof longer - 1] = '\0';
    assert_ok(ordo_signal_failf(s, ORDO_ERR_ABORTED, "%s!", longer));
    assert_ok(ordo_signal_failure(s, &failure, got, sizeof got));
    assert_int_equal(strlen(got), ORDO_SIGNAL_MESSAGE_MAX - 1);
    assert_ok(ordo_signal_destroy(s));
    s = test_signal_make(0);
    assert_ok(ordo_signal_failf(s, ORDO_ERR_ABORTED, NULL));
    assert_ok(ordo_signal_failure(s, &failure, got, sizeof got));
    assert_string_equal(got, "");
    assert_ok(ordo_signal_destroy(s));
}

static void deadline_exceeded_and_not_early(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    for (int i = 0; i < 5; ++i) {
        ordo_deadline_t deadline = ordo_deadline_after_ns(2000000ull * (uint64_t)(i + 1));
        assert_status(ordo_signal_wait(s, 1, deadline), ORDO_ERR_TIMEOUT);
        assert_true(ordo_time_now_ns() >= deadline);
    }
    /* A past deadline polls. */
    assert_status(ordo_signal_wait(s, 1, ORDO_DEADLINE_NOW), ORDO_ERR_TIMEOUT);
    assert_non_null(strstr(ordo_error_message(), "deadline"));
    assert_ok(ordo_signal_destroy(s));
}

/* A waiter holding a reference of its own, as a thread must when another
 * thread may destroy the signal it waits on; it drops it after the wait. */
typedef struct ref_waiter {
    ordo_signal_t *signal;
    _Atomic int entering;
    ordo_status_t result;
    ordo_status_t released;
} ref_waiter_t;

static void *wait_then_release(void *arg) {
    ref_waiter_t *w = arg;
    atomic_store(&w->entering, 1);
    w->result = ordo_signal_wait(w->signal, 100, test_deadline());
    w->released = ordo_signal_release(w->signal);
    return NULL;
}

static pthread_t ref_waiter_start(ref_waiter_t *w, ordo_signal_t *s) {
    w->signal = s;
    atomic_init(&w->entering, 0);
    w->result = w->released = ORDO_ERR_INTERNAL;
    assert_ok(ordo_signal_retain(s));
    return test_thread_start(wait_then_release, w);
}

static size_t live_blocks(void) {
    size_t live = 0;
    assert_ok(ordo_allocator_live_blocks(&live));
    return live;
}

/* The waiters' threads write into this frame: every check that could end
 * the test early comes after they are joined. */
static void destroy_cancels_sleeping_waits(void **state) {
    (void)state;
    size_t live_before = live_blocks();
    ordo_signal_t *s = test_signal_make(0);
    ref_waiter_t w[3];
    pthread_t t[3];
    for (int i = 0; i < 3; ++i) {
        t[i] = ref_waiter_start(&w[i], s);
    }
    /* Each waiter holds its own reference and, once asleep in its wait,
     * the wait's: all three are asleep. */
    int asleep = test_signal_refs_reach(s, 1 + 2 * 3);
    ordo_status_t destroyed = ordo_signal_destroy(s);
    for (int i = 0; i < 3; ++i) {
        pthread_join(t[i], NULL);
    }
    assert_true(asleep);
    assert_ok(destroyed);
    for (int i = 0; i < 3; ++i) {
        assert_int_equal(w[i].result, ORDO_ERR_CANCELLED);
        assert_ok(w[i].released);
    }
    assert_int_equal(live_blocks(), live_before);
}

/* The waiter's own reference keeps the memory while its wait spins: a
 * destroy then ends the wait (the spin is made longer than the wait's
 * deadline, so a wait that has begun is spinning). A waiter that had not
 * reached its wait yet finds the signal destroyed; either way nothing
 * reads freed memory, and the memory goes with the waiter's release.
 * Returns the wait's result. */
static ordo_status_t destroy_during_one_wait(void) {
    size_t live_before = live_blocks();
    ordo_signal_t *s = test_signal_make(0);
    ref_waiter_t w;
    pthread_t t = ref_waiter_start(&w, s);
    const ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&w.entering) && ordo_time_now_ns() < deadline) {
        sched_yield();
    }
    test_sleep_ms(20); /* usually well into its spin by now */
    ordo_status_t destroyed = ordo_signal_destroy(s);
    pthread_join(t, NULL);
    assert_ok(destroyed);
    assert_true(w.result == ORDO_ERR_CANCELLED || w.result == ORDO_ERR_DESTROYED);
    assert_ok(w.released);
    assert_int_equal(live_blocks(), live_before);
    return w.result;
}

static uint64_t spin_before;

/* Until one attempt shows the destroy reaching a wait in its spin. */
static void destroy_during_a_spinning_wait(void **state) {
    (void)state;
    spin_before = ordo__sync_wait_set_spin_ns(UINT64_MAX);
    int attempt = 0;
    while (destroy_during_one_wait() != ORDO_ERR_CANCELLED) {
        assert_true(++attempt < 5);
    }
}

/* Runs even when the test fails, so later tests spin as usual. */
static int spin_restore(void **state) {
    (void)state;
    ordo__sync_wait_set_spin_ns(spin_before);
    return 0;
}

/* ---- a failure with ORDO_ERR_CANCELLED is not a destroy ------------------ */

/* The three blocking waits for `signal` to reach 1; the multi-waits list
 * `other` first, which never reaches 1. */
typedef enum wait_form { WAIT_ONE, WAIT_ALL, WAIT_ANY } wait_form_t;

typedef struct ending_wait {
    wait_form_t form;
    ordo_signal_t *signal;
    ordo_signal_t *other;
    ordo_status_t result;
    size_t index;
    char message[512];
} ending_wait_t;

static void ending_wait_run(ending_wait_t *w) {
    ordo_signal_point_t points[2] = {{w->other, 1}, {w->signal, 1}};
    w->index = 99;
    if (w->form == WAIT_ONE) {
        w->result = ordo_signal_wait(w->signal, 1, test_deadline());
    } else if (w->form == WAIT_ALL) {
        w->result = ordo_signal_wait_all(points, 2, test_deadline());
    } else {
        w->result = ordo_signal_wait_any(points, 2, test_deadline(), &w->index);
    }
    snprintf(w->message, sizeof w->message, "%s", ordo_error_message());
}

static void *ending_wait_thread(void *arg) {
    ending_wait_run(arg);
    return NULL;
}

/* The wait ended with ORDO_ERR_CANCELLED and says why: the producer's
 * message, or the destroy. */
static void ending_wait_check(const ending_wait_t *w, int destroyed) {
    const char *why = destroyed ? "destroyed" : "failed before reaching";
    int right =
        w->result == ORDO_ERR_CANCELLED && strstr(w->message, why) &&
        (destroyed ? !strstr(w->message, "failed") : strstr(w->message, "decoder crashed") != NULL);
    if (!right) {
        fail_msg("wait form %d, %s: %s: \"%s\"", (int)w->form, destroyed ? "destroyed" : "failed",
                 ordo_status_name(w->result), w->message);
    }
    if (w->form == WAIT_ANY) {
        assert_int_equal(w->index, 1);
    }
}

/* A producer may fail a signal with ORDO_ERR_CANCELLED, the status a
 * destroy gives waits: its message still reaches every wait, whether the
 * wait finds the failure at once or is woken by it. */
static void cancelled_failure_keeps_its_message(void **state) {
    (void)state;
    for (int form = WAIT_ONE; form <= WAIT_ANY; ++form) {
        ending_wait_t now = {.form = form, .other = test_signal_make(0)};
        now.signal = test_signal_make(0);
        assert_ok(ordo_signal_fail(now.signal, ORDO_ERR_CANCELLED, "decoder crashed"));
        ending_wait_run(&now);
        ending_wait_check(&now, 0);

        ending_wait_t asleep = {.form = form, .other = test_signal_make(0)};
        asleep.signal = test_signal_make(0);
        pthread_t t = test_thread_start(ending_wait_thread, &asleep);
        int armed = test_signal_armed(asleep.signal);
        ordo_status_t failed =
            ordo_signal_fail(asleep.signal, ORDO_ERR_CANCELLED, "decoder crashed");
        pthread_join(t, NULL);
        assert_true(armed);
        assert_ok(failed);
        ending_wait_check(&asleep, 0);

        ending_wait_t *both[2] = {&now, &asleep};
        for (int i = 0; i < 2; ++i) {
            assert_ok(ordo_signal_destroy(both[i]->signal));
            assert_ok(ordo_signal_destroy(both[i]->other));
        }
    }
}

/* A destroy during each form of wait still says it was a destroy. The
 * test's reference keeps the memory for the waiting thread. */
static void destroy_during_a_wait_says_so(void **state) {
    (void)state;
    for (int form = WAIT_ONE; form <= WAIT_ANY; ++form) {
        ending_wait_t w = {.form = form, .other = test_signal_make(0)};
        w.signal = test_signal_make(0);
        assert_ok(ordo_signal_retain(w.signal));
        pthread_t t = test_thread_start(ending_wait_thread, &w);
        int armed = test_signal_armed(w.signal);
        ordo_status_t destroyed = ordo_signal_destroy(w.signal);
        pthread_join(t, NULL);
        assert_true(armed);
        assert_ok(destroyed);
        ending_wait_check(&w, 1);
        assert_ok(ordo_signal_release(w.signal));
        assert_ok(ordo_signal_destroy(w.other));
    }
}

static void references_outlive_destroy(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(1);
    assert_ok(ordo_signal_retain(s));
    assert_ok(ordo_signal_destroy(s));
    uint64_t value;
    assert_status(ordo_signal_query(s, &value), ORDO_ERR_DESTROYED);
    assert_status(ordo_signal_advance(s, 2), ORDO_ERR_DESTROYED);
    assert_status(ordo_signal_fail(s, ORDO_ERR_ABORTED, NULL), ORDO_ERR_DESTROYED);
    assert_status(ordo_signal_wait(s, 1, ORDO_DEADLINE_NOW), ORDO_ERR_DESTROYED);
    assert_status(ordo_signal_destroy(s), ORDO_ERR_DESTROYED);
    assert_ok(ordo_signal_release(s));
}

static void last_release_destroys(void **state) {
    (void)state;
    ordo_signal_t *s = test_signal_make(0);
    assert_ok(ordo_signal_retain(s));
    assert_ok(ordo_signal_release(s));
    uint64_t value;
    assert_ok(ordo_signal_query(s, &value));
    assert_ok(ordo_signal_release(s));
    size_t live;
    assert_ok(ordo_allocator_live_blocks(&live));
    assert_int_equal(live, 0);
}

static void bad_input_is_refused(void **state) {
    (void)state;
    uint64_t value;
    assert_status(ordo_signal_query(NULL, &value), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_signal_advance(NULL, 1), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_signal_wait(NULL, 1, ORDO_DEADLINE_NOW), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_signal_fail(NULL, ORDO_ERR_ABORTED, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_signal_destroy(NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_signal_retain(NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_signal_release(NULL), ORDO_ERR_INVALID_HANDLE);

    /* Not a signal at all. */
    uint64_t garbage[16] = {0};
    ordo_signal_t *fake = (ordo_signal_t *)garbage;
    assert_status(ordo_signal_advance(fake, 1), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_signal_wait(fake, 1, ORDO_DEADLINE_NOW), ORDO_ERR_INVALID_HANDLE);

    ordo_signal_t *s = test_signal_make(0);
    assert_status(ordo_signal_query(s, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_signal_advance(s, ORDO_SIGNAL_VALUE_MAX + 1), ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_signal_advance(s, UINT64_MAX), ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_signal_wait(s, 1ull << 63, ORDO_DEADLINE_NOW), ORDO_ERR_OUT_OF_RANGE);
    assert_string_equal(
        ordo_error_message(),
        "ordo_signal_wait: value 9223372036854775808 exceeds ORDO_SIGNAL_VALUE_MAX");
    assert_status(ordo_signal_fail(s, ORDO_OK, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_signal_fail(s, (ordo_status_t)12345, NULL), ORDO_ERR_INVALID_ARGUMENT);
    /* None of that changed the signal. */
    assert_ok(ordo_signal_query(s, &value));
    assert_int_equal(value, 0);
    assert_ok(ordo_signal_destroy(s));
}

/* ---- bad input: signal.h (tests/refusal.h) */

static void signal_entry_points_refuse_bad_input(void **state) {
    (void)state;
    size_t before = refusal_live_blocks();
    ordo_signal_t *s = (ordo_signal_t *)1;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, s, ordo_signal_create, ORDO_SIGNAL_VALUE_MAX + 1, &s);
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, s, ordo_signal_create, UINT64_MAX, &s);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_create, 0, NULL);
    s = test_signal_make(ORDO_SIGNAL_VALUE_MAX);
    ordo_signal_t *t = test_signal_make(0);
    ordo_stream_t *not_signal = NULL;
    ordo_device_t *device = NULL;
    assert_ok(ordo_device_open("cpu", &device));
    assert_ok(ordo_stream_create(device, 0, &not_signal));
    ordo_signal_t *wrong = AS(ordo_signal_t, not_signal);

    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_retain, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_retain, wrong);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_release, wrong);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_destroy, wrong);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_destroy, GARBAGE(ordo_signal_t));
    uint64_t value = 0;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, value, ordo_signal_query, wrong, &value);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_query, s, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_advance, wrong, 1);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_signal_advance, t, ORDO_SIGNAL_VALUE_MAX + 1);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_signal_advance, t, UINT64_MAX);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_fail, wrong, ORDO_ERR_ABORTED, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_fail, t, ORDO_OK, NULL);
    /* Not a status at all is not an error to fail with. */
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_fail, t, ORDO_STATUS_COUNT_, "x");
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_fail, t, (ordo_status_t)-1, "x");
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_failf, wrong, ORDO_ERR_ABORTED, "%d", 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_failf, t, ORDO_OK, "%d", 1);
    ordo_status_t failure = ORDO_ERR_INTERNAL;
    assert_ok(ordo_signal_failure(t, &failure, NULL, 0));
    assert_int_equal(failure, ORDO_OK);
    char message[8] = "zzzzzzz";
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, failure, ordo_signal_failure, wrong, &failure, message,
                   sizeof message);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_failure, t, NULL, message, sizeof message);
    assert_ok(ordo_signal_failure(t, &failure, NULL, sizeof message));
    /* A message buffer of capacity 0 is refused, and not written. */
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, failure, ordo_signal_failure, t, &failure, message,
                   0);
    assert_string_equal(message, "zzzzzzz");

    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_wait, wrong, 1, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_signal_wait, s, ORDO_SIGNAL_VALUE_MAX + 1,
            ORDO_DEADLINE_NEVER);
    REFUSED(ORDO_ERR_TIMEOUT, ordo_signal_wait, t, 1, ORDO_DEADLINE_NOW);

    ordo_signal_point_t points[2] = {{t, 0}, {s, 1}};
    size_t index = 77;
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_wait_all, NULL, 1, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_wait_all, points, 0, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_signal_wait_all, points, ORDO_SIGNAL_WAIT_MAX + 1,
            ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_signal_wait_all, points, SIZE_MAX, ORDO_DEADLINE_NOW);
    /* A refused wait_any names no entry: *out_index is count (signal.h). */
    index = 77;
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_wait_any, NULL, 1, ORDO_DEADLINE_NOW, &index);
    assert_int_equal(index, 1);
    index = 77;
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_wait_any, points, 0, ORDO_DEADLINE_NOW, &index);
    assert_int_equal(index, 0);
    index = 77;
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_signal_wait_any, points, SIZE_MAX, ORDO_DEADLINE_NOW,
            &index);
    assert_int_equal(index, SIZE_MAX);
    index = 77;
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_signal_wait_any, points, ORDO_SIGNAL_WAIT_MAX + 1,
            ORDO_DEADLINE_NOW, &index);
    assert_int_equal(index, ORDO_SIGNAL_WAIT_MAX + 1);
    assert_non_null(strstr(ordo_error_message(), "exceeds ORDO_SIGNAL_WAIT_MAX"));
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_wait_any, points, 2, ORDO_DEADLINE_NOW, NULL);
    ordo_signal_point_t bad_entries[3][2] = {
        {{t, 0}, {NULL, 1}}, {{t, 0}, {wrong, 1}}, {{t, 0}, {s, ORDO_SIGNAL_VALUE_MAX + 1}}};
    const ordo_status_t want[3] = {ORDO_ERR_INVALID_HANDLE, ORDO_ERR_INVALID_HANDLE,
                                   ORDO_ERR_OUT_OF_RANGE};
    for (int k = 0; k < 3; ++k) {
        REFUSED(want[k], ordo_signal_wait_all, bad_entries[k], 2, ORDO_DEADLINE_NEVER);
        index = 77;
        REFUSED(want[k], ordo_signal_wait_any, bad_entries[k], 2, ORDO_DEADLINE_NEVER, &index);
        assert_int_equal(index, 2);
    }
    /* Nothing was left armed on t by the refused multi-waits. */
    assert_ok(ordo_signal_advance(t, 1));

    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_set_name, NULL, "x");
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_set_name, wrong, "x");
    char name[ORDO_SIGNAL_NAME_MAX];
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_name, NULL, name, sizeof name);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_signal_name, wrong, name, sizeof name);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_signal_name, t, NULL, sizeof name);
    char long_name[200];
    memset(long_name, 'n', sizeof long_name - 1);
    long_name[sizeof long_name - 1] = '\0';
    assert_ok(ordo_signal_set_name(t, long_name));
    assert_ok(ordo_signal_name(t, name, sizeof name));
    assert_int_equal(strlen(name), ORDO_SIGNAL_NAME_MAX - 1);
    assert_ok(ordo_signal_name(t, name, 1));
    assert_string_equal(name, "");

    /* Destroyed: later calls get ORDO_ERR_DESTROYED; a second destroy drops
     * nothing. */
    assert_ok(ordo_signal_retain(t));
    assert_ok(ordo_signal_destroy(t));
    REFUSED(ORDO_ERR_DESTROYED, ordo_signal_destroy, t);
    REFUSED(ORDO_ERR_DESTROYED, ordo_signal_advance, t, 2);
    REFUSED(ORDO_ERR_DESTROYED, ordo_signal_wait, t, 1, ORDO_DEADLINE_NEVER);
    REFUSED(ORDO_ERR_DESTROYED, ordo_signal_set_name, t, "late");
    assert_ok(ordo_signal_name(t, name, sizeof name));
    assert_ok(ordo_signal_release(t));

    assert_ok(ordo_signal_release(s));
    assert_ok(ordo_stream_destroy(not_signal));
    assert_ok(ordo_device_release(device));
    assert_int_equal(refusal_live_blocks(), before);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(create_query_destroy),
        cmocka_unit_test(wait_on_reached_value_returns_at_once),
        cmocka_unit_test(signal_lower_or_equal_is_a_noop),
        cmocka_unit_test(wait_then_signal_wakes_the_waiter),
        cmocka_unit_test(fail_then_wait_returns_the_failure),
        cmocka_unit_test(wait_then_fail_wakes_with_the_failure),
        cmocka_unit_test(double_failure_keeps_the_first),
        cmocka_unit_test(failure_of_a_healthy_signal_reads_ok),
        cmocka_unit_test(a_formatted_failure_reads_its_text),
        cmocka_unit_test(deadline_exceeded_and_not_early),
        cmocka_unit_test(destroy_cancels_sleeping_waits),
        cmocka_unit_test_teardown(destroy_during_a_spinning_wait, spin_restore),
        cmocka_unit_test(cancelled_failure_keeps_its_message),
        cmocka_unit_test(destroy_during_a_wait_says_so),
        cmocka_unit_test(references_outlive_destroy),
        cmocka_unit_test(last_release_destroys),
        cmocka_unit_test(bad_input_is_refused),
        cmocka_unit_test(signal_entry_points_refuse_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
