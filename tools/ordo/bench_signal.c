/* Benchmarks of timeline signals against the primitives people hand-build. */
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include "bench.h"
#include "bench_channels.h"
#include "ordo/signal.h"

/* ---- signal_pingpong ------------------------------------------------- */

typedef struct pingpong {
    const channel_ops_t *ops;
    void *ping;
    void *pong;
    uint64_t rounds;
} pingpong_t;

static void *pingpong_responder(void *arg) {
    pingpong_t *pp = arg;
    for (uint64_t i = 1; i <= pp->rounds; ++i) {
        if (pp->ops->wait(pp->ping, i) != 0) {
            bench_fail("responder wait failed");
        }
        pp->ops->set(pp->pong, i);
    }
    return NULL;
}

bench_stats_t bench_run_pingpong(const channel_ops_t *ops, size_t sample_count, uint64_t batch) {
    bench_sizes_t sz = {sample_count, batch};
    const size_t warmup = 2;
    pingpong_t pp = {ops, ops->create(), ops->create(), (sz.samples + warmup) * sz.batch};
    if (!pp.ping || !pp.pong) {
        bench_fail("cannot create a channel");
    }
    double *samples = calloc(sz.samples, sizeof *samples);
    pthread_t responder;
    bench_pin(0);
    if (!samples || bench_thread_start(&responder, 1, pingpong_responder, &pp) != 0) {
        bench_fail("cannot start the responder");
    }
    uint64_t i = 0;
    for (size_t s = 0; s < sz.samples + warmup; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            ++i;
            ops->set(pp.ping, i);
            if (ops->wait(pp.pong, i) != 0) {
                bench_fail("initiator wait failed");
            }
        }
        if (s >= warmup) {
            samples[s - warmup] = (double)(bench_now_ns() - t0) / (double)sz.batch;
        }
    }
    pthread_join(responder, NULL);
    ops->destroy(pp.ping);
    ops->destroy(pp.pong);
    bench_stats_t stats = bench_summarise(samples, sz.samples, sz.batch);
    free(samples);
    return stats;
}

static bench_stats_t run_pingpong_sized(const channel_ops_t *ops, bench_sizes_t sz) {
    return bench_run_pingpong(ops, sz.samples, sz.batch);
}

static void bench_pingpong(const bench_options_t *options, double *out_ordo_median) {
    const char *name = "signal_pingpong";
    /* Sleeping baselines are ~100x slower per round trip: fewer of them. */
    bench_stats_t spin = run_pingpong_sized(&channel_spin, bench_pick(options, 50, 20000));
    bench_emit(name, "spin", &spin, NULL, 0);
    bench_stats_t futex = run_pingpong_sized(&channel_futex, bench_pick(options, 30, 500));
    bench_emit(name, "futex", &futex, NULL, 0);
    bench_stats_t condvar = run_pingpong_sized(&channel_condvar, bench_pick(options, 30, 500));
    bench_emit(name, "condvar", &condvar, NULL, 0);
    bench_stats_t ordo = run_pingpong_sized(&channel_ordo, bench_pick(options, 50, 20000));
    bench_ratio_t ratios[] = {{"spin", ordo.median_ns / spin.median_ns},
                              {"futex", ordo.median_ns / futex.median_ns},
                              {"condvar", ordo.median_ns / condvar.median_ns}};
    bench_emit(name, "ordo", &ordo, ratios, 3);
    *out_ordo_median = ordo.median_ns;
}

/* ---- signal_wake_idle ------------------------------------------------ */

typedef struct wake {
    const channel_ops_t *ops;
    void *channel;
    uint64_t rounds;
    _Atomic uint64_t woke_at;
    _Atomic uint64_t acked;
} wake_t;

static void *wake_sleeper(void *arg) {
    wake_t *w = arg;
    for (uint64_t i = 1; i <= w->rounds; ++i) {
        if (w->ops->wait(w->channel, i) != 0) {
            bench_fail("sleeper wait failed");
        }
        atomic_store(&w->woke_at, bench_now_ns());
        atomic_store(&w->acked, i);
    }
    return NULL;
}

/* Appends sz.samples wake-up latencies to samples. */
static void run_wake(const channel_ops_t *ops, bench_sizes_t sz, double *samples) {
    wake_t w = {.ops = ops, .channel = ops->create(), .rounds = sz.samples};
    pthread_t sleeper;
    bench_pin(0);
    if (!w.channel || bench_thread_start(&sleeper, 1, wake_sleeper, &w) != 0) {
        bench_fail("cannot start the sleeper");
    }
    for (uint64_t i = 1; i <= w.rounds; ++i) {
        struct timespec idle = {0, 500000}; /* the waiter is deep asleep by now */
        nanosleep(&idle, NULL);
        uint64_t t0 = bench_now_ns();
        ops->set(w.channel, i);
        while (atomic_load(&w.acked) < i) {
        }
        samples[i - 1] = (double)(atomic_load(&w.woke_at) - t0);
    }
    pthread_join(sleeper, NULL);
    ops->destroy(w.channel);
}

static void bench_wake_idle(const bench_options_t *options) {
    const char *name = "signal_wake_idle";
    /* Each sample is one wake-up, so a noisy spell on the machine would
     * skew whichever side ran during it: the two alternate in rounds. */
    const size_t rounds = 10;
    bench_sizes_t sz = bench_pick(options, 200, 1);
    double *futex_samples = calloc(rounds * sz.samples, sizeof(double));
    double *ordo_samples = calloc(rounds * sz.samples, sizeof(double));
    if (!futex_samples || !ordo_samples) {
        bench_fail("out of memory");
    }
    for (size_t r = 0; r < rounds; ++r) {
        run_wake(&channel_futex, sz, futex_samples + r * sz.samples);
        run_wake(&channel_ordo, sz, ordo_samples + r * sz.samples);
    }
    bench_stats_t futex = bench_summarise(futex_samples, rounds * sz.samples, 1);
    bench_stats_t ordo = bench_summarise(ordo_samples, rounds * sz.samples, 1);
    bench_emit(name, "futex", &futex, NULL, 0);
    bench_ratio_t ratio = {"futex", ordo.median_ns / futex.median_ns};
    bench_emit(name, "ordo", &ordo, &ratio, 1);
    free(futex_samples);
    free(ordo_samples);
}

/* ---- signal_set_nowait and signal_wait_reached ----------------------- */

static void atomic_fetch_max_u64(_Atomic uint64_t *word, uint64_t value) {
    uint64_t current = atomic_load_explicit(word, memory_order_relaxed);
    while (current < value &&
           !atomic_compare_exchange_weak_explicit(word, &current, value, memory_order_seq_cst,
                                                  memory_order_relaxed)) {
    }
}

static void bench_set_nowait(const bench_options_t *options) {
    const char *name = "signal_set_nowait";
    bench_sizes_t sz = bench_pick(options, 200, 10000);
    double *samples = calloc(sz.samples, sizeof *samples);
    if (!samples) {
        bench_fail("out of memory");
    }
    _Atomic uint64_t word = 0;
    uint64_t v = 0;
    for (size_t s = 0; s < sz.samples; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            atomic_fetch_max_u64(&word, ++v);
        }
        samples[s] = (double)(bench_now_ns() - t0) / (double)sz.batch;
    }
    bench_stats_t atomic = bench_summarise(samples, sz.samples, sz.batch);
    bench_emit(name, "atomic", &atomic, NULL, 0);

    ordo_signal_t *signal;
    if (ordo_signal_create(0, &signal) != ORDO_OK) {
        bench_fail("cannot create a signal");
    }
    v = 0;
    unsigned failures = 0;
    for (size_t s = 0; s < sz.samples; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            failures += ordo_signal_advance(signal, ++v) != ORDO_OK;
        }
        samples[s] = (double)(bench_now_ns() - t0) / (double)sz.batch;
    }
    ordo_signal_destroy(signal);
    if (failures) {
        bench_fail("a signal refused a value");
    }
    bench_stats_t ordo = bench_summarise(samples, sz.samples, sz.batch);
    bench_ratio_t ratio = {"atomic", ordo.median_ns / atomic.median_ns};
    bench_emit(name, "ordo", &ordo, &ratio, 1);
    free(samples);
}

static void bench_wait_reached(const bench_options_t *options) {
    const char *name = "signal_wait_reached";
    bench_sizes_t sz = bench_pick(options, 200, 10000);
    double *samples = calloc(sz.samples, sizeof *samples);
    if (!samples) {
        bench_fail("out of memory");
    }
    _Atomic uint64_t word = 100;
    unsigned misses = 0;
    for (size_t s = 0; s < sz.samples; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            misses += channel_reached_floor(&word, 1 + (k & 63)) != 0;
        }
        samples[s] = (double)(bench_now_ns() - t0) / (double)sz.batch;
    }
    if (misses) {
        bench_fail("the floor's word was not reached");
    }
    bench_stats_t floor = bench_summarise(samples, sz.samples, sz.batch);
    bench_emit(name, "call", &floor, NULL, 0);

    ordo_signal_t *signal;
    if (ordo_signal_create(100, &signal) != ORDO_OK) {
        bench_fail("cannot create a signal");
    }
    ordo_deadline_t deadline = ordo_deadline_after_ms(1000);
    unsigned failures = 0;
    for (size_t s = 0; s < sz.samples; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            failures += ordo_signal_wait(signal, 1 + (k & 63), deadline) != ORDO_OK;
        }
        samples[s] = (double)(bench_now_ns() - t0) / (double)sz.batch;
    }
    ordo_signal_destroy(signal);
    if (failures) {
        bench_fail("a wait on a reached value failed");
    }
    bench_stats_t ordo = bench_summarise(samples, sz.samples, sz.batch);
    bench_ratio_t ratio = {"call", ordo.median_ns / floor.median_ns};
    bench_emit(name, "ordo", &ordo, &ratio, 1);
    free(samples);
}

/* ---- signal_wait_any64 ----------------------------------------------- */

#define ANY_COUNT 64

typedef struct any64 {
    ordo_signal_t *signals[ANY_COUNT];
    ordo_signal_t *ack;
    uint64_t rounds;
    ordo_deadline_t deadline;
} any64_t;

static size_t any64_pick(uint64_t round) {
    return (size_t)((round * 37u) % ANY_COUNT);
}

static void *any64_producer(void *arg) {
    any64_t *a = arg;
    for (uint64_t i = 1; i <= a->rounds; ++i) {
        ordo_signal_advance(a->signals[any64_pick(i)], i);
        if (ordo_signal_wait(a->ack, i, a->deadline) != ORDO_OK) {
            bench_fail("producer wait failed");
        }
    }
    return NULL;
}

static void bench_wait_any64(const bench_options_t *options, double ordo_pingpong_median) {
    const char *name = "signal_wait_any64";
    bench_sizes_t sz = bench_pick(options, 50, 5000);
    const size_t warmup = 2;
    any64_t a = {.rounds = (sz.samples + warmup) * sz.batch,
                 .deadline = ordo_deadline_after_ms(300000)};
    for (size_t j = 0; j < ANY_COUNT; ++j) {
        if (ordo_signal_create(0, &a.signals[j]) != ORDO_OK) {
            bench_fail("cannot create a signal");
        }
    }
    if (ordo_signal_create(0, &a.ack) != ORDO_OK) {
        bench_fail("cannot create a signal");
    }
    double *samples = calloc(sz.samples, sizeof *samples);
    ordo_signal_point_t points[ANY_COUNT];
    pthread_t producer;
    bench_pin(0);
    if (!samples || bench_thread_start(&producer, 1, any64_producer, &a) != 0) {
        bench_fail("cannot start the producer");
    }
    uint64_t i = 0;
    for (size_t s = 0; s < sz.samples + warmup; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            ++i;
            for (size_t j = 0; j < ANY_COUNT; ++j) {
                points[j] = (ordo_signal_point_t){a.signals[j], i};
            }
            size_t index;
            if (ordo_signal_wait_any(points, ANY_COUNT, a.deadline, &index) != ORDO_OK ||
                index != any64_pick(i)) {
                bench_fail("wait-any returned the wrong entry");
            }
            ordo_signal_advance(a.ack, i);
        }
        if (s >= warmup) {
            samples[s - warmup] = (double)(bench_now_ns() - t0) / (double)sz.batch;
        }
    }
    pthread_join(producer, NULL);
    for (size_t j = 0; j < ANY_COUNT; ++j) {
        ordo_signal_destroy(a.signals[j]);
    }
    ordo_signal_destroy(a.ack);
    bench_stats_t ordo = bench_summarise(samples, sz.samples, sz.batch);
    free(samples);
    if (ordo_pingpong_median > 0) {
        bench_ratio_t ratio = {"signal_pingpong/ordo", ordo.median_ns / ordo_pingpong_median};
        bench_emit(name, "ordo", &ordo, &ratio, 1);
    } else {
        bench_emit(name, "ordo", &ordo, NULL, 0);
    }
}

void bench_signal_all(const bench_options_t *options) {
    double pingpong_median = 0;
    /* wait_any64 is judged against the ping-pong of the same run. */
    if (bench_selected(options, "signal_pingpong") ||
        bench_selected(options, "signal_wait_any64")) {
        bench_pingpong(options, &pingpong_median);
    }
    if (bench_selected(options, "signal_wake_idle")) {
        bench_wake_idle(options);
    }
    if (bench_selected(options, "signal_set_nowait")) {
        bench_set_nowait(options);
    }
    if (bench_selected(options, "signal_wait_reached")) {
        bench_wait_reached(options);
    }
    if (bench_selected(options, "signal_wait_any64")) {
        bench_wait_any64(options, pingpong_median);
    }
}
