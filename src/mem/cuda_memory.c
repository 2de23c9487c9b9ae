/* CUDA memory resources (the memory layer's, over the CUDA backend's
 * internals): the stream-ordered allocator of the driver
 * (cuMemAllocAsync / cuMemFreeAsync on the device's default pool) and
 * page-locked host memory (cuMemHostAlloc). Both keep their own block
 * descriptors, recycled, never freed before the resource, so a stale handle
 * reads a freed-marked header. */
#include <pthread.h>

#include "backends/cuda/cuda_internal.h"
#include "base/alloc.h"
#include "base/error.h"
#include "mem/resource.h"
#include "ordo/timepoint.h"

typedef enum cuda_mem_kind { CUDA_MEM_ASYNC, CUDA_MEM_PINNED } cuda_mem_kind_t;

typedef struct cuda_resource cuda_resource_t;

typedef struct cuda_block {
    ordo_block_t base; /* first: the handle */
    cuda_resource_t *owner;
    void *raw;             /* as allocated (base.ptr may be aligned up from it) */
    mem_free_point_t free; /* a stream-ordered free */
    /* What must happen before the block goes back: the stream's point
     * after the free (both kinds) and, for the stream-ordered allocator,
     * the cuMemFreeAsync itself, which may be held on the lane past a
     * point that fails at once. */
    _Atomic uint32_t free_steps;
    ordo_status_t free_status; /* the point's outcome */
    struct cuda_block *next;   /* descriptor free list */
} cuda_block_t;

struct cuda_resource {
    ordo_mem_resource_t base;
    cuda_device_t *d;
    cuda_mem_kind_t kind;
    pthread_mutex_t lock; /* descriptors */
    cuda_block_t *descriptors;
    _Atomic uint64_t bytes_outstanding;
    _Atomic uint64_t blocks_live;
    _Atomic uint32_t frees_pending;
};

static const char *kind_name(cuda_mem_kind_t kind) {
    return kind == CUDA_MEM_ASYNC ? "cuda_async" : "host_pinned";
}

static cuda_block_t *descriptor_take(cuda_resource_t *r) {
    pthread_mutex_lock(&r->lock);
    cuda_block_t *b = r->descriptors;
    if (b) {
        r->descriptors = b->next;
    }
    pthread_mutex_unlock(&r->lock);
    if (!b) {
        return ordo__alloc(sizeof *b, 0);
    }
    ordo__mem_free_point_close(&b->free);
    return b;
}

static void descriptor_put(cuda_resource_t *r, cuda_block_t *b) {
    pthread_mutex_lock(&r->lock);
    b->next = r->descriptors;
    r->descriptors = b;
    pthread_mutex_unlock(&r->lock);
}

/* Natural alignment of each kind: the stream-ordered allocator hands out
 * at least 256-byte aligned memory, cuMemHostAlloc whole pages. */
static size_t natural_alignment(cuda_mem_kind_t kind) {
    return kind == CUDA_MEM_ASYNC ? 256u : 4096u;
}

static ordo_status_t cuda_res_allocate(ordo_mem_resource_t *resource, const mem_request_t *request,
                                       ordo_block_t **out_block) {
    static const char api[] = "ordo_mem_allocate";
    cuda_resource_t *r = (cuda_resource_t *)resource;
    cuda_device_t *d = r->d;
    ORDO_RETURN_IF_ERROR(ordo__cuda_enter(d, api));
    if (ORDO_UNLIKELY(ordo__cuda_capturing) && r->kind == CUDA_MEM_ASYNC) {
        /* Issued at once on the real stream (below), it would escape the
         * capture: made once, outside the graph, and its free refused. */
        return ordo__cuda_capture_refuse(api);
    }
    cuda_block_t *b = descriptor_take(r);
    if (!b) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a block descriptor");
    }
    size_t natural = natural_alignment(r->kind);
    size_t extra = request->alignment > natural ? request->alignment - natural : 0;
    void *raw = NULL;
    CUresult result;
    const char *what;
    if (r->kind == CUDA_MEM_ASYNC) {
        /* Issued at once, even while the stream holds work back: an
         * allocation placed earlier in the device's order only makes the
         * memory available sooner, and a free held back cannot be reused
         * by it before it is issued. */
        cuda_stream_t *s = request->stream->impl;
        CUdeviceptr ptr = 0;
        what = "cuMemAllocAsync";
        result = d->cu->MemAllocAsync(&ptr, request->bytes + extra, s->cu);
        raw = (void *)(uintptr_t)ptr;
    } else {
        what = "cuMemHostAlloc";
        result = d->cu->MemHostAlloc(&raw, request->bytes + extra, CU_MEMHOSTALLOC_PORTABLE);
    }
    if (result != CUDA_SUCCESS) {
        descriptor_put(r, b);
        char detail[128];
        ordo__cuda_describe(result, detail, sizeof detail);
        return ordo__error(ordo__cuda_status_of(result), api, "cannot allocate %zu bytes: %s: %s",
                           request->bytes, what, detail);
    }
    uintptr_t aligned =
        ((uintptr_t)raw + request->alignment - 1) & ~(uintptr_t)(request->alignment - 1);
    b->owner = r;
    b->raw = raw;
    b->base.tag = request->tag;
    b->base.ptr = (void *)aligned;
    b->base.bytes = request->bytes;
    b->base.alignment = request->alignment;
    b->base.stream = request->stream;
    b->base.resource = resource;
    mem_hand_out(&b->base, resource);
    atomic_fetch_add_explicit(&r->blocks_live, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&r->bytes_outstanding, request->bytes, memory_order_relaxed);
    atomic_store_explicit(&b->base.magic, ORDO_BLOCK_MAGIC, memory_order_release);
    *out_block = &b->base;
    return ORDO_OK;
}

/* Gives the memory back now (the caller knows nothing uses it any more, or
 * the free is already in the device's order). */
static void release_memory(cuda_resource_t *r, cuda_block_t *b, int device_freed,
                           int synchronize_first) {
    cuda_device_t *d = r->d;
    if (!device_freed) {
        /* On the device's free thread: this runs on the completion thread
         * too, which must never block behind the device. */
        if (r->kind == CUDA_MEM_ASYNC) {
            ordo__cuda_defer_free(d, (CUdeviceptr)(uintptr_t)b->raw, NULL, 0);
        } else {
            ordo__cuda_defer_free(d, 0, b->raw, synchronize_first);
        }
    }
    atomic_fetch_sub_explicit(&r->bytes_outstanding, b->base.bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(&r->blocks_live, 1, memory_order_release);
    descriptor_put(r, b);
}

/* Every step of the free is done: the block goes back. For the
 * stream-ordered allocator the device frees the memory itself (the free
 * is in the stream's order); page-locked memory goes back now.
 * frees_pending drops last: after it the resource may be destroyed, and
 * only the futex wake, which touches no memory, follows. */
static void free_complete(cuda_block_t *b) {
    cuda_resource_t *r = b->owner;
    /* The stream failed or was destroyed short of the free: work it (or a
     * stream it waited for on the device) issued before may still read or
     * write the block. cuMemFreeHost does not promise to wait for it, so
     * the device drains first (on the free thread). */
    int drain = r->kind == CUDA_MEM_PINNED && b->free_status != ORDO_OK;
    release_memory(r, b, r->kind == CUDA_MEM_ASYNC, drain);
    ordo__mem_frees_done(&r->frees_pending);
}

static void free_step_done(cuda_block_t *b) {
    if (atomic_fetch_sub_explicit(&b->free_steps, 1, memory_order_acq_rel) == 1) {
        free_complete(b);
    }
}

/* The stream passed the free (or failed, or was destroyed). */
static void free_point_reached(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)timepoint;
    cuda_block_t *b = ctx;
    b->free_status = status;
    free_step_done(b);
}

/* Enqueued in the stream's order, even on a failed or destroyed stream.
 * The memory must go back: if the driver refuses the stream-ordered free
 * (a context broken by a fault, say), it is freed at once once the device
 * has drained (cuMemFree does not wait for stream-ordered memory); a
 * broken context reclaims it when it is reset. That waiting happens on the
 * device's free thread (this may run on a lane thread). */
static ordo_status_t free_async(void *ctx, struct CUstream_st *stream) {
    cuda_block_t *b = ctx;
    const cuda_api_t *cu = b->owner->d->cu;
    CUdeviceptr ptr = (CUdeviceptr)(uintptr_t)b->raw;
    if (cu->MemFreeAsync(ptr, stream) != CUDA_SUCCESS) {
        ordo__cuda_defer_free(b->owner->d, ptr, NULL, 1);
    }
    free_step_done(b);
    return ORDO_OK;
}

static ordo_status_t cuda_res_deallocate(ordo_mem_resource_t *resource, ordo_block_t *block,
                                         ordo_stream_t *stream) {
    static const char api[] = "ordo_mem_deallocate";
    cuda_resource_t *r = (cuda_resource_t *)resource;
    cuda_block_t *b = (cuda_block_t *)block;
    uint32_t expected = ORDO_BLOCK_MAGIC;
    if (!atomic_compare_exchange_strong_explicit(&block->magic, &expected, ORDO_BLOCK_FREED,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api,
                           "block %p (tag %u) was already deallocated", (void *)block, block->tag);
    }
    if (!stream) {
        release_memory(r, b, 0, 0);
        return ORDO_OK;
    }
    ordo_status_t st = ordo__mem_free_point_open(&b->free, api);
    if (st != ORDO_OK) {
        atomic_store_explicit(&block->magic, ORDO_BLOCK_MAGIC, memory_order_release);
        return st;
    }
    b->free_status = ORDO_OK;
    atomic_store_explicit(&b->free_steps, r->kind == CUDA_MEM_ASYNC ? 2u : 1u,
                          memory_order_relaxed);
    if (r->kind == CUDA_MEM_ASYNC) {
        /* In stream order, whatever the stream's state: the memory must go
         * back, and a free the device orders cannot overtake the stream's
         * own work. It may run on the lane at any time from here on. */
        st = ordo__cuda_stream_enqueue_always(stream->impl, free_async, b, api);
        if (st != ORDO_OK) {
            /* Not enqueued (free_async never fails): the block is the
             * caller's still. */
            ordo__mem_free_point_close(&b->free);
            atomic_store_explicit(&block->magic, ORDO_BLOCK_MAGIC, memory_order_release);
            return st;
        }
    }
    /* On a failed stream the timepoint runs now. */
    st = ordo__mem_free_point_arm(&b->free, stream, &r->frees_pending, free_point_reached, b);
    if (st == ORDO_OK) {
        return ORDO_OK;
    }
    if (r->kind == CUDA_MEM_ASYNC) {
        /* The free is in the stream's order already and cannot be taken
         * back: the block goes back once it has been issued (a free in
         * flight, still counted, until then). */
        free_step_done(b);
        return ORDO_OK;
    }
    /* The stream may still use the page-locked block: the free is
     * refused and the block stays the caller's. */
    ordo__mem_free_point_uncount(&r->frees_pending);
    atomic_store_explicit(&block->magic, ORDO_BLOCK_MAGIC, memory_order_release);
    return ordo__error(st, api,
                       "the free could not be enqueued on the stream; block %p (tag %u) is still "
                       "yours",
                       (void *)block, block->tag);
}

static uint64_t cuda_res_bytes_outstanding(ordo_mem_resource_t *resource) {
    cuda_resource_t *r = (cuda_resource_t *)resource;
    return atomic_load_explicit(&r->bytes_outstanding, memory_order_relaxed);
}

static ordo_status_t cuda_res_reap_pending(ordo_mem_resource_t *resource,
                                           ordo_deadline_t deadline) {
    cuda_resource_t *r = (cuda_resource_t *)resource;
    return ordo__mem_frees_wait(&r->frees_pending, deadline);
}

static ordo_status_t cuda_res_destroy(ordo_mem_resource_t *resource) {
    cuda_resource_t *r = (cuda_resource_t *)resource;
    uint64_t live = atomic_load_explicit(&r->blocks_live, memory_order_acquire) +
                    atomic_load_explicit(&r->frees_pending, memory_order_acquire);
    if (live) {
        return ordo__error(ORDO_ERR_BUSY, "ordo_mem_resource_destroy",
                           "the %s resource still has %llu block(s) outstanding or with a free "
                           "pending",
                           kind_name(r->kind), (unsigned long long)live);
    }
    while (r->descriptors) {
        cuda_block_t *b = r->descriptors;
        r->descriptors = b->next;
        if (b->free.timeline) {
            ordo__mem_free_point_close(&b->free);
        }
        ordo__dealloc(b, sizeof *b, 0);
    }
    pthread_mutex_destroy(&r->lock);
    ordo_device_t *device = resource->device;
    ordo__mem_resource_fini(resource);
    ordo__dealloc(r, sizeof *r, 0);
    return ordo_device_release(device);
}

static const mem_resource_ops_t async_ops = {
    .kind = "cuda_async",
    .allocate = cuda_res_allocate,
    .deallocate = cuda_res_deallocate,
    .bytes_outstanding = cuda_res_bytes_outstanding,
    .reap_pending = cuda_res_reap_pending,
    .supports_use_tracking = ordo__mem_no_use_tracking,
    .prepare_use = ordo__mem_refuse_prepare_use,
    .finish_use = ordo__mem_refuse_finish_use,
    .record_use = ordo__mem_refuse_record_use,
    .block_buffer = ordo__mem_no_block_buffer,
    .destroy = cuda_res_destroy,
};

static const mem_resource_ops_t pinned_ops = {
    .kind = "host_pinned",
    .allocate = cuda_res_allocate,
    .deallocate = cuda_res_deallocate,
    .bytes_outstanding = cuda_res_bytes_outstanding,
    .reap_pending = cuda_res_reap_pending,
    .supports_use_tracking = ordo__mem_no_use_tracking,
    .prepare_use = ordo__mem_refuse_prepare_use,
    .finish_use = ordo__mem_refuse_finish_use,
    .record_use = ordo__mem_refuse_record_use,
    .block_buffer = ordo__mem_no_block_buffer,
    .destroy = cuda_res_destroy,
};

static ordo_status_t resource_create(ordo_device_t *device, cuda_mem_kind_t kind,
                                     ordo_mem_resource_t **out_resource, const char *api) {
    if (out_resource) {
        *out_resource = NULL;
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, api));
    if (!out_resource) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "out_resource is NULL");
    }
    if (device->backend != &ordo__hal_cuda_backend) {
        return ordo__error(ORDO_ERR_UNSUPPORTED, api, "%s is not a CUDA device", device->info.name);
    }
    cuda_device_t *d = device->impl;
    if (kind == CUDA_MEM_ASYNC && !d->memory_pools) {
        return ordo__error(ORDO_ERR_UNSUPPORTED, api,
                           "%s (or its driver) does not support memory pools (cuMemAllocAsync)",
                           device->info.name);
    }
    cuda_resource_t *r = ordo__alloc(sizeof *r, 0);
    if (!r) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a resource");
    }
    pthread_mutex_init(&r->lock, NULL);
    r->d = d;
    r->kind = kind;
    (void)ordo_device_retain(device);
    ordo__mem_resource_init(&r->base, kind == CUDA_MEM_ASYNC ? &async_ops : &pinned_ops, device,
                            NULL);
    *out_resource = &r->base;
    return ORDO_OK;
}

ordo_status_t ordo_mem_cuda_async_create(ordo_device_t *device,
                                         ordo_mem_resource_t **out_resource) {
    return resource_create(device, CUDA_MEM_ASYNC, out_resource, __func__);
}

ordo_status_t ordo_mem_host_pinned_create(ordo_device_t *device,
                                          ordo_mem_resource_t **out_resource) {
    return resource_create(device, CUDA_MEM_PINNED, out_resource, __func__);
}
