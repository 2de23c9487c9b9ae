/* Graphs as objects: their buffer map, bindings, info and destroy
 * (core/graph_internal.h). */
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "core/graph_internal.h"
#include "core/timeline_op.h"

/* ---- the map ---------------------------------------------------------------- */

static uint32_t map_hash(const ordo_buffer_t *buffer, uint32_t capacity) {
    /* Fibonacci hashing of the address. */
    uint64_t h = (uint64_t)(uintptr_t)buffer * UINT64_C(0x9e3779b97f4a7c15);
    return (uint32_t)(h >> 32) & (capacity - 1);
}

ordo_status_t ordo__graph_map_reserve(graph_map_t *map, uint32_t count, const char *api) {
    uint64_t needed = ((uint64_t)map->count + count) * 2;
    if (needed <= map->capacity) {
        return ORDO_OK;
    }
    uint64_t capacity = map->capacity ? map->capacity : 16;
    while (capacity < needed) {
        capacity *= 2;
    }
    if (capacity > ((uint64_t)1 << 31)) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "a graph names too many buffers");
    }
    ordo_buffer_t **keys = ordo__alloc((size_t)capacity * sizeof *keys, 0);
    uint32_t *values = ordo__alloc((size_t)capacity * sizeof *values, 0);
    if (!keys || !values) {
        ordo__dealloc(keys, (size_t)capacity * sizeof *keys, 0);
        ordo__dealloc(values, (size_t)capacity * sizeof *values, 0);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot grow a graph's map of buffers");
    }
    graph_map_t grown = {keys, values, (uint32_t)capacity, 0};
    for (uint32_t i = 0; i < map->capacity; ++i) {
        if (map->keys[i]) {
            ordo__graph_map_put(&grown, map->keys[i], map->values[i]);
        }
    }
    ordo__graph_map_free(map);
    *map = grown;
    return ORDO_OK;
}

uint32_t ordo__graph_map_find(const graph_map_t *map, const ordo_buffer_t *buffer) {
    if (!map->capacity) {
        return UINT32_MAX;
    }
    for (uint32_t i = map_hash(buffer, map->capacity);; i = (i + 1) & (map->capacity - 1)) {
        if (map->keys[i] == buffer) {
            return map->values[i];
        }
        if (!map->keys[i]) {
            return UINT32_MAX;
        }
    }
}

void ordo__graph_map_put(graph_map_t *map, ordo_buffer_t *buffer, uint32_t slot) {
    uint32_t i = map_hash(buffer, map->capacity);
    while (map->keys[i]) {
        i = (i + 1) & (map->capacity - 1);
    }
    map->keys[i] = buffer;
    map->values[i] = slot;
    ++map->count;
}

void ordo__graph_map_remove(graph_map_t *map, const ordo_buffer_t *buffer) {
    const uint32_t mask = map->capacity - 1;
    uint32_t i = map_hash(buffer, map->capacity);
    while (map->keys[i] != buffer) {
        i = (i + 1) & mask;
    }
    /* Backward-shift deletion: every key after the hole that could not be
     * found past it any more moves into it, so probes stay unbroken. */
    for (uint32_t j = (i + 1) & mask; map->keys[j]; j = (j + 1) & mask) {
        uint32_t home = map_hash(map->keys[j], map->capacity);
        /* The key at j may move to i when its home is not in (i, j]. */
        if (((j - home) & mask) >= ((j - i) & mask)) {
            map->keys[i] = map->keys[j];
            map->values[i] = map->values[j];
            i = j;
        }
    }
    map->keys[i] = NULL;
    --map->count;
}

void ordo__graph_map_free(graph_map_t *map) {
    if (map->capacity) {
        ordo__dealloc(map->keys, (size_t)map->capacity * sizeof *map->keys, 0);
        ordo__dealloc(map->values, (size_t)map->capacity * sizeof *map->values, 0);
    }
    memset(map, 0, sizeof *map);
}

/* ---- the graph ------------------------------------------------------------- */

ordo_status_t ordo__graph_check(const ordo_graph_t *graph, const char *api) {
    if (!graph || graph->magic != ORDO_GRAPH_MAGIC) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%p is not a live graph%s",
                           (const void *)graph,
                           graph && graph->magic == ORDO_GRAPH_DEAD ? " (destroyed)" : "");
    }
    return ORDO_OK;
}

void ordo__graph_free(ordo_graph_t *graph) {
    /* Also a graph whose making failed half-way: arrays may be missing. */
    ordo__graph_native_free(graph);
    for (uint32_t i = 0; graph->slots && i < graph->slot_count; ++i) {
        if (graph->slots[i].buffer) {
            --graph->slots[i].buffer->graph_binds;
        }
    }
    for (uint32_t l = 0; graph->lanes && l < graph->lane_count; ++l) {
        if (graph->lanes[l].timeline) {
            timeline_drop(graph->lanes[l].timeline, graph->lanes[l].spare_refs);
        }
    }
    /* The memory last: the pool's free waits for the uses the replays
     * recorded in the blocks' histories. */
    for (uint32_t i = 0; graph->blocks && i < graph->block_count; ++i) {
        graph->blocks[i].free(graph->blocks[i].block, graph->blocks[i].stream);
    }
    ordo__dealloc(graph->blocks, graph->block_count * sizeof *graph->blocks, 0);
    ordo__dealloc(graph->lanes, graph->lane_count * sizeof *graph->lanes, 0);
    ordo__dealloc(graph->ops, graph->op_count * sizeof *graph->ops, 0);
    ordo__dealloc(graph->task_ops, graph->tasks * sizeof *graph->task_ops, 0);
    ordo__dealloc(graph->slots, graph->slot_count * sizeof *graph->slots, 0);
    ordo__dealloc(graph->entries, graph->entry_count * sizeof *graph->entries, 0);
    ordo__dealloc(graph->entry_next, graph->entry_count * sizeof *graph->entry_next, 0);
    ordo__dealloc(graph->learned,
                  (size_t)graph->lane_count * ORDO_TRACKER_MAX_STREAMS * sizeof *graph->learned, 0);
    ordo__graph_map_free(&graph->map);
    graph->magic = ORDO_GRAPH_DEAD;
    ordo__dealloc(graph, sizeof *graph, 0);
}

ordo_status_t ordo_graph_destroy(ordo_graph_t *graph) {
    ORDO_RETURN_IF_ERROR(ordo__graph_check(graph, __func__));
    ORDO_RETURN_IF_ERROR(tracker_not_launching(graph->tracker, __func__));
    ordo_tracker_t *tracker = graph->tracker;
    ordo__graph_free(graph);
    atomic_fetch_sub_explicit(&tracker->graphs, 1, memory_order_relaxed);
    return ORDO_OK;
}

ordo_status_t ordo_graph_info(ordo_graph_t *graph, ordo_graph_info_t *out_info) {
    if (out_info) {
        memset(out_info, 0, sizeof *out_info);
    }
    ORDO_RETURN_IF_ERROR(ordo__graph_check(graph, __func__));
    if (!out_info) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_info is NULL");
    }
    out_info->streams = graph->lane_count;
    out_info->buffers = graph->slot_count;
    out_info->tasks = graph->tasks;
    out_info->waits = graph->waits;
    out_info->records = graph->records;
    out_info->replays = atomic_load_explicit(&graph->replays, memory_order_relaxed);
    out_info->memory_bytes = graph->memory_bytes;
    out_info->native = atomic_load_explicit(&graph->native_on, memory_order_relaxed);
    return ORDO_OK;
}

/* A native graph is lowered again at the next replay (its launch
 * functions called again); nothing for one replayed op by op. */
static void lower_again(ordo_graph_t *graph) {
    if (graph->native || graph->native_stale) {
        graph->native_stale = 1;
    }
}

ordo_status_t ordo_graph_set_task_context(ordo_graph_t *graph, uint64_t index, void *ctx) {
    ORDO_RETURN_IF_ERROR(ordo__graph_check(graph, __func__));
    ORDO_RETURN_IF_ERROR(tracker_not_launching(graph->tracker, __func__));
    if (index >= graph->tasks) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__, "task %llu; the graph has %llu task(s)",
                           (unsigned long long)index, (unsigned long long)graph->tasks);
    }
    if (!graph->task_ops) {
        /* Built once: a caller may set many tasks before every replay. */
        uint64_t *task_ops = ordo__alloc(graph->tasks * sizeof *task_ops, 0);
        if (!task_ops) {
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, __func__,
                               "cannot allocate the index of %llu task(s)",
                               (unsigned long long)graph->tasks);
        }
        for (uint64_t i = 0, t = 0; i < graph->op_count; ++i) {
            uint8_t kind = graph->ops[i].kind;
            if (kind == GRAPH_OP_HOST || kind == GRAPH_OP_LAUNCH) {
                task_ops[t++] = i;
            }
        }
        graph->task_ops = task_ops;
    }
    graph_op_t *op = &graph->ops[graph->task_ops[index]];
    if (op->kind == GRAPH_OP_HOST) {
        op->u.host.ctx = ctx;
    } else {
        op->u.launch.ctx = ctx;
        lower_again(graph);
    }
    return ORDO_OK;
}

ordo_status_t ordo_graph_refresh(ordo_graph_t *graph) {
    ORDO_RETURN_IF_ERROR(ordo__graph_check(graph, __func__));
    ORDO_RETURN_IF_ERROR(tracker_not_launching(graph->tracker, __func__));
    lower_again(graph);
    return ORDO_OK;
}

ordo_status_t ordo_graph_buffer(ordo_graph_t *graph, uint32_t index, ordo_buffer_t **out_buffer,
                                ordo_access_mode_t *out_mode) {
    if (out_buffer) {
        *out_buffer = NULL;
    }
    if (out_mode) {
        *out_mode = (ordo_access_mode_t)0;
    }
    ORDO_RETURN_IF_ERROR(ordo__graph_check(graph, __func__));
    if (!out_buffer || !out_mode) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "%s is NULL",
                           out_buffer ? "out_mode" : "out_buffer");
    }
    if (index >= graph->slot_count) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, __func__, "slot %u; the graph names %u buffer(s)",
                           index, graph->slot_count);
    }
    *out_buffer = graph->slots[index].buffer;
    *out_mode = (ordo_access_mode_t)graph->slots[index].mode;
    return ORDO_OK;
}

/* Why buffer cannot be bound to a slot of graph (a live buffer of its
 * tracker; one held by a prepare may be: a replay that names it before
 * the finish is refused), or ORDO_OK. */
static ordo_status_t bindable(const ordo_graph_t *graph, const ordo_buffer_t *buffer,
                              const char *what, const char *api) {
    if (!buffer) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%s is NULL", what);
    }
    if (buffer->magic == ORDO_BUFFER_RELEASED) {
        return ordo__error(ORDO_ERR_DESTROYED, api, "%s %p was released", what,
                           (const void *)buffer);
    }
    if (buffer->magic != ORDO_BUFFER_MAGIC && buffer->magic != ORDO_BUFFER_PREPARED) {
        return ordo__error(ORDO_ERR_INVALID_HANDLE, api, "%s %p is not a live buffer", what,
                           (const void *)buffer);
    }
    if (buffer->tracker != graph->tracker) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "%s %p belongs to another tracker than the graph's", what,
                           (const void *)buffer);
    }
    return ORDO_OK;
}

ordo_status_t ordo_graph_rebind(ordo_graph_t *graph, ordo_buffer_t *bound, ordo_buffer_t *buffer) {
    ORDO_RETURN_IF_ERROR(ordo__graph_check(graph, __func__));
    /* A graph's own blocks read live during its replay: bound to another
     * graph now, they would be freed under it. */
    ORDO_RETURN_IF_ERROR(tracker_not_launching(graph->tracker, __func__));
    for (uint32_t i = 0; bound && i < graph->block_count; ++i) {
        if (graph->blocks[i].buffer == bound) {
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                               "%p is the graph's own memory (a block its recording allocated "
                               "and freed): it cannot be rebound",
                               (void *)bound);
        }
    }
    ORDO_RETURN_IF_ERROR(bindable(graph, bound, "bound", __func__));
    ORDO_RETURN_IF_ERROR(bindable(graph, buffer, "buffer", __func__));
    uint32_t slot = ordo__graph_map_find(&graph->map, bound);
    if (slot == UINT32_MAX) {
        return ordo__error(ORDO_ERR_NOT_FOUND, __func__, "no slot of the graph is bound to %p",
                           (void *)bound);
    }
    if (bound == buffer) {
        return ORDO_OK;
    }
    if (bound->bytes != buffer->bytes) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "buffer %p stands for %llu bytes, the slot's %p for %llu: a slot is "
                           "rebound to a buffer of the same size (a pool block's bytes; 0 for a "
                           "plain buffer)",
                           (void *)buffer, (unsigned long long)buffer->bytes, (void *)bound,
                           (unsigned long long)bound->bytes);
    }
    uint32_t other = ordo__graph_map_find(&graph->map, buffer);
    if (other != UINT32_MAX) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__,
                           "buffer %p is bound to slot %u already: two slots of one graph "
                           "cannot share a buffer (the recording ordered nothing between them)",
                           (void *)buffer, other);
    }
    /* Streams past the inline points need the buffer's array of them
     * before a replay may write there. */
    for (uint32_t l = 0; l < graph->lane_count; ++l) {
        if (graph->lanes[l].t >= BUFFER_INLINE_READERS) {
            ORDO_RETURN_IF_ERROR(ordo__buffer_reserve_points(buffer, __func__));
            break;
        }
    }
    ordo__graph_map_remove(&graph->map, bound);
    ordo__graph_map_put(&graph->map, buffer, slot);
    graph_slot_t *s = &graph->slots[slot];
    for (uint32_t e = s->entry_first; e != UINT32_MAX; e = graph->entry_next[e]) {
        graph->entries[e].buffer = buffer;
    }
    --bound->graph_binds;
    ++buffer->graph_binds;
    s->buffer = buffer;
    lower_again(graph); /* for the new buffer */
    return ORDO_OK;
}
