/* The tests' census of a stream-ordered pool: a consistency check of its
 * layout (chunks, blocks, bins, slots and descriptors) read from the
 * pool's internal header, changing nothing. */
#include "pool_census.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "core/tracker_internal.h"
#include "mem/pool_internal.h"

/* What the census knows of each descriptor of the pool's slabs, by index. */
enum { CENSUS_UNSEEN, CENSUS_SPARE, CENSUS_IN_CHUNK, CENSUS_BINNED, CENSUS_SLOT, CENSUS_LISTED };

typedef struct census_entry {
    uint8_t state;       /* CENSUS_* */
    uint32_t slots_seen; /* a run: the slots of it found so far, by place */
} census_entry_t;

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
 * counted as live blocks. Each run's entry keeps the places of the slots
 * found so far. */
static ordo_status_t census_slots(const pool_t *p, census_entry_t *seen, size_t total,
                                  pool_census_t *c, uint64_t *in_use, uint64_t *outstanding) {
    static const char api[] = "pool_census";
    size_t made = 0, found = 0;
    for (const pool_slab_t *slab = p->slabs; slab; slab = slab->next) {
        for (size_t i = 0; i < POOL_SLAB_BLOCKS; ++i) {
            const pool_block_t *b = &slab->blocks[i];
            if (seen[census_index(p, b)].state == CENSUS_IN_CHUNK && b->kind == POOL_KIND_RUN) {
                made += b->run.made;
            }
        }
    }
    for (const pool_slab_t *slab = p->slabs; slab; slab = slab->next) {
        for (size_t i = 0; i < POOL_SLAB_BLOCKS; ++i) {
            const pool_block_t *b = &slab->blocks[i];
            size_t at = census_index(p, b);
            if (at >= total || seen[at].state != CENSUS_UNSEEN) {
                continue;
            }
            const pool_block_t *run = b->addr_prev;
            size_t r = run ? census_index(p, run) : SIZE_MAX;
            size_t k = run && b->start >= run->start && b->size
                           ? (size_t)(b->start - run->start) / b->size
                           : SIZE_MAX;
            if (b->kind != POOL_KIND_SLOT || r == SIZE_MAX || seen[r].state != CENSUS_IN_CHUNK ||
                run->kind != POOL_KIND_RUN || b->addr_next || b->chunk != run->chunk ||
                b->cls != run->cls || b->size != (size_t)class_max_units(b->cls) * POOL_UNIT ||
                k >= run->run.made || b->start != run->start + k * b->size ||
                (seen[r].slots_seen >> k & 1)) {
                ordo__error(ORDO_ERR_CORRUPTED, api,
                            "descriptor %zu is neither spare, in a chunk, nor a slot of a run "
                            "in its place (once)",
                            at);
                return ORDO_ERR_CORRUPTED;
            }
            seen[r].slots_seen |= (uint32_t)1 << k;
            seen[at].state = CENSUS_SLOT;
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
static ordo_status_t census_slot_lists(const pool_t *p, census_entry_t *seen, unsigned a,
                                       size_t *listed) {
    static const char api[] = "pool_census";
    const pool_bins_t *bins = p->bins[a];
    if (bins->slots_nonempty >> (POOL_SLOT_CLASSES - 1) >> 1) {
        ordo__error(ORDO_ERR_CORRUPTED, api, "slots of affinity %u: a bit past the classes", a);
        return ORDO_ERR_CORRUPTED;
    }
    for (unsigned k = 0; k < POOL_SLOT_CLASSES; ++k) {
        const pool_block_t *run = bins->run[k];
        if (run &&
            (census_index(p, run) == SIZE_MAX ||
             seen[census_index(p, run)].state != CENSUS_IN_CHUNK || run->kind != POOL_KIND_RUN ||
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
            if (i == SIZE_MAX || seen[i].state != CENSUS_SLOT || b->is_free != 1 ||
                b->affinity != a || b->cls != k || b->bin_prev != prev ||
                b->death_count > POOL_DEATH_MAX || (a == POOL_SETTLED && b->death_count) ||
                atomic_load_explicit(&b->base.magic, memory_order_relaxed) == ORDO_BLOCK_MAGIC) {
                ordo__error(ORDO_ERR_CORRUPTED, api,
                            "slots of affinity %u, class %u: %p is not a free slot of that list, "
                            "is listed twice, or its links are broken",
                            a, k, (const void *)b);
                return ORDO_ERR_CORRUPTED;
            }
            seen[i].state = CENSUS_LISTED;
            ++*listed;
        }
    }
    return ORDO_OK;
}

static ordo_status_t census_locked(const pool_t *p, census_entry_t *seen, size_t total,
                                   pool_census_t *c) {
    static const char api[] = "pool_census";
#define CENSUS_FAIL(...) return ordo__error(ORDO_ERR_CORRUPTED, api, __VA_ARGS__)
    c->descriptors = total;
    for (const pool_block_t *b = p->spare; b; b = b->bin_next) {
        size_t i = census_index(p, b);
        if (i == SIZE_MAX || seen[i].state != CENSUS_UNSEEN) {
            CENSUS_FAIL("spare descriptor %p is not a slab's, or listed twice", (const void *)b);
        }
        seen[i].state = CENSUS_SPARE;
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
        const pool_block_t *first = NULL;
        for (const pool_slab_t *slab = p->slabs; slab && !first; slab = slab->next) {
            for (size_t i = 0; i < POOL_SLAB_BLOCKS; ++i) {
                const pool_block_t *b = &slab->blocks[i];
                if (seen[census_index(p, b)].state != CENSUS_SPARE && b->chunk == chunk &&
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
        for (const pool_block_t *b = first; b; prev = b, b = b->addr_next) {
            size_t i = census_index(p, b);
            if (i == SIZE_MAX || seen[i].state != CENSUS_UNSEEN) {
                CENSUS_FAIL("block %p of chunk %p: not a slab's, spare, or in two chunks",
                            (const void *)b, (const void *)chunk);
            }
            seen[i].state = CENSUS_IN_CHUNK;
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
    ordo_status_t st = census_slots(p, seen, total, c, &in_use, &outstanding);
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
        if (bins && (st = census_slot_lists(p, seen, a, &listed)) != ORDO_OK) {
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
                if (i == SIZE_MAX || seen[i].state != CENSUS_IN_CHUNK || b->is_free != 1 ||
                    b->affinity != a || b->cls != k || b->bin_prev != prev) {
                    CENSUS_FAIL("bins of affinity %u, class %u: block %p is not a free block "
                                "of that bin in a chunk, is listed twice, or its links are "
                                "broken",
                                a, k, (const void *)b);
                }
                seen[i].state = CENSUS_BINNED;
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

/* The pool resource's own check, without the pool's operations table:
 * a live resource of the pool's kind. */
static ordo_status_t census_pool_check(ordo_mem_resource_t *resource, const char *api) {
    ordo_status_t st = ordo__mem_resource_check(resource, api);
    if (st == ORDO_OK && strcmp(resource->ops->kind, POOL_RESOURCE_KIND) != 0) {
        st = ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "%p is a %s resource, not a pool",
                         (void *)resource, resource->ops->kind);
    }
    return st;
}

ordo_status_t pool_census(ordo_mem_resource_t *resource, pool_census_t *out_census) {
    static const char api[] = "pool_census";
    ordo_status_t st = census_pool_check(resource, api);
    if (st != ORDO_OK) {
        return st;
    }
    if (!out_census) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "out_census is NULL");
    }
    const pool_t *p = (const pool_t *)resource;
    *out_census = (pool_census_t){0};
    ordo_rlock_lock(&p->tracker->lock);
    size_t total = 0;
    for (const pool_slab_t *slab = p->slabs; slab; slab = slab->next) {
        total += POOL_SLAB_BLOCKS;
    }
    /* The census' own scratch, from the C library: the allocator hooks
     * (which tests make fail) are left alone. */
    census_entry_t *seen = total ? calloc(total, sizeof *seen) : NULL;
    if (total && !seen) {
        st = ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate the census");
    } else {
        st = census_locked(p, seen, total, out_census);
    }
    ordo_rlock_unlock(&p->tracker->lock);
    free(seen);
    return st;
}
