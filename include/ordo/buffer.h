/** @file
 * ordo/buffer.h - tracked resources and their deferred reclamation.
 *
 * A buffer is any resource whose accesses a tracker orders (device memory,
 * a host array, a binding): ordo keeps its access history (the last writer
 * and the readers since), not its contents.
 *
 * Releasing a buffer ends its handle at once and defers its reclamation
 * until the last use of it on every stream that ever used it has completed
 * (or its stream has failed, so the use will never run): then the tracker's
 * reclaimer thread calls reclaim(ctx), where the caller frees the real
 * resource. The releasing thread never blocks. A buffer whose uses have
 * all run is reclaimed at once, on the releasing thread: on the CPU
 * backend that is known from each stream's progress (after a synchronize,
 * or an event behind the last use completed, even while the stream runs
 * later work); on CUDA, where work a launch function enqueues natively is
 * not numbered, once a recorded point after the use has been reached.
 *
 * Thread-safety: as the tracker (externally synchronised).
 */
#ifndef ORDO_BUFFER_H
#define ORDO_BUFFER_H

#include "ordo/export.h"

#include "ordo/tracker.h"

ORDO_BEGIN_DECLS

/** Frees the real resource; runs once, never under an ordo lock, never on a
 * stream's worker or a driver thread. It runs on the tracker's reclaimer
 * thread (or the releasing thread) beside the program's calls on the
 * tracker: it may call the tracker, release its buffers or free memory of
 * a pool on it only if every thread that uses the tracker holds
 * ordo_tracker_lock (the pool's own calls take it). */
typedef void (*ordo_reclaim_fn)(void *ctx);

/** Creates a buffer of tracker: a handle with an empty access history, to
 * name in access lists. */
ordo_status_t ordo_buffer_create(ordo_tracker_t *tracker, ordo_buffer_t **out_buffer);

/** Releases buffer: its handle ends now, and reclaim(ctx) runs once its
 * uses have completed (see above). reclaim may be NULL (nothing to free: the history is dropped
 * when the uses complete). */
ordo_status_t ordo_buffer_release(ordo_buffer_t *buffer, ordo_reclaim_fn reclaim, void *ctx);

ORDO_END_DECLS

#endif
