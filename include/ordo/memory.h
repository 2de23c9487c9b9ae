/** @file
 * ordo/memory.h - stream-ordered memory: resources, blocks, use tracking.
 *
 * A memory resource hands out blocks on a stream and takes them back on a
 * stream. Stream-ordered means:
 * - a block allocated on stream S is usable on S at once (work enqueued on
 *   S after the allocation may touch it);
 * - a block deallocated on S is dead after the work enqueued on S before
 *   the call; the resource reuses its memory only once every recorded use
 *   of it is ordered before the reuse. No call blocks the host.
 *
 * Resources stack: a base resource (direct, pool) at the bottom, adaptors
 * (budget, statistics, logging, guard) on top, each forwarding to the one
 * below (its upstream). Use the top of a stack for every call; a block
 * must go back through the resource it was allocated through (any other
 * is refused with ORDO_ERR_INVALID_ARGUMENT).
 *
 * Use tracking. A resource that supports it (the pool) keeps each block's
 * access history in a tracker (ordo/tracker.h): prepare_use/finish_use
 * order a submission's access to the block exactly as ordo_tracker_prepare and
 * ordo_tracker_finish do, and the same history decides when the block's memory may
 * be reused. The block's buffer (ordo_block_buffer) can go straight into
 * an ordo_tracker_submit access list. record_use is for callers who only know that
 * a stream touched the block: it extends the block's lifetime to that
 * stream's current point without ordering anything. The direct resource
 * keeps no history and refuses use tracking with ORDO_ERR_UNSUPPORTED:
 * with it, ordering across streams is the caller's (as with cudaFreeAsync).
 *
 * Sizes: a request of zero bytes is refused (ORDO_ERR_INVALID_ARGUMENT);
 * alignment is zero (the default, 256 bytes) or a power of two up to
 * ORDO_MEM_MAX_ALIGNMENT; requests above ORDO_MEM_MAX_BYTES are refused
 * with ORDO_ERR_OUT_OF_RANGE. An allocation the backend cannot satisfy
 * fails with ORDO_ERR_OUT_OF_MEMORY, a request at the maximum too when a
 * resource's own overhead (a pool's rounding, a guard's canaries) would
 * take it past the maximum.
 *
 * Thread-safety: every resource may be called from any thread; each base
 * resource serialises its own state. A pool shares its tracker's lock
 * (ordo_tracker_lock): other threads that call the tracker directly while a
 * pool on it is in use must hold that lock around their calls.
 */
#ifndef ORDO_MEMORY_H
#define ORDO_MEMORY_H

#include "ordo/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ordo/buffer.h"
#include "ordo/device.h"
#include "ordo/status.h"
#include "ordo/stream.h"
#include "ordo/time.h"
#include "ordo/tracker.h"

ORDO_BEGIN_DECLS

/** The alignment of a request that names none (alignment 0). */
#define ORDO_MEM_DEFAULT_ALIGNMENT 256u
/** The largest alignment a request may name (2 MiB). */
#define ORDO_MEM_MAX_ALIGNMENT ((size_t)1 << 21)
/** The largest request (64 TiB); larger ones get ORDO_ERR_OUT_OF_RANGE. */
#define ORDO_MEM_MAX_BYTES ((size_t)1 << 46)
/** The tag of allocations that name none. Tags are caller-chosen labels
 * (statistics and reports are kept per tag). */
#define ORDO_MEM_TAG_NONE 0u
/** Tags are below this. */
#define ORDO_MEM_MAX_TAGS 64u

/** A stream-ordered memory resource: a base resource or an adaptor (opaque). */
typedef struct ordo_mem_resource ordo_mem_resource_t;
/** A block handed out by a resource (opaque; ordo_block_ptr gives its memory). */
typedef struct ordo_block ordo_block_t;

/** What ordo_block_info tells of a block. */
typedef struct ordo_block_info {
    void *ptr;                     /**< the usable memory */
    size_t bytes;                  /**< as requested */
    size_t alignment;              /**< of ptr */
    uint32_t tag;                  /**< as requested */
    ordo_stream_t *stream;         /**< the stream it was allocated on */
    ordo_mem_resource_t *resource; /**< the resource that made the block */
} ordo_block_info_t;

/** Allocates bytes on stream. out_ptr may be NULL (ordo_block_ptr gives it
 * later). On failure *out_block and *out_ptr are both NULL. On a failed
 * stream the block is handed out unless a pool must make the stream wait
 * on the device for it; then the stream's failure comes back. */
ordo_status_t ordo_mem_allocate(ordo_mem_resource_t *resource, size_t bytes, size_t alignment,
                                ordo_stream_t *stream, uint32_t tag, ordo_block_t **out_block,
                                void **out_ptr);

/** Deallocates block on stream: dead after the work enqueued on stream so
 * far. The handle ends now. Freeing a block twice, a block of another
 * resource stack, a block through another resource of its stack than the
 * one it was allocated through, or on a stream of another device is
 * refused without
 * touching anything (the guard adaptor also catches a handle reused after
 * its memory was handed out again). */
ordo_status_t ordo_mem_deallocate(ordo_mem_resource_t *resource, ordo_block_t *block,
                                  ordo_stream_t *stream);

/** Bytes handed out and not yet freed, plus bytes whose stream-ordered free
 * has not happened yet (the direct resource gives memory back to the
 * device only when the stream reaches the free). A pool counts a block out
 * at deallocate: its memory is back in the pool at once, and is handed out
 * again only once ordered after its uses. Exact after
 * ordo_mem_reap_pending. */
ordo_status_t ordo_mem_bytes_outstanding(ordo_mem_resource_t *resource, uint64_t *out_bytes);

/** Completes the frees whose stream points have been reached and waits,
 * until the deadline, for those still pending. ORDO_ERR_TIMEOUT leaves the
 * rest pending. */
ordo_status_t ordo_mem_reap_pending(ordo_mem_resource_t *resource, ordo_deadline_t deadline);

/** Non-zero in *out_supported when resource supports use tracking
 * (prepare_use, finish_use, record_use and ordo_block_buffer; see above). */
ordo_status_t ordo_mem_supports_use_tracking(ordo_mem_resource_t *resource, bool *out_supported);

/** Before enqueuing work on stream that accesses block: emits the device
 * waits the access needs. Then enqueue the work, then finish_use (with the
 * same stream; a write prepared may finish as a read). Until that finish
 * the block is held, as ordo_tracker_prepare holds a buffer
 * (ordo/tracker.h): its free, another prepare of it and its finish on
 * another stream are refused. Name the strongest access once for work
 * that both reads and writes the block. */
ordo_status_t ordo_mem_prepare_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                   ordo_stream_t *stream, ordo_access_mode_t mode);

/** After enqueuing the work prepared by ordo_mem_prepare_use: records the
 * access as the stream's next point, so that later uses and the block's
 * reuse are ordered after it. */
ordo_status_t ordo_mem_finish_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                  ordo_stream_t *stream, ordo_access_mode_t mode);

/** stream touched block in work enqueued so far: the block's memory is not
 * reused before that work completes. Orders nothing else. */
ordo_status_t ordo_mem_record_use(ordo_mem_resource_t *resource, ordo_block_t *block,
                                  ordo_stream_t *stream);

/** Destroys a resource (not its upstream). Refused with ORDO_ERR_BUSY while
 * blocks are outstanding, while frees it must still see through are pending
 * on their streams (ordo_mem_reap_pending first), while adaptors or pools
 * stand on it, and always for a layer of a device's own stack
 * (ordo_device_memory), which its device destroys. A refused destroy
 * changes nothing. */
ordo_status_t ordo_mem_resource_destroy(ordo_mem_resource_t *resource);

/** The block's pointer, size, alignment, tag, stream and resource. */
ordo_status_t ordo_block_info(const ordo_block_t *block, ordo_block_info_t *out_info);

/** The block's usable memory. */
ordo_status_t ordo_block_ptr(const ordo_block_t *block, void **out_ptr);

/** The tracked buffer of a block of a use-tracking resource, for ordo_tracker_submit
 * access lists. It belongs to the block: do not release it. */
ordo_status_t ordo_block_buffer(const ordo_block_t *block, ordo_buffer_t **out_buffer);

/** The device's default memory stack: the direct resource under the
 * adaptors its configuration chooses (ordo_device_config_t.memory for an
 * owned runtime; ORDO_MEMORY or the defaults, budget and statistics, for a
 * shared one), built on first use and torn down with the device. Use it as
 * it is, or as the upstream of a pool. Blocks still outstanding when the
 * device goes are leaked, never freed under their owner.
 *
 * The device owns every layer of the stack: ordo_mem_resource_destroy on
 * any of them (the top, or a lower one named by ordo_block_info) is
 * refused with ORDO_ERR_BUSY. An adaptor or pool a caller builds on the
 * stack is the caller's to destroy, and holds a reference on the device
 * until then, so the stack under it stays. */
ordo_status_t ordo_device_memory(ordo_device_t *device, ordo_mem_resource_t **out_resource);

/* --- Base resources --- */

/** Backend allocate and free, no pooling: every allocation is a fresh
 * backend allocation, every free returns memory to the backend once its
 * stream reaches the free. The mode to run sanitizers and memory checkers
 * against. No use tracking. */
ordo_status_t ordo_mem_direct_create(ordo_device_t *device, ordo_mem_resource_t **out_resource);

/** What a pool does when a free block could be reused on the allocating
 * stream only after uses the stream has not yet waited for. */
typedef enum ordo_mem_reuse_policy {
    /** Emit a device wait on the allocating stream for those uses (no host
     * block) and reuse the block. */
    ORDO_MEM_REUSE_WAIT = 0,
    /** Leave the block for later and take another (growing if needed). */
    ORDO_MEM_REUSE_OTHER_BLOCK = 1,
} ordo_mem_reuse_policy_t;

/** The policy of a pool (ordo_mem_pool_config_default gives the defaults). */
typedef struct ordo_mem_pool_config {
    /** What to do with a free block not yet ordered before the allocating
     * stream. Default ORDO_MEM_REUSE_WAIT. */
    ordo_mem_reuse_policy_t reuse;
    /** Bytes the pool reserves from upstream at a time (at least the
     * request). Default 2 MiB. */
    size_t chunk_bytes;
    /** Bytes the pool may keep reserved while unused; free chunks above it
     * go back upstream when they are settled. Default: unlimited. */
    uint64_t release_threshold;
    /** Requests whose size class lies wholly at or below this many bytes
     * (with an alignment of at most ORDO_MEM_DEFAULT_ALIGNMENT) are served
     * as slots of runs: blocks of one class each, cut from the pool's
     * chunks, with no split or merge on the way in or out (a slot is its
     * class's largest size). Small blocks thus never break up the memory
     * large ones need. A run goes back to the chunks once each of its
     * slots is free (unless their frees' frontiers together name more
     * streams than a free block keeps): before the pool grows, and when
     * settling (reap, trim, destroy). 0 serves every request from the
     * chunks directly. Default and most: 64 KiB. */
    size_t slot_max_bytes;
    /** No flags are defined yet: 0 (others are refused), so later behaviour
     * can be asked for here without a new function. */
    uint32_t flags;
} ordo_mem_pool_config_t;

/** The defaults: ORDO_MEM_REUSE_WAIT, 2 MiB chunks, no release threshold,
 * slots for requests under 64 KiB. */
ordo_status_t ordo_mem_pool_config_default(ordo_mem_pool_config_t *out_config);

/** The counters of a pool (ordo_mem_pool_stats). */
typedef struct ordo_mem_pool_stats {
    uint64_t bytes_reserved;     /**< held from upstream */
    uint64_t bytes_in_use;       /**< in blocks handed out (rounded sizes) */
    uint64_t chunks;             /**< upstream allocations held */
    uint64_t reuses_same_stream; /**< free blocks reused on the stream that freed them */
    uint64_t reuses_known;       /**< another stream's free, already ordered */
    uint64_t reuses_waited;      /**< another stream's free, after a device wait */
    uint64_t blocks_skipped;     /**< passed over by the OTHER_BLOCK policy */
    uint64_t grows;              /**< upstream allocations made */
    uint64_t splits;             /**< free blocks split to fit a request */
    uint64_t merges;             /**< free neighbours merged into one block */
    uint64_t trims;              /**< chunks given back upstream */
    uint64_t runs;               /**< runs of small-block slots held */
} ordo_mem_pool_stats_t;

/** A stream-ordered pool over upstream (a direct resource, or any stack).
 * Its blocks are tracked buffers of tracker, and their reuse across
 * streams is decided from the tracker's frontiers. config may be NULL
 * (defaults). The pool keeps upstream and tracker referenced by pointer:
 * destroy the pool first. While tracker records a graph (ordo/graph.h), a
 * block allocated and freed in the recording becomes the graph's memory
 * (freed when the graph is destroyed); freeing an older block, the uses
 * and reaping are refused (ORDO_ERR_BUSY); a block a graph is bound to
 * cannot be deallocated (ORDO_ERR_BUSY). */
ordo_status_t ordo_mem_pool_create(ordo_tracker_t *tracker, ordo_mem_resource_t *upstream,
                                   const ordo_mem_pool_config_t *config,
                                   ordo_mem_resource_t **out_resource);

/** The pool's counters. pool must be a pool. */
ordo_status_t ordo_mem_pool_stats(ordo_mem_resource_t *pool, ordo_mem_pool_stats_t *out_stats);

/** Gives settled free chunks back upstream until at most keep_bytes stay
 * reserved (or no settled free chunk is left). */
ordo_status_t ordo_mem_pool_trim(ordo_mem_resource_t *pool, uint64_t keep_bytes);

ORDO_END_DECLS

#endif
