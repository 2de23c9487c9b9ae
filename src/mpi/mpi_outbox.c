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
 *
 * Updates are merged: while an UPDATE of a publication to a rank is in
 * flight, a newer one for that rank waits in the outbox, unsent, and a
 * newer one still takes its place (an UPDATE carries the whole state, and
 * observers keep the greatest value, so the newest says all: the value
 * greater, or the failure). A rank that
 * stops draining thus holds at most one pending update per publication,
 * not one per move: MPI retries every pending send on each call it makes,
 * and thousands of them to a dead rank starved the sender's progress
 * thread, whose heartbeats then stopped, and live ranks took the sender
 * for dead.
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
    int tag;
    int length;  /* of what is sent */
    bool posted; /* MPI_Isend made (else an update waiting its turn) */
    void *bulk;  /* a larger message sent instead of msg (a stall answer), or NULL */
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
    if (node->bulk) {
        ordo__dealloc(node->bulk, (size_t)node->length, 0);
        node->bulk = NULL;
    }
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

/* Posts node's send; whether it is over at once (or failed to start). */
static bool post(ordo_mpi_t *mpi, mpi_outgoing_t *node) {
    node->posted = true;
    return MPI_Isend(node->bulk ? node->bulk : &node->msg, node->length, MPI_BYTE, node->rank,
                     node->tag, mpi->control, &node->request) != MPI_SUCCESS ||
           send_over(node);
}

/* An update of the same publication to the same rank in list, posted or
 * waiting, or NULL. */
static mpi_outgoing_t *update_find(mpi_outgoing_t *list, const mpi_outgoing_t *like, bool posted) {
    for (mpi_outgoing_t *n = list; n; n = n->next) {
        if (n->posted == posted && n->msg.kind == MSG_UPDATE && n->rank == like->rank &&
            n->msg.id == like->msg.id) {
            return n;
        }
    }
    return NULL;
}

static void outbox_push(ordo_mpi_t *mpi, mpi_outgoing_t *node) {
    node->next = mpi->outbox;
    mpi->outbox = node;
    atomic_store_explicit(&mpi->outbox_busy, true, memory_order_release);
}

/* Under outbox_lock: an update like node waiting its turn takes node's
 * state (then *out_copied: node is not kept); else, while one is in
 * flight, node waits its turn. Whether either happened. */
static bool update_merged(ordo_mpi_t *mpi, mpi_outgoing_t *node, bool *out_copied) {
    mpi_outgoing_t *waiting = update_find(mpi->outbox, node, false);
    *out_copied = waiting != NULL;
    if (waiting) {
        /* The newer state stays: two threads send a publication's news
         * (the one that moved it, the progress thread), each with the
         * state it read, in either order. A failure is final. */
        const control_msg_t *old = &waiting->msg, *new = &node->msg;
        if (old->status == ORDO_OK && (new->status != ORDO_OK || new->value > old->value)) {
            memcpy(&waiting->msg, &node->msg, (size_t)node->length);
            waiting->length = node->length;
        }
        return true;
    }
    if (!update_find(mpi->outbox, node, true)) {
        return false;
    }
    node->posted = false;
    outbox_push(mpi, node);
    return true;
}

/* Counts a send in, and takes its node: NULL, counted out again, if
 * nothing goes (the rank was found dead, MPI was finalized, or there is
 * no memory: as a send that failed). The count, then a look at finalized
 * (ordo__mpi_quiesce stores it, then waits for the count): no MPI call
 * after MPI_Finalize. */
static mpi_outgoing_t *send_begin(ordo_mpi_t *mpi, int rank) {
    if (ordo__mpi_rank_dead(mpi, rank)) {
        return NULL; /* found dead: nothing more goes to it */
    }
    atomic_fetch_add_explicit(&mpi->sends, 1, memory_order_seq_cst);
    mpi_outgoing_t *node =
        atomic_load_explicit(&mpi->finalized, memory_order_seq_cst) ? NULL : node_take(mpi);
    if (!node) {
        atomic_fetch_sub_explicit(&mpi->sends, 1, memory_order_release);
    }
    return node;
}

static void send_end(ordo_mpi_t *mpi) {
    atomic_fetch_sub_explicit(&mpi->sends, 1, memory_order_release);
}

/* Posts node's send; one not over at once goes to the outbox, which the
 * progress thread tests. */
static void send_post(ordo_mpi_t *mpi, mpi_outgoing_t *node) {
    if (post(mpi, node)) {
        node_give(mpi, node);
        return;
    }
    pthread_mutex_lock(&mpi->outbox_lock);
    outbox_push(mpi, node);
    pthread_mutex_unlock(&mpi->outbox_lock);
    ordo__parker_unpark(&mpi->parker, ORDO_PARK_ANY, 1); /* to test it */
}

void ordo__mpi_control_send(ordo_mpi_t *mpi, int rank, const control_msg_t *msg) {
    mpi_outgoing_t *node = send_begin(mpi, rank);
    if (!node) {
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
    node->tag = msg->kind == MSG_UPDATE ? UPDATE_TAG : CONTROL_TAG;
    node->length = length;
    bool merged = false;
    if (msg->kind == MSG_UPDATE && ordo__mpi_outbox_busy(mpi)) {
        pthread_mutex_lock(&mpi->outbox_lock);
        bool copied = false;
        merged = update_merged(mpi, node, &copied);
        pthread_mutex_unlock(&mpi->outbox_lock);
        if (copied) {
            node_give(mpi, node); /* its state went into the one waiting */
        }
    }
    if (!merged) {
        send_post(mpi, node);
    }
    send_end(mpi);
}

void ordo__mpi_bulk_send(ordo_mpi_t *mpi, int rank, int tag, const void *data, int length) {
    mpi_outgoing_t *node = send_begin(mpi, rank);
    if (!node) {
        return;
    }
    node->bulk = ordo__alloc((size_t)length, 0);
    if (!node->bulk) { /* out of memory: as a send that failed */
        node_give(mpi, node);
        send_end(mpi);
        return;
    }
    memcpy(node->bulk, data, (size_t)length);
    node->msg.kind = 0; /* never an update to merge */
    node->rank = rank;
    node->tag = tag;
    node->length = length;
    send_post(mpi, node);
    send_end(mpi);
}

bool ordo__mpi_outbox_busy(ordo_mpi_t *mpi) {
    return atomic_load_explicit(&mpi->outbox_busy, memory_order_acquire);
}

/* One pass over the outbox, under outbox_lock (a sender waits the pass
 * out: only one thread tests a request, and a new update sees the ones in
 * flight). Tests each send posted: lets go of those over and of those to
 * dead ranks. Then posts each waiting update whose predecessor is over,
 * or drops it if its rank is dead. When closing, every send is let go
 * (MPI finishes those in flight on its own) and every waiting update to a
 * live rank is posted first: observers still get the last state. Whether
 * any ended or was posted. */
static bool outbox_pass(ordo_mpi_t *mpi, bool closing) {
    pthread_mutex_lock(&mpi->outbox_lock);
    bool moved = false;
    mpi_outgoing_t **link = &mpi->outbox;
    mpi_outgoing_t *ended = NULL; /* given back after the lock */
    while (*link) {
        mpi_outgoing_t *node = *link;
        if (!node->posted) {
            link = &node->next;
            continue;
        }
        bool over = send_over(node);
        if (!over && !closing && !ordo__mpi_rank_dead(mpi, node->rank)) {
            link = &node->next;
            continue;
        }
        *link = node->next;
        moved = true;
        if (over) {
            node->next = ended;
            ended = node;
        } else {
            MPI_Request_free(&node->request);
            abandon(node);
        }
    }
    for (link = &mpi->outbox; *link;) {
        mpi_outgoing_t *node = *link;
        if (node->posted) {
            link = &node->next;
            continue;
        }
        bool dead = ordo__mpi_rank_dead(mpi, node->rank);
        if (!dead && !closing && update_find(mpi->outbox, node, true)) {
            link = &node->next; /* its turn has not come */
            continue;
        }
        moved = true;
        if (dead || post(mpi, node)) {
            *link = node->next;
            node->next = ended;
            ended = node;
        } else if (closing) {
            /* The last state of a live rank's observers still goes out,
             * after the one in flight (posted in this order): MPI finishes
             * it on its own. */
            *link = node->next;
            MPI_Request_free(&node->request);
            abandon(node);
        } else {
            link = &node->next; /* posted: tested from the next pass */
        }
    }
    atomic_store_explicit(&mpi->outbox_busy, mpi->outbox != NULL, memory_order_release);
    pthread_mutex_unlock(&mpi->outbox_lock);
    while (ended) {
        mpi_outgoing_t *node = ended;
        ended = node->next;
        node_give(mpi, node);
    }
    return moved;
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
