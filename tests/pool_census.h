/* The tests' census of a stream-ordered pool (tests/pool_census.c). */
#ifndef ORDO_TESTS_POOL_CENSUS_H
#define ORDO_TESTS_POOL_CENSUS_H

#include <stddef.h>

#include "ordo/memory.h"

/* What pool_census counted. */
typedef struct pool_census {
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
} pool_census_t;

/* Checks, under the tracker's lock, that every byte of every chunk lies in
 * exactly one block (in address order, linked both ways), that every
 * descriptor is either in a chunk, a slot of a run there (each slot of a
 * run once, in its place) or spare, that each free slot sits in exactly
 * its affinity's list of its class, that each free block sits in
 * exactly the bin of its affinity and size class (and each bin holds only
 * such blocks), that the bins' bitmaps say which bins hold blocks and the
 * affinity mask names at least every stream whose bins do, and that the
 * counters match the blocks handed out. Reads the pool only.
 * ORDO_ERR_CORRUPTED (the message says what) when one does not hold;
 * ORDO_ERR_INVALID_ARGUMENT when resource is not a pool;
 * ORDO_ERR_OUT_OF_MEMORY when the census' own scratch cannot be had. */
ordo_status_t pool_census(ordo_mem_resource_t *resource, pool_census_t *out_census);

#endif
