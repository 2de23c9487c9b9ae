/* Internal: the stream-ordered pool's layout, shared by the pieces of the
 * pool's translation unit (pool.c includes them: pool_range.c,
 * pool_frontier.c, pool_slots.c) and by the tests' census of it
 * (tests/pool_census.c), which reads it without changing it.
 *
 * A pool's memory comes from upstream in chunks. A chunk is cut into
 * blocks, which lie in address order and each either free (in a bin),
 * handed out, or a run: a block the pool took for itself and cuts into
 * slots of one size class. One descriptor (pool_block_t) stands for each
 * block and each slot; descriptors come from slabs and wait on a spare list
 * between uses. */
#ifndef ORDO_MEM_POOL_INTERNAL_H
#define ORDO_MEM_POOL_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include "core/tracker_internal.h"
#include "mem/resource.h"
#include "ordo/memory.h"

#define POOL_UNIT ((size_t)ORDO_MEM_DEFAULT_ALIGNMENT)
/* class_of(ORDO_MEM_MAX_BYTES / POOL_UNIT) + 1: a chunk may be as large as
 * ORDO_MEM_MAX_BYTES (2^38 units: 16 + (38 - 4) * 4). */
#define POOL_CLASSES 153
#define POOL_CLASS_WORDS 3
/* Entries a free block's death frontier keeps. */
#define POOL_DEATH_MAX 6
/* Bins per affinity: one set per stream, and the settled set. */
#define POOL_SETTLED ORDO_TRACKER_MAX_STREAMS
#define POOL_AFFINITIES (ORDO_TRACKER_MAX_STREAMS + 1)
/* Blocks of one size class looked at before moving on. */
#define POOL_SCAN 8
#define POOL_SLAB_BLOCKS 64
#define POOL_DEFAULT_CHUNK ((size_t)2 << 20)
/* Slots (small requests, one size class per run): the classes that may
 * have them (up to 64 KiB), the default bound, and a run's size, about
 * POOL_RUN_BYTES in 2 to POOL_RUN_SLOTS_MAX slots. */
#define POOL_SLOT_CLASSES 32
#define POOL_DEFAULT_SLOT_MAX ((size_t)64 << 10)
#define POOL_SLOT_MAX_UNITS 256 /* 64 KiB: class 31 ends just below */
#define POOL_RUN_SLOTS_MAX 16
#define POOL_RUN_BYTES ((size_t)64 << 10)
/* The allocation and free paths: one frame each, not one per helper. */
#define POOL_HOT static inline __attribute__((always_inline))

/* One entry of a death frontier: a use of a block on a stream, by point. */
typedef struct pool_death {
    uint32_t stream;
    uint64_t point;
} pool_death_t;

typedef struct pool_chunk {
    ordo_block_t *upstream_block;
    char *base;
    size_t size;
    struct pool_chunk *prev, *next;
} pool_chunk_t;

typedef struct pool_block {
    /* First: the handle. Aligned so that a block starts a cache line and
     * the fields the allocation path reads sit in its first two. */
    _Alignas(64) ordo_block_t base;
    char *start;
    size_t size;
    struct pool_block *addr_prev, *addr_next; /* neighbours in the chunk */
    struct pool_block *bin_prev, *bin_next;   /* free: its bin; spare: the spare list */
    /* 1: free, in a bin; 0: handed out (or a run); 2 and 3: free, held
     * out of the bins for a moment (settling, releasing runs). */
    uint8_t is_free;
    /* Which set of bins a free block or slot is in: the stream that freed
     * it, or POOL_SETTLED; for a run, the stream it serves. */
    uint8_t affinity;
    uint8_t cls;
    uint8_t death_count;
    uint8_t kind; /* POOL_KIND_* */
    union {
        pool_death_t death[POOL_DEATH_MAX]; /* free blocks and slots */
        struct {
            uint32_t made;    /* slots cut from it so far */
            uint32_t scratch; /* release_free_runs' count of its free slots */
        } run;                /* a run, while it serves slots */
    };
    pool_chunk_t *chunk;
    ordo_buffer_t history;
} pool_block_t;

/* What a descriptor is: a block of a chunk (free or handed out), a run
 * (a block of a chunk, handed out to the pool itself, whose memory is
 * slots), or a slot of a run (free or handed out; its addr_prev is the
 * run, addr_next NULL: slots are never merged). */
enum { POOL_KIND_BLOCK, POOL_KIND_SLOT, POOL_KIND_RUN };

/* One set of bins: a free list per size class, and a bitmap of the
 * classes whose list holds a block. */
typedef struct pool_bins {
    uint64_t nonempty[POOL_CLASS_WORDS];
    uint64_t slots_nonempty;
    pool_block_t *head[POOL_CLASSES];
    /* Free slots per class (slots_nonempty: which lists hold one), and the
     * run the stream's new slots of each class are cut from. */
    pool_block_t *slot_head[POOL_SLOT_CLASSES];
    pool_block_t *run[POOL_SLOT_CLASSES];
} pool_bins_t;

typedef struct pool_slab {
    struct pool_slab *next;
    pool_block_t blocks[POOL_SLAB_BLOCKS];
} pool_slab_t;

typedef struct pool {
    ordo_mem_resource_t base;
    ordo_tracker_t *tracker;
    ordo_mem_pool_config_t config;
    pool_bins_t *bins[POOL_AFFINITIES];
    /* Streams whose bins may hold a free block: a bit is set when a block
     * goes into the stream's bins and cleared when a search finds them
     * empty, so the hot paths never test for emptiness. */
    uint64_t affinity_mask;
    unsigned slot_classes; /* classes below this one are served as slots */
    pool_chunk_t *chunks;
    pool_block_t *spare;
    pool_slab_t *slabs;
    uint64_t blocks_out;
    _Atomic uint64_t bytes_outstanding;
    ordo_mem_pool_stats_t stats;
} pool_t;

/* The pool resource's kind (mem_resource_ops_t.kind): tells a pool apart. */
#define POOL_RESOURCE_KIND "pool"

/* --- Size classes: exact below 16 units, then four per power of two --- */

/* Both answers are computed and one is picked without a branch: mixed
 * sizes make a branch on the size's range mispredicted about half of the
 * time, which cost more than the few extra instructions. */
static inline __attribute__((always_inline)) unsigned class_of(size_t units) {
    unsigned e = 63u - (unsigned)__builtin_clzll(units | 16u);
    unsigned sub = (unsigned)(units >> (e - 2)) & 3u;
    unsigned large = 16u + (e - 4u) * 4u + sub;
    return units <= 16 ? (unsigned)units - 1 : large;
}

_Static_assert(ORDO_MEM_MAX_BYTES == (size_t)1 << 46 && POOL_CLASSES == 16 + (46 - 8 - 4) * 4 + 1,
               "POOL_CLASSES must hold the class of the largest chunk");
_Static_assert(POOL_CLASSES <= POOL_CLASS_WORDS * 64, "the bitmap must cover every class");

/* The largest size of class c, in units: a slot of c fits every request
 * of c. */
static inline unsigned class_max_units(unsigned c) {
    if (c < 16) {
        return c + 1;
    }
    unsigned e = 4 + (c - 16) / 4, sub = (c - 16) % 4;
    return ((5u + sub) << (e - 2)) - 1;
}

/* Slots per run of class c: about POOL_RUN_BYTES, at least two. */
static inline unsigned run_slots(unsigned c) {
    size_t n = POOL_RUN_BYTES / ((size_t)class_max_units(c) * POOL_UNIT);
    return n < 2 ? 2 : n > POOL_RUN_SLOTS_MAX ? POOL_RUN_SLOTS_MAX : (unsigned)n;
}

#endif
