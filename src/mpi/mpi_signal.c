/* Signals observed across ranks (ordo_mpi_signal_publish, _open).
 *
 * Messages on the ordo_mpi_t's control communicator, one fixed-size record
 * each (MPI_BYTE), tag CONTROL_TAG:
 *   SUBSCRIBE id        a rank observes the receiver's publication id
 *   UPDATE id state     the owner's publication reached value (or failed,
 *                       with status and message)
 *   ADVANCE id value    raise the receiver's publication id
 *   FAIL id status msg  fail it
 * The progress thread receives with MPI_Improbe/MPI_Mrecv (any thread may
 * take a message so), applies each, and sends UPDATEs when a publication
 * moved past what its subscribers were sent. Values only grow at the
 * owner, and an UPDATE raises an observer's state to max(state, value), so
 * observers stay monotonic whatever the messages' order.
 */
#include <limits.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/futex.h"
#include "mpi/mpi_internal.h"
#include "sync/signal_access.h"

#define CONTROL_TAG 0x6f72 /* SUBSCRIBE, ADVANCE, FAIL */
#define UPDATE_TAG 0x6f73  /* UPDATE: the one kind a waiting thread takes itself */
/* How long a thread waiting on an observed signal looks for its update
 * itself before it sleeps (as MPI_Recv would, for a message about to
 * come): a sleeping thread's wake-up costs tens of microseconds. */
#define HELP_NS 50000u

enum { MSG_SUBSCRIBE = 1, MSG_UPDATE = 2, MSG_ADVANCE = 3, MSG_FAIL = 4 };

typedef struct control_msg {
    uint32_t kind;
    uint32_t id;
    uint64_t value;
    int32_t status; /* ORDO_OK, or the failure */
    char message[ORDO_SIGNAL_MESSAGE_MAX];
} control_msg_t;

static void control_send(ordo_mpi_t *mpi, int rank, const control_msg_t *msg) {
    /* Small and eager: returns once copied out. An error here (the peer is
     * gone) leaves that peer's handles as they are. */
    (void)MPI_Send(msg, (int)sizeof *msg, MPI_BYTE, rank,
                   msg->kind == MSG_UPDATE ? UPDATE_TAG : CONTROL_TAG, mpi->control);
}

static void on_update(ordo_mpi_t *mpi, const control_msg_t *msg, int source);

/* Receives and applies every message of tag waiting; true if any. */
static bool receive(ordo_mpi_t *mpi, int tag, bool updates_only);

/* ---- observers' handles: the remote ops ---------------------------------- */

static mpi_remote_t *remote_of(signal_remote_t *remote) {
    return (mpi_remote_t *)remote;
}

static uint64_t op_state(signal_remote_t *remote) {
    return atomic_load_explicit(&remote_of(remote)->state, memory_order_acquire);
}

/* Raises or fails the kept truth and wakes its sleepers. */
static void remote_apply(mpi_remote_t *r, uint64_t value, ordo_status_t failure,
                         const char *message) {
    if (failure != ORDO_OK) {
        uint64_t state = atomic_load_explicit(&r->state, memory_order_relaxed);
        if (!(state & ORDO__SIGNAL_FAILED_BIT)) {
            /* One writer: the progress thread, or the handle's failer under
             * the mpi lock (both take it: see remote_fail). */
            r->failure = failure;
            snprintf(r->message, sizeof r->message, "%s", message);
            atomic_fetch_or_explicit(&r->state, ORDO__SIGNAL_FAILED_BIT, memory_order_release);
        }
    } else {
        uint64_t state = atomic_load_explicit(&r->state, memory_order_relaxed);
        while ((state & ORDO_SIGNAL_VALUE_MAX) < value &&
               !atomic_compare_exchange_weak_explicit(&r->state, &state,
                                                      (state & ORDO__SIGNAL_FAILED_BIT) | value,
                                                      memory_order_release, memory_order_relaxed)) {
        }
    }
    atomic_fetch_add_explicit(&r->seq, 1, memory_order_seq_cst);
    ordo__futex_wake(&r->seq, INT_MAX);
}

static ordo_status_t op_advance(signal_remote_t *remote, uint64_t value, const char *api) {
    mpi_remote_t *r = remote_of(remote);
    uint64_t state = op_state(remote);
    if (state & ORDO__SIGNAL_FAILED_BIT) {
        return ordo__error(r->failure, api, "signal failed at %llu: %s",
                           (unsigned long long)(state & ORDO_SIGNAL_VALUE_MAX), r->message);
    }
    control_msg_t msg = {.kind = MSG_ADVANCE, .id = r->id, .value = value};
    control_send(r->mpi, r->owner, &msg);
    /* Taken here at once: the owner takes the same maximum when the message
     * arrives (unless it failed first: its failure then reaches us). */
    pthread_mutex_lock(&r->mpi->lock);
    remote_apply(r, value, ORDO_OK, NULL);
    pthread_mutex_unlock(&r->mpi->lock);
    return ORDO_OK;
}

static ordo_status_t op_fail(signal_remote_t *remote, ordo_status_t status, const char *message,
                             const char *api) {
    (void)api;
    mpi_remote_t *r = remote_of(remote);
    control_msg_t msg = {.kind = MSG_FAIL, .id = r->id, .status = (int32_t)status};
    snprintf(msg.message, sizeof msg.message, "%s", message ? message : "");
    control_send(r->mpi, r->owner, &msg);
    pthread_mutex_lock(&r->mpi->lock);
    remote_apply(r, 0, status, msg.message);
    pthread_mutex_unlock(&r->mpi->lock);
    return ORDO_OK;
}

static ordo_status_t op_failure(signal_remote_t *remote, char *message) {
    mpi_remote_t *r = remote_of(remote);
    snprintf(message, ORDO_SIGNAL_MESSAGE_MAX, "%s", r->message);
    return r->failure;
}

static uint32_t op_sleep_token(signal_remote_t *remote) {
    return atomic_load_explicit(&remote_of(remote)->seq, memory_order_seq_cst);
}

static void op_sleep(signal_remote_t *remote, uint32_t token, uint64_t value,
                     ordo_deadline_t deadline) {
    mpi_remote_t *r = remote_of(remote);
    /* Looks for updates itself first. It takes UPDATE messages only, and
     * applies them to the kept truths only (no callback runs here: the
     * progress thread brings the mirrors up). */
    uint64_t until = ordo_time_now_ns() + HELP_NS;
    if (deadline < until) {
        until = deadline;
    }
    for (;;) {
        uint64_t state = op_state(remote);
        if ((state & ORDO__SIGNAL_FAILED_BIT) || (state & ORDO_SIGNAL_VALUE_MAX) >= value ||
            atomic_load_explicit(&r->seq, memory_order_acquire) != token) {
            ordo__parker_unpark(&r->mpi->parker, ORDO_PARK_ANY, 1); /* the mirrors */
            return;
        }
        if (ordo_time_now_ns() >= until) {
            break;
        }
        (void)receive(r->mpi, UPDATE_TAG, true);
    }
    ordo__parker_unpark(&r->mpi->parker, ORDO_PARK_ANY, 1); /* the progress thread polls */
    ordo__futex_wait(&r->seq, token, deadline);
}

static void op_interrupt(signal_remote_t *remote) {
    mpi_remote_t *r = remote_of(remote);
    atomic_fetch_add_explicit(&r->seq, 1, memory_order_seq_cst);
    ordo__futex_wake(&r->seq, INT_MAX);
}

static void op_wanted(signal_remote_t *remote) {
    ordo__parker_unpark(&remote_of(remote)->mpi->parker, ORDO_PARK_ANY, 1);
}

static void op_close(signal_remote_t *remote) {
    mpi_remote_t *r = remote_of(remote);
    ordo_mpi_t *mpi = r->mpi;
    pthread_mutex_lock(&mpi->lock);
    if (r->prev) {
        r->prev->next = r->next;
    } else {
        mpi->remotes = r->next;
    }
    if (r->next) {
        r->next->prev = r->prev;
    }
    pthread_mutex_unlock(&mpi->lock);
    ordo__dealloc(r, sizeof *r, 0);
}

static const signal_remote_ops_t remote_ops = {
    .state = op_state,
    .advance = op_advance,
    .fail = op_fail,
    .failure = op_failure,
    .sleep_token = op_sleep_token,
    .sleep = op_sleep,
    .interrupt = op_interrupt,
    .wanted = op_wanted,
    .close = op_close,
};

/* ---- the public calls ---------------------------------------------------- */

static bool publish_news(ordo_mpi_t *mpi, mpi_published_t *p);

/* The publication's timepoint: the signal moved. Sends the news from here
 * (the advancing thread: a small eager send) unless the progress thread is
 * sending it already; the last touch counts the callback out. */
static void published_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status;
    (void)timepoint;
    mpi_published_t *p = ctx;
    if (!atomic_load_explicit(&p->closing, memory_order_acquire)) {
        if (pthread_mutex_trylock(&p->lock) == 0) {
            (void)publish_news(p->mpi, p);
            pthread_mutex_unlock(&p->lock);
        } else {
            ordo__parker_unpark(&p->mpi->parker, ORDO_PARK_ANY, 1);
        }
    }
    atomic_fetch_add_explicit(&p->fired, 1, memory_order_release);
}

ordo_status_t ordo_mpi_signal_publish(ordo_mpi_t *mpi, ordo_signal_t *signal, uint32_t id) {
    ORDO_RETURN_IF_ERROR(ordo__mpi_check(mpi, __func__));
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, __func__));
    mpi_published_t *p = ordo__alloc(sizeof *p, 0);
    uint8_t *subscribers = ordo__alloc((size_t)mpi->size * sizeof *subscribers, 0);
    if (!p || !subscribers) {
        if (p) {
            ordo__dealloc(p, sizeof *p, 0);
        }
        if (subscribers) {
            ordo__dealloc(subscribers, (size_t)mpi->size * sizeof *subscribers, 0);
        }
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a publication");
    }
    p->mpi = mpi;
    p->id = id;
    p->signal = signal;
    p->subscribers = subscribers;
    pthread_mutex_init(&p->lock, NULL);
    pthread_mutex_lock(&mpi->lock);
    for (mpi_published_t *q = mpi->published; q; q = q->next) {
        if (q->id == id) {
            pthread_mutex_unlock(&mpi->lock);
            ordo__dealloc(subscribers, (size_t)mpi->size * sizeof *subscribers, 0);
            ordo__dealloc(p, sizeof *p, 0);
            return ordo__error(ORDO_ERR_BUSY, __func__, "id %u is published already", id);
        }
    }
    ordo__signal_retain_internal(signal);
    p->next = mpi->published;
    mpi->published = p;
    for (mpi_pending_t **link = &mpi->pending; *link;) {
        mpi_pending_t *q = *link;
        if (q->id != id) {
            link = &q->next;
            continue;
        }
        p->subscribers[q->rank] = SUBSCRIBER_NEW;
        *link = q->next;
        ordo__dealloc(q, sizeof *q, 0);
    }
    pthread_mutex_unlock(&mpi->lock);
    ordo__parker_unpark(&mpi->parker, ORDO_PARK_ANY, 1);
    return ORDO_OK;
}

ordo_status_t ordo_mpi_signal_open(ordo_mpi_t *mpi, int owner, uint32_t id,
                                   ordo_signal_t **out_signal) {
    if (!out_signal) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_signal is NULL");
    }
    *out_signal = NULL;
    ORDO_RETURN_IF_ERROR(ordo__mpi_check(mpi, __func__));
    if (owner < 0 || owner >= mpi->size) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__, "owner %d is not a rank of the %d",
                           owner, mpi->size);
    }
    mpi_remote_t *r = ordo__alloc(sizeof *r, 0);
    if (!r) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a remote signal");
    }
    r->remote.ops = &remote_ops;
    r->mpi = mpi;
    r->owner = owner;
    r->id = id;
    ordo_signal_t *signal;
    ordo_status_t st = ordo__signal_create_remote(&r->remote, &signal, __func__);
    if (st != ORDO_OK) {
        ordo__dealloc(r, sizeof *r, 0);
        return st;
    }
    pthread_mutex_lock(&mpi->lock);
    r->prev = NULL;
    r->next = mpi->remotes;
    if (mpi->remotes) {
        mpi->remotes->prev = r;
    }
    mpi->remotes = r;
    pthread_mutex_unlock(&mpi->lock);
    control_msg_t msg = {.kind = MSG_SUBSCRIBE, .id = id};
    control_send(mpi, owner, &msg);
    ordo__parker_unpark(&mpi->parker, ORDO_PARK_ANY, 1);
    *out_signal = signal;
    return ORDO_OK;
}

/* ---- the progress thread's part ------------------------------------------ */

bool ordo__mpi_signals_live(ordo_mpi_t *mpi) {
    return mpi->published || mpi->remotes;
}

static mpi_published_t *published_find(ordo_mpi_t *mpi, uint32_t id) {
    for (mpi_published_t *p = mpi->published; p; p = p->next) {
        if (p->id == id) {
            return p;
        }
    }
    return NULL;
}

static void on_subscribe(ordo_mpi_t *mpi, const control_msg_t *msg, int source) {
    pthread_mutex_lock(&mpi->lock);
    mpi_published_t *p = published_find(mpi, msg->id);
    if (p) {
        p->subscribers[source] = SUBSCRIBER_NEW;
    } else {
        mpi_pending_t *q = ordo__alloc(sizeof *q, 0);
        if (q) { /* without memory the subscriber waits on: its deadline tells */
            q->rank = source;
            q->id = msg->id;
            q->next = mpi->pending;
            mpi->pending = q;
        }
    }
    pthread_mutex_unlock(&mpi->lock);
}

static void on_update(ordo_mpi_t *mpi, const control_msg_t *msg, int source) {
    ordo_status_t failure = (ordo_status_t)msg->status;
    if (failure != ORDO_OK && !ordo_status_is_error(failure)) {
        failure = ORDO_ERR_CORRUPTED; /* not a status this library knows */
    }
    pthread_mutex_lock(&mpi->lock);
    for (mpi_remote_t *r = mpi->remotes; r; r = r->next) {
        if (r->owner != source || r->id != msg->id) {
            continue;
        }
        remote_apply(r, msg->value & ORDO_SIGNAL_VALUE_MAX, ORDO_OK, NULL);
        if (failure != ORDO_OK) {
            remote_apply(r, 0, failure, msg->message);
        }
    }
    pthread_mutex_unlock(&mpi->lock);
}

/* The progress thread's: brings every observed handle's mirror up to its
 * kept truth (its timepoints, streams and links fire here). */
static bool mirrors_pull(ordo_mpi_t *mpi) {
    enum { BATCH = 32 };
    ordo_signal_t *behind[BATCH];
    size_t n = 0;
    pthread_mutex_lock(&mpi->lock);
    for (mpi_remote_t *r = mpi->remotes; r && n < BATCH; r = r->next) {
        uint64_t truth = atomic_load_explicit(&r->state, memory_order_acquire);
        signal_view_t mirror = ordo__signal_view(r->remote.signal);
        bool ahead = (truth & ORDO_SIGNAL_VALUE_MAX) > mirror.value ||
                     ((truth & ORDO__SIGNAL_FAILED_BIT) && !mirror.ended);
        if (ahead && ordo__signal_try_retain(r->remote.signal)) {
            behind[n++] = r->remote.signal;
        }
    }
    pthread_mutex_unlock(&mpi->lock);
    for (size_t i = 0; i < n; ++i) {
        ordo__signal_mirror_pull(behind[i]);
        ordo__signal_release_internal(behind[i]);
    }
    return n > 0;
}

static void on_raise(ordo_mpi_t *mpi, const control_msg_t *msg) {
    pthread_mutex_lock(&mpi->lock);
    mpi_published_t *p = published_find(mpi, msg->id);
    ordo_signal_t *signal = p ? p->signal : NULL;
    if (signal) {
        ordo__signal_retain_internal(signal);
    }
    pthread_mutex_unlock(&mpi->lock);
    if (!signal) {
        return;
    }
    if (msg->kind == MSG_ADVANCE) {
        (void)ordo_signal_advance(signal, msg->value & ORDO_SIGNAL_VALUE_MAX);
    } else {
        ordo_status_t status = (ordo_status_t)msg->status;
        (void)ordo_signal_fail(signal, ordo_status_is_error(status) ? status : ORDO_ERR_CORRUPTED,
                               msg->message);
    }
    ordo__signal_release_internal(signal);
}

/* Sends a publication's news to its subscribers, and arms its timepoint
 * for the next. True if anything was sent. */
static bool publish_news(ordo_mpi_t *mpi, mpi_published_t *p) {
    uint64_t value = 0;
    ordo_status_t status = ordo_signal_query(p->signal, &value);
    control_msg_t msg = {.kind = MSG_UPDATE, .id = p->id, .value = value};
    bool ended = status != ORDO_OK;
    if (ended) {
        ordo_status_t failure = ORDO_OK;
        (void)ordo_signal_failure(p->signal, &failure, msg.message, sizeof msg.message);
        if (failure == ORDO_OK) { /* destroyed, not failed */
            failure = ORDO_ERR_CANCELLED;
            snprintf(msg.message, sizeof msg.message,
                     "the published signal was destroyed on rank %d", mpi->rank);
        }
        msg.status = (int32_t)failure;
    }
    bool news = value > p->sent_value || (ended && !p->sent_ended);
    bool sent = false;
    for (int rank = 0; rank < mpi->size; ++rank) {
        pthread_mutex_lock(&mpi->lock);
        uint8_t subscriber = p->subscribers[rank];
        if (subscriber == SUBSCRIBER_NEW) {
            p->subscribers[rank] = SUBSCRIBER_CURRENT;
        }
        pthread_mutex_unlock(&mpi->lock);
        if (subscriber == SUBSCRIBER_NEW || (subscriber == SUBSCRIBER_CURRENT && news)) {
            control_send(mpi, rank, &msg);
            sent = true;
        }
    }
    p->sent_value = value;
    p->sent_ended = ended;
    /* One arming at a time: the previous one's callback has been counted
     * out (or is this very call, which counts itself out after). */
    uint64_t arms = atomic_load_explicit(&p->arms, memory_order_relaxed);
    uint64_t fired = atomic_load_explicit(&p->fired, memory_order_acquire);
    uint16_t state = __atomic_load_n(&p->timepoint.state_, __ATOMIC_ACQUIRE);
    bool idle = arms == fired || (arms == fired + 1 && state == 3 /* fired: this callback */);
    if (!ended && idle && !atomic_load_explicit(&p->closing, memory_order_acquire)) {
        atomic_fetch_add_explicit(&p->arms, 1, memory_order_relaxed);
        memset(&p->timepoint, 0, sizeof p->timepoint);
        if (ordo_timepoint_arm(&p->timepoint, p->signal, value + 1, published_fired, p) !=
            ORDO_OK) {
            atomic_fetch_add_explicit(&p->fired, 1, memory_order_release);
        }
    }
    return sent;
}

static bool receive(ordo_mpi_t *mpi, int tag, bool updates_only) {
    bool moved = false;
    for (;;) {
        int flag = 0;
        MPI_Message message;
        MPI_Status status;
        if (MPI_Improbe(MPI_ANY_SOURCE, tag, mpi->control, &flag, &message, &status) !=
                MPI_SUCCESS ||
            !flag) {
            return moved;
        }
        control_msg_t msg;
        memset(&msg, 0, sizeof msg);
        if (MPI_Mrecv(&msg, (int)sizeof msg, MPI_BYTE, &message, &status) != MPI_SUCCESS) {
            continue;
        }
        msg.message[sizeof msg.message - 1] = '\0';
        int source = status.MPI_SOURCE;
        if (source < 0 || source >= mpi->size || (updates_only && msg.kind != MSG_UPDATE)) {
            continue;
        }
        switch (msg.kind) {
        case MSG_SUBSCRIBE:
            on_subscribe(mpi, &msg, source);
            break;
        case MSG_UPDATE:
            on_update(mpi, &msg, source);
            break;
        case MSG_ADVANCE:
        case MSG_FAIL:
            on_raise(mpi, &msg);
            break;
        default:
            break;
        }
        moved = true;
    }
}

bool ordo__mpi_signals_progress(ordo_mpi_t *mpi) {
    bool moved = receive(mpi, CONTROL_TAG, false);
    moved |= receive(mpi, UPDATE_TAG, false);
    moved |= mirrors_pull(mpi);
    pthread_mutex_lock(&mpi->lock);
    mpi_published_t *list = mpi->published; /* freed only after the progress thread stops */
    pthread_mutex_unlock(&mpi->lock);
    for (mpi_published_t *p = list; p; p = p->next) {
        pthread_mutex_lock(&p->lock);
        moved |= publish_news(mpi, p);
        pthread_mutex_unlock(&p->lock);
    }
    return moved;
}

void ordo__mpi_signals_free(ordo_mpi_t *mpi) {
    while (mpi->published) {
        mpi_published_t *p = mpi->published;
        mpi->published = p->next;
        /* No arming from here on; then every arming is counted out: its
         * callback returned, or its cancel prevented it. */
        atomic_store_explicit(&p->closing, true, memory_order_release);
        pthread_mutex_lock(&p->lock); /* a callback's publish_news is over */
        pthread_mutex_unlock(&p->lock);
        while (atomic_load_explicit(&p->fired, memory_order_acquire) !=
               atomic_load_explicit(&p->arms, memory_order_acquire)) {
            ordo_cancel_result_t result;
            if (__atomic_load_n(&p->timepoint.state_, __ATOMIC_ACQUIRE) == 1 /* armed */ &&
                ordo_timepoint_cancel(&p->timepoint, &result) == ORDO_OK &&
                result == ORDO_CANCEL_PREVENTED) {
                atomic_fetch_add_explicit(&p->fired, 1, memory_order_release);
                continue;
            }
            sched_yield(); /* due or running elsewhere: it counts itself out */
        }
        pthread_mutex_destroy(&p->lock);
        ordo__signal_release_internal(p->signal);
        ordo__dealloc(p->subscribers, (size_t)mpi->size * sizeof *p->subscribers, 0);
        ordo__dealloc(p, sizeof *p, 0);
    }
    while (mpi->pending) {
        mpi_pending_t *q = mpi->pending;
        mpi->pending = q->next;
        ordo__dealloc(q, sizeof *q, 0);
    }
}
