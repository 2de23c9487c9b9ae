/* Every create config of the public API has one way to get its defaults
 * (ordo_<object>_config_default, refusing a NULL output) and a flags field
 * whose unknown bits the create call refuses with ORDO_ERR_INVALID_ARGUMENT
 * and a message, creating nothing. */
#include "test_util.h"

#define UNKNOWN_FLAG 0x80000000u

/* call (a create with UNKNOWN_FLAG in its config) is refused, its message
 * names the unknown bits, and its output is NULL. */
#define ASSERT_FLAGS_REFUSED(call, out)                                                            \
    do {                                                                                           \
        assert_status(call, ORDO_ERR_INVALID_ARGUMENT);                                            \
        assert_non_null(strstr(ordo_error_message(), "unknown flags 0x80000000"));                 \
        assert_null(out);                                                                          \
    } while (0)

static void test_defaults_refuse_null(void **state) {
    (void)state;
    assert_status(ordo_device_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_event_pool_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_stream_pool_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_coord_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_waiter_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_trace_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_pool_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_budget_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_guard_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);
}

/* fn fills every field of a config of type, flags with 0. */
#define ASSERT_DEFAULT_HAS_NO_FLAGS(type, fn)                                                      \
    do {                                                                                           \
        type config_;                                                                              \
        memset(&config_, 0xa5, sizeof config_);                                                    \
        assert_ok(fn(&config_));                                                                   \
        assert_int_equal(config_.flags, 0);                                                        \
    } while (0)

static void test_defaults(void **state) {
    (void)state;
    ASSERT_DEFAULT_HAS_NO_FLAGS(ordo_device_config_t, ordo_device_config_default);
    ASSERT_DEFAULT_HAS_NO_FLAGS(ordo_stream_pool_config_t, ordo_stream_pool_config_default);
    ASSERT_DEFAULT_HAS_NO_FLAGS(ordo_coord_config_t, ordo_coord_config_default);
    ASSERT_DEFAULT_HAS_NO_FLAGS(ordo_waiter_config_t, ordo_waiter_config_default);
    ASSERT_DEFAULT_HAS_NO_FLAGS(ordo_trace_config_t, ordo_trace_config_default);
    ASSERT_DEFAULT_HAS_NO_FLAGS(ordo_mem_pool_config_t, ordo_mem_pool_config_default);
    ASSERT_DEFAULT_HAS_NO_FLAGS(ordo_mem_budget_config_t, ordo_mem_budget_config_default);
    ASSERT_DEFAULT_HAS_NO_FLAGS(ordo_mem_guard_config_t, ordo_mem_guard_config_default);
    ordo_event_pool_config_t events;
    assert_ok(ordo_event_pool_config_default(&events));
    assert_int_equal(events.initial, ORDO_EVENT_POOL_DEFAULT_INITIAL);
    assert_int_equal(events.growth, ORDO_EVENT_POOL_DEFAULT_GROWTH);
    assert_int_equal(events.maximum, 0);
    ordo_stream_pool_config_t streams;
    assert_ok(ordo_stream_pool_config_default(&streams));
    assert_int_equal(streams.compute_streams, 1);
    assert_int_equal(streams.transfer_streams, 0);
    ordo_coord_config_t coord;
    assert_ok(ordo_coord_config_default(&coord));
    assert_null(coord.stream_pool);
    ordo_trace_config_t trace;
    assert_ok(ordo_trace_config_default(&trace));
    assert_int_equal(trace.max_events, 4u << 20);
}

static void test_unknown_flags_refused(void **state) {
    (void)state;
    ordo_device_t *dev = (ordo_device_t *)(uintptr_t)1;
    ordo_device_config_t device;
    assert_ok(ordo_device_config_default(&device));
    device.flags = UNKNOWN_FLAG;
    ASSERT_FLAGS_REFUSED(ordo_device_create_owned("cpu:0", &device, &dev), dev);
    assert_ok(ordo_device_open("cpu:0", &dev));

    ordo_stream_pool_config_t streams;
    assert_ok(ordo_stream_pool_config_default(&streams));
    streams.flags = UNKNOWN_FLAG;
    ordo_stream_pool_t *spool = (ordo_stream_pool_t *)(uintptr_t)1;
    ASSERT_FLAGS_REFUSED(ordo_stream_pool_create(dev, &streams, &spool), spool);

    ordo_coord_config_t coord;
    assert_ok(ordo_coord_config_default(&coord));
    coord.flags = UNKNOWN_FLAG;
    ordo_coord_t *co = (ordo_coord_t *)(uintptr_t)1;
    ASSERT_FLAGS_REFUSED(ordo_coord_create(dev, &coord, &co), co);

    ordo_waiter_config_t waiter;
    assert_ok(ordo_waiter_config_default(&waiter));
    waiter.flags = UNKNOWN_FLAG;
    ordo_waiter_t *w = (ordo_waiter_t *)(uintptr_t)1;
    ASSERT_FLAGS_REFUSED(ordo_waiter_create(&waiter, &w), w);

    ordo_trace_config_t trace;
    assert_ok(ordo_trace_config_default(&trace));
    trace.flags = UNKNOWN_FLAG;
    assert_status(ordo_trace_start(&trace), ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "unknown flags 0x80000000"));
    bool on = true;
    assert_ok(ordo_trace_is_on(&on));
    assert_false(on);

    ordo_mem_resource_t *direct;
    assert_ok(ordo_mem_direct_create(dev, &direct));
    ordo_mem_resource_t *made = (ordo_mem_resource_t *)(uintptr_t)1;
    ordo_mem_budget_config_t budget;
    assert_ok(ordo_mem_budget_config_default(&budget));
    budget.flags = UNKNOWN_FLAG;
    ASSERT_FLAGS_REFUSED(ordo_mem_budget_create(direct, &budget, &made), made);
    ordo_mem_guard_config_t guard;
    assert_ok(ordo_mem_guard_config_default(&guard));
    guard.flags = UNKNOWN_FLAG;
    made = (ordo_mem_resource_t *)(uintptr_t)1;
    ASSERT_FLAGS_REFUSED(ordo_mem_guard_create(direct, &guard, &made), made);

    ordo_tracker_t *tracker;
    assert_ok(ordo_tracker_create(dev, &tracker));
    ordo_mem_pool_config_t pool;
    assert_ok(ordo_mem_pool_config_default(&pool));
    pool.flags = UNKNOWN_FLAG;
    made = (ordo_mem_resource_t *)(uintptr_t)1;
    ASSERT_FLAGS_REFUSED(ordo_mem_pool_create(tracker, direct, &pool, &made), made);

    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_mem_resource_destroy(direct));
    assert_ok(ordo_device_release(dev));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_defaults_refuse_null),
        cmocka_unit_test(test_defaults),
        cmocka_unit_test(test_unknown_flags_refused),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
