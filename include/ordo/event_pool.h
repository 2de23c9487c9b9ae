/** @file
 * ordo/event_pool.h - the policy and statistics of an event pool.
 *
 * Every device keeps one pool of backend events per kind, so that recording
 * events in a loop creates nothing after warm-up. A pool starts with
 * `initial` events, creates `growth` more at once whenever it runs dry, and
 * never keeps more than `maximum` pooled events alive (0: no limit); past the
 * maximum, events are still handed out, but created and destroyed one by one
 * ("unpooled") and counted apart, so a too-small maximum shows in the
 * statistics instead of failing the work.
 *
 * Statistics are exact when read while no thread is acquiring or
 * releasing; read during such calls, the per-thread parts they are summed
 * from may be a moment apart (in_use is never negative, nor above
 * high_water). high_water is exact while one thread alone has used
 * the pool (a thread that used it keeps a cache of it until it exits);
 * otherwise it is sampled (whenever a thread's cache trades with the
 * pool's shared store, and at every statistics read) and never exceeds a
 * value in_use really took.
 *
 * Thread-safety: a pool may be used from any number of threads at once;
 * only its destruction must not race with other calls on it.
 */
#ifndef ORDO_EVENT_POOL_H
#define ORDO_EVENT_POOL_H

#include "ordo/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ordo/status.h"

ORDO_BEGIN_DECLS

/** What an event notes. */
typedef enum ordo_event_kind {
    ORDO_EVENT_PLAIN = 0,  /**< ordering only */
    ORDO_EVENT_TIMING = 1, /**< also notes when it was reached */
} ordo_event_kind_t;

/** The policy of an event pool. */
typedef struct ordo_event_pool_config {
    size_t initial; /**< events created when the pool is made; at most 2^24 */
    size_t growth;  /**< events created at once when the pool is empty; 1 to 2^24 */
    size_t maximum; /**< pooled events alive at most; 0: unbounded */
} ordo_event_pool_config_t;

/** The statistics of an event pool (ordo_device_event_pool_stats). */
typedef struct ordo_event_pool_stats {
    size_t available;            /**< pooled events ready to hand out */
    size_t in_use;               /**< events handed out and not yet returned (pooled or not) */
    size_t high_water;           /**< the largest in_use seen */
    uint64_t created_total;      /**< events the backend created, pooled or not */
    uint64_t destroyed_total;    /**< events the backend destroyed, pooled or not */
    uint64_t unpooled_created;   /**< of created_total: beyond the maximum */
    uint64_t unpooled_destroyed; /**< of destroyed_total: unpooled ones returned */
    uint64_t acquires;           /**< successful acquisitions */
    uint64_t releases;           /**< successful returns */
} ordo_event_pool_stats_t;

/** Events a pool creates up front by default. */
#define ORDO_EVENT_POOL_DEFAULT_INITIAL 16
/** Events a pool creates at once, by default, when it runs dry. */
#define ORDO_EVENT_POOL_DEFAULT_GROWTH 16

/** The default policy: ORDO_EVENT_POOL_DEFAULT_INITIAL events up front,
 * ORDO_EVENT_POOL_DEFAULT_GROWTH at a time, no maximum. */
ordo_status_t ordo_event_pool_config_default(ordo_event_pool_config_t *out_config);

ORDO_END_DECLS

#endif
