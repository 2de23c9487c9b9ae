/* Devices: names, the shared runtime singleton, owned runtimes. */
#include <stdatomic.h>
#include <string.h>

#include "hal/hal.h"
#include "test_util.h"

static void backends_and_devices_are_listed(void **state) {
    (void)state;
    const char *names[4];
    size_t count = 0;
    assert_ok(ordo_backend_list(names, 4, &count));
    assert_true(count >= 1);
    assert_string_equal(names[0], "cpu");
    bool available = 0;
    char reason[128];
    assert_ok(ordo_backend_available("cpu", &available, reason, sizeof reason));
    assert_true(available);
    assert_status(ordo_backend_available("nope", &available, reason, sizeof reason),
                  ORDO_ERR_NOT_FOUND);
    ordo_device_info_t infos[8];
    assert_ok(ordo_device_list(infos, 8, &count));
    assert_true(count >= 1);
    assert_string_equal(infos[0].name, "cpu:0");
    assert_string_equal(infos[0].backend, "cpu");
    assert_true(infos[0].timing_events);
    assert_ok(ordo_device_list(NULL, 0, &count)); /* counting only */
    assert_status(ordo_device_list(NULL, 3, &count), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_backend_list(names, 4, NULL), ORDO_ERR_INVALID_ARGUMENT);
}

static void names_resolve_to_one_shared_runtime(void **state) {
    (void)state;
    ordo_device_t *a;
    ordo_device_t *b;
    assert_ok(ordo_device_open("cpu", &a));
    assert_ok(ordo_device_open("cpu:0", &b));
    assert_ptr_equal(a, b);
    ordo_device_t *c;
    assert_ok(ordo_device_open(ORDO_DEVICE_DEFAULT, &c));
    assert_ptr_equal(a, c);
    assert_ok(ordo_device_release(c));
    bool shared = 0;
    assert_ok(ordo_device_is_shared(a, &shared));
    assert_true(shared);
    ordo_device_info_t info;
    assert_ok(ordo_device_info(a, &info));
    assert_string_equal(info.name, "cpu:0");
    assert_ok(ordo_device_release(a));
    assert_ok(ordo_device_release(b));
}

static void bad_names_are_refused(void **state) {
    (void)state;
    ordo_device_t *d = (ordo_device_t *)1;
    assert_status(ordo_device_open("cpu:1", &d), ORDO_ERR_OUT_OF_RANGE);
    assert_null(d);
    assert_status(ordo_device_open("cpu:999", &d), ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_device_open("gpu:0", &d), ORDO_ERR_NOT_FOUND);
    assert_status(ordo_device_open("cpu:", &d), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_device_open("cpu:x", &d), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_device_open("cpu:-1", &d), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_device_open("cpu:+0", &d), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_device_open("cpu: 0", &d), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_device_open("cpu:0x", &d), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_device_open("cpu:99999999999", &d), ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_device_open(NULL, &d), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_device_open("cpu", NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_device_create_owned("cpu:3", NULL, &d), ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_device_release(NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_device_retain(NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_device_info(NULL, NULL), ORDO_ERR_INVALID_HANDLE);
    bool flag;
    assert_status(ordo_device_is_shared(NULL, &flag), ORDO_ERR_INVALID_HANDLE);
    ordo_event_pool_stats_t stats;
    assert_status(ordo_device_event_pool_stats(NULL, ORDO_EVENT_PLAIN, &stats),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_device_event_pool_trim(NULL, 0), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_device_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);
    char reason[8];
    assert_status(ordo_backend_available(NULL, &flag, reason, sizeof reason),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_backend_available("cpu", NULL, reason, sizeof reason),
                  ORDO_ERR_INVALID_ARGUMENT);
    /* Garbage is not a device. */
    uint64_t garbage[32] = {0};
    assert_status(ordo_device_info((ordo_device_t *)garbage, NULL), ORDO_ERR_INVALID_HANDLE);
    ordo_device_t *real;
    assert_ok(ordo_device_open("cpu", &real));
    assert_status(ordo_device_info(real, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_device_is_shared(real, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_device_event_pool_stats(real, ORDO_EVENT_PLAIN, NULL),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_device_release(real));
}

#define OPENERS 8

typedef struct race {
    _Atomic int go;
    ordo_device_t *got[OPENERS];
    ordo_status_t status[OPENERS];
} race_t;

typedef struct racer {
    race_t *race;
    int index;
} racer_t;

static void *open_racing(void *arg) {
    racer_t *r = arg;
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&r->race->go) && ordo_time_now_ns() < deadline) {
    }
    r->race->status[r->index] = ordo_device_open("cpu:0", &r->race->got[r->index]);
    return NULL;
}

static void first_callers_race_safely(void **state) {
    (void)state;
    for (int round = 0; round < 20; ++round) {
        race_t race;
        memset(&race, 0, sizeof race);
        racer_t racers[OPENERS];
        pthread_t threads[OPENERS];
        for (int i = 0; i < OPENERS; ++i) {
            racers[i] = (racer_t){&race, i};
            threads[i] = test_thread_start(open_racing, &racers[i]);
        }
        atomic_store(&race.go, 1);
        for (int i = 0; i < OPENERS; ++i) {
            pthread_join(threads[i], NULL);
        }
        for (int i = 0; i < OPENERS; ++i) {
            assert_int_equal(race.status[i], ORDO_OK);
            assert_ptr_equal(race.got[i], race.got[0]);
        }
        for (int i = 0; i < OPENERS; ++i) {
            assert_ok(ordo_device_release(race.got[i]));
        }
    }
}

static void failed_build_leaves_nothing_and_retries(void **state) {
    (void)state;
    size_t live_before;
    assert_ok(ordo_allocator_live_blocks(&live_before));
    ordo__hal_inject_build_failures(1);
    ordo_device_t *d = NULL;
    assert_status(ordo_device_open("cpu", &d), ORDO_ERR_DEVICE);
    assert_null(d);
    size_t live;
    assert_ok(ordo_allocator_live_blocks(&live));
    assert_int_equal(live, live_before);
    assert_ok(ordo_device_open("cpu", &d));
    assert_ok(ordo_device_release(d));
}

static void owned_runtime_never_aliases_the_shared_one(void **state) {
    (void)state;
    ordo_device_t *shared;
    ordo_device_t *owned;
    ordo_device_config_t config;
    assert_ok(ordo_device_config_default(&config));
    config.plain_events.initial = 3;
    assert_ok(ordo_device_open("cpu", &shared));
    assert_ok(ordo_device_create_owned("cpu:0", &config, &owned));
    assert_ptr_not_equal(shared, owned);
    bool is_shared = 1;
    assert_ok(ordo_device_is_shared(owned, &is_shared));
    assert_false(is_shared);
    ordo_event_pool_stats_t stats;
    assert_ok(ordo_device_event_pool_stats(owned, ORDO_EVENT_PLAIN, &stats));
    assert_int_equal(stats.available, 3);
    assert_status(ordo_device_event_pool_stats(owned, (ordo_event_kind_t)9, &stats),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_device_event_pool_trim(owned, 0));
    assert_ok(ordo_device_event_pool_stats(owned, ORDO_EVENT_PLAIN, &stats));
    assert_int_equal(stats.available, 0);
    assert_ok(ordo_device_release(owned));
    assert_ok(ordo_device_release(shared));
    size_t live;
    assert_ok(ordo_allocator_live_blocks(&live));
    assert_int_equal(live, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(backends_and_devices_are_listed),
        cmocka_unit_test(names_resolve_to_one_shared_runtime),
        cmocka_unit_test(bad_names_are_refused),
        cmocka_unit_test(first_callers_race_safely),
        cmocka_unit_test(failed_build_leaves_nothing_and_retries),
        cmocka_unit_test(owned_runtime_never_aliases_the_shared_one),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
