/* Replaying a graph: the entry's waits, the recorded ops, the exit's
 * histories and frontiers (core/graph_internal.h, "REPLAY", and why it is
 * eager execution). */
#include <stdio.h>
#include <string.h>

#include "base/error.h"
#include "core/frontier.h"
#include "core/graph_internal.h"
#include "core/timeline_op.h"
#include "hal/hal.h"
#include "sync/signal_access.h"

#define API "ordo_graph_replay"

/* Stands for a launch function that failed at a replay: fails its stream in
 * the launch's place, so the work ordered after it fails instead of
 * running without it or waiting for records that would never come. */
static ordo_status_t launch_failed_task(void *ctx) {
    return ordo_fail((ordo_status_t)(uintptr_t)ctx,
                     "a launch function failed during ordo_graph_replay");
}

void ordo__graph_lane_broken(graph_lane_t *lane, ordo_status_t status, const char *message,
                             bool refused_here) {
    (void)ordo_signal_fail(lane->timeline, status, message);
    lane->refused |= refused_here;
    ordo_stream_t *stream = lane->stream;
    const hal_backend_t *backend = stream->device->backend;
    if (backend->failure(stream) == ORDO_OK) {
        /* Refused by this healthy stream: the graph, not a stream, is at
         * fault from here on (check_streams). A refusal by a failed stream
         * is that stream's failure, which later replays report; so is a
         * lane broken only for another's refusal. */
        lane->spent |= refused_here;
        /* The stream itself goes on: best effort, its next work learns of
         * the gap as a failure. */
        (void)backend->host_task(stream, launch_failed_task, (void *)(uintptr_t)status);
    }
}

/* Refuses a replay of a graph an earlier replay could not enqueue all of
 * on a healthy stream (a spent lane: checked first, since the failure the
 * refusal then left on the lanes' streams would read as theirs), or on a
 * stream that has failed: nothing is enqueued. */
static ordo_status_t check_streams(const ordo_graph_t *graph) {
    for (uint32_t l = 0; l < graph->lane_count; ++l) {
        if (ORDO_UNLIKELY(graph->lanes[l].spent)) {
            return ordo__error(ORDO_ERR_UNAVAILABLE, API,
                               "an earlier replay could not enqueue all its work, so the graph "
                               "cannot be replayed any more (destroy it): %s",
                               graph->spent_why);
        }
    }
    /* The stream that refused first: the failures ordo then put on the
     * other lanes' streams (a failing task in the gap) only echo it. */
    for (int refused = 1; refused >= 0; --refused) {
        for (uint32_t l = 0; l < graph->lane_count; ++l) {
            if (refused && !graph->lanes[l].refused) {
                continue;
            }
            ordo_stream_t *stream = graph->lanes[l].stream;
            ordo_status_t st = stream->device->backend->status(stream);
            if (ORDO_UNLIKELY(st != ORDO_OK)) {
                return ordo__error_as(st, API);
            }
        }
    }
    return ORDO_OK;
}

/* What each lane learns at exit from the lanes its recorded waits ordered
 * it after: their frontiers after the entries, and their points before
 * this replay's (core/graph_internal.h, (d)). */
static void learn(ordo_graph_t *graph) {
    const ordo_tracker_t *tracker = graph->tracker;
    const uint32_t n = frontier_stream_count(tracker);
    for (uint32_t l = 0; l < graph->lane_count; ++l) {
        uint64_t knows = graph->lanes[l].knows;
        if (!knows) {
            continue;
        }
        uint64_t *row = &graph->learned[(size_t)l * ORDO_TRACKER_MAX_STREAMS];
        memset(row, 0, n * sizeof *row);
        for (; knows; knows &= knows - 1) {
            const uint32_t k = graph->lanes[__builtin_ctzll(knows)].t;
            const uint64_t *frontier = frontier_of(tracker, k);
            for (uint32_t s = 0; s < n; ++s) {
                row[s] = row[s] < frontier[s] ? frontier[s] : row[s];
            }
            const uint64_t before = tracker->streams[k]->point;
            row[k] = row[k] < before ? before : row[k];
        }
    }
}

/* The waits and records a broken lane does not enqueue: its ops from
 * index `from` (the refused one) on. */
typedef struct unrun {
    uint64_t waits, records;
} unrun_t;

static void count_unrun(const ordo_graph_t *graph, uint64_t from, uint32_t lane, unrun_t *unrun) {
    for (uint64_t j = from; j < graph->op_count; ++j) {
        const graph_op_t *op = &graph->ops[j];
        if (op->lane == lane) {
            unrun->waits += op->kind == GRAPH_OP_WAIT;
            unrun->records += op->kind == GRAPH_OP_RECORD;
        }
    }
}

/* Enqueues the ops, in recorded order. A refused op does not stop the
 * replay (core/graph_internal.h, (e)); the first refusal's status is
 * returned, its message in message. *unrun: what broken lanes left out. */
static ordo_status_t run_ops(ordo_graph_t *graph, const uint64_t *base, char *message,
                             size_t capacity, uint64_t *out_broken, unrun_t *unrun) {
    const hal_backend_t *backend = graph->tracker->device->backend;
    ordo_status_t (*host_task)(ordo_stream_t *, ordo_host_fn, void *) = backend->host_task;
    graph_lane_t *lanes = graph->lanes;
    ordo_status_t first = ORDO_OK;
    uint64_t broken = 0; /* lanes an enqueue was refused on (by index) */
    for (uint64_t i = 0; i < graph->op_count; ++i) { /* ops is NULL in an empty graph */
        const graph_op_t *op = &graph->ops[i];
        graph_lane_t *lane = &lanes[op->lane];
        if (ORDO_UNLIKELY(broken & ((uint64_t)1 << op->lane))) {
            continue; /* nothing more on it: it would run unordered */
        }
        ordo_status_t st;
        switch (op->kind) {
        case GRAPH_OP_HOST:
            st = host_task(lane->stream, op->u.host.fn, op->u.host.ctx);
            break;
        case GRAPH_OP_LAUNCH: {
            uint64_t messages = ordo__error_count();
            st = op->u.launch.fn(op->u.launch.ctx, lane->stream);
            if (ORDO_UNLIKELY(st != ORDO_OK)) {
                st = ordo__tracker_launch_failed(st, ordo__error_count() != messages, API);
                if (first == ORDO_OK) {
                    snprintf(message, capacity, "%s", ordo_error_message()); /* names API */
                    first = st;
                }
                if (host_task(lane->stream, launch_failed_task, (void *)(uintptr_t)st) == ORDO_OK) {
                    continue;
                }
                break; /* not even that: the lane breaks, below */
            }
            break;
        }
        case GRAPH_OP_RECORD:
            st = timeline_op(lane->stream, lane->timeline, &lane->spare_refs,
                             base[op->lane] + op->offset, 0);
            break;
        default: {
            graph_lane_t *origin = &lanes[op->timeline_lane];
            const uint64_t value = base[op->timeline_lane] + op->offset;
            st = timeline_op(lane->stream, origin->timeline, &origin->spare_refs, value, 1);
            if (st == ORDO_OK) { /* counted in waits_emitted (finish), drawn as the tracker's */
                timeline_trace_wait(lane->stream, origin->timeline, value);
            }
            break;
        }
        }
        if (ORDO_UNLIKELY(st != ORDO_OK)) {
            /* An enqueue refused (a failed stream, or no memory on a
             * healthy one): the lane stops here, so nothing after the gap
             * runs unordered, and its timeline fails, so nobody waits for a
             * point it will not reach (their streams fail instead). The
             * graph is spent: check_streams refuses its next replay. */
            if (first == ORDO_OK) {
                snprintf(message, capacity, "%s: an enqueue was refused during the replay: %s", API,
                         ordo_error_message());
                first = st;
            }
            broken |= (uint64_t)1 << op->lane;
            count_unrun(graph, i, op->lane, unrun);
            ordo__graph_lane_broken(lane, st, message, true);
        }
    }
    *out_broken = broken;
    return first;
}

/* Each lane's point, each slot's history as the recording left it, and
 * what the lanes learnt (core/graph_internal.h, step 3). */
static void finish(ordo_graph_t *graph, uint64_t broken, int native, const unrun_t *unrun) {
    ordo_tracker_t *tracker = graph->tracker;
    uint64_t point[ORDO_TRACKER_MAX_STREAMS]; /* by the tracker's stream index */
    for (uint32_t l = 0; l < graph->lane_count; ++l) {
        point[graph->lanes[l].t] = ordo__tracker_point_finished(tracker, graph->lanes[l].t);
    }
    for (uint32_t i = 0; i < graph->slot_count; ++i) {
        const graph_slot_t *s = &graph->slots[i];
        ordo_buffer_t *b = s->buffer;
        for (uint64_t users = s->users_t; users; users &= users - 1) {
            const uint32_t t = (uint32_t)__builtin_ctzll(users);
            buffer_set_last_point(b, t, point[t]);
        }
        b->use_mask |= s->users_t;
        if (s->writer_t >= 0) {
            b->writer = (buffer_use_t){(uint32_t)s->writer_t, point[s->writer_t]};
            b->reader_mask = s->readers_t;
        } else {
            b->reader_mask |= s->readers_t;
        }
    }
    const uint32_t n = frontier_stream_count(tracker);
    for (uint32_t l = 0; l < graph->lane_count; ++l) {
        if (!graph->lanes[l].knows || (broken & ((uint64_t)1 << l))) {
            continue; /* a broken lane did not enqueue the waits it learnt from */
        }
        const uint64_t *row = &graph->learned[(size_t)l * ORDO_TRACKER_MAX_STREAMS];
        uint64_t *frontier = tracker->streams[graph->lanes[l].t]->frontier;
        for (uint32_t s = 0; s < n; ++s) {
            frontier[s] = frontier[s] < row[s] ? row[s] : frontier[s];
        }
    }
    /* Single writer, as the tracker's own counters. A native replay joins
     * every other lane into lane 0 and back: two waits and a point each,
     * and lane 0's point. */
    const uint64_t joins = graph->lane_count - 1u;
    atomic_store_explicit(&tracker->waits_emitted,
                          atomic_load_explicit(&tracker->waits_emitted, memory_order_relaxed) +
                              (native ? 2 * joins : graph->waits - unrun->waits),
                          memory_order_relaxed);
    atomic_store_explicit(&tracker->points_recorded,
                          atomic_load_explicit(&tracker->points_recorded, memory_order_relaxed) +
                              (native ? joins + 1 : graph->records - unrun->records),
                          memory_order_relaxed);
}

/* Whether a lane of the graph holds a wait not yet met back on the host. */
static int lanes_wait(const ordo_graph_t *graph) {
    const hal_backend_t *backend = graph->tracker->device->backend;
    for (uint32_t l = 0; backend->stream_waits_unmet && l < graph->lane_count; ++l) {
        if (backend->stream_waits_unmet(graph->lanes[l].stream)) {
            return 1;
        }
    }
    return 0;
}

/* The graph's own blocks read released between replays (their handles
 * ended in the recording); live for the replay's entry and exit. */
static void blocks_mark(const ordo_graph_t *graph, uint32_t magic) {
    for (uint32_t i = 0; i < graph->block_count; ++i) {
        graph->blocks[i].buffer->magic = magic;
    }
}

static ordo_status_t replay(ordo_graph_t *graph);

ordo_status_t ordo_graph_replay(ordo_graph_t *graph) {
    ORDO_RETURN_IF_ERROR(ordo__graph_check(graph, API));
    ordo_tracker_t *tracker = graph->tracker;
    ORDO_RETURN_IF_ERROR(tracker_not_launching(tracker, API));
    /* Its launch functions (at the lowering, or op by op) run inside. */
    tracker_launch_begin(tracker);
    tracker->replaying++;
    ordo_status_t st = replay(graph);
    tracker->replaying--;
    tracker_launch_end(tracker);
    return st;
}

static ordo_status_t replay(ordo_graph_t *graph) {
    ordo_tracker_t *tracker = graph->tracker;
    if (ORDO_UNLIKELY(tracker_recording(tracker))) {
        ORDO_RETURN_IF_ERROR(ordo__graph_refuse(
            tracker, API, "a replay cannot be recorded (replay the graph outside the recording)"));
    }
    ORDO_RETURN_IF_ERROR(check_streams(graph));
    if (ORDO_UNLIKELY(graph->native_stale)) {
        /* Rebound since it was lowered: the launch functions are called
         * again, for the new buffers. */
        ORDO_RETURN_IF_ERROR(ordo__graph_lower(graph, API));
    }
    uint64_t base[ORDO_TRACKER_MAX_STREAMS]; /* by lane */
    for (uint32_t l = 0; l < graph->lane_count; ++l) {
        const graph_lane_t *lane = &graph->lanes[l];
        /* Either way of replaying takes at most this many values. */
        const uint64_t advance = lane->points > 1 ? lane->points : 1;
        if (ORDO_UNLIKELY(lane->base > ORDO_SIGNAL_VALUE_MAX - advance)) {
            return ordo__error(
                ORDO_ERR_OUT_OF_RANGE, API, "the graph's timelines are spent after %llu replays",
                (unsigned long long)atomic_load_explicit(&graph->replays, memory_order_relaxed));
        }
        base[l] = lane->base;
    }
    /* 1. The entry: each lane ordered after the history of what it
     * exposes. A refusal here leaves only waits enqueued, which stand. */
    blocks_mark(graph, ORDO_BUFFER_MAGIC);
    for (uint32_t l = 0; l < graph->lane_count; ++l) {
        const graph_lane_t *lane = &graph->lanes[l];
        ordo_status_t st =
            lane->entry_count
                ? ordo__tracker_prepare_at(tracker, lane->t, &graph->entries[lane->entry_first],
                                           lane->entry_count, API)
                : ORDO_OK;
        if (ORDO_UNLIKELY(st != ORDO_OK)) {
            blocks_mark(graph, ORDO_BUFFER_RELEASED);
            return st;
        }
    }
    learn(graph);
    /* A native replay joins every lane's entry before the graph and makes
     * every lane's later work wait for all of it. Where a lane holds back
     * on the host a wait whose signal has not reached its value (its own,
     * or an entry wait just enqueued), that wait may be met only by
     * work enqueued after the replay on another lane, which the join would
     * make wait for it: this replay goes op by op, ordered as the
     * recording found, no more. Without an unmet held wait every lane's
     * earlier work is on the device or held behind nothing that waits for
     * later work. */
    const int native = graph->native != NULL && !lanes_wait(graph);
    /* 2. The ops, above this replay's base on every timeline. */
    for (uint32_t l = 0; l < graph->lane_count; ++l) {
        graph->lanes[l].base += native ? 1 : graph->lanes[l].points;
    }
    char message[512];
    uint64_t broken = 0;
    unrun_t unrun = {0, 0};
    ordo_status_t st = native
                           ? ordo__graph_run_native(graph, base, message, sizeof message, &broken)
                           : run_ops(graph, base, message, sizeof message, &broken, &unrun);
    /* 3. The exit, whatever happened: what was enqueued may run. */
    finish(graph, broken, native, &unrun);
    if (ORDO_UNLIKELY(broken) && !graph->spent_why[0]) {
        snprintf(graph->spent_why, sizeof graph->spent_why, "%s", message);
    }
    blocks_mark(graph, ORDO_BUFFER_RELEASED);
    atomic_store_explicit(&graph->replays,
                          atomic_load_explicit(&graph->replays, memory_order_relaxed) + 1,
                          memory_order_relaxed);
    if (ORDO_UNLIKELY(st != ORDO_OK)) {
        return ordo__error(st, NULL, "%s", message); /* it names API already */
    }
    return ORDO_OK;
}
