/** @file
 * ordo/waiter.h - asynchronous waits: "when signal S reaches v (or its
 * event completes), call f", with deadlines and cancellation.
 *
 * A waiter owns one timer thread and one or more worker threads. Each wait
 * is a timepoint (ordo/timepoint.h) inside a slot of the waiter's slab, so
 * a host signal wakes its wait directly: nothing polls. Registering takes
 * no allocation once the slab has grown to the number of waits pending.
 *
 * Outcomes. The callback fn(ctx, status, id) runs exactly once per wait,
 * unless ordo_waiter_cancel prevents it:
 * - ORDO_OK when the signal reaches the value (at once if it already has);
 * - the signal's failure status when it fails before reaching the value;
 * - ORDO_ERR_CANCELLED when the signal is destroyed before reaching it, or
 *   when the waiter is destroyed with the wait still pending (a wait whose
 *   signal reached the value or failed before the destroy gets that
 *   outcome, even if the raising thread had not run its callback yet);
 * - ORDO_ERR_TIMEOUT when the deadline passes first (never before it; a
 *   value reached at registration wins over a deadline already past, and
 *   so does one reached before the timer takes the wait, even if the
 *   raising thread had not run its callback yet).
 * Inside a callback whose status is not ORDO_OK, ordo_error_message() says
 * why: the signal's failure message (the failed work's own text, for an
 * event wait its stream's), or that the signal or the waiter was destroyed
 * or the deadline passed. The thread's message is put back when the
 * callback returns (an inline callback leaves the message of the call it
 * ran in alone).
 *
 * Where callbacks run. By default on one of the waiter's worker threads;
 * with ORDO_WAIT_INLINE, on the thread that resolved the wait: the thread
 * that signalled, failed or destroyed the signal, the registering thread
 * if the value was reached already (before ordo_waiter_wait returns; when
 * registering from inside an inline or timepoint callback, right after
 * that callback returns, as timepoints queue their callbacks), the
 * waiter's timer thread for a wait it takes at its deadline (a timeout, or
 * an outcome met just before it took it), the destroying thread for a waiter
 * destroy. Inline callbacks must be short and must not block: they run
 * inside the signalling call. Either way a callback never runs under a lock
 * of ordo's; ordo's backends never raise a signal from a driver's thread,
 * so neither runs a callback there. A worker callback may block, but holds
 * up the callbacks queued behind it (configure more workers if callbacks
 * are slow).
 *
 * A callback may call any ordo function, including registering new waits
 * and cancelling waits on its own waiter, except destroying that waiter
 * (refused with ORDO_ERR_BUSY).
 *
 * Ids are generation-tagged slot numbers: never 0, and an id whose wait has
 * completed or was cancelled is recognised as such (ORDO_ERR_NOT_FOUND)
 * until its slot has been reused 2^32 times. Each waiter starts its
 * generations elsewhere, so an id given to the wrong waiter is not found
 * (short of a 1 in 2^32 coincidence).
 *
 * Thread-safety: every function may be called from any thread concurrently
 * on one waiter, except ordo_waiter_destroy, which must not race with calls
 * from outside the waiter's callbacks (calls from callbacks during a
 * destroy are handled: new waits are refused with ORDO_ERR_DESTROYED).
 */
#ifndef ORDO_WAITER_H
#define ORDO_WAITER_H

#include "ordo/export.h"

#include <stdint.h>

#include "ordo/event.h"
#include "ordo/signal.h"
#include "ordo/status.h"
#include "ordo/time.h"
#include "ordo/timepoint.h"

ORDO_BEGIN_DECLS

/** Runs callbacks when signals reach values: its threads, slab and waits
 * (opaque). */
typedef struct ordo_waiter ordo_waiter_t;

/** Names one asynchronous wait of one waiter. Never 0. */
typedef uint64_t ordo_wait_id_t;

/** The callback of a wait: status is the outcome (see above), id the wait's
 * id (as *out_id returned it). */
typedef void (*ordo_wait_fn)(void *ctx, ordo_status_t status, ordo_wait_id_t id);

/** Run the callback on the thread that resolves the wait rather than on a
 * worker thread. For short, non-blocking callbacks. */
#define ORDO_WAIT_INLINE 1u

/** The most worker threads one waiter runs. */
#define ORDO_WAITER_MAX_WORKERS 64u

/** The settings of a waiter. */
typedef struct ordo_waiter_config {
    /** Threads that run callbacks: 1 to ORDO_WAITER_MAX_WORKERS. */
    uint32_t worker_threads;
    /** No flags are defined yet: 0 (others are refused), so later behaviour
     * can be asked for here without a new function. */
    uint32_t flags;
} ordo_waiter_config_t;

/** A snapshot of a waiter's counters. Each counter is exact; taken while
 * waits are being resolved, the fields may come from slightly different
 * instants (pending is computed, and never below 0). */
typedef struct ordo_waiter_metrics {
    uint64_t registered; /**< waits accepted since creation */
    uint64_t pending;    /**< registered, callback neither started nor prevented */
    uint64_t fired;      /**< callbacks started because the signal reached its value,
                            failed or was destroyed */
    uint64_t failed;     /**< of fired: those delivering a status other than ORDO_OK */
    uint64_t timed_out;  /**< callbacks started with ORDO_ERR_TIMEOUT */
    uint64_t cancelled;  /**< callbacks prevented by ordo_waiter_cancel */
    uint64_t aborted;    /**< callbacks started with ORDO_ERR_CANCELLED by a waiter destroy */
    uint64_t running;    /**< callbacks started and not yet returned */
} ordo_waiter_metrics_t;

/** The defaults: one worker thread. */
ordo_status_t ordo_waiter_config_default(ordo_waiter_config_t *out_config);

/** Creates a waiter and starts its threads. config NULL: the defaults.
 * ORDO_ERR_INVALID_ARGUMENT for no worker, ORDO_ERR_OUT_OF_RANGE for more
 * than ORDO_WAITER_MAX_WORKERS, ORDO_ERR_RESOURCE_EXHAUSTED if a thread cannot be started. */
ordo_status_t ordo_waiter_create(const ordo_waiter_config_t *config, ordo_waiter_t **out_waiter);

/** Destroys a waiter. Every wait still pending is resolved with
 * ORDO_ERR_CANCELLED and its callback runs (a worker wait on a worker, an
 * inline wait on the calling thread); callbacks already queued or running
 * complete. When this returns no callback of the waiter runs any more, its
 * threads have exited and every signal reference it held is released.
 * ORDO_ERR_BUSY (nothing done) when called from one of the waiter's own
 * callbacks, or from any callback a signal runs (an inline wait callback of
 * another waiter, a timepoint or coordinator callback): a timepoint of this
 * waiter may be queued behind that callback on the same thread, and destroy
 * would wait for it forever. The handle is invalid afterwards.
 *
 * The wait for running callbacks has no deadline. From a worker callback
 * of another waiter it is allowed, but two waiters whose worker callbacks
 * destroy each other (or a longer ring of them) wait for one another
 * forever: destroy waiters from threads of the program's own. */
ordo_status_t ordo_waiter_destroy(ordo_waiter_t *waiter);

/** Registers a wait for signal to reach value, with a deadline
 * (ORDO_DEADLINE_NEVER: none). flags: 0 or ORDO_WAIT_INLINE. The waiter
 * holds a reference on the signal until the wait is over. *out_id (out_id
 * may be NULL for a wait that will never be cancelled) is written before
 * the callback can run.
 * Errors: ORDO_ERR_INVALID_HANDLE (waiter or signal), ORDO_ERR_DESTROYED
 * (the signal was destroyed, or the waiter is being destroyed),
 * ORDO_ERR_OUT_OF_RANGE (value above ORDO_SIGNAL_VALUE_MAX),
 * ORDO_ERR_INVALID_ARGUMENT (fn NULL, unknown flags), ORDO_ERR_OUT_OF_MEMORY
 * or ORDO_ERR_RESOURCE_EXHAUSTED (the slab cannot grow). On error no
 * callback runs and *out_id is 0. */
ordo_status_t ordo_waiter_wait(ordo_waiter_t *waiter, ordo_signal_t *signal, uint64_t value,
                               ordo_deadline_t deadline, uint32_t flags, ordo_wait_fn fn, void *ctx,
                               ordo_wait_id_t *out_id);

/** As ordo_waiter_wait, for the point event recorded last (its recording
 * stream's timeline and value, captured now: re-recording or destroying the
 * event later does not change the wait). A failure of that stream before
 * the point reaches the callback as its status. ORDO_ERR_INVALID_ARGUMENT
 * for an event never recorded, as ordo_event_synchronize. */
ordo_status_t ordo_waiter_wait_event(ordo_waiter_t *waiter, ordo_event_t *event,
                                     ordo_deadline_t deadline, uint32_t flags, ordo_wait_fn fn,
                                     void *ctx, ordo_wait_id_t *out_id);

/** Cancels the wait id. *out_result:
 * - ORDO_CANCEL_PREVENTED: its callback will never run (it had not started;
 *   a wait already resolved and queued for a worker is still prevented);
 * - ORDO_CANCEL_TOO_LATE: its callback is running. With wait_for_callback
 *   true, cancel returns only once it has returned - except when called
 *   from inside that very callback (directly, or from a callback nested in
 *   it on the same thread), where it returns TOO_LATE at once instead of
 *   waiting for itself. Waiting, from a callback, for another callback that
 *   in turn waits for the first deadlocks, as joining threads would.
 *
 * ORDO_ERR_NOT_FOUND when the wait is over or the id was never issued by
 * this waiter. The message says which: "its callback has completed" or
 * "was cancelled already" while the wait's slot has served no later wait;
 * once it has, "its callback has completed or it was cancelled (which is
 * no longer known ...)"; "was never issued by waiter" for an id of another
 * waiter or one made up (told apart by its generation, which each waiter
 * starts at its own point: a made-up id of a generation this waiter has
 * used for that slot reads as over). ORDO_ERR_INVALID_ARGUMENT for id 0
 * or out_result NULL, ORDO_ERR_INVALID_HANDLE for a bad waiter. */
ordo_status_t ordo_waiter_cancel(ordo_waiter_t *waiter, ordo_wait_id_t id, bool wait_for_callback,
                                 ordo_cancel_result_t *out_result);

/** A snapshot of the waiter's counters. */
ordo_status_t ordo_waiter_metrics(ordo_waiter_t *waiter, ordo_waiter_metrics_t *out_metrics);

ORDO_END_DECLS

#endif
