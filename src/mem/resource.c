/* Memory resources: the public entry points validate, then dispatch
 * through the resource's vtable. */
#include "mem/resource.h"

#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "base/futex.h"
#include "hal/hal.h"

void ordo__mem_resource_init(ordo_mem_resource_t *resource, const mem_resource_ops_t *ops,
                             ordo_device_t *device, ordo_mem_resource_t *upstream) {
    resource->magic = ORDO_RESOURCE_MAGIC;
    resource->ops = ops;
    resource->device = device;
    resource->upstream = upstream;
    atomic_init(&resource->dependents, 0);
    resource->device_owned = 0;
    resource->holds_device_stack = 0;
    if (upstream) {
        atomic_fetch_add_explicit(&upstream->dependents, 1, memory_order_relaxed);
        if (upstream->device_owned) {
            /* The device would otherwise tear its stack down from under
             * this resource at its last release. */
            (void)ordo_device_retain(device);
            resource->holds_device_stack = 1;
        }
    }
}

void ordo__mem_resource_fini(ordo_mem_resource_t *resource) {
    if (resource->upstream) {
        atomic_fetch_sub_explicit(&resource->upstream->dependents, 1, memory_order_relaxed);
    }
    resource->magic = ORDO_HAL_DEAD;
}

ordo_status_t ordo__mem_resource_check(const ordo_mem_resource_t *resource, const char *api) {
    if (!resource) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "memory resource is NULL");
    }
    if (resource->magic != ORDO_RESOURCE_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api,
                           "%p is not a live memory resource (destroyed, or not a resource)",
                           (const void *)resource);
    }
    return ORDO_OK;
}

static ordo_status_t check_stream(const ordo_mem_resource_t *resource, ordo_stream_t *stream,
                                  const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, api));
    if (stream->device != resource->device) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "stream of %s used with a memory resource of %s",
                           stream->device->info.name, resource->device->info.name);
    }
    return ORDO_OK;
}

/* block must be live and belong to resource's stack (made by resource or
 * by one of the resources below it). */
static ordo_status_t check_block(const ordo_mem_resource_t *resource, const ordo_block_t *block,
                                 mem_refusal_t *out_why, const char *api) {
    if (!block) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "block is NULL");
    }
    uint32_t magic = atomic_load_explicit(&block->magic, memory_order_acquire);
    if (magic == ORDO_BLOCK_FREED) {
        *out_why = MEM_REFUSED_FREED;
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api,
                           "block %p (tag %u) was already deallocated", (const void *)block,
                           block->tag);
    }
    if (magic != ORDO_BLOCK_MAGIC) {
        *out_why = MEM_REFUSED_NOT_LIVE;
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%p is not a live block",
                           (const void *)block);
    }
    const ordo_mem_resource_t *stop = NULL;
    for (const ordo_mem_resource_t *r = resource; r; r = r->upstream) {
        if (block->resource == r) {
            return ORDO_OK;
        }
        if (r->ops->refuses_blocks_below) {
            stop = r;
            break;
        }
    }
    if (ordo__mem_is_below(block->resource, resource)) {
        /* Made above this resource, in its stack: the wrong resource, not
         * another stack. */
        *out_why = MEM_REFUSED_HOLDER;
        return ordo__mem_check_holder(resource, block, api);
    }
    *out_why = MEM_REFUSED_FOREIGN;
    for (const ordo_mem_resource_t *r = stop ? stop->upstream : NULL; r; r = r->upstream) {
        if (block->resource == r) {
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                               "block %p (tag %u) was allocated from the %s resource %p below the "
                               "%s %p, which takes back only its own blocks",
                               (const void *)block, block->tag, r->ops->kind, (const void *)r,
                               stop->ops->kind, (const void *)stop);
        }
    }
    return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                       "block %p (tag %u) belongs to another resource stack (%s %p), not to "
                       "this %s resource",
                       (const void *)block, block->tag, block->resource->ops->kind,
                       (const void *)block->resource, resource->ops->kind);
}

ordo_status_t ordo__mem_check_holder(const ordo_mem_resource_t *resource, const ordo_block_t *block,
                                     const char *api) {
    const ordo_mem_resource_t *holder = atomic_load_explicit(&block->holder, memory_order_relaxed);
    if (ORDO_LIKELY(holder == resource)) {
        return ORDO_OK;
    }
    if (ordo__mem_is_below(resource, holder)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "block %p (tag %u) was allocated from the %s resource %p below this %s "
                           "resource %p, which takes back only the blocks allocated through it",
                           (const void *)block, block->tag, holder->ops->kind, (const void *)holder,
                           resource->ops->kind, (const void *)resource);
    }
    return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                       "block %p (tag %u) was allocated through the %s resource %p above this %s "
                       "resource %p: give it back there",
                       (const void *)block, block->tag, holder->ops->kind, (const void *)holder,
                       resource->ops->kind, (const void *)resource);
}

int ordo__mem_is_below(const ordo_mem_resource_t *resource, const ordo_mem_resource_t *other) {
    for (const ordo_mem_resource_t *r = resource->upstream; r; r = r->upstream) {
        if (r == other) {
            return 1;
        }
    }
    return 0;
}

ordo_status_t ordo__mem_forward_free(ordo_mem_resource_t *resource, ordo_block_t *block,
                                     ordo_stream_t *stream, int release) {
    ordo_mem_resource_t *upstream = resource->upstream;
    mem_hand_out(block, upstream);
    ordo_status_t st = (release ? mem_release : mem_deallocate)(upstream, block, stream);
    if (!mem_freed_despite(st)) {
        mem_hand_out(block, resource);
    }
    return st;
}

/* Tells the checking resources of the stack that block was refused. */
static ordo_status_t block_refused(ordo_mem_resource_t *resource, const ordo_block_t *block,
                                   mem_refusal_t why, ordo_status_t status, const char *api) {
    if (block) {
        for (ordo_mem_resource_t *r = resource; r; r = r->upstream) {
            if (r->ops->block_refused) {
                r->ops->block_refused(r, resource, block, why, status, api);
            }
        }
    }
    return status;
}

/* The checks of ordo_mem_allocate one by one, each with its message. */
__attribute__((noinline)) static ordo_status_t
allocate_refused(ordo_mem_resource_t *resource, size_t bytes, size_t alignment,
                 ordo_stream_t *stream, uint32_t tag, ordo_block_t **out_block, void **out_ptr) {
    static const char api[] = "ordo_mem_allocate";
    if (out_block) {
        *out_block = NULL;
    }
    if (out_ptr) {
        *out_ptr = NULL;
    }
    ordo_status_t st = ordo__mem_resource_check(resource, api);
    if (st != ORDO_OK) {
        return st;
    }
    if (!out_block) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "out_block is NULL");
    }
    if ((st = check_stream(resource, stream, api)) != ORDO_OK) {
        return st;
    }
    if (bytes == 0) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "a zero-byte allocation is refused (tag %u)", tag);
    }
    if (bytes > ORDO_MEM_MAX_BYTES) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, api,
                           "%zu bytes (tag %u) is more than the %zu bytes one allocation may ask",
                           bytes, tag, (size_t)ORDO_MEM_MAX_BYTES);
    }
    if ((alignment & (alignment - 1)) || alignment > ORDO_MEM_MAX_ALIGNMENT) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "alignment %zu is not a power of two up to %zu", alignment,
                           (size_t)ORDO_MEM_MAX_ALIGNMENT);
    }
    if (tag >= ORDO_MEM_MAX_TAGS) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, api, "tag %u is not below %u", tag,
                           ORDO_MEM_MAX_TAGS);
    }
    /* Every check passes now: a handle changed while it was checked. */
    return ordo__error(ORDO_ERR_INVALID_HANDLE, api,
                       "the resource or the stream changed while the call was checking them");
}

ordo_status_t ordo_mem_allocate(ordo_mem_resource_t *resource, size_t bytes, size_t alignment,
                                ordo_stream_t *stream, uint32_t tag, ordo_block_t **out_block,
                                void **out_ptr) {
    /* Every check in one condition; allocate_refused says which failed.
     * bytes - 1 wraps for zero. Alignment zero passes the power-of-two
     * test and means the default. */
    if (ORDO_UNLIKELY(!resource || resource->magic != ORDO_RESOURCE_MAGIC || !out_block ||
                      !stream || stream->magic != ORDO_STREAM_MAGIC ||
                      stream->device != resource->device || bytes - 1 >= ORDO_MEM_MAX_BYTES ||
                      (alignment & (alignment - 1)) || alignment > ORDO_MEM_MAX_ALIGNMENT ||
                      tag >= ORDO_MEM_MAX_TAGS)) {
        return allocate_refused(resource, bytes, alignment, stream, tag, out_block, out_ptr);
    }
    mem_request_t request = {bytes, alignment ? alignment : ORDO_MEM_DEFAULT_ALIGNMENT, stream,
                             tag};
    ordo_block_t *block = NULL;
    ordo_status_t st = mem_allocate(resource, &request, &block);
    if (ORDO_UNLIKELY(st != ORDO_OK)) {
        block = NULL;
    }
    *out_block = block;
    if (out_ptr) {
        *out_ptr = block ? block->ptr : NULL;
    }
    return st;
}

/* The checks of ordo_mem_deallocate one by one, each with its message. */
__attribute__((noinline)) static ordo_status_t
deallocate_checked(ordo_mem_resource_t *resource, ordo_block_t *block, ordo_stream_t *stream) {
    static const char api[] = "ordo_mem_deallocate";
    ordo_status_t st = ordo__mem_resource_check(resource, api);
    if (st != ORDO_OK) {
        return st;
    }
    mem_refusal_t why = MEM_REFUSED_NOT_LIVE;
    if ((st = check_block(resource, block, &why, api)) != ORDO_OK) {
        return block_refused(resource, block, why, st, api);
    }
    if ((st = ordo__mem_check_holder(resource, block, api)) != ORDO_OK) {
        return block_refused(resource, block, MEM_REFUSED_HOLDER, st, api);
    }
    if ((st = check_stream(resource, stream, api)) != ORDO_OK) {
        return st;
    }
    return mem_deallocate(resource, block, stream);
}

ordo_status_t ordo_mem_deallocate(ordo_mem_resource_t *resource, ordo_block_t *block,
                                  ordo_stream_t *stream) {
    /* The common case in one condition: a live block of this very
     * resource, a live stream of its device. Anything else (a block of a
     * resource below, or bad input) takes the checks one by one. */
    if (ORDO_LIKELY(resource && resource->magic == ORDO_RESOURCE_MAGIC && block &&
                    atomic_load_explicit(&block->magic, memory_order_acquire) == ORDO_BLOCK_MAGIC &&
                    atomic_load_explicit(&block->holder, memory_order_relaxed) == resource &&
                    stream && stream->magic == ORDO_STREAM_MAGIC &&
                    stream->device == resource->device)) {
        return mem_deallocate(resource, block, stream);
    }
    return deallocate_checked(resource, block, stream);
}

ordo_status_t ordo_mem_bytes_outstanding(ordo_mem_resource_t *resource, uint64_t *out_bytes) {
    if (out_bytes) {
        *out_bytes = 0;
    }
    ORDO_RETURN_IF_ERROR(ordo__mem_resource_check(resource, __func__));
    if (!out_bytes) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_bytes is NULL");
    }
    *out_bytes = resource->ops->bytes_outstanding(resource);
    return ORDO_OK;
}

ordo_status_t ordo_mem_reap_pending(ordo_mem_resource_t *resource, ordo_deadline_t deadline) {
    ORDO_RETURN_IF_ERROR(ordo__mem_resource_check(resource, __func__));
    return resource->ops->reap_pending(resource, deadline);
}

ordo_status_t ordo_mem_supports_use_tracking(ordo_mem_resource_t *resource, bool *out_supported) {
    if (out_supported) {
        *out_supported = 0;
    }
    ORDO_RETURN_IF_ERROR(ordo__mem_resource_check(resource, __func__));
    if (!out_supported) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_supported is NULL");
    }
    *out_supported = resource->ops->supports_use_tracking(resource);
    return ORDO_OK;
}

static ordo_status_t check_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                               ordo_stream_t *stream, const char *api) {
    ordo_status_t st = ordo__mem_resource_check(resource, api);
    if (st != ORDO_OK) {
        return st;
    }
    mem_refusal_t why = MEM_REFUSED_NOT_LIVE;
    if ((st = check_block(resource, block, &why, api)) != ORDO_OK) {
        return block_refused(resource, block, why, st, api);
    }
    return check_stream(resource, stream, api);
}

static ordo_status_t check_mode(ordo_access_mode_t mode, const char *api) {
    if ((unsigned)mode - 1u > 2u) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "access mode %d is not a mode",
                           (int)mode);
    }
    return ORDO_OK;
}

ordo_status_t ordo_mem_prepare_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                   ordo_stream_t *stream, ordo_access_mode_t mode) {
    ordo_status_t st = check_use(resource, block, stream, __func__);
    if (st == ORDO_OK) {
        st = check_mode(mode, __func__);
    }
    if (st == ORDO_OK &&
        (st = resource->ops->prepare_use(resource, block, stream, mode)) != ORDO_OK) {
        return ordo__error_as(st, __func__); /* a device wait refused: named for this call */
    }
    return st;
}

ordo_status_t ordo_mem_finish_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                  ordo_stream_t *stream, ordo_access_mode_t mode) {
    ordo_status_t st = check_use(resource, block, stream, __func__);
    if (st == ORDO_OK) {
        st = check_mode(mode, __func__);
    }
    if (st == ORDO_OK &&
        (st = resource->ops->finish_use(resource, block, stream, mode)) != ORDO_OK) {
        return ordo__error_as(st, __func__);
    }
    return st;
}

ordo_status_t ordo_mem_record_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                  ordo_stream_t *stream) {
    ordo_status_t st = check_use(resource, block, stream, __func__);
    if (st == ORDO_OK && (st = resource->ops->record_use(resource, block, stream)) != ORDO_OK) {
        return ordo__error_as(st, __func__);
    }
    return st;
}

static ordo_status_t resource_destroy(ordo_mem_resource_t *resource) {
    static const char api[] = "ordo_mem_resource_destroy";
    uint32_t dependents = atomic_load_explicit(&resource->dependents, memory_order_acquire);
    if (dependents) {
        return ordo__error(ORDO_ERR_BUSY, api,
                           "%u resource(s) stand on this %s resource: destroy them first",
                           dependents, resource->ops->kind);
    }
    ordo_device_t *device = resource->device;
    int holds_device = resource->holds_device_stack;
    ordo_status_t st = resource->ops->destroy(resource);
    /* Last: the device's teardown destroys the stack this stood on. */
    return st == ORDO_OK && holds_device ? ordo_device_release(device) : st;
}

ordo_status_t ordo__mem_resource_destroy_owned(ordo_mem_resource_t *resource) {
    return resource_destroy(resource);
}

ordo_status_t ordo_mem_resource_destroy(ordo_mem_resource_t *resource) {
    ORDO_RETURN_IF_ERROR(ordo__mem_resource_check(resource, __func__));
    if (resource->device_owned) {
        return ordo__error(ORDO_ERR_BUSY, __func__,
                           "this %s resource is a layer of %s's own memory stack "
                           "(ordo_device_memory): the device owns it and destroys it at its last "
                           "release",
                           resource->ops->kind, resource->device->info.name);
    }
    return resource_destroy(resource);
}

static ordo_status_t check_block_handle(const ordo_block_t *block, const char *api) {
    if (!block) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "block is NULL");
    }
    if (atomic_load_explicit(&block->magic, memory_order_acquire) != ORDO_BLOCK_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%p is not a live block",
                           (const void *)block);
    }
    return ORDO_OK;
}

ordo_status_t ordo_block_info(const ordo_block_t *block, ordo_block_info_t *out_info) {
    if (out_info) {
        memset(out_info, 0, sizeof *out_info);
    }
    ORDO_RETURN_IF_ERROR(check_block_handle(block, __func__));
    if (!out_info) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_info is NULL");
    }
    *out_info = (ordo_block_info_t){block->ptr, block->bytes,  block->alignment,
                                    block->tag, block->stream, block->resource};
    return ORDO_OK;
}

ordo_status_t ordo_block_ptr(const ordo_block_t *block, void **out_ptr) {
    if (out_ptr) {
        *out_ptr = NULL;
    }
    ORDO_RETURN_IF_ERROR(check_block_handle(block, __func__));
    if (!out_ptr) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_ptr is NULL");
    }
    *out_ptr = block->ptr;
    return ORDO_OK;
}

ordo_status_t ordo_block_buffer(const ordo_block_t *block, ordo_buffer_t **out_buffer) {
    if (out_buffer) {
        *out_buffer = NULL;
    }
    ORDO_RETURN_IF_ERROR(check_block_handle(block, __func__));
    if (!out_buffer) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_buffer is NULL");
    }
    ordo_mem_resource_t *resource = block->resource;
    *out_buffer = resource->ops->block_buffer(resource, block);
    if (!*out_buffer) {
        return ordo__error(ORDO_ERR_UNSUPPORTED, __func__,
                           "block %p comes from a %s resource, which keeps no access history "
                           "(use tracking unsupported)",
                           (const void *)block, resource->ops->kind);
    }
    return ORDO_OK;
}

/* --- Forwarding and refusing helpers --- */

uint64_t ordo__mem_forward_bytes_outstanding(ordo_mem_resource_t *r) {
    return r->upstream->ops->bytes_outstanding(r->upstream);
}
ordo_status_t ordo__mem_forward_reap_pending(ordo_mem_resource_t *r, ordo_deadline_t deadline) {
    return r->upstream->ops->reap_pending(r->upstream, deadline);
}
int ordo__mem_forward_supports_use_tracking(ordo_mem_resource_t *r) {
    return r->upstream->ops->supports_use_tracking(r->upstream);
}
ordo_status_t ordo__mem_forward_prepare_use(ordo_mem_resource_t *r, ordo_block_t *block,
                                            ordo_stream_t *stream, ordo_access_mode_t mode) {
    return r->upstream->ops->prepare_use(r->upstream, block, stream, mode);
}
ordo_status_t ordo__mem_forward_finish_use(ordo_mem_resource_t *r, ordo_block_t *block,
                                           ordo_stream_t *stream, ordo_access_mode_t mode) {
    return r->upstream->ops->finish_use(r->upstream, block, stream, mode);
}
ordo_status_t ordo__mem_forward_record_use(ordo_mem_resource_t *r, ordo_block_t *block,
                                           ordo_stream_t *stream) {
    return r->upstream->ops->record_use(r->upstream, block, stream);
}
ordo_buffer_t *ordo__mem_forward_block_buffer(ordo_mem_resource_t *r, const ordo_block_t *block) {
    return r->upstream->ops->block_buffer(r->upstream, block);
}

int ordo__mem_no_use_tracking(ordo_mem_resource_t *r) {
    (void)r;
    return 0;
}

static ordo_status_t refuse(const ordo_mem_resource_t *r, const char *what) {
    return ordo__error(ORDO_ERR_UNSUPPORTED, what,
                       "use tracking is unsupported by the %s resource: it keeps no access "
                       "history (order cross-stream uses yourself, or use a pool)",
                       r->ops->kind);
}
ordo_status_t ordo__mem_refuse_prepare_use(ordo_mem_resource_t *r, ordo_block_t *block,
                                           ordo_stream_t *stream, ordo_access_mode_t mode) {
    (void)block, (void)stream, (void)mode;
    return refuse(r, "ordo_mem_prepare_use");
}
ordo_status_t ordo__mem_refuse_finish_use(ordo_mem_resource_t *r, ordo_block_t *block,
                                          ordo_stream_t *stream, ordo_access_mode_t mode) {
    (void)block, (void)stream, (void)mode;
    return refuse(r, "ordo_mem_finish_use");
}
ordo_status_t ordo__mem_refuse_record_use(ordo_mem_resource_t *r, ordo_block_t *block,
                                          ordo_stream_t *stream) {
    (void)block, (void)stream;
    return refuse(r, "ordo_mem_record_use");
}
ordo_buffer_t *ordo__mem_no_block_buffer(ordo_mem_resource_t *r, const ordo_block_t *block) {
    (void)r, (void)block;
    return NULL;
}

void ordo__mem_frees_done(_Atomic uint32_t *pending) {
    atomic_fetch_sub_explicit(pending, 1, memory_order_release);
    ordo__futex_wake(pending, 1 << 30);
}

ordo_status_t ordo__mem_frees_wait(_Atomic uint32_t *pending, ordo_deadline_t deadline) {
    for (;;) {
        uint32_t count = atomic_load_explicit(pending, memory_order_acquire);
        if (!count) {
            return ORDO_OK;
        }
        if (ordo__futex_wait(pending, count, deadline) == ORDO_FUTEX_TIMED_OUT &&
            atomic_load_explicit(pending, memory_order_acquire)) {
            return ordo__error(ORDO_ERR_TIMEOUT, "ordo_mem_reap_pending",
                               "%u stream-ordered free(s) still pending at the deadline",
                               atomic_load_explicit(pending, memory_order_relaxed));
        }
    }
}

ordo_status_t ordo__mem_adaptor_create_check(ordo_mem_resource_t *upstream,
                                             ordo_mem_resource_t **out_resource, const char *api) {
    if (out_resource) {
        *out_resource = NULL;
    }
    ordo_status_t st = ordo__mem_resource_check(upstream, api);
    if (st == ORDO_OK && !out_resource) {
        st = ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "out_resource is NULL");
    }
    return st;
}

ordo_status_t ordo__mem_free_timeline_create(ordo_signal_t **out_timeline, const char *api) {
    if (ordo_signal_create(0, out_timeline) != ORDO_OK) {
        *out_timeline = NULL;
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate the free's timeline");
    }
    return ORDO_OK;
}

ordo_status_t ordo__mem_free_point_open(mem_free_point_t *point, const char *api) {
    ordo__mem_free_point_close(point);
    return ordo__mem_free_timeline_create(&point->timeline, api);
}

void ordo__mem_free_point_close(mem_free_point_t *point) {
    if (point->timeline) {
        (void)ordo_signal_release(point->timeline);
        point->timeline = NULL;
    }
}

ordo_status_t ordo__mem_free_point_arm(mem_free_point_t *point, ordo_stream_t *stream,
                                       _Atomic uint32_t *pending, ordo_timepoint_fn fn, void *ctx) {
    ordo_signal_t *timeline = point->timeline;
    point->timepoint = (ordo_timepoint_t)ORDO_TIMEPOINT_INIT;
    atomic_fetch_add_explicit(pending, 1, memory_order_relaxed);
    /* A failed stream's refusal is no failure of the free, which succeeds:
     * the caller's message stays (ordo/status.h). */
    ordo__kept_message_t kept;
    ordo__message_keep(&kept);
    (void)ordo_timepoint_arm(&point->timepoint, timeline, 1, fn, ctx);
    /* On a failed stream the signal fails at once and fn runs now; the
     * descriptor (and its reference on the timeline) may then be reused by
     * another thread before this call looks at the timeline, so it holds a
     * reference of its own across the call and never reads point again
     * unless fn is known not to have run. */
    (void)ordo_signal_retain(timeline);
    ordo_status_t st = ordo_stream_signal(stream, timeline, 1);
    uint64_t value = 0;
    if (st == ORDO_OK || ordo_signal_query(timeline, &value) != ORDO_OK) {
        (void)ordo_signal_release(timeline);
        ordo__message_restore(&kept);
        return ORDO_OK; /* enqueued, or failed with the stream: fn has run */
    }
    /* Refused on a healthy stream: nobody else signals the timeline, so
     * the timepoint has not fired and never will. */
    (void)ordo_signal_release(timeline);
    ordo_cancel_result_t result;
    (void)ordo_timepoint_cancel(&point->timepoint, &result);
    if (result != ORDO_CANCEL_PREVENTED) {
        ordo__message_restore(&kept);
        return ORDO_OK;
    }
    ordo__mem_free_point_close(point);
    return st;
}

void ordo__mem_free_point_uncount(_Atomic uint32_t *pending) {
    atomic_fetch_sub_explicit(pending, 1, memory_order_relaxed);
}

ordo_status_t ordo__mem_free_point_enqueue(ordo_stream_t *stream, ordo_signal_t *timeline,
                                           ordo_status_t freed) {
    /* The caller's message (a guard's findings with ORDO_ERR_CORRUPTED)
     * outlives the stream's refusal. */
    ordo__kept_message_t kept;
    ordo__message_keep(&kept);
    /* On a failed stream the signal fails at once and the free point's
     * callback runs now: the caller's record (and the reference on the
     * timeline it holds) may then be reused, and the timeline released, by
     * another thread before this call looks at it again. A reference of
     * this call's own holds it. */
    (void)ordo_signal_retain(timeline);
    ordo_status_t st = ordo_stream_signal(stream, timeline, 1);
    uint64_t value = 0;
    if (st != ORDO_OK && ordo_signal_query(timeline, &value) == ORDO_OK) {
        (void)ordo_signal_fail(timeline, st, "the free's stream refused its signal");
    }
    (void)ordo_signal_release(timeline);
    ordo__message_restore(&kept);
    return freed;
}
