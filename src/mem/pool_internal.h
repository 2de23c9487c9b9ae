/* Internal: a consistency check of the stream-ordered pool's layout (its
 * chunks, blocks, bins and descriptors), for tests. */
#ifndef ORDO_MEM_POOL_INTERNAL_H
#define ORDO_MEM_POOL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "ordo/memory.h"

/* What ordo__mem_pool_census counted. */
typedef struct ordo__mem_pool_census {
    size_t chunks;
    size_t live_blocks;    /* handed out */
    size_t free_blocks;    /* in a bin */
    size_t settled_blocks; /* of which in the settled bins */
    size_t runs;           /* blocks holding slots */
    size_t free_slots;     /* slots in a slot list (live ones count as live blocks) */
    size_t descriptors;    /* in the pool's slabs */
    size_t spare;          /* of which on the spare list */
    /* Adjacent free blocks whose death frontiers would fit together in
     * one block: the pool merges those when the second one is freed, so
     * they stay apart only after settling dropped entries of both. */
    size_t mergeable_pairs;
} mem_pool_census_t;

/* Checks, under the tracker's lock, that every byte of every chunk lies in
 * exactly one block (in address order, linked both ways), that every
 * descriptor is either in a chunk, a slot of a run there (each slot of a
 * run once, in its place) or spare, that each free slot sits in exactly
 * its affinity's list of its class, that each free block sits in
 * exactly the bin of its affinity and size class (and each bin holds only
 * such blocks), that the bins' bitmaps say which bins hold blocks and the
 * affinity mask names at least every stream whose bins do, and that the
 * counters match the blocks handed out.
 * ORDO_ERR_CORRUPTED (the message says what) when one does not hold;
 * ORDO_ERR_INVALID_ARGUMENT when resource is not a pool. */
ordo_status_t ordo__mem_pool_census(ordo_mem_resource_t *resource, mem_pool_census_t *out_census);

#endif
