/* The direct resource: one backend allocation per block, freed when the
 * deallocating stream reaches the free. No pooling, no use tracking. */
#include <pthread.h>

#include "base/alloc.h"
#include "base/error.h"
#include "hal/hal.h"
#include "mem/resource.h"
#include "ordo/timepoint.h"

typedef struct direct_resource direct_resource_t;

typedef struct direct_block {
    ordo_block_t base; /* first: the handle */
    direct_resource_t *owner;
    mem_free_point_t free;     /* a stream-ordered free */
    struct direct_block *next; /* descriptor free list */
} direct_block_t;

struct direct_resource {
    ordo_mem_resource_t base;
    pthread_mutex_t lock; /* guards descriptors */
    /* Descriptors are recycled, never freed before the resource, so a
     * stale handle reads a valid (freed-marked) header. */
    direct_block_t *descriptors;
    _Atomic uint64_t bytes_outstanding;
    _Atomic uint64_t blocks_live; /* handed out or free pending */
    _Atomic uint32_t frees_pending;
    int holds_device; /* 0 for the device's own default stack */
};

static direct_block_t *descriptor_take(direct_resource_t *d) {
    pthread_mutex_lock(&d->lock);
    direct_block_t *b = d->descriptors;
    if (b) {
        d->descriptors = b->next;
    }
    pthread_mutex_unlock(&d->lock);
    if (!b) {
        return ordo__alloc(sizeof *b, 0);
    }
    ordo__mem_free_point_close(&b->free);
    return b;
}

static void descriptor_put(direct_resource_t *d, direct_block_t *b) {
    pthread_mutex_lock(&d->lock);
    b->next = d->descriptors;
    d->descriptors = b;
    pthread_mutex_unlock(&d->lock);
}

static ordo_status_t direct_allocate(ordo_mem_resource_t *resource, const mem_request_t *request,
                                     ordo_block_t **out_block) {
    direct_resource_t *d = (direct_resource_t *)resource;
    direct_block_t *b = descriptor_take(d);
    if (!b) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_mem_allocate",
                           "cannot allocate a block descriptor");
    }
    void *ptr = NULL;
    ordo_device_t *device = resource->device;
    ordo_status_t st = device->backend->mem_alloc(device, request->bytes, request->alignment, &ptr);
    if (st != ORDO_OK) {
        descriptor_put(d, b);
        return st;
    }
    b->owner = d;
    b->base.tag = request->tag;
    b->base.ptr = ptr;
    b->base.bytes = request->bytes;
    b->base.alignment = request->alignment;
    b->base.stream = request->stream;
    b->base.resource = resource;
    mem_hand_out(&b->base, resource);
    atomic_fetch_add_explicit(&d->blocks_live, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->bytes_outstanding, request->bytes, memory_order_relaxed);
    atomic_store_explicit(&b->base.magic, ORDO_BLOCK_MAGIC, memory_order_release);
    *out_block = &b->base;
    return ORDO_OK;
}

static void free_now(direct_resource_t *d, direct_block_t *b) {
    ordo_device_t *device = d->base.device;
    device->backend->mem_free(device, b->base.ptr, b->base.bytes);
    atomic_fetch_sub_explicit(&d->bytes_outstanding, b->base.bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(&d->blocks_live, 1, memory_order_release);
    descriptor_put(d, b);
}

/* The stream reached the free (or failed, or was destroyed: then nothing
 * of it runs any more either): give the memory back. frees_pending drops
 * last: after it the resource may be destroyed, and only the futex wake,
 * which touches no memory, follows. */
static void free_point_reached(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status, (void)timepoint;
    direct_block_t *b = ctx;
    direct_resource_t *d = b->owner;
    free_now(d, b);
    ordo__mem_frees_done(&d->frees_pending);
}

static ordo_status_t direct_deallocate(ordo_mem_resource_t *resource, ordo_block_t *block,
                                       ordo_stream_t *stream) {
    direct_resource_t *d = (direct_resource_t *)resource;
    direct_block_t *b = (direct_block_t *)block;
    uint32_t expected = ORDO_BLOCK_MAGIC;
    if (!atomic_compare_exchange_strong_explicit(&block->magic, &expected, ORDO_BLOCK_FREED,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, "ordo_mem_deallocate",
                           "block %p (tag %u) was already deallocated", (void *)block, block->tag);
    }
    if (!stream) {
        free_now(d, b);
        return ORDO_OK;
    }
    ordo_status_t st = ordo__mem_free_point_open(&b->free, "ordo_mem_deallocate");
    if (st != ORDO_OK) {
        atomic_store_explicit(&block->magic, ORDO_BLOCK_MAGIC, memory_order_release);
        return st;
    }
    /* On a failed stream the block is freed at once: no work of that stream
     * runs any more. */
    st = ordo__mem_free_point_arm(&b->free, stream, &d->frees_pending, free_point_reached, b);
    if (st == ORDO_OK) {
        return ORDO_OK;
    }
    /* Not enqueued on a healthy stream (out of memory): the stream may still
     * use the block, so the free is refused and the block stays the
     * caller's. */
    ordo__mem_free_point_uncount(&d->frees_pending);
    atomic_store_explicit(&block->magic, ORDO_BLOCK_MAGIC, memory_order_release);
    return ordo__error(st, "ordo_mem_deallocate",
                       "the free could not be enqueued on the stream; block %p (tag %u) is still "
                       "yours",
                       (void *)block, block->tag);
}

static uint64_t direct_bytes_outstanding(ordo_mem_resource_t *resource) {
    direct_resource_t *d = (direct_resource_t *)resource;
    return atomic_load_explicit(&d->bytes_outstanding, memory_order_relaxed);
}

static ordo_status_t direct_reap_pending(ordo_mem_resource_t *resource, ordo_deadline_t deadline) {
    direct_resource_t *d = (direct_resource_t *)resource;
    return ordo__mem_frees_wait(&d->frees_pending, deadline);
}

static ordo_status_t direct_destroy(ordo_mem_resource_t *resource) {
    direct_resource_t *d = (direct_resource_t *)resource;
    uint64_t live = atomic_load_explicit(&d->blocks_live, memory_order_acquire) +
                    atomic_load_explicit(&d->frees_pending, memory_order_acquire);
    if (live) {
        return ordo__error(ORDO_ERR_BUSY, "ordo_mem_resource_destroy",
                           "the direct resource still has %llu block(s) outstanding or with a "
                           "free pending (%llu bytes)",
                           (unsigned long long)live,
                           (unsigned long long)atomic_load(&d->bytes_outstanding));
    }
    while (d->descriptors) {
        direct_block_t *b = d->descriptors;
        d->descriptors = b->next;
        ordo__mem_free_point_close(&b->free);
        ordo__dealloc(b, sizeof *b, 0);
    }
    pthread_mutex_destroy(&d->lock);
    ordo_device_t *device = resource->device;
    int holds_device = d->holds_device;
    ordo__mem_resource_fini(resource);
    ordo__dealloc(d, sizeof *d, 0);
    return holds_device ? ordo_device_release(device) : ORDO_OK;
}

static const mem_resource_ops_t direct_ops = {
    .kind = "direct",
    .allocate = direct_allocate,
    .deallocate = direct_deallocate,
    .bytes_outstanding = direct_bytes_outstanding,
    .reap_pending = direct_reap_pending,
    .supports_use_tracking = ordo__mem_no_use_tracking,
    .prepare_use = ordo__mem_refuse_prepare_use,
    .finish_use = ordo__mem_refuse_finish_use,
    .record_use = ordo__mem_refuse_record_use,
    .block_buffer = ordo__mem_no_block_buffer,
    .destroy = direct_destroy,
};

static ordo_status_t direct_create(ordo_device_t *device, int holds_device,
                                   ordo_mem_resource_t **out_resource) {
    if (out_resource) {
        *out_resource = NULL;
    }
    static const char api[] = "ordo_mem_direct_create";
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, api));
    if (!out_resource) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "out_resource is NULL");
    }
    if (!device->backend->mem_alloc) {
        return ordo__error(ORDO_ERR_UNSUPPORTED, api, "%s has no device memory", device->info.name);
    }
    direct_resource_t *d = ordo__alloc(sizeof *d, 0);
    if (!d) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a resource");
    }
    pthread_mutex_init(&d->lock, NULL);
    d->holds_device = holds_device;
    if (holds_device) {
        (void)ordo_device_retain(device);
    }
    ordo__mem_resource_init(&d->base, &direct_ops, device, NULL);
    *out_resource = &d->base;
    return ORDO_OK;
}

ordo_status_t ordo_mem_direct_create(ordo_device_t *device, ordo_mem_resource_t **out_resource) {
    return direct_create(device, 1, out_resource);
}

ordo_status_t ordo__mem_direct_create_unreferenced(ordo_device_t *device,
                                                   ordo_mem_resource_t **out_resource) {
    return direct_create(device, 0, out_resource);
}
