/* The statistics adaptor: current, peak and total bytes and blocks,
 * overall and per tag, all atomic. A block counts from the moment upstream
 * hands it out until the deallocation is called; the count drops before
 * the block goes upstream, so a block reused at once by another thread
 * never counts twice and the peaks stay exact. */
#include <inttypes.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "mem/peak.h"
#include "mem/resource.h"
#include "ordo/memory_adaptors.h"

typedef struct counters {
    _Atomic uint64_t current_bytes;
    _Atomic uint64_t peak_bytes;
    _Atomic uint64_t total_bytes;
    _Atomic uint64_t current_blocks;
    _Atomic uint64_t peak_blocks;
    _Atomic uint64_t total_blocks;
} counters_t;

typedef struct statistics_resource {
    ordo_mem_resource_t base;
    counters_t overall;
    counters_t tags[ORDO_MEM_MAX_TAGS];
    _Atomic uint64_t failed_allocations;
} statistics_resource_t;

static const mem_resource_ops_t statistics_ops;

/* The peaks are raised with the values these increments produced
 * (mem/peak.h: sequentially consistent, against a racing reset). */
static void counters_add(counters_t *c, uint64_t bytes) {
    uint64_t now = atomic_fetch_add_explicit(&c->current_bytes, bytes, memory_order_seq_cst);
    mem_peak_raise(&c->peak_bytes, now + bytes);
    atomic_fetch_add_explicit(&c->total_bytes, bytes, memory_order_relaxed);
    now = atomic_fetch_add_explicit(&c->current_blocks, 1, memory_order_seq_cst);
    mem_peak_raise(&c->peak_blocks, now + 1);
    atomic_fetch_add_explicit(&c->total_blocks, 1, memory_order_relaxed);
}

static void counters_sub(counters_t *c, uint64_t bytes) {
    atomic_fetch_sub_explicit(&c->current_bytes, bytes, memory_order_relaxed);
    atomic_fetch_sub_explicit(&c->current_blocks, 1, memory_order_relaxed);
}

/* counters_sub unless fewer bytes are counted than the block has: then it
 * was not allocated through this adaptor, and 0 is returned. */
static int counters_sub_checked(counters_t *c, uint64_t bytes) {
    uint64_t now = atomic_load_explicit(&c->current_bytes, memory_order_relaxed);
    do {
        if (now < bytes || !atomic_load_explicit(&c->current_blocks, memory_order_relaxed)) {
            return 0;
        }
    } while (!atomic_compare_exchange_weak_explicit(&c->current_bytes, &now, now - bytes,
                                                    memory_order_relaxed, memory_order_relaxed));
    atomic_fetch_sub_explicit(&c->current_blocks, 1, memory_order_relaxed);
    return 1;
}

/* Undoes counters_sub after a refused deallocation. The block was held
 * all along, but a peak reset in between may have set the peaks to the
 * lowered values, so they are raised again. */
static void counters_restore(counters_t *c, uint64_t bytes) {
    uint64_t now = atomic_fetch_add_explicit(&c->current_bytes, bytes, memory_order_seq_cst);
    mem_peak_raise(&c->peak_bytes, now + bytes);
    now = atomic_fetch_add_explicit(&c->current_blocks, 1, memory_order_seq_cst);
    mem_peak_raise(&c->peak_blocks, now + 1);
}

static void counters_read(counters_t *c, ordo_mem_counters_t *out) {
    *out = (ordo_mem_counters_t){
        .current_bytes = atomic_load_explicit(&c->current_bytes, memory_order_relaxed),
        .peak_bytes = atomic_load_explicit(&c->peak_bytes, memory_order_relaxed),
        .total_bytes = atomic_load_explicit(&c->total_bytes, memory_order_relaxed),
        .current_blocks = atomic_load_explicit(&c->current_blocks, memory_order_relaxed),
        .peak_blocks = atomic_load_explicit(&c->peak_blocks, memory_order_relaxed),
        .total_blocks = atomic_load_explicit(&c->total_blocks, memory_order_relaxed),
    };
}

static void counters_reset_peak(counters_t *c) {
    mem_peak_reset(&c->peak_bytes, &c->current_bytes);
    mem_peak_reset(&c->peak_blocks, &c->current_blocks);
}

static ordo_status_t statistics_allocate(ordo_mem_resource_t *resource,
                                         const mem_request_t *request, ordo_block_t **out_block) {
    statistics_resource_t *s = (statistics_resource_t *)resource;
    ordo_status_t st = mem_allocate(resource->upstream, request, out_block);
    if (st != ORDO_OK) {
        atomic_fetch_add_explicit(&s->failed_allocations, 1, memory_order_relaxed);
        return st;
    }
    mem_hand_out(*out_block, resource);
    counters_add(&s->overall, request->bytes);
    counters_add(&s->tags[request->tag], request->bytes);
    return ORDO_OK;
}

/* A free (release: an adaptor's above, passed on as one). */
static ordo_status_t statistics_free(ordo_mem_resource_t *resource, ordo_block_t *block,
                                     ordo_stream_t *stream, int release) {
    statistics_resource_t *s = (statistics_resource_t *)resource;
    uint64_t bytes = block->bytes;
    uint32_t tag = block->tag;
    ORDO_RETURN_IF_ERROR(ordo__mem_check_holder(resource, block, "ordo_mem_deallocate"));
    if (!counters_sub_checked(&s->tags[tag], bytes)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, "ordo_mem_deallocate",
                           "block %p (tag %u, %" PRIu64
                           " bytes) was not allocated through this statistics adaptor (it "
                           "counts fewer bytes of that tag): give a block back to the stack it "
                           "came from",
                           (void *)block, tag, bytes);
    }
    counters_sub(&s->overall, bytes);
    ordo_status_t st = ordo__mem_forward_free(resource, block, stream, release);
    if (!mem_freed_despite(st)) {
        counters_restore(&s->overall, bytes);
        counters_restore(&s->tags[tag], bytes);
    }
    return st;
}

static ordo_status_t statistics_deallocate(ordo_mem_resource_t *resource, ordo_block_t *block,
                                           ordo_stream_t *stream) {
    return statistics_free(resource, block, stream, 0);
}

static ordo_status_t statistics_release(ordo_mem_resource_t *resource, ordo_block_t *block,
                                        ordo_stream_t *stream) {
    return statistics_free(resource, block, stream, 1);
}

static ordo_status_t statistics_destroy(ordo_mem_resource_t *resource) {
    statistics_resource_t *s = (statistics_resource_t *)resource;
    uint64_t live = atomic_load_explicit(&s->overall.current_blocks, memory_order_acquire);
    if (live) {
        return ordo__error(
            ORDO_ERR_BUSY, "ordo_mem_resource_destroy",
            "the statistics adaptor still has %" PRIu64 " block(s) outstanding (%" PRIu64 " bytes)",
            live, atomic_load_explicit(&s->overall.current_bytes, memory_order_relaxed));
    }
    ordo__mem_resource_fini(resource);
    ordo__dealloc(s, sizeof *s, 0);
    return ORDO_OK;
}

static const mem_resource_ops_t statistics_ops = {
    .kind = "statistics",
    .allocate = statistics_allocate,
    .deallocate = statistics_deallocate,
    .release = statistics_release,
    .bytes_outstanding = ordo__mem_forward_bytes_outstanding,
    .reap_pending = ordo__mem_forward_reap_pending,
    .supports_use_tracking = ordo__mem_forward_supports_use_tracking,
    .prepare_use = ordo__mem_forward_prepare_use,
    .finish_use = ordo__mem_forward_finish_use,
    .record_use = ordo__mem_forward_record_use,
    .block_buffer = ordo__mem_forward_block_buffer,
    .destroy = statistics_destroy,
};

static ordo_status_t statistics_check(ordo_mem_resource_t *resource, const char *api) {
    ordo_status_t st = ordo__mem_resource_check(resource, api);
    if (st == ORDO_OK && resource->ops != &statistics_ops) {
        st = ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                         "%p is a %s resource, not a statistics adaptor", (void *)resource,
                         resource->ops->kind);
    }
    return st;
}

ordo_status_t ordo_mem_statistics_create(ordo_mem_resource_t *upstream,
                                         ordo_mem_resource_t **out_resource) {
    ORDO_RETURN_IF_ERROR(ordo__mem_adaptor_create_check(upstream, out_resource, __func__));
    statistics_resource_t *s = ordo__alloc(sizeof *s, 0);
    if (!s) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__,
                           "cannot allocate a statistics adaptor");
    }
    ordo__mem_resource_init(&s->base, &statistics_ops, upstream->device, upstream);
    *out_resource = &s->base;
    return ORDO_OK;
}

ordo_status_t ordo_mem_statistics_get(ordo_mem_resource_t *resource,
                                      ordo_mem_statistics_t *out_statistics) {
    ordo_status_t st = statistics_check(resource, __func__);
    if (st != ORDO_OK) {
        /* Cleared here rather than first: the success path below writes
         * every field, and the struct is large. */
        if (out_statistics) {
            memset(out_statistics, 0, sizeof *out_statistics);
        }
        return st;
    }
    if (!out_statistics) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_statistics is NULL");
    }
    statistics_resource_t *s = (statistics_resource_t *)resource;
    counters_read(&s->overall, &out_statistics->overall);
    for (uint32_t t = 0; t < ORDO_MEM_MAX_TAGS; ++t) {
        counters_read(&s->tags[t], &out_statistics->tags[t]);
    }
    out_statistics->failed_allocations =
        atomic_load_explicit(&s->failed_allocations, memory_order_relaxed);
    return ORDO_OK;
}

ordo_status_t ordo_mem_statistics_reset_peak(ordo_mem_resource_t *resource) {
    ORDO_RETURN_IF_ERROR(statistics_check(resource, __func__));
    statistics_resource_t *s = (statistics_resource_t *)resource;
    counters_reset_peak(&s->overall);
    for (uint32_t t = 0; t < ORDO_MEM_MAX_TAGS; ++t) {
        counters_reset_peak(&s->tags[t]);
    }
    return ORDO_OK;
}
