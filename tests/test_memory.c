/* Stream-ordered memory: the direct resource, the device's memory stack,
 * and the entry points' refusals. The pool's behaviour is in test_pool.c,
 * its layout in test_pool_carve.c. */
#include <stdatomic.h>
#include <string.h>

#include "ordo/memory.h"
#include "ordo/memory_adaptors.h"
#include "mem_program.h"
#include "refusal.h"
#include "test_util.h"

static ordo_device_t *device;

static int setup(void **state) {
    (void)state;
    return ordo_device_open(test_device_name(), &device) == ORDO_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return ordo_device_release(device) == ORDO_OK ? 0 : -1;
}

static ordo_stream_t *stream_make(void) {
    ordo_stream_t *s = NULL;
    assert_ok(ordo_stream_create(device, 0, &s));
    return s;
}

static ordo_status_t wait_signal_task(void *ctx) {
    return ordo_signal_wait(ctx, 1, test_deadline());
}

/* --- Direct resource --- */

static void direct_allocates_and_frees_in_stream_order(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    ordo_mem_resource_t *direct = NULL;
    assert_ok(ordo_mem_direct_create(device, &direct));
    ordo_stream_t *s = stream_make();
    ordo_block_t *block = NULL;
    void *ptr = NULL;
    assert_ok(ordo_mem_allocate(direct, 1000, 0, s, 3, &block, &ptr));
    assert_non_null(ptr);
    assert_int_equal((uintptr_t)ptr % ORDO_MEM_DEFAULT_ALIGNMENT, 0);
    memset(ptr, 0xab, 1000);
    ordo_block_info_t info;
    assert_ok(ordo_block_info(block, &info));
    assert_int_equal(info.bytes, 1000);
    assert_int_equal(info.tag, 3);
    assert_ptr_equal(info.stream, s);
    uint64_t out = 0;
    assert_ok(ordo_mem_bytes_outstanding(direct, &out));
    assert_int_equal(out, 1000);

    /* Hold the stream: the free waits behind the held work. */
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_stream_host_task(s, wait_signal_task, gate));
    assert_ok(ordo_mem_deallocate(direct, block, s));
    assert_status(ordo_mem_reap_pending(direct, ordo_deadline_after_ms(20)), ORDO_ERR_TIMEOUT);
    assert_ok(ordo_mem_bytes_outstanding(direct, &out));
    assert_int_equal(out, 1000);
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_mem_reap_pending(direct, test_deadline()));
    assert_ok(ordo_mem_bytes_outstanding(direct, &out));
    assert_int_equal(out, 0);

    /* Large alignment honoured. */
    assert_ok(ordo_mem_allocate(direct, 64, 4096, s, 0, &block, &ptr));
    assert_int_equal((uintptr_t)ptr % 4096, 0);
    assert_ok(ordo_mem_deallocate(direct, block, s));
    assert_ok(ordo_mem_reap_pending(direct, test_deadline()));

    assert_ok(ordo_stream_destroy(s));
    assert_ok(ordo_signal_release(gate));
    assert_ok(ordo_mem_resource_destroy(direct));
}

static void direct_refuses_use_tracking(void **state) {
    (void)state;
    ordo_mem_resource_t *direct = NULL;
    assert_ok(ordo_mem_direct_create(device, &direct));
    ordo_stream_t *s = stream_make();
    ordo_block_t *block = NULL;
    assert_ok(ordo_mem_allocate(direct, 64, 0, s, 0, &block, NULL));
    bool supported = 1;
    assert_ok(ordo_mem_supports_use_tracking(direct, &supported));
    assert_int_equal(supported, 0);
    assert_status(ordo_mem_record_use(direct, block, s), ORDO_ERR_UNSUPPORTED);
    assert_non_null(strstr(ordo_error_message(), "unsupported"));
    assert_status(ordo_mem_prepare_use(direct, block, s, ORDO_ACCESS_READ), ORDO_ERR_UNSUPPORTED);
    assert_status(ordo_mem_finish_use(direct, block, s, ORDO_ACCESS_READ), ORDO_ERR_UNSUPPORTED);
    ordo_buffer_t *buffer = NULL;
    assert_status(ordo_block_buffer(block, &buffer), ORDO_ERR_UNSUPPORTED);
    /* Deallocation still works. */
    assert_ok(ordo_mem_deallocate(direct, block, s));
    assert_ok(ordo_mem_reap_pending(direct, test_deadline()));
    assert_ok(ordo_stream_destroy(s));
    assert_ok(ordo_mem_resource_destroy(direct));
}

/* Frees on a failed stream happen at once, inside the deallocation; other
 * threads take the freed descriptors back at the same time. */
typedef struct failed_churn {
    ordo_mem_resource_t *direct;
    ordo_stream_t *stream;
    unsigned rounds;
} failed_churn_t;

static void *failed_churn_main(void *arg) {
    failed_churn_t *c = arg;
    for (unsigned r = 0; r < c->rounds; ++r) {
        ordo_block_t *block = NULL;
        if (ordo_mem_allocate(c->direct, 64, 0, c->stream, 0, &block, NULL) != ORDO_OK ||
            ordo_mem_deallocate(c->direct, block, c->stream) != ORDO_OK) {
            return (void *)1;
        }
    }
    return NULL;
}

static ordo_status_t failing_task(void *ctx) {
    (void)ctx;
    return ORDO_ERR_ABORTED;
}

static void direct_frees_on_a_failed_stream_concurrently(void **state) {
    (void)state;
    ordo_mem_resource_t *direct = NULL;
    assert_ok(ordo_mem_direct_create(device, &direct));
    ordo_stream_t *s = stream_make();
    assert_ok(ordo_stream_host_task(s, failing_task, NULL));
    ordo_status_t st = ordo_stream_synchronize(s, test_deadline());
    assert_int_not_equal(st, ORDO_OK);
    assert_int_not_equal(st, ORDO_ERR_TIMEOUT);
    /* Each round is a cuMemAlloc and a cuMemFree on CUDA: fewer there. */
    failed_churn_t churn = {direct, s,
                            (unsigned)test_scaled(test_device_is("cuda") ? 4000 : 40000)};
    pthread_t threads[3];
    for (int i = 0; i < 3; ++i) {
        threads[i] = test_thread_start(failed_churn_main, &churn);
    }
    for (int i = 0; i < 3; ++i) {
        void *result = NULL;
        pthread_join(threads[i], &result);
        assert_null(result);
    }
    uint64_t out = 1;
    assert_ok(ordo_mem_reap_pending(direct, test_deadline()));
    assert_ok(ordo_mem_bytes_outstanding(direct, &out));
    assert_int_equal(out, 0);
    /* A free on the failed stream succeeds, and leaves the thread's
     * message as it was (ordo/status.h), through the direct resource and
     * through the device's stack over one; so does the stream's destroy. */
    ordo_mem_resource_t *stack = NULL;
    assert_ok(ordo_device_memory(device, &stack));
    ordo_mem_resource_t *resources[] = {direct, stack};
    for (int i = 0; i < 2; ++i) {
        ordo_block_t *block = NULL;
        assert_ok(ordo_mem_allocate(resources[i], 64, 0, s, 0, &block, NULL));
        (void)ordo_fail(ORDO_ERR_ABORTED, "the caller's own message");
        assert_ok(ordo_mem_deallocate(resources[i], block, s));
        assert_string_equal(ordo_error_message(), "the caller's own message");
    }
    assert_ok(ordo_stream_destroy(s));
    assert_string_equal(ordo_error_message(), "the caller's own message");
    assert_ok(ordo_mem_reap_pending(stack, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(direct));
}

/* --- Pool fixture --- */

static void device_memory_stack_is_configurable(void **state) {
    (void)state;
    ordo_stream_t *s = stream_make();
    /* The shared runtime's stack: budget and statistics by default. */
    ordo_mem_resource_t *memory = NULL, *again = NULL;
    assert_ok(ordo_device_memory(device, &memory));
    assert_ok(ordo_device_memory(device, &again));
    assert_ptr_equal(memory, again);
    ordo_block_t *block = NULL;
    assert_ok(ordo_mem_allocate(memory, 1000, 0, s, 5, &block, NULL));
    ordo_mem_statistics_t stats;
    assert_ok(ordo_mem_statistics_get(memory, &stats));
    assert_int_equal(stats.tags[5].current_bytes, 1000);
    assert_ok(ordo_mem_deallocate(memory, block, s));
    assert_ok(ordo_mem_reap_pending(memory, test_deadline()));
    uint64_t out = 1;
    assert_ok(ordo_mem_bytes_outstanding(memory, &out));
    assert_int_equal(out, 0);
    assert_ok(ordo_stream_destroy(s));

    /* An owned runtime with its own stack: a guard over a 1 MiB budget. A
     * device whose memory the host cannot read refuses the guard (the
     * stack is then built without it). */
    ordo_device_config_t config;
    assert_ok(ordo_device_config_default(&config));
    config.memory.adaptors = ORDO_DEVICE_MEMORY_GUARD | ORDO_DEVICE_MEMORY_BUDGET;
    config.memory.budget_bytes = 1 << 20;
    ordo_device_t *owned = NULL;
    assert_ok(ordo_device_create_owned(test_device_name(), &config, &owned));
    ordo_stream_t *os = NULL;
    assert_ok(ordo_stream_create(owned, 0, &os));
    ordo_device_info_t owned_info;
    assert_ok(ordo_device_info(owned, &owned_info));
    if (owned_info.device_memory) {
        assert_status(ordo_device_memory(owned, &memory), ORDO_ERR_UNSUPPORTED);
        assert_ok(ordo_stream_destroy(os));
        assert_ok(ordo_device_release(owned));
        config.memory.adaptors = ORDO_DEVICE_MEMORY_BUDGET;
        assert_ok(ordo_device_create_owned(test_device_name(), &config, &owned));
        assert_ok(ordo_stream_create(owned, 0, &os));
    }
    assert_ok(ordo_device_memory(owned, &memory));
    assert_status(ordo_mem_allocate(memory, 2 << 20, 0, os, 0, &block, NULL),
                  ORDO_ERR_OUT_OF_MEMORY);
    assert_ok(ordo_mem_allocate(memory, 100, 0, os, 0, &block, NULL));
    assert_ok(ordo_mem_deallocate(memory, block, os));
    assert_status(ordo_mem_deallocate(memory, block, os), ORDO_ERR_INVALID_HANDLE);
    assert_ok(ordo_stream_destroy(os));
    assert_ok(ordo_device_release(owned)); /* tears the stack down */

    /* ORDO_MEMORY chooses the shared runtimes' stack; a bad one is refused. */
    setenv("ORDO_MEMORY", "direct,guard,budget=2M,log=/tmp/x.log", 1);
    assert_ok(ordo_device_config_default(&config));
    assert_int_equal(config.memory.adaptors, ORDO_DEVICE_MEMORY_GUARD | ORDO_DEVICE_MEMORY_BUDGET |
                                                 ORDO_DEVICE_MEMORY_LOGGING);
    assert_int_equal(config.memory.budget_bytes, 2 << 20);
    assert_string_equal(config.memory.log_path, "/tmp/x.log");
    setenv("ORDO_MEMORY", "statistics,bogus", 1);
    assert_status(ordo_device_config_default(&config), ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "bogus"));
    setenv("ORDO_MEMORY", "budget=12Q", 1);
    assert_status(ordo_device_config_default(&config), ORDO_ERR_INVALID_ARGUMENT);
    /* A size needs digits, and no sign or blanks. */
    /* Nor more than 64 bits: a limit asked for is not "unlimited". No
     * empty item, and "direct" (the base, no adaptor yet) only first. A
     * refusal leaves
     * the whole config zero. */
    const char *bad_sizes[] = {"budget=K",
                               "budget=-1",
                               "budget= 5",
                               "budget=+5M",
                               "budget=99999999999999999999",
                               "statistics,",
                               ",statistics",
                               "statistics,,guard",
                               "statistics,direct",
                               "guard,direct"};
    for (size_t i = 0; i < sizeof bad_sizes / sizeof *bad_sizes; ++i) {
        setenv("ORDO_MEMORY", bad_sizes[i], 1);
        memset(&config, 0xab, sizeof config);
        assert_status(ordo_device_config_default(&config), ORDO_ERR_INVALID_ARGUMENT);
        ordo_device_config_t zero;
        memset(&zero, 0, sizeof zero);
        assert_memory_equal(&config, &zero, sizeof config);
    }
    /* A log path too long is refused saying so (a valid path on Linux). */
    char long_log[320] = "log=/tmp/";
    memset(long_log + 9, 'x', 300);
    long_log[309] = '\0';
    setenv("ORDO_MEMORY", long_log, 1);
    assert_status(ordo_device_config_default(&config), ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "the log path is 305 bytes, at most 255"));
    /* Each item at most once: a second would replace the first's settings
     * unseen. A refusal names the item and leaves the config zero. */
    const struct {
        const char *env, *item;
    } repeated[] = {{"log=/tmp/a,log=/tmp/b", "\"log\" is given twice"},
                    {"guard,guard", "\"guard\" is given twice"},
                    {"statistics,guard,statistics", "\"statistics\" is given twice"},
                    {"budget=1K,budget=2K", "\"budget\" is given twice"},
                    {"direct,budget,budget", "\"budget\" is given twice"},
                    {"direct,direct", "cannot use \"direct\""}};
    for (size_t i = 0; i < sizeof repeated / sizeof *repeated; ++i) {
        setenv("ORDO_MEMORY", repeated[i].env, 1);
        memset(&config, 0xab, sizeof config);
        assert_status(ordo_device_config_default(&config), ORDO_ERR_INVALID_ARGUMENT);
        assert_non_null(strstr(ordo_error_message(), "ordo_device_config_default"));
        assert_non_null(strstr(ordo_error_message(), repeated[i].item));
        ordo_device_config_t zero;
        memset(&zero, 0, sizeof zero);
        assert_memory_equal(&config, &zero, sizeof config);
    }
    /* Set but empty: as if unset. */
    setenv("ORDO_MEMORY", "", 1);
    assert_ok(ordo_device_config_default(&config));
    assert_int_equal(config.memory.adaptors,
                     ORDO_DEVICE_MEMORY_BUDGET | ORDO_DEVICE_MEMORY_STATISTICS);
    setenv("ORDO_MEMORY", "direct", 1);
    assert_ok(ordo_device_config_default(&config));
    assert_int_equal(config.memory.adaptors, 0);
    unsetenv("ORDO_MEMORY");
    config.memory.adaptors = 0x100;
    assert_status(ordo_device_create_owned(test_device_name(), &config, &owned),
                  ORDO_ERR_INVALID_ARGUMENT);
    config.memory.adaptors = ORDO_DEVICE_MEMORY_LOGGING;
    config.memory.log_path[0] = '\0';
    assert_status(ordo_device_create_owned(test_device_name(), &config, &owned),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_device_memory(NULL, &memory), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_device_memory(device, NULL), ORDO_ERR_INVALID_ARGUMENT);
}

/* ---- bad input: memory.h (tests/refusal.h) */

static void memory_entry_points_refuse_bad_input(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    refusal_fixture_t f;
    refusal_fixture_make(&f);
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
    refusal_fixture_free(&f);
}

/* Objects owned by other objects (docs/ERRORS.md; tests/refusal.h). */

static void device_memory_stack_is_the_devices(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    size_t before = refusal_live_blocks();
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
        ordo_device_t *owned = NULL;
        ordo_stream_t *s = NULL;
        ordo_mem_resource_t *top = NULL, *mine = NULL;
        assert_ok(ordo_device_create_owned("cpu:0", &config, &owned));
        assert_ok(ordo_stream_create(owned, 0, &s));
        assert_ok(ordo_device_memory(owned, &top));
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
        assert_ok(ordo_device_release(owned));
        uint64_t bytes = 1;
        assert_ok(ordo_mem_bytes_outstanding(mine, &bytes));
        assert_int_equal(bytes, 0);
        assert_ok(ordo_mem_reap_pending(mine, test_deadline()));
        assert_ok(ordo_mem_resource_destroy(mine)); /* the device goes with it */
        assert_int_equal(refusal_live_blocks(), before);
    }
}

static void memory_under_users_refuses_destroy(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    refusal_fixture_t f;
    refusal_fixture_make(&f);
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
    refusal_fixture_free(&f);
}

int main(void) {
    test_conformance_begin("memory");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(direct_allocates_and_frees_in_stream_order),
        cmocka_unit_test(direct_refuses_use_tracking),
        cmocka_unit_test(direct_frees_on_a_failed_stream_concurrently),
        cmocka_unit_test(device_memory_stack_is_configurable),
        cmocka_unit_test(memory_entry_points_refuse_bad_input),
        cmocka_unit_test(device_memory_stack_is_the_devices),
        cmocka_unit_test(memory_under_users_refuses_destroy),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
