/* `ordo demo`: a double-buffered three-stage pipeline over many chunks.
 *
 *   upload   (stream U): copy chunk i of A into staging slot i % 2
 *   compute  (stream C): out_i = slot × B, a blocked matrix product, into a
 *                        block allocated from a stream-ordered pool on C
 *   reduce   (stream R): the row sums of out_i into the result; out_i is
 *                        freed on R
 *
 * Nothing is ordered by hand. Every piece of work declares what it reads
 * and writes and the tracker inserts the waits: compute i after upload i
 * (read after write), upload i+2 after compute i (write after read on the
 * shared slot: the double buffering), reduce i after compute i. The pool
 * reuses out blocks freed on R for C's next allocations once C is ordered
 * after R's uses. At the end a device barrier joins the streams, an
 * asynchronous waiter reports completion, and the host checks the result
 * against a plain serial computation.
 *
 * On the CPU backend the stages are host tasks. On a CUDA device they are
 * device work (demo_cuda.c): the upload a copy from pinned host memory,
 * compute and reduce kernels (demo_kernels.cu) on device memory from the
 * same pool, the row sums into a device block of the pool, copied back to
 * pinned host memory at the end. The submissions and the accesses they
 * declare are the same on both; the CUDA path adds the result block to
 * the reduce's accesses and one submission for the copy back. */
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "demo.h"
#include "ordo/ordo.h"

static const char *const stage_names[STAGES] = {"upload", "compute", "reduce"};

static uint64_t now_ns(void) {
    return ordo_time_now_ns();
}

static void stage_add(demo_t *d, int stage, uint64_t start) {
    atomic_fetch_add_explicit(&d->stage_ns[stage], now_ns() - start, memory_order_relaxed);
}

static ordo_status_t upload_task(void *ctx) {
    demo_task_t *t = ctx;
    uint64_t start = now_ns();
    memcpy(t->dst, t->src, t->bytes);
    stage_add(t->demo, STAGE_UPLOAD, start);
    return ORDO_OK;
}

/* out = in × b, blocked for the cache: rows × k times k × m. */
static ordo_status_t compute_task(void *ctx) {
    demo_task_t *t = ctx;
    const size_t rows = t->demo->opt.rows, k = t->demo->opt.k, m = t->demo->opt.m;
    const size_t block = 64;
    uint64_t start = now_ns();
    memset(t->dst, 0, rows * m * sizeof(double));
    for (size_t kk = 0; kk < k; kk += block) {
        size_t kend = kk + block < k ? kk + block : k;
        for (size_t jj = 0; jj < m; jj += block) {
            size_t jend = jj + block < m ? jj + block : m;
            for (size_t i = 0; i < rows; ++i) {
                double *out = t->dst + i * m;
                const double *in = t->src + i * k;
                for (size_t p = kk; p < kend; ++p) {
                    double v = in[p];
                    const double *brow = t->b + p * m;
                    for (size_t j = jj; j < jend; ++j) {
                        out[j] += v * brow[j];
                    }
                }
            }
        }
    }
    stage_add(t->demo, STAGE_COMPUTE, start);
    return ORDO_OK;
}

static ordo_status_t reduce_task(void *ctx) {
    demo_task_t *t = ctx;
    const size_t rows = t->demo->opt.rows, m = t->demo->opt.m;
    uint64_t start = now_ns();
    for (size_t i = 0; i < rows; ++i) {
        double sum = 0;
        for (size_t j = 0; j < m; ++j) {
            sum += t->src[i * m + j];
        }
        t->demo->result[t->chunk * rows + i] = sum;
    }
    stage_add(t->demo, STAGE_REDUCE, start);
    atomic_fetch_add_explicit(&t->demo->chunks_done, 1, memory_order_relaxed);
    return ORDO_OK;
}

static const ordo_host_fn host_stages[STAGES] = {upload_task, compute_task, reduce_task};

/* The launch function on the CPU backend: the task's stage as a host task. */
static ordo_status_t launch_host(void *ctx, ordo_stream_t *stream) {
    demo_task_t *t = ctx;
    return ordo_stream_host_task(stream, host_stages[t->stage], t);
}

/* One submission: the task, ordered by the tracker from its accesses. */
static ordo_status_t submit(ordo_tracker_t *tracker, ordo_stream_t *stream,
                            const ordo_access_t *accesses, size_t count, demo_task_t *task) {
    if (!task->demo->cuda) {
        return ordo_tracker_submit(tracker, stream, accesses, count, launch_host, task);
    }
    ordo_status_t st = demo_cuda_before(task->demo->cuda, task->stage);
    if (st != ORDO_OK) {
        return st;
    }
    return ordo_tracker_submit(tracker, stream, accesses, count, demo_cuda_launch, task);
}

/* The reference: the same row sums of A × B, computed plainly. */
static int verify(const demo_t *d, double *out_max_error) {
    const size_t n = d->opt.chunks * d->opt.rows, k = d->opt.k, m = d->opt.m;
    double *bsum = calloc(k, sizeof *bsum); /* row sums of B */
    if (!bsum) {
        return 0;
    }
    for (size_t p = 0; p < k; ++p) {
        for (size_t j = 0; j < m; ++j) {
            bsum[p] += d->b_host[p * m + j];
        }
    }
    double max_error = 0;
    int ok = 1;
    for (size_t i = 0; i < n; ++i) {
        double expect = 0;
        for (size_t p = 0; p < k; ++p) {
            expect += d->a[i * k + p] * bsum[p];
        }
        double error = fabs(d->result[i] - expect) / (fabs(expect) > 1 ? fabs(expect) : 1);
        if (error > max_error) {
            max_error = error;
        }
        if (!(error < 1e-9)) {
            ok = 0;
        }
    }
    free(bsum);
    *out_max_error = max_error;
    return ok;
}

typedef struct completion {
    ordo_signal_t *seen;
    uint64_t at_ns;
    ordo_status_t status;
} completion_t;

static void on_complete(void *ctx, ordo_status_t status, ordo_wait_id_t id) {
    (void)id;
    completion_t *c = ctx;
    c->at_ns = now_ns();
    c->status = status;
    (void)ordo_signal_advance(c->seen, 1);
}

#define CHECK(call)                                                                                \
    do {                                                                                           \
        ordo_status_t st_ = (call);                                                                \
        if (st_ != ORDO_OK) {                                                                      \
            fprintf(stderr, "ordo demo: %s failed: %s (%s)\n", #call, ordo_status_name(st_),       \
                    ordo_error_message());                                                         \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

int cli_trace_path_ok(const char *who, const char *path) {
    if (!*path) {
        fprintf(stderr, "%s: cannot write the trace to '': empty path\n", who);
        return 0;
    }
    /* The trace is written at the end of the run, into a regular file: a
     * FIFO or a device would block or take a partial write then. An
     * existing file is opened without truncating (a run that fails first
     * leaves it as it was); a new one (through a dangling link too) is
     * created, and removed again where no link leads to it. */
    struct stat st, link;
    int exists = stat(path, &st) == 0;
    if (exists && !S_ISREG(st.st_mode)) {
        fprintf(stderr, "%s: cannot write the trace to '%s': not a regular file\n", who, path);
        return 0;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0666);
    if (fd < 0) {
        fprintf(stderr, "%s: cannot write the trace to '%s': %s\n", who, path, strerror(errno));
        return 0;
    }
    close(fd);
    if (!exists && lstat(path, &link) == 0 && S_ISREG(link.st_mode)) {
        (void)unlink(path);
    }
    return 1;
}

static int parse_size(const char *text, size_t *out, size_t min, size_t max) {
    if (*text < '0' || *text > '9') { /* no sign, no blank: strtoull takes both */
        return 0;
    }
    char *end = NULL;
    errno = 0;
    unsigned long long v = strtoull(text, &end, 10);
    if (errno || *end || v < min || v > max) {
        return 0;
    }
    *out = (size_t)v;
    return 1;
}

static int parse_options(int argc, char **argv, demo_options_t *o) {
    *o = (demo_options_t){"cpu", 192, 64, 256, 256, NULL, 0};
    for (int i = 0; i < argc; ++i) {
        const char *arg = argv[i];
        const char *value = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(arg, "--quiet")) {
            o->quiet = 1;
            continue;
        }
        if (strcmp(arg, "--backend") && strcmp(arg, "--trace") && strcmp(arg, "--chunks") &&
            strcmp(arg, "--rows") && strcmp(arg, "--size")) {
            fprintf(stderr, "ordo demo: unknown option '%s' (see ordo --help)\n", arg);
            return 0;
        }
        if (!value || (value[0] == '-' && value[1] == '-')) {
            fprintf(stderr, "ordo demo: '%s' needs a value (see ordo --help)\n", arg);
            return 0;
        }
        ++i;
        if (!strcmp(arg, "--backend")) {
            o->backend = value;
        } else if (!strcmp(arg, "--trace")) {
            o->trace = value;
        } else {
            size_t *field = !strcmp(arg, "--chunks") ? &o->chunks
                            : !strcmp(arg, "--rows") ? &o->rows
                                                     : &o->k;
            size_t most = field == &o->chunks ? 1 << 20 : field == &o->rows ? 1 << 16 : 1 << 14;
            if (!parse_size(value, field, 1, most)) {
                fprintf(stderr, "ordo demo: '%s' needs a number from 1 to %zu, not '%s'\n", arg,
                        most, value);
                return 0;
            }
            o->m = o->k;
        }
    }
    return 1;
}

/* The host's copies of A, B and the result: plain memory on the CPU
 * backend, pinned memory on CUDA (the uploads copy from it without
 * staging). A and B are filled with the same pseudo-random values either
 * way. */
static ordo_status_t host_buffers(demo_t *d, ordo_stream_t *up, ordo_stream_t *red) {
    const demo_options_t *o = &d->opt;
    const size_t n = o->chunks * o->rows;
    if (d->cuda) {
        void *a = NULL, *b = NULL, *result = NULL;
        ordo_status_t st;
        if ((st = demo_cuda_host_alloc(d->cuda, n * o->k * sizeof(double), up, &a)) != ORDO_OK ||
            (st = demo_cuda_host_alloc(d->cuda, o->k * o->m * sizeof(double), up, &b)) != ORDO_OK ||
            (st = demo_cuda_host_alloc(d->cuda, n * sizeof(double), red, &result)) != ORDO_OK) {
            return st;
        }
        d->a = a;
        d->b_host = b;
        d->result = result;
        memset(d->result, 0, n * sizeof(double));
    } else {
        d->a = malloc(n * o->k * sizeof(double));
        d->b_host = malloc(o->k * o->m * sizeof(double));
        d->result = calloc(n, sizeof(double));
        if (!d->a || !d->b_host || !d->result) {
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo demo",
                               "out of host memory for %zu x %zu inputs", n, o->k);
        }
    }
    uint64_t seed = 0x0d0e;
    for (size_t i = 0; i < n * o->k; ++i) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        d->a[i] = (double)(seed % 2001) / 1000.0 - 1.0;
    }
    for (size_t i = 0; i < o->k * o->m; ++i) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        d->b_host[i] = (double)(seed % 2001) / 1000.0 - 1.0;
    }
    return ORDO_OK;
}

int demo_main(int argc, char **argv) {
    if (argc > 0 && !strcmp(argv[0], "--mpi")) {
#ifdef ORDO_DEMO_MPI
        return demo_mpi_main(argc - 1, argv + 1);
#else
        fprintf(stderr, "ordo demo --mpi: this ordo was built without MPI (%s)\n",
                ORDO_DEMO_MPI_MISSING);
        return 2;
#endif
    }
    demo_t d;
    memset(&d, 0, sizeof d);
    if (!parse_options(argc, argv, &d.opt)) {
        return 2;
    }
    const demo_options_t *o = &d.opt;
    bool available = 0;
    char reason[256] = "";
    if (!strcmp(o->backend, "cuda") && !demo_cuda_built(reason, sizeof reason)) {
        fprintf(stderr, "ordo demo: cannot run on cuda: %s\n", reason);
        return 2;
    }
    if (ordo_backend_available(o->backend, &available, reason, sizeof reason) != ORDO_OK) {
        fprintf(stderr, "ordo demo: backend '%s': %s\n", o->backend, ordo_error_message());
        return 2;
    }
    if (!available) {
        fprintf(stderr, "ordo demo: backend '%s' is unavailable here: %s\n", o->backend, reason);
        return 2;
    }
    const size_t n = o->chunks * o->rows;
    if (o->trace && !cli_trace_path_ok("ordo demo", o->trace)) {
        return 2;
    }
    if (o->trace) {
        CHECK(ordo_trace_start(NULL));
    }

    char device_name[ORDO_DEVICE_NAME_MAX];
    snprintf(device_name, sizeof device_name, "%s:0", o->backend);
    ordo_device_t *device = NULL;
    ordo_tracker_t *tracker = NULL;
    ordo_mem_resource_t *memory = NULL, *pool = NULL;
    ordo_stream_t *streams[STAGES] = {NULL};
    ordo_waiter_t *waiter = NULL;
    CHECK(ordo_device_open(device_name, &device));
    ordo_device_info_t info;
    CHECK(ordo_device_info(device, &info));
    if (info.device_memory && demo_cuda_open(device, &d.cuda) != ORDO_OK) {
        /* Host tasks cannot touch memory the host cannot address: the
         * stages must be the CUDA path's device work. */
        fprintf(stderr, "ordo demo: cannot run on %s: %s\n", device_name, ordo_error_message());
        ordo_device_release(device);
        return 2;
    }
    CHECK(ordo_tracker_create(device, &tracker));
    CHECK(ordo_device_memory(device, &memory));
    CHECK(ordo_mem_pool_create(tracker, memory, NULL, &pool));
    for (int s = 0; s < STAGES; ++s) {
        CHECK(ordo_stream_create(device, 0, &streams[s]));
    }
    CHECK(ordo_waiter_create(NULL, &waiter));
    ordo_stream_t *up = streams[STAGE_UPLOAD], *comp = streams[STAGE_COMPUTE],
                  *red = streams[STAGE_REDUCE];
    CHECK(host_buffers(&d, up, red));

    const size_t in_bytes = o->rows * o->k * sizeof(double);
    const size_t out_bytes = o->rows * o->m * sizeof(double);
    demo_task_t *tasks = calloc(3 * o->chunks + 2, sizeof *tasks);
    ordo_block_t **outs = calloc(o->chunks, sizeof *outs);
    if (!tasks || !outs) {
        fprintf(stderr, "ordo demo: out of host memory\n");
        return 1;
    }
    /* On CUDA, reduce's progress: the chunks reduced, signalled on R. */
    ordo_signal_t *reduced = NULL;
    if (d.cuda) {
        CHECK(ordo_signal_create(0, &reduced));
        CHECK(ordo_signal_set_name(reduced, "demo: chunks reduced"));
    }
    uint64_t t0 = now_ns();

    /* B and the two staging slots, allocated on the upload stream. */
    ordo_block_t *b_block = NULL, *slots[2] = {NULL, NULL};
    void *b_ptr = NULL, *slot_ptr[2] = {NULL, NULL};
    ordo_buffer_t *b_buf = NULL, *slot_buf[2] = {NULL, NULL};
    CHECK(ordo_mem_allocate(pool, o->k * o->m * sizeof(double), 0, up, 1, &b_block, &b_ptr));
    CHECK(ordo_block_buffer(b_block, &b_buf));
    for (int s = 0; s < 2; ++s) {
        CHECK(ordo_mem_allocate(pool, in_bytes, 0, up, 2, &slots[s], &slot_ptr[s]));
        CHECK(ordo_block_buffer(slots[s], &slot_buf[s]));
    }
    /* On CUDA the row sums go to a device block of the pool, on R. */
    ordo_block_t *result_block = NULL;
    void *result_ptr = NULL;
    ordo_buffer_t *result_buf = NULL;
    if (d.cuda) {
        CHECK(ordo_mem_allocate(pool, n * sizeof(double), 0, red, 4, &result_block, &result_ptr));
        CHECK(ordo_block_buffer(result_block, &result_buf));
    }
    size_t next = 0;
    {
        demo_task_t *t = &tasks[next++];
        *t =
            (demo_task_t){&d, STAGE_UPLOAD, 0, d.b_host, b_ptr, NULL, o->k * o->m * sizeof(double)};
        ordo_access_t access = {b_buf, ORDO_ACCESS_WRITE};
        CHECK(submit(tracker, up, &access, 1, t));
    }
    for (size_t i = 0; i < o->chunks; ++i) {
        int s = (int)(i % 2);
        /* upload: slot s <- chunk i */
        demo_task_t *t = &tasks[next++];
        *t = (demo_task_t){&d,          STAGE_UPLOAD, i,       d.a + i * o->rows * o->k,
                           slot_ptr[s], NULL,         in_bytes};
        ordo_access_t up_access = {slot_buf[s], ORDO_ACCESS_WRITE};
        CHECK(submit(tracker, up, &up_access, 1, t));

        /* compute: out_i = slot s × B, out_i fresh from the pool on C */
        void *out_ptr = NULL;
        ordo_buffer_t *out_buf = NULL;
        CHECK(ordo_mem_allocate(pool, out_bytes, 0, comp, 3, &outs[i], &out_ptr));
        CHECK(ordo_block_buffer(outs[i], &out_buf));
        t = &tasks[next++];
        *t = (demo_task_t){&d, STAGE_COMPUTE, i, slot_ptr[s], out_ptr, b_ptr, 0};
        ordo_access_t comp_access[3] = {{slot_buf[s], ORDO_ACCESS_READ},
                                        {b_buf, ORDO_ACCESS_READ},
                                        {out_buf, ORDO_ACCESS_WRITE}};
        CHECK(submit(tracker, comp, comp_access, 3, t));

        /* reduce: row sums of out_i, then out_i is freed on R */
        t = &tasks[next++];
        double *rows_dst = d.cuda ? (double *)result_ptr + i * o->rows : NULL;
        *t = (demo_task_t){&d, STAGE_REDUCE, i, out_ptr, rows_dst, NULL, 0};
        ordo_access_t red_access[2] = {{out_buf, ORDO_ACCESS_READ},
                                       {result_buf, ORDO_ACCESS_WRITE}};
        CHECK(submit(tracker, red, red_access, d.cuda ? 2 : 1, t));
        CHECK(ordo_mem_deallocate(pool, outs[i], red));
        if (d.cuda) {
            CHECK(ordo_stream_signal(red, reduced, i + 1));
        }
    }
    if (d.cuda) {
        /* download: the row sums back to the host, after the last reduce */
        demo_task_t *t = &tasks[next++];
        *t = (demo_task_t){&d, STAGE_DOWNLOAD, 0, result_ptr, d.result, NULL, n * sizeof(double)};
        ordo_access_t access = {result_buf, ORDO_ACCESS_READ};
        CHECK(submit(tracker, red, &access, 1, t));
    }
    uint64_t submitted_ns = now_ns() - t0;

    /* Completion: the reduce stream signals `done` after its last chunk
     * (on CUDA, after the copy back); an asynchronous waiter calls back on
     * its worker thread. */
    ordo_signal_t *done = NULL, *seen = NULL;
    CHECK(ordo_signal_create(0, &done));
    CHECK(ordo_signal_create(0, &seen));
    CHECK(ordo_signal_set_name(done, "demo: all chunks reduced"));
    completion_t completion = {seen, 0, ORDO_ERR_INTERNAL};
    /* Bounded, as every wait of ordo's: 10 minutes, and a second more per
     * 1e8 multiply-adds for runs larger than the defaults were made for. */
    const double macs = (double)n * (double)o->k * (double)o->m;
    CHECK(ordo_waiter_wait(waiter, done, 1, ordo_deadline_after_ms(600000 + (uint64_t)(macs / 1e5)),
                           0, on_complete, &completion, NULL));
    CHECK(ordo_stream_signal(red, done, 1));

    /* Progress while the pipeline drains (on long runs). */
    uint64_t last_report = now_ns();
    for (;;) {
        ordo_status_t st = ordo_signal_wait(seen, 1, ordo_deadline_after_ms(500));
        if (st == ORDO_OK) {
            break;
        }
        if (st != ORDO_ERR_TIMEOUT) {
            fprintf(stderr, "ordo demo: %s\n", ordo_error_message());
            return 1;
        }
        if (!o->quiet && now_ns() - last_report >= 1000000000ull) {
            last_report = now_ns();
            uint64_t chunks_done = atomic_load(&d.chunks_done);
            if (reduced && ordo_signal_query(reduced, &chunks_done) != ORDO_OK) {
                fprintf(stderr, "ordo demo: %s\n", ordo_error_message());
                return 1;
            }
            fprintf(stderr, "ordo demo: %llu / %zu chunks\n", (unsigned long long)chunks_done,
                    o->chunks);
        }
    }
    if (completion.status != ORDO_OK) {
        fprintf(stderr, "ordo demo: the pipeline failed: %s\n",
                ordo_status_name(completion.status));
        return 1;
    }
    /* A device barrier joins the streams, then one host synchronize. */
    CHECK(ordo_barrier_streams(streams, STAGES));
    uint64_t barrier_ns = 0;
    CHECK(ordo_barrier_synchronize_streams(streams, STAGES, ordo_deadline_after_ms(60000),
                                           &barrier_ns));
    uint64_t total_ns = now_ns() - t0;

    double max_error = 0;
    int ok = verify(&d, &max_error);

    ordo_tracker_metrics_t metrics;
    ordo_mem_pool_stats_t pool_stats;
    uint64_t stage_ns[STAGES];
    CHECK(ordo_tracker_metrics(tracker, &metrics));
    CHECK(ordo_mem_pool_stats(pool, &pool_stats));
    if (d.cuda) {
        CHECK(demo_cuda_stage_times(d.cuda, stage_ns));
    } else {
        for (int s = 0; s < STAGES; ++s) {
            stage_ns[s] = atomic_load(&d.stage_ns[s]);
        }
    }
    double flops = 2.0 * (double)n * (double)o->k * (double)o->m;
    printf("ordo demo: %zu chunks of %zu x %zu times %zu x %zu on %s, 3 streams%s\n", o->chunks,
           o->rows, o->k, o->k, o->m, device_name,
           d.cuda ? " (copies and kernels on the device)" : "");
    printf("  result      %s (max relative error %.2e against a serial computation)\n",
           ok ? "verified" : "WRONG", max_error);
    printf("  time        %.1f ms (submission %.1f ms, completion callback at %.1f ms, final "
           "barrier %.2f ms)\n",
           (double)total_ns / 1e6, (double)submitted_ns / 1e6,
           (double)(completion.at_ns - t0) / 1e6, (double)barrier_ns / 1e6);
    printf("  throughput  %.2f GFLOP/s, %.0f chunks/s\n", flops / (double)total_ns,
           (double)o->chunks * 1e9 / (double)total_ns);
    printf("  stages      ");
    for (int s = 0; s < STAGES; ++s) {
        printf("%s %.1f ms%s", stage_names[s], (double)stage_ns[s] / 1e6,
               s + 1 < STAGES ? ", " : "");
    }
    printf("%s\n", d.cuda ? " (device time between timing events around each copy or kernel)" : "");
    printf("  ordering    %llu submissions, %llu waits inserted, %llu elided as already "
           "known\n",
           (unsigned long long)metrics.submissions, (unsigned long long)metrics.waits_emitted,
           (unsigned long long)metrics.waits_elided);
    printf("  pool        %llu chunk(s), %.1f MiB reserved; reuses: %llu same stream, %llu "
           "known, %llu after a device wait; %llu grows\n",
           (unsigned long long)pool_stats.chunks, (double)pool_stats.bytes_reserved / 1048576.0,
           (unsigned long long)pool_stats.reuses_same_stream,
           (unsigned long long)pool_stats.reuses_known,
           (unsigned long long)pool_stats.reuses_waited, (unsigned long long)pool_stats.grows);

    /* Everything the components counted, in one snapshot. */
    ordo_metrics_sources_t sources = {device, NULL, waiter, tracker};
    ordo_metrics_t snapshot;
    char text[2048];
    size_t text_length = 0;
    CHECK(ordo_metrics_snapshot(&sources, &snapshot));
    CHECK(ordo_metrics_format(&snapshot, text, sizeof text, &text_length));
    printf("  metrics\n");
    for (char *line = strtok(text, "\n"); line; line = strtok(NULL, "\n")) {
        printf("    %s\n", line);
    }

    for (int s = 0; s < 2; ++s) {
        CHECK(ordo_mem_deallocate(pool, slots[s], comp));
    }
    CHECK(ordo_mem_deallocate(pool, b_block, comp));
    if (result_block) {
        CHECK(ordo_mem_deallocate(pool, result_block, red));
    }
    for (int s = 0; s < STAGES; ++s) {
        CHECK(ordo_stream_synchronize(streams[s], ordo_deadline_after_ms(60000)));
    }
    CHECK(ordo_mem_reap_pending(pool, ordo_deadline_after_ms(60000)));
    CHECK(ordo_mem_resource_destroy(pool));
    if (d.cuda) {
        CHECK(demo_cuda_close(d.cuda)); /* the pinned A, B and result */
        d.a = d.b_host = d.result = NULL;
        CHECK(ordo_signal_release(reduced));
    }
    CHECK(ordo_waiter_destroy(waiter));
    CHECK(ordo_tracker_destroy(tracker)); /* before its streams */
    for (int s = 0; s < STAGES; ++s) {
        CHECK(ordo_stream_destroy(streams[s]));
    }
    CHECK(ordo_signal_release(done));
    CHECK(ordo_signal_release(seen));
    CHECK(ordo_device_release(device));
    if (o->trace) {
        ordo_trace_stats_t stats;
        CHECK(ordo_trace_stop(o->trace, &stats));
        printf("  trace       %s: %llu events, %llu flow arrows\n", o->trace,
               (unsigned long long)stats.events, (unsigned long long)stats.flows);
    }
    free(tasks);
    free(outs);
    free(d.a);
    free(d.b_host);
    free(d.result);
    if (!ok) {
        fprintf(stderr, "ordo demo: the result does not match the serial computation\n");
        return 1;
    }
    return 0;
}
