/* Internal: a directed graph of operations that refuses cycles as edges
 * are added, and finds every cycle of a graph built without that check.
 *
 * Nodes are small integers chosen by the caller (the coordinator uses its
 * op slots). An edge from -> to means "from comes before to" (to waits
 * for from).
 *
 * Cycle refusal is incremental (Pearce and Kelly, "A dynamic topological
 * sort algorithm for directed acyclic graphs", JEA 2006): the graph keeps a
 * topological order ord[]. An edge that agrees with it (ord[from] <
 * ord[to]) is inserted in O(1) after a duplicate check. Otherwise only the
 * affected region is searched: forward from `to` through nodes ordered
 * before `from`, and backward from `from` through nodes ordered after
 * `to`. Reaching `from` in the forward search means the edge would close a
 * cycle (the search path is the cycle); otherwise the two visited sets are
 * renumbered within the indices they already held, and the edge goes in.
 * A new node takes the next index, after every node present, so an edge
 * from an existing node to a new one never searches.
 *
 * Edges added unchecked (ordo__op_graph_add_edge with checked = 0) may break the
 * order; the graph then notes that its order is no longer valid and later
 * checked insertions search without bounds (still exact, just not
 * incremental). ordo__op_graph_find_cycles lists the strongly connected
 * components that hold a cycle (Tarjan), with one cycle through each.
 *
 * Not thread-safe: the owner serialises every call. */
#ifndef ORDO_COORD_OP_GRAPH_H
#define ORDO_COORD_OP_GRAPH_H

#include <stddef.h>
#include <stdint.h>

#include "ordo/status.h"

#define OP_GRAPH_NONE UINT32_MAX
/* The most nodes (and edges) a graph holds. */
#define OP_GRAPH_MAX ((uint32_t)1 << 30)

typedef struct op_graph_node {
    uint32_t ord;       /* topological index; OP_GRAPH_NONE: not in the graph */
    uint32_t first_out; /* edge lists; OP_GRAPH_NONE: empty */
    uint32_t first_in;
    uint32_t out_count;
    uint32_t in_count;
    uint32_t mark; /* search epoch */
} op_graph_node_t;

typedef struct op_graph_edge {
    uint32_t from;
    uint32_t to;
    uint32_t next_out; /* also links free edges */
    uint32_t prev_out;
    uint32_t next_in;
    uint32_t prev_in;
} op_graph_edge_t;

typedef struct op_graph {
    op_graph_node_t *nodes;
    uint32_t node_cap;
    uint32_t live;
    /* at[i]: the node with topological index i (OP_GRAPH_NONE: a hole left
     * by a removed node). Indices are handed out in increasing order and
     * compacted when they run out. */
    uint32_t *at;
    uint32_t at_cap;
    uint32_t at_used;
    op_graph_edge_t *edges;
    uint32_t edge_cap;
    uint32_t edge_free; /* head of the free edges */
    uint32_t edge_count;
    uint32_t epoch;
    int order_valid; /* 0 once an unchecked edge went against the order */
    /* Search scratch, sized with the nodes so a search never allocates:
     * the DFS stack (node, next edge) and the two visited sets, each entry
     * (ord << 32 | node) so that sorting them sorts by order. */
    uint32_t *stack_node;
    uint32_t *stack_edge;
    uint64_t *forward;
    uint64_t *backward;
    uint64_t *sort_tmp;
    uint32_t scratch_cap;
    uint64_t visited; /* nodes reached by searches, in total */
} op_graph_t;

/* A cycle path written by a refused insertion: nodes[0] -> nodes[1] ->
 * ... -> nodes[length - 1] are edges of the graph, and the refused edge
 * would have closed it back to nodes[0]. Only the first `capacity` nodes
 * are stored; length is the whole path. */
typedef struct op_graph_path {
    uint32_t *nodes;
    size_t capacity;
    size_t length;
} op_graph_path_t;

void ordo__op_graph_init(op_graph_t *graph);
void ordo__op_graph_fini(op_graph_t *graph);

/* Adds node (absent, < OP_GRAPH_MAX) after every node present. */
ordo_status_t ordo__op_graph_add_node(op_graph_t *graph, uint32_t node);

/* Makes room for `count` more nodes with ids below node_bound, so that
 * that many ordo__op_graph_add_node calls cannot fail for memory. */
ordo_status_t ordo__op_graph_reserve_nodes(op_graph_t *graph, uint32_t node_bound, uint32_t count);

/* Removes node and every edge at it. */
void ordo__op_graph_remove_node(op_graph_t *graph, uint32_t node);

static inline int op_graph_contains(const op_graph_t *graph, uint32_t node) {
    return node < graph->node_cap && graph->nodes[node].ord != OP_GRAPH_NONE;
}

/* Makes room for n more edges, so that that many insertions cannot fail
 * for memory. */
ordo_status_t ordo__op_graph_reserve_edges(op_graph_t *graph, uint32_t n);

int ordo__op_graph_has_edge(const op_graph_t *graph, uint32_t from, uint32_t to);

/* Adds from -> to (both present). A duplicate is a successful no-op.
 * checked: ORDO_ERR_DEADLOCK if the edge would close a cycle (a self-loop
 * included), the cycle written to *cycle (may be NULL) and the graph
 * unchanged. Unchecked: always inserted. ORDO_ERR_OUT_OF_MEMORY if no
 * edge was reserved and none can be allocated. */
ordo_status_t ordo__op_graph_add_edge(op_graph_t *graph, uint32_t from, uint32_t to, int checked,
                                      op_graph_path_t *cycle);

/* Removes every edge into node, calling fn(ctx, from) for each after its
 * removal (fn may remove `from` from the graph). */
void ordo__op_graph_remove_in_edges(op_graph_t *graph, uint32_t node, void (*fn)(void *, uint32_t),
                                    void *ctx);

/* Iteration over out-edges: for (e = op_graph_first_out(g, n); e !=
 * OP_GRAPH_NONE; e = op_graph_next_out(g, e)) use op_graph_edge_to(g, e).
 * The graph must not change during the loop. In-edges alike. */
static inline uint32_t op_graph_first_out(const op_graph_t *graph, uint32_t node) {
    return graph->nodes[node].first_out;
}
static inline uint32_t op_graph_next_out(const op_graph_t *graph, uint32_t edge) {
    return graph->edges[edge].next_out;
}
static inline uint32_t op_graph_first_in(const op_graph_t *graph, uint32_t node) {
    return graph->nodes[node].first_in;
}
static inline uint32_t op_graph_next_in(const op_graph_t *graph, uint32_t edge) {
    return graph->edges[edge].next_in;
}
static inline uint32_t op_graph_edge_to(const op_graph_t *graph, uint32_t edge) {
    return graph->edges[edge].to;
}
static inline uint32_t op_graph_edge_from(const op_graph_t *graph, uint32_t edge) {
    return graph->edges[edge].from;
}
static inline uint32_t op_graph_out_degree(const op_graph_t *graph, uint32_t node) {
    return graph->nodes[node].out_count;
}
static inline uint32_t op_graph_in_degree(const op_graph_t *graph, uint32_t node) {
    return graph->nodes[node].in_count;
}

/* Called once per strongly connected component that holds a cycle (more
 * than one node, or one node with an edge to itself): its members, and one
 * cycle through its first member, cycle[0] -> cycle[1] -> ... ->
 * cycle[cycle_length - 1] -> cycle[0], all edges of the graph. */
typedef void (*op_graph_cycle_fn)(void *ctx, const uint32_t *members, size_t member_count,
                                  const uint32_t *cycle, size_t cycle_length);

/* Every cycle-holding component, in O(nodes + edges) (Tarjan's algorithm,
 * iterative). ORDO_ERR_OUT_OF_MEMORY if its working arrays cannot be
 * allocated; fn is then not called. */
ordo_status_t ordo__op_graph_find_cycles(op_graph_t *graph, op_graph_cycle_fn fn, void *ctx);

/* For tests: non-zero when every edge agrees with the order (meaningful
 * while order_valid). */
int ordo__op_graph_order_consistent(const op_graph_t *graph);

#endif
