/* Native graphs on CUDA: a recorded ordo graph lowered to one CUDA graph
 * (hal_backend.graph_make, core/graph_native.c).
 *
 * Each node's launch function is called once, with its stream's work
 * captured: the thread's capture target (ordo__cuda_capturing) makes
 * ordo_cuda_stream_enqueue and ordo_cuda_stream_handle of that stream hand
 * out a private capture stream instead of the stream's own, so the work is
 * recorded, in THREAD_LOCAL mode, into a graph of its own and nothing
 * reaches the device. Every other stream operation of this backend on the
 * capturing thread is refused meanwhile (a host task, a signal, a wait, an
 * event, a synchronize: none of them could be part of the CUDA graph, and
 * run now they would happen once instead of at each replay), and the
 * lowering fails with the refusal. A node's captured graph becomes a
 * child-graph node (an empty node if the function enqueued nothing) after
 * the nodes it depends on; the whole is instantiated once. The graph's
 * launch goes on its stream through the stream's order (held ops first),
 * and so does its destruction: cuGraphExecDestroy may be called with
 * launches in flight, but not before a launch held on the lane is issued.
 *
 * A graph lowered again (a rebind, a refresh) is captured again, then
 * updated in place with cuGraphExecUpdate when the topology allows and no
 * launch of it is held on the lane or being issued (claimed as a direct
 * issue of the stream, so none starts meanwhile); otherwise the new
 * capture is instantiated and the old graph freed in stream order. */
#include <stdio.h>
#include <string.h>

#include "backends/cuda/cuda_internal.h"
#include "base/alloc.h"
#include "base/error.h"

/* A capture under way on this thread: on capture_node's stack, reached
 * through one pointer (the library's thread-local storage is kept small:
 * some of it is initial-exec, which a dlopen must find room for). */
struct cuda_capture {
    const cuda_stream_t *stream;
    CUstream cu;
    ordo_status_t refusal; /* the first operation refused meanwhile */
    char message[256];     /* its message */
};

_Thread_local cuda_capture_t *ordo__cuda_capturing;

typedef struct cuda_graph {
    cuda_device_t *dev;
    cuda_stream_t *stream; /* where it is launched */
    CUgraphExec exec;
    void *free_op; /* the destroy's place on stream, reserved when made */
} cuda_graph_t;

CUstream ordo__cuda_capture_stream(const cuda_stream_t *s) {
    const cuda_capture_t *c = ordo__cuda_capturing;
    return c && s == c->stream ? c->cu : NULL;
}

ordo_status_t ordo__cuda_capture_refuse(const char *api) {
    ordo_status_t st = ordo__error(
        ORDO_ERR_UNSUPPORTED, api,
        "a launch function that is being captured into a CUDA graph may only enqueue device work "
        "on its own stream (ordo_cuda_stream_enqueue, or the handle ordo_cuda_stream_handle "
        "gives)");
    cuda_capture_t *c = ordo__cuda_capturing;
    if (c->refusal == ORDO_OK) {
        c->refusal = st;
        snprintf(c->message, sizeof c->message, "%s", ordo_error_message());
    }
    return st;
}

static int has_graphs(const cuda_api_t *cu) {
    return cu->StreamBeginCapture && cu->StreamEndCapture && cu->GraphCreate &&
           cu->GraphAddChildGraphNode && cu->GraphAddEmptyNode && cu->GraphGetNodes &&
           cu->GraphDestroy && cu->GraphInstantiateWithFlags && cu->GraphLaunch &&
           cu->GraphExecDestroy;
}

/* Captures node's work into *out_child (NULL when it enqueued nothing). */
static ordo_status_t capture_node(const cuda_device_t *d, CUstream capture,
                                  const hal_graph_node_t *node, CUgraph *out_child,
                                  const char *api) {
    const cuda_api_t *cu = d->cu;
    *out_child = NULL;
    CUresult r = cu->StreamBeginCapture(capture, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
    if (r != CUDA_SUCCESS) {
        return ordo__cuda_error(r, api, "cuStreamBeginCapture");
    }
    cuda_capture_t here = {node->stream->impl, capture, ORDO_OK, ""};
    ordo__cuda_capturing = &here;
    ordo_status_t st = node->launch(node->ctx, node->stream);
    ordo__cuda_capturing = NULL;
    char launch_message[256] = ""; /* its failure's, kept before a message of ours */
    if (st != ORDO_OK) {
        snprintf(launch_message, sizeof launch_message, "%s", ordo_error_message());
    }
    /* User code may have made another context current (another device's):
     * the graph calls that follow need the device's, as the enqueues of
     * an op-by-op replay get theirs. */
    ordo_status_t entered = ordo__cuda_enter(d, api);
    if (entered != ORDO_OK) {
        CUgraph dropped = NULL;
        if (cu->StreamEndCapture(capture, &dropped) == CUDA_SUCCESS && dropped) {
            (void)cu->GraphDestroy(dropped);
        }
        return entered;
    }
    CUgraph child = NULL;
    r = cu->StreamEndCapture(capture, &child);
    if (here.refusal != ORDO_OK) {
        st = ordo__error(here.refusal, api, "cannot lower the graph to a CUDA graph: %s",
                         here.message);
    } else if (r != CUDA_SUCCESS) {
        /* The driver ended the capture: the function enqueued work a CUDA
         * graph cannot hold, or made a call a capture forbids (its own
         * failure, if any, came from that). */
        char detail[160];
        ordo__cuda_describe(r, detail, sizeof detail);
        st = ordo__error(ORDO_ERR_UNSUPPORTED, api,
                         "cannot lower the graph to a CUDA graph: cuStreamEndCapture: %s (a "
                         "launch function did what a capture cannot hold)",
                         detail);
    } else if (st != ORDO_OK) {
        st = ordo__error(ordo_status_is_error(st) ? st : ORDO_ERR_ABORTED, api,
                         "a launch function returned %s while the graph was lowered to a CUDA "
                         "graph: %s",
                         ordo_status_name(st), launch_message);
    }
    if (st != ORDO_OK) {
        if (child) {
            (void)cu->GraphDestroy(child);
        }
        return st;
    }
    size_t count = 0;
    r = cu->GraphGetNodes(child, NULL, &count);
    if (r != CUDA_SUCCESS) {
        (void)cu->GraphDestroy(child);
        return ordo__cuda_error(r, api, "cuGraphGetNodes");
    }
    if (count == 0) {
        (void)cu->GraphDestroy(child);
        child = NULL;
    }
    *out_child = child;
    return ORDO_OK;
}

/* Builds the graph's template; the caller destroys it. */
static ordo_status_t build(const cuda_device_t *d, CUstream capture, const hal_graph_node_t *nodes,
                           uint32_t count, CUgraph graph, const char *api) {
    const cuda_api_t *cu = d->cu;
    CUgraphNode *made = ordo__alloc((size_t)count * sizeof *made, 0);
    uint32_t deps_max = 0;
    for (uint32_t i = 0; i < count; ++i) {
        deps_max = nodes[i].dep_count > deps_max ? nodes[i].dep_count : deps_max;
    }
    CUgraphNode *deps = deps_max ? ordo__alloc((size_t)deps_max * sizeof *deps, 0) : NULL;
    ordo_status_t st = ORDO_OK;
    if (!made || (deps_max && !deps)) {
        st = ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a CUDA graph's nodes");
    }
    for (uint32_t i = 0; st == ORDO_OK && i < count; ++i) {
        for (uint32_t k = 0; k < nodes[i].dep_count; ++k) {
            deps[k] = made[nodes[i].deps[k]];
        }
        CUgraph child = NULL;
        st = capture_node(d, capture, &nodes[i], &child, api);
        if (st != ORDO_OK) {
            break;
        }
        CUresult r =
            child ? cu->GraphAddChildGraphNode(&made[i], graph, deps, nodes[i].dep_count, child)
                  : cu->GraphAddEmptyNode(&made[i], graph, deps, nodes[i].dep_count);
        if (child) {
            (void)cu->GraphDestroy(child); /* the node holds its own copy */
        }
        if (r != CUDA_SUCCESS) {
            st = ordo__cuda_error(r, api,
                                  child ? "cuGraphAddChildGraphNode" : "cuGraphAddEmptyNode");
            if (st != ORDO_ERR_OUT_OF_MEMORY) {
                /* The driver refuses the captured work as a node (memory
                 * nodes, say): the graph cannot be lowered. */
                char why[256];
                snprintf(why, sizeof why, "%s", ordo_error_message());
                st = ordo__error(ORDO_ERR_UNSUPPORTED, NULL,
                                 "cannot lower the graph to a CUDA graph: %s", why);
            }
        }
    }
    ordo__dealloc(made, (size_t)count * sizeof *made, 0);
    ordo__dealloc(deps, (size_t)deps_max * sizeof *deps, 0);
    return st;
}

/* Checks that graphs can be lowered here and now. */
static ordo_status_t lowering_check(cuda_device_t *d, const char *api) {
    if (!has_graphs(d->cu)) {
        return ordo__error(ORDO_ERR_UNSUPPORTED, api,
                           "the CUDA driver lacks the graph entry points (CUDA 11.4 or later)");
    }
    if (ordo__cuda_capturing) {
        return ordo__error(ORDO_ERR_UNSUPPORTED, api,
                           "a graph cannot be lowered from inside a launch function");
    }
    return ordo__cuda_enter(d, api);
}

/* Captures nodes into a new CUDA graph, *out_graph (the caller destroys it). */
static ordo_status_t lower(cuda_device_t *d, const hal_graph_node_t *nodes, uint32_t count,
                           CUgraph *out_graph, const char *api) {
    const cuda_api_t *cu = d->cu;
    *out_graph = NULL;
    CUstream capture = NULL;
    CUgraph graph = NULL;
    CUresult r = cu->StreamCreateWithPriority(&capture, CU_STREAM_NON_BLOCKING, 0);
    ordo_status_t st = r == CUDA_SUCCESS ? ORDO_OK : ordo__cuda_error(r, api, "cuStreamCreate");
    if (st == ORDO_OK && (r = cu->GraphCreate(&graph, 0)) != CUDA_SUCCESS) {
        st = ordo__cuda_error(r, api, "cuGraphCreate");
    }
    if (st == ORDO_OK) {
        /* No drain of the context while the nodes are captured. */
        ordo__cuda_lowering_enter(d);
        st = build(d, capture, nodes, count, graph, api);
        ordo__cuda_lowering_exit(d);
    }
    if (capture) {
        (void)cu->StreamDestroy(capture);
    }
    if (st != ORDO_OK) {
        if (graph) {
            (void)cu->GraphDestroy(graph);
        }
        return st;
    }
    *out_graph = graph;
    return ORDO_OK;
}

/* Instantiates graph into a native graph launched on stream. */
static ordo_status_t instantiate(cuda_device_t *d, cuda_stream_t *stream, CUgraph graph,
                                 cuda_graph_t **out_graph, const char *api) {
    *out_graph = NULL;
    cuda_graph_t *g = ordo__alloc(sizeof *g, 0);
    if (!g) {
        return ordo__error(ORDO_ERR_OUT_OF_MEMORY, api, "cannot allocate a CUDA graph");
    }
    g->dev = d;
    g->stream = stream;
    g->exec = NULL;
    g->free_op = ordo__cuda_stream_reserve(stream, api);
    if (!g->free_op) {
        ordo__dealloc(g, sizeof *g, 0);
        return ORDO_ERR_OUT_OF_MEMORY;
    }
    CUresult r = d->cu->GraphInstantiateWithFlags(&g->exec, graph, 0);
    if (r != CUDA_SUCCESS) {
        ordo__cuda_stream_unreserve(g->free_op);
        ordo__dealloc(g, sizeof *g, 0);
        return ordo__cuda_error(r, api, "cuGraphInstantiateWithFlags");
    }
    *out_graph = g;
    return ORDO_OK;
}

ordo_status_t ordo__cuda_graph_make(ordo_stream_t *stream, const hal_graph_node_t *nodes,
                                    uint32_t count, void **out_native, const char *api) {
    *out_native = NULL;
    cuda_device_t *d = stream->device->impl;
    ORDO_RETURN_IF_ERROR(lowering_check(d, api));
    CUgraph graph;
    ORDO_RETURN_IF_ERROR(lower(d, nodes, count, &graph, api));
    cuda_graph_t *g;
    ordo_status_t st = instantiate(d, stream->impl, graph, &g, api);
    (void)d->cu->GraphDestroy(graph); /* the executable graph is its own */
    if (st == ORDO_OK) {
        *out_native = g;
    }
    return st;
}

typedef struct graph_update {
    cuda_graph_t *g;
    CUgraph graph;
    CUresult result;
} graph_update_t;

static ordo_status_t update_fn(void *ctx, struct CUstream_st *stream) {
    (void)stream;
    graph_update_t *u = ctx;
    if (ordo__cuda_enter(u->g->dev, "ordo_graph_refresh") != ORDO_OK) {
        return ORDO_OK; /* u->result stays a refusal: instantiated anew */
    }
    CUgraphExecUpdateResultInfo info;
    u->result = u->g->dev->cu->GraphExecUpdate(u->g->exec, u->graph, &info);
    return ORDO_OK;
}

ordo_status_t ordo__cuda_graph_remake(void *native, const hal_graph_node_t *nodes, uint32_t count,
                                      void **out_native, const char *api) {
    *out_native = NULL;
    cuda_graph_t *g = native;
    cuda_device_t *d = g->dev;
    ORDO_RETURN_IF_ERROR(lowering_check(d, api));
    graph_update_t u = {g, NULL, CUDA_ERROR_NOT_SUPPORTED};
    ORDO_RETURN_IF_ERROR(lower(d, nodes, count, &u.graph, api));
    /* In place only while no launch of the graph is held on its stream or
     * being issued: a held one must still run the graph as it was, and the
     * driver's graph objects take one call at a time. Launches already
     * issued run as they were (updates reach only later launches). */
    int ran = 0;
    if (d->cu->GraphExecUpdate) {
        (void)ordo__cuda_stream_run_if_idle(g->stream, update_fn, &u, &ran);
    }
    ordo_status_t st = ORDO_OK;
    if (ran && u.result == CUDA_SUCCESS) {
        atomic_fetch_add_explicit(&d->graphs_updated, 1, memory_order_release);
        *out_native = g;
    } else {
        /* Held launches, a topology the driver will not update (a launch
         * function enqueued other work), or no update on this driver:
         * instantiated anew; a refused update left the old one as it was. */
        cuda_graph_t *made;
        st = instantiate(d, g->stream, u.graph, &made, api);
        if (st == ORDO_OK) {
            atomic_fetch_add_explicit(&d->graphs_reinstantiated, 1, memory_order_release);
            *out_native = made;
        }
    }
    (void)d->cu->GraphDestroy(u.graph);
    return st;
}

static ordo_status_t launch_fn(void *ctx, struct CUstream_st *stream) {
    cuda_graph_t *g = ctx;
    CUresult r = g->dev->cu->GraphLaunch(g->exec, stream);
    return r == CUDA_SUCCESS ? ORDO_OK : ordo__cuda_error(r, "ordo_graph_replay", "cuGraphLaunch");
}

ordo_status_t ordo__cuda_graph_launch(void *native) {
    cuda_graph_t *g = native;
    return ordo__cuda_stream_enqueue(g->stream, launch_fn, g, "ordo_graph_replay");
}

static ordo_status_t free_fn(void *ctx, struct CUstream_st *stream) {
    (void)stream;
    cuda_graph_t *g = ctx;
    (void)g->dev->cu->GraphExecDestroy(g->exec); /* launches in flight finish first */
    ordo__dealloc(g, sizeof *g, 0);
    return ORDO_OK;
}

void ordo__cuda_graph_free(void *native, int launched) {
    cuda_graph_t *g = native;
    if (launched) {
        /* Behind the launches, held ones included, in the stream's order;
         * the reservation cannot run out of memory. */
        if (ordo__cuda_stream_enqueue_reserved(g->stream, g->free_op, free_fn, g,
                                               "ordo_graph_destroy") == ORDO_OK) {
            return;
        }
        /* Not queued, and nothing of this graph's is held on the lane (a
         * held launch would have started its thread; launches come from
         * the thread destroying it): it goes now, as if never launched. */
    } else {
        ordo__cuda_stream_unreserve(g->free_op);
    }
    if (ordo__cuda_enter(g->dev, "ordo_graph_destroy") == ORDO_OK) {
        (void)free_fn(g, NULL);
    } else {
        ordo__dealloc(g, sizeof *g, 0);
    }
}
