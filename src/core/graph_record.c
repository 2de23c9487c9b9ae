/* Recording a tracker's submissions into a graph: the shadow tracker, the
 * capture of submissions and of the waits they need, the refusals, and the
 * graph made at the end (core/graph_internal.h). */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "core/graph_internal.h"
#include "hal/hal.h"

/* An exposed access of a lane: the lane accessed the slot before any write
 * of it in the graph (modes merged). */
typedef struct record_entry {
    uint32_t lane;
    uint32_t slot;
    uint32_t next; /* the slot's next entry, UINT32_MAX: none */
    uint8_t mode;
} record_entry_t;

/* A slot while recording: the tracker's buffer and its shadow. */
typedef struct record_slot {
    ordo_buffer_t *buffer;
    ordo_buffer_t *shadow;
    uint32_t entry_first; /* UINT32_MAX: none */
    uint8_t mode;
} record_slot_t;

struct graph_recorder {
    ordo_tracker_t *tracker;
    /* The analysis of the recording, as if it ran alone on idle streams:
     * its streams are the lanes (capture set), its buffers the slots. */
    ordo_tracker_t *shadow;
    uint32_t lane_t[ORDO_TRACKER_MAX_STREAMS]; /* lane -> the stream's index in tracker */
    graph_op_t *ops;
    uint64_t op_count;
    uint64_t op_capacity;
    record_slot_t *slots;
    uint32_t slot_count;
    uint32_t slot_capacity;
    graph_map_t map; /* tracker buffer -> slot */
    record_entry_t *entries;
    uint32_t entry_count;
    uint32_t entry_capacity;
    graph_block_t *blocks; /* allocated by a pool while recording */
    uint32_t block_count;
    uint32_t block_capacity;
    int blocks_taken; /* the graph holds those freed in the recording */
    /* Frees of adaptors' held blocks asked for meanwhile
     * (ordo__graph_release_after): made once the recording ends, however
     * it ends. */
    graph_block_t *releases;
    uint32_t release_count;
    uint32_t release_capacity;
    uint8_t native_mode; /* ordo_graph_native_t */
    uint64_t tasks;
    /* The first refused call (ordo__graph_refuse), under the tracker's lock. */
    ordo_status_t refusal;
    char refusal_message[512]; /* the size of a thread's message */
    ordo_access_t *scratch;    /* a submission, in shadow buffers */
    uint32_t scratch_capacity;
};

const char ordo__graph_host_wait_refused[] =
    "a host wait on the tracker cannot be recorded (a replay does not wait on the host)";

/* Grows an array of elements of size `element` to hold `needed`, doubling. */
static ordo_status_t grow(void **array, uint64_t *capacity, size_t element, uint64_t needed,
                          const char *api) {
    if (needed <= *capacity) {
        return ORDO_OK;
    }
    uint64_t grown = *capacity ? *capacity : 64;
    while (grown < needed) {
        grown *= 2;
    }
    if (grown > SIZE_MAX / element) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "a recording too large to hold");
    }
    void *bigger = ordo__alloc((size_t)grown * element, 0);
    if (!bigger) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot grow the recording");
    }
    if (*capacity) {
        memcpy(bigger, *array, (size_t)*capacity * element);
        ordo__dealloc(*array, (size_t)*capacity * element, 0);
    }
    *array = bigger;
    *capacity = grown;
    return ORDO_OK;
}

static ordo_status_t grow32(void **array, uint32_t *capacity, size_t element, uint64_t needed,
                            const char *api) {
    if (needed > UINT32_MAX / 2) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "a recording too large to hold");
    }
    uint64_t wide = *capacity;
    ORDO_RETURN_IF_ERROR(grow(array, &wide, element, needed, api));
    *capacity = (uint32_t)wide;
    return ORDO_OK;
}

static void recorder_free(graph_recorder_t *r) {
    /* Blocks freed in a recording that made no graph were never used: back
     * to their pools. */
    for (uint32_t i = 0; !r->blocks_taken && i < r->block_count; ++i) {
        if (r->blocks[i].stream) {
            r->blocks[i].free(r->blocks[i].block, r->blocks[i].stream);
        }
    }
    ordo__dealloc(r->blocks, (size_t)r->block_capacity * sizeof *r->blocks, 0);
    /* The tracker no longer records (record_end took the recorder off it
     * first): these frees are plain ones now. */
    for (uint32_t i = 0; i < r->release_count; ++i) {
        r->releases[i].free(r->releases[i].block, r->releases[i].stream);
    }
    ordo__dealloc(r->releases, (size_t)r->release_capacity * sizeof *r->releases, 0);
    for (uint32_t i = 0; i < r->slot_count; ++i) {
        ordo__buffer_reclaim_now(r->shadow, r->slots[i].shadow);
    }
    ordo__tracker_streams_release(r->shadow);
    ordo__dealloc(r->shadow, sizeof *r->shadow, 64);
    ordo__dealloc(r->ops, (size_t)r->op_capacity * sizeof *r->ops, 0);
    ordo__dealloc(r->slots, (size_t)r->slot_capacity * sizeof *r->slots, 0);
    ordo__dealloc(r->entries, (size_t)r->entry_capacity * sizeof *r->entries, 0);
    ordo__dealloc(r->scratch, (size_t)r->scratch_capacity * sizeof *r->scratch, 0);
    ordo__graph_map_free(&r->map);
    ordo__dealloc(r, sizeof *r, 64);
}

static ordo_status_t record_begin(ordo_tracker_t *tracker, ordo_graph_native_t native,
                                  const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__tracker_check(tracker, api));
    /* Its submissions would be captured, not refused: a graph made in a
     * replay could name the replaying graph's own blocks. */
    ORDO_RETURN_IF_ERROR(tracker_not_launching(tracker, api));
    if (native != ORDO_GRAPH_NATIVE_AUTO && native != ORDO_GRAPH_NATIVE_OFF &&
        native != ORDO_GRAPH_NATIVE_REQUIRE) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                           "native is %d, not an ordo_graph_native_t", (int)native);
    }
    if (tracker_recording(tracker)) {
        return ordo__error(ORDO_ERR_BUSY, api,
                           "the tracker records already (ordo_tracker_record_end ends it)");
    }
    graph_recorder_t *r = ordo__alloc(sizeof *r, 64);
    ordo_tracker_t *shadow = ordo__alloc(sizeof *shadow, 64);
    if (!r || !shadow) {
        ordo__dealloc(r, sizeof *r, 64);
        ordo__dealloc(shadow, sizeof *shadow, 64);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a recording");
    }
    /* Never a live tracker (magic 0): only the analysis runs on it. */
    shadow->device = tracker->device;
    r->tracker = tracker;
    r->shadow = shadow;
    r->native_mode = (uint8_t)native;
    ordo_rlock_lock(&tracker->lock);
    atomic_store_explicit(&tracker->recorder, r, memory_order_relaxed);
    ordo_rlock_unlock(&tracker->lock);
    return ORDO_OK;
}

ordo_status_t ordo_tracker_record_begin(ordo_tracker_t *tracker) {
    return record_begin(tracker, ORDO_GRAPH_NATIVE_OFF, __func__);
}

ordo_status_t ordo_tracker_record_begin_native(ordo_tracker_t *tracker,
                                               ordo_graph_native_t native) {
    return record_begin(tracker, native, __func__);
}

ordo_status_t ordo__graph_refuse(ordo_tracker_t *tracker, const char *api, const char *why) {
    ordo_rlock_lock(&tracker->lock);
    graph_recorder_t *r = atomic_load_explicit(&tracker->recorder, memory_order_relaxed);
    ordo_status_t st = ORDO_OK;
    if (r) {
        st = ordo__error(ORDO_ERR_BUSY, api, "the tracker is recording a graph: %s", why);
        if (r->refusal == ORDO_OK) {
            r->refusal = st;
            snprintf(r->refusal_message, sizeof r->refusal_message, "%s", ordo_error_message());
        }
    }
    ordo_rlock_unlock(&tracker->lock);
    return st;
}

/* ---- memory -------------------------------------------------------------------- */

ordo_status_t ordo__graph_block_born(ordo_tracker_t *tracker, const graph_block_t *block,
                                     const char *api) {
    graph_recorder_t *r = atomic_load_explicit(&tracker->recorder, memory_order_relaxed);
    ORDO_RETURN_IF_ERROR(grow32((void **)&r->blocks, &r->block_capacity, sizeof *r->blocks,
                                (uint64_t)r->block_count + 1, api));
    r->blocks[r->block_count++] = *block;
    return ORDO_OK;
}

ordo_status_t ordo__graph_release_after(ordo_tracker_t *tracker, const graph_block_t *block,
                                        const char *api) {
    graph_recorder_t *r = atomic_load_explicit(&tracker->recorder, memory_order_relaxed);
    for (uint32_t i = 0; i < r->block_count; ++i) {
        if (r->blocks[i].buffer == block->buffer) {
            return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api,
                               "a block allocated in the recording cannot be released past it");
        }
    }
    ORDO_RETURN_IF_ERROR(grow32((void **)&r->releases, &r->release_capacity, sizeof *r->releases,
                                (uint64_t)r->release_count + 1, api));
    r->releases[r->release_count++] = *block;
    return ORDO_OK;
}

ordo_status_t ordo__graph_block_freed(ordo_tracker_t *tracker, ordo_buffer_t *buffer,
                                      ordo_stream_t *stream, const char *api) {
    graph_recorder_t *r = atomic_load_explicit(&tracker->recorder, memory_order_relaxed);
    for (uint32_t i = 0; i < r->block_count; ++i) {
        if (r->blocks[i].buffer == buffer && !r->blocks[i].stream) {
            /* The graph frees it on this stream: the tracker keeps it. */
            uint32_t t;
            ORDO_RETURN_IF_ERROR(tracker_stream_index(tracker, stream, &t, api));
            r->blocks[i].stream = stream;
            return ORDO_OK;
        }
    }
    return ordo__graph_refuse(tracker, api,
                              "a block allocated before the recording cannot be freed in it (a "
                              "replay could not free it again)");
}

/* ---- capture ----------------------------------------------------------------- */

static void append_op(graph_recorder_t *r, graph_op_t op) {
    r->ops[r->op_count++] = op; /* room was reserved */
}

void ordo__graph_capture_point(graph_recorder_t *r, ordo_stream_t *stream,
                               const tracker_stream_t *owner, uint64_t point, int wait) {
    uint32_t origin = 0;
    uint32_t lane = 0;
    (void)tracker_stream_find(r->shadow, owner->stream, &origin);
    if (wait) {
        (void)tracker_stream_find(r->shadow, stream, &lane);
    } else {
        lane = origin;
    }
    append_op(r, (graph_op_t){.kind = wait ? GRAPH_OP_WAIT : GRAPH_OP_RECORD,
                              .lane = (uint8_t)lane,
                              .timeline_lane = (uint8_t)origin,
                              .offset = point});
}

/* The lane of stream (index t in the tracker), made on its first use. */
static ordo_status_t lane_of(graph_recorder_t *r, ordo_stream_t *stream, uint32_t t,
                             uint32_t *out_lane, const char *api) {
    if (tracker_stream_find(r->shadow, stream, out_lane)) {
        return ORDO_OK;
    }
    ORDO_RETURN_IF_ERROR(ordo__tracker_stream_attach(r->shadow, stream, out_lane, api));
    tracker_stream_t *ts = r->shadow->streams[*out_lane];
    ts->capture = r;
    ts->progress = NULL; /* nothing runs: no op counts to note */
    ts->ops_submitted = NULL;
    r->lane_t[*out_lane] = t;
    return ORDO_OK;
}

/* The slot of buffer, made on its first use (room reserved). */
static ordo_status_t slot_of(graph_recorder_t *r, ordo_buffer_t *buffer, uint32_t *out_slot,
                             const char *api) {
    uint32_t slot = ordo__graph_map_find(&r->map, buffer);
    if (slot == UINT32_MAX) {
        ordo_buffer_t *shadow = ordo__alloc(sizeof *shadow, 0);
        if (!shadow) {
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a graph's slot");
        }
        shadow->magic = ORDO_BUFFER_MAGIC;
        shadow->tracker = r->shadow;
        slot = r->slot_count++;
        r->slots[slot] = (record_slot_t){buffer, shadow, UINT32_MAX, 0};
        ordo__graph_map_put(&r->map, buffer, slot);
    }
    *out_slot = slot;
    return ORDO_OK;
}

/* Undoes the slots made since there were `count` (a refused capture). */
static void slots_drop(graph_recorder_t *r, uint32_t count) {
    while (r->slot_count > count) {
        record_slot_t *s = &r->slots[--r->slot_count];
        ordo__graph_map_remove(&r->map, s->buffer);
        ordo__buffer_reclaim_now(r->shadow, s->shadow);
    }
}

/* Notes an access of slot by lane as exposed, merging it into the lane's
 * entry for the slot if it has one (room reserved). */
static void expose(graph_recorder_t *r, uint32_t lane, uint32_t slot, uint8_t mode) {
    record_slot_t *s = &r->slots[slot];
    for (uint32_t e = s->entry_first; e != UINT32_MAX; e = r->entries[e].next) {
        if (r->entries[e].lane == lane) {
            r->entries[e].mode |= mode;
            return;
        }
    }
    uint32_t e = r->entry_count++;
    r->entries[e] = (record_entry_t){lane, slot, s->entry_first, mode};
    s->entry_first = e;
}

/* Reserves what capturing a submission of count accesses can take, so that
 * nothing fails once its analysis has begun. */
static ordo_status_t reserve(graph_recorder_t *r, size_t count, const char *api) {
    /* A record and a wait per origin lane, and the work. */
    ORDO_RETURN_IF_ERROR(grow((void **)&r->ops, &r->op_capacity, sizeof *r->ops,
                              r->op_count + 2 * ORDO_TRACKER_MAX_STREAMS + 1, api));
    ORDO_RETURN_IF_ERROR(grow32((void **)&r->slots, &r->slot_capacity, sizeof *r->slots,
                                (uint64_t)r->slot_count + count, api));
    ORDO_RETURN_IF_ERROR(grow32((void **)&r->entries, &r->entry_capacity, sizeof *r->entries,
                                (uint64_t)r->entry_count + count, api));
    ORDO_RETURN_IF_ERROR(
        grow32((void **)&r->scratch, &r->scratch_capacity, sizeof *r->scratch, count, api));
    return ordo__graph_map_reserve(&r->map, (uint32_t)count, api);
}

/* Checks a submission as the submission paths do (handles in parameter
 * order, then the list), attaches its stream to the tracker, and records
 * it: its waits, found on the shadow tracker, then its work. */
static ordo_status_t capture(ordo_tracker_t *tracker, ordo_stream_t *stream,
                             const ordo_access_t *accesses, size_t count, graph_op_t work,
                             const char *api) {
    ORDO_RETURN_IF_ERROR(ordo__tracker_check(tracker, api));
    ORDO_RETURN_IF_ERROR(tracker_not_launching(tracker, api)); /* as every submission then */
    uint32_t t;
    if (!tracker_stream_find(tracker, stream, &t)) {
        ORDO_RETURN_IF_ERROR(ordo__hal_stream_check(stream, api));
    }
    if (count && !accesses) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, api, "accesses is NULL but count is %zu",
                           count);
    }
    if (count > ORDO_TRACKER_MAX_ACCESSES) {
        return ordo__error(ORDO_ERR_OUT_OF_RANGE, api, "%zu accesses; at most %u", count,
                           ORDO_TRACKER_MAX_ACCESSES);
    }
    ORDO_RETURN_IF_ERROR(ordo__tracker_check_accesses(tracker, accesses, count, api));
    ORDO_RETURN_IF_ERROR(tracker_stream_index(tracker, stream, &t, api));
    graph_recorder_t *r = atomic_load_explicit(&tracker->recorder, memory_order_relaxed);
    /* What can fail comes before the stream becomes a lane, and undoes
     * the slots it made: a refused submission leaves no trace in the
     * graph (no lane without work, no slot binding a buffer). */
    ORDO_RETURN_IF_ERROR(reserve(r, count, api));
    const uint32_t slots_before = r->slot_count;
    uint32_t lane;
    if (!tracker_stream_find(r->shadow, stream, &lane)) {
        lane = r->shadow->stream_count; /* the index lane_of will give it */
    }
    ordo_status_t st = ORDO_OK;
    for (size_t i = 0; i < count && st == ORDO_OK; ++i) {
        uint32_t slot = 0;
        st = slot_of(r, accesses[i].buffer, &slot, api);
        if (st == ORDO_OK) {
            r->scratch[i] = (ordo_access_t){r->slots[slot].shadow, accesses[i].mode};
        }
    }
    for (size_t i = 0; i < count && st == ORDO_OK && lane >= BUFFER_INLINE_READERS; ++i) {
        /* The shadow's prepare reserves these too: then it cannot fail. */
        st = ordo__buffer_reserve_points(r->scratch[i].buffer, api);
    }
    if (st == ORDO_OK) {
        st = lane_of(r, stream, t, &lane, api);
    }
    if (st != ORDO_OK) {
        slots_drop(r, slots_before);
        return st;
    }
    /* The waits (and records) go into the recording through the shadow's
     * capture; everything they need is reserved. */
    ORDO_RETURN_IF_ERROR(ordo__tracker_prepare_at(r->shadow, lane, r->scratch, count, api));
    work.lane = (uint8_t)lane;
    append_op(r, work);
    ++r->tasks;
    for (size_t i = 0; i < count; ++i) {
        uint32_t slot = ordo__graph_map_find(&r->map, accesses[i].buffer);
        r->slots[slot].mode |= (uint8_t)accesses[i].mode;
        if (r->scratch[i].buffer->writer.point == 0) { /* not written in the graph yet */
            expose(r, lane, slot, (uint8_t)accesses[i].mode);
        }
    }
    ordo__tracker_finish_at(r->shadow, lane, r->scratch, count);
    return ORDO_OK;
}

ordo_status_t ordo__graph_capture_launch(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                         const ordo_access_t *accesses, size_t count,
                                         ordo_launch_fn launch, void *ctx) {
    graph_op_t work = {.kind = GRAPH_OP_LAUNCH, .u.launch = {launch, ctx}};
    return capture(tracker, stream, accesses, count, work, "ordo_tracker_submit");
}

ordo_status_t ordo__graph_capture_host(ordo_tracker_t *tracker, ordo_stream_t *stream,
                                       const ordo_access_t *accesses, size_t count, ordo_host_fn fn,
                                       void *ctx) {
    graph_op_t work = {.kind = GRAPH_OP_HOST, .u.host = {fn, ctx}};
    return capture(tracker, stream, accesses, count, work, "ordo_tracker_submit_host");
}

/* ---- the graph --------------------------------------------------------------- */

/* A mask of lanes as a mask of the tracker's stream indices. */
static uint64_t tracker_mask(const graph_recorder_t *r, uint64_t lanes) {
    uint64_t mask = 0;
    for (; lanes; lanes &= lanes - 1) {
        mask |= (uint64_t)1 << r->lane_t[__builtin_ctzll(lanes)];
    }
    return mask;
}

static ordo_status_t make_lanes(graph_recorder_t *r, ordo_graph_t *g, const char *api) {
    g->lane_count = r->shadow->stream_count;
    if (!g->lane_count) {
        return ORDO_OK;
    }
    g->lanes = ordo__alloc(g->lane_count * sizeof *g->lanes, 0);
    g->learned =
        ordo__alloc((size_t)g->lane_count * ORDO_TRACKER_MAX_STREAMS * sizeof *g->learned, 0);
    if (!g->lanes || !g->learned) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a graph's streams");
    }
    for (uint32_t l = 0; l < g->lane_count; ++l) {
        const tracker_stream_t *ts = r->shadow->streams[l];
        graph_lane_t *lane = &g->lanes[l];
        lane->stream = ts->stream;
        lane->t = r->lane_t[l];
        lane->points = ts->point;
        for (uint32_t k = 0; k < g->lane_count; ++k) {
            if (k != l && ts->frontier[k] > 0) {
                lane->knows |= (uint64_t)1 << k;
            }
        }
    }
    return ORDO_OK;
}

ordo_status_t ordo__graph_lane_timeline(graph_lane_t *lane, const char *api) {
    if (lane->timeline) {
        return ORDO_OK;
    }
    if (ordo_signal_create(0, &lane->timeline) != ORDO_OK) {
        lane->timeline = NULL;
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot create a graph's timeline");
    }
    ordo__timeline_name_after(lane->timeline, "graph", lane->stream);
    return ORDO_OK;
}

static ordo_status_t make_ops(graph_recorder_t *r, ordo_graph_t *g, const char *api) {
    g->op_count = r->op_count;
    if (!g->op_count) {
        return ORDO_OK;
    }
    g->ops = ordo__alloc((size_t)g->op_count * sizeof *g->ops, 0);
    if (!g->ops) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a graph's operations");
    }
    memcpy(g->ops, r->ops, (size_t)g->op_count * sizeof *g->ops);
    for (uint64_t i = 0; i < g->op_count; ++i) {
        const graph_op_t *op = &g->ops[i];
        if (op->kind == GRAPH_OP_RECORD) {
            ++g->records;
            ORDO_RETURN_IF_ERROR(ordo__graph_lane_timeline(&g->lanes[op->lane], api));
        } else if (op->kind == GRAPH_OP_WAIT) {
            ++g->waits;
        }
    }
    g->tasks = r->tasks;
    return ORDO_OK;
}

/* The slots the recording used (a submission refused after its slots were
 * made leaves unused ones: dropped), their entries lane after lane, and the
 * map. Binds nothing yet. new_index: per recording slot, its graph slot. */
static ordo_status_t make_slots(graph_recorder_t *r, ordo_graph_t *g, uint32_t *new_index,
                                const char *api) {
    for (uint32_t i = 0; i < r->slot_count; ++i) {
        new_index[i] = r->slots[i].shadow->use_mask ? g->slot_count++ : UINT32_MAX;
    }
    g->entry_count = r->entry_count;
    if (g->slot_count) {
        g->slots = ordo__alloc(g->slot_count * sizeof *g->slots, 0);
        if (!g->slots) {
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a graph's slots");
        }
        ORDO_RETURN_IF_ERROR(ordo__graph_map_reserve(&g->map, g->slot_count, api));
    }
    if (g->entry_count) {
        g->entries = ordo__alloc(g->entry_count * sizeof *g->entries, 0);
        g->entry_next = ordo__alloc(g->entry_count * sizeof *g->entry_next, 0);
        if (!g->entries || !g->entry_next) {
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a graph's entries");
        }
    }
    for (uint32_t i = 0; i < r->slot_count; ++i) {
        if (new_index[i] == UINT32_MAX) {
            continue;
        }
        const ordo_buffer_t *shadow = r->slots[i].shadow;
        graph_slot_t *s = &g->slots[new_index[i]];
        s->mode = r->slots[i].mode;
        s->writer_t = shadow->writer.point ? (int8_t)r->lane_t[shadow->writer.stream] : -1;
        s->readers_t = tracker_mask(r, shadow->reader_mask);
        s->users_t = tracker_mask(r, shadow->use_mask);
        s->entry_first = UINT32_MAX;
        ordo__graph_map_put(&g->map, r->slots[i].buffer, new_index[i]);
    }
    /* Entries grouped by lane, in the order each lane exposed them. */
    uint32_t at = 0;
    for (uint32_t l = 0; l < g->lane_count; ++l) {
        g->lanes[l].entry_first = at;
        for (uint32_t e = 0; e < r->entry_count; ++e) {
            const record_entry_t *entry = &r->entries[e];
            if (entry->lane != l) {
                continue;
            }
            graph_slot_t *s = &g->slots[new_index[entry->slot]];
            g->entries[at] =
                (ordo_access_t){r->slots[entry->slot].buffer, (ordo_access_mode_t)entry->mode};
            g->entry_next[at] = s->entry_first;
            s->entry_first = at;
            ++at;
        }
        g->lanes[l].entry_count = at - g->lanes[l].entry_first;
    }
    return ORDO_OK;
}

/* Binds the slots to their buffers (the last step: it can fail only on a
 * buffer's points beyond the inline ones). */
static ordo_status_t bind_slots(graph_recorder_t *r, ordo_graph_t *g, const uint32_t *new_index,
                                const char *api) {
    int beyond_inline = 0;
    for (uint32_t l = 0; l < g->lane_count; ++l) {
        beyond_inline |= g->lanes[l].t >= BUFFER_INLINE_READERS;
    }
    for (uint32_t i = 0; i < r->slot_count; ++i) {
        if (new_index[i] == UINT32_MAX) {
            continue;
        }
        ordo_buffer_t *buffer = r->slots[i].buffer;
        if (beyond_inline) {
            ORDO_RETURN_IF_ERROR(ordo__buffer_reserve_points(buffer, api));
        }
        ++buffer->graph_binds;
        g->slots[new_index[i]].buffer = buffer;
    }
    return ORDO_OK;
}

/* The blocks the recording allocated and freed: the graph's from here on
 * (ordo__graph_free gives them back). */
static ordo_status_t take_blocks(graph_recorder_t *r, ordo_graph_t *g, const char *api) {
    for (uint32_t i = 0; i < r->block_count; ++i) {
        g->block_count += r->blocks[i].stream != NULL;
    }
    if (g->block_count) {
        g->blocks = ordo__alloc(g->block_count * sizeof *g->blocks, 0);
        if (!g->blocks) {
            g->block_count = 0;
            return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a graph's memory");
        }
    }
    uint32_t n = 0;
    for (uint32_t i = 0; i < r->block_count; ++i) {
        if (r->blocks[i].stream) {
            g->blocks[n++] = r->blocks[i];
            g->memory_bytes += r->blocks[i].bytes;
        }
    }
    r->blocks_taken = 1;
    return ORDO_OK;
}

static ordo_status_t make_graph(graph_recorder_t *r, ordo_graph_t **out_graph, const char *api) {
    ordo_graph_t *g = ordo__alloc(sizeof *g, 0);
    uint32_t *new_index = r->slot_count ? ordo__alloc(r->slot_count * sizeof *new_index, 0) : NULL;
    if (!g || (r->slot_count && !new_index)) {
        ordo__dealloc(g, sizeof *g, 0);
        ordo__dealloc(new_index, r->slot_count * sizeof *new_index, 0);
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a graph");
    }
    g->magic = ORDO_GRAPH_MAGIC;
    g->tracker = r->tracker;
    ordo_status_t st = take_blocks(r, g, api);
    if (st == ORDO_OK) {
        st = make_lanes(r, g, api);
    }
    if (st == ORDO_OK) {
        st = make_ops(r, g, api);
    }
    if (st == ORDO_OK) {
        st = make_slots(r, g, new_index, api);
    }
    if (st == ORDO_OK) {
        st = bind_slots(r, g, new_index, api);
    }
    if (st == ORDO_OK) {
        g->native_mode = r->native_mode;
        st = ordo__graph_lower(g, api);
    }
    ordo__dealloc(new_index, r->slot_count * sizeof *new_index, 0);
    if (st != ORDO_OK) {
        ordo__graph_free(g); /* unbinds what was bound */
        return st;
    }
    *out_graph = g;
    return ORDO_OK;
}

ordo_status_t ordo_tracker_record_end(ordo_tracker_t *tracker, ordo_graph_t **out_graph) {
    if (out_graph) {
        *out_graph = NULL;
    }
    ORDO_RETURN_IF_ERROR(ordo__tracker_check(tracker, __func__));
    if (!out_graph) {
        return ordo__error(ORDO_ERR_INVALID_ARGUMENT, __func__, "out_graph is NULL");
    }
    /* Under the lock: a refusal on another thread reads the recording
     * under it too, and must not find it freed. */
    ordo_rlock_lock(&tracker->lock);
    graph_recorder_t *r = atomic_load_explicit(&tracker->recorder, memory_order_relaxed);
    atomic_store_explicit(&tracker->recorder, NULL, memory_order_relaxed);
    ordo_rlock_unlock(&tracker->lock);
    if (!r) {
        return ordo__error(ORDO_ERR_BUSY, __func__,
                           "the tracker is not recording (ordo_tracker_record_begin)");
    }
    ordo_status_t st;
    if (r->refusal != ORDO_OK) {
        st = ordo__error(r->refusal, __func__, "the recording failed: %s", r->refusal_message);
    } else {
        st = make_graph(r, out_graph, __func__);
    }
    recorder_free(r);
    if (st == ORDO_OK) {
        atomic_fetch_add_explicit(&tracker->graphs, 1, memory_order_relaxed);
    }
    return st;
}
