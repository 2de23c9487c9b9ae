#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"

static void *default_allocate(void *user, size_t size, size_t alignment) {
    (void)user;
    /* aligned_alloc wants size to be a multiple of alignment. */
    size_t rounded = (size + alignment - 1) & ~(alignment - 1);
    return aligned_alloc(alignment, rounded);
}

static void default_deallocate(void *user, void *block, size_t size, size_t alignment) {
    (void)user;
    (void)size;
    (void)alignment;
    free(block);
}

static const ordo_allocator_t default_allocator = {default_allocate, default_deallocate, NULL};

/* The hooks in use: the default, or a copy of the installed ones. No lock
 * is held around a hook (one may take its own locks, or be slow, without
 * serialising every ordo allocation): ordo_allocator_set must not race
 * with other ordo calls, and it changes the hooks only while no block is
 * live, so no call can be between a hook and its counterpart then. */
static ordo_allocator_t installed;
static _Atomic(const ordo_allocator_t *) current = &default_allocator;
static _Atomic size_t live_blocks;
/* Serialises ordo_allocator_set calls (racing each other, not ordo). */
static pthread_mutex_t set_lock = PTHREAD_MUTEX_INITIALIZER;

static size_t effective_alignment(size_t alignment) {
    return alignment < sizeof(void *) ? sizeof(void *) : alignment;
}

void *ordo__alloc(size_t size, size_t alignment) {
    if (size == 0 || (alignment & (alignment - 1)) != 0) {
        return NULL;
    }
    alignment = effective_alignment(alignment);
    if (size > SIZE_MAX - alignment) {
        return NULL;
    }
    const ordo_allocator_t *hooks = atomic_load_explicit(&current, memory_order_acquire);
    void *block = hooks->allocate(hooks->user, size, alignment);
    if (!block) {
        return NULL;
    }
    atomic_fetch_add_explicit(&live_blocks, 1, memory_order_relaxed);
    memset(block, 0, size);
    return block;
}

void ordo__dealloc(void *block, size_t size, size_t alignment) {
    if (!block) {
        return;
    }
    const ordo_allocator_t *hooks = atomic_load_explicit(&current, memory_order_acquire);
    hooks->deallocate(hooks->user, block, size, effective_alignment(alignment));
    atomic_fetch_sub_explicit(&live_blocks, 1, memory_order_release);
}

ordo_status_t ordo_allocator_set(const ordo_allocator_t *allocator) {
    if (allocator && (!allocator->allocate || !allocator->deallocate)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "both allocate and deallocate must be set");
    }
    pthread_mutex_lock(&set_lock);
    size_t live = atomic_load_explicit(&live_blocks, memory_order_acquire);
    if (live != 0) {
        pthread_mutex_unlock(&set_lock);
        return ordo__error(ORDO_ERR_BUSY, __func__,
                           "%zu blocks from the current allocator are still live", live);
    }
    if (allocator) {
        /* The default goes in first: no call reads `installed` while it
         * is rewritten (with none live, none is between its hooks). */
        atomic_store_explicit(&current, &default_allocator, memory_order_release);
        installed = *allocator;
        atomic_store_explicit(&current, &installed, memory_order_release);
    } else {
        atomic_store_explicit(&current, &default_allocator, memory_order_release);
    }
    pthread_mutex_unlock(&set_lock);
    return ORDO_OK;
}

ordo_status_t ordo_allocator_live_blocks(size_t *out_count) {
    if (!out_count) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_count is NULL");
    }
    *out_count = atomic_load_explicit(&live_blocks, memory_order_relaxed);
    return ORDO_OK;
}
