/* Wait-all and wait-any over arrays of (signal, value). */
#include <string.h>

#include "signal_probe.h"
#include "test_util.h"

#define MANY 64

typedef struct set {
    ordo_signal_t *signals[ORDO_SIGNAL_WAIT_MAX];
    ordo_signal_point_t points[ORDO_SIGNAL_WAIT_MAX];
    size_t count;
} set_t;

static set_t *set_make(size_t count, uint64_t target) {
    set_t *set = calloc(1, sizeof *set);
    assert_non_null(set);
    set->count = count;
    for (size_t i = 0; i < count; ++i) {
        assert_ok(ordo_signal_create(0, &set->signals[i]));
        set->points[i] = (ordo_signal_point_t){set->signals[i], target};
    }
    return set;
}

static void set_free(set_t *set) {
    for (size_t i = 0; i < set->count; ++i) {
        assert_ok(ordo_signal_destroy(set->signals[i]));
    }
    free(set);
}

typedef struct later {
    ordo_signal_t *signal;
    uint64_t value;
    unsigned delay_ms;
    ordo_status_t fail_with; /* ORDO_OK: signal */
} later_t;

static void *later_run(void *arg) {
    later_t *l = arg;
    test_sleep_ms(l->delay_ms);
    if (l->fail_with != ORDO_OK) {
        (void)ordo_signal_fail(l->signal, l->fail_with, "injected");
    } else {
        (void)ordo_signal_advance(l->signal, l->value);
    }
    return NULL;
}

static void wait_any_names_the_signalled_entry(void **state) {
    (void)state;
    set_t *set = set_make(MANY, 5);
    later_t l = {set->signals[37], 5, 20, ORDO_OK};
    pthread_t t = test_thread_start(later_run, &l);
    size_t index = 999;
    assert_ok(ordo_signal_wait_any(set->points, set->count, test_deadline(), &index));
    assert_int_equal(index, 37);
    pthread_join(t, NULL);
    set_free(set);
}

static void wait_any_prefers_the_lowest_reached_entry(void **state) {
    (void)state;
    set_t *set = set_make(8, 1);
    assert_ok(ordo_signal_advance(set->signals[6], 1));
    assert_ok(ordo_signal_advance(set->signals[2], 1));
    size_t index;
    assert_ok(ordo_signal_wait_any(set->points, set->count, ORDO_DEADLINE_NOW, &index));
    assert_int_equal(index, 2);
    set_free(set);
}

static void wait_any_times_out(void **state) {
    (void)state;
    set_t *set = set_make(MANY, 1);
    size_t index = 0;
    ordo_deadline_t deadline = ordo_deadline_after_ns(5000000);
    assert_status(ordo_signal_wait_any(set->points, set->count, deadline, &index),
                  ORDO_ERR_TIMEOUT);
    assert_true(ordo_time_now_ns() >= deadline);
    assert_int_equal(index, set->count);
    set_free(set);
}

static void wait_all_needs_every_entry(void **state) {
    (void)state;
    set_t *set = set_make(MANY, 3);
    for (size_t i = 0; i + 1 < set->count; ++i) {
        assert_ok(ordo_signal_advance(set->signals[i], 3));
    }
    assert_status(ordo_signal_wait_all(set->points, set->count, ordo_deadline_after_ns(2000000)),
                  ORDO_ERR_TIMEOUT);
    later_t l = {set->signals[set->count - 1], 3, 20, ORDO_OK};
    pthread_t t = test_thread_start(later_run, &l);
    assert_ok(ordo_signal_wait_all(set->points, set->count, test_deadline()));
    pthread_join(t, NULL);
    set_free(set);
}

static void wait_all_with_repeated_signals(void **state) {
    (void)state;
    ordo_signal_t *s;
    assert_ok(ordo_signal_create(0, &s));
    ordo_signal_point_t points[4] = {{s, 1}, {s, 4}, {s, 2}, {s, 4}};
    later_t l = {s, 4, 10, ORDO_OK};
    pthread_t t = test_thread_start(later_run, &l);
    assert_ok(ordo_signal_wait_all(points, 4, test_deadline()));
    pthread_join(t, NULL);
    assert_ok(ordo_signal_destroy(s));
}

static void wait_all_returns_a_failure_at_once(void **state) {
    (void)state;
    set_t *set = set_make(MANY, 1);
    later_t l = {set->signals[9], 0, 20, ORDO_ERR_DEVICE};
    pthread_t t = test_thread_start(later_run, &l);
    uint64_t start = ordo_time_now_ns();
    assert_status(ordo_signal_wait_all(set->points, set->count, test_deadline()), ORDO_ERR_DEVICE);
    assert_non_null(strstr(ordo_error_message(), "entry 9"));
    assert_true(ordo_time_now_ns() - start < (uint64_t)TEST_WAIT_MS * 1000000u / 2);
    pthread_join(t, NULL);
    set_free(set);
}

static void wait_any_reports_a_failure_with_its_index(void **state) {
    (void)state;
    set_t *set = set_make(MANY, 1);
    later_t l = {set->signals[50], 0, 20, ORDO_ERR_ABORTED};
    pthread_t t = test_thread_start(later_run, &l);
    size_t index = 0;
    assert_status(ordo_signal_wait_any(set->points, set->count, test_deadline(), &index),
                  ORDO_ERR_ABORTED);
    assert_int_equal(index, 50);
    pthread_join(t, NULL);
    /* Already failed: decided without blocking. */
    assert_status(ordo_signal_wait_any(set->points, set->count, ORDO_DEADLINE_NOW, &index),
                  ORDO_ERR_ABORTED);
    assert_int_equal(index, 50);
    set_free(set);
}

/* Fails the signal with ORDO_ERR_TIMEOUT once a blocking wait has armed
 * a timepoint on it (it sleeps, or is about to). */
static void *fail_with_timeout_once_armed(void *arg) {
    if (test_signal_armed(arg)) {
        (void)ordo_signal_fail(arg, ORDO_ERR_TIMEOUT, "device watchdog");
    }
    return NULL;
}

/* A signal failed with ORDO_ERR_TIMEOUT while the wait sleeps decides it
 * as that failure, as it does when seen before sleeping: the entry's
 * index and its message, not count and "deadline passed". */
static void a_timeout_failure_during_the_sleep_is_a_failure(void **state) {
    (void)state;
    for (int kind = 0; kind < 3; ++kind) { /* single, wait-any, wait-all */
        set_t *set = set_make(2, 1);
        pthread_t t = test_thread_start(fail_with_timeout_once_armed, set->signals[1]);
        size_t index = 99;
        ordo_status_t st;
        if (kind == 0) {
            st = ordo_signal_wait(set->signals[1], 1, test_deadline());
        } else if (kind == 1) {
            st = ordo_signal_wait_any(set->points, 2, test_deadline(), &index);
        } else {
            st = ordo_signal_wait_all(set->points, 2, test_deadline());
        }
        assert_status(st, ORDO_ERR_TIMEOUT);
        assert_null(strstr(ordo_error_message(), "deadline passed"));
        assert_non_null(strstr(ordo_error_message(), "device watchdog"));
        if (kind == 1) {
            assert_int_equal(index, 1);
        }
        if (kind != 0) {
            assert_non_null(strstr(ordo_error_message(), "entry 1"));
        }
        pthread_join(t, NULL);
        /* Seen before sleeping: the same answer. */
        assert_status(ordo_signal_wait_any(set->points, 2, test_deadline(), &index),
                      ORDO_ERR_TIMEOUT);
        assert_int_equal(index, 1);
        set_free(set);
    }
}

static void largest_waits_work(void **state) {
    (void)state;
    set_t *set = set_make(ORDO_SIGNAL_WAIT_MAX, 2);
    for (size_t i = 0; i < set->count; i += 2) {
        assert_ok(ordo_signal_advance(set->signals[i], 2));
    }
    later_t l = {set->signals[ORDO_SIGNAL_WAIT_MAX - 1], 2, 10, ORDO_OK};
    pthread_t t = test_thread_start(later_run, &l);
    size_t index;
    assert_ok(ordo_signal_wait_any(set->points + 1, set->count - 1, ORDO_DEADLINE_NOW, &index));
    assert_int_equal(index, 1); /* entry 1 of the shifted array is signal 2 */
    for (size_t i = 1; i < set->count; i += 2) {
        if (i != ORDO_SIGNAL_WAIT_MAX - 1) {
            assert_ok(ordo_signal_advance(set->signals[i], 2));
        }
    }
    assert_ok(ordo_signal_wait_all(set->points, set->count, test_deadline()));
    pthread_join(t, NULL);
    set_free(set);
}

/* Destroys the victim once the wait is asleep: it then holds a reference
 * of its own (after the create's and the test's). */
static void *destroy_during_the_wait(void *arg) {
    if (test_signal_refs_reach(arg, 3)) {
        (void)ordo_signal_destroy(arg);
    }
    return NULL;
}

static void destroy_during_wait_any_cancels_it(void **state) {
    (void)state;
    set_t *set = set_make(4, 1);
    ordo_signal_t *victim;
    assert_ok(ordo_signal_create(0, &victim));
    assert_ok(ordo_signal_retain(victim)); /* the points still name it */
    ordo_signal_point_t points[4] = {set->points[0], set->points[1], {victim, 1}, set->points[3]};
    pthread_t t = test_thread_start(destroy_during_the_wait, victim);
    size_t index = 0;
    assert_status(ordo_signal_wait_any(points, 4, test_deadline(), &index), ORDO_ERR_CANCELLED);
    assert_int_equal(index, 2);
    pthread_join(t, NULL);
    /* Waiting on it afterwards names the destroyed entry. */
    assert_status(ordo_signal_wait_all(points, 4, ORDO_DEADLINE_NOW), ORDO_ERR_DESTROYED);
    assert_ok(ordo_signal_release(victim));
    set_free(set);
}

static void bad_input_is_refused(void **state) {
    (void)state;
    set_t *set = set_make(2, 1);
    size_t index = 7;
    assert_status(ordo_signal_wait_all(NULL, 1, ORDO_DEADLINE_NOW), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_signal_wait_all(set->points, 0, ORDO_DEADLINE_NOW),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_signal_wait_any(set->points, 0, ORDO_DEADLINE_NOW, &index),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_signal_wait_any(set->points, 2, ORDO_DEADLINE_NOW, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_signal_wait_all(set->points, ORDO_SIGNAL_WAIT_MAX + 1, ORDO_DEADLINE_NOW),
                  ORDO_ERR_OUT_OF_RANGE);
    ordo_signal_point_t bad[2] = {set->points[0], {NULL, 1}};
    assert_status(ordo_signal_wait_all(bad, 2, ORDO_DEADLINE_NOW), ORDO_ERR_INVALID_HANDLE);
    assert_non_null(strstr(ordo_error_message(), "entry 1"));
    bad[1] = (ordo_signal_point_t){set->signals[1], ORDO_SIGNAL_VALUE_MAX + 1};
    assert_status(ordo_signal_wait_any(bad, 2, ORDO_DEADLINE_NOW, &index), ORDO_ERR_OUT_OF_RANGE);
    set_free(set);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(wait_any_names_the_signalled_entry),
        cmocka_unit_test(wait_any_prefers_the_lowest_reached_entry),
        cmocka_unit_test(wait_any_times_out),
        cmocka_unit_test(wait_all_needs_every_entry),
        cmocka_unit_test(wait_all_with_repeated_signals),
        cmocka_unit_test(wait_all_returns_a_failure_at_once),
        cmocka_unit_test(wait_any_reports_a_failure_with_its_index),
        cmocka_unit_test(a_timeout_failure_during_the_sleep_is_a_failure),
        cmocka_unit_test(largest_waits_work),
        cmocka_unit_test(destroy_during_wait_any_cancels_it),
        cmocka_unit_test(bad_input_is_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
