/* trace_overhead: the cost of one recorded event (ordo_trace_instant while
 * a trace records) and of the same call while tracing is off, against an
 * empty loop of the same shape (the off case must be within noise of it). */
#include <stdio.h>
#include <stdlib.h>

#include "base/trace.h"
#include "bench.h"
#include "ordo/trace.h"

/* What one event's time stamp alone costs here: the floor of recording. */
static bench_stats_t run_timestamps(bench_sizes_t sz) {
    double *samples = calloc(sz.samples, sizeof *samples);
    if (!samples) {
        bench_fail("out of memory");
    }
    volatile uint64_t sink = 0;
    for (size_t s = 0; s < sz.samples; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            sink += trace_now();
        }
        samples[s] = (double)(bench_now_ns() - t0) / (double)sz.batch;
    }
    (void)sink;
    bench_stats_t stats = bench_summarise(samples, sz.samples, sz.batch);
    free(samples);
    return stats;
}

/* call: 0 an empty loop, 1 ordo_trace_instant, 2 the check every internal
 * hook site makes (recording an event only while tracing is on). */
static bench_stats_t run_marks(bench_sizes_t sz, int call) {
    double *samples = calloc(sz.samples, sizeof *samples);
    if (!samples) {
        bench_fail("out of memory");
    }
    ordo_status_t (*volatile mark)(const char *) = ordo_trace_instant;
    volatile unsigned sink = 0;
    for (size_t s = 0; s < sz.samples; ++s) {
        uint64_t t0 = bench_now_ns();
        for (uint64_t k = 0; k < sz.batch; ++k) {
            if (call == 1) {
                sink += (unsigned)mark("mark");
            } else if (call == 2) {
                if (trace_on()) {
                    trace_event_t e = {trace_now(), 0, NULL, "hook", 0, k, TRACE_INSTANT, 0};
                    ordo__trace_record(&e);
                }
                sink += (unsigned)k;
            } else {
                sink += (unsigned)k;
            }
        }
        samples[s] = (double)(bench_now_ns() - t0) / (double)sz.batch;
    }
    if (call == 1 && sink != 0) { /* the statuses' sum: ORDO_OK is 0 */
        bench_fail("ordo_trace_instant failed");
    }
    bench_stats_t stats = bench_summarise(samples, sz.samples, sz.batch);
    free(samples);
    return stats;
}

void bench_trace_all(const bench_options_t *options) {
    if (!bench_selected(options, "trace_overhead")) {
        return;
    }
    bool on = 0;
    if (ordo_trace_is_on(&on) != ORDO_OK || on) {
        /* The program is being traced itself (--trace): not measurable. */
        fprintf(stderr, "ordo bench: trace_overhead skipped: it cannot run under --trace\n");
        return;
    }
    bench_sizes_t sz = bench_pick(options, 31, 20000);
    bench_pin(0);
    bench_stats_t empty = run_marks(sz, 0);
    bench_stats_t off = run_marks(sz, 1);
    bench_stats_t hook_off = run_marks(sz, 2);
    bench_stats_t stamp = run_timestamps(sz);
    /* Enough room for every mark: the cost measured is recording, not
     * dropping. */
    ordo_trace_config_t config = {(uint64_t)(sz.samples * sz.batch) + 8192, 0};
    uint64_t t0 = bench_now_ns();
    if (ordo_trace_start(&config) != ORDO_OK) {
        bench_fail("cannot start a trace");
    }
    uint64_t start_ns = bench_now_ns() - t0;
    bench_stats_t recording = run_marks(sz, 1);
    ordo_trace_stats_t stats;
    t0 = bench_now_ns();
    if (ordo_trace_stop(NULL, &stats) != ORDO_OK) {
        bench_fail("cannot stop the trace");
    }
    /* Every mark of the measured run was recorded: the figure is recording. */
    if (stats.dropped || stats.events < (uint64_t)sz.samples * sz.batch) {
        fprintf(stderr, "ordo bench: trace_overhead: %llu events recorded, %llu dropped, of %llu\n",
                (unsigned long long)stats.events, (unsigned long long)stats.dropped,
                (unsigned long long)sz.samples * sz.batch);
        exit(1);
    }
    uint64_t stop_ns = bench_now_ns() - t0;
    bench_unpin();
    bench_emit("trace_overhead", "empty_loop", &empty, NULL, 0);
    bench_ratio_t r_hook = {"empty_loop", hook_off.median_ns / empty.median_ns};
    bench_emit("trace_overhead", "hook_off", &hook_off, &r_hook, 1);
    bench_ratio_t r_off = {"empty_loop", off.median_ns / empty.median_ns};
    bench_emit("trace_overhead", "off", &off, &r_off, 1);
    bench_emit("trace_overhead", "timestamp", &stamp, NULL, 0);
    bench_ratio_t r_on[2] = {{"off", recording.median_ns / off.median_ns},
                             {"timestamp", recording.median_ns / stamp.median_ns}};
    bench_emit("trace_overhead", "recording", &recording, r_on, 2);
    /* What recording does not pay: start maps and touches the room for
     * every event; stop (here without writing a file) gives it back. */
    printf("{\"name\":\"trace_overhead\",\"impl\":\"start_stop\",\"max_events\":%llu,"
           "\"start_ms\":%.2f,\"stop_ms\":%.2f}\n",
           (unsigned long long)config.max_events, (double)start_ns / 1e6, (double)stop_ns / 1e6);
}
