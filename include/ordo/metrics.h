/** @file
 * ordo/metrics.h - one snapshot of what ordo's components have counted.
 *
 * Each component keeps its own counters (ordo_coord_metrics,
 * ordo_waiter_metrics, ordo_tracker_metrics, the device's event pool
 * statistics). A snapshot reads the ones it is given, one after another
 * (each component's counters are consistent within themselves, not across
 * components), and prints them for a person or a log.
 *
 * Thread-safety: snapshot and format may be called from any thread while
 * the components are in use.
 */
#ifndef ORDO_METRICS_H
#define ORDO_METRICS_H

#include "ordo/export.h"

#include <stddef.h>

#include "ordo/coordinator.h"
#include "ordo/device.h"
#include "ordo/event_pool.h"
#include "ordo/tracker.h"
#include "ordo/waiter.h"

ORDO_BEGIN_DECLS

/** The components to read; any may be NULL (its part of the snapshot is
 * zero and marked absent). */
typedef struct ordo_metrics_sources {
    ordo_device_t *device;   /**< its plain and timing event pools */
    ordo_coord_t *coord;     /**< operations, coordination time, deadlocks */
    ordo_waiter_t *waiter;   /**< asynchronous waits */
    ordo_tracker_t *tracker; /**< automatic ordering: waits emitted and elided */
} ordo_metrics_sources_t;

/** A snapshot of every component given. */
typedef struct ordo_metrics {
    bool has_device;                   /**< events[] were read */
    bool has_coord;                    /**< coord was read */
    bool has_waiter;                   /**< waiter was read */
    bool has_tracker;                  /**< tracker was read */
    ordo_event_pool_stats_t events[2]; /**< by ordo_event_kind_t: plain, timing */
    ordo_coord_metrics_t coord;        /**< the coordinator's counters */
    ordo_waiter_metrics_t waiter;      /**< the waiter's counters */
    ordo_tracker_metrics_t tracker;    /**< the tracker's counters */
} ordo_metrics_t;

/** Reads every source given into *out_metrics. A device without timing
 * events leaves events[ORDO_EVENT_TIMING] zero. */
ordo_status_t ordo_metrics_snapshot(const ordo_metrics_sources_t *sources,
                                    ordo_metrics_t *out_metrics);

/** Writes the snapshot as readable text, one line per component (two for
 * the device's plain and timing events), into
 * text (always terminated when capacity > 0). *out_length is the length
 * the whole text needs (without the terminator), so a caller can retry
 * with a larger buffer; ORDO_ERR_OUT_OF_RANGE when it was cut. Capacity
 * 0 (text may then be NULL) asks the length alone: ORDO_OK. */
ordo_status_t ordo_metrics_format(const ordo_metrics_t *metrics, char *text, size_t capacity,
                                  size_t *out_length);

ORDO_END_DECLS

#endif
