/* The guard adaptor: canaries around every block, fresh and poison fills,
 * a quarantine of freed blocks, and a registry of its own block headers.
 *
 * A block's life: LIVE (handed out) -> PENDING (deallocated; its stream
 * has not reached the free yet, so work may still touch the memory) ->
 * QUARANTINED (the stream reached the free: poisoned, held) -> RETIRED
 * (memory given back upstream; the header kept so a stale handle still
 * reads "freed") -> FREE (the header may be handed out again). Headers
 * live in slabs that are freed only with the guard, so a stale handle
 * never points at freed memory while the guard lives.
 *
 * Findings are collected under the lock or by the thread that owns the
 * block, and reported (counted, raised, passed to the callback) with no
 * lock held. Memory is read only while its block is in a state that keeps
 * it: under the lock for live and quarantined blocks, or by the one thread
 * that took a block out of the quarantine. */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "core/tracker_internal.h"
#include "hal/hal.h"
#include "mem/resource.h"
#include "ordo/memory_adaptors.h"
#include "ordo/timepoint.h"

enum guard_state {
    GUARD_LIVE = 1,
    GUARD_PENDING,
    GUARD_QUARANTINED,
    GUARD_EVICTING,
    GUARD_RETIRED,
    GUARD_FREE,
};

#define GUARD_SLAB_BLOCKS 64
/* Findings one call collects before it reports them. */
#define GUARD_FINDINGS_INLINE 4

typedef struct guard_resource guard_resource_t;

typedef struct guard_block {
    ordo_block_t base; /* first: the handle */
    guard_resource_t *owner;
    ordo_block_t *inner; /* upstream's block; NULL once given back */
    size_t front;        /* from inner->ptr to base.ptr: the front canary */
    size_t inner_bytes;  /* front canary + bytes + rear canary */
    uint64_t serial;     /* allocation number, names the block in reports */
    uint32_t state;      /* enum guard_state, under the lock */
    bool poisoned;       /* quarantined with the poison written (checked on leaving) */
    /* Bit per finding already reported for this block (each once). */
    _Atomic uint32_t reported;
    ordo_signal_t *free_timeline;
    ordo_timepoint_t free_timepoint;
    /* Over an upstream that tracks uses: a timepoint per stream whose last
     * use of the block may still run at its free (NULL, 0: none). The
     * block is checked and quarantined once they and the free point have
     * all been met, and the free call has let go (parts_pending). */
    ordo_timepoint_t *use_timepoints;
    uint32_t use_count;
    _Atomic uint32_t parts_pending;
    ordo_status_t free_status;       /* the free point's outcome */
    struct guard_block *prev, *next; /* live list; FIFOs and free list use next */
} guard_block_t;

typedef struct guard_slab {
    struct guard_slab *next;
    guard_block_t blocks[GUARD_SLAB_BLOCKS];
} guard_slab_t;

typedef struct guard_fifo {
    guard_block_t *head, *tail;
    size_t count;
} guard_fifo_t;

typedef struct finding {
    ordo_mem_guard_finding_t kind;
    uint32_t tag;
    size_t bytes;
    const ordo_block_t *block;
    uint64_t serial;
    char message[ORDO_MEM_GUARD_MESSAGE_MAX];
} finding_t;

/* Findings of one call: a few inline, more on the heap. */
typedef struct findings {
    finding_t inline_[GUARD_FINDINGS_INLINE];
    finding_t *items;
    size_t count, capacity;
    size_t dropped; /* no memory to keep them: counted, not passed on */
} findings_t;

struct guard_resource {
    ordo_mem_resource_t base;
    ordo_mem_guard_config_t config;
    /* Non-zero when upstream tracks uses: quarantined memory then goes back
     * as a free on the block's allocating stream (so uses on other streams
     * still order its reuse). That stream is one upstream's tracker orders
     * already, which must outlive the tracker; a stream of the guard's own
     * would be left in the tracker when the guard destroys it; and it goes
     * back only in the guard's calls on the program's side (evict_overflow).
     * Zero: a settled free, on any thread. */
    int upstream_tracks_uses;
    pthread_mutex_t lock; /* everything below but the atomics; a leaf */
    guard_slab_t *slabs;
    guard_block_t *free_headers;
    guard_block_t *live; /* doubly linked */
    guard_fifo_t quarantine;
    uint64_t quarantined_bytes;
    guard_fifo_t retired;
    uint64_t next_serial;
    uint64_t live_blocks;
    uint64_t pending_blocks;
    uint64_t counts[ORDO_MEM_GUARD_FINDING_COUNT_];
    uint64_t total;
    char last_message[ORDO_MEM_GUARD_MESSAGE_MAX];
    _Atomic uint64_t bytes_outstanding; /* callers' bytes, live or pending */
    _Atomic uint32_t frees_pending;
};

static const mem_resource_ops_t guard_ops;

/* --- Findings --- */

static void findings_init(findings_t *f) {
    f->items = f->inline_;
    f->count = 0;
    f->capacity = GUARD_FINDINGS_INLINE;
    f->dropped = 0;
}

static void findings_fini(findings_t *f) {
    if (f->items != f->inline_) {
        ordo__dealloc(f->items, f->capacity * sizeof *f->items, 0);
    }
}

static finding_t *findings_add(findings_t *f) {
    if (f->count == f->capacity) {
        size_t capacity = f->capacity * 2;
        finding_t *grown = ordo__alloc(capacity * sizeof *grown, 0);
        if (!grown) {
            f->dropped++;
            return NULL;
        }
        memcpy(grown, f->items, f->count * sizeof *grown);
        findings_fini(f);
        f->items = grown;
        f->capacity = capacity;
    }
    return &f->items[f->count++];
}

static void finding_v(findings_t *f, ordo_mem_guard_finding_t kind, uint32_t tag, size_t bytes,
                      const ordo_block_t *block, uint64_t serial, const char *fmt, va_list args) {
    finding_t *x = findings_add(f);
    if (!x) {
        return;
    }
    *x = (finding_t){kind, tag, bytes, block, serial, ""};
    vsnprintf(x->message, sizeof x->message, fmt, args);
}

static void finding(findings_t *f, ordo_mem_guard_finding_t kind, uint32_t tag, size_t bytes,
                    const ordo_block_t *block, uint64_t serial, const char *fmt, ...)
    ORDO_PRINTF(7, 8);

static void finding(findings_t *f, ordo_mem_guard_finding_t kind, uint32_t tag, size_t bytes,
                    const ordo_block_t *block, uint64_t serial, const char *fmt, ...) {
    va_list args;
    va_start(args, fmt);
    finding_v(f, kind, tag, bytes, block, serial, fmt, args);
    va_end(args);
}

/* Counts the findings (under the lock). */
static void findings_count_locked(guard_resource_t *g, const findings_t *f) {
    for (size_t i = 0; i < f->count; ++i) {
        g->counts[f->items[i].kind]++;
        g->total++;
        snprintf(g->last_message, sizeof g->last_message, "%s", f->items[i].message);
    }
    g->total += f->dropped;
}

/* Passes the findings to the callback (no lock held) and frees them. */
static void findings_report(guard_resource_t *g, findings_t *f) {
    ordo_mem_guard_report_fn report = g->config.report;
    for (size_t i = 0; report && i < f->count; ++i) {
        const finding_t *x = &f->items[i];
        ordo_mem_guard_detection_t d = {x->kind, x->tag, x->bytes, x->block, x->serial, x->message};
        report(g->config.report_user, &d);
    }
    findings_fini(f);
}

/* Counts, reports and frees the findings of a call made without the lock. */
static void findings_publish(guard_resource_t *g, findings_t *f) {
    if (f->count || f->dropped) {
        pthread_mutex_lock(&g->lock);
        findings_count_locked(g, f);
        pthread_mutex_unlock(&g->lock);
    }
    findings_report(g, f);
}

/* --- Memory checks (the caller keeps the block's memory alive) --- */

static uint8_t *inner_ptr(const guard_block_t *b) {
    return b->inner->ptr;
}

/* Reports each canary overwrite of b not reported before. */
static void check_canaries(guard_block_t *b, findings_t *f) {
    const uint8_t *p = inner_ptr(b);
    size_t i = 0;
    while (i < b->front && p[i] == ORDO_MEM_GUARD_CANARY) {
        ++i;
    }
    uint32_t bit = 1u << ORDO_MEM_GUARD_UNDERFLOW;
    if (i < b->front && !(atomic_fetch_or(&b->reported, bit) & bit)) {
        finding(f, ORDO_MEM_GUARD_UNDERFLOW, b->base.tag, b->base.bytes, &b->base, b->serial,
                "tag %u: %zu bytes before the start of a %zu-byte block overwritten (block "
                "#%" PRIu64 " %p)",
                b->base.tag, b->front - i, b->base.bytes, b->serial, (void *)&b->base);
    }
    const uint8_t *rear = p + b->front + b->base.bytes;
    size_t rear_bytes = b->inner_bytes - b->front - b->base.bytes;
    size_t j = rear_bytes;
    while (j > 0 && rear[j - 1] == ORDO_MEM_GUARD_CANARY) {
        --j;
    }
    bit = 1u << ORDO_MEM_GUARD_OVERFLOW;
    if (j > 0 && !(atomic_fetch_or(&b->reported, bit) & bit)) {
        finding(f, ORDO_MEM_GUARD_OVERFLOW, b->base.tag, b->base.bytes, &b->base, b->serial,
                "tag %u: %zu bytes after the end of a %zu-byte block overwritten (block "
                "#%" PRIu64 " %p)",
                b->base.tag, j, b->base.bytes, b->serial, (void *)&b->base);
    }
}

/* Reports a write to quarantined b (its poison changed), once. */
static void check_poison(guard_block_t *b, findings_t *f) {
    if (!b->poisoned) {
        return;
    }
    const uint8_t *p = inner_ptr(b);
    size_t first = SIZE_MAX, last = 0, changed = 0;
    for (size_t i = 0; i < b->inner_bytes; ++i) {
        if (p[i] != ORDO_MEM_GUARD_POISON) {
            first = first == SIZE_MAX ? i : first;
            last = i;
            ++changed;
        }
    }
    uint32_t bit = 1u << ORDO_MEM_GUARD_USE_AFTER_FREE;
    if (changed && !(atomic_fetch_or(&b->reported, bit) & bit)) {
        /* Offsets from the caller's start: negative in the front canary. */
        finding(f, ORDO_MEM_GUARD_USE_AFTER_FREE, b->base.tag, b->base.bytes, &b->base, b->serial,
                "tag %u: a %zu-byte block was written after its free: %zu byte(s) changed "
                "between offsets %lld and %lld of the block (block #%" PRIu64 " %p)",
                b->base.tag, b->base.bytes, changed, (long long)first - (long long)b->front,
                (long long)last - (long long)b->front, b->serial, (void *)&b->base);
    }
}

/* --- Headers --- */

static guard_block_t *header_take_locked(guard_resource_t *g) {
    if (!g->free_headers) {
        guard_slab_t *slab = ordo__alloc(sizeof *slab, 0);
        if (!slab) {
            return NULL;
        }
        slab->next = g->slabs;
        g->slabs = slab;
        for (size_t i = 0; i < GUARD_SLAB_BLOCKS; ++i) {
            guard_block_t *b = &slab->blocks[i];
            atomic_init(&b->base.magic, ORDO_BLOCK_FREED);
            b->owner = g;
            b->state = GUARD_FREE;
            b->next = g->free_headers;
            g->free_headers = b;
        }
    }
    guard_block_t *b = g->free_headers;
    g->free_headers = b->next;
    return b;
}

/* Whether p is one of g's headers (without reading p). */
static int header_is_ours_locked(const guard_resource_t *g, const void *p) {
    uintptr_t at = (uintptr_t)p;
    for (const guard_slab_t *s = g->slabs; s; s = s->next) {
        uintptr_t first = (uintptr_t)&s->blocks[0];
        if (at >= first && at < (uintptr_t)&s->blocks[GUARD_SLAB_BLOCKS]) {
            return (at - first) % sizeof(guard_block_t) == 0;
        }
    }
    return 0;
}

static int header_is_ours(guard_resource_t *g, const void *p) {
    pthread_mutex_lock(&g->lock);
    int ours = header_is_ours_locked(g, p);
    pthread_mutex_unlock(&g->lock);
    return ours;
}

static void fifo_push(guard_fifo_t *q, guard_block_t *b) {
    b->next = NULL;
    if (q->tail) {
        q->tail->next = b;
    } else {
        q->head = b;
    }
    q->tail = b;
    q->count++;
}

static guard_block_t *fifo_pop(guard_fifo_t *q) {
    guard_block_t *b = q->head;
    if (b) {
        q->head = b->next;
        if (!q->head) {
            q->tail = NULL;
        }
        q->count--;
    }
    return b;
}

static void live_unlink_locked(guard_resource_t *g, guard_block_t *b) {
    if (b->prev) {
        b->prev->next = b->next;
    } else {
        g->live = b->next;
    }
    if (b->next) {
        b->next->prev = b->prev;
    }
    b->prev = b->next = NULL;
}

/* --- Leaving the quarantine --- */

/* b's memory went upstream: its header is kept a while, so a stale handle
 * still reads "freed", then reused. */
static void retire_locked(guard_resource_t *g, guard_block_t *b) {
    b->inner = NULL;
    b->state = GUARD_RETIRED;
    fifo_push(&g->retired, b);
    while (g->retired.count > g->config.retired_headers) {
        guard_block_t *old = fifo_pop(&g->retired);
        old->state = GUARD_FREE;
        old->next = g->free_headers;
        g->free_headers = old;
    }
}

/* Checks the poison of b (taken out of the quarantine by this thread),
 * gives its memory back upstream and retires its header. */
static void release_block(guard_resource_t *g, guard_block_t *b, findings_t *f) {
    check_poison(b, f);
    /* A settled free, or one on the allocating stream, whose uses need no
     * wait (the stream runs in order): it fails only if that stream failed
     * and the block was used on more other streams than upstream's free
     * can order without waiting; the memory then stays with upstream,
     * counted there as outstanding. */
    /* A release: a pool whose tracker records holds it until the recording
     * ends, which it is no part of. */
    (void)mem_release(g->base.upstream, b->inner, g->upstream_tracks_uses ? b->base.stream : NULL);
    pthread_mutex_lock(&g->lock);
    retire_locked(g, b);
    pthread_mutex_unlock(&g->lock);
}

/* Releases quarantined blocks, oldest first, while the quarantine is over
 * its bounds (all = 1: until it is empty). Over an upstream that tracks
 * uses, only on the program's side (see evict_overflow). */
static void evict(guard_resource_t *g, int all, findings_t *f) {
    for (;;) {
        pthread_mutex_lock(&g->lock);
        guard_block_t *b = NULL;
        if (g->quarantine.count && (all || g->quarantine.count > g->config.quarantine_blocks ||
                                    g->quarantined_bytes > g->config.quarantine_bytes)) {
            b = fifo_pop(&g->quarantine);
            g->quarantined_bytes -= b->inner_bytes;
            b->state = GUARD_EVICTING;
        }
        pthread_mutex_unlock(&g->lock);
        if (!b) {
            return;
        }
        release_block(g, b, f);
    }
}

/* The quarantine's overflow, given back by a call on the program's side
 * (allocate, deallocate, reap): its findings are counted and reported,
 * not raised, since they are not that call's: the thread's message stays
 * the call's own (st's, or the caller's when st is ORDO_OK).
 *
 * Over a pool (an upstream that tracks uses), a release is a free ordered
 * on the pool's tracker: it writes the tracker's state, which the
 * program's threads read and write without its lock when one thread uses
 * the tracker (ordo/tracker.h: externally synchronised). A free point is
 * reached on a stream's worker, a thread the program does not know of, so
 * there the block only enters the quarantine, and the overflow waits for
 * the guard's next call here, made under the program's own ordering. */
static ordo_status_t evict_overflow(guard_resource_t *g, ordo_status_t st) {
    ordo__kept_message_t kept;
    ordo__message_keep(&kept);
    findings_t f;
    findings_init(&f);
    evict(g, 0, &f);
    findings_publish(g, &f);
    ordo__message_restore(&kept);
    return st;
}

/* --- Allocation --- */

static size_t round_up(size_t n, size_t to) {
    return (n + to - 1) / to * to;
}

static ordo_status_t guard_allocate(ordo_mem_resource_t *resource, const mem_request_t *request,
                                    ordo_block_t **out_block) {
    guard_resource_t *g = (guard_resource_t *)resource;
    if (g->upstream_tracks_uses) {
        (void)evict_overflow(g, ORDO_OK);
    }
    size_t front = round_up(g->config.canary_bytes, request->alignment);
    size_t rear = g->config.canary_bytes;
    if (request->bytes > ORDO_MEM_MAX_BYTES - front - rear) {
        /* The request itself is within the maximum (checked before any
         * resource sees it): the guard cannot satisfy it, which is out of
         * memory, not out of range. */
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_mem_allocate",
                           "%zu bytes (tag %u) with the guard's %zu canary bytes is more than "
                           "one allocation may ask",
                           request->bytes, request->tag, front + rear);
    }
    pthread_mutex_lock(&g->lock);
    guard_block_t *b = header_take_locked(g);
    pthread_mutex_unlock(&g->lock);
    if (!b) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_mem_allocate",
                           "cannot allocate the guard's block headers");
    }
    if (b->free_timeline) {
        (void)ordo_signal_release(b->free_timeline);
        b->free_timeline = NULL;
    }
    mem_request_t inner_request = *request;
    inner_request.bytes = front + request->bytes + rear;
    ordo_block_t *inner = NULL;
    ordo_status_t st = mem_allocate(resource->upstream, &inner_request, &inner);
    if (st != ORDO_OK) {
        pthread_mutex_lock(&g->lock);
        b->next = g->free_headers;
        g->free_headers = b;
        pthread_mutex_unlock(&g->lock);
        return st;
    }
    uint8_t *p = inner->ptr;
    memset(p, ORDO_MEM_GUARD_CANARY, front);
    memset(p + front, ORDO_MEM_GUARD_FRESH, request->bytes);
    memset(p + front + request->bytes, ORDO_MEM_GUARD_CANARY, rear);
    b->inner = inner;
    b->poisoned = false;
    b->front = front;
    b->inner_bytes = inner_request.bytes;
    atomic_store_explicit(&b->reported, 0, memory_order_relaxed);
    b->base.tag = request->tag;
    b->base.ptr = p + front;
    b->base.bytes = request->bytes;
    b->base.alignment = request->alignment;
    b->base.stream = request->stream;
    b->base.resource = resource;
    mem_hand_out(&b->base, resource);
    pthread_mutex_lock(&g->lock);
    b->serial = ++g->next_serial;
    b->state = GUARD_LIVE;
    b->prev = NULL;
    b->next = g->live;
    if (g->live) {
        g->live->prev = b;
    }
    g->live = b;
    g->live_blocks++;
    pthread_mutex_unlock(&g->lock);
    atomic_fetch_add_explicit(&g->bytes_outstanding, request->bytes, memory_order_relaxed);
    atomic_store_explicit(&b->base.magic, ORDO_BLOCK_MAGIC, memory_order_release);
    *out_block = &b->base;
    return ORDO_OK;
}

/* --- Deallocation --- */

/* The first finding's message as the error of api. */
static ordo_status_t raise_first(const findings_t *f, ordo_status_t status, const char *api) {
    return ordo__error(status, api, "guard: %s", f->count ? f->items[0].message : "(no memory)");
}

/* A block that is not one of the guard's own, refused by the guard. */
static ordo_status_t refuse_foreign(guard_resource_t *g, ordo_block_t *block, const char *api) {
    findings_t f;
    findings_init(&f);
    finding(&f, ORDO_MEM_GUARD_FOREIGN_FREE, block->tag, block->bytes, block, 0,
            "tag %u: block %p (%zu bytes) was allocated from the %s resource below the guard, "
            "not through the guard",
            block->tag, (void *)block, block->bytes, block->resource->ops->kind);
    ordo_status_t st = raise_first(&f, ORDO_ERR_INVALID_ARGUMENT, api);
    findings_publish(g, &f);
    return st;
}

/* The block's free has been met: its stream reached the free (or failed,
 * or was destroyed: then nothing of it runs any more either), and over an
 * upstream that tracks uses, every other stream's last use of it has run.
 * Check, poison, quarantine. frees_pending drops last: after it the guard
 * may be destroyed.
 *
 * A free point that failed over such an upstream stands for none of the
 * uses the freeing stream was to wait for and the guard does not see
 * (uses upstream was never told of, which the program ordered with waits
 * of its own: those waits may never have run), so the block is
 * quarantined unpoisoned: nothing writes memory another stream may still
 * use, and upstream orders its release after the uses it knows. */
static void free_met(guard_block_t *b) {
    guard_resource_t *g = b->owner;
    findings_t f;
    findings_init(&f);
    if (b->use_timepoints) {
        ordo__dealloc(b->use_timepoints, b->use_count * sizeof *b->use_timepoints, 0);
        b->use_timepoints = NULL;
    }
    check_canaries(b, &f); /* what the stream's own work overwrote */
    b->poisoned = b->free_status == ORDO_OK || !g->upstream_tracks_uses;
    if (b->poisoned) {
        memset(inner_ptr(b), ORDO_MEM_GUARD_POISON, b->inner_bytes);
    }
    size_t bytes = b->base.bytes;
    pthread_mutex_lock(&g->lock);
    b->state = GUARD_QUARANTINED;
    g->pending_blocks--;
    fifo_push(&g->quarantine, b);
    g->quarantined_bytes += b->inner_bytes;
    pthread_mutex_unlock(&g->lock);
    atomic_fetch_sub_explicit(&g->bytes_outstanding, bytes, memory_order_relaxed);
    if (!g->upstream_tracks_uses) {
        evict(g, 0, &f); /* a settled free, on any thread */
    }
    findings_publish(g, &f);
    ordo__mem_frees_done(&g->frees_pending);
}

/* One part of b's free met: the last one (acquiring the others' writes,
 * free_status among them) goes on to free_met. */
static void free_part_met(guard_block_t *b) {
    if (atomic_fetch_sub_explicit(&b->parts_pending, 1, memory_order_acq_rel) == 1) {
        free_met(b);
    }
}

static void free_point_reached(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)timepoint;
    guard_block_t *b = ctx;
    b->free_status = status;
    free_part_met(b);
}

/* A stream's last use of the block has run (or that stream failed, or was
 * destroyed: none of it runs any more). */
static void use_met(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status, (void)timepoint;
    free_part_met(ctx);
}

/* Over an upstream that tracks uses: the block's uses, on every stream,
 * that may still run (recorded points of the upstream tracker's
 * timelines), and a timepoint for each. The free's stream is not made to
 * wait for them (a wait could close a cycle the program's own waits make):
 * the guard waits on the host instead. *out_buffer: the block's tracked
 * buffer (NULL when upstream keeps none). A refusal (no memory, a record
 * a healthy stream refused) refuses the free. */
static ordo_status_t uses_to_meet(ordo_mem_resource_t *resource, guard_block_t *b,
                                  buffer_use_t *uses, uint32_t *out_count,
                                  ordo_buffer_t **out_buffer) {
    *out_count = 0;
    ordo_buffer_t *buffer = ordo__mem_forward_block_buffer(resource, b->inner);
    *out_buffer = buffer;
    if (!buffer) {
        return ORDO_OK;
    }
    ordo_rlock_lock(&buffer->tracker->lock);
    ordo_status_t st = ordo__buffer_uses_running(buffer, uses, out_count, "ordo_mem_deallocate");
    ordo_rlock_unlock(&buffer->tracker->lock);
    if (st == ORDO_OK && *out_count) {
        b->use_timepoints = ordo__alloc(*out_count * sizeof *b->use_timepoints, 0);
        if (!b->use_timepoints) {
            st = ordo__error(ORDO_ERR_OUT_OF_MEMORY, "ordo_mem_deallocate",
                             "cannot allocate the guard's wait for the block's uses");
        }
    }
    b->use_count = st == ORDO_OK ? *out_count : 0;
    return st;
}

/* A free while the tracker below records: it goes upstream now, past the
 * quarantine, for the recording to take (a pool makes a block allocated in
 * it the graph's; it refuses any other, failing the recording, and the
 * block stays the caller's). A block the graph takes is the graph's
 * replays' memory: the guard neither poisons nor holds it, and its header
 * retires at once. */
static ordo_status_t free_into_recording(guard_resource_t *g, guard_block_t *b,
                                         ordo_stream_t *stream, findings_t *f) {
    ordo_status_t st = mem_deallocate(g->base.upstream, b->inner, stream);
    if (!mem_freed_despite(st)) {
        atomic_store_explicit(&b->base.magic, ORDO_BLOCK_MAGIC, memory_order_release);
        findings_publish(g, f);
        return st;
    }
    size_t bytes = b->base.bytes;
    pthread_mutex_lock(&g->lock);
    live_unlink_locked(g, b);
    g->live_blocks--;
    retire_locked(g, b);
    pthread_mutex_unlock(&g->lock);
    atomic_fetch_sub_explicit(&g->bytes_outstanding, bytes, memory_order_relaxed);
    if (f->count) {
        st = raise_first(f, ORDO_ERR_CORRUPTED, "ordo_mem_deallocate");
    }
    findings_publish(g, f);
    return st;
}

/* A refusal of b's free that upstream made naming b's inner block, a
 * handle the caller never saw: told again naming the caller's. */
static ordo_status_t refusal_of_handle(ordo_status_t st, const guard_block_t *b) {
    static const char api[] = "ordo_mem_deallocate";
    char inner[32], detail[ORDO_ERROR_MESSAGE_MAX];
    snprintf(inner, sizeof inner, "%p", (void *)b->inner);
    const char *message = ordo__message_detail(ordo_error_message());
    const char *at = strstr(message, inner);
    if (!at) {
        return ordo__error(st, api, "%s", message);
    }
    snprintf(detail, sizeof detail, "%.*s%p%s", (int)(at - message), message,
             (const void *)&b->base, at + strlen(inner));
    return ordo__error(st, api, "%s", detail);
}

static ordo_status_t guard_deallocate(ordo_mem_resource_t *resource, ordo_block_t *block,
                                      ordo_stream_t *stream) {
    guard_resource_t *g = (guard_resource_t *)resource;
    if (block->resource != resource) {
        return refuse_foreign(g, block, "ordo_mem_deallocate");
    }
    guard_block_t *b = (guard_block_t *)block;
    findings_t f;
    findings_init(&f);
    uint32_t expected = ORDO_BLOCK_MAGIC;
    if (!atomic_compare_exchange_strong_explicit(&block->magic, &expected, ORDO_BLOCK_FREED,
                                                 memory_order_acq_rel, memory_order_acquire)) {
        /* Another thread freed it between validation and here. */
        finding(&f, ORDO_MEM_GUARD_DOUBLE_FREE, block->tag, block->bytes, block, b->serial,
                "tag %u: double free of a %zu-byte block (block #%" PRIu64 " %p)", block->tag,
                block->bytes, b->serial, (void *)block);
        ordo_status_t st = raise_first(&f, ORDO_ERR_INVALID_HANDLE, "ordo_mem_deallocate");
        findings_publish(g, &f);
        return st;
    }
    /* The block is this call's now. Refused here rather than after the
     * quarantine (a graph bound to it: its replays use the memory the
     * quarantine would poison, and the release would be refused). */
    ordo_status_t refused = mem_free_check(resource->upstream, b->inner);
    if (refused != ORDO_OK) {
        refused = refusal_of_handle(refused, b);
    }
    ordo_signal_t *timeline = NULL;
    bool recording = mem_records(resource->upstream);
    if (refused == ORDO_OK && stream && !recording) {
        refused = ordo__mem_free_timeline_create(&timeline, "ordo_mem_deallocate");
    }
    buffer_use_t uses[ORDO_TRACKER_MAX_STREAMS];
    uint32_t use_count = 0;
    ordo_buffer_t *buffer = NULL;
    if (refused == ORDO_OK && timeline && g->upstream_tracks_uses) {
        refused = uses_to_meet(resource, b, uses, &use_count, &buffer);
    }
    if (refused != ORDO_OK) {
        if (timeline) {
            (void)ordo_signal_release(timeline);
        }
        atomic_store_explicit(&block->magic, ORDO_BLOCK_MAGIC, memory_order_release);
        return refused;
    }
    check_canaries(b, &f); /* what the host overwrote so far */
    if (recording) {
        return free_into_recording(g, b, stream, &f);
    }
    pthread_mutex_lock(&g->lock);
    live_unlink_locked(g, b);
    b->state = GUARD_PENDING;
    g->live_blocks--;
    g->pending_blocks++;
    pthread_mutex_unlock(&g->lock);
    ordo_status_t st =
        f.count ? raise_first(&f, ORDO_ERR_CORRUPTED, "ordo_mem_deallocate") : ORDO_OK;
    findings_publish(g, &f);
    atomic_fetch_add_explicit(&g->frees_pending, 1, memory_order_relaxed);
    /* The free point, each use, and this call's own part: b is not
     * quarantined (nor reused by other threads) before this call lets go. */
    b->free_status = ORDO_OK;
    atomic_store_explicit(&b->parts_pending, 2 + use_count, memory_order_relaxed);
    if (!stream) {
        free_part_met(b);
    } else {
        for (uint32_t i = 0; i < use_count; ++i) {
            b->use_timepoints[i] = (ordo_timepoint_t)ORDO_TIMEPOINT_INIT;
            /* The tracker's timelines outlive its pools, and so the guard
             * above them, whose destroy waits for this free. */
            (void)ordo_timepoint_arm(&b->use_timepoints[i],
                                     ordo__buffer_use_timeline(buffer, uses[i].stream),
                                     uses[i].point, use_met, b);
        }
        b->free_timeline = timeline;
        b->free_timepoint = (ordo_timepoint_t)ORDO_TIMEPOINT_INIT;
        (void)ordo_timepoint_arm(&b->free_timepoint, timeline, 1, free_point_reached, b);
        /* On a failed stream the free point fails at once. */
        st = ordo__mem_free_point_enqueue(stream, timeline, st);
    }
    free_part_met(b); /* after it, b may be quarantined and reused by other threads */
    return g->upstream_tracks_uses ? evict_overflow(g, st) : st;
}

/* --- Forwarded calls --- */

static uint64_t guard_bytes_outstanding(ordo_mem_resource_t *resource) {
    guard_resource_t *g = (guard_resource_t *)resource;
    return atomic_load_explicit(&g->bytes_outstanding, memory_order_relaxed);
}

static ordo_status_t guard_reap_pending(ordo_mem_resource_t *resource, ordo_deadline_t deadline) {
    guard_resource_t *g = (guard_resource_t *)resource;
    ORDO_RETURN_IF_ERROR(ordo__mem_frees_wait(&g->frees_pending, deadline));
    if (g->upstream_tracks_uses) {
        (void)evict_overflow(g, ORDO_OK); /* then reaped below */
    }
    return ordo__mem_forward_reap_pending(resource, deadline);
}

static ordo_status_t guard_prepare_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                       ordo_stream_t *stream, ordo_access_mode_t mode) {
    if (block->resource != resource) {
        return refuse_foreign((guard_resource_t *)resource, block, "ordo_mem_prepare_use");
    }
    return ordo__mem_forward_prepare_use(resource, ((guard_block_t *)block)->inner, stream, mode);
}

static ordo_status_t guard_finish_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                      ordo_stream_t *stream, ordo_access_mode_t mode) {
    if (block->resource != resource) {
        return refuse_foreign((guard_resource_t *)resource, block, "ordo_mem_finish_use");
    }
    return ordo__mem_forward_finish_use(resource, ((guard_block_t *)block)->inner, stream, mode);
}

static ordo_status_t guard_record_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                      ordo_stream_t *stream) {
    if (block->resource != resource) {
        return refuse_foreign((guard_resource_t *)resource, block, "ordo_mem_record_use");
    }
    return ordo__mem_forward_record_use(resource, ((guard_block_t *)block)->inner, stream);
}

/* The guard's blocks are its own: the resources below know its inner ones. */
static ordo_status_t guard_free_check(ordo_mem_resource_t *resource, const ordo_block_t *block) {
    const ordo_block_t *inner = ((const guard_block_t *)block)->inner;
    return inner ? mem_free_check(resource->upstream, inner) : ORDO_OK;
}

static ordo_buffer_t *guard_block_buffer(ordo_mem_resource_t *resource, const ordo_block_t *block) {
    (void)resource;
    const ordo_block_t *inner = ((const guard_block_t *)block)->inner;
    return inner->resource->ops->block_buffer(inner->resource, inner);
}

/* The topmost guard of top's stack reports blocks no guard of the stack
 * owns; each guard reports its own. */
static void guard_block_refused(ordo_mem_resource_t *resource, ordo_mem_resource_t *top,
                                const ordo_block_t *block, mem_refusal_t why, ordo_status_t status,
                                const char *api) {
    guard_resource_t *g = (guard_resource_t *)resource;
    findings_t f;
    findings_init(&f);
    const char *use = strcmp(api, "ordo_mem_deallocate") == 0 ? "free" : "use";
    int dead = why == MEM_REFUSED_FREED || why == MEM_REFUSED_NOT_LIVE;
    if (dead && header_is_ours(g, block)) {
        /* Our header: its memory is ours, and it says freed. */
        const guard_block_t *b = (const guard_block_t *)block;
        pthread_mutex_lock(&g->lock);
        uint32_t tag = b->base.tag;
        size_t bytes = b->base.bytes;
        uint64_t serial = b->serial;
        uint32_t where = b->state;
        pthread_mutex_unlock(&g->lock);
        const char *now = where == GUARD_PENDING       ? "its free is still pending on its stream"
                          : where == GUARD_QUARANTINED ? "it is in quarantine"
                                                       : "its memory went back upstream";
        finding(&f, ORDO_MEM_GUARD_DOUBLE_FREE, tag, bytes, block, serial,
                "tag %u: %s of a %zu-byte block after it was freed (block #%" PRIu64 " %p; %s)",
                tag, strcmp(use, "free") == 0 ? "double free" : "use", bytes, serial,
                (const void *)block, now);
    } else {
        for (ordo_mem_resource_t *r = top; r; r = r->upstream) {
            if (r->ops != &guard_ops) {
                continue;
            }
            if (r != resource && dead && header_is_ours((guard_resource_t *)r, block)) {
                return; /* that guard reports its own header */
            }
        }
        for (ordo_mem_resource_t *r = top; r != resource; r = r->upstream) {
            if (r->ops == &guard_ops) {
                return; /* a guard above reports it */
            }
        }
        if (why == MEM_REFUSED_HOLDER) {
            const ordo_mem_resource_t *holder =
                atomic_load_explicit(&block->holder, memory_order_relaxed);
            if (ordo__mem_is_below(resource, holder)) {
                finding(&f, ORDO_MEM_GUARD_FOREIGN_FREE, block->tag, block->bytes, block, 0,
                        "tag %u: block %p (%zu bytes) was allocated from the %s resource below "
                        "the guard, not through the guard",
                        block->tag, (const void *)block, block->bytes, holder->ops->kind);
            } else {
                finding(&f, ORDO_MEM_GUARD_FOREIGN_FREE, block->tag, block->bytes, block, 0,
                        "tag %u: block %p (%zu bytes) was allocated through the %s resource "
                        "above the guard: %s it there",
                        block->tag, (const void *)block, block->bytes, holder->ops->kind, use);
            }
        } else if (why == MEM_REFUSED_FOREIGN) {
            finding(&f, ORDO_MEM_GUARD_FOREIGN_FREE, block->tag, block->bytes, block, 0,
                    "tag %u: foreign %s: block %p (%zu bytes) belongs to another resource "
                    "stack (%s %p)",
                    block->tag, use, (const void *)block, block->bytes, block->resource->ops->kind,
                    (void *)block->resource);
        } else {
            finding(&f, ORDO_MEM_GUARD_FOREIGN_FREE, 0, 0, block, 0, "foreign %s: %p is %s", use,
                    (const void *)block,
                    why == MEM_REFUSED_FREED
                        ? "a freed block that is not one of this stack's guard blocks"
                        : "not a live block");
        }
    }
    (void)raise_first(&f, status, api);
    findings_publish(g, &f);
}

/* --- Destroy, check, drain --- */

static ordo_status_t guard_destroy(ordo_mem_resource_t *resource) {
    guard_resource_t *g = (guard_resource_t *)resource;
    pthread_mutex_lock(&g->lock);
    uint64_t live = g->live_blocks;
    uint64_t pending = g->pending_blocks;
    pthread_mutex_unlock(&g->lock);
    uint32_t frees = atomic_load_explicit(&g->frees_pending, memory_order_acquire);
    if (live || pending || frees) {
        return ordo__error(ORDO_ERR_BUSY, "ordo_mem_resource_destroy",
                           "the guard still has %" PRIu64 " block(s) outstanding and %" PRIu64
                           " free(s) pending (%" PRIu64 " bytes)",
                           live, pending,
                           atomic_load_explicit(&g->bytes_outstanding, memory_order_relaxed));
    }
    /* A last check of the quarantine; its findings go to the callback. */
    findings_t f;
    findings_init(&f);
    evict(g, 1, &f);
    findings_publish(g, &f);
    while (g->slabs) {
        guard_slab_t *slab = g->slabs;
        g->slabs = slab->next;
        for (size_t i = 0; i < GUARD_SLAB_BLOCKS; ++i) {
            if (slab->blocks[i].free_timeline) {
                (void)ordo_signal_release(slab->blocks[i].free_timeline);
            }
        }
        ordo__dealloc(slab, sizeof *slab, 0);
    }
    pthread_mutex_destroy(&g->lock);
    ordo__mem_resource_fini(resource);
    ordo__dealloc(g, sizeof *g, 0);
    return ORDO_OK;
}

static const mem_resource_ops_t guard_ops = {
    .kind = "guard",
    .allocate = guard_allocate,
    .deallocate = guard_deallocate,
    .free_check = guard_free_check,
    .bytes_outstanding = guard_bytes_outstanding,
    .reap_pending = guard_reap_pending,
    .supports_use_tracking = ordo__mem_forward_supports_use_tracking,
    .prepare_use = guard_prepare_use,
    .finish_use = guard_finish_use,
    .record_use = guard_record_use,
    .block_buffer = guard_block_buffer,
    .destroy = guard_destroy,
    .block_refused = guard_block_refused,
};

static ordo_status_t guard_check_handle(ordo_mem_resource_t *resource, const char *api) {
    ordo_status_t st = ordo__mem_resource_check(resource, api);
    if (st == ORDO_OK && resource->ops != &guard_ops) {
        st = ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "%p is a %s resource, not a guard",
                         (void *)resource, resource->ops->kind);
    }
    return st;
}

ordo_status_t ordo_mem_guard_check(ordo_mem_resource_t *resource,
                                   ordo_mem_guard_report_t *out_report) {
    ordo_status_t st = guard_check_handle(resource, __func__);
    if (st != ORDO_OK) {
        if (out_report) {
            memset(out_report, 0, sizeof *out_report);
        }
        return st;
    }
    guard_resource_t *g = (guard_resource_t *)resource;
    findings_t f;
    findings_init(&f);
    pthread_mutex_lock(&g->lock);
    for (guard_block_t *b = g->live; b; b = b->next) {
        check_canaries(b, &f);
    }
    for (guard_block_t *b = g->quarantine.head; b; b = b->next) {
        check_poison(b, &f);
    }
    findings_count_locked(g, &f);
    if (out_report) {
        *out_report = (ordo_mem_guard_report_t){
            .total = g->total,
            .live_blocks = g->live_blocks,
            .pending_blocks = g->pending_blocks,
            .quarantined_blocks = g->quarantine.count,
            .quarantined_bytes = g->quarantined_bytes,
        };
        memcpy(out_report->findings, g->counts, sizeof g->counts);
        snprintf(out_report->last_message, sizeof out_report->last_message, "%s", g->last_message);
    }
    pthread_mutex_unlock(&g->lock);
    st = f.count || f.dropped ? raise_first(&f, ORDO_ERR_CORRUPTED, __func__) : ORDO_OK;
    findings_report(g, &f);
    return st;
}

ordo_status_t ordo_mem_guard_drain(ordo_mem_resource_t *resource) {
    ORDO_RETURN_IF_ERROR(guard_check_handle(resource, __func__));
    guard_resource_t *g = (guard_resource_t *)resource;
    findings_t f;
    findings_init(&f);
    evict(g, 1, &f);
    ordo_status_t st =
        f.count || f.dropped ? raise_first(&f, ORDO_ERR_CORRUPTED, __func__) : ORDO_OK;
    findings_publish(g, &f);
    return st;
}

ordo_status_t ordo_mem_guard_config_default(ordo_mem_guard_config_t *out_config) {
    if (!out_config) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_config is NULL");
    }
    *out_config = (ordo_mem_guard_config_t){
        .canary_bytes = 64,
        .quarantine_blocks = 1024,
        .quarantine_bytes = (uint64_t)64 << 20,
        .retired_headers = 4096,
    };
    return ORDO_OK;
}

ordo_status_t ordo_mem_guard_create(ordo_mem_resource_t *upstream,
                                    const ordo_mem_guard_config_t *config,
                                    ordo_mem_resource_t **out_resource) {
    ordo_status_t st = ordo__mem_adaptor_create_check(upstream, out_resource, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    ordo_mem_guard_config_t defaults;
    (void)ordo_mem_guard_config_default(&defaults);
    if (!config) {
        config = &defaults;
    }
    if ((st = ordo__flags_check(config->flags, 0, __func__)) != ORDO_OK) {
        return st;
    }
    if (config->canary_bytes == 0 || config->canary_bytes > ORDO_MEM_MAX_ALIGNMENT) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__, "canary_bytes %zu is not in [1, %zu]",
                           config->canary_bytes, (size_t)ORDO_MEM_MAX_ALIGNMENT);
    }
    ordo_device_t *device = upstream->device;
    if (device->info.device_memory) {
        return ordo__error(ORDO_ERR_UNSUPPORTED, __func__,
                           "the guard reads block memory from the host, and the memory of %s is "
                           "not host-readable",
                           device->info.name);
    }
    guard_resource_t *g = ordo__alloc(sizeof *g, 0);
    if (!g) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a guard");
    }
    g->config = *config;
    g->upstream_tracks_uses = upstream->ops->supports_use_tracking(upstream);
    pthread_mutex_init(&g->lock, NULL);
    ordo__mem_resource_init(&g->base, &guard_ops, device, upstream);
    *out_resource = &g->base;
    return ORDO_OK;
}
