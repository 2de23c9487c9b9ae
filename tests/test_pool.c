/* The stream-ordered pool through the public API: reuse decided from
 * frontiers, splitting and coalescing, trimming, use tracking, failed
 * freeing streams, bad input, and a randomized cross-stream test with real
 * data that counts every block handed out while another stream could still
 * touch it. Its layout under the census is test_pool_carve.c's. */
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

typedef struct pool_fixture {
    ordo_tracker_t *tracker;
    ordo_mem_resource_t *direct;
    ordo_mem_resource_t *pool;
    ordo_stream_t *s[4];
} pool_fixture_t;

static void pool_fixture_make(pool_fixture_t *f, ordo_mem_reuse_policy_t policy,
                              size_t chunk_bytes) {
    memset(f, 0, sizeof *f);
    assert_ok(ordo_tracker_create(device, &f->tracker));
    assert_ok(ordo_mem_direct_create(device, &f->direct));
    ordo_mem_pool_config_t config;
    assert_ok(ordo_mem_pool_config_default(&config));
    config.reuse = policy;
    if (chunk_bytes) {
        config.chunk_bytes = chunk_bytes;
    }
    assert_ok(ordo_mem_pool_create(f->tracker, f->direct, &config, &f->pool));
    for (int i = 0; i < 4; ++i) {
        f->s[i] = stream_make();
    }
}

static void pool_fixture_free(pool_fixture_t *f) {
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_stream_synchronize(f->s[i], test_deadline()));
    }
    assert_ok(ordo_mem_reap_pending(f->pool, test_deadline()));
    uint64_t out = 1;
    assert_ok(ordo_mem_bytes_outstanding(f->pool, &out));
    assert_int_equal(out, 0);
    assert_ok(ordo_mem_resource_destroy(f->pool));
    assert_ok(ordo_mem_reap_pending(f->direct, test_deadline()));
    assert_ok(ordo_mem_bytes_outstanding(f->direct, &out));
    assert_int_equal(out, 0);
    assert_ok(ordo_mem_resource_destroy(f->direct));
    assert_ok(ordo_tracker_destroy(f->tracker)); /* before its streams */
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_stream_destroy(f->s[i]));
    }
}

static void pool_reuses_on_the_freeing_stream_at_once(void **state) {
    (void)state;
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_WAIT, 0);
    ordo_block_t *a = NULL, *b = NULL;
    void *pa = NULL, *pb = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 4096, 0, f.s[0], 1, &a, &pa));
    assert_ok(ordo_mem_deallocate(f.pool, a, f.s[0]));
    assert_ok(ordo_mem_allocate(f.pool, 4096, 0, f.s[0], 1, &b, &pb));
    assert_ptr_equal(pa, pb);
    ordo_mem_pool_stats_t stats;
    assert_ok(ordo_mem_pool_stats(f.pool, &stats));
    assert_int_equal(stats.reuses_same_stream, 1);
    assert_int_equal(stats.grows, 1);
    assert_ok(ordo_mem_deallocate(f.pool, b, f.s[0]));
    pool_fixture_free(&f);
}

static void pool_cross_stream_reuse_follows_frontiers(void **state) {
    (void)state;
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_WAIT, 0);
    ordo_tracker_metrics_t m0, m1;
    ordo_block_t *a = NULL, *b = NULL;
    void *pa = NULL, *pb = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 8192, 0, f.s[0], 0, &a, &pa));
    assert_ok(ordo_mem_deallocate(f.pool, a, f.s[0]));
    /* s1 never waited for s0: reuse needs a device wait. */
    assert_ok(ordo_tracker_metrics(f.tracker, &m0));
    assert_ok(ordo_mem_allocate(f.pool, 8192, 0, f.s[1], 0, &b, &pb));
    assert_ptr_equal(pa, pb);
    assert_ok(ordo_tracker_metrics(f.tracker, &m1));
    assert_int_equal(m1.waits_emitted - m0.waits_emitted, 1);
    ordo_mem_pool_stats_t stats;
    assert_ok(ordo_mem_pool_stats(f.pool, &stats));
    assert_int_equal(stats.reuses_waited, 1);

    /* Freed on s1, reused on s2 after s2 waited for s1 (through a use):
     * known, no new wait. */
    ordo_buffer_t *buffer = NULL;
    assert_ok(ordo_block_buffer(b, &buffer));
    assert_ok(ordo_mem_prepare_use(f.pool, b, f.s[2], ORDO_ACCESS_READ));
    assert_ok(ordo_mem_finish_use(f.pool, b, f.s[2], ORDO_ACCESS_READ));
    assert_ok(ordo_mem_deallocate(f.pool, b, f.s[2]));
    ordo_block_t *c = NULL;
    void *pc = NULL;
    assert_ok(ordo_tracker_metrics(f.tracker, &m0));
    assert_ok(ordo_mem_allocate(f.pool, 8192, 0, f.s[2], 0, &c, &pc));
    assert_ptr_equal(pc, pa);
    assert_ok(ordo_tracker_metrics(f.tracker, &m1));
    assert_int_equal(m1.waits_emitted, m0.waits_emitted);
    assert_ok(ordo_mem_deallocate(f.pool, c, f.s[2]));
    pool_fixture_free(&f);
}

/* A block held by ordo_mem_prepare_use until its ordo_mem_finish_use
 * (ordo/tracker.h's split form, on the block's buffer): its free is
 * refused meanwhile (its memory could be handed out
 * again before the use it prepared has run), and so is a second prepare;
 * after the finish the free is accepted. */
static void pool_block_prepared_for_a_use_is_not_freed(void **state) {
    (void)state;
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_WAIT, 0);
    ordo_block_t *b = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 4096, 0, f.s[0], 0, &b, NULL));
    assert_ok(ordo_mem_prepare_use(f.pool, b, f.s[1], ORDO_ACCESS_WRITE));
    assert_status(ordo_mem_deallocate(f.pool, b, f.s[1]), ORDO_ERR_BUSY);
    assert_non_null(strstr(ordo_error_message(), "ordo_mem_deallocate"));
    assert_status(ordo_mem_prepare_use(f.pool, b, f.s[2], ORDO_ACCESS_READ), ORDO_ERR_BUSY);
    ordo_buffer_t *buffer = NULL; /* the pool's own: its release is refused for that first */
    assert_ok(ordo_block_buffer(b, &buffer));
    assert_status(ordo_buffer_release(buffer, NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_finish_use(f.pool, b, f.s[2], ORDO_ACCESS_WRITE),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_mem_finish_use(f.pool, b, f.s[1], ORDO_ACCESS_WRITE));
    assert_ok(ordo_mem_deallocate(f.pool, b, f.s[1]));
    pool_fixture_free(&f);
}

static void pool_other_block_policy_does_not_wait(void **state) {
    (void)state;
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_OTHER_BLOCK, 64 * 1024);
    ordo_block_t *a = NULL, *b = NULL;
    void *pa = NULL, *pb = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 64 * 1024, 0, f.s[0], 0, &a, &pa));
    assert_ok(ordo_mem_deallocate(f.pool, a, f.s[0]));
    ordo_tracker_metrics_t m0, m1;
    assert_ok(ordo_tracker_metrics(f.tracker, &m0));
    assert_ok(ordo_mem_allocate(f.pool, 64 * 1024, 0, f.s[1], 0, &b, &pb));
    assert_ok(ordo_tracker_metrics(f.tracker, &m1));
    assert_ptr_not_equal(pa, pb);
    assert_int_equal(m1.waits_emitted, m0.waits_emitted);
    ordo_mem_pool_stats_t stats;
    assert_ok(ordo_mem_pool_stats(f.pool, &stats));
    assert_int_equal(stats.blocks_skipped, 1);
    assert_int_equal(stats.grows, 2);
    assert_ok(ordo_mem_deallocate(f.pool, b, f.s[1]));
    /* Once settled (reaped), the first block is anyone's. */
    assert_ok(ordo_mem_reap_pending(f.pool, test_deadline()));
    assert_ok(ordo_mem_allocate(f.pool, 64 * 1024, 0, f.s[3], 0, &a, &pa));
    assert_ok(ordo_mem_pool_stats(f.pool, &stats));
    assert_int_equal(stats.grows, 2);
    assert_ok(ordo_mem_deallocate(f.pool, a, f.s[3]));
    pool_fixture_free(&f);
}

static void pool_splits_coalesces_and_trims(void **state) {
    (void)state;
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_WAIT, 1 << 20);
    ordo_block_t *blocks[8];
    void *ptrs[8];
    for (int i = 0; i < 8; ++i) {
        assert_ok(ordo_mem_allocate(f.pool, 100 * 1024, 0, f.s[0], 0, &blocks[i], &ptrs[i]));
    }
    ordo_mem_pool_stats_t stats;
    assert_ok(ordo_mem_pool_stats(f.pool, &stats));
    assert_int_equal(stats.chunks, 1);
    assert_true(stats.splits >= 7);
    for (int i = 0; i < 8; ++i) {
        assert_ok(ordo_mem_deallocate(f.pool, blocks[i], f.s[0]));
    }
    /* Everything merged back: one block of the whole chunk, which covers
     * every block it was cut into. */
    ordo_block_t *big = NULL;
    void *pbig = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 1 << 20, 0, f.s[0], 0, &big, &pbig));
    for (int i = 0; i < 8; ++i) {
        assert_true((char *)ptrs[i] >= (char *)pbig);
        assert_true((char *)ptrs[i] + 100 * 1024 <= (char *)pbig + (1 << 20));
    }
    assert_ok(ordo_mem_pool_stats(f.pool, &stats));
    assert_int_equal(stats.chunks, 1);
    assert_ok(ordo_mem_deallocate(f.pool, big, f.s[0]));
    assert_ok(ordo_stream_synchronize(f.s[0], test_deadline()));
    assert_ok(ordo_mem_reap_pending(f.pool, test_deadline()));
    assert_ok(ordo_mem_pool_trim(f.pool, 0));
    assert_ok(ordo_mem_pool_stats(f.pool, &stats));
    assert_int_equal(stats.bytes_reserved, 0);
    assert_int_equal(stats.trims, 1);
    pool_fixture_free(&f);
}

static void pool_release_threshold_gives_memory_back(void **state) {
    (void)state;
    pool_fixture_t f;
    memset(&f, 0, sizeof f);
    assert_ok(ordo_tracker_create(device, &f.tracker));
    assert_ok(ordo_mem_direct_create(device, &f.direct));
    ordo_mem_pool_config_t config;
    assert_ok(ordo_mem_pool_config_default(&config));
    config.chunk_bytes = 256 * 1024;
    config.release_threshold = 256 * 1024;
    assert_ok(ordo_mem_pool_create(f.tracker, f.direct, &config, &f.pool));
    for (int i = 0; i < 4; ++i) {
        f.s[i] = stream_make();
    }
    ordo_block_t *blocks[4];
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_mem_allocate(f.pool, 256 * 1024, 0, f.s[i], 0, &blocks[i], NULL));
    }
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_mem_deallocate(f.pool, blocks[i], f.s[i]));
    }
    assert_ok(ordo_mem_reap_pending(f.pool, test_deadline()));
    ordo_mem_pool_stats_t stats;
    assert_ok(ordo_mem_pool_stats(f.pool, &stats));
    assert_int_equal(stats.bytes_reserved, 256 * 1024);
    pool_fixture_free(&f);
}

/* A release threshold near the top of the range keeps everything: the
 * bytes to keep saturate instead of wrapping around. */
static void pool_huge_release_threshold_keeps_memory(void **state) {
    (void)state;
    pool_fixture_t f;
    memset(&f, 0, sizeof f);
    assert_ok(ordo_tracker_create(device, &f.tracker));
    assert_ok(ordo_mem_direct_create(device, &f.direct));
    ordo_mem_pool_config_t config;
    assert_ok(ordo_mem_pool_config_default(&config));
    config.chunk_bytes = 256 * 1024;
    config.release_threshold = UINT64_MAX - 1;
    assert_ok(ordo_mem_pool_create(f.tracker, f.direct, &config, &f.pool));
    for (int i = 0; i < 4; ++i) {
        f.s[i] = stream_make();
    }
    ordo_block_t *a = NULL, *b = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 256 * 1024, 0, f.s[0], 0, &a, NULL));
    assert_ok(ordo_mem_allocate(f.pool, 256 * 1024, 0, f.s[0], 0, &b, NULL));
    assert_ok(ordo_mem_deallocate(f.pool, a, f.s[0]));
    assert_ok(ordo_stream_synchronize(f.s[0], test_deadline()));
    assert_ok(ordo_mem_reap_pending(f.pool, test_deadline()));
    ordo_mem_pool_stats_t stats;
    assert_ok(ordo_mem_pool_stats(f.pool, &stats));
    assert_int_equal(stats.trims, 0);
    assert_int_equal(stats.bytes_reserved, 512 * 1024);
    assert_ok(ordo_mem_deallocate(f.pool, b, f.s[0]));
    pool_fixture_free(&f);
}

/* A pool over another pool gives its chunks back (trim, destroy) with no
 * stream: the upstream pool takes them as settled frees. */
static void pool_over_pool_gives_chunks_back(void **state) {
    (void)state;
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_WAIT, 0);
    ordo_mem_pool_config_t config;
    assert_ok(ordo_mem_pool_config_default(&config));
    config.chunk_bytes = 64 * 1024;
    ordo_mem_resource_t *outer = NULL;
    assert_ok(ordo_mem_pool_create(f.tracker, f.pool, &config, &outer));
    ordo_block_t *a = NULL, *b = NULL;
    assert_ok(ordo_mem_allocate(outer, 64 * 1024, 0, f.s[0], 0, &a, NULL));
    assert_ok(ordo_mem_allocate(outer, 64 * 1024, 0, f.s[1], 0, &b, NULL));
    uint64_t out = 0;
    assert_ok(ordo_mem_bytes_outstanding(f.pool, &out));
    assert_int_equal(out, 128 * 1024);
    assert_ok(ordo_mem_deallocate(outer, a, f.s[0]));
    assert_ok(ordo_mem_deallocate(outer, b, f.s[1]));
    assert_ok(ordo_stream_synchronize(f.s[0], test_deadline()));
    assert_ok(ordo_stream_synchronize(f.s[1], test_deadline()));
    assert_ok(ordo_mem_reap_pending(outer, test_deadline()));
    /* Trimming one chunk gives it back to the inner pool. */
    assert_ok(ordo_mem_pool_trim(outer, 64 * 1024));
    ordo_mem_pool_stats_t stats;
    assert_ok(ordo_mem_pool_stats(outer, &stats));
    assert_int_equal(stats.trims, 1);
    assert_ok(ordo_mem_bytes_outstanding(f.pool, &out));
    assert_int_equal(out, 64 * 1024);
    assert_ok(ordo_mem_pool_stats(f.pool, &stats));
    assert_int_equal(stats.bytes_in_use, 64 * 1024);
    /* Destroying the outer pool gives back the rest. */
    assert_ok(ordo_mem_resource_destroy(outer));
    assert_ok(ordo_mem_bytes_outstanding(f.pool, &out));
    assert_int_equal(out, 0);
    assert_ok(ordo_mem_pool_stats(f.pool, &stats));
    assert_int_equal(stats.bytes_in_use, 0);
    pool_fixture_free(&f);
}

typedef struct fill {
    uint32_t *words;
    size_t count;
    uint32_t value;
    _Atomic int *errors;
} fill_t;

static ordo_status_t fill_task(void *ctx) {
    fill_t *f = ctx;
    test_sleep_ms(2);
    for (size_t i = 0; i < f->count; ++i) {
        f->words[i] = f->value;
    }
    return ORDO_OK;
}

static ordo_status_t check_task(void *ctx) {
    fill_t *f = ctx;
    for (size_t i = 0; i < f->count; ++i) {
        if (f->words[i] != f->value) {
            atomic_fetch_add(f->errors, 1);
            break;
        }
    }
    return ORDO_OK;
}

static void pool_use_tracking_orders_real_data(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_WAIT, 0);
    _Atomic int errors = 0;
    ordo_block_t *block = NULL;
    uint32_t *words = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 4096, 0, f.s[0], 0, &block, (void **)&words));
    bool supported = 0;
    assert_ok(ordo_mem_supports_use_tracking(f.pool, &supported));
    assert_int_equal(supported, 1);
    fill_t write = {words, 1024, 7, &errors};
    fill_t read = {words, 1024, 7, &errors};
    /* Written on s1 (slowly), read on s2: the read must wait. */
    assert_ok(ordo_mem_prepare_use(f.pool, block, f.s[1], ORDO_ACCESS_WRITE));
    assert_ok(ordo_stream_host_task(f.s[1], fill_task, &write));
    assert_ok(ordo_mem_finish_use(f.pool, block, f.s[1], ORDO_ACCESS_WRITE));
    assert_ok(ordo_mem_prepare_use(f.pool, block, f.s[2], ORDO_ACCESS_READ));
    assert_ok(ordo_stream_host_task(f.s[2], check_task, &read));
    assert_ok(ordo_mem_finish_use(f.pool, block, f.s[2], ORDO_ACCESS_READ));
    /* Freed on s0 while s1 and s2 may still run: a reuse on s3 waits. */
    assert_ok(ordo_mem_deallocate(f.pool, block, f.s[0]));
    ordo_block_t *again = NULL;
    uint32_t *words2 = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 4096, 0, f.s[3], 0, &again, (void **)&words2));
    assert_ptr_equal(words2, words);
    fill_t clobber = {words2, 1024, 9, &errors};
    assert_ok(ordo_stream_host_task(f.s[3], fill_task, &clobber));
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_stream_synchronize(f.s[i], test_deadline()));
    }
    assert_int_equal(atomic_load(&errors), 0);
    assert_int_equal(words2[0], 9);
    /* The block's buffer works in an access list, and is not released
     * through the tracker. */
    ordo_buffer_t *buffer = NULL;
    assert_ok(ordo_block_buffer(again, &buffer));
    assert_status(ordo_buffer_release(buffer, NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_mem_record_use(f.pool, again, f.s[1]));
    assert_ok(ordo_mem_deallocate(f.pool, again, f.s[3]));
    /* A freed block's buffer is refused by the tracker. */
    ordo_access_t access = {buffer, ORDO_ACCESS_READ};
    assert_status(ordo_tracker_prepare(f.tracker, f.s[0], &access, 1), ORDO_ERR_DESTROYED);
    pool_fixture_free(&f);
}

/* A block reused on s0 after a device wait for its old user on s1, then
 * written on s2: s2 learns the old use through s0's allocation (a write
 * by s0), so its write lands after s1's slow one. */
static void reuse_orders_third_streams_after_old_uses(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_WAIT, 0);
    _Atomic int errors = 0;
    ordo_block_t *block = NULL;
    uint32_t *words = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 4096, 0, f.s[1], 0, &block, (void **)&words));
    ordo_signal_t *gate = test_signal_make(0);
    assert_ok(ordo_stream_host_task(f.s[1], wait_signal_task, gate));
    fill_t old_write = {words, 1024, 1, &errors};
    assert_ok(ordo_mem_prepare_use(f.pool, block, f.s[1], ORDO_ACCESS_WRITE));
    assert_ok(ordo_stream_host_task(f.s[1], fill_task, &old_write));
    assert_ok(ordo_mem_finish_use(f.pool, block, f.s[1], ORDO_ACCESS_WRITE));
    assert_ok(ordo_mem_deallocate(f.pool, block, f.s[1]));

    ordo_block_t *again = NULL;
    uint32_t *words2 = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 4096, 0, f.s[0], 0, &again, (void **)&words2));
    assert_ptr_equal(words2, words);
    fill_t new_write = {words2, 1024, 2, &errors};
    assert_ok(ordo_mem_prepare_use(f.pool, again, f.s[2], ORDO_ACCESS_WRITE));
    assert_ok(ordo_stream_host_task(f.s[2], fill_task, &new_write));
    assert_ok(ordo_mem_finish_use(f.pool, again, f.s[2], ORDO_ACCESS_WRITE));
    /* s2 is held behind s1's old write, which is held by the gate. */
    test_sleep_ms(20);
    assert_int_equal(words2[0] == 2, 0);
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_stream_synchronize(f.s[2], test_deadline()));
    assert_int_equal(words2[0], 2);
    assert_int_equal(words2[1023], 2);
    assert_int_equal(atomic_load(&errors), 0);
    assert_ok(ordo_mem_deallocate(f.pool, again, f.s[2]));
    assert_ok(ordo_signal_release(gate));
    pool_fixture_free(&f);
}

/* --- A failed stream vouches for nothing it waited for --- */

static ordo_status_t fail_after_gate_task(void *ctx) {
    (void)ordo_signal_wait(ctx, 1, test_deadline());
    return ORDO_ERR_ABORTED;
}

/* Like pool_fixture_free, for fixtures whose stream `failed` has failed. */
static void pool_fixture_free_failed(pool_fixture_t *f, int failed) {
    for (int i = 0; i < 4; ++i) {
        ordo_status_t st = ordo_stream_synchronize(f->s[i], test_deadline());
        assert_int_not_equal(st, ORDO_ERR_TIMEOUT);
        if (i != failed) {
            assert_ok(st);
        }
    }
    assert_ok(ordo_mem_reap_pending(f->pool, test_deadline()));
    uint64_t out = 1;
    assert_ok(ordo_mem_bytes_outstanding(f->pool, &out));
    assert_int_equal(out, 0);
    assert_ok(ordo_mem_resource_destroy(f->pool));
    assert_ok(ordo_mem_reap_pending(f->direct, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(f->direct));
    assert_ok(ordo_tracker_destroy(f->tracker)); /* before its streams */
    for (int i = 0; i < 4; ++i) {
        assert_ok(ordo_stream_destroy(f->s[i]));
    }
}

/* A block (one whole chunk) born on s3, written slowly on s1 (held by
 * gate), read on s0 (so s0 waits for the write: the write is left out of
 * the death frontier, s0's free point stands for it), freed on s0, and then
 * s0 fails before reaching its wait. Returns the block's words. */
static uint32_t *free_on_stream_that_fails(pool_fixture_t *f, ordo_signal_t *gate,
                                           ordo_signal_t *fail_gate, fill_t *old_write) {
    ordo_block_t *block = NULL;
    uint32_t *words = NULL;
    assert_ok(ordo_mem_allocate(f->pool, 4096, 0, f->s[3], 0, &block, (void **)&words));
    assert_ok(ordo_stream_host_task(f->s[1], wait_signal_task, gate));
    old_write->words = words;
    assert_ok(ordo_mem_prepare_use(f->pool, block, f->s[1], ORDO_ACCESS_WRITE));
    assert_ok(ordo_stream_host_task(f->s[1], fill_task, old_write));
    assert_ok(ordo_mem_finish_use(f->pool, block, f->s[1], ORDO_ACCESS_WRITE));
    assert_ok(ordo_stream_host_task(f->s[0], fail_after_gate_task, fail_gate));
    assert_ok(ordo_mem_prepare_use(f->pool, block, f->s[0], ORDO_ACCESS_READ));
    assert_ok(ordo_mem_finish_use(f->pool, block, f->s[0], ORDO_ACCESS_READ));
    assert_ok(ordo_mem_deallocate(f->pool, block, f->s[0]));
    assert_ok(ordo_signal_advance(fail_gate, 1));
    ordo_status_t st = ordo_stream_synchronize(f->s[0], test_deadline());
    assert_int_not_equal(st, ORDO_OK);
    assert_int_not_equal(st, ORDO_ERR_TIMEOUT);
    return words;
}

/* Inside a launch function of ordo_tracker_submit, the submission's use
 * of a block is recorded only after the launch: a free of that block
 * there handed its memory out again under the pending use (and the
 * finish then wrote the freed block's history), and a prepare of it went
 * unordered against it. Both are refused; a scratch block the launch
 * allocates, uses and frees is not. */
typedef struct launch_frees {
    pool_fixture_t *f;
    ordo_block_t *named;
    ordo_status_t freed_named, prepared_named, scratch;
    char message[320];
} launch_frees_t;

static ordo_status_t launch_frees_blocks(void *ctx, ordo_stream_t *stream) {
    launch_frees_t *l = ctx;
    l->freed_named = ordo_mem_deallocate(l->f->pool, l->named, stream);
    snprintf(l->message, sizeof l->message, "%s", ordo_error_message());
    l->prepared_named = ordo_mem_prepare_use(l->f->pool, l->named, stream, ORDO_ACCESS_READ);
    ordo_block_t *scratch = NULL;
    l->scratch = ordo_mem_allocate(l->f->pool, 512, 0, stream, 0, &scratch, NULL);
    if (l->scratch == ORDO_OK) {
        l->scratch = ordo_mem_prepare_use(l->f->pool, scratch, stream, ORDO_ACCESS_WRITE);
    }
    if (l->scratch == ORDO_OK) {
        l->scratch = ordo_mem_finish_use(l->f->pool, scratch, stream, ORDO_ACCESS_WRITE);
    }
    if (l->scratch == ORDO_OK) {
        l->scratch = ordo_mem_deallocate(l->f->pool, scratch, stream);
    }
    return ORDO_OK;
}

static void a_launch_function_cannot_free_a_block_its_submission_names(void **state) {
    (void)state;
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_OTHER_BLOCK, 4096);
    launch_frees_t l = {.f = &f};
    assert_ok(ordo_mem_allocate(f.pool, 256, 0, f.s[1], 0, &l.named, NULL));
    ordo_buffer_t *named = NULL;
    assert_ok(ordo_block_buffer(l.named, &named));
    ordo_access_t write = {named, ORDO_ACCESS_WRITE};
    assert_ok(ordo_tracker_submit(f.tracker, f.s[0], &write, 1, launch_frees_blocks, &l));
    assert_status(l.freed_named, ORDO_ERR_BUSY);
    assert_non_null(strstr(l.message, "ordo_mem_deallocate: block "));
    assert_non_null(strstr(l.message, "named by the ordo_tracker_submit whose launch function"));
    assert_status(l.prepared_named, ORDO_ERR_BUSY);
    assert_ok(l.scratch);
    /* Freed after the submission, on another stream: ordered after its use. */
    assert_ok(ordo_mem_deallocate(f.pool, l.named, f.s[1]));
    pool_fixture_free(&f);
}

/* A reap whose wait meets a stream that failed succeeds (the block is
 * settled) and leaves the caller's message alone. */
static void a_reap_that_meets_a_failed_stream_keeps_the_message(void **state) {
    (void)state;
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_OTHER_BLOCK, 4096);
    ordo_signal_t *fail_gate = test_signal_make(0);
    ordo_block_t *block = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 4096, 0, f.s[0], 0, &block, NULL));
    assert_ok(ordo_stream_host_task(f.s[0], fail_after_gate_task, fail_gate));
    assert_ok(ordo_mem_deallocate(f.pool, block, f.s[0]));
    (void)ordo_fail(ORDO_ERR_ABORTED, "the caller's own message");
    assert_ok(ordo_signal_advance(fail_gate, 1));
    assert_ok(ordo_mem_reap_pending(f.pool, test_deadline()));
    assert_string_equal(ordo_error_message(), "the caller's own message");
    uint64_t out = 1;
    assert_ok(ordo_mem_bytes_outstanding(f.pool, &out));
    assert_int_equal(out, 0);
    assert_ok(ordo_signal_release(fail_gate));
    pool_fixture_free_failed(&f, 0);
}

/* The reuse of a block freed on a stream that then failed is still
 * ordered after the uses that stream had waited for: its wait never ran. */
static void failed_freeing_stream_does_not_vouch_for_its_waits(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_WAIT, 4096);
    _Atomic int errors = 0;
    ordo_signal_t *gate = test_signal_make(0);
    ordo_signal_t *fail_gate = test_signal_make(0);
    fill_t old_write = {NULL, 1024, 1, &errors};
    uint32_t *words = free_on_stream_that_fails(&f, gate, fail_gate, &old_write);

    ordo_block_t *again = NULL;
    uint32_t *words2 = NULL;
    /* The allocation looks at the failed stream and succeeds: the thread's
     * message stays the caller's (ordo/status.h). */
    (void)ordo_fail(ORDO_ERR_ABORTED, "the caller's own message");
    assert_ok(ordo_mem_allocate(f.pool, 4096, 0, f.s[2], 0, &again, (void **)&words2));
    assert_string_equal(ordo_error_message(), "the caller's own message");
    assert_ptr_equal(words2, words);
    fill_t new_write = {words2, 1024, 2, &errors};
    assert_ok(ordo_stream_host_task(f.s[2], fill_task, &new_write));
    /* s2 must be held behind s1's old write (held by the gate). */
    (void)ordo_stream_synchronize(f.s[2], ordo_deadline_after_ms(50));
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_stream_synchronize(f.s[1], test_deadline()));
    assert_ok(ordo_stream_synchronize(f.s[2], test_deadline()));
    assert_int_equal(words2[0], 2);
    assert_int_equal(words2[1023], 2);
    assert_ok(ordo_mem_deallocate(f.pool, again, f.s[2]));
    assert_ok(ordo_signal_release(gate));
    assert_ok(ordo_signal_release(fail_gate));
    pool_fixture_free_failed(&f, 0);
}

/* Reaping does not settle such a block while the uses it stands for run. */
static void failed_freeing_stream_does_not_settle_its_waits(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_OTHER_BLOCK, 4096);
    _Atomic int errors = 0;
    ordo_signal_t *gate = test_signal_make(0);
    ordo_signal_t *fail_gate = test_signal_make(0);
    fill_t old_write = {NULL, 1024, 1, &errors};
    (void)free_on_stream_that_fails(&f, gate, fail_gate, &old_write);
    assert_status(ordo_mem_reap_pending(f.pool, ordo_deadline_after_ms(30)), ORDO_ERR_TIMEOUT);

    ordo_block_t *again = NULL;
    uint32_t *words2 = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 4096, 0, f.s[2], 0, &again, (void **)&words2));
    fill_t new_write = {words2, 1024, 2, &errors};
    assert_ok(ordo_stream_host_task(f.s[2], fill_task, &new_write));
    (void)ordo_stream_synchronize(f.s[2], ordo_deadline_after_ms(50));
    assert_ok(ordo_signal_advance(gate, 1));
    assert_ok(ordo_stream_synchronize(f.s[1], test_deadline()));
    assert_ok(ordo_stream_synchronize(f.s[2], test_deadline()));
    assert_int_equal(words2[0], 2);
    assert_int_equal(words2[1023], 2);
    /* Once the write is done, reaping settles the block. */
    assert_ok(ordo_mem_deallocate(f.pool, again, f.s[2]));
    assert_ok(ordo_signal_release(gate));
    assert_ok(ordo_signal_release(fail_gate));
    pool_fixture_free_failed(&f, 0);
}

/* Every entry point refuses a NULL handle or output, touching nothing. */
static void null_handles_and_outputs_are_refused(void **state) {
    (void)state;
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_WAIT, 0);
    ordo_mem_resource_t *r = NULL;
    assert_status(ordo_mem_direct_create(NULL, &r), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_direct_create(device, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_pool_create(NULL, f.direct, NULL, &r), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_pool_create(f.tracker, f.direct, NULL, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_pool_config_default(NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_pool_trim(NULL, 0), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_reap_pending(NULL, test_deadline()), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_bytes_outstanding(NULL, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_tracker_lock(NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_tracker_unlock(NULL), ORDO_ERR_INVALID_HANDLE);

    ordo_block_t *block = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 64, 0, f.s[0], 0, &block, NULL));
    ordo_block_info_t info;
    void *ptr = NULL;
    ordo_buffer_t *buffer = NULL;
    assert_status(ordo_block_info(NULL, &info), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_block_info(block, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_block_ptr(NULL, &ptr), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_block_ptr(block, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_block_buffer(NULL, &buffer), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_block_buffer(block, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_record_use(NULL, block, f.s[0]), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_record_use(f.pool, NULL, f.s[0]), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_record_use(f.pool, block, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_prepare_use(f.pool, NULL, f.s[0], ORDO_ACCESS_READ),
                  ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_finish_use(f.pool, block, NULL, ORDO_ACCESS_READ),
                  ORDO_ERR_INVALID_HANDLE);
    /* Nothing above changed the block: it frees normally. */
    assert_ok(ordo_mem_deallocate(f.pool, block, f.s[0]));
    pool_fixture_free(&f);
}

static void bad_input_is_refused(void **state) {
    (void)state;
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_WAIT, 0);
    ordo_block_t *block = NULL;
    void *ptr = NULL;
    ordo_stream_t *s = f.s[0];
    assert_status(ordo_mem_allocate(NULL, 64, 0, s, 0, &block, &ptr), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_allocate(f.pool, 0, 0, s, 0, &block, &ptr), ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "zero-byte"));
    assert_status(ordo_mem_allocate(f.pool, SIZE_MAX, 0, s, 0, &block, &ptr),
                  ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_mem_allocate(f.pool, 64, 3, s, 0, &block, &ptr), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_allocate(f.pool, 64, (size_t)1 << 30, s, 0, &block, &ptr),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_allocate(f.pool, 64, 0, s, ORDO_MEM_MAX_TAGS, &block, &ptr),
                  ORDO_ERR_OUT_OF_RANGE);
    assert_status(ordo_mem_allocate(f.pool, 64, 0, NULL, 0, &block, &ptr), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_allocate(f.pool, 64, 0, s, 0, NULL, &ptr), ORDO_ERR_INVALID_ARGUMENT);
    /* An absurd size the pool cannot get from upstream. */
    assert_status(ordo_mem_allocate(f.direct, ORDO_MEM_MAX_BYTES, 0, s, 0, &block, &ptr),
                  ORDO_ERR_OUT_OF_MEMORY);

    /* A stream of another device. */
    ordo_device_t *other = NULL;
    assert_ok(ordo_device_create_owned(test_device_name(), NULL, &other));
    ordo_stream_t *foreign = NULL;
    assert_ok(ordo_stream_create(other, 0, &foreign));
    assert_status(ordo_mem_allocate(f.pool, 64, 0, foreign, 0, &block, &ptr),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_mem_allocate(f.pool, 64, 0, s, 0, &block, &ptr));
    assert_status(ordo_mem_deallocate(f.pool, block, foreign), ORDO_ERR_INVALID_ARGUMENT);

    /* A block of another resource stack. */
    ordo_mem_resource_t *other_direct = NULL;
    assert_ok(ordo_mem_direct_create(device, &other_direct));
    ordo_block_t *stranger = NULL;
    assert_ok(ordo_mem_allocate(other_direct, 64, 0, s, 0, &stranger, NULL));
    assert_status(ordo_mem_deallocate(f.pool, stranger, s), ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "another resource"));
    assert_ok(ordo_mem_deallocate(other_direct, stranger, s));
    assert_status(ordo_mem_deallocate(other_direct, stranger, s), ORDO_ERR_INVALID_HANDLE);

    /* Freeing twice; the pool's block is intact for its next owner. */
    assert_ok(ordo_mem_deallocate(f.pool, block, s));
    assert_status(ordo_mem_deallocate(f.pool, block, s), ORDO_ERR_INVALID_HANDLE);
    assert_non_null(strstr(ordo_error_message(), "already deallocated"));
    assert_status(ordo_mem_deallocate(f.pool, NULL, s), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_block_ptr(block, &ptr), ORDO_ERR_INVALID_HANDLE);

    /* Modes, outputs, pool-only calls, busy destroys. */
    assert_ok(ordo_mem_allocate(f.pool, 64, 0, s, 0, &block, &ptr));
    assert_status(ordo_mem_prepare_use(f.pool, block, s, (ordo_access_mode_t)0),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_bytes_outstanding(f.pool, NULL), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_supports_use_tracking(f.pool, NULL), ORDO_ERR_INVALID_ARGUMENT);
    ordo_mem_pool_stats_t stats;
    assert_status(ordo_mem_pool_stats(f.direct, &stats), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_pool_trim(f.direct, 0), ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_resource_destroy(f.pool), ORDO_ERR_BUSY);
    assert_status(ordo_mem_resource_destroy(f.direct), ORDO_ERR_BUSY); /* the pool stands on it */
    assert_status(ordo_tracker_destroy(f.tracker), ORDO_ERR_BUSY);
    ordo_mem_pool_config_t config;
    assert_ok(ordo_mem_pool_config_default(&config));
    config.reuse = (ordo_mem_reuse_policy_t)7;
    ordo_mem_resource_t *bad = NULL;
    assert_status(ordo_mem_pool_create(f.tracker, f.direct, &config, &bad),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_status(ordo_mem_pool_create(f.tracker, NULL, NULL, &bad), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_tracker_unlock(f.tracker), ORDO_ERR_INVALID_ARGUMENT);
    assert_ok(ordo_mem_deallocate(f.pool, block, s));

    assert_ok(ordo_mem_reap_pending(other_direct, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(other_direct));
    assert_ok(ordo_stream_destroy(foreign));
    assert_ok(ordo_device_release(other));
    pool_fixture_free(&f);
}

/* --- Randomized cross-stream reuse with real data (tests/mem_program.h) --- */

#define RAND_STREAMS 4

static void run_random_program(ordo_mem_reuse_policy_t policy, uint64_t seed, unsigned steps) {
    pool_fixture_t f;
    pool_fixture_make(&f, policy, 256 * 1024);
    const mem_program_t program = {f.tracker, f.pool, f.s, RAND_STREAMS, 48 * 1024, 3, 20000, NULL};
    int errors = mem_program_run(&program, seed, steps);
    if (errors) {
        fail_msg("seed %llu (policy %d): %d task(s) saw memory another owner touched",
                 (unsigned long long)seed, (int)policy, errors);
    }
    ordo_mem_pool_stats_t stats;
    assert_ok(ordo_mem_pool_stats(f.pool, &stats));
    assert_true(stats.reuses_same_stream + stats.reuses_known + stats.reuses_waited > 0);
    pool_fixture_free(&f);
}

static void random_cross_stream_reuse_is_safe(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    const char *env = getenv("ORDO_MEM_PROGRAMS");
    unsigned programs = env ? (unsigned)strtoul(env, NULL, 10) : (unsigned)test_scaled(24);
    for (unsigned p = 0; p < programs; ++p) {
        run_random_program(p % 2 ? ORDO_MEM_REUSE_OTHER_BLOCK : ORDO_MEM_REUSE_WAIT,
                           0x9e3779b97f4a7c15ull * (p + 1), 600);
    }
}

/* --- Concurrent allocation: exact accounting --- */

typedef struct churn {
    ordo_mem_resource_t *pool;
    ordo_stream_t *stream;
    uint64_t seed;
    unsigned rounds;
} churn_t;

static void *churn_main(void *arg) {
    churn_t *c = arg;
    ordo_block_t *held[16] = {0};
    for (unsigned r = 0; r < c->rounds; ++r) {
        unsigned i = (unsigned)(test_rand(&c->seed) % 16);
        if (held[i]) {
            if (ordo_mem_deallocate(c->pool, held[i], c->stream) != ORDO_OK) {
                return (void *)1;
            }
            held[i] = NULL;
        } else {
            size_t bytes = 64 + (size_t)(test_rand(&c->seed) % 20000);
            if (ordo_mem_allocate(c->pool, bytes, 0, c->stream, 0, &held[i], NULL) != ORDO_OK) {
                return (void *)1;
            }
        }
    }
    for (unsigned i = 0; i < 16; ++i) {
        if (held[i] && ordo_mem_deallocate(c->pool, held[i], c->stream) != ORDO_OK) {
            return (void *)1;
        }
    }
    return NULL;
}

static void concurrent_allocation_is_exact(void **state) {
    (void)state;
    pool_fixture_t f;
    pool_fixture_make(&f, ORDO_MEM_REUSE_WAIT, 0);
    churn_t churn[4];
    pthread_t threads[4];
    for (int i = 0; i < 4; ++i) {
        churn[i] = (churn_t){f.pool, f.s[i % 2], 1234u + (uint64_t)i, (unsigned)test_scaled(20000)};
        threads[i] = test_thread_start(churn_main, &churn[i]);
    }
    for (int i = 0; i < 4; ++i) {
        void *result = NULL;
        pthread_join(threads[i], &result);
        assert_null(result);
    }
    uint64_t out = 1;
    assert_ok(ordo_mem_bytes_outstanding(f.pool, &out));
    assert_int_equal(out, 0);
    ordo_mem_pool_stats_t stats;
    assert_ok(ordo_mem_pool_stats(f.pool, &stats));
    assert_int_equal(stats.bytes_in_use, 0);
    pool_fixture_free(&f);
}

/* --- The device's default stack --- */

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(pool_reuses_on_the_freeing_stream_at_once),
        cmocka_unit_test(pool_cross_stream_reuse_follows_frontiers),
        cmocka_unit_test(pool_block_prepared_for_a_use_is_not_freed),
        cmocka_unit_test(pool_other_block_policy_does_not_wait),
        cmocka_unit_test(pool_splits_coalesces_and_trims),
        cmocka_unit_test(pool_release_threshold_gives_memory_back),
        cmocka_unit_test(pool_over_pool_gives_chunks_back),
        cmocka_unit_test(pool_huge_release_threshold_keeps_memory),
        cmocka_unit_test(pool_use_tracking_orders_real_data),
        cmocka_unit_test(reuse_orders_third_streams_after_old_uses),
        cmocka_unit_test(failed_freeing_stream_does_not_vouch_for_its_waits),
        cmocka_unit_test(failed_freeing_stream_does_not_settle_its_waits),
        cmocka_unit_test(a_reap_that_meets_a_failed_stream_keeps_the_message),
        cmocka_unit_test(a_launch_function_cannot_free_a_block_its_submission_names),
        cmocka_unit_test(null_handles_and_outputs_are_refused),
        cmocka_unit_test(bad_input_is_refused),
        cmocka_unit_test(random_cross_stream_reuse_is_safe),
        cmocka_unit_test(concurrent_allocation_is_exact),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
