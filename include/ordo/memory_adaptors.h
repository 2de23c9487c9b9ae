/** @file
 * ordo/memory_adaptors.h - memory resources that stand on another one.
 *
 * An adaptor is a memory resource (ordo/memory.h) built over an upstream
 * resource: a base resource or another adaptor. It forwards every call to
 * its upstream and adds one thing: a device-wide budget, statistics, a log
 * line per call, or debug checks. Adaptors stack in any order; call the top
 * of the stack, and give each block back through the resource it was
 * allocated through.
 *
 * The budget, statistics and logging adaptors hand out their upstream's
 * blocks unchanged. The guard makes blocks of its own (a larger upstream
 * block with canaries around the caller's bytes) and translates them back
 * for the calls it forwards.
 *
 * Creating an adaptor gives its upstream a dependent: the upstream refuses
 * destruction (ORDO_ERR_BUSY) until the adaptor is destroyed. An adaptor
 * refuses destruction while blocks it handed out are outstanding or their
 * stream-ordered frees are still pending (ordo_mem_reap_pending first).
 *
 * Thread-safety: every function may be called from any thread, on the
 * same adaptor at once; getters return counters that are each exact, read
 * one after another.
 */
#ifndef ORDO_MEMORY_ADAPTORS_H
#define ORDO_MEMORY_ADAPTORS_H

#include "ordo/export.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ordo/device.h"
#include "ordo/memory.h"
#include "ordo/status.h"

ORDO_BEGIN_DECLS

/** @name Budget: a limit on the bytes all budget adaptors of a device hold
 *
 * Every budget adaptor of a device charges one per-device account. An
 * allocation charges its request rounded up to a multiple of
 * max(alignment, ORDO_MEM_BUDGET_GRANULE) before it asks upstream, with an
 * atomic reserve, so the charged total never exceeds the limit, however
 * many threads allocate at once. A deallocation keeps its charge until its
 * stream reaches the free (the memory may still be in use until then): the
 * charge drops when that point is reached, or at once for a free that names
 * no stream. Over the limit, the adaptor reaps its upstream and lets the
 * frees already queued on the device's budget complete, retrying as each
 * does, for at most reap_wait_ns; then it fails with ORDO_ERR_OUT_OF_MEMORY
 * and a message naming the request (bytes, tag, stream), the limit and
 * what is held (and how much of it only waits for its streams).
 *
 * A block must come back through the adaptor it was allocated through; one
 * allocated from a resource below it, or one allocated through the adaptor
 * and freed below it, is a caller error, refused (ORDO_ERR_INVALID_ARGUMENT,
 * nothing touched; statistics, logging and guard likewise).
 *
 * Over a pool, the budget limits the bytes handed out to callers; under a
 * pool, the bytes the pool reserves from the device.
 *
 * The account lives with the device runtime: it is made on first use and
 * goes when the device's last reference does.
 * @{ */

/** No limit (the default). */
#define ORDO_MEM_BUDGET_UNLIMITED UINT64_MAX
/** Charges are rounded up to a multiple of this (or of the alignment). */
#define ORDO_MEM_BUDGET_GRANULE 256u
/** The default bound on the wait for pending frees of an over-limit call. */
#define ORDO_MEM_BUDGET_REAP_WAIT_NS 10000000ull
/** The longest reap_wait_ns a budget adaptor takes (60 s): an over-limit
 * allocation whose awaited free never comes still returns. */
#define ORDO_MEM_BUDGET_REAP_WAIT_MAX_NS 60000000000ull

/** The settings of a budget adaptor. */
typedef struct ordo_mem_budget_config {
    /** How long an allocation over the limit waits for pending frees to
     * complete before it fails (0: only frees already reached count; above
     * ORDO_MEM_BUDGET_REAP_WAIT_MAX_NS, ordo_mem_budget_create refuses it:
     * ORDO_ERR_OUT_OF_RANGE). */
    uint64_t reap_wait_ns;
    /** No flags are defined yet: 0 (others are refused), so later behaviour
     * can be asked for here without a new function. */
    uint32_t flags;
} ordo_mem_budget_config_t;

/** A snapshot of a device's budget account (ordo_mem_budget_stats). */
typedef struct ordo_mem_budget_stats {
    uint64_t limit;           /**< ORDO_MEM_BUDGET_UNLIMITED when none */
    uint64_t charged;         /**< held now, pending frees included */
    uint64_t charged_pending; /**< of which: frees not yet reached */
    uint64_t peak_charged;    /**< high-water mark of charged */
    uint64_t refused;         /**< allocations refused over the limit */
} ordo_mem_budget_stats_t;

/** The defaults: reap_wait_ns = ORDO_MEM_BUDGET_REAP_WAIT_NS. */
ordo_status_t ordo_mem_budget_config_default(ordo_mem_budget_config_t *out_config);

/** Sets the limit of device's account (ORDO_MEM_BUDGET_UNLIMITED removes
 * it). A limit below what is charged refuses new allocations until enough
 * is freed; nothing already handed out is taken back. */
ordo_status_t ordo_mem_budget_set_limit(ordo_device_t *device, uint64_t bytes);

/** The device's account. */
ordo_status_t ordo_mem_budget_stats(ordo_device_t *device, ordo_mem_budget_stats_t *out_stats);

/** Sets peak_charged of device's account to what is charged now. */
ordo_status_t ordo_mem_budget_reset_peak(ordo_device_t *device);

/** A budget adaptor over upstream, charging upstream's device. config may
 * be NULL (defaults). */
ordo_status_t ordo_mem_budget_create(ordo_mem_resource_t *upstream,
                                     const ordo_mem_budget_config_t *config,
                                     ordo_mem_resource_t **out_resource);

/** @} */

/** @name Statistics: bytes and blocks, overall and per tag
 *
 * Counts what callers hold: an allocation counts once upstream has handed
 * the block out, a deallocation stops counting when it is called (a
 * stream-ordered free still pending is no longer the caller's; see
 * ordo_mem_bytes_outstanding for those). Sizes are the requested bytes.
 * Every counter is exact under any number of threads (atomic; peaks are
 * the highest value current ever took).
 * @{ */

/** Counters of what callers hold: overall, or of one tag. */
typedef struct ordo_mem_counters {
    uint64_t current_bytes;  /**< held now */
    uint64_t peak_bytes;     /**< the most held at once (since the last reset) */
    uint64_t total_bytes;    /**< ever allocated */
    uint64_t current_blocks; /**< blocks held now */
    uint64_t peak_blocks;    /**< the most blocks held at once (since the last reset) */
    uint64_t total_blocks;   /**< blocks ever allocated */
} ordo_mem_counters_t;

/** A snapshot of a statistics adaptor (ordo_mem_statistics_get). */
typedef struct ordo_mem_statistics {
    ordo_mem_counters_t overall;                 /**< all tags together */
    ordo_mem_counters_t tags[ORDO_MEM_MAX_TAGS]; /**< by the allocation's tag */
    uint64_t failed_allocations;                 /**< refused by upstream */
} ordo_mem_statistics_t;

/** A statistics adaptor over upstream. */
ordo_status_t ordo_mem_statistics_create(ordo_mem_resource_t *upstream,
                                         ordo_mem_resource_t **out_resource);

/** A snapshot of a statistics adaptor's counters. Each counter is exact;
 * read while others allocate, they are not all of one instant. */
ordo_status_t ordo_mem_statistics_get(ordo_mem_resource_t *resource,
                                      ordo_mem_statistics_t *out_statistics);

/** Sets every peak (overall and per tag) to its current value. */
ordo_status_t ordo_mem_statistics_reset_peak(ordo_mem_resource_t *resource);

/** @} */

/** @name Logging: one line per call, enough to replay
 *
 * Every call through the adaptor (allocate, deallocate, prepare_use,
 * finish_use, record_use, reap_pending, and blocks refused by validation)
 * writes one line with a single write, so lines from many threads never
 * mix:
 * @code{.unparsed}
 *   ordo-mem seq=12 t_ns=81723 thread=4242 op=allocate stream=0x5581.. \
 *     bytes=100 align=256 tag=7 block=0x5581.. status=ORDO_OK
 * @endcode
 * seq numbers the calls in an order a replay may follow (a block's
 * allocation comes before its deallocation, a deallocation before the
 * allocation that reuses its handle); lines from several threads can reach
 * the file out of seq order. t_ns is CLOCK_MONOTONIC, thread the kernel
 * thread id. docs/MEMORY.md describes every field.
 * @{ */

/** The counters of a logging adaptor. */
typedef struct ordo_mem_logging_stats {
    uint64_t lines;        /**< written */
    uint64_t failed_lines; /**< the write failed (the call itself went on) */
} ordo_mem_logging_stats_t;

/** Logs to file, which stays the caller's and must outlive the adaptor.
 * Each line is written with one fwrite and flushed. */
ordo_status_t ordo_mem_logging_create(ordo_mem_resource_t *upstream, FILE *file,
                                      ordo_mem_resource_t **out_resource);

/** Logs to the file at path, created if absent and appended to (each line
 * one write(2) in append mode: whole lines even with other writers). A FIFO
 * that no process has open for reading is refused, not waited on. On a pipe
 * or socket whose reader has gone, lines fail (failed_lines) and no SIGPIPE
 * reaches the process; on a regular file past RLIMIT_FSIZE (finite when the
 * adaptor was made), likewise with no SIGXFSZ; the same for
 * ordo_mem_logging_create's file. */
ordo_status_t ordo_mem_logging_create_path(ordo_mem_resource_t *upstream, const char *path,
                                           ordo_mem_resource_t **out_resource);

/** The logging adaptor's counters. */
ordo_status_t ordo_mem_logging_stats(ordo_mem_resource_t *resource,
                                     ordo_mem_logging_stats_t *out_stats);

/** @} */

/** @name Guard: debug checks of every block
 *
 * Each block gets canaries before and after the caller's bytes (the
 * caller's pointer keeps the requested alignment), fresh bytes are filled
 * with ORDO_MEM_GUARD_FRESH, and a freed block is poisoned with
 * ORDO_MEM_GUARD_POISON once its stream reaches the free, then kept in a
 * quarantine before its memory goes back upstream. The guard finds:
 * - canary overwrites (before the start, after the end) at deallocation,
 *   at the free point and in ordo_mem_guard_check;
 * - writes to a freed block, when it leaves the quarantine and in
 *   ordo_mem_guard_check;
 * - double frees and foreign frees (a block of another stack, of a
 *   resource below the guard, or allocated through an adaptor above it):
 *   the guard keeps its block headers, so a
 *   stale handle reads a header the guard still owns; a header is reused
 *   only after at least retired_headers later frees (plus those the
 *   quarantine still holds).
 *
 * Each finding is counted, raised as the error of the call that found it
 * (ORDO_ERR_CORRUPTED for overwrites; the validation error for bad frees)
 * with a message naming the tag, the block, its size and what was found,
 * and passed to the report callback if one is set. A deallocation that
 * returns ORDO_ERR_CORRUPTED still freed the block and ended its handle
 * (freeing it again is a double free); the budget, statistics and logging
 * adaptors above a guard count it as freed and pass the status on.
 *
 * A block a graph is bound to is refused at its free (ORDO_ERR_BUSY, as a
 * pool below would), not quarantined. A block freed while a pool below
 * records a graph goes upstream at once,
 * past the quarantine, for the recording to take (ordo/graph.h: the
 * graph's replays use its memory, which the guard then neither poisons nor
 * checks); blocks leaving the quarantine meanwhile go back when the
 * recording ends.
 *
 * Over a pool (an upstream that tracks uses), a freed block is poisoned
 * only once every other stream's last recorded use of it has run as well
 * (waited for on the host: the freeing stream is not made to wait); a
 * free on a stream that fails before its point leaves the block
 * unpoisoned (docs/MEMORY.md, "Guard"). Memory leaves the quarantine
 * only in the guard's calls on the program's side: ordo_mem_allocate,
 * ordo_mem_deallocate, ordo_mem_reap_pending, ordo_mem_guard_drain and
 * the destroy, never on the stream's worker that reached a free point.
 * Giving memory back to a pool is a free ordered on the pool's tracker,
 * whose state the program's threads use without its lock when one thread
 * uses the tracker (ordo/tracker.h). The quarantine may then hold more
 * than its bounds until the guard's next such call. Over any other
 * upstream, the thread that reached the free point gives the overflow back.
 * A host task or callback that calls the guard is one more thread of the
 * program's: it and the threads that submit take ordo_tracker_lock, as for
 * any call on the tracker from several threads (ordo/tracker.h).
 *
 * The checks read the block's memory from the host: the guard refuses
 * (ORDO_ERR_UNSUPPORTED) a device whose memory the host cannot read
 * (info.device_memory), so today it runs on the CPU backend. It is a debug
 * tool: every block costs a header, two canaries and host writes of its
 * whole size.
 * @{ */

#define ORDO_MEM_GUARD_FRESH 0xcdu  /**< a new block's bytes */
#define ORDO_MEM_GUARD_CANARY 0xfdu /**< around a block */
#define ORDO_MEM_GUARD_POISON 0xddu /**< a freed block, canaries included */

/** What the guard found. */
typedef enum ordo_mem_guard_finding {
    ORDO_MEM_GUARD_OVERFLOW = 0,       /**< bytes after the end overwritten */
    ORDO_MEM_GUARD_UNDERFLOW = 1,      /**< bytes before the start overwritten */
    ORDO_MEM_GUARD_DOUBLE_FREE = 2,    /**< a freed block freed (or used) again */
    ORDO_MEM_GUARD_FOREIGN_FREE = 3,   /**< not a block of this guard */
    ORDO_MEM_GUARD_USE_AFTER_FREE = 4, /**< a freed block's memory written */
    ORDO_MEM_GUARD_FINDING_COUNT_      /**< not a finding */
} ordo_mem_guard_finding_t;

/** Guard messages are truncated to this many bytes, terminator included. */
#define ORDO_MEM_GUARD_MESSAGE_MAX 256u

/** One finding, as passed to the report callback. */
typedef struct ordo_mem_guard_detection {
    ordo_mem_guard_finding_t finding; /**< what was found */
    uint32_t tag;                     /**< the block's tag */
    size_t bytes;                     /**< the block's size (0 when unknown) */
    const ordo_block_t *block;        /**< the handle (do not dereference) */
    uint64_t serial;                  /**< the guard's allocation number (0: none) */
    const char *message;              /**< valid during the callback */
} ordo_mem_guard_detection_t;

/** Called once per finding, on the thread that found it (possibly a
 * stream's worker), never under a lock of ordo's. Must not block and must
 * not call into the same guard, nor into a pool or tracker below it (a
 * stream's worker runs beside the program's unlocked tracker calls). */
typedef void (*ordo_mem_guard_report_fn)(void *user, const ordo_mem_guard_detection_t *detection);

/** The settings of a guard (ordo_mem_guard_config_default gives the defaults). */
typedef struct ordo_mem_guard_config {
    /** Canary bytes after each block; before it, this rounded up to the
     * alignment. Default 64; at least 1. */
    size_t canary_bytes;
    /** Freed blocks kept poisoned, at most this many and this many bytes
     * (upstream bytes, canaries included). Defaults 1024 and 64 MiB. */
    size_t quarantine_blocks;
    /** The quarantine's limit in bytes (see quarantine_blocks). Default
     * 64 MiB. */
    uint64_t quarantine_bytes;
    /** Headers of blocks that left the quarantine, kept (still detecting
     * double frees) before reuse. Default 4096. */
    size_t retired_headers;
    ordo_mem_guard_report_fn report; /**< called once per finding; may be NULL */
    void *report_user;               /**< passed to report as its user */
    /** No flags are defined yet: 0 (others are refused), so later behaviour
     * can be asked for here without a new function. */
    uint32_t flags;
} ordo_mem_guard_config_t;

/** A guard's counts (ordo_mem_guard_check). */
typedef struct ordo_mem_guard_report {
    uint64_t findings[ORDO_MEM_GUARD_FINDING_COUNT_]; /**< by finding, ever */
    uint64_t total;                                   /**< findings of every kind, ever */
    uint64_t live_blocks;                             /**< handed out */
    uint64_t pending_blocks;                          /**< freed, stream point not yet reached */
    uint64_t quarantined_blocks;                      /**< freed blocks kept poisoned */
    uint64_t quarantined_bytes;                    /**< their upstream bytes, canaries included */
    char last_message[ORDO_MEM_GUARD_MESSAGE_MAX]; /**< "" when nothing found */
} ordo_mem_guard_report_t;

/** The defaults: 64 canary bytes, a quarantine of 1024 blocks and 64 MiB,
 * 4096 retired headers, no report callback. */
ordo_status_t ordo_mem_guard_config_default(ordo_mem_guard_config_t *out_config);

/** A guard over upstream; config may be NULL (defaults). */
ordo_status_t ordo_mem_guard_create(ordo_mem_resource_t *upstream,
                                    const ordo_mem_guard_config_t *config,
                                    ordo_mem_resource_t **out_resource);

/** Checks now the canaries of every live block and the poison of every
 * quarantined one, and fills *out_report (may be NULL) with the counts so
 * far. ORDO_ERR_CORRUPTED when this check found something (the message
 * names the first finding). Canaries of blocks that streams are still
 * writing are read as they are. */
ordo_status_t ordo_mem_guard_check(ordo_mem_resource_t *resource,
                                   ordo_mem_guard_report_t *out_report);

/** Checks the quarantine's poison and gives all of its memory back
 * upstream now. ORDO_ERR_CORRUPTED as ordo_mem_guard_check. */
ordo_status_t ordo_mem_guard_drain(ordo_mem_resource_t *resource);

/** @} */

ORDO_END_DECLS

#endif
