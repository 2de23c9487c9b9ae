/* Benchmarks of the asynchronous waiter (ordo/waiter.h).
 *
 * waiter_latency: from a signal to the start of its wait's callback, the
 * waiter having been idle for 1 to 1.2 ms before (so its threads sleep).
 * The baseline, poll_waiter, is the common hand-built design: a thread
 * that, every 100 us, takes a mutex, checks a list of (signal, value)
 * pairs and runs the callbacks of those reached.
 *
 * waiter_register, waiter_cancel: 100,000 waits made pending (on 16
 * signals, each with a deadline, the deadlines shuffled), then all
 * cancelled in the order they were made; time per operation. The
 * baseline, timepoint, arms and cancels as many caller-owned timepoints on
 * the same signals: the primitive the waiter is built on, without ids,
 * deadlines or dispatch. ordo_no_deadline: waits without a deadline. The
 * _scattered cancel lines cancel in a shuffled order instead, which makes
 * both sides pay cache misses (100,000 waits do not fit in a core's
 * cache). */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"
#include "ordo/signal.h"
#include "ordo/timepoint.h"
#include "ordo/waiter.h"

/* ---- poll_waiter: the baseline ------------------------------------------ */

typedef struct poll_item {
    ordo_signal_t *signal;
    uint64_t value;
    void (*fn)(void *ctx);
    void *ctx;
} poll_item_t;

typedef struct poll_waiter {
    pthread_mutex_t lock;
    poll_item_t *items; /* under lock */
    size_t len;
    size_t capacity;
    _Atomic int stop;
    pthread_t thread;
} poll_waiter_t;

#define POLL_INTERVAL_NS 100000L

static void *poll_main(void *arg) {
    poll_waiter_t *p = arg;
    poll_item_t ready[64];
    while (!atomic_load_explicit(&p->stop, memory_order_relaxed)) {
        size_t n = 0;
        pthread_mutex_lock(&p->lock);
        for (size_t i = 0; i < p->len && n < 64;) {
            uint64_t value = 0;
            ordo_status_t st = ordo_signal_query(p->items[i].signal, &value);
            if (st != ORDO_OK || value >= p->items[i].value) {
                ready[n++] = p->items[i];
                p->items[i] = p->items[--p->len];
            } else {
                ++i;
            }
        }
        pthread_mutex_unlock(&p->lock);
        for (size_t i = 0; i < n; ++i) {
            ready[i].fn(ready[i].ctx);
        }
        struct timespec interval = {0, POLL_INTERVAL_NS};
        nanosleep(&interval, NULL);
    }
    return NULL;
}

static void poll_open(poll_waiter_t *p) {
    pthread_mutex_init(&p->lock, NULL);
    p->capacity = 16;
    p->len = 0;
    p->items = malloc(p->capacity * sizeof *p->items);
    atomic_init(&p->stop, 0);
    if (!p->items || pthread_create(&p->thread, NULL, poll_main, p) != 0) {
        bench_fail("cannot start the poll waiter");
    }
}

static void poll_register(poll_waiter_t *p, ordo_signal_t *signal, uint64_t value,
                          void (*fn)(void *), void *ctx) {
    pthread_mutex_lock(&p->lock);
    if (p->len == p->capacity) {
        poll_item_t *items = realloc(p->items, 2 * p->capacity * sizeof *items);
        if (!items) {
            bench_fail("out of memory");
        }
        p->items = items;
        p->capacity *= 2;
    }
    p->items[p->len++] = (poll_item_t){signal, value, fn, ctx};
    pthread_mutex_unlock(&p->lock);
}

static void poll_close(poll_waiter_t *p) {
    atomic_store(&p->stop, 1);
    pthread_join(p->thread, NULL);
    pthread_mutex_destroy(&p->lock);
    free(p->items);
}

/* ---- waiter_latency -------------------------------------------------------- */

enum { IMPL_POLL = 0, IMPL_ORDO = 1, IMPL_ORDO_INLINE = 2, IMPL_COUNT = 3 };

typedef struct latency_probe {
    _Atomic uint64_t fired_at;
    ordo_signal_t *done;
    uint64_t round;
} latency_probe_t;

static void probe_stamp(latency_probe_t *probe) {
    atomic_store_explicit(&probe->fired_at, bench_now_ns(), memory_order_relaxed);
    if (ordo_signal_advance(probe->done, probe->round) != ORDO_OK) {
        bench_fail("cannot signal completion");
    }
}

static void probe_poll_fn(void *ctx) {
    probe_stamp(ctx);
}

static void probe_wait_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)id;
    if (status != ORDO_OK) {
        bench_fail("a wait did not fire");
    }
    probe_stamp(ctx);
}

/* Appends count latencies of impl to samples. */
static void run_latency(int impl, size_t count, double *samples) {
    ordo_signal_t *signal;
    latency_probe_t probe = {0, NULL, 0};
    if (ordo_signal_create(0, &signal) != ORDO_OK ||
        ordo_signal_create(0, &probe.done) != ORDO_OK) {
        bench_fail("cannot create signals");
    }
    poll_waiter_t poll;
    ordo_waiter_t *waiter = NULL;
    if (impl == IMPL_POLL) {
        poll_open(&poll);
    } else if (ordo_waiter_create(NULL, &waiter) != ORDO_OK) {
        bench_fail("cannot create a waiter");
    }
    uint64_t seed = 0x9e3779b97f4a7c15ull + (uint64_t)impl;
    for (size_t i = 0; i < count; ++i) {
        uint64_t round = i + 1;
        probe.round = round;
        if (impl == IMPL_POLL) {
            poll_register(&poll, signal, round, probe_poll_fn, &probe);
        } else if (ordo_waiter_wait(waiter, signal, round, ORDO_DEADLINE_NEVER,
                                    impl == IMPL_ORDO_INLINE ? ORDO_WAIT_INLINE : 0, probe_wait_fn,
                                    &probe, NULL) != ORDO_OK) {
            bench_fail("cannot register a wait");
        }
        struct timespec idle = {0, 1000000}; /* the waiter's threads sleep by now */
        nanosleep(&idle, NULL);
        /* Then a further 0-200 us, busy: the end of a sleep is aligned with
         * other timers (timer slack lets the kernel expire them together),
         * and a signal in step with the poller's wake-ups would flatter
         * the baseline. A real producer signals at any phase of it. */
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        uint64_t t0 = bench_now_ns() + seed % 200000u;
        while (bench_now_ns() < t0) {
        }
        t0 = bench_now_ns();
        if (ordo_signal_advance(signal, round) != ORDO_OK ||
            ordo_signal_wait(probe.done, round, ordo_deadline_after_ms(5000)) != ORDO_OK) {
            bench_fail("a wait's callback did not run");
        }
        samples[i] = (double)(atomic_load(&probe.fired_at) - t0);
    }
    if (impl == IMPL_POLL) {
        poll_close(&poll);
    } else if (ordo_waiter_destroy(waiter) != ORDO_OK) {
        bench_fail("cannot destroy the waiter");
    }
    ordo_signal_destroy(probe.done);
    ordo_signal_destroy(signal);
}

static void bench_latency(const bench_options_t *options) {
    static const char *const names[IMPL_COUNT] = {"poll_waiter", "ordo", "ordo_inline"};
    /* Samples are taken in alternating rounds, so a noisy spell on the
     * machine hits every implementation alike. */
    const size_t rounds = options->quick ? 2 : 10;
    bench_sizes_t sz = bench_pick(options, 20, 1);
    double *samples[IMPL_COUNT];
    for (int k = 0; k < IMPL_COUNT; ++k) {
        samples[k] = calloc(rounds * sz.samples, sizeof(double));
        if (!samples[k]) {
            bench_fail("out of memory");
        }
    }
    for (size_t r = 0; r < rounds; ++r) {
        for (int k = 0; k < IMPL_COUNT; ++k) {
            run_latency(k, sz.samples, samples[k] + r * sz.samples);
        }
    }
    bench_stats_t stats[IMPL_COUNT];
    for (int k = 0; k < IMPL_COUNT; ++k) {
        stats[k] = bench_summarise(samples[k], rounds * sz.samples, 1);
        free(samples[k]);
    }
    bench_emit("waiter_latency", names[IMPL_POLL], &stats[IMPL_POLL], NULL, 0);
    for (int k = IMPL_ORDO; k < IMPL_COUNT; ++k) {
        bench_ratio_t ratio = {names[IMPL_POLL], stats[k].median_ns / stats[IMPL_POLL].median_ns};
        bench_emit("waiter_latency", names[k], &stats[k], &ratio, 1);
    }
}

/* ---- waiter_register and waiter_cancel -------------------------------------- */

#define PILE_SIGNALS 16
/* A stride coprime with every pile size used: a shuffled order. */
#define PILE_STRIDE 7919u

enum {
    PILE_TIMEPOINT = 0,
    PILE_ORDO = 1,
    PILE_ORDO_NO_DEADLINE = 2,
    PILE_TIMEPOINT_SCATTERED = 3,
    PILE_ORDO_SCATTERED = 4,
    PILE_COUNT = 5
};

typedef struct pile {
    ordo_signal_t *signals[PILE_SIGNALS];
    ordo_waiter_t *waiter;
    ordo_waiter_t *waiter_scattered; /* its cancels shuffle its free list */
    ordo_wait_id_t *ids;
    ordo_timepoint_t *timepoints;
    uint64_t n;
} pile_t;

static void pile_wait_fn(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)ctx;
    (void)status;
    (void)id;
    bench_fail("a cancelled wait ran its callback");
}

static void pile_timepoint_fn(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)ctx;
    (void)status;
    (void)timepoint;
    bench_fail("a cancelled timepoint ran its callback");
}

static uint64_t pile_shuffled(const pile_t *p, uint64_t k) {
    return (k * PILE_STRIDE) % p->n;
}

/* Registers p->n waits of kind, then cancels them all; the time per
 * operation of each phase. */
static void pile_run(pile_t *p, int kind, double *out_register_ns, double *out_cancel_ns) {
    int timepoints = kind == PILE_TIMEPOINT || kind == PILE_TIMEPOINT_SCATTERED;
    int scattered = kind == PILE_TIMEPOINT_SCATTERED || kind == PILE_ORDO_SCATTERED;
    ordo_waiter_t *waiter = kind == PILE_ORDO_SCATTERED ? p->waiter_scattered : p->waiter;
    /* Deadlines far away (none expires during the run), shuffled. */
    uint64_t base = bench_now_ns() + 60ull * 1000000000u;
    unsigned failures = 0;
    uint64_t t0 = bench_now_ns();
    for (uint64_t i = 0; i < p->n; ++i) {
        ordo_signal_t *signal = p->signals[i % PILE_SIGNALS];
        uint64_t value = 1 + i / PILE_SIGNALS;
        if (timepoints) {
            failures += ordo_timepoint_arm(&p->timepoints[i], signal, value, pile_timepoint_fn,
                                           NULL) != ORDO_OK;
        } else {
            ordo_deadline_t deadline = kind == PILE_ORDO_NO_DEADLINE
                                           ? ORDO_DEADLINE_NEVER
                                           : base + pile_shuffled(p, i) * 1000u;
            failures += ordo_waiter_wait(waiter, signal, value, deadline, 0, pile_wait_fn, NULL,
                                         &p->ids[i]) != ORDO_OK;
        }
    }
    uint64_t t1 = bench_now_ns();
    for (uint64_t k = 0; k < p->n; ++k) {
        uint64_t i = scattered ? pile_shuffled(p, k) : k;
        ordo_cancel_result_t result = ORDO_CANCEL_TOO_LATE;
        if (timepoints) {
            failures += ordo_timepoint_cancel(&p->timepoints[i], &result) != ORDO_OK;
        } else {
            failures += ordo_waiter_cancel(waiter, p->ids[i], 0, &result) != ORDO_OK;
        }
        failures += result != ORDO_CANCEL_PREVENTED;
    }
    uint64_t t2 = bench_now_ns();
    if (failures) {
        bench_fail("a register or cancel failed");
    }
    *out_register_ns = (double)(t1 - t0) / (double)p->n;
    *out_cancel_ns = (double)(t2 - t1) / (double)p->n;
}

static void bench_pile(const bench_options_t *options) {
    static const char *const names[PILE_COUNT] = {"timepoint", "ordo", "ordo_no_deadline",
                                                  "timepoint_scattered", "ordo_scattered"};
    bench_sizes_t sz = bench_pick(options, 5, 100000);
    if (options->quick && sz.samples > 3) {
        sz.samples = 3;
    }
    pile_t p = {.n = sz.batch};
    for (int i = 0; i < PILE_SIGNALS; ++i) {
        if (ordo_signal_create(0, &p.signals[i]) != ORDO_OK) {
            bench_fail("cannot create signals");
        }
    }
    p.ids = calloc(p.n, sizeof *p.ids);
    p.timepoints = calloc(p.n, sizeof *p.timepoints);
    double *reg[PILE_COUNT];
    double *can[PILE_COUNT];
    for (int k = 0; k < PILE_COUNT; ++k) {
        reg[k] = calloc(sz.samples, sizeof(double));
        can[k] = calloc(sz.samples, sizeof(double));
        if (!reg[k] || !can[k]) {
            bench_fail("out of memory");
        }
    }
    if (!p.ids || !p.timepoints || ordo_waiter_create(NULL, &p.waiter) != ORDO_OK ||
        ordo_waiter_create(NULL, &p.waiter_scattered) != ORDO_OK) {
        bench_fail("cannot set up the waits");
    }
    /* One unmeasured pass grows each slab: the samples are steady state. */
    double ignored_register, ignored_cancel;
    pile_run(&p, PILE_ORDO, &ignored_register, &ignored_cancel);
    pile_run(&p, PILE_ORDO_SCATTERED, &ignored_register, &ignored_cancel);
    for (size_t s = 0; s < sz.samples; ++s) {
        for (int k = 0; k < PILE_COUNT; ++k) {
            pile_run(&p, k, &reg[k][s], &can[k][s]);
        }
    }
    for (int phase = 0; phase < 2; ++phase) {
        const char *name = phase ? "waiter_cancel" : "waiter_register";
        double **samples = phase ? can : reg;
        /* Registering does not depend on the cancel order: the scattered
         * runs only add cancel lines. */
        int count = phase ? PILE_COUNT : PILE_TIMEPOINT_SCATTERED;
        bench_stats_t stats[PILE_COUNT];
        for (int k = 0; k < count; ++k) {
            stats[k] = bench_summarise(samples[k], sz.samples, p.n);
        }
        for (int k = 0; k < count; ++k) {
            int baseline = k < PILE_TIMEPOINT_SCATTERED ? PILE_TIMEPOINT : PILE_TIMEPOINT_SCATTERED;
            bench_ratio_t ratio = {names[baseline], stats[k].median_ns / stats[baseline].median_ns};
            bench_emit(name, names[k], &stats[k], &ratio, k == baseline ? 0 : 1);
        }
    }
    if (ordo_waiter_destroy(p.waiter) != ORDO_OK ||
        ordo_waiter_destroy(p.waiter_scattered) != ORDO_OK) {
        bench_fail("cannot destroy the waiters");
    }
    for (int k = 0; k < PILE_COUNT; ++k) {
        free(reg[k]);
        free(can[k]);
    }
    for (int i = 0; i < PILE_SIGNALS; ++i) {
        ordo_signal_destroy(p.signals[i]);
    }
    free(p.ids);
    free(p.timepoints);
}

void bench_waiter_all(const bench_options_t *options) {
    int latency = bench_selected(options, "waiter_latency");
    int pile =
        bench_selected(options, "waiter_register") || bench_selected(options, "waiter_cancel");
    if (!latency && !pile) {
        return;
    }
    /* The waiter's threads inherit the creating thread's CPUs: all of them. */
    bench_unpin();
    if (latency) {
        bench_latency(options);
    }
    if (pile) {
        bench_pile(options);
    }
}
