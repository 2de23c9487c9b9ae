/* Benchmarks of the CUDA backend. They need a GPU: without one (or in a
 * build without cuda.h) each prints why it is skipped to stderr.
 *
 * cuda_event_pool: acquiring and releasing a stream point's event from the
 *   device's pool, against cuEventCreate + cuEventDestroy
 *   (cuda_create_destroy).
 * cuda_auto_order_<n>streams: host time per launch of a dependent kernel
 *   chain spread round-robin over n streams, ordered by a tracker from the
 *   one buffer every kernel reads and writes, against hand-placed
 *   cuEventRecord / cuStreamWaitEvent (cuda_manual).
 * cuda_replay: the cuda_auto_order_2streams chain recorded once into a
 *   graph, lowered to a CUDA graph (ORDO_GRAPH_NATIVE_REQUIRE) and replayed:
 *   host time per launch of a replay (ordo_replay) against the tracker
 *   ordering each launch (ordo_tracker), and, as cuda_replay_end_to_end,
 *   the time per launch from the first submission until both streams are
 *   done, for both.
 * cuda_graph_refresh: the cuda_replay graph lowered again at every step
 *   (ordo_graph_refresh, then ordo_graph_replay: host time per launch,
 *   ordo_refresh, every refresh an update in place) against the same
 *   kernels captured by hand on one stream and then cuGraphExecUpdate
 *   (cuda_update) or a new cuGraphInstantiate (cuda_instantiate), each
 *   followed by cuGraphLaunch.
 * cuda_signal_point: how long after it is enqueued on an idle stream the
 *   host sees a point: a CUDA event polled with cuEventQuery (event_query),
 *   a word written by cuStreamWriteValue64 and read by the host
 *   (write_value), and ordo's stream signal with points observed either
 *   way (ordo_events, ordo_memops: ORDO_CUDA_POINTS=memops).
 * cuda_signal_point_submit: the host's cost of enqueuing one point
 *   (event_record, write_value, ordo_stream_signal).
 * cuda_signal_host_wake: how long after the device reaches a point a host
 *   thread asleep in a wait for it wakes, and the CPU the process spends
 *   meanwhile (cpu_pct): a stream held at a gate (cuStreamWaitValue64 on a
 *   mapped word) with a point behind it; a waiter thread waits, the host
 *   opens the gate after a hold of 1 ms and the latency runs from the
 *   opening to the waiter's wake-up. ordo (ordo_signal_wait on the signal
 *   of ordo_stream_signal) against a host spinning on cuEventQuery
 *   (cuda_sync_spin) and the seed's polled wait: cuEventQuery every 100 us
 *   (seed_ring, seeds/000 CudaTimelineSignal::wait).
 * cuda_mem: host time per stream-ordered allocate + free pair of 4 KiB on
 *   one stream: ordo's pool over the device's default memory stack
 *   (ordo_pool) against cuMemAllocAsync + cuMemFreeAsync from the device's
 *   default memory pool with its release threshold raised so that it
 *   keeps its memory (cuda_async). */
#include <time.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ordo/ordo.h"

static const char *const names[] = {"cuda_event_pool",
                                    "cuda_auto_order_2streams",
                                    "cuda_auto_order_3streams",
                                    "cuda_auto_order_4streams",
                                    "cuda_replay",
                                    "cuda_replay_end_to_end",
                                    "cuda_graph_refresh",
                                    "cuda_signal_point",
                                    "cuda_signal_point_submit",
                                    "cuda_signal_host_wake",
                                    "cuda_mem"};

static int any_selected(const bench_options_t *options) {
    for (size_t i = 0; i < sizeof names / sizeof names[0]; ++i) {
        if (bench_selected(options, names[i])) {
            return 1;
        }
    }
    return 0;
}

#ifndef ORDO_HAVE_CUDA_H

void bench_cuda_all(const bench_options_t *options) {
    if (any_selected(options)) {
        fprintf(stderr, "ordo bench: cuda_* skipped: ordo was built without cuda.h\n");
    }
}

#else

#include "backends/cuda/cuda_internal.h"
#include "cuda_kernels.h"

static const cuda_api_t *cu;

static void check(CUresult r, const char *what) {
    if (r != CUDA_SUCCESS) {
        char detail[128];
        ordo__cuda_describe(r, detail, sizeof detail);
        fprintf(stderr, "ordo bench: %s: %s\n", what, detail);
        bench_fail(what);
    }
}

/* No wait of a benchmark is unbounded: a point the device never reaches
 * fails the run instead of hanging it. */
#define BENCH_WAIT_NS (60ull * 1000000000ull)

static void past_deadline(uint64_t deadline, const char *what) {
    if (bench_now_ns() > deadline) {
        fprintf(stderr, "ordo bench: %s: not done after %llu s\n", what,
                (unsigned long long)(BENCH_WAIT_NS / 1000000000ull));
        bench_fail(what);
    }
}

/* cuStreamSynchronize, with a deadline. */
static void stream_drain(CUstream stream) {
    uint64_t deadline = bench_now_ns() + BENCH_WAIT_NS;
    CUresult r;
    while ((r = cu->StreamQuery(stream)) == CUDA_ERROR_NOT_READY) {
        past_deadline(deadline, "cuStreamQuery");
    }
    check(r, "cuStreamQuery");
}

static double *samples_alloc(size_t count) {
    double *samples = calloc(count, sizeof *samples);
    if (!samples) {
        bench_fail("out of memory");
    }
    return samples;
}

/* Summarises a baseline's samples and ordo's (per-operation times of
 * batches of sz.batch) and prints both lines, ordo's with its ratio to the
 * baseline. */
static void emit_pair(const char *name, const char *base_impl, double *base_samples,
                      const char *ordo_impl, double *ordo_samples, bench_sizes_t sz) {
    bench_stats_t base = bench_summarise(base_samples, sz.samples, sz.batch);
    bench_stats_t ordo = bench_summarise(ordo_samples, sz.samples, sz.batch);
    bench_emit(name, base_impl, &base, NULL, 0);
    bench_ratio_t ratio = {base_impl, ordo.median_ns / base.median_ns};
    bench_emit(name, ordo_impl, &ordo, &ratio, 1);
}

/* ---- cuda_event_pool -------------------------------------------------------- */

static void run_event_pool(const bench_options_t *options, ordo_device_t *device) {
    cuda_device_t *d = device->impl;
    bench_sizes_t sz = bench_pick(options, 100, 1000);
    const size_t warmup = 2;
    double *pool = samples_alloc(sz.samples);
    double *raw = samples_alloc(sz.samples);
    bench_pin(0);
    for (size_t s = 0; s < sz.samples + warmup; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            void *event;
            if (ordo__event_pool_take(d->points, &event) != ORDO_OK) {
                bench_fail("the point pool failed");
            }
            ordo__event_pool_give(d->points, event);
        }
        uint64_t t1 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            CUevent event;
            check(cu->EventCreate(&event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
            check(cu->EventDestroy(event), "cuEventDestroy");
        }
        uint64_t t2 = bench_now_ns();
        if (s >= warmup) {
            pool[s - warmup] = (double)(t1 - t0) / (double)sz.batch;
            raw[s - warmup] = (double)(t2 - t1) / (double)sz.batch;
        }
    }
    bench_unpin();
    emit_pair("cuda_event_pool", "cuda_create_destroy", raw, "ordo", pool, sz);
    free(pool);
    free(raw);
}

/* ---- cuda_auto_order ---------------------------------------------------------- */

#define CHAIN_EVENTS 64

typedef struct chain {
    cuda_kernels_t *kernels;
    CUdeviceptr cell;
    unsigned long long ns;
    void *params[2];
} chain_t;

static ordo_status_t step_enqueue(void *ctx, struct CUstream_st *stream) {
    chain_t *c = ctx;
    CUresult r = cu->LaunchKernel(c->kernels->step, 1, 1, 1, 1, 1, 1, 0, stream, c->params, NULL);
    return r == CUDA_SUCCESS ? ORDO_OK : ORDO_ERR_DEVICE;
}

static ordo_status_t step_launch(void *ctx, ordo_stream_t *stream) {
    return ordo_cuda_stream_enqueue(stream, step_enqueue, ctx);
}

/* The chain on ordo's side: its cell, n streams (at most 4), and a tracker
 * with the one buffer every launch reads and writes, so each launch waits
 * for the previous one, on another stream. */
typedef struct chain_rig {
    chain_t chain;
    int n;
    ordo_stream_t *streams[4];
    ordo_tracker_t *tracker;
    ordo_buffer_t *buffer;
    ordo_access_t access;
} chain_rig_t;

static void chain_rig_open(chain_rig_t *rig, ordo_device_t *device, cuda_kernels_t *kernels,
                           int n) {
    rig->chain = (chain_t){kernels, 0, 0, {NULL, NULL}};
    check(cu->MemAlloc(&rig->chain.cell, sizeof(unsigned long long)), "cuMemAlloc");
    rig->chain.params[0] = &rig->chain.cell;
    rig->chain.params[1] = &rig->chain.ns;
    rig->n = n;
    for (int k = 0; k < n; ++k) {
        if (ordo_stream_create(device, 0, &rig->streams[k]) != ORDO_OK) {
            bench_fail("cannot create a stream");
        }
    }
    if (ordo_tracker_create(device, &rig->tracker) != ORDO_OK ||
        ordo_buffer_create(rig->tracker, &rig->buffer) != ORDO_OK) {
        bench_fail("cannot create the tracker");
    }
    rig->access = (ordo_access_t){rig->buffer, ORDO_ACCESS_READ_WRITE};
}

/* One batch of the chain, round-robin over the streams, tracked (recorded
 * when the tracker records). */
static void chain_rig_submit(chain_rig_t *rig, uint64_t batch) {
    for (uint64_t k = 0; k < batch; ++k) {
        if (ordo_tracker_submit(rig->tracker, rig->streams[k % (uint64_t)rig->n], &rig->access, 1,
                                step_launch, &rig->chain) != ORDO_OK) {
            bench_fail("a submission failed");
        }
    }
}

static void chain_rig_finish(const chain_rig_t *rig) {
    for (int k = 0; k < rig->n; ++k) {
        if (ordo_stream_synchronize(rig->streams[k], ordo_deadline_after_ms(60000)) != ORDO_OK) {
            bench_fail("the chain did not finish");
        }
    }
}

/* The cell counts every step run: a chain out of order loses counts. */
static void chain_rig_check(const chain_rig_t *rig, const char *name, uint64_t expected) {
    unsigned long long value = 0;
    check(cu->MemcpyDtoH(&value, rig->chain.cell, sizeof value), "cuMemcpyDtoH");
    if (value != expected) {
        fprintf(stderr, "ordo bench: %s: the chain counted %llu, not %llu\n", name, value,
                (unsigned long long)expected);
        bench_fail("a chain ran out of order");
    }
}

static void chain_rig_close(chain_rig_t *rig) {
    if (ordo_buffer_release(rig->buffer, NULL, NULL) != ORDO_OK ||
        ordo_tracker_drain(rig->tracker, ordo_deadline_after_ms(60000)) != ORDO_OK ||
        ordo_tracker_destroy(rig->tracker) != ORDO_OK) {
        bench_fail("cannot destroy the tracker");
    }
    for (int k = 0; k < rig->n; ++k) {
        ordo_stream_destroy(rig->streams[k]);
    }
    (void)cu->MemFree(rig->chain.cell);
}

static void run_auto_order(const bench_options_t *options, ordo_device_t *device,
                           cuda_kernels_t *kernels, int n) {
    char name[64];
    snprintf(name, sizeof name, "cuda_auto_order_%dstreams", n);
    if (!bench_selected(options, name)) {
        return;
    }
    bench_sizes_t sz = bench_pick(options, 50, 256);
    const size_t warmup = 2;
    chain_rig_t rig;
    chain_rig_open(&rig, device, kernels, n);
    /* The hand-written peer: the same chain on n raw streams. */
    CUstream raw[4];
    CUevent events[CHAIN_EVENTS];
    for (int k = 0; k < n; ++k) {
        check(cu->StreamCreateWithPriority(&raw[k], CU_STREAM_NON_BLOCKING, 0), "cuStreamCreate");
    }
    for (int e = 0; e < CHAIN_EVENTS; ++e) {
        check(cu->EventCreate(&events[e], CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    }
    /* cuMemAlloc does not clear: the chain counts from zero. */
    check(cu->MemsetD8Async(rig.chain.cell, 0, sizeof(unsigned long long), raw[0]),
          "cuMemsetD8Async");
    stream_drain(raw[0]);
    double *ordo_samples = samples_alloc(sz.samples);
    double *manual_samples = samples_alloc(sz.samples);
    uint64_t launch = 0;
    bench_pin(0);
    for (size_t s = 0; s < sz.samples + warmup; ++s) {
        uint64_t t0 = bench_now_ns();
        chain_rig_submit(&rig, sz.batch);
        uint64_t t1 = bench_now_ns();
        chain_rig_finish(&rig);
        uint64_t t2 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k, ++launch) {
            CUstream stream = raw[k % (uint64_t)n];
            if (launch) {
                check(cu->StreamWaitEvent(stream, events[(launch - 1) % CHAIN_EVENTS], 0),
                      "cuStreamWaitEvent");
            }
            check(cu->LaunchKernel(kernels->step, 1, 1, 1, 1, 1, 1, 0, stream, rig.chain.params,
                                   NULL),
                  "cuLaunchKernel");
            check(cu->EventRecord(events[launch % CHAIN_EVENTS], stream), "cuEventRecord");
        }
        uint64_t t3 = bench_now_ns();
        for (int k = 0; k < n; ++k) {
            stream_drain(raw[k]);
        }
        if (s >= warmup) {
            ordo_samples[s - warmup] = (double)(t1 - t0) / (double)sz.batch;
            manual_samples[s - warmup] = (double)(t3 - t2) / (double)sz.batch;
        }
    }
    bench_unpin();
    chain_rig_check(&rig, name, 2 * (uint64_t)(sz.samples + warmup) * sz.batch);
    emit_pair(name, "cuda_manual", manual_samples, "ordo_tracker", ordo_samples, sz);
    chain_rig_close(&rig);
    for (int k = 0; k < n; ++k) {
        (void)cu->StreamDestroy(raw[k]);
    }
    for (int e = 0; e < CHAIN_EVENTS; ++e) {
        (void)cu->EventDestroy(events[e]);
    }
    free(ordo_samples);
    free(manual_samples);
}

/* ---- cuda_replay ------------------------------------------------------------- */

static void run_replay(const bench_options_t *options, ordo_device_t *device,
                       cuda_kernels_t *kernels) {
    const int host = bench_selected(options, "cuda_replay");
    const int end_to_end = bench_selected(options, "cuda_replay_end_to_end");
    if (!host && !end_to_end) {
        return;
    }
    bench_sizes_t sz = bench_pick(options, 50, 256);
    const size_t warmup = 2;
    chain_rig_t rig;
    chain_rig_open(&rig, device, kernels, 2);
    ordo_graph_t *graph = NULL;
    if (ordo_tracker_record_begin_native(rig.tracker, ORDO_GRAPH_NATIVE_REQUIRE) != ORDO_OK) {
        bench_fail("cannot record");
    }
    chain_rig_submit(&rig, sz.batch);
    if (ordo_tracker_record_end(rig.tracker, &graph) != ORDO_OK) {
        fprintf(stderr, "ordo bench: cuda_replay skipped: %s\n", ordo_error_message());
        graph = NULL;
    }
    /* cuMemAlloc does not clear: the chain counts from zero. */
    CUstream first = NULL;
    if (ordo_cuda_stream_handle(rig.streams[0], &first) != ORDO_OK) {
        bench_fail("no native stream");
    }
    check(cu->MemsetD8Async(rig.chain.cell, 0, sizeof(unsigned long long), first),
          "cuMemsetD8Async");
    stream_drain(first);
    double *samples[4]; /* tracker host, replay host, tracker end to end, replay end to end */
    for (int i = 0; i < 4; ++i) {
        samples[i] = samples_alloc(sz.samples);
    }
    uint64_t runs = 0;
    bench_pin(0);
    for (size_t s = 0; graph && s < sz.samples + warmup; ++s) {
        uint64_t t0 = bench_now_ns();
        chain_rig_submit(&rig, sz.batch);
        uint64_t t1 = bench_now_ns();
        chain_rig_finish(&rig);
        uint64_t t2 = bench_now_ns();
        if (ordo_graph_replay(graph) != ORDO_OK) {
            bench_fail("a replay failed");
        }
        uint64_t t3 = bench_now_ns();
        chain_rig_finish(&rig);
        uint64_t t4 = bench_now_ns();
        runs += 2 * sz.batch;
        if (s >= warmup) {
            samples[0][s - warmup] = (double)(t1 - t0) / (double)sz.batch;
            samples[1][s - warmup] = (double)(t3 - t2) / (double)sz.batch;
            samples[2][s - warmup] = (double)(t2 - t0) / (double)sz.batch;
            samples[3][s - warmup] = (double)(t4 - t2) / (double)sz.batch;
        }
    }
    bench_unpin();
    if (graph) {
        chain_rig_check(&rig, "cuda_replay", runs);
        if (host) {
            emit_pair("cuda_replay", "ordo_tracker", samples[0], "ordo_replay", samples[1], sz);
        }
        if (end_to_end) {
            emit_pair("cuda_replay_end_to_end", "ordo_tracker", samples[2], "ordo_replay",
                      samples[3], sz);
        }
        if (ordo_graph_destroy(graph) != ORDO_OK) {
            bench_fail("cannot destroy the graph");
        }
    }
    chain_rig_close(&rig);
    for (int i = 0; i < 4; ++i) {
        free(samples[i]);
    }
}

/* ---- cuda_graph_refresh -------------------------------------------------------- */

/* The chain's kernels captured on one raw stream into a new CUDA graph. */
static CUgraph raw_capture(CUstream stream, chain_t *chain, uint64_t batch) {
    check(cu->StreamBeginCapture(stream, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
          "cuStreamBeginCapture");
    for (uint64_t k = 0; k < batch; ++k) {
        if (step_enqueue(chain, stream) != ORDO_OK) {
            bench_fail("a captured launch failed");
        }
    }
    CUgraph graph = NULL;
    check(cu->StreamEndCapture(stream, &graph), "cuStreamEndCapture");
    return graph;
}

static void run_graph_refresh(const bench_options_t *options, ordo_device_t *device,
                              cuda_kernels_t *kernels) {
    if (!bench_selected(options, "cuda_graph_refresh")) {
        return;
    }
    if (!cu->StreamBeginCapture || !cu->GraphExecUpdate) {
        fprintf(stderr, "ordo bench: cuda_graph_refresh skipped: the driver has no "
                        "cuGraphExecUpdate (CUDA 12.0)\n");
        return;
    }
    bench_sizes_t sz = bench_pick(options, 20, 64);
    const size_t warmup = 2;
    chain_rig_t rig;
    chain_rig_open(&rig, device, kernels, 2);
    ordo_graph_t *graph = NULL;
    if (ordo_tracker_record_begin_native(rig.tracker, ORDO_GRAPH_NATIVE_REQUIRE) != ORDO_OK) {
        bench_fail("cannot record");
    }
    chain_rig_submit(&rig, sz.batch);
    if (ordo_tracker_record_end(rig.tracker, &graph) != ORDO_OK) {
        fprintf(stderr, "ordo bench: cuda_graph_refresh skipped: %s\n", ordo_error_message());
        chain_rig_close(&rig);
        return;
    }
    CUstream raw = NULL;
    check(cu->StreamCreateWithPriority(&raw, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreate");
    CUgraphExec exec = NULL;
    CUgraph first = raw_capture(raw, &rig.chain, sz.batch);
    check(cu->GraphInstantiateWithFlags(&exec, first, 0), "cuGraphInstantiateWithFlags");
    check(cu->GraphDestroy(first), "cuGraphDestroy");
    check(cu->MemsetD8Async(rig.chain.cell, 0, sizeof(unsigned long long), raw), "cuMemsetD8Async");
    stream_drain(raw);
    enum { ORDO_REFRESH, CUDA_UPDATE, CUDA_INSTANTIATE, IMPLS };
    double *samples[IMPLS];
    for (int i = 0; i < IMPLS; ++i) {
        samples[i] = samples_alloc(sz.samples);
    }
    cuda_device_t *d = device->impl;
    uint64_t updated = atomic_load(&d->graphs_updated);
    uint64_t runs = 0;
    bench_pin(0);
    for (size_t s = 0; s < sz.samples + warmup; ++s) {
        uint64_t t0 = bench_now_ns();
        if (ordo_graph_refresh(graph) != ORDO_OK || ordo_graph_replay(graph) != ORDO_OK) {
            bench_fail("a refreshed replay failed");
        }
        uint64_t t1 = bench_now_ns();
        chain_rig_finish(&rig);
        uint64_t t2 = bench_now_ns();
        CUgraph again = raw_capture(raw, &rig.chain, sz.batch);
        CUgraphExecUpdateResultInfo info;
        check(cu->GraphExecUpdate(exec, again, &info), "cuGraphExecUpdate");
        check(cu->GraphDestroy(again), "cuGraphDestroy");
        check(cu->GraphLaunch(exec, raw), "cuGraphLaunch");
        uint64_t t3 = bench_now_ns();
        stream_drain(raw);
        uint64_t t4 = bench_now_ns();
        again = raw_capture(raw, &rig.chain, sz.batch);
        CUgraphExec fresh = NULL;
        check(cu->GraphInstantiateWithFlags(&fresh, again, 0), "cuGraphInstantiateWithFlags");
        check(cu->GraphDestroy(again), "cuGraphDestroy");
        check(cu->GraphExecDestroy(exec), "cuGraphExecDestroy");
        exec = fresh;
        check(cu->GraphLaunch(exec, raw), "cuGraphLaunch");
        uint64_t t5 = bench_now_ns();
        stream_drain(raw);
        runs += 3 * sz.batch;
        if (s >= warmup) {
            samples[ORDO_REFRESH][s - warmup] = (double)(t1 - t0) / (double)sz.batch;
            samples[CUDA_UPDATE][s - warmup] = (double)(t3 - t2) / (double)sz.batch;
            samples[CUDA_INSTANTIATE][s - warmup] = (double)(t5 - t4) / (double)sz.batch;
        }
    }
    bench_unpin();
    /* Every refresh of an idle graph was an update in place. */
    if (atomic_load(&d->graphs_updated) - updated != sz.samples + warmup) {
        bench_fail("a refresh was instantiated anew, not updated in place");
    }
    chain_rig_check(&rig, "cuda_graph_refresh", runs);
    bench_stats_t stats[IMPLS];
    for (int i = 0; i < IMPLS; ++i) {
        stats[i] = bench_summarise(samples[i], sz.samples, sz.batch);
    }
    bench_emit("cuda_graph_refresh", "cuda_instantiate", &stats[CUDA_INSTANTIATE], NULL, 0);
    bench_ratio_t against_instantiate = {"cuda_instantiate", stats[CUDA_UPDATE].median_ns /
                                                                 stats[CUDA_INSTANTIATE].median_ns};
    bench_emit("cuda_graph_refresh", "cuda_update", &stats[CUDA_UPDATE], &against_instantiate, 1);
    bench_ratio_t ratios[2] = {
        {"cuda_update", stats[ORDO_REFRESH].median_ns / stats[CUDA_UPDATE].median_ns},
        {"cuda_instantiate", stats[ORDO_REFRESH].median_ns / stats[CUDA_INSTANTIATE].median_ns}};
    bench_emit("cuda_graph_refresh", "ordo_refresh", &stats[ORDO_REFRESH], ratios, 2);
    if (ordo_graph_destroy(graph) != ORDO_OK) {
        bench_fail("cannot destroy the graph");
    }
    (void)cu->GraphExecDestroy(exec);
    (void)cu->StreamDestroy(raw);
    chain_rig_close(&rig);
    for (int i = 0; i < IMPLS; ++i) {
        free(samples[i]);
    }
}

/* ---- cuda_signal_point -------------------------------------------------------- */

typedef struct point_rig {
    CUstream stream;
    CUevent event;
    _Atomic uint64_t *word;
    CUdeviceptr word_device;
    uint64_t next;
} point_rig_t;

static double latency_event(point_rig_t *rig) {
    uint64_t t0 = bench_now_ns();
    check(cu->EventRecord(rig->event, rig->stream), "cuEventRecord");
    CUresult r;
    while ((r = cu->EventQuery(rig->event)) == CUDA_ERROR_NOT_READY) {
        past_deadline(t0 + BENCH_WAIT_NS, "cuEventQuery");
    }
    check(r, "cuEventQuery");
    return (double)(bench_now_ns() - t0);
}

static double latency_word(point_rig_t *rig) {
    uint64_t value = ++rig->next;
    uint64_t t0 = bench_now_ns();
    check(cu->StreamWriteValue64(rig->stream, rig->word_device, value, 0), "cuStreamWriteValue64");
    while (atomic_load_explicit(rig->word, memory_order_acquire) < value) {
        past_deadline(t0 + BENCH_WAIT_NS, "the word written by cuStreamWriteValue64");
    }
    return (double)(bench_now_ns() - t0);
}

static double latency_ordo(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t *next) {
    uint64_t value = ++*next;
    uint64_t t0 = bench_now_ns();
    if (ordo_stream_signal(stream, signal, value) != ORDO_OK ||
        ordo_signal_wait(signal, value, ordo_deadline_after_ms(60000)) != ORDO_OK) {
        bench_fail("a signal point failed");
    }
    return (double)(bench_now_ns() - t0);
}

typedef struct ordo_rig {
    ordo_device_t *device;
    ordo_stream_t *stream;
    ordo_signal_t *signal;
    uint64_t next;
} ordo_rig_t;

static void ordo_rig_open(ordo_rig_t *rig, ordo_device_t *device) {
    rig->device = device;
    rig->next = 0;
    if (ordo_stream_create(device, 0, &rig->stream) != ORDO_OK ||
        ordo_signal_create(0, &rig->signal) != ORDO_OK) {
        bench_fail("cannot create a stream");
    }
}

static void ordo_rig_close(ordo_rig_t *rig) {
    ordo_stream_destroy(rig->stream);
    ordo_signal_destroy(rig->signal);
}

enum { POINT_EVENT, POINT_WORD, POINT_ORDO, POINT_ORDO_MEMOPS, POINT_KINDS };
static const char *const point_impls[POINT_KINDS] = {"event_query", "write_value", "ordo_events",
                                                     "ordo_memops"};
static const char *const submit_impls[POINT_KINDS] = {
    "event_record", "write_value", "ordo_stream_signal", "ordo_stream_signal_memops"};

static void run_signal_point(const bench_options_t *options, ordo_device_t *device) {
    ordo_device_info_t info;
    ordo_device_info(device, &info);
    int memops = info.native_timeline;
    if (!memops) {
        fprintf(stderr, "ordo bench: cuda_signal_point: write_value and ordo_memops left out: the "
                        "device has no 64-bit stream memory operations\n");
    }
    point_rig_t rig = {NULL, NULL, NULL, 0, 0};
    check(cu->StreamCreateWithPriority(&rig.stream, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreate");
    check(cu->EventCreate(&rig.event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    void *word = NULL;
    if (memops) {
        check(cu->MemHostAlloc(&word, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
              "cuMemHostAlloc");
        rig.word = word;
        atomic_init(rig.word, 0);
        check(cu->MemHostGetDevicePointer(&rig.word_device, word, 0), "cuMemHostGetDevicePointer");
    }
    ordo_rig_t ordo_events;
    ordo_rig_open(&ordo_events, device);
    /* An owned runtime of the same device whose points are observed
     * through the word (the mode is read when a device is built). */
    ordo_rig_t ordo_memops = {NULL, NULL, NULL, 0};
    if (memops) {
        ordo_device_t *owned;
        setenv("ORDO_CUDA_POINTS", "memops", 1);
        ordo_status_t st = ordo_device_create_owned(info.name, NULL, &owned);
        unsetenv("ORDO_CUDA_POINTS");
        if (st != ORDO_OK) {
            bench_fail("cannot create an owned device");
        }
        ordo_rig_open(&ordo_memops, owned);
    }
    bench_sizes_t sz = bench_pick(options, 100, 32);
    const size_t warmup = 2;
    double *latency[POINT_KINDS];
    double *submit[POINT_KINDS];
    for (int k = 0; k < POINT_KINDS; ++k) {
        latency[k] = samples_alloc(sz.samples);
        submit[k] = samples_alloc(sz.samples);
    }
    bench_pin(0);
    for (size_t s = 0; s < sz.samples + warmup; ++s) {
        double sum[POINT_KINDS] = {0};
        for (uint64_t k = 0; k < sz.batch; ++k) {
            /* Interleaved, so a noisy moment hits every kind alike. */
            sum[POINT_EVENT] += latency_event(&rig);
            sum[POINT_ORDO] +=
                latency_ordo(ordo_events.stream, ordo_events.signal, &ordo_events.next);
            if (memops) {
                sum[POINT_WORD] += latency_word(&rig);
                sum[POINT_ORDO_MEMOPS] +=
                    latency_ordo(ordo_memops.stream, ordo_memops.signal, &ordo_memops.next);
            }
        }
        /* Submission cost: a batch enqueued back to back, then drained. */
        uint64_t t[POINT_KINDS + 1];
        t[0] = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            check(cu->EventRecord(rig.event, rig.stream), "cuEventRecord");
        }
        t[1] = bench_now_ns();
        if (memops) {
            for (uint64_t k = 0; k < sz.batch; ++k) {
                check(cu->StreamWriteValue64(rig.stream, rig.word_device, ++rig.next, 0),
                      "cuStreamWriteValue64");
            }
        }
        t[2] = bench_now_ns();
        stream_drain(rig.stream);
        uint64_t t3 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            if (ordo_stream_signal(ordo_events.stream, ordo_events.signal, ++ordo_events.next) !=
                ORDO_OK) {
                bench_fail("a signal point failed");
            }
        }
        uint64_t t4 = bench_now_ns();
        if (ordo_signal_wait(ordo_events.signal, ordo_events.next, ordo_deadline_after_ms(60000)) !=
            ORDO_OK) {
            bench_fail("a signal point failed");
        }
        uint64_t t5 = bench_now_ns();
        uint64_t t6 = t5;
        if (memops) {
            for (uint64_t k = 0; k < sz.batch; ++k) {
                if (ordo_stream_signal(ordo_memops.stream, ordo_memops.signal,
                                       ++ordo_memops.next) != ORDO_OK) {
                    bench_fail("a signal point failed");
                }
            }
            t6 = bench_now_ns();
            if (ordo_signal_wait(ordo_memops.signal, ordo_memops.next,
                                 ordo_deadline_after_ms(60000)) != ORDO_OK) {
                bench_fail("a signal point failed");
            }
        }
        if (s >= warmup) {
            size_t i = s - warmup;
            for (int k = 0; k < POINT_KINDS; ++k) {
                latency[k][i] = sum[k] / (double)sz.batch;
            }
            submit[POINT_EVENT][i] = (double)(t[1] - t[0]) / (double)sz.batch;
            submit[POINT_WORD][i] = (double)(t[2] - t[1]) / (double)sz.batch;
            submit[POINT_ORDO][i] = (double)(t4 - t3) / (double)sz.batch;
            submit[POINT_ORDO_MEMOPS][i] = (double)(t6 - t5) / (double)sz.batch;
        }
    }
    bench_unpin();
    const char *bench_names[2] = {"cuda_signal_point", "cuda_signal_point_submit"};
    double **all[2] = {latency, submit};
    const char *const *impls[2] = {point_impls, submit_impls};
    for (int b = 0; b < 2; ++b) {
        bench_stats_t base = bench_summarise(all[b][POINT_EVENT], sz.samples, sz.batch);
        bench_emit(bench_names[b], impls[b][POINT_EVENT], &base, NULL, 0);
        for (int k = POINT_WORD; k < POINT_KINDS; ++k) {
            if (!memops && (k == POINT_WORD || k == POINT_ORDO_MEMOPS)) {
                continue;
            }
            bench_stats_t stats = bench_summarise(all[b][k], sz.samples, sz.batch);
            bench_ratio_t ratio = {impls[b][POINT_EVENT], stats.median_ns / base.median_ns};
            bench_emit(bench_names[b], impls[b][k], &stats, &ratio, 1);
        }
    }
    for (int k = 0; k < POINT_KINDS; ++k) {
        free(latency[k]);
        free(submit[k]);
    }
    ordo_rig_close(&ordo_events);
    if (memops) {
        ordo_rig_close(&ordo_memops);
        ordo_device_release(ordo_memops.device);
        (void)cu->MemFreeHost(word);
    }
    (void)cu->EventDestroy(rig.event);
    (void)cu->StreamDestroy(rig.stream);
}

/* ---- cuda_signal_host_wake ----------------------------------------------------- */

enum { WAKE_SPIN, WAKE_RING, WAKE_BLOCKING, WAKE_ORDO, WAKE_KINDS };
static const char *const wake_impls[WAKE_KINDS] = {"cuda_sync_spin", "seed_ring",
                                                   "cuda_blocking_sync", "ordo"};

/* The device the waiter thread makes current, and one round's hand-offs:
 * the main thread raises `go` to the round's number once the round's work
 * is enqueued; the waiter waits in the round's way and raises `done`. Both
 * sleep on ordo signals between rounds, so neither spends CPU there. */
typedef struct wake_rig {
    ordo_device_t *device;
    ordo_signal_t *go;
    ordo_signal_t *done;
    int kind;               /* of the round */
    CUevent event;          /* recorded behind the gate (spin, ring) */
    CUevent blocking_event; /* CU_EVENT_BLOCKING_SYNC, behind the gate (blocking) */
    ordo_signal_t *ordo_signal;
    uint64_t target;  /* the ordo signal's value of the round */
    uint64_t woke_ns; /* when the waiter returned from its wait */
    uint64_t rounds;
} wake_rig_t;

static uint64_t process_cpu_ns(void) {
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static void sleep_ns(uint64_t ns) {
    struct timespec ts = {(time_t)(ns / 1000000000ull), (long)(ns % 1000000000ull)};
    nanosleep(&ts, NULL);
}

/* The waiter's side of one round. */
static void wake_wait(wake_rig_t *rig) {
    uint64_t deadline = bench_now_ns() + BENCH_WAIT_NS;
    CUresult r = CUDA_SUCCESS;
    switch (rig->kind) {
    case WAKE_SPIN:
        while ((r = cu->EventQuery(rig->event)) == CUDA_ERROR_NOT_READY) {
            past_deadline(deadline, "cuEventQuery (spinning)");
        }
        check(r, "cuEventQuery");
        break;
    case WAKE_RING:
        /* The seed's CudaTimelineSignal::wait with a timeout: poll the
         * event, sleep 100 us between polls. */
        while ((r = cu->EventQuery(rig->event)) == CUDA_ERROR_NOT_READY) {
            past_deadline(deadline, "cuEventQuery (polled every 100 us)");
            sleep_ns(100000);
        }
        check(r, "cuEventQuery");
        break;
    case WAKE_BLOCKING:
        /* The driver's own sleep until the device's interrupt: the floor
         * for a host thread that sleeps. No deadline of its own: the main
         * thread's wait for `done` bounds the round (and ends the run). */
        check(cu->EventSynchronize(rig->blocking_event), "cuEventSynchronize");
        break;
    default:
        if (ordo_signal_wait(rig->ordo_signal, rig->target, ordo_deadline_after_ms(60000)) !=
            ORDO_OK) {
            bench_fail("the host wait for a signal point failed");
        }
        break;
    }
    rig->woke_ns = bench_now_ns();
}

static void *wake_waiter_main(void *arg) {
    wake_rig_t *rig = arg;
    if (ordo_cuda_make_current(rig->device) != ORDO_OK) {
        bench_fail("cannot make the device's context current");
    }
    for (uint64_t round = 1; round <= rig->rounds; ++round) {
        if (ordo_signal_wait(rig->go, round, ordo_deadline_after_ms(60000)) != ORDO_OK) {
            bench_fail("the waiter was not started");
        }
        wake_wait(rig);
        if (ordo_signal_advance(rig->done, round) != ORDO_OK) {
            bench_fail("the waiter could not report");
        }
    }
    return NULL;
}

typedef struct gate_word {
    CUdeviceptr device;
    uint64_t value;
} gate_word_t;

static ordo_status_t gate_enqueue(void *ctx, struct CUstream_st *stream) {
    gate_word_t *g = ctx;
    CUresult r = cu->StreamWaitValue64(stream, g->device, g->value, CU_STREAM_WAIT_VALUE_GEQ);
    return r == CUDA_SUCCESS ? ORDO_OK : ORDO_ERR_DEVICE;
}

static void run_host_wake(const bench_options_t *options, ordo_device_t *device) {
    ordo_device_info_t info;
    ordo_device_info(device, &info);
    if (!info.native_timeline || !cu->StreamWaitValue64) {
        fprintf(stderr, "ordo bench: cuda_signal_host_wake skipped: the device has no 64-bit "
                        "stream memory operations to hold a stream at a gate\n");
        return;
    }
    bench_sizes_t sz = bench_pick(options, 200, 1);
    const size_t warmup = 2;
    const uint64_t hold_ns = 1000000; /* the device "works" this long */
    void *word = NULL;
    check(cu->MemHostAlloc(&word, 64, CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP),
          "cuMemHostAlloc");
    _Atomic uint64_t *gate = word;
    atomic_init(gate, 0);
    gate_word_t gw = {0, 0};
    check(cu->MemHostGetDevicePointer(&gw.device, word, 0), "cuMemHostGetDevicePointer");
    CUstream raw;
    check(cu->StreamCreateWithPriority(&raw, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreate");
    ordo_stream_t *stream;
    wake_rig_t rig;
    memset(&rig, 0, sizeof rig);
    rig.device = device;
    rig.rounds = (uint64_t)(sz.samples + warmup) * WAKE_KINDS;
    if (ordo_stream_create(device, 0, &stream) != ORDO_OK ||
        ordo_signal_create(0, &rig.go) != ORDO_OK || ordo_signal_create(0, &rig.done) != ORDO_OK ||
        ordo_signal_create(0, &rig.ordo_signal) != ORDO_OK) {
        bench_fail("cannot create a stream or a signal");
    }
    check(cu->EventCreate(&rig.event, CU_EVENT_DISABLE_TIMING), "cuEventCreate");
    check(cu->EventCreate(&rig.blocking_event, CU_EVENT_BLOCKING_SYNC | CU_EVENT_DISABLE_TIMING),
          "cuEventCreate");
    double *latency[WAKE_KINDS];
    uint64_t cpu[WAKE_KINDS] = {0}, wall[WAKE_KINDS] = {0};
    for (int k = 0; k < WAKE_KINDS; ++k) {
        latency[k] = samples_alloc(sz.samples);
    }
    bench_pin(0);
    pthread_t waiter;
    if (bench_thread_start(&waiter, 1, wake_waiter_main, &rig) != 0) {
        bench_fail("cannot start the waiter thread");
    }
    uint64_t round = 0;
    for (size_t s = 0; s < sz.samples + warmup; ++s) {
        /* Interleaved, so a noisy moment hits every kind alike. */
        for (int kind = 0; kind < WAKE_KINDS; ++kind) {
            ++round;
            gw.value = round;
            if (kind == WAKE_ORDO) {
                rig.target = round;
                if (ordo_cuda_stream_enqueue(stream, gate_enqueue, &gw) != ORDO_OK ||
                    ordo_stream_signal(stream, rig.ordo_signal, round) != ORDO_OK) {
                    bench_fail("cannot enqueue the gate and the point");
                }
            } else {
                check(cu->StreamWaitValue64(raw, gw.device, round, CU_STREAM_WAIT_VALUE_GEQ),
                      "cuStreamWaitValue64");
                check(cu->EventRecord(kind == WAKE_BLOCKING ? rig.blocking_event : rig.event, raw),
                      "cuEventRecord");
            }
            rig.kind = kind;
            if (ordo_signal_advance(rig.go, round) != ORDO_OK) {
                bench_fail("cannot start the waiter");
            }
            /* Let the waiter settle into its wait, then measure from the
             * start of the hold to its wake-up. */
            sleep_ns(200000);
            uint64_t cpu0 = process_cpu_ns();
            uint64_t wall0 = bench_now_ns();
            sleep_ns(hold_ns);
            uint64_t opened = bench_now_ns();
            atomic_store_explicit(gate, round, memory_order_release);
            if (ordo_signal_wait(rig.done, round, ordo_deadline_after_ms(60000)) != ORDO_OK) {
                bench_fail("the waiter did not wake");
            }
            uint64_t cpu1 = process_cpu_ns();
            if (s >= warmup) {
                latency[kind][s - warmup] = (double)(rig.woke_ns - opened);
                cpu[kind] += cpu1 - cpu0;
                wall[kind] += rig.woke_ns - wall0;
            }
        }
    }
    pthread_join(waiter, NULL);
    bench_unpin();
    bench_stats_t stats[WAKE_KINDS];
    double pct[WAKE_KINDS];
    for (int k = 0; k < WAKE_KINDS; ++k) {
        stats[k] = bench_summarise(latency[k], sz.samples, 1);
        pct[k] = wall[k] ? 100.0 * (double)cpu[k] / (double)wall[k] : 0.0;
    }
    bench_emit_cpu("cuda_signal_host_wake", wake_impls[WAKE_SPIN], &stats[WAKE_SPIN], NULL, 0,
                   pct[WAKE_SPIN]);
    bench_ratio_t ring_ratio = {wake_impls[WAKE_SPIN],
                                stats[WAKE_RING].median_ns / stats[WAKE_SPIN].median_ns};
    bench_emit_cpu("cuda_signal_host_wake", wake_impls[WAKE_RING], &stats[WAKE_RING], &ring_ratio,
                   1, pct[WAKE_RING]);
    bench_ratio_t blocking_ratio = {wake_impls[WAKE_SPIN],
                                    stats[WAKE_BLOCKING].median_ns / stats[WAKE_SPIN].median_ns};
    bench_emit_cpu("cuda_signal_host_wake", wake_impls[WAKE_BLOCKING], &stats[WAKE_BLOCKING],
                   &blocking_ratio, 1, pct[WAKE_BLOCKING]);
    bench_ratio_t ratios[3] = {
        {wake_impls[WAKE_RING], stats[WAKE_ORDO].median_ns / stats[WAKE_RING].median_ns},
        {wake_impls[WAKE_SPIN], stats[WAKE_ORDO].median_ns / stats[WAKE_SPIN].median_ns},
        {wake_impls[WAKE_BLOCKING], stats[WAKE_ORDO].median_ns / stats[WAKE_BLOCKING].median_ns}};
    bench_emit_cpu("cuda_signal_host_wake", wake_impls[WAKE_ORDO], &stats[WAKE_ORDO], ratios, 3,
                   pct[WAKE_ORDO]);
    for (int k = 0; k < WAKE_KINDS; ++k) {
        free(latency[k]);
    }
    if (ordo_stream_synchronize(stream, ordo_deadline_after_ms(60000)) != ORDO_OK) {
        bench_fail("the stream did not finish");
    }
    stream_drain(raw);
    ordo_stream_destroy(stream);
    ordo_signal_destroy(rig.ordo_signal);
    ordo_signal_destroy(rig.go);
    ordo_signal_destroy(rig.done);
    (void)cu->EventDestroy(rig.event);
    (void)cu->EventDestroy(rig.blocking_event);
    (void)cu->StreamDestroy(raw);
    (void)cu->MemFreeHost(word);
}

/* ---- cuda_mem ------------------------------------------------------------------- */

#define MEM_PAIR_BYTES 4096

static void run_mem(const bench_options_t *options, ordo_device_t *device) {
    cuda_device_t *d = device->impl;
    CUmemoryPool driver_pool = NULL;
    if (!cu->MemAllocAsync || !cu->MemFreeAsync || !cu->DeviceGetDefaultMemPool ||
        !cu->MemPoolSetAttribute || !cu->MemPoolGetAttribute ||
        cu->DeviceGetDefaultMemPool(&driver_pool, d->dev) != CUDA_SUCCESS) {
        fprintf(stderr, "ordo bench: cuda_mem skipped: the driver or the device has no "
                        "stream-ordered allocator (cuMemAllocAsync, memory pools)\n");
        return;
    }
    /* The driver's pool keeps what is freed (as ordo's pool does) rather
     * than giving it back at each synchronisation. */
    cuuint64_t old_threshold = 0, keep = UINT64_MAX;
    check(cu->MemPoolGetAttribute(driver_pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &old_threshold),
          "cuMemPoolGetAttribute");
    check(cu->MemPoolSetAttribute(driver_pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &keep),
          "cuMemPoolSetAttribute");
    ordo_mem_resource_t *stack = NULL, *pool = NULL;
    ordo_tracker_t *tracker = NULL;
    ordo_stream_t *stream = NULL;
    ordo_mem_pool_config_t config;
    if (ordo_device_memory(device, &stack) != ORDO_OK ||
        ordo_tracker_create(device, &tracker) != ORDO_OK ||
        ordo_mem_pool_config_default(&config) != ORDO_OK ||
        ordo_mem_pool_create(tracker, stack, &config, &pool) != ORDO_OK ||
        ordo_stream_create(device, 0, &stream) != ORDO_OK) {
        bench_fail("cannot create the pool");
    }
    CUstream raw;
    check(cu->StreamCreateWithPriority(&raw, CU_STREAM_NON_BLOCKING, 0), "cuStreamCreate");
    bench_sizes_t sz = bench_pick(options, 50, 1000);
    const size_t warmup = 2;
    double *ordo_samples = samples_alloc(sz.samples);
    double *async_samples = samples_alloc(sz.samples);
    bench_pin(0);
    for (size_t s = 0; s < sz.samples + warmup; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            ordo_block_t *block;
            if (ordo_mem_allocate(pool, MEM_PAIR_BYTES, 0, stream, 0, &block, NULL) != ORDO_OK ||
                ordo_mem_deallocate(pool, block, stream) != ORDO_OK) {
                bench_fail("a pool allocation failed");
            }
        }
        uint64_t t1 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            CUdeviceptr ptr;
            check(cu->MemAllocAsync(&ptr, MEM_PAIR_BYTES, raw), "cuMemAllocAsync");
            check(cu->MemFreeAsync(ptr, raw), "cuMemFreeAsync");
        }
        uint64_t t2 = bench_now_ns();
        stream_drain(raw);
        if (ordo_stream_synchronize(stream, ordo_deadline_after_ms(60000)) != ORDO_OK) {
            bench_fail("the stream did not finish");
        }
        if (s >= warmup) {
            ordo_samples[s - warmup] = (double)(t1 - t0) / (double)sz.batch;
            async_samples[s - warmup] = (double)(t2 - t1) / (double)sz.batch;
        }
    }
    bench_unpin();
    emit_pair("cuda_mem", "cuda_async", async_samples, "ordo_pool", ordo_samples, sz);
    free(ordo_samples);
    free(async_samples);
    if (ordo_mem_reap_pending(pool, ordo_deadline_after_ms(60000)) != ORDO_OK ||
        ordo_mem_resource_destroy(pool) != ORDO_OK || ordo_tracker_destroy(tracker) != ORDO_OK) {
        bench_fail("cannot destroy the pool");
    }
    ordo_stream_destroy(stream);
    (void)cu->StreamDestroy(raw);
    (void)cu->MemPoolSetAttribute(driver_pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &old_threshold);
}

void bench_cuda_all(const bench_options_t *options) {
    if (!any_selected(options)) {
        return;
    }
    bool available = 0;
    char reason[160] = "";
    ordo_backend_available("cuda", &available, reason, sizeof reason);
    ordo_device_t *device = NULL;
    if (!available || ordo_device_open("cuda:0", &device) != ORDO_OK) {
        fprintf(stderr, "ordo bench: cuda_* skipped: %s\n",
                available ? ordo_error_message() : reason);
        return;
    }
    cu = ordo__cuda_api();
    if (ordo_cuda_make_current(device) != ORDO_OK) {
        bench_fail("cannot make the device's context current");
    }
    /* Every line names the GPU it measured. Quotes and backslashes would
     * break the JSON line: they are replaced. */
    static char gpu_name[128];
    cuda_device_t *d = device->impl;
    if (cu->DeviceGetName(gpu_name, (int)sizeof gpu_name, d->dev) != CUDA_SUCCESS) {
        snprintf(gpu_name, sizeof gpu_name, "cuda:0 (name unknown)");
    }
    for (char *c = gpu_name; *c; ++c) {
        if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20) {
            *c = '_';
        }
    }
    bench_set_device(gpu_name);
    if (bench_selected(options, "cuda_event_pool")) {
        run_event_pool(options, device);
    }
    if (bench_selected(options, "cuda_auto_order_2streams") ||
        bench_selected(options, "cuda_auto_order_3streams") ||
        bench_selected(options, "cuda_auto_order_4streams") ||
        bench_selected(options, "cuda_replay") ||
        bench_selected(options, "cuda_replay_end_to_end") ||
        bench_selected(options, "cuda_graph_refresh")) {
        cuda_kernels_t kernels;
        char why[256];
        if (!cuda_kernels_load(cu, &kernels, why, sizeof why)) {
            fprintf(stderr, "ordo bench: cuda_auto_order, cuda_replay skipped: %s\n", why);
        } else {
            for (int n = 2; n <= 4; ++n) {
                run_auto_order(options, device, &kernels, n);
            }
            run_replay(options, device, &kernels);
            run_graph_refresh(options, device, &kernels);
            (void)cu->ModuleUnload(kernels.module);
        }
    }
    if (bench_selected(options, "cuda_signal_point") ||
        bench_selected(options, "cuda_signal_point_submit")) {
        run_signal_point(options, device);
    }
    if (bench_selected(options, "cuda_signal_host_wake")) {
        run_host_wake(options, device);
    }
    if (bench_selected(options, "cuda_mem")) {
        run_mem(options, device);
    }
    bench_set_device(NULL);
    ordo_device_release(device);
}

#endif
