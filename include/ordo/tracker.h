/** @file
 * ordo/tracker.h - automatic cross-stream ordering from buffer access.
 *
 * A tracker orders work across the streams of one device from what each
 * submission reads and writes. Declare the accesses, name the stream, and
 * the tracker emits exactly the device-side waits that make the program
 * behave as if every submission ran in submission order:
 *
 * - read after write, write after read and write after write across
 *   streams are ordered; two reads on different streams are not; accesses
 *   on the same stream need nothing (streams run in order);
 * - each stream keeps a frontier (a vector clock over streams) of what it
 *   has waited for, including what it knows transitively (if A waited for B
 *   at point 7, and B had waited for C at point 3 before that, A knows C up
 *   to 3); a wait already implied is never emitted again, and the waits a
 *   submission needs from one origin stream collapse into one;
 * - the waits of one submission are a minimal cover: none is implied by
 *   the others (a write on A, a read of it on B, then a write on C: C waits
 *   for B's read only, which B ordered after A's write);
 * - waits are device-side: the host never blocks.
 *
 * Points: every submission on a stream gets the next point of that stream.
 * A point is recorded on the stream (a signal of the stream's tracker
 * timeline) only when another stream first needs it, so a stream nobody
 * waits on pays nothing. A point recorded late covers the stream's later
 * work too: the waiting stream may then wait a little longer than the
 * hazard needs, never less.
 *
 * Buffers (ordo/buffer.h) carry the access history. Releasing a buffer
 * defers its reclamation until every recorded use of it has completed, on
 * the tracker's reclaimer thread, without blocking the releasing thread;
 * a buffer whose uses have all run is reclaimed at once.
 *
 * Host work takes one call: ordo_tracker_submit_host(tracker, stream, accesses,
 * count, fn, ctx) enqueues fn(ctx) as a host task in order. ctx must stay
 * valid until the task has run, or has been dropped (see ordo/stream.h).
 *
 * Ownership: a tracker may hold its device and own its streams. One made
 * by ordo_tracker_open(name) opened the device itself; streams made by
 * ordo_tracker_stream_create belong to it (ordo_stream_destroy refuses
 * them with ORDO_ERR_BUSY). ordo_tracker_close(tracker, deadline) then
 * tears all of it down in one call:
 *
 *     ordo_tracker_t *tracker;
 *     ordo_stream_t *a;
 *     ordo_tracker_open(ORDO_DEVICE_DEFAULT, &tracker);
 *     ordo_tracker_stream_create(tracker, 0, &a);
 *     ... buffers, submissions, ordo_buffer_release ...
 *     ordo_tracker_close(tracker, ordo_deadline_after_ms(10000));
 *
 * Teardown, in this order: release the buffers (ordo_buffer_release);
 * ordo_tracker_synchronize (every stream's work has run and every
 * reclamation has finished); ordo_tracker_destroy (refused with
 * ORDO_ERR_BUSY while buffers are live or reclamations pending; it
 * destroys the streams the tracker owns and drops its device reference);
 * destroy the streams the caller created (they must outlive the tracker);
 * release the device if the caller opened it. ordo_tracker_close is the
 * middle two steps in one call, and the whole teardown for a tracker from
 * ordo_tracker_open whose streams are all its own.
 *
 * Thread-safety: a tracker is externally synchronised: submit, prepare,
 * finish, buffer create and release on one tracker must not run
 * concurrently; nor may setting the wait observer. ordo_tracker_lock is
 * the lock to use when several threads submit: memory pools on the
 * tracker take it themselves (it is recursive, so a launch function called
 * under it may allocate from such a pool). Metrics and drain may be called from any
 * thread, except drain from a reclaim callback (it would wait for itself).
 * So may synchronize, while other threads submit under ordo_tracker_lock,
 * and ordo_tracker_stream_create (it takes the lock itself). Destroy and
 * close must not race any other call on the tracker, nor on the streams
 * it owns. A host task runs on its stream's thread and may start before
 * the submission that enqueued it returns: a call it makes on the tracker
 * is another thread's call, which races that submission unless both hold
 * ordo_tracker_lock (a destroy from a host task races it whatever it
 * holds).
 *
 * Streams used with a tracker must outlive it: a stream the tracker has
 * ordered work on (a submission, or a memory pool's call on the tracker,
 * naming it) stays in its table, and ordo_stream_destroy refuses it with
 * ORDO_ERR_BUSY until the tracker is destroyed. The streams it owns go
 * with it.
 */
#ifndef ORDO_TRACKER_H
#define ORDO_TRACKER_H

#include "ordo/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ordo/device.h"
#include "ordo/stream.h"

ORDO_BEGIN_DECLS

/** The most streams one tracker orders, the streams it owns
 * (ordo_tracker_stream_create) counted from their creation: a submission
 * on a stream beyond them is refused with ORDO_ERR_RESOURCE_EXHAUSTED. */
#define ORDO_TRACKER_MAX_STREAMS 64u
/** The most accesses one submission declares. */
#define ORDO_TRACKER_MAX_ACCESSES 1024u

/** Orders work across the streams of one device from declared buffer
 * accesses (opaque). */
typedef struct ordo_tracker ordo_tracker_t;
/** A tracked resource of a tracker (ordo/buffer.h; opaque). */
typedef struct ordo_buffer ordo_buffer_t;

/** How a submission accesses a buffer. */
typedef enum ordo_access_mode {
    ORDO_ACCESS_READ = 1,       /**< reads it */
    ORDO_ACCESS_WRITE = 2,      /**< writes it */
    ORDO_ACCESS_READ_WRITE = 3, /**< reads and writes it */
} ordo_access_mode_t;

/** One declared access. The same buffer may appear more than once in a
 * list: its modes merge (read and write make read-write). */
typedef struct ordo_access {
    ordo_buffer_t *buffer;   /**< the buffer accessed */
    ordo_access_mode_t mode; /**< how it is accessed */
} ordo_access_t;

/** Enqueues the submission's work on stream (on the CPU backend, host
 * tasks; on a GPU backend, kernels on the native stream). A non-OK return
 * means nothing was enqueued: the accesses are not recorded, and
 * ordo_tracker_submit returns that status (ORDO_ERR_ABORTED for a value that is
 * not an ordo status) with a message naming it, which wraps the message of
 * an ordo call that failed inside the function.
 *
 * It runs between the submission's waits and the record of its accesses,
 * so from it (on its thread) the calls that would change what the
 * submission was ordered against, or tear the tracker down, are refused
 * with ORDO_ERR_BUSY and a message naming the launch: a submission on the
 * tracker (ordo_tracker_submit, _submit_host, prepare, finish),
 * ordo_graph_replay and the other changes to a graph of the tracker,
 * ordo_tracker_record_begin, ordo_tracker_destroy and ordo_tracker_close,
 * ordo_buffer_release of any buffer of the tracker, and a pool's
 * ordo_mem_deallocate or ordo_mem_prepare_use / _finish_use of a block the
 * submission names. A pool's other blocks may be allocated, used and freed
 * there (scratch memory of the work it enqueues). It must return: a
 * longjmp or pthread_exit out of it leaves the tracker marked as launching,
 * and these calls refused on that thread, for good. */
typedef ordo_status_t (*ordo_launch_fn)(void *ctx, ordo_stream_t *stream);

/** The counters of a tracker (ordo_tracker_metrics). */
typedef struct ordo_tracker_metrics {
    uint64_t submissions;          /**< finished submissions */
    uint64_t waits_emitted;        /**< device waits enqueued */
    uint64_t waits_elided;         /**< needed orderings already known, or covered by
                                        another wait of the same submission: no wait */
    uint64_t points_recorded;      /**< points signalled because another stream needed them */
    uint64_t buffers_live;         /**< created and not released */
    uint64_t reclamations_pending; /**< released buffers whose uses have not all completed */
    uint64_t reclamations_done;    /**< released buffers reclaimed */
} ordo_tracker_metrics_t;

/** Creates a tracker for device's streams and starts its reclaimer thread.
 * The tracker holds a reference on device until it is destroyed; the
 * caller's own reference is the caller's to release. */
ordo_status_t ordo_tracker_create(ordo_device_t *device, ordo_tracker_t **out_tracker);

/** Opens the device named device_name (as ordo_device_open does: "cpu",
 * "cpu:0", ORDO_DEVICE_DEFAULT, ...) and creates a tracker over it that
 * holds the only reference this call takes on it, dropped when the
 * tracker is closed or destroyed (the caller has none to release). A
 * failed open returns the open's status (ORDO_ERR_NOT_FOUND for an
 * unknown backend, ORDO_ERR_UNAVAILABLE, ORDO_ERR_OUT_OF_RANGE for an
 * ordinal beyond the devices present, ORDO_ERR_INVALID_ARGUMENT for a NULL
 * name) and its message, and leaves nothing behind: there is no default
 * device to fall back on. The tracker's device is ordo_stream_device of
 * any stream of it. */
ordo_status_t ordo_tracker_open(const char *device_name, ordo_tracker_t **out_tracker);

/** Creates a stream on the tracker's device (as ordo_stream_create does,
 * priority in the device's range: a numerically lower value is more
 * urgent, 0 the default) that the tracker owns: it is destroyed with the
 * tracker (ordo_tracker_close, ordo_tracker_destroy), and
 * ordo_stream_destroy refuses it with ORDO_ERR_BUSY. It is used like any
 * stream otherwise, with this tracker or others: the tracker keeps it a
 * place among the streams it orders, so its first submission on the
 * tracker is never refused for want of one (the caller's streams cannot
 * take that place). ORDO_ERR_RESOURCE_EXHAUSTED, nothing made, where the
 * streams the tracker orders and those it owns and has not ordered yet
 * number ORDO_TRACKER_MAX_STREAMS already (the message gives both counts).
 * May be called from any thread while others use the tracker (it takes
 * ordo_tracker_lock), not while it is destroyed or closed. */
ordo_status_t ordo_tracker_stream_create(ordo_tracker_t *tracker, int priority,
                                         ordo_stream_t **out_stream);

/** Destroys the tracker, then the streams it owns (as ordo_stream_destroy
 * does: work not yet started on them is dropped, a host task running
 * there is waited for), then drops its reference on the device (the last
 * one, for a tracker from ordo_tracker_open, unless streams or objects of
 * the caller's hold others). Refused with ORDO_ERR_BUSY, nothing done,
 * while memory pools use it (destroy them first), buffers are live or
 * reclamations are pending (ordo_tracker_synchronize or ordo_tracker_drain
 * waits for those), or a stream it owns cannot be destroyed: called on
 * one of that stream's threads, or another tracker or a coordinator still
 * keeps it in its table. See the teardown order above. */
ordo_status_t ordo_tracker_destroy(ordo_tracker_t *tracker);

/** Waits for all the tracker's work as ordo_tracker_synchronize does
 * (every stream it ordered or owns has run what was submitted, and no
 * reclamation is pending), then tears it down as ordo_tracker_destroy
 * does: the tracker, the streams it owns, its device reference. For a
 * tracker from ordo_tracker_create, the caller's device reference and
 * the caller's streams stay the caller's (destroy and release them after).
 *
 * Refused with ORDO_ERR_BUSY before any wait, nothing done, while buffers
 * are live (release them first: a live buffer is never released or leaked
 * by close), memory pools use the tracker, a stream it owns cannot be
 * destroyed (as for ordo_tracker_destroy), or when called on a thread of
 * one of its streams (a host task or callback there: it would wait for
 * itself). When the synchronize fails, close returns its status and
 * message (ORDO_ERR_TIMEOUT at the deadline while a stream still has work
 * pending, else the first failed stream's failure) and tears nothing
 * down: the tracker and its streams stay usable for a later close, or to
 * be inspected. A failed stream stays failed, so a second close returns
 * the same failure; once the failure is handled, ordo_tracker_destroy
 * completes the teardown (a failed stream's work never runs, so nothing
 * is left to wait for). */
ordo_status_t ordo_tracker_close(ordo_tracker_t *tracker, ordo_deadline_t deadline);

/** Orders and enqueues one submission: prepare + launch + finish. */
ordo_status_t ordo_tracker_submit(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                  const ordo_access_t *accesses, size_t count,
                                  ordo_launch_fn launch, void *ctx);

/** Orders and enqueues fn(ctx) as a host task on stream: ordo_tracker_submit with
 * a launch function that calls ordo_stream_host_task(stream, fn, ctx), so
 * the same ordering, the same errors (named ordo_tracker_submit_host), and nothing
 * recorded when the task cannot be enqueued (a failed stream returns its
 * failure). ctx must stay valid until the task has run, or has been
 * dropped because its stream failed or was destroyed: ordo never reads or
 * frees ctx except to pass it to fn (ordo/stream.h). A task that fails
 * with ordo_fail (ordo/status.h) gives the stream's failure its text. */
ordo_status_t ordo_tracker_submit_host(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                       const ordo_access_t *accesses, size_t count, ordo_host_fn fn,
                                       void *ctx);

/** The split form, for callers who enqueue the work themselves: prepare
 * emits the waits the accesses need on stream; enqueue the work; then
 * finish records the accesses as the stream's next point.
 *
 * A prepare holds the buffers it names until a finish on the same stream
 * names them. Meanwhile every other call that names one is refused with
 * ORDO_ERR_BUSY, after any fault of a handle or an argument: a submission
 * or a second prepare (it would be ordered against a history the finish
 * is still to change), a graph's replay, a recording's capture,
 * ordo_buffer_release (the finish reads the buffer), and the free of a
 * pool block prepared by ordo_mem_prepare_use. Buffers
 * the prepare does not name are not held, so other work goes on. A finish
 * is refused with ORDO_ERR_INVALID_ARGUMENT, and the prepare stays open,
 * when it names a buffer no prepare holds, a buffer prepared on another
 * stream, or a write of a buffer prepared only for reading (a prepared
 * write may finish as a read). A finish may end part of a prepare's
 * buffers; each is let go by the finish that names it.
 *
 * If the work cannot be enqueued, finish all the same: the point it
 * records covers nothing more than the waits the prepare emitted, and on
 * a stream that has failed, later users of the buffers are ordered after
 * that failure as after any work that stream dropped. */
ordo_status_t ordo_tracker_prepare(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                   const ordo_access_t *accesses, size_t count);

/** The end of the split form: after the work was enqueued on stream,
 * records the accesses as the stream's next point. */
ordo_status_t ordo_tracker_finish(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                  const ordo_access_t *accesses, size_t count);

/** A snapshot of the tracker's counters. */
ordo_status_t ordo_tracker_metrics(ordo_tracker_t *tracker, ordo_tracker_metrics_t *out_metrics);

/** Waits until no reclamation is pending, or the deadline. */
ordo_status_t ordo_tracker_drain(ordo_tracker_t *tracker, ordo_deadline_t deadline);

/** Waits until all the work submitted before the call on every stream the
 * tracker has ordered, and every stream it owns (ordo_tracker_stream_create),
 * has run (ordo_stream_synchronize on each), then
 * until no reclamation is pending (ordo_tracker_drain). Called after every
 * buffer was released, it leaves nothing for ordo_tracker_destroy to
 * refuse (a buffer released after it may still have its reclamation
 * pending: a release can record the buffer's last use on its stream, which
 * the stream then has to pass). Returns ORDO_ERR_TIMEOUT
 * at the deadline while a stream still has work pending (even if another
 * failed), else the failure of the first stream, in the order the tracker
 * first used them, that failed on its own: a task or launch of its own
 * failed, where a stream that only waited for failed work fails too (the
 * first of those if no stream failed on its own). The message names the
 * stream and carries its failure's message; the streams it owns and has
 * not ordered come after the others. Else ORDO_OK. A failed stream's work never runs,
 * so it counts as done. May be called from any thread while others submit
 * under ordo_tracker_lock (it takes the lock only to read the list of
 * streams); work submitted after that read is not waited for. From a
 * host task on one of those streams (or a callback one ran) it is refused
 * (ORDO_ERR_BUSY): it would wait for itself. Not from a reclaim callback:
 * it would wait for itself until the deadline. */
ordo_status_t ordo_tracker_synchronize(ordo_tracker_t *tracker, ordo_deadline_t deadline);

/** The tracker's recursive lock: a thread may take it again while it holds
 * it; each lock needs its unlock. Unlocking a lock the thread does not hold
 * is refused. */
ordo_status_t ordo_tracker_lock(ordo_tracker_t *tracker);

/** Releases one hold of the tracker's lock (see ordo_tracker_lock). */
ordo_status_t ordo_tracker_unlock(ordo_tracker_t *tracker);

ORDO_END_DECLS

#endif
