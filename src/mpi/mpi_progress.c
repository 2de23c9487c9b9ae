/* The progress thread of an ordo_mpi_t (mpi/mpi_internal.h): completes
 * the request in flight and raises the timeline, and carries the messages
 * of signals observed across ranks (mpi_signal.c). Idle (no request, no
 * signal published or observed), it sleeps, and looks for messages once a
 * heartbeat's period (mpi_liveness.c). Otherwise it tests the request
 * and looks for messages: without pausing for BUSY_NS after a request
 * arrived or anything moved (while a request is in flight), then with
 * pauses that double from PAUSE_MIN_NS to PAUSE_MAX_NS: MPI moves
 * nonblocking operations on only when asked. With signals alone, it looks
 * every LISTEN_MAX_NS, or from the quickest pace again when asked to
 * (ordo__mpi_listen_soon: a thread went to sleep on an observed signal, a
 * timepoint waits on a mirror); a thread waiting on an observed signal
 * receives its updates itself first (mpi_signal.c), and the progress
 * thread keeps off the cores meanwhile. It never spins while idle. */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/timer_slack.h"
#include "mpi/mpi_internal.h"

/* With a request in flight, how long the thread polls without pausing
 * after anything moved: a nonblocking collective moves on only inside MPI
 * calls, one round per test, and a pause costs at least a timer's slack
 * and a wake-up (tens of microseconds) per round. */
#define BUSY_NS 500000u
/* The timer slack of the progress thread (the default would stretch each
 * pause by up to 50 us). */
#define PROGRESS_TIMER_SLACK_NS 1000u
#define PAUSE_MIN_NS 2000u
#define PAUSE_MAX_NS 250000u
/* The longest pause while only signals are watched (published or
 * observed): how late, at most, an idle rank hears of another's move. */
#define LISTEN_MAX_NS 1000000u

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

void ordo__mpi_error_text(int code, char *text) {
    int length = 0;
    if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
        strcpy(text, "(no error string)");
    }
}

void ordo__mpi_finish(ordo_mpi_t *mpi, mpi_op_t *op, int code, char *out_message) {
    uint64_t seq = op->seq;
    const char *name = ordo__mpi_op_name(op->kind);
    ordo__mpi_op_free(op);
    if (code == MPI_SUCCESS) {
        (void)ordo_signal_advance(mpi->done, seq);
        return;
    }
    char text[MPI_MAX_ERROR_STRING] = "";
    ordo__mpi_error_text(code, text);
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    /* MPI's text is cut to what the message has room for (a longer one
     * would be cut anyway; saying so keeps -Wformat-truncation quiet). */
    snprintf(message, sizeof message, "%s (operation %llu, rank %d): %.96s", name,
             (unsigned long long)seq, mpi->rank, text);
    (void)ordo_signal_fail(mpi->done, ORDO_ERR_DEVICE, message);
    if (out_message) {
        memcpy(out_message, message, sizeof message);
    }
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

void ordo__mpi_listen_soon(ordo_mpi_t *mpi) {
    atomic_store_explicit(&mpi->listen_soon, true, memory_order_release);
    ordo__parker_unpark(&mpi->parker, ORDO_PARK_ANY, 1);
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

/* Completes op: off `posted`, freed, its point raised (or the timeline
 * failed with MPI's error). */
static void op_completed(ordo_mpi_t *mpi, mpi_op_t *op, int code) {
    pthread_mutex_lock(&mpi->lock);
    mpi->posted = op->next_posted;
    pthread_mutex_unlock(&mpi->lock);
    ordo__mpi_finish(mpi, op, code, NULL);
}

bool ordo__mpi_try_complete(ordo_mpi_t *mpi, mpi_op_t *op, uint64_t budget_ns) {
    uint64_t until = ordo_time_now_ns() + budget_ns;
    for (;;) {
        int flag = 0;
        MPI_Status status;
        int code = MPI_Test(&op->request, &flag, &status);
        if (code != MPI_SUCCESS || flag) {
            ordo__mpi_finish(mpi, op, code, NULL);
            return true;
        }
        if (ordo_time_now_ns() >= until) {
            return false;
        }
    }
}

/* The ordo_mpi_t whose progress thread this is (NULL on other threads). */
static _Thread_local const ordo_mpi_t *progress_of;

bool ordo__mpi_on_progress_thread(const ordo_mpi_t *mpi) {
    return progress_of == mpi;
}

static void *progress_main(void *arg) {
    ordo_mpi_t *mpi = arg;
    progress_of = mpi;
    uint64_t pause = 0;
    uint64_t busy_until = 0;
    bool quick = false;     /* listening from the quickest pace (listen_soon) */
    bool idle_look = false; /* woke from an idle sleep: look for messages once */
    (void)ordo__timer_slack_set(PROGRESS_TIMER_SLACK_NS);
    for (;;) {
        ordo_park_key_t key = ordo__parker_prepare(&mpi->parker);
        if (atomic_load_explicit(&mpi->stop, memory_order_acquire)) {
            return NULL; /* a request still in flight: the destroy lets it go */
        }
        pthread_mutex_lock(&mpi->lock);
        mpi_op_t *op = mpi->posted;
        bool live = ordo__mpi_signals_live(mpi);
        pthread_mutex_unlock(&mpi->lock);
        bool listening = live || idle_look;
        idle_look = false;
        bool moved = ordo__mpi_outbox_progress(mpi);
        const bool sending = ordo__mpi_outbox_busy(mpi);
        if (op) {
            int flag = 0;
            MPI_Status status;
            int code = MPI_Test(&op->request, &flag, &status);
            if (code != MPI_SUCCESS || flag) {
                op_completed(mpi, op, code);
                moved = true;
            }
        }
        if (listening) {
            moved |= ordo__mpi_signals_progress(mpi);
        }
        if (moved) {
            pause = 0;
            busy_until = ordo_time_now_ns() + BUSY_NS;
            continue;
        }
        if (!op) {
            busy_until = 0; /* the next request starts a busy spell of its own */
        }
        if (!op && !live && !sending) {
            /* Idle. It still looks for messages now and then: another rank
             * may subscribe to a signal this one will publish, and takes
             * this one for dead unless it hears from it (mpi_liveness.c). */
            ordo_deadline_t look = mpi->size > 1
                                       ? ordo_time_now_ns() + ordo__mpi_heartbeat_period_ns(mpi)
                                       : ORDO_DEADLINE_NEVER;
            (void)ordo__parker_park(&mpi->parker, key, ORDO_PARK_ANY, look);
            idle_look = true;
            continue;
        }
        if (op) {
            uint64_t now = ordo_time_now_ns();
            if (busy_until == 0) {
                busy_until = now + BUSY_NS; /* a request just arrived */
            }
            if (now < busy_until) {
                continue; /* the request moves on only while it is tested */
            }
        }
        /* Polling: a request in flight, or signals other ranks may move. A
         * post, a wanted timepoint or a sleeping wait unparks at once. */
        uint64_t most = op || sending ? PAUSE_MAX_NS : LISTEN_MAX_NS;
        if (atomic_exchange_explicit(&mpi->listen_soon, false, memory_order_acquire)) {
            pause = 0;
            quick = true;
        }
        pause = pause == 0 ? PAUSE_MIN_NS : (pause * 2 > most ? most : pause * 2);
        if (!op && !sending &&
            (!quick || atomic_load_explicit(&mpi->helpers, memory_order_relaxed) > 0)) {
            /* Signals alone: a waiting thread receives its updates itself,
             * and a sleeper, a wanted mirror or news asked for `quick`. */
            pause = most;
        }
        if (pause == most) {
            quick = false;
        }
        (void)ordo__parker_park(&mpi->parker, key, ORDO_PARK_ANY, ordo_time_now_ns() + pause);
    }
}

ordo_status_t ordo__mpi_progress_start(ordo_mpi_t *mpi, const char *api) {
    ordo__parker_init(&mpi->parker);
    atomic_init(&mpi->stop, false);
    atomic_init(&mpi->listen_soon, false);
    atomic_init(&mpi->helpers, 0);
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
