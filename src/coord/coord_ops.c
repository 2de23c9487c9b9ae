/* Coordinator ops: slots, ids, retirement, the outcomes of retired ops and
 * the ready queues of dispatch mode. Everything here runs under
 * coord->lock. */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "coord/coord_internal.h"

op_lookup_t ordo__op_lookup_slow(const ordo_coord_t *coord, ordo_op_id_t id, uint32_t *out_slot,
                                 ordo_status_t *out_outcome) {
    if (id == 0 || id > coord->issued) {
        return LOOKUP_UNKNOWN;
    }
    if (ordo__id_map_get(&coord->live, id, out_slot)) {
        return LOOKUP_LIVE;
    }
    uint32_t status;
    if (ordo__id_map_get(&coord->failures, id, &status)) {
        *out_outcome = (ordo_status_t)status;
        return LOOKUP_RETIRED;
    }
    if (id <= coord->failure_horizon) {
        return LOOKUP_FORGOTTEN;
    }
    *out_outcome = ORDO_OK;
    return LOOKUP_RETIRED;
}

ordo_status_t ordo__op_lookup_error(op_lookup_t found, ordo_op_id_t id, const char *api) {
    if (found == LOOKUP_FORGOTTEN) {
        return ordo__error(ORDO_ERR_NOT_FOUND, api,
                           "op %llu retired long ago and its outcome is no longer kept (only "
                           "the last %u failures are)",
                           (unsigned long long)id, ORDO_COORD_FAILURES_KEPT);
    }
    if (found == LOOKUP_RETIRED) {
        return ordo__error(ORDO_ERR_BUSY, api, "op %llu has finished and retired",
                           (unsigned long long)id);
    }
    return ordo__error(ORDO_ERR_NOT_FOUND, api, "no op %llu in this coordinator",
                       (unsigned long long)id);
}

ordo_status_t ordo__op_chunk_add(ordo_coord_t *coord) {
    if ((uint64_t)(coord->chunk_count + 1) * COORD_CHUNK_OPS >= OP_GRAPH_MAX) {
        return ORDO_ERR_RESOURCE_EXHAUSTED;
    }
    if (coord->chunk_count == coord->chunk_cap) {
        uint32_t cap = coord->chunk_cap ? 2 * coord->chunk_cap : 8;
        coord_op_t **chunks = ordo__alloc(cap * sizeof *chunks, 0);
        if (!chunks) {
            return ORDO_ERR_OUT_OF_MEMORY;
        }
        if (coord->chunks) {
            memcpy(chunks, coord->chunks, coord->chunk_count * sizeof *chunks);
            ordo__dealloc(coord->chunks, coord->chunk_cap * sizeof *chunks, 0);
        }
        coord->chunks = chunks;
        coord->chunk_cap = cap;
    }
    coord_op_t *chunk = ordo__alloc(COORD_CHUNK_OPS * sizeof *chunk, 64);
    if (!chunk) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    uint32_t base = coord->chunk_count * COORD_CHUNK_OPS;
    coord->chunks[coord->chunk_count++] = chunk;
    /* Lowest slots first, so the graph's node arrays stay dense. */
    for (uint32_t i = COORD_CHUNK_OPS; i-- > 0;) {
        chunk[i].coord = coord;
        chunk[i].slot = base + i;
        chunk[i].next = coord->free_slot;
        coord->free_slot = base + i;
    }
    return ORDO_OK;
}

void ordo__op_slot_return(ordo_coord_t *coord, uint32_t slot) {
    coord_op_t *op = op_at(coord, slot);
    /* Only line 0 of the record is read here unless the op had more (see
     * coord_op_t): a retired record is not in cache any more. */
    if (op->wide) {
        ordo__dealloc(op->more_needs, ORDO_COORD_MAX_STREAMS * sizeof *op->more_needs, 0);
        op->wide = 0;
    }
    if (op->callback_count > COORD_INLINE_CALLBACKS) {
        while (op->more_callbacks) {
            coord_callback_chunk_t *next = op->more_callbacks->next;
            ordo__dealloc(op->more_callbacks, sizeof *op->more_callbacks, 0);
            op->more_callbacks = next;
        }
    }
    /* What a fresh op must find in line 0; register sets the rest. */
    op->id = 0;
    op->state = OP_FREE;
    op->callback_count = 0;
    op->pending_deps = 0;
    op->status = ORDO_OK;
    op->dep_failure = ORDO_OK;
    op->own_need = 0;
    op->recorded = 0;
    op->queued = 0;
    op->callbacks_running = 0;
    op->tp_pending = 0;
    op->in_recent = 0;
    op->next = coord->free_slot;
    coord->free_slot = slot;
}

/* Keeps a retired op's failure; when the ring is full the oldest goes and
 * the horizon rises past it. If memory runs out the failure is forgotten
 * the same way: the horizon covers it, so nobody mistakes it for success. */
static void failure_remember(ordo_coord_t *coord, ordo_op_id_t id, ordo_status_t status) {
    if (!coord->failure_ring) {
        coord->failure_ring =
            ordo__alloc(ORDO_COORD_FAILURES_KEPT * sizeof *coord->failure_ring, 0);
    }
    if (!coord->failure_ring || ordo__id_map_reserve(&coord->failures, 1) != ORDO_OK) {
        if (coord->failure_horizon < id) {
            coord->failure_horizon = id;
        }
        return;
    }
    if (coord->failure_count == ORDO_COORD_FAILURES_KEPT) {
        ordo_op_id_t oldest = coord->failure_ring[coord->failure_next];
        ordo__id_map_remove(&coord->failures, oldest);
        if (coord->failure_horizon < oldest) {
            coord->failure_horizon = oldest;
        }
        coord->failure_count--;
    }
    coord->failure_ring[coord->failure_next] = id;
    coord->failure_next = (coord->failure_next + 1) % ORDO_COORD_FAILURES_KEPT;
    coord->failure_count++;
    ordo__id_map_put(&coord->failures, id, (uint32_t)status);
}

ordo_status_t ordo__op_recent_init(ordo_coord_t *coord) {
    coord->recent = ordo__alloc(COORD_RECENT_MIN * sizeof *coord->recent, 64);
    if (!coord->recent) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    coord->recent_mask = COORD_RECENT_MIN - 1;
    return ORDO_OK;
}

/* Doubles the recent table. Entries cannot collide: two live ids in the
 * old table differ modulo its size, so they differ modulo twice that. */
static ordo_status_t recent_grow(ordo_coord_t *coord) {
    uint32_t old_size = coord->recent_mask + 1;
    uint32_t size = 2 * old_size;
    uint32_t *table = ordo__alloc(size * sizeof *table, 64);
    if (!table) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    for (uint32_t i = 0; i < old_size; ++i) {
        uint32_t entry = coord->recent[i];
        if (entry) {
            table[op_at(coord, entry - 1)->id & (size - 1)] = entry;
        }
    }
    ordo__dealloc(coord->recent, old_size * sizeof *coord->recent, 64);
    coord->recent = table;
    coord->recent_mask = size - 1;
    return ORDO_OK;
}

ordo_status_t ordo__op_id_reserve_slow(ordo_coord_t *coord) {
    ordo_op_id_t id = coord->issued + 1;
    /* The entry's owner is live. When live ops are dense, double the table: id and
     * the owner (id - size, or older) then take different entries, and the
     * new entry is free (an older id with it would have been evicted by
     * the owner). Growing is optional: without memory the owner moves to
     * the map. */
    if (coord->live_count >= (coord->recent_mask + 1) / 2 &&
        coord->recent_mask + 1 < COORD_RECENT_MAX && recent_grow(coord) == ORDO_OK &&
        !coord->recent[id & coord->recent_mask]) {
        return ORDO_OK;
    }
    return ordo__id_map_reserve(&coord->live, 1);
}

void ordo__op_id_evict(ordo_coord_t *coord, uint32_t *entry) {
    /* Its owner is live (retirement clears the entry): it moves to the map
     * (room was reserved). */
    coord_op_t *old = op_at(coord, *entry - 1);
    old->in_recent = 0;
    ordo__id_map_put(&coord->live, old->id, *entry - 1);
}

void ordo__op_try_retire(ordo_coord_t *coord, uint32_t slot) {
    coord_op_t *op = op_at(coord, slot);
    if (op->state != OP_FINISHED || op->callbacks_running || op->tp_pending) {
        return;
    }
    if (op->in_recent) {
        coord->recent[op->id & coord->recent_mask] = 0;
    } else {
        ordo__id_map_remove(&coord->live, op->id);
    }
    coord->live_count--;
    if (op->status != ORDO_OK) {
        failure_remember(coord, op->id, op->status);
    }
    if (op_graph_contains(&coord->graph, slot)) {
        ordo__op_graph_remove_node(&coord->graph, slot); /* (it left when it was recorded) */
    }
    ordo__op_slot_return(coord, slot);
}

ordo_status_t ordo__op_needs_reserve(coord_op_t *op, size_t extra) {
    if (op->wide || op->dep_total + extra <= COORD_INLINE_NEEDS) {
        return ORDO_OK;
    }
    uint64_t *more = ordo__alloc(ORDO_COORD_MAX_STREAMS * sizeof *more, 0);
    if (!more) {
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    for (unsigned i = 0; i < op->need_count; ++i) {
        more[op->need_stream[i]] = op->need_point[i];
    }
    op->more_needs = more;
    op->wide = 1;
    return ORDO_OK;
}

void ordo__ready_push(ordo_coord_t *coord, uint32_t slot) {
    coord_op_t *op = op_at(coord, slot);
    uint32_t p = op->priority;
    op->queued = 1;
    op->ready_next = COORD_NONE;
    op->ready_prev = coord->ready_tail[p];
    if (coord->ready_tail[p] != COORD_NONE) {
        op_at(coord, coord->ready_tail[p])->ready_next = slot;
    } else {
        coord->ready_head[p] = slot;
    }
    coord->ready_tail[p] = slot;
}

void ordo__ready_remove(ordo_coord_t *coord, uint32_t slot) {
    coord_op_t *op = op_at(coord, slot);
    uint32_t p = op->priority;
    if (op->ready_prev != COORD_NONE) {
        op_at(coord, op->ready_prev)->ready_next = op->ready_next;
    } else {
        coord->ready_head[p] = op->ready_next;
    }
    if (op->ready_next != COORD_NONE) {
        op_at(coord, op->ready_next)->ready_prev = op->ready_prev;
    } else {
        coord->ready_tail[p] = op->ready_prev;
    }
    op->queued = 0;
}

uint32_t ordo__ready_pop(ordo_coord_t *coord) {
    for (uint32_t p = 0; p < COORD_PRIORITIES; ++p) {
        uint32_t slot = coord->ready_head[p];
        if (slot != COORD_NONE) {
            ordo__ready_remove(coord, slot);
            return slot;
        }
    }
    return COORD_NONE;
}

void ordo__op_release_dependents(ordo_coord_t *coord, uint32_t slot, ordo_status_t status) {
    const coord_op_t *op = op_at(coord, slot);
    for (uint32_t e = op_graph_first_out(&coord->graph, slot); e != OP_GRAPH_NONE;
         e = op_graph_next_out(&coord->graph, e)) {
        uint32_t d = op_graph_edge_to(&coord->graph, e);
        coord_op_t *dependent = op_at(coord, d);
        if (status != ORDO_OK) {
            if (dependent->dep_failure == ORDO_OK) {
                dependent->dep_failure = status;
            }
        } else if (op_need(dependent, op->stream, op->point)) {
            coord->waits_elided++;
        }
        if (--dependent->pending_deps == 0 && dependent->launch &&
            dependent->state == OP_REGISTERED && !dependent->queued) {
            ordo__ready_push(coord, d);
        }
    }
    /* Its dependents hold the point now; edges into it (an op failed
     * before it began) go too. */
    ordo__op_graph_remove_node(&coord->graph, slot);
}

void ordo__ops_free_all(ordo_coord_t *coord) {
    for (uint32_t c = 0; c < coord->chunk_count; ++c) {
        coord_op_t *chunk = coord->chunks[c];
        for (uint32_t i = 0; i < COORD_CHUNK_OPS; ++i) {
            if (chunk[i].wide) {
                ordo__dealloc(chunk[i].more_needs,
                              ORDO_COORD_MAX_STREAMS * sizeof *chunk[i].more_needs, 0);
            }
            while (chunk[i].callback_count > COORD_INLINE_CALLBACKS && chunk[i].more_callbacks) {
                coord_callback_chunk_t *next = chunk[i].more_callbacks->next;
                ordo__dealloc(chunk[i].more_callbacks, sizeof *chunk[i].more_callbacks, 0);
                chunk[i].more_callbacks = next;
            }
        }
        ordo__dealloc(chunk, COORD_CHUNK_OPS * sizeof *chunk, 64);
    }
    ordo__dealloc(coord->chunks, coord->chunk_cap * sizeof *coord->chunks, 0);
    coord->chunks = NULL;
    coord->chunk_count = coord->chunk_cap = 0;
    ordo__dealloc(coord->recent, (coord->recent_mask + 1) * sizeof *coord->recent, 64);
    coord->recent = NULL;
    ordo__id_map_fini(&coord->live);
    ordo__id_map_fini(&coord->failures);
    ordo__dealloc(coord->failure_ring, ORDO_COORD_FAILURES_KEPT * sizeof *coord->failure_ring, 0);
    coord->failure_ring = NULL;
    ordo__op_graph_fini(&coord->graph);
}
