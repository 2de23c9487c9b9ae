/** @file
 * ordo/event.h - events: points in a stream's order.
 *
 * An event is recorded on a stream; it completes when the stream reaches
 * that point. Events come from their device's event pool (create acquires,
 * destroy releases), so recording in a loop allocates nothing. A timing
 * event also notes when its point was reached, for ordo_event_elapsed_ns.
 * Re-recording an event moves it to a new point.
 *
 * An event never recorded has no point: querying, synchronizing, waiting
 * on it or measuring it is refused with ORDO_ERR_INVALID_ARGUMENT, never
 * treated as complete or as a wait on nothing.
 *
 * Thread-safety: recording or destroying one event must not race with
 * other calls on it (a synchronize still waiting when the event goes back
 * to its pool would read an event handed out again); query, synchronize
 * and stream waits on a recorded event may run from any thread.
 */
#ifndef ORDO_EVENT_H
#define ORDO_EVENT_H

#include "ordo/export.h"

#include <stdint.h>

#include "ordo/device.h"
#include "ordo/event_pool.h"
#include "ordo/stream.h"

ORDO_BEGIN_DECLS

/** A point in one stream's order (opaque; from its device's event pool). */
typedef struct ordo_event ordo_event_t;

/** Takes an event of kind from device's pool. ORDO_ERR_UNSUPPORTED for a
 * timing event on a device without timing events. */
ordo_status_t ordo_event_create(ordo_device_t *device, ordo_event_kind_t kind,
                                ordo_event_t **out_event);

/** Returns the event to its pool: at once, or, if a record of it is still
 * pending, when its stream passes that record. The handle is invalid from
 * this call on. */
ordo_status_t ordo_event_destroy(ordo_event_t *event);

/** Records event at the current end of stream's work (moving it there if
 * it was recorded before). The stream must be of the event's device. */
ordo_status_t ordo_event_record(ordo_event_t *event, ordo_stream_t *stream);

/** Polls the event's point: *out_complete is true once the point is reached. Returns the stream's
 * failure if it failed before the point. */
ordo_status_t ordo_event_query(ordo_event_t *event, bool *out_complete);

/** Blocks until the event's point is reached. Returns the stream's failure
 * if it failed before the point, ORDO_ERR_TIMEOUT at the deadline. */
ordo_status_t ordo_event_synchronize(ordo_event_t *event, ordo_deadline_t deadline);

/** Nanoseconds from start's point to end's; both timing events, complete
 * (ORDO_ERR_BUSY before). Each event's time is that of its newest record:
 * an older record of it that its stream passes later moves nothing.
 * ORDO_ERR_UNAVAILABLE when an event's newest record has no time. */
ordo_status_t ordo_event_elapsed_ns(ordo_event_t *start, ordo_event_t *end, int64_t *out_ns);

ORDO_END_DECLS

#endif
