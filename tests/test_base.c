/* Base layer: statuses and messages, deadlines, the futex wrapper,
 * allocator hooks. */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/futex.h"
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

static void *fail_on_this_thread(void *arg) {
    (void)arg;
    (void)ordo_signal_create(0, NULL);
    return NULL;
}

static void error_message_is_per_thread(void **state) {
    (void)state;
    assert_status(ordo_signal_advance(NULL, 1), ORDO_ERR_INVALID_HANDLE);
    char copy[512];
    snprintf(copy, sizeof copy, "%s", ordo_error_message());
    pthread_t t = test_thread_start(fail_on_this_thread, NULL);
    pthread_join(t, NULL);
    assert_string_equal(copy, ordo_error_message());
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

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(status_names_cover_every_status),
        cmocka_unit_test(failing_call_leaves_a_message),
        cmocka_unit_test(error_message_is_per_thread),
        cmocka_unit_test(error_can_wrap_the_previous_message),
        cmocka_unit_test(deadlines_saturate_and_count_down),
        cmocka_unit_test(futex_times_out_not_early),
        cmocka_unit_test(futex_wakes_a_sleeper),
        cmocka_unit_test(allocator_hooks_see_every_block),
        cmocka_unit_test(allocator_hooks_run_without_a_lock),
        cmocka_unit_test(allocator_rejects_bad_hooks),
        cmocka_unit_test(version_is_reported),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
