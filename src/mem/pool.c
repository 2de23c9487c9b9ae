/* The stream-ordered pool.
 *
 * Memory comes from upstream in chunks, which are split into blocks and
 * coalesced again. Every block embeds a tracked buffer: its access history
 * in the pool's tracker. Allocation is a write by the allocating stream at a
 * fresh point of it (the block's birth), so any later use on another stream
 * is ordered after the allocation and, through the allocating stream's
 * frontier, after whatever the reuse itself waited for.
 *
 * Freeing computes the block's death frontier: the last use on every stream
 * that the freeing stream has not already waited for, plus a fresh point of
 * the freeing stream itself. A free block is reusable on stream T once T's
 * frontier covers every entry (an entry on T itself is covered: T runs in
 * order). That is a comparison of a few integers; nothing is polled. When
 * no covered block fits, the policy decides: emit device waits on T for the
 * entries it lacks (ORDO_MEM_REUSE_WAIT) or leave the block and take or
 * grow another (ORDO_MEM_REUSE_OTHER_BLOCK).
 *
 * Free blocks sit in bins by affinity (the stream that freed them, or
 * "settled" once every entry is known complete) and size class. The host
 * checks completion (settles) only in reap_pending, trim and destroy, and
 * before growing when upstream is out of memory.
 *
 * All state is guarded by the tracker's lock. */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/trace.h"
#include "core/frontier.h"
#include "core/tracker_internal.h"
#include "hal/hal.h"
#include "mem/pool_internal.h"
#include "mem/resource.h"

#define POOL_UNIT ((size_t)ORDO_MEM_DEFAULT_ALIGNMENT)
/* class_of(ORDO_MEM_MAX_BYTES / POOL_UNIT) + 1: a chunk may be as large as
 * ORDO_MEM_MAX_BYTES (2^38 units: 16 + (38 - 4) * 4). */
#define POOL_CLASSES 153
#define POOL_CLASS_WORDS 3
#define POOL_DEATH_MAX 6
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
    uint8_t is_free;
    uint8_t affinity;
    uint8_t cls;
    uint8_t death_count;
    uint8_t kind; /* POOL_KIND_* */
    union {
        pool_death_t death[POOL_DEATH_MAX]; /* free blocks and slots */
        struct {
            uint32_t made;    /* slots cut from it so far */
            uint32_t scratch; /* release_free_runs' count of its free slots, the
                               * census' mask of the slots it has seen */
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

/* --- Bins --- */

static inline int bins_empty(const pool_bins_t *bins) {
    _Static_assert(POOL_CLASS_WORDS == 3, "one term per word");
    return !(bins->nonempty[0] | bins->nonempty[1] | bins->nonempty[2] | bins->slots_nonempty);
}

/* Non-zero when the bins of affinity a hold a free block. */
static inline int bins_hold(const pool_t *p, unsigned a) {
    return p->bins[a] && !bins_empty(p->bins[a]);
}

/* The free lists of bins: the bins by class, then the slots by class. */
#define POOL_LISTS (POOL_CLASSES + POOL_SLOT_CLASSES)
static inline pool_block_t *bins_list(const pool_bins_t *bins, unsigned k) {
    return k < POOL_CLASSES ? bins->head[k] : bins->slot_head[k - POOL_CLASSES];
}

/* The affinity mask's bit for affinity a; none for the settled bins. */
static inline uint64_t affinity_bit(unsigned a) {
    return (uint64_t)(a < POOL_SETTLED) << (a % 64);
}

/* Clears stream a's bit (set: its bins exist) if a search found its bins
 * empty; non-zero if it did. */
static inline int affinity_drop_if_empty(pool_t *p, unsigned a) {
    if (!bins_empty(p->bins[a])) {
        return 0;
    }
    p->affinity_mask &= ~((uint64_t)1 << a);
    return 1;
}

/* Links b at the head of the free list *head, whose bit in *bits says
 * that it holds a block. */
static inline __attribute__((always_inline)) void list_push(pool_block_t **head, uint64_t *bits,
                                                            unsigned bit, pool_block_t *b) {
    pool_block_t *next = *head;
    b->bin_prev = NULL;
    b->bin_next = next;
    *head = b;
    if (next) {
        next->bin_prev = b;
    }
    *bits |= (uint64_t)1 << bit;
}

/* Unlinks b from the free list *head (list_push's other arguments). */
static inline __attribute__((always_inline)) void list_unlink(pool_block_t **head, uint64_t *bits,
                                                              unsigned bit, pool_block_t *b) {
    if (b->bin_next) {
        b->bin_next->bin_prev = b->bin_prev;
    }
    if (b->bin_prev) {
        b->bin_prev->bin_next = b->bin_next;
        return;
    }
    *head = b->bin_next;
    if (!b->bin_next) {
        *bits &= ~((uint64_t)1 << bit);
    }
}

/* Puts free b into its affinity's bin of class c, its size's class. */
static inline __attribute__((always_inline)) void bin_insert_as(pool_t *p, pool_block_t *b,
                                                                unsigned c) {
    pool_bins_t *bins = p->bins[b->affinity];
    b->cls = (uint8_t)c;
    list_push(&bins->head[c], &bins->nonempty[c / 64], c % 64, b);
    p->affinity_mask |= affinity_bit(b->affinity);
}

static inline __attribute__((always_inline)) void bin_insert(pool_t *p, pool_block_t *b) {
    bin_insert_as(p, b, class_of(b->size / POOL_UNIT));
}

static inline __attribute__((always_inline)) void bin_remove(pool_t *p, pool_block_t *b) {
    pool_bins_t *bins = p->bins[b->affinity];
    list_unlink(&bins->head[b->cls], &bins->nonempty[b->cls / 64], b->cls % 64, b);
}

static ordo_status_t bins_ensure(pool_t *p, unsigned affinity, const char *api) {
    if (!p->bins[affinity]) {
        p->bins[affinity] = ordo__alloc(sizeof(pool_bins_t), 64);
        if (!p->bins[affinity]) {
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate the pool's bins");
        }
    }
    return ORDO_OK;
}

/* --- Descriptors --- */

/* Fills the spare list from a new slab; zero when none can be had. */
static __attribute__((noinline)) int descriptors_refill(pool_t *p) {
    pool_slab_t *slab = ordo__alloc(sizeof *slab, 64);
    if (!slab) {
        return 0;
    }
    slab->next = p->slabs;
    p->slabs = slab;
    for (size_t i = 0; i < POOL_SLAB_BLOCKS; ++i) {
        pool_block_t *b = &slab->blocks[i];
        b->history.tracker = p->tracker;
        b->history.pool_owned = 1;
        b->history.magic = ORDO_BUFFER_RELEASED;
        b->bin_next = p->spare;
        p->spare = b;
    }
    return 1;
}

static inline __attribute__((always_inline)) pool_block_t *descriptor_take(pool_t *p) {
    if (ORDO_UNLIKELY(!p->spare) && !descriptors_refill(p)) {
        return NULL;
    }
    pool_block_t *b = p->spare;
    p->spare = b->bin_next;
    return b;
}

/* A block handed out before keeps its FREED mark until the descriptor is
 * handed out again: a second free of it is told as such. */
static void descriptor_put(pool_t *p, pool_block_t *b) {
    b->history.magic = ORDO_BUFFER_RELEASED;
    b->bin_next = p->spare;
    p->spare = b;
}

/* --- Death frontiers --- */

/* Copies n death entries. One entry (a block used on one stream) is the
 * common case; the compiler turns a loop into `rep movs`, whose start-up
 * costs more than copying a few entries, so each count up to the maximum
 * is a fixed-size copy. */
static inline void death_copy(pool_death_t *to, const pool_death_t *from, unsigned n) {
    _Static_assert(POOL_DEATH_MAX == 6, "one case per count");
    switch (n) {
    case 6:
        to[5] = from[5];
        /* fall through */
    case 5:
        to[4] = from[4];
        /* fall through */
    case 4:
        to[3] = from[3];
        /* fall through */
    case 3:
        to[2] = from[2];
        /* fall through */
    case 2:
        to[1] = from[1];
        /* fall through */
    case 1:
        to[0] = from[0];
        /* fall through */
    default:
        break;
    }
}

/* Non-zero when stream t may reuse b without waiting: t has waited for
 * every use in b's death frontier (an entry on t itself: t runs in order). */
static int covered_by_frontier(const pool_t *p, const pool_block_t *b, uint32_t t) {
    for (unsigned i = 0; i < b->death_count; ++i) {
        if (!frontier_covers(p->tracker, t, b->death[i].stream, b->death[i].point)) {
            return 0;
        }
    }
    return 1;
}

/* The common cases first: a block last used on one stream, t itself or
 * another. */
static inline __attribute__((always_inline)) int covered(const pool_t *p, const pool_block_t *b,
                                                         uint32_t t) {
    if (ORDO_LIKELY(b->death_count == 1)) {
        return frontier_covers(p->tracker, t, b->death[0].stream, b->death[0].point);
    }
    return covered_by_frontier(p, b, t);
}

/* Non-zero when the host knows stream s's point `point` complete, with
 * everything it stands for. A death frontier leaves out the uses the
 * freeing stream had waited for: its point stands for them. A healthy
 * stream's reached point completes them (its waits ran first). A failed
 * stream runs nothing more, but the waits it had enqueued may never have
 * run either, so its point vouches only for its own work: what it had
 * waited for (its frontier, which only grows) must be complete on its own,
 * on the streams that ran it. *visited: failed streams already expanded. */
static int point_settled(const pool_t *p, uint32_t s, uint64_t point, uint64_t *visited) {
    const ordo_tracker_t *tracker = p->tracker;
    uint64_t value = 0;
    ordo_status_t st = ordo_signal_query(frontier_timeline(tracker, s), &value);
    if (value >= point) {
        return 1; /* reached (a failed timeline keeps the value it reached) */
    }
    if (st == ORDO_OK && ordo_stream_status(frontier_stream(tracker, s)) == ORDO_OK) {
        return 0;
    }
    uint64_t bit = (uint64_t)1 << s;
    if (*visited & bit) {
        return 1; /* its frontier is being checked already */
    }
    *visited |= bit;
    const uint64_t *waited = frontier_of(tracker, s);
    for (uint32_t u = 0; u < frontier_stream_count(tracker); ++u) {
        if (u != s && waited[u] && !point_settled(p, u, waited[u], visited)) {
            return 0;
        }
    }
    return 1;
}

static int death_settled(const pool_t *p, const pool_death_t *d) {
    uint64_t visited = 0;
    return point_settled(p, d->stream, d->point, &visited);
}

/* Orders t after stream s's point `point` and what it stands for (see
 * point_settled), with device waits on healthy streams only: a failed
 * stream's entry is replaced by the points it had waited for. */
static ordo_status_t wait_for_point(pool_t *p, uint32_t t, uint32_t s, uint64_t point,
                                    uint64_t *visited) {
    ordo_tracker_t *tracker = p->tracker;
    if (frontier_covers(tracker, t, s, point)) {
        return ORDO_OK;
    }
    if (ordo_stream_status(frontier_stream(tracker, s)) == ORDO_OK) {
        return ordo__tracker_wait_for(tracker, t, s, point);
    }
    uint64_t value = 0;
    uint64_t bit = (uint64_t)1 << s;
    (void)ordo_signal_query(frontier_timeline(tracker, s), &value);
    if (value >= point || (*visited & bit)) {
        return ORDO_OK;
    }
    *visited |= bit;
    const uint64_t *waited = frontier_of(tracker, s);
    for (uint32_t u = 0; u < frontier_stream_count(tracker); ++u) {
        if (u != s && waited[u]) {
            ordo_status_t st = wait_for_point(p, t, u, waited[u], visited);
            if (st != ORDO_OK) {
                return st;
            }
        }
    }
    return ORDO_OK;
}

/* Orders t after every entry of b's death frontier, on the device, so
 * that t may take b. An entry of a failed stream (it runs no more work) is
 * replaced by what that stream had waited for. */
static ordo_status_t wait_for_death(pool_t *p, uint32_t t, const pool_block_t *b) {
    uint64_t visited = 0;
    for (unsigned i = 0; i < b->death_count; ++i) {
        ordo_status_t st = wait_for_point(p, t, b->death[i].stream, b->death[i].point, &visited);
        if (st != ORDO_OK) {
            /* The wait ordo enqueued was refused (t has failed): named for
             * the allocation, the call the user made. */
            return ordo__error_as(st, "ordo_mem_allocate");
        }
    }
    return ORDO_OK;
}

/* Raises need[] to the points of healthy streams the host must see reached
 * before stream s's point `point` is settled (see point_settled). */
static void need_point(const pool_t *p, uint32_t s, uint64_t point, uint64_t *need,
                       uint64_t *visited) {
    const ordo_tracker_t *tracker = p->tracker;
    uint64_t value = 0;
    ordo_status_t st = ordo_signal_query(frontier_timeline(tracker, s), &value);
    if (value >= point) {
        return;
    }
    if (st == ORDO_OK && ordo_stream_status(frontier_stream(tracker, s)) == ORDO_OK) {
        if (need[s] < point) {
            need[s] = point;
        }
        return;
    }
    uint64_t bit = (uint64_t)1 << s;
    if (*visited & bit) {
        return;
    }
    *visited |= bit;
    const uint64_t *waited = frontier_of(tracker, s);
    for (uint32_t u = 0; u < frontier_stream_count(tracker); ++u) {
        if (u != s && waited[u]) {
            need_point(p, u, waited[u], need, visited);
        }
    }
}

/* Merges b's frontier into into (maximum per stream); zero if the result
 * has more entries than a block keeps. */
static int death_merge_many(pool_death_t *into, uint8_t *count, const pool_block_t *b) {
    pool_death_t merged[POOL_DEATH_MAX];
    unsigned n = *count;
    death_copy(merged, into, n);
    for (unsigned i = 0; i < b->death_count; ++i) {
        unsigned j = 0;
        while (j < n && merged[j].stream != b->death[i].stream) {
            ++j;
        }
        if (j < n) {
            if (merged[j].point < b->death[i].point) {
                merged[j].point = b->death[i].point;
            }
        } else if (n == POOL_DEATH_MAX) {
            return 0;
        } else {
            merged[n++] = b->death[i];
        }
    }
    death_copy(into, merged, n);
    *count = (uint8_t)n;
    return 1;
}

/* death_merge_many, after the common case: both used on one stream. */
static inline __attribute__((always_inline)) int death_merge(pool_death_t *into, uint8_t *count,
                                                             const pool_block_t *b) {
    if (ORDO_LIKELY(*count == 1 && b->death_count == 1 && into[0].stream == b->death[0].stream)) {
        if (into[0].point < b->death[0].point) {
            into[0].point = b->death[0].point;
        }
        return 1;
    }
    return death_merge_many(into, count, b);
}

/* --- Splitting and coalescing --- */

/* Moves free b to the bin of its size and affinity, if it is not there. */
static inline __attribute__((always_inline)) void rebin(pool_t *p, pool_block_t *b,
                                                        uint8_t affinity) {
    unsigned c = class_of(b->size / POOL_UNIT);
    if (b->affinity != affinity || b->cls != c) {
        bin_remove(p, b);
        b->affinity = affinity;
        bin_insert_as(p, b, c);
    }
}

/* The descriptor an allocation of size from free block b will be handed
 * in: a spare one for a cut, or NULL when b goes whole (a cut would leave
 * less than a unit, or no descriptor can be had: correct, just larger). */
POOL_HOT pool_block_t *carve_descriptor(pool_t *p, const pool_block_t *b, size_t size) {
    return b->size - size < POOL_UNIT ? NULL : descriptor_take(p);
}

/* Takes size bytes for an allocation from free block b (in its bin), in
 * `taken` from carve_descriptor. The allocation is cut from the end, so the
 * rest keeps b's descriptor and, as long as its size class holds, b's place
 * in its bin; without `taken` the whole of b goes. */
POOL_HOT pool_block_t *carve(pool_t *p, pool_block_t *b, size_t size, pool_block_t *taken) {
    if (!taken) {
        bin_remove(p, b);
        return b;
    }
    b->size -= size;
    taken->kind = POOL_KIND_BLOCK;
    taken->chunk = b->chunk;
    taken->start = b->start + b->size;
    taken->size = size;
    taken->addr_prev = b;
    taken->addr_next = b->addr_next;
    if (b->addr_next) {
        b->addr_next->addr_prev = taken;
    }
    b->addr_next = taken;
    rebin(p, b, b->affinity);
    ++p->stats.splits;
    return taken;
}

/* Absorbs the free neighbour next (b's addr_next, out of its bin) into b. */
static void absorb(pool_t *p, pool_block_t *b, pool_block_t *next) {
    b->size += next->size;
    b->addr_next = next->addr_next;
    if (next->addr_next) {
        next->addr_next->addr_prev = b;
    }
    descriptor_put(p, next);
    ++p->stats.merges;
}

/* Merges free b (not in a bin) with its free neighbours whose frontiers
 * fit together (the merged frontier is the maximum of both, so reusing the
 * merged block waits for every use of either), then bins it under b's
 * affinity: the freeing stream, whose next allocations likely fit it. A
 * settled block that absorbs an unsettled one takes that one's affinity:
 * the settled bins hold only blocks with nothing pending. A free previous
 * neighbour absorbs b and stays in its bin unless its class or affinity
 * changes. */
POOL_HOT void coalesce_and_bin_hot(pool_t *p, pool_block_t *b) {
    uint8_t affinity = b->affinity;
    pool_block_t *prev = b->addr_prev;
    pool_block_t *next = b->addr_next;
    int binned = 0;
    if (prev && prev->is_free == 1 && death_merge(b->death, &b->death_count, prev)) {
        if (affinity == POOL_SETTLED) {
            affinity = prev->affinity;
        }
        prev->death_count = b->death_count;
        death_copy(prev->death, b->death, b->death_count);
        absorb(p, prev, b);
        b = prev;
        binned = 1;
    }
    if (next && next->is_free == 1 && death_merge(b->death, &b->death_count, next)) {
        if (affinity == POOL_SETTLED) {
            affinity = next->affinity;
        }
        bin_remove(p, next);
        absorb(p, b, next);
    }
    if (binned) {
        rebin(p, b, affinity);
    } else {
        b->affinity = affinity;
        bin_insert(p, b);
    }
}

static void coalesce_and_bin(pool_t *p, pool_block_t *b) {
    coalesce_and_bin_hot(p, b);
}

/* --- Slots --- */

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

/* Puts free slot b at the head of affinity a's list of its class. */
POOL_HOT void slot_link(pool_t *p, pool_block_t *b, unsigned a) {
    pool_bins_t *bins = p->bins[a];
    b->affinity = (uint8_t)a;
    list_push(&bins->slot_head[b->cls], &bins->slots_nonempty, b->cls, b);
    p->affinity_mask |= affinity_bit(a);
}

POOL_HOT void slot_unlink(pool_t *p, pool_block_t *b) {
    pool_bins_t *bins = p->bins[b->affinity];
    list_unlink(&bins->slot_head[b->cls], &bins->slots_nonempty, b->cls, b);
}

/* The first of the first POOL_SCAN slots from head on that t may reuse
 * without waiting, or NULL; *out_uncovered as in bin_best_fit. */
POOL_HOT pool_block_t *slot_first_covered(const pool_t *p, pool_block_t *head, uint32_t t,
                                          pool_block_t **out_uncovered) {
    unsigned scanned = 0;
    for (pool_block_t *b = head; b && scanned < POOL_SCAN; b = b->bin_next, ++scanned) {
        if (covered(p, b, t)) {
            return b;
        }
        if (!*out_uncovered) {
            *out_uncovered = b;
        }
    }
    return NULL;
}

/* A slot of class c freed on t itself (counted as a same-stream reuse),
 * or NULL; *out_uncovered as in slot_first_covered. */
POOL_HOT pool_block_t *find_own_slot(pool_t *p, unsigned c, uint32_t t,
                                     pool_block_t **out_uncovered) {
    pool_block_t *b = p->affinity_mask >> t & 1
                          ? slot_first_covered(p, p->bins[t]->slot_head[c], t, out_uncovered)
                          : NULL;
    if (b) {
        ++p->stats.reuses_same_stream;
    }
    return b;
}

/* --- Settling and trimming (explicit calls only) --- */

/* Drops the death entries the host knows complete from b; non-zero when
 * none is left. */
static int death_settle(const pool_t *p, pool_block_t *b) {
    unsigned kept = 0;
    for (unsigned i = 0; i < b->death_count; ++i) {
        if (!death_settled(p, &b->death[i])) {
            b->death[kept++] = b->death[i];
        }
    }
    b->death_count = (uint8_t)kept;
    return !kept;
}

/* Gives run, whose slots are all gone, back to the chunks as a free block
 * with death frontier death[0..n) (none: settled; else in the bins of the
 * stream that made it). */
static void run_release_with(pool_t *p, pool_block_t *run, const pool_death_t *death, unsigned n) {
    pool_bins_t *owner = p->bins[run->affinity];
    if (owner && owner->run[run->cls] == run) {
        owner->run[run->cls] = NULL;
    }
    --p->stats.runs;
    run->kind = POOL_KIND_BLOCK;
    run->is_free = 1;
    run->affinity = n ? run->affinity : POOL_SETTLED;
    run->death_count = (uint8_t)n;
    death_copy(run->death, death, n);
    coalesce_and_bin(p, run);
}

/* Moves the free slots of affinity a that have settled to the settled
 * lists. */
static void settle_slots(pool_t *p, unsigned a) {
    pool_bins_t *bins = p->bins[a];
    for (uint64_t mask = bins->slots_nonempty; mask; mask &= mask - 1) {
        for (pool_block_t *b = bins->slot_head[__builtin_ctzll(mask)], *next; b; b = next) {
            next = b->bin_next;
            if (death_settle(p, b)) {
                slot_unlink(p, b);
                slot_link(p, b, POOL_SETTLED);
            }
        }
    }
}

/* Runs body for every free slot b, in every list (body may unlink b). */
#define FOR_EACH_FREE_SLOT(p, b, body)                                                             \
    for (unsigned a_ = 0; a_ < POOL_AFFINITIES; ++a_) {                                            \
        if (!(p)->bins[a_]) {                                                                      \
            continue;                                                                              \
        }                                                                                          \
        for (uint64_t m_ = (p)->bins[a_]->slots_nonempty; m_; m_ &= m_ - 1) {                      \
            for (pool_block_t *b = (p)->bins[a_]->slot_head[__builtin_ctzll(m_)], *n_; b;          \
                 b = n_) {                                                                         \
                n_ = b->bin_next;                                                                  \
                body                                                                               \
            }                                                                                      \
        }                                                                                          \
    }

/* Gives every run whose slots are all free back to the chunks, settled or
 * not: the run's block gets the union of its slots' death frontiers, so
 * whoever reuses it is ordered after every use of every slot. A run whose
 * union has more entries than a block keeps stays. Called before the pool
 * grows, so that memory idle in slots of one size serves other sizes
 * before more is reserved. Non-zero if a run went back. */
static int release_free_runs(pool_t *p) {
    if (!p->stats.runs) {
        return 0;
    }
    FOR_EACH_FREE_SLOT(p, b, { b->addr_prev->run.scratch = 0; })
    FOR_EACH_FREE_SLOT(p, b, { ++b->addr_prev->run.scratch; })
    /* Each run whose slots are all free collects them in its bin_next
     * chain (a run is in no bin). */
    pool_block_t *runs = NULL;
    FOR_EACH_FREE_SLOT(p, b, {
        pool_block_t *run = b->addr_prev;
        if (run->run.scratch == run->run.made) {
            if (run->is_free != 3) {
                run->is_free = 3; /* collecting */
                run->bin_next = NULL;
                run->bin_prev = runs;
                runs = run;
            }
            slot_unlink(p, b);
            b->bin_next = run->bin_next;
            run->bin_next = b;
        }
    })
    int released = 0;
    while (runs) {
        pool_block_t *run = runs;
        runs = run->bin_prev;
        run->is_free = 0;
        pool_death_t death[POOL_DEATH_MAX];
        uint8_t count = 0;
        int fits = 1;
        for (pool_block_t *b = run->bin_next; b && fits; b = b->bin_next) {
            fits = death_merge_many(death, &count, b);
        }
        for (pool_block_t *b = run->bin_next, *next; b; b = next) {
            next = b->bin_next;
            if (fits) {
                descriptor_put(p, b);
            } else {
                slot_link(p, b, b->affinity);
            }
        }
        if (fits) {
            run_release_with(p, run, death, count);
            released = 1;
        }
    }
    return released;
}

/* Drops the death entries the host knows complete; blocks left with none
 * move to the settled bins, slots to the settled lists, and runs whose
 * slots are all free go back to the chunks (settled when their slots
 * are). */
static void settle_all(pool_t *p) {
    for (unsigned a = 0; a < POOL_SETTLED; ++a) {
        if (!bins_hold(p, a)) {
            continue;
        }
        settle_slots(p, a);
        /* Collect first: moving blocks changes the lists being walked. */
        pool_bins_t *bins = p->bins[a];
        pool_block_t *done = NULL;
        for (unsigned c = 0; c < POOL_CLASSES; ++c) {
            for (pool_block_t *b = bins->head[c], *next; b; b = next) {
                next = b->bin_next;
                if (death_settle(p, b)) {
                    bin_remove(p, b);
                    b->is_free = 2; /* out of its bin: not to be merged yet */
                    b->bin_next = done;
                    done = b;
                }
            }
        }
        while (done) {
            pool_block_t *b = done;
            done = b->bin_next;
            b->is_free = 1;
            b->affinity = POOL_SETTLED;
            coalesce_and_bin(p, b);
        }
    }
    (void)release_free_runs(p);
}

static void chunk_unlink(pool_t *p, pool_chunk_t *chunk) {
    if (chunk->prev) {
        chunk->prev->next = chunk->next;
    } else {
        p->chunks = chunk->next;
    }
    if (chunk->next) {
        chunk->next->prev = chunk->prev;
    }
}

/* The free block that spans the whole of chunk in bins, or NULL. */
static pool_block_t *chunk_whole_in(const pool_bins_t *bins, const pool_chunk_t *chunk) {
    for (pool_block_t *b = bins->head[class_of(chunk->size / POOL_UNIT)]; b; b = b->bin_next) {
        if (b->chunk == chunk && b->size == chunk->size) {
            return b;
        }
    }
    return NULL;
}

/* Forgets chunk, whose memory went back upstream, and whole, its one free
 * block. */
static void chunk_forget(pool_t *p, pool_chunk_t *chunk, pool_block_t *whole) {
    bin_remove(p, whole);
    descriptor_put(p, whole);
    chunk_unlink(p, chunk);
    p->stats.bytes_reserved -= chunk->size;
    --p->stats.chunks;
    ++p->stats.trims;
    ordo__dealloc(chunk, sizeof *chunk, 0);
}

/* Gives settled, wholly free chunks back upstream while more than keep
 * bytes are reserved. A wholly free chunk is one settled block of the
 * chunk's size. */
static void trim_to(pool_t *p, uint64_t keep) {
    for (pool_chunk_t *chunk = p->chunks, *next; chunk && p->stats.bytes_reserved > keep;
         chunk = next) {
        next = chunk->next;
        if (!bins_hold(p, POOL_SETTLED)) {
            return;
        }
        pool_block_t *whole = chunk_whole_in(p->bins[POOL_SETTLED], chunk);
        if (whole) {
            (void)mem_deallocate(p->base.upstream, chunk->upstream_block, NULL);
            chunk_forget(p, chunk, whole);
        }
    }
}

/* Gives wholly free chunks whose uses may still run back upstream, each
 * with a free ordered on a healthy stream of its death frontier (made to
 * wait on the device for the other entries): upstream takes the memory
 * once that stream reaches the free, without the host waiting here. Used
 * when upstream is out of memory, where settling finds only what the host
 * already knows complete (a free that was a stream's last work is recorded
 * by nothing until a reap). Chunks with an entry of a failed stream are
 * left to settling. */
static void trim_pending(pool_t *p) {
    for (pool_chunk_t *chunk = p->chunks, *next; chunk; chunk = next) {
        next = chunk->next;
        pool_block_t *whole = NULL;
        for (uint64_t mask = p->affinity_mask; !whole && mask; mask &= mask - 1) {
            whole = chunk_whole_in(p->bins[__builtin_ctzll(mask)], chunk);
        }
        if (!whole || !whole->death_count) {
            continue;
        }
        int healthy = 1;
        for (unsigned i = 0; i < whole->death_count; ++i) {
            healthy &=
                ordo_stream_status(frontier_stream(p->tracker, whole->death[i].stream)) == ORDO_OK;
        }
        uint32_t s = whole->death[whole->death_count - 1].stream;
        for (unsigned i = 0; healthy && i < whole->death_count; ++i) {
            const pool_death_t *d = &whole->death[i];
            healthy = d->stream == s ||
                      ordo__tracker_wait_for(p->tracker, s, d->stream, d->point) == ORDO_OK;
        }
        if (!healthy || mem_deallocate(p->base.upstream, chunk->upstream_block,
                                       frontier_stream(p->tracker, s)) != ORDO_OK) {
            continue;
        }
        chunk_forget(p, chunk, whole);
    }
}

/* --- Allocation --- */

/* The first class from `from` on whose bin holds a block, or POOL_CLASSES. */
static inline __attribute__((always_inline)) unsigned bins_next_class(const pool_bins_t *bins,
                                                                      unsigned from) {
    for (unsigned w = from / 64; w < POOL_CLASS_WORDS; ++w) {
        uint64_t bits = bins->nonempty[w];
        if (w == from / 64) {
            bits &= ~(uint64_t)0 << (from % 64);
        }
        if (bits) {
            return w * 64 + (unsigned)__builtin_ctzll(bits);
        }
    }
    return POOL_CLASSES;
}

/* The smallest of the first POOL_SCAN blocks from head on that fit size
 * and that t may reuse without waiting, or NULL. *out_uncovered gets the
 * first fitting block, smaller than any found so far, that t could reuse
 * only after waiting, if none yet. */
static inline __attribute__((always_inline)) pool_block_t *
bin_best_fit(const pool_t *p, pool_block_t *head, size_t size, uint32_t t,
             pool_block_t **out_uncovered) {
    pool_block_t *best = NULL;
    unsigned scanned = 0;
    for (pool_block_t *b = head; b && scanned < POOL_SCAN; b = b->bin_next, ++scanned) {
        if (b->size >= size && (!best || b->size < best->size)) {
            if (covered(p, b, t)) {
                best = b;
            } else if (!*out_uncovered) {
                *out_uncovered = b;
            }
        }
    }
    return best;
}

/* A block of bins for size that t may reuse without waiting: the best fit
 * in the size's own class, else in the first larger class that has one
 * (every block there fits). */
POOL_HOT pool_block_t *bins_find_hot(const pool_t *p, const pool_bins_t *bins, size_t size,
                                     uint32_t t, pool_block_t **out_uncovered) {
    unsigned c = class_of(size / POOL_UNIT);
    pool_block_t *best = bin_best_fit(p, bins->head[c], size, t, out_uncovered);
    for (unsigned k = c; !best && (k = bins_next_class(bins, k + 1)) < POOL_CLASSES;) {
        best = bin_best_fit(p, bins->head[k], size, t, out_uncovered);
    }
    return best;
}

/* find_free past the stream's own bins: settled blocks, then blocks freed
 * on another stream and already ordered before t; else, by policy, one t
 * must first wait for (its waits are emitted here) or none (*skipped is
 * set: the caller counts a passed-over block once per allocation, however
 * often it searches). */
POOL_HOT ordo_status_t find_free_elsewhere(pool_t *p, size_t size, uint32_t t,
                                           pool_block_t *uncovered, pool_block_t **out_block,
                                           int *skipped) {
    pool_block_t *b = NULL;
    if (bins_hold(p, POOL_SETTLED)) {
        b = bins_find_hot(p, p->bins[POOL_SETTLED], size, t, &uncovered);
        if (b) {
            ++p->stats.reuses_known;
        }
    }
    for (uint64_t mask = p->affinity_mask & ~((uint64_t)1 << t); !b && mask; mask &= mask - 1) {
        unsigned a = (unsigned)__builtin_ctzll(mask);
        if (affinity_drop_if_empty(p, a)) {
            continue;
        }
        b = bins_find_hot(p, p->bins[a], size, t, &uncovered);
        if (b) {
            ++p->stats.reuses_known;
        }
    }
    if (!b && uncovered) {
        if (p->config.reuse == ORDO_MEM_REUSE_OTHER_BLOCK) {
            *skipped = 1;
        } else {
            ordo_status_t st = wait_for_death(p, t, uncovered);
            if (st != ORDO_OK) {
                return st;
            }
            b = uncovered;
            ++p->stats.reuses_waited;
        }
    }
    *out_block = b;
    return ORDO_OK;
}

/* A block freed on t itself for size (counted as a same-stream reuse), or
 * NULL; *out_uncovered as in bins_find_hot. */
POOL_HOT pool_block_t *find_own(pool_t *p, size_t size, uint32_t t, pool_block_t **out_uncovered) {
    pool_block_t *b =
        p->affinity_mask >> t & 1 ? bins_find_hot(p, p->bins[t], size, t, out_uncovered) : NULL;
    if (b) {
        ++p->stats.reuses_same_stream;
    }
    return b;
}

/* A free block for size on stream t: one freed on t first, then
 * find_free_elsewhere. */
static ordo_status_t find_free(pool_t *p, size_t size, uint32_t t, pool_block_t **out_block,
                               int *skipped) {
    pool_block_t *uncovered = NULL;
    pool_block_t *b = find_own(p, size, t, &uncovered);
    if (b) {
        *out_block = b;
        return ORDO_OK;
    }
    return find_free_elsewhere(p, size, t, uncovered, out_block, skipped);
}

/* Takes a chunk of at least size from upstream, as one free block born on
 * stream t (so other streams reuse it only once ordered after t). */
static ordo_status_t grow(pool_t *p, size_t size, uint32_t t, ordo_stream_t *stream,
                          pool_block_t **out_block) {
    ordo_status_t st = bins_ensure(p, t, "ordo_mem_allocate");
    if (st != ORDO_OK) {
        return st;
    }
    size_t chunk_size = size > p->config.chunk_bytes ? size : p->config.chunk_bytes;
    pool_chunk_t *chunk = ordo__alloc(sizeof *chunk, 0);
    pool_block_t *b = descriptor_take(p);
    if (!chunk || !b) {
        if (chunk) {
            ordo__dealloc(chunk, sizeof *chunk, 0);
        }
        if (b) {
            descriptor_put(p, b);
        }
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_mem_allocate",
                           "cannot allocate the pool's bookkeeping");
    }
    mem_request_t request = {chunk_size, POOL_UNIT, stream, ORDO_MEM_TAG_NONE};
    st = mem_allocate(p->base.upstream, &request, &chunk->upstream_block);
    if (st != ORDO_OK) {
        ordo__dealloc(chunk, sizeof *chunk, 0);
        descriptor_put(p, b);
        return st;
    }
    chunk->base = chunk->upstream_block->ptr;
    chunk->size = chunk_size;
    chunk->prev = NULL;
    chunk->next = p->chunks;
    if (p->chunks) {
        p->chunks->prev = chunk;
    }
    p->chunks = chunk;
    b->chunk = chunk;
    b->start = chunk->base;
    b->size = chunk_size;
    b->addr_prev = b->addr_next = NULL;
    b->kind = POOL_KIND_BLOCK;
    b->is_free = 1;
    b->affinity = (uint8_t)t;
    b->death_count = 1;
    b->death[0] = (pool_death_t){t, tracker_new_point(p->tracker, t)};
    bin_insert(p, b);
    p->stats.bytes_reserved += chunk_size;
    ++p->stats.chunks;
    ++p->stats.grows;
    *out_block = b;
    return ORDO_OK;
}

/* The allocation's search past the stream's own bins: other streams'
 * blocks, then a new chunk; when upstream is out of memory, what has
 * settled and the free chunks whose uses may still run (with frees
 * ordered after them) go back, and the search runs once more. */
static __attribute__((noinline)) ordo_status_t
find_elsewhere_or_grow(pool_t *p, const mem_request_t *request, size_t size, uint32_t t,
                       pool_block_t *uncovered, pool_block_t **out_block) {
    if (p->affinity_mask >> t & 1) {
        (void)affinity_drop_if_empty(p, t); /* its own bins were searched just now */
    }
    pool_block_t *b = NULL;
    int skipped = 0;
    ordo_status_t st = find_free_elsewhere(p, size, t, uncovered, &b, &skipped);
    if (st == ORDO_OK && !b && release_free_runs(p)) {
        st = find_free(p, size, t, &b, &skipped);
    }
    if (st == ORDO_OK && !b) {
        st = grow(p, size, t, request->stream, &b);
        if (st == ORDO_ERR_OUT_OF_MEMORY) {
            settle_all(p);
            trim_to(p, 0);
            trim_pending(p);
            if ((st = find_free(p, size, t, &b, &skipped)) == ORDO_OK && !b) {
                st = grow(p, size, t, request->stream, &b);
            }
        }
    }
    /* Also when the search after a release found a block. */
    p->stats.blocks_skipped += (uint64_t)skipped;
    *out_block = b;
    return st;
}

/* Cuts a run for slots of class c from the blocks, for stream t. */
static ordo_status_t run_make(pool_t *p, const mem_request_t *request, unsigned c, uint32_t t,
                              pool_block_t **out_run) {
    size_t size = (size_t)run_slots(c) * class_max_units(c) * POOL_UNIT;
    pool_block_t *uncovered = NULL;
    pool_block_t *b = find_own(p, size, t, &uncovered);
    ordo_status_t st = ORDO_OK;
    if (!b && (st = find_elsewhere_or_grow(p, request, size, t, uncovered, &b)) != ORDO_OK) {
        return st;
    }
    b = carve(p, b, size, carve_descriptor(p, b, size));
    b->is_free = 0;
    b->kind = POOL_KIND_RUN;
    b->affinity = (uint8_t)t;
    b->cls = (uint8_t)c;
    b->run.made = 0;
    ++p->stats.runs;
    *out_run = b;
    return ORDO_OK;
}

/* A free slot of class c for stream t past its own list: a settled one,
 * one freed on another stream and ordered before t, a new one from t's
 * run, by policy one t must wait for, or one from a new run. The slot is
 * left in its list. */
static __attribute__((noinline)) ordo_status_t
slot_elsewhere_or_make(pool_t *p, const mem_request_t *request, unsigned c, uint32_t t,
                       pool_block_t *uncovered, pool_block_t **out_slot) {
    static const char api[] = "ordo_mem_allocate";
    pool_block_t *b = p->bins[POOL_SETTLED]->slot_head[c];
    for (uint64_t mask = p->affinity_mask & ~((uint64_t)1 << t); !b && mask; mask &= mask - 1) {
        b = slot_first_covered(p, p->bins[__builtin_ctzll(mask)]->slot_head[c], t, &uncovered);
    }
    if (b) {
        ++p->stats.reuses_known;
        *out_slot = b;
        return ORDO_OK;
    }
    ordo_status_t st = bins_ensure(p, t, api);
    if (st != ORDO_OK) {
        return st;
    }
    pool_block_t *run = p->bins[t]->run[c];
    if (!run || run->run.made == run_slots(c)) {
        if (uncovered) {
            if (p->config.reuse == ORDO_MEM_REUSE_WAIT) {
                if ((st = wait_for_death(p, t, uncovered)) != ORDO_OK) {
                    return st;
                }
                ++p->stats.reuses_waited;
                *out_slot = uncovered;
                return ORDO_OK;
            }
            ++p->stats.blocks_skipped;
        }
        if ((st = run_make(p, request, c, t, &run)) != ORDO_OK) {
            return st;
        }
        p->bins[t]->run[c] = run;
    }
    b = descriptor_take(p);
    if (!b) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate the pool's bookkeeping");
    }
    b->kind = POOL_KIND_SLOT;
    b->cls = (uint8_t)c;
    b->chunk = run->chunk;
    b->size = (size_t)class_max_units(c) * POOL_UNIT;
    b->start = run->start + run->run.made * b->size;
    b->addr_prev = run;
    b->addr_next = NULL;
    b->is_free = 1;
    /* Born free on t: were it left in t's list (the caller fails before
     * handing it out), another stream, or the run's release, must still
     * be ordered after t's taking of the run's memory. */
    b->death_count = 1;
    b->death[0] = (pool_death_t){t, tracker_new_point(p->tracker, t)};
    ++run->run.made;
    slot_link(p, b, t);
    *out_slot = b;
    return ORDO_OK;
}

static ordo_status_t history_reserve(pool_block_t *b, uint32_t t, const char *api) {
    if (t >= BUFFER_INLINE_READERS && !b->history.more_last_points) {
        b->history.more_last_points =
            ordo__alloc(ORDO_TRACKER_MAX_STREAMS * sizeof *b->history.more_last_points, 0);
        if (!b->history.more_last_points) {
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api,
                               "cannot grow a block's per-stream points");
        }
    }
    return ORDO_OK;
}

static void history_set_last(pool_block_t *b, uint32_t t, uint64_t point) {
    if (t < BUFFER_INLINE_READERS) {
        b->history.last_points[t] = point;
    } else {
        b->history.more_last_points[t] = point;
    }
    b->history.use_mask |= (uint64_t)1 << t;
}

static ordo_status_t pool_allocate_locked(pool_t *p, const mem_request_t *request,
                                          ordo_block_t **out_block) {
    static const char api[] = "ordo_mem_allocate";
    uint32_t t;
    ordo_status_t st = tracker_stream_index(p->tracker, request->stream, &t, api);
    if (st != ORDO_OK) {
        return st;
    }
    size_t extra = request->alignment > POOL_UNIT ? request->alignment - POOL_UNIT : 0;
    if (request->bytes > ORDO_MEM_MAX_BYTES - extra - POOL_UNIT) {
        /* Within the maximum (checked before): the pool cannot satisfy it
         * once rounded and aligned, which is out of memory. */
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api,
                           "%zu bytes aligned to %zu is too large for the pool once rounded",
                           request->bytes, request->alignment);
    }
    size_t size = (request->bytes + extra + POOL_UNIT - 1) & ~(POOL_UNIT - 1);
    pool_block_t *uncovered = NULL;
    pool_block_t *b;
    unsigned c = class_of(size / POOL_UNIT);
    if (c < p->slot_classes && !extra) {
        /* Small: a slot freed on t itself, else slot_elsewhere_or_make. */
        b = find_own_slot(p, c, t, &uncovered);
        if (ORDO_UNLIKELY(!b) &&
            (st = slot_elsewhere_or_make(p, request, c, t, uncovered, &b)) != ORDO_OK) {
            return st;
        }
        if (ORDO_UNLIKELY(t >= BUFFER_INLINE_READERS) &&
            (st = history_reserve(b, t, api)) != ORDO_OK) {
            return st;
        }
        slot_unlink(p, b);
    } else {
        /* The common case inline: a block freed on t itself. */
        b = find_own(p, size, t, &uncovered);
        if (ORDO_UNLIKELY(!b) &&
            (st = find_elsewhere_or_grow(p, request, size, t, uncovered, &b)) != ORDO_OK) {
            return st;
        }
        /* The descriptor handed out is chosen first, so that a stream past
         * the inline points can get it a points array before anything
         * changes. */
        pool_block_t *taken = carve_descriptor(p, b, size);
        if (ORDO_UNLIKELY(t >= BUFFER_INLINE_READERS) &&
            (st = history_reserve(taken ? taken : b, t, api)) != ORDO_OK) {
            if (taken) {
                descriptor_put(p, taken);
            }
            return st;
        }
        b = carve(p, b, size, taken);
    }
    b->is_free = 0;
    /* Birth: a write by t at a fresh point of t. */
    uint64_t point = tracker_new_point(p->tracker, t);
    b->history.writer = (buffer_use_t){t, point};
    b->history.reader_mask = 0;
    b->history.use_mask = 0;
    history_set_last(b, t, point);
    b->history.magic = ORDO_BUFFER_MAGIC;
    uintptr_t aligned =
        ((uintptr_t)b->start + request->alignment - 1) & ~((uintptr_t)request->alignment - 1);
    b->base.ptr = (void *)aligned;
    b->base.bytes = request->bytes;
    b->base.alignment = request->alignment;
    b->base.tag = request->tag;
    b->base.stream = request->stream;
    b->base.resource = &p->base;
    atomic_store_explicit(&b->base.magic, ORDO_BLOCK_MAGIC, memory_order_release);
    p->stats.bytes_in_use += b->size;
    ++p->blocks_out;
    atomic_store_explicit(&p->bytes_outstanding,
                          atomic_load_explicit(&p->bytes_outstanding, memory_order_relaxed) +
                              request->bytes,
                          memory_order_relaxed);
    *out_block = &b->base;
    return ORDO_OK;
}

/* The memory-in-use counter of a trace (under the lock: in order). */
static void trace_in_use(const pool_t *p) {
    if (trace_on()) {
        trace_event_t e = {trace_now(),
                           0,
                           NULL,
                           "pool bytes in use",
                           (uint64_t)(uintptr_t)p,
                           p->stats.bytes_in_use,
                           TRACE_COUNTER,
                           0};
        ordo__trace_record(&e);
    }
}

static ordo_status_t pool_allocate(ordo_mem_resource_t *resource, const mem_request_t *request,
                                   ordo_block_t **out_block) {
    pool_t *p = (pool_t *)resource;
    ordo_rlock_lock(&p->tracker->lock);
    ordo_status_t st = pool_allocate_locked(p, request, out_block);
    trace_in_use(p);
    ordo_rlock_unlock(&p->tracker->lock);
    return st;
}

/* --- Deallocation --- */

static ordo_status_t pool_deallocate_locked(pool_t *p, pool_block_t *b, ordo_stream_t *stream) {
    static const char api[] = "ordo_mem_deallocate";
    uint32_t s;
    ordo_status_t st = tracker_stream_index(p->tracker, stream, &s, api);
    if (st == ORDO_OK) {
        st = bins_ensure(p, s, api);
    }
    if (st != ORDO_OK) {
        return st;
    }
    /* Under the lock: a racing second free of the block sees FREED. */
    if (atomic_load_explicit(&b->base.magic, memory_order_relaxed) != ORDO_BLOCK_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api,
                           "block %p (tag %u) was already deallocated", (void *)b, b->base.tag);
    }
    atomic_store_explicit(&b->base.magic, ORDO_BLOCK_FREED, memory_order_relaxed);
    /* The death frontier: each use the freeing stream has not waited for,
     * and the free itself on s, which implies the uses s already knows.
     * Written in place (a copy through the stack would stall on store
     * forwarding); a refused free leaves it unread, the block being live. */
    unsigned n = 0;
    uint64_t others = b->history.use_mask & ~((uint64_t)1 << s);
    if (ORDO_UNLIKELY(others)) {
        const uint64_t *frontier = frontier_of(p->tracker, s);
        for (uint64_t mask = others; mask; mask &= mask - 1) {
            uint32_t u = (uint32_t)__builtin_ctzll(mask);
            uint64_t point = buffer_last_point(&b->history, u);
            if (frontier[u] >= point) {
                continue; /* s has waited for it */
            }
            if (n < POOL_DEATH_MAX - 1) {
                b->death[n++] = (pool_death_t){u, point};
                continue;
            }
            /* More than a block keeps: s waits for the surplus on the
             * device, so its free point implies them. A failed s cannot
             * wait (nor will its free point ever be reached): refused, the
             * block stays live. */
            st = ordo__tracker_wait_for(p->tracker, s, u, point);
            if (st != ORDO_OK) {
                atomic_store_explicit(&b->base.magic, ORDO_BLOCK_MAGIC, memory_order_release);
                return ordo__error(st, api,
                                   "block %p (tag %u) was used on more streams than the freeing "
                                   "stream knows, and that stream cannot wait for them: %s",
                                   (void *)b, b->base.tag, ordo_error_message());
            }
        }
    }
    b->death[n++] = (pool_death_t){s, tracker_new_point(p->tracker, s)};
    b->history.magic = ORDO_BUFFER_RELEASED;
    b->is_free = 1;
    b->affinity = (uint8_t)s;
    b->death_count = (uint8_t)n;
    p->stats.bytes_in_use -= b->size;
    --p->blocks_out;
    atomic_store_explicit(&p->bytes_outstanding,
                          atomic_load_explicit(&p->bytes_outstanding, memory_order_relaxed) -
                              b->base.bytes,
                          memory_order_relaxed);
    if (b->kind == POOL_KIND_SLOT) {
        slot_link(p, b, s);
    } else {
        coalesce_and_bin_hot(p, b);
    }
    return ORDO_OK;
}

/* A free with no stream (an adaptor or a pool above giving back memory it
 * knows no work still uses): the block is settled at once. */
static ordo_status_t pool_deallocate_settled_locked(pool_t *p, pool_block_t *b) {
    if (atomic_load_explicit(&b->base.magic, memory_order_relaxed) != ORDO_BLOCK_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, "ordo_mem_deallocate",
                           "block %p (tag %u) was already deallocated", (void *)b, b->base.tag);
    }
    atomic_store_explicit(&b->base.magic, ORDO_BLOCK_FREED, memory_order_relaxed);
    b->history.magic = ORDO_BUFFER_RELEASED;
    b->is_free = 1;
    b->affinity = POOL_SETTLED;
    b->death_count = 0;
    p->stats.bytes_in_use -= b->size;
    --p->blocks_out;
    atomic_store_explicit(&p->bytes_outstanding,
                          atomic_load_explicit(&p->bytes_outstanding, memory_order_relaxed) -
                              b->base.bytes,
                          memory_order_relaxed);
    if (b->kind == POOL_KIND_SLOT) {
        slot_link(p, b, POOL_SETTLED);
    } else {
        coalesce_and_bin(p, b);
    }
    return ORDO_OK;
}

static ordo_status_t pool_deallocate(ordo_mem_resource_t *resource, ordo_block_t *block,
                                     ordo_stream_t *stream) {
    pool_t *p = (pool_t *)resource;
    ordo_rlock_lock(&p->tracker->lock);
    ordo_status_t st = stream ? pool_deallocate_locked(p, (pool_block_t *)block, stream)
                              : pool_deallocate_settled_locked(p, (pool_block_t *)block);
    trace_in_use(p);
    ordo_rlock_unlock(&p->tracker->lock);
    return st;
}

/* --- Use tracking --- */

static ordo_status_t pool_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                              ordo_stream_t *stream, ordo_access_mode_t mode, int finish) {
    pool_t *p = (pool_t *)resource;
    pool_block_t *b = (pool_block_t *)block;
    ordo_access_t access = {&b->history, mode};
    ordo_rlock_lock(&p->tracker->lock);
    ordo_status_t st = finish ? ordo_finish(p->tracker, stream, &access, 1)
                              : ordo_prepare(p->tracker, stream, &access, 1);
    ordo_rlock_unlock(&p->tracker->lock);
    return st;
}

static ordo_status_t pool_prepare_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                      ordo_stream_t *stream, ordo_access_mode_t mode) {
    return pool_use(resource, block, stream, mode, 0);
}

static ordo_status_t pool_finish_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                     ordo_stream_t *stream, ordo_access_mode_t mode) {
    return pool_use(resource, block, stream, mode, 1);
}

static ordo_status_t pool_record_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                     ordo_stream_t *stream) {
    static const char api[] = "ordo_mem_record_use";
    pool_t *p = (pool_t *)resource;
    pool_block_t *b = (pool_block_t *)block;
    ordo_rlock_lock(&p->tracker->lock);
    uint32_t t;
    ordo_status_t st = tracker_stream_index(p->tracker, stream, &t, api);
    if (st == ORDO_OK) {
        st = history_reserve(b, t, api);
    }
    if (st == ORDO_OK) {
        history_set_last(b, t, tracker_new_point(p->tracker, t));
    }
    ordo_rlock_unlock(&p->tracker->lock);
    return st;
}

static ordo_buffer_t *pool_block_buffer(ordo_mem_resource_t *resource, const ordo_block_t *block) {
    (void)resource;
    return &((pool_block_t *)block)->history;
}

static int pool_supports_use_tracking(ordo_mem_resource_t *resource) {
    (void)resource;
    return 1;
}

static uint64_t pool_bytes_outstanding(ordo_mem_resource_t *resource) {
    return atomic_load_explicit(&((pool_t *)resource)->bytes_outstanding, memory_order_relaxed);
}

/* --- Reaping, trimming, destroying --- */

/* Waits (outside the lock) until every free block's uses have completed,
 * then settles them and trims to the release threshold. */
static ordo_status_t pool_reap_pending(ordo_mem_resource_t *resource, ordo_deadline_t deadline) {
    static const char api[] = "ordo_mem_reap_pending";
    pool_t *p = (pool_t *)resource;
    ordo_signal_point_t points[ORDO_TRACKER_MAX_STREAMS];
    size_t count = 0;
    ordo_status_t st = ORDO_OK;
    ordo_rlock_lock(&p->tracker->lock);
    settle_all(p);
    /* What is still pending, per stream: the highest point, recorded. */
    uint64_t need[ORDO_TRACKER_MAX_STREAMS] = {0};
    for (unsigned a = 0; a < POOL_SETTLED; ++a) {
        for (unsigned k = 0; bins_hold(p, a) && k < POOL_LISTS; ++k) {
            for (pool_block_t *b = bins_list(p->bins[a], k); b; b = b->bin_next) {
                for (unsigned i = 0; i < b->death_count; ++i) {
                    uint64_t visited = 0;
                    need_point(p, b->death[i].stream, b->death[i].point, need, &visited);
                }
            }
        }
    }
    for (uint32_t s = 0; s < frontier_stream_count(p->tracker) && st == ORDO_OK; ++s) {
        if (!need[s]) {
            continue;
        }
        const tracker_record_t *record = NULL;
        st = ordo__tracker_record_covering(p->tracker, s, need[s], &record);
        if (st == ORDO_OK) {
            ordo_signal_t *timeline = frontier_timeline(p->tracker, s);
            (void)ordo_signal_retain(timeline);
            points[count++] = (ordo_signal_point_t){timeline, record->point};
        }
    }
    ordo_rlock_unlock(&p->tracker->lock);
    ordo_status_t waited = ORDO_OK;
    for (size_t i = 0; i < count; ++i) {
        if (st == ORDO_OK && waited != ORDO_ERR_TIMEOUT) {
            ordo_status_t w = ordo_signal_wait(points[i].signal, points[i].value, deadline);
            if (w == ORDO_ERR_TIMEOUT) {
                waited = w;
            }
            /* A stream that failed meanwhile: settling looks at what it
             * had waited for. */
        }
        (void)ordo_signal_release(points[i].signal);
    }
    if (st != ORDO_OK) {
        return st;
    }
    ordo_rlock_lock(&p->tracker->lock);
    settle_all(p);
    /* Keep in-use bytes plus the threshold, saturating. */
    if (p->config.release_threshold < UINT64_MAX - p->stats.bytes_in_use) {
        trim_to(p, p->stats.bytes_in_use + p->config.release_threshold);
    }
    ordo_rlock_unlock(&p->tracker->lock);
    if (waited == ORDO_ERR_TIMEOUT) {
        return ordo__error(ORDO_ERR_TIMEOUT, api,
                           "uses of freed blocks were still running at the deadline");
    }
    return ORDO_OK;
}

static void pool_free_everything(pool_t *p) {
    while (p->chunks) {
        pool_chunk_t *chunk = p->chunks;
        p->chunks = chunk->next;
        (void)mem_deallocate(p->base.upstream, chunk->upstream_block, NULL);
        ordo__dealloc(chunk, sizeof *chunk, 0);
    }
    while (p->slabs) {
        pool_slab_t *slab = p->slabs;
        p->slabs = slab->next;
        for (size_t i = 0; i < POOL_SLAB_BLOCKS; ++i) {
            if (slab->blocks[i].history.more_last_points) {
                ordo__dealloc(slab->blocks[i].history.more_last_points,
                              ORDO_TRACKER_MAX_STREAMS * sizeof(uint64_t), 0);
            }
        }
        ordo__dealloc(slab, sizeof *slab, 64);
    }
    for (unsigned a = 0; a < POOL_AFFINITIES; ++a) {
        if (p->bins[a]) {
            ordo__dealloc(p->bins[a], sizeof(pool_bins_t), 64);
        }
    }
}

static ordo_status_t pool_destroy(ordo_mem_resource_t *resource) {
    static const char api[] = "ordo_mem_resource_destroy";
    pool_t *p = (pool_t *)resource;
    ordo_tracker_t *tracker = p->tracker;
    ordo_rlock_lock(&tracker->lock);
    if (p->blocks_out) {
        ordo_rlock_unlock(&tracker->lock);
        return ordo__error(ORDO_ERR_BUSY, api, "the pool still has %llu block(s) handed out",
                           (unsigned long long)p->blocks_out);
    }
    settle_all(p);
    uint32_t unsettled = 0;
    for (unsigned a = 0; a < POOL_SETTLED; ++a) {
        for (unsigned k = 0; bins_hold(p, a) && k < POOL_LISTS; ++k) {
            for (const pool_block_t *b = bins_list(p->bins[a], k); b; b = b->bin_next) {
                ++unsettled;
            }
        }
    }
    if (unsettled) {
        ordo_rlock_unlock(&tracker->lock);
        return ordo__error(ORDO_ERR_BUSY, api,
                           "%u free block(s) may still be used by work on the streams "
                           "(ordo_mem_reap_pending waits for it)",
                           unsettled);
    }
    pool_free_everything(p);
    ordo__mem_resource_fini(resource);
    atomic_fetch_sub_explicit(&tracker->pools, 1, memory_order_release);
    ordo_rlock_unlock(&tracker->lock);
    ordo__dealloc(p, sizeof *p, 64);
    return ORDO_OK;
}

static const mem_resource_ops_t pool_ops = {
    .kind = "pool",
    .refuses_blocks_below = 1,
    .allocate = pool_allocate,
    .deallocate = pool_deallocate,
    .bytes_outstanding = pool_bytes_outstanding,
    .reap_pending = pool_reap_pending,
    .supports_use_tracking = pool_supports_use_tracking,
    .prepare_use = pool_prepare_use,
    .finish_use = pool_finish_use,
    .record_use = pool_record_use,
    .block_buffer = pool_block_buffer,
    .destroy = pool_destroy,
};

static int is_pool(const ordo_mem_resource_t *resource) {
    return resource->ops == &pool_ops;
}

ordo_status_t ordo_mem_pool_config_default(ordo_mem_pool_config_t *out_config) {
    if (!out_config) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_config is NULL");
    }
    *out_config = (ordo_mem_pool_config_t){ORDO_MEM_REUSE_WAIT, POOL_DEFAULT_CHUNK, UINT64_MAX,
                                           POOL_DEFAULT_SLOT_MAX};
    return ORDO_OK;
}

ordo_status_t ordo_mem_pool_create(ordo_tracker_t *tracker, ordo_mem_resource_t *upstream,
                                   const ordo_mem_pool_config_t *config,
                                   ordo_mem_resource_t **out_resource) {
    if (out_resource) {
        *out_resource = NULL;
    }
    ordo_status_t st = ordo__tracker_check(tracker, __func__);
    if (st == ORDO_OK) {
        st = ordo__mem_resource_check(upstream, __func__);
    }
    if (st != ORDO_OK) {
        return st;
    }
    if (!out_resource) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_resource is NULL");
    }
    if (upstream->device != tracker->device) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "upstream allocates on %s but the tracker orders streams of %s",
                           upstream->device->info.name, tracker->device->info.name);
    }
    ordo_mem_pool_config_t cfg;
    (void)ordo_mem_pool_config_default(&cfg);
    if (config) {
        if ((unsigned)config->reuse > ORDO_MEM_REUSE_OTHER_BLOCK) {
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "reuse policy %d is not one",
                               (int)config->reuse);
        }
        if (config->chunk_bytes > ORDO_MEM_MAX_BYTES) {
            return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__, "chunk_bytes %zu is too large",
                               config->chunk_bytes);
        }
        if (config->slot_max_bytes > (size_t)POOL_SLOT_MAX_UNITS * POOL_UNIT) {
            return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                               "slot_max_bytes %zu is more than the %zu bytes slots may have",
                               config->slot_max_bytes, (size_t)POOL_SLOT_MAX_UNITS * POOL_UNIT);
        }
        cfg = *config;
        if (!cfg.chunk_bytes) {
            cfg.chunk_bytes = POOL_DEFAULT_CHUNK;
        }
        cfg.chunk_bytes = (cfg.chunk_bytes + POOL_UNIT - 1) & ~(POOL_UNIT - 1);
    }
    pool_t *p = ordo__alloc(sizeof *p, 64);
    pool_bins_t *settled = ordo__alloc(sizeof *settled, 64);
    if (!p || !settled) {
        if (p) {
            ordo__dealloc(p, sizeof *p, 64);
        }
        if (settled) {
            ordo__dealloc(settled, sizeof *settled, 64);
        }
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a pool");
    }
    /* The settled bins exist from the start: settling cannot fail. */
    p->bins[POOL_SETTLED] = settled;
    p->tracker = tracker;
    p->config = cfg;
    while (p->slot_classes < POOL_SLOT_CLASSES &&
           (size_t)class_max_units(p->slot_classes) * POOL_UNIT <= cfg.slot_max_bytes) {
        ++p->slot_classes;
    }
    atomic_fetch_add_explicit(&tracker->pools, 1, memory_order_relaxed);
    ordo__mem_resource_init(&p->base, &pool_ops, tracker->device, upstream);
    *out_resource = &p->base;
    return ORDO_OK;
}

static ordo_status_t pool_check(ordo_mem_resource_t *resource, const char *api) {
    ordo_status_t st = ordo__mem_resource_check(resource, api);
    if (st == ORDO_OK && !is_pool(resource)) {
        st = ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "%p is a %s resource, not a pool",
                         (void *)resource, resource->ops->kind);
    }
    return st;
}

ordo_status_t ordo_mem_pool_stats(ordo_mem_resource_t *resource, ordo_mem_pool_stats_t *out_stats) {
    if (out_stats) {
        memset(out_stats, 0, sizeof *out_stats);
    }
    ordo_status_t st = pool_check(resource, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    if (!out_stats) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_stats is NULL");
    }
    pool_t *p = (pool_t *)resource;
    ordo_rlock_lock(&p->tracker->lock);
    *out_stats = p->stats;
    ordo_rlock_unlock(&p->tracker->lock);
    return ORDO_OK;
}

ordo_status_t ordo_mem_pool_trim(ordo_mem_resource_t *resource, uint64_t keep_bytes) {
    ordo_status_t st = pool_check(resource, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    pool_t *p = (pool_t *)resource;
    ordo_rlock_lock(&p->tracker->lock);
    settle_all(p);
    trim_to(p, keep_bytes);
    ordo_rlock_unlock(&p->tracker->lock);
    return ORDO_OK;
}

/* --- Consistency check (tests) --- */

/* The index of b among the descriptors of the pool's slabs, or SIZE_MAX. */
static size_t census_index(const pool_t *p, const pool_block_t *b) {
    size_t base = 0;
    for (const pool_slab_t *slab = p->slabs; slab; slab = slab->next) {
        uintptr_t first = (uintptr_t)&slab->blocks[0];
        uintptr_t at = (uintptr_t)b;
        if (at >= first && at < (uintptr_t)&slab->blocks[POOL_SLAB_BLOCKS]) {
            if ((at - first) % sizeof *b) {
                return SIZE_MAX;
            }
            return base + (at - first) / sizeof *b;
        }
        base += POOL_SLAB_BLOCKS;
    }
    return SIZE_MAX;
}

/* Non-zero when the frontiers of a and b fit together in one block. */
static int census_mergeable(const pool_block_t *a, const pool_block_t *b) {
    unsigned n = a->death_count;
    for (unsigned i = 0; i < b->death_count; ++i) {
        unsigned j = 0;
        while (j < a->death_count && a->death[j].stream != b->death[i].stream) {
            ++j;
        }
        n += j == a->death_count;
    }
    return n <= POOL_DEATH_MAX;
}

enum { CENSUS_UNSEEN, CENSUS_SPARE, CENSUS_IN_CHUNK, CENSUS_BINNED, CENSUS_SLOT, CENSUS_LISTED };

/* The live block or slot b's handle is sound. */
static int census_live_sound(const pool_t *p, const pool_block_t *b) {
    uintptr_t ptr = (uintptr_t)b->base.ptr;
    return atomic_load_explicit(&b->base.magic, memory_order_relaxed) == ORDO_BLOCK_MAGIC &&
           b->base.resource == &p->base && ptr >= (uintptr_t)b->start &&
           ptr % b->base.alignment == 0 && b->base.bytes <= b->size - (ptr - (uintptr_t)b->start) &&
           !(b->history.use_mask >> BUFFER_INLINE_READERS && !b->history.more_last_points);
}

/* Checks the slot descriptors (those neither spare nor in a chunk): each
 * is a slot of a run in a chunk, in its place, once; live ones are
 * counted as live blocks. The runs' `scratch` words serve as the seen
 * masks (release_free_runs counts in them afresh). */
static ordo_status_t census_slots(pool_t *p, uint8_t *state, size_t total, mem_pool_census_t *c,
                                  uint64_t *in_use, uint64_t *outstanding) {
    static const char api[] = "ordo__mem_pool_census";
    size_t made = 0, found = 0;
    for (const pool_slab_t *slab = p->slabs; slab; slab = slab->next) {
        for (size_t i = 0; i < POOL_SLAB_BLOCKS; ++i) {
            pool_block_t *b = (pool_block_t *)&slab->blocks[i];
            if (state[census_index(p, b)] == CENSUS_IN_CHUNK && b->kind == POOL_KIND_RUN) {
                b->run.scratch = 0;
                made += b->run.made;
            }
        }
    }
    for (const pool_slab_t *slab = p->slabs; slab; slab = slab->next) {
        for (size_t i = 0; i < POOL_SLAB_BLOCKS; ++i) {
            pool_block_t *b = (pool_block_t *)&slab->blocks[i];
            size_t at = census_index(p, b);
            if (at >= total || state[at] != CENSUS_UNSEEN) {
                continue;
            }
            pool_block_t *run = b->addr_prev;
            size_t r = run ? census_index(p, run) : SIZE_MAX;
            size_t k = run && b->start >= run->start && b->size
                           ? (size_t)(b->start - run->start) / b->size
                           : SIZE_MAX;
            if (b->kind != POOL_KIND_SLOT || r == SIZE_MAX || state[r] != CENSUS_IN_CHUNK ||
                run->kind != POOL_KIND_RUN || b->addr_next || b->chunk != run->chunk ||
                b->cls != run->cls || b->size != (size_t)class_max_units(b->cls) * POOL_UNIT ||
                k >= run->run.made || b->start != run->start + k * b->size ||
                (run->run.scratch >> k & 1)) {
                ordo__error(ORDO_ERR_CORRUPTED, api,
                            "descriptor %zu is neither spare, in a chunk, nor a slot of a run "
                            "in its place (once)",
                            at);
                return ORDO_ERR_CORRUPTED;
            }
            run->run.scratch |= (uint32_t)1 << k;
            state[at] = CENSUS_SLOT;
            ++found;
            if (b->is_free == 1) {
                ++c->free_slots;
            } else if (b->is_free == 0 && census_live_sound(p, b)) {
                ++c->live_blocks;
                *in_use += b->size;
                *outstanding += b->base.bytes;
            } else {
                ordo__error(ORDO_ERR_CORRUPTED, api, "slot %p: is_free %u, or its handle unsound",
                            (const void *)b, b->is_free);
                return ORDO_ERR_CORRUPTED;
            }
        }
    }
    if (found != made) {
        ordo__error(ORDO_ERR_CORRUPTED, api, "the runs cut %zu slots; %zu are found", made, found);
        return ORDO_ERR_CORRUPTED;
    }
    return ORDO_OK;
}

/* Checks affinity a's slot lists and runs; *listed counts the slots. */
static ordo_status_t census_slot_lists(const pool_t *p, uint8_t *state, unsigned a,
                                       size_t *listed) {
    static const char api[] = "ordo__mem_pool_census";
    const pool_bins_t *bins = p->bins[a];
    if (bins->slots_nonempty >> (POOL_SLOT_CLASSES - 1) >> 1) {
        ordo__error(ORDO_ERR_CORRUPTED, api, "slots of affinity %u: a bit past the classes", a);
        return ORDO_ERR_CORRUPTED;
    }
    for (unsigned k = 0; k < POOL_SLOT_CLASSES; ++k) {
        const pool_block_t *run = bins->run[k];
        if (run && (census_index(p, run) == SIZE_MAX ||
                    state[census_index(p, run)] != CENSUS_IN_CHUNK || run->kind != POOL_KIND_RUN ||
                    run->affinity != a || run->cls != k || k >= p->slot_classes)) {
            ordo__error(ORDO_ERR_CORRUPTED, api, "affinity %u, class %u: run %p is not its run", a,
                        k, (const void *)run);
            return ORDO_ERR_CORRUPTED;
        }
        int bit = (int)(bins->slots_nonempty >> k & 1);
        if (bit != (bins->slot_head[k] != NULL)) {
            ordo__error(ORDO_ERR_CORRUPTED, api, "slots of affinity %u, class %u: bit %d", a, k,
                        bit);
            return ORDO_ERR_CORRUPTED;
        }
        const pool_block_t *prev = NULL;
        for (const pool_block_t *b = bins->slot_head[k]; b; prev = b, b = b->bin_next) {
            size_t i = census_index(p, b);
            if (i == SIZE_MAX || state[i] != CENSUS_SLOT || b->is_free != 1 || b->affinity != a ||
                b->cls != k || b->bin_prev != prev || b->death_count > POOL_DEATH_MAX ||
                (a == POOL_SETTLED && b->death_count) ||
                atomic_load_explicit(&b->base.magic, memory_order_relaxed) == ORDO_BLOCK_MAGIC) {
                ordo__error(ORDO_ERR_CORRUPTED, api,
                            "slots of affinity %u, class %u: %p is not a free slot of that list, "
                            "is listed twice, or its links are broken",
                            a, k, (const void *)b);
                return ORDO_ERR_CORRUPTED;
            }
            state[i] = CENSUS_LISTED;
            ++*listed;
        }
    }
    return ORDO_OK;
}

static ordo_status_t census_locked(pool_t *p, uint8_t *state, size_t total, mem_pool_census_t *c) {
    static const char api[] = "ordo__mem_pool_census";
#define CENSUS_FAIL(...) return ordo__error(ORDO_ERR_CORRUPTED, api, __VA_ARGS__)
    c->descriptors = total;
    for (const pool_block_t *b = p->spare; b; b = b->bin_next) {
        size_t i = census_index(p, b);
        if (i == SIZE_MAX || state[i] != CENSUS_UNSEEN) {
            CENSUS_FAIL("spare descriptor %p is not a slab's, or listed twice", (const void *)b);
        }
        state[i] = CENSUS_SPARE;
        ++c->spare;
    }
    uint64_t reserved = 0, in_use = 0, outstanding = 0;
    const pool_chunk_t *before = NULL;
    for (const pool_chunk_t *chunk = p->chunks; chunk; before = chunk, chunk = chunk->next) {
        if (chunk->prev != before) {
            CENSUS_FAIL("chunk %p: prev link broken", (const void *)chunk);
        }
        ++c->chunks;
        reserved += chunk->size;
        /* Its first block: the descriptor in use that starts it. */
        pool_block_t *first = NULL;
        for (const pool_slab_t *slab = p->slabs; slab && !first; slab = slab->next) {
            for (size_t i = 0; i < POOL_SLAB_BLOCKS; ++i) {
                pool_block_t *b = (pool_block_t *)&slab->blocks[i];
                if (state[census_index(p, b)] != CENSUS_SPARE && b->chunk == chunk &&
                    b->start == chunk->base && !b->addr_prev) {
                    first = b;
                    break;
                }
            }
        }
        if (!first) {
            CENSUS_FAIL("chunk %p: no block starts it", (const void *)chunk);
        }
        char *expect = chunk->base;
        const pool_block_t *prev = NULL;
        for (pool_block_t *b = first; b; prev = b, b = b->addr_next) {
            size_t i = census_index(p, b);
            if (i == SIZE_MAX || state[i] != CENSUS_UNSEEN) {
                CENSUS_FAIL("block %p of chunk %p: not a slab's, spare, or in two chunks",
                            (const void *)b, (const void *)chunk);
            }
            state[i] = CENSUS_IN_CHUNK;
            if (b->chunk != chunk || b->addr_prev != prev || b->start != expect || !b->size ||
                b->size % POOL_UNIT || b->size > (size_t)(chunk->base + chunk->size - expect)) {
                CENSUS_FAIL("block %p of chunk %p: wrong chunk, link, start or size "
                            "(at +%zu, %zu bytes)",
                            (const void *)b, (const void *)chunk, (size_t)(b->start - chunk->base),
                            b->size);
            }
            expect += b->size;
            uint32_t magic = atomic_load_explicit(&b->base.magic, memory_order_relaxed);
            if (b->is_free == 1) {
                ++c->free_blocks;
                if (b->affinity > POOL_SETTLED || !p->bins[b->affinity] ||
                    b->cls != class_of(b->size / POOL_UNIT) || b->death_count > POOL_DEATH_MAX ||
                    (b->affinity == POOL_SETTLED && b->death_count) || magic == ORDO_BLOCK_MAGIC) {
                    CENSUS_FAIL("free block %p: affinity %u, class %u for %zu bytes, %u death "
                                "entries, magic %#x",
                                (const void *)b, b->affinity, b->cls, b->size, b->death_count,
                                magic);
                }
                c->settled_blocks += b->affinity == POOL_SETTLED;
                if (prev && prev->is_free == 1 && census_mergeable(prev, b)) {
                    ++c->mergeable_pairs;
                }
            } else if (b->is_free == 0 && b->kind == POOL_KIND_RUN) {
                ++c->runs;
                if (b->cls >= p->slot_classes || b->run.made > run_slots(b->cls) ||
                    (size_t)b->run.made * class_max_units(b->cls) * POOL_UNIT > b->size) {
                    CENSUS_FAIL("run %p: class %u, %u slots in %zu bytes", (const void *)b, b->cls,
                                b->run.made, b->size);
                }
            } else if (b->is_free == 0) {
                ++c->live_blocks;
                if (!census_live_sound(p, b)) {
                    CENSUS_FAIL("live block %p: magic %#x, or its bytes outside it, or its "
                                "per-stream points missing",
                                (const void *)b, magic);
                }
                in_use += b->size;
                outstanding += b->base.bytes;
            } else {
                CENSUS_FAIL("block %p: is_free %u", (const void *)b, b->is_free);
            }
        }
        if (expect != chunk->base + chunk->size) {
            CENSUS_FAIL("chunk %p: its blocks cover %zu of its %zu bytes", (const void *)chunk,
                        (size_t)(expect - chunk->base), chunk->size);
        }
    }
    ordo_status_t st = census_slots(p, state, total, c, &in_use, &outstanding);
    if (st != ORDO_OK) {
        return st;
    }
    if (c->chunks != p->stats.chunks || c->runs != p->stats.runs ||
        reserved != p->stats.bytes_reserved || in_use != p->stats.bytes_in_use ||
        c->live_blocks != p->blocks_out ||
        outstanding != atomic_load_explicit(&p->bytes_outstanding, memory_order_relaxed)) {
        CENSUS_FAIL(
            "counters: %zu chunks, %llu reserved, %llu in use, %zu out, %llu outstanding; "
            "the stats say %llu, %llu, %llu, %llu, %llu",
            c->chunks, (unsigned long long)reserved, (unsigned long long)in_use, c->live_blocks,
            (unsigned long long)outstanding, (unsigned long long)p->stats.chunks,
            (unsigned long long)p->stats.bytes_reserved, (unsigned long long)p->stats.bytes_in_use,
            (unsigned long long)p->blocks_out,
            (unsigned long long)atomic_load_explicit(&p->bytes_outstanding, memory_order_relaxed));
    }
    if (!p->bins[POOL_SETTLED]) {
        CENSUS_FAIL("no settled bins");
    }
    size_t binned = 0, listed = 0;
    for (unsigned a = 0; a < POOL_AFFINITIES; ++a) {
        const pool_bins_t *bins = p->bins[a];
        if (bins && (st = census_slot_lists(p, state, a, &listed)) != ORDO_OK) {
            return st;
        }
        int holds = bins && bins->slots_nonempty;
        for (unsigned k = 0; bins && k < POOL_CLASSES; ++k) {
            int bit = (int)(bins->nonempty[k / 64] >> (k % 64) & 1);
            if (bit != (bins->head[k] != NULL)) {
                CENSUS_FAIL("bins of affinity %u, class %u: bitmap bit %d", a, k, bit);
            }
            holds |= bit;
            const pool_block_t *prev = NULL;
            for (const pool_block_t *b = bins->head[k]; b; prev = b, b = b->bin_next) {
                size_t i = census_index(p, b);
                if (i == SIZE_MAX || state[i] != CENSUS_IN_CHUNK || b->is_free != 1 ||
                    b->affinity != a || b->cls != k || b->bin_prev != prev) {
                    CENSUS_FAIL("bins of affinity %u, class %u: block %p is not a free block "
                                "of that bin in a chunk, is listed twice, or its links are "
                                "broken",
                                a, k, (const void *)b);
                }
                state[i] = CENSUS_BINNED;
                ++binned;
            }
        }
        for (unsigned k = POOL_CLASSES; bins && k < POOL_CLASS_WORDS * 64; ++k) {
            if (bins->nonempty[k / 64] >> (k % 64) & 1) {
                CENSUS_FAIL("bins of affinity %u: bit %u past the classes", a, k);
            }
        }
        if (a < POOL_SETTLED && holds && !(p->affinity_mask >> a & 1)) {
            CENSUS_FAIL("affinity mask bit %u is clear, its bins hold blocks", a);
        }
    }
    if (binned != c->free_blocks || listed != c->free_slots) {
        CENSUS_FAIL("%zu free blocks, %zu in bins; %zu free slots, %zu listed", c->free_blocks,
                    binned, c->free_slots, listed);
    }
#undef CENSUS_FAIL
    return ORDO_OK;
}

ordo_status_t ordo__mem_pool_census(ordo_mem_resource_t *resource, mem_pool_census_t *out_census) {
    static const char api[] = "ordo__mem_pool_census";
    ordo_status_t st = pool_check(resource, api);
    if (st != ORDO_OK) {
        return st;
    }
    if (!out_census) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "out_census is NULL");
    }
    pool_t *p = (pool_t *)resource;
    *out_census = (mem_pool_census_t){0};
    ordo_rlock_lock(&p->tracker->lock);
    size_t total = 0;
    for (const pool_slab_t *slab = p->slabs; slab; slab = slab->next) {
        total += POOL_SLAB_BLOCKS;
    }
    uint8_t *state = total ? ordo__alloc(total, 0) : NULL;
    if (total && !state) {
        st = ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate the census");
    } else {
        st = census_locked(p, state, total, out_census);
    }
    ordo_rlock_unlock(&p->tracker->lock);
    if (state) {
        ordo__dealloc(state, total, 0);
    }
    return st;
}
