/* Base layer: statuses and messages, deadlines, the futex wrapper,
 * allocator hooks; bad input to statuses, deadlines and the hooks, and the
 * messages of errors met in calls ordo makes on the caller's behalf. */
#include <limits.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/futex.h"
#include "refusal.h"
#include "test_util.h"

static void status_names_cover_every_status(void **state) {
    (void)state;
    for (int s = 0; s < ORDO_STATUS_COUNT_; ++s) {
        const char *name = ordo_status_name((ordo_status_t)s);
        assert_non_null(strstr(name, "ORDO_"));
        assert_null(strstr(name, "unknown"));
        assert_true(strlen(ordo_status_describe((ordo_status_t)s)) > 3);
        assert_int_equal(ordo_status_is_error((ordo_status_t)s), s != ORDO_OK);
    }
    assert_string_equal(ordo_status_name(ORDO_ERR_TIMEOUT), "ORDO_ERR_TIMEOUT");
    assert_string_equal(ordo_status_name((ordo_status_t)9999), "ORDO_ERR_<unknown>");
    assert_string_equal(ordo_status_name((ordo_status_t)-1), "ORDO_ERR_<unknown>");
    assert_false(ordo_status_is_error((ordo_status_t)9999));
}

static void failing_call_leaves_a_message(void **state) {
    (void)state;
    assert_status(ordo_signal_create(0, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "ordo_signal_create"));
    assert_non_null(strstr(ordo_error_message(), "out_signal"));
}

/* A detail that wraps the previous one reads the buffer it replaces: the
 * new message must hold the old one intact after its own prefix. */
static void error_can_wrap_the_previous_message(void **state) {
    (void)state;
    assert_status(ordo_signal_create(0, NULL), ORDO_ERR_INVALID_ARGUMENT);
    char inner[512];
    snprintf(inner, sizeof inner, "%s", ordo_error_message());
    assert_true(strlen(inner) > 10);
    assert_status(ordo__error(ORDO_ERR_ABORTED, "outer_api", "member 0: %s", ordo_error_message()),
                  ORDO_ERR_ABORTED);
    char expected[600];
    snprintf(expected, sizeof expected, "outer_api: member 0: %s", inner);
    assert_string_equal(ordo_error_message(), expected);

    /* Wrapped until it no longer fits: truncated, never garbled. */
    for (int i = 0; i < 120; ++i) {
        (void)ordo__error(ORDO_ERR_ABORTED, "api", "%s", ordo_error_message());
    }
    const char *message = ordo_error_message();
    assert_int_equal(strlen(message), 511);
    for (size_t at = 0; at + 5 <= 511; at += 5) {
        assert_memory_equal(message + at, "api: ", 5);
    }
}

/* A new thread has no message until its first error, and its message
 * (its own buffer, freed as the thread exits) names its own failure. */
static void *fail_on_this_thread(void *arg) {
    int *seen = arg;
    seen[0] = strcmp(ordo_error_message(), "") == 0;
    (void)ordo_signal_create(0, NULL);
    seen[1] = strstr(ordo_error_message(), "ordo_signal_create") != NULL;
    return NULL;
}

static void error_message_is_per_thread(void **state) {
    (void)state;
    assert_status(ordo_signal_advance(NULL, 1), ORDO_ERR_INVALID_HANDLE);
    char copy[512];
    snprintf(copy, sizeof copy, "%s", ordo_error_message());
    int seen[2] = {0, 0};
    pthread_t t = test_thread_start(fail_on_this_thread, seen);
    pthread_join(t, NULL);
    assert_true(seen[0]);
    assert_true(seen[1]);
    assert_string_equal(copy, ordo_error_message());
}

/* Errors raised by pthread key destructors at a thread's exit, after the
 * thread's message buffer was freed: no buffer is made again (one made in
 * the C library's last round of destructors would leak, which
 * LeakSanitizer would report), and the text says why there is none. */
static pthread_key_t late_key;
static int late_rounds;
static int late_texts_right;

static void late_destructor(void *value) {
    ++late_rounds;
    (void)ordo_signal_create(0, NULL);
    late_texts_right += strstr(ordo_error_message(), "thread is exiting") != NULL;
    (void)pthread_setspecific(late_key, value); /* again, every round */
}

static void *fail_then_exit(void *arg) {
    (void)ordo_signal_create(0, NULL); /* the buffer and its key */
    (void)pthread_setspecific(late_key, arg);
    return NULL;
}

static void errors_during_thread_exit_leave_nothing_behind(void **state) {
    (void)state;
#ifdef TEST_UNDER_TSAN
    print_message("  skipped under ThreadSanitizer: its runtime stops (a failed CHECK in "
                  "its interceptors) in this test's key destructor, which arms itself "
                  "again through the rounds of a thread's exit\n");
    skip();
#endif
    (void)ordo_signal_create(0, NULL); /* the message key exists first */
    assert_int_equal(pthread_key_create(&late_key, late_destructor), 0);
    late_rounds = 0;
    late_texts_right = 0;
    static int token;
    pthread_t t = test_thread_start(fail_then_exit, &token);
    pthread_join(t, NULL);
    assert_true(late_rounds >= 1);
    assert_int_equal(late_texts_right, late_rounds);
    assert_int_equal(pthread_key_delete(late_key), 0);
}

static void deadlines_saturate_and_count_down(void **state) {
    (void)state;
    uint64_t now = ordo_time_now_ns();
    assert_true(now > 0);
    assert_int_equal(ordo_deadline_after_ns(UINT64_MAX), ORDO_DEADLINE_NEVER);
    assert_int_equal(ordo_deadline_after_ns(UINT64_MAX - 1), ORDO_DEADLINE_NEVER);
    assert_int_equal(ordo_deadline_after_ms(UINT64_MAX / 1000), ORDO_DEADLINE_NEVER);
    uint64_t before = ordo_time_now_ns();
    ordo_deadline_t d = ordo_deadline_after_ms(1000);
    uint64_t left = ordo_deadline_remaining_ns(d);
    uint64_t after = ordo_time_now_ns();
    assert_true(d >= before + 1000000000ull && d <= after + 1000000000ull);
    /* Counted down by no more than the time the two calls took. */
    assert_true(left <= 1000000000ull && left >= 1000000000ull - (after - before));
    assert_int_equal(ordo_deadline_remaining_ns(ORDO_DEADLINE_NOW), 0);
    assert_int_equal(ordo_deadline_remaining_ns(ORDO_DEADLINE_NEVER), UINT64_MAX);
}

static void futex_times_out_not_early(void **state) {
    (void)state;
    _Atomic uint32_t word = 7;
    assert_int_equal(ordo__futex_wait(&word, 8, test_deadline()), ORDO_FUTEX_MISMATCH);
    uint64_t start = ordo_time_now_ns();
    ordo_deadline_t deadline = start + 20000000ull;
    ordo_futex_result_t r;
    do {
        r = ordo__futex_wait(&word, 7, deadline);
    } while (r == ORDO_FUTEX_WOKEN);
    assert_int_equal(r, ORDO_FUTEX_TIMED_OUT);
    assert_true(ordo_time_now_ns() >= deadline);
}

typedef struct futex_waker {
    _Atomic uint32_t word;
} futex_waker_t;

static void *futex_wake_later(void *arg) {
    futex_waker_t *w = arg;
    test_sleep_ms(5);
    atomic_store(&w->word, 1);
    ordo__futex_wake(&w->word, 1);
    return NULL;
}

static void futex_wakes_a_sleeper(void **state) {
    (void)state;
    futex_waker_t w;
    atomic_init(&w.word, 0);
    pthread_t t = test_thread_start(futex_wake_later, &w);
    ordo_deadline_t deadline = test_deadline();
    while (atomic_load(&w.word) == 0) {
        assert_int_not_equal(ordo__futex_wait(&w.word, 0, deadline), ORDO_FUTEX_TIMED_OUT);
    }
    pthread_join(t, NULL);
}

/* Counting hooks over the C library. */
typedef struct counting {
    size_t allocations;
    size_t deallocations;
    int fail_next;
} counting_t;

static void *counting_allocate(void *user, size_t size, size_t alignment) {
    counting_t *c = user;
    if (c->fail_next) {
        c->fail_next = 0;
        return NULL;
    }
    c->allocations++;
    return aligned_alloc(alignment, (size + alignment - 1) & ~(alignment - 1));
}

static void counting_deallocate(void *user, void *block, size_t size, size_t alignment) {
    (void)size;
    (void)alignment;
    ((counting_t *)user)->deallocations++;
    free(block);
}

static void allocator_hooks_see_every_block(void **state) {
    (void)state;
    counting_t counts = {0, 0, 0};
    ordo_allocator_t hooks = {counting_allocate, counting_deallocate, &counts};
    assert_ok(ordo_allocator_set(&hooks));
    ordo_signal_t *signal;
    assert_ok(ordo_signal_create(0, &signal));
    size_t live;
    assert_ok(ordo_allocator_live_blocks(&live));
    assert_int_equal(live, 1);
    /* No swapping allocators under live blocks. */
    assert_status(ordo_allocator_set(NULL), ORDO_ERR_BUSY);
    assert_ok(ordo_signal_destroy(signal));
    assert_int_equal(counts.allocations, 1);
    assert_int_equal(counts.deallocations, 1);

    counts.fail_next = 1;
    assert_status(ordo_signal_create(0, &signal), ORDO_ERR_OUT_OF_MEMORY);
    assert_null(signal);
    assert_ok(ordo_allocator_live_blocks(&live));
    assert_int_equal(live, 0);
    assert_ok(ordo_allocator_set(NULL));
}

/* Hooks that hold the first allocation at a gate: while one thread is
 * inside a hook, another's allocation must go through (no lock of ordo's
 * is held around a hook). */
typedef struct gated_hooks {
    _Atomic int hold_next;
    _Atomic int entered;
    _Atomic int open;
    ordo_deadline_t deadline;
} gated_hooks_t;

static void *gated_allocate(void *user, size_t size, size_t alignment) {
    gated_hooks_t *g = user;
    if (atomic_exchange(&g->hold_next, 0)) {
        atomic_store(&g->entered, 1);
        while (!atomic_load(&g->open) && ordo_time_now_ns() < g->deadline) {
            test_sleep_ms(1);
        }
    }
    return aligned_alloc(alignment, (size + alignment - 1) & ~(alignment - 1));
}

static void gated_deallocate(void *user, void *block, size_t size, size_t alignment) {
    (void)user, (void)size, (void)alignment;
    free(block);
}

static void *create_a_signal(void *arg) {
    ordo_signal_t **out = arg;
    if (ordo_signal_create(0, out) != ORDO_OK) {
        *out = NULL;
    }
    return NULL;
}

static void allocator_hooks_run_without_a_lock(void **state) {
    (void)state;
    gated_hooks_t g = {.deadline = test_deadline()};
    atomic_store(&g.hold_next, 1);
    ordo_allocator_t hooks = {gated_allocate, gated_deallocate, &g};
    assert_ok(ordo_allocator_set(&hooks));
    ordo_signal_t *held = NULL, *free_to_go = NULL;
    pthread_t t = test_thread_start(create_a_signal, &held);
    while (!atomic_load(&g.entered) && ordo_time_now_ns() < g.deadline) {
        test_sleep_ms(1);
    }
    assert_true(atomic_load(&g.entered));
    /* The other thread is inside its hook: this allocation does not wait. */
    assert_ok(ordo_signal_create(0, &free_to_go));
    int overtook = !atomic_load(&g.open) && ordo_time_now_ns() < g.deadline;
    atomic_store(&g.open, 1);
    pthread_join(t, NULL);
    assert_true(overtook);
    assert_non_null(held);
    assert_ok(ordo_signal_destroy(held));
    assert_ok(ordo_signal_destroy(free_to_go));
    assert_ok(ordo_allocator_set(NULL));
}

static void allocator_rejects_bad_hooks(void **state) {
    (void)state;
    ordo_allocator_t half = {counting_allocate, NULL, NULL};
    assert_status(ordo_allocator_set(&half), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_allocator_live_blocks(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_null(ordo__alloc(0, 0));
    assert_null(ordo__alloc(16, 3)); /* not a power of two */
    assert_null(ordo__alloc(SIZE_MAX, 64));
}

static void version_is_reported(void **state) {
    (void)state;
    assert_string_equal(ordo_version(), ORDO_VERSION_STRING);
    assert_non_null(strstr(ordo_build_config(), "compiler"));
}

/* ---- bad input: status.h, time.h (tests/refusal.h) */

static void statuses_and_deadlines_out_of_range(void **state) {
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

/* ---- bad input: alloc.h (tests/refusal.h) */

static void *hook_allocate(void *user, size_t size, size_t alignment) {
    (void)user;
    return aligned_alloc(alignment, (size + alignment - 1) / alignment * alignment);
}

static void hook_deallocate(void *user, void *block, size_t size, size_t alignment) {
    (void)user, (void)size, (void)alignment;
    free(block);
}

static void allocator_hooks_refuse_bad_input(void **state) {
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

static ordo_status_t failing_task(void *ctx) {
    (void)ctx;
    return ORDO_ERR_ABORTED;
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
    refusal_fixture_t f;
    refusal_fixture_make(&f);
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
    refusal_fixture_free(&f);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_names_cover_every_status),
        cmocka_unit_test(failing_call_leaves_a_message),
        cmocka_unit_test(error_message_is_per_thread),
        cmocka_unit_test(errors_during_thread_exit_leave_nothing_behind),
        cmocka_unit_test(error_can_wrap_the_previous_message),
        cmocka_unit_test(deadlines_saturate_and_count_down),
        cmocka_unit_test(futex_times_out_not_early),
        cmocka_unit_test(futex_wakes_a_sleeper),
        cmocka_unit_test(allocator_hooks_see_every_block),
        cmocka_unit_test(allocator_hooks_run_without_a_lock),
        cmocka_unit_test(allocator_rejects_bad_hooks),
        cmocka_unit_test(version_is_reported),
        cmocka_unit_test(statuses_and_deadlines_out_of_range),
        cmocka_unit_test(allocator_hooks_refuse_bad_input),
        cmocka_unit_test(messages_name_the_call_made),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
