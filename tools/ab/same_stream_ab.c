/* mem_same_stream for two builds of the library in one process.
 *
 * Runs of `ordo bench` minutes apart land in different spells of a shared
 * machine, and a change worth a few percent drowns in them. This program
 * links two builds whose symbols scripts/ab_same_stream.sh prefixed with
 * a_ and b_, opens a pool of each, and alternates them in short batches
 * (which goes first alternates too), so that a slow spell hits both. Each
 * batch is the loop of `ordo bench mem_same_stream`: free the oldest of 16
 * live blocks on one stream, allocate the next log-uniform size (64 B to
 * 1 MiB) in its place. It prints each build's median and tenth percentile
 * per pair, and the median and quartiles of the per-round ratio B/A.
 *
 * usage: same_stream_ab [ROUNDS [PAIRS_PER_BATCH]] */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "ordo/device.h"
#include "ordo/memory.h"
#include "ordo/stream.h"
#include "ordo/tracker.h"

#define DECLARE_BUILD(P)                                                                           \
    ordo_status_t P##ordo_device_open(const char *, ordo_device_t **);                             \
    ordo_status_t P##ordo_tracker_create(ordo_device_t *, ordo_tracker_t **);                      \
    ordo_status_t P##ordo_mem_direct_create(ordo_device_t *, ordo_mem_resource_t **);              \
    ordo_status_t P##ordo_mem_pool_create(ordo_tracker_t *, ordo_mem_resource_t *,                 \
                                          const ordo_mem_pool_config_t *, ordo_mem_resource_t **); \
    ordo_status_t P##ordo_stream_create(ordo_device_t *, int, ordo_stream_t **);                   \
    ordo_status_t P##ordo_mem_allocate(ordo_mem_resource_t *, size_t, size_t, ordo_stream_t *,     \
                                       uint32_t, ordo_block_t **, void **);                        \
    ordo_status_t P##ordo_mem_deallocate(ordo_mem_resource_t *, ordo_block_t *, ordo_stream_t *);

DECLARE_BUILD(a_)
DECLARE_BUILD(b_)

#define WINDOW 16
#define SIZES 4096

typedef struct build {
    ordo_status_t (*allocate)(ordo_mem_resource_t *, size_t, size_t, ordo_stream_t *, uint32_t,
                              ordo_block_t **, void **);
    ordo_status_t (*deallocate)(ordo_mem_resource_t *, ordo_block_t *, ordo_stream_t *);
    ordo_mem_resource_t *pool;
    ordo_stream_t *stream;
    ordo_block_t *window[WINDOW];
    size_t next;
} build_t;

static size_t sizes[SIZES];

/* The sizes of `ordo bench mem_same_stream` (tools/ordo/bench_memory.c). */
static void sizes_make(uint64_t seed) {
    for (size_t i = 0; i < SIZES; ++i) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        unsigned shift = 6 + (unsigned)(seed % 15);
        size_t lo = (size_t)1 << shift;
        sizes[i] = lo + (size_t)((seed >> 8) % lo);
        if (sizes[i] > ((size_t)1 << 20)) {
            sizes[i] = (size_t)1 << 20;
        }
    }
}

static uint64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static void fail(const char *what) {
    fprintf(stderr, "same_stream_ab: %s\n", what);
    exit(1);
}

/* One batch of pairs; nanoseconds per pair. */
static double batch(build_t *b, int pairs) {
    unsigned failures = 0;
    uint64_t t0 = now_ns();
    for (int k = 0; k < pairs; ++k) {
        size_t slot = b->next % WINDOW;
        if (b->window[slot]) {
            failures += b->deallocate(b->pool, b->window[slot], b->stream) != ORDO_OK;
        }
        failures += b->allocate(b->pool, sizes[b->next % SIZES], 0, b->stream, 0, &b->window[slot],
                                NULL) != ORDO_OK;
        ++b->next;
    }
    double per_pair = (double)(now_ns() - t0) / pairs;
    if (failures) {
        fail("an allocation or a free failed");
    }
    return per_pair;
}

static int by_value(const void *x, const void *y) {
    double a = *(const double *)x, b = *(const double *)y;
    return a < b ? -1 : a > b;
}

static double at(double *v, int n, double q) {
    return v[(int)(q * (n - 1))];
}

#define OPEN_BUILD(P, b)                                                                           \
    do {                                                                                           \
        ordo_device_t *device;                                                                     \
        ordo_tracker_t *tracker;                                                                   \
        ordo_mem_resource_t *direct;                                                               \
        if (P##ordo_device_open("cpu:0", &device) != ORDO_OK ||                                    \
            P##ordo_tracker_create(device, &tracker) != ORDO_OK ||                                 \
            P##ordo_mem_direct_create(device, &direct) != ORDO_OK ||                               \
            P##ordo_mem_pool_create(tracker, direct, NULL, &(b)->pool) != ORDO_OK ||               \
            P##ordo_stream_create(device, 0, &(b)->stream) != ORDO_OK) {                           \
            fail("cannot set up a pool of build " #P);                                             \
        }                                                                                          \
        (b)->allocate = P##ordo_mem_allocate;                                                      \
        (b)->deallocate = P##ordo_mem_deallocate;                                                  \
    } while (0)

int main(int argc, char **argv) {
    int rounds = argc > 1 ? atoi(argv[1]) : 300;
    int pairs = argc > 2 ? atoi(argv[2]) : 20000;
    if (rounds < 4 || pairs < 1) {
        fail("usage: same_stream_ab [ROUNDS >= 4 [PAIRS_PER_BATCH >= 1]]");
    }
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(sched_getcpu(), &one);
    (void)sched_setaffinity(0, sizeof one, &one);
    sizes_make(0x5eed);
    static build_t a, b;
    OPEN_BUILD(a_, &a);
    OPEN_BUILD(b_, &b);
    double *ta = calloc((size_t)rounds, sizeof *ta), *tb = calloc((size_t)rounds, sizeof *tb);
    double *ratio = calloc((size_t)rounds, sizeof *ratio);
    if (!ta || !tb || !ratio) {
        fail("out of memory");
    }
    for (int warm = 0; warm < 5; ++warm) {
        (void)batch(&a, pairs);
        (void)batch(&b, pairs);
    }
    for (int r = 0; r < rounds; ++r) {
        if (r & 1) {
            tb[r] = batch(&b, pairs);
            ta[r] = batch(&a, pairs);
        } else {
            ta[r] = batch(&a, pairs);
            tb[r] = batch(&b, pairs);
        }
        ratio[r] = tb[r] / ta[r];
    }
    qsort(ta, (size_t)rounds, sizeof *ta, by_value);
    qsort(tb, (size_t)rounds, sizeof *tb, by_value);
    qsort(ratio, (size_t)rounds, sizeof *ratio, by_value);
    printf("{\"name\":\"mem_same_stream_ab\",\"rounds\":%d,\"pairs_per_batch\":%d,"
           "\"a_median_ns\":%.2f,\"a_p10_ns\":%.2f,\"b_median_ns\":%.2f,\"b_p10_ns\":%.2f,"
           "\"b_over_a_median\":%.4f,\"b_over_a_q1\":%.4f,\"b_over_a_q3\":%.4f}\n",
           rounds, pairs, at(ta, rounds, 0.5), at(ta, rounds, 0.1), at(tb, rounds, 0.5),
           at(tb, rounds, 0.1), at(ratio, rounds, 0.5), at(ratio, rounds, 0.25),
           at(ratio, rounds, 0.75));
    free(ta);
    free(tb);
    free(ratio);
    return 0;
}
