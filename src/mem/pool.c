/* The stream-ordered pool.
 *
 * Memory comes from upstream in chunks, which are split into blocks and
 * joined again. Every block embeds a tracked buffer: its access history
 * in the pool's tracker. Allocation is a write by the allocating stream at a
 * fresh point of it (the block's birth), so any later use on another stream
 * is ordered after the allocation and, through the allocating stream's
 * frontier, after whatever the reuse itself waited for.
 *
 * Freeing computes the block's death frontier (pool_frontier.c), from which
 * the pool decides, deterministically, which stream may reuse the block
 * and when. When no block the allocating stream may reuse at once fits,
 * the policy decides: emit device waits on it for the entries it lacks
 * (ORDO_MEM_REUSE_WAIT) or leave the block and take or grow another
 * (ORDO_MEM_REUSE_OTHER_BLOCK).
 *
 * Free blocks sit in bins by affinity (the stream that freed them, or
 * "settled" once every entry is known complete) and size class. The host
 * checks completion (settles) only in reap_pending, trim and destroy, and
 * before growing when upstream is out of memory.
 *
 * One translation unit, in pieces that each state one concept, so that
 * the allocation and free paths stay one inlined frame each:
 *   pool_internal.h  the layout (also read by the tests' census)
 *   pool_range.c     the range allocator: bins, descriptors, split, join
 *   pool_frontier.c  the policy: death frontiers, covering, settling
 *   pool_slots.c     slots and their runs
 *   pool.c           the resource: allocate, free, use tracking, reap,
 *                    trim, destroy, create, statistics
 * The pieces are included here and compiled only here (CMakeLists.txt
 * lists pool.c alone).
 *
 * All state is guarded by the tracker's lock. */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/trace.h"
#include "core/frontier.h"
#include "core/graph_internal.h"
#include "core/tracker_internal.h"
#include "hal/hal.h"
#include "mem/pool_internal.h"
#include "mem/resource.h"
#include "sync/signal_access.h"

#define ORDO_POOL_UNIT 1
#include "mem/pool_range.c"
#include "mem/pool_frontier.c"
#include "mem/pool_slots.c"

/* --- Descriptors: the tracked buffer each block embeds --- */

/* The buffer belongs to the pool (ordo_buffer_release refuses it) and is
 * not live until its block is handed out. */
static inline void pool_descriptor_fresh(const pool_t *p, pool_block_t *b) {
    b->history.tracker = p->tracker;
    b->history.pool_owned = 1;
    b->history.magic = ORDO_BUFFER_RELEASED;
}

static inline void pool_descriptor_retire(pool_block_t *b) {
    b->history.magic = ORDO_BUFFER_RELEASED;
}

/* --- Settling and trimming --- */

/* Drops the death entries the host knows complete; blocks left with none
 * move to the settled bins, slots to the settled lists, and runs whose
 * slots are all free go back to the chunks (settled when their slots
 * are). */
static void settle_all(pool_t *p) {
    for (unsigned a = 0; a < POOL_SETTLED; ++a) {
        if (bins_hold(p, a)) {
            settle_slots(p, a);
            settle_blocks(p, a);
        }
    }
    (void)release_free_runs(p);
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
 * left to settling.
 *
 * That stream may still fail before its waits run, and a failed stream's
 * free point vouches for nothing of other streams. A pool below (an
 * upstream that tracks uses) expands a failed stream's entry into the
 * points it had waited for. Any other upstream (the direct resource,
 * device memory) takes the memory at once when the stream fails, while
 * another stream's use of it may still run: to those, only a chunk whose
 * death frontier is one stream's, and whose other streams' points that
 * stream had waited for are complete, goes back this way (that stream's
 * own work is all that may still run, and a failed stream runs nothing
 * more); the others wait for settling (ordo_mem_reap_pending). */
static void trim_pending(pool_t *p) {
    ordo_mem_resource_t *upstream = p->base.upstream;
    const int expands_failures = upstream->ops->supports_use_tracking(upstream);
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
            healthy &= ordo__hal_stream_failure(
                           frontier_stream(p->tracker, whole->death[i].stream)) == ORDO_OK;
        }
        uint32_t s = whole->death[whole->death_count - 1].stream;
        if (healthy && !expands_failures &&
            (whole->death_count != 1 || !frontier_others_settled(p, s))) {
            continue;
        }
        for (unsigned i = 0; healthy && i < whole->death_count; ++i) {
            const pool_death_t *d = &whole->death[i];
            healthy = d->stream == s ||
                      ordo__tracker_wait_for(p->tracker, s, d->stream, d->point) == ORDO_OK;
        }
        if (!healthy || mem_deallocate(upstream, chunk->upstream_block,
                                       frontier_stream(p->tracker, s)) != ORDO_OK) {
            continue;
        }
        chunk_forget(p, chunk, whole);
    }
}

/* --- Allocation --- */

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
            ORDO_RETURN_IF_ERROR(wait_for_death(p, t, uncovered));
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
    ORDO_RETURN_IF_ERROR(bins_ensure(p, t, "ordo_mem_allocate"));
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
    ordo_status_t st = mem_allocate(p->base.upstream, &request, &chunk->upstream_block);
    if (st != ORDO_OK) {
        ordo__dealloc(chunk, sizeof *chunk, 0);
        descriptor_put(p, b);
        return st;
    }
    chunk->base = chunk->upstream_block->ptr;
    chunk->size = chunk_size;
    chunk_link(p, chunk);
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
    b->history.bytes = request->bytes;
    uintptr_t aligned =
        ((uintptr_t)b->start + request->alignment - 1) & ~((uintptr_t)request->alignment - 1);
    b->base.ptr = (void *)aligned;
    b->base.bytes = request->bytes;
    b->base.alignment = request->alignment;
    b->base.tag = request->tag;
    b->base.stream = request->stream;
    b->base.resource = &p->base;
    mem_hand_out(&b->base, &p->base);
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

/* A pool's call on a tracker that records a graph (ordo/graph.h): refused,
 * and the recording with it, since a replay could not repeat it. */
static ordo_status_t refused_while_recording(const pool_t *p, const char *api) {
    if (ORDO_LIKELY(!tracker_recording(p->tracker))) {
        return ORDO_OK;
    }
    return ordo__graph_refuse(p->tracker, api,
                              "a memory pool on it cannot be used while it records (a replay "
                              "would not repeat the call)");
}

static ordo_status_t pool_deallocate_locked(pool_t *p, pool_block_t *b, ordo_stream_t *stream);

/* A block that the submission whose launch function runs names: its use
 * is recorded only after the launch, so freed now, the memory could be
 * handed out again before that use has run. Other blocks may be freed in
 * a launch function (scratch memory of the work it enqueues). */
static ordo_status_t refuse_named_by_launch(const pool_t *p, const pool_block_t *b,
                                            const char *api) {
    if (!ordo__tracker_launch_names(p->tracker, &b->history)) {
        return ORDO_OK;
    }
    return ordo__error(ORDO_ERR_BUSY, api,
                       "block %p (tag %u) is named by the ordo_tracker_submit whose launch "
                       "function is running, which records its use after the launch: free it "
                       "after the submission",
                       (const void *)b, b->base.tag);
}

/* What a free checks first, under the lock: its stream (attached, its
 * index in *out_s), the stream's bins, and a block not freed already (a
 * racing second free of it sees FREED). */
POOL_HOT ordo_status_t free_checked(pool_t *p, const pool_block_t *b, ordo_stream_t *stream,
                                    uint32_t *out_s, const char *api) {
    ORDO_RETURN_IF_ERROR(tracker_stream_index(p->tracker, stream, out_s, api));
    ORDO_RETURN_IF_ERROR(bins_ensure(p, *out_s, api));
    if (atomic_load_explicit(&b->base.magic, memory_order_relaxed) != ORDO_BLOCK_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api,
                           "block %p (tag %u) was already deallocated", (const void *)b,
                           b->base.tag);
    }
    if (ORDO_UNLIKELY(b->history.magic == ORDO_BUFFER_PREPARED)) {
        /* Its use is still to be recorded: freed now, the memory could be
         * handed out again before that use has run. */
        return ordo__buffer_refuse_prepared(&b->history, api);
    }
    if (ORDO_UNLIKELY(tracker_launching(p->tracker))) {
        return refuse_named_by_launch(p, b, api);
    }
    return ORDO_OK;
}

/* --- Recordings (ordo/graph.h, core/graph_internal.h "MEMORY") --- */

/* Gives back a block a graph held (graph_block_free_fn): the handle the
 * recording ended lives again for this free, made on the stream the
 * recording freed it on (its bins were made then), so the memory is
 * reused only after every use the replays recorded. A stream that failed
 * and cannot wait for the uses beyond what a block keeps refuses the free:
 * the block then stays handed out, and the pool's destroy says so. */
static void pool_graph_free(void *block, ordo_stream_t *stream) {
    pool_block_t *b = block;
    pool_t *p = (pool_t *)b->base.resource;
    ordo_rlock_lock(&p->tracker->lock);
    b->history.magic = ORDO_BUFFER_MAGIC;
    atomic_store_explicit(&b->base.magic, ORDO_BLOCK_MAGIC, memory_order_relaxed);
    (void)pool_deallocate_locked(p, b, stream);
    trace_in_use(p);
    ordo_rlock_unlock(&p->tracker->lock);
}

/* A block allocated while the tracker records: the recording notes it (if
 * it cannot, the allocation is undone). */
static ordo_status_t graph_born(pool_t *p, const mem_request_t *request, ordo_block_t **out_block) {
    pool_block_t *b = (pool_block_t *)*out_block;
    graph_block_t block = {&b->history, b, pool_graph_free, NULL, request->bytes};
    ordo_status_t st = ordo__graph_block_born(p->tracker, &block, "ordo_mem_allocate");
    if (st != ORDO_OK) {
        (void)pool_deallocate_locked(p, b, request->stream);
        *out_block = NULL;
    }
    return st;
}

/* A free while the tracker records (under its lock): a block allocated in
 * the recording becomes the graph's (its handle ends here, its memory
 * stays handed out); any other is refused, and the recording with it. */
static ordo_status_t graph_freed(pool_t *p, pool_block_t *b, ordo_stream_t *stream) {
    static const char api[] = "ordo_mem_deallocate";
    uint32_t s;
    /* With the stream's bins made now, the graph's free cannot fail for
     * want of memory. */
    ordo_status_t st = free_checked(p, b, stream, &s, api);
    if (st == ORDO_OK) {
        st = ordo__graph_block_freed(p->tracker, &b->history, stream, api);
    }
    if (st == ORDO_OK) {
        atomic_store_explicit(&b->base.magic, ORDO_BLOCK_FREED, memory_order_relaxed);
        b->history.magic = ORDO_BUFFER_RELEASED;
    }
    return st;
}

static ordo_status_t pool_allocate(ordo_mem_resource_t *resource, const mem_request_t *request,
                                   ordo_block_t **out_block) {
    pool_t *p = (pool_t *)resource;
    ordo_rlock_lock(&p->tracker->lock);
    ordo_status_t st = pool_allocate_locked(p, request, out_block);
    if (ORDO_UNLIKELY(st == ORDO_OK && tracker_recording(p->tracker))) {
        st = graph_born(p, request, out_block);
    }
    trace_in_use(p);
    ordo_rlock_unlock(&p->tracker->lock);
    return st;
}

/* --- Deallocation --- */

static ordo_status_t pool_deallocate_locked(pool_t *p, pool_block_t *b, ordo_stream_t *stream) {
    static const char api[] = "ordo_mem_deallocate";
    uint32_t s;
    ORDO_RETURN_IF_ERROR(free_checked(p, b, stream, &s, api));
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
            ordo_status_t st = ordo__tracker_wait_for(p->tracker, s, u, point);
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
    if (b->history.magic == ORDO_BUFFER_PREPARED) {
        return ordo__buffer_refuse_prepared(&b->history, "ordo_mem_deallocate");
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

static ordo_status_t refuse_bound(const pool_block_t *b, const char *api) {
    return ordo__error(ORDO_ERR_BUSY, api,
                       "block %p (tag %u) is bound to %u graph(s), whose replays use it: "
                       "rebind them (ordo_graph_rebind) or destroy them first",
                       (const void *)b, b->base.tag, b->history.graph_binds);
}

/* A free out of any recording (under the lock). */
static ordo_status_t free_now_locked(pool_t *p, pool_block_t *b, ordo_stream_t *stream) {
    ordo_status_t st =
        stream ? pool_deallocate_locked(p, b, stream) : pool_deallocate_settled_locked(p, b);
    trace_in_use(p);
    return st;
}

/* A release the recording held (ordo__graph_release_after), now that it
 * ended. */
static void pool_release_after(void *block, ordo_stream_t *stream) {
    pool_block_t *b = block;
    pool_t *p = (pool_t *)b->base.resource;
    ordo_rlock_lock(&p->tracker->lock);
    if (b->history.graph_binds) {
        /* Bound meanwhile (a rebind of another graph to it): it stays
         * handed out, as a refused release would have left it. */
    } else if (tracker_recording(p->tracker)) {
        /* Never taken by a recording: held for the end of this one
         * (without memory, it stays handed out). */
        graph_block_t again = {&b->history, b, pool_release_after, stream, b->base.bytes};
        (void)ordo__graph_release_after(p->tracker, &again, "ordo_mem_deallocate");
    } else {
        (void)free_now_locked(p, b, stream);
    }
    ordo_rlock_unlock(&p->tracker->lock);
}

/* A free (release: an adaptor's, mem_release), under the lock, where a
 * recording begins and ends. A block bound to a graph is refused first,
 * in a recording too (where another graph may have been rebound to a block
 * allocated in it). In a recording, a free is the graph's (graph_freed)
 * and a release waits for its end, taken by no recording. */
static ordo_status_t pool_free(ordo_mem_resource_t *resource, ordo_block_t *block,
                               ordo_stream_t *stream, bool release) {
    static const char api[] = "ordo_mem_deallocate";
    pool_t *p = (pool_t *)resource;
    pool_block_t *b = (pool_block_t *)block;
    ordo_status_t st;
    ordo_rlock_lock(&p->tracker->lock);
    if (ORDO_UNLIKELY(b->history.graph_binds)) {
        st = refuse_bound(b, api);
    } else if (ORDO_UNLIKELY(tracker_recording(p->tracker))) {
        if (release) {
            graph_block_t held = {&b->history, b, pool_release_after, stream, b->base.bytes};
            st = ordo__graph_release_after(p->tracker, &held, api);
        } else {
            st = stream ? graph_freed(p, b, stream) : refused_while_recording(p, api);
        }
    } else {
        st = free_now_locked(p, b, stream);
    }
    ordo_rlock_unlock(&p->tracker->lock);
    return st;
}

static ordo_status_t pool_deallocate(ordo_mem_resource_t *resource, ordo_block_t *block,
                                     ordo_stream_t *stream) {
    return pool_free(resource, block, stream, false);
}

static ordo_status_t pool_release(ordo_mem_resource_t *resource, ordo_block_t *block,
                                  ordo_stream_t *stream) {
    return pool_free(resource, block, stream, true);
}

static ordo_status_t pool_free_check(ordo_mem_resource_t *resource, const ordo_block_t *block) {
    pool_t *p = (pool_t *)resource;
    const pool_block_t *b = (const pool_block_t *)block;
    ordo_rlock_lock(&p->tracker->lock);
    ordo_status_t st = b->history.graph_binds ? refuse_bound(b, "ordo_mem_deallocate")
                       : b->history.magic == ORDO_BUFFER_PREPARED
                           ? ordo__buffer_refuse_prepared(&b->history, "ordo_mem_deallocate")
                           : refuse_named_by_launch(p, b, "ordo_mem_deallocate");
    ordo_rlock_unlock(&p->tracker->lock);
    return st;
}

static int pool_records(ordo_mem_resource_t *resource) {
    return tracker_recording(((pool_t *)resource)->tracker);
}

/* --- Use tracking --- */

static ordo_status_t pool_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                              ordo_stream_t *stream, ordo_access_mode_t mode, int finish) {
    pool_t *p = (pool_t *)resource;
    pool_block_t *b = (pool_block_t *)block;
    ordo_access_t access = {&b->history, mode};
    const char *api = finish ? "ordo_mem_finish_use" : "ordo_mem_prepare_use";
    ORDO_RETURN_IF_ERROR(refused_while_recording(p, api));
    ordo_rlock_lock(&p->tracker->lock);
    ordo_status_t st = ORDO_OK;
    if (ORDO_UNLIKELY(tracker_launching_here(p->tracker))) {
        /* A replay's launch function may use no block: the replay writes
         * the histories of its lanes once it returns. (replaying is read
         * on the launching thread only.) */
        st = p->tracker->replaying ? ordo__tracker_refuse_in_launch(p->tracker, api)
                                   : refuse_named_by_launch(p, b, api);
    }
    if (st == ORDO_OK) {
        st = ordo__tracker_block_use(p->tracker, stream, &access, finish, api);
    }
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
    ORDO_RETURN_IF_ERROR(refused_while_recording(p, api));
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
    ORDO_RETURN_IF_ERROR(refused_while_recording(p, api)); /* a host wait */
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
    /* A wait that meets a failed stream is no failure of the reap: the
     * caller's message stays (ordo/status.h). */
    ordo__kept_message_t kept;
    ordo__message_keep(&kept);
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
    ordo__message_restore(&kept);
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
    .kind = POOL_RESOURCE_KIND,
    .refuses_blocks_below = 1,
    .allocate = pool_allocate,
    .deallocate = pool_deallocate,
    .release = pool_release,
    .records = pool_records,
    .free_check = pool_free_check,
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
                                           POOL_DEFAULT_SLOT_MAX, 0};
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
        if ((st = ordo__flags_check(config->flags, 0, __func__)) != ORDO_OK) {
            return st;
        }
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
    ORDO_RETURN_IF_ERROR(pool_check(resource, __func__));
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
    ORDO_RETURN_IF_ERROR(pool_check(resource, __func__));
    pool_t *p = (pool_t *)resource;
    ordo_rlock_lock(&p->tracker->lock);
    settle_all(p);
    trim_to(p, keep_bytes);
    ordo_rlock_unlock(&p->tracker->lock);
    return ORDO_OK;
}
