/* Benchmarks of CPU streams against a hand-built task queue. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "bench_channels.h"
#include "ordo/device.h"
#include "ordo/stream.h"

/* ---- the baseline: a mutex + condition variable task queue ---------- */

typedef struct mq_task {
    ordo_host_fn fn;
    void *ctx;
} mq_task_t;

typedef struct mutex_queue {
    pthread_mutex_t mutex;
    pthread_cond_t has_work;
    pthread_cond_t drained;
    mq_task_t *ring;
    size_t capacity; /* a power of two; grows when full */
    size_t head;     /* next to run */
    size_t tail;     /* next free */
    uint64_t done;
    uint64_t submitted;
    int stop;
    pthread_t worker;
} mutex_queue_t;

static void *mq_worker(void *arg) {
    mutex_queue_t *q = arg;
    pthread_mutex_lock(&q->mutex);
    for (;;) {
        while (q->head == q->tail && !q->stop) {
            pthread_cond_wait(&q->has_work, &q->mutex);
        }
        if (q->head == q->tail) {
            break;
        }
        mq_task_t task = q->ring[q->head++ & (q->capacity - 1)];
        pthread_mutex_unlock(&q->mutex);
        task.fn(task.ctx);
        pthread_mutex_lock(&q->mutex);
        if (++q->done == q->submitted) {
            pthread_cond_broadcast(&q->drained);
        }
    }
    pthread_mutex_unlock(&q->mutex);
    return NULL;
}

static void mq_init(mutex_queue_t *q, int worker_slot) {
    pthread_mutex_init(&q->mutex, NULL);
    pthread_cond_init(&q->has_work, NULL);
    pthread_cond_init(&q->drained, NULL);
    q->capacity = 1024;
    q->ring = malloc(q->capacity * sizeof *q->ring);
    q->head = q->tail = 0;
    q->done = q->submitted = 0;
    q->stop = 0;
    if (!q->ring || bench_thread_start(&q->worker, worker_slot, mq_worker, q) != 0) {
        bench_fail("cannot start the baseline queue");
    }
}

static void mq_push(mutex_queue_t *q, ordo_host_fn fn, void *ctx) {
    pthread_mutex_lock(&q->mutex);
    if (q->tail - q->head == q->capacity) {
        mq_task_t *bigger = malloc(2 * q->capacity * sizeof *bigger);
        if (!bigger) {
            bench_fail("baseline queue out of memory");
        }
        for (size_t i = q->head; i != q->tail; ++i) {
            bigger[i & (2 * q->capacity - 1)] = q->ring[i & (q->capacity - 1)];
        }
        free(q->ring);
        q->ring = bigger;
        q->capacity *= 2;
    }
    q->ring[q->tail++ & (q->capacity - 1)] = (mq_task_t){fn, ctx};
    q->submitted++;
    pthread_cond_signal(&q->has_work);
    pthread_mutex_unlock(&q->mutex);
}

static void mq_drain(mutex_queue_t *q) {
    pthread_mutex_lock(&q->mutex);
    while (q->done != q->submitted) {
        pthread_cond_wait(&q->drained, &q->mutex);
    }
    pthread_mutex_unlock(&q->mutex);
}

static void mq_fini(mutex_queue_t *q) {
    pthread_mutex_lock(&q->mutex);
    q->stop = 1;
    pthread_cond_signal(&q->has_work);
    pthread_mutex_unlock(&q->mutex);
    pthread_join(q->worker, NULL);
    free(q->ring);
    pthread_cond_destroy(&q->drained);
    pthread_cond_destroy(&q->has_work);
    pthread_mutex_destroy(&q->mutex);
}

static ordo_status_t empty_task(void *ctx) {
    (void)ctx;
    return ORDO_OK;
}

/* ---- stream_task_chain ------------------------------------------------ */

/* Per-task time of `tasks` empty tasks through the baseline queue and
 * through an ordo stream, the worker on CPU slot worker_slot and the
 * submitting thread on slot 0. */
static void task_chain(const bench_options_t *options, ordo_device_t *device, int worker_slot,
                       const char *baseline_impl, const char *ordo_impl) {
    const char *name = "stream_task_chain";
    const uint64_t tasks = options->quick ? 10000 : 1000000;
    const size_t samples = options->quick ? 2 : 7;
    double *baseline_times = calloc(samples, sizeof(double));
    double *ordo_times = calloc(samples, sizeof(double));
    if (!baseline_times || !ordo_times) {
        bench_fail("out of memory");
    }
    /* The two alternate sample by sample, so a noisy spell on the machine
     * hits both. */
    for (size_t s = 0; s < samples; ++s) {
        bench_pin(0);
        mutex_queue_t q;
        mq_init(&q, worker_slot);
        uint64_t t0 = bench_now_ns();
        for (uint64_t i = 0; i < tasks; ++i) {
            mq_push(&q, empty_task, NULL);
        }
        mq_drain(&q);
        baseline_times[s] = (double)(bench_now_ns() - t0) / (double)tasks;
        mq_fini(&q);

        /* A worker thread inherits its creator's CPUs: created from
         * worker_slot, the stream's worker runs where the baseline's does. */
        ordo_stream_t *stream;
        bench_pin(worker_slot);
        if (ordo_stream_create(device, 0, &stream) != ORDO_OK) {
            bench_fail("cannot create a stream");
        }
        bench_pin(0);
        t0 = bench_now_ns();
        for (uint64_t i = 0; i < tasks; ++i) {
            if (ordo_stream_host_task(stream, empty_task, NULL) != ORDO_OK) {
                bench_fail("host task refused");
            }
        }
        if (ordo_stream_synchronize(stream, ordo_deadline_after_ms(300000)) != ORDO_OK) {
            bench_fail("synchronize failed");
        }
        ordo_times[s] = (double)(bench_now_ns() - t0) / (double)tasks;
        ordo_stream_destroy(stream);
    }
    bench_unpin();
    bench_stats_t baseline = bench_summarise(baseline_times, samples, tasks);
    bench_stats_t ordo = bench_summarise(ordo_times, samples, tasks);
    bench_emit(name, baseline_impl, &baseline, NULL, 0);
    bench_ratio_t ratio = {baseline_impl, ordo.median_ns / baseline.median_ns};
    bench_emit(name, ordo_impl, &ordo, &ratio, 1);
    free(baseline_times);
    free(ordo_times);
}

static void bench_task_chain(const bench_options_t *options, ordo_device_t *device) {
    /* Worker and submitter on two CPUs (the comparison the target is set
     * for), then sharing one (no cache line crosses cores). */
    task_chain(options, device, 1, "mutex_queue", "ordo");
    task_chain(options, device, 0, "mutex_queue_one_cpu", "ordo_one_cpu");
}

/* ---- stream_cross_pingpong -------------------------------------------- */

static void bench_cross_pingpong(const bench_options_t *options, ordo_device_t *device) {
    const char *name = "stream_cross_pingpong";
    const uint64_t rounds = options->quick ? 200 : 20000;
    const size_t samples = options->quick ? 2 : 15;
    double *times = calloc(samples, sizeof *times);
    if (!times) {
        bench_fail("out of memory");
    }
    for (size_t s = 0; s < samples; ++s) {
        ordo_stream_t *a = NULL;
        ordo_stream_t *b = NULL;
        ordo_signal_t *start = NULL;
        ordo_signal_t *ab = NULL;
        ordo_signal_t *ba = NULL;
        /* Each worker inherits its creator's CPU: A on one, B on the
         * other, as the two threads of signal_pingpong are pinned. */
        bench_pin(0);
        int ok = ordo_stream_create(device, 0, &a) == ORDO_OK;
        bench_pin(1);
        ok = ok && ordo_stream_create(device, 0, &b) == ORDO_OK;
        bench_unpin();
        if (!ok || ordo_signal_create(0, &start) != ORDO_OK ||
            ordo_signal_create(0, &ab) != ORDO_OK || ordo_signal_create(0, &ba) != ORDO_OK) {
            bench_fail("cannot set up two streams");
        }
        /* Everything is enqueued first, behind a start signal, so the
         * measurement is the streams handing over to each other. */
        unsigned failures = ordo_stream_wait(a, start, 1) != ORDO_OK;
        for (uint64_t i = 1; i <= rounds; ++i) {
            failures += ordo_stream_wait(a, ba, i - 1) != ORDO_OK;
            failures += ordo_stream_signal(a, ab, i) != ORDO_OK;
            failures += ordo_stream_wait(b, ab, i) != ORDO_OK;
            failures += ordo_stream_signal(b, ba, i) != ORDO_OK;
        }
        if (failures) {
            bench_fail("a stream refused a wait or a signal");
        }
        uint64_t t0 = bench_now_ns();
        ordo_signal_advance(start, 1);
        if (ordo_signal_wait(ba, rounds, ordo_deadline_after_ms(300000)) != ORDO_OK) {
            bench_fail("cross-stream ping-pong did not finish");
        }
        times[s] = (double)(bench_now_ns() - t0) / (double)rounds;
        ordo_stream_destroy(a);
        ordo_stream_destroy(b);
        ordo_signal_destroy(start);
        ordo_signal_destroy(ab);
        ordo_signal_destroy(ba);
    }
    bench_stats_t ordo = bench_summarise(times, samples, rounds);
    bench_stats_t reference =
        bench_run_pingpong(&channel_ordo, options->quick ? 5 : 30, options->quick ? 20 : 20000);
    bench_emit(name, "signal_pingpong_reference", &reference, NULL, 0);
    bench_ratio_t ratio = {"signal_pingpong/ordo", ordo.median_ns / reference.median_ns};
    bench_emit(name, "ordo", &ordo, &ratio, 1);
    free(times);
}

void bench_stream_all(const bench_options_t *options) {
    int chain = bench_selected(options, "stream_task_chain");
    int cross = bench_selected(options, "stream_cross_pingpong");
    if (!chain && !cross) {
        return;
    }
    ordo_device_t *device;
    if (ordo_device_open("cpu", &device) != ORDO_OK) {
        bench_fail("cannot open the cpu device");
    }
    if (chain) {
        bench_task_chain(options, device);
    }
    if (cross) {
        bench_cross_pingpong(options, device);
    }
    ordo_device_release(device);
}
