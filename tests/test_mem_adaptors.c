/* Memory adaptors: budget, statistics, logging and guard, alone over the
 * direct resource and stacked, under concurrency, with a replay of the
 * log and one test per guard finding, bad input on every entry point. */
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hal/hal.h"
#include "mem/resource.h"
#include "refusal.h"
#include "test_util.h"

/* --- Fixture: the CPU device, two streams, a direct resource --- */

typedef struct env {
    ordo_device_t *device;
    ordo_stream_t *s[2];
    ordo_mem_resource_t *direct;
} env_t;

static void env_open(env_t *e) {
    assert_ok(ordo_device_open(test_device_name(), &e->device));
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_create(e->device, 0, &e->s[i]));
    }
    assert_ok(ordo_mem_direct_create(e->device, &e->direct));
}

static void env_close(env_t *e) {
    assert_ok(ordo_mem_reap_pending(e->direct, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(e->direct));
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_destroy(e->s[i]));
    }
    assert_ok(ordo_device_release(e->device));
    size_t live = 1;
    assert_ok(ordo_allocator_live_blocks(&live));
    assert_int_equal(live, 0);
}

static uint64_t outstanding(ordo_mem_resource_t *r) {
    uint64_t bytes = UINT64_MAX;
    assert_ok(ordo_mem_reap_pending(r, test_deadline()));
    assert_ok(ordo_mem_bytes_outstanding(r, &bytes));
    return bytes;
}

static void *alloc_ok(ordo_mem_resource_t *r, size_t bytes, ordo_stream_t *s, uint32_t tag,
                      ordo_block_t **out_block) {
    void *ptr = NULL;
    assert_ok(ordo_mem_allocate(r, bytes, 0, s, tag, out_block, &ptr));
    assert_non_null(ptr);
    return ptr;
}

static void assert_contains(const char *text, const char *part) {
    if (!strstr(text, part)) {
        fail_msg("\"%s\" does not contain \"%s\"", text, part);
    }
}

/* Holds a stream back until the gate is signalled. */
static ordo_signal_t *gate_stream(ordo_stream_t *s) {
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_stream_wait(s, gate, 1));
    return gate;
}

static void gate_open(ordo_signal_t *gate) {
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_signal_release(gate));
}

/* Opens the gate 30 ms from now, on another thread. */
static void *open_later(void *gate) {
    test_sleep_ms(30);
    (void)ordo_signal_advance(gate, 1);
    (void)ordo_signal_release(gate);
    return NULL;
}

/* --- Bad input --- */

static void adaptors_refuse_bad_input(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    ordo_mem_resource_t *r = (ordo_mem_resource_t *)1;
    assert_status(ordo_mem_budget_create(NULL, NULL, &r), ORDO_ERR_INVALID_HANDLE);
    assert_null(r);
    assert_status(ordo_mem_budget_create(e.direct, NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
    /* Several faults: the handle answers first (docs/ERRORS.md). */
    assert_status(ordo_mem_budget_create(NULL, NULL, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_statistics_create(NULL, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_guard_create(NULL, NULL, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_statistics_create(NULL, &r), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_statistics_create(e.direct, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_logging_create(NULL, stderr, &r), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_logging_create(e.direct, NULL, &r), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_logging_create(e.direct, stderr, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_logging_create_path(e.direct, NULL, &r), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_logging_create_path(e.direct, "", &r), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_logging_create_path(e.direct, "/nonexistent-dir/x/log", &r),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_contains(ordo_error_message(), "/nonexistent-dir/x/log");
    assert_status(ordo_mem_guard_create(NULL, NULL, &r), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_guard_create(e.direct, NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
    ordo_mem_guard_config_t gc;
    assert_ok(ordo_mem_guard_config_default(&gc));
    gc.canary_bytes = 0;
    assert_status(ordo_mem_guard_create(e.direct, &gc, &r), ORDO_ERR_OUT_OF_RANGE);
    assert_null(r);
    assert_status(ordo_mem_guard_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_budget_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);

    /* A resource that is not one. */
    uint32_t junk[16] = {0};
    assert_status(ordo_mem_budget_create((ordo_mem_resource_t *)junk, NULL, &r),
                  ORDO_ERR_INVALID_HANDLE);

    /* Getters of one kind refuse another kind. */
    ordo_mem_statistics_t stats;
    ordo_mem_logging_stats_t lstats;
    ordo_mem_guard_report_t report;
    assert_status(ordo_mem_statistics_get(e.direct, &stats), ORDO_ERR_INVALID_ARGUMENT);
    assert_contains(ordo_error_message(), "not a statistics adaptor");
    assert_status(ordo_mem_statistics_get(NULL, &stats), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_statistics_reset_peak(e.direct), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_logging_stats(e.direct, &lstats), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_guard_check(e.direct, &report), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_guard_drain(NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_budget_set_limit(NULL, 1), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_budget_stats(e.device, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_budget_reset_peak(NULL), ORDO_ERR_INVALID_HANDLE);

    ordo_mem_resource_t *s = NULL;
    assert_ok(ordo_mem_statistics_create(e.direct, &s));
    assert_status(ordo_mem_statistics_get(s, NULL), ORDO_ERR_INVALID_ARGUMENT);
    ordo_mem_resource_t *l = NULL;
    FILE *devnull = fopen("/dev/null", "w");
    assert_non_null(devnull);
    assert_ok(ordo_mem_logging_create(s, devnull, &l));
    assert_status(ordo_mem_logging_stats(l, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_statistics_get(l, &stats), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_mem_resource_destroy(l));
    assert_ok(ordo_mem_resource_destroy(s));
    fclose(devnull);
    env_close(&e);
}

/* Every adaptor refuses destruction while blocks it handed out are
 * outstanding, and its upstream refuses while it stands. */
static void destroy_waits_for_blocks_and_dependents(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    FILE *devnull = fopen("/dev/null", "w");
    assert_non_null(devnull);
    ordo_mem_resource_t *adaptors[4];
    assert_ok(ordo_mem_budget_create(e.direct, NULL, &adaptors[0]));
    assert_ok(ordo_mem_statistics_create(e.direct, &adaptors[1]));
    assert_ok(ordo_mem_logging_create(e.direct, devnull, &adaptors[2]));
    assert_ok(ordo_mem_guard_create(e.direct, NULL, &adaptors[3]));
    assert_status(ordo_mem_resource_destroy(e.direct), ORDO_ERR_BUSY);
    assert_contains(ordo_error_message(), "4 resource(s) stand on");
    for (int i = 0; i < 4; ++i) {
        ordo_mem_resource_t *top = NULL;
        assert_ok(ordo_mem_statistics_create(adaptors[i], &top));
        assert_status(ordo_mem_resource_destroy(adaptors[i]), ORDO_ERR_BUSY);
        assert_ok(ordo_mem_resource_destroy(top));

        ordo_block_t *b = NULL;
        alloc_ok(adaptors[i], 64, e.s[0], 1, &b);
        assert_status(ordo_mem_resource_destroy(adaptors[i]), ORDO_ERR_BUSY);
        assert_contains(ordo_error_message(), "outstanding");
        /* A free held back by its stream is still pending. */
        ordo_signal_t *gate = gate_stream(e.s[0]);
        assert_ok(ordo_mem_deallocate(adaptors[i], b, e.s[0]));
        if (i == 0 || i == 3) { /* the adaptors that wait for the free */
            assert_status(ordo_mem_resource_destroy(adaptors[i]), ORDO_ERR_BUSY);
            assert_contains(ordo_error_message(), "pending");
        }
        gate_open(gate);
        assert_ok(ordo_mem_reap_pending(adaptors[i], test_deadline()));
    }
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_mem_resource_destroy(adaptors[i]));
    }
    fclose(devnull);
    env_close(&e);
}

/* --- Hooked host allocator: destroyed upstreams, failed allocations --- */

#define KEPT_MAX 4096
typedef struct kept {
    void *blocks[KEPT_MAX];
    size_t count;
    int fail; /* refuse allocations while set */
} kept_t;

static void *kept_allocate(void *user, size_t size, size_t alignment) {
    kept_t *k = user;
    if (k->fail) {
        return NULL;
    }
    return aligned_alloc(alignment, (size + alignment - 1) & ~(alignment - 1));
}

/* Frees nothing until the test ends, so a destroyed object's memory still
 * shows its dead tag (as a reference would keep it). */
static void kept_deallocate(void *user, void *block, size_t size, size_t alignment) {
    (void)size, (void)alignment;
    kept_t *k = user;
    if (k->count < KEPT_MAX) {
        k->blocks[k->count++] = block;
    } else {
        free(block);
    }
}

static void destroyed_upstream_and_failed_allocations(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    static kept_t kept;
    memset(&kept, 0, sizeof kept);
    ordo_allocator_t hooks = {kept_allocate, kept_deallocate, &kept};
    assert_ok(ordo_allocator_set(&hooks));
    env_t e;
    env_open(&e);

    /* Creation that cannot allocate leaves nothing behind. */
    size_t live_before = 0, live_after = 0;
    assert_ok(ordo_allocator_live_blocks(&live_before));
    kept.fail = 1;
    ordo_mem_resource_t *r = NULL;
    assert_status(ordo_mem_budget_create(e.direct, NULL, &r), ORDO_ERR_OUT_OF_MEMORY);
    assert_status(ordo_mem_statistics_create(e.direct, &r), ORDO_ERR_OUT_OF_MEMORY);
    assert_status(ordo_mem_logging_create(e.direct, stderr, &r), ORDO_ERR_OUT_OF_MEMORY);
    assert_status(ordo_mem_guard_create(e.direct, NULL, &r), ORDO_ERR_OUT_OF_MEMORY);
    assert_null(r);
    kept.fail = 0;
    assert_ok(ordo_allocator_live_blocks(&live_after));
    assert_int_equal(live_after, live_before);
    /* The direct resource is no dependent's upstream after those. */
    ordo_mem_resource_t *other = NULL;
    assert_ok(ordo_mem_direct_create(e.device, &other));
    assert_ok(ordo_mem_resource_destroy(other));

    /* A guard whose header slab cannot be allocated refuses the request. */
    ordo_mem_resource_t *g = NULL;
    assert_ok(ordo_mem_guard_create(e.direct, NULL, &g));
    kept.fail = 1;
    ordo_block_t *b = NULL;
    assert_status(ordo_mem_allocate(g, 10, 0, e.s[0], 0, &b, NULL), ORDO_ERR_OUT_OF_MEMORY);
    kept.fail = 0;
    assert_ok(ordo_mem_resource_destroy(g));

    /* Adaptors refuse a destroyed upstream (other, destroyed above). */
    assert_status(ordo_mem_budget_create(other, NULL, &r), ORDO_ERR_INVALID_HANDLE);
    assert_contains(ordo_error_message(), "not a live memory resource");
    assert_status(ordo_mem_statistics_create(other, &r), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_logging_create(other, stderr, &r), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_guard_create(other, NULL, &r), ORDO_ERR_INVALID_HANDLE);
    /* And a destroyed adaptor refuses every call. */
    ordo_mem_resource_t *s = NULL;
    assert_ok(ordo_mem_statistics_create(e.direct, &s));
    assert_ok(ordo_mem_resource_destroy(s));
    assert_status(ordo_mem_allocate(s, 10, 0, e.s[0], 0, &b, NULL), ORDO_ERR_INVALID_HANDLE);
    ordo_mem_statistics_t stats;
    assert_status(ordo_mem_statistics_get(s, &stats), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_resource_destroy(s), ORDO_ERR_INVALID_HANDLE);

    env_close(&e);
    assert_ok(ordo_allocator_set(NULL));
    for (size_t i = 0; i < kept.count; ++i) {
        free(kept.blocks[i]);
    }
}

/* --- Budget --- */

static void budget_charges_and_explains_refusals(void **state) {
    (void)state;
    env_t e;
    env_open(&e);
    ordo_mem_budget_config_t quick_config = {.reap_wait_ns = 20000000ull};
    ordo_mem_budget_config_t patient_config = {.reap_wait_ns = 10000000000ull};
    ordo_mem_resource_t *quick = NULL;
    ordo_mem_resource_t *patient = NULL;
    assert_ok(ordo_mem_budget_create(e.direct, &quick_config, &quick));
    assert_ok(ordo_mem_budget_create(e.direct, &patient_config, &patient));
    assert_ok(ordo_mem_budget_set_limit(e.device, 4096));
    ordo_mem_budget_stats_t bs;
    assert_ok(ordo_mem_budget_stats(e.device, &bs));
    assert_int_equal(bs.limit, 4096);
    assert_int_equal(bs.charged, 0);

    /* Charges round up to the granule (or the alignment). */
    ordo_block_t *a = NULL;
    ordo_block_t *b = NULL;
    alloc_ok(quick, 1000, e.s[0], 1, &a);                                   /* 1024 */
    assert_ok(ordo_mem_allocate(patient, 2000, 1024, e.s[1], 2, &b, NULL)); /* 2048 */
    assert_ok(ordo_mem_budget_stats(e.device, &bs));
    assert_int_equal(bs.charged, 3072);

    /* Over the limit: refused, with the request, the limit and the held. */
    ordo_block_t *c = (ordo_block_t *)1;
    assert_status(ordo_mem_allocate(quick, 1500, 0, e.s[1], 5, &c, NULL), ORDO_ERR_OUT_OF_MEMORY);
    assert_null(c);
    char stream_text[64];
    snprintf(stream_text, sizeof stream_text, "stream %p", (void *)e.s[1]);
    const char *msg = ordo_error_message();
    assert_contains(msg, test_device_name());
    assert_contains(msg, "request of 1500 bytes (charged 1536");
    assert_contains(msg, "tag 5");
    assert_contains(msg, stream_text);
    assert_contains(msg, "limit of 4096 bytes");
    assert_contains(msg, "3072 bytes are held, 0 of them by frees");
    alloc_ok(quick, 1024, e.s[1], 5, &c); /* exactly fills it */
    assert_ok(ordo_mem_budget_stats(e.device, &bs));
    assert_int_equal(bs.charged, 4096);
    assert_int_equal(bs.peak_charged, 4096);
    assert_int_equal(bs.refused, 1);
    assert_ok(ordo_mem_deallocate(quick, c, e.s[1]));

    /* A free its stream has not reached keeps its charge. */
    ordo_signal_t *gate = gate_stream(e.s[1]);
    assert_ok(ordo_mem_deallocate(patient, b, e.s[1]));
    /* The earlier free of c (before the gate) gives its charge back once
     * s[1] reaches it: wait for that, with a deadline, rather than for a
     * fixed time (a loaded machine under a sanitizer takes longer). */
    ordo_deadline_t until = test_deadline();
    do {
        assert_ok(ordo_mem_budget_stats(e.device, &bs));
        if (bs.charged == 3072) {
            break;
        }
        test_sleep_ms(1);
    } while (ordo_time_now_ns() < until);
    assert_int_equal(bs.charged, 3072);
    assert_int_equal(bs.charged_pending, 2048);
    /* The quick adaptor waits 20 ms for it, then gives up. */
    assert_status(ordo_mem_allocate(quick, 3000, 0, e.s[0], 9, &c, NULL), ORDO_ERR_OUT_OF_MEMORY);
    assert_contains(ordo_error_message(), "3072 bytes are held, 2048 of them by frees");
    /* The patient one waits until the free is reached, then retries. */
    pthread_t opener = test_thread_start(open_later, gate);
    alloc_ok(patient, 3000, e.s[0], 9, &c);
    pthread_join(opener, NULL);
    assert_ok(ordo_mem_budget_stats(e.device, &bs));
    assert_int_equal(bs.charged, 4096);
    assert_int_equal(bs.charged_pending, 0);

    /* A free that names no stream (internal) drops its charge at once:
     * covered by the guard's releases below. Lowering the limit below what
     * is held refuses new work but takes nothing back. */
    assert_ok(ordo_mem_budget_set_limit(e.device, 1024));
    assert_status(ordo_mem_allocate(quick, 1, 0, e.s[0], 0, &b, NULL), ORDO_ERR_OUT_OF_MEMORY);
    assert_ok(ordo_mem_deallocate(quick, a, e.s[0]));
    assert_ok(ordo_mem_deallocate(patient, c, e.s[0]));
    assert_int_equal(outstanding(quick), 0);
    assert_int_equal(outstanding(patient), 0);
    assert_ok(ordo_mem_budget_stats(e.device, &bs));
    assert_int_equal(bs.charged, 0);
    assert_ok(ordo_mem_budget_reset_peak(e.device));
    assert_ok(ordo_mem_budget_stats(e.device, &bs));
    assert_int_equal(bs.peak_charged, 0);

    /* A block allocated below the budget is not the budget's to free, even
     * while the budget's own live blocks would cover its charge; and a
     * block handed out through the budget does not go back below it (the
     * charge would stay held for good). Both refused, nothing touched. */
    ordo_block_t *own = NULL;
    alloc_ok(quick, 256, e.s[0], 0, &own);
    alloc_ok(e.direct, 64, e.s[0], 0, &b);
    assert_status(ordo_mem_deallocate(quick, b, e.s[0]), ORDO_ERR_INVALID_ARGUMENT);
    assert_contains(ordo_error_message(), "was allocated from the direct resource");
    assert_status(ordo_mem_deallocate(e.direct, own, e.s[0]), ORDO_ERR_INVALID_ARGUMENT);
    assert_contains(ordo_error_message(), "was allocated through the budget resource");
    assert_ok(ordo_mem_budget_stats(e.device, &bs));
    assert_int_equal(bs.charged, 256);
    assert_ok(ordo_mem_deallocate(e.direct, b, e.s[0]));
    assert_ok(ordo_mem_deallocate(quick, own, e.s[0]));
    assert_int_equal(outstanding(quick), 0);

    assert_ok(ordo_mem_budget_set_limit(e.device, ORDO_MEM_BUDGET_UNLIMITED));
    assert_ok(ordo_mem_resource_destroy(quick));
    assert_ok(ordo_mem_resource_destroy(patient));
    env_close(&e);
}

/* Budget adaptors over different resources of one device share one
 * account; the budget forwards everything else. */
static void budget_is_per_device(void **state) {
    (void)state;
    env_t e;
    env_open(&e);
    ordo_mem_resource_t *direct2 = NULL;
    assert_ok(ordo_mem_direct_create(e.device, &direct2));
    ordo_mem_resource_t *b1 = NULL;
    ordo_mem_resource_t *b2 = NULL;
    ordo_mem_budget_config_t config = {.reap_wait_ns = 0};
    assert_ok(ordo_mem_budget_create(e.direct, &config, &b1));
    assert_ok(ordo_mem_budget_create(direct2, &config, &b2));
    assert_ok(ordo_mem_budget_set_limit(e.device, 1024));
    ordo_block_t *x = NULL;
    ordo_block_t *y = NULL;
    alloc_ok(b1, 768, e.s[0], 0, &x);
    assert_status(ordo_mem_allocate(b2, 512, 0, e.s[0], 0, &y, NULL), ORDO_ERR_OUT_OF_MEMORY);
    alloc_ok(b2, 256, e.s[0], 0, &y);
    bool supported = 1;
    assert_ok(ordo_mem_supports_use_tracking(b1, &supported));
    assert_false(supported);
    assert_status(ordo_mem_record_use(b1, x, e.s[1]), ORDO_ERR_UNSUPPORTED);
    ordo_buffer_t *buffer = NULL;
    assert_status(ordo_block_buffer(x, &buffer), ORDO_ERR_UNSUPPORTED);
    assert_ok(ordo_mem_deallocate(b1, x, e.s[0]));
    assert_ok(ordo_mem_deallocate(b2, y, e.s[1]));
    assert_int_equal(outstanding(b1), 0);
    assert_int_equal(outstanding(b2), 0);
    assert_ok(ordo_mem_budget_set_limit(e.device, ORDO_MEM_BUDGET_UNLIMITED));
    assert_ok(ordo_mem_resource_destroy(b1));
    assert_ok(ordo_mem_resource_destroy(b2));
    assert_ok(ordo_mem_resource_destroy(direct2));
    env_close(&e);
}

/* --- Statistics --- */

static void statistics_count_per_tag(void **state) {
    (void)state;
    env_t e;
    env_open(&e);
    ordo_mem_resource_t *s = NULL;
    assert_ok(ordo_mem_statistics_create(e.direct, &s));
    ordo_block_t *b[4];
    alloc_ok(s, 100, e.s[0], 3, &b[0]);
    alloc_ok(s, 200, e.s[0], 3, &b[1]);
    alloc_ok(s, 50, e.s[1], 63, &b[2]);
    ordo_mem_statistics_t st;
    assert_ok(ordo_mem_statistics_get(s, &st));
    assert_int_equal(st.overall.current_bytes, 350);
    assert_int_equal(st.overall.current_blocks, 3);
    assert_int_equal(st.tags[3].current_bytes, 300);
    assert_int_equal(st.tags[3].total_blocks, 2);
    assert_int_equal(st.tags[63].peak_bytes, 50);
    assert_int_equal(st.tags[0].total_blocks, 0);
    assert_ok(ordo_mem_deallocate(s, b[1], e.s[0]));
    alloc_ok(s, 10, e.s[0], 3, &b[3]);
    assert_ok(ordo_mem_statistics_get(s, &st));
    assert_int_equal(st.overall.current_bytes, 160);
    assert_int_equal(st.overall.peak_bytes, 350);
    assert_int_equal(st.overall.total_bytes, 360);
    assert_int_equal(st.overall.total_blocks, 4);
    assert_int_equal(st.overall.peak_blocks, 3);
    assert_int_equal(st.tags[3].current_bytes, 110);
    assert_int_equal(st.tags[3].peak_bytes, 300);
    assert_int_equal(st.tags[3].total_bytes, 310);
    assert_ok(ordo_mem_statistics_reset_peak(s));
    assert_ok(ordo_mem_statistics_get(s, &st));
    assert_int_equal(st.overall.peak_bytes, 160);
    assert_int_equal(st.tags[3].peak_bytes, 110);
    assert_int_equal(st.tags[3].peak_blocks, 2);

    /* Refused by upstream: counted as failed, nothing else moves. */
    ordo_mem_resource_t *budget = NULL;
    ordo_mem_resource_t *s2 = NULL;
    ordo_mem_budget_config_t config = {.reap_wait_ns = 0};
    assert_ok(ordo_mem_budget_create(e.direct, &config, &budget));
    assert_ok(ordo_mem_statistics_create(budget, &s2));
    assert_ok(ordo_mem_budget_set_limit(e.device, 1024));
    ordo_block_t *big = NULL;
    assert_status(ordo_mem_allocate(s2, 4096, 0, e.s[0], 3, &big, NULL), ORDO_ERR_OUT_OF_MEMORY);
    ordo_mem_statistics_t st2;
    assert_ok(ordo_mem_statistics_get(s2, &st2));
    assert_int_equal(st2.failed_allocations, 1);
    assert_int_equal(st2.overall.total_blocks, 0);
    assert_ok(ordo_mem_budget_set_limit(e.device, ORDO_MEM_BUDGET_UNLIMITED));
    assert_ok(ordo_mem_resource_destroy(s2));
    assert_ok(ordo_mem_resource_destroy(budget));

    /* A block of the resource below, freed through the adaptor: refused,
     * though the adaptor counts more of that tag than the block holds. */
    ordo_block_t *under = NULL;
    alloc_ok(e.direct, 8, e.s[0], 3, &under);
    assert_status(ordo_mem_deallocate(s, under, e.s[0]), ORDO_ERR_INVALID_ARGUMENT);
    assert_contains(ordo_error_message(), "was allocated from the direct resource");
    assert_ok(ordo_mem_deallocate(e.direct, under, e.s[0]));
    /* One of the adaptor's, freed below it: refused, its counts kept. */
    assert_status(ordo_mem_deallocate(e.direct, b[0], e.s[0]), ORDO_ERR_INVALID_ARGUMENT);
    assert_contains(ordo_error_message(), "was allocated through the statistics resource");

    assert_ok(ordo_mem_deallocate(s, b[0], e.s[0]));
    assert_ok(ordo_mem_deallocate(s, b[2], e.s[1]));
    assert_ok(ordo_mem_deallocate(s, b[3], e.s[1]));
    assert_ok(ordo_mem_statistics_get(s, &st));
    assert_int_equal(st.overall.current_bytes, 0);
    assert_int_equal(st.overall.current_blocks, 0);
    assert_int_equal(outstanding(s), 0);
    assert_ok(ordo_mem_resource_destroy(s));
    env_close(&e);
}

/* --- Logging and its replay --- */

typedef struct log_record {
    uint64_t seq;
    char op[24];
    char stream[32];
    char block[32];
    char status[40];
    char refused[24];
    size_t bytes, align;
    uint32_t tag;
} log_record_t;

typedef struct log_records {
    log_record_t *items;
    size_t count, capacity;
    size_t lines;
} log_records_t;

/* Finds "key=" in line and copies its value (up to a blank). */
static int field(const char *line, const char *key, char *out, size_t capacity) {
    char pattern[32];
    snprintf(pattern, sizeof pattern, " %s=", key);
    const char *at = strstr(line, pattern);
    if (!at) {
        return 0;
    }
    at += strlen(pattern);
    size_t n = strcspn(at, " \n");
    if (n >= capacity) {
        return 0;
    }
    memcpy(out, at, n);
    out[n] = '\0';
    return 1;
}

static int by_seq(const void *a, const void *b) {
    uint64_t x = ((const log_record_t *)a)->seq;
    uint64_t y = ((const log_record_t *)b)->seq;
    return x < y ? -1 : x > y;
}

/* Parses every line of the log; each must be whole. */
static void log_parse(FILE *file, log_records_t *out) {
    memset(out, 0, sizeof *out);
    rewind(file);
    char line[1024];
    while (fgets(line, sizeof line, file)) {
        size_t length = strlen(line);
        assert_true(length > 0 && line[length - 1] == '\n');
        assert_int_equal(strncmp(line, "ordo-mem seq=", 13), 0);
        assert_null(strstr(line + 1, "ordo-mem")); /* no two lines mixed */
        out->lines++;
        if (out->count == out->capacity) {
            out->capacity = out->capacity ? out->capacity * 2 : 256;
            out->items = realloc(out->items, out->capacity * sizeof *out->items);
            assert_non_null(out->items);
        }
        log_record_t *r = &out->items[out->count++];
        memset(r, 0, sizeof *r);
        char text[64];
        assert_true(field(line, "seq", text, sizeof text));
        r->seq = strtoull(text, NULL, 10);
        assert_true(field(line, "t_ns", text, sizeof text));
        assert_true(field(line, "thread", text, sizeof text));
        assert_true(field(line, "op", r->op, sizeof r->op));
        assert_true(field(line, "status", r->status, sizeof r->status));
        (void)field(line, "stream", r->stream, sizeof r->stream);
        (void)field(line, "block", r->block, sizeof r->block);
        (void)field(line, "refused", r->refused, sizeof r->refused);
        if (field(line, "bytes", text, sizeof text)) {
            r->bytes = strtoull(text, NULL, 10);
        }
        if (field(line, "align", text, sizeof text)) {
            r->align = strtoull(text, NULL, 10);
        }
        if (field(line, "tag", text, sizeof text)) {
            r->tag = (uint32_t)strtoul(text, NULL, 10);
        }
    }
    qsort(out->items, out->count, sizeof *out->items, by_seq);
    for (size_t i = 0; i < out->count; ++i) {
        assert_int_equal(out->items[i].seq, i); /* every number once */
    }
}

typedef struct replay_block {
    char key[32];
    ordo_block_t *block;
    size_t bytes;
} replay_block_t;

/* Replays records against target (a fresh resource) on streams; returns
 * the bytes the log leaves outstanding. */
static uint64_t log_replay(const log_records_t *log, ordo_mem_resource_t *target,
                           ordo_stream_t *const streams[2]) {
    replay_block_t *live = calloc(log->count + 1, sizeof *live);
    assert_non_null(live);
    size_t live_count = 0;
    char stream_keys[2][32] = {"", ""};
    uint64_t held = 0;
    for (size_t i = 0; i < log->count; ++i) {
        const log_record_t *r = &log->items[i];
        /* A deallocation a guard below found corrupted freed the block. */
        if (strcmp(r->status, "ORDO_OK") != 0 &&
            !(strcmp(r->op, "deallocate") == 0 && strcmp(r->status, "ORDO_ERR_CORRUPTED") == 0)) {
            continue;
        }
        ordo_stream_t *s = streams[0];
        for (int k = 0; k < 2 && r->stream[0]; ++k) {
            if (!stream_keys[k][0]) {
                snprintf(stream_keys[k], sizeof stream_keys[k], "%s", r->stream);
            }
            if (strcmp(stream_keys[k], r->stream) == 0) {
                s = streams[k];
                break;
            }
        }
        if (strcmp(r->op, "allocate") == 0) {
            replay_block_t *x = &live[live_count++];
            snprintf(x->key, sizeof x->key, "%s", r->block);
            x->bytes = r->bytes;
            assert_ok(ordo_mem_allocate(target, r->bytes, r->align, s, r->tag, &x->block, NULL));
            held += r->bytes;
        } else if (strcmp(r->op, "deallocate") == 0) {
            size_t j = 0;
            while (j < live_count && strcmp(live[j].key, r->block) != 0) {
                ++j;
            }
            assert_true(j < live_count); /* freed after its allocation */
            assert_int_equal(live[j].bytes, r->bytes);
            assert_ok(ordo_mem_deallocate(target, live[j].block, s));
            held -= live[j].bytes;
            live[j] = live[--live_count];
        } else if (strcmp(r->op, "reap") == 0) {
            assert_ok(ordo_mem_reap_pending(target, test_deadline()));
        }
    }
    uint64_t replayed = outstanding(target);
    assert_int_equal(replayed, held);
    for (size_t j = 0; j < live_count; ++j) {
        assert_ok(ordo_mem_deallocate(target, live[j].block, streams[0]));
    }
    assert_int_equal(outstanding(target), 0);
    free(live);
    return replayed;
}

typedef struct worker {
    ordo_mem_resource_t *top;
    ordo_stream_t *streams[2];
    uint64_t seed;
    uint64_t ops;
    size_t max_live;
    size_t max_bytes;
    /* Results, read after join. */
    uint64_t allocated_blocks[ORDO_MEM_MAX_TAGS];
    uint64_t allocated_bytes[ORDO_MEM_MAX_TAGS];
    uint64_t refused;
    uint64_t held_bytes; /* of the blocks kept at the pause */
    ordo_status_t failure;
    char failure_text[256];
    ordo_block_t *live[64];
    size_t live_bytes[64];
    size_t live_count;
    pthread_barrier_t *pause; /* NULL: free everything and return */
} worker_t;

static void worker_fail(worker_t *w, ordo_status_t st, const char *what) {
    if (w->failure == ORDO_OK) {
        w->failure = st;
        snprintf(w->failure_text, sizeof w->failure_text, "%s: %s", what, ordo_error_message());
    }
}

static void worker_free_one(worker_t *w, size_t i) {
    ordo_stream_t *s = w->streams[test_rand(&w->seed) & 1];
    ordo_status_t st = ordo_mem_deallocate(w->top, w->live[i], s);
    if (st != ORDO_OK) {
        worker_fail(w, st, "deallocate");
    }
    w->live[i] = w->live[w->live_count - 1];
    w->live_bytes[i] = w->live_bytes[w->live_count - 1];
    w->live_count--;
}

static void *worker_run(void *arg) {
    worker_t *w = arg;
    for (uint64_t op = 0; op < w->ops && w->failure == ORDO_OK; ++op) {
        uint64_t r = test_rand(&w->seed);
        if (w->live_count < w->max_live && (w->live_count == 0 || (r & 3) != 0)) {
            size_t bytes = 1 + (size_t)((r >> 8) % w->max_bytes);
            uint32_t tag = (uint32_t)((r >> 32) % ORDO_MEM_MAX_TAGS);
            size_t alignment = (r >> 40) & 1 ? 0 : (size_t)16 << ((r >> 41) % 6);
            ordo_block_t *b = NULL;
            void *ptr = NULL;
            ordo_stream_t *s = w->streams[(r >> 50) & 1];
            ordo_status_t st = ordo_mem_allocate(w->top, bytes, alignment, s, tag, &b, &ptr);
            if (st == ORDO_ERR_OUT_OF_MEMORY) {
                w->refused++;
                continue;
            }
            if (st != ORDO_OK) {
                worker_fail(w, st, "allocate");
                break;
            }
            memset(ptr, (int)op, bytes); /* the caller's bytes are the caller's */
            w->allocated_blocks[tag]++;
            w->allocated_bytes[tag] += bytes;
            w->live[w->live_count] = b;
            w->live_bytes[w->live_count] = bytes;
            w->live_count++;
        } else {
            worker_free_one(w, (size_t)(r >> 16) % w->live_count);
        }
    }
    for (size_t i = 0; i < w->live_count; ++i) {
        w->held_bytes += w->live_bytes[i];
    }
    if (w->pause) {
        pthread_barrier_wait(w->pause); /* the main thread checks */
        pthread_barrier_wait(w->pause);
    }
    while (w->live_count) {
        worker_free_one(w, 0);
    }
    return NULL;
}

/* Runs 4 workers on top over 2 streams; pauses them holding blocks to
 * check exact counts, then lets them free everything. */
static void run_workers(env_t *e, ordo_mem_resource_t *top, ordo_mem_resource_t *stats,
                        ordo_mem_resource_t *guard_above_stats, uint64_t ops, size_t max_bytes,
                        uint64_t *out_refused) {
    enum { N = 4 };
    static worker_t workers[N];
    pthread_barrier_t pause;
    pthread_barrier_init(&pause, NULL, N + 1);
    pthread_t threads[N];
    for (int i = 0; i < N; ++i) {
        memset(&workers[i], 0, sizeof workers[i]);
        workers[i] = (worker_t){.top = top,
                                .streams = {e->s[i & 1], e->s[(i + 1) & 1]},
                                .seed = 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1),
                                .ops = ops,
                                .max_live = 16,
                                .max_bytes = max_bytes,
                                .pause = &pause};
        threads[i] = test_thread_start(worker_run, &workers[i]);
    }
    pthread_barrier_wait(&pause);
    /* Paused, holding blocks: exact counts. */
    uint64_t held = 0, blocks = 0;
    uint64_t total_blocks[ORDO_MEM_MAX_TAGS] = {0};
    uint64_t total_bytes[ORDO_MEM_MAX_TAGS] = {0};
    uint64_t refused = 0;
    for (int i = 0; i < N; ++i) {
        held += workers[i].held_bytes;
        blocks += workers[i].live_count;
        refused += workers[i].refused;
        for (uint32_t t = 0; t < ORDO_MEM_MAX_TAGS; ++t) {
            total_blocks[t] += workers[i].allocated_blocks[t];
            total_bytes[t] += workers[i].allocated_bytes[t];
        }
    }
    assert_int_equal(outstanding(top), held);
    if (stats) {
        ordo_mem_statistics_t st;
        assert_ok(ordo_mem_statistics_get(stats, &st));
        uint64_t all_blocks = 0;
        for (uint32_t t = 0; t < ORDO_MEM_MAX_TAGS; ++t) {
            assert_int_equal(st.tags[t].total_blocks, total_blocks[t]);
            if (st.tags[t].total_bytes < total_bytes[t]) { /* canaries add, never remove */
                fail_msg("tag %u: %llu bytes counted, %llu allocated", t,
                         (unsigned long long)st.tags[t].total_bytes,
                         (unsigned long long)total_bytes[t]);
            }
            all_blocks += total_blocks[t];
        }
        assert_int_equal(st.overall.total_blocks, all_blocks);
        /* A guard above counts its quarantine as held. */
        uint64_t quarantined = 0;
        if (guard_above_stats) {
            ordo_mem_guard_report_t report;
            assert_ok(ordo_mem_guard_check(guard_above_stats, &report));
            quarantined = report.quarantined_blocks;
        }
        assert_int_equal(st.overall.current_blocks, blocks + quarantined);
        assert_true(st.overall.current_bytes >= held);
        assert_true(st.overall.peak_bytes >= st.overall.current_bytes);
    }
    pthread_barrier_wait(&pause);
    for (int i = 0; i < N; ++i) {
        pthread_join(threads[i], NULL);
        if (workers[i].failure != ORDO_OK) {
            fail_msg("worker %d: %s", i, workers[i].failure_text);
        }
    }
    pthread_barrier_destroy(&pause);
    assert_int_equal(outstanding(top), 0);
    if (guard_above_stats) {
        assert_ok(ordo_mem_guard_drain(guard_above_stats));
        assert_ok(ordo_mem_reap_pending(stats, test_deadline()));
    }
    if (stats) {
        ordo_mem_statistics_t st;
        assert_ok(ordo_mem_statistics_get(stats, &st));
        assert_int_equal(st.overall.current_bytes, 0);
        assert_int_equal(st.overall.current_blocks, 0);
        for (uint32_t t = 0; t < ORDO_MEM_MAX_TAGS; ++t) {
            assert_int_equal(st.tags[t].current_bytes, 0);
        }
    }
    *out_refused = refused;
}

static void logging_writes_whole_lines_and_replays(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    FILE *file = tmpfile();
    assert_non_null(file);
    ordo_mem_resource_t *l = NULL;
    assert_ok(ordo_mem_logging_create(e.direct, file, &l));

    /* Concurrent traffic first. */
    uint64_t refused = 0;
    run_workers(&e, l, NULL, NULL, test_scaled(3000), 512, &refused);
    assert_int_equal(refused, 0);
    /* Then a few blocks left live, use calls, a refused double free. */
    ordo_block_t *keep[3];
    alloc_ok(l, 100, e.s[0], 1, &keep[0]);
    alloc_ok(l, 3000, e.s[1], 2, &keep[1]);
    assert_ok(ordo_mem_allocate(l, 5, 4096, e.s[0], 3, &keep[2], NULL));
    ordo_block_t *gone = NULL;
    alloc_ok(l, 64, e.s[1], 4, &gone);
    assert_ok(ordo_mem_deallocate(l, gone, e.s[1]));
    assert_status(ordo_mem_prepare_use(l, keep[0], e.s[1], ORDO_ACCESS_READ), ORDO_ERR_UNSUPPORTED);
    assert_status(ordo_mem_record_use(l, keep[1], e.s[0]), ORDO_ERR_UNSUPPORTED);
    uint64_t before = outstanding(l);
    assert_int_equal(before, 3105);

    ordo_mem_logging_stats_t ls;
    assert_ok(ordo_mem_logging_stats(l, &ls));
    assert_int_equal(ls.failed_lines, 0);
    log_records_t log;
    log_parse(file, &log);
    assert_int_equal(log.lines, ls.lines);
    assert_string_equal(log.items[0].op, "open");
    int saw_prepare = 0, saw_record = 0, saw_reap = 0;
    for (size_t i = 0; i < log.count; ++i) {
        saw_prepare |= strcmp(log.items[i].op, "prepare_use") == 0 &&
                       strcmp(log.items[i].status, "ORDO_ERR_UNSUPPORTED") == 0;
        saw_record |= strcmp(log.items[i].op, "record_use") == 0;
        saw_reap |= strcmp(log.items[i].op, "reap") == 0;
    }
    assert_true(saw_prepare && saw_record && saw_reap);

    /* Replayed against a fresh resource: the same bytes stay outstanding. */
    ordo_mem_resource_t *fresh = NULL;
    assert_ok(ordo_mem_direct_create(e.device, &fresh));
    assert_int_equal(log_replay(&log, fresh, e.s), before);
    assert_ok(ordo_mem_resource_destroy(fresh));
    free(log.items);

    /* A refused call is logged too. */
    assert_status(ordo_mem_deallocate(l, gone, e.s[0]), ORDO_ERR_INVALID_HANDLE);
    log_parse(file, &log);
    assert_string_equal(log.items[log.count - 1].op, "deallocate");
    assert_string_equal(log.items[log.count - 1].status, "ORDO_ERR_INVALID_HANDLE");
    free(log.items);

    for (int i = 0; i < 3; ++i) {
        assert_ok(ordo_mem_deallocate(l, keep[i], e.s[i & 1]));
    }
    assert_int_equal(outstanding(l), 0);
    /* A block of the resource below is not the adaptor's to free, even
     * while blocks of its own are live. */
    ordo_block_t *own = NULL;
    alloc_ok(l, 8, e.s[0], 0, &own);
    ordo_block_t *under = NULL;
    alloc_ok(e.direct, 8, e.s[0], 0, &under);
    assert_status(ordo_mem_deallocate(l, under, e.s[0]), ORDO_ERR_INVALID_ARGUMENT);
    assert_contains(ordo_error_message(), "was allocated from the direct resource");
    log_parse(file, &log);
    assert_string_equal(log.items[log.count - 1].op, "deallocate");
    assert_string_equal(log.items[log.count - 1].refused, "wrong_resource");
    free(log.items);
    assert_ok(ordo_mem_deallocate(e.direct, under, e.s[0]));
    assert_ok(ordo_mem_deallocate(l, own, e.s[0]));
    assert_ok(ordo_mem_resource_destroy(l));
    fclose(file);

    /* To a path: appended, one write per line. */
    char path[] = "/tmp/ordo-mem-log-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    close(fd);
    assert_ok(ordo_mem_logging_create_path(e.direct, path, &l));
    ordo_block_t *b = NULL;
    alloc_ok(l, 10, e.s[0], 0, &b);
    assert_ok(ordo_mem_deallocate(l, b, e.s[0]));
    assert_int_equal(outstanding(l), 0);
    assert_ok(ordo_mem_logging_stats(l, &ls));
    assert_int_equal(ls.lines, 4); /* open, allocate, deallocate, reap */
    assert_ok(ordo_mem_resource_destroy(l));
    file = fopen(path, "r");
    assert_non_null(file);
    log_parse(file, &log);
    assert_int_equal(log.count, 4);
    assert_string_equal(log.items[1].op, "allocate");
    assert_int_equal(log.items[1].bytes, 10);
    assert_string_equal(log.items[2].op, "deallocate");
    assert_string_equal(log.items[2].block, log.items[1].block);
    free(log.items);
    fclose(file);
    unlink(path);
    env_close(&e);
}

/* A FIFO in a fresh directory of its own; *dir receives the directory. */
static void fifo_make(char dir[64], char path[96]) {
    snprintf(dir, 64, "/tmp/ordo-log-XXXXXX");
    assert_non_null(mkdtemp(dir));
    snprintf(path, 96, "%s/fifo", dir);
    assert_int_equal(mkfifo(path, 0600), 0);
}

static void fifo_remove(const char *dir, const char *path) {
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
}

/* A log whose reader went away fails its lines (counted); the calls go on
 * and the process is not killed by SIGPIPE, for a path and for a FILE. */
static void logging_survives_a_reader_that_went_away(void **state) {
    (void)state;
    env_t e;
    env_open(&e);
    char dir[64], path[96];
    fifo_make(dir, path);
    int reader = open(path, O_RDONLY | O_NONBLOCK);
    assert_true(reader >= 0);
    ordo_mem_resource_t *l = NULL;
    assert_ok(ordo_mem_logging_create_path(e.direct, path, &l));
    assert_int_equal(close(reader), 0);
    ordo_block_t *block = NULL;
    alloc_ok(l, 64, e.s[0], 1, &block);
    assert_ok(ordo_mem_deallocate(l, block, e.s[0]));
    ordo_mem_logging_stats_t ls;
    assert_ok(ordo_mem_logging_stats(l, &ls));
    assert_int_equal(ls.lines, 1); /* the open line, read by nobody but written */
    assert_int_equal(ls.failed_lines, 2);
    assert_ok(ordo_mem_reap_pending(l, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(l));
    fifo_remove(dir, path);

    /* A caller's FILE on a pipe whose read end is closed. */
    int fds[2];
    assert_int_equal(pipe(fds), 0);
    assert_int_equal(close(fds[0]), 0);
    FILE *file = fdopen(fds[1], "w");
    assert_non_null(file);
    assert_ok(ordo_mem_logging_create(e.direct, file, &l));
    alloc_ok(l, 64, e.s[1], 2, &block);
    assert_ok(ordo_mem_deallocate(l, block, e.s[1]));
    assert_ok(ordo_mem_logging_stats(l, &ls));
    assert_int_equal(ls.lines, 0);
    assert_int_equal(ls.failed_lines, 3);
    assert_ok(ordo_mem_reap_pending(l, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(l));
    (void)fclose(file);
    env_close(&e);
}

/* Logs lines through l until one fails, at most 200 calls; returns the
 * adaptor's counters. */
static ordo_mem_logging_stats_t log_until_a_line_fails(ordo_mem_resource_t *l, ordo_stream_t *s) {
    ordo_mem_logging_stats_t ls = {0, 0};
    for (int i = 0; i < 200 && !ls.failed_lines; ++i) {
        ordo_block_t *block = NULL;
        alloc_ok(l, 64, s, 1, &block);
        assert_ok(ordo_mem_deallocate(l, block, s));
        assert_ok(ordo_mem_logging_stats(l, &ls));
    }
    return ls;
}

/* A log file that reaches RLIMIT_FSIZE fails its lines (counted); the
 * calls go on and SIGXFSZ does not end the process, nor is it left
 * pending. For a path and for a caller's FILE. */
static void logging_survives_the_file_size_limit(void **state) {
    (void)state;
    env_t e;
    env_open(&e);
    char dir[] = "/tmp/ordo-fsize-XXXXXX", path[64];
    assert_non_null(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/log", dir);
    struct rlimit saved;
    assert_int_equal(getrlimit(RLIMIT_FSIZE, &saved), 0);
    struct rlimit small = {4096, saved.rlim_max};
    if (saved.rlim_max != RLIM_INFINITY && saved.rlim_max < small.rlim_cur) {
        small.rlim_cur = saved.rlim_max;
    }
    assert_int_equal(setrlimit(RLIMIT_FSIZE, &small), 0);

    ordo_mem_resource_t *l = NULL;
    assert_ok(ordo_mem_logging_create_path(e.direct, path, &l));
    ordo_mem_logging_stats_t ls = log_until_a_line_fails(l, e.s[0]);
    assert_true(ls.lines > 0);
    assert_true(ls.failed_lines > 0);
    assert_ok(ordo_mem_reap_pending(l, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(l));

    FILE *file = fopen(path, "a");
    assert_non_null(file);
    assert_ok(ordo_mem_logging_create(e.direct, file, &l));
    ls = log_until_a_line_fails(l, e.s[1]);
    assert_true(ls.failed_lines > 0);
    assert_ok(ordo_mem_reap_pending(l, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(l));
    (void)fclose(file);

    assert_int_equal(setrlimit(RLIMIT_FSIZE, &saved), 0);
    sigset_t pending;
    assert_int_equal(sigpending(&pending), 0);
    assert_false(sigismember(&pending, SIGXFSZ));
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_true((rlim_t)st.st_size <= small.rlim_cur);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(rmdir(dir), 0);
    env_close(&e);
}

typedef struct fifo_open {
    ordo_mem_resource_t *upstream;
    const char *path;
    ordo_mem_resource_t *made;
    ordo_status_t status;
    _Atomic int returned;
} fifo_open_t;

static void *fifo_open_main(void *arg) {
    fifo_open_t *o = arg;
    o->status = ordo_mem_logging_create_path(o->upstream, o->path, &o->made);
    atomic_store(&o->returned, 1);
    return NULL;
}

/* A FIFO that no process reads is refused with a message, not waited on
 * until a reader comes (which may be never). */
static void logging_refuses_a_fifo_nobody_reads(void **state) {
    (void)state;
    env_t e;
    env_open(&e);
    char dir[64], path[96];
    fifo_make(dir, path);
    fifo_open_t o = {e.direct, path, NULL, ORDO_OK, 0};
    pthread_t thread = test_thread_start(fifo_open_main, &o);
    ordo_deadline_t deadline = test_deadline();
    while (!atomic_load(&o.returned) && ordo_time_now_ns() < deadline) {
        sched_yield();
    }
    int blocked = !atomic_load(&o.returned);
    int reader = -1;
    if (blocked) {
        /* Rescue: a reader lets the open return, so the test can fail. */
        reader = open(path, O_RDONLY | O_NONBLOCK);
    }
    pthread_join(thread, NULL);
    if (o.made) {
        assert_ok(ordo_mem_resource_destroy(o.made));
    }
    if (reader >= 0) {
        (void)close(reader);
    }
    assert_false(blocked);
    assert_status(o.status, ORDO_ERR_INVALID_ARGUMENT);
    fifo_remove(dir, path);
    env_close(&e);
}

/* --- Guard --- */

typedef struct collected {
    pthread_mutex_t lock;
    int count;
    ordo_mem_guard_detection_t last;
    char message[ORDO_MEM_GUARD_MESSAGE_MAX];
} collected_t;

static void collect(void *user, const ordo_mem_guard_detection_t *d) {
    collected_t *c = user;
    pthread_mutex_lock(&c->lock);
    c->count++;
    c->last = *d;
    snprintf(c->message, sizeof c->message, "%s", d->message);
    c->last.message = c->message;
    pthread_mutex_unlock(&c->lock);
}

static int collected_count(collected_t *c) {
    pthread_mutex_lock(&c->lock);
    int n = c->count;
    pthread_mutex_unlock(&c->lock);
    return n;
}

static ordo_mem_resource_t *guard_make(env_t *e, collected_t *c, size_t quarantine_blocks) {
    memset(c, 0, sizeof *c);
    pthread_mutex_init(&c->lock, NULL);
    ordo_mem_guard_config_t config;
    assert_ok(ordo_mem_guard_config_default(&config));
    config.report = collect;
    config.report_user = c;
    config.quarantine_blocks = quarantine_blocks;
    ordo_mem_resource_t *g = NULL;
    assert_ok(ordo_mem_guard_create(e->direct, &config, &g));
    return g;
}

static void guard_close(ordo_mem_resource_t *g, collected_t *c) {
    assert_ok(ordo_mem_reap_pending(g, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(g));
    pthread_mutex_destroy(&c->lock);
}

static ordo_mem_guard_report_t guard_report(ordo_mem_resource_t *g) {
    ordo_mem_guard_report_t report;
    memset(&report, 0xff, sizeof report);
    ordo_status_t st = ordo_mem_guard_check(g, &report);
    assert_true(st == ORDO_OK || st == ORDO_ERR_CORRUPTED);
    return report;
}

static int all_bytes(const uint8_t *p, size_t n, uint8_t value) {
    for (size_t i = 0; i < n; ++i) {
        if (p[i] != value) {
            return 0;
        }
    }
    return 1;
}

static void guard_fills_poisons_and_forwards(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    collected_t c;
    ordo_mem_resource_t *g = guard_make(&e, &c, 16);
    ordo_block_t *b = NULL;
    uint8_t *p = NULL;
    assert_ok(ordo_mem_allocate(g, 100, 4096, e.s[0], 3, &b, (void **)&p));
    assert_int_equal((uintptr_t)p % 4096, 0);
    assert_true(all_bytes(p, 100, ORDO_MEM_GUARD_FRESH));
    ordo_block_info_t info;
    assert_ok(ordo_block_info(b, &info));
    assert_ptr_equal(info.ptr, p);
    assert_int_equal(info.bytes, 100);
    assert_int_equal(info.alignment, 4096);
    assert_int_equal(info.tag, 3);
    assert_ptr_equal(info.resource, g);
    /* Upstream holds the canaries too; the guard counts the caller's. */
    assert_int_equal(outstanding(g), 100);
    assert_true(outstanding(e.direct) >= 100 + 4096 + 64);
    /* Use calls reach the upstream block (the direct resource refuses). */
    assert_status(ordo_mem_prepare_use(g, b, e.s[1], ORDO_ACCESS_WRITE), ORDO_ERR_UNSUPPORTED);
    assert_status(ordo_mem_finish_use(g, b, e.s[1], ORDO_ACCESS_WRITE), ORDO_ERR_UNSUPPORTED);
    assert_status(ordo_mem_record_use(g, b, e.s[1]), ORDO_ERR_UNSUPPORTED);
    ordo_buffer_t *buffer = NULL;
    assert_status(ordo_block_buffer(b, &buffer), ORDO_ERR_UNSUPPORTED);
    bool supported = 1;
    assert_ok(ordo_mem_supports_use_tracking(g, &supported));
    assert_false(supported);

    memset(p, 0x11, 100);
    assert_ok(ordo_mem_deallocate(g, b, e.s[0]));
    assert_int_equal(outstanding(g), 0);
    /* Quarantined, poisoned: the memory is still the guard's to read. */
    assert_true(all_bytes(p, 100, ORDO_MEM_GUARD_POISON));
    ordo_mem_guard_report_t r = guard_report(g);
    assert_int_equal(r.total, 0);
    assert_int_equal(r.quarantined_blocks, 1);
    assert_int_equal(r.live_blocks, 0);
    assert_string_equal(r.last_message, "");
    assert_ok(ordo_mem_guard_drain(g));
    assert_int_equal(outstanding(e.direct), 0);
    assert_int_equal(collected_count(&c), 0);

    /* A device whose memory the host cannot read gets no guard. */
    e.device->info.device_memory = 1;
    ordo_mem_resource_t *refused = NULL;
    assert_status(ordo_mem_guard_create(e.direct, NULL, &refused), ORDO_ERR_UNSUPPORTED);
    e.device->info.device_memory = 0;
    assert_contains(ordo_error_message(), "not host-readable");
    guard_close(g, &c);
    env_close(&e);
}

/* Stream work that overflows its block. */
static ordo_status_t write_past_end(void *ctx) {
    memset(ctx, 0, 4);
    return ORDO_OK;
}

static void guard_catches_overflow(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    collected_t c;
    ordo_mem_resource_t *g = guard_make(&e, &c, 16);
    ordo_block_t *b = NULL;
    uint8_t *p = alloc_ok(g, 100, e.s[0], 7, &b);
    memset(p + 100, 0, 24);
    assert_status(ordo_mem_deallocate(g, b, e.s[0]), ORDO_ERR_CORRUPTED);
    assert_contains(ordo_error_message(), "tag 7: 24 bytes after the end of a 100-byte block "
                                          "overwritten");
    assert_int_equal(collected_count(&c), 1);
    assert_int_equal(c.last.finding, ORDO_MEM_GUARD_OVERFLOW);
    assert_int_equal(c.last.tag, 7);
    assert_int_equal(c.last.bytes, 100);
    assert_ptr_equal(c.last.block, b);
    assert_int_equal(outstanding(g), 0);
    ordo_mem_guard_report_t r = guard_report(g);
    assert_int_equal(r.findings[ORDO_MEM_GUARD_OVERFLOW], 1);
    assert_int_equal(r.total, 1);
    assert_contains(r.last_message, "24 bytes after the end");
    assert_int_equal(collected_count(&c), 1); /* reported once */

    /* Found in a live block by an explicit check, reported once. */
    p = alloc_ok(g, 10, e.s[0], 8, &b);
    p[10] = 0;
    assert_status(ordo_mem_guard_check(g, NULL), ORDO_ERR_CORRUPTED);
    assert_contains(ordo_error_message(), "tag 8: 1 bytes after the end of a 10-byte block");
    assert_ok(ordo_mem_deallocate(g, b, e.s[0]));
    assert_int_equal(collected_count(&c), 2);

    /* Written by the stream's own work before the free point: found when
     * the stream reaches the free. */
    p = alloc_ok(g, 32, e.s[1], 9, &b);
    ordo_signal_t *gate = gate_stream(e.s[1]);
    assert_ok(ordo_stream_host_task(e.s[1], write_past_end, p + 32));
    assert_ok(ordo_mem_deallocate(g, b, e.s[1])); /* the task has not run yet */
    assert_int_equal(collected_count(&c), 2);
    gate_open(gate);
    assert_ok(ordo_mem_reap_pending(g, test_deadline()));
    assert_int_equal(collected_count(&c), 3);
    assert_int_equal(c.last.finding, ORDO_MEM_GUARD_OVERFLOW);
    assert_int_equal(c.last.tag, 9);
    assert_contains(c.last.message, "tag 9: 4 bytes after the end of a 32-byte block");
    guard_close(g, &c);
    env_close(&e);
}

static void guard_catches_underflow(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    collected_t c;
    ordo_mem_resource_t *g = guard_make(&e, &c, 16);
    ordo_block_t *b = NULL;
    uint8_t *p = alloc_ok(g, 100, e.s[1], 7, &b);
    p[-3] = 0x42;
    assert_status(ordo_mem_deallocate(g, b, e.s[1]), ORDO_ERR_CORRUPTED);
    assert_contains(ordo_error_message(),
                    "tag 7: 3 bytes before the start of a 100-byte block overwritten");
    assert_int_equal(collected_count(&c), 1);
    assert_int_equal(c.last.finding, ORDO_MEM_GUARD_UNDERFLOW);
    ordo_mem_guard_report_t r = guard_report(g);
    assert_int_equal(r.findings[ORDO_MEM_GUARD_UNDERFLOW], 1);
    assert_int_equal(r.findings[ORDO_MEM_GUARD_OVERFLOW], 0);
    guard_close(g, &c);
    env_close(&e);
}

static void guard_catches_double_free(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    collected_t c;
    ordo_mem_resource_t *g = guard_make(&e, &c, 0); /* memory leaves at once */
    ordo_mem_resource_t *top = NULL;
    assert_ok(ordo_mem_statistics_create(g, &top));
    ordo_block_t *b = NULL;
    alloc_ok(top, 100, e.s[0], 7, &b);
    assert_ok(ordo_mem_deallocate(top, b, e.s[0]));
    assert_ok(ordo_mem_reap_pending(top, test_deadline()));
    /* The memory went back upstream; the header still says freed. */
    ordo_mem_guard_report_t r = guard_report(g);
    assert_int_equal(r.quarantined_blocks, 0);
    assert_status(ordo_mem_deallocate(top, b, e.s[1]), ORDO_ERR_INVALID_HANDLE);
    assert_contains(ordo_error_message(), "tag 7: double free of a 100-byte block");
    assert_contains(ordo_error_message(), "its memory went back upstream");
    assert_int_equal(collected_count(&c), 1);
    assert_int_equal(c.last.finding, ORDO_MEM_GUARD_DOUBLE_FREE);
    assert_int_equal(c.last.tag, 7);
    assert_int_equal(c.last.bytes, 100);
    /* A use after the free is caught the same way. */
    assert_status(ordo_mem_record_use(top, b, e.s[1]), ORDO_ERR_INVALID_HANDLE);
    assert_contains(ordo_error_message(), "use of a 100-byte block after it was freed");
    r = guard_report(g);
    assert_int_equal(r.findings[ORDO_MEM_GUARD_DOUBLE_FREE], 2);
    assert_int_equal(outstanding(e.direct), 0);
    assert_ok(ordo_mem_resource_destroy(top));
    guard_close(g, &c);
    env_close(&e);
}

static void guard_catches_foreign_free(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    collected_t c1, c2;
    ordo_mem_resource_t *g1 = guard_make(&e, &c1, 16);
    ordo_mem_resource_t *g2 = guard_make(&e, &c2, 16);
    /* A block of another stack. */
    ordo_block_t *other = NULL;
    alloc_ok(g2, 48, e.s[0], 5, &other);
    assert_status(ordo_mem_deallocate(g1, other, e.s[0]), ORDO_ERR_INVALID_ARGUMENT);
    assert_contains(ordo_error_message(), "tag 5: foreign free");
    assert_contains(ordo_error_message(), "48 bytes");
    assert_int_equal(collected_count(&c1), 1);
    assert_int_equal(c1.last.finding, ORDO_MEM_GUARD_FOREIGN_FREE);
    assert_int_equal(collected_count(&c2), 0);
    /* A block of the resource below the guard. */
    ordo_block_t *under = NULL;
    alloc_ok(e.direct, 16, e.s[0], 6, &under);
    assert_status(ordo_mem_deallocate(g1, under, e.s[0]), ORDO_ERR_INVALID_ARGUMENT);
    assert_contains(ordo_error_message(), "allocated from the direct resource below the guard");
    assert_status(ordo_mem_prepare_use(g1, under, e.s[0], ORDO_ACCESS_READ),
                  ORDO_ERR_INVALID_ARGUMENT);
    /* One of the guard's, handed out through an adaptor above it: it goes
     * back through the adaptor. */
    ordo_mem_resource_t *stats = NULL;
    assert_ok(ordo_mem_statistics_create(g1, &stats));
    ordo_block_t *above = NULL;
    alloc_ok(stats, 24, e.s[0], 7, &above);
    assert_status(ordo_mem_deallocate(g1, above, e.s[0]), ORDO_ERR_INVALID_ARGUMENT);
    assert_contains(ordo_error_message(), "allocated through the statistics resource above");
    /* Something that is no block at all. */
    uint64_t fake[8] = {0};
    assert_status(ordo_mem_deallocate(g1, (ordo_block_t *)fake, e.s[0]), ORDO_ERR_INVALID_HANDLE);
    assert_contains(ordo_error_message(), "not a live block");
    ordo_mem_guard_report_t r = guard_report(g1);
    assert_int_equal(r.findings[ORDO_MEM_GUARD_FOREIGN_FREE], 5);
    assert_ok(ordo_mem_deallocate(stats, above, e.s[0]));
    assert_ok(ordo_mem_resource_destroy(stats));
    /* One of the guard's, freed below it: the wrong resource of the same
     * stack, not another stack's block. */
    ordo_block_t *own = NULL;
    alloc_ok(g1, 16, e.s[0], 8, &own);
    assert_status(ordo_mem_deallocate(e.direct, own, e.s[0]), ORDO_ERR_INVALID_ARGUMENT);
    assert_contains(ordo_error_message(), "was allocated through the guard resource");
    assert_ok(ordo_mem_deallocate(g1, own, e.s[0]));
    assert_int_equal(r.findings[ORDO_MEM_GUARD_DOUBLE_FREE], 0);
    /* Nothing was touched: both blocks still free normally. */
    assert_ok(ordo_mem_deallocate(g2, other, e.s[0]));
    assert_ok(ordo_mem_deallocate(e.direct, under, e.s[0]));
    r = guard_report(g2);
    assert_int_equal(r.total, 0);
    guard_close(g1, &c1);
    guard_close(g2, &c2);
    env_close(&e);
}

static void guard_catches_use_after_free(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    collected_t c;
    ordo_mem_resource_t *g = guard_make(&e, &c, 1);
    ordo_block_t *a = NULL;
    ordo_block_t *b = NULL;
    uint8_t *pa = alloc_ok(g, 100, e.s[0], 4, &a);
    alloc_ok(g, 100, e.s[0], 4, &b);
    assert_ok(ordo_mem_deallocate(g, a, e.s[0]));
    assert_ok(ordo_mem_reap_pending(g, test_deadline()));
    pa[5] = 1; /* a write after the free, to the quarantined block */
    pa[9] = 1;
    /* Found by an explicit check... */
    assert_status(ordo_mem_guard_check(g, NULL), ORDO_ERR_CORRUPTED);
    assert_contains(ordo_error_message(), "tag 4: a 100-byte block was written after its free: "
                                          "2 byte(s) changed between offsets 5 and 9");
    assert_int_equal(collected_count(&c), 1);
    assert_int_equal(c.last.finding, ORDO_MEM_GUARD_USE_AFTER_FREE);
    /* ...and, in another block, when it leaves the quarantine. */
    ordo_block_t *d = NULL;
    alloc_ok(g, 40, e.s[1], 12, &d);
    assert_ok(ordo_mem_deallocate(g, b, e.s[0])); /* evicts a (reported already) */
    assert_ok(ordo_mem_reap_pending(g, test_deadline()));
    assert_int_equal(collected_count(&c), 1);
    ordo_mem_guard_report_t r = guard_report(g);
    assert_int_equal(r.quarantined_blocks, 1);
    assert_ok(ordo_mem_deallocate(g, d, e.s[1])); /* evicts b: clean */
    assert_ok(ordo_mem_reap_pending(g, test_deadline()));
    assert_int_equal(collected_count(&c), 1);
    r = guard_report(g);
    assert_int_equal(r.findings[ORDO_MEM_GUARD_USE_AFTER_FREE], 1);
    guard_close(g, &c);
    env_close(&e);
}

/* A write after the free found only when the block leaves the quarantine
 * (no explicit check), from the stream's worker thread. */
static void guard_catches_use_after_free_at_eviction(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    collected_t c;
    ordo_mem_resource_t *g = guard_make(&e, &c, 1);
    ordo_block_t *a = NULL;
    ordo_block_t *b = NULL;
    uint8_t *pa = alloc_ok(g, 64, e.s[0], 2, &a);
    alloc_ok(g, 64, e.s[1], 2, &b);
    assert_ok(ordo_mem_deallocate(g, a, e.s[0]));
    assert_ok(ordo_mem_reap_pending(g, test_deadline()));
    pa[63] = 0;
    pa[64] = 0; /* into the old rear canary, poisoned as well */
    assert_ok(ordo_mem_deallocate(g, b, e.s[1]));
    assert_ok(ordo_mem_reap_pending(g, test_deadline()));
    assert_int_equal(collected_count(&c), 1);
    assert_int_equal(c.last.finding, ORDO_MEM_GUARD_USE_AFTER_FREE);
    assert_contains(c.last.message, "2 byte(s) changed between offsets 63 and 64");
    ordo_mem_guard_report_t r = guard_report(g);
    assert_int_equal(r.findings[ORDO_MEM_GUARD_USE_AFTER_FREE], 1);
    guard_close(g, &c);
    env_close(&e);
}

/* A pass-through resource that claims use tracking and records what the
 * guard above forwards to it. */
typedef struct tracking {
    ordo_mem_resource_t base;
    const ordo_block_t *used;
    ordo_access_mode_t mode;
    ordo_stream_t *freed_on;
    int uses;
} tracking_t;

static ordo_status_t tracking_allocate(ordo_mem_resource_t *r, const mem_request_t *request,
                                       ordo_block_t **out_block) {
    return mem_allocate(r->upstream, request, out_block);
}

static ordo_status_t tracking_deallocate(ordo_mem_resource_t *r, ordo_block_t *block,
                                         ordo_stream_t *stream) {
    ((tracking_t *)r)->freed_on = stream;
    return mem_deallocate(r->upstream, block, stream);
}

static int tracking_supported(ordo_mem_resource_t *r) {
    (void)r;
    return 1;
}

static ordo_status_t tracking_prepare(ordo_mem_resource_t *r, ordo_block_t *block,
                                      ordo_stream_t *stream, ordo_access_mode_t mode) {
    (void)stream;
    tracking_t *t = (tracking_t *)r;
    t->used = block;
    t->mode = mode;
    t->uses++;
    return ORDO_OK;
}

static ordo_status_t tracking_record(ordo_mem_resource_t *r, ordo_block_t *block,
                                     ordo_stream_t *stream) {
    return tracking_prepare(r, block, stream, ORDO_ACCESS_READ_WRITE);
}

static ordo_status_t tracking_destroy(ordo_mem_resource_t *r) {
    ordo__mem_resource_fini(r);
    return ORDO_OK;
}

static const mem_resource_ops_t tracking_ops = {
    .kind = "tracking",
    .allocate = tracking_allocate,
    .deallocate = tracking_deallocate,
    .bytes_outstanding = ordo__mem_forward_bytes_outstanding,
    .reap_pending = ordo__mem_forward_reap_pending,
    .supports_use_tracking = tracking_supported,
    .prepare_use = tracking_prepare,
    .finish_use = tracking_prepare,
    .record_use = tracking_record,
    .block_buffer = ordo__mem_forward_block_buffer,
    .destroy = tracking_destroy,
};

/* Over an upstream that tracks uses, the guard forwards use calls with the
 * upstream block and gives quarantined memory back as a free on the
 * block's allocating stream (so recorded uses on other streams still order
 * its reuse), a stream upstream already knows: never one of the guard's
 * own, which would outlive the guard in upstream's tracker. */
static void guard_over_a_use_tracking_upstream(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    tracking_t t;
    memset(&t, 0, sizeof t);
    ordo__mem_resource_init(&t.base, &tracking_ops, e.device, e.direct);
    ordo_mem_resource_t *g = NULL;
    assert_ok(ordo_mem_guard_create(&t.base, NULL, &g));
    bool supported = 0;
    assert_ok(ordo_mem_supports_use_tracking(g, &supported));
    assert_true(supported);
    ordo_block_t *b = NULL;
    alloc_ok(g, 100, e.s[0], 1, &b);
    assert_ok(ordo_mem_prepare_use(g, b, e.s[1], ORDO_ACCESS_WRITE));
    assert_non_null(t.used);
    assert_ptr_not_equal(t.used, b);
    ordo_block_info_t inner;
    assert_ok(ordo_block_info(t.used, &inner));
    assert_ptr_equal(inner.resource, e.direct);
    assert_true(inner.bytes > 100);
    assert_int_equal(t.mode, ORDO_ACCESS_WRITE);
    assert_ok(ordo_mem_finish_use(g, b, e.s[1], ORDO_ACCESS_READ));
    assert_int_equal(t.mode, ORDO_ACCESS_READ);
    assert_ok(ordo_mem_record_use(g, b, e.s[0]));
    assert_int_equal(t.uses, 3);
    assert_ok(ordo_mem_deallocate(g, b, e.s[0]));
    assert_int_equal(outstanding(g), 0);
    assert_null(t.freed_on); /* still in quarantine */
    assert_ok(ordo_mem_guard_drain(g));
    assert_ptr_equal(t.freed_on, e.s[0]);
    assert_int_equal(outstanding(e.direct), 0);
    assert_ok(ordo_mem_resource_destroy(g));
    assert_ok(ordo_mem_resource_destroy(&t.base));
    env_close(&e);
}

/* Over a pool, the guard gives quarantined memory back only in its calls
 * on the program's side. The pool's free is ordered on its tracker and
 * writes the tracker's state, which this thread uses without the tracker's
 * lock: a release on the stream's worker at the free point raced it (a
 * data race ThreadSanitizer reports in the second part). */
static ordo_status_t set_signal_task(void *ctx) {
    return ordo_signal_advance(ctx, 1);
}

static ordo_status_t wait_gate_task(void *ctx) {
    return ordo_signal_wait(ctx, 1, test_deadline());
}

static ordo_status_t touch_task(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

/* env_open, a tracker, a pool over the direct resource and a guard over
 * the pool; false (all closed again, the reason printed) where the guard
 * cannot read the device's memory. */
static bool guard_over_a_pool_open(env_t *e, const ordo_mem_guard_config_t *config,
                                   ordo_tracker_t **tracker, ordo_mem_resource_t **pool,
                                   ordo_mem_resource_t **g) {
    env_open(e);
    assert_ok(ordo_tracker_create(e->device, tracker));
    assert_ok(ordo_mem_pool_create(*tracker, e->direct, NULL, pool));
    ordo_status_t made = ordo_mem_guard_create(*pool, config, g);
    if (made == ORDO_ERR_UNSUPPORTED) { /* device memory the host cannot read */
        fprintf(stderr, "  skipped: %s\n", ordo_error_message());
        assert_ok(ordo_mem_resource_destroy(*pool));
        assert_ok(ordo_tracker_destroy(*tracker));
        env_close(e);
        return false;
    }
    assert_ok(made);
    return true;
}

static void guard_over_a_pool_releases_on_the_program_side(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    collected_t c;
    memset(&c, 0, sizeof c);
    pthread_mutex_init(&c.lock, NULL);
    ordo_mem_guard_config_t config;
    assert_ok(ordo_mem_guard_config_default(&config));
    config.report = collect;
    config.report_user = &c;
    config.quarantine_blocks = 0; /* every block is over the bound at once */
    ordo_tracker_t *tracker = NULL;
    ordo_mem_resource_t *pool = NULL, *g = NULL;
    if (!guard_over_a_pool_open(&e, &config, &tracker, &pool, &g)) {
        pthread_mutex_destroy(&c.lock);
        return;
    }

    /* The free point is reached on s[0]'s worker once the gate opens,
     * after the free returned; the task behind it returns after the
     * point's callback did. The block stays quarantined there, over the
     * bound, until the next call on the guard. */
    ordo_signal_t *gate = test_signal_make(0);
    ordo_signal_t *behind = test_signal_make(0);
    ordo_block_t *b = NULL;
    alloc_ok(g, 100, e.s[0], 1, &b);
    assert_ok(ordo_stream_host_task(e.s[0], wait_gate_task, gate));
    assert_ok(ordo_mem_deallocate(g, b, e.s[0]));
    assert_ok(ordo_stream_host_task(e.s[0], set_signal_task, behind));
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_signal_wait(behind, 1, test_deadline()));
    ordo_mem_guard_report_t r = guard_report(g);
    assert_int_equal(r.pending_blocks, 0);
    assert_int_equal(r.quarantined_blocks, 1);
    uint64_t held = 0;
    assert_ok(ordo_mem_bytes_outstanding(pool, &held));
    assert_true(held > 100); /* the block with its canaries, still the guard's */
    ordo_block_t *next = NULL;
    alloc_ok(g, 100, e.s[0], 1, &next);
    assert_int_equal(guard_report(g).quarantined_blocks, 0);
    assert_ok(ordo_mem_deallocate(g, next, e.s[0]));

    /* Blocks freed on both streams reach their free points on the workers
     * while this thread keeps ordering work on the tracker, unlocked. */
    ordo_buffer_t *buffers[2] = {NULL, NULL};
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_buffer_create(tracker, &buffers[i]));
    }
    const uint64_t rounds = test_scaled(4000);
    for (uint64_t i = 0; i < rounds; ++i) {
        ordo_stream_t *s = e.s[i % 2];
        ordo_block_t *block = NULL;
        uint8_t *p = alloc_ok(g, 64, s, 2, &block);
        p[0] = (uint8_t)i;
        ordo_buffer_t *own = NULL;
        assert_ok(ordo_block_buffer(block, &own));
        ordo_access_t uses[2] = {{own, ORDO_ACCESS_WRITE}, {buffers[i % 2], ORDO_ACCESS_READ}};
        assert_ok(ordo_tracker_submit_host(tracker, s, uses, 2, touch_task, NULL));
        assert_ok(ordo_mem_deallocate(g, block, s));
        ordo_access_t other = {buffers[(i + 1) % 2], ORDO_ACCESS_WRITE};
        assert_ok(ordo_tracker_submit_host(tracker, e.s[(i + 1) % 2], &other, 1, touch_task, NULL));
    }
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_synchronize(e.s[i], test_deadline()));
        assert_ok(ordo_buffer_release(buffers[i], NULL, NULL));
    }
    assert_int_equal(collected_count(&c), 0);
    assert_ok(ordo_mem_reap_pending(g, test_deadline()));
    r = guard_report(g);
    assert_int_equal(r.quarantined_blocks, 0);
    assert_int_equal(r.total, 0);
    assert_int_equal(outstanding(g), 0);
    assert_ok(ordo_mem_resource_destroy(g));
    assert_int_equal(outstanding(pool), 0);
    assert_ok(ordo_mem_resource_destroy(pool));
    assert_ok(ordo_tracker_destroy(tracker));
    assert_ok(ordo_signal_release(behind));
    assert_ok(ordo_signal_release(gate));
    pthread_mutex_destroy(&c.lock);
    env_close(&e);
}

/* Over a pool, a free on one stream while another still uses the block (a
 * use recorded through the guard) poisons it only once that use has run,
 * waited for on the host; a free on a stream that has failed poisons
 * nothing (the stream's point stands for none of the uses it was to wait
 * for), and the memory still goes back ordered after them. Before, the
 * poison overwrote data the other stream still read. */
static ordo_status_t fail_now_task(void *ctx);

typedef struct held_use {
    uint8_t *p;
    size_t bytes;
    uint8_t value;
    ordo_signal_t *gate;
    _Atomic size_t wrong;
} held_use_t;

static ordo_status_t held_fill_task(void *ctx) {
    held_use_t *u = ctx;
    memset(u->p, u->value, u->bytes);
    return ORDO_OK;
}

static ordo_status_t held_verify_task(void *ctx) {
    held_use_t *u = ctx;
    ordo_status_t st = ordo_signal_wait(u->gate, 1, test_deadline());
    size_t wrong = 0;
    for (size_t i = 0; i < u->bytes; ++i) {
        wrong += u->p[i] != u->value;
    }
    atomic_store(&u->wrong, wrong);
    return st;
}

/* A use of the block on s: filled, then read back once the gate opens. */
static void held_use_begin(held_use_t *u, ordo_mem_resource_t *g, ordo_block_t *b, uint8_t *p,
                           ordo_stream_t *s) {
    *u = (held_use_t){p, 256, 0x5a, test_signal_make(0), 0};
    assert_ok(ordo_mem_prepare_use(g, b, s, ORDO_ACCESS_READ_WRITE));
    assert_ok(ordo_stream_host_task(s, held_fill_task, u));
    assert_ok(ordo_stream_host_task(s, held_verify_task, u));
    assert_ok(ordo_mem_finish_use(g, b, s, ORDO_ACCESS_READ_WRITE));
}

static void held_use_end(held_use_t *u, ordo_stream_t *s) {
    assert_ok(ordo_signal_advance(u->gate, 1));
    assert_ok(ordo_stream_synchronize(s, test_deadline()));
    assert_ok(ordo_signal_release(u->gate));
    assert_int_equal(atomic_load(&u->wrong), 0);
}

static void guard_over_a_pool_poisons_after_every_use(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    ordo_tracker_t *tracker = NULL;
    ordo_mem_resource_t *pool = NULL, *g = NULL;
    if (!guard_over_a_pool_open(&e, NULL, &tracker, &pool, &g)) {
        return;
    }

    /* Freed on the idle s[1] while s[0] still reads: s[1] reaches the
     * free, and the block stays pending until the use has run. */
    ordo_block_t *b = NULL;
    uint8_t *p = alloc_ok(g, 256, e.s[0], 1, &b);
    held_use_t use;
    held_use_begin(&use, g, b, p, e.s[0]);
    assert_ok(ordo_mem_deallocate(g, b, e.s[1]));
    assert_ok(ordo_stream_synchronize(e.s[1], test_deadline()));
    assert_int_equal(guard_report(g).pending_blocks, 1);
    held_use_end(&use, e.s[0]);
    ordo_deadline_t deadline = test_deadline();
    while (guard_report(g).pending_blocks) {
        assert_true(ordo_deadline_remaining_ns(deadline) > 0);
        sched_yield();
    }
    assert_ok(ordo_mem_guard_drain(g));
    assert_int_equal(guard_report(g).total, 0);

    /* A use held by a signal the freeing stream raises only after its
     * free: the guard does not make the free's stream wait for the use
     * (that wait would close the cycle), so both streams finish. */
    ordo_signal_t *after_free = test_signal_make(0);
    p = alloc_ok(g, 256, e.s[0], 3, &b);
    ordo_buffer_t *own = NULL;
    assert_ok(ordo_block_buffer(b, &own));
    assert_ok(ordo_stream_wait(e.s[0], after_free, 1));
    ordo_access_t read = {own, ORDO_ACCESS_READ};
    assert_ok(ordo_tracker_submit_host(tracker, e.s[0], &read, 1, touch_task, NULL));
    assert_ok(ordo_mem_deallocate(g, b, e.s[1]));
    assert_ok(ordo_stream_signal(e.s[1], after_free, 1));
    assert_ok(ordo_stream_synchronize(e.s[1], test_deadline()));
    assert_ok(ordo_stream_synchronize(e.s[0], test_deadline()));
    assert_ok(ordo_signal_release(after_free));
    assert_ok(ordo_mem_guard_drain(g));
    assert_int_equal(guard_report(g).total, 0);

    /* Freed on a stream that has failed, while s[0] still reads: the
     * free succeeds, leaves the caller's message alone, and poisons
     * nothing. */
    p = alloc_ok(g, 256, e.s[0], 2, &b);
    held_use_begin(&use, g, b, p, e.s[0]);
    assert_ok(ordo_stream_host_task(e.s[1], fail_now_task, NULL));
    ordo_status_t failed = ordo_stream_synchronize(e.s[1], test_deadline());
    assert_int_not_equal(failed, ORDO_OK);
    assert_int_not_equal(failed, ORDO_ERR_TIMEOUT);
    (void)ordo_fail(ORDO_ERR_ABORTED, "the caller's own message");
    assert_ok(ordo_mem_deallocate(g, b, e.s[1]));
    assert_string_equal(ordo_error_message(), "the caller's own message");
    held_use_end(&use, e.s[0]);
    assert_ok(ordo_mem_guard_drain(g));
    assert_int_equal(guard_report(g).total, 0);

    assert_int_equal(outstanding(g), 0);
    assert_ok(ordo_mem_resource_destroy(g));
    assert_int_equal(outstanding(pool), 0);
    assert_ok(ordo_mem_resource_destroy(pool));
    assert_ok(ordo_tracker_destroy(tracker));
    env_close(&e);
}

/* Frees through a budget adaptor on failed streams, from several threads:
 * a failed stream fails the free's timeline at once, the free point's
 * callback puts the record back, and another thread took it and released
 * the timeline while the first still had to look at it (a use after free
 * AddressSanitizer reported; the plain build's heap broke). */
typedef struct failed_frees {
    ordo_mem_resource_t *top;
    ordo_stream_t *stream;
    uint64_t rounds;
    _Atomic int failures;
} failed_frees_t;

static ordo_status_t fail_now_task(void *ctx) {
    (void)ctx;
    return ORDO_ERR_ABORTED;
}

static void *failed_frees_main(void *arg) {
    failed_frees_t *w = arg;
    for (uint64_t i = 0; i < w->rounds; ++i) {
        ordo_block_t *block = NULL;
        void *ptr = NULL;
        if (ordo_mem_allocate(w->top, 64 + i % 512, 0, w->stream, 1, &block, &ptr) != ORDO_OK ||
            ordo_mem_deallocate(w->top, block, w->stream) != ORDO_OK) {
            atomic_fetch_add(&w->failures, 1);
        }
    }
    return NULL;
}

static void frees_on_failed_streams_from_many_threads(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    ordo_stream_t *failed[2];
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_create(e.device, 0, &failed[i]));
        assert_ok(ordo_stream_host_task(failed[i], fail_now_task, NULL));
        assert_status(ordo_stream_synchronize(failed[i], test_deadline()), ORDO_ERR_ABORTED);
    }
    ordo_mem_resource_t *budget = NULL, *stats = NULL;
    assert_ok(ordo_mem_budget_create(e.direct, NULL, &budget));
    assert_ok(ordo_mem_statistics_create(budget, &stats));
    failed_frees_t w[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; ++i) {
        w[i] =
            (failed_frees_t){stats, i < 2 ? failed[i] : e.s[i - 2], test_device_scaled(20000), 0};
        threads[i] = test_thread_start(failed_frees_main, &w[i]);
    }
    for (int i = 0; i < 4; ++i) {
        test_join_bounded(threads[i]);
        assert_int_equal(atomic_load(&w[i].failures), 0);
    }
    assert_int_equal(outstanding(stats), 0);
    ordo_mem_budget_stats_t bs;
    assert_ok(ordo_mem_budget_stats(e.device, &bs));
    assert_int_equal(bs.charged, 0);
    assert_ok(ordo_mem_resource_destroy(stats));
    assert_ok(ordo_mem_resource_destroy(budget));
    for (int i = 0; i < 2; ++i) {
        assert_ok(ordo_stream_destroy(failed[i]));
    }
    env_close(&e);
}

/* --- Stacks under concurrency --- */

/* A peak reset racing with allocations: each round, one thread allocates a
 * block while another resets the peaks in a loop until it is done; once
 * both are quiet, no peak may be below what is held. (A reset used to load
 * the counter and store it as the peak; an allocation between the two,
 * whose raise read the old higher peak and so left it, was lost.) The
 * rounds are handed over through timelines, and the resetting thread
 * gives up its CPU for a moment after every PEAK_RACE_BURST resets: on a
 * loaded machine (another test beside this one), a thread that spins or
 * yields in a loop keeps the other from running for a scheduler tick, and
 * the rounds did not finish by the deadline. The rounds also stop at half
 * the deadline: in a slow spell of a shared machine each hand-over takes
 * longer, and a tenth of the rounds still races thousands of resets. */
#define PEAK_RACE_BURST 32
typedef struct peak_race {
    ordo_mem_resource_t *top;
    ordo_stream_t *stream;
    ordo_signal_t *go;        /* main: the round whose block to allocate */
    ordo_signal_t *release;   /* main: the round whose block to free */
    ordo_signal_t *allocated; /* worker: the round whose block it holds */
    ordo_signal_t *freed;     /* worker: the round whose block it freed */
    _Atomic int stop;         /* main: no more rounds (go is raised past them) */
    _Atomic int failures;
    ordo_deadline_t deadline;
} peak_race_t;

static uint64_t signal_value(ordo_signal_t *signal) {
    uint64_t value = 0;
    (void)ordo_signal_query(signal, &value);
    return value;
}

static void *peak_race_worker(void *arg) {
    peak_race_t *r = arg;
    for (uint64_t k = 1;; ++k) {
        if (ordo_signal_wait(r->go, k, r->deadline) != ORDO_OK) {
            atomic_fetch_add(&r->failures, 1);
            return NULL;
        }
        if (atomic_load(&r->stop)) {
            return NULL;
        }
        ordo_block_t *block = NULL;
        if (ordo_mem_allocate(r->top, 4096, 0, r->stream, 5, &block, NULL) != ORDO_OK ||
            ordo_signal_advance(r->allocated, k) != ORDO_OK ||
            ordo_signal_wait(r->release, k, r->deadline) != ORDO_OK ||
            ordo_mem_deallocate(r->top, block, r->stream) != ORDO_OK ||
            ordo_signal_advance(r->freed, k) != ORDO_OK) {
            atomic_fetch_add(&r->failures, 1);
            return NULL;
        }
    }
}

static void peaks_survive_a_racing_reset(void **state) {
    (void)state;
    env_t e;
    env_open(&e);
    ordo_mem_resource_t *budget = NULL, *stats = NULL;
    assert_ok(ordo_mem_budget_create(e.direct, NULL, &budget));
    assert_ok(ordo_mem_statistics_create(budget, &stats));
    peak_race_t r = {.top = stats,
                     .stream = e.s[0],
                     .go = test_signal_make(0),
                     .release = test_signal_make(0),
                     .allocated = test_signal_make(0),
                     .freed = test_signal_make(0),
                     .deadline = test_deadline()};
    pthread_t worker = test_thread_start(peak_race_worker, &r);
    uint64_t rounds = test_scaled(20000), done = 0, below = 0;
    const uint64_t soak_until = ordo_time_now_ns() + (uint64_t)TEST_WAIT_MS * 500000u;
    int stalled = 0;
    for (uint64_t k = 1; k <= rounds && ordo_time_now_ns() < soak_until; ++k) {
        assert_ok(ordo_signal_advance(r.go, k));
        /* Resets race with the allocation until it is over. */
        for (unsigned n = 1; signal_value(r.allocated) < k && ordo_time_now_ns() < r.deadline &&
                             !atomic_load(&r.failures);
             ++n) {
            assert_ok(ordo_mem_statistics_reset_peak(stats));
            assert_ok(ordo_mem_budget_reset_peak(e.device));
            if (n % PEAK_RACE_BURST == 0) {
                (void)ordo_signal_wait(r.allocated, k, ordo_deadline_after_ns(100000));
            }
        }
        if (signal_value(r.allocated) < k) {
            stalled = 1;
            break;
        }
        ordo_mem_statistics_t st;
        ordo_mem_budget_stats_t bs;
        assert_ok(ordo_mem_statistics_get(stats, &st));
        assert_ok(ordo_mem_budget_stats(e.device, &bs));
        below += st.overall.peak_bytes < st.overall.current_bytes ||
                 st.overall.peak_blocks < st.overall.current_blocks ||
                 st.tags[5].peak_bytes < st.tags[5].current_bytes || bs.peak_charged < bs.charged;
        assert_ok(ordo_signal_advance(r.release, k));
        if (ordo_signal_wait(r.freed, k, r.deadline) != ORDO_OK) {
            stalled = 1;
            break;
        }
        done = k;
    }
    atomic_store(&r.stop, 1);
    assert_ok(ordo_signal_advance(r.go, rounds + 1));
    assert_ok(ordo_signal_advance(r.release, rounds + 1)); /* a worker stopped mid-round */
    pthread_join(worker, NULL);
    assert_int_equal(atomic_load(&r.failures), 0);
    assert_int_equal(stalled, 0);
    assert_true(done >= rounds / 10);
    assert_int_equal(below, 0);
    ordo_signal_t *signals[] = {r.go, r.release, r.allocated, r.freed};
    for (size_t i = 0; i < 4; ++i) {
        assert_ok(ordo_signal_destroy(signals[i]));
    }
    /* The last free is ordered on the stream: the budget takes its charge
     * back (and may be destroyed) once the stream has run it. */
    assert_ok(ordo_mem_reap_pending(stats, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(stats));
    assert_ok(ordo_mem_resource_destroy(budget));
    env_close(&e);
}

static void stacked_adaptors_stay_exact_under_concurrency(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    const uint64_t limit = 96 * 1024;
    assert_ok(ordo_mem_budget_set_limit(e.device, limit));
    ordo_mem_budget_config_t quick = {.reap_wait_ns = 1000000ull};
    for (int order = 0; order < 2; ++order) {
        FILE *file = tmpfile();
        assert_non_null(file);
        collected_t c;
        memset(&c, 0, sizeof c);
        pthread_mutex_init(&c.lock, NULL);
        ordo_mem_guard_config_t gc;
        assert_ok(ordo_mem_guard_config_default(&gc));
        gc.report = collect;
        gc.report_user = &c;
        gc.quarantine_blocks = 8;
        ordo_mem_resource_t *budget = NULL, *logging = NULL, *stats = NULL, *guard = NULL;
        ordo_mem_resource_t *top = NULL;
        if (order == 0) { /* guard -> stats -> logging -> budget -> direct */
            assert_ok(ordo_mem_budget_create(e.direct, &quick, &budget));
            assert_ok(ordo_mem_logging_create(budget, file, &logging));
            assert_ok(ordo_mem_statistics_create(logging, &stats));
            assert_ok(ordo_mem_guard_create(stats, &gc, &guard));
            top = guard;
        } else { /* budget -> logging -> stats -> guard -> direct */
            assert_ok(ordo_mem_guard_create(e.direct, &gc, &guard));
            assert_ok(ordo_mem_statistics_create(guard, &stats));
            assert_ok(ordo_mem_logging_create(stats, file, &logging));
            assert_ok(ordo_mem_budget_create(logging, &quick, &budget));
            top = budget;
        }
        assert_ok(ordo_mem_budget_reset_peak(e.device));
        uint64_t refused = 0;
        run_workers(&e, top, stats, order == 0 ? guard : NULL, test_scaled(12000), 4096, &refused);
        ordo_mem_budget_stats_t bs;
        assert_ok(ordo_mem_budget_stats(e.device, &bs));
        /* Never above the limit, and the limit was reached. */
        assert_true(bs.peak_charged <= limit);
        assert_true(refused > 0);
        assert_int_equal(bs.refused >= refused, 1);
        ordo_mem_statistics_t st;
        assert_ok(ordo_mem_statistics_get(stats, &st));
        assert_true(st.overall.peak_bytes <= limit);
        /* The guard found nothing, and once drained, nothing is held. */
        assert_int_equal(guard_report(guard).total, 0);
        assert_int_equal(collected_count(&c), 0);
        assert_ok(ordo_mem_guard_drain(guard));
        assert_int_equal(outstanding(top), 0);
        assert_int_equal(outstanding(e.direct), 0);
        assert_ok(ordo_mem_budget_stats(e.device, &bs));
        assert_int_equal(bs.charged, 0);
        /* The log replays to the same end. */
        log_records_t log;
        log_parse(file, &log);
        ordo_mem_resource_t *fresh = NULL;
        assert_ok(ordo_mem_direct_create(e.device, &fresh));
        assert_int_equal(log_replay(&log, fresh, e.s), 0);
        assert_ok(ordo_mem_resource_destroy(fresh));
        free(log.items);
        ordo_mem_resource_t *down[4] = {guard, stats, logging, budget};
        for (int i = 0; i < 4; ++i) {
            assert_ok(ordo_mem_resource_destroy(down[order == 0 ? i : 3 - i]));
        }
        fclose(file);
        pthread_mutex_destroy(&c.lock);
    }
    assert_ok(ordo_mem_budget_set_limit(e.device, ORDO_MEM_BUDGET_UNLIMITED));
    env_close(&e);
}

/* A guard's ORDO_ERR_CORRUPTED from a deallocation means the block was
 * freed (its handle ended) and the canaries were found overwritten. The
 * adaptors above count it freed: statistics go back to zero, the budget's
 * charge drops, and each can be destroyed. Before, they restored their
 * counts as for a refused free and kept the block for ever. */
static void adaptors_above_a_guard_count_a_corrupted_block_freed(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    FILE *log_file = tmpfile();
    assert_non_null(log_file);
    ordo_mem_resource_t *guard, *budget, *stats, *logging;
    assert_ok(ordo_mem_guard_create(e.direct, NULL, &guard));
    assert_ok(ordo_mem_budget_create(guard, NULL, &budget));
    assert_ok(ordo_mem_statistics_create(budget, &stats));
    assert_ok(ordo_mem_logging_create(stats, log_file, &logging));
    ordo_mem_budget_stats_t before;
    assert_ok(ordo_mem_budget_stats(e.device, &before));
    for (int i = 0; i < 2; ++i) {
        ordo_block_t *block;
        unsigned char *p = alloc_ok(logging, 100, e.s[i], 3, &block);
        p[100] = 0; /* one byte past the end: the rear canary */
        assert_status(ordo_mem_deallocate(logging, block, e.s[i]), ORDO_ERR_CORRUPTED);
        assert_contains(ordo_error_message(), "ordo_mem_deallocate: ");
        ordo_mem_statistics_t st;
        assert_ok(ordo_mem_statistics_get(stats, &st));
        assert_int_equal(st.overall.current_blocks, 0);
        assert_int_equal(st.tags[3].current_bytes, 0);
        /* A retry is a double free, refused. */
        assert_int_not_equal(ordo_mem_deallocate(logging, block, e.s[i]), ORDO_OK);
    }
    assert_ok(ordo_mem_reap_pending(logging, test_deadline()));
    ordo_mem_budget_stats_t after;
    assert_ok(ordo_mem_budget_stats(e.device, &after));
    assert_int_equal(after.charged, before.charged);
    assert_ok(ordo_mem_resource_destroy(logging));
    assert_ok(ordo_mem_resource_destroy(stats));
    assert_ok(ordo_mem_resource_destroy(budget));
    ordo_status_t checked = ordo_mem_resource_destroy(guard);
    assert_true(checked == ORDO_OK || checked == ORDO_ERR_CORRUPTED);
    if (checked != ORDO_OK) {
        assert_ok(ordo_mem_resource_destroy(guard)); /* findings reported once */
    }
    /* Its log replays to the same end: both blocks freed. */
    log_records_t log;
    log_parse(log_file, &log);
    ordo_mem_resource_t *fresh = NULL;
    assert_ok(ordo_mem_direct_create(e.device, &fresh));
    assert_int_equal(log_replay(&log, fresh, e.s), 0);
    assert_ok(ordo_mem_resource_destroy(fresh));
    free(log.items);
    fclose(log_file);
    env_close(&e);
}

/* A request of exactly ORDO_MEM_MAX_BYTES is within the range every
 * resource accepts; a guard (its canaries) or a pool (its rounding) that
 * cannot satisfy it says out of memory. Above the maximum: out of range. */
static void a_request_at_the_maximum_is_out_of_memory(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    env_t e;
    env_open(&e);
    ordo_mem_resource_t *guard;
    assert_ok(ordo_mem_guard_create(e.direct, NULL, &guard));
    ordo_block_t *block = NULL;
    assert_status(ordo_mem_allocate(guard, ORDO_MEM_MAX_BYTES, 0, e.s[0], 0, &block, NULL),
                  ORDO_ERR_OUT_OF_MEMORY);
    assert_contains(ordo_error_message(), "ordo_mem_allocate: ");
    assert_null(block);
    assert_status(ordo_mem_allocate(guard, ORDO_MEM_MAX_BYTES + 1, 0, e.s[0], 0, &block, NULL),
                  ORDO_ERR_OUT_OF_RANGE);
    assert_ok(ordo_mem_resource_destroy(guard));
    env_close(&e);
}

/* ---- bad input: memory_adaptors.h (tests/refusal.h) */

static void adaptor_entry_points_refuse_bad_input(void **state) {
    (void)state;
    REFUSAL_ON_CPU_ONLY(test_device_name());
    refusal_fixture_t f;
    refusal_fixture_make(&f);
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
    ordo_mem_budget_config_t budget_config;
    assert_ok(ordo_mem_budget_config_default(&budget_config));
    budget_config.reap_wait_ns = ORDO_MEM_BUDGET_REAP_WAIT_MAX_NS + 1;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, r, ordo_mem_budget_create, direct, &budget_config, &r);
    budget_config.reap_wait_ns = UINT64_MAX;
    REFUSED_CLEARS(ORDO_ERR_OUT_OF_RANGE, r, ordo_mem_budget_create, direct, &budget_config, &r);
    assert_contains(ordo_error_message(), "reap_wait_ns 18446744073709551615");
    budget_config.reap_wait_ns = ORDO_MEM_BUDGET_REAP_WAIT_MAX_NS;
    assert_ok(ordo_mem_budget_create(direct, &budget_config, &r));
    assert_ok(ordo_mem_resource_destroy(r));

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
    refusal_fixture_free(&f);
}

int main(void) {
    test_conformance_begin("memory-adaptors");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(adaptors_refuse_bad_input),
        cmocka_unit_test(destroy_waits_for_blocks_and_dependents),
        cmocka_unit_test(destroyed_upstream_and_failed_allocations),
        cmocka_unit_test(budget_charges_and_explains_refusals),
        cmocka_unit_test(budget_is_per_device),
        cmocka_unit_test(statistics_count_per_tag),
        cmocka_unit_test(peaks_survive_a_racing_reset),
        cmocka_unit_test(logging_writes_whole_lines_and_replays),
        cmocka_unit_test(logging_survives_a_reader_that_went_away),
        cmocka_unit_test(logging_survives_the_file_size_limit),
        cmocka_unit_test(logging_refuses_a_fifo_nobody_reads),
        cmocka_unit_test(guard_fills_poisons_and_forwards),
        cmocka_unit_test(guard_catches_overflow),
        cmocka_unit_test(guard_catches_underflow),
        cmocka_unit_test(guard_catches_double_free),
        cmocka_unit_test(guard_catches_foreign_free),
        cmocka_unit_test(guard_catches_use_after_free),
        cmocka_unit_test(guard_catches_use_after_free_at_eviction),
        cmocka_unit_test(guard_over_a_use_tracking_upstream),
        cmocka_unit_test(guard_over_a_pool_releases_on_the_program_side),
        cmocka_unit_test(guard_over_a_pool_poisons_after_every_use),
        cmocka_unit_test(frees_on_failed_streams_from_many_threads),
        cmocka_unit_test(stacked_adaptors_stay_exact_under_concurrency),
        cmocka_unit_test(adaptors_above_a_guard_count_a_corrupted_block_freed),
        cmocka_unit_test(a_request_at_the_maximum_is_out_of_memory),
        cmocka_unit_test(adaptor_entry_points_refuse_bad_input),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
