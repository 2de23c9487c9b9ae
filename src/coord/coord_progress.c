/* Coordinator progress: following completion points, finishing and
 * failing ops, running callbacks outside the lock. */
#include "coord/coord_internal.h"

/* The coordinator whose lock this thread holds, if any (see the note on
 * deferred firings in coord_internal.h). */
static _Thread_local ordo_coord_t *coord_held;

void coord_lock(ordo_coord_t *coord) {
    pthread_mutex_lock(&coord->lock);
    coord_held = coord;
}

static void wake_drainers(ordo_coord_t *coord) {
    if (coord->drainers && coord->in_flight == 0 && coord->callbacks_running == 0) {
        pthread_cond_broadcast(&coord->drained);
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
        op_try_retire(coord, slot);
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

void op_fail(ordo_coord_t *coord, uint32_t slot, ordo_status_t status, coord_work_t *work) {
    coord_op_t *op = op_at(coord, slot);
    if (op->queued) {
        ready_remove(coord, slot);
    }
    if (!op->recorded) {
        op_mark_recorded(coord, slot); /* dependents may now begin, and fail */
    }
    /* It will never begin: its dependencies no longer wait on it. */
    op_graph_remove_in_edges(&coord->graph, slot, op_dep_released, coord);
    op_finished(coord, slot, status, work);
}

static void work_arm(coord_work_t *work, coord_stream_t *cs, uint64_t target) {
    work->arm[work->arm_count] = cs;
    work->arm_target[work->arm_count++] = target;
}

void op_track_point(ordo_coord_t *coord, uint32_t slot, coord_work_t *work) {
    coord_op_t *op = op_at(coord, slot);
    coord_stream_t *cs = coord->streams[op->stream];
    op->state = OP_COMPLETED;
    op->next = COORD_NONE;
    if (cs->pending_tail != COORD_NONE) {
        op_at(coord, cs->pending_tail)->next = slot;
    } else {
        cs->pending_head = slot;
    }
    cs->pending_tail = slot;
    coord->in_flight++;
    if (!cs->armed) {
        cs->armed = 1;
        work_arm(work, cs, op->point);
    }
}

/* Finishes the stream's pending ops whose points are reached (all of them,
 * failed, once its timeline has failed) and decides whether the timepoint
 * follows the next one. */
static void stream_poll(ordo_coord_t *coord, coord_stream_t *cs, coord_work_t *work) {
    uint64_t reached = 0;
    ordo_status_t failure = ordo_signal_query(cs->timeline, &reached);
    while (cs->pending_head != COORD_NONE) {
        uint32_t slot = cs->pending_head;
        coord_op_t *op = op_at(coord, slot);
        if (op->point > reached && failure == ORDO_OK) {
            break;
        }
        cs->pending_head = op->next;
        if (cs->pending_head == COORD_NONE) {
            cs->pending_tail = COORD_NONE;
        }
        coord->in_flight--;
        op_finished(coord, slot, op->point <= reached ? ORDO_OK : failure, work);
    }
    if (cs->pending_head != COORD_NONE) {
        work_arm(work, cs, op_at(coord, cs->pending_head)->point);
    } else {
        cs->armed = 0;
    }
    wake_drainers(coord);
}

void coord_stream_fired(void *ctx, ordo_status_t status, ordo_timepoint_t *timepoint) {
    (void)status; /* the timeline itself says how far it got */
    (void)timepoint;
    coord_stream_t *cs = ctx;
    ordo_coord_t *coord = cs->coord;
    if (coord_held == coord) {
        coord->deferred |= (uint64_t)1 << cs->index;
        return;
    }
    coord_work_t work;
    work_init(&work);
    coord_lock(coord);
    stream_poll(coord, cs, &work);
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

void coord_unlock(ordo_coord_t *coord, coord_work_t *work) {
    for (;;) {
        while (coord->deferred) {
            uint32_t s = (uint32_t)__builtin_ctzll(coord->deferred);
            coord->deferred &= coord->deferred - 1;
            stream_poll(coord, coord->streams[s], work);
        }
        coord_held = NULL;
        pthread_mutex_unlock(&coord->lock);
        /* Arming may fire at once on this thread (the point was reached
         * meanwhile): coord_stream_fired then takes the lock itself. */
        for (uint32_t i = 0; i < work->arm_count; ++i) {
            coord_stream_t *cs = work->arm[i];
            (void)ordo_timepoint_arm(&cs->timepoint, cs->timeline, work->arm_target[i],
                                     coord_stream_fired, cs);
        }
        work->arm_count = 0;
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
            op_try_retire(coord, op->slot);
            op = next;
        }
        wake_drainers(coord);
    }
}
