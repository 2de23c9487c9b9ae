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
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "ordo/ordo.h"

/* TEST_UNDER_TSAN: defined in a ThreadSanitizer build (gcc or clang), for
 * the few tests that must skip there. */
#if defined(__SANITIZE_THREAD__)
#define TEST_UNDER_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_UNDER_TSAN 1
#endif
#endif

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

/* Joins a thread, failing the test if it does not finish within
 * TEST_WAIT_MS. */
static inline void test_join_bounded(pthread_t thread) {
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += TEST_WAIT_MS / 1000;
    if (pthread_timedjoin_np(thread, NULL, &until) != 0) {
        fail_msg("a thread did not finish in %d ms", TEST_WAIT_MS);
    }
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

/* The device the core's suites run on: ORDO_TEST_DEVICE from the
 * environment (a device name as ordo_device_list gives it, e.g. cuda:0),
 * cpu:0 by default. tests/CMakeLists.txt runs each core suite once per
 * device (the conformance label); see docs/DEVICES.md. */
static inline const char *test_device_name(void) {
    const char *name = getenv("ORDO_TEST_DEVICE");
    return name && *name ? name : "cpu:0";
}

/* Whether the suite runs on a device of the named backend ("cpu", "cuda"). */
static inline int test_device_is(const char *backend) {
    const char *name = test_device_name();
    size_t n = strlen(backend);
    return strncmp(name, backend, n) == 0 && (name[n] == '\0' || name[n] == ':');
}

/* Whether the device's runtime keeps host blocks it made for a test's work
 * (until the device is released): the CUDA backend pools its point events
 * and their records per device runtime, so a count of the allocator's live
 * blocks taken before a test and after it differs there by what the pool
 * kept. Leaks are still found: the device is released at the end of the
 * suite, and the sanitizer builds check for leaks. */
static inline int test_device_keeps_host_blocks(void) {
    return test_device_is("cuda");
}

/* test_scaled, and a tenth of it on CUDA: a randomized suite runs fewer
 * rounds there (each point is a driver event, and the stand-in driver runs
 * every stream as a host thread), enough to cover its paths in CI time. */
static inline uint64_t test_device_scaled(uint64_t count) {
    uint64_t scaled = test_scaled(count);
    if (test_device_is("cuda")) {
        scaled /= 10;
    }
    return scaled ? scaled : 1;
}

/* Printed by a conformance suite as it starts on its device. */
static inline void test_conformance_begin(const char *concept) {
    print_message("conformance %s on %s\n", concept, test_device_name());
}

/* The skip list of every conformance suite (tests/conformance_skips.h):
 * whether test (a function's name) of file is listed for the backend of
 * device; prints the reason if so. */
#include "conformance_skips.h"

static inline int test_listed_skip(const char *device, const char *file, const char *test) {
    const char *base = strrchr(file, '/');
    base = base ? base + 1 : file;
    for (const conformance_skip_t *s = conformance_skips; s->backend; ++s) {
        size_t n = strlen(s->backend);
        if (strncmp(device, s->backend, n) == 0 && (device[n] == '\0' || device[n] == ':') &&
            strcmp(s->file, base) == 0 &&
            (strcmp(s->test, "*") == 0 || strcmp(s->test, test) == 0)) {
            print_message("  skipped on %s: %s\n", device, s->reason);
            return 1;
        }
    }
    return 0;
}

/* Skips the calling test (cmocka skip(): counted as skipped) when the skip
 * list names it for the device under test. */
#define TEST_SKIP_IF_LISTED()                                                                      \
    do {                                                                                           \
        if (test_listed_skip(test_device_name(), __FILE__, __func__)) {                            \
            skip();                                                                                \
        }                                                                                          \
    } while (0)

/* A small, fast, seeded generator: tests are reproducible. */
static inline uint64_t test_rand(uint64_t *state) {
    uint64_t x = *state;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *state = x;
}

#endif
