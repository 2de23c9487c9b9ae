/* Internal: what other objects tell a stream pool (ordo/stream_pool.h). */
#ifndef ORDO_CORE_STREAM_POOL_H
#define ORDO_CORE_STREAM_POOL_H

#include "ordo/stream_pool.h"

/* A coordinator takes streams from pool (use) until it is destroyed
 * (unuse); the pool's destroy is refused in between. pool is live. */
void ordo__stream_pool_use(ordo_stream_pool_t *pool);
void ordo__stream_pool_unuse(ordo_stream_pool_t *pool);

/* The device of a live pool's streams. */
ordo_device_t *ordo__stream_pool_device(const ordo_stream_pool_t *pool);

#endif
