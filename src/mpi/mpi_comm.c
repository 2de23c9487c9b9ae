/* The MPI layer's objects and operations (ordo/mpi.h; how an operation
 * runs: mpi/mpi_internal.h). */
#include <stdatomic.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "core/graph_internal.h"
#include "core/tracker_internal.h"
#include "hal/hal.h"
#include "mpi/mpi_internal.h"
#include "sync/signal_access.h"

/* How long the stream's worker tests a request it has just started before
 * it hands it to the progress thread (a hand-off costs two thread
 * wake-ups: the progress thread's, and the stream's when its point is
 * raised). */
#define POST_TEST_NS 30000u

ordo_status_t ordo__mpi_check(const ordo_mpi_t *mpi, const char *api) {
    if (!mpi) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "mpi is NULL");
    }
    if (mpi->magic != ORDO_MPI_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api,
                           "%p is not a live ordo_mpi_t (destroyed, or not one)",
                           (const void *)mpi);
    }
    return ORDO_OK;
}

/* MPI's error string for code, as an ordo error of api. */
static ordo_status_t mpi_error(int code, const char *call, const char *api) {
    char text[MPI_MAX_ERROR_STRING] = "";
    ordo__mpi_error_text(code, text);
    return ordo__error(ORDO_ERR_DEVICE, api, "%s: %s", call, text);
}

/* Agrees with every rank on an incarnation number for this ordo_mpi_t
 * (its messages carry it): the context ids of freed communicators are
 * reused, so a message an earlier ordo_mpi_t's peer sent late could
 * otherwise reach this one. */
static int epoch_agree(ordo_mpi_t *mpi) {
    static _Atomic uint32_t next_epoch = 1;
    uint32_t mine = atomic_load_explicit(&next_epoch, memory_order_relaxed), agreed = 0;
    int code = MPI_Allreduce(&mine, &agreed, 1, MPI_UINT32_T, MPI_MAX, mpi->comm);
    if (code == MPI_SUCCESS) {
        mpi->epoch = agreed;
        uint32_t next = mine;
        while (next <= agreed &&
               !atomic_compare_exchange_weak_explicit(&next_epoch, &next, agreed + 1,
                                                      memory_order_relaxed, memory_order_relaxed)) {
        }
    }
    return code;
}

/* MPI_Finalize deletes MPI_COMM_SELF's attributes first, while MPI still
 * works: the progress thread stops there, and the standing receive is
 * cancelled, if the program finalizes before ordo_mpi_destroy (which
 * then frees the rest without calling MPI). */
static int finalize_hook(MPI_Comm comm, int key, void *value, void *extra) {
    (void)comm;
    (void)key;
    (void)extra;
    ordo_mpi_t *mpi = value;
    ordo__mpi_quiesce(mpi, !mpi->destroying);
    return MPI_SUCCESS;
}

static ordo_status_t finalize_hook_set(ordo_mpi_t *mpi) {
    int code =
        MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_hook, &mpi->finalize_key, NULL);
    if (code == MPI_SUCCESS) {
        code = MPI_Comm_set_attr(MPI_COMM_SELF, mpi->finalize_key, mpi);
        if (code != MPI_SUCCESS) {
            MPI_Comm_free_keyval(&mpi->finalize_key);
        }
    }
    return code == MPI_SUCCESS ? ORDO_OK : mpi_error(code, "MPI_Comm_set_attr", "ordo_mpi_create");
}

void ordo__mpi_quiesce(ordo_mpi_t *mpi, bool finalizing) {
    if (atomic_exchange_explicit(&mpi->quiesced, true, memory_order_seq_cst)) {
        return;
    }
    if (finalizing) {
        /* After this store no control message starts (ordo__mpi_control_send
         * counts itself in, then looks: one of the two sees the other). */
        atomic_store_explicit(&mpi->finalized, true, memory_order_seq_cst);
        while (atomic_load_explicit(&mpi->sends, memory_order_seq_cst) != 0) {
            sched_yield(); /* a send never waits for its receiver */
        }
    }
    ordo__mpi_progress_stop(mpi);
    if (finalizing) {
        ordo__mpi_outbox_close(mpi, true); /* MPI still works in the hook */
    }
    ordo__mpi_update_cancel(mpi);
    /* An operation started and not completed never will be now: its point
     * fails, so the stream's wait fails instead of waiting for ever. */
    pthread_mutex_lock(&mpi->lock);
    uint64_t in_flight = mpi->posted ? mpi->posted->seq : 0;
    pthread_mutex_unlock(&mpi->lock);
    if (in_flight) {
        char message[ORDO_SIGNAL_MESSAGE_MAX];
        snprintf(message, sizeof message,
                 "%s with operation %llu in flight (rank %d): it never "
                 "completes",
                 finalizing ? "MPI was finalized" : "the ordo_mpi_t was destroyed",
                 (unsigned long long)in_flight, mpi->rank);
        (void)ordo_signal_fail(mpi->done, ORDO_ERR_UNAVAILABLE, message);
    }
    if (finalizing) {
        ordo__mpi_signals_finalized(mpi);
    }
}

ordo_status_t ordo_mpi_create(ordo_tracker_t *tracker, ordo_stream_t *stream, MPI_Comm comm,
                              ordo_mpi_t **out_mpi) {
    if (!out_mpi) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_mpi is NULL");
    }
    *out_mpi = NULL;
    if (!tracker || !stream) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, __func__, "%s is NULL",
                           tracker ? "stream" : "tracker");
    }
    ORDO_RETURN_IF_ERROR(ordo__tracker_check(tracker, __func__));
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, __func__));
    if (stream->device != tracker->device) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "the stream is of %s, the tracker of %s", stream->device->info.name,
                           tracker->device->info.name);
    }
    int initialized = 0, finalized = 0;
    MPI_Initialized(&initialized);
    MPI_Finalized(&finalized);
    if (!initialized || finalized) {
        return ordo__error(ORDO_ERR_UNAVAILABLE, __func__, "MPI is %s",
                           finalized ? "finalized" : "not initialised");
    }
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
        return ordo__error(ORDO_ERR_UNSUPPORTED, __func__,
                           "MPI was initialised with thread level %d; ordo's progress thread "
                           "needs MPI_THREAD_MULTIPLE (%d): use MPI_Init_thread",
                           provided, MPI_THREAD_MULTIPLE);
    }
    if (comm == MPI_COMM_NULL) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "comm is MPI_COMM_NULL");
    }
    /* An intercommunicator's collectives reduce across its two groups, and
     * its ranks are those of the local group: nothing here means that. */
    int inter = 0;
    int code = MPI_Comm_test_inter(comm, &inter);
    if (code != MPI_SUCCESS) {
        return mpi_error(code, "MPI_Comm_test_inter", __func__);
    }
    if (inter) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "comm is an intercommunicator: pass an intracommunicator (one "
                           "MPI_Intercomm_merge makes)");
    }
    ordo_mpi_t *mpi = ordo__alloc(sizeof *mpi, 0);
    if (!mpi) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate an ordo_mpi_t");
    }
    code = MPI_Comm_dup(comm, &mpi->comm);
    if (code != MPI_SUCCESS) {
        ordo__dealloc(mpi, sizeof *mpi, 0);
        return mpi_error(code, "MPI_Comm_dup", __func__);
    }
    /* Without MPI_ERRORS_RETURN an MPI error would abort the job rather
     * than fail a stream. */
    code = MPI_Comm_set_errhandler(mpi->comm, MPI_ERRORS_RETURN);
    if (code != MPI_SUCCESS) {
        MPI_Comm_free(&mpi->comm);
        ordo__dealloc(mpi, sizeof *mpi, 0);
        return mpi_error(code, "MPI_Comm_set_errhandler", __func__);
    }
    MPI_Comm_rank(mpi->comm, &mpi->rank);
    MPI_Comm_size(mpi->comm, &mpi->size);
    code = epoch_agree(mpi);
    if (code != MPI_SUCCESS) {
        MPI_Comm_free(&mpi->comm);
        ordo__dealloc(mpi, sizeof *mpi, 0);
        return mpi_error(code, "MPI_Allreduce", __func__);
    }
    const char *failed_call = NULL;
    code = ordo__mpi_control_take(mpi->comm, &mpi->control, &mpi->control_number, &failed_call);
    if (code != MPI_SUCCESS) {
        MPI_Comm_free(&mpi->comm);
        ordo__dealloc(mpi, sizeof *mpi, 0);
        return mpi_error(code, failed_call, __func__);
    }
    ordo_status_t st = ordo__mpi_liveness_init(mpi, __func__);
    if (st == ORDO_OK) {
        st = ordo_signal_create(0, &mpi->done);
        if (st != ORDO_OK) {
            ordo__mpi_liveness_free(mpi);
        }
    }
    if (st == ORDO_OK) {
        (void)ordo_signal_set_name(mpi->done, "mpi communication");
        pthread_mutex_init(&mpi->lock, NULL);
        pthread_mutex_init(&mpi->update_lock, NULL);
        pthread_mutex_init(&mpi->stall_lock, NULL);
        pthread_mutex_init(&mpi->subscribe_lock, NULL);
        pthread_mutex_init(&mpi->outbox_lock, NULL);
        st = ordo__mpi_update_post(mpi);
        if (st == ORDO_OK) {
            st = ordo__mpi_progress_start(mpi, __func__);
            if (st == ORDO_OK) {
                st = finalize_hook_set(mpi);
                if (st != ORDO_OK) {
                    ordo__mpi_progress_stop(mpi);
                }
            }
            if (st != ORDO_OK) {
                ordo__mpi_update_cancel(mpi);
            }
        }
        if (st != ORDO_OK) {
            ordo__mpi_outbox_close(mpi, true);
            pthread_mutex_destroy(&mpi->outbox_lock);
            pthread_mutex_destroy(&mpi->subscribe_lock);
            pthread_mutex_destroy(&mpi->stall_lock);
            pthread_mutex_destroy(&mpi->update_lock);
            pthread_mutex_destroy(&mpi->lock);
            ordo_signal_release(mpi->done);
            ordo__mpi_liveness_free(mpi);
        }
    }
    if (st != ORDO_OK) {
        ordo__mpi_control_give(&mpi->control, mpi->control_number, true);
        MPI_Comm_free(&mpi->comm);
        ordo__dealloc(mpi, sizeof *mpi, 0);
        return st;
    }
    mpi->magic = ORDO_MPI_MAGIC;
    mpi->tracker = tracker;
    mpi->stream = stream;
    *out_mpi = mpi;
    return ORDO_OK;
}

ordo_status_t ordo_mpi_destroy(ordo_mpi_t *mpi, ordo_deadline_t deadline) {
    ORDO_RETURN_IF_ERROR(ordo__mpi_check(mpi, __func__));
    /* The teardown applies and answers what other ranks sent last (a
     * raise of an ended publication is refused, a stall answer queries
     * one): none of it is this call's message. */
    ordo__kept_message_t kept;
    ordo__message_keep(&kept);
    /* A callback may run on the progress thread (a published signal moved
     * by another rank), which the destroy stops and joins, or before the
     * publication's own callback queued behind it on this thread, which
     * the destroy waits for: either would wait for itself. */
    if (ordo__timepoints_running_here() || ordo__mpi_on_progress_thread(mpi)) {
        return ordo__error(ORDO_ERR_BUSY, __func__,
                           "called from a callback (a timepoint's, a link's or one on the MPI "
                           "progress thread), which the destroy would wait for: destroy from "
                           "outside callbacks");
    }
    /* A handle the program released is still in the list until its close
     * (after its end, which runs its callbacks, on the releasing thread:
     * perhaps a stream's worker) or until the progress thread drops its
     * pin; the close touches mpi, so the destroy waits for it. */
    for (;;) {
        pthread_mutex_lock(&mpi->subscribe_lock); /* no handle's close is under way */
        pthread_mutex_lock(&mpi->lock);
        bool observing = false, closing = false;
        for (mpi_remote_t *r = mpi->remotes; r; r = r->next) {
            observing |= !r->program_done;
            closing |= r->program_done;
        }
        pthread_mutex_unlock(&mpi->lock);
        pthread_mutex_unlock(&mpi->subscribe_lock);
        if (observing) {
            return ordo__error(ORDO_ERR_BUSY, __func__,
                               "signals opened with ordo_mpi_signal_open are still open: "
                               "release them first");
        }
        if (!closing) {
            break;
        }
        if ((ordo_deadline_t)ordo_time_now_ns() >= deadline) {
            return ordo__error(ORDO_ERR_TIMEOUT, __func__,
                               "deadline passed while a released signal handle was still "
                               "closing (nothing freed)");
        }
        sched_yield();
    }
    /* Every operation's point is waited for on the stream, after it: the
     * stream has run all once it is synchronized (or it failed). */
    ordo_status_t st = ordo_stream_synchronize(mpi->stream, deadline);
    if (st == ORDO_ERR_TIMEOUT) {
        return ordo__error(st, __func__,
                           "deadline passed before the communication completed (nothing freed)");
    }
    char failure[ORDO_SIGNAL_MESSAGE_MAX] = "";
    if (st != ORDO_OK) {
        snprintf(failure, sizeof failure, "%s", ordo_error_message());
    }
    mpi->magic = ORDO_MPI_DEAD;
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        /* Runs quiesce (through the hook), and frees the key. */
        mpi->destroying = true;
        MPI_Comm_delete_attr(MPI_COMM_SELF, mpi->finalize_key);
        MPI_Comm_free_keyval(&mpi->finalize_key);
    }
    ordo__mpi_quiesce(mpi, false); /* done already (at the delete, or by MPI_Finalize) */
    /* A request still in flight (the stream failed meanwhile): MPI
     * finishes it on its own. Operations whose task never ran: freed. */
    if (!finalized && mpi->posted && mpi->posted->request != MPI_REQUEST_NULL) {
        MPI_Request_free(&mpi->posted->request);
    }
    while (mpi->all) {
        ordo__mpi_op_free(mpi->all);
    }
    ordo__mpi_signals_free(mpi, !finalized);
    ordo__mpi_outbox_close(mpi, !finalized); /* its last sends were made above */
    ordo__mpi_control_give(&mpi->control, mpi->control_number, !finalized);
    if (!finalized) {
        MPI_Comm_free(&mpi->comm);
    }
    ordo_signal_release(mpi->done);
    ordo__mpi_liveness_free(mpi);
    pthread_mutex_destroy(&mpi->outbox_lock);
    pthread_mutex_destroy(&mpi->subscribe_lock);
    pthread_mutex_destroy(&mpi->stall_lock);
    pthread_mutex_destroy(&mpi->update_lock);
    pthread_mutex_destroy(&mpi->lock);
    ordo__dealloc(mpi, sizeof *mpi, 0);
    if (st != ORDO_OK) {
        return ordo__error(st, __func__, "the communication failed: %s", failure);
    }
    ordo__message_restore(&kept);
    return ORDO_OK;
}

ordo_status_t ordo_mpi_stream(ordo_mpi_t *mpi, ordo_stream_t **out_stream) {
    if (out_stream) {
        *out_stream = NULL;
    }
    ORDO_RETURN_IF_ERROR(ordo__mpi_check(mpi, __func__));
    if (!out_stream) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_stream is NULL");
    }
    *out_stream = mpi->stream;
    return ORDO_OK;
}

ordo_status_t ordo_mpi_rank(ordo_mpi_t *mpi, int *out_rank, int *out_size) {
    if (out_rank) {
        *out_rank = -1;
    }
    if (out_size) {
        *out_size = 0;
    }
    ORDO_RETURN_IF_ERROR(ordo__mpi_check(mpi, __func__));
    if (!out_rank || !out_size) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "%s is NULL",
                           out_rank ? "out_size" : "out_rank");
    }
    *out_rank = mpi->rank;
    *out_size = mpi->size;
    return ORDO_OK;
}

/* On the communication stream's worker: starts the request and hands it to
 * the progress thread. */
static ordo_status_t op_start(mpi_op_t *op);

static ordo_status_t op_post(void *ctx) {
    mpi_op_t *op = ctx;
    ordo_mpi_t *mpi = op->mpi;
    /* Counted in until the operation is done with or handed to the
     * progress thread, then a look at finalized (as a control send does):
     * a finalize either comes after, and fails it if it is in flight, or
     * before, and it does not start. */
    atomic_fetch_add_explicit(&mpi->sends, 1, memory_order_seq_cst);
    ordo_status_t st = op_start(op);
    atomic_fetch_sub_explicit(&mpi->sends, 1, memory_order_release);
    return st;
}

static ordo_status_t op_start(mpi_op_t *op) {
    ordo_mpi_t *mpi = op->mpi;
    if (atomic_load_explicit(&mpi->finalized, memory_order_seq_cst)) {
        char message[ORDO_SIGNAL_MESSAGE_MAX];
        snprintf(message, sizeof message,
                 "%s (operation %llu, rank %d): MPI was finalized before it started",
                 ordo__mpi_op_name(op->kind), (unsigned long long)op->seq, mpi->rank);
        ordo__mpi_op_free(op);
        (void)ordo_signal_fail(mpi->done, ORDO_ERR_UNAVAILABLE, message);
        return ordo_fail(ORDO_ERR_UNAVAILABLE, "%s", message);
    }
    int code = MPI_ERR_OTHER;
    switch (op->kind) {
    case MPI_OP_ALLREDUCE:
        code = MPI_Iallreduce(MPI_IN_PLACE, op->data, op->count, op->type, op->reduce, mpi->comm,
                              &op->request);
        break;
    case MPI_OP_BCAST:
        code = MPI_Ibcast(op->data, op->count, op->type, op->peer, mpi->comm, &op->request);
        break;
    case MPI_OP_SEND:
        code = MPI_Isend(op->send_data, op->count, op->type, op->peer, op->tag, mpi->comm,
                         &op->request);
        break;
    case MPI_OP_RECV:
        code = MPI_Irecv(op->data, op->count, op->type, op->peer, op->tag, mpi->comm, &op->request);
        break;
    case MPI_OP_ALLTOALL:
        code = MPI_Ialltoall(op->send_data, op->count, op->type, op->data, op->count, op->type,
                             mpi->comm, &op->request);
        break;
    }
    if (code != MPI_SUCCESS) {
        char message[ORDO_SIGNAL_MESSAGE_MAX];
        ordo__mpi_finish(mpi, op, code, message);
        return ordo_fail(ORDO_ERR_DEVICE, "%s", message);
    }
    if (!ordo__mpi_try_complete(mpi, op, POST_TEST_NS)) {
        ordo__mpi_progress_post(mpi, op);
    }
    return ORDO_OK;
}

typedef struct launch {
    mpi_op_t *op;
    bool enqueued; /* the post task is on the stream: it owns the operation */
} launch_t;

static ordo_status_t op_launch(void *ctx, ordo_stream_t *stream) {
    launch_t *launch = ctx;
    mpi_op_t *op = launch->op;
    /* Read before the task is enqueued: from then on the operation is the
     * worker's and the progress thread's, which free it on completion. */
    ordo_signal_t *done = op->mpi->done;
    uint64_t seq = op->seq;
    ORDO_RETURN_IF_ERROR(ordo_stream_host_task(stream, op_post, op));
    launch->enqueued = true;
    ordo__kept_message_t kept;
    ordo__message_keep(&kept);
    ordo_status_t st = ordo_stream_wait(stream, done, seq);
    if (st != ORDO_OK && ordo__hal_stream_failure(stream) != ORDO_OK) {
        /* The stream failed meanwhile (this operation's own start may have
         * failed it): nothing runs after, and the failure is the stream's
         * to report. The task was enqueued: the submission stands, and
         * the wait's refusal is not the thread's message. */
        ordo__message_restore(&kept);
        return ORDO_OK;
    }
    return st;
}

/* Checks what every operation takes, then submits op (a copy of proto)
 * with its accesses through the tracker. */
static ordo_status_t op_submit(ordo_mpi_t *mpi, const mpi_op_t *proto,
                               const ordo_access_t *accesses, size_t count, const char *api) {
    if (atomic_load_explicit(&mpi->finalized, memory_order_acquire)) {
        return ordo__error(ORDO_ERR_UNAVAILABLE, api,
                           "MPI was finalized: no more operations (destroy the ordo_mpi_t)");
    }
    if (ORDO_UNLIKELY(tracker_recording(mpi->tracker))) {
        /* An MPI operation runs once (its request, its point): it is not
         * recorded; the recording fails with this (ordo/graph.h). */
        ORDO_RETURN_IF_ERROR(ordo__graph_refuse(
            mpi->tracker, api, "an MPI operation cannot be recorded into a graph: it runs once"));
    }
    mpi_op_t *op = ordo__alloc(sizeof *op, 0);
    if (!op) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate an MPI operation");
    }
    *op = *proto;
    op->mpi = mpi;
    op->request = MPI_REQUEST_NULL;
    op->seq = mpi->submitted + 1;
    pthread_mutex_lock(&mpi->lock);
    op->prev = NULL;
    op->next = mpi->all;
    if (mpi->all) {
        mpi->all->prev = op;
    }
    mpi->all = op;
    pthread_mutex_unlock(&mpi->lock);
    uint64_t seq = op->seq;
    launch_t launch = {op, false};
    ordo_status_t st =
        ordo_tracker_submit(mpi->tracker, mpi->stream, accesses, count, op_launch, &launch);
    if (launch.enqueued) {
        mpi->submitted = seq; /* it will run (or the stream fails); op may be freed already */
    } else {
        ordo__mpi_op_free(op);
    }
    if (st != ORDO_OK) {
        return ordo__error(st, api, "%s", ordo_error_message());
    }
    return ORDO_OK;
}

static ordo_status_t data_check(ordo_mpi_t *mpi, ordo_buffer_t *buffer, const void *data, int count,
                                MPI_Datatype type, const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__mpi_check(mpi, api));
    if (!buffer) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "buffer is NULL");
    }
    if (count < 0) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "count %d is negative", count);
    }
    if (count > 0 && !data) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "data is NULL for %d elements", count);
    }
    if (type == MPI_DATATYPE_NULL) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "type is MPI_DATATYPE_NULL");
    }
    return ORDO_OK;
}

static ordo_status_t rank_check(const ordo_mpi_t *mpi, int rank, const char *what,
                                const char *api) {
    if (rank < 0 || rank >= mpi->size) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, api, "%s %d is not a rank of the %d", what, rank,
                           mpi->size);
    }
    return ORDO_OK;
}

ordo_status_t ordo_mpi_allreduce(ordo_mpi_t *mpi, ordo_buffer_t *buffer, void *data, int count,
                                 MPI_Datatype type, MPI_Op op) {
    ORDO_RETURN_IF_ERROR(data_check(mpi, buffer, data, count, type, __func__));
    if (op == MPI_OP_NULL) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "op is MPI_OP_NULL");
    }
    mpi_op_t proto = {
        .kind = MPI_OP_ALLREDUCE, .data = data, .count = count, .type = type, .reduce = op};
    ordo_access_t access = {buffer, ORDO_ACCESS_WRITE};
    return op_submit(mpi, &proto, &access, 1, __func__);
}

ordo_status_t ordo_mpi_bcast(ordo_mpi_t *mpi, ordo_buffer_t *buffer, void *data, int count,
                             MPI_Datatype type, int root) {
    ORDO_RETURN_IF_ERROR(data_check(mpi, buffer, data, count, type, __func__));
    ORDO_RETURN_IF_ERROR(rank_check(mpi, root, "root", __func__));
    mpi_op_t proto = {
        .kind = MPI_OP_BCAST, .data = data, .count = count, .type = type, .peer = root};
    ordo_access_t access = {buffer, root == mpi->rank ? ORDO_ACCESS_READ : ORDO_ACCESS_WRITE};
    return op_submit(mpi, &proto, &access, 1, __func__);
}

/* A send or receive: proto's data checked, its peer (a rank) and tag,
 * then submitted with one access of buffer in mode. */
static ordo_status_t point_to_point(ordo_mpi_t *mpi, const mpi_op_t *proto, ordo_buffer_t *buffer,
                                    ordo_access_mode_t mode, const char *peer_name,
                                    const char *api) {
    const void *data = proto->kind == MPI_OP_SEND ? proto->send_data : proto->data;
    ORDO_RETURN_IF_ERROR(data_check(mpi, buffer, data, proto->count, proto->type, api));
    ORDO_RETURN_IF_ERROR(rank_check(mpi, proto->peer, peer_name, api));
    if (proto->tag < 0) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "tag %d is negative", proto->tag);
    }
    ordo_access_t access = {buffer, mode};
    return op_submit(mpi, proto, &access, 1, api);
}

ordo_status_t ordo_mpi_send(ordo_mpi_t *mpi, ordo_buffer_t *buffer, const void *data, int count,
                            MPI_Datatype type, int dest, int tag) {
    mpi_op_t proto = {.kind = MPI_OP_SEND,
                      .send_data = data,
                      .count = count,
                      .type = type,
                      .peer = dest,
                      .tag = tag};
    return point_to_point(mpi, &proto, buffer, ORDO_ACCESS_READ, "dest", __func__);
}

ordo_status_t ordo_mpi_recv(ordo_mpi_t *mpi, ordo_buffer_t *buffer, void *data, int count,
                            MPI_Datatype type, int source, int tag) {
    mpi_op_t proto = {.kind = MPI_OP_RECV,
                      .data = data,
                      .count = count,
                      .type = type,
                      .peer = source,
                      .tag = tag};
    return point_to_point(mpi, &proto, buffer, ORDO_ACCESS_WRITE, "source", __func__);
}

ordo_status_t ordo_mpi_alltoall(ordo_mpi_t *mpi, ordo_buffer_t *send_buffer, const void *send_data,
                                ordo_buffer_t *recv_buffer, void *recv_data, int count,
                                MPI_Datatype type) {
    ORDO_RETURN_IF_ERROR(data_check(mpi, send_buffer, send_data, count, type, __func__));
    ORDO_RETURN_IF_ERROR(data_check(mpi, recv_buffer, recv_data, count, type, __func__));
    if (send_buffer == recv_buffer) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "send_buffer and recv_buffer are the same buffer");
    }
    mpi_op_t proto = {.kind = MPI_OP_ALLTOALL,
                      .send_data = send_data,
                      .data = recv_data,
                      .count = count,
                      .type = type};
    ordo_access_t accesses[2] = {{send_buffer, ORDO_ACCESS_READ}, {recv_buffer, ORDO_ACCESS_WRITE}};
    return op_submit(mpi, &proto, accesses, 2, __func__);
}
