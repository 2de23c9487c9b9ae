/** @file
 * ordo/coordinator.h - operations ordered by their dependencies.
 *
 * A coordinator orders operations on the streams of one device by the
 * dependencies the caller declares between them. Register an operation
 * (its type, priority, stream, dependencies and a description); `begin`
 * makes its stream wait for the dependencies on the device (ordo_stream_wait
 * on their completion points: the host never blocks); enqueue the work;
 * `complete` records the operation's completion point (a signal of the
 * coordinator's timeline for that stream, enqueued after the work).
 * Callbacks added with ordo_coord_on_complete run once the point is
 * reached, or with the failure that prevented it.
 *
 * Two ways to drive operations:
 * - by hand: ordo_coord_begin, enqueue the work, ordo_coord_complete. begin
 *   is refused (ORDO_ERR_BUSY) while a dependency has not completed yet,
 *   since a stream must never wait on a point nobody has recorded;
 * - by dispatch: register with a launch function; the op becomes ready once
 *   every dependency has completed (its point recorded: the device orders
 *   the rest) and ordo_coord_dispatch begins, launches and completes ready
 *   ops, the highest priority first, first-ready-first within a priority.
 *   There is no dispatcher thread: the caller decides when (and on which
 *   thread) launches happen, and the host never blocks.
 *
 * Waits: a dependency on the same stream needs none (streams run in
 * order); one whose point the stream already waited for, directly or
 * through a stream it waited for (per-stream frontiers, as trackers keep),
 * needs none; several dependencies on one stream collapse into one wait on
 * the latest (a dependency listed twice counts as one more elided); a
 * dependency that has finished, or whose point its stream has reached,
 * needs none. Metrics count waits emitted and elided.
 *
 * Deadlocks: adding a dependency that would close a cycle is refused with
 * ORDO_ERR_DEADLOCK and a message naming the cycle (op ids and
 * descriptions). The check is incremental (a dynamic topological order:
 * only the region between the two ops in that order is searched), so a
 * large graph does not pay a full walk per dependency. Only ops not yet
 * begun can gain dependencies, so only they can take part in a cycle.
 * With ORDO_COORD_UNCHECKED the check is skipped (a caller building a
 * graph it knows to be acyclic, or checking it afterwards);
 * ordo_coord_detect_deadlocks then lists every cycle. Ops on a cycle never
 * become ready; nothing hangs: begin refuses them, dispatch skips them.
 *
 * Failures propagate. An op fails when its stream fails before reaching its
 * point (a host task returned an error, or the stream waited on a failed
 * point: ordo/stream.h), when its launch function fails, or when a
 * dependency failed: a dependency known to have failed when the op begins
 * fails the op at once (begin returns the status; enqueue nothing), one
 * that fails later fails the waiting stream as every failed device wait
 * does, and with it the op's point. Callbacks receive the status and the
 * metrics count the op as failed.
 *
 * Ids are never reused (a 64-bit sequence), so a stale id cannot alias a
 * newer op. An op retires, freeing its memory, once it has finished (point
 * reached, or failed) and its callbacks have run: an op that depends on it
 * keeps a copy of its completion point, not a reference to it. An op
 * without callbacks is noticed finished lazily, when the coordinator next
 * polls its stream's timeline (every 16th registration, drain, metrics,
 * destroy), so memory stays bounded by the ops in flight plus a few. A
 * retired id stays meaningful: a dependency on it is satisfied (or fails
 * the dependent, if it failed), and a callback added to it runs at once
 * with its outcome; begin and complete on it are refused (ORDO_ERR_BUSY).
 * The outcomes of the last ORDO_COORD_FAILURES_KEPT failed retired ops are
 * kept; a retired id at or below the newest forgotten failure gets
 * ORDO_ERR_NOT_FOUND. An id never handed out gets ORDO_ERR_NOT_FOUND.
 *
 * Callbacks run exactly once, on the thread that finds the op finished:
 * the stream's worker (or driver thread) reaching its point, the thread
 * whose call failed it, the thread adding a callback to an op already
 * finished, or the thread destroying the coordinator (ORDO_ERR_CANCELLED
 * for ops that never finished). Never under one of ordo's locks. A
 * callback may call the coordinator (register, begin, complete, dispatch),
 * but must not block: it may run on a stream's worker, holding back the
 * work behind it.
 *
 * Thread-safety: every function may be called from any thread at once; one
 * lock inside the coordinator serialises them (it is never held while user
 * code runs). Destroy must not race other calls. Streams used with a
 * coordinator must outlive it: a stream an op was registered on stays in
 * its table, and ordo_stream_destroy refuses it (ORDO_ERR_BUSY) until the
 * coordinator is destroyed; so does ordo_stream_pool_destroy the
 * coordinator's stream pool.
 */
#ifndef ORDO_COORDINATOR_H
#define ORDO_COORDINATOR_H

#include "ordo/export.h"

#include <stddef.h>
#include <stdint.h>

#include "ordo/device.h"
#include "ordo/status.h"
#include "ordo/stream.h"
#include "ordo/stream_pool.h"
#include "ordo/time.h"

ORDO_BEGIN_DECLS

/** The most streams one coordinator orders. */
#define ORDO_COORD_MAX_STREAMS 64u
/** The most dependencies one registration lists. */
#define ORDO_COORD_MAX_DEPS 1024u
/** Descriptions are truncated to this many bytes, terminator included. */
#define ORDO_OP_DESCRIPTION_MAX 64u
/** The most ops of one cycle an ordo_op_cycle_t stores. */
#define ORDO_OP_CYCLE_MAX 32u
/** Failed retired ops whose outcome is remembered. */
#define ORDO_COORD_FAILURES_KEPT 4096u

/* Configuration flags. */
#define ORDO_COORD_UNCHECKED 1u /**< add_dependency does not refuse cycles */

/** An operation: 1, 2, 3, ... per coordinator; 0 is never an op. */
typedef uint64_t ordo_op_id_t;

/** What an operation does. A label for the caller, except that an op
 * registered without a stream or workload takes a transfer stream of the
 * pool when it is a transfer, a compute stream otherwise. */
typedef enum ordo_op_type {
    ORDO_OP_KERNEL = 0,          /**< computation (a kernel, a host task) */
    ORDO_OP_TRANSFER = 1,        /**< a copy between memories */
    ORDO_OP_SYNCHRONIZATION = 2, /**< ordering only: a signal, a wait, an event */
    ORDO_OP_REDUCTION = 3,       /**< combines many values into one */
    ORDO_OP_BROADCAST = 4,       /**< copies one value to many places */
    ORDO_OP_ALL_REDUCE = 5,      /**< a reduction whose result every participant receives */
    ORDO_OP_BARRIER = 6,         /**< a cross-stream barrier (ordo/barrier.h) */
} ordo_op_type_t;

/** Dispatch order: critical first, cleanup last. As with stream
 * priorities (ordo_stream_create, CUDA's convention), a numerically lower
 * value is more urgent; the two scales are separate: an op's priority
 * orders dispatch, not the stream it runs on. */
typedef enum ordo_op_priority {
    ORDO_OP_PRIORITY_CRITICAL = 0, /**< dispatched before every other priority */
    ORDO_OP_PRIORITY_HIGH = 1,     /**< after critical ops */
    ORDO_OP_PRIORITY_NORMAL = 2,   /**< after high ones */
    ORDO_OP_PRIORITY_LOW = 3,      /**< after normal ones */
    ORDO_OP_PRIORITY_CLEANUP = 4,  /**< dispatched after every other priority */
} ordo_op_priority_t;

/** Orders operations on the streams of one device by their declared
 * dependencies (opaque). */
typedef struct ordo_coord ordo_coord_t;

/** Dispatch mode: enqueues the op's work on stream (host tasks on the CPU
 * backend, kernels on a GPU). Runs on the dispatching thread, outside every
 * ordo lock; a non-OK return fails the op with that status (enqueue
 * nothing then). */
typedef ordo_status_t (*ordo_op_launch_fn)(void *ctx, ordo_stream_t *stream);

/** A completion callback: op finished with status (ORDO_OK: its point was
 * reached). Must not block. */
typedef void (*ordo_op_callback_fn)(void *ctx, ordo_op_id_t op, ordo_status_t status);

/** The settings of a coordinator. */
typedef struct ordo_coord_config {
    /** Where ops registered without a stream get one (may be NULL: every
     * op then names its stream). Must outlive the coordinator (its destroy
     * is refused until then). */
    ordo_stream_pool_t *stream_pool;
    uint32_t flags; /**< 0 or ORDO_COORD_UNCHECKED */
} ordo_coord_config_t;

/** What ordo_coord_register registers. */
typedef struct ordo_op_desc {
    ordo_op_type_t type;         /**< what the op does */
    ordo_op_priority_t priority; /**< its dispatch order */
    /** The stream the op runs on; NULL: the next stream of the config's
     * pool for `workload` (ORDO_WORKLOAD_ANY: transfers on transfer
     * streams, every other type on compute streams). */
    ordo_stream_t *stream;
    ordo_workload_t workload; /**< the pool class when stream is NULL (see stream) */
    const ordo_op_id_t *deps; /**< ops this one waits for; duplicates are merged */
    size_t dep_count;         /**< 0..ORDO_COORD_MAX_DEPS */
    const char *description;  /**< copied; may be NULL */
    /** NULL: begun and completed by hand. Else dispatched by the
     * coordinator (begin/complete on it are refused). */
    ordo_op_launch_fn launch;
    void *launch_ctx; /**< passed to launch */
} ordo_op_desc_t;

/** One cycle of the graph: ops[i] waits for ops[i + 1], and the last waits
 * for ops[0]. length is the whole cycle; only the first ORDO_OP_CYCLE_MAX
 * are stored. component_size counts every op that the cycle's strongly
 * connected component holds (the ops that wait for one another). */
typedef struct ordo_op_cycle {
    size_t length;                       /**< ops on the cycle */
    size_t component_size;               /**< ops in its strongly connected component */
    ordo_op_id_t ops[ORDO_OP_CYCLE_MAX]; /**< the first ops of the cycle, in order */
} ordo_op_cycle_t;

/** The counters of a coordinator (ordo_coord_metrics). completed and
 * failed count the ops noticed finished: the call polls the timelines
 * first. */
typedef struct ordo_coord_metrics {
    uint64_t registered;        /**< ops registered */
    uint64_t completed;         /**< finished with their point reached */
    uint64_t failed;            /**< finished with a failure */
    uint64_t live;              /**< registered and not yet retired */
    uint64_t dispatched;        /**< launched by ordo_coord_dispatch */
    uint64_t deadlocks_refused; /**< dependencies refused as cycles */
    uint64_t waits_emitted;     /**< device waits enqueued */
    uint64_t waits_elided;      /**< dependencies that needed no wait */
    /** Host time spent inside register, add_dependency, begin, complete and
     * dispatch's own work (not launch functions or callbacks), in total and
     * per registered op. Sampled: each thread times one call in 32 and
     * counts it 32 times (reading the clock costs about what a call does).
     * A timed call also counts about one clock read of its own. */
    uint64_t coordination_ns;
    uint64_t coordination_ns_per_op; /**< coordination_ns / registered */
} ordo_coord_metrics_t;

/** The defaults: no stream pool, checked (flags 0). */
ordo_status_t ordo_coord_config_default(ordo_coord_config_t *out_config);

/** Creates a coordinator for device's streams. config may be NULL (the
 * defaults). */
ordo_status_t ordo_coord_create(ordo_device_t *device, const ordo_coord_config_t *config,
                                ordo_coord_t **out_coord);

/** Destroys the coordinator. Ops that never finished are dropped; their callbacks run with
 * ORDO_ERR_CANCELLED on this thread. Refused with ORDO_ERR_BUSY while an op
 * has completed but its point is not yet reached, its callbacks run, or
 * its launch function runs (ordo_coord_dispatch; so a launch function
 * cannot destroy its coordinator): ordo_coord_drain waits for those. The
 * refusal's message counts each kind apart, and only those present (ops
 * awaiting their points, of which timepoints armed or firing; callbacks
 * running; launch functions running). */
ordo_status_t ordo_coord_destroy(ordo_coord_t *coord);

/** Waits on the host until no completed op awaits its point and no callback
 * or launch function runs, or the deadline (ORDO_ERR_TIMEOUT). The one
 * call that blocks; not from a callback or a launch function (it would
 * wait for itself until the deadline). */
ordo_status_t ordo_coord_drain(ordo_coord_t *coord, ordo_deadline_t deadline);

/** Registers an op. Errors: ORDO_ERR_NOT_FOUND for an unknown dependency
 * (or a retired one whose outcome is forgotten); ORDO_ERR_INVALID_ARGUMENT
 * for a malformed desc, a stream of another device, or a NULL stream
 * without a pool; ORDO_ERR_RESOURCE_EXHAUSTED beyond
 * ORDO_COORD_MAX_STREAMS streams. Nothing is registered on error. */
ordo_status_t ordo_coord_register(ordo_coord_t *coord, const ordo_op_desc_t *desc,
                                  ordo_op_id_t *out_op);

/** Adds a dependency: op (registered, not begun) waits for dep too. ORDO_ERR_DEADLOCK if that
 * would close a cycle (unless ORDO_COORD_UNCHECKED); ORDO_ERR_NOT_FOUND for
 * an op or dep not registered (or forgotten); ORDO_ERR_INVALID_ARGUMENT for
 * op == dep (a registered op); ORDO_ERR_BUSY if op has begun. A dependency
 * present already is a successful no-op. */
ordo_status_t ordo_coord_add_dependency(ordo_coord_t *coord, ordo_op_id_t op, ordo_op_id_t dep);

/** Makes op's stream wait for op's dependencies (device-side). ORDO_ERR_BUSY
 * while a dependency has not completed, or if op began already. If a
 * dependency has failed, op fails and its status is returned. */
ordo_status_t ordo_coord_begin(ordo_coord_t *coord, ordo_op_id_t op);

/** Records op's completion point on its stream, after the work enqueued so
 * far. ORDO_ERR_BUSY if op has not begun or completed already. If the
 * stream has failed, op fails and the stream's status is returned. */
ordo_status_t ordo_coord_complete(ordo_coord_t *coord, ordo_op_id_t op);

/** Adds a completion callback: fn(ctx, op, status) once op finishes (at
 * once, on the calling thread, if it has; ordo_coord_drain waits for it and
 * ordo_coord_destroy is refused while it runs, as for any callback). */
ordo_status_t ordo_coord_on_complete(ordo_coord_t *coord, ordo_op_id_t op, ordo_op_callback_fn fn,
                                     void *ctx);

/** Launches up to max ready ops (begin, launch, complete), the highest
 * priority first; an op that becomes ready meanwhile is considered in the
 * same call. *out_launched: how many launched (ops that failed instead, at
 * begin or in their launch, are not counted but do count against max). */
ordo_status_t ordo_coord_dispatch(ordo_coord_t *coord, size_t max, size_t *out_launched);

/** The stream op runs on (chosen from the pool when registered without one). */
ordo_status_t ordo_coord_op_stream(ordo_coord_t *coord, ordo_op_id_t op,
                                   ordo_stream_t **out_stream);

/** Lists the cycles of the dependency graph: one per strongly connected
 * component of more than one op. *out_count is the total even when
 * capacity is smaller. Always none unless created with ORDO_COORD_UNCHECKED. */
ordo_status_t ordo_coord_detect_deadlocks(ordo_coord_t *coord, ordo_op_cycle_t *out_cycles,
                                          size_t capacity, size_t *out_count);

/** A snapshot of the coordinator's counters (after polling its timelines). */
ordo_status_t ordo_coord_metrics(ordo_coord_t *coord, ordo_coord_metrics_t *out_metrics);

ORDO_END_DECLS

#endif
