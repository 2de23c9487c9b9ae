/* Signals observed across ranks (ordo_mpi_signal_publish, _open).
 *
 * Messages on the ordo_mpi_t's control communicator (mpi_internal.h), one
 * record each (MPI_BYTE; the message text only with a failure):
 *   SUBSCRIBE id        a rank observes the receiver's publication id
 *   UPDATE id state     the owner's publication reached value (or failed,
 *                       with status and message)
 *   ADVANCE id value    raise the receiver's publication id
 *   FAIL id status msg  fail it (both kept until the publish when the
 *                       receiver has not published id yet)
 * UPDATEs, the latency-bound kind, land in a standing receive (posted
 * again once taken) that a thread waiting on an observed signal tests
 * itself, as MPI_Recv would, and the progress thread otherwise; the others
 * are taken by the progress thread with MPI_Improbe/MPI_Mrecv. An owner
 * sends UPDATEs from the thread that moved the publication (a timepoint at
 * the next value), or the progress thread; no send blocks its thread
 * (mpi_outbox.c). Values only grow at the owner,
 * and an UPDATE raises an observer's state to max(state, value), so
 * observers stay monotonic whatever the messages' order.
 */
#include <limits.h>
#include <stddef.h>
#include <sched.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/futex.h"
#include "mpi/mpi_internal.h"
#include "sync/signal_access.h"

/* How long a thread waiting on an observed signal receives its updates
 * itself before it sleeps. MPI delivers a message only to a thread that
 * asks (MPI_Recv polls for as long as it waits), so a sleeper hears of an
 * update when the progress thread next polls: up to LISTEN_MAX_NS later
 * (mpi_progress.c), and a futex wake-up after that. A millisecond covers
 * a round trip through another rank that is busy for a while; a longer
 * wait then costs no CPU. */
#define HELP_NS 1000000u
/* Looks between two reads of the clock while helping (a look is an
 * MPI_Test: about a hundred nanoseconds). */
#define HELP_CLOCK_LOOKS 16u

/* Receives and applies the updates waiting (see below). */
static bool receive_updates(ordo_mpi_t *mpi, bool one_only);

/* ---- observers' handles: the remote ops ---------------------------------- */

static mpi_remote_t *remote_of(signal_remote_t *remote) {
    return (mpi_remote_t *)remote;
}

static uint64_t op_state(signal_remote_t *remote) {
    return atomic_load_explicit(&remote_of(remote)->state, memory_order_acquire);
}

/* Moves the sleep token and wakes the threads asleep on it. The system
 * call only when one sleeps: a sleeper counts itself in `sleepers`, then
 * checks the token, then sleeps; a waker moves the token, then reads
 * `sleepers`. Both pairs are seq_cst, so either the waker sees the count or
 * the sleeper sees the moved token (and the futex refuses to sleep). */
static void wake_sleepers(mpi_remote_t *r) {
    atomic_fetch_add_explicit(&r->seq, 1, memory_order_seq_cst);
    if (atomic_load_explicit(&r->sleepers, memory_order_seq_cst) != 0) {
        ordo__futex_wake(&r->seq, INT_MAX);
    }
}

/* Raises or fails the kept truth and wakes its sleepers; true if a
 * timepoint armed on the handle's mirror (a stream's wait, a link, a
 * callback) may be due now: then the progress thread must pull the mirror
 * (a thread that applies an update while it waits runs no callbacks). */
static bool remote_apply(mpi_remote_t *r, uint64_t value, ordo_status_t failure,
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
        /* Failed is final: the value no longer moves either. */
        uint64_t state = atomic_load_explicit(&r->state, memory_order_relaxed);
        while (!(state & ORDO__SIGNAL_FAILED_BIT) && (state & ORDO_SIGNAL_VALUE_MAX) < value &&
               !atomic_compare_exchange_weak_explicit(&r->state, &state,
                                                      (state & ORDO__SIGNAL_FAILED_BIT) | value,
                                                      memory_order_release, memory_order_relaxed)) {
        }
    }
    wake_sleepers(r);
    /* A timepoint armed after this look calls `wanted`, which wakes the
     * progress thread: the mirror is pulled either way. */
    uint64_t truth = atomic_load_explicit(&r->state, memory_order_acquire);
    uint64_t wanted;
    return ordo__signal_wanted_value(r->remote.signal, &wanted) &&
           ((truth & ORDO__SIGNAL_FAILED_BIT) || (truth & ORDO_SIGNAL_VALUE_MAX) >= wanted);
}

void ordo__mpi_remote_abandon(mpi_remote_t *r, const char *message) {
    (void)remote_apply(r, 0, ORDO_ERR_ABANDONED, message);
}

/* The failure of a handle of owner's signal id once MPI was finalized. */
static void finalized_fail(ordo_mpi_t *mpi, mpi_remote_t *r) {
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    snprintf(message, sizeof message,
             "MPI was finalized on rank %d: this handle of rank %d's signal %u hears nothing "
             "more",
             mpi->rank, r->owner, r->id);
    (void)remote_apply(r, 0, ORDO_ERR_UNAVAILABLE, message);
}

static ordo_status_t op_advance(signal_remote_t *remote, uint64_t value, const char *api) {
    mpi_remote_t *r = remote_of(remote);
    uint64_t state = op_state(remote);
    if (state & ORDO__SIGNAL_FAILED_BIT) {
        return ordo__error(r->failure, api, "signal failed at %llu: %s",
                           (unsigned long long)(state & ORDO_SIGNAL_VALUE_MAX), r->message);
    }
    control_msg_t msg = {.kind = MSG_ADVANCE, .id = r->id, .value = value};
    ordo__mpi_control_send(r->mpi, r->owner, &msg);
    /* Taken here at once: the owner takes the same maximum when the message
     * arrives (unless it failed first: its failure then reaches us). */
    pthread_mutex_lock(&r->mpi->lock);
    (void)remote_apply(r, value, ORDO_OK, NULL);
    pthread_mutex_unlock(&r->mpi->lock);
    ordo__mpi_listen_soon(r->mpi); /* the mirror follows */
    return ORDO_OK;
}

static ordo_status_t op_fail(signal_remote_t *remote, ordo_status_t status, const char *message,
                             const char *api) {
    (void)api;
    mpi_remote_t *r = remote_of(remote);
    control_msg_t msg = {.kind = MSG_FAIL, .id = r->id, .status = (int32_t)status};
    snprintf(msg.message, sizeof msg.message, "%s", message ? message : "");
    ordo__mpi_control_send(r->mpi, r->owner, &msg);
    pthread_mutex_lock(&r->mpi->lock);
    (void)remote_apply(r, 0, status, msg.message);
    pthread_mutex_unlock(&r->mpi->lock);
    ordo__mpi_listen_soon(r->mpi);
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

/* Whether a sleep for value with token is over: the kept truth reached
 * value or failed, or the token moved (an update or an interrupt). */
static bool sleep_over(mpi_remote_t *r, uint32_t token, uint64_t value) {
    uint64_t state = atomic_load_explicit(&r->state, memory_order_acquire);
    return (state & ORDO__SIGNAL_FAILED_BIT) || (state & ORDO_SIGNAL_VALUE_MAX) >= value ||
           atomic_load_explicit(&r->seq, memory_order_acquire) != token;
}

static void op_sleep(signal_remote_t *remote, uint32_t token, uint64_t value,
                     ordo_deadline_t deadline) {
    mpi_remote_t *r = remote_of(remote);
    ordo_mpi_t *mpi = r->mpi;
    /* Receives updates itself first (UPDATE messages only, applied to the
     * kept truths only: no callback runs here), as MPI_Recv would. Meanwhile
     * the progress thread listens at its slowest pace: two threads polling
     * one rank's messages would share the cores the peers need. */
    uint64_t until = ordo_time_now_ns() + HELP_NS;
    if (deadline < until) {
        until = deadline;
    }
    atomic_fetch_add_explicit(&mpi->helpers, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->thread_waiters, 1, memory_order_relaxed);
    atomic_store_explicit(&r->thread_value, value, memory_order_relaxed);
    bool pull = false;
    for (unsigned looks = 1; !sleep_over(r, token, value); ++looks) {
        if (looks % HELP_CLOCK_LOOKS == 0 && ordo_time_now_ns() >= until) {
            break;
        }
        pull |= receive_updates(mpi, true);
    }
    atomic_fetch_sub_explicit(&mpi->helpers, 1, memory_order_relaxed);
    bool done = sleep_over(r, token, value);
    if (pull || !done) {
        /* Mirrors to pull, or this thread sleeps: the progress thread
         * listens from its quickest pace. */
        ordo__mpi_listen_soon(mpi);
    }
    if (!done) {
        atomic_fetch_add_explicit(&r->sleepers, 1, memory_order_seq_cst);
        ordo__futex_wait(&r->seq, token, deadline);
        atomic_fetch_sub_explicit(&r->sleepers, 1, memory_order_relaxed);
    }
    atomic_fetch_sub_explicit(&r->thread_waiters, 1, memory_order_relaxed);
}

static void op_interrupt(signal_remote_t *remote) {
    wake_sleepers(remote_of(remote));
}

/* A release, under the mpi lock, where the progress thread's pins are
 * taken and dropped too (sync/signal_remote.h): the program's last ends
 * the handle on the program's thread, whatever pull is under way. */
static signal_release_t op_release(signal_remote_t *remote) {
    mpi_remote_t *r = remote_of(remote);
    pthread_mutex_lock(&r->mpi->lock);
    signal_release_t release =
        ordo__signal_release_pinned(r->remote.signal, r->pins, &r->program_done);
    pthread_mutex_unlock(&r->mpi->lock);
    return release;
}

static void op_wanted(signal_remote_t *remote) {
    ordo__mpi_listen_soon(remote_of(remote)->mpi);
}

static void op_close(signal_remote_t *remote) {
    mpi_remote_t *r = remote_of(remote);
    ordo_mpi_t *mpi = r->mpi;
    /* The UNSUBSCRIBE goes under subscribe_lock, with the list's change:
     * an open's SUBSCRIBE cannot pass it, and ordo_mpi_destroy (which
     * takes the lock to look at the list) cannot free mpi under it. */
    pthread_mutex_lock(&mpi->subscribe_lock);
    pthread_mutex_lock(&mpi->lock);
    if (r->prev) {
        r->prev->next = r->next;
    } else {
        mpi->remotes = r->next;
    }
    if (r->next) {
        r->next->prev = r->prev;
    }
    bool last = !ordo__mpi_rank_dead(mpi, r->owner);
    for (mpi_remote_t *q = mpi->remotes; q && last; q = q->next) {
        last = q->owner != r->owner || q->id != r->id;
    }
    pthread_mutex_unlock(&mpi->lock);
    if (last) { /* the owner sends this rank nothing more of it */
        control_msg_t msg = {.kind = MSG_UNSUBSCRIBE, .id = r->id};
        ordo__mpi_control_send(mpi, r->owner, &msg);
    }
    pthread_mutex_unlock(&mpi->subscribe_lock);
    ordo__dealloc(r, sizeof *r, 0);
}

static const signal_remote_ops_t remote_ops = {
    .state = op_state,
    .advance = op_advance,
    .fail = op_fail,
    .failure = op_failure,
    .sleep_token = op_sleep_token,
    .sleep = op_sleep,
    .sleep_looks = true,
    .interrupt = op_interrupt,
    .wanted = op_wanted,
    .release = op_release,
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
            ordo__mpi_listen_soon(p->mpi);
        }
    }
    atomic_fetch_add_explicit(&p->fired, 1, memory_order_release);
}

/* Raises signal to value, then fails it with failure (unless ORDO_OK), as
 * another rank asked. A refusal (the signal ended here first) is no error
 * of the calling thread's: its message is left alone. */
static void raise_apply(ordo_signal_t *signal, uint64_t value, ordo_status_t failure,
                        const char *message) {
    ordo__kept_message_t kept;
    ordo__message_keep(&kept);
    if (value > 0) {
        (void)ordo_signal_advance(signal, value);
    }
    if (failure != ORDO_OK) {
        (void)ordo_signal_fail(signal, failure, message);
    }
    ordo__message_restore(&kept);
}

/* Unlinks the early raises of id, under lock; NULL if none came. */
static mpi_early_raise_t *early_take(ordo_mpi_t *mpi, uint32_t id) {
    for (mpi_early_raise_t **link = &mpi->early; *link; link = &(*link)->next) {
        mpi_early_raise_t *e = *link;
        if (e->id == id) {
            *link = e->next;
            return e;
        }
    }
    return NULL;
}

/* Keeps a raise of an id not published yet, under lock. */
static void early_keep(ordo_mpi_t *mpi, uint32_t id, uint64_t value, ordo_status_t failure,
                       const char *message) {
    mpi_early_raise_t *e = mpi->early;
    while (e && e->id != id) {
        e = e->next;
    }
    if (!e) {
        e = ordo__alloc(sizeof *e, 0);
        if (!e) {
            return; /* without memory it is lost, as a message to a dead rank would be */
        }
        e->id = id;
        e->next = mpi->early;
        mpi->early = e;
    }
    if (value > e->value) {
        e->value = value;
    }
    if (failure != ORDO_OK && e->failure == ORDO_OK) { /* the first failure wins */
        e->failure = failure;
        snprintf(e->message, sizeof e->message, "%s", message);
    }
}

ordo_status_t ordo_mpi_signal_publish(ordo_mpi_t *mpi, ordo_signal_t *signal, uint32_t id) {
    ORDO_RETURN_IF_ERROR(ordo__mpi_check(mpi, __func__));
    ORDO_RETURN_IF_ERROR(ordo__signal_check(signal, __func__));
    signal_remote_t *remote = ordo__signal_remote(signal);
    if (remote && remote->ops == &remote_ops) {
        /* The publication's reference would count as the program's: the
         * handle's ordo_mpi_t could never be destroyed. */
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "signal is a handle of rank %d's signal %u (from "
                           "ordo_mpi_signal_open): only a signal of this rank, local or shared, "
                           "can be published",
                           remote_of(remote)->owner, remote_of(remote)->id);
    }
    if (atomic_load_explicit(&mpi->finalized, memory_order_acquire)) {
        return ordo__error(ORDO_ERR_UNAVAILABLE, __func__,
                           "MPI was finalized: no rank can observe signal id %u (destroy the "
                           "ordo_mpi_t)",
                           id);
    }
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
    ordo__mpi_pending_take(mpi, -1, id, p->subscribers);
    mpi_early_raise_t *early = early_take(mpi, id);
    pthread_mutex_unlock(&mpi->lock);
    if (early) {
        /* Outside the lock: callbacks on the signal may run here. An
         * ADVANCE or FAIL received from now on is applied directly. */
        raise_apply(signal, early->value, early->failure, early->message);
        ordo__dealloc(early, sizeof *early, 0);
    }
    ordo__mpi_listen_soon(mpi);
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
    pthread_mutex_lock(&mpi->subscribe_lock); /* see op_close */
    pthread_mutex_lock(&mpi->lock);
    r->prev = NULL;
    r->next = mpi->remotes;
    if (mpi->remotes) {
        mpi->remotes->prev = r;
    }
    mpi->remotes = r;
    /* After MPI_Finalize (the progress thread stopped), the handle fails at
     * once, and its mirror is brought up here, as nothing else would. */
    bool finalized = atomic_load_explicit(&mpi->finalized, memory_order_acquire);
    bool dead = finalized || ordo__mpi_rank_dead(mpi, owner);
    if (finalized) {
        finalized_fail(mpi, r);
    } else if (dead) {
        char message[ORDO_SIGNAL_MESSAGE_MAX];
        snprintf(message, sizeof message, "rank %d is gone: it was found dead before", owner);
        ordo__mpi_remote_abandon(r, message);
    } else {
        ordo__mpi_heard(mpi, owner); /* its silence counts from here on */
    }
    pthread_mutex_unlock(&mpi->lock);
    if (!dead) {
        control_msg_t msg = {.kind = MSG_SUBSCRIBE, .id = id};
        ordo__mpi_control_send(mpi, owner, &msg);
    }
    pthread_mutex_unlock(&mpi->subscribe_lock);
    if (finalized) {
        ordo__signal_mirror_pull(signal);
    } else {
        ordo__mpi_listen_soon(mpi);
    }
    *out_signal = signal;
    return ORDO_OK;
}

/* ---- the progress thread's part ------------------------------------------ */

void ordo__mpi_pending_take(ordo_mpi_t *mpi, int rank, int64_t id, uint8_t *subscribers) {
    for (mpi_pending_t **link = &mpi->pending; *link;) {
        mpi_pending_t *q = *link;
        if ((rank >= 0 && q->rank != rank) || (id >= 0 && q->id != (uint64_t)id)) {
            link = &q->next;
            continue;
        }
        if (subscribers) {
            subscribers[q->rank] = SUBSCRIBER_NEW;
        }
        *link = q->next;
        ordo__dealloc(q, sizeof *q, 0);
    }
}

bool ordo__mpi_take(ordo_mpi_t *mpi, int tag, void *buffer, int size, int *out_source) {
    int flag = 0;
    MPI_Message message;
    MPI_Status status;
    if (atomic_load_explicit(&mpi->finalized, memory_order_acquire) ||
        MPI_Improbe(MPI_ANY_SOURCE, tag, mpi->control, &flag, &message, &status) != MPI_SUCCESS ||
        !flag) {
        return false;
    }
    memset(buffer, 0, (size_t)size);
    *out_source = MPI_Mrecv(buffer, size, MPI_BYTE, &message, &status) == MPI_SUCCESS
                      ? status.MPI_SOURCE
                      : -1;
    return true;
}

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

static void on_unsubscribe(ordo_mpi_t *mpi, const control_msg_t *msg, int source) {
    pthread_mutex_lock(&mpi->lock);
    mpi_published_t *p = published_find(mpi, msg->id);
    if (p) {
        p->subscribers[source] = SUBSCRIBER_NONE;
    }
    ordo__mpi_pending_take(mpi, source, msg->id, NULL);
    pthread_mutex_unlock(&mpi->lock);
}

/* Applies an update; true if a mirror is due (remote_apply). */
static bool on_update(ordo_mpi_t *mpi, const control_msg_t *msg, int source) {
    ordo_status_t failure = (ordo_status_t)msg->status;
    if (failure != ORDO_OK && !ordo_status_is_error(failure)) {
        failure = ORDO_ERR_CORRUPTED; /* not a status this library knows */
    }
    bool due = false;
    pthread_mutex_lock(&mpi->lock);
    for (mpi_remote_t *r = mpi->remotes; r; r = r->next) {
        if (r->owner != source || r->id != msg->id) {
            continue;
        }
        due |= remote_apply(r, msg->value & ORDO_SIGNAL_VALUE_MAX, ORDO_OK, NULL);
        if (failure != ORDO_OK) {
            due |= remote_apply(r, 0, failure, msg->message);
        }
    }
    pthread_mutex_unlock(&mpi->lock);
    return due;
}

/* The progress thread's: brings every observed handle's mirror up to its
 * kept truth (its timepoints, streams and links fire here). */
static bool mirrors_pull(ordo_mpi_t *mpi) {
    enum { BATCH = 32 };
    mpi_remote_t *behind[BATCH];
    size_t n = 0;
    pthread_mutex_lock(&mpi->lock);
    for (mpi_remote_t *r = mpi->remotes; r && n < BATCH; r = r->next) {
        uint64_t truth = atomic_load_explicit(&r->state, memory_order_acquire);
        signal_view_t mirror = ordo__signal_view(r->remote.signal);
        /* An ended mirror (failed, or its handle destroyed) is left alone
         * by the pull: never counted as behind, or this thread would spin. */
        bool ahead = !mirror.ended && ((truth & ORDO_SIGNAL_VALUE_MAX) > mirror.value ||
                                       (truth & ORDO__SIGNAL_FAILED_BIT));
        if (ahead && !r->program_done && ordo__signal_try_retain(r->remote.signal)) {
            ++r->pins;
            behind[n++] = r;
        }
    }
    pthread_mutex_unlock(&mpi->lock);
    for (size_t i = 0; i < n; ++i) {
        ordo__signal_mirror_pull(behind[i]->remote.signal);
    }
    /* The pins go under the lock, so ordo_mpi_destroy never counts one as
     * the program's; a last reference (the program let go meanwhile) is
     * dropped after, outside it: it closes the handle, which takes it. */
    size_t last = 0;
    pthread_mutex_lock(&mpi->lock);
    for (size_t i = 0; i < n; ++i) {
        --behind[i]->pins;
        if (!ordo__signal_release_unless_last(behind[i]->remote.signal)) {
            behind[last++] = behind[i];
        }
    }
    pthread_mutex_unlock(&mpi->lock);
    for (size_t i = 0; i < last; ++i) {
        ordo__signal_release_internal(behind[i]->remote.signal);
    }
    return n > 0;
}

void ordo__mpi_signals_finalized(ordo_mpi_t *mpi) {
    pthread_mutex_lock(&mpi->lock);
    for (mpi_remote_t *r = mpi->remotes; r; r = r->next) {
        if (!r->program_done) {
            finalized_fail(mpi, r);
        }
    }
    pthread_mutex_unlock(&mpi->lock);
    /* A failed mirror is no longer behind: this ends. */
    while (mirrors_pull(mpi)) {
    }
}

static void on_raise(ordo_mpi_t *mpi, const control_msg_t *msg) {
    uint64_t value = 0;
    ordo_status_t failure = ORDO_OK;
    if (msg->kind == MSG_ADVANCE) {
        value = msg->value & ORDO_SIGNAL_VALUE_MAX;
    } else {
        ordo_status_t status = (ordo_status_t)msg->status;
        failure = ordo_status_is_error(status) ? status : ORDO_ERR_CORRUPTED;
    }
    pthread_mutex_lock(&mpi->lock);
    mpi_published_t *p = published_find(mpi, msg->id);
    ordo_signal_t *signal = p ? p->signal : NULL;
    if (signal) {
        ordo__signal_retain_internal(signal);
    } else {
        /* The sender's handle took it already: kept for the publish, under
         * the lock the publish takes its list under. */
        early_keep(mpi, msg->id, value, failure, msg->message);
    }
    pthread_mutex_unlock(&mpi->lock);
    if (!signal) {
        return;
    }
    raise_apply(signal, value, failure, msg->message);
    ordo__signal_release_internal(signal);
}

/* Sends a publication's news to its subscribers, and arms its timepoint
 * for the next. True if anything was sent. */
/* The UPDATE of a publication's state now; true if it ended (failed, or
 * destroyed: CANCELLED). */
static bool news_of(ordo_mpi_t *mpi, mpi_published_t *p, control_msg_t *msg) {
    uint64_t value = 0;
    /* Runs inline in the program's calls (the advance or failure that
     * moved the publication, ordo_mpi_destroy): a query's refusal of an
     * ended signal is no message of theirs. */
    ordo__kept_message_t kept;
    ordo__message_keep(&kept);
    ordo_status_t status = ordo_signal_query(p->signal, &value);
    msg->kind = MSG_UPDATE;
    msg->id = p->id;
    msg->value = value;
    msg->status = ORDO_OK;
    msg->epoch = 0;
    msg->message[0] = '\0'; /* the text goes only with a failure */
    if (status == ORDO_OK) {
        return false;
    }
    ordo_status_t failure = ORDO_OK;
    (void)ordo_signal_failure(p->signal, &failure, msg->message, sizeof msg->message);
    ordo__message_restore(&kept);
    if (failure == ORDO_OK) { /* destroyed, not failed */
        failure = ORDO_ERR_CANCELLED;
        snprintf(msg->message, sizeof msg->message, "the published signal was destroyed on rank %d",
                 mpi->rank);
    }
    msg->status = (int32_t)failure;
    return true;
}

static bool publish_news(ordo_mpi_t *mpi, mpi_published_t *p) {
    control_msg_t msg;
    bool ended = news_of(mpi, p, &msg);
    uint64_t value = msg.value;
    bool sent_ended = atomic_load_explicit(&p->sent_ended, memory_order_relaxed);
    bool news = value > p->sent_value || (ended && !sent_ended);
    bool sent = false;
    /* The subscribers are read under the lock a batch of ranks at a time,
     * and sent to outside it (a send may wait for MPI). */
    enum { BATCH = 64 };
    for (int first = 0; first < mpi->size; first += BATCH) {
        int to[BATCH], n = 0;
        int end = mpi->size - first < BATCH ? mpi->size : first + BATCH;
        pthread_mutex_lock(&mpi->lock);
        for (int rank = first; rank < end; ++rank) {
            uint8_t subscriber = p->subscribers[rank];
            if (subscriber == SUBSCRIBER_NEW) {
                p->subscribers[rank] = SUBSCRIBER_CURRENT;
            }
            if (subscriber == SUBSCRIBER_NEW || (subscriber == SUBSCRIBER_CURRENT && news)) {
                to[n++] = rank;
            }
        }
        pthread_mutex_unlock(&mpi->lock);
        for (int i = 0; i < n; ++i) {
            ordo__mpi_control_send(mpi, to[i], &msg);
        }
        sent |= n > 0;
    }
    p->sent_value = value;
    atomic_store_explicit(&p->sent_ended, ended, memory_order_relaxed);
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

/* Applies a received message; true if anything moved (for an update:
 * if a mirror is due, when due_only). */
static bool apply(ordo_mpi_t *mpi, control_msg_t *msg, int source, bool due_only) {
    msg->message[sizeof msg->message - 1] = '\0';
    if (source < 0 || source >= mpi->size || msg->epoch != mpi->epoch ||
        ordo__mpi_rank_dead(mpi, source)) {
        return false; /* not ours: an earlier ordo_mpi_t's, or a dead rank's */
    }
    ordo__mpi_heard(mpi, source);
    switch (msg->kind) {
    case MSG_SUBSCRIBE:
        on_subscribe(mpi, msg, source);
        return true;
    case MSG_UNSUBSCRIBE:
        on_unsubscribe(mpi, msg, source);
        return true;
    case MSG_HEARTBEAT:
        return false;
    case MSG_STALL_QUERY:
        ordo__mpi_stall_answer(mpi, source, msg->value);
        return true;
    case MSG_UPDATE:
        return on_update(mpi, msg, source) || !due_only;
    case MSG_ADVANCE:
    case MSG_FAIL:
        on_raise(mpi, msg);
        return true;
    default:
        return false;
    }
}

/* Takes the update the standing receive got, if it completed, and posts
 * it again; false if none (or another thread is taking one). */
static bool update_take(ordo_mpi_t *mpi, control_msg_t *out, int *out_source) {
    if (pthread_mutex_trylock(&mpi->update_lock) != 0) {
        return false; /* the other thread's: it applies what it takes */
    }
    bool taken = false;
    int flag = 0;
    MPI_Status status;
    /* Posted again at the next take, not right after this one: the update
     * taken is applied first (a message that comes meanwhile waits in MPI's
     * queue, and the post finds it). */
    if (mpi->update_request == MPI_REQUEST_NULL &&
        !atomic_load_explicit(&mpi->quiesced, memory_order_relaxed)) {
        (void)ordo__mpi_update_post(mpi);
    }
    if (mpi->update_request != MPI_REQUEST_NULL &&
        !atomic_load_explicit(&mpi->quiesced, memory_order_relaxed)) {
        /* Completed or failed (too long: not ours, dropped), the request
         * becomes MPI_REQUEST_NULL. */
        if (MPI_Test(&mpi->update_request, &flag, &status) == MPI_SUCCESS && flag) {
            memcpy(out, &mpi->update_buffer, sizeof *out);
            *out_source = status.MPI_SOURCE;
            taken = true;
        }
    }
    pthread_mutex_unlock(&mpi->update_lock);
    return taken;
}

ordo_status_t ordo__mpi_update_post(ordo_mpi_t *mpi) {
    int code = MPI_Irecv(&mpi->update_buffer, (int)sizeof mpi->update_buffer, MPI_BYTE,
                         MPI_ANY_SOURCE, UPDATE_TAG, mpi->control, &mpi->update_request);
    if (code != MPI_SUCCESS) {
        mpi->update_request = MPI_REQUEST_NULL;
        char text[MPI_MAX_ERROR_STRING];
        ordo__mpi_error_text(code, text);
        return ordo__error(ORDO_ERR_DEVICE, "ordo_mpi_create", "MPI_Irecv failed: %s", text);
    }
    return ORDO_OK;
}

void ordo__mpi_update_cancel(ordo_mpi_t *mpi) {
    /* Under update_lock: a thread waiting on an observed signal may be
     * testing the request (it looks at quiesced under the lock too, and
     * posts no new one after). */
    pthread_mutex_lock(&mpi->update_lock);
    if (mpi->update_request != MPI_REQUEST_NULL) {
        (void)MPI_Cancel(&mpi->update_request);
        (void)MPI_Wait(&mpi->update_request, MPI_STATUS_IGNORE);
    }
    pthread_mutex_unlock(&mpi->update_lock);
}

/* Receives and applies the updates waiting (one at most, when one_only);
 * true if any moved anything (a mirror due, when one_only: the waiting
 * thread's, which runs no callbacks). */
static bool receive_updates(ordo_mpi_t *mpi, bool one_only) {
    bool moved = false;
    control_msg_t msg;
    int source;
    while (update_take(mpi, &msg, &source)) {
        if (msg.kind == MSG_UPDATE) {
            moved |= apply(mpi, &msg, source, one_only);
        }
        if (one_only) {
            break;
        }
    }
    return moved;
}

/* Receives and applies every message of the other kinds waiting. */
static bool receive_control(ordo_mpi_t *mpi) {
    bool moved = false;
    control_msg_t msg;
    int source;
    while (ordo__mpi_take(mpi, CONTROL_TAG, &msg, (int)sizeof msg, &source)) {
        if (msg.kind != MSG_UPDATE) {
            moved |= apply(mpi, &msg, source, false); /* refuses source -1 */
        }
    }
    return moved;
}

bool ordo__mpi_signals_progress(ordo_mpi_t *mpi) {
    bool moved = receive_control(mpi);
    moved |= receive_updates(mpi, false);
    moved |= ordo__mpi_liveness_progress(mpi);
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

/* The publication ends with its ordo_mpi_t: its subscribers hear its
 * state now, and, unless it ended, a failure (ORDO_ERR_CANCELLED) rather
 * than silence (which they would take for a dead rank). */
static void publication_end(ordo_mpi_t *mpi, mpi_published_t *p) {
    control_msg_t msg;
    if (!news_of(mpi, p, &msg)) {
        msg.status = (int32_t)ORDO_ERR_CANCELLED;
        snprintf(msg.message, sizeof msg.message,
                 "rank %d destroyed the ordo_mpi_t that published this signal", mpi->rank);
    }
    for (int rank = 0; rank < mpi->size; ++rank) {
        if (p->subscribers[rank] != SUBSCRIBER_NONE) {
            ordo__mpi_control_send(mpi, rank, &msg);
        }
    }
}

/* A subscription to a signal never published ends the same way. */
static void pending_end(ordo_mpi_t *mpi, const mpi_pending_t *q) {
    control_msg_t msg = {.kind = MSG_UPDATE, .id = q->id, .status = (int32_t)ORDO_ERR_CANCELLED};
    snprintf(msg.message, sizeof msg.message,
             "rank %d destroyed its ordo_mpi_t before it published this signal", mpi->rank);
    ordo__mpi_control_send(mpi, q->rank, &msg);
}

void ordo__mpi_signals_free(ordo_mpi_t *mpi, bool tell) {
    if (tell) {
        (void)receive_control(mpi); /* subscriptions that came: they hear the end too */
    }
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
        if (tell) {
            publication_end(mpi, p);
        }
        pthread_mutex_destroy(&p->lock);
        ordo__signal_release_internal(p->signal);
        ordo__dealloc(p->subscribers, (size_t)mpi->size * sizeof *p->subscribers, 0);
        ordo__dealloc(p, sizeof *p, 0);
    }
    while (mpi->pending) {
        mpi_pending_t *q = mpi->pending;
        mpi->pending = q->next;
        if (tell) {
            pending_end(mpi, q);
        }
        ordo__dealloc(q, sizeof *q, 0);
    }
    while (mpi->early) { /* never published: nobody to apply them to */
        mpi_early_raise_t *e = mpi->early;
        mpi->early = e->next;
        ordo__dealloc(e, sizeof *e, 0);
    }
}
