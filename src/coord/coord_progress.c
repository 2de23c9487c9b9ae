/* Coordinator progress: finding reached completion points, finishing and
 * failing ops, running callbacks outside the lock. See the notes in
 * coord_internal.h. */
#include <limits.h>

#include "base/alloc.h"
#include "base/futex.h"
#include "coord/coord_internal.h"

_Thread_local ordo_coord_t *ordo__coord_held __attribute__((tls_model("initial-exec")));

/* The lock's contended paths (its fast paths are in coord_internal.h). */
void ordo__coord_lock_slow(ordo_coord_t *coord) {
    for (int spin = 0; spin < 100; ++spin) {
        ordo__cpu_relax();
        uint32_t free_word = 0;
        if (atomic_load_explicit(&coord->lock_word, memory_order_relaxed) == 0 &&
            atomic_compare_exchange_weak_explicit(&coord->lock_word, &free_word, 1,
                                                  memory_order_acquire, memory_order_relaxed)) {
            return;
        }
    }
    while (atomic_exchange_explicit(&coord->lock_word, 2, memory_order_acquire) != 0) {
        ordo__futex_wait(&coord->lock_word, 2, ORDO_DEADLINE_NEVER);
    }
}

void ordo__coord_wake_one(ordo_coord_t *coord) {
    ordo__futex_wake(&coord->lock_word, 1); /* touches the address only */
}

void ordo__coord_wake_drainers(ordo_coord_t *coord) {
    if (coord->drainers) {
        atomic_fetch_add_explicit(&coord->drain_seq, 1, memory_order_release);
        ordo__futex_wake(&coord->drain_seq, INT_MAX);
    }
}

/* The op has finished: its callbacks run once the lock is released;
 * without callbacks it may retire at once. */
static void op_finished(ordo_coord_t *coord, uint32_t slot, ordo_status_t status,
                        coord_work_t *work) {
    coord_op_t *op = op_at(coord, slot);
    op->state = OP_FINISHED;
    op->status = status;
    if (status == ORDO_OK) {
        coord->completed++;
    } else {
        coord->failed++;
    }
    if (op->callback_count == 0) {
        ordo__op_try_retire(coord, slot);
        return;
    }
    op->callbacks_running = 1;
    coord->callbacks_running++;
    op->done_next = NULL;
    if (work->done_tail) {
        work->done_tail->done_next = op;
    } else {
        work->done_head = op;
    }
    work->done_tail = op;
}

void ordo__op_fail(ordo_coord_t *coord, uint32_t slot, ordo_status_t status, coord_work_t *work) {
    coord_op_t *op = op_at(coord, slot);
    if (op->queued) {
        ordo__ready_remove(coord, slot);
    }
    if (!op->recorded) {
        op_mark_recorded(coord, slot, status); /* dependents may now begin, and fail */
    }
    ordo__op_graph_remove_node(&coord->graph, slot); /* it will never begin */
    op_finished(coord, slot, status, work);
}

void ordo__op_watch_point(ordo_coord_t *coord, uint32_t slot, coord_work_t *work) {
    coord_op_t *op = op_at(coord, slot);
    if (op->tp_pending) {
        return;
    }
    op->tp_pending = 1;
    coord->timepoints_pending++;
    op->arm_next = work->arm_head;
    work->arm_head = op;
}

#define PENDING_FIRST_SIZE 64u

ordo_status_t ordo__stream_pending_init(coord_stream_t *cs) {
    cs->pending = ordo__alloc(PENDING_FIRST_SIZE * sizeof *cs->pending, 0);
    if (!cs->pending) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    cs->pending_mask = PENDING_FIRST_SIZE - 1;
    cs->pending_first = cs->next_point + 1;
    return ORDO_OK;
}

void ordo__stream_pending_fini(coord_stream_t *cs) {
    ordo__dealloc(cs->pending, (cs->pending_mask + 1) * sizeof *cs->pending, 0);
    cs->pending = NULL;
}

ordo_status_t ordo__stream_pending_grow(coord_stream_t *cs) {
    uint64_t size = (uint64_t)cs->pending_mask + 1;
    if (size >= ((uint64_t)1 << 31)) {
        return ORDO_ERR_RESOURCE_EXHAUSTED;
    }
    uint32_t *ring = ordo__alloc(2 * size * sizeof *ring, 0);
    if (!ring) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    uint64_t mask = 2 * size - 1;
    for (uint64_t p = cs->pending_first; p <= cs->next_point; ++p) {
        ring[p & mask] = cs->pending[p & cs->pending_mask];
    }
    ordo__dealloc(cs->pending, size * sizeof *cs->pending, 0);
    cs->pending = ring;
    cs->pending_mask = (uint32_t)mask;
    return ORDO_OK;
}

/* Records the poll fetches ahead of the one it finishes. */
#define POLL_AHEAD 8u

/* Finishes the stream's pending ops whose points are reached (all of them,
 * failed, once its timeline has failed). Unless `all`, stops at an op
 * whose own timepoint will report it, so that its callbacks run on the
 * thread that reached its point. */
static void stream_poll(ordo_coord_t *coord, coord_stream_t *cs, int all, coord_work_t *work) {
    uint64_t reached = 0;
    ordo_status_t failure = timeline_read(cs->timeline, &reached);
    uint64_t last = failure != ORDO_OK || reached > cs->next_point ? cs->next_point : reached;
    uint64_t p = cs->pending_first;
    for (uint64_t q = p; q <= last && q < p + POLL_AHEAD; ++q) {
        __builtin_prefetch(op_at(coord, cs->pending[q & cs->pending_mask]), 1);
    }
    for (; p <= last; ++p) {
        if (p + POLL_AHEAD <= last) {
            __builtin_prefetch(op_at(coord, cs->pending[(p + POLL_AHEAD) & cs->pending_mask]), 1);
        }
        uint32_t slot = cs->pending[p & cs->pending_mask];
        if (!all && op_at(coord, slot)->tp_pending) {
            break;
        }
        cs->pending_first = p + 1;
        coord->in_flight--;
        op_finished(coord, slot, p <= reached ? ORDO_OK : failure, work);
    }
    if (cs->pending_first > cs->next_point) {
        coord->pending_mask &= ~((uint64_t)1 << cs->index);
    }
}

void ordo__coord_poll(ordo_coord_t *coord, coord_work_t *work) {
    for (uint64_t mask = coord->pending_mask; mask; mask &= mask - 1) {
        stream_poll(coord, coord->streams[__builtin_ctzll(mask)], 0, work);
    }
}

/* An op's timepoint fired: finish what its stream has reached. */
static void op_fired_locked(ordo_coord_t *coord, coord_op_t *op, coord_work_t *work) {
    op->tp_pending = 0;
    coord->timepoints_pending--;
    stream_poll(coord, coord->streams[op->stream], 1, work);
    ordo__op_try_retire(coord, op->slot); /* it may have finished already */
    ordo__coord_wake_drainers(coord);
}

static void op_point_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status; /* the timeline itself says how far it got */
    (void)timepoint;
    coord_op_t *op = ctx;
    ordo_coord_t *coord = op->coord;
    if (ordo__coord_held == coord) {
        op->deferred_next = coord->deferred;
        coord->deferred = op;
        return;
    }
    coord_work_t work;
    coord_enter(coord, &work);
    op_fired_locked(coord, op, &work);
    coord_unlock(coord, &work);
}

static void run_callbacks(const coord_op_t *op) {
    uint32_t count = op->callback_count;
    for (uint32_t i = 0; i < count && i < COORD_INLINE_CALLBACKS; ++i) {
        op->callbacks[i].fn(op->callbacks[i].ctx, op->id, op->status);
    }
    uint32_t left = count > COORD_INLINE_CALLBACKS ? count - COORD_INLINE_CALLBACKS : 0;
    for (const coord_callback_chunk_t *c = op->more_callbacks; c && left; c = c->next) {
        for (uint32_t i = 0; i < COORD_CHUNK_CALLBACKS && left; ++i, --left) {
            c->entries[i].fn(c->entries[i].ctx, op->id, op->status);
        }
    }
}

void ordo__coord_unlock_slow(ordo_coord_t *coord, coord_work_t *work) {
    for (;;) {
        while (coord->deferred) {
            coord_op_t *op = coord->deferred;
            coord->deferred = op->deferred_next;
            op_fired_locked(coord, op, work);
        }
        coord_unlock_plain(coord);
        /* Arming may fire at once on this thread (the point was reached
         * meanwhile): op_point_fired then takes the lock itself. The ops
         * are pinned by tp_pending until their firing is handled. */
        coord_op_t *arm = work->arm_head;
        work->arm_head = NULL;
        while (arm) {
            coord_op_t *next = arm->arm_next;
            (void)ordo_timepoint_arm(&arm->timepoint, coord->streams[arm->stream]->timeline,
                                     arm->point, op_point_fired, arm);
            arm = next;
        }
        if (!work->done_head) {
            return;
        }
        /* Finished ops stay allocated while callbacks_running is set, and
         * their callback lists no longer change (callbacks added now run
         * at once on the adding thread). */
        for (const coord_op_t *op = work->done_head; op; op = op->done_next) {
            run_callbacks(op);
        }
        coord_lock(coord);
        coord_op_t *op = work->done_head;
        work->done_head = work->done_tail = NULL;
        while (op) {
            coord_op_t *next = op->done_next;
            op->callbacks_running = 0;
            coord->callbacks_running--;
            ordo__op_try_retire(coord, op->slot);
            op = next;
        }
        ordo__coord_wake_drainers(coord);
    }
}
