/* Benchmarks of stream-ordered memory (src/mem/): the pool against glibc
 * malloc on one stream, cross-stream reuse against an event recorded per
 * free (the RMM and caching-allocator pattern), and fragmentation on a
 * random trace. */
#include <malloc.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ordo/device.h"
#include "ordo/event.h"
#include "ordo/memory.h"
#include "ordo/stream.h"
#include "ordo/tracker.h"

#define MEM_WINDOW 16
#define MEM_SIZES 4096

typedef struct mem_env {
    ordo_device_t *device;
    ordo_tracker_t *tracker;
    ordo_mem_resource_t *direct;
    ordo_mem_resource_t *pool;
    ordo_stream_t *a;
    ordo_stream_t *b;
} mem_env_t;

static void env_open(mem_env_t *env) {
    memset(env, 0, sizeof *env);
    if (ordo_device_open("cpu:0", &env->device) != ORDO_OK ||
        ordo_tracker_create(env->device, &env->tracker) != ORDO_OK ||
        ordo_mem_direct_create(env->device, &env->direct) != ORDO_OK ||
        ordo_mem_pool_create(env->tracker, env->direct, NULL, &env->pool) != ORDO_OK ||
        ordo_stream_create(env->device, 0, &env->a) != ORDO_OK ||
        ordo_stream_create(env->device, 0, &env->b) != ORDO_OK) {
        bench_fail("cannot set up a pool on cpu:0");
    }
}

static void env_close(mem_env_t *env) {
    if (ordo_stream_synchronize(env->a, ordo_deadline_after_ms(10000)) != ORDO_OK ||
        ordo_stream_synchronize(env->b, ordo_deadline_after_ms(10000)) != ORDO_OK ||
        ordo_mem_reap_pending(env->pool, ordo_deadline_after_ms(10000)) != ORDO_OK ||
        ordo_mem_resource_destroy(env->pool) != ORDO_OK ||
        ordo_mem_reap_pending(env->direct, ordo_deadline_after_ms(10000)) != ORDO_OK ||
        ordo_mem_resource_destroy(env->direct) != ORDO_OK ||
        ordo_tracker_destroy(env->tracker) != ORDO_OK || /* before its streams */
        ordo_stream_destroy(env->a) != ORDO_OK || ordo_stream_destroy(env->b) != ORDO_OK ||
        ordo_device_release(env->device) != ORDO_OK) {
        bench_fail("cannot tear the pool down");
    }
}

/* Log-uniform sizes from 64 B to 1 MiB, the same for every impl. */
static void sizes_make(size_t *sizes, size_t count, uint64_t seed) {
    for (size_t i = 0; i < count; ++i) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        unsigned shift = 6 + (unsigned)(seed % 15); /* 2^6 .. 2^20 */
        size_t lo = (size_t)1 << shift;
        sizes[i] = lo + (size_t)((seed >> 8) % lo);
        if (sizes[i] > ((size_t)1 << 20)) {
            sizes[i] = (size_t)1 << 20;
        }
    }
}

/* ---- mem_same_stream ------------------------------------------------- */

/* Each operation frees the oldest of a window of live blocks and allocates
 * the next size in its place. */
static bench_stats_t same_stream_pool(mem_env_t *env, const size_t *sizes, bench_sizes_t sz) {
    double *samples = calloc(sz.samples, sizeof *samples);
    ordo_block_t *window[MEM_WINDOW] = {0};
    if (!samples) {
        bench_fail("out of memory");
    }
    unsigned failures = 0;
    size_t next = 0;
    for (size_t s = 0; s < sz.samples + 2; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            size_t slot = next % MEM_WINDOW;
            if (window[slot]) {
                failures += ordo_mem_deallocate(env->pool, window[slot], env->a) != ORDO_OK;
            }
            failures += ordo_mem_allocate(env->pool, sizes[next % MEM_SIZES], 0, env->a, 0,
                                          &window[slot], NULL) != ORDO_OK;
            ++next;
        }
        if (s >= 2) {
            samples[s - 2] = (double)(bench_now_ns() - t0) / (double)sz.batch;
        }
    }
    for (size_t i = 0; i < MEM_WINDOW; ++i) {
        failures += window[i] && ordo_mem_deallocate(env->pool, window[i], env->a) != ORDO_OK;
    }
    if (failures) {
        bench_fail("a pool allocation or free failed");
    }
    bench_stats_t stats = bench_summarise(samples, sz.samples, sz.batch);
    free(samples);
    return stats;
}

static bench_stats_t same_stream_malloc(const size_t *sizes, bench_sizes_t sz) {
    double *samples = calloc(sz.samples, sizeof *samples);
    void *window[MEM_WINDOW] = {0};
    if (!samples) {
        bench_fail("out of memory");
    }
    void *(*volatile allocate)(size_t) = malloc; /* not folded away */
    size_t next = 0;
    for (size_t s = 0; s < sz.samples + 2; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            size_t slot = next % MEM_WINDOW;
            free(window[slot]);
            window[slot] = allocate(sizes[next % MEM_SIZES]);
            if (!window[slot]) {
                bench_fail("malloc failed");
            }
            ++next;
        }
        if (s >= 2) {
            samples[s - 2] = (double)(bench_now_ns() - t0) / (double)sz.batch;
        }
    }
    for (size_t i = 0; i < MEM_WINDOW; ++i) {
        free(window[i]);
    }
    bench_stats_t stats = bench_summarise(samples, sz.samples, sz.batch);
    free(samples);
    return stats;
}

static void bench_mem_same_stream(const bench_options_t *options) {
    if (!bench_selected(options, "mem_same_stream")) {
        return;
    }
    bench_sizes_t sz = bench_pick(options, 31, 20000);
    size_t *sizes = malloc(MEM_SIZES * sizeof *sizes);
    if (!sizes) {
        bench_fail("out of memory");
    }
    sizes_make(sizes, MEM_SIZES, 0x5eed);
    mem_env_t env;
    env_open(&env);
    bench_pin(0);
    bench_stats_t base = same_stream_malloc(sizes, sz);
    bench_stats_t pool = same_stream_pool(&env, sizes, sz);
    bench_unpin();
    bench_emit("mem_same_stream", "malloc", &base, NULL, 0);
    bench_ratio_t r = {"malloc", pool.median_ns / base.median_ns};
    bench_emit("mem_same_stream", "ordo", &pool, &r, 1);
    env_close(&env);
    free(sizes);
}

/* ---- mem_cross_stream ------------------------------------------------ */

#define CROSS_BATCH 64

/* Blocks freed on a are reallocated on b, CROSS_BATCH at a time: b waits
 * for a on the device once per batch (the pool's policy), and the frontier
 * it learns covers the rest of the batch. */
static bench_stats_t cross_stream_pool(mem_env_t *env, bench_sizes_t sz) {
    double *samples = calloc(sz.samples, sizeof *samples);
    ordo_block_t *held[CROSS_BATCH];
    if (!samples) {
        bench_fail("out of memory");
    }
    unsigned failures = 0;
    ordo_stream_t *from = env->a, *to = env->b;
    for (size_t i = 0; i < CROSS_BATCH; ++i) {
        failures += ordo_mem_allocate(env->pool, 4096, 0, from, 0, &held[i], NULL) != ORDO_OK;
    }
    uint64_t rounds = sz.batch / CROSS_BATCH ? sz.batch / CROSS_BATCH : 1;
    for (size_t s = 0; s < sz.samples + 2; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t r = 0; r < rounds; ++r) {
            for (size_t i = 0; i < CROSS_BATCH; ++i) {
                failures += ordo_mem_deallocate(env->pool, held[i], from) != ORDO_OK;
            }
            for (size_t i = 0; i < CROSS_BATCH; ++i) {
                failures += ordo_mem_allocate(env->pool, 4096, 0, to, 0, &held[i], NULL) != ORDO_OK;
            }
            ordo_stream_t *swap = from;
            from = to, to = swap;
        }
        if (s >= 2) {
            samples[s - 2] = (double)(bench_now_ns() - t0) / (double)(rounds * CROSS_BATCH);
        }
    }
    for (size_t i = 0; i < CROSS_BATCH; ++i) {
        failures += ordo_mem_deallocate(env->pool, held[i], from) != ORDO_OK;
    }
    if (failures) {
        bench_fail("a pool allocation or free failed");
    }
    bench_stats_t stats = bench_summarise(samples, sz.samples, rounds * CROSS_BATCH);
    free(samples);
    return stats;
}

/* The hand-built alternative: record an event on the freeing stream at
 * every free; the allocating stream waits on the block's event. */
static bench_stats_t cross_stream_events(mem_env_t *env, bench_sizes_t sz) {
    double *samples = calloc(sz.samples, sizeof *samples);
    void *held[CROSS_BATCH];
    ordo_event_t *events[CROSS_BATCH];
    if (!samples) {
        bench_fail("out of memory");
    }
    unsigned failures = 0;
    for (size_t i = 0; i < CROSS_BATCH; ++i) {
        held[i] = malloc(4096);
    }
    ordo_stream_t *from = env->a, *to = env->b;
    uint64_t rounds = sz.batch / CROSS_BATCH ? sz.batch / CROSS_BATCH : 1;
    for (size_t s = 0; s < sz.samples + 2; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t r = 0; r < rounds; ++r) {
            for (size_t i = 0; i < CROSS_BATCH; ++i) { /* free on `from` */
                failures += ordo_event_create(env->device, ORDO_EVENT_PLAIN, &events[i]) != ORDO_OK;
                failures += ordo_event_record(events[i], from) != ORDO_OK;
            }
            for (size_t i = 0; i < CROSS_BATCH; ++i) { /* reuse on `to` */
                failures += ordo_stream_wait_event(to, events[i]) != ORDO_OK;
                failures += ordo_event_destroy(events[i]) != ORDO_OK;
            }
            ordo_stream_t *swap = from;
            from = to, to = swap;
        }
        if (s >= 2) {
            samples[s - 2] = (double)(bench_now_ns() - t0) / (double)(rounds * CROSS_BATCH);
        }
    }
    for (size_t i = 0; i < CROSS_BATCH; ++i) {
        free(held[i]);
    }
    if (failures) {
        bench_fail("an event call failed");
    }
    bench_stats_t stats = bench_summarise(samples, sz.samples, rounds * CROSS_BATCH);
    free(samples);
    return stats;
}

/* Verification run, untimed: every block is stamped by a task on the
 * freeing stream just before its free, and the new owner's task on the
 * other stream stamps it and checks the stamp survives a pause. A block
 * handed out before the old owner's task ran is counted unsafe. */
typedef struct stamp_task {
    uint32_t *words;
    uint32_t stamp;
    _Atomic uint64_t *unsafe;
} stamp_task_t;

static ordo_status_t stamp_run(void *ctx) {
    stamp_task_t *t = ctx;
    for (size_t i = 0; i < 1024; ++i) {
        t->words[i] = t->stamp;
    }
    for (volatile int spin = 0; spin < 2000; ++spin) {
    }
    for (size_t i = 0; i < 1024; ++i) {
        if (t->words[i] != t->stamp) {
            atomic_fetch_add(t->unsafe, 1);
            break;
        }
    }
    return ORDO_OK;
}

static ordo_status_t stamp_launch(void *ctx, ordo_stream_t *stream) {
    return ordo_stream_host_task(stream, stamp_run, ctx);
}

static uint64_t cross_stream_verify(mem_env_t *env, size_t rounds, uint64_t *out_checked) {
    _Atomic uint64_t unsafe = 0;
    stamp_task_t *tasks = calloc(rounds * CROSS_BATCH, sizeof *tasks);
    ordo_block_t *held[CROSS_BATCH];
    if (!tasks) {
        bench_fail("out of memory");
    }
    unsigned failures = 0;
    ordo_stream_t *from = env->a, *to = env->b;
    for (size_t i = 0; i < CROSS_BATCH; ++i) {
        failures += ordo_mem_allocate(env->pool, 4096, 0, from, 0, &held[i], NULL) != ORDO_OK;
    }
    size_t n = 0;
    for (size_t r = 0; r < rounds; ++r) {
        for (size_t i = 0; i < CROSS_BATCH; ++i, ++n) {
            ordo_buffer_t *buffer = NULL;
            void *ptr = NULL;
            failures += ordo_block_buffer(held[i], &buffer) != ORDO_OK;
            failures += ordo_block_ptr(held[i], &ptr) != ORDO_OK;
            tasks[n] = (stamp_task_t){ptr, (uint32_t)n + 1, &unsafe};
            ordo_access_t access = {buffer, ORDO_ACCESS_WRITE};
            failures += ordo_tracker_submit(env->tracker, from, &access, 1, stamp_launch,
                                            &tasks[n]) != ORDO_OK;
            failures += ordo_mem_deallocate(env->pool, held[i], from) != ORDO_OK;
        }
        for (size_t i = 0; i < CROSS_BATCH; ++i) {
            failures += ordo_mem_allocate(env->pool, 4096, 0, to, 0, &held[i], NULL) != ORDO_OK;
        }
        ordo_stream_t *swap = from;
        from = to, to = swap;
    }
    for (size_t i = 0; i < CROSS_BATCH; ++i) {
        failures += ordo_mem_deallocate(env->pool, held[i], from) != ORDO_OK;
    }
    failures += ordo_stream_synchronize(env->a, ordo_deadline_after_ms(30000)) != ORDO_OK;
    failures += ordo_stream_synchronize(env->b, ordo_deadline_after_ms(30000)) != ORDO_OK;
    if (failures) {
        bench_fail("the verification run failed");
    }
    free(tasks);
    *out_checked = n;
    return atomic_load(&unsafe);
}

static void bench_mem_cross_stream(const bench_options_t *options) {
    if (!bench_selected(options, "mem_cross_stream")) {
        return;
    }
    bench_sizes_t sz = bench_pick(options, 31, 4096);
    mem_env_t env;
    env_open(&env);
    bench_pin(0);
    bench_stats_t events = cross_stream_events(&env, sz);
    bench_stats_t pool = cross_stream_pool(&env, sz);
    bench_unpin();
    bench_emit("mem_cross_stream", "event_per_free", &events, NULL, 0);
    bench_ratio_t r = {"event_per_free", pool.median_ns / events.median_ns};
    bench_emit("mem_cross_stream", "ordo", &pool, &r, 1);
    uint64_t checked = 0;
    uint64_t unsafe = cross_stream_verify(&env, options->quick ? 4 : 64, &checked);
    printf("{\"name\":\"mem_cross_stream\",\"impl\":\"ordo_verify\",\"blocks_checked\":%llu,"
           "\"unsafe\":%llu}\n",
           (unsigned long long)checked, (unsigned long long)unsafe);
    fflush(stdout);
    env_close(&env);
    if (unsafe) {
        bench_fail("mem_cross_stream handed out blocks another stream could still touch");
    }
}

/* ---- mem_fragmentation ----------------------------------------------- */

typedef struct frag_result {
    uint64_t peak_live;
    uint64_t peak_reserved;
} frag_result_t;

/* A random trace: each step frees a random live block (more likely as the
 * live set grows) or allocates a log-uniform size, on one of two streams. */
#define FRAG_LIVE_MAX 512

static frag_result_t fragmentation_pool(mem_env_t *env, size_t steps) {
    ordo_block_t *live[FRAG_LIVE_MAX];
    size_t bytes[FRAG_LIVE_MAX];
    size_t count = 0;
    uint64_t seed = 0xf4a9, live_bytes = 0;
    frag_result_t result = {0, 0};
    unsigned failures = 0;
    for (size_t i = 0; i < steps; ++i) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        ordo_stream_t *stream = (seed >> 40) & 1 ? env->a : env->b;
        if (count && (count == FRAG_LIVE_MAX || seed % FRAG_LIVE_MAX < count / 2 + 64)) {
            size_t k = (seed >> 20) % count;
            failures += ordo_mem_deallocate(env->pool, live[k], stream) != ORDO_OK;
            live_bytes -= bytes[k];
            live[k] = live[count - 1];
            bytes[k] = bytes[--count];
        } else {
            size_t size;
            sizes_make(&size, 1, seed);
            failures +=
                ordo_mem_allocate(env->pool, size, 0, stream, 0, &live[count], NULL) != ORDO_OK;
            bytes[count++] = size;
            live_bytes += size;
        }
        ordo_mem_pool_stats_t stats;
        failures += ordo_mem_pool_stats(env->pool, &stats) != ORDO_OK;
        if (live_bytes > result.peak_live) {
            result.peak_live = live_bytes;
        }
        if (stats.bytes_reserved > result.peak_reserved) {
            result.peak_reserved = stats.bytes_reserved;
        }
    }
    while (count) {
        failures += ordo_mem_deallocate(env->pool, live[--count], env->a) != ORDO_OK;
    }
    if (failures) {
        bench_fail("a pool call failed in the fragmentation trace");
    }
    return result;
}

static void bench_mem_fragmentation(const bench_options_t *options) {
    if (!bench_selected(options, "mem_fragmentation")) {
        return;
    }
    mem_env_t env;
    env_open(&env);
    uint64_t t0 = bench_now_ns();
    size_t steps = options->quick ? 2000 : 200000;
    frag_result_t r = fragmentation_pool(&env, steps);
    double per_step = (double)(bench_now_ns() - t0) / (double)steps;
    printf("{\"name\":\"mem_fragmentation\",\"impl\":\"ordo\",\"steps\":%zu,"
           "\"peak_live_bytes\":%llu,\"peak_reserved_bytes\":%llu,\"ratio\":%.3f,"
           "\"ns_per_step\":%.1f}\n",
           steps, (unsigned long long)r.peak_live, (unsigned long long)r.peak_reserved,
           r.peak_live ? (double)r.peak_reserved / (double)r.peak_live : 0.0, per_step);
    fflush(stdout);
    bench_line_printed();
    env_close(&env);
}

void bench_memory_all(const bench_options_t *options) {
    bench_mem_same_stream(options);
    bench_mem_cross_stream(options);
    bench_mem_fragmentation(options);
}
