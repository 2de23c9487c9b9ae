/* Benchmarks of the operation coordinator against the same ordering
 * written by hand with ordo's raw stream primitives. */
#include <stdio.h>
#include <stdlib.h>

#include "bench.h"
#include "ordo/coordinator.h"
#include "ordo/device.h"
#include "ordo/signal.h"
#include "ordo/stream.h"

#define COORD_STREAMS 2
/* The host time an op's coordination may cost (register + begin +
 * complete with two dependencies). */
#define COORD_BUDGET_NS 500.0

typedef struct coord_bench {
    ordo_stream_t *streams[COORD_STREAMS];
    /* ordo: the coordinator and the chain's last two ops. */
    ordo_coord_t *coord;
    ordo_op_id_t prev[2];
    uint64_t k;
    /* the baseline: one timeline per stream and the chain's last two
     * points (stream, value). */
    ordo_signal_t *timelines[COORD_STREAMS];
    uint64_t next_point[COORD_STREAMS];
    uint64_t point[2];
    unsigned point_stream[2];
    uint64_t j;
} coord_bench_t;

/* Op k runs on stream k % 2 and depends on ops k - 1 (the other stream)
 * and k - 2 (its own): register, begin, complete. Nothing else is
 * enqueued, so the time is the coordination alone (the waits and signals
 * it enqueues included). */
static void coord_ops(coord_bench_t *b, uint64_t count) {
    for (uint64_t i = 0; i < count; ++i, ++b->k) {
        size_t n = b->k < 2 ? (size_t)b->k : 2;
        ordo_op_desc_t desc = {.type = ORDO_OP_KERNEL,
                               .priority = ORDO_OP_PRIORITY_NORMAL,
                               .stream = b->streams[b->k % COORD_STREAMS],
                               .deps = b->prev,
                               .dep_count = n,
                               .description = "step"};
        ordo_op_id_t id;
        if (ordo_coord_register(b->coord, &desc, &id) != ORDO_OK ||
            ordo_coord_begin(b->coord, id) != ORDO_OK ||
            ordo_coord_complete(b->coord, id) != ORDO_OK) {
            bench_fail("coordinator refused an op");
        }
        b->prev[1] = b->prev[0];
        b->prev[0] = id;
    }
}

/* The same chain by hand: wait on both dependencies' points, signal the
 * op's own. */
static void manual_ops(coord_bench_t *b, uint64_t count) {
    for (uint64_t i = 0; i < count; ++i, ++b->j) {
        unsigned s = (unsigned)(b->j % COORD_STREAMS);
        ordo_stream_t *stream = b->streams[s];
        size_t n = b->j < 2 ? (size_t)b->j : 2;
        for (size_t d = 0; d < n; ++d) {
            if (ordo_stream_wait(stream, b->timelines[b->point_stream[d]], b->point[d]) !=
                ORDO_OK) {
                bench_fail("stream wait refused");
            }
        }
        uint64_t point = ++b->next_point[s];
        if (ordo_stream_signal(stream, b->timelines[s], point) != ORDO_OK) {
            bench_fail("stream signal refused");
        }
        b->point[1] = b->point[0];
        b->point_stream[1] = b->point_stream[0];
        b->point[0] = point;
        b->point_stream[0] = s;
    }
}

static void settle(coord_bench_t *b) {
    for (unsigned s = 0; s < COORD_STREAMS; ++s) {
        if (ordo_stream_synchronize(b->streams[s], ordo_deadline_after_ms(300000)) != ORDO_OK) {
            bench_fail("synchronize failed");
        }
    }
    if (ordo_coord_drain(b->coord, ordo_deadline_after_ms(300000)) != ORDO_OK) {
        bench_fail("drain failed");
    }
}

/* coord_overhead: host time per op, the coordinator against the hand-built
 * chain, samples alternating so noisy spells hit both. Both streams'
 * workers on CPU slot 1, the measured thread alone on slot 0. */
static void coord_overhead(const bench_options_t *options, ordo_device_t *device) {
    const char *name = "coord_overhead";
    bench_sizes_t sizes = bench_pick(options, 15, 20000);
    coord_bench_t b = {0};
    bench_pin(1);
    for (unsigned s = 0; s < COORD_STREAMS; ++s) {
        if (ordo_stream_create(device, 0, &b.streams[s]) != ORDO_OK ||
            ordo_signal_create(0, &b.timelines[s]) != ORDO_OK) {
            bench_fail("cannot create a stream");
        }
    }
    bench_pin(0);
    if (ordo_coord_create(device, NULL, &b.coord) != ORDO_OK) {
        bench_fail("cannot create a coordinator");
    }
    double *ordo_times = calloc(sizes.samples, sizeof *ordo_times);
    double *manual_times = calloc(sizes.samples, sizeof *manual_times);
    if (!ordo_times || !manual_times) {
        bench_fail("out of memory");
    }
    ordo_coord_metrics_t before;
    ordo_coord_metrics_t after;
    for (size_t s = 0; s <= sizes.samples; ++s) { /* sample 0 warms up */
        uint64_t t0 = bench_now_ns();
        manual_ops(&b, sizes.batch);
        uint64_t t1 = bench_now_ns();
        settle(&b);
        if (s == 1) {
            ordo_coord_metrics(b.coord, &before);
        }
        uint64_t t2 = bench_now_ns();
        coord_ops(&b, sizes.batch);
        uint64_t t3 = bench_now_ns();
        settle(&b);
        if (s > 0) {
            manual_times[s - 1] = (double)(t1 - t0) / (double)sizes.batch;
            ordo_times[s - 1] = (double)(t3 - t2) / (double)sizes.batch;
        }
    }
    ordo_coord_metrics(b.coord, &after);
    bench_unpin();
    bench_stats_t manual = bench_summarise(manual_times, sizes.samples, sizes.batch);
    bench_stats_t ordo = bench_summarise(ordo_times, sizes.samples, sizes.batch);
    bench_emit(name, "manual_stream_wait", &manual, NULL, 0);
    bench_ratio_t ratios[2] = {{"manual_stream_wait", ordo.median_ns / manual.median_ns},
                               {"budget", ordo.median_ns / COORD_BUDGET_NS}};
    bench_emit(name, "ordo", &ordo, ratios, 2);
    uint64_t ops = after.registered - before.registered;
    printf("{\"name\":\"%s\",\"impl\":\"ordo_metrics\",\"median_ns\":%.2f,\"p90_ns\":%.2f,"
           "\"iters\":%llu,\"waits_emitted_per_op\":%.3f,\"waits_elided_per_op\":%.3f,"
           "\"coordination_ns_per_op\":%.1f}\n",
           name, ordo.median_ns, ordo.p90_ns, (unsigned long long)ordo.iters,
           ops ? (double)(after.waits_emitted - before.waits_emitted) / (double)ops : 0.0,
           ops ? (double)(after.waits_elided - before.waits_elided) / (double)ops : 0.0,
           ops ? (double)(after.coordination_ns - before.coordination_ns) / (double)ops : 0.0);
    fflush(stdout);
    if (ordo_coord_destroy(b.coord) != ORDO_OK) {
        bench_fail("cannot destroy the coordinator");
    }
    for (unsigned s = 0; s < COORD_STREAMS; ++s) {
        ordo_stream_destroy(b.streams[s]);
        ordo_signal_destroy(b.timelines[s]);
    }
    free(ordo_times);
    free(manual_times);
}

void bench_coord_all(const bench_options_t *options) {
    if (!bench_selected(options, "coord_overhead")) {
        return;
    }
    ordo_device_t *device;
    if (ordo_device_open("cpu", &device) != ORDO_OK) {
        bench_fail("cannot open the cpu device");
    }
    coord_overhead(options, device);
    ordo_device_release(device);
}
