/* The pool's layout under allocation from the end of free blocks, in-place
 * merging and re-binning: a randomized single-thread model check of its
 * invariants (pool_census, tests/pool_census.c: every byte of a chunk in exactly one block,
 * free blocks in exactly the bin of their class and affinity, bitmaps and
 * the affinity mask true, no mergeable neighbours left apart), targeted
 * merges across affinities, streams past the inline per-stream points,
 * host allocations that fail, adaptors over a pool, and the entry points'
 * refusals one check at a time. */
#include <stdatomic.h>
#include <string.h>

#include "core/tracker_internal.h"
#include "hal/hal.h"
#include "mem/resource.h"
#include "ordo/memory.h"
#include "ordo/memory_adaptors.h"
#include "mem_program.h"
#include "pool_census.h"
#include "test_util.h"

static ordo_device_t *device;

/* --- A host allocator that can refuse one allocation --- */

/* The next allocation of at least fail_min bytes (0: none) fails, once. */
static _Atomic size_t fail_min;
static _Atomic unsigned failures;

static void *hook_allocate(void *user, size_t size, size_t alignment) {
    (void)user;
    size_t min = atomic_load(&fail_min);
    if (min && size >= min && atomic_compare_exchange_strong(&fail_min, &min, 0)) {
        atomic_fetch_add(&failures, 1);
        return NULL;
    }
    return aligned_alloc(alignment, (size + alignment - 1) & ~(alignment - 1));
}

static void hook_deallocate(void *user, void *block, size_t size, size_t alignment) {
    (void)user, (void)size, (void)alignment;
    free(block);
}

static int setup(void **state) {
    (void)state;
    static const ordo_allocator_t hooks = {hook_allocate, hook_deallocate, NULL};
    if (ordo_allocator_set(&hooks) != ORDO_OK) {
        return -1;
    }
    return ordo_device_open(test_device_name(), &device) == ORDO_OK ? 0 : -1;
}

static int teardown(void **state) {
    (void)state;
    return ordo_device_release(device) == ORDO_OK ? 0 : -1;
}

/* --- Fixture: a tracker, a direct resource, a pool, up to 12 streams --- */

#define MAX_STREAMS 12

typedef struct fixture {
    ordo_tracker_t *tracker;
    ordo_mem_resource_t *direct;
    ordo_mem_resource_t *pool;
    ordo_stream_t *s[MAX_STREAMS];
    unsigned streams;
} fixture_t;

/* ordo_mem_pool_config_default's configuration. */
static ordo_mem_pool_config_t default_config(void) {
    ordo_mem_pool_config_t config;
    assert_ok(ordo_mem_pool_config_default(&config));
    return config;
}

/* The pools' slot bound: 0 (every block cut from a chunk) for the tests
 * that pin layouts down; the randomized ones run with slots too. */
static size_t fixture_slot_max = 0;

static void fixture_make(fixture_t *f, unsigned streams, ordo_mem_reuse_policy_t policy,
                         size_t chunk_bytes) {
    atomic_store(&fail_min, 0); /* a test that failed armed may not have disarmed */
    memset(f, 0, sizeof *f);
    assert_ok(ordo_tracker_create(device, &f->tracker));
    assert_ok(ordo_mem_direct_create(device, &f->direct));
    ordo_mem_pool_config_t config = default_config();
    config.reuse = policy;
    config.chunk_bytes = chunk_bytes;
    config.slot_max_bytes = fixture_slot_max;
    assert_ok(ordo_mem_pool_create(f->tracker, f->direct, &config, &f->pool));
    f->streams = streams;
    for (unsigned i = 0; i < streams; ++i) {
        assert_ok(ordo_stream_create(device, 0, &f->s[i]));
    }
}

static void fixture_free(fixture_t *f) {
    for (unsigned i = 0; i < f->streams; ++i) {
        assert_ok(ordo_stream_synchronize(f->s[i], test_deadline()));
    }
    assert_ok(ordo_mem_reap_pending(f->pool, test_deadline()));
    uint64_t out = 1;
    assert_ok(ordo_mem_bytes_outstanding(f->pool, &out));
    assert_int_equal(out, 0);
    assert_ok(ordo_mem_resource_destroy(f->pool));
    assert_ok(ordo_mem_reap_pending(f->direct, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(f->direct));
    assert_ok(ordo_tracker_destroy(f->tracker)); /* before its streams */
    for (unsigned i = 0; i < f->streams; ++i) {
        assert_ok(ordo_stream_destroy(f->s[i]));
    }
}

static pool_census_t census(ordo_mem_resource_t *pool) {
    pool_census_t c;
    ordo_status_t st = pool_census(pool, &c);
    if (st != ORDO_OK) {
        fail_msg("pool census: %s", ordo_error_message());
    }
    return c;
}

static ordo_block_t *alloc(fixture_t *f, size_t bytes, size_t alignment, unsigned s,
                           char **out_ptr) {
    ordo_block_t *block = NULL;
    void *ptr = NULL;
    assert_ok(ordo_mem_allocate(f->pool, bytes, alignment, f->s[s], 0, &block, &ptr));
    assert_non_null(ptr);
    if (out_ptr) {
        *out_ptr = ptr;
    }
    return block;
}

static ordo_mem_pool_stats_t pool_stats(ordo_mem_resource_t *pool) {
    ordo_mem_pool_stats_t stats;
    assert_ok(ordo_mem_pool_stats(pool, &stats));
    return stats;
}

/* --- Targeted layouts --- */

/* An allocation is cut from the end of the free block; the rest stays in
 * place, and freeing everything gives back one block of the whole chunk. */
static void allocation_is_cut_from_the_end(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f, 2, ORDO_MEM_REUSE_WAIT, 64 * 1024);
    char *pa = NULL, *pb = NULL, *pc = NULL;
    ordo_block_t *a = alloc(&f, 4096, 0, 0, &pa);
    pool_census_t c = census(f.pool);
    assert_int_equal(c.chunks, 1);
    assert_int_equal(c.live_blocks, 1);
    assert_int_equal(c.free_blocks, 1);
    ordo_block_t *b = alloc(&f, 4096, 0, 0, &pb);
    assert_ptr_equal(pb + 4096, pa);
    char *base = pa + 4096 - 64 * 1024;
    assert_int_equal(pool_stats(f.pool).splits, 2);
    /* a ends the chunk, b lies before it: a freed alone, then b merges
     * with the rest before it and with a after it. */
    assert_ok(ordo_mem_deallocate(f.pool, a, f.s[0]));
    c = census(f.pool);
    assert_int_equal(c.free_blocks, 2);
    assert_int_equal(c.mergeable_pairs, 0);
    assert_ok(ordo_mem_deallocate(f.pool, b, f.s[0]));
    c = census(f.pool);
    assert_int_equal(c.free_blocks, 1);
    assert_int_equal(c.live_blocks, 0);
    ordo_block_t *whole = alloc(&f, 64 * 1024, 0, 0, &pc);
    assert_ptr_equal(pc, base);
    assert_int_equal(pool_stats(f.pool).grows, 1);
    assert_ok(ordo_mem_deallocate(f.pool, whole, f.s[0]));
    census(f.pool);
    fixture_free(&f);
}

/* Alignments past the pool's unit: the pointer is aligned and the bytes
 * lie inside the block, wherever in the free block it was cut. */
static void large_alignments_fit_in_their_blocks(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    fixture_t f;
    fixture_make(&f, 2, ORDO_MEM_REUSE_WAIT, 256 * 1024);
    static const size_t alignments[] = {512, 4096, 65536, 1024, 256, 0, 2048};
    ordo_block_t *blocks[7];
    for (int i = 0; i < 7; ++i) {
        char *ptr = NULL;
        blocks[i] = alloc(&f, 1000 + (size_t)i * 777, alignments[i], (unsigned)i % 2, &ptr);
        size_t align = alignments[i] ? alignments[i] : ORDO_MEM_DEFAULT_ALIGNMENT;
        assert_int_equal((uintptr_t)ptr % align, 0);
        memset(ptr, i, 1000 + (size_t)i * 777);
        census(f.pool);
    }
    for (int i = 0; i < 7; ++i) {
        assert_ok(ordo_mem_deallocate(f.pool, blocks[(i * 3) % 7], f.s[i % 2]));
        census(f.pool);
    }
    fixture_free(&f);
}

/* A settled free block that absorbs a block freed on a stream moves to
 * that stream's bins (it now waits for that stream's uses); a block freed
 * next to it on another stream joins it there. */
static void settled_neighbour_takes_the_freeing_streams_affinity(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f, 3, ORDO_MEM_REUSE_WAIT, 64 * 1024);
    ordo_block_t *a = alloc(&f, 4096, 0, 0, NULL);     /* [60K, 64K) */
    ordo_block_t *b = alloc(&f, 4096, 0, 0, NULL);     /* [56K, 60K) */
    ordo_block_t *c = alloc(&f, 4096, 0, 0, NULL);     /* [52K, 56K) */
    assert_ok(ordo_mem_deallocate(f.pool, c, f.s[0])); /* the rest absorbs it */
    assert_ok(ordo_stream_synchronize(f.s[0], test_deadline()));
    assert_ok(ordo_mem_reap_pending(f.pool, test_deadline()));
    pool_census_t n = census(f.pool);
    assert_int_equal(n.free_blocks, 1);
    assert_int_equal(n.settled_blocks, 1);
    /* b, born on s0, freed on s1: the settled rest before it absorbs it
     * and must leave the settled bins. */
    assert_ok(ordo_mem_deallocate(f.pool, b, f.s[1]));
    n = census(f.pool);
    assert_int_equal(n.free_blocks, 1);
    assert_int_equal(n.settled_blocks, 0);
    /* a, freed on s2: absorbed too, frontier of all three streams. */
    assert_ok(ordo_mem_deallocate(f.pool, a, f.s[2]));
    n = census(f.pool);
    assert_int_equal(n.free_blocks, 1);
    /* s0 has not waited for s1 or s2: the whole chunk is reused after a
     * device wait, never as a known-free block. */
    ordo_tracker_metrics_t m0, m1;
    assert_ok(ordo_tracker_metrics(f.tracker, &m0));
    ordo_block_t *whole = alloc(&f, 64 * 1024, 0, 0, NULL);
    assert_ok(ordo_tracker_metrics(f.tracker, &m1));
    assert_true(m1.waits_emitted > m0.waits_emitted);
    ordo_mem_pool_stats_t stats = pool_stats(f.pool);
    assert_int_equal(stats.reuses_waited, 1);
    assert_int_equal(stats.grows, 1);
    assert_ok(ordo_mem_deallocate(f.pool, whole, f.s[0]));
    census(f.pool);
    fixture_free(&f);
}

/* A block freed on a stream that used it with seven others: its frontier
 * keeps five of them and the freeing stream waits for the rest on the
 * device; a neighbour whose frontier does not fit with it stays apart. */
static void crowded_frontiers_stay_apart(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f, MAX_STREAMS, ORDO_MEM_REUSE_WAIT, 64 * 1024);
    ordo_block_t *a = alloc(&f, 4096, 0, 0, NULL);
    ordo_block_t *b = alloc(&f, 4096, 0, 0, NULL);
    for (unsigned s = 1; s < 8; ++s) {
        assert_ok(ordo_mem_record_use(f.pool, a, f.s[s]));
    }
    for (unsigned s = 8; s < MAX_STREAMS; ++s) {
        assert_ok(ordo_mem_record_use(f.pool, b, f.s[s]));
    }
    ordo_tracker_metrics_t m0, m1;
    assert_ok(ordo_tracker_metrics(f.tracker, &m0));
    assert_ok(ordo_mem_deallocate(f.pool, a, f.s[0]));
    assert_ok(ordo_tracker_metrics(f.tracker, &m1));
    assert_int_equal(m1.waits_emitted - m0.waits_emitted, 2); /* 7 others, 5 kept */
    pool_census_t n = census(f.pool);
    assert_int_equal(n.free_blocks, 2); /* a (six entries) and the rest apart */
    assert_ok(ordo_mem_deallocate(f.pool, b, f.s[11]));
    n = census(f.pool);
    assert_int_equal(n.mergeable_pairs, 0);
    for (unsigned i = 0; i < f.streams; ++i) {
        assert_ok(ordo_stream_synchronize(f.s[i], test_deadline()));
    }
    assert_ok(ordo_mem_reap_pending(f.pool, test_deadline()));
    n = census(f.pool);
    assert_int_equal(n.free_blocks, 1);
    assert_int_equal(n.settled_blocks, 1);
    fixture_free(&f);
}

/* Streams past the inline per-stream points (index 8 and up) allocate,
 * use and free blocks cut from one chunk: the block handed out has its
 * points array whichever descriptor carries it. */
static void many_streams_carve_with_history_reserve(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f, MAX_STREAMS, ORDO_MEM_REUSE_WAIT, 1 << 20);
    ordo_block_t *held[MAX_STREAMS][40];
    memset(held, 0, sizeof held);
    for (unsigned round = 0; round < 40; ++round) {
        for (unsigned s = 0; s < MAX_STREAMS; ++s) {
            held[s][round] = alloc(&f, 256 + round * 64, 0, s, NULL);
            unsigned other = (s + round) % MAX_STREAMS;
            assert_ok(ordo_mem_record_use(f.pool, held[s][round], f.s[other]));
            assert_ok(ordo_mem_prepare_use(f.pool, held[s][round], f.s[MAX_STREAMS - 1 - s],
                                           ORDO_ACCESS_READ));
            assert_ok(ordo_mem_finish_use(f.pool, held[s][round], f.s[MAX_STREAMS - 1 - s],
                                          ORDO_ACCESS_READ));
        }
        census(f.pool);
        if (round % 3 == 2) {
            for (unsigned s = 0; s < MAX_STREAMS; ++s) {
                assert_ok(ordo_mem_deallocate(f.pool, held[s][round - 1], f.s[(s + 9) % 12]));
                held[s][round - 1] = NULL;
            }
            census(f.pool);
        }
    }
    for (unsigned round = 0; round < 40; ++round) {
        for (unsigned s = 0; s < MAX_STREAMS; ++s) {
            if (held[s][round]) {
                assert_ok(ordo_mem_deallocate(f.pool, held[s][round], f.s[s]));
            }
        }
    }
    pool_census_t n = census(f.pool);
    assert_int_equal(n.live_blocks, 0);
    fixture_free(&f);
}

/* A stream past the inline points allocates while the descriptors' slab
 * cannot be grown for the reservation but can for the cut: the block
 * handed out must still carry its points array (or the call fail
 * cleanly). */
static void host_allocation_failing_once_while_carving(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    fixture_t f;
    fixture_make(&f, 10, ORDO_MEM_REUSE_WAIT, 1 << 20);
    /* Streams 0..9 known to the tracker, index 9 last. */
    ordo_block_t *first = alloc(&f, 256, 0, 0, NULL);
    for (unsigned s = 1; s < 10; ++s) {
        assert_ok(ordo_mem_record_use(f.pool, first, f.s[s]));
    }
    assert_ok(ordo_mem_deallocate(f.pool, first, f.s[0]));
    /* Every descriptor of the first slab handed out, then the next slab
     * refused once: 8 KiB and up is only a slab of descriptors here. */
    ordo_block_t *held[200];
    unsigned count = 0;
    atomic_store(&failures, 0);
    atomic_store(&fail_min, (size_t)8192);
    for (; count < 200; ++count) {
        ordo_block_t *block = NULL;
        void *ptr = NULL;
        ordo_status_t st = ordo_mem_allocate(f.pool, 256, 0, f.s[9], 0, &block, &ptr);
        if (st != ORDO_OK) {
            assert_int_equal(st, ORDO_ERR_OUT_OF_MEMORY);
            assert_null(block);
            held[count] = NULL;
            ++count;
            break;
        }
        memset(ptr, 0x5a, 256);
        assert_ok(ordo_mem_record_use(f.pool, block, f.s[9]));
        held[count] = block;
        census(f.pool);
        if (atomic_load(&failures)) {
            ++count;
            break;
        }
    }
    atomic_store(&fail_min, 0);
    assert_int_equal(atomic_load(&failures), 1);
    for (unsigned i = 0; i < count; ++i) {
        if (held[i]) {
            assert_ok(ordo_mem_deallocate(f.pool, held[i], f.s[9]));
        }
    }
    census(f.pool);
    fixture_free(&f);
}

/* The bins are allocated when the pool is made (the settled ones) and when
 * a stream first frees into it: a host allocation failing there refuses
 * the call and changes nothing. */
static void bins_that_cannot_be_allocated_refuse_cleanly(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f, 3, ORDO_MEM_REUSE_WAIT, 64 * 1024);
    size_t live_before = 0, live_after = 0;
    assert_ok(ordo_allocator_live_blocks(&live_before));
    /* A pool is smaller than its settled bins: the second allocation of
     * the creation fails. */
    ordo_mem_resource_t *pool = NULL;
    atomic_store(&failures, 0);
    atomic_store(&fail_min, (size_t)1024);
    assert_status(ordo_mem_pool_create(f.tracker, f.direct, NULL, &pool), ORDO_ERR_OUT_OF_MEMORY);
    atomic_store(&fail_min, 0);
    assert_int_equal(atomic_load(&failures), 1);
    assert_null(pool);
    assert_ok(ordo_allocator_live_blocks(&live_after));
    assert_int_equal(live_after, live_before);

    /* A free on a stream known to the tracker whose bins are not there. */
    ordo_block_t *a = alloc(&f, 4096, 0, 0, NULL);
    assert_ok(ordo_mem_record_use(f.pool, a, f.s[2])); /* s2 known, no bins */
    atomic_store(&failures, 0);
    atomic_store(&fail_min, (size_t)1024);
    assert_status(ordo_mem_deallocate(f.pool, a, f.s[2]), ORDO_ERR_OUT_OF_MEMORY);
    atomic_store(&fail_min, 0);
    assert_int_equal(atomic_load(&failures), 1);
    pool_census_t n = census(f.pool);
    assert_int_equal(n.live_blocks, 1);
    assert_ok(ordo_mem_deallocate(f.pool, a, f.s[2]));
    n = census(f.pool);
    assert_int_equal(n.live_blocks, 0);
    assert_int_equal(n.free_blocks, 1);
    fixture_free(&f);
}

/* A free that needs device waits on a stream that failed is refused: the
 * frontier written into the block so far is left unread, the block stays
 * live, and a free on a healthy stream later takes it. */
static ordo_status_t fail_task(void *ctx) {
    (void)ctx;
    return ORDO_ERR_ABORTED;
}

static void refused_free_on_a_failed_stream_keeps_the_block_live(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f, MAX_STREAMS, ORDO_MEM_REUSE_WAIT, 64 * 1024);
    ordo_block_t *a = alloc(&f, 4096, 0, 1, NULL);
    ordo_block_t *b = alloc(&f, 4096, 0, 1, NULL);
    for (unsigned s = 2; s < 10; ++s) {
        assert_ok(ordo_mem_record_use(f.pool, a, f.s[s]));
    }
    assert_ok(ordo_stream_host_task(f.s[0], fail_task, NULL));
    ordo_status_t st = ordo_stream_synchronize(f.s[0], test_deadline());
    assert_int_not_equal(st, ORDO_OK);
    assert_int_not_equal(st, ORDO_ERR_TIMEOUT);
    st = ordo_mem_deallocate(f.pool, a, f.s[0]);
    assert_int_not_equal(st, ORDO_OK);
    assert_non_null(strstr(ordo_error_message(), "cannot wait"));
    pool_census_t n = census(f.pool);
    assert_int_equal(n.live_blocks, 2);
    void *ptr = NULL;
    assert_ok(ordo_block_ptr(a, &ptr));
    /* Its neighbour, freed on the failed stream (nothing to wait for),
     * does not merge with it. */
    assert_ok(ordo_mem_deallocate(f.pool, b, f.s[0]));
    n = census(f.pool);
    assert_int_equal(n.live_blocks, 1);
    assert_ok(ordo_mem_deallocate(f.pool, a, f.s[11]));
    n = census(f.pool);
    assert_int_equal(n.live_blocks, 0);
    for (unsigned i = 1; i < f.streams; ++i) {
        assert_ok(ordo_stream_synchronize(f.s[i], test_deadline()));
    }
    assert_ok(ordo_mem_reap_pending(f.pool, test_deadline()));
    n = census(f.pool);
    assert_int_equal(n.free_blocks, 1);
    assert_int_equal(n.settled_blocks, 1);
    assert_ok(ordo_mem_resource_destroy(f.pool));
    assert_ok(ordo_mem_reap_pending(f.direct, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(f.direct));
    assert_ok(ordo_tracker_destroy(f.tracker)); /* before its streams */
    for (unsigned i = 0; i < f.streams; ++i) {
        assert_ok(ordo_stream_destroy(f.s[i]));
    }
}

/* --- Randomized cross-stream reuse with real data, twelve streams ---
 *
 * test_memory's random program (tests/mem_program.h) with more streams
 * than a block's frontier keeps and than the inline per-stream points
 * hold, and the pool's census taken as it runs. */

static void census_check(ordo_mem_resource_t *pool) {
    (void)census(pool);
}

static void run_data_program(ordo_mem_reuse_policy_t policy, uint64_t seed, unsigned steps) {
    fixture_t f;
    fixture_make(&f, MAX_STREAMS, policy, 128 * 1024);
    const mem_program_t program = {f.tracker, f.pool, f.s,  MAX_STREAMS,
                                   16 * 1024, 2,      5000, census_check};
    int errors = mem_program_run(&program, seed, steps);
    if (errors) {
        fail_msg("seed %llu (policy %d): %d task(s) saw memory another owner touched",
                 (unsigned long long)seed, (int)policy, errors);
    }
    census(f.pool);
    fixture_free(&f);
}

static void random_reuse_on_twelve_streams_is_safe(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    unsigned programs = (unsigned)test_scaled(8);
    for (unsigned p = 0; p < programs; ++p) {
        fixture_slot_max = p % 4 == 0 ? 64 * 1024 : p % 4 == 1 ? 16 * 1024 : 0;
        run_data_program(p % 2 ? ORDO_MEM_REUSE_OTHER_BLOCK : ORDO_MEM_REUSE_WAIT,
                         0xda942042e4dd58b5ull * (p + 1), 800);
    }
    fixture_slot_max = 0;
}

/* --- Randomized model check --- */

typedef struct model_block {
    ordo_block_t *block;
    uint64_t *words;
    size_t bytes;
    uint64_t stamp;
} model_block_t;

#define MODEL_SLOTS 48

static void model_stamp_check(const model_block_t *m) {
    if (!m->words) {
        return; /* device memory: the host cannot read it */
    }
    size_t n = m->bytes / sizeof(uint64_t);
    if (n && (m->words[0] != m->stamp || m->words[n - 1] != m->stamp)) {
        fail_msg("block %p: its memory was handed to another block", (void *)m->block);
    }
}

static void run_model(unsigned streams, ordo_mem_reuse_policy_t policy, uint64_t seed,
                      unsigned steps) {
    fixture_t f;
    fixture_make(&f, streams, policy, 128 * 1024);
    /* Blocks are stamped where the host can address them (not on a device
     * whose memory is device memory, like CUDA's): the layout checks run
     * everywhere. */
    ordo_device_info_t info;
    assert_ok(ordo_device_info(device, &info));
    model_block_t slots[MODEL_SLOTS];
    memset(slots, 0, sizeof slots);
    uint64_t rng = seed, outstanding = 0, next_stamp = 1;
    size_t live = 0;
    int settled = 0; /* reap or trim ran: frontiers may have shrunk */
    static const size_t alignments[] = {0, 0, 0, 256, 512, 4096, 65536};
    for (unsigned step = 0; step < steps; ++step) {
        model_block_t *m = &slots[test_rand(&rng) % MODEL_SLOTS];
        unsigned s = (unsigned)(test_rand(&rng) % streams);
        unsigned action = (unsigned)(test_rand(&rng) % 100);
        if (!m->block) {
            if (action < 60) {
                size_t bytes = test_rand(&rng) % 8 == 0 ? 1 + test_rand(&rng) % (200 * 1024)
                                                        : 1 + test_rand(&rng) % 6000;
                size_t alignment = alignments[test_rand(&rng) % 7];
                void *ptr = NULL;
                assert_ok(ordo_mem_allocate(f.pool, bytes, alignment, f.s[s],
                                            (uint32_t)(test_rand(&rng) % 4), &m->block, &ptr));
                size_t align = alignment ? alignment : ORDO_MEM_DEFAULT_ALIGNMENT;
                assert_int_equal((uintptr_t)ptr % align, 0);
                m->words = info.device_memory ? NULL : ptr;
                m->bytes = bytes;
                m->stamp = next_stamp++;
                size_t n = bytes / sizeof(uint64_t);
                if (n && m->words) {
                    m->words[0] = m->words[n - 1] = m->stamp;
                }
                outstanding += bytes;
                ++live;
            } else if (action < 62 && (streams <= 6 || step >= steps / 2)) {
                if (test_rand(&rng) % 2) {
                    for (unsigned i = 0; i < streams; ++i) {
                        assert_ok(ordo_stream_synchronize(f.s[i], test_deadline()));
                    }
                }
                assert_ok(ordo_mem_reap_pending(f.pool, test_deadline()));
                settled = 1;
            } else if (action < 63 && (streams <= 6 || step >= steps / 2)) {
                assert_ok(ordo_mem_pool_trim(f.pool, test_rand(&rng) % (512 * 1024)));
                settled = 1;
            }
        } else {
            model_stamp_check(m);
            if (action < 45) {
                assert_ok(ordo_mem_deallocate(f.pool, m->block, f.s[s]));
                outstanding -= m->bytes;
                --live;
                m->block = NULL;
            } else if (action < 70) {
                assert_ok(ordo_mem_record_use(f.pool, m->block, f.s[s]));
            } else {
                ordo_access_mode_t mode = action < 85 ? ORDO_ACCESS_READ : ORDO_ACCESS_WRITE;
                assert_ok(ordo_mem_prepare_use(f.pool, m->block, f.s[s], mode));
                assert_ok(ordo_mem_finish_use(f.pool, m->block, f.s[s], mode));
            }
        }
        pool_census_t c = census(f.pool);
        assert_int_equal(c.live_blocks, live);
        uint64_t out = 0;
        assert_ok(ordo_mem_bytes_outstanding(f.pool, &out));
        assert_int_equal(out, outstanding);
        /* With at most six streams every two frontiers fit together, so
         * neighbours always merge; with more, they stay apart only when
         * they do not fit, until settling drops entries. */
        if (streams <= 6 || !settled) {
            if (c.mergeable_pairs) {
                fail_msg("seed %llu step %u: %zu mergeable free neighbours left apart",
                         (unsigned long long)seed, step, c.mergeable_pairs);
            }
        }
    }
    for (unsigned i = 0; i < MODEL_SLOTS; ++i) {
        if (slots[i].block) {
            model_stamp_check(&slots[i]);
            assert_ok(ordo_mem_deallocate(f.pool, slots[i].block, f.s[i % streams]));
        }
    }
    pool_census_t c = census(f.pool);
    assert_int_equal(c.live_blocks, 0);
    if (streams <= 6) {
        assert_int_equal(c.mergeable_pairs, 0);
    }
    /* Once everything completed, every chunk is one settled block. */
    for (unsigned i = 0; i < streams; ++i) {
        assert_ok(ordo_stream_synchronize(f.s[i], test_deadline()));
    }
    assert_ok(ordo_mem_reap_pending(f.pool, test_deadline()));
    c = census(f.pool);
    assert_int_equal(c.free_blocks, c.chunks);
    assert_int_equal(c.settled_blocks, c.chunks);
    assert_int_equal(c.runs, 0); /* every run went back once its slots settled */
    assert_int_equal(c.free_slots, 0);
    assert_ok(ordo_mem_pool_trim(f.pool, 0));
    c = census(f.pool);
    assert_int_equal(c.chunks, 0);
    fixture_free(&f);
}

static void randomized_layout_model_check(void **state) {
    (void)state;
    unsigned steps = (unsigned)test_scaled(6000);
    for (uint64_t seed = 1; seed <= 3; ++seed) {
        /* Slots up to the default bound, up to 16 KiB, or none at all. */
        fixture_slot_max = seed == 1 ? 64 * 1024 : seed == 3 ? 16 * 1024 : 0;
        run_model(4, ORDO_MEM_REUSE_WAIT, seed * 0x9e3779b97f4a7c15ull, steps);
        run_model(4, ORDO_MEM_REUSE_OTHER_BLOCK, seed * 0x2545f4914f6cdd1dull, steps);
        run_model(MAX_STREAMS, seed % 2 ? ORDO_MEM_REUSE_WAIT : ORDO_MEM_REUSE_OTHER_BLOCK,
                  seed * 0x5851f42d4c957f2dull, steps);
    }
    fixture_slot_max = 0;
}

/* --- Slots: small requests served whole from runs --- */

/* A small block freed on a stream comes back whole to that stream's next
 * request of its class: no split, no merge, one run. A request above the
 * bound is cut from a chunk. */
static void slots_are_reused_whole_on_their_stream(void **state) {
    (void)state;
    fixture_t f;
    fixture_slot_max = 16 * 1024;
    fixture_make(&f, 1, ORDO_MEM_REUSE_WAIT, 256 * 1024);
    fixture_slot_max = 0;
    ordo_block_t *a = NULL, *b = NULL;
    void *pa = NULL, *pb = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 1000, 0, f.s[0], 0, &a, &pa));
    ordo_mem_pool_stats_t before = pool_stats(f.pool);
    assert_int_equal(before.runs, 1);
    assert_ok(ordo_mem_deallocate(f.pool, a, f.s[0]));
    assert_ok(ordo_mem_allocate(f.pool, 900, 0, f.s[0], 0, &b, &pb)); /* the same class */
    assert_ptr_equal(pb, pa);
    ordo_mem_pool_stats_t after = pool_stats(f.pool);
    assert_int_equal(after.splits, before.splits);
    assert_int_equal(after.merges, before.merges);
    assert_int_equal(after.runs, 1);
    assert_int_equal(after.reuses_same_stream, before.reuses_same_stream + 1);
    assert_int_equal(after.bytes_in_use, 4 * ORDO_MEM_DEFAULT_ALIGNMENT); /* the class's size */
    pool_census_t c = census(f.pool);
    assert_int_equal(c.runs, 1);
    assert_int_equal(c.live_blocks, 1);
    /* 16 KiB is class 24's first size: past the bound, cut from a chunk. */
    ordo_block_t *big = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 16 * 1024, 0, f.s[0], 0, &big, NULL));
    assert_int_equal(pool_stats(f.pool).splits, after.splits + 1);
    assert_int_equal(pool_stats(f.pool).runs, 1);
    /* An alignment above the default is served from a chunk too. */
    ordo_block_t *aligned = NULL;
    void *pal = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 100, 4096, f.s[0], 0, &aligned, &pal));
    assert_int_equal((uintptr_t)pal % 4096, 0);
    assert_int_equal(pool_stats(f.pool).runs, 1);
    assert_ok(ordo_mem_deallocate(f.pool, aligned, f.s[0]));
    assert_ok(ordo_mem_deallocate(f.pool, big, f.s[0]));
    assert_ok(ordo_mem_deallocate(f.pool, b, f.s[0]));
    census(f.pool);
    fixture_free(&f);
}

/* A slot freed on stream 0 goes to stream 1 only with stream 1 ordered
 * after the free: by a device wait (ORDO_MEM_REUSE_WAIT, when stream 1 has
 * no run of its own to cut a new slot from), or not at all (stream 1 gets
 * a run of its own). Once the host knows the frees complete (reap), slots
 * are settled; a run whose slots are all settled and free goes back to
 * the chunks, and trim returns them. */
static void slots_cross_streams_by_frontier_and_runs_go_back(void **state) {
    (void)state;
    for (int wait = 0; wait < 2; ++wait) {
        fixture_t f;
        fixture_slot_max = 16 * 1024;
        fixture_make(&f, 2, wait ? ORDO_MEM_REUSE_WAIT : ORDO_MEM_REUSE_OTHER_BLOCK, 256 * 1024);
        fixture_slot_max = 0;
        ordo_block_t *a = NULL, *b = NULL, *c2 = NULL;
        void *pa = NULL, *pb = NULL, *pc = NULL;
        assert_ok(ordo_mem_allocate(f.pool, 3000, 0, f.s[0], 0, &a, &pa));
        assert_ok(ordo_mem_deallocate(f.pool, a, f.s[0]));
        assert_ok(ordo_mem_allocate(f.pool, 3000, 0, f.s[1], 0, &b, &pb));
        ordo_mem_pool_stats_t stats = pool_stats(f.pool);
        if (wait) {
            assert_ptr_equal(pb, pa);
            assert_int_equal(stats.reuses_waited, 1);
            assert_int_equal(stats.runs, 1);
        } else {
            assert_ptr_not_equal(pb, pa);
            /* The slot, then the rest of stream 0's chunk for the run;
             * before the pool grew, stream 0's run (its one slot free)
             * went back to that chunk, still to be skipped. */
            assert_int_equal(stats.blocks_skipped, 2);
            assert_int_equal(stats.runs, 1);
            assert_int_equal(stats.chunks, 2);
        }
        /* Stream 0 takes a slot of its own rather than wait. */
        assert_ok(ordo_mem_deallocate(f.pool, b, f.s[1]));
        assert_ok(ordo_mem_allocate(f.pool, 3000, 0, f.s[0], 0, &c2, &pc));
        assert_ptr_not_equal(pc, pb);
        for (unsigned i = 0; i < 2; ++i) {
            assert_ok(ordo_stream_synchronize(f.s[i], test_deadline()));
        }
        assert_ok(ordo_mem_reap_pending(f.pool, test_deadline()));
        /* Only the run holding the live slot is left. */
        pool_census_t c = census(f.pool);
        assert_int_equal(c.runs, 1);
        assert_int_equal(c.free_slots, wait ? 1 : 0);
        assert_ok(ordo_mem_deallocate(f.pool, c2, f.s[0]));
        assert_ok(ordo_stream_synchronize(f.s[0], test_deadline()));
        assert_ok(ordo_mem_reap_pending(f.pool, test_deadline()));
        c = census(f.pool);
        assert_int_equal(c.runs, 0);
        assert_int_equal(c.free_slots, 0);
        assert_int_equal(c.free_blocks, c.chunks);
        assert_ok(ordo_mem_pool_trim(f.pool, 0));
        assert_int_equal(census(f.pool).chunks, 0);
        fixture_free(&f);
    }
}

/* A pool with the default slot bound and 256 KiB chunks. */
static void slot_fixture_make(fixture_t *f, unsigned streams, ordo_mem_reuse_policy_t policy) {
    fixture_slot_max = 64 * 1024;
    fixture_make(f, streams, policy, 256 * 1024);
    fixture_slot_max = 0;
}

/* Allocates count slots of 3 KiB on streams[0] (one run: 16 fit) and
 * frees slot i on streams[free_on[i]]. */
static void one_run_freed(ordo_mem_resource_t *pool, ordo_stream_t *const *streams, unsigned count,
                          const unsigned *free_on) {
    ordo_block_t *slots[16] = {NULL};
    assert_true(count <= 16);
    for (unsigned i = 0; i < count; ++i) {
        assert_ok(ordo_mem_allocate(pool, 3000, 0, streams[0], 0, &slots[i], NULL));
    }
    for (unsigned i = 0; i < count; ++i) {
        assert_ok(ordo_mem_deallocate(pool, slots[i], streams[free_on[i]]));
    }
}

static const unsigned all_on_stream_0[16] = {0};

/* Before the pool grows, a run whose slots are all free goes back to its
 * chunk even though the frees are not known complete: its block carries
 * the union of the slots' death frontiers. The freeing stream reuses it at
 * once; another stream waits for it or, by policy, passes it over. */
static void idle_runs_go_back_before_the_pool_grows(void **state) {
    (void)state;
    for (int other = 0; other < 3; ++other) {
        fixture_t f;
        slot_fixture_make(&f, 2, other == 2 ? ORDO_MEM_REUSE_OTHER_BLOCK : ORDO_MEM_REUSE_WAIT);
        one_run_freed(f.pool, f.s, 16, all_on_stream_0);
        ordo_mem_pool_stats_t before = pool_stats(f.pool);
        assert_int_equal(before.runs, 1);
        /* More than the chunk has outside the run. */
        ordo_block_t *big = NULL;
        ordo_stream_t *s = f.s[other ? 1 : 0];
        assert_ok(ordo_mem_allocate(f.pool, 240 * 1024, 0, s, 0, &big, NULL));
        ordo_mem_pool_stats_t after = pool_stats(f.pool);
        assert_int_equal(after.runs, 0);
        assert_int_equal(after.chunks, other == 2 ? 2 : 1);
        assert_int_equal(after.reuses_waited, before.reuses_waited + (other == 1));
        assert_int_equal(after.blocks_skipped, before.blocks_skipped + (other == 2));
        assert_int_equal(census(f.pool).free_slots, 0);
        assert_ok(ordo_mem_deallocate(f.pool, big, s));
        fixture_free(&f);
    }
}

/* Slots of one run freed on two streams: the run's block carries both
 * frees, and a third stream waits for each. */
static void run_freed_on_two_streams_is_waited_for_on_both(void **state) {
    (void)state;
    fixture_t f;
    slot_fixture_make(&f, 3, ORDO_MEM_REUSE_WAIT);
    const unsigned halves[16] = {0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1};
    one_run_freed(f.pool, f.s, 16, halves);
    ordo_tracker_metrics_t m0, m1;
    assert_ok(ordo_tracker_metrics(f.tracker, &m0));
    ordo_mem_pool_stats_t before = pool_stats(f.pool);
    ordo_block_t *big = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 240 * 1024, 0, f.s[2], 0, &big, NULL));
    assert_ok(ordo_tracker_metrics(f.tracker, &m1));
    ordo_mem_pool_stats_t after = pool_stats(f.pool);
    assert_int_equal(after.runs, 0);
    assert_int_equal(after.chunks, 1);
    assert_int_equal(after.reuses_waited, before.reuses_waited + 1);
    assert_int_equal(m1.waits_emitted, m0.waits_emitted + 2); /* on streams 0 and 1 */
    census(f.pool);
    assert_ok(ordo_mem_deallocate(f.pool, big, f.s[2]));
    fixture_free(&f);
}

/* Slots of one run freed on seven streams, each after a birth on stream 0
 * it has not waited for: eight streams in the union, more than a block
 * keeps, so the run stays and the pool grows. */
static void run_with_too_large_a_union_stays(void **state) {
    (void)state;
    fixture_t f;
    slot_fixture_make(&f, 8, ORDO_MEM_REUSE_WAIT);
    const unsigned spread[7] = {1, 2, 3, 4, 5, 6, 7};
    one_run_freed(f.pool, f.s, 7, spread);
    ordo_block_t *big = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 240 * 1024, 0, f.s[0], 0, &big, NULL));
    ordo_mem_pool_stats_t stats = pool_stats(f.pool);
    assert_int_equal(stats.runs, 1);
    assert_int_equal(stats.chunks, 2);
    assert_int_equal(census(f.pool).free_slots, 7);
    assert_ok(ordo_mem_deallocate(f.pool, big, f.s[0]));
    fixture_free(&f);
}

/* A slot cut for stream 9 (past the inline per-stream points) whose
 * allocation then fails (its points array cannot be had) stays free in
 * stream 9's list, born free on stream 9: stream 0, which never waited for
 * stream 9, passes it over and cuts a run from its own chunk. */
static void slot_left_by_a_failed_allocation_is_ordered_after_its_stream(void **state) {
    (void)state;
    fixture_t f;
    fixture_slot_max = 64 * 1024;
    fixture_make(&f, 10, ORDO_MEM_REUSE_OTHER_BLOCK, 1 << 20);
    fixture_slot_max = 0;
    for (unsigned s = 0; s < 10; ++s) { /* indices 0..9 in the tracker */
        assert_ok(ordo_mem_deallocate(f.pool, alloc(&f, 1000, 0, s, NULL), f.s[s]));
    }
    ordo_mem_pool_stats_t before = pool_stats(f.pool); /* a chunk per stream */
    /* A new class on stream 9: a run, a slot, then its points array,
     * the first host allocation of 512 bytes or more, refused. */
    atomic_store(&failures, 0);
    atomic_store(&fail_min, (size_t)ORDO_TRACKER_MAX_STREAMS * sizeof(uint64_t));
    ordo_block_t *refused = NULL;
    assert_status(ordo_mem_allocate(f.pool, 3000, 0, f.s[9], 0, &refused, NULL),
                  ORDO_ERR_OUT_OF_MEMORY);
    atomic_store(&fail_min, 0);
    assert_int_equal(atomic_load(&failures), 1);
    assert_null(refused);
    assert_int_equal(census(f.pool).free_slots, 2); /* stream 9's two: the rest went back */
    ordo_block_t *b = alloc(&f, 3000, 0, 0, NULL);
    ordo_mem_pool_stats_t after = pool_stats(f.pool);
    assert_int_equal(after.reuses_known, before.reuses_known);
    assert_int_equal(after.blocks_skipped, before.blocks_skipped + 1);
    assert_int_equal(after.runs, before.runs + 2); /* stream 9's new one, and stream 0's */
    assert_int_equal(after.chunks, before.chunks);
    census(f.pool);
    assert_ok(ordo_mem_deallocate(f.pool, b, f.s[0]));
    fixture_free(&f);
}

/* The slot bound is checked at creation; 0 serves nothing as slots. */
static void slot_bound_is_checked(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f, 1, ORDO_MEM_REUSE_WAIT, 64 * 1024);
    ordo_mem_pool_config_t config = default_config();
    assert_int_equal(config.slot_max_bytes, 64 * 1024);
    config.slot_max_bytes = 64 * 1024 + 1;
    ordo_mem_resource_t *pool = NULL;
    assert_status(ordo_mem_pool_create(f.tracker, f.direct, &config, &pool), ORDO_ERR_OUT_OF_RANGE);
    assert_null(pool);
    ordo_block_t *a = NULL;
    assert_ok(ordo_mem_allocate(f.pool, 64, 0, f.s[0], 0, &a, NULL));
    assert_int_equal(pool_stats(f.pool).runs, 0); /* the fixture's bound is 0 */
    assert_ok(ordo_mem_deallocate(f.pool, a, f.s[0]));
    fixture_free(&f);
}

/* --- Adaptors over a pool --- */

/* Each adaptor over a pool hands out the pool's blocks or its own; frees
 * through it (a block of the resource below takes the checked path) give
 * everything back, and a second free is refused as such, also once the
 * block's descriptor was absorbed by a neighbour. */
static void adaptors_over_a_pool_free_and_refuse_double_frees(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    FILE *log = tmpfile();
    assert_non_null(log);
    for (int kind = 0; kind < 5; ++kind) {
        fixture_t f;
        fixture_make(&f, 2, ORDO_MEM_REUSE_WAIT, 64 * 1024);
        ordo_mem_resource_t *top = NULL, *middle = NULL;
        switch (kind) {
        case 0:
            assert_ok(ordo_mem_budget_create(f.pool, NULL, &top));
            break;
        case 1:
            assert_ok(ordo_mem_statistics_create(f.pool, &top));
            break;
        case 2:
            assert_ok(ordo_mem_logging_create(f.pool, log, &top));
            break;
        case 3:
            assert_ok(ordo_mem_guard_create(f.pool, NULL, &top));
            break;
        default:
            assert_ok(ordo_mem_statistics_create(f.pool, &middle));
            assert_ok(ordo_mem_logging_create(middle, log, &top));
            break;
        }
        ordo_block_t *a = NULL, *b = NULL, *c = NULL;
        assert_ok(ordo_mem_allocate(top, 1000, 0, f.s[0], 1, &a, NULL));
        assert_ok(ordo_mem_allocate(top, 1000, 0, f.s[0], 1, &b, NULL));
        assert_ok(ordo_mem_allocate(top, 1000, 0, f.s[1], 2, &c, NULL));
        assert_ok(ordo_mem_deallocate(top, b, f.s[0]));
        assert_ok(ordo_mem_deallocate(top, a, f.s[1]));
        census(f.pool);
        assert_status(ordo_mem_deallocate(top, b, f.s[0]), ORDO_ERR_INVALID_HANDLE);
        assert_non_null(strstr(ordo_error_message(), kind == 3 ? "double free" : "already"));
        assert_status(ordo_mem_deallocate(top, a, f.s[1]), ORDO_ERR_INVALID_HANDLE);
        if (kind == 1 || kind == 4) {
            ordo_mem_statistics_t stats;
            assert_ok(ordo_mem_statistics_get(kind == 1 ? top : middle, &stats));
            assert_int_equal(stats.overall.current_bytes, 1000);
            assert_int_equal(stats.overall.current_blocks, 1);
        }
        assert_ok(ordo_mem_deallocate(top, c, f.s[1]));
        assert_status(ordo_mem_deallocate(top, c, f.s[0]), ORDO_ERR_INVALID_HANDLE);
        for (unsigned i = 0; i < f.streams; ++i) {
            assert_ok(ordo_stream_synchronize(f.s[i], test_deadline()));
        }
        uint64_t out = 1;
        assert_ok(ordo_mem_reap_pending(top, test_deadline()));
        assert_ok(ordo_mem_bytes_outstanding(top, &out));
        assert_int_equal(out, 0);
        if (kind == 3) {
            assert_ok(ordo_mem_guard_drain(top));
        }
        assert_ok(ordo_mem_resource_destroy(top));
        if (middle) {
            assert_ok(ordo_mem_resource_destroy(middle));
        }
        pool_census_t n = census(f.pool);
        assert_int_equal(n.live_blocks, 0);
        fixture_free(&f);
    }
    fclose(log);
}

/* Streams used with a tracker must outlive it. A guard over a pool gives
 * quarantined memory back with frees the pool orders on its tracker: only
 * on streams the tracker already orders (its caller's), never on one of
 * the guard's own that the guard destroys before the pool's tracker. */
static void guard_over_a_pool_adds_no_stream_to_its_tracker(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED();
    fixture_t f;
    fixture_make(&f, 2, ORDO_MEM_REUSE_WAIT, 64 * 1024);
    ordo_mem_resource_t *guard = NULL;
    assert_ok(ordo_mem_guard_create(f.pool, NULL, &guard));
    ordo_block_t *a = NULL, *b = NULL;
    assert_ok(ordo_mem_allocate(guard, 1000, 0, f.s[0], 0, &a, NULL));
    assert_ok(ordo_mem_allocate(guard, 1000, 0, f.s[0], 0, &b, NULL));
    assert_ok(ordo_mem_record_use(guard, a, f.s[1]));
    assert_ok(ordo_mem_deallocate(guard, a, f.s[1]));
    assert_ok(ordo_mem_deallocate(guard, b, f.s[0]));
    assert_ok(ordo_mem_reap_pending(guard, test_deadline()));
    assert_ok(ordo_mem_guard_drain(guard)); /* the memory goes back to the pool */
    assert_ok(ordo_mem_resource_destroy(guard));
    assert_ok(ordo_tracker_lock(f.tracker));
    uint32_t count = f.tracker->stream_count;
    for (uint32_t i = 0; i < count; ++i) {
        ordo_stream_t *s = f.tracker->streams[i]->stream;
        if (s != f.s[0] && s != f.s[1]) {
            assert_ok(ordo_tracker_unlock(f.tracker));
            fail_msg("the pool's tracker orders stream %p, which the test did not make (and "
                     "which no longer lives)",
                     (void *)s);
        }
    }
    assert_ok(ordo_tracker_unlock(f.tracker));
    pool_census_t n = census(f.pool);
    assert_int_equal(n.live_blocks, 0);
    fixture_free(&f);
}

/* --- The entry points' refusals, one check at a time --- */

static void entry_points_refuse_each_bad_argument(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f, 2, ORDO_MEM_REUSE_WAIT, 0);
    ordo_stream_t *s = f.s[0];
    ordo_block_t *sentinel = (ordo_block_t *)&f; /* overwritten with NULL when refused */
    void *ptr = &f;
    ordo_block_t *block = sentinel;
    ordo_mem_resource_t fake_resource;
    memset(&fake_resource, 0, sizeof fake_resource);
    ordo_stream_t *fake_stream = calloc(1, sizeof(ordo_stream_t));
    assert_non_null(fake_stream);

    struct {
        ordo_mem_resource_t *resource;
        size_t bytes, alignment;
        ordo_stream_t *stream;
        uint32_t tag;
        ordo_status_t expected;
        const char *message;
    } cases[] = {
        {NULL, 64, 0, s, 0, ORDO_ERR_INVALID_HANDLE, "is NULL"},
        {&fake_resource, 64, 0, s, 0, ORDO_ERR_INVALID_HANDLE, "not a live memory resource"},
        {f.pool, 64, 0, NULL, 0, ORDO_ERR_INVALID_HANDLE, "stream is NULL"},
        {f.pool, 64, 0, fake_stream, 0, ORDO_ERR_INVALID_HANDLE, "not a live stream"},
        {f.pool, 0, 0, s, 0, ORDO_ERR_INVALID_ARGUMENT, "zero-byte"},
        {f.pool, ORDO_MEM_MAX_BYTES + 1, 0, s, 0, ORDO_ERR_OUT_OF_RANGE, "one allocation may ask"},
        {f.pool, SIZE_MAX, 0, s, 0, ORDO_ERR_OUT_OF_RANGE, "one allocation may ask"},
        {f.pool, ORDO_MEM_MAX_BYTES, 0, s, 0, ORDO_ERR_OUT_OF_MEMORY, "too large"},
        {f.pool, 64, 3, s, 0, ORDO_ERR_INVALID_ARGUMENT, "power of two"},
        {f.pool, 64, ORDO_MEM_MAX_ALIGNMENT * 2, s, 0, ORDO_ERR_INVALID_ARGUMENT, "power of two"},
        {f.pool, 64, 0, s, ORDO_MEM_MAX_TAGS, ORDO_ERR_OUT_OF_RANGE, "not below"},
        /* Checked in order: the first failing check speaks. */
        {f.pool, 0, 3, NULL, ORDO_MEM_MAX_TAGS, ORDO_ERR_INVALID_HANDLE, "stream is NULL"},
        {f.pool, 0, 3, s, ORDO_MEM_MAX_TAGS, ORDO_ERR_INVALID_ARGUMENT, "zero-byte"},
        {f.pool, 64, 3, s, ORDO_MEM_MAX_TAGS, ORDO_ERR_INVALID_ARGUMENT, "power of two"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; ++i) {
        block = sentinel;
        ptr = &f;
        ordo_status_t st = ordo_mem_allocate(cases[i].resource, cases[i].bytes, cases[i].alignment,
                                             cases[i].stream, cases[i].tag, &block, &ptr);
        if (st != cases[i].expected || !strstr(ordo_error_message(), cases[i].message)) {
            fail_msg("allocate case %zu: %s (%s), expected %s with \"%s\"", i, ordo_status_name(st),
                     ordo_error_message(), ordo_status_name(cases[i].expected), cases[i].message);
        }
        /* Every refusal clears both outputs (docs/ERRORS.md). */
        assert_null(block);
        assert_null(ptr);
    }
    ptr = &f;
    assert_status(ordo_mem_allocate(f.pool, 64, 0, s, 0, NULL, &ptr), ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "out_block is NULL"));
    assert_null(ptr); /* cleared even without out_block */
    /* A stream of another device. */
    ordo_device_t *other = NULL;
    assert_ok(ordo_device_create_owned(test_device_name(), NULL, &other));
    ordo_stream_t *foreign = NULL;
    assert_ok(ordo_stream_create(other, 0, &foreign));
    assert_status(ordo_mem_allocate(f.pool, 64, 0, foreign, 0, &block, &ptr),
                  ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "used with a memory resource"));
    assert_null(block);
    /* Alignment 0 is the default; ORDO_MEM_MAX_ALIGNMENT itself is fine. */
    assert_ok(ordo_mem_allocate(f.pool, 64, ORDO_MEM_MAX_ALIGNMENT, s, 0, &block, &ptr));
    assert_int_equal((uintptr_t)ptr % ORDO_MEM_MAX_ALIGNMENT, 0);
    ordo_block_t *live = block;

    /* Deallocation, each check alone. */
    ordo_block_t fake_block;
    memset(&fake_block, 0, sizeof fake_block);
    ordo_mem_resource_t *other_direct = NULL;
    assert_ok(ordo_mem_direct_create(device, &other_direct));
    ordo_block_t *stranger = NULL;
    assert_ok(ordo_mem_allocate(other_direct, 64, 0, s, 0, &stranger, NULL));
    assert_status(ordo_mem_deallocate(NULL, live, s), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_deallocate(&fake_resource, live, s), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_deallocate(f.pool, NULL, s), ORDO_ERR_INVALID_HANDLE);
    assert_non_null(strstr(ordo_error_message(), "block is NULL"));
    assert_status(ordo_mem_deallocate(f.pool, &fake_block, s), ORDO_ERR_INVALID_HANDLE);
    assert_non_null(strstr(ordo_error_message(), "not a live block"));
    assert_status(ordo_mem_deallocate(f.pool, stranger, s), ORDO_ERR_INVALID_ARGUMENT);
    assert_non_null(strstr(ordo_error_message(), "another resource stack"));
    assert_status(ordo_mem_deallocate(f.pool, live, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_non_null(strstr(ordo_error_message(), "stream is NULL"));
    assert_status(ordo_mem_deallocate(f.pool, live, fake_stream), ORDO_ERR_INVALID_HANDLE);
    assert_status(ordo_mem_deallocate(f.pool, live, foreign), ORDO_ERR_INVALID_ARGUMENT);
    /* The block before the stream: a freed block with a bad stream. */
    assert_ok(ordo_mem_deallocate(f.pool, live, s));
    assert_status(ordo_mem_deallocate(f.pool, live, NULL), ORDO_ERR_INVALID_HANDLE);
    assert_non_null(strstr(ordo_error_message(), "already deallocated"));
    /* The pool is intact after all that. */
    pool_census_t n = census(f.pool);
    assert_int_equal(n.live_blocks, 0);

    assert_ok(ordo_mem_deallocate(other_direct, stranger, s));
    assert_ok(ordo_mem_reap_pending(other_direct, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(other_direct));
    assert_ok(ordo_stream_destroy(foreign));
    assert_ok(ordo_device_release(other));
    free(fake_stream);
    fixture_free(&f);
}

/* A pool over a pool: reaping with a release threshold of zero gives the
 * upper pool's settled chunks back to the lower pool as settled free
 * blocks; both layouts stay whole, and the upper pool is destroyed with
 * nothing left over in the lower one. */
static void pool_over_pool_trims_and_retries(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f, 2, ORDO_MEM_REUSE_WAIT, 64 * 1024);
    ordo_mem_pool_config_t config = default_config();
    config.chunk_bytes = 16 * 1024;
    config.release_threshold = 0;
    config.slot_max_bytes = 0; /* one chunk per block, to count */
    ordo_mem_resource_t *upper = NULL;
    assert_ok(ordo_mem_pool_create(f.tracker, f.pool, &config, &upper));
    ordo_block_t *blocks[6];
    void *ptr = NULL;
    for (unsigned i = 0; i < 6; ++i) {
        assert_ok(ordo_mem_allocate(upper, 12 * 1024, 0, f.s[i % 2], 0, &blocks[i], &ptr));
    }
    assert_int_equal(pool_stats(upper).chunks, 6);
    for (unsigned i = 0; i < 6; ++i) {
        assert_ok(ordo_mem_deallocate(upper, blocks[i], f.s[(i + 1) % 2]));
    }
    (void)census(upper);
    (void)census(f.pool);
    assert_ok(ordo_stream_synchronize(f.s[0], test_deadline()));
    assert_ok(ordo_stream_synchronize(f.s[1], test_deadline()));
    assert_ok(ordo_mem_reap_pending(upper, test_deadline()));
    assert_int_equal(pool_stats(upper).chunks, 0);
    assert_int_equal(pool_stats(upper).bytes_reserved, 0);
    assert_int_equal(pool_stats(f.pool).bytes_in_use, 0);
    (void)census(upper);
    pool_census_t c = census(f.pool);
    assert_int_equal(c.live_blocks, 0);
    uint64_t out = 1;
    assert_ok(ordo_mem_bytes_outstanding(f.pool, &out));
    assert_int_equal(out, 0);
    assert_ok(ordo_mem_resource_destroy(upper));
    (void)census(f.pool);
    fixture_free(&f);
}

/* A pool of policy and chunk_bytes over a budget adaptor on f's direct
 * resource, with the device's budget limited to limit bytes. */
typedef struct budget_pool {
    ordo_mem_resource_t *budget;
    ordo_mem_resource_t *pool;
} budget_pool_t;

static budget_pool_t budget_pool_make(fixture_t *f, ordo_mem_reuse_policy_t policy,
                                      size_t chunk_bytes, uint64_t limit) {
    budget_pool_t bp = {NULL, NULL};
    assert_ok(ordo_mem_budget_create(f->direct, NULL, &bp.budget));
    ordo_mem_pool_config_t config = default_config();
    config.reuse = policy;
    config.chunk_bytes = chunk_bytes;
    config.slot_max_bytes = fixture_slot_max;
    assert_ok(ordo_mem_pool_create(f->tracker, bp.budget, &config, &bp.pool));
    assert_ok(ordo_mem_budget_set_limit(device, limit));
    return bp;
}

/* Once stream s is idle: reaps and destroys the pool, lifts the limit,
 * reaps and destroys the budget adaptor. */
static void budget_pool_free(budget_pool_t *bp, ordo_stream_t *s) {
    assert_ok(ordo_stream_synchronize(s, test_deadline()));
    assert_ok(ordo_mem_reap_pending(bp->pool, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(bp->pool));
    assert_ok(ordo_mem_budget_set_limit(device, ORDO_MEM_BUDGET_UNLIMITED));
    assert_ok(ordo_mem_reap_pending(bp->budget, test_deadline()));
    assert_ok(ordo_mem_resource_destroy(bp->budget));
}

/* The out-of-memory retry gave a chunk back to the direct resource (under a
 * budget) with a free on stream S, made to wait on the device for stream
 * A's use of it, or covering that use through a wait S had made. S then
 * failed before its wait ran, its free point fired, and the direct
 * resource freed the memory while A's use was still to run. Now such a
 * chunk stays in the pool until it settles; only a chunk used on one
 * stream alone (with nothing pending it had waited for) goes back so. */
typedef struct held_use {
    ordo_signal_t *hold;
    unsigned char *memory;
    size_t bytes;
} held_use_t;

static ordo_status_t held_use_task(void *ctx) {
    held_use_t *u = ctx;
    ordo_status_t st = ordo_signal_wait(u->hold, 1, test_deadline());
    memset(u->memory, 0x5a, u->bytes); /* after the chunk went back: a use after free */
    return st;
}

static ordo_status_t failing_after_gate(void *ctx) {
    (void)ordo_signal_wait(ctx, 1, test_deadline());
    return ORDO_ERR_ABORTED;
}

static void out_of_memory_retry_keeps_chunks_another_stream_may_use(void **state) {
    (void)state;
    TEST_SKIP_IF_LISTED(); /* a host task writes the chunk's memory */
    for (int covered_by_wait = 0; covered_by_wait < 2; ++covered_by_wait) {
        fixture_t f;
        fixture_make(&f, 1, ORDO_MEM_REUSE_WAIT, 64 * 1024);
        budget_pool_t bp = budget_pool_make(&f, ORDO_MEM_REUSE_WAIT, 64 * 1024, 128 * 1024);
        ordo_stream_t *a = f.s[0], *s = NULL;
        assert_ok(ordo_tracker_stream_create(f.tracker, 0, &s)); /* fails; the tracker's */
        ordo_signal_t *gate = test_signal_make(0);
        held_use_t use = {test_signal_make(0), NULL, 64 * 1024};
        ordo_block_t *x = NULL;
        assert_ok(ordo_mem_allocate(bp.pool, use.bytes, 0, a, 0, &x, (void **)&use.memory));
        ordo_buffer_t *buffer = NULL;
        assert_ok(ordo_block_buffer(x, &buffer));
        ordo_access_t write = {buffer, ORDO_ACCESS_WRITE};
        assert_ok(ordo_tracker_submit_host(f.tracker, a, &write, 1, held_use_task, &use));
        if (covered_by_wait) {
            /* S waits for A's use, then frees: its one entry covers A's. */
            assert_ok(ordo_stream_host_task(s, failing_after_gate, gate));
            assert_ok(ordo_mem_prepare_use(bp.pool, x, s, ORDO_ACCESS_READ));
            assert_ok(ordo_mem_finish_use(bp.pool, x, s, ORDO_ACCESS_READ));
            assert_ok(ordo_mem_deallocate(bp.pool, x, s));
        } else {
            /* Freed on S, which never saw A's use: two entries. */
            assert_ok(ordo_mem_deallocate(bp.pool, x, s));
            assert_ok(ordo_stream_host_task(s, failing_after_gate, gate));
        }
        ordo_block_t *y = NULL;
        ordo_status_t st = ordo_mem_allocate(bp.pool, 96 * 1024, 0, a, 0, &y, NULL);
        assert_true(st == ORDO_ERR_OUT_OF_MEMORY);
        assert_ok(ordo_signal_advance(gate, 1));
        assert_status(ordo_stream_synchronize(s, test_deadline()), ORDO_ERR_ABORTED);
        assert_ok(ordo_mem_reap_pending(f.direct, test_deadline()));
        uint64_t out = 0;
        assert_ok(ordo_mem_bytes_outstanding(f.direct, &out));
        if (out == 0) {
            fail_msg("%s: the chunk went back while stream A's use of it was still to run",
                     covered_by_wait ? "one entry covering A's use" : "two entries");
        }
        assert_ok(ordo_signal_advance(use.hold, 1));
        budget_pool_free(&bp, a);
        assert_ok(ordo_signal_release(gate));
        assert_ok(ordo_signal_release(use.hold));
        fixture_free(&f);
    }
}

/* Upstream out of memory: the pool settles what has completed, gives its
 * settled chunks back and tries once more. Blocks freed on a stream that
 * has since finished all its work are complete; the retry must find them. */
static void out_of_memory_settles_trims_and_retries(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f, 1, ORDO_MEM_REUSE_WAIT, 64 * 1024);
    budget_pool_t bp = budget_pool_make(&f, ORDO_MEM_REUSE_WAIT, 64 * 1024, 160 * 1024);
    ordo_mem_resource_t *pool = bp.pool;
    ordo_block_t *a = NULL, *b = NULL, *big = NULL;
    void *ptr = NULL;
    assert_ok(ordo_mem_allocate(pool, 60 * 1024, 0, f.s[0], 0, &a, &ptr));
    assert_ok(ordo_mem_allocate(pool, 60 * 1024, 0, f.s[0], 0, &b, &ptr));
    assert_int_equal(pool_stats(pool).chunks, 2);
    assert_ok(ordo_mem_deallocate(pool, a, f.s[0]));
    assert_ok(ordo_mem_deallocate(pool, b, f.s[0]));
    assert_ok(ordo_stream_synchronize(f.s[0], test_deadline()));
    /* 100 KiB fits neither chunk, and a third is over the limit. */
    ordo_status_t st = ordo_mem_allocate(pool, 100 * 1024, 0, f.s[0], 0, &big, &ptr);
    if (st != ORDO_OK) {
        fail_msg("allocation after the frees completed (%llu trims): %s",
                 (unsigned long long)pool_stats(pool).trims, ordo_error_message());
    }
    (void)census(pool);
    assert_int_equal(pool_stats(pool).chunks, 1);
    assert_ok(ordo_mem_deallocate(pool, big, f.s[0]));
    budget_pool_free(&bp, f.s[0]);
    fixture_free(&f);
}

/* Under ORDO_MEM_REUSE_OTHER_BLOCK, an allocation that passes a block over,
 * finds upstream out of memory, settles, trims and searches again passes
 * the same block over once: blocks_skipped counts it once. */
static void out_of_memory_retry_counts_a_skipped_block_once(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f, 2, ORDO_MEM_REUSE_OTHER_BLOCK, 64 * 1024);
    budget_pool_t bp = budget_pool_make(&f, ORDO_MEM_REUSE_OTHER_BLOCK, 128 * 1024, 128 * 1024);
    ordo_mem_resource_t *pool = bp.pool;
    ordo_block_t *a = NULL, *b = NULL, *c = NULL;
    void *ptr = NULL;
    assert_ok(ordo_mem_allocate(pool, 60 * 1024, 0, f.s[0], 0, &a, &ptr));
    assert_ok(ordo_mem_allocate(pool, 60 * 1024, 0, f.s[0], 0, &b, &ptr));
    assert_ok(ordo_mem_deallocate(pool, a, f.s[0]));
    /* s1 has not waited for s0, whose free point nothing has recorded yet:
     * a is passed over, and the one chunk the budget allows is full. */
    assert_int_equal(ordo_mem_allocate(pool, 60 * 1024, 0, f.s[1], 0, &c, &ptr),
                     ORDO_ERR_OUT_OF_MEMORY);
    assert_null(c);
    assert_int_equal(pool_stats(pool).blocks_skipped, 1);
    assert_int_equal(pool_stats(pool).chunks, 1);
    (void)census(pool);
    assert_ok(ordo_mem_deallocate(pool, b, f.s[0]));
    budget_pool_free(&bp, f.s[0]);
    fixture_free(&f);
}

/* The out-of-memory retry with slots: stream 0's run, all of whose slots
 * were freed and have completed, is in the way of stream 1's large request
 * under a budget of one chunk. Before growing, the run goes back with
 * stream 0's frontier, which stream 1 has not waited for; growing is over
 * the budget; settling finds the frees complete, and the retry succeeds
 * within the one chunk. */
static void out_of_memory_retry_gives_back_runs(void **state) {
    (void)state;
    fixture_t f;
    fixture_make(&f, 2, ORDO_MEM_REUSE_OTHER_BLOCK, 64 * 1024);
    fixture_slot_max = 64 * 1024;
    budget_pool_t bp = budget_pool_make(&f, ORDO_MEM_REUSE_OTHER_BLOCK, 128 * 1024, 128 * 1024);
    fixture_slot_max = 0;
    ordo_mem_resource_t *pool = bp.pool;
    ordo_block_t *big = NULL;
    one_run_freed(pool, f.s, 16, all_on_stream_0);
    assert_ok(ordo_stream_synchronize(f.s[0], test_deadline()));
    assert_ok(ordo_mem_allocate(pool, 100 * 1024, 0, f.s[1], 0, &big, NULL));
    ordo_mem_pool_stats_t stats = pool_stats(pool);
    assert_int_equal(stats.runs, 0);
    assert_int_equal(stats.chunks, 1);
    assert_int_equal(stats.trims, 1); /* the settled chunk went back, a new one came */
    assert_int_equal(stats.grows, 2);
    assert_int_equal(census(pool).free_slots, 0);
    assert_ok(ordo_mem_deallocate(pool, big, f.s[1]));
    assert_ok(ordo_stream_synchronize(f.s[1], test_deadline()));
    budget_pool_free(&bp, f.s[0]);
    fixture_free(&f);
}

int main(void) {
    test_conformance_begin("pool-layout");
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(allocation_is_cut_from_the_end),
        cmocka_unit_test(large_alignments_fit_in_their_blocks),
        cmocka_unit_test(settled_neighbour_takes_the_freeing_streams_affinity),
        cmocka_unit_test(crowded_frontiers_stay_apart),
        cmocka_unit_test(many_streams_carve_with_history_reserve),
        cmocka_unit_test(host_allocation_failing_once_while_carving),
        cmocka_unit_test(bins_that_cannot_be_allocated_refuse_cleanly),
        cmocka_unit_test(refused_free_on_a_failed_stream_keeps_the_block_live),
        cmocka_unit_test(randomized_layout_model_check),
        cmocka_unit_test(random_reuse_on_twelve_streams_is_safe),
        cmocka_unit_test(slots_are_reused_whole_on_their_stream),
        cmocka_unit_test(slots_cross_streams_by_frontier_and_runs_go_back),
        cmocka_unit_test(idle_runs_go_back_before_the_pool_grows),
        cmocka_unit_test(run_freed_on_two_streams_is_waited_for_on_both),
        cmocka_unit_test(run_with_too_large_a_union_stays),
        cmocka_unit_test(slot_left_by_a_failed_allocation_is_ordered_after_its_stream),
        cmocka_unit_test(slot_bound_is_checked),
        cmocka_unit_test(adaptors_over_a_pool_free_and_refuse_double_frees),
        cmocka_unit_test(guard_over_a_pool_adds_no_stream_to_its_tracker),
        cmocka_unit_test(entry_points_refuse_each_bad_argument),
        cmocka_unit_test(pool_over_pool_trims_and_retries),
        cmocka_unit_test(out_of_memory_settles_trims_and_retries),
        cmocka_unit_test(out_of_memory_retry_keeps_chunks_another_stream_may_use),
        cmocka_unit_test(out_of_memory_retry_counts_a_skipped_block_once),
        cmocka_unit_test(out_of_memory_retry_gives_back_runs),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
