/* Internal: the completion watcher of a device whose work runs
 * asynchronously (a GPU), its per-stream timelines and its registry of
 * device points. Backend-agnostic: a backend supplies a non-blocking query
 * of one of its points (a CUDA event, a word the device writes, ...).
 *
 * A timeline belongs to one stream. Each *watch* pushed on it stands for a
 * point of that stream's order: a device point (with the progress value,
 * `seq`, that the stream's progress signal reaches there, and optionally a
 * signal to raise and an event record to complete) or an ordering check (a
 * device-side wait on another stream's point: once that stream's progress
 * has passed the point, the waited-on signal is checked, and a failure of
 * it fails this timeline). Watches of one timeline complete in push order.
 *
 * One thread per watcher polls the oldest watch of every timeline without
 * blocking, so a stream whose work is slow never holds back another
 * stream's completions (a blocking wait on one stream's point would, and
 * could deadlock when that point depends on a host action the watcher is
 * late to report). It never spins: each poll asks the driver, and a driver
 * polled in a loop slows the threads that submit work. How often it polls
 * depends on whether anyone waits:
 *   - nothing pending: it sleeps until a push wakes it;
 *   - pending, and a timepoint (a host wait, a stream's wait, a link, an
 *     asynchronous wait) is armed on a signal that a pending point raises
 *     ("wanted"): every min_poll_ns after progress, the interval doubling
 *     up to max_poll_ns while nothing completes;
 *   - pending, and nothing wanted, or a waiter helping (below): every
 *     idle_poll_ns, so the points that only recycle events and memory
 *     cost the submitting threads nothing (each poll asks the driver once
 *     per stream: a newer point reached answers for the older ones).
 * Arming a timepoint on a signal with a registered point tells the watcher
 * at once (the signal's feeder, signal_internal.h), so a wait that starts
 * during a long idle interval does not wait for its end.
 *
 * A thread that waits on the host for a registered signal helps (the
 * signal's feeder, signal_internal.h): while it sleeps it runs a pass
 * itself every min_poll_ns, the interval doubling up to max_poll_ns, so
 * the thread that needs the value sees it without a second thread's
 * wake-up in between (on a GPU's host, waking a thread that slept for a
 * millisecond costs tens of microseconds). While a waiter helps, the
 * watcher's own polls drop to idle_poll_ns: a helping waiter's pass
 * completes every timeline's points, not only its own. Passes (scans and
 * completions) are serialised by pass_lock (a helper that finds it taken,
 * or that is inside a callback already, skips its turn), so completions
 * still run one at a time and in order; ordo__hal_watcher_is_current is true
 * during a helper's pass. A pass wakes blocked waiters itself but runs no
 * other callback: timepoints that its completions make due (links,
 * asynchronous waits, users' timepoints) queue in the watcher's sink in
 * the order they became due, and the watcher thread runs them after its
 * pass, outside pass_lock (woken at once when a helper queued them). So
 * no callback runs on a thread that is waiting (it could need a lock that
 * thread holds), and callbacks keep one order whoever completed their
 * points.
 *
 * Completions (raising signals, failing them, completing event records)
 * happen on the watcher's thread or a helping waiter's, under pass_lock and
 * outside every other lock; callbacks run on the watcher's thread only,
 * outside every lock.
 *
 * The registry maps (signal, value) to the earliest registered device
 * point at which the signal reaches at least that value: every pushed
 * device point is registered under its timeline's progress signal (seq)
 * and, if it raises one, under that signal (value), until it completes. A
 * stream that must wait for such a value waits for that point on the
 * device; a value with no registered point is not yet produced by any
 * device work (the caller holds the wait on the host instead: a wait is
 * never turned into a wait on a point nobody recorded). `registered` is a
 * signal raised at every registration, so a host-held wait can wake and
 * look again.
 *
 * Locks: pass_lock before watcher->lock (the list of timelines) before
 * timeline->lock (one timeline's queue) and before registry_lock;
 * registry_lock comes before a signal's lock (a registered signal's feeder
 * is hung and taken off under both) and is otherwise a leaf (the find
 * callback runs under it and must only issue a device wait);
 * deferred_lock (the sink's queue) is a leaf. No callback of ordo's users
 * runs under any of them. */
#ifndef ORDO_HAL_WATCHER_H
#define ORDO_HAL_WATCHER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "base/parker.h"
#include "hal/hal.h"
#include "ordo/signal.h"
#include "sync/signal_access.h"

#define HAL_REGISTRY_BUCKETS 256

typedef struct hal_watcher hal_watcher_t;
typedef struct hal_timeline hal_timeline_t;
typedef struct hal_watch hal_watch_t;
typedef struct hal_reg_signal hal_reg_signal_t;

/* One registration: (the owner's signal, value) is reached at a watch. */
typedef struct hal_reg_entry {
    struct hal_reg_entry *prev; /* in its signal's list, ascending by value */
    struct hal_reg_entry *next;
    hal_reg_signal_t *owner; /* NULL: not registered */
    uint64_t value;
    hal_watch_t *watch;
} hal_reg_entry_t;

struct hal_watch {
    hal_watch_t *next;
    hal_timeline_t *timeline;
    /* A device point (the backend's, released through ops->release after
     * completion), or NULL for an ordering check. */
    void *point;
    uint64_t seq; /* with a point: the progress value reached there (0: none) */
    /* Optional: raised to value at the point (failed if the timeline has
     * failed). Retained by the watch. */
    ordo_signal_t *signal;
    uint64_t value;
    /* Optional: an event record completed at the point. */
    ordo_event_t *event;
    uint64_t generation;
    /* Ordering check: ready once `after` reaches after_value or ends (NULL:
     * at once, in order); then, if `check` ended before check_value, the
     * timeline fails with its failure. Both retained. */
    ordo_signal_t *after;
    uint64_t after_value;
    ordo_signal_t *check;
    uint64_t check_value;
    /* How the point ended, and a message on error (set by the watcher; a
     * failure marker is pushed with them set). */
    ordo_status_t status;
    char *message;
    hal_reg_entry_t entries[2]; /* [0] under the progress signal, [1] under signal */
};

typedef struct hal_watcher_ops {
    /* Non-blocking: ORDO_OK once the point of watch w on timeline t is
     * reached, ORDO_ERR_BUSY while not yet, another status (with a message
     * in msg) if the device failed. Runs on a pass's thread. */
    ordo_status_t (*query)(void *user, hal_timeline_t *t, const hal_watch_t *w, char *msg,
                           size_t capacity);
    /* Gives a point back to the backend. reached: the device has passed it
     * (0 when it was dropped at a stream's destroy while still pending). */
    void (*release)(void *user, void *point, int reached);
    /* Runs first on the watcher thread (e.g. makes a context current). */
    void (*thread_start)(void *user);
    /* Non-zero: a timeline's points are reached in push order (a stream's
     * are), so the watcher takes ORDO_OK for a newer point as the answer
     * for the older ones too and asks once per pass and timeline where it
     * can. */
    int in_order;
    /* Optional, both or neither: bracket a pass run by a helping waiter
     * (e.g. make the device's context current and restore the thread's
     * own after). help_begin returns 0 if the pass cannot run there. */
    int (*help_begin)(void *user);
    void (*help_end)(void *user);
} hal_watcher_ops_t;

/* How a watcher polls (see above); 0 in a field: its default. */
typedef struct hal_watcher_config {
    uint64_t min_poll_ns;  /* default 10 us */
    uint64_t max_poll_ns;  /* default 50 us */
    uint64_t idle_poll_ns; /* default 1 ms */
} hal_watcher_config_t;

struct hal_reg_signal {
    hal_reg_signal_t *next;        /* bucket chain, or free list */
    hal_reg_signal_t *active_prev; /* the watcher's list of registered signals */
    hal_reg_signal_t *active_next;
    ordo_signal_t *signal;
    hal_reg_entry_t *head; /* ascending by value */
    hal_reg_entry_t *tail;
};

struct hal_watcher {
    const hal_watcher_ops_t *ops;
    void *user;
    pthread_mutex_t pass_lock; /* one pass (scan and completions) at a time */
    pthread_mutex_t lock;      /* the timeline list */
    hal_timeline_t *timelines; /* under lock */
    pthread_mutex_t registry_lock;
    hal_reg_signal_t *buckets[HAL_REGISTRY_BUCKETS]; /* under registry_lock */
    hal_reg_signal_t *active;                        /* under registry_lock */
    hal_reg_signal_t *spare;                         /* under registry_lock */
    _Atomic uint64_t registrations;
    ordo_signal_t *registered; /* raised to `registrations` at each one */
    signal_feeder_t feeder;    /* hung on every registered signal */
    timepoint_sink_t sink;     /* a helper's pass hands others' callbacks here */
    pthread_mutex_t deferred_lock;
    due_list_t deferred;          /* under deferred_lock: for the thread to run */
    _Atomic int deferred_pending; /* deferred is not empty (a hint) */
    ordo_parker_t parker;         /* the thread sleeps on it (WATCHER_WAKE_* reasons) */
    _Atomic int stop;
    pthread_t thread;
    int started;
    uint64_t min_poll_ns;
    uint64_t max_poll_ns;
    uint64_t idle_poll_ns;
    _Atomic uint64_t last_help_ns; /* when a waiter last helped */
    /* Counters, for tests and diagnostics. */
    _Atomic uint64_t wanted_polls;  /* polls scheduled because a value was wanted */
    _Atomic uint64_t idle_polls;    /* polls at idle_poll_ns */
    _Atomic uint64_t helped_passes; /* passes run by helping waiters */
};

struct hal_timeline {
    hal_watcher_t *watcher;
    ordo_signal_t *progress; /* owned: raised to each completed point's seq */
    void *user;
    pthread_mutex_t lock; /* head, tail, last_point, spare, count, last_seq */
    hal_watch_t *head;
    hal_watch_t *tail;
    hal_watch_t *last_point; /* the newest queued watch with a point */
    hal_watch_t *spare;      /* recycled watches */
    size_t count;            /* watches queued */
    uint64_t last_seq;       /* the largest seq pushed */
    /* Watches the watcher has taken off the queue and not yet completed. */
    _Atomic uint32_t processing;
    hal_timeline_t *prev; /* the watcher's list, under watcher->lock */
    hal_timeline_t *next;
    int attached;
};

/* Starts the watcher's thread. config: NULL for the defaults. */
ordo_status_t ordo__hal_watcher_start(hal_watcher_t *w, const hal_watcher_ops_t *ops, void *user,
                                      const hal_watcher_config_t *config, const char *api);
/* Stops the thread; every timeline must be finished first (it then also
 * waits for helping waiters still inside a pass). */
void ordo__hal_watcher_stop(hal_watcher_t *w);
/* Stops the thread only, at process exit (timelines may still be
 * attached), and waits out a helping waiter's pass: nothing is completed
 * or freed after it (waiters no longer help), and a later
 * ordo__hal_watcher_stop does nothing. */
void ordo__hal_watcher_halt(hal_watcher_t *w);
/* Non-zero on the watcher's own thread (where completions, and the signal
 * callbacks they run, execute): no timeline of w may be finished there,
 * since ordo__hal_timeline_fini waits for the watches that thread has taken. */
int ordo__hal_watcher_is_current(const hal_watcher_t *w);

/* Finds the earliest registered device point at which signal reaches at
 * least value and calls use(ctx, watch) under the registry lock (the
 * watch stays valid during the call only). Returns 1 if found. */
int ordo__hal_watcher_find(hal_watcher_t *w, ordo_signal_t *signal, uint64_t value,
                           void (*use)(void *ctx, const hal_watch_t *watch), void *ctx);

/* A timeline for a new stream; `name` names its progress signal. */
ordo_status_t ordo__hal_timeline_init(hal_timeline_t *t, hal_watcher_t *w, void *user,
                                      const char *name, const char *api);
/* Waits (until deadline) for the device to pass the timeline's last point,
 * then detaches it: queued watches whose points are reached complete
 * normally; from the first one that is not, the timeline fails with
 * cancel_status and why, and the rest complete as failed. If the progress
 * then stays below `reserved` (values handed out to work that was never
 * issued), the timeline fails the same way, so nothing waits for them. */
void ordo__hal_timeline_fini(hal_timeline_t *t, ordo_deadline_t deadline, uint64_t reserved,
                             ordo_status_t cancel_status, const char *why);

/* A zeroed watch for t, or NULL when out of memory. */
hal_watch_t *ordo__hal_timeline_watch_alloc(hal_timeline_t *t);
/* Returns a watch that was never pushed. */
void ordo__hal_timeline_watch_free(hal_timeline_t *t, hal_watch_t *w);
/* Registers w's point (if any) and queues w (its signals are the
 * watch's: retained by the caller for it). */
void ordo__hal_timeline_push(hal_timeline_t *t, hal_watch_t *w);

/* Queues a failure: once the watches before it have completed, the
 * timeline fails with status and message (the points before stay
 * reached). Out of memory: fails the timeline at once. */
ordo_status_t ordo__hal_timeline_push_failure(hal_timeline_t *t, ordo_status_t status,
                                              const char *message);

/* Fails the timeline (its progress signal) unless it has failed already. */
void ordo__hal_timeline_fail(hal_timeline_t *t, ordo_status_t status, const char *message);

/* Non-zero once the timeline has failed; *out_status and (if not NULL)
 * message receive the failure. */
int ordo__hal_timeline_failed(const hal_timeline_t *t, ordo_status_t *out_status,
                              const char **out_message);

/* For stall reports: copies the queued watches that raise a signal into
 * ops (retaining each signal), at most capacity; returns how many there
 * were in all. */
size_t ordo__hal_timeline_snapshot(hal_timeline_t *t, hal_pending_op_t *ops, size_t capacity);

#endif
