/** @file
 * ordo/barrier.h - cross-stream barriers.
 *
 * A barrier over a set of streams of one device comes in two forms.
 *
 * Device barrier (ordo_barrier_arrive, ordo_barrier_streams): every stream
 * of the set waits, in its own order, until every other stream of the set
 * has run everything submitted to it before the call. The host never
 * blocks: the call enqueues signals and waits on the streams and returns.
 * Work submitted to any of the streams after the call runs after all of
 * their work from before it.
 *
 * Host synchronize (ordo_barrier_synchronize,
 * ordo_barrier_synchronize_streams): the calling thread blocks until every
 * stream of the set has run everything submitted to it before the call, or
 * the deadline passes, and reports how long that took.
 *
 * Schemes. Each stream's point is recorded with a stream signal on a
 * timeline of the barrier; the waits are device-side stream waits on those
 * timelines:
 * - hub (gather and broadcast): every stream but the first signals its
 *   timeline, the first stream (the hub) waits for all of them and then
 *   signals its own, every other stream waits for the hub's. 3n - 2 stream
 *   operations, 2(n - 1) waits; a release takes two hand-offs (the last
 *   arrival wakes the hub, the hub wakes the rest).
 * - all-to-all: every stream signals its timeline and waits for every
 *   other's. n^2 stream operations, n(n - 1) waits; a release takes one
 *   hand-off.
 *
 * ORDO_BARRIER_SCHEME_AUTO picks all-to-all for two streams (both schemes
 * then cost four operations, and all-to-all releases sooner) and the hub
 * from three on, where its linear cost wins on the host (10 operations
 * instead of 16 for four streams, 190 instead of 4096 for 64).
 *
 * Failures propagate: a failed stream of the set fails its timeline, so
 * every stream waiting on it fails with the same status (through the hub
 * as well), and synchronize returns the failure. A barrier's timelines
 * stay failed: a barrier whose member failed fails every later use; make a
 * new one over healthy streams.
 *
 * Sets: 1 to ORDO_BARRIER_MAX_STREAMS streams of one device; NULL entries
 * are refused; a stream listed more than once takes part once (duplicates
 * merge, as the same buffer listed twice in a tracker submission does).
 * A set of one stream is valid: the device form then enqueues nothing.
 *
 * Thread-safety: a barrier object is externally synchronised (one call on
 * it at a time); destroy must not race its other calls. Barriers whose
 * stream sets overlap must not arrive concurrently from different threads:
 * their submissions could interleave into a cycle of waits (ordo/stall.h
 * explains such a hang). Member streams may be used by other threads
 * between calls. The one-shot functions follow the rules of the streams.
 */
#ifndef ORDO_BARRIER_H
#define ORDO_BARRIER_H

#include "ordo/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ordo/status.h"
#include "ordo/stream.h"
#include "ordo/time.h"

ORDO_BEGIN_DECLS

/** The most streams one barrier spans. */
#define ORDO_BARRIER_MAX_STREAMS 256u

/** A reusable barrier over a set of streams of one device (opaque). */
typedef struct ordo_barrier ordo_barrier_t;

/** How a barrier's streams signal and wait for one another. */
typedef enum ordo_barrier_scheme {
    ORDO_BARRIER_SCHEME_AUTO = 0,       /**< all-to-all for two streams, the hub beyond */
    ORDO_BARRIER_SCHEME_HUB = 1,        /**< 2(n-1) waits, two hand-offs */
    ORDO_BARRIER_SCHEME_ALL_TO_ALL = 2, /**< n(n-1) waits, one hand-off */
} ordo_barrier_scheme_t;

/** A reusable barrier over streams[0..count). It creates its timelines
 * once (named "barrier <address>[i]" for stall reports), so each later
 * arrive or synchronize allocates nothing. The streams must stay alive
 * while the barrier is used: a member destroyed since is reported as
 * ORDO_ERR_DESTROYED (detected without touching its memory). */
ordo_status_t ordo_barrier_create(ordo_stream_t *const *streams, size_t count,
                                  ordo_barrier_scheme_t scheme, ordo_barrier_t **out_barrier);

/** Drops the barrier. Operations it enqueued and not yet run keep what
 * they need alive and still run. */
ordo_status_t ordo_barrier_destroy(ordo_barrier_t *barrier);

/** The device barrier: enqueues the scheme's signals and waits and returns
 * without blocking. Returns the failure of a failed member (after still
 * enqueueing on the others, which then fail instead of hanging). If an
 * operation cannot be enqueued (out of memory), the error is returned and
 * the timelines involved are failed so no stream hangs; a stream whose
 * wait could not be enqueued is not held back. */
ordo_status_t ordo_barrier_arrive(ordo_barrier_t *barrier);

/** The host synchronize: blocks until every member has run everything
 * submitted to it before the call. *out_elapsed_ns (may be NULL) receives
 * the time the call took, measured on CLOCK_MONOTONIC. Returns
 * ORDO_ERR_TIMEOUT if the deadline passes first (even if a member failed:
 * other members may then still be running), otherwise the failure of the
 * first failed member in set order, otherwise ORDO_OK; it always waits for
 * the healthy members before returning a failure. */
ordo_status_t ordo_barrier_synchronize(ordo_barrier_t *barrier, ordo_deadline_t deadline,
                                       uint64_t *out_elapsed_ns);

/** The number of distinct streams in the barrier's set. */
ordo_status_t ordo_barrier_stream_count(ordo_barrier_t *barrier, size_t *out_count);

/** A one-shot device barrier with the automatic scheme: as
 * ordo_barrier_create + ordo_barrier_arrive + ordo_barrier_destroy (it
 * creates the timelines each time; a reusable barrier does not). */
ordo_status_t ordo_barrier_streams(ordo_stream_t *const *streams, size_t count);

/** A one-shot host synchronize over a set: each stream's point is recorded
 * with a pooled event first, then all are awaited with one deadline;
 * results as for ordo_barrier_synchronize. */
ordo_status_t ordo_barrier_synchronize_streams(ordo_stream_t *const *streams, size_t count,
                                               ordo_deadline_t deadline, uint64_t *out_elapsed_ns);

ORDO_END_DECLS

#endif
