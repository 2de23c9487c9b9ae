/* The event pool (hal/event_pool.h).
 *
 * Pieces
 *   slot      one per event the pool made: the event pointer and a state
 *             word, generation << 2 | state (FREE, AVAILABLE, IN_USE,
 *             UNPOOLED). Slots live in chunks freed only with the pool and
 *             are reused with a new generation, so a stale pointer to a slot
 *             is always safe to read and never matches a later event.
 *   registry  an open-addressing table from event pointer to slot, written
 *             under the pool lock and probed without it. It only grows;
 *             older tables stay allocated until the pool is destroyed (a
 *             lock-free reader may still be probing one), so their total is
 *             below the current table's size.
 *   cache     per (thread, pool): up to CACHE_MAX available slots, touched
 *             by its thread only - or by the thread's exit, or by the pool's
 *             destruction, when the thread is not using the pool. It also
 *             holds the thread's acquire/release counters, written with
 *             plain stores and summed by readers of the statistics.
 *   depot     the pool's shared list of available slots, under its lock.
 *
 * Fast paths
 *   acquire   pop a slot from the calling thread's cache and store IN_USE:
 *             no lock, no read-modify-write.
 *   release   find the slot (one hash probe, usually), CAS its state from
 *             IN_USE to AVAILABLE, push it on the cache: no lock, one
 *             uncontended CAS on a line no other thread writes.
 *   A cache found empty (acquire) or full (release) trades half its
 *   capacity with the depot under the lock.
 *
 * Why misuse cannot corrupt the pool
 *   A slot goes back to a cache or the depot only through a CAS from IN_USE
 *   of the generation just read, so of two releases of one event -
 *   sequential or simultaneous - exactly one succeeds. An event the registry
 *   does not hold is foreign. Every doubt on the lock-free path (not found,
 *   not IN_USE, slot reused meanwhile, cache full) falls to the same checks
 *   under the lock, which give the verdict and the message. An acquire may
 *   store IN_USE plainly: the slot sits in the acquiring thread's own cache,
 *   and nothing else writes an AVAILABLE slot outside the lock.
 *
 * Statistics
 *   acquires/releases are the sums of the caches' counters plus the pool's
 *   own (unpooled events, operations without a cache, exited threads);
 *   in_use is their difference, exact whenever the pool is quiet. Readers
 *   sum releases before acquires, so in_use is never negative; samples for
 *   high_water sum acquires first, so they never exceed a real value. While
 *   one cache is attached ("solo"), its thread knows in_use exactly and
 *   tracks the peak on every acquire; otherwise the peak is sampled at every
 *   exchange with the depot and every statistics read.
 *
 * Threads
 *   Each thread has THREAD_ENTRIES (pool id, cache) entries in static TLS,
 *   looked up by id; ids are never reused, so an entry of a destroyed pool
 *   never matches. A pthread key's destructor returns the caches of an
 *   exiting thread to their pools. Caches belong to their pool: destroying
 *   the pool frees them, so nothing allocated outlives the pools.
 *
 * Locks, in order: pools_lock (global: the live pools, attaching and
 * detaching caches) -> pool->lock (depot, slots, registry writes, counters
 * of the pool) -> the allocator's lock. Backend callbacks run under
 * pool->lock, except destroy calls made when trimming, releasing unpooled
 * events or destroying the pool.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "hal/event_pool.h"

#define EVENT_POOL_MAGIC 0x4556504cu /* "EVPL" */
#define EVENT_POOL_DEAD 0xdeadbeefu

#define CACHE_LINE 64
#define CACHE_MAX 32u          /* slots a thread caches per pool */
#define THREAD_ENTRIES 64u     /* pools a thread caches for at once */
#define SLOTS_PER_CHUNK 32u    /* slots allocated at a time */
#define REGISTRY_MIN 16u       /* cells of the first registry table */
#define COUNT_LIMIT (1u << 24) /* largest initial or growth accepted */

#if defined(__GNUC__)
#define POOL_SLOW __attribute__((noinline, cold))
#define POOL_HOT __attribute__((always_inline)) inline
#else
#define POOL_SLOW
#define POOL_HOT inline
#endif

enum { SLOT_FREE = 0, SLOT_AVAILABLE = 1, SLOT_IN_USE = 2, SLOT_UNPOOLED = 3 };
#define SLOT_STATE ((uint64_t)3)
#define SLOT_GENERATION ((uint64_t)4)
#define NOT_SOLO INT64_MIN

typedef struct pool_slot {
    _Alignas(CACHE_LINE) _Atomic uint64_t state;
    _Atomic(void *) event;
    /* Depot, free list or a private chain: under the pool lock. */
    struct pool_slot *next;
} pool_slot_t;

typedef struct slot_chunk {
    struct slot_chunk *next;
    pool_slot_t slots[SLOTS_PER_CHUNK];
} slot_chunk_t;

typedef struct registry {
    struct registry *older;
    size_t mask;
    unsigned shift;
    _Atomic(pool_slot_t *) cells[];
} registry_t;

/* A cached slot with its event and generation: handing it out reads
 * nothing of the slot, and returning it straight after needs no read of it
 * before the CAS (a CAS that expects this generation fails if the slot was
 * reused, so its event is still the one matched). */
typedef struct cache_item {
    pool_slot_t *slot;
    void *event;
    uint64_t generation; /* the slot's state with its state bits cleared */
} cache_item_t;

typedef struct pool_cache {
    /* Written by the owning thread only. */
    _Alignas(CACHE_LINE) _Atomic uint32_t count;
    uint32_t capacity;
    _Atomic uint64_t acquires;
    _Atomic uint64_t releases;
    _Atomic int64_t high_water; /* the peak seen while solo */
    /* Written under the pool lock, read by the owner: in_use of everyone
     * else while this is the only cache, NOT_SOLO otherwise. */
    _Atomic int64_t solo_base;
    /* [0, count): available. [count]: the slot last handed out, until
     * overwritten - the first guess of a release (it is checked like any). */
    cache_item_t items[CACHE_MAX];
    /* The pool's list of caches: under the pool lock. */
    struct pool_cache *prev;
    struct pool_cache *next;
} pool_cache_t;

struct event_pool {
    uint32_t magic;
    uint32_t cache_capacity;
    uint64_t id;
    ordo_event_kind_t kind;
    event_pool_backend_t backend;
    ordo_event_pool_config_t config;
    _Atomic(registry_t *) registry;
    /* Under pools_lock. */
    struct event_pool *live_prev;
    struct event_pool *live_next;
    pthread_mutex_t lock;
    /* Under lock. */
    pool_slot_t *depot;
    size_t depot_count;
    pool_slot_t *free_slots;
    slot_chunk_t *chunks;
    size_t registered;
    size_t pooled_alive;
    size_t unpooled_alive;
    pool_cache_t *caches;
    pool_cache_t *solo;
    size_t attached;
    uint64_t created_total;
    uint64_t destroyed_total;
    uint64_t unpooled_created;
    uint64_t unpooled_destroyed;
    uint64_t base_acquires; /* not counted in any attached cache */
    uint64_t base_releases;
    uint64_t high_water;
};

/* ---- threads' caches ------------------------------------------------- */

typedef struct thread_entry {
    uint64_t pool_id; /* 0: unused */
    pool_cache_t *cache;
} thread_entry_t;

enum { THREAD_FRESH = 0, THREAD_REGISTERED = 1, THREAD_EXITING = 2 };

/* The table lives on the C library's heap, not in thread-local storage:
 * libordo's thread-local block is taken from the static TLS room a dlopen
 * finds (some of its variables are initial-exec), which is a few hundred
 * bytes, and a 1 KiB table there made a dlopen from Python fail. NULL until
 * the thread registers; freed at its exit. */
static _Thread_local thread_entry_t *thread_entries;
static _Thread_local int thread_state;

static pthread_mutex_t pools_lock = PTHREAD_MUTEX_INITIALIZER;
static event_pool_t *live_pools; /* under pools_lock */
static _Atomic uint64_t last_pool_id;
static pthread_once_t exit_key_once = PTHREAD_ONCE_INIT;
static pthread_key_t exit_key;
static int exit_key_ready;

static const char *kind_name(ordo_event_kind_t kind) {
    return kind == ORDO_EVENT_TIMING ? "timing" : "plain";
}

static ordo_status_t pool_check(const event_pool_t *pool, const char *api) {
    if (!pool) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "pool is NULL");
    }
    if (pool->magic != EVENT_POOL_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%p is not a live event pool",
                           (const void *)pool);
    }
    return ORDO_OK;
}

/* The calling thread's cache for pool when it sits at its home entry. */
static POOL_HOT pool_cache_t *thread_cache_fast(const event_pool_t *pool) {
    const thread_entry_t *entries = thread_entries;
    if (ORDO_UNLIKELY(!entries)) {
        return NULL;
    }
    const thread_entry_t *entry = &entries[pool->id & (THREAD_ENTRIES - 1)];
    return ORDO_LIKELY(entry->pool_id == pool->id) ? entry->cache : NULL;
}

/* The calling thread's cache for pool wherever it sits; NULL if none. */
static pool_cache_t *thread_cache_probe(const event_pool_t *pool) {
    if (!thread_entries) {
        return NULL;
    }
    for (uint64_t k = 0; k < THREAD_ENTRIES; ++k) {
        thread_entry_t *entry = &thread_entries[(pool->id + k) & (THREAD_ENTRIES - 1)];
        if (entry->pool_id == pool->id) {
            return entry->cache;
        }
    }
    return NULL;
}

/* Under pools_lock. */
static event_pool_t *live_pool_find(uint64_t id) {
    for (event_pool_t *pool = live_pools; pool; pool = pool->live_next) {
        if (pool->id == id) {
            return pool;
        }
    }
    return NULL;
}

/* ---- registry: event pointer -> slot ---------------------------------- */

static size_t registry_index(const registry_t *r, const void *event) {
    return (size_t)(((uint64_t)(uintptr_t)event * 0x9e3779b97f4a7c15ull) >> r->shift);
}

static size_t registry_bytes(size_t cells) {
    return sizeof(registry_t) + cells * sizeof(_Atomic(pool_slot_t *));
}

static registry_t *registry_new(size_t cells) {
    registry_t *r = ordo__alloc(registry_bytes(cells), 0);
    if (r) {
        unsigned bits = 0;
        while (((size_t)1 << bits) < cells) {
            ++bits;
        }
        r->mask = cells - 1;
        r->shift = 64u - bits;
    }
    return r;
}

/* Without the lock the answer may be stale (NULL for a live event while a
 * writer moves cells); under the lock it is exact. */
static POOL_HOT pool_slot_t *registry_find(const registry_t *r, const void *event) {
    size_t i = registry_index(r, event);
    for (size_t n = 0; n <= r->mask; ++n) {
        pool_slot_t *slot = atomic_load_explicit(&r->cells[i], memory_order_acquire);
        if (!slot) {
            return NULL;
        }
        if (atomic_load_explicit(&slot->event, memory_order_relaxed) == event) {
            return slot;
        }
        i = (i + 1) & r->mask;
    }
    return NULL;
}

static void registry_place(registry_t *r, pool_slot_t *slot) {
    size_t i = registry_index(r, atomic_load_explicit(&slot->event, memory_order_relaxed));
    while (atomic_load_explicit(&r->cells[i], memory_order_relaxed)) {
        i = (i + 1) & r->mask;
    }
    atomic_store_explicit(&r->cells[i], slot, memory_order_release);
}

/* Under the lock. Returns 0, or -1 when a larger table cannot be had. */
static int registry_insert(event_pool_t *pool, pool_slot_t *slot) {
    registry_t *r = atomic_load_explicit(&pool->registry, memory_order_relaxed);
    if ((pool->registered + 1) * 2 > r->mask + 1) {
        registry_t *bigger = registry_new((r->mask + 1) * 2);
        if (!bigger) {
            return -1;
        }
        for (size_t i = 0; i <= r->mask; ++i) {
            pool_slot_t *cell = atomic_load_explicit(&r->cells[i], memory_order_relaxed);
            if (cell) {
                registry_place(bigger, cell);
            }
        }
        bigger->older = r;
        atomic_store_explicit(&pool->registry, bigger, memory_order_release);
        r = bigger;
    }
    registry_place(r, slot);
    pool->registered++;
    return 0;
}

/* Under the lock; slot is registered. Backward-shift deletion: no
 * tombstones, so probes stay short however often events come and go. */
static void registry_remove(event_pool_t *pool, pool_slot_t *slot) {
    registry_t *r = atomic_load_explicit(&pool->registry, memory_order_relaxed);
    size_t hole = registry_index(r, atomic_load_explicit(&slot->event, memory_order_relaxed));
    while (atomic_load_explicit(&r->cells[hole], memory_order_relaxed) != slot) {
        hole = (hole + 1) & r->mask;
    }
    size_t j = hole;
    for (;;) {
        j = (j + 1) & r->mask;
        pool_slot_t *cell = atomic_load_explicit(&r->cells[j], memory_order_relaxed);
        if (!cell) {
            break;
        }
        size_t home = registry_index(r, atomic_load_explicit(&cell->event, memory_order_relaxed));
        /* The cell may fill the hole unless its home lies after the hole. */
        if (((j - home) & r->mask) >= ((j - hole) & r->mask)) {
            atomic_store_explicit(&r->cells[hole], cell, memory_order_release);
            hole = j;
        }
    }
    atomic_store_explicit(&r->cells[hole], NULL, memory_order_release);
    pool->registered--;
}

/* ---- slots, depot ---------------------------------------------------- */

static void depot_push(event_pool_t *pool, pool_slot_t *slot) {
    slot->next = pool->depot;
    pool->depot = slot;
    pool->depot_count++;
}

static pool_slot_t *depot_pop(event_pool_t *pool) {
    pool_slot_t *slot = pool->depot;
    pool->depot = slot->next;
    pool->depot_count--;
    return slot;
}

/* A slot whose event is gone: a new generation, so that no reader holding
 * an older state can CAS it. Its event pointer stays until slot_free. */
static void slot_retire(pool_slot_t *slot) {
    uint64_t s = atomic_load_explicit(&slot->state, memory_order_relaxed);
    atomic_store_explicit(&slot->state, ((s & ~SLOT_STATE) + SLOT_GENERATION) | SLOT_FREE,
                          memory_order_release);
}

static void slot_free(event_pool_t *pool, pool_slot_t *slot) {
    atomic_store_explicit(&slot->event, NULL, memory_order_relaxed);
    slot->next = pool->free_slots;
    pool->free_slots = slot;
}

/* Under the lock: a fresh event from the backend in a registered slot with
 * the given state. On failure nothing is left behind. */
static ordo_status_t slot_create(event_pool_t *pool, uint64_t state, pool_slot_t **out_slot,
                                 const char *api) {
    if (!pool->free_slots) {
        slot_chunk_t *chunk = ordo__alloc(sizeof *chunk, CACHE_LINE);
        if (!chunk) {
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api,
                               "cannot allocate the bookkeeping of %u %s events", SLOTS_PER_CHUNK,
                               kind_name(pool->kind));
        }
        chunk->next = pool->chunks;
        pool->chunks = chunk;
        for (size_t i = SLOTS_PER_CHUNK; i-- > 0;) {
            slot_free(pool, &chunk->slots[i]);
        }
    }
    pool_slot_t *slot = pool->free_slots;
    void *event = NULL;
    ordo_status_t st = pool->backend.create(pool->backend.user, pool->kind, &event);
    if (st != ORDO_OK) {
        return ordo__error(st, api, "the backend failed to create a %s event (%s)",
                           kind_name(pool->kind), ordo_status_name(st));
    }
    registry_t *r = atomic_load_explicit(&pool->registry, memory_order_relaxed);
    if (!event || registry_find(r, event)) {
        if (event) {
            /* Not ours to destroy: the pool already holds this event. */
            return ordo__error(ORDO_ERR_INTERNAL, api,
                               "the backend returned event %p, which is already live", event);
        }
        return ordo__error(ORDO_ERR_INTERNAL, api, "the backend returned no %s event",
                           kind_name(pool->kind));
    }
    pool->free_slots = slot->next;
    atomic_store_explicit(&slot->event, event, memory_order_relaxed);
    uint64_t s = atomic_load_explicit(&slot->state, memory_order_relaxed);
    atomic_store_explicit(&slot->state, (s & ~SLOT_STATE) | state, memory_order_relaxed);
    if (registry_insert(pool, slot) != 0) {
        pool->backend.destroy(pool->backend.user, event);
        slot_retire(slot);
        slot_free(pool, slot);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api,
                           "cannot grow the registry of %s events past %zu entries",
                           kind_name(pool->kind), pool->registered);
    }
    *out_slot = slot;
    return ORDO_OK;
}

/* ---- counters and the high-water mark (under the lock) ---------------- */

static void pool_totals(const event_pool_t *pool, int releases_first, uint64_t *out_acquires,
                        uint64_t *out_releases) {
    uint64_t acquires = pool->base_acquires;
    uint64_t releases = pool->base_releases;
    for (int pass = 0; pass < 2; ++pass) {
        int count_releases = (pass == 0) == (releases_first != 0);
        for (const pool_cache_t *c = pool->caches; c; c = c->next) {
            if (count_releases) {
                releases += atomic_load_explicit(&c->releases, memory_order_acquire);
            } else {
                acquires += atomic_load_explicit(&c->acquires, memory_order_acquire);
            }
        }
    }
    *out_acquires = acquires;
    *out_releases = releases;
}

/* Raises high_water to a value in_use really took (a lower bound of the
 * present one) and to the peaks solo threads saw. */
static void pool_sample(event_pool_t *pool) {
    uint64_t acquires;
    uint64_t releases;
    pool_totals(pool, 0, &acquires, &releases);
    if (acquires > releases && acquires - releases > pool->high_water) {
        pool->high_water = acquires - releases;
    }
    for (const pool_cache_t *c = pool->caches; c; c = c->next) {
        int64_t peak = atomic_load_explicit(&c->high_water, memory_order_relaxed);
        if (peak > 0 && (uint64_t)peak > pool->high_water) {
            pool->high_water = (uint64_t)peak;
        }
    }
}

/* Tells the only attached cache, if there is one, the in_use of everyone
 * else; call after every change of attached or of the base counters. */
static void pool_update_solo(event_pool_t *pool) {
    pool_cache_t *solo = pool->attached == 1 ? pool->caches : NULL;
    if (pool->solo && pool->solo != solo) {
        atomic_store_explicit(&pool->solo->solo_base, NOT_SOLO, memory_order_relaxed);
    }
    if (solo) {
        int64_t base = (int64_t)(pool->base_acquires - pool->base_releases);
        atomic_store_explicit(&solo->solo_base, base, memory_order_relaxed);
    }
    pool->solo = solo;
}

/* ---- caches ---------------------------------------------------------- */

static POOL_HOT void *cache_pop(pool_cache_t *cache, int track_peak) {
    uint32_t n = atomic_load_explicit(&cache->count, memory_order_relaxed) - 1;
    cache_item_t item = cache->items[n];
    atomic_store_explicit(&cache->count, n, memory_order_relaxed);
    uint64_t acquires = atomic_load_explicit(&cache->acquires, memory_order_relaxed) + 1;
    atomic_store_explicit(&cache->acquires, acquires, memory_order_relaxed);
    /* Release: whoever returns the event sees this acquire counted. */
    atomic_store_explicit(&item.slot->state, item.generation | SLOT_IN_USE, memory_order_release);
    int64_t base =
        track_peak ? atomic_load_explicit(&cache->solo_base, memory_order_relaxed) : NOT_SOLO;
    if (base != NOT_SOLO) {
        uint64_t releases = atomic_load_explicit(&cache->releases, memory_order_relaxed);
        int64_t in_use = (int64_t)(acquires - releases) + base;
        if (in_use > atomic_load_explicit(&cache->high_water, memory_order_relaxed)) {
            atomic_store_explicit(&cache->high_water, in_use, memory_order_relaxed);
        }
    }
    return item.event;
}

static POOL_HOT void cache_push(pool_cache_t *cache, uint32_t n, pool_slot_t *slot, void *event,
                                uint64_t generation) {
    cache->items[n].generation = generation;
    cache->items[n].slot = slot;
    cache->items[n].event = event;
    atomic_store_explicit(&cache->count, n + 1, memory_order_relaxed);
    uint64_t releases = atomic_load_explicit(&cache->releases, memory_order_relaxed) + 1;
    atomic_store_explicit(&cache->releases, releases, memory_order_release);
}

/* Under the lock, by the owner: the older half of a full cache to the
 * depot (the most recently used events stay). */
static void cache_flush(event_pool_t *pool, pool_cache_t *cache) {
    uint32_t n = atomic_load_explicit(&cache->count, memory_order_relaxed);
    uint32_t k = n > 1 ? n / 2 : n;
    for (uint32_t i = 0; i < k; ++i) {
        depot_push(pool, cache->items[i].slot);
    }
    memmove(cache->items, cache->items + k, (size_t)(n - k) * sizeof cache->items[0]);
    atomic_store_explicit(&cache->count, n - k, memory_order_relaxed);
}

/* Under the lock, while the owner is not using the cache: its slots to the
 * depot, its counters to the pool's. */
static void cache_drain(event_pool_t *pool, pool_cache_t *cache) {
    uint32_t n = atomic_load_explicit(&cache->count, memory_order_relaxed);
    for (uint32_t i = 0; i < n; ++i) {
        depot_push(pool, cache->items[i].slot);
    }
    atomic_store_explicit(&cache->count, 0, memory_order_relaxed);
    pool->base_acquires += atomic_load_explicit(&cache->acquires, memory_order_relaxed);
    pool->base_releases += atomic_load_explicit(&cache->releases, memory_order_relaxed);
    atomic_store_explicit(&cache->acquires, 0, memory_order_relaxed);
    atomic_store_explicit(&cache->releases, 0, memory_order_relaxed);
    int64_t peak = atomic_load_explicit(&cache->high_water, memory_order_relaxed);
    if (peak > 0 && (uint64_t)peak > pool->high_water) {
        pool->high_water = (uint64_t)peak;
    }
}

/* Under pools_lock: returns cache to pool and frees it. */
static void cache_detach(event_pool_t *pool, pool_cache_t *cache) {
    pthread_mutex_lock(&pool->lock);
    cache_drain(pool, cache);
    if (cache->prev) {
        cache->prev->next = cache->next;
    } else {
        pool->caches = cache->next;
    }
    if (cache->next) {
        cache->next->prev = cache->prev;
    }
    pool->attached--;
    if (pool->solo == cache) {
        pool->solo = NULL;
    }
    pool_update_solo(pool);
    pthread_mutex_unlock(&pool->lock);
    ordo__dealloc(cache, sizeof *cache, CACHE_LINE);
}

/* The pthread key's destructor: an exiting thread's caches go back. */
static void thread_exit(void *arg) {
    thread_entry_t *entries = arg;
    thread_state = THREAD_EXITING; /* later calls on this thread: no cache */
    pthread_mutex_lock(&pools_lock);
    for (size_t i = 0; i < THREAD_ENTRIES; ++i) {
        if (entries[i].pool_id) {
            event_pool_t *pool = live_pool_find(entries[i].pool_id);
            if (pool) {
                cache_detach(pool, entries[i].cache);
            }
            entries[i].pool_id = 0;
            entries[i].cache = NULL;
        }
    }
    pthread_mutex_unlock(&pools_lock);
    thread_entries = NULL;
    free(entries);
}

static void exit_key_make(void) {
    exit_key_ready = pthread_key_create(&exit_key, thread_exit) == 0;
}

/* A new cache for the calling thread, or NULL when it cannot have one
 * (out of memory, all its entries hold live pools, exiting): the caller
 * then works on the depot under the lock. */
static pool_cache_t *cache_attach(event_pool_t *pool) {
    if (thread_state == THREAD_EXITING) {
        return NULL;
    }
    if (thread_state == THREAD_FRESH) {
        pthread_once(&exit_key_once, exit_key_make);
        /* From the C library, as a trace's per-thread record is: it
         * belongs to the thread, not to an ordo object (ordo/alloc.h). */
        thread_entry_t *entries = exit_key_ready ? calloc(THREAD_ENTRIES, sizeof *entries) : NULL;
        if (!entries || pthread_setspecific(exit_key, entries) != 0) {
            free(entries);
            return NULL;
        }
        thread_entries = entries;
        thread_state = THREAD_REGISTERED;
    }
    pthread_mutex_lock(&pools_lock);
    thread_entry_t *entry = NULL;
    for (uint64_t k = 0; k < THREAD_ENTRIES && !entry; ++k) {
        thread_entry_t *e = &thread_entries[(pool->id + k) & (THREAD_ENTRIES - 1)];
        if (e->pool_id == 0 || !live_pool_find(e->pool_id)) {
            entry = e; /* unused, or its pool is gone (and its cache with it) */
        }
    }
    pool_cache_t *cache = entry ? ordo__alloc(sizeof *cache, CACHE_LINE) : NULL;
    if (cache) {
        cache->capacity = pool->cache_capacity;
        atomic_store_explicit(&cache->solo_base, NOT_SOLO, memory_order_relaxed);
        pthread_mutex_lock(&pool->lock);
        cache->next = pool->caches;
        if (pool->caches) {
            pool->caches->prev = cache;
        }
        pool->caches = cache;
        pool->attached++;
        pool_update_solo(pool);
        pthread_mutex_unlock(&pool->lock);
        entry->pool_id = pool->id;
        entry->cache = cache;
    }
    pthread_mutex_unlock(&pools_lock);
    return cache;
}

static pool_cache_t *cache_get(event_pool_t *pool) {
    pool_cache_t *cache = thread_cache_probe(pool);
    return cache ? cache : cache_attach(pool);
}

/* ---- create and destroy ---------------------------------------------- */

/* Destroys every event and frees everything; nobody else may hold pool. */
static void pool_free(event_pool_t *pool) {
    while (pool->depot) {
        pool_slot_t *slot = depot_pop(pool);
        pool->backend.destroy(pool->backend.user,
                              atomic_load_explicit(&slot->event, memory_order_relaxed));
    }
    while (pool->chunks) {
        slot_chunk_t *chunk = pool->chunks;
        pool->chunks = chunk->next;
        ordo__dealloc(chunk, sizeof *chunk, CACHE_LINE);
    }
    registry_t *r = atomic_load_explicit(&pool->registry, memory_order_relaxed);
    while (r) {
        registry_t *older = r->older;
        ordo__dealloc(r, registry_bytes(r->mask + 1), 0);
        r = older;
    }
    pool->magic = EVENT_POOL_DEAD;
    pthread_mutex_destroy(&pool->lock);
    ordo__dealloc(pool, sizeof *pool, CACHE_LINE);
}

ordo_status_t ordo_event_pool_config_default(ordo_event_pool_config_t *out_config) {
    if (!out_config) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_config is NULL");
    }
    *out_config = (ordo_event_pool_config_t){.initial = ORDO_EVENT_POOL_DEFAULT_INITIAL,
                                             .growth = ORDO_EVENT_POOL_DEFAULT_GROWTH};
    return ORDO_OK;
}

ordo_status_t ordo__event_pool_create(const event_pool_backend_t *backend, ordo_event_kind_t kind,
                                      const ordo_event_pool_config_t *config,
                                      event_pool_t **out_pool, const char *api) {
    if (!out_pool) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "out_pool is NULL");
    }
    *out_pool = NULL;
    if (!backend || !backend->create || !backend->destroy) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           backend ? "the backend's create and destroy must both be set"
                                   : "backend is NULL");
    }
    if (kind != ORDO_EVENT_PLAIN && kind != ORDO_EVENT_TIMING) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "event kind %d is not a kind",
                           (int)kind);
    }
    ordo_event_pool_config_t cfg;
    (void)ordo_event_pool_config_default(&cfg);
    if (config) {
        cfg = *config;
    }
    if (cfg.growth == 0) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "growth is 0; it must be >= 1");
    }
    if (cfg.initial > COUNT_LIMIT || cfg.growth > COUNT_LIMIT) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, api, "initial %zu or growth %zu exceeds %u",
                           cfg.initial, cfg.growth, COUNT_LIMIT);
    }
    if (cfg.maximum && cfg.initial > cfg.maximum) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "initial %zu exceeds maximum %zu",
                           cfg.initial, cfg.maximum);
    }
    event_pool_t *pool = ordo__alloc(sizeof *pool, CACHE_LINE);
    if (!pool) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate an event pool");
    }
    size_t cells = REGISTRY_MIN;
    while (cells < 2 * (cfg.initial + cfg.growth)) {
        cells *= 2;
    }
    registry_t *registry = registry_new(cells);
    if (!registry || pthread_mutex_init(&pool->lock, NULL) != 0) {
        if (registry) {
            ordo__dealloc(registry, registry_bytes(cells), 0);
        }
        ordo__dealloc(pool, sizeof *pool, CACHE_LINE);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate an event pool");
    }
    pool->magic = EVENT_POOL_MAGIC;
    pool->id = atomic_fetch_add_explicit(&last_pool_id, 1, memory_order_relaxed) + 1;
    pool->kind = kind;
    pool->backend = *backend;
    pool->config = cfg;
    /* With a maximum, small caches: events idle in one thread's cache are
     * out of reach of the others. */
    size_t capacity = CACHE_MAX;
    if (cfg.maximum) {
        capacity = cfg.maximum / 8;
        capacity = capacity < 1 ? 1 : capacity > CACHE_MAX ? CACHE_MAX : capacity;
    }
    pool->cache_capacity = (uint32_t)capacity;
    atomic_init(&pool->registry, registry);
    for (size_t i = 0; i < cfg.initial; ++i) {
        pool_slot_t *slot;
        ordo_status_t st = slot_create(pool, SLOT_AVAILABLE, &slot, api);
        if (st != ORDO_OK) {
            pool_free(pool);
            return st;
        }
        depot_push(pool, slot);
        pool->pooled_alive++;
        pool->created_total++;
    }
    pthread_mutex_lock(&pools_lock);
    pool->live_next = live_pools;
    if (live_pools) {
        live_pools->live_prev = pool;
    }
    live_pools = pool;
    pthread_mutex_unlock(&pools_lock);
    *out_pool = pool;
    return ORDO_OK;
}

ordo_status_t ordo__event_pool_destroy(event_pool_t *pool) {
    ORDO_RETURN_IF_ERROR(pool_check(pool, __func__));
    pthread_mutex_lock(&pools_lock);
    pthread_mutex_lock(&pool->lock);
    uint64_t acquires;
    uint64_t releases;
    pool_totals(pool, 1, &acquires, &releases);
    if (acquires != releases) {
        pthread_mutex_unlock(&pool->lock);
        pthread_mutex_unlock(&pools_lock);
        return ordo__error(ORDO_ERR_BUSY, __func__, "%llu %s event(s) of the pool are still in use",
                           (unsigned long long)(acquires - releases), kind_name(pool->kind));
    }
    /* Threads still alive keep an entry with this pool's id: it never
     * matches again, and their exit finds the pool gone. */
    while (pool->caches) {
        pool_cache_t *cache = pool->caches;
        pool->caches = cache->next;
        cache_drain(pool, cache);
        ordo__dealloc(cache, sizeof *cache, CACHE_LINE);
    }
    pool->attached = 0;
    pool->solo = NULL;
    if (pool->live_prev) {
        pool->live_prev->live_next = pool->live_next;
    } else {
        live_pools = pool->live_next;
    }
    if (pool->live_next) {
        pool->live_next->live_prev = pool->live_prev;
    }
    pool->magic = EVENT_POOL_DEAD;
    pthread_mutex_unlock(&pool->lock);
    pthread_mutex_unlock(&pools_lock);
    pool_free(pool);
    return ORDO_OK;
}

/* ---- acquire --------------------------------------------------------- */

/* Under the lock, which it releases: an event beyond the maximum. */
static ordo_status_t acquire_unpooled(event_pool_t *pool, void **out_event, int *out_pooled,
                                      const char *api) {
    pool_slot_t *slot;
    ordo_status_t st = slot_create(pool, SLOT_UNPOOLED, &slot, api);
    if (st != ORDO_OK) {
        pthread_mutex_unlock(&pool->lock);
        return st;
    }
    pool->unpooled_alive++;
    pool->created_total++;
    pool->unpooled_created++;
    pool->base_acquires++;
    pool_update_solo(pool);
    pool_sample(pool);
    pthread_mutex_unlock(&pool->lock);
    *out_event = atomic_load_explicit(&slot->event, memory_order_relaxed);
    *out_pooled = 0;
    return ORDO_OK;
}

static POOL_SLOW ordo_status_t acquire_slow(event_pool_t *pool, void **out_event, int *out_pooled) {
    const char *api = "ordo__event_pool_acquire";
    if (!pool || pool->magic != EVENT_POOL_MAGIC) {
        return pool_check(pool, api);
    }
    if (!out_event || !out_pooled) {
        if (out_event) {
            *out_event = NULL;
        }
        if (out_pooled) {
            *out_pooled = 0;
        }
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "%s is NULL",
                           out_event ? "out_pooled" : "out_event");
    }
    pool_cache_t *cache = cache_get(pool);
    if (cache && atomic_load_explicit(&cache->count, memory_order_relaxed) != 0) {
        *out_event = cache_pop(cache, 1); /* it sat away from its home entry */
        *out_pooled = 1;
        return ORDO_OK;
    }
    pthread_mutex_lock(&pool->lock);
    if (!pool->depot) {
        size_t room = SIZE_MAX;
        if (pool->config.maximum) {
            room = pool->config.maximum - pool->pooled_alive;
        }
        if (room == 0) {
            return acquire_unpooled(pool, out_event, out_pooled, api);
        }
        size_t want = pool->config.growth < room ? pool->config.growth : room;
        ordo_status_t st = ORDO_OK;
        /* A growth cut short still hands out what it made: the refusal's
         * message is then not the caller's (ordo/status.h). */
        ordo__kept_message_t kept;
        ordo__message_keep(&kept);
        for (size_t made = 0; made < want; ++made) {
            pool_slot_t *slot;
            st = slot_create(pool, SLOT_AVAILABLE, &slot, api);
            if (st != ORDO_OK) {
                break; /* keep what was made, if anything */
            }
            depot_push(pool, slot);
            pool->pooled_alive++;
            pool->created_total++;
        }
        if (!pool->depot) {
            pthread_mutex_unlock(&pool->lock);
            *out_event = NULL;
            *out_pooled = 0;
            return st;
        }
        ordo__message_restore(&kept);
    }
    if (cache) {
        uint32_t want = cache->capacity > 1 ? cache->capacity / 2 : 1;
        uint32_t n = 0;
        while (n < want && pool->depot) {
            pool_slot_t *slot = depot_pop(pool);
            uint64_t s = atomic_load_explicit(&slot->state, memory_order_relaxed);
            cache->items[n].slot = slot;
            cache->items[n].event = atomic_load_explicit(&slot->event, memory_order_relaxed);
            cache->items[n++].generation = s & ~SLOT_STATE;
        }
        atomic_store_explicit(&cache->count, n, memory_order_relaxed);
        pool_sample(pool);
        pthread_mutex_unlock(&pool->lock);
        *out_event = cache_pop(cache, 1);
        *out_pooled = 1;
        return ORDO_OK;
    }
    pool_slot_t *slot = depot_pop(pool);
    uint64_t s = atomic_load_explicit(&slot->state, memory_order_relaxed);
    pool->base_acquires++;
    atomic_store_explicit(&slot->state, (s & ~SLOT_STATE) | SLOT_IN_USE, memory_order_release);
    pool_update_solo(pool);
    pool_sample(pool);
    pthread_mutex_unlock(&pool->lock);
    *out_event = atomic_load_explicit(&slot->event, memory_order_relaxed);
    *out_pooled = 1;
    return ORDO_OK;
}

ordo_status_t ordo__event_pool_acquire(event_pool_t *pool, void **out_event, int *out_pooled) {
    if (ORDO_LIKELY(pool && pool->magic == EVENT_POOL_MAGIC && out_event && out_pooled)) {
        pool_cache_t *cache = thread_cache_fast(pool);
        if (ORDO_LIKELY(cache && atomic_load_explicit(&cache->count, memory_order_relaxed))) {
            *out_event = cache_pop(cache, 1);
            *out_pooled = 1;
            return ORDO_OK;
        }
    }
    return acquire_slow(pool, out_event, out_pooled);
}

/* ---- release --------------------------------------------------------- */

/* cached: into this thread's cache (a thread that also acquires), else
 * straight to the depot. */
static POOL_SLOW ordo_status_t release_slow(event_pool_t *pool, void *event, int pooled,
                                            int cached) {
    const char *api = "ordo__event_pool_release";
    ORDO_RETURN_IF_ERROR(pool_check(pool, api));
    if (!event) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "event is NULL");
    }
    if (pooled != 0 && pooled != 1) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "pooled is %d; pass back the 0 or 1 ordo__event_pool_acquire gave",
                           pooled);
    }
    pool_cache_t *cache = pooled && cached ? cache_get(pool) : NULL;
    pthread_mutex_lock(&pool->lock);
    pool_slot_t *slot =
        registry_find(atomic_load_explicit(&pool->registry, memory_order_relaxed), event);
    uint64_t s = slot ? atomic_load_explicit(&slot->state, memory_order_acquire) : SLOT_FREE;
    switch (s & SLOT_STATE) {
    case SLOT_AVAILABLE:
        pthread_mutex_unlock(&pool->lock);
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "%s event %p is already back in the pool (released twice?)",
                           kind_name(pool->kind), event);
    case SLOT_UNPOOLED:
        if (pooled) {
            pthread_mutex_unlock(&pool->lock);
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                               "event %p was handed out unpooled; release it with pooled 0", event);
        }
        registry_remove(pool, slot);
        slot_retire(slot);
        slot_free(pool, slot);
        pool->unpooled_alive--;
        pool->destroyed_total++;
        pool->unpooled_destroyed++;
        pool->base_releases++;
        pool_update_solo(pool);
        pthread_mutex_unlock(&pool->lock);
        pool->backend.destroy(pool->backend.user, event);
        return ORDO_OK;
    case SLOT_IN_USE:
        if (!pooled) {
            pthread_mutex_unlock(&pool->lock);
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                               "event %p was handed out pooled; release it with pooled 1", event);
        }
        if (!atomic_compare_exchange_strong_explicit(&slot->state, &s,
                                                     (s & ~SLOT_STATE) | SLOT_AVAILABLE,
                                                     memory_order_acq_rel, memory_order_relaxed)) {
            pthread_mutex_unlock(&pool->lock);
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                               "%s event %p is already back in the pool (released twice?)",
                               kind_name(pool->kind), event);
        }
        if (cache) {
            uint32_t n = atomic_load_explicit(&cache->count, memory_order_relaxed);
            if (n == cache->capacity) {
                cache_flush(pool, cache);
                n = atomic_load_explicit(&cache->count, memory_order_relaxed);
            }
            cache_push(cache, n, slot, event, s & ~SLOT_STATE);
        } else {
            depot_push(pool, slot);
            pool->base_releases++;
            pool_update_solo(pool);
        }
        pthread_mutex_unlock(&pool->lock);
        return ORDO_OK;
    default:
        pthread_mutex_unlock(&pool->lock);
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "%p is not a live event of this %s pool (made elsewhere, or unpooled "
                           "and already released)",
                           event, kind_name(pool->kind));
    }
}

/* The slot of an event coming back to this thread's cache (n events in
 * it) and the state the slot must hold (its generation, in use): the event
 * last handed out here is the first guess, the registry the second. 0
 * when the lock-free path cannot tell (the slow path, under the lock,
 * decides). From the registry, the event is read after the state: a slot
 * reused since the lookup either shows another event or has moved on from
 * the state returned. */
static POOL_HOT int slot_of_returning(const event_pool_t *pool, const pool_cache_t *cache,
                                      uint32_t n, const void *event, pool_slot_t **out_slot,
                                      uint64_t *out_in_use) {
    const cache_item_t *last = &cache->items[n];
    if (last->event == event) {
        *out_slot = last->slot;
        *out_in_use = last->generation | SLOT_IN_USE;
        return 1;
    }
    registry_t *r = atomic_load_explicit(&pool->registry, memory_order_acquire);
    pool_slot_t *slot = registry_find(r, event);
    if (!slot) {
        return 0;
    }
    uint64_t s = atomic_load_explicit(&slot->state, memory_order_acquire);
    if ((s & SLOT_STATE) != SLOT_IN_USE ||
        atomic_load_explicit(&slot->event, memory_order_relaxed) != event) {
        return 0;
    }
    *out_slot = slot;
    *out_in_use = s;
    return 1;
}

ordo_status_t ordo__event_pool_release(event_pool_t *pool, void *event, int pooled) {
    if (ORDO_LIKELY(pool && pool->magic == EVENT_POOL_MAGIC && event && pooled == 1)) {
        pool_cache_t *cache = thread_cache_fast(pool);
        if (ORDO_LIKELY(cache != NULL)) {
            uint32_t n = atomic_load_explicit(&cache->count, memory_order_relaxed);
            if (ORDO_LIKELY(n < cache->capacity)) {
                pool_slot_t *slot;
                uint64_t s;
                if (!slot_of_returning(pool, cache, n, event, &slot, &s)) {
                    return release_slow(pool, event, pooled, 1);
                }
                /* The compare-exchange expects that generation in use: of
                 * two releases of one event exactly one succeeds. */
                uint64_t generation = s & ~SLOT_STATE;
                if (ORDO_LIKELY(atomic_compare_exchange_strong_explicit(
                        &slot->state, &s, generation | SLOT_AVAILABLE, memory_order_acq_rel,
                        memory_order_relaxed))) {
                    cache_push(cache, n, slot, event, generation);
                    return ORDO_OK;
                }
            }
        }
    }
    return release_slow(pool, event, pooled, 1);
}

ordo_status_t ordo__event_pool_release_shared(event_pool_t *pool, void *event, int pooled) {
    return release_slow(pool, event, pooled, 0);
}

/* ---- the library's own events ----------------------------------------- */

ordo_status_t ordo__event_pool_take(event_pool_t *pool, void **out_event) {
    pool_cache_t *cache = thread_cache_fast(pool);
    if (ORDO_LIKELY(cache && atomic_load_explicit(&cache->count, memory_order_relaxed))) {
        *out_event = cache_pop(cache, 0); /* the peak: sampled at exchanges */
        return ORDO_OK;
    }
    int pooled = 1;
    ordo_status_t st = acquire_slow(pool, out_event, &pooled);
    if (st == ORDO_OK && !pooled) {
        /* Beyond a maximum: the owner gives back pooled events only. */
        (void)ordo__event_pool_release(pool, *out_event, 0);
        return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, "ordo__event_pool_take",
                           "the %s pool is at its maximum", kind_name(pool->kind));
    }
    return st;
}

void ordo__event_pool_give(event_pool_t *pool, void *event) {
    pool_cache_t *cache = thread_cache_fast(pool);
    if (ORDO_LIKELY(cache != NULL)) {
        uint32_t n = atomic_load_explicit(&cache->count, memory_order_relaxed);
        if (ORDO_LIKELY(n < cache->capacity)) {
            pool_slot_t *slot;
            uint64_t in_use;
            /* One check the owner's promise makes cheap: the slot is the
             * one handed out, still in use (plain loads: no other thread
             * writes it while the owner holds the event). */
            if (ORDO_LIKELY(slot_of_returning(pool, cache, n, event, &slot, &in_use) &&
                            atomic_load_explicit(&slot->state, memory_order_relaxed) == in_use &&
                            atomic_load_explicit(&slot->event, memory_order_relaxed) == event)) {
                /* No compare-exchange: the owner gives each event back
                 * once, so nothing else writes the slot now. Release: the
                 * next taker sees what was done with the event. */
                uint64_t generation = in_use & ~SLOT_STATE;
                atomic_store_explicit(&slot->state, generation | SLOT_AVAILABLE,
                                      memory_order_release);
                cache_push(cache, n, slot, event, generation);
                return;
            }
        }
    }
    (void)release_slow(pool, event, 1, 1);
}

/* ---- trim and statistics --------------------------------------------- */

ordo_status_t ordo__event_pool_trim(event_pool_t *pool, size_t keep) {
    ORDO_RETURN_IF_ERROR(pool_check(pool, __func__));
    pool_cache_t *mine = thread_cache_probe(pool);
    pthread_mutex_lock(&pool->lock);
    if (mine) {
        uint32_t n = atomic_load_explicit(&mine->count, memory_order_relaxed);
        for (uint32_t i = 0; i < n; ++i) {
            depot_push(pool, mine->items[i].slot);
        }
        atomic_store_explicit(&mine->count, 0, memory_order_relaxed);
    }
    size_t available = pool->depot_count;
    for (const pool_cache_t *c = pool->caches; c; c = c->next) {
        available += atomic_load_explicit(&c->count, memory_order_relaxed);
    }
    pool_slot_t *doomed = NULL;
    while (available > keep && pool->depot) {
        pool_slot_t *slot = depot_pop(pool);
        registry_remove(pool, slot);
        slot_retire(slot);
        slot->next = doomed;
        doomed = slot;
        pool->pooled_alive--;
        pool->destroyed_total++;
        available--;
    }
    pthread_mutex_unlock(&pool->lock);
    if (!doomed) {
        return ORDO_OK;
    }
    /* The backend's destroy runs unlocked; the slots come back after. */
    for (pool_slot_t *slot = doomed; slot; slot = slot->next) {
        pool->backend.destroy(pool->backend.user,
                              atomic_load_explicit(&slot->event, memory_order_relaxed));
    }
    pthread_mutex_lock(&pool->lock);
    while (doomed) {
        pool_slot_t *slot = doomed;
        doomed = slot->next;
        slot_free(pool, slot);
    }
    pthread_mutex_unlock(&pool->lock);
    return ORDO_OK;
}

ordo_status_t ordo__event_pool_stats(event_pool_t *pool, ordo_event_pool_stats_t *out_stats) {
    ORDO_RETURN_IF_ERROR(pool_check(pool, __func__));
    if (!out_stats) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_stats is NULL");
    }
    pthread_mutex_lock(&pool->lock);
    uint64_t acquires;
    uint64_t releases;
    pool_totals(pool, 1, &acquires, &releases);
    size_t available = pool->depot_count;
    for (const pool_cache_t *c = pool->caches; c; c = c->next) {
        available += atomic_load_explicit(&c->count, memory_order_relaxed);
    }
    pool_sample(pool);
    uint64_t in_use = acquires > releases ? acquires - releases : 0;
    out_stats->available = available;
    /* high_water is not raised to in_use: summed releases first, in_use
     * may count an acquire whose release the sum missed, a value it never
     * took. pool_sample (acquires first) has raised high_water to a value
     * in_use did take just now, so in_use is cut to high_water instead,
     * which keeps it between that value and its own over-count. */
    out_stats->high_water = (size_t)pool->high_water;
    out_stats->in_use = (size_t)(in_use < pool->high_water ? in_use : pool->high_water);
    out_stats->created_total = pool->created_total;
    out_stats->destroyed_total = pool->destroyed_total;
    out_stats->unpooled_created = pool->unpooled_created;
    out_stats->unpooled_destroyed = pool->unpooled_destroyed;
    out_stats->acquires = acquires;
    out_stats->releases = releases;
    pthread_mutex_unlock(&pool->lock);
    return ORDO_OK;
}
