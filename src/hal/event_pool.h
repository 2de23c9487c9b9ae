/* Internal (device layer): a pool of opaque backend events, one per
 * (device, kind).
 *
 * The pool hands out the backend's own event objects (void *) and takes
 * them back. It creates and destroys them only through the backend's
 * callbacks, which it calls with its lock held: a callback must not call
 * back into the same pool.
 *
 * Acquire and release are lock-free in the common case: each thread keeps a
 * small cache ("magazine") of available events per pool and exchanges half
 * of it at a time with the pool's shared depot. Releasing checks the event
 * against the pool's registry of the events it made: a foreign event, an
 * event released twice (even by two threads at the same instant) or a
 * pooled/unpooled mismatch is refused with ORDO_ERR_INVALID_ARGUMENT and
 * changes nothing.
 *
 * With a maximum, each cache holds at most maximum / 8 events (at least
 * one), since events idle in one thread's cache are out of the others'
 * reach: a thread may create an unpooled event while pooled ones idle in
 * other threads' caches.
 *
 * A thread that exits returns its cached events to the depot; destroying
 * the pool reclaims the caches of threads still alive, which may go on
 * using other pools.
 *
 * Thread-safety: every function but ordo__event_pool_destroy may be called
 * concurrently on one pool; ordo__event_pool_trim reaches the calling thread's
 * cache and the depot, not other threads' caches.
 */
#ifndef ORDO_HAL_EVENT_POOL_H
#define ORDO_HAL_EVENT_POOL_H

#include <stddef.h>

#include "ordo/event_pool.h"
#include "ordo/status.h"

typedef struct event_pool event_pool_t;

typedef struct event_pool_backend {
    /* Creates one event of kind in *out_event; any status but ORDO_OK is a
     * failure and leaves nothing to destroy. */
    ordo_status_t (*create)(void *user, ordo_event_kind_t kind, void **out_event);
    /* Destroys an event from create. */
    void (*destroy)(void *user, void *event);
    void *user;
} event_pool_backend_t;

/* Makes a pool of events of kind, creating config->initial of them (config
 * NULL: ordo_event_pool_config_default). If the backend fails, every event
 * already created is destroyed and its status is returned. Refusals name
 * api (the public call that builds the pool). */
ordo_status_t ordo__event_pool_create(const event_pool_backend_t *backend, ordo_event_kind_t kind,
                                      const ordo_event_pool_config_t *config,
                                      event_pool_t **out_pool, const char *api);

/* Destroys every event and the pool; ORDO_ERR_BUSY (and nothing changes)
 * while any event, pooled or not, is acquired and not released. */
ordo_status_t ordo__event_pool_destroy(event_pool_t *pool);

/* Hands out an event; *out_pooled is 1 for a pooled one and 0 for one made
 * beyond the maximum, and must be passed back to ordo__event_pool_release. */
ordo_status_t ordo__event_pool_acquire(event_pool_t *pool, void **out_event, int *out_pooled);

/* Returns an event from ordo__event_pool_acquire with the pooled flag it came
 * with; an unpooled event is destroyed at once. */
ordo_status_t ordo__event_pool_release(event_pool_t *pool, void *event, int pooled);

/* The same, straight to the shared depot, past this thread's cache: for a
 * release made on a thread that never acquires (a stream's worker passing
 * the last record of a destroyed event), where a cache would keep the
 * event from every thread that does until that thread ends. */
ordo_status_t ordo__event_pool_release_shared(event_pool_t *pool, void *event, int pooled);

/* For events that never leave the library (a backend's own points): the
 * same as ordo__event_pool_acquire and ordo__event_pool_release without the checks
 * that guard against a caller's misuse (a double or foreign release):
 * the owner takes pooled events only (ORDO_ERR_RESOURCE_EXHAUSTED at a
 * maximum) and gives each back exactly once, to the pool it came from.
 * The pool must be live. Their acquires are not followed one by one for
 * the peak: high_water is sampled when caches trade with the depot. */
ordo_status_t ordo__event_pool_take(event_pool_t *pool, void **out_event);
void ordo__event_pool_give(event_pool_t *pool, void *event);

/* Destroys available events until at most keep are left (events cached by
 * other threads are counted but not reached). */
ordo_status_t ordo__event_pool_trim(event_pool_t *pool, size_t keep);

ordo_status_t ordo__event_pool_stats(event_pool_t *pool, ordo_event_pool_stats_t *out_stats);

#endif
