/* The progress thread of an ordo_mpi_t (mpi/mpi_internal.h): completes
 * the request in flight and raises the timeline. Idle, it parks; with a
 * request in flight it tests it, pausing between tests for a time that
 * doubles from PAUSE_MIN_NS to PAUSE_MAX_NS (a test is what moves a
 * nonblocking MPI operation on, so it must be asked; a core is not spun
 * for it). */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/error.h"
#include "mpi/mpi_internal.h"

#define PAUSE_MIN_NS 2000u
#define PAUSE_MAX_NS 250000u
/* Tests made back to back before the first pause: an operation that
 * completes within a few microseconds costs no sleep. */
#define EAGER_TESTS 64

const char *ordo__mpi_op_name(mpi_op_kind_t kind) {
    switch (kind) {
    case MPI_OP_ALLREDUCE:
        return "MPI_Iallreduce";
    case MPI_OP_BCAST:
        return "MPI_Ibcast";
    case MPI_OP_SEND:
        return "MPI_Isend";
    case MPI_OP_RECV:
        return "MPI_Irecv";
    case MPI_OP_ALLTOALL:
        return "MPI_Ialltoall";
    }
    return "MPI operation";
}

void ordo__mpi_fail(ordo_mpi_t *mpi, int code, const char *what, uint64_t seq) {
    char text[MPI_MAX_ERROR_STRING] = "";
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
        strcpy(text, "(no error string)");
    }
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    snprintf(message, sizeof message, "%s (operation %llu, rank %d): %s", what,
             (unsigned long long)seq, mpi->rank, text);
    (void)ordo_signal_fail(mpi->done, ORDO_ERR_DEVICE, message);
}

void ordo__mpi_op_free(mpi_op_t *op) {
    ordo_mpi_t *mpi = op->mpi;
    pthread_mutex_lock(&mpi->lock);
    if (op->prev) {
        op->prev->next = op->next;
    } else {
        mpi->all = op->next;
    }
    if (op->next) {
        op->next->prev = op->prev;
    }
    pthread_mutex_unlock(&mpi->lock);
    ordo__dealloc(op, sizeof *op, 0);
}

void ordo__mpi_progress_post(ordo_mpi_t *mpi, mpi_op_t *op) {
    pthread_mutex_lock(&mpi->lock);
    op->next_posted = NULL;
    mpi_op_t **tail = &mpi->posted;
    while (*tail) {
        tail = &(*tail)->next_posted;
    }
    *tail = op;
    pthread_mutex_unlock(&mpi->lock);
    ordo__parker_unpark(&mpi->parker, ORDO_PARK_ANY, 1);
}

static void pause_ns(uint64_t ns) {
    struct timespec t = {.tv_sec = 0, .tv_nsec = (long)ns};
    nanosleep(&t, NULL);
}

/* Tests op's request until it completes (or the layer stops); true when
 * it completed, with its MPI result in *out_code. */
static bool complete(ordo_mpi_t *mpi, mpi_op_t *op, int *out_code) {
    uint64_t pause = PAUSE_MIN_NS;
    for (unsigned tests = 0;; ++tests) {
        int flag = 0;
        MPI_Status status;
        int code = MPI_Test(&op->request, &flag, &status);
        if (code != MPI_SUCCESS || flag) {
            *out_code = code != MPI_SUCCESS ? code : MPI_SUCCESS;
            return true;
        }
        if (atomic_load_explicit(&mpi->stop, memory_order_acquire)) {
            return false;
        }
        if (tests >= EAGER_TESTS) {
            pause_ns(pause);
            pause = pause * 2 > PAUSE_MAX_NS ? PAUSE_MAX_NS : pause * 2;
        }
    }
}

static void *progress_main(void *arg) {
    ordo_mpi_t *mpi = arg;
    for (;;) {
        ordo_park_key_t key = ordo__parker_prepare(&mpi->parker);
        pthread_mutex_lock(&mpi->lock);
        mpi_op_t *op = mpi->posted;
        pthread_mutex_unlock(&mpi->lock);
        if (!op) {
            if (atomic_load_explicit(&mpi->stop, memory_order_acquire)) {
                return NULL;
            }
            (void)ordo__parker_park(&mpi->parker, key, ORDO_PARK_ANY, ORDO_DEADLINE_NEVER);
            continue;
        }
        int code = MPI_SUCCESS;
        if (!complete(mpi, op, &code)) {
            return NULL; /* stopped with a request in flight: the destroy frees it */
        }
        pthread_mutex_lock(&mpi->lock);
        mpi->posted = op->next_posted;
        pthread_mutex_unlock(&mpi->lock);
        uint64_t seq = op->seq;
        mpi_op_kind_t kind = op->kind;
        ordo__mpi_op_free(op);
        if (code != MPI_SUCCESS) {
            ordo__mpi_fail(mpi, code, ordo__mpi_op_name(kind), seq);
        } else {
            (void)ordo_signal_advance(mpi->done, seq);
        }
    }
}

ordo_status_t ordo__mpi_progress_start(ordo_mpi_t *mpi, const char *api) {
    ordo__parker_init(&mpi->parker);
    atomic_init(&mpi->stop, false);
    int rc = pthread_create(&mpi->progress, NULL, progress_main, mpi);
    if (rc != 0) {
        return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, api,
                           "cannot start the MPI progress thread: %s", strerror(rc));
    }
    return ORDO_OK;
}

void ordo__mpi_progress_stop(ordo_mpi_t *mpi) {
    atomic_store_explicit(&mpi->stop, true, memory_order_release);
    ordo__parker_unpark(&mpi->parker, ORDO_PARK_ANY, 1);
    pthread_join(mpi->progress, NULL);
}
