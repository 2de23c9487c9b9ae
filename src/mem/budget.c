/* The budget adaptor: every budget adaptor of a device charges one
 * account kept on the device; an allocation reserves its charge before
 * asking upstream, so the charged total never exceeds the limit. A
 * stream-ordered free keeps its charge until its stream reaches the free
 * (the memory may still be in use until then); a timepoint on a timeline
 * the stream signals right after the upstream free drops it. */
#include <inttypes.h>
#include <pthread.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/futex.h"
#include "hal/hal.h"
#include "mem/peak.h"
#include "mem/resource.h"
#include "ordo/memory_adaptors.h"
#include "ordo/timepoint.h"

/* The per-device account. */
typedef struct budget_account {
    hal_device_attachment_t base;
    _Atomic uint64_t limit;
    _Atomic uint64_t charged;
    _Atomic uint64_t charged_pending;
    _Atomic uint64_t peak_charged;
    _Atomic uint64_t refused;
    _Atomic uint32_t frees_pending; /* of every budget adaptor of the device */
} budget_account_t;

typedef struct budget_resource budget_resource_t;

/* A stream-ordered free whose charge is still held. Recycled, like the
 * direct resource's descriptors: the timeline is released when the record
 * is reused (never from inside its own timepoint's callback). */
typedef struct budget_free {
    budget_resource_t *owner;
    uint64_t charge;
    ordo_signal_t *timeline;
    ordo_timepoint_t timepoint;
    struct budget_free *next;
} budget_free_t;

struct budget_resource {
    ordo_mem_resource_t base;
    budget_account_t *account;
    uint64_t reap_wait_ns;
    pthread_mutex_t lock; /* guards records (a leaf) */
    budget_free_t *records;
    _Atomic uint64_t blocks_live;  /* handed out through this adaptor */
    _Atomic uint64_t charged_live; /* their charges */
    _Atomic uint32_t frees_pending;
};

static const mem_resource_ops_t budget_ops;

static void account_destroy(hal_device_attachment_t *self) {
    ordo__dealloc(self, sizeof(budget_account_t), 0);
}

/* The device's account, made on first use. NULL only when create is 0 and
 * none exists, or when the host is out of memory. */
static budget_account_t *account_get(ordo_device_t *device, int create) {
    hal_device_attachment_t *a = atomic_load_explicit(&device->mem_budget, memory_order_acquire);
    if (a || !create) {
        return (budget_account_t *)a;
    }
    budget_account_t *fresh = ordo__alloc(sizeof *fresh, 0);
    if (!fresh) {
        return NULL;
    }
    fresh->base.destroy = account_destroy;
    atomic_init(&fresh->limit, ORDO_MEM_BUDGET_UNLIMITED);
    hal_device_attachment_t *expected = NULL;
    if (atomic_compare_exchange_strong_explicit(&device->mem_budget, &expected, &fresh->base,
                                                memory_order_acq_rel, memory_order_acquire)) {
        return fresh;
    }
    ordo__dealloc(fresh, sizeof *fresh, 0); /* another first user won */
    return (budget_account_t *)expected;
}

static uint64_t charge_of(size_t bytes, size_t alignment) {
    uint64_t granule = alignment > ORDO_MEM_BUDGET_GRANULE ? alignment : ORDO_MEM_BUDGET_GRANULE;
    return ((uint64_t)bytes + granule - 1) / granule * granule;
}

/* Reserves charge if the limit allows: never exceeded, whatever races. */
static int account_reserve(budget_account_t *a, uint64_t charge) {
    uint64_t held = atomic_load_explicit(&a->charged, memory_order_relaxed);
    for (;;) {
        uint64_t limit = atomic_load_explicit(&a->limit, memory_order_relaxed);
        if (charge > limit || held > limit - charge) {
            return 0;
        }
        /* Sequentially consistent, for the peak (mem/peak.h). */
        if (atomic_compare_exchange_weak_explicit(&a->charged, &held, held + charge,
                                                  memory_order_seq_cst, memory_order_relaxed)) {
            mem_peak_raise(&a->peak_charged, held + charge);
            return 1;
        }
    }
}

static void account_release(budget_account_t *a, uint64_t charge) {
    atomic_fetch_sub_explicit(&a->charged, charge, memory_order_relaxed);
}

static ordo_status_t budget_reap(budget_resource_t *b, ordo_deadline_t deadline) {
    ORDO_RETURN_IF_ERROR(ordo__mem_forward_reap_pending(&b->base, deadline));
    return ordo__mem_frees_wait(&b->frees_pending, deadline);
}

/* Over the limit: lets frees already queued complete, upstream's and
 * every budget adaptor's of the device, retrying as each completes, for at
 * most reap_wait_ns. */
static int reserve_after_frees(budget_resource_t *b, uint64_t charge) {
    budget_account_t *a = b->account;
    ordo_deadline_t deadline = ordo_deadline_after_ns(b->reap_wait_ns);
    (void)ordo__mem_forward_reap_pending(&b->base, deadline);
    for (;;) {
        uint32_t pending = atomic_load_explicit(&a->frees_pending, memory_order_acquire);
        if (account_reserve(a, charge)) {
            return 1;
        }
        if (!pending ||
            ordo__futex_wait(&a->frees_pending, pending, deadline) == ORDO_FUTEX_TIMED_OUT) {
            return account_reserve(a, charge);
        }
    }
}

static ordo_status_t budget_allocate(ordo_mem_resource_t *resource, const mem_request_t *request,
                                     ordo_block_t **out_block) {
    budget_resource_t *b = (budget_resource_t *)resource;
    budget_account_t *a = b->account;
    uint64_t charge = charge_of(request->bytes, request->alignment);
    if (!account_reserve(a, charge)) {
        if (!reserve_after_frees(b, charge)) {
            atomic_fetch_add_explicit(&a->refused, 1, memory_order_relaxed);
            uint64_t limit = atomic_load_explicit(&a->limit, memory_order_relaxed);
            uint64_t held = atomic_load_explicit(&a->charged, memory_order_relaxed);
            uint64_t pending = atomic_load_explicit(&a->charged_pending, memory_order_relaxed);
            return ordo__error(
                ORDO_ERR_OUT_OF_MEMORY, "ordo_mem_allocate",
                "memory budget of %s exceeded: a request of %zu bytes (charged "
                "%" PRIu64 ", alignment %zu, tag %u, stream %p) does not fit "
                "the limit of %" PRIu64 " bytes: %" PRIu64 " bytes are held, %" PRIu64
                " of them by frees their streams have not reached yet",
                resource->device->info.name, request->bytes, charge, request->alignment,
                request->tag, (void *)request->stream, limit, held, pending);
        }
    }
    ordo_status_t st = mem_allocate(resource->upstream, request, out_block);
    if (st != ORDO_OK) {
        account_release(a, charge);
        return st;
    }
    mem_hand_out(*out_block, resource);
    atomic_fetch_add_explicit(&b->blocks_live, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->charged_live, charge, memory_order_relaxed);
    return ORDO_OK;
}

static budget_free_t *record_take(budget_resource_t *b) {
    pthread_mutex_lock(&b->lock);
    budget_free_t *r = b->records;
    if (r) {
        b->records = r->next;
    }
    pthread_mutex_unlock(&b->lock);
    if (!r) {
        return ordo__alloc(sizeof *r, 0);
    }
    if (r->timeline) {
        (void)ordo_signal_release(r->timeline);
        r->timeline = NULL;
    }
    return r;
}

static void record_put(budget_resource_t *b, budget_free_t *r) {
    pthread_mutex_lock(&b->lock);
    r->next = b->records;
    b->records = r;
    pthread_mutex_unlock(&b->lock);
}

/* The stream reached the free (or failed, or was destroyed: nothing of it
 * runs any more either). frees_pending drops last: after it the adaptor
 * may be destroyed, and only the futex wake, which touches no memory of
 * it, follows. */
static void free_point_reached(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status, (void)timepoint;
    budget_free_t *r = ctx;
    budget_resource_t *b = r->owner;
    budget_account_t *a = b->account; /* the device outlives the adaptor */
    uint64_t charge = r->charge;
    atomic_fetch_sub_explicit(&a->charged_pending, charge, memory_order_relaxed);
    account_release(a, charge);
    record_put(b, r);
    ordo__mem_frees_done(&a->frees_pending);
    ordo__mem_frees_done(&b->frees_pending);
}

/* Takes charge off this adaptor's live charges; 0 if it holds less (the
 * block was not allocated through this adaptor). */
static int live_release(budget_resource_t *b, uint64_t charge) {
    uint64_t live = atomic_load_explicit(&b->charged_live, memory_order_relaxed);
    do {
        if (live < charge) {
            return 0;
        }
    } while (!atomic_compare_exchange_weak_explicit(&b->charged_live, &live, live - charge,
                                                    memory_order_relaxed, memory_order_relaxed));
    atomic_fetch_sub_explicit(&b->blocks_live, 1, memory_order_relaxed);
    return 1;
}

/* A free (release: an adaptor's above, passed on as one). */
static ordo_status_t budget_free(ordo_mem_resource_t *resource, ordo_block_t *block,
                                 ordo_stream_t *stream, int release) {
    budget_resource_t *b = (budget_resource_t *)resource;
    /* Read before upstream ends the handle. */
    uint64_t charge = charge_of(block->bytes, block->alignment);
    uint32_t tag = block->tag;
    ORDO_RETURN_IF_ERROR(ordo__mem_check_holder(resource, block, "ordo_mem_deallocate"));
    if (!live_release(b, charge)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, "ordo_mem_deallocate",
                           "block %p (tag %u, %zu bytes) was not allocated through this budget "
                           "adaptor (it holds %" PRIu64 " bytes of charges): give a block back "
                           "to the stack it came from",
                           (void *)block, tag, block->bytes,
                           atomic_load_explicit(&b->charged_live, memory_order_relaxed));
    }
    budget_free_t *r = NULL;
    ordo_signal_t *timeline = NULL;
    ordo_status_t st = ORDO_OK;
    if (stream) {
        r = record_take(b);
        if (!r) {
            st = ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_mem_deallocate",
                             "cannot allocate a pending-free record");
        } else if ((st = ordo__mem_free_timeline_create(&timeline, "ordo_mem_deallocate")) !=
                   ORDO_OK) {
            record_put(b, r);
        }
    }
    ordo_status_t freed = ORDO_OK; /* the upstream's status when it freed the block */
    if (st == ORDO_OK) {
        st = ordo__mem_forward_free(resource, block, stream, release);
        if (!mem_freed_despite(st) && r) {
            (void)ordo_signal_release(timeline);
            record_put(b, r);
        }
    }
    if (!mem_freed_despite(st)) {
        atomic_fetch_add_explicit(&b->charged_live, charge, memory_order_relaxed);
        atomic_fetch_add_explicit(&b->blocks_live, 1, memory_order_relaxed);
        return st;
    }
    freed = st; /* ORDO_ERR_CORRUPTED: freed, with the guard's findings */
    if (!stream) {
        account_release(b->account, charge);
        return freed;
    }
    r->owner = b;
    r->charge = charge;
    r->timeline = timeline;
    r->timepoint = (ordo_timepoint_t)ORDO_TIMEPOINT_INIT;
    atomic_fetch_add_explicit(&b->account->charged_pending, charge, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->frees_pending, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&b->account->frees_pending, 1, memory_order_relaxed);
    (void)ordo_timepoint_arm(&r->timepoint, timeline, 1, free_point_reached, r);
    /* Signalled right after the upstream free in the stream's order. A
     * stream that cannot take the signal fails it, and the charge drops at
     * once: no more of that stream's work runs. */
    return ordo__mem_free_point_enqueue(stream, timeline, freed);
}

static ordo_status_t budget_deallocate(ordo_mem_resource_t *resource, ordo_block_t *block,
                                       ordo_stream_t *stream) {
    return budget_free(resource, block, stream, 0);
}

static ordo_status_t budget_release(ordo_mem_resource_t *resource, ordo_block_t *block,
                                    ordo_stream_t *stream) {
    return budget_free(resource, block, stream, 1);
}

static ordo_status_t budget_reap_pending(ordo_mem_resource_t *resource, ordo_deadline_t deadline) {
    return budget_reap((budget_resource_t *)resource, deadline);
}

static ordo_status_t budget_destroy(ordo_mem_resource_t *resource) {
    budget_resource_t *b = (budget_resource_t *)resource;
    uint64_t live = atomic_load_explicit(&b->blocks_live, memory_order_acquire);
    uint32_t pending = atomic_load_explicit(&b->frees_pending, memory_order_acquire);
    if (live || pending) {
        return ordo__error(ORDO_ERR_BUSY, "ordo_mem_resource_destroy",
                           "the budget adaptor still has %" PRIu64 " block(s) outstanding (%" PRIu64
                           " bytes charged) and %u free(s) pending",
                           live, atomic_load_explicit(&b->charged_live, memory_order_relaxed),
                           pending);
    }
    while (b->records) {
        budget_free_t *r = b->records;
        b->records = r->next;
        if (r->timeline) {
            (void)ordo_signal_release(r->timeline);
        }
        ordo__dealloc(r, sizeof *r, 0);
    }
    pthread_mutex_destroy(&b->lock);
    ordo__mem_resource_fini(resource);
    ordo__dealloc(b, sizeof *b, 0);
    return ORDO_OK;
}

static const mem_resource_ops_t budget_ops = {
    .kind = "budget",
    .allocate = budget_allocate,
    .deallocate = budget_deallocate,
    .release = budget_release,
    .bytes_outstanding = ordo__mem_forward_bytes_outstanding,
    .reap_pending = budget_reap_pending,
    .supports_use_tracking = ordo__mem_forward_supports_use_tracking,
    .prepare_use = ordo__mem_forward_prepare_use,
    .finish_use = ordo__mem_forward_finish_use,
    .record_use = ordo__mem_forward_record_use,
    .block_buffer = ordo__mem_forward_block_buffer,
    .destroy = budget_destroy,
};

ordo_status_t ordo_mem_budget_config_default(ordo_mem_budget_config_t *out_config) {
    if (!out_config) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_config is NULL");
    }
    *out_config = (ordo_mem_budget_config_t){.reap_wait_ns = ORDO_MEM_BUDGET_REAP_WAIT_NS};
    return ORDO_OK;
}

ordo_status_t ordo_mem_budget_set_limit(ordo_device_t *device, uint64_t bytes) {
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, __func__));
    budget_account_t *a = account_get(device, 1);
    if (!a) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate the budget account");
    }
    atomic_store_explicit(&a->limit, bytes, memory_order_relaxed);
    return ORDO_OK;
}

ordo_status_t ordo_mem_budget_stats(ordo_device_t *device, ordo_mem_budget_stats_t *out_stats) {
    if (out_stats) {
        memset(out_stats, 0, sizeof *out_stats);
    }
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, __func__));
    if (!out_stats) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_stats is NULL");
    }
    budget_account_t *a = account_get(device, 0);
    if (!a) {
        *out_stats = (ordo_mem_budget_stats_t){.limit = ORDO_MEM_BUDGET_UNLIMITED};
        return ORDO_OK;
    }
    *out_stats = (ordo_mem_budget_stats_t){
        .limit = atomic_load_explicit(&a->limit, memory_order_relaxed),
        .charged = atomic_load_explicit(&a->charged, memory_order_relaxed),
        .charged_pending = atomic_load_explicit(&a->charged_pending, memory_order_relaxed),
        .peak_charged = atomic_load_explicit(&a->peak_charged, memory_order_relaxed),
        .refused = atomic_load_explicit(&a->refused, memory_order_relaxed),
    };
    return ORDO_OK;
}

ordo_status_t ordo_mem_budget_reset_peak(ordo_device_t *device) {
    ORDO_RETURN_IF_ERROR(ordo__hal_device_check(device, __func__));
    budget_account_t *a = account_get(device, 0);
    if (a) {
        mem_peak_reset(&a->peak_charged, &a->charged);
    }
    return ORDO_OK;
}

ordo_status_t ordo_mem_budget_create(ordo_mem_resource_t *upstream,
                                     const ordo_mem_budget_config_t *config,
                                     ordo_mem_resource_t **out_resource) {
    ordo_status_t st = ordo__mem_adaptor_create_check(upstream, out_resource, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    ordo_mem_budget_config_t defaults;
    (void)ordo_mem_budget_config_default(&defaults);
    if (!config) {
        config = &defaults;
    }
    if ((st = ordo__flags_check(config->flags, 0, __func__)) != ORDO_OK) {
        return st;
    }
    if (config->reap_wait_ns > ORDO_MEM_BUDGET_REAP_WAIT_MAX_NS) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__,
                           "reap_wait_ns %" PRIu64
                           " is above ORDO_MEM_BUDGET_REAP_WAIT_MAX_NS (%llu ns): every wait is "
                           "bounded",
                           config->reap_wait_ns, ORDO_MEM_BUDGET_REAP_WAIT_MAX_NS);
    }
    budget_account_t *a = account_get(upstream->device, 1);
    budget_resource_t *b = a ? ordo__alloc(sizeof *b, 0) : NULL;
    if (!b) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a budget adaptor");
    }
    b->account = a;
    b->reap_wait_ns = config->reap_wait_ns;
    pthread_mutex_init(&b->lock, NULL);
    ordo__mem_resource_init(&b->base, &budget_ops, upstream->device, upstream);
    *out_resource = &b->base;
    return ORDO_OK;
}
