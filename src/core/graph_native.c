/* Native graphs: a recording lowered to one graph of the device (a CUDA
 * graph), launched once per replay (ordo/graph.h, "Native graphs").
 *
 * LOWERING. A graph whose operations are launch functions and the waits and
 * records between its lanes (no host task: a host task is not device work)
 * becomes one node per launch function, in recorded order. A node's
 * dependencies are what the recorded waits ordered it after, found by one
 * pass over the operations that keeps, per lane L, its *frontier*: for
 * each lane K, the last node of K that L's next node must follow (or
 * none). Nodes of one lane form a chain (each follows the lane's previous
 * node), so the last node of K stands for all of K's earlier ones, and a
 * frontier is one entry per lane:
 *
 *   LAUNCH on L:     the node depends on every entry of L's frontier; L's
 *                    frontier becomes this node alone (it follows the rest).
 *   RECORD(L, p):    the point's frontier is a copy of L's.
 *   WAIT(M, L, p):   M's frontier takes, entry by entry, the later node of
 *                    its own and of the frontier of L's first record at or
 *                    after p (the point the wait is met by).
 *
 * A node thus follows exactly the nodes the op-by-op replay orders it
 * after: its lane's earlier work, and through chains of waits and records
 * the work before each record it waits for. The backend makes the nodes
 * (calling each launch function once, its work captured) and instantiates
 * the graph.
 *
 * REPLAY. The graph runs on lane 0's stream: every other lane signals its
 * timeline after its entry's waits and lane 0 waits for each; lane 0
 * launches the graph and signals its timeline; every other lane waits for
 * that. Each lane's work of the replay is thus, as in the op-by-op
 * replay, after its entry and before its exit point, and the whole graph
 * runs after every lane's entry and before every lane's exit: ordered at
 * least as the recording found (core/graph_internal.h, "WHY THIS IS EAGER
 * EXECUTION", holds with every lane's part of the replay made the whole
 * graph). Each lane's timeline takes one value per replay. */
#include <stdio.h>
#include <string.h>

#include "base/alloc.h"
#include "base/error.h"
#include "core/graph_internal.h"
#include "core/timeline_op.h"
#include "hal/hal.h"

#define NONE UINT32_MAX

/* A record's point and the frontier its lane had there. */
typedef struct lowered_record {
    uint64_t offset;
    uint32_t *frontier; /* lane_count entries */
} lowered_record_t;

typedef struct lowering {
    uint32_t lanes;
    uint32_t *frontier;         /* lanes x lanes: a lane's row, node per lane or NONE */
    lowered_record_t *records;  /* grouped by lane, each lane's in op order (offsets increase) */
    uint32_t *record_frontiers; /* records x lanes */
    uint64_t lane_start[ORDO_TRACKER_MAX_STREAMS + 1]; /* lane l's records from lane_start[l] */
    uint64_t lane_fill[ORDO_TRACKER_MAX_STREAMS];      /* ... to lane_fill[l], so far */
    hal_graph_node_t *nodes;
    uint32_t node_count;
    uint32_t *deps; /* the nodes' dependencies, node after node */
    uint64_t dep_count;
} lowering_t;

static void lowering_free(lowering_t *w, const ordo_graph_t *graph) {
    const uint32_t n = w->lanes;
    ordo__dealloc(w->frontier, (size_t)n * n * sizeof *w->frontier, 0);
    ordo__dealloc(w->records, graph->records * sizeof *w->records, 0);
    ordo__dealloc(w->record_frontiers, graph->records * n * sizeof *w->record_frontiers, 0);
    ordo__dealloc(w->nodes, graph->tasks * sizeof *w->nodes, 0);
    ordo__dealloc(w->deps, graph->tasks * n * sizeof *w->deps, 0);
}

static ordo_status_t plan(lowering_t *w, const ordo_graph_t *graph, const char *api) {
    const uint32_t n = graph->lane_count;
    w->lanes = n;
    w->frontier = ordo__alloc((size_t)n * n * sizeof *w->frontier, 0);
    w->records = graph->records ? ordo__alloc(graph->records * sizeof *w->records, 0) : NULL;
    w->record_frontiers =
        graph->records ? ordo__alloc(graph->records * n * sizeof *w->record_frontiers, 0) : NULL;
    w->nodes = ordo__alloc(graph->tasks * sizeof *w->nodes, 0);
    w->deps = ordo__alloc(graph->tasks * n * sizeof *w->deps, 0);
    if (!w->frontier || (graph->records && (!w->records || !w->record_frontiers)) || !w->nodes ||
        !w->deps) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a graph's lowering");
    }
    memset(w->frontier, 0xff, (size_t)n * n * sizeof *w->frontier);
    for (uint64_t i = 0; i < graph->op_count; ++i) {
        if (graph->ops[i].kind == GRAPH_OP_RECORD) {
            ++w->lane_start[graph->ops[i].lane + 1];
        }
    }
    for (uint32_t l = 0; l < n; ++l) {
        w->lane_start[l + 1] += w->lane_start[l];
        w->lane_fill[l] = w->lane_start[l];
    }
    for (uint64_t i = 0; i < graph->op_count; ++i) {
        const graph_op_t *op = &graph->ops[i];
        uint32_t *row = &w->frontier[(size_t)op->lane * n];
        switch (op->kind) {
        case GRAPH_OP_LAUNCH: {
            hal_graph_node_t *node = &w->nodes[w->node_count];
            uint32_t *deps = &w->deps[w->dep_count];
            uint32_t count = 0;
            for (uint32_t k = 0; k < n; ++k) {
                if (row[k] != NONE) {
                    deps[count++] = row[k];
                }
            }
            *node = (hal_graph_node_t){graph->lanes[op->lane].stream, op->u.launch.fn,
                                       op->u.launch.ctx, deps, count};
            w->dep_count += count;
            memset(row, 0xff, n * sizeof *row);
            row[op->lane] = w->node_count++;
            break;
        }
        case GRAPH_OP_RECORD: {
            const uint64_t at = w->lane_fill[op->lane]++;
            lowered_record_t *r = &w->records[at];
            r->offset = op->offset;
            r->frontier = &w->record_frontiers[at * n];
            memcpy(r->frontier, row, n * sizeof *row);
            break;
        }
        case GRAPH_OP_WAIT: {
            /* The point is met by the first record of the waited lane at
             * or after it, among those before the wait (binary search:
             * a lane's offsets increase). */
            uint64_t lo = w->lane_start[op->timeline_lane], hi = w->lane_fill[op->timeline_lane];
            while (lo < hi) {
                const uint64_t mid = lo + (hi - lo) / 2;
                if (w->records[mid].offset < op->offset) {
                    lo = mid + 1;
                } else {
                    hi = mid;
                }
            }
            const uint32_t *met =
                lo < w->lane_fill[op->timeline_lane] ? w->records[lo].frontier : NULL;
            if (!met) {
                return ordo__error(ORDO_ERR_UNSUPPORTED, api,
                                   "a recorded wait has no record before it");
            }
            for (uint32_t k = 0; k < n; ++k) {
                if (met[k] != NONE && (row[k] == NONE || met[k] > row[k])) {
                    row[k] = met[k];
                }
            }
            break;
        }
        default:
            return ordo__error(ORDO_ERR_UNSUPPORTED, api,
                               "a graph with host tasks cannot be a native graph (a host task is "
                               "not device work)");
        }
    }
    return ORDO_OK;
}

void ordo__graph_native_free(ordo_graph_t *graph) {
    if (!graph->native) {
        return;
    }
    const hal_backend_t *backend = graph->tracker->device->backend;
    backend->graph_free(graph->native, graph->native_launched);
    graph->native = NULL;
    graph->native_launched = 0;
    atomic_store_explicit(&graph->native_on, 0, memory_order_relaxed);
}

ordo_status_t ordo__graph_lower(ordo_graph_t *graph, const char *api) {
    graph->native_stale = 0;
    const hal_backend_t *backend = graph->tracker->device->backend;
    if (graph->native_mode == ORDO_GRAPH_NATIVE_OFF || graph->tasks == 0) {
        /* Nothing to lower, in every mode: replays enqueue only waits. */
        ordo__graph_native_free(graph);
        return ORDO_OK;
    }
    ordo_status_t st = ORDO_OK;
    if (!backend->graph_make) {
        st = ordo__error(ORDO_ERR_UNSUPPORTED, api, "the %s backend has no native graphs",
                         backend->name);
    }
    lowering_t w = {0};
    if (st == ORDO_OK) {
        st = plan(&w, graph, api);
    }
    for (uint32_t l = 0; st == ORDO_OK && l < graph->lane_count; ++l) {
        st = ordo__graph_lane_timeline(&graph->lanes[l], api);
    }
    void *native = NULL;
    if (st == ORDO_OK && graph->native && backend->graph_remake) {
        /* Lowered before: the backend may update that one in place. */
        st = backend->graph_remake(graph->native, w.nodes, w.node_count, &native, api);
        if (st == ORDO_OK && native == graph->native) {
            lowering_free(&w, graph); /* updated in place: native_on stays set */
            return ORDO_OK;
        }
    } else if (st == ORDO_OK) {
        st = backend->graph_make(graph->lanes[0].stream, w.nodes, w.node_count, &native, api);
    }
    ordo__graph_native_free(graph); /* the one lowered before, if any: replaced or spent */
    lowering_free(&w, graph);
    if (st != ORDO_OK) {
        if (graph->native_mode != ORDO_GRAPH_NATIVE_REQUIRE) {
            return ORDO_OK; /* AUTO: replayed op by op */
        }
        graph->native_stale = 1; /* tried again at the next replay, never op by op */
        return st;
    }
    graph->native = native;
    atomic_store_explicit(&graph->native_on, 1, memory_order_relaxed);
    return ORDO_OK;
}

ordo_status_t ordo__graph_run_native(ordo_graph_t *graph, const uint64_t *base, char *message,
                                     size_t capacity, uint64_t *out_broken) {
    const hal_backend_t *backend = graph->tracker->device->backend;
    graph_lane_t *lanes = graph->lanes;
    graph_lane_t *first = &lanes[0];
    ordo_status_t st = ORDO_OK;
    const char *what = "an enqueue was refused during the replay";
    uint32_t at = 0; /* the lane the refusal broke */
    /* Every lane's entry before the graph. */
    for (uint32_t l = 1; st == ORDO_OK && l < graph->lane_count; ++l) {
        at = l;
        st = timeline_op(lanes[l].stream, lanes[l].timeline, &lanes[l].spare_refs, base[l] + 1, 0);
        if (st == ORDO_OK) {
            at = 0;
            st =
                timeline_op(first->stream, lanes[l].timeline, &lanes[l].spare_refs, base[l] + 1, 1);
            if (st == ORDO_OK) { /* the joins are the replay's waits_emitted */
                timeline_trace_wait(first->stream, lanes[l].timeline, base[l] + 1);
            }
        }
    }
    if (st == ORDO_OK) {
        st = backend->graph_launch(graph->native);
        if (st == ORDO_OK) {
            graph->native_launched = 1;
            st = timeline_op(first->stream, first->timeline, &first->spare_refs, base[0] + 1, 0);
        } else {
            what = "the native graph's launch was refused";
        }
    }
    if (st != ORDO_OK) {
        /* As run_ops: the broken lane's timeline fails, so the lanes that
         * wait on it fail instead of waiting forever; lane 0's too, which
         * every other lane waits on below. */
        snprintf(message, capacity, "ordo_graph_replay: %s: %s", what, ordo_error_message());
        ordo__graph_lane_broken(&lanes[at], st, message, true);
        if (at != 0) {
            ordo__graph_lane_broken(first, st, message, false);
        }
        *out_broken = ((uint64_t)1 << at) | 1u;
    }
    /* Every lane's exit after the graph (or after lane 0's failure). */
    for (uint32_t l = 1; l < graph->lane_count; ++l) {
        ordo_status_t exit =
            timeline_op(lanes[l].stream, first->timeline, &first->spare_refs, base[0] + 1, 1);
        if (exit != ORDO_OK) {
            /* This lane's later work would not follow the graph: it fails
             * (its timeline, and a best-effort failing task), and the
             * graph is spent, as in run_ops. */
            if (st == ORDO_OK) {
                st = exit;
                snprintf(message, capacity, "ordo_graph_replay: %s: %s", what,
                         ordo_error_message());
            }
            ordo__graph_lane_broken(&lanes[l], exit, message, true);
            *out_broken |= (uint64_t)1 << l;
        } else {
            timeline_trace_wait(lanes[l].stream, first->timeline, base[0] + 1);
        }
    }
    return st;
}
