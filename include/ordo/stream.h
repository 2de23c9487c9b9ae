/** @file
 * ordo/stream.h - in-order streams of work on a device.
 *
 * A stream runs what is submitted to it in submission order: host tasks,
 * signals of timeline signals and waits on them, event records. A wait in
 * stream order holds back only that stream. On the CPU backend each stream
 * is a worker thread; idle workers sleep and cost nothing.
 *
 * Failure is sticky. A host task that returns an error fails its stream
 * with that status (a value that is no ordo status, with
 * ORDO_ERR_ABORTED): later work does not run, every signal point still
 * pending on the stream (and every one submitted later) fails its signal
 * with the stream's status, so work on other streams waiting on those
 * points fails in turn; a stream whose wait sees a failed signal fails the
 * same way. Submitting to a failed stream returns its failure (and a
 * stream_signal then fails its signal at once, so nobody waits for it).
 *
 * Destroying a stream with work pending is defined: work not yet started
 * is dropped, its signal points fail with ORDO_ERR_CANCELLED, a wait in
 * progress is abandoned, and destroy returns once a host task already
 * running has returned.
 *
 * Thread-safety: submission to one stream from many threads is safe and
 * the submissions are ordered as their calls are; so are the getters and
 * the name calls, from any thread (host tasks and callbacks included);
 * destroy must not race with any other call on the same stream.
 */
#ifndef ORDO_STREAM_H
#define ORDO_STREAM_H

#include "ordo/export.h"

#include <stdint.h>

#include "ordo/device.h"
#include "ordo/signal.h"
#include "ordo/status.h"
#include "ordo/time.h"

ORDO_BEGIN_DECLS

/** An in-order stream of work on a device (opaque). */
typedef struct ordo_stream ordo_stream_t;

/** A point in one stream's order (ordo/event.h). */
typedef struct ordo_event ordo_event_t;

/** Room for a stream's name, terminator included (ordo_stream_set_name). */
#define ORDO_STREAM_NAME_MAX 48u

/** A host task: runs in stream order; a non-OK return fails the stream,
 * with the status returned, or ORDO_ERR_ABORTED for a value that is no
 * ordo status. The stream's failure message reads "host task N returned
 * STATUS" (N: the task's operation number on the stream), or "host task N
 * returned VALUE, not an ordo status (ORDO_ERR_ABORTED)" (VALUE in
 * decimal), followed by ": " and the
 * task's own text when it failed with ordo_fail (or after an ordo call
 * that failed inside it), cut to ORDO_SIGNAL_MESSAGE_MAX - 1 bytes.
 * It must not wait on work queued behind it on the same stream. */
typedef ordo_status_t (*ordo_host_fn)(void *ctx);

/** Creates a stream on device, holding a reference on it; priority in
 * [info.priority_greatest, info.priority_least]. Priorities follow CUDA's
 * convention: a numerically lower value is more urgent (the CPU backend
 * offers 0, the default and least urgent, to -2). */
ordo_status_t ordo_stream_create(ordo_device_t *device, int priority, ordo_stream_t **out_stream);

/** Destroys the stream: work not yet started is dropped (see above), and
 * the call returns once a host task already running has returned.
 * ORDO_ERR_BUSY, nothing done: called on one of the stream's own threads
 * (from its host task, or from a signal callback the stream ran), where it
 * would wait for itself; on a stream of a stream pool (the pool destroys
 * it); on a stream a tracker owns (ordo_tracker_stream_create: the
 * tracker's close or destroy destroys it); on a stream a tracker or a
 * coordinator still keeps in its table
 * (one it ordered work on: destroy that first). A barrier does not keep
 * its members: it reports a member destroyed since with ORDO_ERR_DESTROYED
 * (ordo/barrier.h).
 *
 * The wait for the running task has no deadline. From a host task of
 * another stream it is allowed, but two streams whose tasks destroy each
 * other (or a longer ring of them) wait for one another forever: destroy
 * streams from threads of the program's own, not from tasks that another
 * destroy may be waiting for. */
ordo_status_t ordo_stream_destroy(ordo_stream_t *stream);

/** Enqueues fn(ctx) as a host task. ctx must stay valid until the task
 * has run, or has been dropped: once the stream has failed, or is
 * destroyed, tasks not yet started never run, fn is not called and ordo
 * never reads or frees ctx (it has no destructor to call): the caller
 * frees it. It is safe to free the contexts of a stream's tasks after
 * ordo_stream_synchronize returned ORDO_OK for work submitted after them,
 * or after ordo_stream_destroy returned (it waits for a task already
 * running). */
ordo_status_t ordo_stream_host_task(ordo_stream_t *stream, ordo_host_fn fn, void *ctx);

/** When the stream reaches this point, signal (value). The stream holds a
 * reference on the signal until then. */
ordo_status_t ordo_stream_signal(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value);

/** Work submitted after this waits until signal reaches value. If the
 * signal fails (or is destroyed) first, the stream fails with that status. */
ordo_status_t ordo_stream_wait(ordo_stream_t *stream, ordo_signal_t *signal, uint64_t value);

/** Work submitted to stream after this waits for event's point (its last
 * record; ordo/event.h). ORDO_ERR_INVALID_ARGUMENT for an event never recorded.
 * The event may be another device's: the wait goes through its timeline,
 * a signal (as ordo_stream_wait). */
ordo_status_t ordo_stream_wait_event(ordo_stream_t *stream, ordo_event_t *event);

/** Waits until everything submitted before the call has run. Returns the
 * stream's failure if it failed, ORDO_ERR_TIMEOUT at the deadline, and
 * ORDO_ERR_BUSY on a thread of the stream itself (a host task, or a
 * callback it ran), which would wait for itself. */
ordo_status_t ordo_stream_synchronize(ordo_stream_t *stream, ordo_deadline_t deadline);

/** ORDO_OK while healthy, else the status the stream failed with. */
ordo_status_t ordo_stream_status(ordo_stream_t *stream);

/** Non-zero in *out_healthy while the stream has not failed. */
ordo_status_t ordo_stream_is_healthy(ordo_stream_t *stream, bool *out_healthy);

/** The priority the stream was created with. */
ordo_status_t ordo_stream_priority(ordo_stream_t *stream, int *out_priority);

/** The stream's device (no reference is added: the stream holds one). */
ordo_status_t ordo_stream_device(ordo_stream_t *stream, ordo_device_t **out_device);

/** Names the stream for diagnostics (stall reports, ordo/stall.h; trace
 * tracks, ordo/trace.h; the timelines a tracker makes for it): name is
 * copied, truncated to ORDO_STREAM_NAME_MAX - 1 bytes; NULL or "" clears
 * it. Costs nothing on submission. The name is kept under the device's
 * registry of streams, so this and ordo_stream_name wait while a stall
 * report takes its snapshot. */
ordo_status_t ordo_stream_set_name(ordo_stream_t *stream, const char *name);

/** Copies the stream's name into out_name (truncated to capacity bytes,
 * terminator included), or, when it has none, its address ("0x55d0c3a0"). */
ordo_status_t ordo_stream_name(ordo_stream_t *stream, char *out_name, size_t capacity);

ORDO_END_DECLS

#endif
