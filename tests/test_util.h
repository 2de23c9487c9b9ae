/* Shared helpers for ordo's tests (cmocka). Every wait in a test is bounded
 * by a deadline so that a bug fails the test instead of hanging it. */
#ifndef ORDO_TEST_UTIL_H
#define ORDO_TEST_UTIL_H

#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cmocka.h>

#include "ordo/ordo.h"

/* The default bound on any single wait in a test. */
#define TEST_WAIT_MS 10000

static inline ordo_deadline_t test_deadline(void) {
    return ordo_deadline_after_ms(TEST_WAIT_MS);
}

/* Asserts a status, printing ordo's message when it differs. */
#define assert_status(expr, expected)                                                              \
    do {                                                                                           \
        ordo_status_t st_ = (expr);                                                                \
        if (st_ != (expected)) {                                                                   \
            print_error("%s returned %s, expected %s (%s)\n", #expr, ordo_status_name(st_),        \
                        ordo_status_name(expected), ordo_error_message());                         \
        }                                                                                          \
        assert_int_equal(st_, (expected));                                                         \
    } while (0)

#define assert_ok(expr) assert_status(expr, ORDO_OK)

/* Work is divided by this in sanitizer builds (they run 5-20x slower). */
#ifndef ORDO_TEST_SCALE_DIVISOR
#define ORDO_TEST_SCALE_DIVISOR 1
#endif

static inline uint64_t test_scaled(uint64_t count) {
    uint64_t scaled = count / ORDO_TEST_SCALE_DIVISOR;
    return scaled ? scaled : 1;
}

static inline pthread_t test_thread_start(void *(*fn)(void *), void *arg) {
    pthread_t thread;
    if (pthread_create(&thread, NULL, fn, arg) != 0) {
        fail_msg("pthread_create failed");
    }
    return thread;
}

/* Sleeps for ms milliseconds (to let another thread reach its wait). */
static inline void test_sleep_ms(unsigned ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

static inline ordo_signal_t *test_signal_make(uint64_t initial) {
    ordo_signal_t *signal = NULL;
    assert_ok(ordo_signal_create(initial, &signal));
    return signal;
}

/* A small, fast, seeded generator: tests are reproducible. */
static inline uint64_t test_rand(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

#endif
