/* Internal: the coordinator's state, shared by coordinator.c (the API),
 * coord_ops.c (op storage, ids, retirement, ready queues) and
 * coord_progress.c (completion points, callbacks, the lock).
 *
 * One mutex (`lock`) guards everything below it in struct ordo_coord.
 * Lock order: coord->lock, then what stream submission takes (a CPU
 * stream's word, the allocator lock). Nothing else is taken under it:
 * timepoints are armed and user code (callbacks, launch functions) runs
 * only after it is released.
 *
 * One exception needs care. Completing an op on a stream that has failed
 * makes the backend fail the stream's coordinator timeline at once, on the
 * completing thread, under coord->lock; the timeline's timepoint (see
 * coord_stream_t) then fires on that thread. Its callback finds the lock
 * held by its own thread (coord_held) and leaves the stream in `deferred`
 * for the holder, who handles it before it lets the lock go. */
#ifndef ORDO_COORD_COORD_INTERNAL_H
#define ORDO_COORD_COORD_INTERNAL_H

#include <pthread.h>
#include <stdint.h>

#include "coord/id_map.h"
#include "coord/op_graph.h"
#include "ordo/coordinator.h"
#include "ordo/timepoint.h"

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

typedef struct coord_op {
    ordo_op_id_t id; /* 0: a free slot */
    uint64_t point;  /* on its stream's timeline, once completed */
    ordo_op_launch_fn launch;
    void *launch_ctx;
    coord_callback_t callbacks[COORD_INLINE_CALLBACKS];
    coord_callback_chunk_t *more_callbacks; /* in the order added */
    uint32_t callback_count;
    /* Dependencies whose completion point is not recorded yet (begin and
     * dispatch wait for none). */
    uint32_t pending_deps;
    struct coord_op *done_next; /* on a coord_work_t's done list */
    uint32_t slot;
    uint32_t next; /* its stream's pending list, or the free list */
    uint32_t ready_prev;
    uint32_t ready_next;
    ordo_status_t status;      /* once finished */
    ordo_status_t dep_failure; /* a dependency that had failed when it was added */
    uint8_t state;
    uint8_t type;
    uint8_t priority;
    uint8_t stream; /* index in coord->streams */
    uint8_t recorded;
    uint8_t queued;            /* on a ready queue */
    uint8_t callbacks_running; /* its callbacks run outside the lock */
    char description[ORDO_OP_DESCRIPTION_MAX];
} coord_op_t;

/* A completion point remembered with what its stream had waited for, so a
 * stream that waits for it learns that too. */
typedef struct coord_record {
    uint64_t point;
    uint64_t frontier[ORDO_COORD_MAX_STREAMS];
} coord_record_t;

/* A stream the coordinator orders. Its timeline is signalled to each op's
 * point when the op completes; one timepoint follows the oldest pending
 * point (ops complete in point order on a stream), so a stream with many
 * ops in flight costs one armed timepoint, and a firing retires every
 * point reached by then. `armed` is 1 while the timepoint is armed or its
 * callback is being handled; whoever sets it from 0 arms it. */
typedef struct coord_stream {
    ordo_coord_t *coord;
    ordo_stream_t *stream;
    ordo_signal_t *timeline;
    uint32_t index;
    uint64_t next_point; /* the last point handed out */
    /* frontier[s]: the highest point of stream s this stream's later work
     * is ordered after (directly or transitively). */
    uint64_t frontier[ORDO_COORD_MAX_STREAMS];
    coord_record_t records[COORD_RECORDS];
    unsigned next_record;
    uint32_t pending_head; /* completed ops awaiting their points, by point */
    uint32_t pending_tail;
    int armed;
    ordo_timepoint_t timepoint;
} coord_stream_t;

/* What a locked section leaves to do once the lock is released: timepoints
 * to arm and ops whose callbacks to run. */
typedef struct coord_work {
    coord_op_t *done_head; /* records never move: read unlocked */
    coord_op_t *done_tail;
    uint32_t arm_count;
    coord_stream_t *arm[ORDO_COORD_MAX_STREAMS];
    uint64_t arm_target[ORDO_COORD_MAX_STREAMS];
} coord_work_t;

struct ordo_coord {
    uint32_t magic;
    ordo_device_t *device;
    ordo_stream_pool_t *pool;
    uint32_t flags;
    pthread_mutex_t lock;
    pthread_cond_t drained;
    uint32_t drainers;
    /* Ops: slots in chunks; a free list; the live ids. */
    coord_op_t **chunks;
    uint32_t chunk_count;
    uint32_t chunk_cap;
    uint32_t free_slot;
    id_map_t live;
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
    op_graph_t graph; /* node = slot; edge dep -> op, for ops not yet begun */
    coord_stream_t *streams[ORDO_COORD_MAX_STREAMS];
    uint32_t stream_count;
    uint32_t last_stream;
    uint64_t deferred; /* streams whose timepoint fired under our own lock */
    uint32_t ready_head[COORD_PRIORITIES];
    uint32_t ready_tail[COORD_PRIORITIES];
    uint64_t in_flight;         /* completed ops awaiting their points */
    uint64_t callbacks_running; /* ops whose callbacks run unlocked */
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

op_lookup_t op_lookup(const ordo_coord_t *coord, ordo_op_id_t id, uint32_t *out_slot,
                      ordo_status_t *out_outcome);

/* Raises the error for a lookup that found no live op. */
ordo_status_t op_lookup_error(op_lookup_t found, ordo_op_id_t id, const char *api);

/* A free slot (taken off the free list, or from a new chunk). */
ordo_status_t op_slot_take(ordo_coord_t *coord, uint32_t *out_slot);
void op_slot_return(ordo_coord_t *coord, uint32_t slot);

/* Retires the op if it is finished, its callbacks have run and no op not
 * yet begun depends on it. */
void op_try_retire(ordo_coord_t *coord, uint32_t slot);

/* op_graph_remove_in_edges callback: a dependency lost a dependent. */
void op_dep_released(void *coord, uint32_t dep_slot);

void ready_push(ordo_coord_t *coord, uint32_t slot);
void ready_remove(ordo_coord_t *coord, uint32_t slot);
uint32_t ready_pop(ordo_coord_t *coord);

/* Records that op's point is recorded (or that it failed without one):
 * its dependents have one dependency less to wait for. */
void op_mark_recorded(ordo_coord_t *coord, uint32_t slot);

void ops_free_all(ordo_coord_t *coord);

/* ---- coord_progress.c ----------------------------------------------------- */

void coord_lock(ordo_coord_t *coord);
/* Handles deferred firings, releases the lock, then arms timepoints and
 * runs callbacks as work says (re-locking to retire ops afterwards). */
void coord_unlock(ordo_coord_t *coord, coord_work_t *work);

static inline void work_init(coord_work_t *work) {
    work->done_head = work->done_tail = NULL;
    work->arm_count = 0;
}

/* The op's point is recorded on its stream: follow it. */
void op_track_point(ordo_coord_t *coord, uint32_t slot, coord_work_t *work);

/* Fails an op that has no pending point (not begun, launching, or begun). */
void op_fail(ordo_coord_t *coord, uint32_t slot, ordo_status_t status, coord_work_t *work);

/* The timepoint callback of every coordinator stream. */
void coord_stream_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint);

#endif
