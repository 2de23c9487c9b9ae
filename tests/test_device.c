/* Devices: names, the shared runtime singleton, owned runtimes, bad input
 * on every entry point, the references objects hold on their device. */
#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "hal/hal.h"
#include "ordo/memory.h"
#include "refusal.h"
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
    /* Leading zeros do not count against the bound: cpu:00000 is cpu:0. */
    assert_status(ordo_device_open("cpu:00000000001", &d), ORDO_ERR_OUT_OF_RANGE);
    assert_non_null(strstr(ordo_error_message(), "has 1 device"));
    assert_ok(ordo_device_open("cpu:00000", &d));
    assert_ok(ordo_device_release(d));
    d = (ordo_device_t *)1;
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

/* A bad ORDO_MEMORY does not stop the shared runtime from opening (its
 * streams work); the memory is what is refused, saying why, and once the
 * setting is fixed the stack is made. */
static void a_bad_memory_setting_refuses_the_memory_not_the_device(void **state) {
    (void)state;
    ordo_device_t *d = NULL;
    setenv("ORDO_MEMORY", "statistics,bogus", 1);
    (void)ordo_fail(ORDO_ERR_ABORTED, "before the open");
    assert_ok(ordo_device_open("cpu:0", &d));
    assert_string_equal(ordo_error_message(), "before the open");
    ordo_stream_t *s = NULL;
    assert_ok(ordo_stream_create(d, 0, &s));
    assert_ok(ordo_stream_synchronize(s, test_deadline()));
    ordo_mem_resource_t *memory = NULL;
    assert_status(ordo_device_memory(d, &memory), ORDO_ERR_INVALID_ARGUMENT);
    assert_null(memory);
    assert_non_null(strstr(ordo_error_message(), "ordo_device_memory"));
    assert_non_null(strstr(ordo_error_message(), "ORDO_MEMORY"));
    assert_non_null(strstr(ordo_error_message(), "bogus"));
    setenv("ORDO_MEMORY", "direct", 1);
    assert_ok(ordo_device_memory(d, &memory));
    ordo_block_t *block = NULL;
    assert_ok(ordo_mem_allocate(memory, 64, 0, s, 0, &block, NULL));
    assert_ok(ordo_mem_deallocate(memory, block, s));
    unsetenv("ORDO_MEMORY");
    assert_ok(ordo_stream_synchronize(s, test_deadline()));
    assert_ok(ordo_stream_destroy(s));
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

/* ---- bad input: device.h (tests/refusal.h) */

static void device_entry_points_refuse_bad_input(void **state) {
    (void)state;
    refusal_fixture_t f;
    refusal_fixture_make(&f);
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
    /* The message names the field, and no internal function. */
    assert_non_null(strstr(ordo_error_message(), "timing_events"));
    assert_null(strstr(ordo_error_message(), "ordo__"));
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
    refusal_fixture_free(&f);
}

static ordo_status_t noop_task(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

/* docs/ERRORS.md, "Objects owned by other objects": a use that is defined
 * stays defined (tests/refusal.h). */
static void objects_keep_their_device_alive(void **state) {
    (void)state;
    refusal_fixture_t f;
    refusal_fixture_make(&f);
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
    refusal_fixture_free(&f);
}

/* A priority-0 stream created from a host task of a more urgent stream
 * runs at the main thread's nice value, not at the creating worker's
 * (which a thread inherits). Where the process may not lower its nice
 * value, every worker keeps the main thread's and this holds as well. */
typedef struct nice_probe {
    ordo_device_t *device;
    ordo_stream_t *made;
    int nice;
    ordo_status_t status;
} nice_probe_t;

static ordo_status_t read_nice_task(void *ctx) {
    nice_probe_t *p = ctx;
    errno = 0;
    p->nice = getpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid));
    return errno ? ORDO_ERR_INTERNAL : ORDO_OK;
}

static ordo_status_t create_stream_task(void *ctx) {
    nice_probe_t *p = ctx;
    p->status = ordo_stream_create(p->device, 0, &p->made);
    return ORDO_OK;
}

static void a_stream_made_by_an_urgent_one_keeps_the_default_priority(void **state) {
    (void)state;
    if (!test_device_is("cpu")) {
        print_message("  skipped: nice values are the CPU backend's\n");
        return;
    }
    ordo_device_t *device = NULL;
    assert_ok(ordo_device_open(test_device_name(), &device));
    ordo_device_info_t info;
    assert_ok(ordo_device_info(device, &info));
    ordo_stream_t *urgent = NULL;
    assert_ok(ordo_stream_create(device, info.priority_greatest, &urgent));
    nice_probe_t p = {device, NULL, 99, ORDO_ERR_INTERNAL};
    assert_ok(ordo_stream_host_task(urgent, create_stream_task, &p));
    assert_ok(ordo_stream_synchronize(urgent, test_deadline()));
    assert_ok(p.status);
    assert_ok(ordo_stream_host_task(p.made, read_nice_task, &p));
    assert_ok(ordo_stream_synchronize(p.made, test_deadline()));
    errno = 0;
    int main_nice = getpriority(PRIO_PROCESS, (id_t)getpid());
    assert_int_equal(errno, 0);
    assert_int_equal(p.nice, main_nice);
    assert_ok(ordo_stream_destroy(p.made));
    assert_ok(ordo_stream_destroy(urgent));
    assert_ok(ordo_device_release(device));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(backends_and_devices_are_listed),
        cmocka_unit_test(names_resolve_to_one_shared_runtime),
        cmocka_unit_test(bad_names_are_refused),
        cmocka_unit_test(first_callers_race_safely),
        cmocka_unit_test(failed_build_leaves_nothing_and_retries),
        cmocka_unit_test(a_bad_memory_setting_refuses_the_memory_not_the_device),
        cmocka_unit_test(owned_runtime_never_aliases_the_shared_one),
        cmocka_unit_test(device_entry_points_refuse_bad_input),
        cmocka_unit_test(objects_keep_their_device_alive),
        cmocka_unit_test(a_stream_made_by_an_urgent_one_keeps_the_default_priority),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
