/* Liveness of the ranks that exchange signals' messages (ordo/mpi.h:
 * ordo_mpi_set_peer_timeout).
 *
 * MPI tells a survivor nothing when another rank dies (Open MPI 4.1 has no
 * failure notification a program may rely on), so ranks tell each other
 * they live. Two ranks are peers while one observes a signal the other
 * published: the observer has a handle whose owner is the other, or the
 * owner has the observer as a subscriber (or a pending subscription); a
 * rank watches a peer only while it depends on it (see peers_mark). Each
 * sends each of its peers a HEARTBEAT every
 * timeout / HEARTBEATS_PER_TIMEOUT, from its progress thread, which looks
 * at least every millisecond while signals are live; any message counts
 * as a heartbeat. A peer from which nothing came for the whole timeout
 * (counted from the last message, or from when it became a peer, if
 * later) is found dead, for good:
 *   - every handle of a signal it owns fails with ORDO_ERR_ABANDONED, its
 *     message naming the rank: waits, streams, links and timepoints on
 *     them end instead of hanging;
 *   - its subscriptions are dropped (nothing more is sent to it);
 *   - its later messages are ignored (a rank found dead that was only slow
 *     stays dead here: its handles failed already, and failures are
 *     final).
 * A message is stamped with the clock reading of the progress thread's
 * next liveness pass (a receiver only sets a flag: no clock read on the
 * latency path). Within the bound: a rank that dies is found dead between
 * timeout and timeout plus a heartbeat's period plus two milliseconds
 * after its last message (a pass stamps it at most a millisecond late, and
 * the next pass that finds the silence comes at most a millisecond after
 * the timeout). Every rank must use the same timeout.
 */
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "mpi/mpi_internal.h"
#include "sync/signal_access.h"

#define DEFAULT_PEER_TIMEOUT_NS 2000000000u
#define HEARTBEATS_PER_TIMEOUT 8u

ordo_status_t ordo__mpi_liveness_init(ordo_mpi_t *mpi, const char *api) {
    size_t n = (size_t)mpi->size;
    mpi->heard = ordo__alloc(n * sizeof *mpi->heard, 0);
    mpi->heard_ns = ordo__alloc(n * sizeof *mpi->heard_ns, 0);
    mpi->dead = ordo__alloc(n * sizeof *mpi->dead, 0);
    mpi->peers = ordo__alloc(n * sizeof *mpi->peers, 0);
    if (!mpi->heard || !mpi->heard_ns || !mpi->dead || !mpi->peers) {
        ordo__mpi_liveness_free(mpi);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate the liveness of %d ranks",
                           mpi->size);
    }
    uint64_t now = ordo_time_now_ns();
    for (size_t i = 0; i < n; ++i) {
        atomic_init(&mpi->heard[i], 0);
        mpi->heard_ns[i] = now;
        atomic_init(&mpi->dead[i], 0);
    }
    atomic_init(&mpi->peer_timeout_ns, DEFAULT_PEER_TIMEOUT_NS);
    mpi->next_heartbeat_ns = 0;
    return ORDO_OK;
}

void ordo__mpi_liveness_free(ordo_mpi_t *mpi) {
    size_t n = (size_t)mpi->size;
    if (mpi->heard) {
        ordo__dealloc((void *)mpi->heard, n * sizeof *mpi->heard, 0);
    }
    if (mpi->heard_ns) {
        ordo__dealloc(mpi->heard_ns, n * sizeof *mpi->heard_ns, 0);
    }
    if (mpi->dead) {
        ordo__dealloc((void *)mpi->dead, n * sizeof *mpi->dead, 0);
    }
    if (mpi->peers) {
        ordo__dealloc(mpi->peers, n * sizeof *mpi->peers, 0);
    }
    mpi->heard = NULL;
    mpi->heard_ns = NULL;
    mpi->dead = NULL;
    mpi->peers = NULL;
}

void ordo__mpi_heard(ordo_mpi_t *mpi, int rank) {
    /* Stamped by the next pass (ordo__mpi_liveness_progress), whose clock
     * reading comes after this store. */
    atomic_store_explicit(&mpi->heard[rank], 1, memory_order_relaxed);
}

bool ordo__mpi_rank_dead(ordo_mpi_t *mpi, int rank) {
    return atomic_load_explicit(&mpi->dead[rank], memory_order_relaxed) != 0;
}

ordo_status_t ordo_mpi_set_peer_timeout(ordo_mpi_t *mpi, uint64_t timeout_ms) {
    ORDO_RETURN_IF_ERROR(ordo__mpi_check(mpi, __func__));
    if (atomic_load_explicit(&mpi->finalized, memory_order_acquire)) {
        return ordo__error(ORDO_ERR_UNAVAILABLE, __func__,
                           "MPI was finalized: no rank is watched any more");
    }
    if (timeout_ms < 100 || timeout_ms > 3600000) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                           "timeout_ms %" PRIu64 " is outside 100 .. 3600000", timeout_ms);
    }
    /* Every rank heard now: a peer gets one whole new timeout to set the
     * same (its heartbeats keep its old period until it does). The marks
     * come first, and the release store publishes them: a pass that reads
     * the new timeout stamps every rank before it judges any. */
    for (int rank = 0; rank < mpi->size; ++rank) {
        ordo__mpi_heard(mpi, rank);
    }
    atomic_store_explicit(&mpi->peer_timeout_ns, timeout_ms * 1000000u, memory_order_release);
    ordo__mpi_listen_soon(mpi); /* an idle progress thread sleeps by the new period */
    return ORDO_OK;
}

/* What this rank owes a peer, and expects of it (mpi->peers, by rank). */
enum {
    PEER_BEAT = 1,  /* it may watch this rank: send it heartbeats */
    PEER_WATCH = 2, /* this rank depends on it: find it dead when silent */
};

/* Marks the peers now (under lock), into mpi->peers. A rank watches only
 * whom it depends on (the owners of its handles not ended; its subscribers
 * while their publication goes on, or waits to be published), and beats
 * for everyone who may watch it: the owner of every open handle, ended or
 * not (an owner that never published the signal keeps the subscription
 * and watches until the handle closes), and every subscriber it watches. */
static void peers_mark(ordo_mpi_t *mpi) {
    memset(mpi->peers, 0, (size_t)mpi->size);
    for (mpi_published_t *p = mpi->published; p; p = p->next) {
        if (atomic_load_explicit(&p->sent_ended, memory_order_relaxed)) {
            continue; /* its subscribers heard the end: they expect nothing more */
        }
        for (int rank = 0; rank < mpi->size; ++rank) {
            if (p->subscribers[rank] != SUBSCRIBER_NONE) {
                mpi->peers[rank] |= PEER_BEAT | PEER_WATCH;
            }
        }
    }
    for (mpi_pending_t *q = mpi->pending; q; q = q->next) {
        mpi->peers[q->rank] |= PEER_BEAT | PEER_WATCH;
    }
    for (mpi_remote_t *r = mpi->remotes; r; r = r->next) {
        mpi->peers[r->owner] |= PEER_BEAT;
        if (!(atomic_load_explicit(&r->state, memory_order_acquire) & ORDO__SIGNAL_FAILED_BIT)) {
            mpi->peers[r->owner] |= PEER_WATCH;
        }
    }
    mpi->peers[mpi->rank] = 0;
}

/* rank is dead (under lock): its handles fail, its subscriptions go. */
static void found_dead(ordo_mpi_t *mpi, int rank, uint64_t silent_ns) {
    atomic_store_explicit(&mpi->dead[rank], 1, memory_order_relaxed);
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    snprintf(message, sizeof message,
             "rank %d is gone: nothing came from it for %" PRIu64 " ms (it died, aborted or hangs)",
             rank, silent_ns / 1000000u);
    for (mpi_remote_t *r = mpi->remotes; r; r = r->next) {
        if (r->owner == rank) {
            ordo__mpi_remote_abandon(r, message);
        }
    }
    for (mpi_published_t *p = mpi->published; p; p = p->next) {
        p->subscribers[rank] = SUBSCRIBER_NONE;
    }
    ordo__mpi_pending_take(mpi, rank, -1, NULL);
}

uint64_t ordo__mpi_heartbeat_period_ns(ordo_mpi_t *mpi) {
    return atomic_load_explicit(&mpi->peer_timeout_ns, memory_order_relaxed) /
           HEARTBEATS_PER_TIMEOUT;
}

bool ordo__mpi_liveness_progress(ordo_mpi_t *mpi) {
    uint64_t timeout = atomic_load_explicit(&mpi->peer_timeout_ns, memory_order_acquire);
    uint64_t now = ordo_time_now_ns();
    /* A shorter timeout set since the last beat brings the next one in. */
    uint64_t period = timeout / HEARTBEATS_PER_TIMEOUT;
    if (mpi->next_heartbeat_ns > now + period) {
        mpi->next_heartbeat_ns = now + period;
    }
    bool beat = now >= mpi->next_heartbeat_ns;
    bool found = false;
    pthread_mutex_lock(&mpi->lock);
    /* Stamps what came since the last pass: every rank's, so that one
     * becoming a peer later counts from its own mark, not an older one.
     * Under the lock, as peers_mark: an open adds its handle and marks its
     * owner heard under it, so this pass sees both or neither (a handle
     * seen without its mark would judge the owner by an old stamp). */
    for (int rank = 0; rank < mpi->size; ++rank) {
        if (atomic_load_explicit(&mpi->heard[rank], memory_order_relaxed) &&
            atomic_exchange_explicit(&mpi->heard[rank], 0, memory_order_relaxed)) {
            mpi->heard_ns[rank] = now;
        }
    }
    peers_mark(mpi);
    for (int rank = 0; rank < mpi->size; ++rank) {
        if (!mpi->peers[rank] || ordo__mpi_rank_dead(mpi, rank)) {
            mpi->peers[rank] = 0;
            continue;
        }
        uint64_t heard = mpi->heard_ns[rank];
        if ((mpi->peers[rank] & PEER_WATCH) && now > heard && now - heard > timeout) {
            found_dead(mpi, rank, now - heard);
            mpi->peers[rank] = 0;
            found = true;
        }
    }
    pthread_mutex_unlock(&mpi->lock);
    if (beat) {
        /* Sent outside the lock (a send may wait for MPI); peers holds the
         * ranks marked above. */
        control_msg_t msg = {.kind = MSG_HEARTBEAT};
        for (int rank = 0; rank < mpi->size; ++rank) {
            if (mpi->peers[rank]) {
                ordo__mpi_control_send(mpi, rank, &msg);
            }
        }
        mpi->next_heartbeat_ns = now + period;
    }
    return found;
}
