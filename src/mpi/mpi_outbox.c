/* Control messages that never block their sender (mpi_internal.h).
 *
 * A control message goes out with MPI_Isend from the thread that has news
 * (a program thread advancing a publication, a stream's worker, the
 * progress thread's heartbeats) and is tested once at once: a small
 * message to a live rank is copied out eagerly, so the send is complete
 * there and its node goes back to the spares. A blocking send would wait
 * for as long as the receiver does not drain its queue, and a rank that
 * died never does: the sender then hung with the locks it held, the
 * progress thread behind them, and with it the heartbeats and the
 * liveness check that would have found the rank dead.
 *
 * A send not complete at once stays in the outbox, with its buffer, and
 * the progress thread tests it on each pass until it completes. One to a
 * rank found dead never will: its request is freed (MPI may still read
 * the buffer, so the node is kept, reachable, until the process ends) and
 * nothing more is sent there (ordo__mpi_control_send). The order of the
 * messages to a rank is the order of their MPI_Isend calls, as it was of
 * their MPI_Send calls.
 */
#include <stddef.h>
#include <string.h>

#include "base/alloc.h"
#include "mpi/mpi_internal.h"

/* Spare nodes an ordo_mpi_t keeps for its next sends. */
#define OUTBOX_SPARES_MAX 64u

struct mpi_outgoing {
    struct mpi_outgoing *next;
    MPI_Request request;
    int rank;
    control_msg_t msg;
};

/* Nodes whose send to a dead rank was let go: kept for MPI, which may
 * still read them, until the process ends. */
static pthread_mutex_t abandoned_lock = PTHREAD_MUTEX_INITIALIZER;
static mpi_outgoing_t *abandoned;

static void abandon(mpi_outgoing_t *node) {
    pthread_mutex_lock(&abandoned_lock);
    node->next = abandoned;
    abandoned = node;
    pthread_mutex_unlock(&abandoned_lock);
}

/* One spare is kept apart, taken and given back with one atomic step
 * each: a send that completes at once (nearly all) takes no lock. */
static mpi_outgoing_t *node_take(ordo_mpi_t *mpi) {
    mpi_outgoing_t *quick =
        atomic_exchange_explicit(&mpi->outbox_quick, NULL, memory_order_acquire);
    if (quick) {
        return quick;
    }
    pthread_mutex_lock(&mpi->outbox_lock);
    mpi_outgoing_t *node = mpi->outbox_spares;
    if (node) {
        mpi->outbox_spares = node->next;
        mpi->outbox_spare_count--;
    }
    pthread_mutex_unlock(&mpi->outbox_lock);
    return node ? node : ordo__alloc(sizeof *node, 0);
}

static void node_give(ordo_mpi_t *mpi, mpi_outgoing_t *node) {
    mpi_outgoing_t *empty = NULL;
    if (atomic_compare_exchange_strong_explicit(&mpi->outbox_quick, &empty, node,
                                                memory_order_release, memory_order_relaxed)) {
        return;
    }
    pthread_mutex_lock(&mpi->outbox_lock);
    if (mpi->outbox_spare_count < OUTBOX_SPARES_MAX) {
        node->next = mpi->outbox_spares;
        mpi->outbox_spares = node;
        mpi->outbox_spare_count++;
        node = NULL;
    }
    pthread_mutex_unlock(&mpi->outbox_lock);
    if (node) {
        ordo__dealloc(node, sizeof *node, 0);
    }
}

/* Whether the send is over: complete, or failed (MPI_ERRORS_RETURN: a
 * failed request is no longer active; the peer's handles stay as they
 * are, as with any send that fails). */
static bool send_over(mpi_outgoing_t *node) {
    int flag = 0;
    return MPI_Test(&node->request, &flag, MPI_STATUS_IGNORE) != MPI_SUCCESS || flag;
}

void ordo__mpi_control_send(ordo_mpi_t *mpi, int rank, const control_msg_t *msg) {
    if (ordo__mpi_rank_dead(mpi, rank)) {
        return; /* found dead: nothing more goes to it */
    }
    /* Counted in, then a look at finalized (ordo__mpi_quiesce stores it,
     * then waits for the count): no MPI call after MPI_Finalize. */
    atomic_fetch_add_explicit(&mpi->sends, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&mpi->finalized, memory_order_seq_cst)) {
        atomic_fetch_sub_explicit(&mpi->sends, 1, memory_order_release);
        return;
    }
    mpi_outgoing_t *node = node_take(mpi);
    if (!node) { /* out of memory: as a send that failed */
        atomic_fetch_sub_explicit(&mpi->sends, 1, memory_order_release);
        return;
    }
    /* Without a failure the message is left off: the shortest messages
     * travel the quickest. */
    int length = msg->status == ORDO_OK && msg->kind != MSG_FAIL
                     ? (int)offsetof(control_msg_t, message)
                     : (int)sizeof *msg;
    memcpy(&node->msg, msg, (size_t)length);
    node->msg.epoch = mpi->epoch;
    node->rank = rank;
    int tag = node->msg.kind == MSG_UPDATE ? UPDATE_TAG : CONTROL_TAG;
    if (MPI_Isend(&node->msg, length, MPI_BYTE, rank, tag, mpi->control, &node->request) !=
            MPI_SUCCESS ||
        send_over(node)) {
        node_give(mpi, node);
    } else {
        pthread_mutex_lock(&mpi->outbox_lock);
        node->next = mpi->outbox;
        mpi->outbox = node;
        atomic_store_explicit(&mpi->outbox_busy, true, memory_order_release);
        pthread_mutex_unlock(&mpi->outbox_lock);
        ordo__parker_unpark(&mpi->parker, ORDO_PARK_ANY, 1); /* to test it */
    }
    atomic_fetch_sub_explicit(&mpi->sends, 1, memory_order_release);
}

bool ordo__mpi_outbox_busy(ordo_mpi_t *mpi) {
    return atomic_load_explicit(&mpi->outbox_busy, memory_order_acquire);
}

/* Tests each send of the outbox (taken off it meanwhile: only one thread
 * tests a request), lets go of those to dead ranks if drop_dead, or of
 * every one not over if drop_all; puts the others back. Whether any
 * ended. */
static bool outbox_pass(ordo_mpi_t *mpi, bool drop_all) {
    pthread_mutex_lock(&mpi->outbox_lock);
    mpi_outgoing_t *list = mpi->outbox;
    mpi->outbox = NULL;
    pthread_mutex_unlock(&mpi->outbox_lock);
    bool ended = false;
    mpi_outgoing_t *kept = NULL, *kept_tail = NULL;
    while (list) {
        mpi_outgoing_t *node = list;
        list = node->next;
        if (send_over(node)) {
            node_give(mpi, node);
            ended = true;
        } else if (drop_all || ordo__mpi_rank_dead(mpi, node->rank)) {
            MPI_Request_free(&node->request);
            abandon(node);
            ended = true;
        } else {
            node->next = NULL;
            if (kept_tail) {
                kept_tail->next = node;
            } else {
                kept = node;
            }
            kept_tail = node;
        }
    }
    pthread_mutex_lock(&mpi->outbox_lock);
    if (kept) {
        kept_tail->next = mpi->outbox;
        mpi->outbox = kept;
    }
    atomic_store_explicit(&mpi->outbox_busy, mpi->outbox != NULL, memory_order_release);
    pthread_mutex_unlock(&mpi->outbox_lock);
    return ended;
}

bool ordo__mpi_outbox_progress(ordo_mpi_t *mpi) {
    return ordo__mpi_outbox_busy(mpi) && outbox_pass(mpi, false);
}

void ordo__mpi_outbox_close(ordo_mpi_t *mpi, bool mpi_usable) {
    if (mpi_usable) {
        (void)outbox_pass(mpi, true);
    } else {
        /* MPI was finalized: its close (at the finalize) emptied the
         * outbox, and nothing was sent after. Kept all the same. */
        while (mpi->outbox) {
            mpi_outgoing_t *node = mpi->outbox;
            mpi->outbox = node->next;
            abandon(node);
        }
    }
    mpi_outgoing_t *quick =
        atomic_exchange_explicit(&mpi->outbox_quick, NULL, memory_order_acquire);
    if (quick) {
        ordo__dealloc(quick, sizeof *quick, 0);
    }
    while (mpi->outbox_spares) {
        mpi_outgoing_t *node = mpi->outbox_spares;
        mpi->outbox_spares = node->next;
        ordo__dealloc(node, sizeof *node, 0);
    }
    mpi->outbox_spare_count = 0;
}
