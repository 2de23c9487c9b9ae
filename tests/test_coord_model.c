/* The coordinator against a simple model: randomised ops across streams
 * and threads, with failing host tasks, abandoned ops, cycles attempted
 * and dispatch; and targeted cases (a dispatched op whose dependency
 * failed, ids across the recent table's growth and reuse of slots, memory
 * running out in each call). */
#include <stdatomic.h>
#include <string.h>

#include "ordo/coordinator.h"
#include "test_util.h"

static ordo_device_t *device;

/* ---- an allocator that fails on demand ------------------------------------------------- */

static _Atomic long fail_countdown = -1; /* fail the allocation this many from now; -1 never */
static _Atomic long fails_injected;

static void *failing_allocate(void *user, size_t size, size_t alignment) {
    (void)user;
    long n = atomic_load(&fail_countdown);
    while (n >= 0) {
        if (atomic_compare_exchange_weak(&fail_countdown, &n, n - 1)) {
            if (n == 0) {
                atomic_fetch_add(&fails_injected, 1);
                return NULL;
            }
            break;
        }
    }
    size_t rounded = (size + alignment - 1) / alignment * alignment;
    return aligned_alloc(alignment, rounded ? rounded : alignment);
}

static void failing_deallocate(void *user, void *block, size_t size, size_t alignment) {
    (void)user;
    (void)size;
    (void)alignment;
    free(block);
}

static ordo_status_t launch_fails(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    (void)stream;
    return ORDO_ERR_ABORTED;
}

static ordo_status_t launch_noop(void *ctx, ordo_stream_t *stream) {
    (void)ctx;
    (void)stream;
    return ORDO_OK;
}

/* ---- a dispatched op whose dependency failed, without callbacks ------------------------ */

static void dispatched_dependent_of_a_failure_fails_once(void **state) {
    (void)state;
    ordo_coord_t *coord = NULL;
    ordo_stream_t *s0 = NULL, *s1 = NULL;
    assert_ok(ordo_coord_create(device, NULL, &coord));
    assert_ok(ordo_stream_create(device, 0, &s0));
    assert_ok(ordo_stream_create(device, 0, &s1));
    ordo_op_desc_t desc = {.stream = s0, .launch = launch_fails, .description = "F"};
    ordo_op_id_t f = 0, g = 0, h = 0;
    assert_ok(ordo_coord_register(coord, &desc, &f));
    /* G: dispatched after F, and nobody listens to it. */
    desc = (ordo_op_desc_t){.stream = s1, .deps = &f, .dep_count = 1, .launch = launch_noop};
    assert_ok(ordo_coord_register(coord, &desc, &g));
    size_t launched = 99;
    assert_ok(ordo_coord_dispatch(coord, 10, &launched));
    assert_int_equal(launched, 0);
    ordo_coord_metrics_t m;
    assert_ok(ordo_coord_metrics(coord, &m));
    assert_int_equal(m.registered, 2);
    assert_int_equal(m.failed, 2);
    assert_int_equal(m.live, 0);
    /* The slot G had is free once, not twice: two new ops get two slots. */
    desc = (ordo_op_desc_t){.stream = s0};
    assert_ok(ordo_coord_register(coord, &desc, &h));
    ordo_op_id_t k = 0;
    assert_ok(ordo_coord_register(coord, &desc, &k));
    assert_ok(ordo_coord_begin(coord, h));
    assert_status(ordo_coord_begin(coord, h), ORDO_ERR_BUSY);
    assert_ok(ordo_coord_begin(coord, k));
    assert_ok(ordo_coord_complete(coord, h));
    assert_ok(ordo_coord_complete(coord, k));
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    assert_ok(ordo_coord_metrics(coord, &m));
    assert_int_equal(m.completed, 2);
    assert_int_equal(m.live, 0);
    assert_ok(ordo_coord_destroy(coord));
    assert_ok(ordo_stream_destroy(s0));
    assert_ok(ordo_stream_destroy(s1));
}

/* begin's failure names the op that failed, not the retired slot's 0. */
static void begin_failure_names_the_op(void **state) {
    (void)state;
    ordo_coord_t *coord = NULL;
    ordo_stream_t *s0 = NULL;
    assert_ok(ordo_coord_create(device, NULL, &coord));
    assert_ok(ordo_stream_create(device, 0, &s0));
    ordo_op_desc_t desc = {.stream = s0, .launch = launch_fails};
    ordo_op_id_t f = 0, g = 0;
    assert_ok(ordo_coord_register(coord, &desc, &f));
    size_t launched = 0;
    assert_ok(ordo_coord_dispatch(coord, 1, &launched));
    desc = (ordo_op_desc_t){.stream = s0, .deps = &f, .dep_count = 1};
    assert_ok(ordo_coord_register(coord, &desc, &g));
    assert_status(ordo_coord_begin(coord, g), ORDO_ERR_ABORTED);
    char expect[64];
    snprintf(expect, sizeof expect, "op %llu:", (unsigned long long)g);
    if (!strstr(ordo_error_message(), expect)) {
        fail_msg("message \"%s\" does not name op %llu", ordo_error_message(),
                 (unsigned long long)g);
    }
    assert_ok(ordo_coord_drain(coord, test_deadline()));
    assert_ok(ordo_coord_destroy(coord));
    assert_ok(ordo_stream_destroy(s0));
}

static int setup(void **state) {
    (void)state;
    ordo_allocator_t hooks = {failing_allocate, failing_deallocate, NULL};
    if (ordo_allocator_set(&hooks) != ORDO_OK) {
        return -1;
    }
    return ordo_device_open("cpu:0", &device) == ORDO_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return ordo_device_release(device) == ORDO_OK ? 0 : -1;
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(dispatched_dependent_of_a_failure_fails_once),
        cmocka_unit_test(begin_failure_names_the_op),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
