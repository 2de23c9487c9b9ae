/* Internal: the MPI layer (ordo/mpi.h): an ordo_mpi_t, its operations,
 * and the progress thread that completes them.
 *
 * An operation's life: the submitting thread assigns it the next point
 * (seq) of the ordo_mpi_t's timeline `done` and submits, through the
 * tracker, on the communication stream: a host task that starts its
 * request (post), then a wait for `done` to reach seq. The host task runs
 * on the stream's worker: it starts the request and hands the operation to
 * the progress thread (`posted`, under `lock`). The progress thread tests
 * the request until it completes, then raises `done` to seq and frees the
 * operation. The stream runs in order and waits for each operation's point
 * before the next starts, so one request at most is in flight, and points
 * complete in order. An MPI error (starting or completing) fails `done`
 * with MPI's error string: the stream's wait fails, and with it the stream.
 *
 * Every operation not yet freed is also in `all` (under `lock`), so the
 * destroy frees those whose task never ran (a failed stream drops them). */
#ifndef ORDO_MPI_INTERNAL_H
#define ORDO_MPI_INTERNAL_H

#include <mpi.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "base/parker.h"
#include "ordo/mpi.h"

#define ORDO_MPI_MAGIC 0x4d50494fu /* "OIPM" */
#define ORDO_MPI_DEAD 0xdead4d50u

typedef enum mpi_op_kind {
    MPI_OP_ALLREDUCE,
    MPI_OP_BCAST,
    MPI_OP_SEND,
    MPI_OP_RECV,
    MPI_OP_ALLTOALL,
} mpi_op_kind_t;

typedef struct mpi_op {
    ordo_mpi_t *mpi;
    mpi_op_kind_t kind;
    uint64_t seq;
    void *data;            /* written (allreduce, bcast, recv, alltoall's receive) */
    const void *send_data; /* read (send, alltoall's send) */
    int count;
    MPI_Datatype type;
    MPI_Op reduce;
    int peer; /* root, destination or source */
    int tag;
    MPI_Request request;
    struct mpi_op *next_posted;
    struct mpi_op *prev, *next; /* `all` */
} mpi_op_t;

struct ordo_mpi {
    uint32_t magic;
    ordo_tracker_t *tracker;
    ordo_stream_t *stream;
    MPI_Comm comm; /* ordo's duplicate, MPI_ERRORS_RETURN */
    int rank, size;
    ordo_signal_t *done; /* raised to an operation's seq once it completed */
    uint64_t submitted;  /* the last seq given (the submitting thread's) */
    pthread_mutex_t lock;
    mpi_op_t *posted; /* started, not completed: one at most (see the top) */
    mpi_op_t *all;
    pthread_t progress;
    ordo_parker_t parker;
    _Atomic bool stop;
};

/* The name of an operation's kind, for messages ("MPI_Iallreduce"). */
const char *ordo__mpi_op_name(mpi_op_kind_t kind);

/* Starts and stops the progress thread. */
ordo_status_t ordo__mpi_progress_start(ordo_mpi_t *mpi, const char *api);
void ordo__mpi_progress_stop(ordo_mpi_t *mpi);

/* Hands a started operation to the progress thread. */
void ordo__mpi_progress_post(ordo_mpi_t *mpi, mpi_op_t *op);

/* Takes op off `all` and frees it. */
void ordo__mpi_op_free(mpi_op_t *op);

/* Fails the timeline with MPI's error code for what (an operation). */
void ordo__mpi_fail(ordo_mpi_t *mpi, int code, const char *what, uint64_t seq);

#endif
