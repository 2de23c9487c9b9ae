/* Internal: the MPI layer (ordo/mpi.h): an ordo_mpi_t, its operations,
 * and the progress thread that completes them.
 *
 * An operation's life: the submitting thread assigns it the next point
 * (seq) of the ordo_mpi_t's timeline `done` and submits, through the
 * tracker, on the communication stream: a host task that starts its
 * request (post), then a wait for `done` to reach seq. The host task runs
 * on the stream's worker: it starts the request, tests it for a few tens of
 * microseconds (a small send, a receive whose message is there, completes
 * at once: the stream's wait then needs no wake-up), and otherwise hands
 * the operation to the progress thread (`posted`, under `lock`). The progress thread tests
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
#include "ordo/timepoint.h"
#include "sync/signal_remote.h"

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

/* A signal of this rank other ranks may observe (ordo_mpi_signal_publish):
 * its state goes to its subscribers whenever it moved past what they were
 * sent: from a timepoint at the next value, on the thread that moved it
 * (or, when that one finds the publication busy, the progress thread). */
typedef struct mpi_published {
    ordo_mpi_t *mpi;
    uint32_t id;
    ordo_signal_t *signal; /* a reference of the publication's */
    uint8_t *subscribers;  /* by rank: SUBSCRIBER_* (under the mpi's lock) */
    uint64_t sent_value;
    _Atomic bool sent_ended;    /* read under the mpi's lock too (liveness) */
    pthread_mutex_t lock;       /* sent_*, arming: the progress thread or the callback */
    ordo_timepoint_t timepoint; /* at sent_value + 1 */
    _Atomic uint64_t arms;      /* times armed */
    _Atomic uint64_t fired;     /* callbacks returned, or armings cancelled */
    _Atomic bool closing;       /* no arming any more */
    struct mpi_published *next;
} mpi_published_t;

/* A handle of another rank's published signal (ordo_mpi_signal_open): a
 * remote signal (sync/signal_remote.h) whose truth is what the owner last
 * sent, kept here. */
typedef struct mpi_remote {
    signal_remote_t remote; /* first */
    ordo_mpi_t *mpi;
    int owner;
    uint32_t id;
    _Atomic uint64_t state; /* the value | ORDO__SIGNAL_FAILED_BIT */
    ordo_status_t failure;  /* written once, before the failed bit */
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    _Atomic uint32_t seq;      /* futex word: moved by every update and interrupt */
    _Atomic uint32_t sleepers; /* threads asleep (or about to be) on seq */
    /* Threads in a blocking wait on it now, and the value the latest
     * waits for (for a stall report). */
    _Atomic uint32_t thread_waiters;
    _Atomic uint64_t thread_value;
    /* References the progress thread holds for a pull (under mpi->lock):
     * the program's own are the rest (ordo_mpi_destroy counts those). Once
     * the program's last went (program_done, under the lock), the progress
     * thread pins it no more. */
    uint32_t pins;
    bool program_done;
    struct mpi_remote *prev, *next;
} mpi_remote_t;

enum { SUBSCRIBER_NONE = 0, SUBSCRIBER_CURRENT = 1, SUBSCRIBER_NEW = 2 };

/* The messages of signals across ranks (mpi_signal.c). */
#define CONTROL_TAG 0x6f72 /* SUBSCRIBE, ADVANCE, FAIL */
#define UPDATE_TAG 0x6f73  /* UPDATE: into the standing receive */
#define STALL_TAG 0x6f74   /* a stall report's answers (mpi_stall.c) */

enum {
    MSG_SUBSCRIBE = 1,
    MSG_UPDATE = 2,
    MSG_ADVANCE = 3,
    MSG_FAIL = 4,
    MSG_UNSUBSCRIBE = 5, /* the sender's last handle of id closed */
    MSG_HEARTBEAT = 6,   /* the sender lives (mpi_liveness.c) */
    MSG_STALL_QUERY = 7, /* answer with your stall records (mpi_stall.c) */
};

typedef struct control_msg {
    uint32_t kind;
    uint32_t id;
    uint64_t value;
    int32_t status; /* ORDO_OK, or the failure */
    uint32_t epoch; /* the sender's ordo_mpi_t's (set by ordo__mpi_control_send) */
    char message[ORDO_SIGNAL_MESSAGE_MAX]; /* sent only with a failure */
} control_msg_t;

/* A control message whose send was not complete when its sender looked
 * (mpi_outbox.c). */
typedef struct mpi_outgoing mpi_outgoing_t;

/* A subscription that came before its publication. */
typedef struct mpi_pending {
    int rank;
    uint32_t id;
    struct mpi_pending *next;
} mpi_pending_t;

/* The advances and failures of an id that came before its publication
 * (an observer's handle took them at once): the publish applies them, so
 * owner and observers agree. One per id: the highest value, the first
 * failure. */
typedef struct mpi_early_raise {
    uint32_t id;
    uint64_t value;
    ordo_status_t failure; /* ORDO_OK: none came */
    char message[ORDO_SIGNAL_MESSAGE_MAX];
    struct mpi_early_raise *next;
} mpi_early_raise_t;

struct ordo_mpi {
    uint32_t magic;
    ordo_tracker_t *tracker;
    ordo_stream_t *stream;
    MPI_Comm comm; /* ordo's duplicate, MPI_ERRORS_RETURN */
    int rank, size;
    uint32_t epoch;         /* agreed by every rank at create: messages carry it */
    int finalize_key;       /* MPI_COMM_SELF's attribute that runs quiesce at MPI_Finalize */
    _Atomic bool quiesced;  /* the progress thread stopped, the standing receive cancelled */
    _Atomic bool finalized; /* MPI_Finalize came before the destroy: no more MPI calls */
    _Atomic uint32_t sends; /* control sends and operation starts: a finalize waits */
    bool destroying;        /* ordo_mpi_destroy deletes the attribute (not MPI_Finalize) */
    ordo_signal_t *done;    /* raised to an operation's seq once it completed */
    uint64_t submitted;     /* the last seq given (the submitting thread's) */
    pthread_mutex_t lock;
    mpi_op_t *posted; /* started, not completed: one at most (see the top) */
    mpi_op_t *all;
    pthread_t progress;
    ordo_parker_t parker;
    _Atomic bool stop;
    _Atomic bool listen_soon;   /* the progress thread polls from its quickest pace */
    _Atomic uint32_t helpers;   /* threads receiving their signals' updates themselves */
    MPI_Comm control;           /* signals' messages (mpi_control.c) */
    int control_number;         /* its number among those kept, or -1 */
    mpi_published_t *published; /* under lock */
    mpi_remote_t *remotes;      /* under lock */
    mpi_pending_t *pending;     /* under lock */
    mpi_early_raise_t *early;   /* under lock */
    /* Liveness (mpi_liveness.c): the ranks this one exchanges signals'
     * messages with (its peers) send each other heartbeats; a peer heard
     * from for none of peer_timeout_ns is found dead, for good. */
    _Atomic uint64_t peer_timeout_ns;
    /* By rank: a message came (or it became a peer) since the progress
     * thread's last liveness pass, which stamps heard_ns with its clock
     * reading: a receiver pays a store, not a clock read. */
    _Atomic uint8_t *heard;
    uint64_t *heard_ns;         /* by rank: the progress thread's */
    _Atomic uint8_t *dead;      /* by rank: found dead (set under lock) */
    uint8_t *peers;             /* the progress thread's scratch, by rank */
    uint64_t next_heartbeat_ns; /* the progress thread's */
    /* Held across a handle's open or close and its SUBSCRIBE or
     * UNSUBSCRIBE (mpi_signal.c), and by ordo_mpi_destroy's look at the
     * handles: messages in the order of the changes, no close in flight
     * at the destroy. Taken before lock. */
    pthread_mutex_t subscribe_lock;
    pthread_mutex_t stall_lock; /* one stall report asks at a time */
    uint64_t stall_serial;      /* the last query's, under stall_lock */
    /* The standing receive of UPDATEs: tested, taken and posted again
     * under update_lock (a waiting thread or the progress thread). */
    pthread_mutex_t update_lock;
    MPI_Request update_request; /* MPI_REQUEST_NULL if posting failed */
    control_msg_t update_buffer;
    /* Control sends in flight, and spare nodes (mpi_outbox.c); under
     * outbox_lock. outbox_busy: the outbox is not empty. */
    pthread_mutex_t outbox_lock;
    mpi_outgoing_t *outbox;
    mpi_outgoing_t *outbox_spares;
    uint32_t outbox_spare_count;
    _Atomic bool outbox_busy;
    _Atomic(mpi_outgoing_t *) outbox_quick; /* a spare taken without the lock */
};

/* Validates a handle for api. */
ordo_status_t ordo__mpi_check(const ordo_mpi_t *mpi, const char *api);

/* Whether the progress thread must look for messages (signals are
 * published or observed), under lock. */
bool ordo__mpi_signals_live(ordo_mpi_t *mpi);

/* One pass of the progress thread over the signals: receives and applies
 * every message waiting, sends publications' news. True if anything moved. */
bool ordo__mpi_signals_progress(ordo_mpi_t *mpi);

/* Posts the standing receive of UPDATEs (under update_lock, or before
 * any thread may take one). */
ordo_status_t ordo__mpi_update_post(ordo_mpi_t *mpi);

/* Cancels it (after the progress thread stopped, every handle closed). */
void ordo__mpi_update_cancel(ordo_mpi_t *mpi);

/* Stops the progress thread and cancels the standing receive, once: from
 * ordo_mpi_destroy, or from MPI_Finalize when that comes first (then,
 * first, no control message is sent any more). */
void ordo__mpi_quiesce(ordo_mpi_t *mpi, bool finalizing);

/* Whether the calling thread is mpi's progress thread. */
bool ordo__mpi_on_progress_thread(const ordo_mpi_t *mpi);

/* The control communicator for an ordo_mpi_t on comm (collective over
 * comm): one kept for the process, free on every rank, or a new duplicate
 * (MPI_ERRORS_RETURN); its number among those kept, -1 for one not kept
 * (mpi_control.c). An MPI error code, and the call that failed in
 * *out_call. */
int ordo__mpi_control_take(MPI_Comm comm, MPI_Comm *out_control, int *out_number,
                           const char **out_call);

/* Gives it back at the destroy: kept, or freed if not kept (and MPI is
 * usable). */
void ordo__mpi_control_give(MPI_Comm *control, int number, bool mpi_usable);

/* Sends one record of the control communicator to rank, without waiting
 * for the receiver: a send not complete at once is left to the progress
 * thread (mpi_outbox.c). Nothing goes to a rank found dead, nor after
 * MPI_Finalize. */
void ordo__mpi_control_send(ordo_mpi_t *mpi, int rank, const control_msg_t *msg);

/* Sends length bytes of data to rank with tag on the control
 * communicator as ordo__mpi_control_send does (a copy, never waiting for
 * the receiver): a stall report's answers. */
void ordo__mpi_bulk_send(ordo_mpi_t *mpi, int rank, int tag, const void *data, int length);

/* Whether control sends are in flight (the progress thread polls). */
bool ordo__mpi_outbox_busy(ordo_mpi_t *mpi);

/* The progress thread's part: tests the sends in flight, lets go of those
 * to ranks found dead. True if any ended. */
bool ordo__mpi_outbox_progress(ordo_mpi_t *mpi);

/* Ends the outbox once no thread sends any more: with MPI usable, sends
 * not over are let go (MPI finishes them on its own); the spares are
 * freed. */
void ordo__mpi_outbox_close(ordo_mpi_t *mpi, bool mpi_usable);

/* Liveness (mpi_liveness.c): the arrays, by rank; their release. */
ordo_status_t ordo__mpi_liveness_init(ordo_mpi_t *mpi, const char *api);
void ordo__mpi_liveness_free(ordo_mpi_t *mpi);

/* A message of rank arrived, or rank became a peer (its silence counts
 * from the progress thread's next pass, no earlier than now). */
void ordo__mpi_heard(ordo_mpi_t *mpi, int rank);

/* Whether rank was found dead (its messages are ignored). */
bool ordo__mpi_rank_dead(ordo_mpi_t *mpi, int rank);

/* The progress thread's part, with signals live: sends the heartbeats due
 * and finds the peers silent past the timeout dead: fails the handles of
 * their signals (ORDO_ERR_ABANDONED) and drops their subscriptions. True
 * if any was found dead. */
bool ordo__mpi_liveness_progress(ordo_mpi_t *mpi);

/* The period of the heartbeats; also how often an idle progress thread
 * looks for messages (a subscription to a signal not published yet). */
uint64_t ordo__mpi_heartbeat_period_ns(ordo_mpi_t *mpi);

/* Fails an observed handle's kept truth with status and message (under
 * lock), for mpi_liveness.c. */
void ordo__mpi_remote_abandon(mpi_remote_t *r, const char *message);

/* MPI_Finalize came (the progress thread stopped): every observed handle
 * fails with ORDO_ERR_UNAVAILABLE (nothing reaches it any more), and its
 * mirror is brought up here, since no thread of ordo's would. */
void ordo__mpi_signals_finalized(ordo_mpi_t *mpi);

/* Takes a message of tag waiting on the control communicator into buffer
 * (size bytes, zeroed first), if one is: true, with its source in
 * *out_source (-1 if the receive failed: the caller drops it). */
bool ordo__mpi_take(ordo_mpi_t *mpi, int tag, void *buffer, int size, int *out_source);

/* Drops the pending subscriptions of rank to id (rank -1, id -1: any),
 * under lock; each marked SUBSCRIBER_NEW in subscribers, when not NULL
 * (its publication came). */
void ordo__mpi_pending_take(ordo_mpi_t *mpi, int rank, int64_t id, uint8_t *subscribers);

/* Answers a stall report's query of asker (the progress thread's). */
void ordo__mpi_stall_answer(ordo_mpi_t *mpi, int asker, uint64_t serial);

/* Frees the publications, pending subscriptions and early raises (after
 * the progress thread stopped); tell: MPI is still there, and their
 * subscribers hear the end (the subscriptions that came meanwhile
 * included). */
void ordo__mpi_signals_free(ordo_mpi_t *mpi, bool tell);

/* The name of an operation's kind, for messages ("MPI_Iallreduce"). */
const char *ordo__mpi_op_name(mpi_op_kind_t kind);

/* Starts and stops the progress thread. */
ordo_status_t ordo__mpi_progress_start(ordo_mpi_t *mpi, const char *api);
void ordo__mpi_progress_stop(ordo_mpi_t *mpi);

/* Tests a started operation's request for up to budget_ns on the calling
 * thread (the stream's worker, right after starting it); if it completed,
 * finishes it as the progress thread would (its point raised, or the
 * timeline failed; the operation freed) and returns true. */
bool ordo__mpi_try_complete(ordo_mpi_t *mpi, mpi_op_t *op, uint64_t budget_ns);

/* Wakes the progress thread to look for messages and pull mirrors now,
 * polling from its quickest pace (a thread goes to sleep on an observed
 * signal, a timepoint waits on a mirror, a publication has news). */
void ordo__mpi_listen_soon(ordo_mpi_t *mpi);

/* Hands a started operation to the progress thread. */
void ordo__mpi_progress_post(ordo_mpi_t *mpi, mpi_op_t *op);

/* Takes op off `all` and frees it. */
void ordo__mpi_op_free(mpi_op_t *op);

/* MPI's error string for code, into text (MPI_MAX_ERROR_STRING bytes). */
void ordo__mpi_error_text(int code, char *text);

/* Finishes op, whose request ended with code: frees it, then raises its
 * point, or fails the timeline with the operation, its point, the rank
 * and MPI's error string (that message also into out_message, when not
 * NULL: ORDO_SIGNAL_MESSAGE_MAX bytes). */
void ordo__mpi_finish(ordo_mpi_t *mpi, mpi_op_t *op, int code, char *out_message);

#endif
