/** @file
 * ordo/link.h - "when signal A reaches x, signal B to y".
 *
 * A link is a caller-owned timepoint on A whose action is to signal B. If A
 * fails first, B fails with A's status and message (ORDO_ERR_CANCELLED
 * included); if A is destroyed first, B fails with ORDO_ERR_CANCELLED and
 * a message saying so. So a chain of links carries a failure to
 * its end instead of leaving waiters on the last signal hanging. An armed
 * link holds a reference on A and on B until it fires or is cancelled: end
 * A with ordo_signal_destroy (which fires the link with a cancellation), not
 * only by releasing it.
 *
 * The link's memory must stay valid while it is armed or due. It is its
 * owner's again (to re-arm or free) once ordo_link_cancel prevented it, or
 * once it has started to act: ordo marks it fired before it signals or
 * fails B, so a thread that sees B given the link's outcome may reuse the
 * link at once.
 *
 * Thread-safety: as for timepoints (ordo/timepoint.h).
 */
#ifndef ORDO_LINK_H
#define ORDO_LINK_H

#include "ordo/export.h"

#include <stdint.h>

#include "ordo/signal.h"
#include "ordo/timepoint.h"

ORDO_BEGIN_DECLS

/** A link: a caller-owned timepoint on the source and the signal it
 * signals. Zero-initialise before first use; fields are ordo's while armed. */
typedef struct ordo_link {
    ordo_timepoint_t timepoint_; /**< internal: the timepoint armed on the source */
    ordo_signal_t *target_;      /**< internal: the signal to signal (referenced while armed) */
    uint64_t target_value_;      /**< internal: the value to signal it to */
} ordo_link_t;

/** Arms link: when source reaches source_value, target is signalled to
 * target_value; if source fails or is destroyed first, target fails (see
 * above). ORDO_ERR_BUSY while the link is armed, or due and not yet run. */
ordo_status_t ordo_link_arm(ordo_link_t *link, ordo_signal_t *source, uint64_t source_value,
                            ordo_signal_t *target, uint64_t target_value);

/** As ordo_timepoint_cancel. A prevented link releases its target at once. */
ordo_status_t ordo_link_cancel(ordo_link_t *link, ordo_cancel_result_t *out_result);

ORDO_END_DECLS

#endif
