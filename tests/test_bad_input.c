/* A sweep of every public entry point with bad input, header by header:
 * NULL handles and outputs, handles of the wrong type, values out of
 * range, handles of another device or owner. Each refusal must return the
 * status the header promises (or the class status.h gives the mistake),
 * raise a message naming the function, leave every output it was given
 * empty (NULL, 0, an all-zero struct: docs/ERRORS.md, "Outputs on
 * failure"; REFUSED_CLEARS pre-fills them with a sentinel), and leak nothing
 * (ordo_allocator_live_blocks, and the sanitizers' leak check). */
#include <limits.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/tracker_observer.h"
#include "ordo/cuda.h"
#include "ordo/metrics.h"
#include "test_util.h"

/* Sets this thread's error message to one that names prime_fn, so that a
 * refusal that raises nothing shows up as a stale message. */
static void prime_message(const char *checked) {
    if (strcmp(checked, "ordo_allocator_live_blocks") != 0) {
        (void)ordo_allocator_live_blocks(NULL);
    } else {
        (void)ordo_signal_create(0, NULL);
    }
}

static void check_message(const char *fn, const char *expr, int line) {
    const char *message = ordo_error_message();
    if (!message || !message[0] || !strstr(message, fn)) {
        fail_msg("line %d: %s: the message \"%s\" does not name %s", line, expr,
                 message ? message : "(null)", fn);
    }
}

/* fn(...) returns expected, with a fresh message that names fn. */
#define REFUSED(expected, fn, ...)                                                                 \
    do {                                                                                           \
        prime_message(#fn);                                                                        \
        ordo_status_t st_ = fn(__VA_ARGS__);                                                       \
        if (st_ != (expected)) {                                                                   \
            print_error("line %d: %s(%s) returned %s, expected %s (%s)\n", __LINE__, #fn,          \
                        #__VA_ARGS__, ordo_status_name(st_), ordo_status_name(expected),           \
                        ordo_error_message());                                                     \
        }                                                                                          \
        assert_int_equal(st_, (expected));                                                         \
        check_message(#fn, #__VA_ARGS__, __LINE__);                                                \
    } while (0)

/* An output's bytes before a refusal: not zero anywhere, so a pointer, an
 * id, a count, a flag and every field of a struct all start non-empty. */
#define SENTINEL_BYTE 0x5a

static void check_cleared(const void *object, size_t size, const char *fn, const char *name,
                          int line) {
    const unsigned char *bytes = object;
    for (size_t i = 0; i < size; ++i) {
        if (bytes[i] != 0) {
            fail_msg("line %d: %s left %s set (byte %zu is 0x%02x) instead of clearing it", line,
                     fn, name, i, bytes[i]);
        }
    }
}

/* REFUSED, with the output object (a variable, or *pointer) pre-filled
 * with the sentinel and found empty (NULL, 0, all zero) after the call. */
#define REFUSED_CLEARS(expected, object, fn, ...)                                                  \
    do {                                                                                           \
        memset(&(object), SENTINEL_BYTE, sizeof(object));                                          \
        REFUSED(expected, fn, __VA_ARGS__);                                                        \
        check_cleared(&(object), sizeof(object), #fn, #object, __LINE__);                          \
    } while (0)

/* The same for a function with two outputs. */
#define REFUSED_CLEARS2(expected, first, second, fn, ...)                                          \
    do {                                                                                           \
        memset(&(first), SENTINEL_BYTE, sizeof(first));                                            \
        memset(&(second), SENTINEL_BYTE, sizeof(second));                                          \
        REFUSED(expected, fn, __VA_ARGS__);                                                        \
        check_cleared(&(first), sizeof(first), #fn, #first, __LINE__);                             \
        check_cleared(&(second), sizeof(second), #fn, #second, __LINE__);                          \
    } while (0)

/* A live object of no ordo type: zeroes where a magic number would be. */
static uint64_t garbage[64];
#define GARBAGE(type) ((type *)(void *)garbage)
/* A live object of another type. */
#define AS(type, object) ((type *)(void *)(object))

static size_t live_blocks(void) {
    size_t n = 0;
    assert_ok(ordo_allocator_live_blocks(&n));
    return n;
}

/* The objects most checks need: the shared cpu device with two streams,
 * an owned device with one (a foreign device), and a signal. */
typedef struct fixture {
    size_t blocks_before;
    ordo_device_t *device;
    ordo_device_t *other;
    ordo_stream_t *s[2];
    ordo_stream_t *foreign;
    ordo_signal_t *signal;
} fixture_t;

static void fixture_make(fixture_t *f) {
    memset(f, 0, sizeof *f);
    f->blocks_before = live_blocks();
    assert_ok(ordo_device_open("cpu:0", &f->device));
    assert_ok(ordo_device_create_owned("cpu:0", NULL, &f->other));
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_create(f->device, 0, &f->s[i]));
    }
    assert_ok(ordo_stream_create(f->other, 0, &f->foreign));
    f->signal = test_signal_make(0);
}

static void fixture_free(fixture_t *f) {
    assert_ok(ordo_signal_release(f->signal));
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_destroy(f->s[i]));
    }
    assert_ok(ordo_stream_destroy(f->foreign));
    assert_ok(ordo_device_release(f->other));
    assert_ok(ordo_device_release(f->device));
    assert_int_equal(live_blocks(), f->blocks_before);
}

/* ---------------------------------------------------------------- status.h, time.h */

static void status_and_time(void **state) {
    (void)state;
    const ordo_status_t not_statuses[] = {(ordo_status_t)-1, ORDO_STATUS_COUNT_,
                                          (ordo_status_t)INT_MAX, (ordo_status_t)INT_MIN};
    for (size_t i = 0; i < sizeof not_statuses / sizeof not_statuses[0]; ++i) {
        assert_string_equal(ordo_status_name(not_statuses[i]), "ORDO_ERR_<unknown>");
        const char *describe = ordo_status_describe(not_statuses[i]);
        assert_non_null(describe);
        assert_true(describe[0] != '\0');
        assert_int_equal(ordo_status_is_error(not_statuses[i]), 0);
    }
    assert_int_equal(ordo_status_is_error(ORDO_OK), 0);
    assert_int_not_equal(ordo_status_is_error(ORDO_ERR_CORRUPTED), 0);
    assert_non_null(ordo_error_message());

    assert_int_equal(ordo_deadline_after_ns(UINT64_MAX), ORDO_DEADLINE_NEVER);
    assert_int_equal(ordo_deadline_after_ns(UINT64_MAX - 1), ORDO_DEADLINE_NEVER);
    assert_int_equal(ordo_deadline_after_ms(UINT64_MAX), ORDO_DEADLINE_NEVER);
    assert_int_equal(ordo_deadline_after_ms(UINT64_MAX / 1000000u), ORDO_DEADLINE_NEVER);
    assert_int_equal(ordo_deadline_after_ms(UINT64_MAX / 1000000u + 1), ORDO_DEADLINE_NEVER);
    assert_int_equal(ordo_deadline_remaining_ns(ORDO_DEADLINE_NOW), 0);
    assert_int_equal(ordo_deadline_remaining_ns(ordo_time_now_ns() - 1), 0);
    assert_int_equal(ordo_deadline_remaining_ns(ORDO_DEADLINE_NEVER), UINT64_MAX);
}

/* ---------------------------------------------------------------- alloc.h */

static void *hook_allocate(void *user, size_t size, size_t alignment) {
    (void)user;
    return aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}

static void hook_deallocate(void *user, void *block, size_t size, size_t alignment) {
    (void)user, (void)size, (void)alignment;
    free(block);
}

static void alloc_hooks(void **state) {
    (void)state;
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_allocator_live_blocks, NULL);
    ordo_allocator_t half = {hook_allocate, NULL, NULL};
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_allocator_set, &half);
    ordo_allocator_t other_half = {NULL, hook_deallocate, NULL};
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_allocator_set, &other_half);
    /* Refused while ordo holds blocks of the current hooks. */
    ordo_signal_t *signal = test_signal_make(0);
    ordo_allocator_t whole = {hook_allocate, hook_deallocate, NULL};
    REFUSED(ORDO_ERR_BUSY, ordo_allocator_set, &whole);
    assert_ok(ordo_signal_release(signal));
}

/* ---------------------------------------------------------------- device.h */

static void device_entry_points(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
    ordo_device_t *d = (ordo_device_t *)1;
    size_t count = 99;
    const char *names[4];
    ordo_device_info_t infos[2];
    bool flag = 7;
    char reason[64];

    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_backend_list, names, 4, NULL);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, count, ordo_backend_list, NULL, 4, &count);
    assert_ok(ordo_backend_list(NULL, 0, &count));
    assert_true(count >= 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_device_list, infos, 2, NULL);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, count, ordo_device_list, NULL, 2, &count);
    assert_ok(ordo_device_list(NULL, 0, &count));
    assert_true(count >= 1);
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, flag, ordo_backend_available, "no-such-backend", &flag,
                   reason, sizeof reason);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, flag, ordo_backend_available, NULL, &flag, reason,
                   sizeof reason);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_backend_available, "cpu", NULL, reason, sizeof reason);

    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, d, ordo_device_open, "", &d);
    d = (ordo_device_t *)1;
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, d, ordo_device_open, "nope:0", &d);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, d, ordo_device_open, "cpu:0:0", &d);
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, d, ordo_device_open, "cpu:18446744073709551617", &d);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, d, ordo_device_create_owned, NULL, NULL, &d);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_device_create_owned, "cpu", NULL, NULL);
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, d, ordo_device_create_owned, "nope", NULL, &d);

    /* Owned configurations out of range. */
    ordo_device_config_t config;
    assert_ok(ordo_device_config_default(&config));
    config.plain_events.growth = 0;
    d = (ordo_device_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, d, ordo_device_create_owned, "cpu", &config, &d);
    assert_ok(ordo_device_config_default(&config));
    config.timing_events.growth = 0;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, d, ordo_device_create_owned, "cpu", &config, &d);
    assert_ok(ordo_device_config_default(&config));
    config.timing_events.growth = SIZE_MAX;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, d, ordo_device_create_owned, "cpu", &config, &d);
    assert_ok(ordo_device_config_default(&config));
    config.plain_events.initial = 8;
    config.plain_events.maximum = 4;
    /* initial above the maximum: either refused or clamped, never a crash. */
    ordo_status_t st = ordo_device_create_owned("cpu", &config, &d);
    if (st == ORDO_OK) {
        assert_ok(ordo_device_release(d));
    } else {
        check_message("ordo_device_create_owned", "initial > maximum", __LINE__);
    }
    assert_ok(ordo_device_config_default(&config));
    config.memory.adaptors = 0x100;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, d, ordo_device_create_owned, "cpu", &config, &d);
    assert_ok(ordo_device_config_default(&config));
    config.memory.adaptors = ORDO_DEVICE_MEMORY_LOGGING;
    config.memory.log_path[0] = '\0';
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, d, ordo_device_create_owned, "cpu", &config, &d);
    /* An unterminated log path is refused, not read past its end. */
    memset(config.memory.log_path, 'a', sizeof config.memory.log_path);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, d, ordo_device_create_owned, "cpu", &config, &d);

    /* Handles: NULL, garbage, another type. */
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_device_retain, GARBAGE(ordo_device_t));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_device_retain, AS(ordo_device_t, f.s[0]));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_device_release, AS(ordo_device_t, f.signal));
    ordo_device_info_t info;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, info, ordo_device_info, AS(ordo_device_t, f.s[0]),
                   &info);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_device_info, f.device, NULL);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, flag, ordo_device_is_shared, AS(ordo_device_t, f.s[0]),
                   &flag);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_device_is_shared, f.device, NULL);
    ordo_event_pool_stats_t stats;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, stats, ordo_device_event_pool_stats, f.device,
                   (ordo_event_kind_t)2, &stats);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, stats, ordo_device_event_pool_stats, f.device,
                   (ordo_event_kind_t)-1, &stats);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, stats, ordo_device_event_pool_stats,
                   AS(ordo_device_t, f.signal), ORDO_EVENT_PLAIN, &stats);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_device_event_pool_trim, AS(ordo_device_t, f.s[1]), 0);
    assert_ok(ordo_device_event_pool_trim(f.device, SIZE_MAX));
    fixture_free(&f);
}

/* ---------------------------------------------------------------- event.h */

static void event_entry_points(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
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
    fixture_free(&f);
}

/* ---------------------------------------------------------------- signal.h */

static void signal_entry_points(void **state) {
    (void)state;
    size_t before = live_blocks();
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
    assert_int_equal(live_blocks(), before);
}

/* ---------------------------------------------------------------- timepoint.h, link.h */

static void on_timepoint(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status, (void)timepoint;
    ++*(int *)ctx;
}

static void timepoint_and_link_entry_points(void **state) {
    (void)state;
    size_t before = live_blocks();
    ordo_signal_t *a = test_signal_make(0), *b = test_signal_make(0);
    int fired = 0;
    ordo_timepoint_t tp = ORDO_TIMEPOINT_INIT;
    ordo_cancel_result_t result;
    ordo_signal_t *wrong = AS(ordo_signal_t, &tp);

    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_timepoint_arm, NULL, a, 1, on_timepoint, &fired);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_timepoint_arm, &tp, NULL, 1, on_timepoint, &fired);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_timepoint_arm, &tp, GARBAGE(ordo_signal_t), 1,
            on_timepoint, &fired);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_timepoint_arm, &tp, a, 1, NULL, &fired);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_timepoint_arm, &tp, a, ORDO_SIGNAL_VALUE_MAX + 1,
            on_timepoint, &fired);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, result, ordo_timepoint_cancel, &tp, &result);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, result, ordo_timepoint_cancel, NULL, &result);
    assert_ok(ordo_timepoint_arm(&tp, a, 1, on_timepoint, &fired));
    REFUSED(ORDO_ERR_BUSY, ordo_timepoint_arm, &tp, a, 2, on_timepoint, &fired);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_timepoint_cancel, &tp, NULL);
    assert_ok(ordo_timepoint_cancel(&tp, &result));
    assert_int_equal(result, ORDO_CANCEL_PREVENTED);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, result, ordo_timepoint_cancel, &tp, &result);
    assert_int_equal(fired, 0);

    ordo_link_t link;
    memset(&link, 0, sizeof link);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_link_arm, NULL, a, 1, b, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_link_arm, &link, NULL, 1, b, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_link_arm, &link, a, 1, NULL, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_link_arm, &link, wrong, 1, b, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_link_arm, &link, a, 1, wrong, 1);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_link_arm, &link, a, ORDO_SIGNAL_VALUE_MAX + 1, b, 1);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_link_arm, &link, a, 1, b, ORDO_SIGNAL_VALUE_MAX + 1);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, result, ordo_link_cancel, &link, &result);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, result, ordo_link_cancel, NULL, &result);
    assert_ok(ordo_link_arm(&link, a, 1, b, 1));
    REFUSED(ORDO_ERR_BUSY, ordo_link_arm, &link, a, 2, b, 2);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_link_cancel, &link, NULL);
    assert_ok(ordo_link_cancel(&link, &result));
    assert_int_equal(result, ORDO_CANCEL_PREVENTED);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, result, ordo_link_cancel, &link, &result);

    /* Destroyed source or target: refused, holding no reference. */
    ordo_signal_t *dead = test_signal_make(0);
    assert_ok(ordo_signal_retain(dead));
    assert_ok(ordo_signal_destroy(dead));
    REFUSED(ORDO_ERR_DESTROYED, ordo_timepoint_arm, &tp, dead, 1, on_timepoint, &fired);
    REFUSED(ORDO_ERR_DESTROYED, ordo_link_arm, &link, dead, 1, b, 1);
    REFUSED(ORDO_ERR_DESTROYED, ordo_link_arm, &link, a, 1, dead, 1);
    assert_ok(ordo_signal_release(dead));
    assert_int_equal(fired, 0);

    assert_ok(ordo_signal_release(a));
    assert_ok(ordo_signal_release(b));
    assert_int_equal(live_blocks(), before);
}

/* ---------------------------------------------------------------- stream.h, stream_pool.h */

static ordo_status_t noop_task(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

static ordo_status_t failing_task(void *ctx) {
    (void)ctx;
    return ORDO_ERR_ABORTED;
}

static void stream_entry_points(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
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
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, pool, ordo_stream_pool_create, f.device, NULL, &pool);
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
    fixture_free(&f);
}

/* ---------------------------------------------------------------- barrier.h */

static void barrier_entry_points(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
    ordo_barrier_t *barrier = (ordo_barrier_t *)1;
    ordo_stream_t *wrong[2] = {f.s[0], AS(ordo_stream_t, f.signal)};
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, barrier, ordo_barrier_create, wrong, 2,
                   ORDO_BARRIER_SCHEME_AUTO, &barrier);
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, barrier, ordo_barrier_create, f.s, SIZE_MAX,
                   ORDO_BARRIER_SCHEME_AUTO, &barrier);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, barrier, ordo_barrier_create, f.s, 2,
                   (ordo_barrier_scheme_t)-1, &barrier);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, barrier, ordo_barrier_create, f.s, 2,
                   (ordo_barrier_scheme_t)3, &barrier);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_barrier_streams, f.s, SIZE_MAX);
    uint64_t ns = 5;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, ns, ordo_barrier_synchronize_streams, f.s, SIZE_MAX,
                   ORDO_DEADLINE_NOW, &ns);
    assert_ok(ordo_barrier_create(f.s, 2, ORDO_BARRIER_SCHEME_AUTO, &barrier));
    ordo_barrier_t *not_barrier = AS(ordo_barrier_t, f.s[0]);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_barrier_destroy, not_barrier);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, ns, ordo_barrier_synchronize, not_barrier,
                   ORDO_DEADLINE_NOW, &ns);
    size_t count;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, count, ordo_barrier_stream_count, not_barrier, &count);
    /* out_elapsed_ns may be NULL. */
    assert_ok(ordo_barrier_synchronize(barrier, test_deadline(), NULL));
    assert_ok(ordo_barrier_synchronize_streams(f.s, 2, test_deadline(), NULL));
    assert_ok(ordo_barrier_destroy(barrier));

    /* A barrier of one failed stream returns the failure with a message of
     * its own (not whatever message came before). */
    ordo_stream_t *failed = NULL;
    assert_ok(ordo_stream_create(f.device, 0, &failed));
    assert_ok(ordo_stream_host_task(failed, failing_task, NULL));
    assert_status(ordo_stream_synchronize(failed, test_deadline()), ORDO_ERR_ABORTED);
    assert_ok(ordo_barrier_create(&failed, 1, ORDO_BARRIER_SCHEME_AUTO, &barrier));
    REFUSED(ORDO_ERR_ABORTED, ordo_barrier_arrive, barrier);
    assert_null(strstr(ordo_error_message(), "ordo_allocator_live_blocks"));
    REFUSED(ORDO_ERR_ABORTED, ordo_barrier_streams, &failed, 1);
    assert_null(strstr(ordo_error_message(), "ordo_allocator_live_blocks"));
    assert_ok(ordo_barrier_destroy(barrier));
    assert_ok(ordo_stream_destroy(failed));
    fixture_free(&f);
}

/* ---------------------------------------------------------------- coordinator.h */

static ordo_status_t coord_launch(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    return ordo_stream_host_task(stream, noop_task, NULL);
}

static void on_op(void *ctx, ordo_op_id_t op, ordo_status_t status) {
    (void)op, (void)status;
    ++*(int *)ctx;
}

static void coordinator_entry_points(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
    ordo_coord_t *coord = (ordo_coord_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, coord, ordo_coord_create, AS(ordo_device_t, f.s[0]),
                   NULL, &coord);
    ordo_coord_config_t wrong_pool = {AS(ordo_stream_pool_t, f.signal), 0};
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, coord, ordo_coord_create, f.device, &wrong_pool,
                   &coord);
    assert_ok(ordo_coord_create(f.device, NULL, &coord));
    ordo_coord_t *wrong = AS(ordo_coord_t, f.s[0]);

    ordo_op_id_t first = 0, id = 77;
    ordo_op_desc_t desc = {ORDO_OP_KERNEL,
                           ORDO_OP_PRIORITY_NORMAL,
                           f.s[0],
                           ORDO_WORKLOAD_ANY,
                           NULL,
                           0,
                           "first",
                           NULL,
                           NULL};
    assert_ok(ordo_coord_register(coord, &desc, &first));

    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, id, ordo_coord_register, wrong, &desc, &id);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, NULL, &id);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_register, coord, &desc, NULL);
    ordo_op_desc_t bad = desc;
    bad.type = (ordo_op_type_t)7;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.type = (ordo_op_type_t)-1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.priority = (ordo_op_priority_t)5;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.priority = (ordo_op_priority_t)-1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.stream = NULL; /* no pool */
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.stream = AS(ordo_stream_t, f.signal);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.stream = f.foreign;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.dep_count = 1; /* deps NULL */
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad = desc;
    bad.deps = &first;
    bad.dep_count = ORDO_COORD_MAX_DEPS + 1;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, id, ordo_coord_register, coord, &bad, &id);
    bad.dep_count = SIZE_MAX;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, id, ordo_coord_register, coord, &bad, &id);
    const ordo_op_id_t unknown[2] = {first, 1000};
    bad.deps = unknown;
    bad.dep_count = 2;
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, id, ordo_coord_register, coord, &bad, &id);
    const ordo_op_id_t zero[1] = {0};
    bad.deps = zero;
    bad.dep_count = 1;
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, id, ordo_coord_register, coord, &bad, &id);
    assert_int_equal(id, 0);
    /* An over-long description is truncated, not refused. */
    char long_description[300];
    memset(long_description, 'd', sizeof long_description - 1);
    long_description[sizeof long_description - 1] = '\0';
    ordo_op_desc_t second_desc = desc;
    second_desc.description = long_description;
    second_desc.deps = &first;
    second_desc.dep_count = 1;
    ordo_op_id_t second = 0;
    assert_ok(ordo_coord_register(coord, &second_desc, &second));

    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_coord_add_dependency, wrong, second, first);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_add_dependency, coord, second, second);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_add_dependency, coord, second, 0);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_add_dependency, coord, 0, first);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_add_dependency, coord, UINT64_MAX, first);
    REFUSED(ORDO_ERR_DEADLOCK, ordo_coord_add_dependency, coord, first, second);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_coord_begin, wrong, first);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_begin, coord, 0);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_begin, coord, UINT64_MAX);
    REFUSED(ORDO_ERR_BUSY, ordo_coord_begin, coord, second);
    REFUSED(ORDO_ERR_BUSY, ordo_coord_complete, coord, first);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_coord_complete, wrong, first);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_complete, coord, 0);
    int callbacks = 0;
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_coord_on_complete, wrong, first, on_op, &callbacks);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_on_complete, coord, first, NULL, &callbacks);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_on_complete, coord, 0, on_op, &callbacks);
    REFUSED(ORDO_ERR_NOT_FOUND, ordo_coord_on_complete, coord, 999, on_op, &callbacks);
    size_t launched = 7;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, launched, ordo_coord_dispatch, wrong, 1, &launched);
    ordo_stream_t *stream = (ordo_stream_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, stream, ordo_coord_op_stream, wrong, first, &stream);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_op_stream, coord, first, NULL);
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, stream, ordo_coord_op_stream, coord, 0, &stream);
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, stream, ordo_coord_op_stream, coord, 999, &stream);
    ordo_op_cycle_t cycles[2];
    size_t count = 9;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, count, ordo_coord_detect_deadlocks, wrong, cycles, 2,
                   &count);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, count, ordo_coord_detect_deadlocks, coord, NULL, 2,
                   &count);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_detect_deadlocks, coord, cycles, 2, NULL);
    assert_ok(ordo_coord_detect_deadlocks(coord, NULL, 0, &count));
    assert_int_equal(count, 0);
    ordo_coord_metrics_t m;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, m, ordo_coord_metrics, wrong, &m);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_metrics, coord, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_coord_drain, wrong, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_coord_destroy, wrong);

    /* The graph still runs after all that. */
    assert_ok(ordo_coord_on_complete(coord, second, on_op, &callbacks));
    assert_ok(ordo_coord_begin(coord, first));
    assert_ok(ordo_coord_complete(coord, first));
    assert_ok(ordo_coord_begin(coord, second));
    assert_ok(ordo_coord_complete(coord, second));
    ordo_op_desc_t dispatched = desc;
    dispatched.launch = coord_launch;
    assert_ok(ordo_coord_register(coord, &dispatched, &id));
    assert_ok(ordo_coord_dispatch(coord, 0, &launched));
    assert_int_equal(launched, 0);
    assert_ok(ordo_coord_dispatch(coord, SIZE_MAX, &launched));
    assert_int_equal(launched, 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_coord_begin, coord, id);
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    assert_int_equal(callbacks, 1);
    assert_ok(ordo_coord_destroy(coord));

    /* With a pool, ops without a stream take one by workload: one outside
     * the enum is refused. */
    ordo_stream_pool_t *pool = NULL;
    ordo_stream_pool_config_t pool_config = {1, 0, 1, 0, 0};
    assert_ok(ordo_stream_pool_create(f.device, &pool_config, &pool));
    ordo_coord_config_t with_pool = {pool, 0};
    assert_ok(ordo_coord_create(f.device, &with_pool, &coord));
    bad = desc;
    bad.stream = NULL;
    bad.workload = (ordo_workload_t)3;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    bad.workload = (ordo_workload_t)-1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_coord_register, coord, &bad, &id);
    assert_ok(ordo_coord_destroy(coord));
    assert_ok(ordo_stream_pool_destroy(pool));
    fixture_free(&f);
}

/* ---------------------------------------------------------------- tracker.h, buffer.h */

/* Counted on the reclaimer thread and inline on the releasing one. */
static _Atomic int reclaimed;

static void on_reclaim(void *ctx) {
    (void)ctx;
    atomic_fetch_add(&reclaimed, 1);
}

static ordo_status_t tracker_launch(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    return ordo_stream_host_task(stream, noop_task, NULL);
}

static ordo_status_t failing_launch(void *ctx, ordo_stream_t *stream) {
    (void)ctx, (void)stream;
    return ORDO_ERR_ABORTED;
}

static void tracker_entry_points(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
    ordo_tracker_t *tracker = (ordo_tracker_t *)1, *other = NULL;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, tracker, ordo_tracker_create, NULL, &tracker);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, tracker, ordo_tracker_create,
                   AS(ordo_device_t, f.signal), &tracker);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_create, f.device, NULL);
    assert_ok(ordo_tracker_create(f.device, &tracker));
    assert_ok(ordo_tracker_create(f.device, &other));
    ordo_tracker_t *wrong = AS(ordo_tracker_t, f.s[0]);

    ordo_buffer_t *buffer = (ordo_buffer_t *)1, *theirs = NULL;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, buffer, ordo_buffer_create, NULL, &buffer);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, buffer, ordo_buffer_create, wrong, &buffer);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_buffer_create, tracker, NULL);
    assert_ok(ordo_buffer_create(tracker, &buffer));
    assert_ok(ordo_buffer_create(other, &theirs));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_buffer_release, NULL, NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_buffer_release, AS(ordo_buffer_t, f.signal), NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_buffer_release, AS(ordo_buffer_t, tracker), NULL, NULL);

    ordo_access_t ok[1] = {{buffer, ORDO_ACCESS_WRITE}};
    ordo_access_t bad_mode[1] = {{buffer, (ordo_access_mode_t)0}};
    ordo_access_t bad_mode2[1] = {{buffer, (ordo_access_mode_t)4}};
    ordo_access_t null_buffer[2] = {{buffer, ORDO_ACCESS_READ}, {NULL, ORDO_ACCESS_READ}};
    ordo_access_t wrong_buffer[1] = {{AS(ordo_buffer_t, f.signal), ORDO_ACCESS_READ}};
    ordo_access_t foreign_buffer[1] = {{theirs, ORDO_ACCESS_READ}};
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit, NULL, f.s[0], ok, 1, tracker_launch,
            NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit, wrong, f.s[0], ok, 1, tracker_launch,
            NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit, tracker, NULL, ok, 1, tracker_launch,
            NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit, tracker, AS(ordo_stream_t, f.signal), ok,
            1, tracker_launch, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.foreign, ok, 1,
            tracker_launch, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.s[0], NULL, 1,
            tracker_launch, NULL);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_tracker_submit, tracker, f.s[0], ok,
            ORDO_TRACKER_MAX_ACCESSES + 1, tracker_launch, NULL);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_tracker_submit, tracker, f.s[0], ok, SIZE_MAX,
            tracker_launch, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.s[0], ok, 1, NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.s[0], bad_mode, 1,
            tracker_launch, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.s[0], bad_mode2, 1,
            tracker_launch, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit, tracker, f.s[0], null_buffer, 2,
            tracker_launch, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_submit, tracker, f.s[0], wrong_buffer, 1,
            tracker_launch, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_submit, tracker, f.s[0], foreign_buffer, 1,
            tracker_launch, NULL);
    /* The launch function's own status comes back as it is. */
    assert_status(ordo_tracker_submit(tracker, f.s[0], ok, 1, failing_launch, NULL),
                  ORDO_ERR_ABORTED);
    /* The split form refuses the same. */
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_prepare, NULL, f.s[0], ok, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_prepare, tracker, NULL, ok, 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_prepare, tracker, f.foreign, ok, 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_prepare, tracker, f.s[0], NULL, 1);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_tracker_prepare, tracker, f.s[0], ok, SIZE_MAX);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_prepare, tracker, f.s[0], bad_mode, 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_prepare, tracker, f.s[0], foreign_buffer, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_finish, NULL, f.s[0], ok, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_finish, tracker, NULL, ok, 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_finish, tracker, f.foreign, ok, 1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_finish, tracker, f.s[0], NULL, 1);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_tracker_finish, tracker, f.s[0], ok, SIZE_MAX);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_finish, tracker, f.s[0], bad_mode2, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_finish, tracker, f.s[0], null_buffer, 2);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_finish, tracker, f.s[0], foreign_buffer, 1);

    ordo_tracker_metrics_t m;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, m, ordo_tracker_metrics, NULL, &m);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, m, ordo_tracker_metrics, wrong, &m);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_metrics, tracker, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_drain, NULL, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_drain, wrong, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_lock, wrong);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_unlock, wrong);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_tracker_unlock, tracker);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo__tracker_set_wait_observer, NULL, NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo__tracker_set_wait_observer, wrong, NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_destroy, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_tracker_destroy, wrong);
    REFUSED(ORDO_ERR_BUSY, ordo_tracker_destroy, tracker);

    /* Nothing refused above was recorded: the buffer is used by no stream. */
    assert_ok(ordo_tracker_metrics(tracker, &m));
    assert_int_equal(m.submissions, 0);
    assert_ok(ordo_tracker_submit(tracker, f.s[0], ok, 1, tracker_launch, NULL));
    atomic_store(&reclaimed, 0);
    assert_ok(ordo_buffer_release(buffer, on_reclaim, NULL));
    assert_ok(ordo_buffer_release(theirs, on_reclaim, NULL));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_drain(other, test_deadline()));
    assert_int_equal(atomic_load(&reclaimed), 2);
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_tracker_destroy(other));
    fixture_free(&f);
}

/* ---------------------------------------------------------------- memory.h */

static void memory_entry_points(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
    ordo_mem_resource_t *direct = NULL, *pool = NULL, *theirs = NULL, *r = (ordo_mem_resource_t *)1;
    ordo_tracker_t *tracker = NULL;
    assert_ok(ordo_tracker_create(f.device, &tracker));
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_direct_create, AS(ordo_device_t, f.s[0]),
                   &r);
    assert_ok(ordo_mem_direct_create(f.device, &direct));
    assert_ok(ordo_mem_direct_create(f.other, &theirs));
    ordo_mem_resource_t *wrong = AS(ordo_mem_resource_t, f.s[0]);

    /* Pool creation. */
    ordo_mem_pool_config_t config;
    assert_ok(ordo_mem_pool_config_default(&config));
    r = (ordo_mem_resource_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_pool_create, AS(ordo_tracker_t, f.s[0]),
                   direct, &config, &r);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_pool_create, tracker, NULL, &config, &r);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_pool_create, tracker, wrong, &config, &r);
    /* The upstream must be of the tracker's device. */
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, r, ordo_mem_pool_create, tracker, theirs, &config,
                   &r);
    config.reuse = (ordo_mem_reuse_policy_t)2;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, r, ordo_mem_pool_create, tracker, direct, &config,
                   &r);
    config.reuse = (ordo_mem_reuse_policy_t)-1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, r, ordo_mem_pool_create, tracker, direct, &config,
                   &r);
    assert_ok(ordo_mem_pool_config_default(&config));
    config.chunk_bytes = ORDO_MEM_MAX_BYTES + 1;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, r, ordo_mem_pool_create, tracker, direct, &config, &r);
    assert_ok(ordo_mem_pool_create(tracker, direct, NULL, &pool));

    /* Allocation. */
    ordo_block_t *block = (ordo_block_t *)1;
    void *ptr = (void *)1;
    REFUSED_CLEARS2(ORDO_ERR_INVALID_HANDLE, block, ptr, ordo_mem_allocate, wrong, 64, 0, f.s[0], 0,
                    &block, &ptr);
    REFUSED_CLEARS2(ORDO_ERR_INVALID_HANDLE, block, ptr, ordo_mem_allocate, pool, 64, 0, NULL, 0,
                    &block, &ptr);
    REFUSED_CLEARS2(ORDO_ERR_INVALID_HANDLE, block, ptr, ordo_mem_allocate, pool, 64, 0,
                    AS(ordo_stream_t, pool), 0, &block, &ptr);
    REFUSED_CLEARS2(ORDO_ERR_INVALID_ARGUMENT, block, ptr, ordo_mem_allocate, pool, 64, 0,
                    f.foreign, 0, &block, &ptr);
    REFUSED_CLEARS2(ORDO_ERR_INVALID_ARGUMENT, block, ptr, ordo_mem_allocate, direct, 64, 0,
                    f.foreign, 0, &block, &ptr);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, ptr, ordo_mem_allocate, pool, 64, 0, f.s[0], 0, NULL,
                   &ptr);
    REFUSED_CLEARS2(ORDO_ERR_INVALID_ARGUMENT, block, ptr, ordo_mem_allocate, direct, 0, 0, f.s[0],
                    0, &block, &ptr);
    REFUSED_CLEARS2(ORDO_ERR_OUT_OF_RANGE, block, ptr, ordo_mem_allocate, direct,
                    ORDO_MEM_MAX_BYTES + 1, 0, f.s[0], 0, &block, &ptr);
    REFUSED_CLEARS2(ORDO_ERR_OUT_OF_RANGE, block, ptr, ordo_mem_allocate, pool,
                    ORDO_MEM_MAX_BYTES + 1, 0, f.s[0], 0, &block, &ptr);
    REFUSED_CLEARS2(ORDO_ERR_INVALID_ARGUMENT, block, ptr, ordo_mem_allocate, direct, 64,
                    ORDO_MEM_MAX_ALIGNMENT * 2, f.s[0], 0, &block, &ptr);
    REFUSED_CLEARS2(ORDO_ERR_INVALID_ARGUMENT, block, ptr, ordo_mem_allocate, direct, 64, 48,
                    f.s[0], 0, &block, &ptr);
    REFUSED_CLEARS2(ORDO_ERR_INVALID_ARGUMENT, block, ptr, ordo_mem_allocate, pool, 64, SIZE_MAX,
                    f.s[0], 0, &block, &ptr);
    /* Tags are below ORDO_MEM_MAX_TAGS. */
    REFUSED_CLEARS2(ORDO_ERR_OUT_OF_RANGE, block, ptr, ordo_mem_allocate, direct, 64, 0, f.s[0],
                    ORDO_MEM_MAX_TAGS, &block, &ptr);
    REFUSED_CLEARS2(ORDO_ERR_OUT_OF_RANGE, block, ptr, ordo_mem_allocate, pool, 64, 0, f.s[0],
                    UINT32_MAX, &block, &ptr);
    /* The largest alignment and the last tag are accepted. */
    assert_ok(ordo_mem_allocate(pool, 64, ORDO_MEM_MAX_ALIGNMENT, f.s[0], ORDO_MEM_MAX_TAGS - 1,
                                &block, NULL));
    ordo_block_t *direct_block = NULL;
    assert_ok(ordo_mem_allocate(direct, 64, 0, f.s[0], 0, &direct_block, NULL));

    /* Deallocation: another resource's block, a stream of another device. */
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_deallocate, pool, NULL, f.s[0]);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_deallocate, pool, AS(ordo_block_t, f.s[0]), f.s[0]);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_deallocate, wrong, block, f.s[0]);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_deallocate, direct, block, f.s[0]);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_deallocate, pool, direct_block, f.s[0]);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_deallocate, theirs, direct_block, f.s[0]);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_deallocate, pool, block, f.foreign);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_deallocate, direct, direct_block, f.foreign);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_deallocate, pool, block, AS(ordo_stream_t, f.signal));

    /* Use tracking. */
    bool supported = 7;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, supported, ordo_mem_supports_use_tracking, wrong,
                   &supported);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_supports_use_tracking, pool, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_prepare_use, pool, block, f.s[1],
            (ordo_access_mode_t)0);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_prepare_use, pool, block, f.s[1],
            (ordo_access_mode_t)4);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_finish_use, pool, block, f.s[1],
            (ordo_access_mode_t)-1);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_prepare_use, pool, block, f.foreign,
            ORDO_ACCESS_READ);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_finish_use, pool, block, f.foreign,
            ORDO_ACCESS_READ);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_record_use, pool, block, f.foreign);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_prepare_use, pool, direct_block, f.s[1],
            ORDO_ACCESS_READ);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_record_use, pool, direct_block, f.s[1]);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_prepare_use, wrong, block, f.s[1], ORDO_ACCESS_READ);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_prepare_use, pool, block, AS(ordo_stream_t, pool),
            ORDO_ACCESS_READ);
    REFUSED(ORDO_ERR_UNSUPPORTED, ordo_mem_prepare_use, direct, direct_block, f.s[1],
            ORDO_ACCESS_READ);
    REFUSED(ORDO_ERR_UNSUPPORTED, ordo_mem_record_use, direct, direct_block, f.s[1]);

    /* Blocks. */
    ordo_block_info_t info;
    ordo_buffer_t *buffer = (ordo_buffer_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, info, ordo_block_info, AS(ordo_block_t, pool), &info);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, ptr, ordo_block_ptr, AS(ordo_block_t, f.s[0]), &ptr);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, buffer, ordo_block_buffer, AS(ordo_block_t, f.s[0]),
                   &buffer);
    REFUSED_CLEARS(ORDO_ERR_UNSUPPORTED, buffer, ordo_block_buffer, direct_block, &buffer);

    /* Resources. */
    uint64_t bytes;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, bytes, ordo_mem_bytes_outstanding, wrong, &bytes);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_bytes_outstanding, pool, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_reap_pending, wrong, ORDO_DEADLINE_NOW);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_resource_destroy, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_resource_destroy, wrong);
    REFUSED(ORDO_ERR_BUSY, ordo_mem_resource_destroy, pool);
    REFUSED(ORDO_ERR_BUSY, ordo_mem_resource_destroy, direct);
    ordo_mem_pool_stats_t stats;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, stats, ordo_mem_pool_stats, NULL, &stats);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, stats, ordo_mem_pool_stats, wrong, &stats);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_pool_stats, pool, NULL);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, stats, ordo_mem_pool_stats, direct, &stats);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_pool_trim, wrong, 0);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_pool_trim, direct, 0);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_device_memory, NULL, &r);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_device_memory, AS(ordo_device_t, f.s[0]), &r);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_device_memory, f.device, NULL);

    /* Nothing refused above changed the blocks. */
    assert_ok(ordo_mem_deallocate(pool, block, f.s[0]));
    assert_ok(ordo_mem_deallocate(direct, direct_block, f.s[0]));
    assert_ok(ordo_mem_reap_pending(direct, test_deadline()));
    assert_ok(ordo_mem_reap_pending(pool, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(pool));
    assert_ok(ordo_mem_resource_destroy(direct));
    assert_ok(ordo_mem_resource_destroy(theirs));
    assert_ok(ordo_tracker_drain(tracker, test_deadline()));
    assert_ok(ordo_tracker_destroy(tracker));
    fixture_free(&f);
}

/* ---------------------------------------------------------------- memory_adaptors.h */

static void adaptor_entry_points(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
    ordo_mem_resource_t *direct = NULL, *r = (ordo_mem_resource_t *)1;
    assert_ok(ordo_mem_direct_create(f.device, &direct));
    ordo_mem_resource_t *wrong = AS(ordo_mem_resource_t, f.s[0]);

    /* Budget. */
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_budget_config_default, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_budget_set_limit, NULL, 1);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_budget_set_limit, AS(ordo_device_t, f.s[0]), 1);
    ordo_mem_budget_stats_t budget;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, budget, ordo_mem_budget_stats,
                   AS(ordo_device_t, f.s[0]), &budget);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_budget_stats, f.device, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_budget_reset_peak, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_budget_reset_peak, AS(ordo_device_t, f.signal));
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_budget_create, NULL, NULL, &r);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_budget_create, wrong, NULL, &r);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_budget_create, direct, NULL, NULL);

    /* Statistics. */
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_statistics_create, NULL, &r);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_statistics_create, wrong, &r);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_statistics_create, direct, NULL);
    ordo_mem_statistics_t *statistics = malloc(sizeof *statistics);
    assert_non_null(statistics);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, *statistics, ordo_mem_statistics_get, NULL, statistics);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, *statistics, ordo_mem_statistics_get, wrong,
                   statistics);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, *statistics, ordo_mem_statistics_get, direct,
                   statistics);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_statistics_reset_peak, wrong);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_statistics_reset_peak, direct);

    /* Logging. */
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_logging_create, NULL, stderr, &r);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_logging_create, wrong, stderr, &r);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, r, ordo_mem_logging_create, direct, NULL, &r);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_logging_create, direct, stderr, NULL);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_logging_create_path, NULL, "/dev/null", &r);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, r, ordo_mem_logging_create_path, direct, NULL, &r);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, r, ordo_mem_logging_create_path, direct, "", &r);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_logging_create_path, direct, "/dev/null", NULL);
    r = (ordo_mem_resource_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, r, ordo_mem_logging_create_path, direct,
                   "/nonexistent-ordo-directory/log", &r);
    ordo_mem_logging_stats_t lines;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, lines, ordo_mem_logging_stats, wrong, &lines);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, lines, ordo_mem_logging_stats, direct, &lines);

    /* Guard. */
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_guard_config_default, NULL);
    ordo_mem_guard_config_t guard;
    assert_ok(ordo_mem_guard_config_default(&guard));
    guard.canary_bytes = 0;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, r, ordo_mem_guard_create, direct, &guard, &r);
    assert_ok(ordo_mem_guard_config_default(&guard));
    guard.canary_bytes = SIZE_MAX;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, r, ordo_mem_guard_create, direct, &guard, &r);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_guard_create, NULL, NULL, &r);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_guard_create, wrong, NULL, &r);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_guard_create, direct, NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_guard_check, wrong, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_guard_check, direct, NULL);
    ordo_mem_guard_report_t report;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, report, ordo_mem_guard_check, wrong, &report);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, report, ordo_mem_guard_check, direct, &report);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_mem_guard_drain, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_mem_guard_drain, direct);

    /* Adaptors refused above left no dependent behind. */
    assert_ok(ordo_mem_resource_destroy(direct));
    free(statistics);
    fixture_free(&f);
}

/* ---------------------------------------------------------------- metrics.h, stall.h */

static void metrics_and_stall_entry_points(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
    ordo_metrics_t *m = malloc(sizeof *m);
    assert_non_null(m);
    ordo_metrics_sources_t sources = {f.device, NULL, NULL, NULL};
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, *m, ordo_metrics_snapshot, NULL, m);
    ordo_metrics_sources_t wrong_device = {AS(ordo_device_t, f.s[0]), NULL, NULL, NULL};
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, *m, ordo_metrics_snapshot, &wrong_device, m);
    ordo_metrics_sources_t wrong_coord = {NULL, AS(ordo_coord_t, f.s[0]), NULL, NULL};
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, *m, ordo_metrics_snapshot, &wrong_coord, m);
    ordo_metrics_sources_t wrong_waiter = {NULL, NULL, AS(ordo_waiter_t, f.s[0]), NULL};
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, *m, ordo_metrics_snapshot, &wrong_waiter, m);
    assert_ok(ordo_metrics_snapshot(&sources, m));
    char text[16];
    size_t length = 0;
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_metrics_format, m, text, sizeof text, NULL);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, length, ordo_metrics_format, NULL, text, sizeof text,
                   &length);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, length, ordo_metrics_format, m, NULL, sizeof text,
                   &length);
    assert_ok(ordo_metrics_format(m, NULL, 0, &length));
    assert_true(length > 0);
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_metrics_format, m, text, sizeof text, &length);
    assert_int_equal(strlen(text), sizeof text - 1);
    free(m);

    ordo_stall_entry_t entries[2];
    size_t count = 9;
    char report[8];
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, count, ordo_stall_report, NULL, entries, 2, &count);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, count, ordo_stall_report, AS(ordo_device_t, f.s[0]),
                   entries, 2, &count);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, count, ordo_stall_report, f.device, NULL, 2, &count);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_stall_report, f.device, entries, 2, NULL);
    assert_ok(ordo_stall_report(f.device, NULL, 0, &count));
    assert_int_equal(count, 0);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, count, ordo_stall_report_format, NULL, report,
                   sizeof report, &count);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, count, ordo_stall_report_format,
                   AS(ordo_device_t, f.signal), report, sizeof report, &count);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, count, ordo_stall_report_format, f.device, NULL,
                   sizeof report, &count);
    assert_ok(ordo_stall_report_format(f.device, NULL, 0, &count));
    fixture_free(&f);
}

/* ---------------------------------------------------------------- trace.h */

static void trace_entry_points(void **state) {
    (void)state;
    bool on = 7;
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_trace_is_on, NULL);
    ordo_trace_stats_t stats;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, stats, ordo_trace_stop, NULL, &stats);
    ordo_trace_config_t absurd = {UINT64_MAX, 0};
    REFUSED(ORDO_ERR_OUT_OF_RANGE, ordo_trace_start, &absurd);
    /* Room beyond any address space: refused, whichever the class. */
    ordo_trace_config_t huge = {UINT64_MAX / 64, 0};
    REFUSED(ORDO_ERR_OUT_OF_MEMORY, ordo_trace_start, &huge);
    assert_ok(ordo_trace_is_on(&on));
    assert_int_equal(on, 0);
    ordo_trace_config_t small = {4096, 0};
    assert_ok(ordo_trace_start(&small));
    REFUSED(ORDO_ERR_BUSY, ordo_trace_start, &small);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_trace_slice_begin, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_trace_instant, NULL);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_trace_counter, NULL, 1);
    /* An end without a begin is ignored. */
    assert_ok(ordo_trace_slice_end());
    assert_ok(ordo_trace_instant("mark"));
    /* A path that cannot be written: an error, and the trace is over. */
    ordo_status_t st = ordo_trace_stop("/nonexistent-ordo-directory/trace.json", &stats);
    assert_int_not_equal(st, ORDO_OK);
    check_message("ordo_trace_stop", "unwritable path", __LINE__);
    assert_ok(ordo_trace_is_on(&on));
    assert_int_equal(on, 0);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_trace_stop, NULL, NULL);
}

/* ---------------------------------------------------------------- waiter.h */

static void on_wait(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)status, (void)id;
    ++*(int *)ctx;
}

static void waiter_entry_points(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
    ordo_waiter_t *waiter = NULL;
    ordo_waiter_config_t no_workers = {0};
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, waiter, ordo_waiter_create, &no_workers, &waiter);
    /* A count above its maximum is out of range, as everywhere (status.h). */
    ordo_waiter_config_t too_many_workers = {ORDO_WAITER_MAX_WORKERS + 1, 0};
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, waiter, ordo_waiter_create, &too_many_workers, &waiter);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_waiter_create, NULL, NULL);
    assert_ok(ordo_waiter_create(NULL, &waiter));
    int calls = 0;
    ordo_wait_id_t id = 5;
    /* Destroyed signal. */
    ordo_signal_t *dead = test_signal_make(0);
    assert_ok(ordo_signal_retain(dead));
    assert_ok(ordo_signal_destroy(dead));
    REFUSED_CLEARS(ORDO_ERR_DESTROYED, id, ordo_waiter_wait, waiter, dead, 1, ORDO_DEADLINE_NEVER,
                   0, on_wait, &calls, &id);
    assert_int_equal(id, 0);
    assert_ok(ordo_signal_release(dead));
    id = 5;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_waiter_wait, waiter, f.signal, 1,
                   ORDO_DEADLINE_NEVER, UINT32_MAX, on_wait, &calls, &id);
    assert_int_equal(id, 0);
    /* Events: not recorded, not an event, bad flags, no callback. */
    ordo_event_t *event = NULL;
    assert_ok(ordo_event_create(f.device, ORDO_EVENT_PLAIN, &event));
    id = 5;
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_waiter_wait_event, waiter, event,
                   ORDO_DEADLINE_NEVER, 0, on_wait, &calls, &id);
    assert_int_equal(id, 0);
    assert_ok(ordo_event_record(event, f.s[0]));
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_waiter_wait_event, waiter, event,
                   ORDO_DEADLINE_NEVER, 0x10, on_wait, &calls, &id);
    REFUSED_CLEARS(ORDO_ERR_INVALID_ARGUMENT, id, ordo_waiter_wait_event, waiter, event,
                   ORDO_DEADLINE_NEVER, 0, NULL, &calls, &id);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, id, ordo_waiter_wait_event, AS(ordo_waiter_t, event),
                   event, ORDO_DEADLINE_NEVER, 0, on_wait, &calls, &id);
    assert_int_equal(id, 0);
    ordo_waiter_metrics_t m;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, m, ordo_waiter_metrics, NULL, &m);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, m, ordo_waiter_metrics, AS(ordo_waiter_t, f.s[0]), &m);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_waiter_metrics, waiter, NULL);
    ordo_cancel_result_t result;
    REFUSED_CLEARS(ORDO_ERR_NOT_FOUND, result, ordo_waiter_cancel, waiter, UINT64_MAX, 0, &result);
    assert_ok(ordo_waiter_metrics(waiter, &m));
    assert_int_equal(m.registered, 0);
    assert_ok(ordo_waiter_destroy(waiter));
    assert_int_equal(calls, 0);
    assert_ok(ordo_event_destroy(event));
    fixture_free(&f);
}

/* ---------------------------------------------------------------- objects owned by others */

/* docs/ERRORS.md, "Objects owned by other objects": an object that another
 * one owns or still uses refuses the caller's destroy (and stays whole), or
 * is kept alive by a reference; a use that is defined stays defined. */

/* The message names the function (REFUSED) and also who holds the object. */
static void check_owner_named(const char *owner) {
    const char *message = ordo_error_message();
    if (!strstr(message, owner)) {
        fail_msg("the message \"%s\" does not name %s", message, owner);
    }
}

/* Allocates and frees one block through r on s: r still works. */
static void memory_still_works(ordo_mem_resource_t *r, ordo_stream_t *s) {
    ordo_block_t *block = NULL;
    assert_ok(ordo_mem_allocate(r, 100, 0, s, 1, &block, NULL));
    assert_ok(ordo_mem_deallocate(r, block, s));
    assert_ok(ordo_mem_reap_pending(r, test_deadline()));
}

static void device_memory_stack_is_the_devices(void **state) {
    (void)state;
    size_t before = live_blocks();
    /* Every layer the device builds: the whole stack, and the default one
     * (whose blocks name its direct resource, so a caller can reach it). */
    const uint32_t stacks[] = {ORDO_DEVICE_MEMORY_BUDGET | ORDO_DEVICE_MEMORY_LOGGING |
                                   ORDO_DEVICE_MEMORY_STATISTICS | ORDO_DEVICE_MEMORY_GUARD,
                               ORDO_DEVICE_MEMORY_BUDGET | ORDO_DEVICE_MEMORY_STATISTICS};
    for (size_t k = 0; k < sizeof stacks / sizeof *stacks; ++k) {
        ordo_device_config_t config;
        assert_ok(ordo_device_config_default(&config));
        config.memory.adaptors = stacks[k];
        snprintf(config.memory.log_path, sizeof config.memory.log_path, "/dev/null");
        ordo_device_t *device = NULL;
        ordo_stream_t *s = NULL;
        ordo_mem_resource_t *top = NULL, *mine = NULL;
        assert_ok(ordo_device_create_owned("cpu:0", &config, &device));
        assert_ok(ordo_stream_create(device, 0, &s));
        assert_ok(ordo_device_memory(device, &top));
        REFUSED(ORDO_ERR_BUSY, ordo_mem_resource_destroy, top);
        check_owner_named("ordo_device_memory");
        ordo_block_t *block = NULL;
        ordo_block_info_t info;
        assert_ok(ordo_mem_allocate(top, 64, 0, s, 0, &block, NULL));
        assert_ok(ordo_block_info(block, &info));
        if (info.resource != top) {
            REFUSED(ORDO_ERR_BUSY, ordo_mem_resource_destroy, info.resource);
            check_owner_named("ordo_device_memory");
        }
        assert_ok(ordo_mem_deallocate(top, block, s));
        assert_ok(ordo_mem_reap_pending(top, test_deadline()));
        /* The refusals left the stack whole. */
        memory_still_works(top, s);

        /* A layer the caller builds on the stack is the caller's... */
        assert_ok(ordo_mem_statistics_create(top, &mine));
        memory_still_works(mine, s);
        assert_ok(ordo_mem_resource_destroy(mine));
        /* ...and keeps the device, and so the stack under it, alive past
         * the caller's last release of the device. */
        assert_ok(ordo_mem_budget_create(top, NULL, &mine));
        memory_still_works(mine, s);
        assert_ok(ordo_stream_destroy(s));
        assert_ok(ordo_device_release(device));
        uint64_t bytes = 1;
        assert_ok(ordo_mem_bytes_outstanding(mine, &bytes));
        assert_int_equal(bytes, 0);
        assert_ok(ordo_mem_reap_pending(mine, test_deadline()));
        assert_ok(ordo_mem_resource_destroy(mine)); /* the device goes with it */
        assert_int_equal(live_blocks(), before);
    }
}

static void memory_under_users_refuses_destroy(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
    ordo_tracker_t *tracker = NULL;
    ordo_mem_resource_t *direct = NULL, *pool = NULL, *stats = NULL;
    assert_ok(ordo_tracker_create(f.device, &tracker));
    assert_ok(ordo_mem_direct_create(f.device, &direct));
    /* An adaptor over a resource. */
    assert_ok(ordo_mem_statistics_create(direct, &stats));
    REFUSED(ORDO_ERR_BUSY, ordo_mem_resource_destroy, direct);
    memory_still_works(stats, f.s[0]);
    assert_ok(ordo_mem_resource_destroy(stats));
    /* A pool over a resource and a tracker, with no block out. */
    assert_ok(ordo_mem_pool_create(tracker, direct, NULL, &pool));
    memory_still_works(pool, f.s[0]);
    REFUSED(ORDO_ERR_BUSY, ordo_mem_resource_destroy, direct);
    REFUSED(ORDO_ERR_BUSY, ordo_tracker_destroy, tracker);
    check_owner_named("pool");
    memory_still_works(pool, f.s[1]);
    assert_ok(ordo_mem_resource_destroy(pool));
    assert_ok(ordo_mem_resource_destroy(direct));
    assert_ok(ordo_tracker_destroy(tracker));
    fixture_free(&f);
}

static void stream_pool_streams_are_the_pools(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
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
    fixture_free(&f);
}

static void streams_in_use_refuse_destroy(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
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
    fixture_free(&f);
}

static void wait_recorded(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)id;
    *(ordo_status_t *)ctx = status;
}

static void defined_uses_stay_defined(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
    /* An event goes back to the device's pool once; the handle then ends. */
    ordo_event_t *event = NULL;
    assert_ok(ordo_event_create(f.device, ORDO_EVENT_PLAIN, &event));
    assert_ok(ordo_event_destroy(event));
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_event_destroy, event);

    /* A signal destroyed under an asynchronous wait cancels the wait. */
    ordo_waiter_t *waiter = NULL;
    assert_ok(ordo_waiter_create(NULL, &waiter));
    ordo_signal_t *signal = test_signal_make(0);
    ordo_status_t outcome = ORDO_OK;
    assert_ok(ordo_waiter_wait(waiter, signal, 1, ORDO_DEADLINE_NEVER, ORDO_WAIT_INLINE,
                               wait_recorded, &outcome, NULL));
    assert_ok(ordo_signal_destroy(signal));
    assert_int_equal(outcome, ORDO_ERR_CANCELLED);
    assert_ok(ordo_waiter_destroy(waiter));

    /* A barrier member destroyed: the barrier reports it, untouched. */
    ordo_stream_t *member = NULL;
    assert_ok(ordo_stream_create(f.device, 0, &member));
    ordo_stream_t *set[2] = {f.s[0], member};
    ordo_barrier_t *barrier = NULL;
    assert_ok(ordo_barrier_create(set, 2, ORDO_BARRIER_SCHEME_AUTO, &barrier));
    assert_ok(ordo_stream_destroy(member));
    REFUSED(ORDO_ERR_DESTROYED, ordo_barrier_arrive, barrier);
    assert_ok(ordo_barrier_destroy(barrier));

    /* Streams, trackers and resources hold references on their device. */
    ordo_device_t *device = NULL;
    ordo_stream_t *s = NULL;
    ordo_tracker_t *tracker = NULL;
    ordo_mem_resource_t *direct = NULL;
    assert_ok(ordo_device_create_owned("cpu:0", NULL, &device));
    assert_ok(ordo_stream_create(device, 0, &s));
    assert_ok(ordo_tracker_create(device, &tracker));
    assert_ok(ordo_mem_direct_create(device, &direct));
    assert_ok(ordo_device_release(device));
    memory_still_works(direct, s);
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_mem_resource_destroy(direct));
    assert_ok(ordo_stream_host_task(s, noop_task, NULL));
    assert_ok(ordo_stream_synchronize(s, test_deadline()));
    assert_ok(ordo_stream_destroy(s)); /* the device goes with it */
    fixture_free(&f);
}

/* ---------------------------------------------------------------- cuda.h (on the cpu device) */

static ordo_status_t cuda_enqueue(void *ctx, struct CUstream_st *stream) {
    (void)stream;
    ++*(int *)ctx;
    return ORDO_OK;
}

static void cuda_entry_points_on_cpu(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
    struct CUstream_st *handle = (struct CUstream_st *)1;
    struct CUctx_st *context = NULL;
    int ordinal = 0, calls = 0;
    ordo_mem_resource_t *r = (ordo_mem_resource_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, handle, ordo_cuda_stream_handle,
                   AS(ordo_stream_t, f.signal), &handle);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_cuda_stream_handle, f.s[0], NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_cuda_stream_enqueue, NULL, cuda_enqueue, &calls);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_cuda_stream_enqueue, AS(ordo_stream_t, f.signal),
            cuda_enqueue, &calls);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_cuda_stream_enqueue, f.s[0], NULL, &calls);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_cuda_stream_enqueue, f.s[0], cuda_enqueue, &calls);
    REFUSED_CLEARS2(ORDO_ERR_INVALID_HANDLE, context, ordinal, ordo_cuda_device_context, NULL,
                    &context, &ordinal);
    REFUSED_CLEARS2(ORDO_ERR_INVALID_HANDLE, context, ordinal, ordo_cuda_device_context,
                    AS(ordo_device_t, f.s[0]), &context, &ordinal);
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_cuda_device_context, f.device, NULL, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_cuda_make_current, NULL);
    REFUSED(ORDO_ERR_INVALID_HANDLE, ordo_cuda_make_current, AS(ordo_device_t, f.s[0]));
    REFUSED(ORDO_ERR_INVALID_ARGUMENT, ordo_cuda_make_current, f.device);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_cuda_async_create, NULL, &r);
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_cuda_async_create,
                   AS(ordo_device_t, f.s[0]), &r);
    REFUSED_CLEARS(ORDO_ERR_UNSUPPORTED, r, ordo_mem_cuda_async_create, f.device, &r);
    r = (ordo_mem_resource_t *)1;
    REFUSED_CLEARS(ORDO_ERR_INVALID_HANDLE, r, ordo_mem_host_pinned_create, NULL, &r);
    REFUSED_CLEARS(ORDO_ERR_UNSUPPORTED, r, ordo_mem_host_pinned_create, f.device, &r);
    assert_int_equal(calls, 0);
    fixture_free(&f);
}

/* Fails unless the thread's message names api: "api: ...", and no other
 * ordo function is named at its start. */
static void check_names(const char *api) {
    const char *message = ordo_error_message();
    size_t n = strlen(api);
    if (strncmp(message, api, n) != 0 || strncmp(message + n, ": ", 2) != 0 ||
        strncmp(message + n + 2, "ordo_", 5) == 0) {
        fail_msg("the message \"%s\" does not name %s", message, api);
    }
}

/* Errors that came from calls ordo made on the user's behalf (a signal
 * wait, a query, a device wait a pool enqueued) name the call the user
 * made. */
static void messages_name_the_call_made(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f);
    /* A stream held at a wait: synchronize and an event after the wait
     * time out. */
    ordo_signal_t *gate = test_signal_make(0);
    ordo_event_t *held, *start, *end;
    assert_ok(ordo_event_create(f.device, ORDO_EVENT_TIMING, &start));
    assert_ok(ordo_event_create(f.device, ORDO_EVENT_TIMING, &end));
    assert_ok(ordo_event_create(f.device, ORDO_EVENT_PLAIN, &held));
    assert_ok(ordo_stream_wait(f.s[0], gate, 1));
    assert_ok(ordo_event_record(held, f.s[0]));
    assert_status(ordo_stream_synchronize(f.s[0], ordo_deadline_after_ms(1)), ORDO_ERR_TIMEOUT);
    check_names("ordo_stream_synchronize");
    assert_status(ordo_event_synchronize(held, ordo_deadline_after_ms(1)), ORDO_ERR_TIMEOUT);
    check_names("ordo_event_synchronize");
    /* The recording stream destroyed before the point. */
    ordo_stream_t *doomed;
    assert_ok(ordo_stream_create(f.device, 0, &doomed));
    assert_ok(ordo_stream_wait(doomed, gate, 1));
    ordo_event_t *orphan;
    assert_ok(ordo_event_create(f.device, ORDO_EVENT_PLAIN, &orphan));
    assert_ok(ordo_event_record(orphan, doomed));
    assert_ok(ordo_stream_destroy(doomed));
    assert_int_not_equal(ordo_event_synchronize(orphan, test_deadline()), ORDO_OK);
    check_names("ordo_event_synchronize");
    bool complete = 1;
    assert_int_not_equal(ordo_event_query(orphan, &complete), ORDO_OK);
    check_names("ordo_event_query");
    /* A failed stream: query and elapsed. The stream is held until both
     * records are in, so the failure cannot refuse the second. */
    ordo_signal_t *hold = test_signal_make(0);
    assert_ok(ordo_event_record(start, f.s[1]));
    assert_ok(ordo_stream_wait(f.s[1], hold, 1));
    assert_ok(ordo_stream_host_task(f.s[1], failing_task, NULL));
    assert_ok(ordo_event_record(end, f.s[1]));
    assert_ok(ordo_signal_advance(hold, 1));
    assert_status(ordo_stream_synchronize(f.s[1], test_deadline()), ORDO_ERR_ABORTED);
    check_names("ordo_stream_synchronize");
    assert_status(ordo_event_query(end, &complete), ORDO_ERR_ABORTED);
    check_names("ordo_event_query");
    int64_t ns = 0;
    assert_status(ordo_event_elapsed_ns(start, end, &ns), ORDO_ERR_ABORTED);
    check_names("ordo_event_elapsed_ns");
    /* A pool whose allocation must wait on the device, on a failed stream. */
    ordo_tracker_t *tracker;
    ordo_mem_resource_t *direct, *pool;
    assert_ok(ordo_tracker_create(f.device, &tracker));
    assert_ok(ordo_mem_direct_create(f.device, &direct));
    ordo_mem_pool_config_t config;
    assert_ok(ordo_mem_pool_config_default(&config));
    config.slot_max_bytes = 0;
    config.reuse = ORDO_MEM_REUSE_WAIT;
    assert_ok(ordo_mem_pool_create(tracker, direct, &config, &pool));
    ordo_block_t *block;
    assert_ok(ordo_mem_allocate(pool, 4096, 0, f.s[0], 0, &block, NULL));
    assert_ok(ordo_mem_deallocate(pool, block, f.s[0])); /* behind the gate */
    ordo_status_t st = ordo_mem_allocate(pool, 4096, 0, f.s[1], 0, &block, NULL);
    assert_int_not_equal(st, ORDO_OK);
    check_names("ordo_mem_allocate");
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_stream_synchronize(f.s[0], test_deadline()));
    assert_ok(ordo_mem_reap_pending(pool, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(pool));
    assert_ok(ordo_mem_resource_destroy(direct));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_event_destroy(held));
    assert_ok(ordo_event_destroy(orphan));
    assert_ok(ordo_event_destroy(start));
    assert_ok(ordo_event_destroy(end));
    assert_ok(ordo_signal_destroy(gate));
    assert_ok(ordo_signal_destroy(hold));
    fixture_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_and_time),
        cmocka_unit_test(alloc_hooks),
        cmocka_unit_test(device_entry_points),
        cmocka_unit_test(event_entry_points),
        cmocka_unit_test(signal_entry_points),
        cmocka_unit_test(timepoint_and_link_entry_points),
        cmocka_unit_test(stream_entry_points),
        cmocka_unit_test(barrier_entry_points),
        cmocka_unit_test(coordinator_entry_points),
        cmocka_unit_test(tracker_entry_points),
        cmocka_unit_test(memory_entry_points),
        cmocka_unit_test(adaptor_entry_points),
        cmocka_unit_test(metrics_and_stall_entry_points),
        cmocka_unit_test(trace_entry_points),
        cmocka_unit_test(waiter_entry_points),
        cmocka_unit_test(device_memory_stack_is_the_devices),
        cmocka_unit_test(memory_under_users_refuses_destroy),
        cmocka_unit_test(stream_pool_streams_are_the_pools),
        cmocka_unit_test(streams_in_use_refuse_destroy),
        cmocka_unit_test(defined_uses_stay_defined),
        cmocka_unit_test(cuda_entry_points_on_cpu),
        cmocka_unit_test(messages_name_the_call_made),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
