/* `ordo demo --mpi`: data-parallel training steps across MPI ranks. Each
 * rank computes the gradient of every block, the blocks are summed over
 * the ranks (ordo_mpi_allreduce), and an update stage applies each summed
 * block to the rank's parameters. Only the declared accesses order the
 * three: the allreduce of block k runs while the compute stream goes on
 * with block k + 1, the update of block k waits for its allreduce, and the
 * next step's compute of block k waits for that update's read; no wait is
 * placed by hand. Every rank checks its parameters against a serial
 * computation; rank 0 prints the summary. Built where MPI is found, run
 * under mpirun. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "demo.h"
#include "ordo/mpi.h"

typedef struct mpi_demo {
    int rank, size;
    int blocks, len, steps, work, quiet;
    double **grad, **params;
    _Atomic uint64_t compute_ns;
} mpi_demo_t;

typedef struct block_task {
    mpi_demo_t *d;
    int block, step;
} block_task_t;

/* Rank r's gradient element i of block k at step t: integer-valued, so
 * sums over ranks are exact in any order; `work` rounds of arithmetic make
 * it cost something. */
static double gradient(const mpi_demo_t *d, int r, int t, int k, int i) {
    uint64_t v = (uint64_t)(r + 1) * 7919u + (uint64_t)t * 104729u + (uint64_t)k * 1299709u + i;
    for (int w = 0; w < d->work; ++w) {
        v = (v * 6364136223846793005ull + 1442695040888963407ull) >> 1;
    }
    return (double)(v % 1000u);
}

static ordo_status_t compute_block(void *ctx) {
    block_task_t *task = ctx;
    mpi_demo_t *d = task->d;
    uint64_t t0 = ordo_time_now_ns();
    double *g = d->grad[task->block];
    for (int i = 0; i < d->len; ++i) {
        g[i] = gradient(d, d->rank, task->step, task->block, i);
    }
    atomic_fetch_add(&d->compute_ns, ordo_time_now_ns() - t0);
    return ORDO_OK;
}

static ordo_status_t update_block(void *ctx) {
    block_task_t *task = ctx;
    mpi_demo_t *d = task->d;
    const double *g = d->grad[task->block];
    double *p = d->params[task->block];
    for (int i = 0; i < d->len; ++i) {
        p[i] += g[i];
    }
    return ORDO_OK;
}

static int parse(int argc, char **argv, mpi_demo_t *d) {
    d->blocks = 16, d->len = 16384, d->steps = 8, d->work = 8;
    for (int i = 0; i < argc; ++i) {
        if (!strcmp(argv[i], "--quiet")) {
            d->quiet = 1;
            continue;
        }
        int *field = !strcmp(argv[i], "--blocks")       ? &d->blocks
                     : !strcmp(argv[i], "--len")        ? &d->len
                     : !strcmp(argv[i], "--iterations") ? &d->steps
                                                        : NULL;
        if (!field) {
            fprintf(stderr,
                    "ordo demo --mpi: unknown option '%s' (--blocks N, --len N, "
                    "--iterations N, --quiet)\n",
                    argv[i]);
            return 0;
        }
        const char *text = i + 1 < argc ? argv[i + 1] : "";
        char *end = NULL;
        long v = *text >= '0' && *text <= '9' ? strtol(text, &end, 10) : 0; /* no sign, no blank */
        if (!end || *end || v < 1 || v > (1 << 20)) {
            fprintf(stderr, "ordo demo --mpi: '%s' needs a number from 1 to %d%s%s%s\n", argv[i],
                    1 << 20, i + 1 < argc ? ", not '" : "", text, i + 1 < argc ? "'" : "");
            return 0;
        }
        *field = (int)v;
        ++i;
    }
    return 1;
}

#define MPI_DEMO_CHECK(expr)                                                                       \
    do {                                                                                           \
        ordo_status_t st_ = (expr);                                                                \
        if (st_ != ORDO_OK) {                                                                      \
            fprintf(stderr, "ordo demo --mpi: rank %d: %s: %s\n", d.rank, ordo_status_name(st_),   \
                    ordo_error_message());                                                         \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                          \
        }                                                                                          \
    } while (0)

/* Runs `steps` steps (or, with compute off, the allreduces alone); the
 * wall time. */
static uint64_t run_steps(mpi_demo_t *dp, ordo_tracker_t *tracker, ordo_stream_t *compute,
                          ordo_stream_t *update, ordo_mpi_t *mpi, ordo_buffer_t **grads,
                          ordo_buffer_t **params, block_task_t *tasks, bool with_compute) {
    mpi_demo_t d = *dp; /* for MPI_DEMO_CHECK's rank */
    MPI_Barrier(MPI_COMM_WORLD);
    uint64_t t0 = ordo_time_now_ns();
    for (int t = 0; t < d.steps; ++t) {
        for (int k = 0; k < d.blocks; ++k) {
            block_task_t *task = &tasks[(size_t)t * d.blocks + k];
            *task = (block_task_t){dp, k, t};
            if (with_compute) {
                ordo_access_t write = {grads[k], ORDO_ACCESS_WRITE};
                MPI_DEMO_CHECK(
                    ordo_tracker_submit_host(tracker, compute, &write, 1, compute_block, task));
            }
            MPI_DEMO_CHECK(
                ordo_mpi_allreduce(mpi, grads[k], dp->grad[k], d.len, MPI_DOUBLE, MPI_SUM));
            if (with_compute) {
                ordo_access_t accesses[2] = {{grads[k], ORDO_ACCESS_READ},
                                             {params[k], ORDO_ACCESS_WRITE}};
                MPI_DEMO_CHECK(
                    ordo_tracker_submit_host(tracker, update, accesses, 2, update_block, task));
            }
        }
    }
    MPI_DEMO_CHECK(ordo_tracker_synchronize(tracker, ordo_deadline_after_ms(600000)));
    return ordo_time_now_ns() - t0;
}

int demo_mpi_main(int argc, char **argv) {
    mpi_demo_t d;
    memset(&d, 0, sizeof d);
    if (!parse(argc, argv, &d)) {
        return 2;
    }
    int provided = 0;
    if (MPI_Init_thread(NULL, NULL, MPI_THREAD_MULTIPLE, &provided) != MPI_SUCCESS ||
        provided < MPI_THREAD_MULTIPLE) {
        fprintf(stderr, "ordo demo --mpi: MPI with MPI_THREAD_MULTIPLE is needed (got %d)\n",
                provided);
        return 2;
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &d.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &d.size);
    d.grad = calloc((size_t)d.blocks, sizeof *d.grad);
    d.params = calloc((size_t)d.blocks, sizeof *d.params);
    block_task_t *tasks = calloc((size_t)d.blocks * d.steps, sizeof *tasks);
    if (!d.grad || !d.params || !tasks) {
        fprintf(stderr, "ordo demo --mpi: out of memory\n");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (int k = 0; k < d.blocks; ++k) {
        d.grad[k] = calloc((size_t)d.len, sizeof(double));
        d.params[k] = calloc((size_t)d.len, sizeof(double));
        if (!d.grad[k] || !d.params[k]) {
            fprintf(stderr, "ordo demo --mpi: out of memory\n");
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
    }

    ordo_tracker_t *tracker;
    ordo_stream_t *compute, *update, *comm;
    MPI_DEMO_CHECK(ordo_tracker_open(ORDO_DEVICE_DEFAULT, &tracker));
    MPI_DEMO_CHECK(ordo_tracker_stream_create(tracker, 0, &compute));
    MPI_DEMO_CHECK(ordo_tracker_stream_create(tracker, 0, &update));
    MPI_DEMO_CHECK(ordo_tracker_stream_create(tracker, 0, &comm));
    ordo_mpi_t *mpi;
    MPI_DEMO_CHECK(ordo_mpi_create(tracker, comm, MPI_COMM_WORLD, &mpi));
    ordo_buffer_t **grads = calloc((size_t)d.blocks, sizeof *grads);
    ordo_buffer_t **params = calloc((size_t)d.blocks, sizeof *params);
    for (int k = 0; k < d.blocks; ++k) {
        MPI_DEMO_CHECK(ordo_buffer_create(tracker, &grads[k]));
        MPI_DEMO_CHECK(ordo_buffer_create(tracker, &params[k]));
    }

    /* The communication alone first (its cost, for the overlap), then the
     * steps; the parameters see only the steps' updates. */
    uint64_t comm_ns = run_steps(&d, tracker, compute, update, mpi, grads, params, tasks, false);
    atomic_store(&d.compute_ns, 0);
    uint64_t total_ns = run_steps(&d, tracker, compute, update, mpi, grads, params, tasks, true);

    for (int k = 0; k < d.blocks; ++k) {
        MPI_DEMO_CHECK(ordo_buffer_release(grads[k], NULL, NULL));
        MPI_DEMO_CHECK(ordo_buffer_release(params[k], NULL, NULL));
    }
    MPI_DEMO_CHECK(ordo_mpi_destroy(mpi, ordo_deadline_after_ms(60000)));
    MPI_DEMO_CHECK(ordo_tracker_close(tracker, ordo_deadline_after_ms(60000)));

    /* Every rank checks its parameters against the serial sum. */
    long mismatches = 0;
    for (int k = 0; k < d.blocks; ++k) {
        for (int i = 0; i < d.len; ++i) {
            double expect = 0;
            for (int t = 0; t < d.steps; ++t) {
                for (int r = 0; r < d.size; ++r) {
                    expect += gradient(&d, r, t, k, i);
                }
            }
            mismatches += d.params[k][i] != expect;
        }
    }
    long all_mismatches = 0;
    MPI_Reduce(&mismatches, &all_mismatches, 1, MPI_LONG, MPI_SUM, 0, MPI_COMM_WORLD);
    uint64_t compute_ns = atomic_load(&d.compute_ns);
    if (d.rank == 0) {
        double total = (double)total_ns / 1e6, comp = (double)compute_ns / 1e6,
               com = (double)comm_ns / 1e6;
        double hidden = comp + com - total, smaller = comp < com ? comp : com;
        double overlap = smaller > 0 ? hidden / smaller : 0;
        overlap = overlap < 0 ? 0 : overlap > 1 ? 1 : overlap;
        if (!d.quiet || all_mismatches) {
            printf("ordo demo --mpi: %d ranks, %d blocks of %d doubles, %d steps\n", d.size,
                   d.blocks, d.len, d.steps);
            printf("  steps          %9.2f ms (compute, allreduce and update, ordered by the "
                   "tracker)\n",
                   total);
            printf("  compute        %9.2f ms (rank 0's compute tasks)\n", comp);
            printf("  communication  %9.2f ms (the same allreduces alone)\n", com);
            printf("  overlap        %9.0f %% of the shorter hidden behind the longer\n",
                   overlap * 100);
        }
        if (all_mismatches) {
            printf("  MISMATCH: %ld parameters differ from the serial computation\n",
                   all_mismatches);
        } else if (!d.quiet) {
            printf("  verified: every rank's %lld parameters equal the serial computation\n",
                   (long long)d.blocks * d.len);
        }
    }
    for (int k = 0; k < d.blocks; ++k) {
        free(d.grad[k]);
        free(d.params[k]);
    }
    free(d.grad);
    free(d.params);
    free(grads);
    free(params);
    free(tasks);
    long any = 0;
    MPI_Allreduce(&mismatches, &any, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    MPI_Finalize();
    return any ? 1 : 0;
}
