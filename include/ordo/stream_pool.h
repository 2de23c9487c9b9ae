/** @file
 * ordo/stream_pool.h - a fixed set of streams handed out by workload.
 *
 * A pool owns compute streams and transfer streams, each class created at
 * its own priority. ordo_stream_pool_next hands out the next stream of a
 * class round-robin (ORDO_WORKLOAD_ANY: round-robin over all streams), so
 * independent work spreads over the streams while transfers and compute
 * keep their own priorities. Streams handed out are borrowed: the pool
 * destroys them with itself, and ordo_stream_destroy refuses them
 * (ORDO_ERR_BUSY).
 *
 * Thread-safety: ordo_stream_pool_next may be called from any thread;
 * destroy must not race with other calls.
 */
#ifndef ORDO_STREAM_POOL_H
#define ORDO_STREAM_POOL_H

#include "ordo/export.h"

#include <stddef.h>

#include "ordo/device.h"
#include "ordo/stream.h"

ORDO_BEGIN_DECLS

/** The class of work a stream is wanted for. */
typedef enum ordo_workload {
    ORDO_WORKLOAD_ANY = 0,      /**< any stream of the pool */
    ORDO_WORKLOAD_COMPUTE = 1,  /**< a compute stream */
    ORDO_WORKLOAD_TRANSFER = 2, /**< a transfer stream (a compute one when there are none) */
} ordo_workload_t;

/** The streams of a pool and their priorities. */
typedef struct ordo_stream_pool_config {
    size_t compute_streams;  /**< at least one (0: ORDO_ERR_INVALID_ARGUMENT); at most
                                  1024 with the transfer streams (ORDO_ERR_OUT_OF_RANGE) */
    int compute_priority;    /**< within the device's range; lower is more urgent (as CUDA) */
    size_t transfer_streams; /**< 0: transfers share the compute streams */
    int transfer_priority;   /**< within the device's range; lower is more urgent (as CUDA) */
    /** No flags are defined yet: 0 (others are refused), so later behaviour
     * can be asked for here without a new function. */
    uint32_t flags;
} ordo_stream_pool_config_t;

/** A fixed set of streams handed out by workload (opaque). */
typedef struct ordo_stream_pool ordo_stream_pool_t;

/** The defaults: one compute stream, no transfer streams, both at
 * priority 0 (the least urgent on every backend of today). */
ordo_status_t ordo_stream_pool_config_default(ordo_stream_pool_config_t *out_config);

/** Creates the pool and its streams on device (at most 1024 in all).
 * config NULL: the defaults (ordo_stream_pool_config_default). */
ordo_status_t ordo_stream_pool_create(ordo_device_t *device,
                                      const ordo_stream_pool_config_t *config,
                                      ordo_stream_pool_t **out_pool);

/** Destroys the pool and every stream in it. ORDO_ERR_BUSY, nothing done,
 * when called on one of its streams' own threads, while a coordinator takes
 * streams from the pool (ordo_coord_config_t.stream_pool), or while a
 * tracker or coordinator keeps one of its streams (ordo_stream_destroy). */
ordo_status_t ordo_stream_pool_destroy(ordo_stream_pool_t *pool);

/** The next stream for workload, round-robin within its class. */
ordo_status_t ordo_stream_pool_next(ordo_stream_pool_t *pool, ordo_workload_t workload,
                                    ordo_stream_t **out_stream);

/** How many streams serve workload. */
ordo_status_t ordo_stream_pool_size(ordo_stream_pool_t *pool, ordo_workload_t workload,
                                    size_t *out_count);

ORDO_END_DECLS

#endif
