/* Internal: memory resources. A resource is a struct that begins with
 * struct ordo_mem_resource and a vtable; a block begins with struct
 * ordo_block. The public entry points (resource.c) validate arguments once;
 * a resource calls its upstream through the mem_* helpers below, which do
 * not validate again. */
#ifndef ORDO_MEM_RESOURCE_H
#define ORDO_MEM_RESOURCE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "ordo/memory.h"
#include "ordo/stream.h"
#include "ordo/timepoint.h"

#define ORDO_RESOURCE_MAGIC 0x4d454d52u /* "MEMR" */
#define ORDO_BLOCK_MAGIC 0x424c4f4bu    /* "BLOK" */
#define ORDO_BLOCK_FREED 0x46524545u    /* "FREE": deallocated, handle ended */

/* One allocation request, validated: bytes in [1, ORDO_MEM_MAX_BYTES],
 * alignment a power of two in [1, ORDO_MEM_MAX_ALIGNMENT] (the default
 * already applied), stream a live stream of the resource's device. */
typedef struct mem_request {
    size_t bytes;
    size_t alignment;
    ordo_stream_t *stream;
    uint32_t tag;
} mem_request_t;

/* Why a public entry point refused a block (see block_refused). */
typedef enum mem_refusal {
    MEM_REFUSED_FREED = 0,    /* its header says it was deallocated */
    MEM_REFUSED_NOT_LIVE = 1, /* not a block header at all */
    MEM_REFUSED_FOREIGN = 2,  /* a live block of another stack */
    MEM_REFUSED_HOLDER = 3,   /* a live block of this stack, freed through a resource other
                               * than the one it was allocated through (ordo_block.holder) */
} mem_refusal_t;

typedef struct mem_resource_ops {
    const char *kind; /* "direct", "pool", "budget", ... */
    /* Non-zero for a resource whose upstream's blocks are its own raw
     * material (a pool's chunks), never blocks a caller may hand it: the
     * public entry points refuse those as foreign. Adaptors leave it 0 and
     * are given the blocks of the resources below them. */
    int refuses_blocks_below;
    ordo_status_t (*allocate)(ordo_mem_resource_t *resource, const mem_request_t *request,
                              ordo_block_t **out_block);
    /* stream may be NULL: the caller guarantees no work still uses the
     * block (used by pools giving settled chunks back). */
    ordo_status_t (*deallocate)(ordo_mem_resource_t *resource, ordo_block_t *block,
                                ordo_stream_t *stream);
    /* Optional: the free of a block an adaptor kept after its caller freed
     * it (a guard's quarantine), which no work of the program's needs any
     * more, so no recording may take it: a pool whose tracker records holds
     * it until the recording ends. An adaptor that passes frees on passes
     * this one on as a release (mem_release). NULL: deallocate. */
    ordo_status_t (*release)(ordo_mem_resource_t *resource, ordo_block_t *block,
                             ordo_stream_t *stream);
    /* Optional: non-zero while a free through this resource goes into a
     * recording (a pool whose tracker records). Adaptors leave it NULL:
     * mem_records asks the resources below them. */
    int (*records)(ordo_mem_resource_t *resource);
    /* Optional: ORDO_OK if block may be freed now, else why not (a pool:
     * a graph is bound to it, ORDO_ERR_BUSY), for an adaptor that keeps a
     * freed block a while (a guard's quarantine): refused at its free,
     * rather than at its release, where the refusal would leak it. NULL:
     * mem_free_check asks the resources below (an adaptor that hands out
     * blocks of its own, as the guard does, answers for them itself). */
    ordo_status_t (*free_check)(ordo_mem_resource_t *resource, const ordo_block_t *block);
    uint64_t (*bytes_outstanding)(ordo_mem_resource_t *resource);
    ordo_status_t (*reap_pending)(ordo_mem_resource_t *resource, ordo_deadline_t deadline);
    int (*supports_use_tracking)(ordo_mem_resource_t *resource);
    ordo_status_t (*prepare_use)(ordo_mem_resource_t *resource, ordo_block_t *block,
                                 ordo_stream_t *stream, ordo_access_mode_t mode);
    ordo_status_t (*finish_use)(ordo_mem_resource_t *resource, ordo_block_t *block,
                                ordo_stream_t *stream, ordo_access_mode_t mode);
    ordo_status_t (*record_use)(ordo_mem_resource_t *resource, ordo_block_t *block,
                                ordo_stream_t *stream);
    /* The tracked buffer of block, or NULL. */
    ordo_buffer_t *(*block_buffer)(ordo_mem_resource_t *resource, const ordo_block_t *block);
    /* Frees the resource; ORDO_ERR_BUSY (with a message) while it cannot. */
    ordo_status_t (*destroy)(ordo_mem_resource_t *resource);
    /* Optional (NULL: none). A public entry point (api) called on top
     * refused block, a non-NULL pointer, with status because of why; the
     * error message is set. Called for each resource of top's stack, from
     * top down, that has the hook, so checking adaptors count and report
     * what was refused above them. It may replace the message, never the
     * status; it must not dereference block unless it knows the memory
     * (why == MEM_REFUSED_FOREIGN: a live header, as validation read). */
    void (*block_refused)(ordo_mem_resource_t *resource, ordo_mem_resource_t *top,
                          const ordo_block_t *block, mem_refusal_t why, ordo_status_t status,
                          const char *api);
} mem_resource_ops_t;

struct ordo_mem_resource {
    uint32_t magic;
    const mem_resource_ops_t *ops;
    ordo_device_t *device;
    ordo_mem_resource_t *upstream; /* NULL for a base resource */
    _Atomic uint32_t dependents;   /* resources standing on this one */
    /* A layer of the device's own stack (ordo_device_memory): the device
     * tears it down, so a caller's destroy is refused. */
    uint8_t device_owned;
    /* Built by a caller straight on such a layer: holds a reference on the
     * device, so that the stack under it outlives it. */
    uint8_t holds_device_stack;
};

struct ordo_block {
    _Atomic uint32_t magic; /* ORDO_BLOCK_MAGIC while live */
    uint32_t tag;
    void *ptr;
    size_t bytes;
    size_t alignment;
    ordo_stream_t *stream;
    ordo_mem_resource_t *resource; /* the resource that made this block */
    /* The resource the block was handed out through, the one it must go
     * back to: its maker, or the outermost pass-through adaptor (budget,
     * statistics, logging), which hand out their upstream's block itself.
     * Set at each hand-out; a pass-through adaptor sets it to its upstream
     * as it forwards the free (ordo__mem_forward_free). Atomic only so
     * that a racing double free (a caller error the base detects) is not a
     * data race as well. */
    _Atomic(ordo_mem_resource_t *) holder;
};

/* Marks block as handed out through resource (see holder). */
static inline void mem_hand_out(ordo_block_t *block, ordo_mem_resource_t *resource) {
    atomic_store_explicit(&block->holder, resource, memory_order_relaxed);
}

/* ORDO_OK when block was handed out through resource; otherwise
 * ORDO_ERR_INVALID_ARGUMENT naming the resource it was handed out
 * through, for api. */
ordo_status_t ordo__mem_check_holder(const ordo_mem_resource_t *resource, const ordo_block_t *block,
                                     const char *api);

/* Non-zero when other is one of the resources below resource. */
int ordo__mem_is_below(const ordo_mem_resource_t *resource, const ordo_mem_resource_t *other);

/* Fills the common header; resource->upstream gains a dependent (and, on
 * a layer of the device's own stack, the device a reference, dropped by
 * ordo_mem_resource_destroy). */
void ordo__mem_resource_init(ordo_mem_resource_t *resource, const mem_resource_ops_t *ops,
                             ordo_device_t *device, ordo_mem_resource_t *upstream);
/* Undoes ordo__mem_resource_init (the memory is the caller's to free). */
void ordo__mem_resource_fini(ordo_mem_resource_t *resource);

ordo_status_t ordo__mem_resource_check(const ordo_mem_resource_t *resource, const char *api);

/* The checks every adaptor's create starts with: clears *out_resource,
 * then checks the upstream handle, then that out_resource is not NULL
 * (handles first, as everywhere). */
ordo_status_t ordo__mem_adaptor_create_check(ordo_mem_resource_t *upstream,
                                             ordo_mem_resource_t **out_resource, const char *api);

/* ordo_mem_resource_destroy without the refusal of the device's own
 * layers: the device tearing its stack down (device_memory.c). */
ordo_status_t ordo__mem_resource_destroy_owned(ordo_mem_resource_t *resource);

/* A direct resource that holds no reference on device: the device's own
 * default stack (device_memory.c), torn down by the device itself. */
ordo_status_t ordo__mem_direct_create_unreferenced(ordo_device_t *device,
                                                   ordo_mem_resource_t **out_resource);

/* Stream-ordered frees in flight, counted in a futex word by the resources
 * that defer their frees to a stream point. ordo__mem_frees_done is the last
 * thing a free's callback does: after the decrement the resource may be
 * destroyed, and the wake touches only the word's address. */
void ordo__mem_frees_done(_Atomic uint32_t *pending);
/* Waits until no free counted in *pending is in flight (ORDO_ERR_TIMEOUT,
 * with a message, at the deadline). */
ordo_status_t ordo__mem_frees_wait(_Atomic uint32_t *pending, ordo_deadline_t deadline);

/* A free ordered behind a stream's work, kept in a block's descriptor: a
 * timeline of its own that the stream signals when it passes the free,
 * and a timepoint on it that runs the free. The timeline stays with the
 * descriptor after the free (a late reader of a stale handle may still
 * look at it) until the descriptor is reused or destroyed. */
typedef struct mem_free_point {
    ordo_signal_t *timeline; /* NULL: none */
    ordo_timepoint_t timepoint;
} mem_free_point_t;

/* A stream-ordered free's timeline; a refusal (out of memory) names api,
 * the free's public call, not the signal's create. */
ordo_status_t ordo__mem_free_timeline_create(ordo_signal_t **out_timeline, const char *api);

/* Makes the timeline of a free (dropping one an earlier free left). On an
 * error nothing is armed and the block is still the caller's. */
ordo_status_t ordo__mem_free_point_open(mem_free_point_t *point, const char *api);

/* Drops the timeline (on reuse or destroy of the descriptor, or to give up
 * a free opened and not armed). */
void ordo__mem_free_point_close(mem_free_point_t *point);

/* Arms an opened free: fn(ctx, status, ...) runs once stream passes this
 * point, or at once when the stream has failed (none of its work runs any
 * more), counted in *pending until fn calls ordo__mem_frees_done.
 * ORDO_OK: fn runs (it may have run already, and the descriptor may be
 * reused by then: the caller must not touch point or the block after).
 * Else the status with which the healthy stream refused the signal (out of
 * memory): fn will never run and the timeline is dropped, but the free is
 * still counted in *pending: the caller either completes it another way
 * (then ordo__mem_frees_done) or gives it up (ordo__mem_free_point_uncount)
 * and keeps the block. Until then a reap waits for it. */
ordo_status_t ordo__mem_free_point_arm(mem_free_point_t *point, ordo_stream_t *stream,
                                       _Atomic uint32_t *pending, ordo_timepoint_fn fn, void *ctx);

/* Gives up a free whose arm was refused: *pending no longer counts it. */
void ordo__mem_free_point_uncount(_Atomic uint32_t *pending);

/* Calls into a resource without validating again. */
static inline ordo_status_t mem_allocate(ordo_mem_resource_t *r, const mem_request_t *request,
                                         ordo_block_t **out_block) {
    return r->ops->allocate(r, request, out_block);
}
static inline ordo_status_t mem_deallocate(ordo_mem_resource_t *r, ordo_block_t *block,
                                           ordo_stream_t *stream) {
    return r->ops->deallocate(r, block, stream);
}
static inline ordo_status_t mem_release(ordo_mem_resource_t *r, ordo_block_t *block,
                                        ordo_stream_t *stream) {
    return r->ops->release ? r->ops->release(r, block, stream)
                           : r->ops->deallocate(r, block, stream);
}

/* A pass-through adaptor's free of block, after its own accounting: hands
 * the block back to the upstream (as a release when release is set) and
 * returns its status; a block the upstream did not free stays held by
 * resource. */
ordo_status_t ordo__mem_forward_free(ordo_mem_resource_t *resource, ordo_block_t *block,
                                     ordo_stream_t *stream, int release);

/* Whether block may be freed through r now: the first resource down r's
 * stack that can tell says (ORDO_OK when none can). */
static inline ordo_status_t mem_free_check(ordo_mem_resource_t *r, const ordo_block_t *block) {
    for (; r; r = r->upstream) {
        if (r->ops->free_check) {
            return r->ops->free_check(r, block);
        }
    }
    return ORDO_OK;
}

/* Whether a free through r now goes into a recording: the first resource
 * down r's stack that can tell says. The caller's thread owns the tracker
 * (a recording begins and ends on it), or the answer may be stale. */
static inline int mem_records(ordo_mem_resource_t *r) {
    for (; r; r = r->upstream) {
        if (r->ops->records) {
            return r->ops->records(r);
        }
    }
    return 0;
}

/* Whether a deallocation that returned st ended the block anyway: a guard
 * below returns ORDO_ERR_CORRUPTED for canary overwrites it found, after
 * it freed the block and ended its handle (a retry is a double free). An
 * adaptor above counts such a block as freed and passes the status on. */
static inline int mem_freed_despite(ordo_status_t st) {
    return st == ORDO_OK || st == ORDO_ERR_CORRUPTED;
}

/* Enqueues the signal of a stream-ordered free's point (timeline to 1) on
 * stream; a stream that refuses it (it has failed) fails the timeline, so
 * the free's timepoint fires at once. Returns freed, the status of the
 * free (ORDO_OK, or ORDO_ERR_CORRUPTED with a guard's findings as the
 * thread's message, which the refusal does not replace). */
ordo_status_t ordo__mem_free_point_enqueue(ordo_stream_t *stream, ordo_signal_t *timeline,
                                           ordo_status_t freed);

/* For adaptors: forward everything but allocate/deallocate unchanged. */
uint64_t ordo__mem_forward_bytes_outstanding(ordo_mem_resource_t *resource);
ordo_status_t ordo__mem_forward_reap_pending(ordo_mem_resource_t *resource,
                                             ordo_deadline_t deadline);
int ordo__mem_forward_supports_use_tracking(ordo_mem_resource_t *resource);
ordo_status_t ordo__mem_forward_prepare_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                            ordo_stream_t *stream, ordo_access_mode_t mode);
ordo_status_t ordo__mem_forward_finish_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                           ordo_stream_t *stream, ordo_access_mode_t mode);
ordo_status_t ordo__mem_forward_record_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                           ordo_stream_t *stream);
ordo_buffer_t *ordo__mem_forward_block_buffer(ordo_mem_resource_t *resource,
                                              const ordo_block_t *block);

/* For base resources without use tracking. */
int ordo__mem_no_use_tracking(ordo_mem_resource_t *resource);
ordo_status_t ordo__mem_refuse_prepare_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                           ordo_stream_t *stream, ordo_access_mode_t mode);
ordo_status_t ordo__mem_refuse_finish_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                          ordo_stream_t *stream, ordo_access_mode_t mode);
ordo_status_t ordo__mem_refuse_record_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                          ordo_stream_t *stream);
ordo_buffer_t *ordo__mem_no_block_buffer(ordo_mem_resource_t *resource, const ordo_block_t *block);

#endif
