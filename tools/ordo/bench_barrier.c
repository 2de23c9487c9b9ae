/* Benchmark of the device barrier (ordo/barrier.h): the host's time to
 * enqueue one barrier across four CPU streams, against the hand-written
 * n^2 scheme with events (every stream records an event, every stream
 * waits for every other's). The streams run the barriers meanwhile; every
 * batch ends with a synchronize outside the timed span, so queues stay
 * short. The stream workers share one CPU and the host has the other.
 * The implementations alternate batch by batch, so a noisy spell on the
 * machine hits all of them. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "ordo/barrier.h"
#include "ordo/device.h"
#include "ordo/event.h"
#include "ordo/stream.h"

#define BARRIER_STREAMS 4

enum { IMPL_EVENTS, IMPL_HUB, IMPL_ALL_TO_ALL, IMPL_ONCE, IMPL_COUNT };

static const char *const impl_names[IMPL_COUNT] = {
    "events_n2", "ordo_barrier", "ordo_barrier_all_to_all", "ordo_barrier_streams"};

typedef struct barrier_rig {
    ordo_stream_t *streams[BARRIER_STREAMS];
    ordo_event_t *events[BARRIER_STREAMS];
    ordo_barrier_t *hub;
    ordo_barrier_t *all_to_all;
} barrier_rig_t;

static void events_n2(barrier_rig_t *rig) {
    for (size_t i = 0; i < BARRIER_STREAMS; ++i) {
        if (ordo_event_record(rig->events[i], rig->streams[i]) != ORDO_OK) {
            bench_fail("event record failed");
        }
    }
    for (size_t i = 0; i < BARRIER_STREAMS; ++i) {
        for (size_t j = 0; j < BARRIER_STREAMS; ++j) {
            if (j != i && ordo_stream_wait_event(rig->streams[i], rig->events[j]) != ORDO_OK) {
                bench_fail("stream wait on an event failed");
            }
        }
    }
}

static void one_barrier(barrier_rig_t *rig, int impl) {
    ordo_status_t st = ORDO_OK;
    switch (impl) {
    case IMPL_EVENTS:
        events_n2(rig);
        break;
    case IMPL_HUB:
        st = ordo_barrier_arrive(rig->hub);
        break;
    case IMPL_ALL_TO_ALL:
        st = ordo_barrier_arrive(rig->all_to_all);
        break;
    default:
        st = ordo_barrier_streams(rig->streams, BARRIER_STREAMS);
        break;
    }
    if (st != ORDO_OK) {
        bench_fail("a barrier failed");
    }
}

void bench_barrier_all(const bench_options_t *options) {
    if (!bench_selected(options, "barrier_device")) {
        return;
    }
    ordo_device_t *device;
    if (ordo_device_open("cpu", &device) != ORDO_OK) {
        bench_fail("cannot open the cpu device");
    }
    barrier_rig_t rig;
    /* The workers inherit their creator's CPU: all on the second, so the
     * host's time on the first is its own enqueueing, not preemption. */
    bench_pin(1);
    for (size_t i = 0; i < BARRIER_STREAMS; ++i) {
        if (ordo_stream_create(device, 0, &rig.streams[i]) != ORDO_OK ||
            ordo_event_create(device, ORDO_EVENT_PLAIN, &rig.events[i]) != ORDO_OK) {
            bench_fail("cannot create the streams and events");
        }
    }
    if (ordo_barrier_create(rig.streams, BARRIER_STREAMS, ORDO_BARRIER_SCHEME_AUTO, &rig.hub) !=
            ORDO_OK ||
        ordo_barrier_create(rig.streams, BARRIER_STREAMS, ORDO_BARRIER_SCHEME_ALL_TO_ALL,
                            &rig.all_to_all) != ORDO_OK) {
        bench_fail("cannot create the barriers");
    }
    bench_sizes_t sz = bench_pick(options, 100, 64);
    const size_t warmup = 2;
    double *samples = calloc(IMPL_COUNT * sz.samples, sizeof *samples);
    if (!samples) {
        bench_fail("out of memory");
    }
    bench_pin(0);
    for (size_t s = 0; s < sz.samples + warmup; ++s) {
        for (int impl = 0; impl < IMPL_COUNT; ++impl) {
            uint64_t t0 = bench_now_ns();
            for (uint64_t k = 0; k < sz.batch; ++k) {
                one_barrier(&rig, impl);
            }
            uint64_t took = bench_now_ns() - t0;
            if (ordo_barrier_synchronize(rig.hub, ordo_deadline_after_ms(60000), NULL) != ORDO_OK) {
                bench_fail("the streams did not pass their barriers");
            }
            if (s >= warmup) {
                samples[(size_t)impl * sz.samples + s - warmup] = (double)took / (double)sz.batch;
            }
        }
    }
    bench_unpin();
    bench_stats_t stats[IMPL_COUNT];
    for (int impl = 0; impl < IMPL_COUNT; ++impl) {
        stats[impl] = bench_summarise(samples + (size_t)impl * sz.samples, sz.samples, sz.batch);
    }
    bench_emit("barrier_device", impl_names[IMPL_EVENTS], &stats[IMPL_EVENTS], NULL, 0);
    for (int impl = IMPL_HUB; impl < IMPL_COUNT; ++impl) {
        bench_ratio_t ratio = {impl_names[IMPL_EVENTS],
                               stats[impl].median_ns / stats[IMPL_EVENTS].median_ns};
        bench_emit("barrier_device", impl_names[impl], &stats[impl], &ratio, 1);
    }
    free(samples);
    ordo_barrier_destroy(rig.hub);
    ordo_barrier_destroy(rig.all_to_all);
    for (size_t i = 0; i < BARRIER_STREAMS; ++i) {
        ordo_event_destroy(rig.events[i]);
        ordo_stream_destroy(rig.streams[i]);
    }
    ordo_device_release(device);
}
