/* The pool's range allocator: size classes (pool_internal.h), free lists
 * and the bitmaps of the bins, descriptors, splitting a free block and
 * joining free neighbours, and the list of chunks.
 *
 * It knows nothing of streams. A free block sits in one of the pool's sets
 * of bins, the one its `affinity` names; what a set means (a stream, or
 * settled) is the pool's policy. So is the one decision joining needs:
 * whether two free neighbours may become one block, what the joined block
 * carries and in which set it goes. The policy answers through the hooks
 * declared below, defined in pool_frontier.c and pool.c. They are static
 * and inline in the same translation unit, so asking costs no call.
 *
 * Part of pool.c's translation unit (pool.c includes it after
 * pool_internal.h; it is not compiled on its own). */
#ifndef ORDO_POOL_UNIT
#error "pool_range.c is a part of pool.c, which includes it"
#endif

/* --- The policy's hooks --- */

/* Whether free block b (in no bin), whose neighbour `other` is free, may
 * become one block with it. If so, b now carries what the joined block
 * needs (pool_frontier.c: the death frontiers joined), and *affinity is
 * the set the joined block goes to. */
POOL_HOT int pool_may_join(pool_block_t *b, const pool_block_t *other, uint8_t *affinity);
/* Free block keep, b's previous neighbour, takes over what b carries
 * (b is joined into keep). */
POOL_HOT void pool_join_carry(pool_block_t *keep, const pool_block_t *b);
/* A descriptor new from a slab, and one going back to the spare list
 * (pool.c: the tracked buffer each block embeds). */
static inline void pool_descriptor_fresh(const pool_t *p, pool_block_t *b);
static inline void pool_descriptor_retire(pool_block_t *b);

/* --- Bins --- */

static inline int bins_empty(const pool_bins_t *bins) {
    _Static_assert(POOL_CLASS_WORDS == 3, "one term per word");
    return !(bins->nonempty[0] | bins->nonempty[1] | bins->nonempty[2] | bins->slots_nonempty);
}

/* Non-zero when set a of bins holds a free block or slot. */
static inline int bins_hold(const pool_t *p, unsigned a) {
    return p->bins[a] && !bins_empty(p->bins[a]);
}

/* The free lists of bins: the bins by class, then the slots by class. */
#define POOL_LISTS (POOL_CLASSES + POOL_SLOT_CLASSES)
static inline pool_block_t *bins_list(const pool_bins_t *bins, unsigned k) {
    return k < POOL_CLASSES ? bins->head[k] : bins->slot_head[k - POOL_CLASSES];
}

/* The affinity mask's bit for set a: every set has one but the last
 * (POOL_SETTLED), which the searches always look at. */
static inline uint64_t affinity_bit(unsigned a) {
    return (uint64_t)(a < POOL_SETTLED) << (a % 64);
}

/* Clears set a's bit (set: its bins exist) if a search found its bins
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

/* Puts free b into the bin of class c, its size's class, of the set its
 * affinity names. */
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
        pool_descriptor_fresh(p, b);
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
    pool_descriptor_retire(b);
    b->bin_next = p->spare;
    p->spare = b;
}

/* --- Splitting and joining --- */

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

/* Joins free b (not in a bin) with each free neighbour the policy lets it
 * join (pool_may_join), then bins the result in the set the policy chose,
 * starting from b's. A free previous neighbour absorbs b and stays in its
 * bin unless its class or set changes. */
POOL_HOT void coalesce_and_bin_hot(pool_t *p, pool_block_t *b) {
    uint8_t affinity = b->affinity;
    pool_block_t *prev = b->addr_prev;
    pool_block_t *next = b->addr_next;
    int binned = 0;
    if (prev && prev->is_free == 1 && pool_may_join(b, prev, &affinity)) {
        pool_join_carry(prev, b);
        absorb(p, prev, b);
        b = prev;
        binned = 1;
    }
    if (next && next->is_free == 1 && pool_may_join(b, next, &affinity)) {
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

/* --- Chunks --- */

/* Links chunk at the head of the pool's chunks. */
static void chunk_link(pool_t *p, pool_chunk_t *chunk) {
    chunk->prev = NULL;
    chunk->next = p->chunks;
    if (p->chunks) {
        p->chunks->prev = chunk;
    }
    p->chunks = chunk;
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
