/* ordo_mpi_bench: benchmarks of ordo/mpi.h against hand-written MPI, run
 * under mpirun with 2 ranks (`mpirun -np 2 ordo_mpi_bench [--quick]
 * [FILTER]`). Rank 0 prints JSON lines as `ordo bench` does (name, impl,
 * median_ns, p90_ns, iters, cpu, ratio_to); every rank runs every
 * benchmark in the same order.
 *
 * mpi_overlap: steps of compute and an allreduce of comparable cost (the
 * compute's length is calibrated against the allreduce's once, on rank 0).
 * Each step computes one gradient bucket (of BUCKETS, in turn) and reduces
 * it in place; per step:
 *   ordo          the compute a host task on a compute stream (a write of
 *                 the bucket), then ordo_mpi_allreduce of it; the tracker
 *                 orders the next write of a bucket after its allreduce;
 *   mpi_manual    MPI_Iallreduce of bucket k while bucket k + 1 is
 *                 computed on the calling thread, in slices with an
 *                 MPI_Test between them (MPI progresses only inside its
 *                 calls), then MPI_Wait of bucket k and MPI_Iallreduce of
 *                 bucket k + 1 (one allreduce in flight: with more, Open
 *                 MPI 4.1's schedules advanced only by those tests ran
 *                 several times slower here);
 *   mpi_blocking  compute, then MPI_Allreduce: no overlap;
 *   compute_only, allreduce_only: each part alone, for scale.
 * The three are interleaved sample by sample; ordo's results are checked.
 *
 * mpi_submit: one tracked send of 8 bytes, submission and completion,
 * amortised over a batch (rank 1 receives them): ordo (ordo_mpi_send,
 * then a synchronize of the communication stream), ordo_submit_only (the
 * ordo_mpi_send calls alone), mpi (MPI_Isend + MPI_Wait of 8 bytes against
 * MPI_Recv).
 * mpi_remote_signal: a round trip through signals across ranks (each rank
 * publishes one, observes the other's, waits and raises in turn) against an
 * MPI_Send/MPI_Recv ping-pong of 8 bytes (mpi_pingpong). */
#include <math.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "ordo/mpi.h"
#include "ordo/ordo.h"

#define WAIT_MS 60000u /* any single ordo wait longer than this is a failure */
#define ALARM_S 600u   /* the bound on the whole run */
#define BUCKETS 4

static int rank, size;

static _Noreturn void fail(const char *what) {
    const char *detail = ordo_error_message();
    fprintf(stderr, "ordo_mpi_bench (rank %d): %s%s%s\n", rank, what, detail[0] ? ": " : "",
            detail);
    fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
    exit(1);
}

#define MUST(expr)                                                                                 \
    do {                                                                                           \
        if ((expr) != ORDO_OK) {                                                                   \
            fail(#expr);                                                                           \
        }                                                                                          \
    } while (0)

static ordo_deadline_t deadline(void) {
    return ordo_deadline_after_ms(WAIT_MS);
}

/* Every rank starts a sample together; rank 0's clock measures it. */
static uint64_t sample_start(void) {
    MPI_Barrier(MPI_COMM_WORLD);
    return bench_now_ns();
}

/* ---- mpi_overlap --------------------------------------------------------- */

typedef struct overlap {
    int len;    /* doubles a bucket */
    int passes; /* the compute's work an element */
    double *bucket[BUCKETS];
    double *weights; /* what the compute reads */
} overlap_t;

/* The gradient of one step: a chain of passes an element (the length is
 * the calibrated knob), plus what identifies the rank and step. */
static void compute_slice(const overlap_t *o, int k, int step, int from, int to) {
    double *out = o->bucket[k];
    double tag = (double)(rank + 1) * 1000.0 + step;
    for (int i = from; i < to; ++i) {
        double v = o->weights[i];
        for (int p = 0; p < o->passes; ++p) {
            v = v * 0.999 + 0.001;
        }
        out[i] = v + tag;
    }
}

static void compute(const overlap_t *o, int k, int step) {
    compute_slice(o, k, step, 0, o->len);
}

/* What bucket element i holds after the allreduce of step's gradient. */
static double reduced(const overlap_t *o, int step, int i) {
    double v = o->weights[i];
    for (int p = 0; p < o->passes; ++p) {
        v = v * 0.999 + 0.001;
    }
    double sum = 0;
    for (int r = 0; r < size; ++r) {
        sum += v + (double)(r + 1) * 1000.0 + step;
    }
    return sum;
}

/* The last step that used each bucket holds its reduction. */
static void verify(const overlap_t *o, int steps, const char *impl) {
    for (int k = 0; k < BUCKETS && k < steps; ++k) {
        int step = steps - 1 - ((steps - 1 - k) % BUCKETS);
        for (int i = 0; i < o->len; i += 1 + o->len / 16) {
            double expect = reduced(o, step, i);
            if (fabs(o->bucket[k][i] - expect) > 1e-9 * fabs(expect)) {
                fprintf(stderr, "mpi_overlap %s: bucket %d element %d: %.17g, expected %.17g\n",
                        impl, k, i, o->bucket[k][i], expect);
                fail("a wrong result");
            }
        }
    }
}

static double run_blocking(const overlap_t *o, int steps) {
    uint64_t start = sample_start();
    for (int step = 0; step < steps; ++step) {
        int k = step % BUCKETS;
        compute(o, k, step);
        MPI_Allreduce(MPI_IN_PLACE, o->bucket[k], o->len, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    }
    double ns = (double)(bench_now_ns() - start) / steps;
    verify(o, steps, "mpi_blocking");
    return ns;
}

/* The hand-written overlap: compute in slices, testing the requests in
 * flight between them so MPI makes progress. */
#define SLICES 16

static double run_manual(const overlap_t *o, int steps) {
    MPI_Request in_flight = MPI_REQUEST_NULL; /* the previous bucket's allreduce */
    uint64_t start = sample_start();
    for (int step = 0; step < steps; ++step) {
        int k = step % BUCKETS;
        for (int s = 0; s < SLICES; ++s) {
            compute_slice(o, k, step, (int)((int64_t)o->len * s / SLICES),
                          (int)((int64_t)o->len * (s + 1) / SLICES));
            int done;
            MPI_Test(&in_flight, &done, MPI_STATUS_IGNORE);
        }
        MPI_Wait(&in_flight, MPI_STATUS_IGNORE);
        MPI_Iallreduce(MPI_IN_PLACE, o->bucket[k], o->len, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD,
                       &in_flight);
    }
    MPI_Wait(&in_flight, MPI_STATUS_IGNORE);
    double ns = (double)(bench_now_ns() - start) / steps;
    verify(o, steps, "mpi_manual");
    return ns;
}

typedef struct ordo_side {
    ordo_tracker_t *tracker;
    ordo_stream_t *compute;
    ordo_stream_t *comm; /* given to mpi */
    ordo_mpi_t *mpi;
    ordo_buffer_t *bucket[BUCKETS];
} ordo_side_t;

static void ordo_side_open(ordo_side_t *side, ordo_device_t *device, int buckets) {
    memset(side, 0, sizeof *side);
    MUST(ordo_tracker_create(device, &side->tracker));
    MUST(ordo_stream_create(device, 0, &side->compute));
    MUST(ordo_stream_create(device, 0, &side->comm));
    MUST(ordo_mpi_create(side->tracker, side->comm, MPI_COMM_WORLD, &side->mpi));
    for (int k = 0; k < buckets; ++k) {
        MUST(ordo_buffer_create(side->tracker, &side->bucket[k]));
    }
}

static void ordo_side_close(ordo_side_t *side) {
    for (int k = 0; k < BUCKETS; ++k) {
        if (side->bucket[k]) {
            MUST(ordo_buffer_release(side->bucket[k], NULL, NULL));
        }
    }
    MUST(ordo_tracker_synchronize(side->tracker, deadline()));
    MUST(ordo_mpi_destroy(side->mpi, deadline()));
    MUST(ordo_tracker_destroy(side->tracker));
    MUST(ordo_stream_destroy(side->compute));
    MUST(ordo_stream_destroy(side->comm));
}

typedef struct compute_task {
    const overlap_t *o;
    int k, step;
} compute_task_t;

static ordo_status_t compute_run(void *ctx) {
    const compute_task_t *t = ctx;
    compute(t->o, t->k, t->step);
    return ORDO_OK;
}

static double run_ordo(const overlap_t *o, ordo_side_t *side, compute_task_t *tasks, int steps) {
    uint64_t start = sample_start();
    for (int step = 0; step < steps; ++step) {
        int k = step % BUCKETS;
        tasks[step] = (compute_task_t){o, k, step};
        ordo_access_t write = {side->bucket[k], ORDO_ACCESS_WRITE};
        MUST(ordo_tracker_submit_host(side->tracker, side->compute, &write, 1, compute_run,
                                      &tasks[step]));
        MUST(ordo_mpi_allreduce(side->mpi, side->bucket[k], o->bucket[k], o->len, MPI_DOUBLE,
                                MPI_SUM));
    }
    MUST(ordo_stream_synchronize(side->comm, deadline()));
    double ns = (double)(bench_now_ns() - start) / steps;
    verify(o, steps, "ordo");
    return ns;
}

static double run_compute_only(const overlap_t *o, int steps) {
    uint64_t start = sample_start();
    for (int step = 0; step < steps; ++step) {
        compute(o, step % BUCKETS, step);
    }
    return (double)(bench_now_ns() - start) / steps;
}

static double run_allreduce_only(const overlap_t *o, int steps) {
    uint64_t start = sample_start();
    for (int step = 0; step < steps; ++step) {
        MPI_Allreduce(MPI_IN_PLACE, o->bucket[step % BUCKETS], o->len, MPI_DOUBLE, MPI_SUM,
                      MPI_COMM_WORLD);
    }
    return (double)(bench_now_ns() - start) / steps;
}

/* The passes an element that make the compute of a bucket take about as
 * long as its allreduce (rank 0 measures, every rank uses its answer). */
static int calibrate(overlap_t *o, int reps) {
    o->passes = 8;
    double allreduce_ns[32], compute_ns[32];
    run_allreduce_only(o, BUCKETS); /* the first calls set up MPI's connections */
    run_compute_only(o, BUCKETS);
    for (int r = 0; r < reps; ++r) {
        allreduce_ns[r] = run_allreduce_only(o, BUCKETS);
        compute_ns[r] = run_compute_only(o, BUCKETS);
    }
    bench_stats_t a = bench_summarise(allreduce_ns, (size_t)reps, 1);
    bench_stats_t c = bench_summarise(compute_ns, (size_t)reps, 1);
    int passes = (int)lround(o->passes * a.median_ns / (c.median_ns > 1 ? c.median_ns : 1));
    passes = passes < 1 ? 1 : passes > 100000 ? 100000 : passes;
    MPI_Bcast(&passes, 1, MPI_INT, 0, MPI_COMM_WORLD);
    return passes;
}

static void bench_overlap(const bench_options_t *options, ordo_device_t *device) {
    const char *name = "mpi_overlap";
    if (!bench_selected(options, name)) {
        return;
    }
    bench_sizes_t sizes = bench_pick(options, 15, 32);
    overlap_t o = {.len = options->quick ? 4096 : 1 << 17};
    o.weights = malloc(sizeof(double) * (size_t)o.len);
    for (int k = 0; k < BUCKETS; ++k) {
        o.bucket[k] = calloc((size_t)o.len, sizeof(double));
    }
    if (!o.weights || !o.bucket[BUCKETS - 1]) {
        fail("out of memory");
    }
    for (int i = 0; i < o.len; ++i) {
        o.weights[i] = (double)(i % 1000) / 1000.0;
    }
    o.passes = calibrate(&o, options->quick ? 3 : 9);
    int steps = (int)sizes.batch;
    ordo_side_t side;
    ordo_side_open(&side, device, BUCKETS);
    compute_task_t *tasks = calloc((size_t)steps, sizeof *tasks);
    enum { ORDO, MANUAL, BLOCKING, COMPUTE, ALLREDUCE, IMPLS };
    static const char *impls[IMPLS] = {"ordo", "mpi_manual", "mpi_blocking", "compute_only",
                                       "allreduce_only"};
    double *samples[IMPLS];
    for (int i = 0; i < IMPLS; ++i) {
        samples[i] = calloc(sizes.samples, sizeof(double));
    }
    /* One unmeasured round of each, then the samples, interleaved. */
    run_ordo(&o, &side, tasks, steps);
    run_manual(&o, steps);
    run_blocking(&o, steps);
    for (size_t s = 0; s < sizes.samples; ++s) {
        for (int i = 0; i < IMPLS; ++i) {
            int impl = (int)((i + s) % IMPLS);
            double ns = impl == ORDO       ? run_ordo(&o, &side, tasks, steps)
                        : impl == MANUAL   ? run_manual(&o, steps)
                        : impl == BLOCKING ? run_blocking(&o, steps)
                        : impl == COMPUTE  ? run_compute_only(&o, steps)
                                           : run_allreduce_only(&o, steps);
            samples[impl][s] = ns;
        }
    }
    ordo_side_close(&side);
    bench_stats_t stats[IMPLS];
    for (int i = 0; i < IMPLS; ++i) {
        stats[i] = bench_summarise(samples[i], sizes.samples, (uint64_t)steps);
    }
    if (rank == 0) {
        bench_emit(name, impls[COMPUTE], &stats[COMPUTE], NULL, 0);
        bench_emit(name, impls[ALLREDUCE], &stats[ALLREDUCE], NULL, 0);
        bench_emit(name, impls[BLOCKING], &stats[BLOCKING], NULL, 0);
        bench_ratio_t manual_ratio = {"mpi_blocking",
                                      stats[MANUAL].median_ns / stats[BLOCKING].median_ns};
        bench_emit(name, impls[MANUAL], &stats[MANUAL], &manual_ratio, 1);
        bench_ratio_t ratios[2] = {
            {"mpi_manual", stats[ORDO].median_ns / stats[MANUAL].median_ns},
            {"mpi_blocking", stats[ORDO].median_ns / stats[BLOCKING].median_ns}};
        bench_emit(name, impls[ORDO], &stats[ORDO], ratios, 2);
    }
    for (int i = 0; i < IMPLS; ++i) {
        free(samples[i]);
    }
    free(tasks);
    for (int k = 0; k < BUCKETS; ++k) {
        free(o.bucket[k]);
    }
    free(o.weights);
}

/* ---- mpi_submit ---------------------------------------------------------- */

static void bench_submit(const bench_options_t *options, ordo_device_t *device) {
    const char *name = "mpi_submit";
    if (!bench_selected(options, name)) {
        return;
    }
    bench_sizes_t sizes = bench_pick(options, 15, 2000);
    const int ops = (int)sizes.batch, tag = 3;
    ordo_side_t side;
    ordo_side_open(&side, device, 1);
    uint64_t word = 0x0123456789abcdefu, got = 0;
    enum { ORDO, SUBMIT, RAW, IMPLS };
    double *samples[IMPLS];
    for (int i = 0; i < IMPLS; ++i) {
        samples[i] = calloc(sizes.samples + 1, sizeof(double));
    }
    /* Sample 0 is a warm-up, left out. */
    for (size_t s = 0; s <= sizes.samples; ++s) {
        /* ordo: rank 0 sends, rank 1 receives, both tracked. */
        uint64_t start = sample_start();
        if (rank == 0) {
            for (int op = 0; op < ops; ++op) {
                MUST(ordo_mpi_send(side.mpi, side.bucket[0], &word, 1, MPI_UINT64_T, 1, tag));
            }
            uint64_t submitted = bench_now_ns();
            MUST(ordo_stream_synchronize(side.comm, deadline()));
            uint64_t end = bench_now_ns();
            if (s) {
                samples[ORDO][s - 1] = (double)(end - start) / ops;
                samples[SUBMIT][s - 1] = (double)(submitted - start) / ops;
            }
        } else if (rank == 1) {
            for (int op = 0; op < ops; ++op) {
                MUST(ordo_mpi_recv(side.mpi, side.bucket[0], &got, 1, MPI_UINT64_T, 0, tag));
            }
            MUST(ordo_stream_synchronize(side.comm, deadline()));
            if (got != word) {
                fail("mpi_submit: ordo_mpi_recv received a wrong value");
            }
        }
        /* Raw MPI, the same traffic. */
        start = sample_start();
        if (rank == 0) {
            for (int op = 0; op < ops; ++op) {
                MPI_Request request;
                MPI_Isend(&word, 1, MPI_UINT64_T, 1, tag, MPI_COMM_WORLD, &request);
                MPI_Wait(&request, MPI_STATUS_IGNORE);
            }
            if (s) {
                samples[RAW][s - 1] = (double)(bench_now_ns() - start) / ops;
            }
        } else if (rank == 1) {
            for (int op = 0; op < ops; ++op) {
                MPI_Recv(&got, 1, MPI_UINT64_T, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            }
        }
    }
    ordo_side_close(&side);
    if (rank == 0) {
        bench_stats_t stats[IMPLS];
        for (int i = 0; i < IMPLS; ++i) {
            stats[i] = bench_summarise(samples[i], sizes.samples, (uint64_t)ops);
        }
        bench_emit(name, "mpi", &stats[RAW], NULL, 0);
        bench_ratio_t submit_ratio = {"mpi", stats[SUBMIT].median_ns / stats[RAW].median_ns};
        bench_emit(name, "ordo_submit_only", &stats[SUBMIT], &submit_ratio, 1);
        bench_ratio_t ratio = {"mpi", stats[ORDO].median_ns / stats[RAW].median_ns};
        bench_emit(name, "ordo", &stats[ORDO], &ratio, 1);
    }
    for (int i = 0; i < IMPLS; ++i) {
        free(samples[i]);
    }
}

/* ---- mpi_remote_signal --------------------------------------------------- */

/* A round trip through signals across ranks: rank 0 raises its published
 * signal and waits for rank 1's, which waits for rank 0's and raises its
 * own; against an MPI_Send/MPI_Recv ping-pong of 8 bytes. */
static void bench_remote_signal(const bench_options_t *options, ordo_device_t *device) {
    const char *name = "mpi_remote_signal";
    if (!bench_selected(options, name)) {
        return;
    }
    bench_sizes_t sizes = bench_pick(options, 15, 200);
    const int trips = (int)sizes.batch, tag = 4;
    ordo_side_t side;
    ordo_side_open(&side, device, 1);
    ordo_signal_t *mine, *theirs;
    MUST(ordo_signal_create(0, &mine));
    MUST(ordo_mpi_signal_publish(side.mpi, mine, 1));
    MUST(ordo_mpi_signal_open(side.mpi, 1 - rank, 1, &theirs));
    enum { ORDO, RAW, IMPLS };
    double *samples[IMPLS];
    for (int i = 0; i < IMPLS; ++i) {
        samples[i] = calloc(sizes.samples + 1, sizeof(double));
    }
    uint64_t value = 0, word = 0;
    for (size_t s = 0; s <= sizes.samples; ++s) {
        uint64_t start = sample_start();
        for (int t = 0; t < trips; ++t) {
            ++value;
            if (rank == 0) {
                MUST(ordo_signal_advance(mine, value));
                MUST(ordo_signal_wait(theirs, value, deadline()));
            } else {
                MUST(ordo_signal_wait(theirs, value, deadline()));
                MUST(ordo_signal_advance(mine, value));
            }
        }
        if (s && rank == 0) {
            samples[ORDO][s - 1] = (double)(bench_now_ns() - start) / trips;
        }
        start = sample_start();
        for (int t = 0; t < trips; ++t) {
            if (rank == 0) {
                MPI_Send(&word, 1, MPI_UINT64_T, 1, tag, MPI_COMM_WORLD);
                MPI_Recv(&word, 1, MPI_UINT64_T, 1, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
            } else {
                MPI_Recv(&word, 1, MPI_UINT64_T, 0, tag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
                MPI_Send(&word, 1, MPI_UINT64_T, 0, tag, MPI_COMM_WORLD);
            }
        }
        if (s && rank == 0) {
            samples[RAW][s - 1] = (double)(bench_now_ns() - start) / trips;
        }
    }
    /* Both ranks are done with the other's signal before either closes. */
    MPI_Barrier(MPI_COMM_WORLD);
    MUST(ordo_signal_release(theirs));
    ordo_side_close(&side);
    MUST(ordo_signal_release(mine));
    if (rank == 0) {
        bench_stats_t stats[IMPLS];
        for (int i = 0; i < IMPLS; ++i) {
            stats[i] = bench_summarise(samples[i], sizes.samples, (uint64_t)trips);
        }
        bench_emit(name, "mpi_pingpong", &stats[RAW], NULL, 0);
        bench_ratio_t ratio = {"mpi_pingpong", stats[ORDO].median_ns / stats[RAW].median_ns};
        bench_emit(name, "ordo", &stats[ORDO], &ratio, 1);
    }
    for (int i = 0; i < IMPLS; ++i) {
        free(samples[i]);
    }
}

/* ---- main ---------------------------------------------------------------- */

int main(int argc, char **argv) {
    int provided = 0;
    if (MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS) {
        fprintf(stderr, "ordo_mpi_bench: MPI_Init_thread failed\n");
        return 1;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    bench_options_t options = {NULL, 0};
    for (int i = 1; i < argc; ++i) {
        if (strcmp(argv[i], "--quick") == 0) {
            options.quick = 1;
        } else if (argv[i][0] == '-' || options.filter) {
            if (rank == 0) {
                fprintf(stderr,
                        "usage: mpirun -np 2 ordo_mpi_bench [--quick] [FILTER]\n"
                        "ordo_mpi_bench: unexpected argument '%s'\n",
                        argv[i]);
            }
            MPI_Finalize();
            return 2;
        } else {
            options.filter = argv[i];
        }
    }
    if (size != 2) {
        if (rank == 0) {
            fprintf(stderr, "ordo_mpi_bench: run it on 2 ranks (mpirun -np 2), not %d\n", size);
        }
        MPI_Finalize();
        return 2;
    }
    if (provided < MPI_THREAD_MULTIPLE) {
        if (rank == 0) {
            fprintf(stderr, "ordo_mpi_bench: MPI gives thread level %d, not MPI_THREAD_MULTIPLE\n",
                    provided);
        }
        MPI_Finalize();
        return 1;
    }
    alarm(ALARM_S); /* MPI's own waits have no deadline: this bounds them */
    ordo_device_t *device;
    MUST(ordo_device_open("cpu:0", &device));
    bench_overlap(&options, device);
    bench_submit(&options, device);
    bench_remote_signal(&options, device);
    MUST(ordo_device_release(device));
    int status = 0;
    if (!bench_any_selected()) {
        if (rank == 0) {
            fprintf(stderr, "ordo_mpi_bench: no benchmark name contains '%s'\n", options.filter);
        }
        status = 2;
    }
    MPI_Finalize();
    return status;
}
