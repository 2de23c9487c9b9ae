/* Internal: the coordinator's state, shared by coordinator.c (the API),
 * coord_ops.c (op storage, ids, retirement, ready queues) and
 * coord_progress.c (completion points, callbacks, the lock).
 *
 * One lock (`lock_word`: a compare-and-swap lock that sleeps on a futex
 * when contended) guards everything below it in struct ordo_coord. Lock
 * order: the coordinator's lock, then what stream submission takes (a CPU
 * stream's word, the allocator lock). Nothing else is taken under it:
 * timepoints are armed and user code (callbacks, launch functions) runs
 * only after it is released.
 *
 * How completions are found. A completed op's point is a value of its
 * stream's coordinator timeline, and ops complete in point order on a
 * stream, so each stream keeps its completed ops in a pending ring.
 * - Ops without callbacks are finished lazily: a locked section that polls
 *   (every COORD_POLL_EVERY-th register, drain, metrics, destroy) reads
 *   each timeline's value (an atomic load) and finishes the ops it has
 *   reached. No timepoint, and no stream worker ever takes the
 *   coordinator's lock for them: the host thread and the workers do not
 *   contend.
 * - An op with callbacks arms its own timepoint (coord_op_t's `timepoint`) at
 *   its point when it completes (or when its first callback is added after
 *   it completed). The firing thread, normally the stream's worker,
 *   takes the lock, finishes every reached op of that stream, and runs the
 *   callbacks after releasing it. A lazy poll stops at such an op, so its
 *   callbacks run where its point was reached. The op is pinned
 *   (tp_pending) from arming until its firing has been handled.
 *
 * One case needs care. Completing an op on a stream that has failed makes
 * the backend fail the stream's timeline at once, on the completing
 * thread, under the coordinator's lock; timepoints of other ops on that timeline then
 * fire on this thread. Their callback finds the lock held by its own
 * thread (ordo__coord_held) and leaves the op on `deferred` for the holder, who
 * handles it before it lets the lock go. */
#ifndef ORDO_COORD_COORD_INTERNAL_H
#define ORDO_COORD_COORD_INTERNAL_H

#include <stdatomic.h>
#include <stdint.h>

#include "coord/id_map.h"
#include "coord/op_graph.h"
#include "ordo/coordinator.h"
#include "ordo/timepoint.h"
#include "base/error.h"
#include "sync/signal_access.h"

#define ORDO_COORD_MAGIC 0x434f4f52u /* "COOR" */
#define COORD_NONE UINT32_MAX
/* Ops are stored in chunks that never move. */
#define COORD_CHUNK_SHIFT 8
#define COORD_CHUNK_OPS (1u << COORD_CHUNK_SHIFT)
/* Completion points each stream remembers with its frontier then. */
#define COORD_RECORDS 8
#define COORD_PRIORITIES 5
#define COORD_INLINE_CALLBACKS 2
#define COORD_CHUNK_CALLBACKS 6
/* Origin streams an op's needs keep inline (see coord_op_t). */
#define COORD_INLINE_NEEDS 4
/* Ids looked up without hashing (see struct ordo_coord): the table's
 * first and largest sizes. */
#define COORD_RECENT_MIN 4096u
#define COORD_RECENT_MAX ((uint32_t)1 << 22)
/* Registrations between lazy polls of the pending ops. */
#define COORD_POLL_EVERY 16

typedef enum op_state {
    OP_FREE = 0,
    OP_REGISTERED, /* dependencies may still be added */
    OP_LAUNCHING,  /* dispatch: waits emitted, launch function running */
    OP_BEGUN,      /* waits emitted; the caller enqueues the work */
    OP_COMPLETED,  /* point recorded; on its stream's pending list */
    OP_FINISHED,   /* point reached, or failed: status says which */
} op_state_t;

typedef struct coord_callback {
    ordo_op_callback_fn fn;
    void *ctx;
} coord_callback_t;

typedef struct coord_callback_chunk {
    struct coord_callback_chunk *next;
    coord_callback_t entries[COORD_CHUNK_CALLBACKS];
} coord_callback_chunk_t;

/* An op's record, laid out by use so that the common path touches few
 * cache lines: with thousands of ops in flight the records do not stay in
 * cache, and each line a call touches can cost a miss.
 * - line 0: what every step reads or writes (register, begin, complete,
 *   the lazy poll, retirement, the free list);
 * - line 1: what register and begin use (the needs, the launch);
 * - line 2: the description (written by register, read for errors);
 * - the rest: callbacks, their timepoint and lists, the ready queue: only
 *   ops with callbacks or a launch function touch them. */
typedef struct coord_op {
    /* line 0 */
    _Alignas(64) ordo_op_id_t id; /* 0: a free slot */
    uint64_t point;               /* on its stream's timeline, once completed */
    uint32_t slot;
    uint32_t next;             /* its stream's pending list, or the free list */
    ordo_status_t status;      /* once finished */
    ordo_status_t dep_failure; /* a dependency that had failed when it was added */
    /* Dependencies whose completion point is not recorded yet (begin and
     * dispatch wait for none). Each is an edge dep -> op of the graph. */
    uint32_t pending_deps;
    uint32_t callback_count; /* more_callbacks is allocated iff > COORD_INLINE_CALLBACKS */
    uint32_t dep_total;      /* dependencies listed (bounds the streams needed) */
    uint8_t state;
    uint8_t type;
    uint8_t priority;
    uint8_t stream; /* index in coord->streams */
    uint8_t recorded;
    uint8_t queued;            /* on a ready queue */
    uint8_t callbacks_running; /* its callbacks run outside the lock */
    uint8_t tp_pending;        /* its timepoint is armed (or about to be) */
    uint8_t in_recent;         /* found through coord->recent, not coord->live */
    uint8_t wide;              /* more_needs is allocated */
    /* The latest point of a dependency on its own stream (0: none): no wait,
     * but begin checks that the stream did not fail short of it. */
    uint64_t own_need;
    /* line 1. What begin waits for: per origin stream, the latest
     * completion point of a dependency there (copied when the dependency's
     * point is recorded, so a dependency never has to outlive its own
     * completion). Up to COORD_INLINE_NEEDS streams inline; an op that may
     * need more has more_needs (`wide`), indexed by stream (0: none).
     * Register sets need_count; retirement leaves line 1 alone. */
    _Alignas(64) uint64_t need_point[COORD_INLINE_NEEDS];
    uint64_t *more_needs;
    ordo_op_launch_fn launch;
    void *launch_ctx;
    uint8_t need_stream[COORD_INLINE_NEEDS];
    uint8_t need_count;
    /* line 2 */
    _Alignas(64) char description[ORDO_OP_DESCRIPTION_MAX];
    /* cold */
    _Alignas(64) coord_callback_t callbacks[COORD_INLINE_CALLBACKS];
    coord_callback_chunk_t *more_callbacks; /* in the order added */
    ordo_coord_t *coord;
    struct coord_op *done_next;     /* on a coord_work_t's done list */
    struct coord_op *arm_next;      /* on a coord_work_t's arm list */
    struct coord_op *deferred_next; /* on coord->deferred */
    uint32_t ready_prev;            /* set by ordo__ready_push */
    uint32_t ready_next;
    ordo_timepoint_t timepoint; /* armed while tp_pending, for ops with callbacks */
} coord_op_t;

/* A stream the coordinator orders. Its timeline is signalled to each op's
 * point when the op completes. */
typedef struct coord_stream {
    ordo_coord_t *coord;
    ordo_stream_t *stream;
    ordo_signal_t *timeline;
    uint32_t index;
    uint64_t next_point; /* the last point handed out */
    /* frontier[s]: the highest point of stream s this stream's later work
     * is ordered after (directly or transitively). */
    uint64_t frontier[ORDO_COORD_MAX_STREAMS];
    /* The last COORD_RECORDS completion points, each with the frontier
     * its stream had then, so a stream that waits for one learns that
     * too. The points apart, in one line, for the lookup. */
    uint64_t record_point[COORD_RECORDS];
    uint64_t record_frontier[COORD_RECORDS][ORDO_COORD_MAX_STREAMS];
    unsigned next_record;
    /* Completed ops awaiting their points: the op of point p, for
     * pending_first <= p <= next_point, is in slot pending[p &
     * pending_mask]. Every point handed out belongs to one op and ops
     * leave in point order, so the pending ones are always that range. A
     * ring rather than a list through the records: a poll knows which
     * records it will finish before touching them, and fetches them
     * together (they have usually left the cache by then). */
    uint32_t *pending;
    uint32_t pending_mask;
    uint64_t pending_first;
} coord_stream_t;

/* What a locked section leaves to do once the lock is released: timepoints
 * to arm and ops whose callbacks to run. */
typedef struct coord_work {
    coord_op_t *done_head; /* records never move: read unlocked */
    coord_op_t *done_tail;
    coord_op_t *arm_head; /* pinned by tp_pending */
} coord_work_t;

struct ordo_coord {
    uint32_t magic;
    ordo_device_t *device;
    ordo_stream_pool_t *pool;
    uint32_t flags;
    _Atomic uint32_t lock_word; /* 0 free, 1 held, 2 held with sleepers */
    _Atomic uint32_t drain_seq; /* bumped (and woken) when drainers may proceed */
    uint32_t drainers;
    /* Ops: slots in chunks; a free list; the live ids. */
    coord_op_t **chunks;
    uint32_t chunk_count;
    uint32_t chunk_cap;
    uint32_t free_slot;
    /* Live ids: recent ids map straight to their slots (recent[id &
     * recent_mask] = slot + 1, checked against the op's id; 0 once the op
     * has retired, so a non-zero entry always names a live op). An op still
     * live when a newer id takes its entry moves to `live`, unless live ops
     * fill half the table: then it doubles (up to COORD_RECENT_MAX), so a
     * long backlog of ops in flight is looked up without hashing too. */
    uint32_t *recent;
    uint32_t recent_mask;
    id_map_t live;
    uint64_t live_count;
    uint64_t issued; /* the last id handed out */
    /* Outcomes of failed retired ops (id -> status), the most recent
     * ORDO_COORD_FAILURES_KEPT, oldest evicted first; failure_horizon is
     * the highest id evicted (a retired id at or below it whose failure is
     * not kept may have failed). */
    id_map_t failures;
    uint64_t *failure_ring;
    uint32_t failure_next;
    uint32_t failure_count;
    uint64_t failure_horizon;
    /* node = slot; an edge dep -> op while dep's point is not recorded and
     * op has not begun: the only dependencies that can close a cycle.
     * Ops without such edges are not in the graph. */
    op_graph_t graph;
    coord_stream_t *streams[ORDO_COORD_MAX_STREAMS];
    uint32_t stream_count;
    uint32_t last_stream;
    uint64_t pending_mask; /* streams with completed ops awaiting their points */
    coord_op_t *deferred;  /* ops whose timepoint fired under our own lock */
    uint32_t ready_head[COORD_PRIORITIES];
    uint32_t ready_tail[COORD_PRIORITIES];
    uint64_t in_flight; /* completed ops awaiting their points */
    uint32_t registers_since_poll;
    uint64_t callbacks_running; /* ops whose callbacks run unlocked */
    /* Ops whose launch function runs (ordo_coord_dispatch, unlocked): the
     * dispatcher writes the op again after it, so drain waits for them
     * and destroy is refused. */
    uint64_t launching;
    /* Ops whose own timepoint is armed or about to be, or whose firing is
     * not handled yet: it will touch the coordinator. */
    uint64_t timepoints_pending;
    /* Metrics. */
    uint64_t registered;
    uint64_t completed;
    uint64_t failed;
    uint64_t dispatched;
    uint64_t deadlocks_refused;
    uint64_t waits_emitted;
    uint64_t waits_elided;
    uint64_t coordination_ns;
};

/* A coordinator timeline's value and failure, read without the public
 * call's checks (the coordinator owns its timelines). Acquire: what the
 * stream did before reaching the value is visible after. */
static inline ordo_status_t timeline_read(const ordo_signal_t *timeline, uint64_t *out_value) {
    signal_view_t view = ordo__signal_view(timeline);
    *out_value = view.value;
    return view.failed ? ordo__signal_failure(timeline, NULL) : ORDO_OK;
}

/* timeline_read for a wait about to be enqueued on the timeline: the
 * backend then takes a reference to the signal (a CPU stream does), a
 * write to the line that holds its state too, which the origin's worker
 * keeps writing. Reading with a read-modify-write that changes nothing
 * fetches the line for writing at once: one transfer between the cores
 * instead of a shared copy now and the exclusive one a moment later. */
static inline ordo_status_t timeline_read_for_wait(ordo_signal_t *timeline, uint64_t *out_value) {
    signal_view_t view = ordo__signal_view_latest(timeline);
    *out_value = view.value;
    return view.failed ? ordo__signal_failure(timeline, NULL) : ORDO_OK;
}

/* ---- coord_ops.c ----------------------------------------------------------- */

static inline coord_op_t *op_at(const ordo_coord_t *coord, uint32_t slot) {
    return &coord->chunks[slot >> COORD_CHUNK_SHIFT][slot & (COORD_CHUNK_OPS - 1)];
}

typedef enum op_lookup {
    LOOKUP_LIVE,      /* *out_slot */
    LOOKUP_RETIRED,   /* *out_outcome */
    LOOKUP_UNKNOWN,   /* never handed out */
    LOOKUP_FORGOTTEN, /* retired; whether it failed is no longer known */
} op_lookup_t;

op_lookup_t ordo__op_lookup_slow(const ordo_coord_t *coord, ordo_op_id_t id, uint32_t *out_slot,
                                 ordo_status_t *out_outcome);

static inline op_lookup_t op_lookup(const ordo_coord_t *coord, ordo_op_id_t id, uint32_t *out_slot,
                                    ordo_status_t *out_outcome) {
    uint32_t entry = coord->recent[id & coord->recent_mask];
    if (entry && id && op_at(coord, entry - 1)->id == id) {
        *out_slot = entry - 1;
        return LOOKUP_LIVE;
    }
    return ordo__op_lookup_slow(coord, id, out_slot, out_outcome);
}

/* Allocates the table of recent ids (at create). */
ordo_status_t ordo__op_recent_init(ordo_coord_t *coord);

/* The hot paths below are inline (they run for every op, and a call
 * costs about what they do); their rare cases are out of line. */

ordo_status_t ordo__op_id_reserve_slow(ordo_coord_t *coord);

/* Before the next id is issued: makes room for it to be published (grows
 * the recent table, or reserves an entry of coord->live for the op whose
 * entry the new id takes). */
static inline ordo_status_t op_id_reserve(ordo_coord_t *coord) {
    if (ORDO_LIKELY(!coord->recent[(coord->issued + 1) & coord->recent_mask])) {
        return ORDO_OK;
    }
    return ordo__op_id_reserve_slow(coord);
}

/* Moves the live op of a recent entry to coord->live. */
void ordo__op_id_evict(ordo_coord_t *coord, uint32_t *entry);

/* Makes id (just issued to the op in slot) findable; op_id_reserve must
 * have succeeded since the last publish. */
static inline void op_id_publish(ordo_coord_t *coord, uint32_t slot) {
    coord_op_t *op = op_at(coord, slot);
    uint32_t *entry = &coord->recent[op->id & coord->recent_mask];
    if (ORDO_UNLIKELY(*entry)) {
        ordo__op_id_evict(coord, entry);
    }
    *entry = slot + 1;
    op->in_recent = 1;
    coord->live_count++;
}

/* Raises the error for a lookup that found no live op. */
ordo_status_t ordo__op_lookup_error(op_lookup_t found, ordo_op_id_t id, const char *api);

/* Adds a chunk of free slots. */
ordo_status_t ordo__op_chunk_add(ordo_coord_t *coord);

/* A free slot (taken off the free list, or from a new chunk). */
static inline ordo_status_t op_slot_take(ordo_coord_t *coord, uint32_t *out_slot) {
    if (ORDO_UNLIKELY(coord->free_slot == COORD_NONE)) {
        ORDO_RETURN_IF_ERROR(ordo__op_chunk_add(coord));
    }
    uint32_t slot = coord->free_slot;
    coord->free_slot = op_at(coord, slot)->next;
    if (coord->free_slot != COORD_NONE) {
        /* The next registration writes the first three lines of the next
         * free record: fetch them now, while this one goes on. */
        const coord_op_t *next = op_at(coord, coord->free_slot);
        __builtin_prefetch(next, 1);
        __builtin_prefetch(next->need_point, 1);
        __builtin_prefetch(next->description, 1);
    }
    *out_slot = slot;
    return ORDO_OK;
}

void ordo__op_slot_return(ordo_coord_t *coord, uint32_t slot);

/* Retires the op if it is finished and its callbacks have run (and its
 * timepoint, if any, has been handled). */
void ordo__op_try_retire(ordo_coord_t *coord, uint32_t slot);

/* Makes sure op can take `extra` more dependencies without allocating. */
ordo_status_t ordo__op_needs_reserve(coord_op_t *op, size_t extra);

/* op waits for point `point` of stream `stream`; returns 1 when that
 * needs no wait of its own (op's own stream, or merged into a need on the
 * same stream). Room must have been reserved. */
static inline int op_need(coord_op_t *op, uint32_t stream, uint64_t point) {
    if (stream == op->stream) {
        if (op->own_need < point) {
            op->own_need = point;
        }
        return 1; /* in stream order already */
    }
    if (op->wide) {
        uint64_t *at = &op->more_needs[stream];
        int merged = *at != 0;
        *at = *at > point ? *at : point;
        return merged;
    }
    for (unsigned i = 0; i < op->need_count; ++i) {
        if (op->need_stream[i] == stream) {
            if (op->need_point[i] < point) {
                op->need_point[i] = point;
            }
            return 1;
        }
    }
    op->need_stream[op->need_count] = (uint8_t)stream;
    op->need_point[op->need_count++] = point;
    return 0;
}

void ordo__ready_push(ordo_coord_t *coord, uint32_t slot);
void ordo__ready_remove(ordo_coord_t *coord, uint32_t slot);
uint32_t ordo__ready_pop(ordo_coord_t *coord);

/* The dependents of op (in the graph) take its point or failure. */
void ordo__op_release_dependents(ordo_coord_t *coord, uint32_t slot, ordo_status_t status);

/* op's point is recorded (status ORDO_OK), or it failed without one:
 * each dependent takes the point as a need (or the failure), has one
 * dependency less pending, and op leaves the graph. */
static inline void op_mark_recorded(ordo_coord_t *coord, uint32_t slot, ordo_status_t status) {
    op_at(coord, slot)->recorded = 1;
    if (op_graph_contains(&coord->graph, slot)) {
        ordo__op_release_dependents(coord, slot, status);
    }
}

void ordo__ops_free_all(ordo_coord_t *coord);

/* ---- coord_progress.c ----------------------------------------------------- */

/* The coordinator whose lock this thread holds, if any. */
extern _Thread_local ordo_coord_t *ordo__coord_held __attribute__((tls_model("initial-exec")));

void ordo__coord_lock_slow(ordo_coord_t *coord);
void ordo__coord_wake_one(ordo_coord_t *coord);
void ordo__coord_unlock_slow(ordo_coord_t *coord, coord_work_t *work);

/* The lock (a futex mutex in the classic three-state form): one
 * compare-and-swap to take it and one exchange to release it when nobody
 * waits; a brief spin, then sleep, when somebody holds it. */
static inline void coord_lock(ordo_coord_t *coord) {
    uint32_t free_word = 0;
    if (ORDO_UNLIKELY(!atomic_compare_exchange_strong_explicit(
            &coord->lock_word, &free_word, 1, memory_order_acquire, memory_order_relaxed))) {
        ordo__coord_lock_slow(coord);
    }
    ordo__coord_held = coord;
}

/* Releases the lock only (no deferred work may be pending). */
static inline void coord_unlock_plain(ordo_coord_t *coord) {
    ordo__coord_held = NULL;
    if (ORDO_UNLIKELY(atomic_exchange_explicit(&coord->lock_word, 0, memory_order_release) == 2)) {
        ordo__coord_wake_one(coord);
    }
}

/* Handles deferred firings, releases the lock, then arms timepoints and
 * runs callbacks as work says (re-locking to retire ops afterwards). */
static inline void coord_unlock(ordo_coord_t *coord, coord_work_t *work) {
    if (ORDO_LIKELY(!coord->deferred && !work->arm_head && !work->done_head)) {
        coord_unlock_plain(coord); /* the common case */
        return;
    }
    ordo__coord_unlock_slow(coord, work);
}

/* Under the lock: wakes the threads sleeping in ordo_coord_drain, if any,
 * to look again. */
void ordo__coord_wake_drainers(ordo_coord_t *coord);

/* Nothing in flight that will call back into the coordinator. */
static inline int coord_quiet(const ordo_coord_t *coord) {
    return !coord->in_flight && !coord->callbacks_running && !coord->timepoints_pending &&
           !coord->launching;
}

static inline void work_init(coord_work_t *work) {
    work->done_head = work->done_tail = NULL;
    work->arm_head = NULL;
}

/* Takes the lock with work empty: what the call collects in work runs at
 * its coord_unlock(coord, work). */
static inline void coord_enter(ordo_coord_t *coord, coord_work_t *work) {
    work_init(work);
    coord_lock(coord);
}

/* Attaches and detaches a stream's pending ring. */
ordo_status_t ordo__stream_pending_init(coord_stream_t *cs);
void ordo__stream_pending_fini(coord_stream_t *cs);

ordo_status_t ordo__stream_pending_grow(coord_stream_t *cs);

/* Makes room on cs's pending ring for the op its next point will go to. */
static inline ordo_status_t stream_pending_reserve(coord_stream_t *cs) {
    if (ORDO_LIKELY(cs->next_point + 1 - cs->pending_first <= cs->pending_mask)) {
        return ORDO_OK;
    }
    return ordo__stream_pending_grow(cs);
}

/* Callbacks were added to a completed op: follow its point actively. */
void ordo__op_watch_point(ordo_coord_t *coord, uint32_t slot, coord_work_t *work);

/* The op's point is recorded on its stream (room reserved): follow it. */
static inline void op_track_point(ordo_coord_t *coord, uint32_t slot, coord_work_t *work) {
    coord_op_t *op = op_at(coord, slot);
    coord_stream_t *cs = coord->streams[op->stream];
    op->state = OP_COMPLETED;
    cs->pending[op->point & cs->pending_mask] = slot;
    coord->pending_mask |= (uint64_t)1 << cs->index;
    coord->in_flight++;
    if (op->callback_count) {
        ordo__op_watch_point(coord, slot, work);
    }
}

/* Fails an op that has no pending point (not begun, launching, or begun). */
void ordo__op_fail(ordo_coord_t *coord, uint32_t slot, ordo_status_t status, coord_work_t *work);

/* Finishes the ops whose points are reached on every stream with pending
 * ops, stopping at an op whose own timepoint will report it. */
void ordo__coord_poll(ordo_coord_t *coord, coord_work_t *work);

#endif
