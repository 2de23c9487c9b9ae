/* The operation coordinator's API: registration, dependencies, begin and
 * complete, callbacks, dispatch, deadlocks, metrics. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "base/futex.h"
#include "base/text.h"
#include "coord/coord_internal.h"
#include "core/stream_pool.h"
#include "hal/hal.h"

static ordo_status_t coord_check(const ordo_coord_t *coord, const char *api) {
    if (!coord || coord->magic != ORDO_COORD_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%p is not a live coordinator",
                           (const void *)coord);
    }
    return ORDO_OK;
}

/* Coordination time is sampled: each thread times one of every
 * COORD_TIMING_EVERY of its calls and counts it that many times (reading
 * the clock costs about as much as a call's own work: at one in 8 the two
 * reads added a tenth to an op's cost). Calls of the three kinds
 * interleave, and 32 is not a multiple of 3, so each kind is sampled
 * alike. */
#define COORD_TIMING_EVERY 32u

static _Thread_local uint32_t timing_turn;

static inline uint64_t timing_start(void) {
    return timing_turn++ % COORD_TIMING_EVERY == 0 ? ordo_time_now_ns() : 0;
}

/* Adds a sampled call's host time to the total (under the lock). */
static inline void account(ordo_coord_t *coord, uint64_t t0) {
    if (t0) {
        coord->coordination_ns += (ordo_time_now_ns() - t0) * COORD_TIMING_EVERY;
    }
}

/* ---- create and destroy ----------------------------------------------------------- */

/* The prologue of a public call that works under the lock: checks the
 * handle, then enters (coord_enter) on success. */
static ordo_status_t coord_open(ordo_coord_t *coord, coord_work_t *work, const char *api) {
    ordo_status_t st = coord_check(coord, api);
    if (st == ORDO_OK) {
        coord_enter(coord, work);
    }
    return st;
}

ordo_status_t ordo_coord_config_default(ordo_coord_config_t *out_config) {
    if (!out_config) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_config is NULL");
    }
    *out_config = (ordo_coord_config_t){NULL, 0};
    return ORDO_OK;
}

ordo_status_t ordo_coord_create(ordo_device_t *device, const ordo_coord_config_t *config,
                                ordo_coord_t **out_coord) {
    if (out_coord) {
        *out_coord = NULL;
    }
    ordo_status_t st = ordo__hal_device_check(device, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    if (!out_coord) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_coord is NULL");
    }
    ordo_coord_config_t cfg;
    (void)ordo_coord_config_default(&cfg);
    if (config) {
        cfg = *config;
    }
    if ((st = ordo__flags_check(cfg.flags, ORDO_COORD_UNCHECKED, __func__)) != ORDO_OK) {
        return st;
    }
    if (cfg.stream_pool) {
        size_t count = 0;
        st = ordo_stream_pool_size(cfg.stream_pool, ORDO_WORKLOAD_ANY, &count);
        if (st != ORDO_OK) {
            return ordo__error(st, __func__, "config.stream_pool is not a live stream pool");
        }
        ordo_device_t *of = ordo__stream_pool_device(cfg.stream_pool);
        if (of != device) {
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                               "config.stream_pool's streams are of %s (%s runtime %p), the "
                               "coordinator's device is %s (%s runtime %p)",
                               of->info.name, of->shared ? "shared" : "owned", (void *)of,
                               device->info.name, device->shared ? "shared" : "owned",
                               (void *)device);
        }
    }
    ordo_coord_t *coord = ordo__alloc(sizeof *coord, 64);
    if (!coord) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a coordinator");
    }
    if (ordo__op_recent_init(coord) != ORDO_OK) {
        ordo__dealloc(coord, sizeof *coord, 64);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot allocate a coordinator");
    }
    coord->device = device;
    coord->pool = cfg.stream_pool;
    coord->flags = cfg.flags;
    coord->free_slot = COORD_NONE;
    ordo__op_graph_init(&coord->graph);
    for (uint32_t p = 0; p < COORD_PRIORITIES; ++p) {
        coord->ready_head[p] = coord->ready_tail[p] = COORD_NONE;
    }
    coord->magic = ORDO_COORD_MAGIC;
    ordo_device_retain(device);
    if (coord->pool) {
        ordo__stream_pool_use(coord->pool);
    }
    *out_coord = coord;
    return ORDO_OK;
}

static void run_cancelled(const coord_op_t *op) {
    uint32_t left = op->callback_count;
    for (uint32_t i = 0; i < left && i < COORD_INLINE_CALLBACKS; ++i) {
        op->callbacks[i].fn(op->callbacks[i].ctx, op->id, ORDO_ERR_CANCELLED);
    }
    left = left > COORD_INLINE_CALLBACKS ? left - COORD_INLINE_CALLBACKS : 0;
    for (const coord_callback_chunk_t *c = op->more_callbacks; c && left; c = c->next) {
        for (uint32_t i = 0; i < COORD_CHUNK_CALLBACKS && left; ++i, --left) {
            c->entries[i].fn(c->entries[i].ctx, op->id, ORDO_ERR_CANCELLED);
        }
    }
}

/* Frees one stream's state: its timeline reference, its pending ring, the
 * record itself. */
static void stream_state_free(coord_stream_t *cs) {
    ordo__hal_stream_unuse(cs->stream, HAL_STREAM_COORDINATOR);
    (void)ordo_signal_release(cs->timeline);
    ordo__stream_pending_fini(cs);
    ordo__dealloc(cs, sizeof *cs, 64);
}

ordo_status_t ordo_coord_destroy(ordo_coord_t *coord) {
    coord_work_t work;
    ORDO_RETURN_IF_ERROR(coord_open(coord, &work, __func__));
    ordo__coord_poll(coord, &work); /* finishes only ops without callbacks */
    if (!coord_quiet(coord)) {
        /* Each kind apart, and only those present: an armed timepoint is
         * no callback running. */
        const struct {
            uint64_t count;
            const char *what;
        } busy[] = {
            {coord->in_flight, "op(s) await their completion points"},
            {coord->timepoints_pending, "op timepoint(s) are armed or firing"},
            {coord->callbacks_running, "op(s) run their callbacks"},
            {coord->launching, "launch function(s) run"},
        };
        coord_unlock(coord, &work);
        char what[256] = "";
        size_t len = 0;
        for (size_t i = 0; i < sizeof busy / sizeof *busy; ++i) {
            if (busy[i].count) {
                ordo__text_append(what, sizeof what, &len, "%s%llu %s", len ? ", " : "",
                                  (unsigned long long)busy[i].count, busy[i].what);
            }
        }
        return ordo__error(ORDO_ERR_BUSY, __func__,
                           "%s (ordo_coord_drain waits for them; a launch function cannot "
                           "destroy its coordinator)",
                           what);
    }
    coord->magic = ORDO_HAL_DEAD;
    coord_unlock(coord, &work);
    /* Ops that never finished: their callbacks learn it now, outside any
     * lock (a callback calling the coordinator gets ORDO_ERR_INVALID_HANDLE). */
    for (uint32_t c = 0; c < coord->chunk_count; ++c) {
        for (uint32_t i = 0; i < COORD_CHUNK_OPS; ++i) {
            const coord_op_t *op = &coord->chunks[c][i];
            if (op->id && op->state != OP_FINISHED) {
                run_cancelled(op);
            }
        }
    }
    ordo__ops_free_all(coord);
    for (uint32_t s = 0; s < coord->stream_count; ++s) {
        stream_state_free(coord->streams[s]);
    }
    if (coord->pool) {
        ordo__stream_pool_unuse(coord->pool);
    }
    ordo_device_t *device = coord->device;
    ordo__dealloc(coord, sizeof *coord, 64);
    return ordo_device_release(device);
}

ordo_status_t ordo_coord_drain(ordo_coord_t *coord, ordo_deadline_t deadline) {
    coord_work_t work;
    ordo_status_t st = coord_open(coord, &work, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    coord->drainers++;
    for (;;) {
        ordo__coord_poll(coord, &work);
        if (coord_quiet(coord)) {
            break;
        }
        /* A stream whose last completed op is not reached yet: wait on the
         * host for its timeline (timelines live as long as the
         * coordinator), then look again. */
        coord_stream_t *waiting = NULL;
        uint64_t target = 0;
        int polled_too_soon = 0;
        for (uint64_t mask = coord->pending_mask; mask && !waiting; mask &= mask - 1) {
            coord_stream_t *cs = coord->streams[__builtin_ctzll(mask)];
            uint64_t reached = 0;
            target = cs->next_point; /* its last completed op's */
            if (timeline_read(cs->timeline, &reached) == ORDO_OK && reached < target) {
                waiting = cs;
            } else if (!op_at(coord, cs->pending[cs->pending_first & cs->pending_mask])
                            ->tp_pending) {
                /* Reached (or failed) since the poll above, with no
                 * timepoint of its own to report it: nothing would wake
                 * us, so poll again. */
                polled_too_soon = 1;
            }
        }
        if (!waiting && polled_too_soon) {
            continue;
        }
        /* Otherwise only callbacks, or firings about to be handled, remain:
         * sleep until one of them is done. */
        uint32_t seen = atomic_load_explicit(&coord->drain_seq, memory_order_acquire);
        coord_unlock(coord, &work);
        int timed_out;
        if (waiting) {
            /* The op's failure is its own to report (its callback, its
             * point): a wait that meets it leaves the drain's caller's
             * message as it was. */
            ordo__kept_message_t kept;
            ordo__message_keep(&kept);
            timed_out = ordo_signal_wait(waiting->timeline, target, deadline) == ORDO_ERR_TIMEOUT;
            ordo__message_restore(&kept);
        } else {
            timed_out = ordo__futex_wait(&coord->drain_seq, seen, deadline) == ORDO_FUTEX_TIMED_OUT;
        }
        coord_lock(coord);
        if (timed_out) {
            ordo__coord_poll(coord, &work);
            if (!coord_quiet(coord)) {
                st = ordo__error(ORDO_ERR_TIMEOUT, __func__,
                                 "%llu op(s) still await their completion points or callbacks",
                                 (unsigned long long)coord->in_flight);
                break;
            }
        }
    }
    coord->drainers--;
    coord_unlock(coord, &work);
    return st;
}

/* ---- streams ---------------------------------------------------------------------- */

/* The coordinator's index of stream, attaching it on first use. */
static ordo_status_t stream_index(ordo_coord_t *coord, ordo_stream_t *stream, uint32_t *out_index,
                                  const char *api) {
    uint32_t last = coord->last_stream;
    if (last < coord->stream_count && coord->streams[last]->stream == stream) {
        *out_index = last;
        return ORDO_OK;
    }
    for (uint32_t i = 0; i < coord->stream_count; ++i) {
        if (coord->streams[i]->stream == stream) {
            coord->last_stream = *out_index = i;
            return ORDO_OK;
        }
    }
    if (coord->stream_count == ORDO_COORD_MAX_STREAMS) {
        return ordo__error(ORDO_ERR_RESOURCE_EXHAUSTED, api,
                           "a coordinator orders at most %u streams", ORDO_COORD_MAX_STREAMS);
    }
    coord_stream_t *cs = ordo__alloc(sizeof *cs, 64);
    if (!cs) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate stream state");
    }
    if (ordo__stream_pending_init(cs) != ORDO_OK) {
        ordo__dealloc(cs, sizeof *cs, 64);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate stream state");
    }
    if (ordo_signal_create(0, &cs->timeline) != ORDO_OK) {
        ordo__stream_pending_fini(cs);
        ordo__dealloc(cs, sizeof *cs, 64);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot create a stream timeline");
    }
    ordo__timeline_name_after(cs->timeline, "coordinator", stream);
    cs->coord = coord;
    cs->stream = stream;
    ordo__hal_stream_use(stream, HAL_STREAM_COORDINATOR);
    cs->index = coord->stream_count;
    coord->streams[coord->stream_count] = cs;
    coord->last_stream = *out_index = coord->stream_count++;
    return ORDO_OK;
}

/* Undoes stream_index's attach of the last stream: a registration refused
 * after attaching it, so that nothing refers to it yet. A refused call
 * leaves the coordinator's streams as they were. */
static void stream_detach_last(ordo_coord_t *coord) {
    coord_stream_t *cs = coord->streams[--coord->stream_count];
    coord->streams[coord->stream_count] = NULL;
    if (coord->last_stream >= coord->stream_count) {
        coord->last_stream = 0;
    }
    stream_state_free(cs);
}

static ordo_status_t check_stream(const ordo_coord_t *coord, ordo_stream_t *stream,
                                  const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, api));
    if (stream->device != coord->device) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "stream of %s used with a coordinator of %s", stream->device->info.name,
                           coord->device->info.name);
    }
    return ORDO_OK;
}

/* ---- register ----------------------------------------------------------------------- */

static ordo_status_t check_desc(const ordo_op_desc_t *desc, const char *api) {
    if (!desc) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "desc is NULL");
    }
    if ((unsigned)desc->type > (unsigned)ORDO_OP_BARRIER) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "type %d is not an op type",
                           (int)desc->type);
    }
    if ((unsigned)desc->priority > (unsigned)ORDO_OP_PRIORITY_CLEANUP) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "priority %d is not a priority",
                           (int)desc->priority);
    }
    if (desc->dep_count > ORDO_COORD_MAX_DEPS) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, api, "%zu dependencies; at most %u",
                           desc->dep_count, ORDO_COORD_MAX_DEPS);
    }
    if (desc->dep_count && !desc->deps) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "deps is NULL but dep_count is %zu",
                           desc->dep_count);
    }
    return ORDO_OK;
}

static ordo_status_t pick_stream(const ordo_coord_t *coord, const ordo_op_desc_t *desc,
                                 ordo_stream_t **out_stream, const char *api) {
    if (desc->stream) {
        *out_stream = desc->stream;
        return check_stream(coord, desc->stream, api);
    }
    if (!coord->pool) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "desc.stream is NULL and the coordinator has no stream pool");
    }
    ordo_workload_t workload = desc->workload;
    if ((unsigned)workload > (unsigned)ORDO_WORKLOAD_TRANSFER) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "workload %d is not a workload",
                           (int)workload);
    }
    if (workload == ORDO_WORKLOAD_ANY) {
        workload = desc->type == ORDO_OP_TRANSFER ? ORDO_WORKLOAD_TRANSFER : ORDO_WORKLOAD_COMPUTE;
    }
    ORDO_RETURN_IF_ERROR(ordo_stream_pool_next(coord->pool, workload, out_stream));
    return check_stream(coord, *out_stream, api);
}

/* Unrecorded dependencies whose slots register keeps for adding edges. */
#define REGISTER_KEPT 16

/* The graph part of a registration: the op waits for `unrecorded`
 * dependencies still to complete (room reserved). Their nodes go in first,
 * so the new op is ordered after them (no search, no cycle possible). */
static void register_edges(ordo_coord_t *coord, const ordo_op_desc_t *desc, uint32_t slot,
                           const uint32_t *kept, uint32_t unrecorded) {
    coord_op_t *op = op_at(coord, slot);
    for (int pass = 0; pass < 2; ++pass) {
        if (pass == 1 && !op_graph_contains(&coord->graph, slot)) {
            (void)ordo__op_graph_add_node(&coord->graph, slot);
        }
        size_t count = unrecorded <= REGISTER_KEPT ? unrecorded : desc->dep_count;
        for (size_t i = 0; i < count; ++i) {
            uint32_t dep_slot = COORD_NONE;
            if (unrecorded <= REGISTER_KEPT) {
                dep_slot = kept[i];
            } else {
                ordo_status_t outcome;
                if (op_lookup(coord, desc->deps[i], &dep_slot, &outcome) != LOOKUP_LIVE) {
                    continue;
                }
                const coord_op_t *dep = op_at(coord, dep_slot);
                if (dep->recorded || dep->state == OP_FINISHED) {
                    continue;
                }
            }
            if (pass == 0 && !op_graph_contains(&coord->graph, dep_slot)) {
                (void)ordo__op_graph_add_node(&coord->graph, dep_slot);
            } else if (pass == 1 && !ordo__op_graph_has_edge(&coord->graph, dep_slot, slot)) {
                (void)ordo__op_graph_add_edge(&coord->graph, dep_slot, slot, 0, NULL);
                op->pending_deps++;
            } else if (pass == 1) {
                coord->waits_elided++; /* listed twice: one wait serves both */
            }
        }
    }
}

ordo_status_t ordo_coord_register(ordo_coord_t *coord, const ordo_op_desc_t *desc,
                                  ordo_op_id_t *out_op) {
    if (out_op) {
        *out_op = 0;
    }
    uint64_t t0 = timing_start();
    ordo_status_t st = coord_check(coord, __func__);
    if (st == ORDO_OK) {
        st = check_desc(desc, __func__);
    }
    if (st == ORDO_OK && !out_op) {
        st = ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_op is NULL");
    }
    ordo_stream_t *stream = NULL;
    if (st == ORDO_OK) {
        st = pick_stream(coord, desc, &stream, __func__);
    }
    if (st != ORDO_OK) {
        return st;
    }
    coord_work_t work;
    coord_enter(coord, &work);
    /* Now and then, retire what has finished meanwhile: memory stays
     * bounded by what is in flight plus COORD_POLL_EVERY. Not every time:
     * reading a timeline the stream's worker has just written costs a
     * cache miss. */
    if (++coord->registers_since_poll >= COORD_POLL_EVERY) {
        coord->registers_since_poll = 0;
        ordo__coord_poll(coord, &work);
    }
    uint32_t stream_at = 0;
    uint32_t streams_before = coord->stream_count;
    st = stream_index(coord, stream, &stream_at, __func__);
    /* Memory first: a slot, room for the id, and for more needs than fit
     * inline. Dependencies that have their points (or finished) then go
     * straight into the slot, which a refusal below returns: nothing is
     * registered or counted until every dependency is known good. */
    uint32_t slot = COORD_NONE;
    if (st == ORDO_OK) {
        st = op_slot_take(coord, &slot);
        if (st == ORDO_OK) {
            st = op_id_reserve(coord); /* in the recent table or the map */
        }
        if (st == ORDO_OK) {
            coord_op_t *fresh = op_at(coord, slot);
            fresh->stream = (uint8_t)stream_at;
            fresh->need_count = 0; /* (line 1 is not reset on retirement) */
            fresh->dep_total = 0;
            if (desc->dep_count > COORD_INLINE_NEEDS) {
                st = ordo__op_needs_reserve(fresh, desc->dep_count);
            }
        }
        if (st != ORDO_OK) {
            st = ordo__error(st, __func__, "cannot store another op");
        }
    }
    coord_op_t *op = slot != COORD_NONE ? op_at(coord, slot) : NULL;
    uint64_t elided = 0;
    uint32_t kept[REGISTER_KEPT];
    uint32_t unrecorded = 0; /* dependencies that will be graph edges */
    for (size_t i = 0; st == ORDO_OK && i < desc->dep_count; ++i) {
        uint32_t dep_slot = COORD_NONE;
        ordo_status_t outcome = ORDO_OK;
        op_lookup_t found = op_lookup(coord, desc->deps[i], &dep_slot, &outcome);
        if (found == LOOKUP_UNKNOWN || found == LOOKUP_FORGOTTEN) {
            st = ordo__op_lookup_error(found, desc->deps[i], __func__);
            break;
        }
        const coord_op_t *dep = found == LOOKUP_LIVE ? op_at(coord, dep_slot) : NULL;
        if (dep && !dep->recorded && dep->state != OP_FINISHED) {
            if (unrecorded < REGISTER_KEPT) {
                kept[unrecorded] = dep_slot;
            }
            unrecorded++; /* an edge, once everything is known good */
        } else if (dep && dep->state != OP_FINISHED) {
            elided += (uint64_t)op_need(op, dep->stream, dep->point);
        } else {
            outcome = dep ? dep->status : outcome;
            if (outcome == ORDO_OK) {
                elided++; /* finished already: nothing to wait for */
            } else if (op->dep_failure == ORDO_OK) {
                op->dep_failure = outcome;
            }
        }
    }
    if (st == ORDO_OK && unrecorded) {
        st = ordo__op_graph_reserve_edges(&coord->graph, unrecorded);
        if (st == ORDO_OK) {
            st = ordo__op_graph_reserve_nodes(&coord->graph, coord->chunk_count * COORD_CHUNK_OPS,
                                              unrecorded + 1);
        }
        if (st != ORDO_OK) {
            st = ordo__error(st, __func__, "cannot store another op");
        }
    }
    if (st != ORDO_OK) {
        if (slot != COORD_NONE) {
            ordo__op_slot_return(coord, slot);
        }
        if (coord->stream_count > streams_before) {
            stream_detach_last(coord);
        }
        coord_unlock(coord, &work);
        return st;
    }
    op->id = ++coord->issued;
    op->type = (uint8_t)desc->type;
    op->priority = (uint8_t)desc->priority;
    op->state = OP_REGISTERED;
    op->launch = desc->launch;
    op->launch_ctx = desc->launch_ctx;
    op->dep_total = (uint32_t)desc->dep_count;
    const char *text = desc->description ? desc->description : "";
    size_t n = 0;
    for (; n < ORDO_OP_DESCRIPTION_MAX - 1 && text[n]; ++n) {
        op->description[n] = text[n];
    }
    op->description[n] = '\0';
    op_id_publish(coord, slot);
    coord->waits_elided += elided;
    if (unrecorded) {
        register_edges(coord, desc, slot, kept, unrecorded);
    }
    if (op->launch && op->pending_deps == 0) {
        ordo__ready_push(coord, slot);
    }
    coord->registered++;
    *out_op = op->id;
    account(coord, t0);
    coord_unlock(coord, &work);
    return ORDO_OK;
}

/* ---- dependencies -------------------------------------------------------------------- */

/* Appends the op as messages name it: "12 (upload)". */
static void describe(char *text, size_t size, size_t *used, const coord_op_t *op) {
    ordo__text_append(text, size, used, "%llu (%s)", (unsigned long long)op->id,
                      op->description[0] ? op->description : "no description");
}

/* Appends " waits for " and the op. */
static void waits_for(char *text, size_t size, size_t *used, const coord_op_t *op) {
    ordo__text_append(text, size, used, " waits for ");
    describe(text, size, used, op);
}

/* The refusal of dep -> op: path is op -> ... -> dep in graph order (each
 * comes before the next), so in "waits for" order the cycle is op, dep,
 * then the path backwards to op. */
static ordo_status_t deadlock_error(const ordo_coord_t *coord, const coord_op_t *op,
                                    const coord_op_t *dep, const op_graph_path_t *path,
                                    const char *api) {
    char text[400];
    size_t used = 0;
    describe(text, sizeof text, &used, op);
    waits_for(text, sizeof text, &used, dep);
    /* path->nodes[length - 2] down to [1]; only [0, capacity) are stored. */
    size_t last = path->length >= 2 ? path->length - 2 : 0;
    if (last >= path->capacity) {
        ordo__text_append(text, sizeof text, &used, " ... (%zu more)", last - path->capacity + 1);
        last = path->capacity - 1;
    }
    for (size_t k = last; k >= 1; --k) {
        waits_for(text, sizeof text, &used, op_at(coord, path->nodes[k]));
    }
    waits_for(text, sizeof text, &used, op);
    char who[96];
    char whom[96];
    size_t who_length = 0;
    size_t whom_length = 0;
    describe(who, sizeof who, &who_length, op);
    describe(whom, sizeof whom, &whom_length, dep);
    return ordo__error(ORDO_ERR_DEADLOCK, api,
                       "op %s cannot wait for op %s: that closes the cycle %s", who, whom, text);
}

ordo_status_t ordo_coord_add_dependency(ordo_coord_t *coord, ordo_op_id_t op_id,
                                        ordo_op_id_t dep_id) {
    uint64_t t0 = timing_start();
    coord_work_t work;
    ordo_status_t st = coord_open(coord, &work, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    uint32_t slot = COORD_NONE;
    uint32_t dep_slot = COORD_NONE;
    ordo_status_t outcome = ORDO_OK;
    op_lookup_t found = op_lookup(coord, op_id, &slot, &outcome);
    if (found != LOOKUP_LIVE) {
        st = ordo__op_lookup_error(found, op_id, __func__);
    } else if (op_id == dep_id) {
        st = ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "op %llu cannot wait for itself",
                         (unsigned long long)op_id);
    } else if (op_at(coord, slot)->state != OP_REGISTERED) {
        st = ordo__error(ORDO_ERR_BUSY, __func__, "op %llu has begun: too late to add dependencies",
                         (unsigned long long)op_id);
    } else {
        found = op_lookup(coord, dep_id, &dep_slot, &outcome);
        if (found == LOOKUP_UNKNOWN || found == LOOKUP_FORGOTTEN) {
            st = ordo__op_lookup_error(found, dep_id, __func__);
        }
    }
    if (st != ORDO_OK) {
        coord_unlock(coord, &work);
        return st;
    }
    coord_op_t *op = op_at(coord, slot);
    coord_op_t *dep = found == LOOKUP_LIVE ? op_at(coord, dep_slot) : NULL;
    int edge = dep && !dep->recorded && dep->state != OP_FINISHED;
    /* Room first: a need for the dependency's stream (taken now, or when
     * its point is recorded), and for an edge, the edge and two nodes. */
    st = ordo__op_needs_reserve(op, 1);
    if (st == ORDO_OK && edge) {
        st = ordo__op_graph_reserve_edges(&coord->graph, 1);
        if (st == ORDO_OK) {
            st = ordo__op_graph_reserve_nodes(&coord->graph, coord->chunk_count * COORD_CHUNK_OPS,
                                              2);
        }
    }
    if (st != ORDO_OK) {
        st = ordo__error(st, __func__, "cannot store another dependency");
    } else if (edge) {
        /* Only here can a cycle close: both ops are still to complete. */
        if (!op_graph_contains(&coord->graph, dep_slot)) {
            (void)ordo__op_graph_add_node(&coord->graph, dep_slot);
        }
        if (!op_graph_contains(&coord->graph, slot)) {
            (void)ordo__op_graph_add_node(&coord->graph, slot);
        }
        uint32_t nodes[ORDO_OP_CYCLE_MAX];
        op_graph_path_t path = {nodes, ORDO_OP_CYCLE_MAX, 0};
        uint32_t before = op_graph_in_degree(&coord->graph, slot);
        st = ordo__op_graph_add_edge(&coord->graph, dep_slot, slot,
                                     !(coord->flags & ORDO_COORD_UNCHECKED), &path);
        if (st == ORDO_ERR_DEADLOCK) {
            coord->deadlocks_refused++;
            st = deadlock_error(coord, op, dep, &path, __func__);
        } else if (st != ORDO_OK) {
            st = ordo__error(st, __func__, "cannot store another dependency");
        } else if (op_graph_in_degree(&coord->graph, slot) != before) {
            op->dep_total++;
            if (op->pending_deps++ == 0 && op->queued) {
                ordo__ready_remove(coord, slot); /* not ready any more */
            }
        }
    } else if (dep && dep->state != OP_FINISHED) {
        op->dep_total++;
        coord->waits_elided += (uint64_t)op_need(op, dep->stream, dep->point);
    } else {
        if (dep) {
            outcome = dep->status;
        }
        if (outcome != ORDO_OK) {
            if (op->dep_failure == ORDO_OK) {
                op->dep_failure = outcome;
            }
        } else {
            coord->waits_elided++;
        }
    }
    account(coord, t0);
    coord_unlock(coord, &work);
    return st;
}

/* ---- begin and complete ------------------------------------------------------------------ */

/* The frontier recorded with origin's point `point`, if still kept. */
static const uint64_t *record_of(const coord_stream_t *origin, uint64_t point) {
    for (unsigned i = 0; i < COORD_RECORDS; ++i) {
        if (origin->record_point[i] == point) {
            return origin->record_frontier[i];
        }
    }
    return NULL;
}

/* cs's later work is ordered after origin's point: so after everything
 * origin had waited for by then, if that is still on record. */
static void frontier_absorb(coord_stream_t *cs, const coord_stream_t *origin, uint64_t point,
                            uint32_t stream_count) {
    cs->frontier[origin->index] = point;
    const uint64_t *recorded = record_of(origin, point);
    if (recorded) {
        for (uint32_t k = 0; k < stream_count; ++k) {
            if (cs->frontier[k] < recorded[k]) {
                cs->frontier[k] = recorded[k];
            }
        }
    }
}

/* The failure of origin's point `point`, if its timeline shows one short of
 * it; ORDO_OK otherwise (reached, or not known to have failed yet). For a
 * point that needs no wait of its own: the stream's failure flag is read
 * first (a line its producers touch anyway), the timeline (which the
 * stream's worker keeps writing) only once the stream has failed. */
static ordo_status_t point_failure(const coord_stream_t *origin, uint64_t point) {
    const hal_backend_t *backend = origin->stream->device->backend;
    if (ORDO_LIKELY(backend->failure(origin->stream) == ORDO_OK)) {
        return ORDO_OK;
    }
    uint64_t reached = 0;
    ordo_status_t failure = timeline_read(origin->timeline, &reached);
    return reached >= point ? ORDO_OK : failure;
}

/* Emits op's waits. On success the op is begun; on a dependency's failure
 * (or its stream's) the op has failed and that status is returned; any
 * other error leaves it registered. */
static ordo_status_t begin_locked(ordo_coord_t *coord, uint32_t slot, coord_work_t *work,
                                  const char *api) {
    coord_op_t *op = op_at(coord, slot);
    coord_stream_t *cs = coord->streams[op->stream];
    /* ordo__op_fail may retire the op (its slot then reads id 0): name it by
     * this copy. */
    unsigned long long id = (unsigned long long)op->id;
    ordo_status_t failure = op->dep_failure;
    if (failure == ORDO_OK && op->own_need) {
        /* A dependency on this stream that the stream failed short of. */
        failure = point_failure(cs, op->own_need);
    }
    if (failure != ORDO_OK) {
        ordo__op_fail(coord, slot, failure, work);
        return ordo__error(failure, api, "op %llu: a dependency failed (%s)", id,
                           ordo_status_name(failure));
    }
    uint64_t elided = 0;
    unsigned count = op->wide ? coord->stream_count : op->need_count;
    for (unsigned i = 0; i < count; ++i) {
        uint32_t s = op->wide ? i : op->need_stream[i];
        uint64_t need = op->wide ? op->more_needs[i] : op->need_point[i];
        if (need == 0) {
            continue; /* (more_needs: no dependency on stream i) */
        }
        coord_stream_t *origin = coord->streams[s];
        if (cs->frontier[s] >= need) {
            /* Already waited for, directly or transitively; unless the
             * origin failed short of it (the stream then fails through that
             * wait, and the op with it, but the failure is known now). */
            ordo_status_t origin_failure = point_failure(origin, need);
            if (origin_failure != ORDO_OK) {
                coord->waits_elided += elided;
                ordo__op_fail(coord, slot, origin_failure, work);
                return ordo__error(origin_failure, api, "op %llu: a dependency failed (%s)", id,
                                   ordo_status_name(origin_failure));
            }
            elided++;
            continue;
        }
        /* Read only now, for a wait that is otherwise needed: the line was
         * just written by the origin's worker and costs a cache miss (read
         * for writing: the wait's reference to the timeline writes it). */
        uint64_t reached = 0;
        ordo_status_t origin_failure = timeline_read_for_wait(origin->timeline, &reached);
        if (reached >= need) {
            elided++; /* reached already (finished, just not polled yet) */
            frontier_absorb(cs, origin, need, coord->stream_count);
            continue;
        }
        if (origin_failure != ORDO_OK) {
            /* It will never be reached: fail now rather than the stream. */
            coord->waits_elided += elided;
            ordo__op_fail(coord, slot, origin_failure, work);
            return ordo__error(origin_failure, api, "op %llu: a dependency failed (%s)", id,
                               ordo_status_name(origin_failure));
        }
        /* Straight to the backend: the stream was checked when the op was
         * registered, and the timelines are the coordinator's own. */
        const hal_backend_t *backend = cs->stream->device->backend;
        ordo_status_t st = backend->wait(cs->stream, origin->timeline, need);
        if (st != ORDO_OK) {
            coord->waits_elided += elided;
            if (backend->status(cs->stream) == ORDO_OK) {
                /* Not enqueued; the waits before it stay (they only order
                 * more) and are counted, so a retry must not meet those
                 * dependencies again (as elided, through the frontier they
                 * taught): they are dropped from the op's needs. */
                for (unsigned j = 0; j < i; ++j) {
                    if (op->wide) {
                        op->more_needs[j] = 0;
                    } else {
                        op->need_point[j] = 0;
                    }
                }
                return st;
            }
            ordo__op_fail(coord, slot, st, work);
            return ordo__error(st, api, "op %llu: its stream has failed (%s)", id,
                               ordo_status_name(st));
        }
        coord->waits_emitted++;
        frontier_absorb(cs, origin, need, coord->stream_count);
    }
    coord->waits_elided += elided;
    op->state = OP_BEGUN;
    return ORDO_OK;
}

/* Records op's completion point. Returns ORDO_OK, the stream's failure (the
 * op then fails through its point), or another error with the op still
 * begun (nothing enqueued). */
static ordo_status_t complete_locked(ordo_coord_t *coord, uint32_t slot, coord_work_t *work) {
    coord_op_t *op = op_at(coord, slot);
    coord_stream_t *cs = coord->streams[op->stream];
    uint64_t point = cs->next_point + 1;
    ORDO_RETURN_IF_ERROR(stream_pending_reserve(cs));
    const hal_backend_t *backend = cs->stream->device->backend;
    ordo_status_t st = backend->signal(cs->stream, cs->timeline, point);
    if (st != ORDO_OK) {
        ordo_status_t stream_st = backend->status(cs->stream);
        if (stream_st == ORDO_OK) {
            return st;
        }
        /* A failed stream never reaches the point; the backend has failed
         * the timeline, or this does. */
        (void)ordo_signal_fail(cs->timeline, stream_st, "the stream has failed");
        st = stream_st;
    }
    cs->next_point = point;
    op->point = point;
    unsigned r = cs->next_record;
    cs->next_record = (r + 1) % COORD_RECORDS;
    cs->record_point[r] = point;
    memcpy(cs->record_frontier[r], cs->frontier, coord->stream_count * sizeof *cs->frontier);
    op_track_point(coord, slot, work);
    op_mark_recorded(coord, slot, ORDO_OK);
    return st;
}

/* The live op for begin/complete by hand, or an error. */
static ordo_status_t manual_op(ordo_coord_t *coord, ordo_op_id_t id, uint32_t *out_slot,
                               const char *api) {
    ordo_status_t outcome;
    op_lookup_t found = op_lookup(coord, id, out_slot, &outcome);
    if (found != LOOKUP_LIVE) {
        return ordo__op_lookup_error(found, id, api);
    }
    if (op_at(coord, *out_slot)->launch) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "op %llu has a launch function: ordo_coord_dispatch runs it",
                           (unsigned long long)id);
    }
    return ORDO_OK;
}

static const char *state_name(uint8_t state) {
    switch (state) {
    case OP_REGISTERED:
        return "registered, not begun";
    case OP_LAUNCHING:
    case OP_BEGUN:
        return "begun";
    case OP_COMPLETED:
        return "completed";
    case OP_FINISHED:
        return "finished";
    }
    return "free";
}

ordo_status_t ordo_coord_begin(ordo_coord_t *coord, ordo_op_id_t id) {
    uint64_t t0 = timing_start();
    coord_work_t work;
    ORDO_RETURN_IF_ERROR(coord_open(coord, &work, __func__));
    uint32_t slot = COORD_NONE;
    ordo_status_t st = manual_op(coord, id, &slot, __func__);
    if (st == ORDO_OK) {
        coord_op_t *op = op_at(coord, slot);
        if (op->state != OP_REGISTERED) {
            st = ordo__error(ORDO_ERR_BUSY, __func__, "op %llu is %s: begin it once",
                             (unsigned long long)id, state_name(op->state));
        } else if (op->pending_deps) {
            const coord_op_t *dep = NULL;
            for (uint32_t e = op_graph_first_in(&coord->graph, slot); e != OP_GRAPH_NONE;
                 e = op_graph_next_in(&coord->graph, e)) {
                dep = op_at(coord, op_graph_edge_from(&coord->graph, e));
                if (!dep->recorded) {
                    break;
                }
            }
            char who[96] = "?";
            size_t who_length = 0;
            if (dep) {
                describe(who, sizeof who, &who_length, dep);
            }
            st = ordo__error(ORDO_ERR_BUSY, __func__,
                             "op %llu waits for op %s, which has not completed (%u "
                             "dependencies outstanding)",
                             (unsigned long long)id, who, op->pending_deps);
        } else {
            st = begin_locked(coord, slot, &work, __func__);
        }
    }
    account(coord, t0);
    coord_unlock(coord, &work);
    return st;
}

ordo_status_t ordo_coord_complete(ordo_coord_t *coord, ordo_op_id_t id) {
    uint64_t t0 = timing_start();
    coord_work_t work;
    ORDO_RETURN_IF_ERROR(coord_open(coord, &work, __func__));
    uint32_t slot = COORD_NONE;
    ordo_status_t st = manual_op(coord, id, &slot, __func__);
    if (st == ORDO_OK) {
        coord_op_t *op = op_at(coord, slot);
        if (op->state != OP_BEGUN) {
            st = ordo__error(ORDO_ERR_BUSY, __func__,
                             op->state == OP_REGISTERED ? "op %llu is %s: begin it first"
                                                        : "op %llu is %s: complete it once",
                             (unsigned long long)id, state_name(op->state));
        } else {
            st = complete_locked(coord, slot, &work);
            if (st != ORDO_OK) {
                st = ordo__error(st, __func__, "op %llu: %s", (unsigned long long)id,
                                 op->state == OP_BEGUN ? "its point could not be enqueued"
                                                       : "its stream has failed");
            }
        }
    }
    account(coord, t0);
    coord_unlock(coord, &work);
    return st;
}

/* ---- callbacks -------------------------------------------------------------------------- */

static ordo_status_t callback_append(coord_op_t *op, ordo_op_callback_fn fn, void *ctx) {
    uint32_t n = op->callback_count;
    coord_callback_t *entry;
    if (n < COORD_INLINE_CALLBACKS) {
        entry = &op->callbacks[n];
    } else {
        uint32_t k = n - COORD_INLINE_CALLBACKS;
        coord_callback_chunk_t **link = &op->more_callbacks;
        for (uint32_t c = 0; c < k / COORD_CHUNK_CALLBACKS; ++c) {
            link = &(*link)->next;
        }
        if (!*link) {
            *link = ordo__alloc(sizeof **link, 0);
            if (!*link) {
                return ORDO_ERR_OUT_OF_MEMORY;
            }
        }
        entry = &(*link)->entries[k % COORD_CHUNK_CALLBACKS];
    }
    entry->fn = fn;
    entry->ctx = ctx;
    op->callback_count = n + 1;
    return ORDO_OK;
}

ordo_status_t ordo_coord_on_complete(ordo_coord_t *coord, ordo_op_id_t id, ordo_op_callback_fn fn,
                                     void *ctx) {
    ordo_status_t st = coord_check(coord, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    if (!fn) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "fn is NULL");
    }
    coord_work_t work;
    coord_enter(coord, &work);
    uint32_t slot;
    ordo_status_t outcome = ORDO_OK;
    op_lookup_t found = op_lookup(coord, id, &slot, &outcome);
    int run_now = 0;
    if (found == LOOKUP_RETIRED) {
        run_now = 1;
    } else if (found != LOOKUP_LIVE) {
        st = ordo__op_lookup_error(found, id, __func__);
    } else if (op_at(coord, slot)->state == OP_FINISHED) {
        run_now = 1; /* its own callbacks may be running: this one runs here */
        outcome = op_at(coord, slot)->status;
    } else if (callback_append(op_at(coord, slot), fn, ctx) != ORDO_OK) {
        st = ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__, "cannot store another callback");
    } else if (op_at(coord, slot)->state == OP_COMPLETED) {
        ordo__op_watch_point(coord, slot, &work); /* its point must now be followed actively */
    }
    if (run_now) {
        coord->callbacks_running++; /* drain waits for it, destroy is refused */
    }
    coord_unlock(coord, &work);
    if (run_now) {
        fn(ctx, id, outcome);
        coord_enter(coord, &work);
        coord->callbacks_running--;
        ordo__coord_wake_drainers(coord);
        coord_unlock(coord, &work);
    }
    return st;
}

/* ---- dispatch ---------------------------------------------------------------------------- */

ordo_status_t ordo_coord_dispatch(ordo_coord_t *coord, size_t max, size_t *out_launched) {
    if (out_launched) {
        *out_launched = 0;
    }
    ordo_status_t st = coord_check(coord, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    if (!out_launched) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_launched is NULL");
    }
    size_t launched = 0;
    coord_work_t work;
    /* An op that cannot begin, launch or complete fails (its callbacks and
     * the metrics say why) and the dispatch goes on: the refusals met
     * inside, launch functions' included, are not this call's. */
    ordo__kept_message_t kept;
    ordo__message_keep(&kept);
    uint64_t t0 = timing_start();
    coord_enter(coord, &work);
    for (size_t taken = 0; taken < max; ++taken) {
        uint32_t slot = ordo__ready_pop(coord);
        if (slot == COORD_NONE) {
            break;
        }
        coord_op_t *op = op_at(coord, slot);
        st = begin_locked(coord, slot, &work, __func__);
        if (st != ORDO_OK) {
            /* Failed with a dependency or its stream (then it may have
             * retired already: its slot is free), or left registered with
             * a wait not enqueued: it fails here. */
            if (op->state == OP_REGISTERED) {
                ordo__op_fail(coord, slot, st, &work);
            }
            continue;
        }
        op->state = OP_LAUNCHING;
        coord->launching++;
        ordo_op_launch_fn launch = op->launch;
        void *ctx = op->launch_ctx;
        ordo_stream_t *stream = coord->streams[op->stream]->stream;
        account(coord, t0);
        coord_unlock(coord, &work);
        st = launch(ctx, stream);
        t0 = timing_start();
        coord_lock(coord);
        coord->launching--;
        ordo__coord_wake_drainers(coord);
        if (st != ORDO_OK) {
            ordo__op_fail(coord, slot, ordo_status_is_error(st) ? st : ORDO_ERR_ABORTED, &work);
            continue;
        }
        op->state = OP_BEGUN;
        st = complete_locked(coord, slot, &work);
        if (op->state == OP_BEGUN) {
            ordo__op_fail(coord, slot, st, &work); /* the point could not be enqueued */
            continue;
        }
        coord->dispatched++;
        launched++;
    }
    account(coord, t0);
    coord_unlock(coord, &work);
    ordo__message_restore(&kept);
    *out_launched = launched;
    return ORDO_OK;
}

/* ---- queries ---------------------------------------------------------------------------- */

ordo_status_t ordo_coord_op_stream(ordo_coord_t *coord, ordo_op_id_t id,
                                   ordo_stream_t **out_stream) {
    if (out_stream) {
        *out_stream = NULL;
    }
    ordo_status_t st = coord_check(coord, __func__);
    if (st != ORDO_OK) {
        return st;
    }
    if (!out_stream) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_stream is NULL");
    }
    coord_work_t work;
    coord_enter(coord, &work);
    uint32_t slot;
    ordo_status_t outcome;
    op_lookup_t found = op_lookup(coord, id, &slot, &outcome);
    if (found == LOOKUP_LIVE) {
        *out_stream = coord->streams[op_at(coord, slot)->stream]->stream;
    } else {
        st = ordo__op_lookup_error(found, id, __func__);
    }
    coord_unlock(coord, &work);
    return st;
}

typedef struct cycle_sink {
    const ordo_coord_t *coord;
    ordo_op_cycle_t *out;
    size_t capacity;
    size_t count;
} cycle_sink_t;

static void cycle_found(void *ctx, const uint32_t *members, size_t member_count,
                        const uint32_t *cycle, size_t length) {
    (void)members;
    cycle_sink_t *sink = ctx;
    if (sink->count < sink->capacity) {
        ordo_op_cycle_t *c = &sink->out[sink->count];
        c->length = length;
        c->component_size = member_count;
        /* cycle[i] comes before cycle[i + 1]; so cycle[0] waits for the
         * last, which waits for the one before it, and so on. */
        for (size_t i = 0; i < length && i < ORDO_OP_CYCLE_MAX; ++i) {
            size_t k = i == 0 ? 0 : length - i;
            c->ops[i] = op_at(sink->coord, cycle[k])->id;
        }
    }
    sink->count++;
}

ordo_status_t ordo_coord_detect_deadlocks(ordo_coord_t *coord, ordo_op_cycle_t *out_cycles,
                                          size_t capacity, size_t *out_count) {
    if (out_count) {
        *out_count = 0;
    }
    ORDO_RETURN_IF_ERROR(coord_check(coord, __func__));
    if (!out_count || (capacity && !out_cycles)) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "%s is NULL",
                           out_count ? "out_cycles" : "out_count");
    }
    coord_work_t work;
    coord_enter(coord, &work);
    cycle_sink_t sink = {coord, out_cycles, capacity, 0};
    ordo_status_t st = ordo__op_graph_find_cycles(&coord->graph, cycle_found, &sink);
    coord_unlock(coord, &work);
    if (st != ORDO_OK) {
        return ordo__error(st, __func__, "cannot allocate the search's working memory");
    }
    *out_count = sink.count;
    return ORDO_OK;
}

ordo_status_t ordo_coord_metrics(ordo_coord_t *coord, ordo_coord_metrics_t *out_metrics) {
    if (out_metrics) {
        memset(out_metrics, 0, sizeof *out_metrics);
    }
    ORDO_RETURN_IF_ERROR(coord_check(coord, __func__));
    if (!out_metrics) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_metrics is NULL");
    }
    coord_work_t work;
    coord_enter(coord, &work);
    ordo__coord_poll(coord, &work);
    ordo_coord_metrics_t m = {
        .registered = coord->registered,
        .completed = coord->completed,
        .failed = coord->failed,
        .live = coord->live_count,
        .dispatched = coord->dispatched,
        .deadlocks_refused = coord->deadlocks_refused,
        .waits_emitted = coord->waits_emitted,
        .waits_elided = coord->waits_elided,
        .coordination_ns = coord->coordination_ns,
        .coordination_ns_per_op =
            coord->registered ? coord->coordination_ns / coord->registered : 0,
    };
    coord_unlock(coord, &work);
    *out_metrics = m;
    return ORDO_OK;
}
