/* Benchmarks of the generic event pool (src/hal/event_pool.h) against
 * creating and destroying a backend event each time. The backend is a
 * stand-in whose events are 64-byte host blocks from ordo__alloc: the pool's
 * own cost, with no device behind it. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "base/alloc.h"
#include "bench.h"
#include "ordo/device.h"
#include "ordo/event.h"
#include "hal/event_pool.h"

#define BENCH_EVENT_BYTES 64

static ordo_status_t host_event_create(void *user, ordo_event_kind_t kind, void **out_event) {
    (void)user;
    (void)kind;
    void *event = ordo__alloc(BENCH_EVENT_BYTES, 0);
    if (!event) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    *out_event = event;
    return ORDO_OK;
}

static void host_event_destroy(void *user, void *event) {
    (void)user;
    ordo__dealloc(event, BENCH_EVENT_BYTES, 0);
}

static const event_pool_backend_t host_backend = {host_event_create, host_event_destroy, NULL};

static event_pool_t *pool_open(void) {
    event_pool_t *pool;
    if (ordo__event_pool_create(&host_backend, ORDO_EVENT_PLAIN, NULL, &pool, "ordo bench") !=
        ORDO_OK) {
        bench_fail("cannot create an event pool");
    }
    return pool;
}

/* Times sz.samples batches of acquire+release on pool into samples. */
static void pool_cycle(event_pool_t *pool, bench_sizes_t sz, double *samples) {
    const size_t warmup = 2;
    unsigned failures = 0;
    for (size_t s = 0; s < sz.samples + warmup; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            void *event;
            int pooled;
            failures += ordo__event_pool_acquire(pool, &event, &pooled) != ORDO_OK;
            failures += ordo__event_pool_release(pool, event, pooled) != ORDO_OK;
        }
        if (s >= warmup) {
            samples[s - warmup] = (double)(bench_now_ns() - t0) / (double)sz.batch;
        }
    }
    if (failures) {
        bench_fail("an acquire or release failed");
    }
}

/* ---- event_pool: one thread ------------------------------------------ */

static bench_stats_t run_create_destroy(bench_sizes_t sz) {
    /* Through the same function pointers the pool would call. */
    const event_pool_backend_t *volatile backend = &host_backend;
    double *samples = calloc(sz.samples, sizeof *samples);
    if (!samples) {
        bench_fail("out of memory");
    }
    unsigned failures = 0;
    for (size_t s = 0; s < sz.samples; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            void *event = NULL;
            failures += backend->create(backend->user, ORDO_EVENT_PLAIN, &event) != ORDO_OK;
            backend->destroy(backend->user, event);
        }
        samples[s] = (double)(bench_now_ns() - t0) / (double)sz.batch;
    }
    if (failures) {
        bench_fail("the backend failed to create an event");
    }
    bench_stats_t stats = bench_summarise(samples, sz.samples, sz.batch);
    free(samples);
    return stats;
}

static bench_stats_t run_pool_single(bench_sizes_t sz) {
    event_pool_t *pool = pool_open();
    double *samples = calloc(sz.samples, sizeof *samples);
    if (!samples) {
        bench_fail("out of memory");
    }
    bench_pin(0);
    pool_cycle(pool, sz, samples);
    if (ordo__event_pool_destroy(pool) != ORDO_OK) {
        bench_fail("cannot destroy the event pool");
    }
    bench_stats_t stats = bench_summarise(samples, sz.samples, sz.batch);
    free(samples);
    return stats;
}

/* ---- event_pool_mt: two threads on one pool --------------------------- */

typedef struct pool_worker {
    event_pool_t *pool;
    bench_sizes_t sz;
    double *samples;
    _Atomic int *ready;
} pool_worker_t;

static void *pool_worker_run(void *arg) {
    pool_worker_t *w = arg;
    /* Both start together, so the batches overlap. */
    atomic_fetch_add(w->ready, 1);
    while (atomic_load(w->ready) < 2) {
    }
    pool_cycle(w->pool, w->sz, w->samples);
    return NULL;
}

static bench_stats_t run_pool_pair(bench_sizes_t sz) {
    event_pool_t *pool = pool_open();
    double *samples = calloc(2 * sz.samples, sizeof *samples);
    if (!samples) {
        bench_fail("out of memory");
    }
    _Atomic int ready = 0;
    pool_worker_t workers[2];
    pthread_t threads[2];
    for (int i = 0; i < 2; ++i) {
        workers[i] = (pool_worker_t){pool, sz, samples + (size_t)i * sz.samples, &ready};
        if (bench_thread_start(&threads[i], i, pool_worker_run, &workers[i]) != 0) {
            bench_fail("cannot start a worker");
        }
    }
    for (int i = 0; i < 2; ++i) {
        pthread_join(threads[i], NULL);
    }
    /* The workers have exited: their cached events are back in the pool. */
    if (ordo__event_pool_destroy(pool) != ORDO_OK) {
        bench_fail("cannot destroy the event pool");
    }
    bench_stats_t stats = bench_summarise(samples, 2 * sz.samples, sz.batch);
    free(samples);
    return stats;
}

/* The whole public path on the CPU device: ordo_event_create/destroy,
 * which adds handle checks to the pool's work. */
static bench_stats_t run_device_events(bench_sizes_t sz) {
    ordo_device_t *device;
    if (ordo_device_open("cpu", &device) != ORDO_OK) {
        bench_fail("cannot open the cpu device");
    }
    double *samples = calloc(sz.samples, sizeof *samples);
    if (!samples) {
        bench_fail("out of memory");
    }
    unsigned failures = 0;
    for (size_t s = 0; s < sz.samples; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            ordo_event_t *event = NULL;
            failures += ordo_event_create(device, ORDO_EVENT_PLAIN, &event) != ORDO_OK;
            failures += ordo_event_destroy(event) != ORDO_OK;
        }
        samples[s] = (double)(bench_now_ns() - t0) / (double)sz.batch;
    }
    if (failures) {
        bench_fail("an event create or destroy failed");
    }
    ordo_device_release(device);
    bench_stats_t stats = bench_summarise(samples, sz.samples, sz.batch);
    free(samples);
    return stats;
}

void bench_event_pool_generic(const bench_options_t *options) {
    int single = bench_selected(options, "event_pool");
    int pair = bench_selected(options, "event_pool_mt");
    if (!single && !pair) {
        return;
    }
    /* Both lines are judged against the baseline of the same run. */
    bench_stats_t create_destroy = run_create_destroy(bench_pick(options, 200, 10000));
    bench_stats_t ordo = run_pool_single(bench_pick(options, 200, 10000));
    if (single) {
        bench_emit("event_pool", "create_destroy", &create_destroy, NULL, 0);
        bench_ratio_t ratio = {"create_destroy", ordo.median_ns / create_destroy.median_ns};
        bench_emit("event_pool", "ordo", &ordo, &ratio, 1);
        bench_stats_t device = run_device_events(bench_pick(options, 200, 10000));
        ratio.ratio = device.median_ns / create_destroy.median_ns;
        bench_emit("event_pool", "ordo_event_create_destroy", &device, &ratio, 1);
    }
    if (pair) {
        bench_stats_t mt = run_pool_pair(bench_pick(options, 200, 10000));
        bench_ratio_t ratios[] = {{"event_pool/ordo", mt.median_ns / ordo.median_ns},
                                  {"create_destroy", mt.median_ns / create_destroy.median_ns}};
        bench_emit("event_pool_mt", "ordo", &mt, ratios, 2);
    }
}
