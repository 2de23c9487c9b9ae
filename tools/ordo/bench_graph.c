/* graph_steps: a program that repeats one step, as a training loop or a
 * decode loop does, with its ordering analysed at every step or recorded
 * once (ordo/graph.h).
 *
 * A step is STEP_TASKS host tasks over two streams and STEP_BUFFERS
 * buffers: each task reads one buffer and read-modify-writes another, in a
 * fixed pattern that moves between the streams every few tasks (so the
 * step needs cross-stream waits). STEPS steps make a sample:
 *
 *   ordo              every task submitted (ordo_tracker_submit_host),
 *                     the tracker's analysis at every step;
 *   ordo_replay       the step recorded once (in the timed region), then
 *                     replayed STEPS times;
 *   ordo_record_each  every step recorded, replayed once and destroyed.
 *
 * Two lines per implementation, from the same samples, per step:
 * graph_steps, the submitting thread's time (from its first call until
 * its last returned: what the analysis, or its absence, costs the host),
 * and graph_steps_end_to_end, until both streams have run everything. The
 * streams' workers sit one per CPU (the submitter shares CPU slot 0 with
 * the second's), as the two-stream dag lines do. The three alternate
 * sample by sample; each sample's buffers are checked against a serial
 * run of the same steps. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ordo/buffer.h"
#include "ordo/device.h"
#include "ordo/graph.h"
#include "ordo/stream.h"
#include "ordo/tracker.h"

#define STEP_TASKS 32
#define STEP_BUFFERS 8
#define STEP_GROUP 4 /* consecutive tasks on one stream */

typedef struct step_slot {
    _Alignas(64) uint64_t value;
} step_slot_t;

typedef struct step_task {
    uint64_t *written;
    const uint64_t *read;
    uint64_t k;
    unsigned stream;
    unsigned w, r; /* buffer indices */
} step_task_t;

typedef struct step_program {
    step_slot_t slots[STEP_BUFFERS];
    step_task_t tasks[STEP_TASKS];
    uint64_t expected[STEP_BUFFERS]; /* after STEPS steps from zero */
    ordo_tracker_t *tracker;
    ordo_stream_t *streams[2];
    ordo_buffer_t *buffers[STEP_BUFFERS];
} step_program_t;

static void step_apply(const step_task_t *t, uint64_t *written, uint64_t read) {
    *written = *written * 3 + read + t->k;
}

static ordo_status_t step_run(void *ctx) {
    const step_task_t *t = ctx;
    step_apply(t, t->written, *t->read);
    return ORDO_OK;
}

static void program_init(step_program_t *p, uint64_t steps) {
    memset(p, 0, sizeof *p);
    uint64_t rng = 0x2545f4914f6cdd1du;
    for (unsigned k = 0; k < STEP_TASKS; ++k) {
        rng = rng * 6364136223846793005u + 1442695040888963407u;
        unsigned w = (unsigned)(rng >> 33) % STEP_BUFFERS;
        unsigned r = (w + 1 + (unsigned)(rng >> 45) % (STEP_BUFFERS - 1)) % STEP_BUFFERS;
        p->tasks[k] = (step_task_t){
            &p->slots[w].value, &p->slots[r].value, k + 1, (k / STEP_GROUP) % 2, w, r};
    }
    uint64_t v[STEP_BUFFERS] = {0};
    for (uint64_t s = 0; s < steps; ++s) {
        for (unsigned k = 0; k < STEP_TASKS; ++k) {
            step_apply(&p->tasks[k], &v[p->tasks[k].w], v[p->tasks[k].r]);
        }
    }
    memcpy(p->expected, v, sizeof v);
}

static void program_reset(step_program_t *p) {
    for (unsigned b = 0; b < STEP_BUFFERS; ++b) {
        p->slots[b].value = 0;
    }
}

static void program_check(const step_program_t *p, const char *impl) {
    for (unsigned b = 0; b < STEP_BUFFERS; ++b) {
        if (p->slots[b].value != p->expected[b]) {
            fprintf(stderr, "ordo bench: graph_steps: %s computed a wrong result\n", impl);
            exit(1);
        }
    }
}

static void step_submit(step_program_t *p) {
    for (unsigned k = 0; k < STEP_TASKS; ++k) {
        const step_task_t *t = &p->tasks[k];
        ordo_access_t list[] = {{p->buffers[t->w], ORDO_ACCESS_READ_WRITE},
                                {p->buffers[t->r], ORDO_ACCESS_READ}};
        if (ordo_tracker_submit_host(p->tracker, p->streams[t->stream], list, 2, step_run,
                                     (void *)t) != ORDO_OK) {
            bench_fail("submission refused");
        }
    }
}

static ordo_graph_t *step_record(step_program_t *p) {
    ordo_graph_t *graph = NULL;
    if (ordo_tracker_record_begin(p->tracker) != ORDO_OK) {
        bench_fail("cannot begin a recording");
    }
    step_submit(p);
    if (ordo_tracker_record_end(p->tracker, &graph) != ORDO_OK) {
        bench_fail("cannot end a recording");
    }
    return graph;
}

static void step_replay(ordo_graph_t *graph) {
    if (ordo_graph_replay(graph) != ORDO_OK) {
        bench_fail("replay refused");
    }
}

static void step_destroy(ordo_graph_t *graph) {
    if (ordo_graph_destroy(graph) != ORDO_OK) {
        bench_fail("cannot destroy a graph");
    }
}

typedef enum step_impl { IMPL_EAGER, IMPL_REPLAY, IMPL_RECORD_EACH, IMPL_COUNT } step_impl_t;

static const char *const impl_names[IMPL_COUNT] = {"ordo", "ordo_replay", "ordo_record_each"};

/* One sample of `steps` steps: per step, the submitting thread's time
 * (until its last call returned) in *out_issue, and until the streams
 * ran everything (returned). */
static double step_sample(step_program_t *p, step_impl_t impl, uint64_t steps, double *out_issue) {
    bench_pin(0);
    program_reset(p);
    uint64_t t0 = bench_now_ns();
    if (impl == IMPL_EAGER) {
        for (uint64_t s = 0; s < steps; ++s) {
            step_submit(p);
        }
    } else if (impl == IMPL_REPLAY) {
        ordo_graph_t *graph = step_record(p);
        for (uint64_t s = 0; s < steps; ++s) {
            step_replay(graph);
        }
        step_destroy(graph); /* its queued replays run on */
    } else {
        for (uint64_t s = 0; s < steps; ++s) {
            ordo_graph_t *graph = step_record(p);
            step_replay(graph);
            step_destroy(graph);
        }
    }
    *out_issue = (double)(bench_now_ns() - t0) / (double)steps;
    for (int k = 0; k < 2; ++k) {
        if (ordo_stream_synchronize(p->streams[k], ordo_deadline_after_ms(300000)) != ORDO_OK) {
            bench_fail("synchronize failed");
        }
    }
    double per_step = (double)(bench_now_ns() - t0) / (double)steps;
    program_check(p, impl_names[impl]);
    return per_step;
}

/* One line per implementation, the replay's with its ratios. */
static void emit_lines(const char *name, double **times, size_t samples, uint64_t steps) {
    bench_stats_t stats[IMPL_COUNT];
    for (int i = 0; i < IMPL_COUNT; ++i) {
        stats[i] = bench_summarise(times[i], samples, steps);
    }
    bench_emit(name, impl_names[IMPL_EAGER], &stats[IMPL_EAGER], NULL, 0);
    bench_ratio_t each[] = {
        {"ordo", stats[IMPL_RECORD_EACH].median_ns / stats[IMPL_EAGER].median_ns}};
    bench_emit(name, impl_names[IMPL_RECORD_EACH], &stats[IMPL_RECORD_EACH], each, 1);
    bench_ratio_t replay[] = {
        {"ordo_record_each", stats[IMPL_REPLAY].median_ns / stats[IMPL_RECORD_EACH].median_ns},
        {"ordo", stats[IMPL_REPLAY].median_ns / stats[IMPL_EAGER].median_ns}};
    bench_emit(name, impl_names[IMPL_REPLAY], &stats[IMPL_REPLAY], replay, 2);
}

void bench_graph_all(const bench_options_t *options) {
    if (!bench_selected(options, "graph_steps")) {
        return;
    }
    const uint64_t steps = options->quick ? 20 : 1000;
    const size_t samples = options->quick ? 2 : 7;
    ordo_device_t *device;
    if (ordo_device_open("cpu", &device) != ORDO_OK) {
        bench_fail("cannot open the cpu device");
    }
    step_program_t *p = aligned_alloc(64, sizeof *p);
    double *times[IMPL_COUNT];
    double *issue[IMPL_COUNT];
    for (int i = 0; i < IMPL_COUNT; ++i) {
        times[i] = calloc(samples, sizeof(double));
        issue[i] = calloc(samples, sizeof(double));
        if (!times[i] || !issue[i]) {
            bench_fail("out of memory");
        }
    }
    if (!p) {
        bench_fail("out of memory");
    }
    program_init(p, steps);
    /* Stream 0's worker on CPU slot 1, stream 1's on slot 0. */
    for (int k = 0; k < 2; ++k) {
        bench_pin(k == 0 ? 1 : 0);
        if (ordo_stream_create(device, 0, &p->streams[k]) != ORDO_OK) {
            bench_fail("cannot create a stream");
        }
    }
    bench_pin(0);
    if (ordo_tracker_create(device, &p->tracker) != ORDO_OK) {
        bench_fail("cannot create a tracker");
    }
    for (unsigned b = 0; b < STEP_BUFFERS; ++b) {
        if (ordo_buffer_create(p->tracker, &p->buffers[b]) != ORDO_OK) {
            bench_fail("cannot create a buffer");
        }
    }
    for (size_t s = 0; s < samples; ++s) {
        for (int i = 0; i < IMPL_COUNT; ++i) {
            times[i][s] = step_sample(p, (step_impl_t)i, steps, &issue[i][s]);
        }
    }
    bench_unpin();
    emit_lines("graph_steps", issue, samples, steps);
    emit_lines("graph_steps_end_to_end", times, samples, steps);

    for (unsigned b = 0; b < STEP_BUFFERS; ++b) {
        if (ordo_buffer_release(p->buffers[b], NULL, NULL) != ORDO_OK) {
            bench_fail("cannot release a buffer");
        }
    }
    if (ordo_tracker_close(p->tracker, ordo_deadline_after_ms(300000)) != ORDO_OK) {
        bench_fail("cannot close the tracker");
    }
    for (int k = 0; k < 2; ++k) {
        ordo_stream_destroy(p->streams[k]);
    }
    for (int i = 0; i < IMPL_COUNT; ++i) {
        free(times[i]);
        free(issue[i]);
    }
    free(p);
    ordo_device_release(device);
}
