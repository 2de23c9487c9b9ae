/** @file
 * ordo/alloc.h - optional host allocator hooks.
 *
 * Every host allocation ordo makes for its own objects goes through these
 * hooks (the default is the C library's aligned_alloc/free), except those
 * of traces (ordo/trace.h): the room a trace records into is mapped with
 * mmap, and each recording thread's record (kept for the life of the
 * process) and the buffers of the export come from the C library. What
 * belongs to a thread rather than to an object also comes from the C
 * library, made at the thread's first need and freed by pthread key
 * destructors when the thread exits (the main thread's stays until the
 * process ends): the text of its last error and its table of event-pool
 * caches. A program
 * that wants ordo's memory in its own arena installs hooks once, before
 * creating any ordo object. Caller-owned records (timepoints, links) never
 * allocate.
 *
 * Thread-safety: ordo_allocator_set must not race with other ordo calls; it
 * refuses (ORDO_ERR_BUSY) while memory obtained through the current hooks is
 * still live, so blocks are always returned to the allocator that made them.
 * The hooks are called from any thread, concurrently; none of ordo's locks
 * is held for the hooks' sake, so calls on different threads do not wait
 * for each other. A hook may be called while ordo holds one of its internal
 * locks (a new slab for a queue), so it must be thread-safe and must not
 * call into ordo; it may take locks of its own.
 */
#ifndef ORDO_ALLOC_H
#define ORDO_ALLOC_H

#include "ordo/export.h"

#include <stddef.h>

#include "ordo/status.h"

ORDO_BEGIN_DECLS

/** Host allocator hooks: two functions and the pointer passed to both. */
typedef struct ordo_allocator {
    /** Return size bytes aligned to alignment (a power of two, at least
     * sizeof(void *)), or NULL. */
    void *(*allocate)(void *user, size_t size, size_t alignment);
    /** Return a block from allocate; size and alignment are those it was
     * requested with. */
    void (*deallocate)(void *user, void *block, size_t size, size_t alignment);
    void *user; /**< Passed as the first argument of both functions. */
} ordo_allocator_t;

/** Install hooks; NULL restores the default. Both functions must be set. */
ordo_status_t ordo_allocator_set(const ordo_allocator_t *allocator);

/** Number of host blocks currently held by ordo through the hooks. */
ordo_status_t ordo_allocator_live_blocks(size_t *out_count);

ORDO_END_DECLS

#endif
