/* `ordo demo`: the command's main job (demo.c), and what its CUDA stages
 * (demo_cuda.c) share with it. Internal to the ordo program. */
#ifndef ORDO_TOOL_DEMO_H
#define ORDO_TOOL_DEMO_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ordo/ordo.h"

/* Whether path can be written, checked before a run that would only
 * write it at its end (an existing file is left as it is until then);
 * who names the command in the message printed when it cannot. */
int cli_trace_path_ok(const char *who, const char *path);

/* Runs the pipeline with the options after "demo"; the process exit code. */
int demo_main(int argc, char **argv);

/* `ordo demo --mpi` (demo_mpi.c, where MPI was found): the options after
 * "--mpi"; the process exit code. */
int demo_mpi_main(int argc, char **argv);

typedef struct demo_options {
    const char *backend;
    size_t chunks;
    size_t rows; /* per chunk */
    size_t k;    /* columns of A, rows of B */
    size_t m;    /* columns of B */
    const char *trace;
    int quiet;
} demo_options_t;

/* The three timed stages, and the copy of the result back to the host
 * that only the CUDA path has (not a stage of the pipeline, not timed). */
enum { STAGE_UPLOAD, STAGE_COMPUTE, STAGE_REDUCE, STAGES, STAGE_DOWNLOAD = STAGES };

/* The CUDA path's state (demo_cuda.c). */
typedef struct demo_cuda demo_cuda_t;

typedef struct demo {
    demo_options_t opt;
    double *a;                         /* chunks * rows × k, host (pinned on CUDA) */
    double *b_host;                    /* k × m, host (pinned on CUDA) */
    double *result;                    /* chunks * rows row sums, host (pinned on CUDA) */
    _Atomic uint64_t stage_ns[STAGES]; /* CPU: time in each stage's tasks */
    _Atomic uint64_t chunks_done;      /* CPU: chunks reduced */
    demo_cuda_t *cuda;                 /* NULL on the CPU backend */
} demo_t;

/* One stage's work on one chunk. On CUDA, pointers into device memory
 * (blocks of the pool) are device addresses: never dereferenced on the
 * host. */
typedef struct demo_task {
    demo_t *demo;
    int stage; /* STAGE_* */
    size_t chunk;
    const double *src; /* upload, download: bytes from here; compute: the slot; reduce: out */
    double *dst;       /* upload, download: to here; compute: out; reduce: the chunk's rows of
                          the result (CUDA; the CPU writes demo->result directly) */
    const double *b;   /* compute: B */
    size_t bytes;      /* upload, download */
} demo_task_t;

/* ---- demo_cuda.c ---------------------------------------------------------- */

/* Whether this build can run the demo on CUDA: 0 and the reason where it
 * was built without cuda.h or without nvcc (no kernels). */
int demo_cuda_built(char *reason, size_t capacity);

/* Loads the kernels into device's primary context and creates the pinned
 * host memory resource. */
ordo_status_t demo_cuda_open(ordo_device_t *device, demo_cuda_t **out_cuda);

/* bytes of pinned host memory, allocated on stream (freed by
 * demo_cuda_close on the same stream). */
ordo_status_t demo_cuda_host_alloc(demo_cuda_t *cuda, size_t bytes, ordo_stream_t *stream,
                                   void **out_ptr);

/* Before submitting a task of stage: makes room for its timing events
 * (may wait for the stage's work of many chunks ago). Outside ordo_tracker_submit:
 * it may block. */
ordo_status_t demo_cuda_before(demo_cuda_t *cuda, int stage);

/* The launch function (ordo_launch_fn) of every task on CUDA: the task's
 * copy or kernel, enqueued in the stream's order through
 * ordo_cuda_stream_enqueue, between its stage's timing events. */
ordo_status_t demo_cuda_launch(void *ctx, ordo_stream_t *stream);

/* The device time of each stage's work, summed; once all work is done. */
ordo_status_t demo_cuda_stage_times(demo_cuda_t *cuda, uint64_t out_ns[STAGES]);

/* Frees the pinned memory, the timing events and the kernels; once all
 * work is done. */
ordo_status_t demo_cuda_close(demo_cuda_t *cuda);

#endif
